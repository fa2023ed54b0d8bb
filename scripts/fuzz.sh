#!/bin/sh
# fuzz.sh BUILD SECONDS TARGET...: run each libFuzzer target of a KVX_FUZZ build for SECONDS,
# one after the other, one process each (the machine is shared).  New inputs go to
# BUILD/corpus/TARGET (the checked-in seeds of tests/fuzz/corpus/TARGET are read only); a
# crash, leak or hang lands in BUILD/artifacts/.  Prints one line per target: executions,
# coverage (libFuzzer's cov: edges and ft: features), corpus size, time and crashes.  Exits 1 if
# any target found something.
set -u
cd "$(dirname "$0")/.." || exit 1
build=$1
seconds=$2
shift 2
mkdir -p "$build/artifacts" "$build/fuzz-logs"
status=0
summary=""
for t in "$@"; do
	bin=$build/tests/fuzz/$t
	log=$build/fuzz-logs/$t.log
	[ -x "$bin" ] || { echo "fuzz: $bin not built" >&2; exit 1; }
	mkdir -p "$build/corpus/$t"
	dict=""
	[ -f "tests/fuzz/$t.dict" ] && dict="-dict=tests/fuzz/$t.dict"
	echo "== $t: ${seconds}s (log: $log)"
	before=$(ls "$build/artifacts" | grep -c "^$t-" || true)
	start=$(date +%s)
	# shellcheck disable=SC2086
	"$bin" -max_total_time="$seconds" -timeout=30 -print_final_stats=1 \
		-artifact_prefix="$build/artifacts/$t-" $dict \
		"$build/corpus/$t" "tests/fuzz/corpus/$t" >"$log" 2>&1
	rc=$?
	took=$(($(date +%s) - start))
	after=$(ls "$build/artifacts" | grep -c "^$t-" || true)
	execs=$(sed -n 's/^stat::number_of_executed_units: *//p' "$log" | tail -n 1)
	cov=$(grep -E '^#[0-9]+.*cov: ' "$log" | tail -n 1 |
		sed -E 's/.*cov: ([0-9]+) ft: ([0-9]+) corp: ([0-9]+).*/cov=\1 ft=\2 corpus=\3/')
	crashes=$((after - before))
	line="$t: execs=${execs:-?} ${cov:-cov=?} time=${took}s crashes=$crashes rc=$rc"
	echo "$line"
	summary="$summary$line
"
	if [ "$rc" -ne 0 ] || [ "$crashes" -ne 0 ]; then
		status=1
		grep -E 'ERROR|SUMMARY|harness check|fuzz_[a-z]+:' "$log" | head -n 5
	fi
done
echo "== fuzz summary"
printf '%s' "$summary"
exit $status
