/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What goes out to an engine: replies and events, in order, through a per-session queue, so
 * the control core never waits on an engine's socket.  Layer 1 of control/ (control/README.md).
 * Thread: the control core.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>

#include "control/engine_io.h"
#include "core/log.h"

struct kvxd_engine *
kvxd_engine_by_id(struct kvxd *d, int id)
{
	for (int i = 0; i < d->engines_end; i++)
		if (d->engines[i] && d->engines[i]->id == id)
			return d->engines[i];
	return NULL;
}

void
kvxd_engine_outq_drop(struct kvxd *d, struct kvxd_engine *e)
{
	while (e->outq_head) {
		struct kvxd_outmsg *m = e->outq_head;

		e->outq_head = m->next;
		if (m->event)
			d->ctr.events_dropped++;
		free(m);
	}
	e->outq_tail = NULL;
	e->outq_bytes = 0;
}

/* Close the session at the end of this loop iteration (kvxd_engine_reap); nothing more is
 * sent to it or read from it. */
void
kvxd_engine_doom(struct kvxd *d, struct kvxd_engine *e, const char *why)
{
	if (e->doomed)
		return;
	e->doomed = true;
	kvxd_engine_outq_drop(d, e);
	KVX_INFO("engine %d (pid %d uid %u): closing its session: %s", e->id, (int)e->pid,
		 (unsigned)e->uid, why);
}

/* Whether the message of len bytes at buf is an EVENT of a state on the way for an engine that
 * waits for ends (KVX_ENG_RINGS_WAKE_ENDS): put, but nobody woken for it.  A REPLY, or anything
 * else, wakes it. */
static bool
quiet_event(const struct kvxd_engine *e, const void *buf, uint32_t len)
{
	struct kvx_eng_event ev;

	if (!e->wake_ends || len != sizeof(ev))
		return false;
	memcpy(&ev, buf, sizeof(ev)); /* buf may be unaligned: a queued message's data */
	return ev.hdr.type == KVX_ENG_EVENT && !kvx_eng_state_wakes(ev.ev.state);
}

/* One whole message into the session's event ring.  Returns its length, -EAGAIN (no room
 * now) or -errno (the ring is broken: the engine wrote an impossible head). */
static ssize_t
ring_send(struct kvxd_engine *e, const void *buf, uint32_t len)
{
	int rc = kvx_shring_put(&e->evt, buf, len);

	if (rc == 0) {
		if (!quiet_event(e, buf, len))
			e->evt_dirty = true;
		return len;
	}
	return rc == -ENOBUFS ? -EAGAIN : rc;
}

/* One whole message out: the event ring once the session has rings, else the socket.  Returns
 * its length, -EAGAIN (no room now) or -errno. */
static ssize_t
send_one(struct kvxd_engine *e, const void *buf, uint32_t len)
{
	ssize_t n;

	if (e->rings)
		return ring_send(e, buf, len);
	n = send(e->fd, buf, len, MSG_DONTWAIT | MSG_NOSIGNAL);
	if (n < 0)
		return errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR ? -EAGAIN : -errno;
	return n;
}

void
kvxd_engine_epoll_update(struct kvxd *d, struct kvxd_engine *e)
{
	kvxd_epoll_mod(d, e->fd, &e->ev,
		       (e->sock_held ? EPOLLRDHUP : EPOLLIN) |
			       (e->outq_head && !e->rings ? EPOLLOUT : 0));
}

/* Send what waits, in order, as far as the socket (or the event ring) takes it.  0, or -errno
 * (session broken). */
int
kvxd_engine_outq_flush(struct kvxd *d, struct kvxd_engine *e)
{
	bool asked = false;

	while (e->outq_head) {
		struct kvxd_outmsg *m = e->outq_head;
		ssize_t n = send_one(e, m->data, m->len);

		if (n == -EAGAIN) {
			/* no room in the event ring: the engine wakes us when it takes
			 * something (kvxd_engine_ring_room); one more try if it did already
			 * (once: an engine that moves its head a record at a time does not
			 * keep us here) */
			if (e->rings && !asked && kvx_shring_starve(&e->evt)) {
				asked = true;
				continue;
			}
			break;
		}
		if (n < 0)
			return (int)n;
		if ((size_t)n != m->len)
			return -EMSGSIZE; /* SEQPACKET: whole or nothing */
		if (m->event)
			d->ctr.events_sent++;
		e->outq_bytes -= m->len;
		e->outq_head = m->next;
		if (!e->outq_head)
			e->outq_tail = NULL;
		free(m);
	}
	/* with rings, room in the event ring is told by the engine (kvx_shring_starve) */
	kvxd_engine_epoll_update(d, e);
	return 0;
}

