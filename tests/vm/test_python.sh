#!/bin/bash
# test_python.sh: the Python package kvx (python/) on two kvxd: tests/python/vm under pytest
# (Python prefill and decode rooms byte-exact, events through asyncio, the SGLang-shaped
# connector to Success, aborts with canaries, errors from kvxd); then the canary test again
# against the connector with tests/python/mutants/release_on_failed.sed applied (pages handed
# back at FAILED), which must fail on its canary assertion.  Plain builds only: a sanitizer
# build has no Python extension.
. "$(dirname "$0")/lib.sh"

[ -e "$KVX_BUILD/python/kvx/__init__.py" ] ||
	fail "no Python package in $KVX_BUILD/python (a sanitizer build has none: use the plain build)"
export PYTHONPATH=$KVX_BUILD/python PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1

kvxd_start prefill
kvxd_start decode
wait_peer decode prefill 20
wait_peer prefill decode 20

cd "$KVX_SRC/tests/python/vm" || fail "no tests/python/vm"
log=$KVX_LOGDIR/pytest.log
# -rA: a line per test with its outcome; -s: the tests' own figures (canaries) in the log
/usr/bin/python3 -m pytest -p no:cacheprovider -q -rA -s . </dev/null >"$log" 2>&1
rc=$?
cat "$log"
[ $rc = 0 ] || fail "pytest tests/python/vm: exit $rc"
for n in prefill decode; do
	left=$(ctl $n rooms | awk '/^rooms / { print $2 }')
	[ "$left" = 0 ] || fail "$n still holds $left rooms: $(ctl $n rooms)"
done

# the negative control: the canary test must catch a connector that hands pages back at FAILED
mlog=$KVX_LOGDIR/pytest-mutant-release_on_failed.log
"$KVX_SRC/tests/python/run_mutant.sh" "$KVX_BUILD/python" "$KVX_SRC" release_on_failed \
	-q -rA -s test_sglang.py -k test_abort_canaries </dev/null >"$mlog" 2>&1
mrc=$?
cat "$mlog"
[ $mrc = 1 ] || fail "mutant release_on_failed was not caught"
grep -q "canary bytes changed after the pages were handed back" "$mlog" ||
	fail "mutant release_on_failed failed the test, but not on its canaries"
echo "PASS: python"
