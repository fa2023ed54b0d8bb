#!/bin/bash
# test_wr_failure.sh: a room whose RDMA write fails (the prefill kvxd is told to corrupt the
# destination rkey of its next write chain) ends FAILED on both sides, pushed to decode at
# once; the errored QP is replaced by fresh QPs on both sides, and later rooms succeed.  Then
# the same for a WR the device refuses mid-list (wr.refused).
. "$(dirname "$0")/lib.sh"

kvxd_start prefill
kvxd_start decode
wait_peer decode prefill 20
wait_peer prefill decode 20

B=("$KVX_BENCH" --prefill /run/kvx/prefill.sock --decode /run/kvx/decode.sock --json
	--inflight 1 --pages 16 --bufs 4 --page-size 4096)

"${B[@]}" --rooms 8 >"$KVX_LOGDIR/before.json" || fail "rooms before the fault failed"
[ "$(json_get "$KVX_LOGDIR/before.json" verified)" = ok ] || fail "before: not verified"

ctl prefill fault wr.corrupt_rkey:0 || fail "cannot arm the fault"
"${B[@]}" --rooms 1 --allow-failures >"$KVX_LOGDIR/bad.json" 2>"$KVX_LOGDIR/bad.err" ||
	fail "bench with the bad room failed: $(cat "$KVX_LOGDIR/bad.json" "$KVX_LOGDIR/bad.err")"
cat "$KVX_LOGDIR/bad.json"
[ "$(json_get "$KVX_LOGDIR/bad.json" failed_decode)" = 1 ] || fail "decode did not see the room fail"
[ "$(json_get "$KVX_LOGDIR/bad.json" failed_prefill)" = 1 ] || fail "prefill did not see the room fail"
[ "$(metric prefill fault_wr_corrupt_rkey_fired_total)" = 1 ] || fail "the fault did not fire"
[ "$(metric prefill core_wc_error_total)" -ge 1 ] || fail "no error completion on prefill"
[ "$(metric prefill status_pushed_total)" -ge 1 ] || fail "no ROOM_STATUS pushed"
[ "$(metric decode status_received_total)" -ge 1 ] || fail "decode got no ROOM_STATUS"
grep -q "remote access error\|RDMA write failed" "$KVX_LOGDIR/bad.json" "$KVX_LOGDIR/bad.err" \
	"$KVX_LOGDIR/prefill.log" || fail "the WC error is not reported with its status text"

# recovers NAME BEFORE: the connection is replaced (fresh QPs, new epoch: more replacements
# than BEFORE), then 16 rooms flow again, verified.  Either side may notice its errored QP
# first (decode's responder QP errs too on rxe).
replacements() { echo $(($(metric prefill qp_replaced_total) + $(metric decode qp_replaced_total))); }
recovers() {
	local before=$2
	replaced() { [ "$(replacements)" -gt "$before" ]; }
	wait_until 20 replaced || fail "$1: QP not replaced"
	wait_peer decode prefill 20
	wait_peer prefill decode 20
	"${B[@]}" --rooms 16 --inflight 4 >"$KVX_LOGDIR/after-$1.json" || fail "rooms after $1 failed"
	[ "$(json_get "$KVX_LOGDIR/after-$1.json" verified)" = ok ] || fail "after $1: not verified"
	[ "$(json_get "$KVX_LOGDIR/after-$1.json" rooms)" = 16 ] || fail "after $1: not all rooms done"
}
recovers corrupt_rkey 0
ctl prefill peers | grep -q "epoch [2-9]" || fail "no new session: $(ctl prefill peers)"
ctl prefill peers

# The device refuses a chunk's last WR after taking the three before it (unsignalled).  The
# room fails on both sides; the QP, still in RTS with its receives posted, goes to ERR
# (QP_STUCK) to quiesce and be replaced (before, it never was), and later rooms succeed.  The
# marker kvxd posts after the three retires them; on rxe they mostly flush in ERR before their
# ACKs come, so the marker's own need shows on the fake device (tests/unit/test_pcore.c).
fired() { ctl prefill counters | grep -F kvx_fault_fired_total | grep -F '"wr.refused"' | awk '{ print $2 }'; }
replaced_before=$(replacements)
ctl prefill fault wr.refused:0 || fail "cannot arm wr.refused"
"${B[@]}" --rooms 1 --allow-failures >"$KVX_LOGDIR/refused.json" 2>"$KVX_LOGDIR/refused.err" ||
	fail "bench with the refused WR failed: $(cat "$KVX_LOGDIR/refused.json" "$KVX_LOGDIR/refused.err")"
cat "$KVX_LOGDIR/refused.json"
[ "$(fired)" = 1 ] || fail "wr.refused did not fire: $(fired)"
[ "$(json_get "$KVX_LOGDIR/refused.json" failed_prefill)" = 1 ] || fail "prefill did not see the room fail"
[ "$(json_get "$KVX_LOGDIR/refused.json" failed_decode)" = 1 ] || fail "decode did not see the room fail"
grep -q "post_send failed" "$KVX_LOGDIR/refused.json" "$KVX_LOGDIR/refused.err" \
	"$KVX_LOGDIR/prefill.log" || fail "the refused post is not reported"
recovers refused "$replaced_before"
echo "PASS: wr failure"
