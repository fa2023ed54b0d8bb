#!/bin/bash
# check_deb.sh DEB VERSION SRC: the .deb CPack built (`make package`) is the package we mean.
#  - control fields: Package kvx, Version VERSION, this machine's Architecture, a Maintainer
#    "Name <address>", a Description;
#  - its files (dpkg-deb -c): the programs, libkvx with its links, headers, kvx.pc, the unit
#    under /lib/systemd/system, the examples; nothing under /etc (a node's config is the
#    administrator's);
#  - kvx.pc says prefix=/usr; the unit, its ExecStart pointed at the packaged kvxd, passes
#    check_unit.sh;
#  - Depends covers what the packaged binaries link: for each NEEDED library that the package
#    does not ship, the Debian package that holds it here (dpkg -S) is in Depends; and every
#    Depends entry is installed here at a version it accepts;
#  - shlibs names libkvx's SONAME, the triggers run ldconfig, the maintainer scripts parse.
# One line per check; exits 1 when any failed.
set -u
deb=$1 version=$2 src=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pass=0 failed=0
ok() { pass=$((pass + 1)); echo "ok   $*"; }
bad() { failed=$((failed + 1)); echo "FAIL $*"; }
field() { dpkg-deb -f "$deb" "$1" 2>/dev/null; }
want_field() { # want_field NAME REGEX
	local v
	v=$(field "$1")
	if grep -qE -- "$2" <<<"$v"; then
		ok "$1: $(head -n 1 <<<"$v")"
	else
		bad "$1: '$v', want /$2/"
	fi
}

want_field Package '^kvx$'
want_field Version "^${version//./\\.}$"
want_field Architecture "^$(dpkg --print-architecture)$"
want_field Maintainer '^[^<>]+ <[^<>@ ]+@[^<>@ ]+>$'
want_field Description '.'

major=${version%%.*}
dpkg-deb -c "$deb" >"$tmp/list"
has() { # has MODE PATH-REGEX: a listed path matches, with that mode
	if grep -qE "^$1 .* \./${2#/}( -> .*)?$" "$tmp/list"; then
		ok "$1 $2"
	else
		bad "no $2 ($1) in the package"
	fi
}
for p in kvxd kvxctl kvx-bench; do has -rwxr-xr-x "/usr/bin/$p"; done
has -rw-r--r-- "/usr/lib/([^/]+/)?libkvx\.so\.${version//./\\.}"
has lrwxrwxrwx "/usr/lib/([^/]+/)?libkvx\.so\.$major"
has lrwxrwxrwx "/usr/lib/([^/]+/)?libkvx\.so"
has -rw-r--r-- "/usr/lib/([^/]+/)?pkgconfig/kvx\.pc"
has -rw-r--r-- "/usr/include/kvx/kvx\.h"
has -rw-r--r-- "/usr/include/kvx/version\.h"
has -rw-r--r-- "/lib/systemd/system/kvxd@\.service"
if [ -n "${KVX_EXPECT_PYTHON:-}" ]; then
	has -rw-r--r-- "/usr/lib/python3/dist-packages/kvx/__init__\.py"
	has -rw-r--r-- "/usr/lib/python3/dist-packages/kvx/connectors/sglang\.py"
	has -rw-r--r-- "/usr/lib/python3/dist-packages/kvx/_kvx\.cpython-[^/]*\.so"
