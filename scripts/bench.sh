#!/bin/bash
# bench.sh BUILD_DIR: kvx against perftest, in one boot of the Soft-RoCE VM (scripts/kvx-vm).
#
# For each shape below, kvx-bench and its perftest reference (same message size, same direction
# rxe0 -> rxe1) run interleaved, RUNS times each: kvx, ref, kvx, ref, ...  Each kvx run gets two
# fresh kvxd (prefill on rxe0, decode on rxe1), stopped before the reference runs (an idle kvxd
# still takes CPU from the 2 vCPUs).  Both are timed over the same steady-state window:
# ib_write_bw -D SECONDS counts only what it moves between a margin after its start and a margin
# before its end (by default SECONDS/4 in whole seconds: 2 s of 10), and kvx-bench --duration
# SECONDS --warmup-ms M --cooldown-ms M, with that margin M, counts only the rooms that end in
# between.  Every room is verified: the rooms filled inside that window with kvx-bench's sampled
# check (--window-check sampled: the first and last 8 bytes of every 512, so that the check's CPU
# stays the transfer's in the guest, where perftest checks nothing), the others byte for byte
# (KVX_BENCH_CHECK=full checks every room whole; see bench/kvx_bench.c).  bench.json has both windows'
# lengths (perftest's: its iterations over its rate).  ib_write_lat runs LAT_ITERS exchanges and
# reports their median (t_typical), half a round trip.  Bytes are in 10^6 B/s
# on both sides: perftest's "MB/sec" is MiB/s and is converted.  Around every kvx run the
# utime + stime of each kvxd (/proc/PID/stat, all threads) is read: CPU seconds per 10^9 B of
# the run's verified rooms.
#
# Prints, per shape, `bench-cpu: shape=NAME prefill=X decode=Y unit=cpu_s/GB` (medians); per
# kvx-bench shape `bench-blocks: shape=NAME prefill=X decode=Y kvx_bench=Z unit=blocks/room`
# (medians of the whole run's voluntary context switches, /proc/PID/task/*/status and
# kvx-bench's getrusage, over the rooms it opened: how often each process blocked and had to
# be woken per room, a count the host's load moves far less than a time); then
# one line per shape, last:
#   bench: shape=NAME kvx=X ref=Y unit=U ratio=MIN/MEDIAN/MAX
# kvx and ref are the medians of the runs; each ratio is kvx / ref of one interleaved pair.  For
# `lat` and `lat-spin` lower is better (kvx: open -> SUCCESS seen by decode, p50; ref:
# ib_write_lat's median); `floor*` are kvx-floor's p50 against the same reference (below).
# Every run goes to BUILD_DIR/bench.json; the logs stay in BUILD_DIR/vm-logs/bench/.
# Exits 1 if a run failed (a kvx-bench error, a byte that did not verify, no perftest result).
#
# The software ceiling (no VM, no RDMA), first and on the host: kvx-ceiling drives one prefill
# and one decode polling core over the fake verbs device on one thread (bench/kvx_ceiling.c),
# RUNS times per shape of CEILING_SHAPES, and reports per polling core rooms/s and WRs/s over the
# time inside that core's poll_once.  One line per shape, before the VM's:
#   bench: ceiling shape=NAME page_size=B prefill_core_rooms_per_s=MIN/MEDIAN/MAX ...
# Its runs go to BUILD_DIR/bench-ceiling.json (and, with the VM part, bench.json's "ceiling");
# its logs to BUILD_DIR/ceiling-logs/.  A ceiling run that fails (a room not SUCCESS, a byte that
# did not verify) fails the bench too.
#
# Env: KVX_BENCH_SECONDS (whole seconds per run, at least 4; 10), KVX_BENCH_RUNS (3),
# KVX_BENCH_LAT_ITERS (ib_write_lat exchanges, 2000), KVX_BENCH_SHAPES (all, in table order),
# KVX_BENCH_VM_TIMEOUT (seconds for the whole boot, 1800; kvx-vm stops a run 150 s before it),
# KVX_BENCH_ONLY (ceiling: only the host part, no VM; vm: only the VM part; empty: both),
# KVX_BENCH_CEILING_SECONDS (seconds per ceiling run, 2), KVX_BENCH_CEILING_PAGE_SIZE (bytes,
# 64), KVX_BENCH_CEILING_SHAPES (all three).
# KVX_BENCH_CHECK (sampled or full: kvx-bench's --window-check; sampled).
# Inside the VM it runs as `bench.sh --vm SECONDS MARGIN_MS RUNS LAT_ITERS CHECK SHAPE...`.
set -euo pipefail

