#!/bin/bash
# check-layers.sh [DIR]: control/'s files depend one way (control/README.md).  A file may
# include its own header and the headers of lower layers only; a header of its own layer or
# above, or a control/ header missing from the table, fails the check.  DIR defaults to the
# source tree's control/.  Prints one line per violation and "layers: N files, N violations".
set -u
dir=${1:-$(cd "$(dirname "$0")/../control" && pwd)}
declare -A layer=(
	[timer]=0 [kvxd]=1
	[peer_io]=2 [engine_io]=2 [cred]=2 [vwork]=2
	[rooms]=3
	[abort]=4
	[peer]=5
	[metrics]=6 [members]=6
	[admin]=7 [metrics_http]=7 [etcd]=7
	[engine]=8
	[loop]=9
	[kvxd_main]=10
)
# the client side (libkvx, kvxctl) is not part of the daemon: it includes no daemon header
client="libkvx kvxctl"
bad=0 files=0
for f in "$dir"/*.c "$dir"/*.h; do
	base=$(basename "$f"); mod=${base%.*}
	files=$((files + 1))
	if [[ " $client " == *" $mod "* ]]; then
		own=-1
	elif [[ -z "${layer[$mod]+x}" ]]; then
		echo "layers: $base: not in the layer table (scripts/check-layers.sh)"
		bad=$((bad + 1))
		continue
	else
		own=${layer[$mod]}
	fi
	while read -r inc; do
		[[ "$inc" == "$mod" ]] && continue # its own header
		if [[ -z "${layer[$inc]+x}" ]]; then
			echo "layers: $base includes control/$inc.h, which is not in the layer table"
			bad=$((bad + 1))
		elif ((layer[$inc] >= own)); then
			echo "layers: $base (layer $own) includes control/$inc.h (layer ${layer[$inc]})"
			bad=$((bad + 1))
		fi
	done < <(sed -n 's/^#include "control\/\([a-z_]*\)\.h".*/\1/p' "$f")
done
echo "layers: $files files, $bad violations"
[ "$bad" -eq 0 ]
