#!/bin/bash
# test_rxe_smoke.sh: the VM's verbs stack moves real data. ib_write_bw server
# on rxe0, client on rxe1, 64 KiB RDMA WRITEs for 3 s across the veth pair.
# perftest exits 0 with "0 iterations" when the packets are silently dropped
# (e.g. martian filtering on the veth), so the bandwidth itself is checked.
# Then kvx-floor moves one-page rooms between rxe1 and rxe0, each page checked.
. "$(dirname "$0")/lib.sh"

devs=$(ibv_devices)
for d in rxe0 rxe1; do
	grep -qw "$d" <<<"$devs" || fail "ibv_devices does not list $d: $devs"
done
g0=$(gid_index rxe0) || fail "rxe0 has no IPv4 RoCE v2 GID"
g1=$(gid_index rxe1) || fail "rxe1 has no IPv4 RoCE v2 GID"
vm_log "GID index rxe0=$g0 rxe1=$g1; rxe0 idle: $(rdma_counts rxe0)"

bw=(ib_write_bw -s 65536 -D 3)
start_bg server "${bw[@]}" -d rxe0 -x "$g0"
# perftest exchanges QP numbers over TCP 18515 before any verbs traffic
wait_for_port 18515 30 || fail "ib_write_bw server is not listening"
start_bg client timeout 60 "${bw[@]}" -d rxe1 -x "$g1" 10.77.0.1
# the server creates its QP only once the client has connected
user_qp() { [[ "$(rdma_counts rxe0)" != qp=1\ * ]]; }
wait_until 20 user_qp && vm_log "rxe0 during the test: $(rdma_counts rxe0)"
wait_bg client 90 || fail "ib_write_bw client failed (exit $?)"
wait_bg server 30 || fail "ib_write_bw server failed (exit $?)"

# The result row follows the "#bytes #iterations BW peak BW average ..." header.
read -r iters mbs < <(awk '/^ *#bytes/ { getline; print $2, $4; exit }' "$KVX_LOGDIR/client.log")
[ -n "${mbs:-}" ] || fail "no result row in client.log"
vm_log "ib_write_bw rxe1 -> rxe0, 64 KiB: $iters iterations, $mbs MB/s"
awk -v i="$iters" -v m="$mbs" 'BEGIN { exit !(i > 0 && m > 0) }' ||
	fail "no data moved ($iters iterations, $mbs MB/s): packets dropped?"

# kvx-floor (make bench's floor shapes) on the same devices: each room's page must land, stamped
for args in "--threads 3 --park engine" "--threads 2 --park all" "--inflight 8 --batch 4" \
	"--threads 3 --park engine --engine-process --prefill-engine" "--threads 3 --park all --engine-process"; do
	# shellcheck disable=SC2086
	out=$("$KVX_BUILD/kvx-floor" --decode-gid "$g1" --prefill-gid "$g0" --rooms 200 \
		--warmup 20 $args 2>&1) || fail "kvx-floor $args: $out"
	[[ "$out" =~ ^floor:\ .*\ rooms=200\ (p50_us|rooms_per_s)=[0-9] ]] ||
		fail "kvx-floor $args printed: $out"
	vm_log "$out"
done
echo "PASS: rxe smoke, $mbs MB/s"
