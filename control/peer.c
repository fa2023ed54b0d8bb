/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Peers: TCP control connections, the handshake that brings one RC QP per polling core to RTS,
 * and teardown.  Every native resource a setup acquires is journaled right after it succeeds;
 * a failed setup rolls the journal back in reverse, a published peer's teardown releases the
 * same resources through the polling cores.  Thread: the control core.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <unistd.h>

#include "control/kvxd.h"
#include "core/log.h"

#define RECONNECT_MS 200
#define RX_MAX (2 * KVX_WIRE_FRAME_MAX)

static const char *const peer_state_names[] = {"IDLE", "CONNECTING", "HELLO", "QP_EXCHANGE",
					       "READY"};

const char *
kvxd_peer_state_str(int state)
{
	return state >= 0 && state <= KVXD_PEER_READY ? peer_state_names[state] : "?";
}

struct kvxd_peer *
kvxd_peer_find(struct kvxd *d, const char *name)
{
	for (int i = 0; i < d->npeers; i++)
		if (strcmp(d->peers[i].name, name) == 0)
			return &d->peers[i];
	return NULL;
}

void
kvxd_peer_init_all(struct kvxd *d)
{
	d->npeers = d->cfg.n_peers;
	for (int i = 0; i < d->npeers; i++) {
		struct kvxd_peer *p = &d->peers[i];

		p->idx = i;
		snprintf(p->name, sizeof(p->name), "%s", d->cfg.peers[i].name);
		p->addr = d->cfg.peers[i].addr;
		p->allowed = d->cfg.peers[i].allowed;
		p->initiator = strcmp(d->cfg.name, p->name) < 0;
		p->state = KVXD_PEER_IDLE;
		p->s.fd = -1;
		p->retry_at_ms = 0;
	}
}

/* ---- streams ------------------------------------------------------------------------------- */

static void
stream_free_buffers(struct kvxd_stream *s)
{
	free(s->rx);
	free(s->tx);
	s->rx = s->tx = NULL;
	s->rx_len = s->rx_cap = s->tx_len = s->tx_off = s->tx_cap = 0;
	s->want_out = false;
}

