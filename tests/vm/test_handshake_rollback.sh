#!/bin/bash
# test_handshake_rollback.sh: a peer setup that fails half-way leaves nothing behind.
# prefill, decode and decode2 run; rooms flow between prefill and decode2 all along.  For every
# acquisition point, decode's setup with prefill is made to fail right there; then the QP, MR
# and CQ counts of both devices (rdma resource show) equal those before the attempt, and a
# retry succeeds and moves a room byte-exact.  Then a handshake that stalls mid-way (prefill
# stops answering after QPs exist on both sides) is rolled back by the handshake timeout with
# the same check.  The healthy pair's rooms never fail.
. "$(dirname "$0")/lib.sh"

POINTS="handshake.after_socket handshake.after_slot handshake.after_qpc_alloc
	handshake.after_qp_create handshake.after_qp_init handshake.after_recv_post
	handshake.after_rtr handshake.after_rts handshake.before_publish"

kvxd_start prefill
kvxd_start decode
kvxd_start decode2
wait_peer decode prefill 20
wait_peer decode2 prefill 20

start_bg healthy "$KVX_BENCH" --prefill /run/kvx/prefill.sock --decode /run/kvx/decode2.sock \
	--duration 600 --inflight 4 --pages 8 --bufs 2 --json
wait_until 20 eval '[ "$(metric decode2 core_recv_imm_total)" -ge 5 ]' || fail "no healthy rooms flow"

counts() { echo "rxe0: $(rdma_counts rxe0) rxe1: $(rdma_counts rxe1)"; }
# idle NAME PEER: NAME holds no session with PEER and nothing left to roll back
idle() { ctl "$1" peers | grep -q "^peer $2 .* state IDLE .* journal_pending 0"; }
fired() { ctl "$1" counters | awk -v p="point=\"$2\"" 'index($1, p) { print $2 }'; }
one_room() {
	"$KVX_BENCH" --prefill /run/kvx/prefill.sock --decode /run/kvx/decode.sock --rooms 1 \
		--inflight 1 --pages 8 --bufs 2 --json >"$KVX_LOGDIR/room.json" ||
		fail "$1: the room after the retry failed: $(cat "$KVX_LOGDIR/room.json")"
	[ "$(json_get "$KVX_LOGDIR/room.json" verified)" = ok ] || fail "$1: room not byte-exact"
}
pause_decode() {
	ctl decode peer prefill pause >/dev/null || fail "pause"
	wait_until 20 idle decode prefill || fail "decode did not let go of prefill: $(ctl decode peers)"
	wait_until 20 idle prefill decode || fail "prefill did not let go of decode: $(ctl prefill peers)"
}

one_room baseline
for p in $POINTS; do
	pause_decode
	before=$(counts)
	ctl decode fault "$p:0" >/dev/null || fail "cannot arm $p"
	ctl decode peer prefill try >/dev/null
	wait_until 20 eval '[ "$(fired decode "$p")" = 1 ]' || fail "$p never fired"
	wait_until 20 idle decode prefill || fail "$p: decode not rolled back: $(ctl decode peers)"
	wait_until 20 idle prefill decode || fail "$p: prefill not rolled back: $(ctl prefill peers)"
	after=$(counts)
	echo "$p: before [$before] after [$after]"
	[ "$before" = "$after" ] || fail "$p leaked: before [$before] after [$after]"
	ctl decode peers | grep -q "last_error: injected fault $p" ||
		fail "$p: the original error is not reported: $(ctl decode peers)"
	ctl decode peer prefill resume >/dev/null
	wait_peer decode prefill 20
	one_room "$p"
done

# a handshake that stalls mid-way: prefill answers HELLO (creating its QP) and then never
# answers the QP_INFO that follows (decode has its QP by then too)
pause_decode
before=$(counts)
ctl prefill fault handshake.stall:0 >/dev/null || fail "cannot arm the stall"
ctl decode peer prefill try >/dev/null
wait_until 20 eval '[ "$(fired prefill handshake.stall)" = 1 ]' || fail "the stall never happened"
t0=$(date +%s.%N)
wait_until 20 idle decode prefill || fail "stall: decode not rolled back: $(ctl decode peers)"
wait_until 20 idle prefill decode || fail "stall: prefill not rolled back: $(ctl prefill peers)"
t1=$(date +%s.%N)
after=$(counts)
echo "handshake.stall: before [$before] after [$after], rolled back $(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.1f", b - a }') s after the stall"
[ "$before" = "$after" ] || fail "stall leaked: before [$before] after [$after]"
ctl decode peers | grep -q "last_error: handshake timeout" || fail "stall: $(ctl decode peers)"
ctl decode peer prefill resume >/dev/null
wait_peer decode prefill 20
one_room stall

# the healthy pair never noticed
kill -INT "$(bg_pid healthy)"
wait_bg healthy 60 || fail "the healthy pair's bench failed: $(cat "$KVX_LOGDIR/healthy.log")"
cat "$KVX_LOGDIR/healthy.log"
h=$KVX_LOGDIR/healthy.log
[ "$(json_get "$h" failed_decode)" = 0 ] && [ "$(json_get "$h" failed_prefill)" = 0 ] &&
	[ "$(json_get "$h" verified)" = ok ] || fail "healthy rooms failed or were corrupted"
[ "$(json_get "$h" rooms)" -gt 0 ] || fail "no healthy rooms"
echo "PASS: handshake rollback"
