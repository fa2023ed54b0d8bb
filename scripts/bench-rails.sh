#!/bin/bash
# bench-rails.sh BUILD_DIR: kvx striped over two rails against both rails' perftest at once, in
# one boot of the Soft-RoCE VM in its two-rail mode (scripts/kvx-vm --rails 2).
#
# Interleaved, RUNS times each: kvx, ref, kvx, ref, ...
#   kvx  two fresh kvxd (prefill on rxe0 + rxe2, decode on rxe1 + rxe3: tests/vm/lib.sh
#        rails_configs), kvx-bench with 64 KiB messages (rooms of PAGES x 4 KiB pages x 4
#        buffers, INFLIGHT in flight; each buffer's run of pages goes as WRITEs of 64 KiB, the
#        rails' stripe) for SECONDS, counted over the steady-state window (--warmup-ms and
#        --cooldown-ms of SECONDS/4), every room verified (those filled inside the window with
#        the sampled check, KVX_BENCH_CHECK: see scripts/bench.sh); the kvxd are stopped before
#        the ref;
#   ref  ib_write_bw -s 65536 -D SECONDS on rail 0 (rxe0 -> rxe1) and on rail 1 (rxe2 -> rxe3)
#        at the same time: the sum of both MiB/s (perftest's own window: SECONDS/4 margins);
#        a reference where either client fails or prints no figure runs once more.
# Units: 10^6 B/s on both sides (perftest's "MB/sec" is MiB/s and is converted).  Prints one line
# per run pair and, last:
#   bench: shape=64k-2rails inflight=N kvx=X ref=Y unit=MBps ratio=MIN/MEDIAN/MAX
# (shape=64k-2rails-pPAGES when PAGES is not 16)
# After each pair, where the guest's CPU went in the middle of each run (cpu_window), in shares of
# its two vCPUs: busy, softirq, and the threads of prefill's kvxd (polling cores: on rxe their
# system time is the emulated NIC's send work; other threads), decode's, kvx-bench and
# ib_write_bw (these shares overlap softirq where it ran in their time).
# kvx and ref are the medians; each ratio is kvx / ref of one interleaved pair.  The runs' files
# stay in BUILD_DIR/vm-logs/bench-rails/.  Exits 1 if a run failed.
# Env: KVX_BENCH_SECONDS (whole seconds, at least 4; 10), KVX_BENCH_RUNS (3), KVX_BENCH_INFLIGHT
# (kvx rooms in flight; 64: each room is 4 WRITEs of 64 KiB, so 64 rooms keep 256 WRITEs
# outstanding, as the two ib_write_bw do with their default send queue depth of 128 each),
# KVX_BENCH_CHECK (sampled or full: kvx-bench's --window-check; sampled), KVX_BENCH_PAGES (pages
# of 4 KiB per buffer, a multiple of 16 from 16 to 1024; 16: rooms of 256 KiB, 4 WRITEs; 64: rooms
# of 1 MiB, 16 WRITEs, the same WRITEs with a quarter of the rooms per byte; PAGES x INFLIGHT at
# most 8192, so that each node's pool stays within 512 MiB of the guest's 2 GiB).
set -euo pipefail

