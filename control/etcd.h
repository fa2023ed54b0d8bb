/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Membership through etcd (layer 7 of control/, control/README.md), with [membership] etcd set.
 *
 * kvxd registers itself under [membership] prefix (key PREFIX + its name, value its advertised
 * "IPv4:port") with a lease of lease_s seconds that it renews every third of it, reads the
 * prefix, then watches it from the revision it read.  Every other node listed becomes a peer
 * (kvxd_members_found), and a node whose key goes (it left, or its lease expired because it
 * stopped) is removed (kvxd_members_lost): its session ends and its rooms take the
 * source-lost path.  A node found this way authenticates like a configured one.
 *
 * The client speaks HTTP/1.1 to etcd's v3 JSON gateway (/v3/lease/grant, /v3/kv/put,
 * /v3/kv/range, /v3/lease/keepalive, /v3/watch) on non-blocking sockets driven by the loop:
 * one call at a time plus the watch stream.  What etcd sends is bounded (1 MiB a response or a
 * watch message) and checked (names and addresses as in the configuration, base64, JSON); a
 * bad entry is refused and counted, a bad response restarts the client.  While etcd cannot be
 * reached the peers found stay; the client retries every second and, once back, registers
 * again and reads the whole prefix (peers no longer listed are removed).
 * Thread: the control core.
 */
#ifndef KVX_CONTROL_ETCD_H
#define KVX_CONTROL_ETCD_H

#include "control/kvxd.h"

/* Start the client ([membership] etcd; nothing without it).  0 or -ENOMEM. */
int kvxd_etcd_start(struct kvxd *d);
void kvxd_etcd_stop(struct kvxd *d);
/* The loop hands it its connections' events, its deadline, and ticks it. */
void kvxd_etcd_on_event(struct kvxd *d, struct kvxd_fd *f, uint32_t events);
uint64_t kvxd_etcd_next_due(const struct kvxd *d);
void kvxd_etcd_tick(struct kvxd *d, uint64_t now);
/* "registered", "connecting", ... (operator, tests) */
const char *kvxd_etcd_state(const struct kvxd *d);

#endif /* KVX_CONTROL_ETCD_H */
