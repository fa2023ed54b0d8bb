#!/bin/bash
# test_cpu_claims.sh: kvxd nodes sharing a host spread their polling cores (poll_cpus = auto,
# [cores] cpu_claims, verbs/topo.h).  On the 2-vCPU VM every CPU is near rxe0 and rxe1 (a
# software device has no locality), so without claims every node polls on cpu 1.
#   1. prefill, then decode: their polling threads are pinned to different CPUs (1, then 0);
#   2. decode2 finds both claimed: it warns and polls on one of them;
#   3. prefill stops: its claim goes with it, and a restarted decode2 takes cpu 1, no warning;
#   4. negative control: with cpu_claims = none, prefill and decode both poll on cpu 1, the
#      stacking step 1 would catch.
. "$(dirname "$0")/lib.sh"

[ "$(nproc)" -ge 2 ] || fail "the VM has $(nproc) CPU: the test needs 2"
claims=/run/kvx

# poll_cpu NAME: the CPU kvxd NAME's polling thread (kvx-poll0) is pinned to
poll_cpu() {
	local pid t
	pid=$(bg_pid "$1") || return 1
	for t in /proc/"$pid"/task/*; do
		[ "$(cat "$t/comm")" = kvx-poll0 ] || continue
		awk '/^Cpus_allowed_list:/ { print $2 }' "$t/status"
		return 0
	done
	return 1
}
# (one CPU: the thread is named before it is pinned, and inherits every CPU until then)
pinned() { [[ "$(poll_cpu "$1")" =~ ^[0-9]+$ ]]; }

kvxd_start prefill
wait_until 10 pinned prefill || fail "prefill has no polling thread"
kvxd_start decode
wait_until 10 pinned decode || fail "decode has no polling thread"
p=$(poll_cpu prefill) d=$(poll_cpu decode)
vm_log "prefill polls on cpu $p, decode on cpu $d"
[ "$p" = 1 ] || fail "prefill polls on cpu '$p', not 1 (the highest CPU near rxe0)"
[ "$d" = 0 ] || fail "decode polls on cpu '$d', not 0 (cpu 1 is prefill's claim)"
[ -e "$claims/cpu1.claim" ] && [ -e "$claims/cpu0.claim" ] || fail "no claim files in $claims"
grep -q "claimed by another kvxd" "$KVX_LOGDIR/prefill.log" "$KVX_LOGDIR/decode.log" &&
	fail "prefill or decode warned of a shared CPU"

kvxd_start decode2
wait_until 10 pinned decode2 || fail "decode2 has no polling thread"
d2=$(poll_cpu decode2)
vm_log "decode2 polls on cpu $d2"
[ "$d2" = 0 ] || [ "$d2" = 1 ] || fail "decode2 polls on cpu '$d2'"
grep -q "every CPU near rxe1 is claimed by another kvxd of this host ($claims): polling on cpu $d2 too" \
	"$KVX_LOGDIR/decode2.log" || fail "decode2 did not warn that it shares cpu $d2"
stop_bg decode2

stop_bg prefill
start_bg decode2b "$KVXD" -c "$KVX_SRC/configs/decode2.ini"
wait_until 10 pinned decode2b || fail "decode2 (again) has no polling thread"
d2=$(poll_cpu decode2b)
[ "$d2" = 1 ] || fail "decode2 polls on cpu '$d2' after prefill stopped, not on its freed cpu 1"
grep -q "claimed by another kvxd" "$KVX_LOGDIR/decode2b.log" &&
	fail "decode2 warned of a shared CPU with cpu 1 free"
vm_log "prefill stopped: decode2 took cpu 1"
stop_all

# negative control: without claims, both nodes on cpu 1
mkdir -p /run/kvx/noclaims
for n in prefill decode; do
	sed 's/^idle_park_us = \(.*\)$/idle_park_us = \1\ncpu_claims = none/' "$KVX_SRC/configs/$n.ini" \
		>/run/kvx/noclaims/$n.ini
	grep -q '^cpu_claims = none$' /run/kvx/noclaims/$n.ini || fail "could not write $n.ini without claims"
	start_bg "$n-none" "$KVXD" -c /run/kvx/noclaims/$n.ini
	wait_until 10 pinned "$n-none" || fail "$n (no claims) has no polling thread"
done
p=$(poll_cpu prefill-none) d=$(poll_cpu decode-none)
vm_log "without claims: prefill polls on cpu $p, decode on cpu $d"
[ "$p" = 1 ] && [ "$d" = 1 ] || fail "without claims the nodes poll on cpus $p and $d, not both on 1"
vm_log "PASS"