if [ "${1:-}" = --vm ]; then
	secs=$2 margin=$3 runs=$4 inflight=$5 check=$6 pages=$7
	set +e +o pipefail
	. "$KVX_SRC/tests/vm/lib.sh"
	[ "$KVX_RAILS" = 2 ] || fail "the VM has $KVX_RAILS rail(s), not 2"
	declare -A g
	for d in rxe0 rxe1 rxe2 rxe3; do g[$d]=$(gid_index $d) || fail "$d has no RoCE v2 GID"; done
	dir=/run/kvx/bench-rails
	rails_configs "$dir"
	# cpu_window OUT DELAY_S LEN_S PIDS: where the guest's CPU went in LEN_S seconds starting DELAY_S
	# from now (inside the steady-state window), in clock ticks: the whole guest from
	# /proc/stat (busy, softirq, idle) and the threads of kvxd (polling or not, by node),
	# kvx-bench and ib_write_bw (user + system)
	thread_ticks() { # PID...
		local p t st c r f
		for p in "$@"; do for t in /proc/"$p"/task/[0-9]*; do
			read -r st 2>/dev/null <"$t/stat" || continue
			c=${st#*(} c=${c%%)*} r=${st##*) }
			read -ra f <<<"$r"
			echo "${t#/proc/} ${c// /_} $((f[11] + f[12]))"
		done; done | LC_ALL=C sort -k1,1
	}
	cpu_window() { # OUT DELAY_S LEN_S PREFILL_PID DECODE_PID OTHER_PID... (child:PID: PID's children)
		local out=$1 a b pre=$4 dec=$5 p pids=()
		sleep "$2"
		for p in "${@:4}"; do
			case $p in
			child:*) pids+=($(pgrep -P "${p#child:}")) ;; # looked up now: it has forked
			*) pids+=("$p") ;;
			esac
		done
		a=$(grep '^cpu ' /proc/stat)
		thread_ticks "${pids[@]}" >"$out.0"
		sleep "$3"
		b=$(grep '^cpu ' /proc/stat)
		thread_ticks "${pids[@]}" >"$out.1"
		LC_ALL=C join "$out.0" "$out.1" | awk -v a="$a" -v b="$b" -v pre="${pre:--}/" -v dec="${dec:--}/" '
			BEGIN { split(a, x); split(b, y)
				for (i = 2; i <= 9; i++) tot += y[i] - x[i]
				busy = tot - (y[5] - x[5]) - (y[6] - x[6]); soft = y[8] - x[8] }
			{ d = $5 - $3; g = "other"
			  if (index($1, pre) == 1) g = ($2 ~ /^kvx-poll/) ? "prefill_poll" : "prefill_other"
			  else if (index($1, dec) == 1) g = ($2 ~ /^kvx-poll/) ? "decode_poll" : "decode_other"
			  else if ($2 == "kvx-bench") g = "kvx_bench"
			  else if ($2 == "ib_write_bw") g = "ib_write_bw"
			  n[g] += d }
			END { printf "ticks=%d busy=%d softirq=%d", tot, busy, soft
			      split("prefill_poll prefill_other decode_poll decode_other kvx_bench ib_write_bw", k, " ")
			      for (i = 1; i in k; i++) printf " %s=%d", k[i], n[k[i]]
			      printf "\n" }' >"$out"
		rm -f "$out.0" "$out.1"
	}
	win_at=$((margin / 1000)).5 win_len=$((secs - 2 * (margin / 1000) - 1))
	for i in $(seq 1 "$runs"); do
		for n in prefill decode; do
			start_bg "$n-$i" "$KVXD" -c "$dir/$n.ini"
		done
		wait_until 30 eval 'ctl decode peers 2>/dev/null | grep -q "^peer prefill .* state READY"' ||
			fail "run $i: the nodes did not connect"
		vm_log "kvx run $i"
		"$KVX_BENCH" --prefill /run/kvx/prefill.sock --decode /run/kvx/decode.sock --json \
			--duration "$secs" --warmup-ms "$margin" --cooldown-ms "$margin" \
			--window-check "$check" \
			--inflight "$inflight" --pages "$pages" --bufs 4 --page-size 4096 \
			>"$KVX_LOGDIR/kvx$i.json" 2>"$KVX_LOGDIR/kvx$i.err" &
		bench_pid=$!
		cpu_window "$KVX_LOGDIR/kvx$i.cpu" "$win_at" "$win_len" "$(bg_pid "prefill-$i")" \
			"$(bg_pid "decode-$i")" "$bench_pid"
		wait "$bench_pid"
		echo "rc=$? rail0_bytes=$(rail_metric prefill rail_bytes_posted_total 0) rail1_bytes=$(rail_metric prefill rail_bytes_posted_total 1)" \
			>"$KVX_LOGDIR/kvx$i.rc"
		stop_bg "decode-$i"
		stop_bg "prefill-$i"
		# a reference where either client exits with an error or prints no figure runs once
		# more (the failed try's logs stay, named ...-t1)
		for try in 1 2; do
			vm_log "ref run $i (try $try)"
			t=$i-t$try
			bw=(ib_write_bw -s 65536 -D "$secs")
			start_bg "srv0-$t" "${bw[@]}" -d rxe1 -x "${g[rxe1]}" -p 18515
			start_bg "srv1-$t" "${bw[@]}" -d rxe3 -x "${g[rxe3]}" -p 18516
			wait_for_port 18515 30 && wait_for_port 18516 30 || fail "ib_write_bw servers are not listening"
			start_bg "cli0-$t" timeout 120 "${bw[@]}" -d rxe0 -x "${g[rxe0]}" -p 18515 10.77.0.2
			start_bg "cli1-$t" timeout 120 "${bw[@]}" -d rxe2 -x "${g[rxe2]}" -p 18516 10.78.0.2
			# (the clients run under timeout: their ib_write_bw is its child)
			cpu_window "$KVX_LOGDIR/ref$i.cpu" "$win_at" "$win_len" - - \
				"child:$(bg_pid "cli0-$t")" "child:$(bg_pid "cli1-$t")" \
				"$(bg_pid "srv0-$t")" "$(bg_pid "srv1-$t")"
			rc=0
			for n in "cli0-$t" "cli1-$t" "srv0-$t" "srv1-$t"; do
				wait_bg "$n" $((secs + 30)) || rc=1
			done
			for n in cli0 cli1; do
				awk '/^ *#bytes/ { getline; ok = $4 ~ /^[0-9.]+$/; exit } END { exit !ok }' \
					"$KVX_LOGDIR/$n-$t.log" || rc=1
			done
			if [ $rc != 0 ] && [ $try = 1 ]; then
				# what still runs of the failed try (a server left waiting for its
				# client) must not hold the ports the next try listens on
				for n in "cli0-$t" "cli1-$t" "srv0-$t" "srv1-$t"; do stop_bg "$n"; done
				wait_until 10 eval '! listening 18515 && ! listening 18516' ||
					fail "the failed reference's ports stay in use"
				continue
			fi
			for n in cli0 cli1 srv0 srv1; do mv "$KVX_LOGDIR/$n-$t.log" "$KVX_LOGDIR/$n-$i.log"; done
			break
		done
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
inflight=${KVX_BENCH_INFLIGHT:-64}
if ! [[ "$inflight" =~ ^[1-9][0-9]*$ ]]; then
	echo "bench-rails: KVX_BENCH_INFLIGHT must be a whole number of rooms, at least 1" >&2
	exit 2
