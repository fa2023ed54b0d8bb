#!/bin/bash
# scale_membership.sh (make scale; not part of make test): N kvxd (KVX_SCALE_NODES, default 12)
# with no [peer.*] section find each other through etcd in one VM, half on rxe0 and half on
# rxe1, and form a full mesh (N x (N-1) / 2 sessions).  Node n0 then feeds every other node at
# once (one kvx-bench per decode node, verified); half of the nodes are killed and the others
# drop them when their leases expire (every QP they had with them gone); the killed ones come
# back and the mesh forms again.  Prints the timings and the QP counts.  With
# KVX_SCALE_CONNECT=on_demand ([node] connect = on_demand, idle_ms 5000) the nodes find each
# other with no session at all; n0's rooms set up its N-1 sessions only; after the kill and the
# return every session closes once idle and every QP goes.
. "$(dirname "$0")/lib.sh"

N=${KVX_SCALE_NODES:-12}
CONNECT=${KVX_SCALE_CONNECT:-always}
ROOMS=${KVX_SCALE_ROOMS:-40}
LEASE_S=3
ETCD_URL=http://10.77.0.1:2379
dir=/run/kvx/scale
mkdir -p "$dir"
now_ms() { echo $((${EPOCHREALTIME/./} / 1000)); }

for ((i = 0; i < N; i++)); do
	dev=$((i % 2))
	cat >"$dir/n$i.ini" <<EOF