static int
stream_queue(struct kvxd_stream *s, const uint8_t *buf, size_t len)
{
	if (s->tx_off && s->tx_off == s->tx_len)
		s->tx_off = s->tx_len = 0;
	if (s->tx_len + len > s->tx_cap) {
		size_t cap = s->tx_cap ? s->tx_cap : 16384;
		uint8_t *nb;

		while (cap < s->tx_len + len)
			cap *= 2;
		if (cap > 64u << 20)
			return -ENOBUFS; /* a peer that stopped reading */
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
static int
stream_flush(struct kvxd *d, struct kvxd_stream *s)
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

/* Read what is there.  Returns 0, or -errno / -ECONNRESET on EOF. */
static int
stream_fill(struct kvxd_stream *s)
{
	for (;;) {
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
		n = recv(s->fd, s->rx + s->rx_len, s->rx_cap - s->rx_len, 0);
		if (n == 0)
			return -ECONNRESET;
		if (n < 0)
			return errno == EAGAIN ? 0 : -errno;
		s->rx_len += n;
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
	rc = stream_queue(&p->s, buf, n);
	if (rc)
		return rc;
	d->ctr.frames_tx++;
	return stream_flush(d, &p->s);
}

#define STATUS_QUEUE_MAX 4096

/* Drop entries older than the waiting timeout: decode has failed those rooms by itself. */
static void
status_prune(struct kvxd *d, struct kvxd_peer *p, uint64_t now)
{
	int i = 0;

	while (i < p->npend_status && p->pend_status[i].queued_ms + d->cfg.waiting_ms < now)
		i++;
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

void
kvxd_peer_push_status(struct kvxd *d, struct kvxd_peer *p, const struct kvx_wire_room_status *st)
{
	uint64_t now = kvxd_now_ms();
	struct kvxd_status_entry *e;

	status_prune(d, p, now);
	if (p->npend_status == p->cap_status) {
		int cap = p->cap_status ? 2 * p->cap_status : 64;
		void *nb = cap <= STATUS_QUEUE_MAX
				   ? realloc(p->pend_status, sizeof(*p->pend_status) * cap)
				   : NULL;

		if (!nb) {
			d->ctr.status_dropped++;
			KVX_ERR("peer %s: ROOM_STATUS queue full: room %llu's failure not pushed",
				p->name, (unsigned long long)st->room);
			return;
		}
		p->pend_status = nb;
		p->cap_status = cap;
	}
	e = &p->pend_status[p->npend_status++];
	*e = (struct kvxd_status_entry){.st = *st, .queued_ms = now};
	d->ctr.status_queued++;
	if (p->state == KVXD_PEER_READY)
		status_send(d, p, e);
}

/* A new session: send every failure of the last waiting_ms again, in order. */
static void
flush_status(struct kvxd *d, struct kvxd_peer *p)
{
	status_prune(d, p, kvxd_now_ms());
	for (int i = 0; i < p->npend_status; i++)
		if (p->pend_status[i].sent_epoch != p->epoch &&
		    status_send(d, p, &p->pend_status[i]))
			break;
}

/* ---- journal ------------------------------------------------------------------------------- */

static void
journal_push(struct kvxd_peer *p, int kind, int core)
{
	/* sized for every acquisition of one setup; overflow is a programming error */
	if (p->j.n < KVXD_JOURNAL_MAX)
		p->j.e[p->j.n++] = (struct kvxd_journal_entry){.kind = kind, .core = core};
}

static int
journal_release(struct kvxd *d, struct kvxd_peer *p, const struct kvxd_journal_entry *e)
{
	int rc = 0;

	switch (e->kind) {
	case KVXD_J_QPC:
		kvx_pcore_qpc_free(p->qpc[e->core]);
		p->qpc[e->core] = NULL;
		break;
	case KVXD_J_QP:
		rc = kvx_vx->qp_destroy(p->qpc[e->core]->qp);
		if (rc == 0)
			p->qpc[e->core]->qp = NULL;
		break;
	case KVXD_J_SOCKET:
		epoll_ctl(d->epfd, EPOLL_CTL_DEL, p->s.fd, NULL);
		close(p->s.fd);
		p->s.fd = -1;
		stream_free_buffers(&p->s);
		break;
	}
	return rc;
}

/* Release in reverse order; an entry leaves the journal only once its release succeeded. */
static int
journal_rollback(struct kvxd *d, struct kvxd_peer *p)
{
	while (p->j.n > 0) {
		int rc = journal_release(d, p, &p->j.e[p->j.n - 1]);

		if (rc) {
			KVX_ERR("peer %s: rollback stopped with %d entries left: %s", p->name,
				p->j.n, strerror(-rc));
			return rc;
		}
		p->j.n--;
	}
	return 0;
}

/* ---- setup --------------------------------------------------------------------------------- */

static struct kvx_vx_qp_attr
qp_attr(struct kvxd *d, struct kvxd_peer *p, int core, const struct kvx_wire_qp_info *ri)
{
	struct kvx_vx_qp_attr a = {
		.local_psn = p->psn[core],
		.mtu = d->cfg.mtu < d->dev_info.active_mtu ? d->cfg.mtu : d->dev_info.active_mtu,
		.port = d->cfg.port,
		.gid_index = d->cfg.gid_index,
		.retry_cnt = d->cfg.retry_cnt,
		.rnr_retry = d->cfg.rnr_retry,
		.ack_timeout = d->cfg.ack_timeout,
	};

	if (ri) {
		a.remote_qpn = ri->qp[core].qpn;
		a.remote_psn = ri->qp[core].psn;
		memcpy(a.remote_gid, ri->gid, 16);
		if (ri->mtu < a.mtu)
			a.mtu = ri->mtu;
	}
	return a;
}

/* Create one QP per core, move it to INIT, pre-post its receives, and send QP_INFO. */
static int
setup_qps(struct kvxd *d, struct kvxd_peer *p)
{
	struct kvx_wire_msg m = {.type = KVX_WIRE_QP_INFO};
	int rc;

	for (int c = 0; c < d->ncores; c++) {
		struct kvx_vx_qp_attr a;
		struct kvxd_qpc *q = kvx_pcore_qpc_alloc(d->cfg.sq_depth, d->cfg.rq_depth);
		uint64_t *ids;

		if (!q)
			return -ENOMEM;
		p->qpc[c] = q;
		journal_push(p, KVXD_J_QPC, c);
		rc = kvx_vx->qp_create(d->dev, d->cores[c].cq, d->cfg.sq_depth, d->cfg.rq_depth,
				       &q->qp);
		if (rc)
			return rc;
		journal_push(p, KVXD_J_QP, c);
		q->qpn = kvx_vx->qp_num(q->qp);
		q->peer = p->idx;
		p->psn[c] = kvx_vx_random_psn();
		a = qp_attr(d, p, c, NULL);
		rc = kvx_vx->qp_to_init(q->qp, &a);
		if (rc)
			return rc;
		ids = malloc(sizeof(*ids) * q->rq_depth);
		if (!ids)
			return -ENOMEM;
		for (uint32_t i = 0; i < q->rq_depth; i++)
			ids[i] = (uint64_t)(uintptr_t)&q->recv_tag;
		rc = kvx_vx->post_recv_burst(q->qp, ids, (int)q->rq_depth);
		free(ids);
		if (rc)
			return rc;
		q->rq_posted = q->rq_depth;
		m.u.qp_info.qp[c].qpn = q->qpn;
		m.u.qp_info.qp[c].psn = p->psn[c];
	}
	memcpy(m.u.qp_info.gid, d->dev_info.gid, 16);
	m.u.qp_info.mtu = d->cfg.mtu < d->dev_info.active_mtu ? d->cfg.mtu : d->dev_info.active_mtu;
	m.u.qp_info.ncores = (uint16_t)d->ncores;
	p->state = KVXD_PEER_QP_EXCHANGE;
	return kvxd_peer_send(d, p, &m);
}

static int
connect_qps(struct kvxd *d, struct kvxd_peer *p, const struct kvx_wire_qp_info *ri)
{
	struct kvx_wire_msg m = {.type = KVX_WIRE_QP_READY};
	int rc;

	if (ri->ncores != d->ncores) {
		snprintf(p->last_error, sizeof(p->last_error),
			 "polling core count mismatch: ours %d, theirs %u", d->ncores, ri->ncores);
		return -EPROTO;
	}
	for (int c = 0; c < d->ncores; c++) {
		struct kvx_vx_qp_attr a = qp_attr(d, p, c, ri);

		rc = kvx_vx->qp_to_rtr(p->qpc[c]->qp, &a);
		if (rc)
			return rc;
		rc = kvx_vx->qp_to_rts(p->qpc[c]->qp, &a);
		if (rc)
			return rc;
	}
	p->sent_ready = true;
	return kvxd_peer_send(d, p, &m);
}

/* Setup complete: hand the QPs to the polling cores; the journal's QP entries now belong to
 * the published-peer teardown (kvxd_peer_reset). */
static void
publish(struct kvxd *d, struct kvxd_peer *p)
{
	p->epoch++;
	for (int c = 0; c < d->ncores; c++) {
		struct kvxd_msg m = {.type = KVXD_MSG_QP_ADD, .qpc = p->qpc[c]};

		p->qpc[c]->epoch = p->epoch;
		d->live_qpcs++;
		if (kvx_pcore_send(&d->cores[c], &m))
			KVX_ERR("core %d inbox full: peer %s QP not published", c, p->name);
	}
	/* only the socket stays journaled for the published peer */
	p->j.n = 0;
	journal_push(p, KVXD_J_SOCKET, 0);
	p->state = KVXD_PEER_READY;
	p->deadline_ms = 0;
	p->n_handshakes++;
	KVX_INFO("peer %s ready (epoch %u, %d QP%s)", p->name, p->epoch, d->ncores,
		 d->ncores > 1 ? "s" : "");
	flush_status(d, p);
	kvxd_send_meta_for_peer(d, p);
}

void
kvxd_qpc_retired(struct kvxd *d, struct kvxd_qpc *q)
{
	if (q->qp && kvx_vx->qp_destroy(q->qp) != 0) {
		KVX_ERR("qp 0x%x: destroy failed; kept", q->qpn);
		return;
	}
	kvx_pcore_qpc_free(q);
	d->live_qpcs--;
}

void
kvxd_peer_reset(struct kvxd *d, struct kvxd_peer *p, const char *why)
{
	if (p->state == KVXD_PEER_IDLE && p->s.fd < 0 && p->j.n == 0)
		return;
	KVX_WARN("peer %s: closing connection (%s): %s", p->name, kvxd_peer_state_str(p->state),
		 why);
	snprintf(p->last_error, sizeof(p->last_error), "%s", why);
	p->n_resets++;
	d->ctr.peer_resets++;
	if (p->state == KVXD_PEER_READY) {
		/* Published: fence each QP (error state: no further writes in or out), then the
		 * owning core retires it once every WR has its completion. */
		for (int c = 0; c < d->ncores; c++) {
			struct kvxd_msg m = {.type = KVXD_MSG_QP_REMOVE, .qpc = p->qpc[c]};

			kvx_vx->qp_to_err(p->qpc[c]->qp);
			if (kvx_pcore_send(&d->cores[c], &m))
				KVX_ERR("core %d inbox full: qp 0x%x not retired", c,
					p->qpc[c]->qpn);
			p->qpc[c] = NULL;
		}
	} else if (p->state == KVXD_PEER_HELLO || p->state == KVXD_PEER_QP_EXCHANGE ||
		   p->state == KVXD_PEER_CONNECTING) {
		p->n_setup_failures++;
	}
	if (p->s.fd >= 0 && p->s.tx_off < p->s.tx_len)
		stream_flush(d, &p->s); /* best effort: ROOM_STATUS frames already queued */
	journal_rollback(d, p);
	p->state = KVXD_PEER_IDLE;
	p->sent_ready = p->got_ready = false;
	p->deadline_ms = 0;
	p->retry_at_ms = kvxd_now_ms() + RECONNECT_MS;
}

static void
peer_fail(struct kvxd *d, struct kvxd_peer *p, int rc, const char *what)
{
	char why[160];

	snprintf(why, sizeof(why), "%s: %s", what, rc < 0 ? strerror(-rc) : "failed");
	kvxd_peer_reset(d, p, why);
}

static int
send_hello(struct kvxd *d, struct kvxd_peer *p, uint16_t type)
{
	struct kvx_wire_msg m = {.type = type};

	m.u.hello.version = KVX_WIRE_VERSION;
	snprintf(m.u.hello.name, sizeof(m.u.hello.name), "%s", d->cfg.name);
	if (getrandom(&m.u.hello.nonce, sizeof(m.u.hello.nonce), 0) < 0)
		m.u.hello.nonce = kvxd_now_ms();
	m.u.hello.session = p->epoch + 1;
	return kvxd_peer_send(d, p, &m);
}

static void
dial(struct kvxd *d, struct kvxd_peer *p)
{
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(p->addr.port)};
	int fd, one = 1;

	if (journal_rollback(d, p)) /* finish an earlier rollback first */
		return;
	inet_pton(AF_INET, p->addr.host, &sa.sin_addr);
	fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0) {
		p->retry_at_ms = kvxd_now_ms() + RECONNECT_MS;
		return;
	}
	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	p->s.fd = fd;
	p->s.ev = (struct kvxd_fd){.kind = KVXD_FD_PEER, .ptr = p};
	journal_push(p, KVXD_J_SOCKET, 0);
	kvx_wire_seq_init(&p->seq, true);
	p->state = KVXD_PEER_CONNECTING;
	p->deadline_ms = kvxd_now_ms() + d->cfg.handshake_ms;
	if (kvxd_epoll_add(d, fd, &p->s.ev, EPOLLIN | EPOLLOUT)) {
		peer_fail(d, p, -errno, "epoll");
		return;
	}
	p->s.want_out = true;
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 && errno != EINPROGRESS)
		peer_fail(d, p, -errno, "connect");
}

void
kvxd_peer_tick(struct kvxd *d, uint64_t now)
{
	for (int i = 0; i < d->npeers; i++) {
		struct kvxd_peer *p = &d->peers[i];

		if (p->deadline_ms && now >= p->deadline_ms && p->state != KVXD_PEER_READY) {
			peer_fail(d, p, -ETIMEDOUT, "handshake timeout");
			continue;
		}
		if (p->state == KVXD_PEER_IDLE && p->j.n)
			journal_rollback(d, p); /* periodic sweep of an unfinished rollback */
		if (!d->stopping && p->initiator && p->state == KVXD_PEER_IDLE &&
		    now >= p->retry_at_ms)
			dial(d, p);
	}
}

/* ---- frames -------------------------------------------------------------------------------- */

static void
on_room_meta(struct kvxd *d, struct kvxd_peer *p, const struct kvx_wire_room_meta *rm)
{
	struct kvxd_room *r = kvxd_room_find(d, rm->room, KVX_ROOM_PREFILL);
	struct kvxd_meta *meta;
	struct kvxd_msg m = {.type = KVXD_MSG_ROOM_META};

	if (r && kvx_room_state_terminal(kvxd_room_state(r)) && kvxd_room_quiescent(r) &&
	    r->gen != rm->gen) {
		kvxd_room_remove(d, r); /* an id reused for a new request */
		r = NULL;
	}
	if (!r) {
		r = calloc(1, sizeof(*r));
		if (!r)
			return;
		r->id = rm->room;
		r->role = KVX_ROOM_PREFILL;
		r->fsm.role = KVX_ROOM_PREFILL;
		r->engine_id = -1;
		r->core = (int)(rm->room % (uint64_t)d->ncores);
		r->opened_ms = kvxd_now_ms();
		rcu_read_lock();
		if (kvx_room_table_add(d->by_id, &r->by_id, kvxd_room_key(r->id, r->role))) {
			rcu_read_unlock();
			free(r);
			return;
		}
		rcu_read_unlock();
	}
	meta = malloc(sizeof(*meta) + sizeof(uint32_t) * rm->npages);
	if (!meta)
		return;
	*meta = (struct kvxd_meta){.peer = p->idx,
				   .gen = rm->gen,
				   .token = rm->token,
				   .src_idx = rm->src_idx,
				   .nsrc = rm->nsrc,
				   .addr = rm->addr,
				   .rkey = rm->rkey,
				   .page_size = rm->page_size,
				   .pool_npages = rm->pool_npages,
				   .nbufs = rm->nbufs,
				   .npages = rm->npages};
	for (uint32_t i = 0; i < rm->npages; i++)
		meta->pages[i] = kvx_wire_room_meta_page(rm, i);
	m.room = r;
	m.ptr = meta;
	if (kvx_pcore_send(&d->cores[r->core], &m))
		free(meta);
}

static void
on_room_status(struct kvxd *d, struct kvxd_peer *p, const struct kvx_wire_room_status *st)
{
	struct kvxd_room *r = kvxd_room_find(d, st->room, KVX_ROOM_DECODE);
	struct kvxd_msg m = {.type = KVXD_MSG_ROOM_FAIL, .error = st->error};

	d->ctr.status_received++;
	if (!r || r->gen != st->gen || st->state != KVX_ROOM_FAILED)
		return; /* another generation: counted, dropped */
	m.room = r;
	snprintf(m.reason, sizeof(m.reason), "source %s: %s", p->name, st->reason);
	kvx_pcore_send(&d->cores[r->core], &m);
}

static int
on_frame(struct kvxd *d, struct kvxd_peer *p, const struct kvx_wire_msg *m)
{
	switch (m->type) {
	case KVX_WIRE_HELLO_ACK:
		if (strcmp(m->u.hello.name, p->name) != 0) {
			snprintf(p->last_error, sizeof(p->last_error), "dialed %s but %s answered",
				 p->name, m->u.hello.name);
			return -EPROTO;
		}
		return setup_qps(d, p);
	case KVX_WIRE_QP_INFO:
		return connect_qps(d, p, &m->u.qp_info);
	case KVX_WIRE_QP_READY:
		p->got_ready = true;
		if (p->sent_ready)
			publish(d, p);
		return 0;
	case KVX_WIRE_ROOM_META:
		on_room_meta(d, p, &m->u.room_meta);
		return 0;
	case KVX_WIRE_ROOM_STATUS:
		on_room_status(d, p, &m->u.room_status);
		return 0;
	case KVX_WIRE_BYE:
		return -ECONNRESET;
	default:
		return 0; /* HEARTBEAT; ABORT/ABORT_ACK are not used yet */
	}
}

/* Decode every complete frame in the stream.  Returns 0 or -errno (close the peer). */
static int
drain_frames(struct kvxd *d, struct kvxd_peer *p)
{
	size_t off = 0;
	int rc = 0;

	while (off < p->s.rx_len) {
		struct kvx_wire_msg m;
		char err[160];
		int n = kvx_wire_decode(p->s.rx + off, p->s.rx_len - off, &m, err, sizeof(err));

		if (n == 0)
			break;
		if (n < 0 || kvx_wire_seq_check(&p->seq, m.type, err, sizeof(err))) {
			d->ctr.frames_bad++;
			snprintf(p->last_error, sizeof(p->last_error), "bad frame: %s", err);
			rc = n < 0 ? n : -EPROTO;
			break;
		}
		d->ctr.frames_rx++;
		off += n;
		rc = on_frame(d, p, &m);
		if (rc || p->s.fd < 0)
			break;
	}
	if (p->s.fd >= 0 && off) {
		memmove(p->s.rx, p->s.rx + off, p->s.rx_len - off);
		p->s.rx_len -= off;
	}
	return rc;
}

void
kvxd_peer_on_event(struct kvxd *d, struct kvxd_peer *p, uint32_t events)
{
	int rc;

	if (p->state == KVXD_PEER_CONNECTING) {
		int err = 0;
		socklen_t len = sizeof(err);

		getsockopt(p->s.fd, SOL_SOCKET, SO_ERROR, &err, &len);
		if (err) {
			peer_fail(d, p, -err, "connect");
			return;
		}
		if (!(events & (EPOLLOUT | EPOLLIN)))
			return;
		p->state = KVXD_PEER_HELLO;
		rc = send_hello(d, p, KVX_WIRE_HELLO);
		if (rc) {
			peer_fail(d, p, rc, "send HELLO");
			return;
		}
	}
	if (events & EPOLLOUT) {
		rc = stream_flush(d, &p->s);
		if (rc) {
			peer_fail(d, p, rc, "send");
			return;
		}
	}
	if (events & (EPOLLIN | EPOLLHUP | EPOLLERR)) {
		int frc = stream_fill(&p->s);

		rc = drain_frames(d, p);
		if (rc) {
			peer_fail(d, p, rc, p->last_error[0] ? p->last_error : "protocol");
			return;
		}
		if (frc) {
			peer_fail(d, p, frc,
				  frc == -ECONNRESET ? "peer closed the connection" : "recv");
			return;
		}
	}
}

/* ---- accepting ----------------------------------------------------------------------------- */

void
kvxd_peer_accept(struct kvxd *d)
{
	for (;;) {
		int fd = accept4(d->tcp_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC), slot = -1;
		struct kvxd_stream *s;

		if (fd < 0)
			return;
		for (int i = 0; i < KVXD_MAX_PENDING; i++)
			if (!d->pending[i]) {
				slot = i;
				break;
			}
		s = slot >= 0 ? calloc(1, sizeof(*s)) : NULL;
		if (!s) {
			close(fd);
			continue;
		}
		s->fd = fd;
		s->ev = (struct kvxd_fd){.kind = KVXD_FD_PENDING, .ptr = s};
		d->pending[slot] = s;
		if (kvxd_epoll_add(d, fd, &s->ev, EPOLLIN)) {
			d->pending[slot] = NULL;
			close(fd);
			free(s);
		}
	}
}

static void
pending_drop(struct kvxd *d, struct kvxd_stream *s, bool close_fd)
{
	for (int i = 0; i < KVXD_MAX_PENDING; i++)
		if (d->pending[i] == s)
			d->pending[i] = NULL;
	if (close_fd) {
		epoll_ctl(d->epfd, EPOLL_CTL_DEL, s->fd, NULL);
		close(s->fd);
	}
	stream_free_buffers(s);
	free(s);
}

/* An accepted socket's first frame must be a HELLO from an allowed peer. */
void
kvxd_pending_on_event(struct kvxd *d, struct kvxd_stream *s, uint32_t events)
{
	struct kvx_wire_seq seq;
	struct kvx_wire_msg m;
	struct kvxd_peer *p;
	char err[160];
	int n, rc = stream_fill(s);

	n = s->rx_len ? kvx_wire_decode(s->rx, s->rx_len, &m, err, sizeof(err)) : 0;
	if (n == 0 && rc == 0)
		return;
	kvx_wire_seq_init(&seq, false);
	if (n <= 0 || kvx_wire_seq_check(&seq, m.type, err, sizeof(err))) {
		d->ctr.frames_bad++;
		KVX_WARN("incoming connection refused: %s", n == 0 ? "closed before HELLO" : err);
		pending_drop(d, s, true);
		return;
	}
	p = kvxd_peer_find(d, m.u.hello.name);
	if (!p || !p->allowed || p->initiator) {
		KVX_WARN("incoming connection from '%s' refused: %s", m.u.hello.name,
			 !p	       ? "not a configured peer"
			 : !p->allowed ? "not on the allow-list"
				       : "we dial that peer");
		pending_drop(d, s, true);
		return;
	}
	if (m.u.hello.version != KVX_WIRE_VERSION) {
		KVX_WARN("peer %s speaks version %u, we speak %u", p->name, m.u.hello.version,
			 KVX_WIRE_VERSION);
		pending_drop(d, s, true);
		return;
	}
	/* A new session supersedes the old one (the peer restarted or replaced its QPs). */
	kvxd_peer_reset(d, p, "superseded by a new session");
	if (journal_rollback(d, p)) {
		pending_drop(d, s, true);
		return;
	}
	p->s.fd = s->fd;
	p->s.ev = (struct kvxd_fd){.kind = KVXD_FD_PEER, .ptr = p};
	journal_push(p, KVXD_J_SOCKET, 0);
	kvxd_epoll_mod(d, p->s.fd, &p->s.ev, EPOLLIN);
	/* keep any bytes after the HELLO */
	p->s.rx = s->rx;
	p->s.rx_len = s->rx_len;
	p->s.rx_cap = s->rx_cap;
	s->rx = NULL;
	pending_drop(d, s, false);
	memmove(p->s.rx, p->s.rx + n, p->s.rx_len - n);
	p->s.rx_len -= n;
	p->seq = seq;
	p->state = KVXD_PEER_HELLO;
	p->deadline_ms = kvxd_now_ms() + d->cfg.handshake_ms;
	d->ctr.frames_rx++;
	rc = send_hello(d, p, KVX_WIRE_HELLO_ACK);
	if (rc == 0)
		rc = setup_qps(d, p);
	if (rc == 0)
		rc = drain_frames(d, p);
	if (rc)
		peer_fail(d, p, rc, p->last_error[0] ? p->last_error : "setup");
	(void)events;
}