fi
pages=${KVX_BENCH_PAGES:-16}
if ! [[ "$pages" =~ ^[1-9][0-9]*$ ]] || [ $((pages % 16)) != 0 ] || [ "$pages" -gt 1024 ]; then
	echo "bench-rails: KVX_BENCH_PAGES must be a multiple of 16 from 16 to 1024" >&2
	exit 2
fi
# each node's pool is INFLIGHT x PAGES x 4 buffers x 4 KiB, in a guest of 2 GiB
if [ $((pages * inflight)) -gt 8192 ]; then
	echo "bench-rails: KVX_BENCH_PAGES x KVX_BENCH_INFLIGHT must be at most 8192 (each node's pool at most 512 MiB of the VM's 2 GiB)" >&2
	exit 2
fi
shape=64k-2rails
[ "$pages" = 16 ] || shape=64k-2rails-p$pages
check=${KVX_BENCH_CHECK:-sampled}
if [ "$check" != sampled ] && [ "$check" != full ]; then
	echo "bench-rails: KVX_BENCH_CHECK must be sampled or full" >&2
	exit 2
fi
# the timeout: kvx-vm stops the run 150 s before it, to describe a hang
logs=$build/vm-logs/bench-rails
"$here/scripts/kvx-vm" --build "$build" --rails 2 --timeout $((runs * (5 * secs + 60) + 210)) \
	"$here/scripts/bench-rails.sh" --vm "$secs" "$margin" "$runs" "$inflight" "$check" "$pages"

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
	for w in kvx ref; do
		[ -s "$logs/$w$i.cpu" ] || continue
		echo "bench-rails: run $i cpu $w: $(awk '{ split($1, t, "="); for (i = 2; i <= NF; i++) {
			split($i, v, "="); printf "%s%s=%.0f%%", (i > 2 ? " " : ""), v[1], 100 * v[2] / (t[2] ? t[2] : 1) } }' \
			"$logs/$w$i.cpu")"
	done
done
read -r _ kmed _ < <(tr ' ' '\n' <<<"$kvxs" | grep . | stats)
read -r _ rmed _ < <(tr ' ' '\n' <<<"$refs" | grep . | stats)
read -r rmin rmedr rmax < <(tr ' ' '\n' <<<"$ratios" | grep . | stats)
echo "bench: shape=$shape inflight=$inflight kvx=$kmed ref=$rmed unit=MBps ratio=$rmin/$rmedr/$rmax"
exit $status
