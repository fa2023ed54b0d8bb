#!/bin/bash
# check_unit.sh UNIT SRC: the systemd unit template kvxd@.service is one systemd accepts without
# a word, that keeps what kvxd needs, and whose command line kvxd accepts.
#  - `systemd-analyze verify` exits 0 and prints nothing: systemd 252 only warns (exit 0) on an
#    unknown key or a value it cannot parse, so any output fails the check; --man=no because
#    Documentation= points at a file, not a man page.  It also fails when ExecStart's binary is
#    not executable.
#  - LimitMEMLOCK=infinity (memory registration pins the engines' pools), Restart=on-failure.
#  - nothing that hides RDMA devices or cuts libibverbs off: PrivateDevices=, DeviceAllow=,
#    DevicePolicy=closed|strict, ProtectClock= (it implies a DeviceAllow=), and an
#    address-family list must keep AF_NETLINK.
#  - ExecStart, with %i = example and /etc/kvx/ mapped to a directory holding
#    configs/example.ini (its secret_file ours), plus --check-config: kvxd exits 0 and prints the
#    node's name, so the flags and the config path are the ones kvxd takes.
# One line per check; exits 1 when any failed.
set -u
unit=$1 src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pass=0 failed=0
ok() { pass=$((pass + 1)); echo "ok   $*"; }
bad() { failed=$((failed + 1)); echo "FAIL $*"; }
# the value of KEY= in [Service] (the last one wins, as in systemd)
service() { sed -n '/^\[Service\]/,/^\[/p' "$unit" | sed -n "s/^$1=//p" | tail -n 1; }

out=$(systemd-analyze verify --man=no "$unit" 2>&1)
rc=$?
if [ $rc -eq 0 ] && [ -z "$out" ]; then
	ok "systemd-analyze verify $(basename "$unit"): exit 0, no diagnostics"
else
	bad "systemd-analyze verify $(basename "$unit") -> $rc: $(tr '\n' ' ' <<<"$out")"
fi

[ "$(service LimitMEMLOCK)" = infinity ] && ok "LimitMEMLOCK=infinity" ||
	bad "LimitMEMLOCK='$(service LimitMEMLOCK)', want infinity"
[ "$(service Restart)" = on-failure ] && ok "Restart=on-failure" ||
	bad "Restart='$(service Restart)', want on-failure"
for k in PrivateDevices ProtectClock; do
	case $(service $k) in
	yes | true | on | 1) bad "$k=$(service $k) hides /dev/infiniband" ;;
	*) ok "no $k=yes" ;;
	esac
done
[ -z "$(service DeviceAllow)" ] && ok "no DeviceAllow=" || bad "DeviceAllow= restricts devices"
case $(service DevicePolicy) in
closed | strict) bad "DevicePolicy=$(service DevicePolicy) hides /dev/infiniband" ;;
*) ok "DevicePolicy open" ;;
esac
families=$(service RestrictAddressFamilies)
if [ -z "$families" ] || [[ " $families " == *" AF_NETLINK "* && " $families " != *" ~"* ]]; then
	ok "netlink allowed (RestrictAddressFamilies=$families)"
else
	bad "RestrictAddressFamilies=$families cuts libibverbs off netlink"
fi

# ExecStart as kvxd takes it
exec_start=$(service ExecStart)
(umask 077 && head -c 32 /dev/urandom | base64 >"$tmp/secret")
sed "s#^secret_file = .*#secret_file = $tmp/secret#" "$src/configs/example.ini" >"$tmp/example.ini"
cmdline=${exec_start//%i/example}
cmdline=${cmdline//\/etc\/kvx\//$tmp\/}
# shellcheck disable=SC2086
out=$($cmdline --check-config 2>&1)
rc=$?
if [ $rc -eq 0 ] && grep -qx "name = node-a" <<<"$out"; then
	ok "kvxd takes ExecStart's command line: $exec_start"
else
	bad "ExecStart=$exec_start: kvxd --check-config -> $rc: $(head -n 3 <<<"$out" | tr '\n' ' ')"
fi

echo "$pass passed, $failed failed"
[ "$failed" -eq 0 ]
