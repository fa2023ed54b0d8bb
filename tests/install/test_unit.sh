#!/bin/bash
# test_unit.sh BUILD SRC [BREAK]: `cmake --install BUILD --prefix` a fresh staging directory and
# check_unit.sh its kvxd@.service.  With BREAK, the unit is broken first (ctest expects failure):
#   typo       a misspelt hardening key (NoNewPrivilege=): systemd-analyze only warns
#   flag       kvxd's -c spelt --config in ExecStart: systemd cannot tell
#   devices    PrivateDevices=yes added: /dev/infiniband hidden
set -u
build=$1 src=$2 break=${3:-}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/stage" >"$tmp/install.log" 2>&1 || {
	cat "$tmp/install.log"
	exit 1
}
unit=$tmp/stage/lib/systemd/system/kvxd@.service
cp "$unit" "$tmp/unit.orig"
case $break in
'') ;;
typo) sed -i 's/^NoNewPrivileges=/NoNewPrivilege=/' "$unit" ;;
flag) sed -i 's#^\(ExecStart=.*kvxd\) -c #\1 --config #' "$unit" ;;
devices) sed -i 's/^\[Service\]$/[Service]\nPrivateDevices=yes/' "$unit" ;;
*)
	echo "test_unit.sh: unknown BREAK '$break'" >&2
	exit 0 # not the failure meant
	;;
esac
if [ -n "$break" ] && cmp -s "$unit" "$tmp/unit.orig"; then
	echo "test_unit.sh: BREAK '$break' changes nothing in the unit" >&2
	exit 0 # the must_fail test fails: its bug is not switched in
fi
"$src/tests/install/check_unit.sh" "$unit" "$src"
