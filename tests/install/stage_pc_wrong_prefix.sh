#!/bin/bash
# The negative control of check_stage.sh: kvx.pc generated with the configured prefix instead
# of the one the install ran with (its prefix= rewritten to /usr/local).  Exits with the
# check's status (ctest expects failure).
set -u
build=$1 version=$2 cc=$3 src=$4
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/stage" >/dev/null 2>&1 || exit 0 # not the failure meant
pc=$(find "$tmp/stage" -name kvx.pc)
sed -i 's#^prefix=.*#prefix=/usr/local#' "$pc"
"$src/tests/install/check_stage.sh" "$tmp/stage" "$version" "$cc" "$src"
