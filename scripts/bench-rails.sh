#!/bin/bash
# bench-rails.sh BUILD_DIR: kvx striped over two rails against both rails' perftest at once, in
# one boot of the Soft-RoCE VM in its two-rail mode (scripts/kvx-vm --rails 2).
#
# Interleaved, RUNS times each: kvx, ref, kvx, ref, ...
#   kvx  two fresh kvxd (prefill on rxe0 + rxe2, decode on rxe1 + rxe3: tests/vm/lib.sh
#        rails_configs), kvx-bench with 64 KiB messages (rooms of 16 x 4 KiB pages x 4 buffers,
#        INFLIGHT in flight) for SECONDS, counted over the steady-state window (--warmup-ms and
#        --cooldown-ms of SECONDS/4), every byte verified; the kvxd are stopped before the ref;
#   ref  ib_write_bw -s 65536 -D SECONDS on rail 0 (rxe0 -> rxe1) and on rail 1 (rxe2 -> rxe3)
#        at the same time: the sum of both MiB/s (perftest's own window: SECONDS/4 margins).
# Units: 10^6 B/s on both sides (perftest's "MB/sec" is MiB/s and is converted).  Prints one line
# per run pair and, last:
#   bench: shape=64k-2rails kvx=X ref=Y unit=MBps ratio=MIN/MEDIAN/MAX
# kvx and ref are the medians; each ratio is kvx / ref of one interleaved pair.  The runs' files
# stay in BUILD_DIR/vm-logs/bench-rails/.  Exits 1 if a run failed.
# Env: KVX_BENCH_SECONDS (whole seconds, at least 4; 10), KVX_BENCH_RUNS (3), KVX_BENCH_INFLIGHT
# (kvx rooms in flight; 8).
set -euo pipefail

if [ "${1:-}" = --vm ]; then
	secs=$2 margin=$3 runs=$4 inflight=$5
	set +e +o pipefail
	. "$KVX_SRC/tests/vm/lib.sh"
	[ "$KVX_RAILS" = 2 ] || fail "the VM has $KVX_RAILS rail(s), not 2"
	declare -A g
	for d in rxe0 rxe1 rxe2 rxe3; do g[$d]=$(gid_index $d) || fail "$d has no RoCE v2 GID"; done
	dir=/run/kvx/bench-rails
	rails_configs "$dir"
	for i in $(seq 1 "$runs"); do
		for n in prefill decode; do
			start_bg "$n-$i" "$KVXD" -c "$dir/$n.ini"
		done
		wait_until 30 eval 'ctl decode peers 2>/dev/null | grep -q "^peer prefill .* state READY"' ||
			fail "run $i: the nodes did not connect"
		vm_log "kvx run $i"
		"$KVX_BENCH" --prefill /run/kvx/prefill.sock --decode /run/kvx/decode.sock --json \
			--duration "$secs" --warmup-ms "$margin" --cooldown-ms "$margin" \
			--inflight "$inflight" --pages 16 --bufs 4 --page-size 4096 \
			>"$KVX_LOGDIR/kvx$i.json" 2>"$KVX_LOGDIR/kvx$i.err"
		echo "rc=$? rail0_bytes=$(rail_metric prefill rail_bytes_posted_total 0) rail1_bytes=$(rail_metric prefill rail_bytes_posted_total 1)" \
			>"$KVX_LOGDIR/kvx$i.rc"
		stop_bg "decode-$i"
		stop_bg "prefill-$i"
		vm_log "ref run $i"
		bw=(ib_write_bw -s 65536 -D "$secs")
		start_bg "srv0-$i" "${bw[@]}" -d rxe1 -x "${g[rxe1]}" -p 18515
		start_bg "srv1-$i" "${bw[@]}" -d rxe3 -x "${g[rxe3]}" -p 18516
		wait_for_port 18515 30 && wait_for_port 18516 30 || fail "ib_write_bw servers are not listening"
		start_bg "cli0-$i" timeout 120 "${bw[@]}" -d rxe0 -x "${g[rxe0]}" -p 18515 10.77.0.2
		start_bg "cli1-$i" timeout 120 "${bw[@]}" -d rxe2 -x "${g[rxe2]}" -p 18516 10.78.0.2
		rc=0
		for n in "cli0-$i" "cli1-$i" "srv0-$i" "srv1-$i"; do wait_bg "$n" 150 || rc=1; done
		echo "rc=$rc" >"$KVX_LOGDIR/ref$i.rc"
	done
	exit 0
