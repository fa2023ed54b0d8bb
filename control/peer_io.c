/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What goes out to a peer, and the byte streams under it: framing buffers, sending a frame,
 * the per-peer ROOM_STATUS queue that survives a session, and a fence request that the peer
 * layer acts on (control/peer.c).  Layer 1 of control/ (control/README.md): it changes no
 * session state and calls nothing above it, so any layer may send.  Thread: the control core.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>

#include "control/peer_io.h"
#include "core/log.h"

#define RX_MAX (2 * KVX_WIRE_FRAME_MAX)
#define STATUS_QUEUE_MAX 4096

static const char *const peer_state_names[] = {"IDLE",	      "CONNECTING", "HELLO",
					       "QP_EXCHANGE", "READY",	    "CLOSING"};

const char *
kvxd_peer_state_str(int state)
{
	return state >= 0 && state <= KVXD_PEER_CLOSING ? peer_state_names[state] : "?";
}

struct kvxd_peer *
kvxd_peer_find(struct kvxd *d, const char *name)
{
	for (int i = 0; i < d->npeers; i++)
		if (!d->peers[i].vacant && !d->peers[i].removing &&
		    strcmp(d->peers[i].name, name) == 0)
			return &d->peers[i];
	return NULL;
}

void
kvxd_stream_free(struct kvxd_stream *s)
{
	free(s->rx);
	free(s->tx);
	s->rx = s->tx = NULL;
	s->rx_len = s->rx_cap = s->tx_len = s->tx_off = s->tx_cap = 0;
	s->want_out = false;
}

/* bytes queued for a peer that are not sent yet, at most */
#define TX_WAITING_MAX (64u << 20)

int
kvxd_stream_queue(struct kvxd_stream *s, const uint8_t *buf, size_t len)
{
	size_t waiting = s->tx_len - s->tx_off;

	/* the cap counts only what waits: a peer that reads, but never all of it, is not one
	 * that stopped reading */
	if (waiting + len > TX_WAITING_MAX)
		return -ENOBUFS; /* a peer that stopped reading */
	if (s->tx_off && s->tx_off >= waiting) {
		/* what went out makes room, once it is at least what waits: each byte moved was
		 * matched by one sent, never the whole backlog for each frame */
		memmove(s->tx, s->tx + s->tx_off, waiting);
		s->tx_len = waiting;
		s->tx_off = 0;
	}
	if (s->tx_len + len > s->tx_cap) {
		size_t cap = s->tx_cap ? s->tx_cap : 16384;
		uint8_t *nb;

		while (cap < s->tx_len + len) /* < 2 * TX_WAITING_MAX + len: see above */
			cap *= 2;
		nb = realloc(s->tx, cap);
		if (!nb)
			return -ENOMEM;
		s->tx = nb;
		s->tx_cap = cap;
	}
	memcpy(s->tx + s->tx_len, buf, len);
	s->tx_len += len;
	return 0;
}

/* Write what the socket takes.  Returns 0 or -errno (connection broken). */
int
kvxd_stream_flush(struct kvxd *d, struct kvxd_stream *s)
{
	while (s->tx_off < s->tx_len) {
		ssize_t n = send(s->fd, s->tx + s->tx_off, s->tx_len - s->tx_off, MSG_NOSIGNAL);

		if (n < 0) {
			if (errno == EAGAIN)
				break;
			return -errno;
		}
		s->tx_off += n;
	}
	bool want = s->tx_off < s->tx_len;

	if (want != s->want_out) {
		s->want_out = want;
		kvxd_epoll_mod(d, s->fd, &s->ev, EPOLLIN | (want ? EPOLLOUT : 0));
	}
	return 0;
}

/* Read what is there.  A read shorter than the room it had took all there was: the socket's
 * epoll registration is level-triggered, so what comes later (or an EOF) is reported again, and
 * a second recv() to hear EAGAIN would be one more syscall per wake-up.  Returns 0, or -errno /
 * -ECONNRESET on EOF. */
int
kvxd_stream_fill(struct kvxd_stream *s)
{
	for (;;) {
		size_t room;
		ssize_t n;

		if (s->rx_cap - s->rx_len < 4096) {
			size_t cap = s->rx_cap ? s->rx_cap * 2 : 65536;
			uint8_t *nb;

			if (cap > RX_MAX)
				return 0; /* full: decode first */
			nb = realloc(s->rx, cap);
			if (!nb)
				return -ENOMEM;
			s->rx = nb;
			s->rx_cap = cap;
		}
		room = s->rx_cap - s->rx_len;
		n = recv(s->fd, s->rx + s->rx_len, room, 0);
		if (n == 0)
			return -ECONNRESET;
		if (n < 0)
			return errno == EAGAIN ? 0 : -errno;
		s->rx_len += n;
		if ((size_t)n < room)
			return 0;
	}
}

