#!/bin/bash
# test_kvx_vm_guards.sh BUILD_DIR: the VM runner's two guards, on the host.
#  1. A boot that does not start the test within KVX_VM_BOOT_TMO is done once more, then given
#     up with exit 124 and both attempts named (a 1 s limit: no boot makes it).
#  2. A test that hangs is described by the guest before the host's limit (its processes'
#     threads, each kvxd's counters and peers, gdb backtraces), then stopped: its EXIT trap runs
#     (the logs' tails), the run ends with the test's failure well before --timeout, and it
#     never reaches the host's kill.
# KVX_VM_RUNNER (default scripts/kvx-vm) is the runner under test.
set -u
here=$(cd "$(dirname "$0")/../.." && pwd)
build=${1:?usage: test_kvx_vm_guards.sh BUILD_DIR}
vm=${KVX_VM_RUNNER:-$here/scripts/kvx-vm}
out=$(mktemp /tmp/kvx-vm-guards.XXXXXX)
trap 'rm -f "$out"' EXIT
passed=0 failed=0
check() { # NAME COND...
	local name=$1
	shift
	if "$@"; then
		passed=$((passed + 1))
	else
		failed=$((failed + 1))
		echo "FAILED: $name"
	fi
}
has() { grep -q -- "$1" "$out"; }

"$vm" --build "$build" --timeout 100 'echo the test ran' >"$out" 2>&1
rc=$?
cat "$out"
check "a --timeout that leaves no time to describe a hang is refused (got $rc)" [ "$rc" = 125 ]
check "the refusal says why" has "wants at least 210 s"

KVX_VM_BOOT_TMO=1 "$vm" --build "$build" --timeout 300 'echo the test ran' >"$out" 2>&1
rc=$?
cat "$out"
check "a boot that never started the test ends with 124 (got $rc)" [ "$rc" = 124 ]
check "the first boot is named" has "boot attempt 1 did not reach the test"
check "the boot is done once more" has "boot attempt 2 did not reach the test"
check "the test did not run" eval '! has "the test ran"'

t0=$SECONDS
"$vm" --build "$build" --timeout 250 "$here/tests/runner/hang_inside.sh" >"$out" 2>&1
rc=$?
took=$((SECONDS - t0))
cat "$out"
check "the hanging test fails (got $rc)" [ "$rc" != 0 ]
check "it was not the host's kill (exit 124)" [ "$rc" != 124 ]
check "it ended before the host's limit (${took}s of 250)" [ "$took" -lt 240 ]
check "the test had started" has "hang_inside: nodes up"
check "the guest said why it stops the test" has "the test still runs after"
check "its processes' threads are listed" has "kvx-poll0"
check "each kvxd's counters are shown" has "kvxctl -s /run/kvx/prefill.sock counters"
check "each kvxd's peers are shown" has "peer prefill 10.77.0.1"
if command -v gdb >/dev/null; then
	check "gdb backtraces are shown" has "in kvx_pcore_park\|in pcore_main"
else
	check "no gdb is said" has "no gdb here"
fi
check "the test's EXIT trap ran (its logs' tails)" has "tail of prefill.log"
check "the wait did not end by itself" eval '! has "the wait ended"'
echo "$passed passed, $failed failed"
[ "$failed" = 0 ]
