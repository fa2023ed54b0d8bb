#!/bin/bash
# test_deb.sh BUILD VERSION SRC [BREAK]: CPack builds the .deb of BUILD into a fresh directory
# (cpack -G DEB -B DIR; what `make package` does in the build tree), then check_deb.sh on it.
# With BREAK, the package is broken first and repacked (ctest expects failure):
#   depends    liburcu8, which kvxd links, removed from Depends
set -u
build=$1 version=$2 src=$3 break=${4:-}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cpack --config "$build/CPackConfig.cmake" -G DEB -B "$tmp/pkg" >"$tmp/cpack.log" 2>&1 || {
	cat "$tmp/cpack.log"
	exit 1
}
deb=$(ls "$tmp"/pkg/*.deb)
echo "cpack: $(basename "$deb"), $(stat -c %s "$deb") bytes"
case $break in
'') ;;
depends)
	dpkg-deb -R "$deb" "$tmp/tree"
	cp "$tmp/tree/DEBIAN/control" "$tmp/control.orig"
	sed -i -E '/^Depends:/ s/ liburcu8( \([^)]*\))?,?//; /^Depends:/ s/, *$//' \
		"$tmp/tree/DEBIAN/control"
	if cmp -s "$tmp/tree/DEBIAN/control" "$tmp/control.orig"; then
		echo "test_deb.sh: BREAK '$break' changes nothing in the control file" >&2
		exit 0 # the must_fail test fails: its bug is not switched in
	fi
	deb=$tmp/broken.deb
	dpkg-deb --root-owner-group -b "$tmp/tree" "$deb" >/dev/null
	;;
*)
	echo "test_deb.sh: unknown BREAK '$break'" >&2
	exit 0
	;;
esac
"$src/tests/install/check_deb.sh" "$deb" "$version" "$src"
