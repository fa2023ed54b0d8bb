#!/bin/bash
# test_transfer.sh: prefill kvxd on rxe0 and decode kvxd on rxe1 move 64 rooms of 16 pages x 4
# buffers, 8 rooms in flight, every destination byte verified by kvx-bench; then 64 more with
# scattered (non-contiguous) destination pages and 4 chunks per room; then 64 with scattered
# source pages and consecutive destination pages, which kvxd gathers into one WRITE per buffer
# (scatter-gather entries on real verbs: exactly 4 WRs per room); then 64 with core rings, and 64
# with kvx-bench's one call per room and chunk (--single) instead of its batches, and 64 of 4
# chunks each submitted before decode's open (--chunks-first).  Afterwards no room is left in
# either table and no WR is outstanding; then a decode open refused under --chunks-first ends
# kvx-bench's run with an error that says so.
. "$(dirname "$0")/lib.sh"

kvxd_start prefill
kvxd_start decode
wait_peer decode prefill 20
wait_peer prefill decode 20

bench() {
	local out=$1
	shift
	"$KVX_BENCH" --prefill /run/kvx/prefill.sock --decode /run/kvx/decode.sock --json "$@" \
		>"$KVX_LOGDIR/$out" 2>"$KVX_LOGDIR/$out.err" || {
		cat "$KVX_LOGDIR/$out" "$KVX_LOGDIR/$out.err"
		fail "kvx-bench $* failed"
	}
	cat "$KVX_LOGDIR/$out"
}

check() { # FILE ROOMS
	[ "$(json_get "$1" rooms)" = "$2" ] || fail "$1: expected $2 rooms, got $(json_get "$1" rooms)"
	[ "$(json_get "$1" verified)" = ok ] || fail "$1: verification failed"
	[ "$(json_get "$1" mismatched_bytes)" = 0 ] || fail "$1: mismatched bytes"
	[ "$(json_get "$1" failed_decode)" = 0 ] || fail "$1: failed rooms on decode"
	[ "$(json_get "$1" failed_prefill)" = 0 ] || fail "$1: failed rooms on prefill"
}

bench contiguous.json --rooms 64 --inflight 8 --pages 16 --bufs 4 --page-size 4096
check "$KVX_LOGDIR/contiguous.json" 64
bench scattered.json --rooms 64 --inflight 8 --pages 16 --bufs 4 --page-size 4096 --chunks 4 --scatter
check "$KVX_LOGDIR/scattered.json" 64
wr0=$(metric prefill core_wr_posted_total)
bench gathered.json --rooms 64 --inflight 8 --pages 16 --bufs 4 --page-size 4096 --scatter-src
check "$KVX_LOGDIR/gathered.json" 64
wrs=$(($(metric prefill core_wr_posted_total) - wr0))
[ "$wrs" = 256 ] || fail "64 gathered rooms x 4 buffers took $wrs WRs, not 256"
# with core rings (asked for explicitly here): the decode rooms' events come from decode's polling core
ev0=$(metric decode events_core_total)
KVX_CORE_RINGS=1 bench core_rings.json --rooms 64 --inflight 8 --pages 16 --bufs 4 --page-size 4096
check "$KVX_LOGDIR/core_rings.json" 64
ev=$(($(metric decode events_core_total) - ev0))
[ "$ev" -ge 64 ] || fail "64 rooms with core rings: only $ev events came through them"
[ "$(metric decode events_core_claimed_total)" = 0 ] || fail "a core ring was full"
# kvx-bench's other path: one call per room and per chunk (--single), instead of batches
bench single.json --rooms 64 --inflight 8 --pages 16 --bufs 4 --page-size 4096 --chunks 2 --single
check "$KVX_LOGDIR/single.json" 64
# --chunks-first: each room's 4 chunks reach prefill before decode's open is sent, so prefill's
# room waits for decode's metadata with its chunks queued
bench first.json --rooms 64 --inflight 8 --pages 16 --bufs 4 --page-size 4096 --chunks 4 --chunks-first
check "$KVX_LOGDIR/first.json" 64
[ "$(json_get "$KVX_LOGDIR/first.json" chunks_first)" = true ] || fail "first.json: not --chunks-first"

for n in prefill decode; do
	left=$(ctl $n rooms | awk '/^rooms / { print $2 }')
	[ "$left" = 0 ] || fail "$n still holds $left rooms: $(ctl $n rooms)"
done
[ "$(metric prefill core_wc_error_total)" = 0 ] || fail "error completions on prefill"
vm_log "prefill posted $(metric prefill core_wr_posted_total) WRs, decode saw $(metric decode core_recv_imm_total) immediates"

# a decode that refuses an open (max_rooms_per_engine = 2, 4 rooms opened in one batch) after
# --chunks-first sent the room's chunks: kvx-bench stops and says why (its prefill room waits
# for metadata that never comes), never counts it as a room that merely failed
stop_bg decode
mkdir -p /run/kvx/cap
sed '/^\[engine\]/a max_rooms_per_engine = 2' "$KVX_SRC/configs/decode.ini" >/run/kvx/cap/decode.ini
start_bg decode-cap "$KVXD" -c /run/kvx/cap/decode.ini
wait_for_socket /run/kvx/decode.sock 20 || fail "decode (capped) did not open its engine socket"
wait_peer decode prefill 20
rc=0
"$KVX_BENCH" --prefill /run/kvx/prefill.sock --decode /run/kvx/decode.sock --json --rooms 8 \
	--inflight 4 --pages 1 --bufs 1 --chunks-first >"$KVX_LOGDIR/refused.json" \
	2>"$KVX_LOGDIR/refused.err" || rc=$?
cat "$KVX_LOGDIR/refused.err"
[ "$rc" != 0 ] || fail "kvx-bench --chunks-first went on after decode refused an open"
grep -q "decode refused its open (Disk quota exceeded) after its chunks went to prefill (--chunks-first)" \
	"$KVX_LOGDIR/refused.err" || fail "kvx-bench did not say why it stopped"
echo "PASS: transfer"
