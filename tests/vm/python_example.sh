#!/bin/bash
# python_example.sh: the README's Python example in the VM: a prefill and a decode kvxd, then
# python/examples/transfer.py and python/examples/tp_shapes.py (not a test_*.sh: ctest does not
# run it).
#   scripts/kvx-vm --build build tests/vm/python_example.sh
. "$(dirname "$0")/lib.sh"
kvxd_start prefill
kvxd_start decode
wait_peer decode prefill 20
wait_peer prefill decode 20
PYTHONPATH=$KVX_BUILD/python /usr/bin/python3 "$KVX_SRC/python/examples/transfer.py" || exit 1
PYTHONPATH=$KVX_BUILD/python /usr/bin/python3 "$KVX_SRC/python/examples/tp_shapes.py"
