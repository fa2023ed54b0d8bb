#!/bin/sh
# Fails when a tracked C file is not formatted per .clang-format.
set -u
cd "$(dirname "$0")/.." || exit 1
bad=""
for f in $(git ls-files '*.c' '*.h'); do
	clang-format --dry-run --Werror "$f" >/dev/null 2>&1 || bad="$bad $f"
done
if [ -n "$bad" ]; then
	echo "format-check: not clang-formatted:$bad (run 'make format')" >&2
	exit 1
fi
echo "format-check: ok"
