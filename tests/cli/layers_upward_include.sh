#!/bin/bash
# The negative control of scripts/check-layers.sh: a copy of control/ in which rooms.c (layer 3)
# includes control/engine.h (layer 8).  Exits with the check's status (ctest expects failure).
set -u
src=$1
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cp "$src"/control/*.c "$src"/control/*.h "$tmp"/
echo '#include "control/engine.h"' >>"$tmp/rooms.c"
"$src/scripts/check-layers.sh" "$tmp"
