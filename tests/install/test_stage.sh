#!/bin/bash
# test_stage.sh BUILD VERSION CC SRC: `cmake --install BUILD --prefix` a fresh staging
# directory, then check_stage.sh on it.
set -u
build=$1 version=$2 cc=$3 src=$4
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/stage" >"$tmp/install.log" 2>&1 || {
	cat "$tmp/install.log"
	exit 1
}
"$src/tests/install/check_stage.sh" "$tmp/stage" "$version" "$cc" "$src"
