# lib.sh: helpers for the VM tests; sourced by tests/vm/test_*.sh, which run
# inside the Soft-RoCE guest through scripts/kvx-vm (bash, root, rxe0/rxe1 up).
#
#   . "$(dirname "$0")/lib.sh"
#
# On exit the trap stops every process started with start_bg and, when the
# test failed, prints the tail of each of their logs.
set -u

: "${KVX_LOGDIR:?run this through scripts/kvx-vm}"
mkdir -p "$KVX_LOGDIR"

# name -> PID of what start_bg started, in start order
declare -A BG_PID=()
BG_NAMES=()
# the kvxd nodes that must not end on their own: wait_until fails at once when one did (a crash
# or an assertion), instead of polling a dead node's socket until its timeout
declare -A BG_WATCH=()
# How long stop_all and stop_bg give a process after SIGTERM before SIGKILL.
: "${KVX_STOP_WAIT:=5}"

vm_log() { printf '[%8s] %s\n' "$(cut -d' ' -f1 /proc/uptime)" "$*"; }

fail() {
	echo "FAIL: $*"
	exit 1
}

# gid_index DEV: index of DEV's IPv4-mapped RoCE v2 GID (::ffff:a.b.c.d), the
# one to pass as perftest's -x; 1 on rxe, where GID 0 is the link-local one.
gid_index() {
	ibv_devinfo -v -d "$1" |
		sed -n 's/^[[:space:]]*GID\[ *\([0-9]*\)\]:[[:space:]]*::ffff:[0-9.]*, RoCE v2$/\1/p' | head -n 1 |
		grep . || { echo "gid_index: no IPv4 RoCE v2 GID on $1" >&2; return 1; }
}

# rdma_counts DEV: "qp=N mr=N cq=N" for DEV, from `rdma resource show`, whose
# lines read "0: rxe0: pd 1 cq 1 qp 1 cm_id 0 mr 0 ctx 0 srq 0". An idle rxe
# device already counts pd 1 cq 1 qp 1: the kernel's own GSI QP (QP1).
rdma_counts() {
	rdma resource show | awk -v dev="$1:" '
		$2 == dev { for (i = 3; i < NF; i += 2) n[$i] = $(i + 1); found = 1 }
		END { if (!found) exit 1; printf "qp=%d mr=%d cq=%d\n", n["qp"], n["mr"], n["cq"] }' ||
		{ echo "rdma_counts: no device $1" >&2; return 1; }
}

# start_bg NAME CMD...: CMD in the background, output to $KVX_LOGDIR/NAME.log.
# Call it from the test's own shell (not in $(...)), so the PID is recorded.
start_bg() {
	local name=$1
	shift
	[ -z "${BG_PID[$name]+x}" ] || fail "start_bg: $name already used"
	"$@" >"$KVX_LOGDIR/$name.log" 2>&1 </dev/null &
	BG_PID[$name]=$!
	BG_NAMES+=("$name")
	[ "$1" != "${KVXD:-}" ] || BG_WATCH[$name]=1
	vm_log "started $name (pid $!): $*"
}

# bg_pid NAME: the PID start_bg recorded for NAME (empty once reaped).
bg_pid() {
	[ -n "${BG_PID[$1]+x}" ] || { echo "bg_pid: $1 was not started" >&2; return 1; }
	echo "${BG_PID[$1]}"
}