# NAME       REF  BYTES    METRIC  kvx-bench shape (4 KiB pages)
SHAPES='
64k          bw   65536    MBps    --inflight 8 --pages 16 --bufs 4
64k-scatter  bw   65536    MBps    --inflight 8 --pages 16 --bufs 4 --scatter
64k-gather   bw   65536    MBps    --inflight 8 --pages 16 --bufs 4 --scatter-src
1m           bw   1048576  MBps    --inflight 8 --pages 256 --bufs 4
1page        bw   4096     per_s   --inflight 32 --pages 1 --bufs 1
1page-deep   bw   4096     per_s   --inflight 128 --pages 1 --bufs 1
1page-single bw   4096     per_s   --inflight 32 --pages 1 --bufs 1 --single
lat          lat  4096     us      --inflight 1 --pages 1 --bufs 1
lat-spin     lat  4096     us      --inflight 1 --pages 1 --bufs 1
lat-first    lat  4096     us      --inflight 1 --pages 1 --bufs 1 --chunks-first
lat-spin-first lat 4096    us      --inflight 1 --pages 1 --bufs 1 --chunks-first
1page-first  bw   4096     per_s   --inflight 32 --pages 1 --bufs 1 --chunks-first
lat-chunk    lat  4096     us_last --inflight 1 --pages 1 --bufs 1 --last-chunk-delay-ms 5
floor        lat  4096     us      floor: --threads 3 --park engine
floor-park   lat  4096     us      floor: --threads 3 --park all
floor-any    lat  4096     us      floor: --threads 2 --park none
floor-proc   lat  4096     us      floor: --threads 3 --park engine --engine-process
floor-proc2  lat  4096     us      floor: --threads 3 --park engine --engine-process --prefill-engine
floor-rate   bw   4096     per_s   floor: --park all --inflight 32 --rooms 20000 --warmup 2000
floor-rate-8 bw   4096     per_s   floor: --park all --inflight 32 --batch 8 --rooms 20000 --warmup 2000
'
# floor*: not kvx but kvx-floor (bench/kvx_floor.c), the floor of a one-page room's latency on
# this fabric: the metadata to prefill and the page back to decode, kvx's verbs layer alone (no
# kvxd).  floor: decode's engine in a thread of its own that blocks while it waits, as an engine
# in libkvx does, and polling cores that spin (the floor of lat-spin's design); floor-park: the
# polling cores park too (the floor of lat's); floor-any: decode's engine and polling core one
# thread, everything spinning (two busy threads, as ib_write_lat has: the floor of any design);
# floor-rate: 32 one-page rooms in flight, each its own record and page, polling cores that
# park (the floor of 1page's rate); floor-rate-8: the records of up to 8 rooms in one WRITE
# floor-proc: floor's engine a process of its own, as an engine and kvxd are (on the VM's
# emulated CPUs a switch between processes costs far more than one between threads); floor-proc2:
# that engine plays prefill's too and submits each room's chunk when its record came (two
# hand-offs to the engine's process per room, as kvx-bench's rooms have)
# lat-spin: the nodes' polling cores never park (idle_park_us = 0, kvxd's default on a real
# NIC); the VM's configs park them at once, since rxe's kernel work needs their CPU (README,
# Parking), which costs a room at a time the wake-ups of its cores.  lat-chunk: the same
# nodes as lat-spin, each room's chunk held back 5 ms, so that decode's ROOM_META is at prefill
# before it, as in serving, and timed from the chunk's submission to decode's SUCCESS (what
# serving waits for once prefill has computed)
# *-first: the same with kvx-bench --chunks-first: prefill's chunk goes at the open, neither
# engine waiting for the other's answer (the clock starts before both), as a prefill engine
# whose KV is ready submits it (the latency bar's "its chunk submitted at once"); without it
# kvx-bench submits the chunk once decode's open was answered, a wake-up of its process later
# METRIC: MBps  kvx window_MBps vs ib_write_bw's average (MiB/s -> 10^6 B/s)
#         per_s kvx window_rooms_per_s vs ib_write_bw's messages/s (a 1-page room is one message)
#         us    kvx window_lat_p50_us vs ib_write_lat's t_typical (its median)
#         us_last  kvx window_last_chunk_lat_p50_us vs the same

