#!/bin/bash
# check_stage.sh STAGE VERSION CC SRC: what `cmake --install --prefix STAGE` put in place is
# whole and usable.  The binaries print VERSION; libkvx has its SONAME (libkvx.so.MAJOR), the
# version links and exports exactly the functions kvx/kvx.h declares; kvx.pc names STAGE; a
# program built with `pkg-config --cflags --libs kvx` (tests/install/consumer.c) links against
# the staged library, loads it and reports a missing kvxd socket as ENOENT; the unit and the
# example configs are there.  One line per check; exits 1 when any failed.
set -u
stage=$1 version=$2 cc=$3 src=$4
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pass=0 failed=0
ok() { pass=$((pass + 1)); echo "ok   $*"; }
bad() { failed=$((failed + 1)); echo "FAIL $*"; }
check() { # check "WHAT" CMD...: CMD succeeds
	local what=$1
	shift
	if "$@" >/dev/null 2>&1; then ok "$what"; else bad "$what"; fi
}

export PKG_CONFIG_PATH='' PKG_CONFIG_LIBDIR=''
for d in "$stage"/lib*/pkgconfig "$stage"/lib/*/pkgconfig; do
	[ -f "$d/kvx.pc" ] && PKG_CONFIG_PATH=$d
done
# only the stage: nothing installed on this machine may answer for it
export PKG_CONFIG_LIBDIR=$PKG_CONFIG_PATH
if [ -z "$PKG_CONFIG_PATH" ]; then
	bad "kvx.pc under $stage/lib*/pkgconfig"
	echo "$pass passed, $failed failed"
	exit 1
fi
ok "kvx.pc in $PKG_CONFIG_PATH"
libdir=$(pkg-config --variable=libdir kvx)
includedir=$(pkg-config --variable=includedir kvx)
[ "$(pkg-config --variable=prefix kvx)" = "$stage" ] && ok "kvx.pc: prefix=$stage" ||
	bad "kvx.pc: prefix=$(pkg-config --variable=prefix kvx), want $stage"
[ "$(pkg-config --modversion kvx)" = "$version" ] && ok "kvx.pc: Version: $version" ||
	bad "kvx.pc: Version: $(pkg-config --modversion kvx), want $version"
[ "$libdir" = "$(dirname "$PKG_CONFIG_PATH")" ] && ok "kvx.pc: libdir=$libdir" ||
	bad "kvx.pc: libdir=$libdir, the file is in $PKG_CONFIG_PATH"

# the library: real file, SONAME link, development link
major=${version%%.*}
lib=$libdir/libkvx.so.$version
check "libkvx.so.$version is a file" test -f "$lib" -a ! -L "$lib"
[ "$(readlink "$libdir/libkvx.so.$major")" = "libkvx.so.$version" ] &&
	ok "libkvx.so.$major -> libkvx.so.$version" ||
	bad "libkvx.so.$major is not a link to libkvx.so.$version"
[ "$(readlink -f "$libdir/libkvx.so")" = "$lib" ] && ok "libkvx.so -> libkvx.so.$version" ||
	bad "libkvx.so does not lead to libkvx.so.$version"
