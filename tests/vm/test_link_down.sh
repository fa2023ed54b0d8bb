#!/bin/bash
# test_link_down.sh: the link goes down mid-transfer.  RC retries run out (retry_cnt 6, ACK
# timeout exponent 14: about half a second), the writes fail with RETRY_EXC_ERR, the rooms end
# FAILED on both sides (failure pushed over the control channel, which is not on the veth),
# decode aborts them and releases only after the errored QP has flushed (an ACK) or was fenced;
# no released page changes; after the link is back, fresh QPs carry new rooms.
. "$(dirname "$0")/lib.sh"

kvxd_start prefill
kvxd_start decode
wait_peer decode prefill 20
wait_peer prefill decode 20

out=$KVX_LOGDIR/down.json
start_bg bench "$KVX_BENCH" --prefill /run/kvx/prefill.sock --decode /run/kvx/decode.sock \
	--json --duration 60 --inflight 8 --pages 8 --bufs 2 --settle-ms 300 --allow-failures \
	--timeout 40 --prefill-wait-ms "$KVX_PREFILL_WAIT_MS"
wait_until 20 eval '[ "$(metric decode core_recv_imm_total)" -ge 20 ]' || fail "no rooms flow"
# "down": every packet on the veth pair is dropped (ip link down does not stop rxe here; the
# neighbour entries stay, so dropping in both directions is the cut)
tc qdisc add dev kvx-veth0 root netem loss 100% && tc qdisc add dev kvx-veth1 root netem loss 100% ||
	fail "cannot cut the link"
vm_log "link down"
sleep 3
tc qdisc del dev kvx-veth0 root && tc qdisc del dev kvx-veth1 root
vm_log "link up"
# the bench runs until here however long it took to start (SIGINT: it reports and ends)
running "$(bg_pid bench)" || fail "the bench ended before the link came back: $(tail -n 5 "$KVX_LOGDIR/bench.log")"
sleep 1
kill -INT "$(bg_pid bench)"
storm_end bench "$out"
j() { json_get "$out" "$1"; }
[ "$(j failed_decode)" -ge 1 ] && [ "$(j failed_prefill)" -ge 1 ] || fail "no room failed on both sides"
[ "$(metric prefill core_wc_error_total)" -ge 1 ] || fail "no error completion (retry exhaustion)"
grep -q "transport retry counter exceeded\|RETRY_EXC\|retry" "$KVX_LOGDIR/bench.log" "$KVX_LOGDIR/prefill.log" ||
	vm_log "note: the retry-exceeded text was not logged"
# recovery: new rooms succeed on fresh QPs
wait_peer decode prefill 30
"$KVX_BENCH" --prefill /run/kvx/prefill.sock --decode /run/kvx/decode.sock --json --rooms 32 \
	--inflight 4 --pages 8 --bufs 2 >"$KVX_LOGDIR/after.json" || fail "rooms after recovery failed"
[ "$(json_get "$KVX_LOGDIR/after.json" verified)" = ok ] || fail "after recovery: not verified"
echo "link down: rooms=$(j rooms) failed_decode=$(j failed_decode) failed_prefill=$(j failed_prefill) released=$(j released) canary_checked_bytes=$(j canary_checked_bytes) canary_changed_bytes=$(j canary_changed_bytes) fences=$(metric decode fences_total) qp_replaced=$(metric prefill qp_replaced_total)"
echo "PASS: link down"
