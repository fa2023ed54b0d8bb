/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Engine sessions on the local Unix socket (core/engine_proto.h): pools, rooms, chunks and
 * operator commands (layer 6 of control/, control/README.md).  Thread: the control core; none
 * of these blocks on an engine (control/engine_io.h sends).
 */
#ifndef KVX_CONTROL_ENGINE_H
#define KVX_CONTROL_ENGINE_H

#include "control/kvxd.h"

/* Create the engine socket at cfg.socket_path (start-up).  Whatever already sits at the path
 * is left alone unless it is kvxd's own stale socket (a socket owned by kvxd's uid that refuses
 * connections): -EEXIST when the path is not a socket, -EADDRINUSE when a process accepts
 * connections there, -EPERM when a stale socket belongs to another uid; each logged.  The file
 * is created no looser than cfg.socket_mode and then set to exactly it.  Also resolves
 * cfg.admin_group (-ENOENT when there is no such group). */
int kvxd_engine_listen(struct kvxd *d);
/* Close the listening socket; unlink the path only if it is still the socket we created. */
void kvxd_engine_unlisten(struct kvxd *d);
void kvxd_engine_accept(struct kvxd *d);
void kvxd_engine_on_event(struct kvxd *d, struct kvxd_engine *e, uint32_t events);
/* Sockets left unread while a polling core's inbox was nearly full: watched again once every
 * core can take more.  Returns true while some stay held (the loop looks again within a
 * millisecond). */
bool kvxd_engine_socks_release(struct kvxd *d);
/* Close the sessions doomed during this loop iteration (end of kvxd_loop_once). */
void kvxd_engine_reap(struct kvxd *d);
/* Shared-memory rings of the engine sessions (KVX_ENG_RINGS), driven by the loop: take the
 * submission rings' requests; announce parking (see engine.c); after the wait;
 * flush event queues into their rings and wake parked engines. */
int kvxd_engine_rings_poll(struct kvxd *d);
bool kvxd_engine_rings_park(struct kvxd *d);
void kvxd_engine_ring_unpark(struct kvxd *d, struct kvxd_engine *e, bool woken);
void kvxd_engine_ring_room(struct kvxd *d, struct kvxd_engine *e);
void kvxd_engine_rings_notify(struct kvxd *d);
void kvxd_engine_close_all(struct kvxd *d);
/* Unregister pools whose engine went away, or whose deregistration failed, once nothing points
 * at them (a failed one is retried KVXD_POOL_DEREG_RETRY_MS later, not on every loop). */
#define KVXD_POOL_DEREG_RETRY_MS 1000
void kvxd_pool_sweep(struct kvxd *d, uint64_t now);
/* A verbs worker registered a pool's memory (KVXD_VJOB_MR_REG, control/vwork.h): answer its
 * engine's POOL_REG (the pool's id, or the failure; an engine gone meanwhile leaves the pool to
 * be unregistered), and free j. */
void kvxd_engine_pool_done(struct kvxd *d, struct kvxd_vjob *j);
/* A verbs worker deregistered a pool (KVXD_VJOB_MR_DEREG): free it, or keep it for the sweep
 * to try again when a rail's deregistration failed; answer the POOL_UNREG that asked (0, or
 * -EIO), if its engine is still here; free j. */
void kvxd_engine_pool_dereg_done(struct kvxd *d, struct kvxd_vjob *j);
struct kvxd_room_shape;

/* Decode: open a room of rank `rank` and this shape (the engine request's checks and
 * effects).  Returns its generation, or -errno (-EDQUOT: the engine has max_rooms_per_engine
 * rooms; -EINVAL, -ERANGE: a bad shape, described in why). */
int64_t kvxd_decode_room_open_shape(struct kvxd *d, int engine_id, uint64_t room, uint32_t rank,
				    const struct kvxd_room_shape *sh, char *why, size_t wlen);
/* The same for one region of whole pages, sources of rank 0, rank 0. */
int64_t kvxd_decode_room_open(struct kvxd *d, int engine_id, uint64_t room, struct kvxd_pool *pool,
			      const uint32_t *pages, uint32_t npages,
			      const char (*names)[KVX_NAME_MAX], uint32_t nsources);

#endif /* KVX_CONTROL_ENGINE_H */
