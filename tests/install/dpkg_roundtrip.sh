#!/bin/bash
# dpkg_roundtrip.sh DEB SRC: install the .deb for real with dpkg -i, check it in place, then
# remove and purge it and check that nothing is left.  It changes the machine for a few
# seconds, so it is not a ctest test: run it by hand, as root, where no kvx package is
# installed and none of its files exist (it refuses otherwise).
#   tests/install/dpkg_roundtrip.sh build/kvx_0.1.0_amd64.deb .
# In place: dpkg -L lists every file, the ldconfig trigger ran (ldconfig -p has libkvx), the
# programs print the package's version, kvx.pc answers from the system's pkg-config path, a
# program built with it runs (tests/install/consumer.c), and the installed unit passes
# check_unit.sh.  After dpkg -r and dpkg -P: no file, no ldconfig entry, no package state.
set -u
deb=$1 src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pass=0 failed=0
ok() { pass=$((pass + 1)); echo "ok   $*"; }
bad() { failed=$((failed + 1)); echo "FAIL $*"; }

[ "$(id -u)" -eq 0 ] || { echo "dpkg_roundtrip: needs root" >&2; exit 2; }
if dpkg-query -W -f='${Status}' kvx 2>/dev/null | grep -qv 'not-installed'; then
	echo "dpkg_roundtrip: a kvx package is already known to dpkg: not touching it" >&2
	exit 2
fi
dpkg-deb --fsys-tarfile "$deb" | tar -t | sed 's#^\./#/#' | grep -v '/$' >"$tmp/files"
while read -r f; do
	if [ -e "$f" ] || [ -L "$f" ]; then
		echo "dpkg_roundtrip: $f exists already: not overwriting it" >&2
		exit 2
	fi
done <"$tmp/files"
version=$(dpkg-deb -f "$deb" Version)

dpkg -i "$deb" && ok "dpkg -i $(basename "$deb")" || bad "dpkg -i $(basename "$deb")"
missing=0
while read -r f; do
	dpkg -L kvx | grep -qxF "$f" && { [ -e "$f" ] || [ -L "$f" ]; } || missing=$((missing + 1))
done <"$tmp/files"
[ "$missing" -eq 0 ] && ok "dpkg -L kvx: all $(wc -l <"$tmp/files") files, in place" ||
	bad "$missing files not listed or not in place"
entry=$(ldconfig -p | grep 'libkvx\.so\.0 ' | xargs)
[ -n "$entry" ] && ok "ldconfig -p: $entry" ||
	bad "ldconfig does not know libkvx.so.0 (trigger not run?)"
for p in kvxd kvxctl kvx-bench; do
	out=$("/usr/bin/$p" --version 2>&1)
	[[ "$out" == "$p $version"* ]] && ok "/usr/bin/$p --version: $out" ||
		bad "/usr/bin/$p --version: $out"
done
pc=$(pkg-config --modversion kvx 2>&1)
[ "$pc" = "$version" ] && ok "pkg-config --modversion kvx: $pc" ||
	bad "pkg-config --modversion kvx: $pc"
# shellcheck disable=SC2046
if cc -std=c11 -Wall -Wextra -Werror -o "$tmp/consumer" "$src/tests/install/consumer.c" \
	$(pkg-config --cflags --libs kvx) && "$tmp/consumer" "$tmp/no-kvxd.sock"; then
	ok "consumer built with pkg-config runs against /usr/lib/libkvx"
else
	bad "consumer"
fi
if ! grep -q '^/usr/lib/python3/dist-packages/kvx/' "$tmp/files"; then
	:
elif out=$(cd / && /usr/bin/python3 -c 'import kvx; print(kvx.version(), kvx.__file__)' 2>&1) &&
	[[ "$out" == "$version /usr/lib/python3/dist-packages/kvx/__init__.py" ]]; then
	ok "python3 imports the packaged kvx: $out"
else
	bad "python3 -c 'import kvx': $out"
fi
unit=/lib/systemd/system/kvxd@.service
if "$src/tests/install/check_unit.sh" "$unit" "$src" >"$tmp/unit.log"; then
	ok "/lib/systemd/system/kvxd@.service passes check_unit.sh"
else
	bad "/lib/systemd/system/kvxd@.service: $(grep FAIL "$tmp/unit.log" | tr '\n' ' ')"
fi

dpkg -r kvx >/dev/null && ok "dpkg -r kvx" || bad "dpkg -r kvx"
dpkg -P kvx >/dev/null && ok "dpkg -P kvx" || bad "dpkg -P kvx"
left=0
while read -r f; do { [ -e "$f" ] || [ -L "$f" ]; } && left=$((left + 1)); done <"$tmp/files"
[ "$left" -eq 0 ] && ok "no file left" || bad "$left files left"
ldconfig -p | grep -q 'libkvx\.so' && bad "ldconfig still lists libkvx" || ok "ldconfig: no libkvx"
dpkg-query -W -f='${Status}' kvx 2>/dev/null | grep -qv 'not-installed' &&
	bad "dpkg still knows kvx: $(dpkg-query -W -f='${Status}' kvx)" || ok "dpkg: kvx not installed"

echo "$pass passed, $failed failed"
[ "$failed" -eq 0 ]