[node]
name = n$i
listen = 10.77.0.$((dev + 1)):$((7600 + i))
connect = $CONNECT
[cores]
idle_park_us = 1000
[rdma]
device = rxe$dev
gid_index = 1
mtu = 1024
retry_cnt = 6
ack_timeout = 14
sq_depth = 64
rq_depth = 64
cq_depth = $((2 * N * 128 > 4096 ? 2 * N * 128 : 4096))
[engine]
socket = /run/kvx/n$i.sock
; n0 serves one kvx-bench per other node at once
max_sessions_per_uid = 1024
[timeouts]
handshake_ms = 10000
waiting_ms = 30000
idle_ms = 5000
[security]
secret_file = $KVX_SECRET
[membership]
etcd = ${ETCD_URL#http://}
prefix = /kvx/scale/
lease_s = $LEASE_S
EOF
done

command -v etcd >/dev/null || fail "etcd-server is not installed (scripts/install-deps.sh)"
start_bg etcd etcd --name kvx --data-dir /tmp/etcd --listen-client-urls "$ETCD_URL" \
	--advertise-client-urls "$ETCD_URL" --listen-peer-urls http://127.0.0.1:2380 \
	--initial-advertise-peer-urls http://127.0.0.1:2380 --initial-cluster kvx=http://127.0.0.1:2380
wait_for_port 2379 30 || fail "etcd did not start"

ready_count() { ctl "$1" peers 2>/dev/null | grep -c " state READY" || true; }
listed_count() { ctl "$1" peers 2>/dev/null | grep -c "^peer " || true; }
mesh() { # mesh FIRST LAST WANT: nodes FIRST..LAST each see WANT peers READY (on_demand: listed)
	local i count=ready_count
	[ "$CONNECT" = on_demand ] && count=listed_count
	for ((i = $1; i <= $2; i++)); do [ "$($count "n$i")" -eq "$3" ] || return 1; done
}
no_session() { # on_demand: no node has a session up
	local i
	for ((i = 0; i < N; i++)); do [ "$(ready_count "n$i")" -eq 0 ] || return 1; done
}
qps() { echo "rxe0 $(rdma_counts rxe0 | cut -d' ' -f1) rxe1 $(rdma_counts rxe1 | cut -d' ' -f1)"; }
base=$(qps)

t0=$(now_ms)
for ((i = 0; i < N; i++)); do start_bg "n$i" "$KVXD" -c "$dir/n$i.ini"; done
for ((i = 0; i < N; i++)); do wait_for_socket "/run/kvx/n$i.sock" 60 || fail "n$i did not start"; done
wait_until 300 mesh 0 $((N - 1)) $((N - 1)) || fail "no full mesh: $(for ((i = 0; i < N; i++)); do echo -n "n$i:$(ready_count n$i) "; done)"
mesh_ms=$(($(now_ms) - t0))
full=$(qps)
if [ "$CONNECT" = on_demand ]; then
	no_session || fail "sessions up before any room: $(for ((i = 0; i < N; i++)); do echo -n "n$i:$(ready_count n$i) "; done)"
	[ "$full" = "$base" ] || fail "QPs before any room: $full (idle $base)"
	vm_log "$N nodes found each other (N-1 peers listed each, no session) ${mesh_ms} ms after start; QPs $full"
else
	vm_log "full mesh of $N nodes ($((N * (N - 1) / 2)) sessions) ${mesh_ms} ms after start; QPs $full"
fi

# n0 feeds every other node at once
t0=$(now_ms)
for ((i = 1; i < N; i++)); do
	start_bg "bench$i" "$KVX_BENCH" --prefill /run/kvx/n0.sock --decode "/run/kvx/n$i.sock" \
		--json --rooms "$ROOMS" --inflight 4 --pages 4 --bufs 2 --timeout 120
done
for ((i = 1; i < N; i++)); do
	wait_bg "bench$i" 300 || fail "rooms n0 -> n$i failed: $(cat "$KVX_LOGDIR/bench$i.log")"
	[ "$(json_get "$KVX_LOGDIR/bench$i.log" verified)" = ok ] || fail "n0 -> n$i: not verified"
done
rooms_ms=$(($(now_ms) - t0))
if [ "$CONNECT" = on_demand ]; then
	# every decode node dialled n0 (sessions may have closed idle since), and nobody else
	met=$(ctl n0 peers | grep -c " handshakes [1-9]" || true)
	[ "$met" -eq $((N - 1)) ] || fail "n0 had sessions with $met nodes after feeding $((N - 1))"
	[ "$(metric n0 sessions_on_demand_total)" = 0 ] || fail "n0 dialled: it has no decode room"
	for ((i = 1; i < N; i++)); do
		[ "$(ctl "n$i" peers | grep -c " handshakes [1-9]" || true)" -le 1 ] ||
			fail "n$i had sessions with several peers; it only talks to n0"
	done
	full=$(qps)
fi
vm_log "$(((N - 1) * ROOMS)) rooms (up to $(((N - 1) * 4)) in flight) from n0 to $((N - 1)) nodes in ${rooms_ms} ms, all verified"

# the upper half is killed: the others drop them when their leases expire
half=$((N / 2))
t0=$(now_ms)
for ((i = half; i < N; i++)); do stop_bg "n$i" KILL; done
wait_until 120 mesh 0 $((half - 1)) $((half - 1)) ||
	fail "the killed nodes are not all dropped"
wait_until 120 eval '! ctl n0 peers | grep -q "^peer n$((N - 1)) "' || fail "n0 still lists n$((N - 1))"
drop_ms=$(($(now_ms) - t0))
half_qps=$(qps)
vm_log "$((N - half)) nodes killed, dropped by the other $half ${drop_ms} ms after (lease ${LEASE_S} s); QPs $half_qps"

# back: the mesh forms again
t0=$(now_ms)
for ((i = half; i < N; i++)); do start_bg "n${i}b" "$KVXD" -c "$dir/n$i.ini"; done
wait_until 300 mesh 0 $((N - 1)) $((N - 1)) || fail "the mesh did not form again"
again_ms=$(($(now_ms) - t0))
idle=""
if [ "$CONNECT" = on_demand ]; then
	t0=$(now_ms)
	wait_until 120 eval 'no_session && [ "$(qps)" = "$base" ]' ||
		fail "sessions left after idle_ms: $(for ((i = 0; i < N; i++)); do echo -n "n$i:$(ready_count n$i) "; done) QPs $(qps)"
	idle="; every session closed idle and every QP gone $(($(now_ms) - t0)) ms later"
fi
formed="full mesh $((N * (N - 1) / 2)) sessions"
[ "$CONNECT" = on_demand ] && formed="all found, no session"
echo "scale ($CONNECT): $N nodes via etcd, ${formed} in ${mesh_ms} ms (QPs idle ${base} / then ${full}); $(((N - 1) * ROOMS)) rooms n0 -> $((N - 1)) nodes, up to $(((N - 1) * 4)) in flight, verified, ${rooms_ms} ms; $((N - half)) killed, dropped in ${drop_ms} ms (QPs ${half_qps}); back in ${again_ms} ms${idle}"
echo "PASS: scale"
