#!/bin/bash
# test_heartbeat.sh: an idle healthy pair stays up on heartbeats alone; decode's kvxd is then
# frozen (SIGSTOP): prefill declares it lost within heartbeat_ms x heartbeat_misses (measured
# from the stop), with nothing in flight to fail; once decode is thawed (SIGCONT) the pair
# comes back.
. "$(dirname "$0")/lib.sh"

kvxd_start prefill
kvxd_start decode
wait_peer decode prefill 20
wait_peer prefill decode 20
sleep 5 # idle: heartbeats only
peer_ready prefill decode || fail "an idle healthy peer was dropped"
[ "$(metric prefill peers_silent_total)" = 0 ] || fail "an idle healthy peer was called silent"
hb=$(metric prefill heartbeats_sent_total)
[ "$hb" -ge 3 ] || fail "prefill sent only $hb heartbeats in 5 s"

bound=$((1000 * 3)) # configs: heartbeat_ms 1000 (default) x heartbeat_misses 3 (default)
kill -STOP "$(bg_pid decode)"
t0=${EPOCHREALTIME/./}
lost() { ! peer_ready prefill decode; }
wait_until 30 lost || fail "prefill never noticed that decode went silent"
[ "$(metric prefill peers_silent_total)" = 1 ] || fail "not lost by the heartbeat rule"
# when: the stamp of prefill's reset (not when a poll of kvxctl saw it)
t1=$(grep 'kvxd_peer_reset: peer decode: .*silent for' "$KVX_LOGDIR/prefill.log" | tail -n 1 | cut -d ' ' -f 1)
[ -n "$t1" ] || fail "no reset for silence in prefill's log"
ms=$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%d", (b * 1000000 - a) / 1000 }')
vm_log "prefill declared decode lost $ms ms after SIGSTOP (bound $bound ms): $(ctl prefill peers | grep '^peer decode ')"
# its loop's tick and the last heartbeat's way through an emulated guest: 500 ms
[ "$ms" -le $((bound + 500)) ] || fail "lost after $ms ms, bound $bound ms"
kill -CONT "$(bg_pid decode)"
wait_peer prefill decode 30
wait_peer decode prefill 30
echo "heartbeat: lost_after_ms=$ms bound_ms=$bound"
echo "PASS: heartbeat"
