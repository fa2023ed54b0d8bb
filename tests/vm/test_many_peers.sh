#!/bin/bash
# test_many_peers.sh: one node that lists 256 peers, with connect = on_demand.  prefill lists
# decode and 255 more peers (nothing answers at their addresses); decode lists prefill.  No
# session is set up for a peer no room uses: rdma resource show counts prefill's QPs for decode
# only, and nothing dials the others.  Rooms flow to decode; kvxctl prints every peer and every
# counter although the counters are longer than one engine message (paged replies).
. "$(dirname "$0")/lib.sh"

dir=/run/kvx/many
mkdir -p "$dir"
awk '{ print } /^\[node\]/ { print "connect = on_demand" }' "$KVX_SRC/configs/prefill.ini" |
	awk '/^\[peer\.decode2\]/ { skip = 1 } /^\[/ && !/^\[peer\.decode2\]/ { skip = 0 } !skip' \
		>"$dir/prefill.ini"
for i in $(seq 1 255); do
	# long names (60 bytes): the per-peer series make the counters longer than one message
	printf '\n[peer.ghost-of-a-node-with-a-name-as-long-as-names-go-rack7-%03d]\naddress = 10.77.%d.%d:7470\n' \
		"$i" $((100 + i / 200)) $((1 + i % 200))
done >>"$dir/prefill.ini"
awk '{ print } /^\[node\]/ { print "connect = on_demand" }' "$KVX_SRC/configs/decode.ini" >"$dir/decode.ini"
"$KVXD" --check-config -c "$dir/prefill.ini" >/dev/null || fail "prefill's 256-peer file refused"
q0=$(rdma_counts rxe0 | sed 's/^qp=\([0-9]*\) .*/\1/')
start_bg prefill "$KVXD" -c "$dir/prefill.ini"
wait_for_socket /run/kvx/prefill.sock 20 || fail "prefill did not open its engine socket"
start_bg decode "$KVXD" -c "$dir/decode.ini"
wait_for_socket /run/kvx/decode.sock 20 || fail "decode did not open its engine socket"

n=$(ctl prefill peers | grep -c '^peer ')
[ "$n" = 256 ] || fail "kvxctl peers lists $n peers, not 256"
"$KVX_BENCH" --prefill /run/kvx/prefill.sock --decode /run/kvx/decode.sock --json --rooms 64 \
	--inflight 8 --pages 8 --bufs 2 >"$KVX_LOGDIR/rooms.json" || fail "rooms failed: $(cat "$KVX_LOGDIR/rooms.json")"
[ "$(json_get "$KVX_LOGDIR/rooms.json" verified)" = ok ] || fail "rooms not verified"
q=$(rdma_counts rxe0 | sed 's/^qp=\([0-9]*\) .*/\1/')
cores=$(ctl prefill counters | grep -c '^kvx_core_wr_posted_total{')
[ "$q" = $((q0 + cores)) ] || fail "prefill holds $((q - q0)) QPs; one per polling core ($cores) for decode only"
ready=$(ctl prefill peers | grep -c ' state READY ')
[ "$ready" = 1 ] || fail "$ready sessions up; only decode's should be"
[ "$(metric prefill sessions_on_demand_total)" = 0 ] || fail "prefill dialled someone"
ctl prefill counters >"$KVX_LOGDIR/counters.txt" || fail "kvxctl counters failed"
bytes=$(wc -c <"$KVX_LOGDIR/counters.txt")
[ "$bytes" -gt 65536 ] || fail "counters are $bytes bytes: one page, nothing paged"
grep -q '^kvx_sessions_on_demand_total{node="prefill"} 0$' "$KVX_LOGDIR/counters.txt" ||
	fail "counters incomplete: no sessions_on_demand_total line"
[ "$(ctl prefill counters | tail -n 1 | cut -c1-4)" = "kvx_" ] || fail "counters cut short"
echo "many_peers: prefill lists 256 peers (on demand), 64 rooms verified to decode, $((q - q0)) QP(s) on rxe0 (decode's session only), 1 session READY; kvxctl counters $bytes bytes, kvxctl peers $n lines"
echo "PASS: many_peers"
