#!/bin/bash
# test_peer_kill.sh: the prefill kvxd is killed (SIGKILL) with rooms in flight.  Decode sees
# its source die, aborts the rooms, fences (the dead peer's QPs are moved to error and
# destroyed; no ABORT_ACK can come) and releases them within the release timeout plus a small
# margin; no released page changes afterwards.  When prefill comes back, rooms flow again.
. "$(dirname "$0")/lib.sh"

RELEASE_MS=$(sed -n 's/^release_ms *= *//p' "$KVX_SRC/configs/decode.ini")
: "${RELEASE_MS:=5000}"
kvxd_start prefill
kvxd_start decode
wait_peer decode prefill 20

out=$KVX_LOGDIR/kill.json
# Each room's second and last chunk is held back 300 ms, so that whenever prefill dies, rooms
# are cut off mid-transfer (without it, a kill could land while every open room had all its
# bytes: nothing to release, 1 run in 5 under ASan)
start_bg bench "$KVX_BENCH" --prefill /run/kvx/prefill.sock --decode /run/kvx/decode.sock \
	--json --duration 60 --inflight 8 --pages 32 --bufs 4 --chunks 2 --last-chunk-delay-ms 300 \
	--settle-ms 300 --survive-prefill-loss --timeout 40
wait_until 20 eval '[ "$(metric decode core_recv_imm_total)" -ge 20 ]' || fail "no rooms flow"
stop_bg prefill KILL
vm_log "prefill killed"
wait_bg bench 90 || fail "kvx-bench failed: $(cat "$KVX_LOGDIR/bench.log")"
cp "$KVX_LOGDIR/bench.log" "$out"
cat "$out"
j() { json_get "$out" "$1"; }
[ "$(j prefill_lost)" = true ] || fail "the bench did not see prefill go"
[ "$(j canary_changed_bytes)" = 0 ] || fail "$(j canary_changed_bytes) bytes changed after release"
[ "$(j verified)" = ok ] && [ "$(j mismatched_bytes)" = 0 ] || fail "successful rooms corrupted"
[ "$(j bad_generation)" = 0 ] || fail "bad generation"
# rooms 512 KiB each, 8 in flight: some must have been cut off mid-transfer
[ "$(j released)" -ge 1 ] || fail "no room was in flight at the kill (nothing released)"
lat_ms=$(awk -v u="$(j loss_to_last_release_us)" 'BEGIN { printf "%d", u / 1000 }')
[ "$lat_ms" -le $((RELEASE_MS + 1500)) ] ||
	fail "released ${lat_ms} ms after the loss (release timeout ${RELEASE_MS} ms)"
vm_log "decode: aborts $(metric decode aborts_total) releases $(metric decode releases_total) fences after the release timeout $(metric decode fences_total), on the lost session $(metric decode source_lost_fences_total)"

# prefill returns: fresh QPs, rooms flow
start_bg prefill2 "$KVXD" -c "$KVX_SRC/configs/prefill.ini"
wait_peer decode prefill 30
"$KVX_BENCH" --prefill /run/kvx/prefill.sock --decode /run/kvx/decode.sock --json --rooms 32 \
	--inflight 4 --pages 8 --bufs 2 >"$KVX_LOGDIR/after.json" || fail "rooms after the restart failed"
[ "$(json_get "$KVX_LOGDIR/after.json" verified)" = ok ] || fail "after the restart: not verified"
echo "peer kill: in_flight_at_loss=$(j rooms_in_flight_at_loss) loss_to_last_release_ms=$lat_ms released=$(j released) canary_checked_bytes=$(j canary_checked_bytes) canary_changed_bytes=$(j canary_changed_bytes)"
echo "PASS: peer kill"
