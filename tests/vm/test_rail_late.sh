#!/bin/bash
# kvx-vm: rails 2
# test_rail_late.sh: WRITEs that reach decode after prefill's QP failed.  Rail 1's link is cut
# mid-storm and prefill's neighbour entry for decode's rail-1 address is flushed: the kernel
# queues what prefill's rail-1 QPs send (retries included) until the address resolves again.
# Their retries run out, the rooms with WRITEs on rail 1 fail and are acknowledged, and decode
# releases their pages; then the link comes back, the address resolves and the queued packets go
# out.  Decode's end of those QPs must be in the error state by then (prefill's BYE FENCE comes
# ahead of its acknowledgements), or the old WRITEs land in released pages: kvx-bench's canary
# (4 s of quarantine) sees any byte that changes.  Measured before the fence: 9,941 bytes of a
# released room's pages changed.
. "$(dirname "$0")/lib.sh"

out=$KVX_LOGDIR/late.json
rail_storm /run/kvx/rail_late 4000
neigh() { ip neigh show dev kvx-veth2 to 10.78.0.2 | tr '\n' ' '; }
tc qdisc add dev kvx-veth2 root netem loss 100% && tc qdisc add dev kvx-veth3 root netem loss 100% ||
	fail "cannot cut rail 1"
ip neigh flush dev kvx-veth2 || fail "cannot flush prefill's rail-1 neighbour"
vm_log "rail 1 cut, prefill's rail-1 neighbour flushed"
wait_until 10 eval '[ "$(metric prefill rails_fenced_total)" -gt "$RAIL_FENCED0" ]' ||
	fail "rail 1 was never fenced: $(ctl prefill peers)"
n=$(neigh)
vm_log "rail 1 fenced; prefill's neighbour: $n"
# The premise: what prefill's rail-1 QPs sent is queued in the kernel, not dropped by netem.  It
# held in every ASan run; in one run of the plain build (CI rehearsal, stop 48) the entry was
# absent at the fence, for a reason not understood yet.  Such a run is reported and still
# checks that no released page changed, as test_rail_cut does.
if grep -qE 'INCOMPLETE|FAILED' <<<"$n"; then
	queued=yes
else
	queued="no (the neighbour entry was '$n' at the fence: this run shows no late WRITE)"
fi
sleep 0.3
tc qdisc del dev kvx-veth2 root && tc qdisc del dev kvx-veth3 root
vm_log "rail 1 back"
wait_until 10 eval 'ip neigh show dev kvx-veth2 to 10.78.0.2 | grep -qE "REACHABLE|STALE|DELAY"' ||
	[ "$queued" != yes ] || fail "prefill's rail-1 neighbour never resolved: $(neigh)"
vm_log "prefill's neighbour: $(neigh)"
# the failed rooms' canaries are checked 4 s after their release
sleep 6
running "$(bg_pid storm)" || fail "the storm ended early: $(tail -n 5 "$KVX_LOGDIR/storm.log")"
kill -INT "$(bg_pid storm)"
storm_end storm "$out"
j() { json_get "$out" "$1"; }
[ "$(j failed_decode)" -ge 1 ] || fail "no room failed: was rail 1 ever cut?"
[ "$(j released)" -ge 1 ] && [ "$(j canary_checked_bytes)" -gt 0 ] || fail "no released page was watched"
asked=$(metric prefill lane_fences_asked_total)
made=$(metric decode lane_fences_made_total)
[ "$asked" -ge 1 ] && [ "$made" = "$asked" ] ||
	fail "prefill asked decode to fence $asked QP ends, decode fenced $made"
grep -q 'moved to the error state, as it asked' "$KVX_LOGDIR/decode.log" || fail "decode never logged a fence"
echo "rail late: rooms=$(j rooms) failed_decode=$(j failed_decode) released=$(j released) canary_checked_bytes=$(j canary_checked_bytes) canary_changed_bytes=$(j canary_changed_bytes) lane_fences=$asked queued_in_the_kernel=$queued"
echo "PASS: rail late"