shape_row() { awk -v n="$1" '$1 == n' <<<"$SHAPES"; }

# ---- inside the VM --------------------------------------------------------------------------
if [ "${1:-}" = --vm ]; then
	secs=$2 margin=$3 runs=$4 lat_iters=$5 check=$6
	shift 6
	# lib.sh's helpers expect plain bash (they test and wait with failing commands)
	set +e +o pipefail
	. "$KVX_SRC/tests/vm/lib.sh"
	g0=$(gid_index rxe0) || fail "rxe0 has no RoCE v2 GID"
	g1=$(gid_index rxe1) || fail "rxe1 has no RoCE v2 GID"
	clk=$(getconf CLK_TCK)
	# utime + stime of a process, all threads, in clock ticks (fields 14 and 15 of
	# /proc/PID/stat, counted after the ")" that ends the command name)
	ticks() {
		local st
		read -r st <"/proc/$1/stat"
		st=${st##*) }
		awk '{ print $12 + $13 }' <<<"$st"
	}
	# kvx_up TAG [PARK_US] / kvx_down TAG: the two nodes of one kvx run (configs/prefill.ini
	# and decode.ini, like kvxd_start, under names of their own: start_bg takes each name once),
	# with idle_park_us = PARK_US when it is given
	kvx_up() {
		local n cfg
		for n in prefill decode; do
			cfg=$KVX_SRC/configs/$n.ini
			if [ -n "${2:-}" ]; then
				mkdir -p /run/kvx/bench-configs
				sed "s/^idle_park_us = .*/idle_park_us = $2/" "$cfg" \
					>"/run/kvx/bench-configs/$n.ini"
				grep -q "^idle_park_us = $2\$" "/run/kvx/bench-configs/$n.ini" ||
					fail "$n.ini has no idle_park_us line to set"
				cfg=/run/kvx/bench-configs/$n.ini
			fi
			start_bg "$n-$1" "$KVXD" -c "$cfg"
		done
		wait_peer decode prefill 30
		wait_peer prefill decode 30
		pp=$(bg_pid "prefill-$1")
		dp=$(bg_pid "decode-$1")
	}
	kvx_down() {
		stop_bg "decode-$1"
		stop_bg "prefill-$1"
	}
	# blocks PID: how often the threads of PID blocked (voluntary context switches: each a
	# wake-up later), summed over its threads
	blocks() {
		local t v s=0
		for t in /proc/"$1"/task/[0-9]*; do
			v=$(awk '/^voluntary_ctxt_switches:/ { print $2 }' "$t/status" 2>/dev/null)
			s=$((s + ${v:-0}))
		done
		echo "$s"
	}
	cpu_mark() { echo "$(ticks "$pp") $(ticks "$dp") $(blocks "$pp") $(blocks "$dp")"; }
	# cpu_write FILE BEFORE: kvxd ticks and blocks since BEFORE, and the kvx-bench exit code
	cpu_write() {
		local a b e f c d g h
		read -r a b e f <<<"$2"
		read -r c d g h <<<"$(cpu_mark)"
		echo "prefill_ticks=$((c - a)) decode_ticks=$((d - b)) clk_tck=$clk rc=$3" \
			"prefill_blocks=$((g - e)) decode_blocks=$((h - f))" >"$1"
	}
	for shape in "$@"; do
		read -r name ref bytes metric kargs <<<"$(shape_row "$shape")"
		[ -n "${name:-}" ] || fail "unknown shape $shape"
		for i in $(seq 1 "$runs"); do
			out=$KVX_LOGDIR/$name-kvx$i
			if [ "${kargs%% *}" = floor: ]; then
				vm_log "$name: run $i: kvx-floor ${kargs#floor: }"
				rc=0
				# shellcheck disable=SC2086
				"$KVX_BUILD/kvx-floor" --decode-gid "$g1" --prefill-gid "$g0" --json \
					--size "$bytes" --rooms "$lat_iters" ${kargs#floor: } \
					>"$out.json" 2>"$out.err" || rc=$?
				# no kvxd: no CPU to count
				echo "prefill_ticks=0 decode_ticks=0 clk_tck=$clk rc=$rc" >"$out.cpu"
				vm_log "$name: run $i: exit $rc, $(cat "$out.json")"
			else
				vm_log "$name: kvx run $i: kvx-bench $kargs"
				park=
				case $name in lat-spin | lat-spin-first | lat-chunk) park=0 ;; esac
				kvx_up "$name-$i" $park
				before=$(cpu_mark)
				rc=0
				# shellcheck disable=SC2086
				"$KVX_BENCH" --prefill /run/kvx/prefill.sock --decode /run/kvx/decode.sock \
					--json --duration "$secs" --warmup-ms "$margin" --cooldown-ms "$margin" \
					--window-check "$check" $kargs \
					>"$out.json" 2>"$out.err" || rc=$?
				cpu_write "$out.cpu" "$before" "$rc"
				vm_log "$name: kvx run $i: exit $rc, $(cat "$out.cpu")"
				kvx_down "$name-$i"
			fi

			out=$KVX_LOGDIR/$name-ref$i
			if [ "$ref" = lat ]; then
				cmd=(ib_write_lat -s "$bytes" -n "$lat_iters")
				col=5 # t_typical
			else
				cmd=(ib_write_bw -s "$bytes" -D "$secs")
				col=4 # BW average
			fi
			# the reference: server on rxe1, client on rxe0 (rxe0 -> rxe1, like kvx).  A run
			# where either side fails (perftest on rxe now and then ends both without a
			# figure, and ib_write_lat now and then prints "inf" for every time) is run once
			# more; a failed try's logs stay as NAME-refI-tTRY-*.log.
			for try in 1 2; do
				t=$name-ref$i-t$try
				vm_log "$name: ref run $i (try $try): ${cmd[*]}"
				start_bg "$t-srv" "${cmd[@]}" -d rxe1 -x "$g1"
				wait_for_port 18515 30 || fail "$name: ${cmd[0]} server does not listen"
				start_bg "$t-cli" "${cmd[@]}" -d rxe0 -x "$g0" 10.77.0.2
				rc=0
				srv=0
				wait_bg "$t-cli" 120 || rc=$?
				wait_bg "$t-srv" 30 || srv=$?
				if [ "$rc" = 0 ] && ! awk -v c="$col" '/^ *#bytes/ { getline
					ok = $c ~ /^[0-9.]+$/ && $c + 0 > 0; exit } END { exit !ok }' \
					"$KVX_LOGDIR/$t-cli.log"; then
					rc=no-figure
				fi
				# (a second try with no figure is kept: the report counts it as a failed run,
				# and the shapes after it still run)
				if [ "$srv" = 0 ] && { [ "$rc" = 0 ] ||
					{ [ "$rc" = no-figure ] && [ "$try" = 2 ]; }; }; then
					mv "$KVX_LOGDIR/$t-srv.log" "$KVX_LOGDIR/$name-ref$i-srv.log"
					mv "$KVX_LOGDIR/$t-cli.log" "$KVX_LOGDIR/$name-ref$i-cli.log"
					break
				fi
				stop_bg "$t-cli" KILL
				stop_bg "$t-srv" KILL
				[ "$try" = 1 ] || fail "$name: ${cmd[0]} failed twice (client $rc, server $srv)"
				vm_log "$name: ref run $i failed (client $rc, server $srv): once more"
			done
			echo "rc=$rc" >"$out.rc"
		done
	done
	exit 0
