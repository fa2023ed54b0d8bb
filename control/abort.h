/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Abort and drain-aware acknowledgement (DESIGN.md section 5), and everything that ends a
 * room from the control side: timeouts, a peer's or an engine's loss.  Layer 3 of control/
 * (control/README.md).  Thread: the control core; nothing here blocks.
 */
#ifndef KVX_CONTROL_ABORT_H
#define KVX_CONTROL_ABORT_H

#include "control/rooms.h"

const char *kvxd_abort_state_str(int state);
/* The one transition function of the decode abort (enum kvxd_abort_state, control/rooms.h):
 * checked against the legal-next table, traced, counted (kvxd_counters.abort_transitions).
 * 0, or -EINVAL (illegal: unchanged). */
int kvxd_abort_set(struct kvxd *d, struct kvxd_room *r, enum kvxd_abort_state to);

/* Decode: abort the room (engine abort, waiting timeout, a source's failure or loss, the
 * engine's loss).  Returns the abort generation (the first abort's, if it was aborted
 * already), -EINVAL (not a decode room) or -EALREADY (it succeeded). */
int64_t kvxd_decode_abort(struct kvxd *d, struct kvxd_room *r, int error, const char *reason);
/* Decode: an ABORT_ACK from peer p. */
void kvxd_on_abort_ack(struct kvxd *d, struct kvxd_peer *p, const struct kvx_wire_abort_ack *a);
/* Prefill: an ABORT from peer p. */
void kvxd_on_abort(struct kvxd *d, struct kvxd_peer *p, const struct kvx_wire_abort *a);
/* Prefill: the room's core reported it drained: every ACK target gets its ABORT_ACK. */
void kvxd_on_drained(struct kvxd *d, struct kvxd_room *r);

/* The room's deadline came (kvxd_rooms_due): waiting timeout, release deadline, tombstone
 * expiry, the end of a linger; then its next deadline is armed. */
void kvxd_abort_on_timer(struct kvxd *d, struct kvxd_room *r, uint64_t now);

/* Peer p's handshake failed after it answered: the rooms that depend on it fail. */
void kvxd_abort_peer_setup_failed(struct kvxd *d, struct kvxd_peer *p);
/* A published session of p ended (failed: by failure, else replaced): see abort.c. */
void kvxd_abort_source_lost(struct kvxd *d, struct kvxd_peer *p, bool failed);
/* Every QP of one of p's sessions is destroyed: fences of p's rooms may be complete. */
void kvxd_abort_peer_fenced(struct kvxd *d, struct kvxd_peer *p);
/* p's new session is up: ABORTs lost with the old connection are sent again. */
void kvxd_abort_resend_for_peer(struct kvxd *d, struct kvxd_peer *p);
/* The room's engine disconnected: a decode room is aborted, a prefill room whose last chunk
 * never came fails (its core pushes the failure to the decode endpoint). */
void kvxd_abort_engine_lost(struct kvxd *d, struct kvxd_room *r);

#endif /* KVX_CONTROL_ABORT_H */
