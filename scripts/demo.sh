#!/bin/bash
# demo.sh BUILD_DIR: one VM boot: two kvxd (prefill on rxe0, decode on rxe1), kvx-bench for a
# few seconds with every byte verified, then ib_write_bw at the same message size in the same
# direction and the same boot.  Prints the kvx-bench report and a last line
#   demo: rooms=N bytes=B verified=ok kvx_MBps=X ib_write_bw_MBps=Y ratio=R unit=1e6B/s
# Both rates are in 10^6 B/s (perftest's "MB/sec" is MiB/s: converted) and both are taken over a
# steady-state window, as in `make bench` (scripts/bench.sh): ib_write_bw -D counts only its
# middle window (a margin of SECONDS/4 left out at each end), and kvx is kvx-bench's window_*
# figure over the same middle (--warmup-ms and --cooldown-ms of that margin).
# rooms and bytes are kvx-bench's whole run, every room verified.
set -euo pipefail
here=$(cd "$(dirname "$0")/.." && pwd)
build=$(cd "${1:-$here/build}" && pwd)
secs=${KVX_DEMO_SECONDS:-8}
pages=${KVX_DEMO_PAGES:-16}
page_size=${KVX_DEMO_PAGE_SIZE:-4096}
bufs=${KVX_DEMO_BUFS:-4}
inflight=${KVX_DEMO_INFLIGHT:-8}
# ib_write_bw's default margin at each end of -D (perftest: duration / 4, whole seconds)
margin_ms=$((secs / 4))
margin_ms=$((margin_ms * 1000))
msg=$((pages * page_size))

cat >"$build/demo-vm.sh" <<VM
#!/bin/bash
. "\$KVX_SRC/tests/vm/lib.sh"
kvxd_start prefill
kvxd_start decode
wait_peer decode prefill 20
wait_peer prefill decode 20
"\$KVX_BENCH" --prefill /run/kvx/prefill.sock --decode /run/kvx/decode.sock \
	--duration $secs --warmup-ms $margin_ms --cooldown-ms $margin_ms \
	--inflight $inflight --pages $pages --bufs $bufs --page-size $page_size \
	>"\$KVX_LOGDIR/bench.txt" || fail "kvx-bench failed: \$(cat "\$KVX_LOGDIR/bench.txt")"
"\$KVX_BENCH" --prefill /run/kvx/prefill.sock --decode /run/kvx/decode.sock --json \
	--rooms 1 --inflight 1 --pages $pages --bufs $bufs --page-size $page_size >/dev/null
stop_all
BG_NAMES=()
# the reference: same direction (rxe0 -> rxe1), same message size, same boot
start_bg ibsrv ib_write_bw -d rxe1 -x "\$(gid_index rxe1)" -s $msg -D $secs
wait_for_port 18515 30 || fail "ib_write_bw server"
start_bg ibcli ib_write_bw -d rxe0 -x "\$(gid_index rxe0)" -s $msg -D $secs 10.77.0.2
wait_bg ibcli 120 || fail "ib_write_bw client"
wait_bg ibsrv 30 || true
VM
chmod +x "$build/demo-vm.sh"
"$here/scripts/kvx-vm" --build "$build" "$build/demo-vm.sh"
logs="$build/vm-logs/demo-vm"
cat "$logs/bench.txt"
awk '/^ *#bytes/ { getline; printf "ib_write_bw %s B: %s MiB/s = %.2f MB/s (10^6 B/s)\n", $1, $4, $4 * 1.048576 }' \
	"$logs/ibcli.log"
kvx=$(sed -n 's/^window MB\/s \([0-9.]*\).*/\1/p' "$logs/bench.txt" | head -n 1)
ib=$(awk '/^ *#bytes/ { getline; printf "%.2f", $4 * 1.048576 }' "$logs/ibcli.log")
rooms=$(sed -n 's/^rooms[ :=]*\([0-9]*\).*/\1/p' "$logs/bench.txt" | head -n 1)
bytes=$(sed -n 's/^bytes[ :=]*\([0-9]*\).*/\1/p' "$logs/bench.txt" | head -n 1)
verified=$(sed -n 's/.*verified[ :=]*\([a-zA-Z]*\).*/\1/p' "$logs/bench.txt" | head -n 1)
ratio=$(awk -v a="$kvx" -v b="$ib" 'BEGIN { if (b > 0) printf "%.2f", a / b; else print "nan" }')
echo "demo: rooms=$rooms bytes=$bytes verified=$verified kvx_MBps=$kvx ib_write_bw_MBps=$ib ratio=$ratio unit=1e6B/s"
[ "$verified" = ok ]
