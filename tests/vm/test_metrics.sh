#!/bin/bash
# test_metrics.sh: the Prometheus endpoint ([metrics] listen) of both nodes, scraped before,
# during and after a short abort storm (300 rooms, about a third aborted) and parsed with Debian's
# prometheus_client (tests/vm/metrics_scrape.py checks every histogram: cumulative buckets,
# +Inf = _count, a bounded _sum).  One scrape during the storm holds two clients that never
# finish their request: the endpoint answers anyway (python's urllib, the scrape's client).  After the storm the counters moved and
# the histograms agree with the counters and with kvx-bench: every decode room's end counted
# once (= rooms opened), one abort-to-release per release, one bytes observation per success
# with the bytes kvx-bench verified; kvxctl --json is JSON with the same values.
. "$(dirname "$0")/lib.sh"

PY=/usr/bin/python3 # Debian's, with python3-prometheus-client
SCRAPE="$KVX_SRC/tests/vm/metrics_scrape.py"
declare -A PORT=([prefill]=9470 [decode]=9471)

# the VM configs plus a [metrics] section (the shipped ones have none)
for n in prefill decode; do
	{
		cat "$KVX_SRC/configs/$n.ini"
		printf '\n[metrics]\nlisten = 127.0.0.1:%s\n' "${PORT[$n]}"
	} >"/run/kvx/$n-metrics.ini"
	"$KVXD" --check-config -c "/run/kvx/$n-metrics.ini" | grep -q "^listen = 127.0.0.1:${PORT[$n]}$" ||
		fail "$n: --check-config does not show [metrics] listen"
	start_bg "$n" "$KVXD" -c "/run/kvx/$n-metrics.ini"
	wait_for_socket "/run/kvx/$n.sock" 20 || fail "kvxd $n did not open its engine socket"
	wait_for_port "${PORT[$n]}" 20 || fail "$n: no metrics endpoint"
done
wait_peer decode prefill 20
wait_peer prefill decode 20

# scrape NAME OUT [--slow N]: one checked scrape of node NAME into OUT (JSON summary)
scrape() {
	local n=$1 out=$2
	shift 2
	"$PY" "$SCRAPE" "http://127.0.0.1:${PORT[$n]}/metrics" "$@" >"$out" ||
		fail "scraping $n failed: $(cat "$out")"
}
# val FILE SERIES: a value of the summary (SERIES exact, or NAME: summed over its label sets)
val() {
	"$PY" -c 'import json, sys
d = json.load(open(sys.argv[1]))["series"]
k = sys.argv[2]
print(int(sum(v for s, v in d.items() if s == k or s.startswith(k + "{"))))' "$1" "$2"
}

L=$KVX_LOGDIR
scrape prefill "$L/prefill-0.json"
scrape decode "$L/decode-0.json"

# one watcher per node scrapes every 0.1 s through the storm (Python starts in seconds here)
for n in decode prefill; do
	start_bg "watch-$n" "$PY" "$SCRAPE" "http://127.0.0.1:${PORT[$n]}/metrics" --slow 2 \
		--watch "$L/$n-during" "$L/storm-done"
	wait_until 60 test -s "$L/$n-during-0.json" || fail "$n: the watcher never scraped"
done
out=$L/storm.json
start_bg storm bash -c "exec '$KVX_BENCH' --prefill /run/kvx/prefill.sock \
	--decode /run/kvx/decode.sock --json --rooms 300 --inflight 8 --pages 4 --bufs 2 \
	--chunks 2 --abort-ratio 0.5 --abort-delay-us 3000 --settle-ms 100 >'$out' 2>'$out.err'"
wait_bg storm 300 || fail "kvx-bench failed: $(cat "$out" "$out.err")"
touch "$L/storm-done"
for n in decode prefill; do
	wait_bg "watch-$n" 60 || fail "$n: a scrape failed: $(cat "$KVX_LOGDIR/watch-$n.log")"
done
during=$(ls "$L"/decode-during-*.json | wc -l)
j() { json_get "$out" "$1"; }
[ "$(j verified)" = ok ] || fail "successful rooms corrupted"
for k in untold_decode untold_prefill duplicate_events_decode duplicate_events_prefill; do
	[ "$(j $k)" = 0 ] || fail "$k = $(j $k)"
done

scrape prefill "$L/prefill-1.json"
scrape decode "$L/decode-1.json"
P0=$L/prefill-0.json P1=$L/prefill-1.json D0=$L/decode-0.json D1=$L/decode-1.json

