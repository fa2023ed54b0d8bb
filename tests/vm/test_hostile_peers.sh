#!/bin/bash
# test_hostile_peers.sh: a healthy pair (prefill, decode) runs an abort storm with canaries
# while a scripted hostile client (kvx-hostile, raw TCP) attacks prefill's control port: a wrong
# secret, no secret, the right name from a wrong address, a replayed handshake, 64 idle
# connections, malformed frames of every type.  Every healthy room verifies, no canary byte
# changes, no healthy session is torn down, a restarted healthy peer (decode2) reconnects within
# its handshake timeout while the idle connections are held, and prefill's counters show each
# refusal.
. "$(dirname "$0")/lib.sh"

HOSTILE="$KVX_BUILD/kvx-hostile"
hostile() { "$HOSTILE" --to 10.77.0.1:7470 "$@"; }
# the decode session as prefill sees it: "epoch E resets R"
session() { ctl prefill peers | sed -n "s/^peer $1 .* epoch \([0-9]*\) .* resets \([0-9]*\) .*/epoch \1 resets \2/p"; }

kvxd_start prefill
kvxd_start decode
kvxd_start decode2
wait_peer decode prefill 20
wait_peer prefill decode 20
wait_peer prefill decode2 20
before=$(session decode)
vm_log "prefill's session with decode: $before"

out=$KVX_LOGDIR/storm.json
start_bg storm "$KVX_BENCH" --prefill /run/kvx/prefill.sock --decode /run/kvx/decode.sock \
	--json --rooms "${KVX_HOSTILE_ROOMS:-1500}" --inflight 16 --pages 4 --bufs 2 --chunks 2 \
	--abort-ratio 0.4 --abort-delay-us 3000 --settle-ms 100
sleep 1

hostile --from 10.77.0.2 --name decode wrong-secret || fail "wrong secret not refused"
hostile --from 10.77.0.2 --name decode no-secret || fail "no secret not refused"
hostile --from 127.0.0.1 --name decode hello || fail "wrong address not refused"
hostile --from 10.77.0.2 --name decode replay /run/kvx/cluster.secret || fail "replay not refused"
hostile --from 10.77.0.2 --name decode malformed >"$KVX_LOGDIR/malformed.txt" ||
	fail "malformed frames not refused: $(grep FAIL "$KVX_LOGDIR/malformed.txt")"
vm_log "malformed: $(tail -n 1 "$KVX_LOGDIR/malformed.txt")"

# 64 idle connections from decode's own address (the worst case: the per-address cap applies
# to the healthy peers there too); meanwhile decode2 restarts and must come back in time
start_bg idle "$HOSTILE" --to 10.77.0.1:7470 --from 10.77.0.2 --name decode idle 64 12
wait_until 10 grep -q "holding" "$KVX_LOGDIR/idle.log" || fail "idle client did not start"
stop_bg decode2
start_bg decode2b "$KVXD" -c "$KVX_SRC/configs/decode2.ini"
wait_for_socket /run/kvx/decode2.sock 20 || fail "decode2 did not restart"
wait_until 20 peer_ready prefill decode2 || fail "restarted decode2 never came back"
# from the logs' stamps: decode2 up (its devices open, listening: it opens its engine socket
# before those) to prefill's session with it ready
up=$(grep -m 1 ' node decode2 up' "$KVX_LOGDIR/decode2b.log" | cut -d ' ' -f 1)
ready=$(grep 'publish: peer decode2 ready (epoch' "$KVX_LOGDIR/prefill.log" | tail -n 1 | cut -d ' ' -f 1)
[ -n "$up" ] && [ -n "$ready" ] || fail "no stamps: decode2 up '$up', prefill ready '$ready'"
ms=$(awk -v a="$up" -v b="$ready" 'BEGIN { printf "%d", (b - a) * 1000 }')
vm_log "decode2 restarted; READY on prefill $ms ms after it was up (handshake_ms 3000)"
[ "$ms" -ge 0 ] || fail "prefill's last session with decode2 came up before decode2 restarted ($ms ms)"
[ "$ms" -lt 3000 ] || fail "decode2 took $ms ms to reconnect"
wait_bg idle 60 || fail "idle connections not all closed by kvxd: $(tail -n 3 "$KVX_LOGDIR/idle.log")"

wait_bg storm 600 || fail "kvx-bench failed: $(tail -n 5 "$KVX_LOGDIR/storm.log")"
grep '^{' "$KVX_LOGDIR/storm.log" >"$out"
j() { json_get "$out" "$1"; }
[ "$(j verified)" = ok ] && [ "$(j mismatched_bytes)" = 0 ] || fail "healthy rooms corrupted"
[ "$(j canary_changed_bytes)" = 0 ] || fail "$(j canary_changed_bytes) canary bytes changed"
[ "$(j canary_checked_bytes)" -gt 0 ] || fail "no canary was checked"
[ "$(j protocol_errors)" = 0 ] && [ "$(j bad_generation)" = 0 ] || fail "abort protocol errors"
after=$(session decode)
[ "$after" = "$before" ] || fail "the healthy session was disturbed: $before -> $after"
[ "$(metric decode fences_total)" = 0 ] || fail "a live prefill was fenced"

m() { metric prefill "$1"; }
vm_log "prefill refusals: auth $(m peer_conn_refused_auth_total) address $(m peer_conn_refused_address_total) bad_frames $(m frames_bad_total) evicted $(m peer_pending_evicted_total) expired $(m peer_pending_expired_total)"
[ "$(m peer_conn_refused_auth_total)" -ge 4 ] || fail "auth refusals not counted"
[ "$(m peer_conn_refused_address_total)" -ge 1 ] || fail "address refusal not counted"
[ "$(m frames_bad_total)" -ge 30 ] || fail "malformed frames not counted"
[ "$(m peer_pending_evicted_total)" -ge 56 ] || fail "idle connections not capped"
[ "$(m peer_pending_expired_total)" -ge 1 ] || fail "idle connections did not expire"
[ "$(m peer_pending)" = 0 ] || fail "pending connections left"
echo "hostile: rooms=$(j rooms) aborted=$(j aborted) verified=$(j verified) canary_changed_bytes=$(j canary_changed_bytes) session='$after' decode2_reconnect_ms=$ms"
echo "PASS: hostile peers"
