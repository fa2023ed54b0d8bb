#!/bin/bash
# test_engine_loss.sh: an abort storm whose prefill engine dies mid-run (kvx-bench closes its
# prefill connection without a word, as a killed process does; each room's last chunk comes
# 300 ms after the others, so rooms are always waiting for input).  Decode learns by a failure
# push, not a timeout: every room in flight is RELEASED on decode within 1 s of the loss (p99
# reported), no canary byte changes, no waiting timeout fires, and until the loss every engine
# is told how every room ended, exactly once.
. "$(dirname "$0")/lib.sh"

kvxd_start prefill
kvxd_start decode
wait_peer decode prefill 20
wait_peer prefill decode 20

out=$KVX_LOGDIR/loss.json
"$KVX_BENCH" --prefill /run/kvx/prefill.sock --decode /run/kvx/decode.sock --json \
	--duration 30 --inflight 16 --pages 4 --bufs 2 --chunks 4 --abort-ratio 0.3 \
	--abort-delay-us 3000 --settle-ms 100 --last-chunk-delay-ms 300 \
	--drop-prefill-engine-ms 6000 \
	>"$out" 2>"$out.err" || fail "kvx-bench failed: $(cat "$out" "$out.err")"
cat "$out"
j() { json_get "$out" "$1"; }
[ "$(j prefill_lost)" = true ] || fail "the prefill engine was not dropped"
[ "$(j rooms_in_flight_at_loss)" -gt 0 ] || fail "no room was in flight at the loss"
[ "$(j verified)" = ok ] || fail "successful rooms corrupted"
[ "$(j canary_changed_bytes)" = 0 ] || fail "$(j canary_changed_bytes) bytes changed after release"
[ "$(j timed_out)" = 0 ] || fail "rooms timed out"
p99=$(j loss_release_p99_us)
awk -v p="$p99" 'BEGIN { exit !(p > 0 && p < 1000000) }' ||
	fail "rooms in flight at the loss released after p99 $p99 us (bound 1 s)"
[ "$(metric decode waiting_timeouts_total)" = 0 ] || fail "decode waited for a timeout"
[ "$(metric prefill engine_lost_rooms_total)" -gt 0 ] || fail "prefill did not fail the lost engine's rooms"
for k in untold_decode untold_prefill duplicate_events_decode duplicate_events_prefill; do
	[ "$(j $k)" = 0 ] || fail "$k = $(j $k)"
done
echo "engine_loss: rooms=$(j rooms) in_flight_at_loss=$(j rooms_in_flight_at_loss) loss_release_p50_us=$(j loss_release_p50_us) loss_release_p99_us=$p99 canary_changed_bytes=$(j canary_changed_bytes)"
echo "PASS: engine loss"
