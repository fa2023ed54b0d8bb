#!/bin/bash
# run_mutant.sh PYDIR SRC NAME PYTEST_ARGS...: the Python tests PYTEST_ARGS against a copy of
# the kvx package of PYDIR (a build's python/ dir) whose python/kvx/connectors/sglang.py has
# tests/python/mutants/NAME.sed applied.  Exit 1 when the mutant is caught (pytest reports
# failed tests: exit 1), else 0, so ctest's WILL_FAIL (and the VM test) see a mutant that
# survives, a script that changes nothing, or a pytest that could not run as not caught.
set -u
pydir=$1 src=$2 name=$3
shift 3
tmp=$(mktemp -d) || exit 0
trap 'rm -rf "$tmp"' EXIT
cp -rL "$pydir/kvx" "$tmp/kvx" || exit 0
f=kvx/connectors/sglang.py
sed -f "$src/tests/python/mutants/$name.sed" "$src/python/$f" >"$tmp/$f" || exit 0
if cmp -s "$src/python/$f" "$tmp/$f"; then
	echo "mutant $name: the script changes nothing in python/$f" >&2
	exit 0
fi
echo "mutant $name applied to python/$f:"
diff "$src/python/$f" "$tmp/$f"
PYTHONPATH=$tmp PYTHONDONTWRITEBYTECODE=1 /usr/bin/python3 -m pytest -p no:cacheprovider "$@"
rc=$?
echo "mutant $name: pytest exit $rc ($([ $rc = 1 ] && echo caught || echo NOT caught))"
[ $rc = 1 ] && exit 1
exit 0
