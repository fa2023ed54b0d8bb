#!/bin/bash
# test_abort_storm.sh: 5000 rooms, about a third of them aborted by decode at random
# points of their life (before any chunk, between chunks, after the last chunk).  Decode
# fills every released page with a canary and re-reads it after a settle period: no byte may
# change after release.  With a live prefill every abort is acknowledged after its drain: no
# fence, no stale generation, every successful room byte-exact, and each engine told how every
# room ended, exactly once (kvx-bench counts rooms never told and events that came twice).
. "$(dirname "$0")/lib.sh"

kvxd_start prefill
kvxd_start decode
wait_peer decode prefill 20
wait_peer prefill decode 20

out=$KVX_LOGDIR/storm.json
"$KVX_BENCH" --prefill /run/kvx/prefill.sock --decode /run/kvx/decode.sock --json \
	--rooms "${KVX_STORM_ROOMS:-5000}" --inflight 16 --pages 4 --bufs 2 --chunks 2 \
	--abort-ratio 0.5 --abort-delay-us 3000 --settle-ms 100 >"$out" 2>"$out.err" ||
	fail "kvx-bench failed: $(cat "$out" "$out.err")"
cat "$out"
j() { json_get "$out" "$1"; }
rooms=$(j rooms) aborted=$(j aborted) released=$(j released)
[ "$(j verified)" = ok ] && [ "$(j mismatched_bytes)" = 0 ] || fail "successful rooms corrupted"
[ "$(j canary_changed_bytes)" = 0 ] || fail "$(j canary_changed_bytes) bytes changed after release"
[ "$(j canary_checked_bytes)" -gt 0 ] || fail "no canary was checked"
[ "$(j bad_generation)" = 0 ] && [ "$(j protocol_errors)" = 0 ] || fail "abort protocol errors"
# the engine contract (kvx.h): every room's end told to each engine, exactly once
for k in untold_decode untold_prefill duplicate_events_decode duplicate_events_prefill; do
	[ "$(j $k)" = 0 ] || fail "$k = $(j $k)"
done
awk -v a="$aborted" -v r="$rooms" 'BEGIN { exit !(a >= 0.3 * r) }' || fail "only $aborted of $rooms aborted"
[ "$released" -ge "$aborted" ] || fail "released $released < aborted $aborted"
[ "$(j failed_decode)" -le "$released" ] || fail "unexpected decode failures"
[ "$(metric decode fences_total)" = 0 ] || fail "a live prefill was fenced"
[ "$(metric decode abort_acks_stale_total)" = 0 ] || fail "ACKs of a wrong generation"
vm_log "decode: aborts $(metric decode aborts_total) releases $(metric decode releases_total) acks $(metric decode abort_acks_received_total) (for rooms already gone: $(metric decode abort_acks_unknown_total)); prefill: acks sent $(metric prefill abort_acks_sent_total), chunks skipped $(metric prefill core_chunks_skipped_total), tombstones $(metric prefill tombstones_total)"
echo "storm: rooms=$rooms aborted=$aborted released=$released untold=$(j untold_decode)/$(j untold_prefill) duplicates=$(j duplicate_events_decode)/$(j duplicate_events_prefill) abort_release_p50_us=$(j abort_release_p50_us) abort_release_p99_us=$(j abort_release_p99_us) canary_checked_bytes=$(j canary_checked_bytes) canary_changed_bytes=$(j canary_changed_bytes)"
echo "PASS: abort storm"
