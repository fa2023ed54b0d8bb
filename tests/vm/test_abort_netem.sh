#!/bin/bash
# test_abort_netem.sh: aborts while every RoCE packet from prefill to decode is delayed
# (netem on kvx-veth0).  A source acknowledges an abort only once nothing it posted can still
# write, so each release comes after the delayed writes have landed: the canaries written into
# released pages never change.
. "$(dirname "$0")/lib.sh"

DELAY=${KVX_NETEM_DELAY:-30ms}
kvxd_start prefill
kvxd_start decode
wait_peer decode prefill 20
wait_peer prefill decode 20
# after the handshake (netem also delays ARP); only RoCE data uses the veth (TCP goes over lo)
tc qdisc add dev kvx-veth0 root netem delay "$DELAY" || fail "cannot add netem"
vm_log "netem: $(tc qdisc show dev kvx-veth0)"

out=$KVX_LOGDIR/netem.json
"$KVX_BENCH" --prefill /run/kvx/prefill.sock --decode /run/kvx/decode.sock --json \
	--rooms 400 --inflight 16 --pages 4 --bufs 2 --chunks 2 \
	--abort-ratio 0.5 --abort-delay-us 20000 --settle-ms 150 >"$out" 2>"$out.err" ||
	fail "kvx-bench failed: $(cat "$out" "$out.err")"
cat "$out"
j() { json_get "$out" "$1"; }
[ "$(j verified)" = ok ] && [ "$(j mismatched_bytes)" = 0 ] || fail "successful rooms corrupted"
[ "$(j canary_changed_bytes)" = 0 ] || fail "$(j canary_changed_bytes) bytes changed after release"
[ "$(j canary_checked_bytes)" -gt 0 ] || fail "no canary was checked"
[ "$(j bad_generation)" = 0 ] && [ "$(j protocol_errors)" = 0 ] || fail "abort protocol errors"
[ "$(j aborted)" -gt 0 ] && [ "$(j released)" -ge "$(j aborted)" ] || fail "aborts not released"
[ "$(metric decode fences_total)" = 0 ] || fail "a live prefill was fenced"
echo "netem $DELAY: rooms=$(j rooms) aborted=$(j aborted) released=$(j released) abort_release_p50_us=$(j abort_release_p50_us) abort_release_p99_us=$(j abort_release_p99_us) canary_changed_bytes=$(j canary_changed_bytes)"
echo "PASS: aborts under netem delay"
