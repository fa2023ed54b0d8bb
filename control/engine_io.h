/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Sending to engines (layer 1 of control/, see control/README.md).  Thread: the control core
 * only; nothing here waits on an engine: replies and events go out in order through the
 * session's queue (sent at once when the socket takes them, else on EPOLLOUT).  When more than
 * [engine] reply_queue_kb bytes wait, the session is doomed: kvxd_engine_reap() (control/engine.h)
 * closes it at the end of the loop iteration, so no caller ever holds a freed engine.
 */
#ifndef KVX_CONTROL_ENGINE_IO_H
#define KVX_CONTROL_ENGINE_IO_H

#include "control/kvxd.h"

/* The live session with this id, or NULL. */
struct kvxd_engine *kvxd_engine_by_id(struct kvxd *d, int id);
/* Close the session at the end of this loop iteration; nothing more is sent to it or read. */
void kvxd_engine_doom(struct kvxd *d, struct kvxd_engine *e, const char *why);
/* Drop every reply and event still waiting (events counted dropped). */
void kvxd_engine_outq_drop(struct kvxd *d, struct kvxd_engine *e);
/* What epoll watches on the session's socket: EPOLLIN, or only its end (EPOLLRDHUP) while it
 * is held (sock_held); EPOLLOUT while replies wait for a socket engine. */
void kvxd_engine_epoll_update(struct kvxd *d, struct kvxd_engine *e);
/* Send what waits, in order, as far as the socket takes it.  0, or -errno (session broken). */
int kvxd_engine_outq_flush(struct kvxd *d, struct kvxd_engine *e);
/* One whole message: sent now if the socket takes it and nothing waits before it, else queued.
 * 0, or -ENOTCONN, -ENOBUFS (over reply_queue_kb), -ENOMEM or the send error (then doomed). */
int kvxd_engine_out(struct kvxd *d, struct kvxd_engine *e, const void *buf, uint32_t len,
		    bool event);
/* A reply to request seq (status, value, optional text): as kvxd_engine_out. */
int kvxd_engine_reply(struct kvxd *d, struct kvxd_engine *e, uint64_t seq, int status,
		      int64_t value, const char *text);
/* Queue (or send) an event to the engine; 0, or -ENOTCONN (gone), -ENOBUFS (its queue
 * overflowed: the session is doomed), -ENOMEM. */
int kvxd_engine_send_event(struct kvxd *d, int engine_id, const struct kvx_event *ev);

#endif /* KVX_CONTROL_ENGINE_IO_H */