int
kvxd_peer_send(struct kvxd *d, struct kvxd_peer *p, const struct kvx_wire_msg *m)
{
	uint8_t buf[KVX_WIRE_FRAME_MAX];
	char err[160];
	int n, rc;

	if (p->s.fd < 0)
		return -ENOTCONN;
	n = kvx_wire_encode(m, buf, sizeof(buf), err, sizeof(err));
	if (n < 0) {
		KVX_ERR("peer %s: cannot encode %s: %s", p->name, kvx_wire_type_str(m->type), err);
		return n;
	}
	rc = kvxd_stream_queue(&p->s, buf, n);
	if (rc)
		return rc;
	d->ctr.frames_tx++;
	d->peer_tx_queued = true; /* written by kvxd_peers_flush(), once per loop iteration */
	return 0;
}

/* Drop entries older than the waiting timeout: decode has failed those rooms by itself. */
static void
status_prune(struct kvxd *d, struct kvxd_peer *p, uint64_t now)
{
	int i = 0;

	while (i < p->npend_status && p->pend_status[i].queued_ms + d->cfg.waiting_ms < now)
		i++;
	if (i == 0)
		return;
	memmove(p->pend_status, p->pend_status + i,
		sizeof(*p->pend_status) * (p->npend_status - i));
	p->npend_status -= i;
}

static int
status_send(struct kvxd *d, struct kvxd_peer *p, struct kvxd_status_entry *e)
{
	struct kvx_wire_msg m = {.type = KVX_WIRE_ROOM_STATUS, .u.room_status = e->st};
	int rc = kvxd_peer_send(d, p, &m);

	if (rc == 0) {
		if (!e->sent_epoch)
			d->ctr.status_pushed++;
		e->sent_epoch = p->epoch;
	}
	return rc;
}

/* At the bound: make room by forgetting the oldest entry already written into the current
 * session (it is on the wire; it was kept only to be sent again should that session break).
 * false when every entry is unsent. */
static bool
status_evict_sent(struct kvxd *d, struct kvxd_peer *p)
{
	if (p->state != KVXD_PEER_READY)
		return false;
	for (int i = 0; i < p->npend_status; i++) {
		if (p->pend_status[i].sent_epoch != p->epoch)
			continue;
		memmove(p->pend_status + i, p->pend_status + i + 1,
			sizeof(*p->pend_status) * (p->npend_status - i - 1));
		p->npend_status--;
		d->ctr.status_evicted++;
		return true;
	}
	return false;
}

/*
 * Never dropped: at STATUS_QUEUE_MAX entries the oldest one already sent on the current session
 * makes room; when none is, the queue grows.  That growth is bounded: while the peer is down it
 * sends no ROOM_META, so it can make no new entry (failures of rooms it owns, refusals of its
 * metadata); a live peer whose entries cannot be sent (it stopped reading: 64 MiB of our frames
 * wait) has its session fenced at the next tick, and is down from then.  An entry that could not
 * be sent on the live session is sent again by the tick.  Only an allocation failure loses one
 * (logged, counted as status_dropped).
 */
void
kvxd_peer_push_status(struct kvxd *d, struct kvxd_peer *p, const struct kvx_wire_room_status *st)
{
	uint64_t now = kvxd_now_ms();
	struct kvxd_status_entry *e;

	status_prune(d, p, now);
	if (p->npend_status >= STATUS_QUEUE_MAX && !status_evict_sent(d, p) &&
	    p->state == KVXD_PEER_READY)
		kvxd_peer_fence_request(d, p,
					"it does not read: 4096 failure pushes could not be sent");
	if (p->npend_status == p->cap_status) {
		int cap = p->cap_status ? 2 * p->cap_status : 64;
		void *nb = realloc(p->pend_status, sizeof(*p->pend_status) * (size_t)cap);

		if (!nb) {
			d->ctr.status_dropped++;
			KVX_ERR("peer %s: no memory for the ROOM_STATUS queue: room %llu's failure "
				"not pushed",
				p->name, (unsigned long long)st->room);
			return;
		}
		p->pend_status = nb;
		p->cap_status = cap;
	}
	e = &p->pend_status[p->npend_status++];
	*e = (struct kvxd_status_entry){.st = *st, .queued_ms = now};
	d->ctr.status_queued++;
	if (p->state == KVXD_PEER_READY && (p->status_retry || status_send(d, p, e)))
		p->status_retry = true; /* in order: after the ones before it */
}

/* A new session: send every failure of the last waiting_ms again, in order. */
bool
kvxd_peer_flush_status(struct kvxd *d, struct kvxd_peer *p)
{
	status_prune(d, p, kvxd_now_ms());
	for (int i = 0; i < p->npend_status; i++)
		if (p->pend_status[i].sent_epoch != p->epoch &&
		    status_send(d, p, &p->pend_status[i]))
			return false;
	return true;
}

void
kvxd_peer_fence_request(struct kvxd *d, struct kvxd_peer *p, const char *why)
{
	(void)d;
	if (p->fence_req)
		return;
	p->fence_req = true;
	snprintf(p->fence_why, sizeof(p->fence_why), "%s", why);
}