fi

here=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$here/build}" && pwd)
secs=${KVX_BENCH_SECONDS:-10}
if ! [[ "$secs" =~ ^[0-9]+$ ]] || [ "$secs" -lt 4 ]; then
	echo "bench-rails: KVX_BENCH_SECONDS must be whole seconds, at least 4" >&2
	exit 2
fi
margin=$((secs / 4 * 1000))
runs=${KVX_BENCH_RUNS:-3}
inflight=${KVX_BENCH_INFLIGHT:-8}
if ! [[ "$inflight" =~ ^[1-9][0-9]*$ ]]; then
	echo "bench-rails: KVX_BENCH_INFLIGHT must be a whole number of rooms, at least 1" >&2
	exit 2
fi
logs=$build/vm-logs/bench-rails
"$here/scripts/kvx-vm" --build "$build" --rails 2 --timeout $((runs * (4 * secs + 60) + 60)) \
	"$here/scripts/bench-rails.sh" --vm "$secs" "$margin" "$runs" "$inflight"

jnum() { sed -n "s/.*\"$2\": *\"\{0,1\}\([^,\"}]*\)\"\{0,1\}.*/\1/p" "$1" 2>/dev/null | head -n 1; }
mibs() { awk '/^ *#bytes/ { getline; print $4; exit }' "$1" 2>/dev/null; }
stats() {
	sort -g | awk '{ v[NR] = $1 } END {
		if (!NR) { print "nan nan nan"; exit }
		m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
		printf "%.3f %.3f %.3f\n", v[1], m, v[NR] }'
}
status=0 kvxs='' refs='' ratios=''
for i in $(seq 1 "$runs"); do
	k=$logs/kvx$i.json
	if ! grep -q '^rc=0 ' "$logs/kvx$i.rc" 2>/dev/null || [ "$(jnum "$k" verified)" != ok ]; then
		echo "bench-rails: kvx run $i failed: $(cat "$logs/kvx$i.rc" "$k" "$logs/kvx$i.err" 2>/dev/null)" >&2
		status=1
		continue
	fi
	m0=$(mibs "$logs/cli0-$i.log") m1=$(mibs "$logs/cli1-$i.log")
	if ! grep -q '^rc=0$' "$logs/ref$i.rc" 2>/dev/null || [ -z "$m0" ] || [ -z "$m1" ]; then
		echo "bench-rails: ref run $i failed (rail 0 '${m0}', rail 1 '${m1}')" >&2
		status=1
		continue
	fi
	kv=$(jnum "$k" window_MBps)
	ref=$(awk -v a="$m0" -v b="$m1" 'BEGIN { printf "%.3f", (a + b) * 1.048576 }')
	r=$(awk -v a="$kv" -v b="$ref" 'BEGIN { printf "%.3f", a / b }')
	echo "bench-rails: run $i kvx=$kv ref=$ref (rail 0 $m0 MiB/s + rail 1 $m1 MiB/s) ratio=$r $(sed 's/^rc=0 //' "$logs/kvx$i.rc")"
	kvxs+="$kv " refs+="$ref " ratios+="$r "
done
read -r _ kmed _ < <(tr ' ' '\n' <<<"$kvxs" | grep . | stats)
read -r _ rmed _ < <(tr ' ' '\n' <<<"$refs" | grep . | stats)
read -r rmin rmedr rmax < <(tr ' ' '\n' <<<"$ratios" | grep . | stats)
echo "bench: shape=64k-2rails kvx=$kmed ref=$rmed unit=MBps ratio=$rmin/$rmedr/$rmax"
exit $status