/*
 * Send one whole message to the engine now if its socket takes it and nothing waits before it;
 * else queue it (sent on EPOLLOUT).  Never waits.  When the queue would pass its limit the
 * session is doomed (an engine that does not read loses its own session, nothing else).  The
 * limit is reply_queue_kb, and for an event at least what the engine's rooms can say at once
 * (every state of each, KVX_ROOM_STATE_COUNT): a burst of room ends (a peer lost with
 * thousands of them) never costs an engine that reads its session and its rooms' ends; what it
 * can make kvxd hold stays bounded by its rooms (max_rooms_per_engine).
 * Returns 0, or -ENOTCONN, -ENOBUFS, -ENOMEM or the send error (the session is then doomed).
 */
int
kvxd_engine_out(struct kvxd *d, struct kvxd_engine *e, const void *buf, uint32_t len, bool event)
{
	uint64_t limit = (uint64_t)d->cfg.reply_queue_kb * 1024,
		 rooms = (uint64_t)e->nrooms * KVX_ROOM_STATE_COUNT * sizeof(struct kvx_eng_event);
	struct kvxd_outmsg *m;

	if (e->doomed)
		return -ENOTCONN;
	if (e->reset_seen)
		return -ENOTCONN; /* it is gone: its last requests are read, nothing goes back */
	if (!e->outq_head) {
		ssize_t n = send_one(e, buf, len);

		if (n == (ssize_t)len) {
			if (event)
				d->ctr.events_sent++;
			return 0;
		}
		if (n != -EAGAIN) {
			int rc = n >= 0 ? -EMSGSIZE : (int)n;

			kvxd_engine_doom(d, e,
					 e->rings && rc == -EPROTO ? "its event ring is corrupt"
								   : strerror(-rc));
			return rc;
		}
	}
	if (event && rooms > limit)
		limit = rooms;
	if (e->outq_bytes + len > limit) {
		char why[160];

		d->ctr.engine_queue_overflows++;
		snprintf(why, sizeof(why),
			 "%llu bytes of replies and events unread: [engine] reply_queue_kb = %u "
			 "(events: %llu, what its rooms can say)",
			 (unsigned long long)(e->outq_bytes + len), d->cfg.reply_queue_kb,
			 (unsigned long long)rooms);
		KVX_WARN("engine %d (pid %d uid %u) does not read: %s", e->id, (int)e->pid,
			 (unsigned)e->uid, why);
		kvxd_engine_doom(d, e, why);
		return -ENOBUFS;
	}
	m = malloc(sizeof(*m) + len);
	if (!m) {
		kvxd_engine_doom(d, e, "out of memory for its replies");
		return -ENOMEM;
	}
	m->next = NULL;
	m->len = len;
	m->event = event;
	memcpy(m->data, buf, len);
	if (e->outq_tail)
		e->outq_tail->next = m;
	else
		e->outq_head = m;
	e->outq_tail = m;
	e->outq_bytes += len;
	if (m == e->outq_head && !e->rings)
		kvxd_engine_epoll_update(d, e);
	return 0;
}

int
kvxd_engine_reply(struct kvxd *d, struct kvxd_engine *e, uint64_t seq, int status, int64_t value,
		  const char *text)
{
	size_t tlen = text ? strnlen(text, KVX_ENG_TEXT_MAX) : 0;
	union {
		struct kvx_eng_reply r;
		uint8_t b[sizeof(struct kvx_eng_reply) + KVX_ENG_TEXT_MAX];
	} buf;

	buf.r = (struct kvx_eng_reply){
		.hdr = {.type = KVX_ENG_REPLY, .len = sizeof(buf.r) + tlen, .seq = seq},
		.status = status,
		.text_len = tlen,
		.value = value,
	};
	if (tlen)
		memcpy(buf.b + sizeof(buf.r), text, tlen);
	return kvxd_engine_out(d, e, &buf, buf.r.hdr.len, false);
}

int
kvxd_engine_send_event(struct kvxd *d, int engine_id, const struct kvx_event *ev)
{
	struct kvxd_engine *e = engine_id >= 0 ? kvxd_engine_by_id(d, engine_id) : NULL;
	struct kvx_eng_event m = {.hdr = {.type = KVX_ENG_EVENT, .len = sizeof(m)}, .ev = *ev};
	int rc;

	if (!e || e->doomed) {
		d->ctr.events_dropped++;
		return -ENOTCONN;
	}
	rc = kvxd_engine_out(d, e, &m, sizeof(m), true);
	if (rc)
		d->ctr.events_dropped++;
	return rc;
}
