/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The Prometheus endpoint ([metrics] listen; layer 7 of control/, control/README.md): a small
 * non-blocking HTTP/1.0 responder on the control core's epoll loop.  GET (or HEAD) /metrics is
 * answered with control/metrics.h's text exposition, then the connection closes; nothing else
 * is served.  Every client is treated as hostile, and each costs a bounded amount:
 *   - at most KVXD_HTTP_MAX_CONNS connections; for one more, the oldest that has not sent its
 *     whole request yet is closed (connections that only hold a socket open cannot lock a
 *     scraper out), else the oldest whose answer has waited KVXD_HTTP_GRACE_MS to be read,
 *     and when there is none, the new one is answered 503 and closed at once;
 *   - a connection is closed once its client has the whole answer, or at its deadline with a
 *     reset if the kernel still holds part of it: what a client leaves unread never outlives
 *     its connection in the kernel (closed at once, the socket would keep the answer there);
 *   - a request head of at most KVXD_HTTP_REQ_MAX bytes (its buffer grows to that, no more):
 *     a longer one is answered 431 and closed;
 *   - KVXD_HTTP_DEADLINE_MS from accept to the last byte of the answer (reading the request
 *     and writing the answer both count): a client that sends slowly, never finishes or never
 *     reads is closed then;
 *   - at most KVXD_HTTP_ACCEPT_BURST accepts per wake-up, so a connection flood shares the
 *     loop with everything else.
 * Reads and writes never wait: a socket that has nothing, or takes nothing, waits in epoll.
 *
 * Thread: the control core only; it never blocks.  Counted in struct kvxd_counters (http_*).
 */
#ifndef KVX_CONTROL_METRICS_HTTP_H
#define KVX_CONTROL_METRICS_HTTP_H

#include <stdint.h>

#include "control/kvxd.h"

#define KVXD_HTTP_MAX_CONNS 16
#define KVXD_HTTP_REQ_MAX 4096
#define KVXD_HTTP_DEADLINE_MS 5000
#define KVXD_HTTP_GRACE_MS 500 /* a scraper reads its answer in far less */
#define KVXD_HTTP_ACCEPT_BURST 32
#define KVXD_HTTP_BODY_MAX (4u << 20) /* an exposition larger than this is a 500 */

/* Listen on d->cfg.metrics_listen (port 0: any free port, for tests) and register with the
 * loop.  0, or -errno (logged).  Does nothing (0) without [metrics] listen. */
int kvxd_metrics_http_start(struct kvxd *d);
/* Close every connection and the listener. */
void kvxd_metrics_http_stop(struct kvxd *d);
/* The port it listens on (0: none). */
uint16_t kvxd_metrics_http_port(const struct kvxd *d);

/* The loop's calls: an event on the listener or a connection (f is the registered kvxd_fd); the
 * deadlines due at now; the earliest deadline (KVXD_TIMER_NEVER: none). */
void kvxd_metrics_http_on_event(struct kvxd *d, struct kvxd_fd *f, uint32_t events);
void kvxd_metrics_http_tick(struct kvxd *d, uint64_t now);
/* After the loop's batch: free the connections evicted during it. */
void kvxd_metrics_http_reap(struct kvxd *d);
uint64_t kvxd_metrics_http_next_due(const struct kvxd *d);

#endif /* KVX_CONTROL_METRICS_HTTP_H */