# scrapes saw the storm under way: rooms opened, but not all of them yet
mid=$("$PY" -c 'import glob, json, sys
final = int(sys.argv[2])
n = 0
for f in glob.glob(sys.argv[1] + "-*.json"):
    o = json.load(open(f))["series"]["kvx_rooms_opened_total"]
    n += 0 < o < final
print(n)' "$L/decode-during" "$(val "$D1" kvx_rooms_opened_total)")
[ "$mid" -gt 0 ] || fail "no scrape of $during saw the storm under way"

# counters moved
moved() { [ "$(val "$2" "$3")" -gt "$(val "$1" "$3")" ] || fail "$3 did not move ($1 -> $2)"; }
moved "$P0" "$P1" kvx_core_wr_posted_total
moved "$P0" "$P1" kvx_core_bytes_posted_total
moved "$P0" "$P1" kvx_frames_rx_total
moved "$D0" "$D1" kvx_core_recv_imm_total
moved "$D0" "$D1" kvx_rooms_opened_total
moved "$D0" "$D1" kvx_aborts_total
# the histograms agree with the counters and with kvx-bench
lat='kvx_room_latency_seconds_count{role="decode"'
d_succ=$(val "$D1" "$lat,state=\"SUCCESS\"}") d_rel=$(val "$D1" "$lat,state=\"RELEASED\"}")
opened=$(val "$D1" kvx_rooms_opened_total)
[ $((d_succ + d_rel)) -eq "$opened" ] ||
	fail "decode room ends counted $d_succ + $d_rel, rooms opened $opened"
[ "$(val "$D1" kvx_abort_release_seconds_count)" -eq "$(val "$D1" kvx_releases_total)" ] ||
	fail "abort-to-release observations != releases"
[ "$(val "$D1" kvx_releases_total)" -gt 0 ] || fail "no release"
bytes='kvx_room_bytes_count{role="decode",device="rxe1",rail="0"}'
[ "$(val "$D1" "$bytes")" -eq "$d_succ" ] || fail "decode bytes observations != successes"
bsum=$(val "$D1" 'kvx_room_bytes_sum{role="decode",device="rxe1",rail="0"}')
[ "$bsum" -eq "$(j bytes)" ] || fail "decode room bytes $bsum, kvx-bench verified $(j bytes)"
p_succ=$(val "$P1" 'kvx_room_latency_seconds_count{role="prefill",state="SUCCESS"}')
[ "$p_succ" -ge "$d_succ" ] || fail "prefill successes $p_succ < decode successes $d_succ"
for f in "$P1" "$D1"; do
	[ "$(val "$f" kvx_peer_handshake_seconds_count)" -ge 1 ] || fail "$f: no handshake observed"
	[ "$(val "$f" 'kvx_peers{state="READY"}')" -eq 1 ] || fail "$f: the peer is not READY"
	[ "$(val "$f" kvx_metrics_http_timeouts_total)" -le 2 ] || fail "$f: more timeouts than slow clients"
done
# the rooms gauge follows the table: kvx-bench is gone, so are its decode rooms
rooms_gone() { scrape decode "$L/decode-2.json" && [ "$(val "$L/decode-2.json" kvx_rooms)" -eq 0 ]; }
wait_until 10 rooms_gone || fail "decode rooms left in the table: $(val "$L/decode-2.json" kvx_rooms)"
# every scrape before this one was answered 200 (this one is counted once it is answered)
[ "$(val "$D1" 'kvx_metrics_http_responses_total{code="200"}')" -eq $((during + 1)) ] ||
	fail "decode answered fewer scrapes than were made"

# kvxctl --json: JSON, and the same values (the nodes are idle now)
ctl decode --json >"$L/decode.json" || fail "kvxctl --json failed"
"$PY" -c 'import json, sys
d = json.load(open(sys.argv[1]))
assert d["node"] == "decode", d["node"]
m = d["metrics"]
opened = m["kvx_rooms_opened_total"]["samples"][0]["value"]
assert opened == int(sys.argv[2]), (opened, sys.argv[2])
h = [s for s in m["kvx_room_latency_seconds"]["samples"] if s["labels"]["role"] == "decode"]
assert sum(s["count"] for s in h) == opened
assert all(s["buckets"][-1] == ["+Inf", s["count"]] for s in h)' "$L/decode.json" "$opened" ||
	fail "kvxctl --json disagrees: $(head -c 400 "$L/decode.json")"

q() { "$PY" -c 'import json, sys; print(json.load(open(sys.argv[1]))["quantiles"].get(sys.argv[2], ["-", "-"])[int(sys.argv[3])])' "$@"; }
vm_log "decode: $("$PY" -c 'import json, sys; d = json.load(open(sys.argv[1])); print("families", d["families"], "histogram series", d["histograms"], "scrape", d["seconds"], "s")' "$D1")"
echo "metrics: watch_scrapes=$during mid_storm=$mid rooms=$(j rooms) decode_success=$d_succ decode_released=$d_rel prefill_success=$p_succ releases=$(val "$D1" kvx_releases_total) room_latency_decode_success_p50_le=$(q "$D1" "kvx_room_latency_seconds{role=\"decode\",state=\"SUCCESS\"}" 0) p99_le=$(q "$D1" "kvx_room_latency_seconds{role=\"decode\",state=\"SUCCESS\"}" 1) abort_release_p50_le=$(q "$D1" kvx_abort_release_seconds 0) handshake_le=$(q "$D1" kvx_peer_handshake_seconds 0) decode_bytes=$bsum"
echo "PASS: metrics"
