#!/bin/bash
# hang_inside.sh: run by tests/runner/test_kvx_vm_guards.sh inside the VM.  Two nodes, then a
# wait that never ends: kvx-vm's guest must describe it and stop it before the host's limit.
. "$KVX_SRC/tests/vm/lib.sh"
kvxd_start prefill
kvxd_start decode
wait_peer decode prefill 30
echo "hang_inside: nodes up, now waiting for ever"
sleep 100000
echo "hang_inside: the wait ended"
