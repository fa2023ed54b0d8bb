/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Sending to peers (layer 1 of control/, see control/README.md).  Thread: the control core
 * only; nothing here blocks (sockets are non-blocking; what the socket does not take waits in
 * the stream's buffer and goes on EPOLLOUT).
 */
#ifndef KVX_CONTROL_PEER_IO_H
#define KVX_CONTROL_PEER_IO_H

#include "control/kvxd.h"

const char *kvxd_peer_state_str(int state);
/* The live peer with that name (not a removed one, not a free slot), or NULL. */
struct kvxd_peer *kvxd_peer_find(struct kvxd *d, const char *name);

/* Framing buffers of a connection.  queue: 0, -ENOBUFS (over 64 MiB unsent: a peer that does
 * not read) or -ENOMEM.  flush: write what the socket takes; 0 or -errno (broken).  fill: read
 * what is there; 0, or -errno / -ECONNRESET at EOF.  free: drop both buffers. */
void kvxd_stream_free(struct kvxd_stream *s);
int kvxd_stream_queue(struct kvxd_stream *s, const uint8_t *buf, size_t len);
int kvxd_stream_flush(struct kvxd *d, struct kvxd_stream *s);
int kvxd_stream_fill(struct kvxd_stream *s);

/* Encode and queue one frame on the peer's connection: 0, -ENOTCONN (none), or the encode /
 * queue error.  The loop writes it before it next waits (kvxd_peers_flush, control/peer.h),
 * in order with the peer's other frames; a send error there resets the peer.  Never changes
 * the peer's state. */
int kvxd_peer_send(struct kvxd *d, struct kvxd_peer *p, const struct kvx_wire_msg *m);

/* Send a ROOM_STATUS now, or as soon as the peer is READY again; kept waiting_ms so that a new
 * session sends it again (decode drops duplicates). */
void kvxd_peer_push_status(struct kvxd *d, struct kvxd_peer *p,
			   const struct kvx_wire_room_status *st);
/* A new session, or the tick after a send failed on the live one: send every kept ROOM_STATUS
 * not sent on it yet, in order.  Returns whether all went. */
bool kvxd_peer_flush_status(struct kvxd *d, struct kvxd_peer *p);

/* Ask the peer layer to fence the peer's QPs (error state, then destroy, through its journal)
 * because a room got no ABORT_ACK in time.  Acted on by kvxd_peer_tick() in this loop
 * iteration; the first reason is kept. */
void kvxd_peer_fence_request(struct kvxd *d, struct kvxd_peer *p, const char *why);

#endif /* KVX_CONTROL_PEER_IO_H */
