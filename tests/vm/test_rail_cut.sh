#!/bin/bash
# kvx-vm: rails 2
# test_rail_cut.sh: one rail's link is cut mid-storm (every packet on rail 1's veth pair dropped).
# Its QPs' retries run out, the rooms with WRITEs on it fail on both sides and are released only
# once nothing can write (no canary byte changes); the session stays and the rooms that follow
# go over rail 0 alone; kvxd tries rail 1 again after a backoff (a trial while it is still cut
# fails a few rooms and doubles the backoff); once the link is back, rail 1 carries rooms again.
# RAIL_CUT=unresolved (test_rail_cut_unresolved.sh): the cut also outlasts the first retry, with
# rail 1's neighbour entries flushed, so the retry's handshake cannot resolve the peer on rail 1;
# a node that cannot connect a rail fences it on its side, and whichever node's retry comes first
# brings rail 1 back (CI's counters at stop 20 fit this path: prefill fenced twice, retried once).
. "$(dirname "$0")/lib.sh"

out=$KVX_LOGDIR/cut.json
# The storm runs until the checks below are done (SIGINT): a slow guest may take up to three
# retries of rail 1, 5, 10 and 20 s apart, before it carries rooms again.
rail_storm /run/kvx/rail_cut 300
imm() { metric decode core_recv_imm_total; }
b1() { rail_metric prefill rail_bytes_posted_total 1; }
# the rail and session lines of both nodes' logs, for a failure's message
rail_log() { grep -hE 'rail_down|ready \(epoch|kvxd_peer_reset' "$KVX_LOGDIR/prefill.log" "$KVX_LOGDIR/decode.log"; }
# fenced_after_reset NODE LINES0: NODE's log, after its first LINES0 lines, fences rail 1 after a
# session reset
fenced_after_reset() {
	tail -n +$(($2 + 1)) "$KVX_LOGDIR/$1.log" |
		awk '/kvxd_peer_reset: peer / { r = 1 } r && /rail_down: .*rail 1 / { f = 1 } END { exit !f }'
}
# retried_after_fence NODE LINES0: in NODE's log after its first LINES0 lines, its last fence of
# rail 1 (if any) is followed by a session reset that tries it again and a session ready
retried_after_fence() {
	tail -n +$(($2 + 1)) "$KVX_LOGDIR/$1.log" | awk '
		/rail_down: .*rail 1 / { f = 1; r = 0; ok = 0 }
		f && /kvxd_peer_reset: .*(try its failed rail again|peer said BYE \(replacing)/ { r = 1 }
		f && r && /ready \(epoch/ { ok = 1 }
		END { exit !(ok || !f) }'
}
# the logs' lines up to the cut: a session set up again before it (a first handshake that timed
# out on a slow guest) is not the cut's doing
lines0_prefill=$(wc -l <"$KVX_LOGDIR/prefill.log")
lines0_decode=$(wc -l <"$KVX_LOGDIR/decode.log")
tc qdisc add dev kvx-veth2 root netem loss 100% && tc qdisc add dev kvx-veth3 root netem loss 100% ||
	fail "cannot cut rail 1"
t_cut=${EPOCHREALTIME/./}
vm_log "rail 1 cut"
wait_until 10 eval '[ "$(metric prefill rails_fenced_total)" -gt "$RAIL_FENCED0" ]' ||
	fail "rail 1 was never fenced: $(ctl prefill peers)"
fenced_ms=$(((${EPOCHREALTIME/./} - t_cut) / 1000))
# Rooms keep flowing on rail 0 alone.  The window is short so that the link is back before the
# first retry of rail 1 (5 s after the fence); should a slow guest miss that, the retry fails and
# the next comes 10 s later, which the wait below covers.
i0=$(imm)
sleep 2
i1=$(imm)
vm_log "while rail 1 is cut: $((i1 - i0)) rooms in 2 s"
[ "$((i1 - i0))" -ge 10 ] || fail "rooms stopped while only rail 1 was cut: $((i1 - i0)) in 2 s"
if [ "${RAIL_CUT:-}" = unresolved ]; then
	ip neigh flush dev kvx-veth2 && ip neigh flush dev kvx-veth3 || fail "cannot flush rail 1's neighbours"
	# The retry failed once a node fenced rail 1 in the session that replaced the cut one: a
	# rail_down line after that node's first session reset since the cut.  (Counting fences
	# is not enough: the cut session's fences on both nodes already make two, and in a red CI
	# run a retry whose handshake outlasted the cut came up on both rails, never retried.)
	wait_until 30 eval 'fenced_after_reset prefill $lines0_prefill || fenced_after_reset decode $lines0_decode' ||
		fail "the first retry of rail 1 did not fail while it was cut: $(rail_log)"
	vm_log "the first retry of rail 1 failed while it was cut"
fi
b1_up=$(b1)
tc qdisc del dev kvx-veth2 root && tc qdisc del dev kvx-veth3 root
t_up=${EPOCHREALTIME/./}
vm_log "rail 1 back"
# A retry of rail 1 while it was still cut posts at most the rooms in flight (8 x 2 WRITEs of
# 64 KiB) before it fails; 8 MiB more on rail 1, and a retry after each node's last fence of it
# (the log's order: a retry counted before the link came back may be the one that brings it
# back), mean it carries rooms again.  The next retry may be 20 s away (a slow guest's retries
# can fail twice before the link comes back).
wait_until 50 eval '[ "$(($(b1) - b1_up))" -ge 8388608 ] && retried_after_fence prefill $lines0_prefill &&
	retried_after_fence decode $lines0_decode' ||
	fail "rail 1 carries nothing after the link came back: $(ctl prefill counters | grep -E 'rail|fenced'); $(rail_log)"
back_ms=$(((${EPOCHREALTIME/./} - t_up) / 1000))
# The session stayed: its only replacements are the planned ones that try rail 1 again, by
# either node (the other logs the BYE that says so), never a QP error's.
peer_ready prefill decode || wait_peer prefill decode 10
resets=$({
	tail -n +$((lines0_prefill + 1)) "$KVX_LOGDIR/prefill.log"
	tail -n +$((lines0_decode + 1)) "$KVX_LOGDIR/decode.log"
} | grep 'kvxd_peer_reset: peer ')
grep -q 'try its failed rail again' <<<"$resets" ||
	fail "rail 1 came back without a session replacement: $(rail_log)"
# (a dial that came while the other node still closed the last session is answered BYE BUSY and
# made again shortly: part of the same replacement)
grep -vE 'try its failed rail again|peer said BYE \(replacing its QPs\)|the peer is busy' <<<"$resets" &&
	fail "the session was replaced for another reason than the rail retry, after the cut"
for n in prefill decode; do
	[ "$(metric $n qp_replaced_total)" = 0 ] || fail "$n replaced its QPs after an error: $(rail_log)"
done
running "$(bg_pid storm)" || fail "the storm ended before the checks: $(tail -n 5 "$KVX_LOGDIR/storm.log")"
kill -INT "$(bg_pid storm)"
storm_end storm "$out"
j() { json_get "$out" "$1"; }
[ "$(j failed_decode)" -ge 1 ] || fail "no room failed: was rail 1 ever cut?"
[ "$(j untold_decode)" = 0 ] && [ "$(j untold_prefill)" = 0 ] || fail "a room's end was never told"
echo "rail cut: rooms=$(j rooms) failed_decode=$(j failed_decode) released=$(j released) canary_checked_bytes=$(j canary_checked_bytes) canary_changed_bytes=$(j canary_changed_bytes); fenced ${fenced_ms} ms after the cut; $((i1 - i0)) rooms in 2 s on rail 0 alone; rail 1 carried rooms again ${back_ms} ms after the link came back; rails_fenced=$(metric prefill rails_fenced_total) rails_fenced_decode=$(metric decode rails_fenced_total) rail_retries=$(metric prefill rail_retries_total) rail_retries_decode=$(metric decode rail_retries_total) hold_asks=$(metric prefill rail_hold_asks_total)+$(metric decode rail_hold_asks_total) hold_timeouts=$(metric prefill rail_hold_timeouts_total)+$(metric decode rail_hold_timeouts_total)"
echo "PASS: rail cut"
