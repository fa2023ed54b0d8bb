#!/bin/sh
# tests/mutants/apply.sh SCRIPT SRC OUT: OUT is SRC with the sed SCRIPT applied (a mutant, see
# README.md).  Fails, leaving no OUT, unless every one of SCRIPT's top-level commands (a line, or
# a { } block with its lines) changes SRC on its own: a command that no longer matches the code
# it was written against would leave part of the bug out, and the negative control would check
# less than its row in README.md says.
set -u
script=$1 src=$2 out=$3
name=$(basename "$script" .sed)
tmp=$(mktemp -d) || exit 1
trap 'rm -rf "$tmp"' EXIT
# one file per top-level command; comments and blank lines outside blocks are skipped
awk -v dir="$tmp" '
	depth == 0 && (/^#/ || /^[ \t]*$/) { next }
	{
		if (depth == 0) { n++; f = sprintf("%s/cmd%03d.sed", dir, n) }
		print > f
		# a block opens on an address line ending in "{" and closes on a line "}" (braces
		# inside an s command are C code)
		if (/^[\/0-9$].*\{$/) depth++
		else if (/^}$/) depth--
		if (depth == 0) close(f)
	}' "$script"
for c in "$tmp"/cmd*.sed; do
	[ -e "$c" ] || { echo "mutant $name: $script has no command" >&2; exit 1; }
	if sed -f "$c" "$src" | cmp -s - "$src"; then
		echo "mutant $name: this command changes nothing in $src:" >&2
		sed 's/^/    /' "$c" >&2
		rm -f "$out"
		exit 1
	fi
done
sed -f "$script" "$src" > "$out" || { rm -f "$out"; exit 1; }
