/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Peers: connections, the authenticated handshake with its journal (DESIGN.md section 4),
 * sessions, heartbeats, and the frames a peer sends (layer 4 of control/, control/README.md).
 * Thread: the control core; nothing here blocks (non-blocking sockets, a connect in progress
 * is finished on EPOLLOUT).
 */
#ifndef KVX_CONTROL_PEER_H
#define KVX_CONTROL_PEER_H

#include "control/kvxd.h"

void kvxd_peer_init_all(struct kvxd *d);
void kvxd_peer_on_event(struct kvxd *d, struct kvxd_peer *p, uint32_t events);
void kvxd_pending_on_event(struct kvxd *d, struct kvxd_pending *pc, uint32_t events);
void kvxd_peer_accept(struct kvxd *d);
/* Close the accepted sockets that never authenticated (shutdown). */
void kvxd_pending_close_all(struct kvxd *d);
/* Free the pending connections dropped during this loop iteration (the loop, at its end). */
void kvxd_pending_reap(struct kvxd *d);
/* Write the frames queued on every peer's connection (kvxd_peer_send); a connection that fails
 * to take them resets its peer.  The loop calls it once per iteration, after waking the
 * engines and before it waits. */
void kvxd_peers_flush(struct kvxd *d);
/* Timers of the peers: dial and retry, handshake deadlines, heartbeats, rollback sweeps,
 * fences asked for (kvxd_peer_fence_request), pending connections' deadlines. */
void kvxd_peer_tick(struct kvxd *d, uint64_t now);
/* The earliest handshake deadline of a peer in setup (UINT64_MAX: none): the loop wakes for it,
 * so the side whose deadline comes first times out first. */
uint64_t kvxd_peer_next_due(const struct kvxd *d);
/* End the peer's session or setup: fence and roll back its journal; its rooms take the
 * source-lost path (or the setup-failed path). */
void kvxd_peer_reset(struct kvxd *d, struct kvxd_peer *p, const char *why);
/* Runtime membership.  kvxd_peer_add: a new peer in a vacant slot (or a new one), idle, dialled
 * or accepted like a configured one.  0, -EEXIST (a live peer has that name), -ENOSPC (every
 * slot taken, KVX_MAX_PEERS) or -ENOBUFS (the completion queues have no room for its QPs:
 * kvxd_peer_room()).  kvxd_peer_remove: end its session (its rooms take the source-lost path,
 * rooms waiting for it fail at once), refuse it from now on, free the slot once nothing is
 * left of it. */
int kvxd_peer_add(struct kvxd *d, const struct kvx_config_peer *cp);
void kvxd_peer_remove(struct kvxd *d, struct kvxd_peer *p, const char *why);
/* How many more peers the completion queues can take: each core's CQ holds 2 x (sq_depth +
 * rq_depth) per peer slot in use (a removed peer's slot counts until it is freed).  With
 * connect = on_demand any free slot: the CQs bound the sessions up at once instead (a dial
 * waits, a peer's dial is answered BYE BUSY, until a session closes). */
int kvxd_peer_room(const struct kvxd *d);
/* Start: the CQs must be no larger than the device allows (dev_info.max_cqe).  connect =
 * on_demand: a smaller CQ only holds fewer sessions at once, so cq_depth is lowered to the
 * limit; connect = always: every peer's QPs must fit, so a larger one is refused (-EINVAL,
 * logged with what to change). */
int kvxd_peer_fit_cq(struct kvxd *d);
/* A polling core gave a QP back after QP_REMOVE: continue that peer's rollback. */
void kvxd_qpc_retired(struct kvxd *d, struct kvxd_qpc *q);
/* A verbs worker's done KVXD_VJOB_CONNECT (control/vwork.h): its peer's handshake goes on
 * (QP_READY), or its rollback, which waited for the worker, does. */
void kvxd_peer_connect_done(struct kvxd *d, struct kvxd_vjob *j);

/* A QP of p's session on this rail failed and is quiescent (its rooms failed).  With another
 * rail still up the session carries on without it: rooms' WRITEs avoid it until the session is
 * replaced, after a backoff, to try it again (kvxd_peer_rail_idle).  Returns false when no rail
 * is left: the caller replaces the session now. */
bool kvxd_peer_rail_failed(struct kvxd *d, struct kvxd_peer *p, int rail);
/* A polling core's QP q of peer index `peer`, session gen, took WRs it will not run (its doorbell
 * was refused): move it to ERR now, so that they flush and its rooms resolve.  q is compared by
 * value with the peer's QPs first: it may be gone already. */
void kvxd_peer_qp_stuck(struct kvxd *d, int peer, const struct kvxd_qpc *q, uint32_t gen);
/* Our QP q (gen: its session) is in error: the peer is told to fence its end of it before
 * anything q carried is acknowledged (KVXD_BYE_FENCE), or the session is replaced at once. */
void kvxd_peer_qp_errored(struct kvxd *d, int peer, const struct kvxd_qpc *q, uint32_t gen);
/* May an errored QP's quiescence replace the session?  Not when we fenced it because the
 * peer's end failed: the peer replaces it (its own QP_QUIESCED), or its rail's retry does. */
bool kvxd_peer_lane_fenced_by_peer(const struct kvxd *d, const struct kvxd_peer *p,
				   const struct kvxd_qpc *q);
/* A core has no WRITE to p in flight while p is held for its replacement (gen: the session). */
void kvxd_peer_rail_idle(struct kvxd *d, struct kvxd_peer *p, int core, uint32_t gen);
/* Operator: pause, resume or try a peer.  0 or -errno. */
int kvxd_peer_admin(struct kvxd *d, const char *name, const char *verb);
/* Journal entries still held by peers that are not READY (tests, operator). */
int kvxd_journal_pending(const struct kvxd *d);

#endif /* KVX_CONTROL_PEER_H */