soname=$(readelf -d "$lib" 2>/dev/null | sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p')
[ "$soname" = "libkvx.so.$major" ] && ok "SONAME $soname" ||
	bad "SONAME '$soname', want libkvx.so.$major"
# exports: exactly the functions the public header declares
grep -E '^[a-z].*[ *]kvx_[a-z_]+\(' "$includedir/kvx/kvx.h" 2>/dev/null |
	sed -E 's/.*[ *](kvx_[a-z_]+)\(.*/\1/' | sort -u >"$tmp/declared"
nm -D --defined-only "$lib" 2>/dev/null | awk '$2 ~ /^[TtWwDdBbRrVv]$/ {print $3}' |
	sed 's/@.*//' | sort -u >"$tmp/exported"
if [ -s "$tmp/declared" ] && cmp -s "$tmp/declared" "$tmp/exported"; then
	ok "libkvx exports the $(wc -l <"$tmp/declared") functions of kvx/kvx.h, nothing else"
else
	bad "libkvx's exports differ from kvx/kvx.h's functions (< declared, > exported):" \
		"$(diff "$tmp/declared" "$tmp/exported" | grep '^[<>]' | tr '\n' ' ')"
fi
check "include/kvx/kvx.h" test -f "$includedir/kvx/kvx.h"
grep -q "^#define KVX_VERSION_STRING \"$version\"$" "$includedir/kvx/version.h" 2>/dev/null &&
	ok "kvx/version.h: $version" || bad "kvx/version.h does not say $version"

# a program built from the .pc alone, strict
cflags=$(pkg-config --cflags kvx) libs=$(pkg-config --libs kvx)
[[ " $cflags " == *" -I$stage/"* ]] && ok "pkg-config --cflags: $cflags" ||
	bad "pkg-config --cflags '$cflags' does not point into $stage"
# shellcheck disable=SC2086
if "$cc" -std=c11 -Wall -Wextra -Werror -pedantic -o "$tmp/consumer" \
	"$src/tests/install/consumer.c" $cflags $libs >"$tmp/cc.log" 2>&1; then
	ok "consumer builds with pkg-config --cflags --libs kvx"
	loaded=$(LD_LIBRARY_PATH=$libdir ldd "$tmp/consumer" |
		awk -v so="libkvx.so.$major" '$1 == so {print $3}')
	[ "$loaded" = "$libdir/libkvx.so.$major" ] && ok "consumer loads $loaded" ||
		bad "consumer loads libkvx from '$loaded', not $libdir"
	out=$(LD_LIBRARY_PATH=$libdir "$tmp/consumer" "$tmp/no-kvxd.sock" 2>&1)
	rc=$?
	echo "$out" | sed 's/^/     /'
	if [ $rc -eq 0 ] && grep -q "^consumer: libkvx $version, headers $version$" <<<"$out" &&
		grep -q "No such file or directory" <<<"$out"; then
		ok "consumer runs: version $version, a missing kvxd is ENOENT"
	else
		bad "consumer -> $rc"
	fi
else
	bad "consumer does not build: $(tr '\n' ' ' <"$tmp/cc.log")"
fi

# the programs: in bin/, print the project version (kvxctl and kvx-bench load the staged libkvx)
for p in kvxd kvxctl kvx-bench; do
	out=$(LD_LIBRARY_PATH=$libdir "$stage/bin/$p" --version 2>&1)
	want="$p $version"
	[ "$p" != kvxd ] && want="$want (libkvx $version)"
	[ "$out" = "$want" ] && ok "bin/$p --version: $out" ||
		bad "bin/$p --version: '$out', want '$want'"
done

# the Python package, when the build has it: in lib/python3/dist-packages (Debian's layout),
# importable by /usr/bin/python3 from there, loading the staged libkvx through its RUNPATH,
# and a missing kvxd is kvx.Error ENOENT
pydir=$stage/lib/python3/dist-packages
if [ -n "${KVX_EXPECT_PYTHON:-}" ]; then
	check "lib/python3/dist-packages/kvx/__init__.py" test -f "$pydir/kvx/__init__.py"
	check "lib/python3/dist-packages/kvx/connectors/sglang.py" \
		test -f "$pydir/kvx/connectors/sglang.py"
	ext=$(ls "$pydir"/kvx/_kvx*.so 2>/dev/null | head -n 1)
	loaded=$(ldd "$ext" 2>/dev/null | awk -v so="libkvx.so.$major" '$1 == so {print $3}')
	[ -n "$loaded" ] && [ "$(readlink -f "$loaded")" = "$(readlink -f "$libdir/libkvx.so.$major")" ] &&
		ok "the Python extension loads the staged libkvx ($loaded)" ||
		bad "the Python extension loads libkvx from '$loaded', not $libdir"
	out=$(cd / && PYTHONPATH=$pydir /usr/bin/python3 -c '
import errno, sys, kvx
assert kvx.__file__.startswith(sys.argv[1]), kvx.__file__
try:
    kvx.connect(sys.argv[2])
except kvx.Error as e:
    assert e.errno == errno.ENOENT, e
    print("python: kvx", kvx.version(), "ENOENT")
' "$pydir" "$tmp/no-kvxd.sock" 2>&1)
	[ "$out" = "python: kvx $version ENOENT" ] && ok "python3 imports the staged kvx: $out" ||
		bad "python3 and the staged kvx: $out"
fi

# the unit, the example configs (and nothing in etc/)
unit=$stage/lib/systemd/system/kvxd@.service
grep -qx "ExecStart=$stage/bin/kvxd -c /etc/kvx/%i.ini" "$unit" 2>/dev/null &&
	ok "lib/systemd/system/kvxd@.service runs $stage/bin/kvxd" ||
	bad "$unit: no ExecStart of $stage/bin/kvxd"
for f in "$src"/configs/*.ini; do
	ex=share/doc/kvx/examples/$(basename "$f")
	cmp -s "$f" "$stage/$ex" && ok "$ex" || bad "$ex missing or different"
done
check "nothing installed under etc/" test ! -e "$stage/etc"

echo "$pass passed, $failed failed"
[ "$failed" -eq 0 ]
