#!/bin/bash
# kvx-vm: rails 2
# test_rails.sh: kvxd on two rails (RDMA devices) per node on real verbs: prefill on rxe0 + rxe2,
# decode on rxe1 + rxe3, each pair on its own veth.  The session has QPs on both devices of each
# node; 64 KiB rooms (16 x 4 KiB pages, 4 buffers) and 1 MiB rooms move with every byte
# verified, their WRITEs striped over both rails (each rail carries a fair share: the per-rail
# counters) and each rail's ended by its own immediate, no error completion on either; afterwards no room is left and both sessions' QPs are
# still up on both devices.
. "$(dirname "$0")/lib.sh"

[ "$KVX_RAILS" = 2 ] || fail "KVX_RAILS is '$KVX_RAILS': the runner did not honour '# kvx-vm: rails 2'"
qps() { rdma_counts "$1" | sed 's/^qp=\([0-9]*\) .*/\1/'; }
declare -A q0
for d in rxe0 rxe1 rxe2 rxe3; do q0[$d]=$(qps $d); done
rails_up /run/kvx/rails
for d in rxe0 rxe1 rxe2 rxe3; do
	[ "$(qps $d)" -gt "${q0[$d]}" ] || fail "no kvx QP on $d: $(rdma resource show)"
done

bench() { # bench OUT [kvx-bench options]
	local out=$KVX_LOGDIR/$1
	shift
	"$KVX_BENCH" --prefill /run/kvx/prefill.sock --decode /run/kvx/decode.sock --json "$@" \
		>"$out" 2>"$out.err" || fail "kvx-bench $* failed: $(cat "$out" "$out.err")"
	cat "$out"
	[ "$(json_get "$out" verified)" = ok ] && [ "$(json_get "$out" mismatched_bytes)" = 0 ] ||
		fail "$1: not verified"
	[ "$(json_get "$out" failed_decode)" = 0 ] && [ "$(json_get "$out" failed_prefill)" = 0 ] ||
		fail "$1: failed rooms"
}
share() { # share NAME: checks that both rails carried at least a third of what NAME posted
	local b0 b1
	b0=$(rail_metric prefill rail_bytes_posted_total 0)
	b1=$(rail_metric prefill rail_bytes_posted_total 1)
	vm_log "$1: rail 0 (rxe0) $b0 B, rail 1 (rxe2) $b1 B"
	awk -v a="$b0" -v b="$b1" 'BEGIN { t = a + b; exit !(t > 0 && a >= t / 3 && b >= t / 3) }' ||
		fail "$1: the rails' shares are rail 0 $b0 B, rail 1 $b1 B"
}
bench r64k.json --rooms 128 --inflight 8 --pages 16 --bufs 4 --page-size 4096
share "64 KiB rooms"
bench r1m.json --rooms 16 --inflight 4 --pages 256 --bufs 4 --page-size 4096
share "64 KiB and 1 MiB rooms"
# rooms of two chunks: the first (17 pages, two WRITEs) goes on both rails, the last (16 pages,
# one WRITE) on one, and a zero-length WRITE_WITH_IMM ends the other rail's: two immediates a room
imm0=$(metric decode core_recv_imm_total)
bench rsplit.json --rooms 64 --inflight 4 --pages 33 --bufs 1 --chunks 2 --page-size 4096
imm1=$(metric decode core_recv_imm_total)
# (a room whose two first WRITEs met a full send queue on one rail may use one rail only)
[ $((imm1 - imm0)) -gt 64 ] ||
	fail "64 rooms of two chunks: decode took $((imm1 - imm0)) immediates, one a room"
vm_log "64 rooms of two chunks: $((imm1 - imm0)) immediates"
[ "$(metric prefill core_wc_error_total)" = 0 ] || fail "error completions on prefill"
[ "$(metric prefill core_imm_split_total)" -gt 0 ] ||
	fail "no room's share was ended by an immediate on each rail (1 MiB rooms span both)"
[ "$(metric prefill core_imm_held_total)" = 0 ] ||
	fail "immediates waited for the room's other WRITEs with both rails up and one session"
[ "$(metric decode core_bad_imm_total)" = 0 ] || fail "decode refused immediates"
for n in prefill decode; do
	left=$(ctl $n rooms | awk '/^rooms / { print $2 }')
	[ "$left" = 0 ] || fail "$n still holds $left rooms"
done
for d in rxe0 rxe1 rxe2 rxe3; do
	[ "$(qps $d)" -gt "${q0[$d]}" ] || fail "a session lost its QP on $d"
done
echo "rails: prefill posted rail 0 $(rail_metric prefill rail_wr_posted_total 0) WRs / $(rail_metric prefill rail_bytes_posted_total 0) B, rail 1 $(rail_metric prefill rail_wr_posted_total 1) WRs / $(rail_metric prefill rail_bytes_posted_total 1) B; room shares ended on both rails: $(metric prefill core_imm_split_total)"
echo "PASS: rails"