# True while PID runs; an exited child stays a zombie (state Z) until reaped.
running() {
	local st
	read -r st 2>/dev/null <"/proc/$1/stat" || return 1
	st=${st##*) }
	[ "${st%% *}" != Z ]
}

not_running() { ! running "$1"; }

none_running() {
	local p
	for p in "$@"; do running "$p" && return 1; done
	return 0
}

# watched_alive: fails the test when a watched kvxd (BG_WATCH) ended on its own.
watched_alive() {
	local n pid
	for n in "${!BG_WATCH[@]}"; do
		pid=${BG_PID[$n]}
		[ -z "$pid" ] || running "$pid" || fail "kvxd $n (pid $pid) ended on its own"
	done
}

# wait_until TIMEOUT_S CMD...: poll CMD every 0.1 s until it succeeds (0) or
# TIMEOUT_S seconds of wall time pass (1). Counted in wall time because the
# emulated guest makes every poll slow.  A watched kvxd that ended on its own
# fails the test at once.
wait_until() {
	local t=$1 end
	shift
	end=$((${EPOCHREALTIME/./} + t * 1000000))
	until "$@"; do
		watched_alive
		((${EPOCHREALTIME/./} < end)) || return 1
		sleep 0.1
	done
}

# stop_pids SIG PID...: send SIG, give them KVX_STOP_WAIT seconds, SIGKILL the
# survivors, then reap them all.
stop_pids() {
	local sig=$1 p
	shift
	for p in "$@"; do running "$p" && kill "-$sig" "$p" 2>/dev/null; done
	wait_until "$KVX_STOP_WAIT" none_running "$@"
	for p in "$@"; do
		running "$p" && kill -KILL "$p" 2>/dev/null && vm_log "pid $p ignored SIG$sig, killed"
		wait "$p" 2>/dev/null
	done
}

# wait_bg NAME TIMEOUT_S: wait for NAME to exit and return its exit code, or
# 124 if it still runs after TIMEOUT_S (it is then left to stop_all).
wait_bg() {
	local pid rc
	pid=$(bg_pid "$1") || return 1
	[ -n "$pid" ] || { vm_log "wait_bg: $1 was already reaped"; return 1; }
	unset "BG_WATCH[$1]" # it is meant to end now
	if ! wait_until "$2" not_running "$pid"; then
		vm_log "$1 (pid $pid) still runs after $2 s"
		return 124
	fi
	wait "$pid"
	rc=$?
	# reaped: its PID may be reused, so stop_all must no longer signal it
	BG_PID[$1]=
	return $rc
}

# stop_bg NAME [SIG]: stop one process started by start_bg (default SIGTERM);
# e.g. `stop_bg server KILL` to kill a peer.
stop_bg() {
	local pid
	pid=$(bg_pid "$1") || return 1
	unset "BG_WATCH[$1]"
	[ -z "$pid" ] || stop_pids "${2:-TERM}" "$pid"
	BG_PID[$1]=
}

# stop_all: stop everything start_bg started, and nothing else.
stop_all() {
	local n pids=()
	BG_WATCH=()
	for n in "${BG_NAMES[@]}"; do [ -z "${BG_PID[$n]}" ] || pids+=("${BG_PID[$n]}"); done
	[ ${#pids[@]} -eq 0 ] || stop_pids TERM "${pids[@]}"
}

# wait_for_socket PATH TIMEOUT_S: wait until the unix socket PATH exists.
wait_for_socket() {
	wait_until "$2" test -S "$1" || { vm_log "no socket $1 after $2 s"; return 1; }
}

# wait_for_port PORT TIMEOUT_S: wait until something listens on TCP PORT.
listening() { [ -n "$(ss -Hltn "sport = :$1")" ]; }
wait_for_port() {
	wait_until "$2" listening "$1" || { vm_log "nothing listens on TCP port $1 after $2 s"; return 1; }
}

# ended_report: each process start_bg started that ended before the test stopped it, with its
# exit status (above 128: killed by signal status-128) and the sanitizer, assertion and stack
# lines of its log.  Call it from the test's own shell: it reaps them.
ended_report() {
	local n pid rc
	for n in "${BG_NAMES[@]}"; do
		pid=${BG_PID[$n]}
		[ -n "$pid" ] && ! running "$pid" || continue
		wait "$pid"
		rc=$?
		BG_PID[$n]=
		echo "----- $n (pid $pid) ended before the test stopped it: exit status $rc$( ((rc <= 128)) || echo " (signal $((rc - 128)))") -----"
		grep -m 40 -E 'ERROR: (Address|Leak|Thread)Sanitizer|runtime error:|Assertion .* failed|SUMMARY: |^ +#[0-9]+ ' \
			"$KVX_LOGDIR/$n.log"
	done
}

on_exit() {
	local rc=$? n
	trap - EXIT
	[ "$rc" -eq 0 ] || ended_report
	stop_all
	if [ "$rc" -ne 0 ]; then
		for n in "${BG_NAMES[@]}"; do
			echo "----- tail of $n.log -----"
			tail -n 20 "$KVX_LOGDIR/$n.log"
		done
	fi
	exit "$rc"
}
trap on_exit EXIT
# a signal ends the test through the EXIT trap, as a failure
trap 'exit 1' INT TERM

# ---- kvx nodes ----------------------------------------------------------------------------
# Paths inside the guest: the host's build and source trees (read-only root share).
KVXD="$KVX_BUILD/kvxd"
KVXCTL="$KVX_BUILD/kvxctl"
KVX_BENCH="$KVX_BUILD/kvx-bench"
mkdir -p /run/kvx
# the nodes' shared secret (configs/*.ini: secret_file), kvxd's own with mode 0600
KVX_SECRET=/run/kvx/cluster.secret
[ -s "$KVX_SECRET" ] || (umask 077 && head -c 32 /dev/urandom | base64 >"$KVX_SECRET")

# kvxd_start NAME [extra kvxd args]: start the node configs/NAME.ini, wait for its socket.
kvxd_start() {
	local name=$1
	shift
	start_bg "$name" "$KVXD" -c "$KVX_SRC/configs/$name.ini" "$@"
	wait_for_socket "/run/kvx/$name.sock" 20 || fail "kvxd $name did not open its engine socket"
}

# ctl NAME CMD...: kvxctl against node NAME.
ctl() {
	local name=$1
	shift
	"$KVXCTL" -s "/run/kvx/$name.sock" "$@"
}

# peer_ready NAME PEER: NAME sees PEER in state READY.
peer_ready() { ctl "$1" peers 2>/dev/null | grep -q "^peer $2 .* state READY"; }

# wait_peer NAME PEER TIMEOUT_S
wait_peer() { wait_until "$3" peer_ready "$1" "$2" || fail "$1 never saw $2 READY: $(ctl "$1" peers)"; }

# metric NAME METRIC: the value of a counter (summed over cores) from `kvxctl counters`.
metric() {
	ctl "$1" counters | awk -v m="kvx_$2" '$1 ~ "^"m"[{]" { s += $2 } END { print s + 0 }'
}

# json_get FILE KEY: a scalar from kvx-bench --json output.
json_get() {
	sed -n "s/.*\"$2\": *\"\{0,1\}\([^,\"}]*\)\"\{0,1\}.*/\1/p" "$1" | head -n 1
}

# storm_end NAME OUT: the kvx-bench started as NAME (start_bg) ends within 90 s; its JSON report,
# copied to OUT and printed, says no room was harmed: every successful room verified, no canary
# byte changed after a release, no event of a wrong generation.
storm_end() {
	wait_bg "$1" 90 || fail "kvx-bench failed: $(cat "$KVX_LOGDIR/$1.log")"
	cp "$KVX_LOGDIR/$1.log" "$2"
	cat "$2"
	shift
	[ "$(json_get "$1" verified)" = ok ] && [ "$(json_get "$1" mismatched_bytes)" = 0 ] ||
		fail "successful rooms corrupted"
	[ "$(json_get "$1" canary_changed_bytes)" = 0 ] ||
		fail "$(json_get "$1" canary_changed_bytes) bytes changed after release"
	[ "$(json_get "$1" bad_generation)" = 0 ] || fail "bad generation"
}

# rails_configs DIR: configs/prefill.ini and decode.ini for the two-rail mode (# kvx-vm: rails 2)
# written to DIR: each node's second device as [rail.1] (prefill rxe2, decode rxe3, at its RoCE
# v2 GID index), the peer's second-rail address in allow_from (its QP_INFO's rail-1 GID is the
# IPv4-mapped one of 10.78.0.x), and prefill without decode2.
rails_configs() {
	local dir=$1 g2 g3
	g2=$(gid_index rxe2) && g3=$(gid_index rxe3) || fail "the second rail has no RoCE v2 GID"
	mkdir -p "$dir"
	awk -v g="$g2" '
		/^\[peer\.decode2\]/ { skip = 1; next }
		/^\[/ { skip = 0 }
		skip { next }
		/^\[engine\]/ { printf "[rail.1]\ndevice = rxe2\ngid_index = %s\n\n", g }
		{ print }
		/^\[peer\.decode\]/ { print "allow_from = 10.78.0.2" }' \
		"$KVX_SRC/configs/prefill.ini" >"$dir/prefill.ini"
	awk -v g="$g3" '
		/^\[engine\]/ { printf "[rail.1]\ndevice = rxe3\ngid_index = %s\n\n", g }
		{ print }
		/^\[peer\.prefill\]/ { print "allow_from = 10.78.0.1" }' \
		"$KVX_SRC/configs/decode.ini" >"$dir/decode.ini"
}

# rails_up DIR: prefill and decode started in the two-rail mode (rails_configs DIR), their engine
# sockets open and each READY with the other.
rails_up() {
	local n
	rails_configs "$1"
	for n in prefill decode; do
		start_bg "$n" "$KVXD" -c "$1/$n.ini"
		wait_for_socket "/run/kvx/$n.sock" 20 || fail "kvxd $n did not open its engine socket"
	done
	wait_peer decode prefill 20
	wait_peer prefill decode 20
}

# rail_metric NAME FAMILY RAIL: a per-rail counter (kvx_rail_*_total) summed over cores.
rail_metric() {
	ctl "$1" counters | awk -v m="kvx_$2" -v r="rail=\"$3\"" \
		'$1 ~ "^"m"[{]" && index($1, r) { s += $2 } END { print s + 0 }'
}

# kvx-bench's --prefill-wait-ms where links fail: a room that decode failed while its source was
# unreachable (a session that could not be set up) is told at prefill only by waiting_ms (the
# configs' 20 s), from when the prefill engine's chunk made it there
KVX_PREFILL_WAIT_MS=25000

# rail_storm DIR SETTLE_MS: the two-rail nodes up (rails_up DIR) and a storm between them that
# runs until the test's checks are done (SIGINT; failed rooms allowed, released pages watched
# SETTLE_MS), rooms flowing.
rail_storm() {
	[ "$KVX_RAILS" = 2 ] ||
		fail "KVX_RAILS is '$KVX_RAILS': the runner did not honour '# kvx-vm: rails 2'"
	rails_up "$1"
	start_bg storm "$KVX_BENCH" --prefill /run/kvx/prefill.sock --decode /run/kvx/decode.sock \
		--json --duration 150 --inflight 8 --pages 16 --bufs 4 --settle-ms "$2" \
		--allow-failures --timeout 54 --prefill-wait-ms "$KVX_PREFILL_WAIT_MS"
	wait_until 20 eval '[ "$(metric decode core_recv_imm_total)" -ge 20 ]' || fail "no rooms flow"
	# rail 1 carries rooms before the test cuts it (a rail fenced in a first handshake would
	# leave nothing on it to fail); RAIL_FENCED0: prefill's fences so far
	local b
	b=$(rail_metric prefill rail_bytes_posted_total 1)
	wait_until 10 eval "[ \"\$(rail_metric prefill rail_bytes_posted_total 1)\" -gt $b ]" ||
		fail "rail 1 carries nothing: $(ctl prefill peers)"
	RAIL_FENCED0=$(metric prefill rails_fenced_total)
}
