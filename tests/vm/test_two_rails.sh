#!/bin/bash
# kvx-vm: rails 2
# test_two_rails.sh: the VM's two-rail mode (scripts/kvx-vm --rails 2) gives each of the two
# nodes two RDMA devices on separate veth pairs (rxe0 + rxe2 at 10.77.0.1 / 10.78.0.1, rxe1 +
# rxe3 at 10.77.0.2 / 10.78.0.2), and both rails move data at the same time: ib_write_bw on each
# rail at once, 64 KiB WRITEs for 3 s.  Prints each rail's MiB/s and their sum, the reference
# a striped kvx room is measured against (issue 11).
. "$(dirname "$0")/lib.sh"

[ "$KVX_RAILS" = 2 ] || fail "KVX_RAILS is '$KVX_RAILS': the runner did not honour '# kvx-vm: rails 2'"
devs=$(ibv_devices)
for d in rxe0 rxe1 rxe2 rxe3; do
	grep -qw "$d" <<<"$devs" || fail "ibv_devices does not list $d: $devs"
done
declare -A gid
for d in rxe0 rxe1 rxe2 rxe3; do gid[$d]=$(gid_index "$d") || fail "$d has no IPv4 RoCE v2 GID"; done
ip -4 addr show kvx-veth2 | grep -q 10.78.0.1/24 || fail "kvx-veth2 has no 10.78.0.1"

bw=(ib_write_bw -s 65536 -D 3)
# run_pair A: ib_write_bw on both rails at once (names and ports of attempt A); true when both
# clients and both servers exit 0.  A client that fails has its server stopped, not waited for.
run_pair() {
	local a=$1 r ok=0
	start_bg "server0-$a" "${bw[@]}" -d rxe0 -x "${gid[rxe0]}" -p $((18515 + 2 * a))
	start_bg "server1-$a" "${bw[@]}" -d rxe2 -x "${gid[rxe2]}" -p $((18516 + 2 * a))
	wait_for_port $((18515 + 2 * a)) 30 && wait_for_port $((18516 + 2 * a)) 30 ||
		fail "ib_write_bw servers are not listening"
	start_bg "client0-$a" timeout 60 "${bw[@]}" -d rxe1 -x "${gid[rxe1]}" -p $((18515 + 2 * a)) 10.77.0.1
	start_bg "client1-$a" timeout 60 "${bw[@]}" -d rxe3 -x "${gid[rxe3]}" -p $((18516 + 2 * a)) 10.78.0.1
	for r in 0 1; do
		if wait_bg "client$r-$a" 90; then
			wait_bg "server$r-$a" 90 || { vm_log "server$r-$a failed (exit $?)"; ok=1; }
		else
			vm_log "client$r-$a failed (exit $?): $(tail -n 5 "$KVX_LOGDIR/client$r-$a.log" | tr '\n' ' ')"
			stop_bg "server$r-$a"
			ok=1
		fi
	done
	return $ok
}
# perftest's own connection setup fails now and then on a fresh rail (seen once in CI with no
# kvx code involved): one more attempt, logged; two failures fail the test
att=0
if ! run_pair 0; then
	vm_log "ib_write_bw failed on a rail: one more attempt"
	att=1
	run_pair 1 || fail "ib_write_bw failed on a rail twice"
fi

sum=0
for r in 0 1; do
	read -r iters mbs < <(awk '/^ *#bytes/ { getline; print $2, $4; exit }' "$KVX_LOGDIR/client$r-$att.log")
	[ -n "${mbs:-}" ] || fail "no result row in client$r-$att.log"
	awk -v i="$iters" -v m="$mbs" 'BEGIN { exit !(i > 0 && m > 0) }' ||
		fail "rail $r moved no data ($iters iterations, $mbs MiB/s)"
	vm_log "rail $r: $iters iterations, $mbs MiB/s"
	eval "rail$r=$mbs"
	sum=$(awk -v a="$sum" -v b="$mbs" 'BEGIN { printf "%.2f", a + b }')
done
# shellcheck disable=SC2154
echo "two rails at once, ib_write_bw 64 KiB: rail 0 $rail0 MiB/s, rail 1 $rail1 MiB/s, sum $sum MiB/s"
echo "PASS: two rails"
