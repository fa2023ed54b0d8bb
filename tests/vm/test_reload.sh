#!/bin/bash
# test_reload.sh: SIGHUP reloads a node's [peer.*] sections while a storm runs.  prefill starts
# without decode2 (decode2 dials it and is refused); a broken file is refused with its
# FILE:LINE error while prefill keeps running; the fixed file adds decode2, which connects and
# takes rooms; removing it again ends its session and frees its QPs (rdma resource show).  The
# storm between prefill and decode runs through all of it without a failed room, and their
# session is never reset (same epoch, no reset).
. "$(dirname "$0")/lib.sh"

dir=/run/kvx/reload
mkdir -p "$dir"
cfg=$dir/prefill.ini
# prefill.ini without [peer.decode2]; its CQs sized for the peers a reload may add
write_cfg() { # write_cfg with|without|broken
	awk -v mode="$1" '
		/^\[peer\.decode2\]/ { skip = 1; next }
		/^\[/ { skip = 0 }
		skip { next }
		{ print }
		/^\[rdma\]/ { print "cq_depth = 16384" }
		END {
			if (mode == "with") print "\n[peer.decode2]\naddress = 10.77.0.2:7472"
			if (mode == "broken") print "\n[peer.decode2]\naddress = 10.77.0.2"
		}' "$KVX_SRC/configs/prefill.ini" >"$cfg.new" && mv "$cfg.new" "$cfg"
}
write_cfg without
start_bg prefill "$KVXD" -c "$cfg"
wait_for_socket /run/kvx/prefill.sock 20 || fail "prefill did not open its engine socket"
kvxd_start decode
kvxd_start decode2
wait_peer decode prefill 20
wait_peer prefill decode 20
ctl prefill peers | grep -q "^peer decode2 " && fail "decode2 is a peer before the reload"
epoch() { ctl "$1" peers | sed -n "s/^peer $2 .* epoch \([0-9]*\) .* resets \([0-9]*\) .*/\1 \2/p"; }
before=$(epoch prefill decode)
qps() { rdma_counts rxe0 | cut -d" " -f1; } # prefill's QPs (pools' MRs are the engines')
qps_before=$(qps)

out=$KVX_LOGDIR/storm.json
start_bg storm "$KVX_BENCH" --prefill /run/kvx/prefill.sock --decode /run/kvx/decode.sock \
	--json --duration 25 --inflight 8 --pages 8 --bufs 2 --timeout 60
wait_until 20 eval '[ "$(metric decode core_recv_imm_total)" -ge 20 ]' || fail "no rooms flow"

# a broken file: refused with its line, prefill keeps running, nothing changes
write_cfg broken
line=$(grep -n '^address = 10.77.0.2$' "$cfg" | cut -d: -f1)
kill -HUP "$(bg_pid prefill)"
wait_until 10 grep -q "reload refused, nothing changed: $cfg:$line: " "$KVX_LOGDIR/prefill.log" ||
	fail "the broken file was not refused with $cfg:$line"
running "$(bg_pid prefill)" || fail "prefill stopped on a broken file"
[ "$(metric prefill reloads_refused_total)" = 1 ] || fail "reloads_refused_total is not 1"

# the fixed file adds decode2
write_cfg with
t0=${EPOCHREALTIME/./}
kill -HUP "$(bg_pid prefill)"
wait_peer prefill decode2 30
wait_peer decode2 prefill 30
found_ms=$(((${EPOCHREALTIME/./} - t0) / 1000))
vm_log "decode2 READY ${found_ms} ms after SIGHUP"
"$KVX_BENCH" --prefill /run/kvx/prefill.sock --decode /run/kvx/decode2.sock --json --rooms 32 \
	--inflight 4 --pages 8 --bufs 2 >"$KVX_LOGDIR/added.json" || fail "rooms to the added peer failed"
[ "$(json_get "$KVX_LOGDIR/added.json" verified)" = ok ] || fail "rooms to the added peer: not verified"
qps_added=$(qps)

# removed again: its session ends, its QPs go
write_cfg without
kill -HUP "$(bg_pid prefill)"
wait_until 20 eval '! ctl prefill peers | grep -q "^peer decode2 "' ||
	fail "decode2 still listed: $(ctl prefill peers)"
wait_until 20 eval '[ "$(qps)" = "$qps_before" ]' ||
	fail "QPs left on rxe0: $(qps), before the add: $qps_before"
[ "$(metric prefill peers_added_total)" = 1 ] && [ "$(metric prefill peers_removed_total)" = 1 ] ||
	fail "peers added/removed: $(metric prefill peers_added_total)/$(metric prefill peers_removed_total)"

wait_bg storm 90 || fail "the storm failed: $(cat "$KVX_LOGDIR/storm.log")"
cp "$KVX_LOGDIR/storm.log" "$out"
j() { json_get "$out" "$1"; }
[ "$(j verified)" = ok ] && [ "$(j mismatched_bytes)" = 0 ] || fail "storm rooms corrupted"
[ "$(j failed_decode)" = 0 ] && [ "$(j failed_prefill)" = 0 ] && [ "$(j timed_out)" = 0 ] ||
	fail "storm rooms failed: decode $(j failed_decode) prefill $(j failed_prefill) timed out $(j timed_out)"
after=$(epoch prefill decode)
[ "$before" = "$after" ] || fail "prefill's session with decode changed: epoch/resets $before -> $after"
echo "reload: storm rooms=$(j rooms) failed=0 while a broken file was refused, decode2 added (READY after ${found_ms} ms, 32 rooms verified) and removed; rxe0 ${qps_before} -> ${qps_added} -> $(qps); prefill-decode epoch/resets $before -> $after"
echo "PASS: reload"
