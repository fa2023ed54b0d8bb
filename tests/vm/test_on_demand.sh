#!/bin/bash
# test_on_demand.sh: [node] connect = on_demand on real verbs.  prefill, decode and decode2 start
# with no session and no QP (rdma resource show: only the GSI QP); rooms from prefill to decode
# set up that one session (decode2's stays down); once no room has used it for idle_ms both sides
# close it quietly (no reset, nobody lost) and its QPs go; the next rooms set it up again.  A
# storm to decode2 runs while the idle decode session closes, without a failed room.
. "$(dirname "$0")/lib.sh"

# long enough for decode2's session to come up before decode's idle one closes (checked below)
IDLE_MS=6000
dir=/run/kvx/on_demand
mkdir -p "$dir"
for n in prefill decode decode2; do
	awk -v idle="$IDLE_MS" '
		{ print }
		/^\[node\]/ { print "connect = on_demand" }
		/^\[timeouts\]/ { print "idle_ms = " idle }' "$KVX_SRC/configs/$n.ini" >"$dir/$n.ini"
done
qps() { rdma_counts "$1" | sed 's/^qp=\([0-9]*\) .*/\1/'; }
q0=$(qps rxe0)
q1=$(qps rxe1)
for n in prefill decode decode2; do
	start_bg "$n" "$KVXD" -c "$dir/$n.ini"
	wait_for_socket "/run/kvx/$n.sock" 20 || fail "kvxd $n did not open its engine socket"
done
state() { ctl "$1" peers | sed -n "s/^peer $2 .*state \([A-Z_]*\).*/\1/p"; }
sleep 3
for p in "prefill decode" "prefill decode2" "decode prefill" "decode2 prefill"; do
	set -- $p
	[ "$(state "$1" "$2")" = IDLE ] || fail "$1 -> $2 is $(state "$1" "$2") before any room"
done
[ "$(qps rxe0)" = "$q0" ] && [ "$(qps rxe1)" = "$q1" ] ||
	fail "QPs before any room: rxe0 $(qps rxe0) (idle $q0), rxe1 $(qps rxe1) (idle $q1)"

bench() { # bench DECODE OUT [kvx-bench options]
	local dec=$1 out=$2
	shift 2
	"$KVX_BENCH" --prefill /run/kvx/prefill.sock --decode "/run/kvx/$dec.sock" --json \
		--inflight 4 --pages 8 --bufs 2 "$@" >"$out" || fail "rooms to $dec failed: $(cat "$out")"
	[ "$(json_get "$out" verified)" = ok ] && [ "$(json_get "$out" mismatched_bytes)" = 0 ] ||
		fail "rooms to $dec: not verified"
}
t0=${EPOCHREALTIME/./}
bench decode "$KVX_LOGDIR/first.json" --rooms 64
t_last=${EPOCHREALTIME/./}
first_ms=$(((t_last - t0) / 1000))
# (its session may already be closing: idle_ms is short, and a busy guest is slow to ask)
[ "$(metric decode sessions_on_demand_total)" -ge 1 ] || fail "decode's rooms went without dialling"
[ "$(state prefill decode2)" = IDLE ] || fail "prefill -> decode2 came up without a room"

# decode2's storm starts (its session comes up) while decode's session goes idle and closes: 20 s,
# longer than the wait for that close (up to 15 s), so that the storm still runs when it is
# checked (with 8 s, a slow ASan guest saw the storm end, and decode2's session close too)
start_bg storm "$KVX_BENCH" --prefill /run/kvx/prefill.sock --decode /run/kvx/decode2.sock \
	--json --duration 20 --inflight 8 --pages 8 --bufs 2 --timeout 60
wait_until 15 eval '[ "$(state prefill decode2)" = READY ]' ||
	fail "decode2's session did not come up for its storm: $(ctl prefill peers)"
q_up=$(qps rxe0)
[ "$q_up" -gt "$q0" ] || fail "no QP on rxe0 while decode2's session is up"
wait_until 15 eval '[ "$(state prefill decode)" = IDLE ] && [ "$(state decode prefill)" = IDLE ]' ||
	fail "the idle session was not closed: $(ctl prefill peers)"
closed_ms=$(((${EPOCHREALTIME/./} - t_last) / 1000))
# in prefill's log, decode's idle close comes after decode2's session came up for its storm
ready2=$(grep -n 'publish: peer decode2 ready (epoch' "$KVX_LOGDIR/prefill.log" | head -n 1 | cut -d : -f 1)
closed=$(grep -n 'kvxd_peer_reset: peer decode: .*idle: closed' "$KVX_LOGDIR/prefill.log" | head -n 1 | cut -d : -f 1)
[ -n "$ready2" ] && [ -n "$closed" ] && [ "$closed" -gt "$ready2" ] ||
	fail "decode's idle session did not close during decode2's storm (log lines: closed '$closed', decode2 ready '$ready2')"
[ "$(state prefill decode2)" = READY ] || fail "decode2's session is $(state prefill decode2) in its storm"
wait_bg storm 90 || fail "the storm to decode2 failed: $(cat "$KVX_LOGDIR/storm.log")"
out=$KVX_LOGDIR/storm.json
cp "$KVX_LOGDIR/storm.log" "$out"
j() { json_get "$out" "$1"; }
[ "$(j verified)" = ok ] && [ "$(j mismatched_bytes)" = 0 ] || fail "storm rooms corrupted"
[ "$(j failed_decode)" = 0 ] && [ "$(j failed_prefill)" = 0 ] && [ "$(j timed_out)" = 0 ] ||
	fail "storm rooms failed: decode $(j failed_decode) prefill $(j failed_prefill) timed out $(j timed_out)"

# every session idle now: all closed, every QP gone, nothing counted as a failure
wait_until 15 eval '[ "$(state prefill decode2)" = IDLE ] && [ "$(qps rxe0)" = "$q0" ] && [ "$(qps rxe1)" = "$q1" ]' ||
	fail "QPs after the idle close: rxe0 $(qps rxe0) (idle $q0), rxe1 $(qps rxe1) (idle $q1): $(ctl prefill peers)"
for n in prefill decode decode2; do
	[ "$(metric "$n" peer_resets_total)" = 0 ] || fail "$n counted $(metric "$n" peer_resets_total) resets"
done
[ "$(metric prefill sessions_idle_closed_total)" -ge 2 ] ||
	fail "prefill closed $(metric prefill sessions_idle_closed_total) idle sessions"
[ "$(metric decode sessions_on_demand_total)" -ge 1 ] || fail "decode never dialled on demand"

# and back: the next rooms set the session up again
bench decode "$KVX_LOGDIR/again.json" --rooms 32
[ "$(metric decode sessions_on_demand_total)" -ge 2 ] || fail "decode did not dial again"
echo "on_demand: rxe0 QPs idle $q0, up $q_up (decode2's storm), after the close $q0; 64 rooms (session set up by the first) in ${first_ms} ms; decode's idle session closed within ${closed_ms} ms of its last room (idle_ms $IDLE_MS) during decode2's storm of $(j rooms) rooms (0 failed); 32 rooms again over a new session; resets 0"
echo "PASS: on_demand"