fi

# ---- on the host ----------------------------------------------------------------------------
here=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$here/build}" && pwd)
secs=${KVX_BENCH_SECONDS:-10}
if ! [[ "$secs" =~ ^[0-9]+$ ]] || [ "$secs" -lt 4 ]; then
	echo "bench: KVX_BENCH_SECONDS must be whole seconds, at least 4" >&2
	exit 2
fi
# ib_write_bw's default margin at each end of -D SECONDS (perftest: duration / 4, whole seconds)
margin=$((secs / 4))
margin=$((margin * 1000))
runs=${KVX_BENCH_RUNS:-3}
lat_iters=${KVX_BENCH_LAT_ITERS:-2000}
check=${KVX_BENCH_CHECK:-sampled}
if [ "$check" != sampled ] && [ "$check" != full ]; then
	echo "bench: KVX_BENCH_CHECK must be sampled or full" >&2
	exit 2
fi
tmo=${KVX_BENCH_VM_TIMEOUT:-1800}
read -r -a shapes <<<"${KVX_BENCH_SHAPES:-$(awk 'NF { printf "%s ", $1 }' <<<"$SHAPES")}"
for s in "${shapes[@]}"; do
	[ -n "$(shape_row "$s")" ] || { echo "bench: unknown shape $s" >&2; exit 2; }
