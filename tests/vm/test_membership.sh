#!/bin/bash
# test_membership.sh: three kvxd with no [peer.*] sections find each other through etcd
# (Debian's etcd-server, in the guest) and rooms flow.  prefill is killed during a storm: decode's
# rooms from it fail fast (no canary byte changes), its lease expires, decode and decode2 drop it
# and every QP they had with it is gone (rdma resource show); it comes back and is found again,
# and rooms flow again.  Prints the timings (found, dropped, found again).
. "$(dirname "$0")/lib.sh"

ETCD_URL=http://10.77.0.1:2379
LEASE_S=3
dir=/run/kvx/membership
mkdir -p "$dir"
# configs/NAME.ini without its [peer.*] sections, with etcd and CQs for the peers it may find
mkcfg() {
	awk -v etcd="${ETCD_URL#http://}" -v lease="$LEASE_S" '
		/^\[peer\./ { skip = 1; next }
		/^\[/ { skip = 0 }
		skip { next }
		{ print }
		/^\[rdma\]/ { print "cq_depth = 16384" }
		END { print "\n[membership]\netcd = " etcd "\nprefix = /kvx/test/\nlease_s = " lease }' \
		"$KVX_SRC/configs/$1.ini" >"$dir/$1.ini"
}
for n in prefill decode decode2; do mkcfg "$n"; done
now_ms() { echo $((${EPOCHREALTIME/./} / 1000)); }
listed() { ctl "$1" peers 2>/dev/null | grep -q "^peer $2 "; }

command -v etcd >/dev/null || fail "etcd-server is not installed (scripts/install-deps.sh)"
start_bg etcd etcd --name kvx --data-dir /tmp/etcd --listen-client-urls "$ETCD_URL" \
	--advertise-client-urls "$ETCD_URL" --listen-peer-urls http://127.0.0.1:2380 \
	--initial-advertise-peer-urls http://127.0.0.1:2380 --initial-cluster kvx=http://127.0.0.1:2380
wait_for_port 2379 30 || fail "etcd did not start"

# decode and decode2 first: what rxe1 holds without prefill
start_bg decode "$KVXD" -c "$dir/decode.ini"
start_bg decode2 "$KVXD" -c "$dir/decode2.ini"
wait_for_socket /run/kvx/decode.sock 20 && wait_for_socket /run/kvx/decode2.sock 20 ||
	fail "the decode nodes did not start"
wait_peer decode decode2 30
wait_peer decode2 decode 30
qps() { rdma_counts rxe1 | cut -d" " -f1; }
base=$(qps)

t0=$(now_ms)
start_bg prefill "$KVXD" -c "$dir/prefill.ini"
wait_for_socket /run/kvx/prefill.sock 20 || fail "prefill did not start"
for a in "prefill decode" "prefill decode2" "decode prefill" "decode2 prefill"; do
	# shellcheck disable=SC2086
	wait_peer $a 30
done
found_ms=$(($(now_ms) - t0))
vm_log "all three found each other: ${found_ms} ms after prefill started"
grep -q '^\[peer\.' "$dir"/*.ini && fail "a config has [peer.*] sections"
for dst in decode decode2; do
	"$KVX_BENCH" --prefill /run/kvx/prefill.sock --decode "/run/kvx/$dst.sock" --json --rooms 32 \
		--inflight 4 --pages 8 --bufs 2 >"$KVX_LOGDIR/found-$dst.json" || fail "rooms to $dst failed"
	[ "$(json_get "$KVX_LOGDIR/found-$dst.json" verified)" = ok ] || fail "rooms to $dst: not verified"
done
with=$(qps)

# prefill dies during a storm: decode's rooms fail fast, its lease expires, the others drop it
out=$KVX_LOGDIR/loss.json
# the counter is cumulative: the rooms above count, and the storm's own must flow first
imm0=$(metric decode core_recv_imm_total)
start_bg bench "$KVX_BENCH" --prefill /run/kvx/prefill.sock --decode /run/kvx/decode.sock \
	--json --duration 60 --inflight 8 --pages 32 --bufs 4 --settle-ms 300 \
	--survive-prefill-loss --timeout 40
wait_until 20 eval '[ "$(metric decode core_recv_imm_total)" -ge $((imm0 + 20)) ]' || fail "no rooms flow"
t0=$(now_ms)
stop_bg prefill KILL
vm_log "prefill killed"
wait_until $((LEASE_S * 4 + 10)) eval '! listed decode prefill && ! listed decode2 prefill' ||
	fail "prefill still listed: $(ctl decode peers) / $(ctl decode2 peers)"
dropped_ms=$(($(now_ms) - t0))
vm_log "prefill dropped by both ${dropped_ms} ms after the kill (lease ${LEASE_S} s)"
wait_bg bench 90 || fail "kvx-bench failed: $(cat "$KVX_LOGDIR/bench.log")"
cp "$KVX_LOGDIR/bench.log" "$out"
j() { json_get "$out" "$1"; }
[ "$(j prefill_lost)" = true ] || fail "the bench did not see prefill go"
[ "$(j canary_changed_bytes)" = 0 ] || fail "$(j canary_changed_bytes) bytes changed after release"
[ "$(j verified)" = ok ] && [ "$(j mismatched_bytes)" = 0 ] || fail "successful rooms corrupted"
lost_ms=$(awk -v u="$(j loss_to_last_release_us)" 'BEGIN { printf "%d", u / 1000 }')
wait_until 20 eval '[ "$(qps)" = "$base" ]' ||
	fail "QPs left on rxe1: $(qps), without prefill: $base"
dropped=$(qps)
[ "$(metric decode members_lost_total)" -ge 1 ] || fail "decode counted no node lost"

# it comes back: found again, rooms flow
t0=$(now_ms)
start_bg prefill2 "$KVXD" -c "$dir/prefill.ini"
wait_peer decode prefill 30
wait_peer decode2 prefill 30
again_ms=$(($(now_ms) - t0))
"$KVX_BENCH" --prefill /run/kvx/prefill.sock --decode /run/kvx/decode.sock --json --rooms 32 \
	--inflight 4 --pages 8 --bufs 2 >"$KVX_LOGDIR/again.json" || fail "rooms after the return failed"
[ "$(json_get "$KVX_LOGDIR/again.json" verified)" = ok ] || fail "after the return: not verified"
echo "membership: 3 nodes, no [peer.*]; found ${found_ms} ms; prefill killed with $(j rooms_in_flight_at_loss) rooms in flight, last released ${lost_ms} ms after, canary_changed_bytes=0; dropped ${dropped_ms} ms after the kill (lease ${LEASE_S} s); rxe1 without prefill ${base}, with it ${with}, after the drop ${dropped}; found again ${again_ms} ms after the restart"
echo "PASS: membership"
