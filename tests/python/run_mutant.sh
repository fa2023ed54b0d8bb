#!/bin/bash
# run_mutant.sh PYDIR SRC NAME PYTEST_ARGS...: the Python tests PYTEST_ARGS against a copy of
# the kvx package of PYDIR (a build's python/ dir) with tests/python/mutants/NAME.sed applied to
# the file its "# target: python/kvx/FILE" line names.  A .py target is replaced in the copy; a
# .c target (the extension) is compiled again, linked with the build's libkvx.
# Exit 1 when the mutant is caught (pytest reports failed tests, exit 1, or the interpreter died
# of a signal: a crash the tests provoked), else 0, so ctest's WILL_FAIL and the VM test see a
# mutant that survives, a script that changes nothing or a pytest that could not run (exit 2-5)
# as not caught.
set -u
pydir=$1 src=$2 name=$3
shift 3
script=$src/tests/python/mutants/$name.sed
target=$(sed -n 's/^# target: \(python\/kvx\/[A-Za-z0-9_./]*\)$/\1/p' "$script")
[ -n "$target" ] && [ -f "$src/$target" ] || { echo "mutant $name: no '# target:' file" >&2; exit 0; }
tmp=$(mktemp -d) || exit 0
trap 'rm -rf "$tmp"' EXIT
cp -rL "$pydir/kvx" "$tmp/kvx" || exit 0
mut=$tmp/mutant.${target##*.}
sed -f "$script" "$src/$target" >"$mut" || exit 0
if cmp -s "$src/$target" "$mut"; then
	echo "mutant $name: the script changes nothing in $target" >&2
	exit 0
fi
echo "mutant $name applied to $target:"
diff "$src/$target" "$mut"
case $target in
*.py) cp "$mut" "$tmp/${target#python/}" ;;
*.c)
	build=$(cd "$pydir/.." && pwd)
	inc=$(/usr/bin/python3 -c 'import sysconfig; print(sysconfig.get_paths()["include"])')
	suffix=$(/usr/bin/python3 -c 'import sysconfig; print(sysconfig.get_config_var("EXT_SUFFIX"))')
	rm -f "$tmp"/kvx/_kvx.*.so
	# -w: a switched-in bug may leave something unused
	cc -shared -fPIC -O1 -w -D_GNU_SOURCE -I"$inc" -I"$src/include" -I"$build/include" "$mut" \
		-L"$build" -lkvx -Wl,-rpath,"$build" -o "$tmp/kvx/_kvx$suffix" || exit 0
	;;
esac
PYTHONPATH=$tmp PYTHONDONTWRITEBYTECODE=1 /usr/bin/python3 -m pytest -p no:cacheprovider "$@"
rc=$?
caught=0
[ $rc = 1 ] || [ $rc -ge 128 ] && caught=1
echo "mutant $name: pytest exit $rc ($([ $caught = 1 ] && echo caught || echo NOT caught))"
[ $caught = 1 ] && exit 1
exit 0