done
logs=$build/vm-logs/bench
json=$build/bench.json
only=${KVX_BENCH_ONLY:-}
case $only in
'' | ceiling | vm) ;;
*)
	echo "bench: KVX_BENCH_ONLY must be ceiling, vm or empty" >&2
	exit 2
	;;
esac

# ---- the software ceiling, on the host ------------------------------------------------------
ceil_shapes=${KVX_BENCH_CEILING_SHAPES:-1page 64k 64k-scatter 64k-gather}
ceil_secs=${KVX_BENCH_CEILING_SECONDS:-2}
ceil_ps=${KVX_BENCH_CEILING_PAGE_SIZE:-64}
ceil_logs=$build/ceiling-logs
ceil_json=$build/bench-ceiling.json
# the figures of kvx-ceiling's JSON that the summary line carries (min/median/max of the runs);
# thread_cpu_share is the run's CPU time over its wall time: well below 1, the host was busy and
# every time inside poll_once includes some waiting for the CPU
CEIL_KEYS='prefill_core_rooms_per_s prefill_core_wrs_per_s prefill_core_excl_device_rooms_per_s
 prefill_core_excl_device_wrs_per_s decode_core_rooms_per_s driver_ns_per_room wall_rooms_per_s
 thread_cpu_share'
if [ "$only" != vm ] && [ "${KVX_BENCH_REPORT_ONLY:-0}" != 1 ]; then
	mkdir -p "$ceil_logs"
	# run by run, each shape in turn, so that a slow spell of the host spreads over the shapes
	for i in $(seq 1 "$runs"); do
		for s in $ceil_shapes; do
			rc=0
			"$build/kvx-ceiling" --shape "$s" --seconds "$ceil_secs" \
				--page-size "$ceil_ps" --json >"$ceil_logs/$s-$i.json" \
				2>"$ceil_logs/$s-$i.err" || rc=$?
			echo "rc=$rc" >"$ceil_logs/$s-$i.rc"
		done
	done
fi

if [ "$only" != ceiling ] && [ "${KVX_BENCH_REPORT_ONLY:-0}" != 1 ]; then
	"$here/scripts/kvx-vm" --build "$build" --timeout "$tmo" "$here/scripts/bench.sh" --vm \
		"$secs" "$margin" "$runs" "$lat_iters" "$check" "${shapes[@]}"
fi

# jnum FILE KEY: a scalar of kvx-bench's one-line JSON (empty if absent)
jnum() { sed -n "s/.*\"$2\": *\"\{0,1\}\([^,\"}]*\)\"\{0,1\}.*/\1/p" "$1" 2>/dev/null | head -n 1; }
# kv FILE KEY: KEY=value from a .cpu file
kv() { tr ' ' '\n' <"$1" | sed -n "s/^$2=//p"; }
# perftest's result row (after the "#bytes" header): "ITERATIONS COLUMN"
row() { awk -v c="$2" '/^ *#bytes/ { getline; print $2, $c; exit }' "$1" 2>/dev/null; }
calc() { awk "BEGIN { printf \"%.${1}f\", $2 }"; }
# median and spread of numbers on stdin: "MIN MEDIAN MAX" (median of an even count: the mean of
# the middle two)
stats() {
	sort -g | awk '{ v[NR] = $1 } END {
		if (!NR) { print "nan nan nan"; exit }
		m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
		print v[1], m, v[NR] }'
}

