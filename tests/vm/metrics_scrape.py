#!/usr/bin/python3
"""metrics_scrape.py URL [--slow N] [--watch PREFIX STOPFILE]: scrape a kvxd metrics endpoint
(tests/vm/test_metrics.sh).

Fetches URL, checks the answer's status and content type, parses the text with Debian's
prometheus_client (text_string_to_metric_families) and checks every histogram series:
le bounds increasing and ending at +Inf, buckets cumulative, +Inf equal to _count, _sum
present, non-negative, and no more than its observations at their buckets' upper bounds.
Prints one JSON object: {"series": {NAME{LABELS}: VALUE}, "families": N, "histograms": N,
"quantiles": {NAME{LABELS}: [P50, P99]}, "seconds": S}; labels without node, in their order.
With --slow N, N clients that send half a request line and never finish are held open while
it scrapes (the endpoint must answer meanwhile).  With --watch, it scrapes every 0.1 s into
PREFIX-0.json, PREFIX-1.json, ... (the slow clients on the first one only) until STOPFILE exists,
then once more (a scrape costs milliseconds; starting Python in the VM, seconds).  Exit 1 with a
message on any failure.
"""
import json
import os
import socket
import sys
import time
import urllib.parse
import urllib.request

from prometheus_client.parser import text_string_to_metric_families


def fail(msg):
    print("metrics_scrape: " + msg, file=sys.stderr)
    sys.exit(1)


def key(name, labels):
    items = [(k, v) for k, v in labels.items() if k != "node"]
    if not items:
        return name
    return name + "{" + ",".join('%s="%s"' % (k, v) for k, v in items) + "}"


def check_histogram(fam, quantiles):
    series = {}
    for s in fam.samples:
        labels = dict(s.labels)
        le = labels.pop("le", None)
        e = series.setdefault(tuple(labels.items()), {"b": [], "sum": None, "count": None})
        if s.name.endswith("_bucket"):
            e["b"].append((float(le), s.value))
        elif s.name.endswith("_sum"):
            e["sum"] = s.value
        elif s.name.endswith("_count"):
            e["count"] = s.value
        else:
            fail("%s: unexpected sample %s" % (fam.name, s.name))
    for labels, e in series.items():
        what = "%s%s" % (fam.name, dict(labels))
        b = e["b"]
        les = [x[0] for x in b]
        counts = [x[1] for x in b]
        if not b or les[-1] != float("inf"):
            fail(what + ": no +Inf bucket")
        if any(les[i] >= les[i + 1] for i in range(len(les) - 1)):
            fail(what + ": le bounds not increasing")
        if any(counts[i] > counts[i + 1] for i in range(len(counts) - 1)):
            fail(what + ": buckets not cumulative: %s" % counts)
        if e["count"] is None or e["count"] != counts[-1]:
            fail(what + ": _count %s is not the +Inf bucket %s" % (e["count"], counts[-1]))
        if e["sum"] is None or e["sum"] < 0:
            fail(what + ": _sum missing or negative")
        if counts[-1] == counts[-2]:  # nothing above the last bound: the sum is bounded
            upper = sum((counts[i] - (counts[i - 1] if i else 0)) * les[i]
                        for i in range(len(les) - 1))
            if e["sum"] > upper * (1 + 1e-9) + 1e-9:
                fail(what + ": _sum %s over what its buckets allow (%s)" % (e["sum"], upper))
        n = counts[-1]
        if n:
            q = []
            for p in (0.5, 0.99):
                q.append(next(le for le, c in b if c >= p * n))
            quantiles[key(fam.name, dict(labels))] = q
    return len(series)


def scrape(url, nslow):
    u = urllib.parse.urlparse(url)
    slow = []
    for _ in range(nslow):
        s = socket.create_connection((u.hostname, u.port), timeout=5)
        s.sendall(b"GET /met")
        slow.append(s)
    t0 = time.monotonic()
    with urllib.request.urlopen(url, timeout=10) as r:
        if r.status != 200:
            fail("status %d" % r.status)
        ctype = r.headers.get("Content-Type", "")
        if not ctype.startswith("text/plain; version=0.0.4"):
            fail("content type " + ctype)
        text = r.read().decode("utf-8")
    seconds = time.monotonic() - t0
    for s in slow:  # still held: nobody waited for them
        s.setblocking(False)
        try:
            if s.recv(1) == b"":
                fail("a slow client was closed before its deadline")
        except BlockingIOError:
            pass
        s.close()
    series, quantiles, nhist, fams = {}, {}, 0, 0
    for fam in text_string_to_metric_families(text):
        fams += 1
        if fam.type == "histogram":
            nhist += check_histogram(fam, quantiles)
        for s in fam.samples:
            if s.labels.get("node") is None:
                fail("%s: no node label" % s.name)
            series[key(s.name, s.labels)] = s.value
    return {"series": series, "families": fams, "histograms": nhist, "quantiles": quantiles,
            "seconds": round(seconds, 4), "slow_clients": nslow}


def main():
    args = sys.argv[1:]
    if not args:
        fail("usage: metrics_scrape.py URL [--slow N] [--watch PREFIX STOPFILE]")
    url, nslow, watch = args[0], 0, None
    i = 1
    while i < len(args):
        if args[i] == "--slow" and i + 1 < len(args):
            nslow = int(args[i + 1])
            i += 2
        elif args[i] == "--watch" and i + 2 < len(args):
            watch = (args[i + 1], args[i + 2])
            i += 3
        else:
            fail("unknown argument " + args[i])
    if not watch:
        print(json.dumps(scrape(url, nslow)))
        return
    prefix, stop = watch
    n = 0
    while True:
        last = os.path.exists(stop)
        with open("%s-%d.json" % (prefix, n), "w") as f:
            json.dump(scrape(url, nslow if n == 0 else 0), f)
        n += 1
        if last:
            break
        time.sleep(0.1)


main()