fi
for f in "$src"/configs/*.ini; do
	has -rw-r--r-- "/usr/share/doc/kvx/examples/$(basename "$f" | sed 's/\./\\./g')"
done
if grep -q ' \./etc/' "$tmp/list"; then bad "files under /etc"; else ok "nothing under /etc"; fi

# the files themselves
root=$tmp/root
dpkg-deb -x "$deb" "$root"
pc=$(find "$root" -name kvx.pc | head -n 1)
grep -qx 'prefix=/usr' "$pc" 2>/dev/null && ok "kvx.pc: prefix=/usr" ||
	bad "kvx.pc: $(grep '^prefix=' "$pc" 2>/dev/null)"
unit=$root/lib/systemd/system/kvxd@.service
if grep -qx 'ExecStart=/usr/bin/kvxd -c /etc/kvx/%i.ini' "$unit" 2>/dev/null; then
	ok "kvxd@.service: ExecStart=/usr/bin/kvxd -c /etc/kvx/%i.ini"
	sed "s#^ExecStart=/usr/bin/kvxd #ExecStart=$root/usr/bin/kvxd #" "$unit" >"$tmp/kvxd@.service"
	if "$src/tests/install/check_unit.sh" "$tmp/kvxd@.service" "$src" >"$tmp/unit.log" 2>&1; then
		ok "the packaged unit passes check_unit.sh (ExecStart pointed at the packaged kvxd)"
	else
		bad "the packaged unit fails check_unit.sh: $(grep FAIL "$tmp/unit.log" | tr '\n' ' ')"
	fi
else
	bad "kvxd@.service: $(grep '^ExecStart=' "$unit" 2>/dev/null)"
fi

# Depends against what the binaries link
depends=$(field Depends)
dep_names=" $(tr ',|' '\n' <<<"$depends" | awk 'NF {print $1}' | tr '\n' ' ')"
find "$root" -type f | while read -r f; do
	readelf -h "$f" >/dev/null 2>&1 && readelf -d "$f"
done >"$tmp/dynamic"
own=$(sed -n 's/.*(SONAME).*\[\(.*\)\]/\1/p' "$tmp/dynamic" | sort -u)
needed=$(sed -n 's/.*(NEEDED).*\[\(.*\)\]/\1/p' "$tmp/dynamic" | sort -u)
[ -n "$needed" ] && ok "the binaries need: $(tr '\n' ' ' <<<"$needed")" ||
	bad "no NEEDED entries found"
for so in $needed; do
	if grep -qx "$so" <<<"$own"; then
		ok "$so: shipped in the package"
		continue
	fi
	path=$(ldconfig -p | awk -v so="$so" '$1 == so && /x86-64|64bit|\(libc6\)/ {print $NF; exit}')
	[ -z "$path" ] && path=$(ldconfig -p | awk -v so="$so" '$1 == so {print $NF; exit}')
	pkg=""
	for p in "$path" "$(readlink -f "$path")" "${path#/usr}" "/usr${path}"; do
		[ -n "$p" ] || continue
		pkg=$(dpkg -S "$p" 2>/dev/null | head -n 1 | cut -d: -f1) && [ -n "$pkg" ] && break
	done
	if [ -z "$pkg" ]; then
		bad "$so: no Debian package holds it here ($path)"
	elif [[ "$dep_names" == *" $pkg "* ]]; then
		ok "$so: $pkg in Depends"
	else
		bad "$so ($path) comes from $pkg, which Depends lacks"
	fi
done
IFS=',' read -ra entries <<<"$depends"
for e in "${entries[@]}"; do
	e=$(sed 's/^ *//; s/ *$//' <<<"$e")
	name=${e%% *}
	inst=$(dpkg-query -W -f='${Version}' "$name" 2>/dev/null)
	if [[ "$e" =~ \((..?)\ ([^\)]+)\) ]]; then
		op=${BASH_REMATCH[1]} ver=${BASH_REMATCH[2]}
		case $op in '>=') op=ge ;; '<=') op=le ;; '>>') op=gt ;; '<<') op=lt ;; '=') op=eq ;; esac
		if [ -n "$inst" ] && dpkg --compare-versions "$inst" "$op" "$ver"; then
			ok "Depends $e: $inst installed"
		else
			bad "Depends $e: installed '$inst'"
		fi
	else
		[ -n "$inst" ] && ok "Depends $e: $inst installed" || bad "Depends $e: not installed here"
	fi
done

# control archive
mkdir "$tmp/control"
dpkg-deb -e "$deb" "$tmp/control"
grep -qx "libkvx $major kvx (>= $version)" "$tmp/control/shlibs" 2>/dev/null &&
	ok "shlibs: libkvx $major kvx (>= $version)" ||
	bad "shlibs: $(cat "$tmp/control/shlibs" 2>/dev/null)"
grep -qx 'activate-noawait ldconfig' "$tmp/control/triggers" 2>/dev/null &&
	ok "triggers: activate-noawait ldconfig" || bad "no ldconfig trigger"
for s in postinst postrm; do
	[ -x "$tmp/control/$s" ] && sh -n "$tmp/control/$s" && ok "$s: executable, parses" || bad "$s"
done

echo "$pass passed, $failed failed"
[ "$failed" -eq 0 ]