# stats, with every number in fixed point (one decimal; the median of an even count is a mean)
cstats() {
	sort -g | awk 'BEGIN { OFMT = CONVFMT = "%.1f" } { v[NR] = $1 } END {
		if (!NR) { print "nan nan nan"; exit }
		m = NR % 2 ? v[(NR + 1) / 2] : (v[NR / 2] + v[NR / 2 + 1]) / 2
		print v[1], m, v[NR] }'
}

status=0

# ---- the ceiling's report -------------------------------------------------------------------
ceil_lines=()
if [ "$only" != vm ]; then
	ceil_shapes_json=() ceil_runs_json=()
	for s in $ceil_shapes; do
		declare -A cvals=()
		for i in $(seq 1 "$runs"); do
			f=$ceil_logs/$s-$i.json
			crc=$(sed -n 's/^rc=//p' "$ceil_logs/$s-$i.rc" 2>/dev/null || true)
			if [ "${crc:-x}" != 0 ] || [ "$(jnum "$f" verified)" != ok ]; then
				echo "bench: ceiling $s run $i failed (exit ${crc:-?}): $(cat "$f" "${f%.json}.err" 2>/dev/null)" >&2
				status=1
				ceil_runs_json+=("{\"shape\": \"$s\", \"run\": $i, \"ok\": false}")
				continue
			fi
			ceil_runs_json+=("$(cat "$f")")
			for k in $CEIL_KEYS; do
				cvals[$k]+="$(jnum "$f" "$k") "
			done
		done
		line="bench: ceiling shape=$s page_size=$ceil_ps"
		sj="{\"shape\": \"$s\", \"page_size\": $ceil_ps"
		for k in $CEIL_KEYS; do
			read -r mn md mx < <(tr ' ' '\n' <<<"${cvals[$k]:-}" | grep . | cstats)
			line+=" $k=$mn/$md/$mx"
			sj+=", \"$k\": {\"min\": ${mn/nan/null}, \"median\": ${md/nan/null}, \"max\": ${mx/nan/null}}"
		done
		unset cvals
		ceil_lines+=("$line")
		ceil_shapes_json+=("$sj}")
	done
	{
		printf '{"seconds": %s, "page_size": %s, "runs_per_shape": %s,\n' \
			"$ceil_secs" "$ceil_ps" "$runs"
		printf ' "note": "per polling core: rooms (or WRs) over the time inside that core'"'"'s kvx_pcore_poll_once calls that did work, one prefill and one decode core on one host thread over the fake verbs device; excl_device leaves out the fake device'"'"'s post call, which executes the writes; summary figures are min, median, max of the runs",\n'
		printf ' "shapes": [\n  %s\n ],\n' "$(IFS=$'\n'; sed '2,$s/^/  /;$!s/$/,/' <<<"${ceil_shapes_json[*]}")"
		printf ' "runs": [\n  %s\n ]}\n' "$(IFS=$'\n'; sed '2,$s/^/  /;$!s/$/,/' <<<"${ceil_runs_json[*]}")"
	} >"$ceil_json"
fi
if [ "$only" = ceiling ]; then
	echo "bench: every ceiling run in $ceil_json; logs in $ceil_logs"
	printf '%s\n' "${ceil_lines[@]}"
	exit "$status"
fi

