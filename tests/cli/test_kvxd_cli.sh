#!/bin/bash
# kvxd's command line and strict config validation, as an operator meets them: every bad file
# exits with status 2 and a "FILE:LINE: ..." message naming the key; good files exit 0 and
# print the effective config.  Usage: test_kvxd_cli.sh BUILD_DIR SOURCE_DIR
set -u
build=$1 src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
pass=0 failed=0

ok() { pass=$((pass + 1)); echo "ok   $*"; }
bad() { failed=$((failed + 1)); echo "FAIL $*"; }

# expect STATUS PATTERN -- ARGS: kvxd ARGS exits with STATUS and stderr+stdout match PATTERN
expect() {
	local want=$1 pat=$2 out rc
	shift 3
	out=$("$build/kvxd" "$@" 2>&1)
	rc=$?
	if [ "$rc" = "$want" ] && grep -qE -- "$pat" <<<"$out"; then
		ok "kvxd $* -> $rc"
	else
		bad "kvxd $* -> $rc (want $want, /$pat/): $out"
	fi
}

base() {
	cat <<INI
[node]
name = n1
listen = 127.0.0.1:7470
[rdma]
device = rxe0
[engine]
socket = $tmp/n1.sock
[security]
secret_file = $tmp/secret
[peer.n2]
address = 127.0.0.1:7471
INI
}

# the shared secret: kvxd's own, mode 0600
(umask 077 && head -c 32 /dev/urandom | base64 >"$tmp/secret")

# the shipped configs, with their secret file pointed at ours
for n in prefill decode decode2 example; do
	sed "s#^secret_file = .*#secret_file = $tmp/secret#" "$src/configs/$n.ini" >"$tmp/$n.ini"
done
for n in prefill decode decode2; do
	expect 0 "^name = $n$" -- --check-config -c "$tmp/$n.ini"
	grep -q "^secret_file = " "$src/configs/$n.ini" && ok "configs/$n.ini authenticates" ||
		bad "configs/$n.ini has no secret_file"
done
expect 0 "name = node-a" -- --check-config -c "$tmp/example.ini"

base >"$tmp/good.ini"
expect 0 "retry_cnt = 6" -- --check-config -c "$tmp/good.ini"

{ base; echo "[rdma2]"; } >"$tmp/s.ini"
expect 2 "^$tmp/s.ini:12: .*rdma2" -- --check-config -c "$tmp/s.ini"

base | sed 's/^device = rxe0/device = rxe0\nqueue_depth = 5/' >"$tmp/k.ini"
expect 2 "^$tmp/k.ini:6: \[rdma\] queue_depth" -- --check-config -c "$tmp/k.ini"

base | sed 's/^device = rxe0/device = rxe0\nretry_cnt = 7/' >"$tmp/r.ini"
expect 2 "^$tmp/r.ini:6: \[rdma\] retry_cnt.*infinite" -- --check-config -c "$tmp/r.ini"

base | sed 's/^listen = .*/listen = 127.0.0.1:99999/' >"$tmp/p.ini"
expect 2 "^$tmp/p.ini:3: \[node\] listen" -- --check-config -c "$tmp/p.ini"

base | grep -v '^device' >"$tmp/m.ini"
expect 2 "^$tmp/m.ini:0: \[rdma\] device: required" -- --check-config -c "$tmp/m.ini"

{ base; printf '[debug]\nfaults = no.such.point:1\n'; } >"$tmp/f.ini"
expect 2 "unknown fault point 'no.such.point'" -- --check-config -c "$tmp/f.ini"

expect 2 "No such file|cannot" -- --check-config -c "$tmp/missing.ini"

# the project version (CMakeLists.txt's project VERSION, through kvx/version.h)
expect 0 "^kvxd [0-9]+\.[0-9]+\.[0-9]+$" -- --version
# [metrics] listen: optional, printed when set, a bad one named with its line
{ base; printf '[metrics]\nlisten = 127.0.0.1:9470\n'; } >"$tmp/mx.ini"
expect 0 "^listen = 127.0.0.1:9470$" -- --check-config -c "$tmp/mx.ini"
{ base; printf '[metrics]\nlisten = 127.0.0.1:0\n'; } >"$tmp/mb.ini"
expect 2 "^$tmp/mb.ini:13: \[metrics\] listen: bad address" -- --check-config -c "$tmp/mb.ini"
{ base; printf '[metrics]\nlisten = 127.0.0.1:7470\n'; } >"$tmp/ms.ini"
expect 2 "^$tmp/ms.ini:13: \[metrics\] listen: .*\[node\] listen" -- --check-config -c "$tmp/ms.ini"