# ---- the VM's report ------------------------------------------------------------------------
runs_json=()
# the check the runs had (KVX_BENCH_REPORT_ONLY reports runs an earlier call made)
for k in "$logs"/*-kvx1.json; do
	c=$(jnum "$k" window_check)
	[ -z "$c" ] || check=$c
	break
done
shapes_json=()
cpu_lines=()
blk_lines=()
lines=()
for s in "${shapes[@]}"; do
	read -r name ref bytes metric kargs <<<"$(shape_row "$s")"
	ktool=kvx-bench
	[ "${kargs%% *}" != floor: ] || ktool=kvx-floor
	kvx_vals=() ref_vals=() ratios=() pcpu=() dcpu=() pblk=() dblk=() bblk=()
	for i in $(seq 1 "$runs"); do
		k=$logs/$name-kvx$i.json
		kc=$logs/$name-kvx$i.cpu
		case $metric in
		MBps) kval=$(jnum "$k" window_MBps) unit=1e6B/s ;;
		per_s) kval=$(jnum "$k" window_rooms_per_s) unit=rooms/s_vs_msgs/s ;;
		us) kval=$(jnum "$k" window_lat_p50_us) unit=us_p50 ;;
		us_last) kval=$(jnum "$k" window_last_chunk_lat_p50_us) unit=us_p50 ;;
		esac
		krc=$(kv "$kc" rc 2>/dev/null || true)
		kbytes=$(jnum "$k" bytes)
		if [ "${krc:-x}" != 0 ] || [ "$(jnum "$k" verified)" != ok ] || [ -z "$kval" ] ||
			[ "$(calc 6 "${kval:-0}")" = "$(calc 6 0)" ]; then
			echo "bench: $name kvx run $i failed (exit ${krc:-?}): $(cat "$k" "${k%.json}.err" 2>/dev/null)" >&2
			status=1
			kval=nan
		fi
		ticks_p=$(kv "$kc" prefill_ticks 2>/dev/null || echo 0)
		ticks_d=$(kv "$kc" decode_ticks 2>/dev/null || echo 0)
		clk=$(kv "$kc" clk_tck 2>/dev/null || echo 100)
		gb=$(calc 9 "${kbytes:-0} / 1e9")
		if [ "$(calc 9 "$gb")" != "$(calc 9 0)" ]; then
			pc=$(calc 3 "$ticks_p / $clk / $gb")
			dc=$(calc 3 "$ticks_d / $clk / $gb")
		else
			pc=nan dc=nan
		fi
		pcpu+=("$pc") dcpu+=("$dc")
		# blocks per room (kvx-bench's runs only): each kvxd's threads and kvx-bench, whole run
		nrooms=$(jnum "$k" rooms)
		blk_p=$(kv "$kc" prefill_blocks 2>/dev/null || true)
		blk_d=$(kv "$kc" decode_blocks 2>/dev/null || true)
		blk_b=$(jnum "$k" ctx_switches_voluntary)
		if [ "$ktool" = kvx-bench ] && [ "${nrooms:-0}" -gt 0 ] 2>/dev/null &&
			[ -n "$blk_p" ] && [ -n "$blk_d" ] && [ -n "$blk_b" ]; then
			pb=$(calc 2 "$blk_p / $nrooms") db=$(calc 2 "$blk_d / $nrooms")
			bb=$(calc 2 "$blk_b / $nrooms")
		else
			pb=nan db=nan bb=nan
		fi
		pblk+=("$pb") dblk+=("$db") bblk+=("$bb")
		runs_json+=("{\"shape\": \"$name\", \"run\": $i, \"tool\": \"$ktool\", \"value\": ${kval/nan/null}, \"unit\": \"$unit\", \"prefill_cpu_s_per_GB\": ${pc/nan/null}, \"decode_cpu_s_per_GB\": ${dc/nan/null}, \"prefill_cpu_ticks\": $ticks_p, \"decode_cpu_ticks\": $ticks_d, \"clk_tck\": $clk, \"prefill_blocks_per_room\": ${pb/nan/null}, \"decode_blocks_per_room\": ${db/nan/null}, \"kvx_bench_blocks_per_room\": ${bb/nan/null}, \"kvx_bench\": $(cat "$k" 2>/dev/null || echo null)}")

		r=$logs/$name-ref$i-cli.log
		rc=$logs/$name-ref$i.rc
		if [ "$ref" = lat ]; then
			read -r iters raw < <(row "$r" 5) || true
			rval=${raw:-}
			rwin=null
			tool=ib_write_lat
		else
			read -r iters raw < <(row "$r" 4) || true
			tool=ib_write_bw
			if [ -n "${raw:-}" ]; then
				# perftest's MB/sec is MiB/s
				if [ "$metric" = per_s ]; then
					rval=$(calc 1 "$raw * 1048576 / $bytes")
				else
					rval=$(calc 3 "$raw * 1.048576")
				fi
				# the time its count covers: its middle window
				rwin=$(awk -v n="$iters" -v b="$bytes" -v m="$raw" \
					'BEGIN { if (m > 0) printf "%.3f", n * b / (m * 1048576); else print "null" }')
			fi
		fi
		if [ "$(kv "$rc" rc 2>/dev/null || echo x)" != 0 ] || [ -z "${raw:-}" ] ||
			[ "$(calc 6 "${raw:-0}")" = "$(calc 6 0)" ]; then
			echo "bench: $name $tool run $i gave no result: $(tail -n 5 "$r" 2>/dev/null)" >&2
			status=1
			rval=nan rwin=null iters=0 raw=0
		fi
		runs_json+=("{\"shape\": \"$name\", \"run\": $i, \"tool\": \"$tool\", \"value\": ${rval/nan/null}, \"unit\": \"$unit\", \"bytes\": $bytes, \"iterations\": ${iters:-0}, \"perftest_column\": ${raw:-0}, \"window_seconds\": $rwin}")
		kvx_vals+=("$kval") ref_vals+=("$rval")
		if [ "$kval" != nan ] && [ "$rval" != nan ]; then
			ratios+=("$(calc 3 "$kval / $rval")")
		fi
	done
	read -r _ kmed _ < <(printf '%s\n' "${kvx_vals[@]}" | grep -v nan | stats)
	read -r _ rmed _ < <(printf '%s\n' "${ref_vals[@]}" | grep -v nan | stats)
	read -r rmin rmid rmax < <(printf '%s\n' "${ratios[@]}" | grep . | stats)
	read -r _ pmed _ < <(printf '%s\n' "${pcpu[@]}" | grep -v nan | stats)
	read -r _ dmed _ < <(printf '%s\n' "${dcpu[@]}" | grep -v nan | stats)
	cpu_lines+=("bench-cpu: shape=$name prefill=$pmed decode=$dmed unit=cpu_s/GB")
	if [ "$ktool" = kvx-bench ]; then
		read -r _ pbm _ < <(printf '%s\n' "${pblk[@]}" | grep -v nan | stats)
		read -r _ dbm _ < <(printf '%s\n' "${dblk[@]}" | grep -v nan | stats)
		read -r _ bbm _ < <(printf '%s\n' "${bblk[@]}" | grep -v nan | stats)
		blk_lines+=("bench-blocks: shape=$name prefill=$pbm decode=$dbm kvx_bench=$bbm unit=blocks/room")
	fi
	lines+=("bench: shape=$name kvx=$kmed ref=$rmed unit=$unit ratio=$rmin/$rmid/$rmax")
	shapes_json+=("{\"shape\": \"$name\", \"unit\": \"$unit\", \"kvx_median\": ${kmed/nan/null}, \"ref_median\": ${rmed/nan/null}, \"ratio_min\": ${rmin/nan/null}, \"ratio_median\": ${rmid/nan/null}, \"ratio_max\": ${rmax/nan/null}, \"prefill_cpu_s_per_GB_median\": ${pmed/nan/null}, \"decode_cpu_s_per_GB_median\": ${dmed/nan/null}}")
done

{
	printf '{"seconds": %s, "margin_ms": %s, "runs_per_shape": %s, "lat_iters": %s, "window_check": "%s",\n' \
		"$secs" "$margin" "$runs" "$lat_iters" "$check"
	printf ' "units": {"1e6B/s": "10^6 bytes per second", "rooms/s_vs_msgs/s": "kvx rooms/s vs ib_write_bw 4 KiB messages/s", "us_p50": "microseconds, median", "cpu_s_per_GB": "kvxd utime+stime per 10^9 B of verified rooms"},\n'
	printf ' "shapes": [\n  %s\n ],\n' "$(IFS=$'\n'; sed '2,$s/^/  /;$!s/$/,/' <<<"${shapes_json[*]}")"
	if [ "$only" != vm ]; then
		printf ' "ceiling": %s,\n' "$(sed '2,$s/^/ /' "$ceil_json")"
	fi
	printf ' "runs": [\n  %s\n ]}\n' "$(IFS=$'\n'; sed '2,$s/^/  /;$!s/$/,/' <<<"${runs_json[*]}")"
} >"$json"

echo "bench: every run in $json; logs in $logs"
printf '%s\n' "${ceil_lines[@]}" "${cpu_lines[@]}" "${blk_lines[@]}" "${lines[@]}"
exit "$status"