# the secret: required unless the file says auth = none, and only kvxd may read it
base | grep -v '^secret_file' >"$tmp/nosecret.ini"
expect 2 "secret_file: required" -- --check-config -c "$tmp/nosecret.ini"
sed 's/^secret_file = .*/auth = none/' <(base) >"$tmp/none.ini"
expect 0 "WARNING: .*UNAUTHENTICATED" -- --check-config -c "$tmp/none.ini"
cp -p "$tmp/secret" "$tmp/secret644" && chmod 0644 "$tmp/secret644"
sed "s#^secret_file = .*#secret_file = $tmp/secret644#" <(base) >"$tmp/s644.ini"
expect 2 "secret644: mode 0644, want 0600 or 0400" -- --check-config -c "$tmp/s644.ini"
cp -p "$tmp/secret" "$tmp/secretnobody" && chown 65534 "$tmp/secretnobody"
sed "s#^secret_file = .*#secret_file = $tmp/secretnobody#" <(base) >"$tmp/snobody.ini"
expect 2 "secretnobody: owned by uid 65534" -- --check-config -c "$tmp/snobody.ini"
(umask 077 && printf 'short\n' >"$tmp/secretshort")
sed "s#^secret_file = .*#secret_file = $tmp/secretshort#" <(base) >"$tmp/sshort.ini"
expect 2 "must be 16..4096 bytes, this one is 5" -- --check-config -c "$tmp/sshort.ini"
ln -s "$tmp/secret" "$tmp/secretlink"
sed "s#^secret_file = .*#secret_file = $tmp/secretlink#" <(base) >"$tmp/slink.ini"
expect 2 "secretlink: Too many levels of symbolic links" -- --check-config -c "$tmp/slink.ini"
sed "s#^secret_file = .*#secret_file = $tmp/secret\nsecret_next_file = $tmp/missing#" <(base) >"$tmp/snext.ini"
expect 2 "missing: No such file" -- --check-config -c "$tmp/snext.ini"
expect 2 "usage" --
expect 2 "usage" -- --bogus

# an unknown fault point in the environment is refused too
out=$(KVX_FAULTS=bogus:1 "$build/kvxd" --check-config -c "$tmp/good.ini" 2>&1)
[ $? = 2 ] && grep -q "KVX_FAULTS: unknown fault point" <<<"$out" && ok "KVX_FAULTS=bogus:1 -> 2" ||
	bad "KVX_FAULTS=bogus:1: $out"

# Start-up and the engine socket path: kvxd claims the path before it touches the device (the
# device here does not exist, so a run that gets past the socket stops there, status 1).
base | sed 's/^device = rxe0/device = kvx-no-such-dev/' >"$tmp/run.ini"
echo precious >"$tmp/n1.sock"
expect 1 "engine socket $tmp/n1.sock: the path exists and is not a socket" -- -c "$tmp/run.ini"
[ "$(cat "$tmp/n1.sock")" = precious ] && ok "a regular file at the socket path is left alone" ||
	bad "the regular file at the socket path changed"
rm -f "$tmp/n1.sock"
expect 1 "kvxd stopped" -- -c "$tmp/run.ini"
[ ! -e "$tmp/n1.sock" ] && ok "a failed start removes its own socket" ||
	bad "a failed start left $tmp/n1.sock behind"
sed 's|^socket = .*|&\nadmin_group = kvx-no-such-group|' "$tmp/run.ini" >"$tmp/g.ini"
expect 1 "admin_group 'kvx-no-such-group': no such group" -- -c "$tmp/g.ini"

# kvxctl against no daemon: a clear error, exit 1
out=$("$build/kvxctl" -s "$tmp/none.sock" peers 2>&1)
[ $? = 1 ] && grep -q "$tmp/none.sock" <<<"$out" && ok "kvxctl without kvxd -> 1" ||
	bad "kvxctl without kvxd: $out"

echo "$pass passed, $failed failed"
[ "$failed" = 0 ]
