/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Peers: TCP control connections, the handshake that brings one RC QP per polling core to RTS,
 * and teardown.  Every native resource a setup acquires is journaled right after it succeeds;
 * a failed setup rolls the journal back in reverse, a published peer's teardown releases the
 * same resources through the polling cores.  Thread: the control core.
 */
#include <arpa/inet.h>
#include <assert.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "control/abort.h"
#include "control/peer.h"
#include "control/peer_io.h"
#include "control/rooms.h"
#include "control/vwork.h"
#include "core/fault.h"
#include "core/log.h"
#include "core/rand.h"

#define RECONNECT_MS 200
#define SWEEP_MS 1000	  /* retry of a rollback whose release failed */
#define BUSY_RETRY_MS 500 /* on_demand: a dial answered BYE BUSY is tried again after this */
/* several rails: a failed rail is tried again after this, doubling to the maximum */
#define RAIL_BACKOFF_MS 5000
#define RAIL_BACKOFF_MAX_MS 60000
/* How long a peer asked to hold its WRITEs (KVXD_BYE_HOLD_ASK) may take to replace the session
 * (rail_hold_ask_ms): at least this, and twice as long as a WRITE can take to fail through its
 * QP's retries (4.096 us x 2^ack_timeout, retry_cnt + 1 times: about 30 ms with the defaults),
 * at most RAIL_BACKOFF_MAX_MS.  A peer that has not replaced it by then is stuck, and we replace
 * it ourselves. */
#define RAIL_HOLD_ASK_MS 2000
/* on_demand: an IDLE_ASK is agreed to only when no room has used the session for this long */
#define IDLE_ANSWER_GRACE_MS 200

/* The legal next states of a peer (DESIGN.md section 4): dial or accept from IDLE, the
 * handshake in order, CLOSING from anywhere (a failure, a reset), IDLE once rolled back. */
static const bool peer_next[KVXD_PEER_STATE_COUNT][KVXD_PEER_STATE_COUNT] = {
	[KVXD_PEER_IDLE] = {[KVXD_PEER_CONNECTING] = true,
			    [KVXD_PEER_HELLO] = true,
			    [KVXD_PEER_CLOSING] = true},
	[KVXD_PEER_CONNECTING] = {[KVXD_PEER_HELLO] = true, [KVXD_PEER_CLOSING] = true},
	[KVXD_PEER_HELLO] = {[KVXD_PEER_QP_EXCHANGE] = true, [KVXD_PEER_CLOSING] = true},
	[KVXD_PEER_QP_EXCHANGE] = {[KVXD_PEER_READY] = true, [KVXD_PEER_CLOSING] = true},
	[KVXD_PEER_READY] = {[KVXD_PEER_CLOSING] = true},
	[KVXD_PEER_CLOSING] = {[KVXD_PEER_IDLE] = true},
};

/* The one place a peer's state changes: checked against peer_next, traced, counted. */
static void
peer_set_state(struct kvxd *d, struct kvxd_peer *p, enum kvxd_peer_state to)
{
	enum kvxd_peer_state from = p->state;

	if (from == to)
		return;
	assert(peer_next[from][to]);
	if (!peer_next[from][to])
		KVX_ERR("peer %s: illegal transition %s -> %s", p->name,
			kvxd_peer_state_str((int)from), kvxd_peer_state_str((int)to));
	KVX_DEBUG("peer %s: %s -> %s", p->name, kvxd_peer_state_str((int)from),
		  kvxd_peer_state_str((int)to));
	d->ctr.peer_transitions[from][to]++;
	p->state = to;
	if (from == KVXD_PEER_IDLE)
		p->hs_start_us = kvxd_now_us(); /* a setup begins */
	else if (to == KVXD_PEER_READY)
		kvx_hist_observe(&d->hist.handshake, &kvx_hist_us, kvxd_now_us() - p->hs_start_us);
}

/* Slot i becomes the peer cp, idle; whatever the slot held before is gone (a vacant slot). */
static void
peer_slot_init(struct kvxd *d, int i, const struct kvx_config_peer *cp)
{
	struct kvxd_peer *p = &d->peers[i];
	/* a slot's epochs never repeat: whatever was bound to an earlier peer in it (a parked
	 * ROOM_META, a room's source binding) never matches the new one */
	uint32_t epoch = p->epoch;

	free(p->pend_status);
	*p = (struct kvxd_peer){.idx = i, .epoch = epoch, .slot_epoch = epoch};
	if (cp != &d->cfg.peers[i])
		d->cfg.peers[i] = *cp;
	snprintf(p->name, sizeof(p->name), "%s", cp->name);
	p->addr = cp->addr;
	p->allowed = cp->allowed;
	p->initiator = strcmp(d->cfg.name, p->name) < 0;
	p->state = KVXD_PEER_IDLE; /* the initial state */
	p->s.fd = -1;
	p->retry_at_ms = 0;
	CDS_INIT_LIST_HEAD(&p->rooms);
}

void
kvxd_peer_init_all(struct kvxd *d)
{
	d->npeers = d->cfg.n_peers;
	CDS_INIT_LIST_HEAD(&d->pending);
	CDS_INIT_LIST_HEAD(&d->pending_dead);
	d->npending = 0;
	for (int i = 0; i < d->npeers; i++)
		peer_slot_init(d, i, &d->cfg.peers[i]);
}

int
kvxd_peer_room(const struct kvxd *d)
{
	uint64_t per_peer = 2ull * ((uint64_t)d->cfg.sq_depth + d->cfg.rq_depth);
	uint64_t fits = per_peer ? d->cfg.cq_depth / per_peer : 0;
	int used = 0;

	for (int i = 0; i < d->npeers; i++)
		used += !d->peers[i].vacant;
	if (fits > KVX_MAX_PEERS || d->cfg.on_demand) /* on_demand: sessions wait for CQ room */
		fits = KVX_MAX_PEERS;
	return (int)fits > used ? (int)fits - used : 0;
}

int
kvxd_peer_fit_cq(struct kvxd *d)
{
	uint64_t one = 2ull * ((uint64_t)d->cfg.sq_depth + d->cfg.rq_depth);
	uint32_t max = 0;
	int k = 0;

	/* every rail has a CQ of this depth on each core: the smallest limit holds for all */
	for (int i = 0; i < d->nrails; i++)
		if (d->rails[i].info.max_cqe && (!max || d->rails[i].info.max_cqe < max)) {
			max = d->rails[i].info.max_cqe;
			k = i;
		}
	if (!max || d->cfg.cq_depth <= max)
		return 0;
	if (d->cfg.on_demand && max >= one) {
		KVX_INFO("[rdma] cq_depth %u lowered to %u, the most %s allows: %llu sessions at "
			 "once",
			 d->cfg.cq_depth, max, d->cfg.rails[k].device,
			 (unsigned long long)(max / (one / 2)));
		d->cfg.cq_depth = max;
		return 0;
	}
	KVX_ERR("[rdma] cq_depth %u: %s allows at most %u CQ entries; lower sq_depth and "
		"rq_depth%s",
		d->cfg.cq_depth, d->cfg.rails[k].device, max,
		d->cfg.on_demand ? "" : ", list fewer peers, or set [node] connect = on_demand");
	return -EINVAL;
}

int
kvxd_peer_add(struct kvxd *d, const struct kvx_config_peer *cp)
{
	int i = 0;

	if (kvxd_peer_find(d, cp->name))
		return -EEXIST;
	while (i < d->npeers && !d->peers[i].vacant)
		i++;
	if (i == KVX_MAX_PEERS)
		return -ENOSPC;
	if (kvxd_peer_room(d) < 1)
		return -ENOBUFS;
	peer_slot_init(d, i, cp);
	if (i == d->npeers)
		d->cfg.n_peers = ++d->npeers;
	d->ctr.peers_added++;
	KVX_INFO("peer %s added (%s:%u, slot %d)", cp->name, cp->addr.host, cp->addr.port, i);
	return 0;
}

static void pending_drop(struct kvxd *d, struct kvxd_pending *pc, bool close_fd);

/* A removed peer's slot is freed once nothing is left of it: no session, no journal entry (no
 * QP its cores still drain), no room that names it, no room or tombstone charged to it. */
static void
peer_try_vacate(struct kvxd *d, struct kvxd_peer *p)
{
	if (!p->removing || p->state != KVXD_PEER_IDLE || p->j.n || !cds_list_empty(&p->rooms) ||
	    p->rooms_held || p->tombstones_held)
		return;
	KVX_INFO("peer %s: removed, slot %d free", p->name, p->idx);
	free(p->pend_status);
	p->pend_status = NULL;
	p->npend_status = p->cap_status = 0;
	p->vacant = true;
	p->removing = false;
	memset(&d->cfg.peers[p->idx], 0, sizeof(d->cfg.peers[p->idx]));
}

void
kvxd_peer_remove(struct kvxd *d, struct kvxd_peer *p, const char *why)
{
	bool was_ready = p->state == KVXD_PEER_READY;
	struct kvxd_pending *pc, *tmp;

	if (p->vacant || p->removing)
		return;
	KVX_INFO("peer %s: removing (%s)", p->name, why);
	p->removing = true;
	p->paused = true; /* never dialled again */
	p->try_once = false;
	p->replacing = false; /* its rooms do not carry on */
	d->ctr.peers_removed++;
	/* a connection it opened that has not authenticated yet never becomes its session */
	cds_list_for_each_entry_safe(pc, tmp, &d->pending, link) if (pc->peer == p->idx)
		pending_drop(d, pc, true);
	kvxd_peer_reset(d, p, why);
	p->epoch++; /* what its sessions left parked (a ROOM_META) no longer matches */
	if (!was_ready) {
		/* no session ended, so nothing failed its rooms yet: those waiting for it would
		 * only wait */
		snprintf(p->last_error, sizeof(p->last_error), "%s", why);
		p->lost = true;
		kvxd_abort_source_lost(d, p, true);
	}
	peer_try_vacate(d, p);
}

/* ---- streams ------------------------------------------------------------------------------- */

/* ---- journal ------------------------------------------------------------------------------- */

#define FAULT(p, point)                                                                         \
	do {                                                                                    \
		if (kvx_fault_hit(point)) {                                                     \
			snprintf((p)->last_error, sizeof((p)->last_error), "injected fault %s", \
				 kvx_fault_name(point));                                        \
			return -EIO;                                                            \
		}                                                                               \
	} while (0)

/* Record an acquisition right after it succeeded.  The journal is sized for every acquisition
 * of one setup; running out is a programming error. */
static void
journal_push(struct kvxd_peer *p, int kind, int lane)
{
	assert(p->j.n < KVXD_JOURNAL_MAX);
	if (p->j.n < KVXD_JOURNAL_MAX)
		p->j.e[p->j.n++] = (struct kvxd_journal_entry){.kind = kind, .lane = lane};
}

static int
release_socket(struct kvxd *d, struct kvxd_peer *p)
{
	if (kvx_fault_hit(KVX_FAULT_RB_CLOSE_SOCKET))
		return -EIO;
	if (p->s.tx_off < p->s.tx_len)
		kvxd_stream_flush(d, &p->s); /* best effort: frames already queued (a BYE) */
	epoll_ctl(d->epfd, EPOLL_CTL_DEL, p->s.fd, NULL);
	if (close(p->s.fd) < 0 && errno != EINTR)
		KVX_WARN("peer %s: close: %s", p->name, strerror(errno));
	p->s.fd = -1;
	kvxd_stream_free(&p->s);
	return 0;
}

/* The release call of one entry.  0: released; -EINPROGRESS: a polling core is draining the
 * QP (the rollback resumes when it gives the QP back); other: the release failed. */
static int
journal_release(struct kvxd *d, struct kvxd_peer *p, struct kvxd_journal_entry *e)
{
	struct kvxd_qpc *q = e->kind >= KVXD_J_QPC ? p->qpc[e->lane] : NULL;
	int rc;

	switch (e->kind) {
	case KVXD_J_SOCKET:
		return release_socket(d, p);
	case KVXD_J_SLOT:
		if (kvx_fault_hit(KVX_FAULT_RB_RELEASE_SLOT))
			return -EIO;
		p->sent_ready = p->got_ready = p->stalled = false;
		return 0;
	case KVXD_J_QPC:
		kvx_pcore_qpc_free(q);
		p->qpc[e->lane] = NULL;
		return 0;
	case KVXD_J_CONNECT:
		/* the worker may be in a call on these QPs: nothing of theirs is released until
		 * it is done (kvxd_peer_connect_done resumes the rollback); the calls it has not
		 * made yet it skips */
		if (!p->vjob.busy)
			return 0;
		__atomic_store_n(&p->vjob.cancel, true, __ATOMIC_RELAXED);
		return -EINPROGRESS;
	case KVXD_J_QP_ARMED:
		if (kvx_fault_hit(KVX_FAULT_RB_QP_TO_ERR))
			return -EIO;
		return kvx_vx->qp_to_err(q->qp);
	case KVXD_J_QP:
		if (e->handed && e->step == KVXD_REL_NONE) {
			/* its core owns its completions: fence it, and the core gives it back
			 * once every WR it ever had has completed (flushes included) */
			struct kvxd_msg m = {.type = KVXD_MSG_QP_REMOVE, .qpc = q};

			rc = kvx_vx->qp_to_err(q->qp);
			if (rc)
				return rc;
			if (kvx_pcore_send(&d->cores[kvxd_lane_core(d, e->lane)], &m))
				return -EAGAIN; /* inbox full: the sweep retries */
			e->step = KVXD_REL_REMOVING;
		}
		if (e->step == KVXD_REL_REMOVING)
			return -EINPROGRESS;
		if (kvx_fault_hit(KVX_FAULT_RB_DESTROY_QP))
			return -EIO;
		rc = kvx_vx->qp_destroy(q->qp);
		if (rc == 0) {
			q->qp = NULL;
			if (e->handed)
				d->live_qpcs--;
		}
		return rc;
	}
	return 0;
}

/* Release in reverse order; an entry leaves the journal only once its release succeeded.
 * Returns 0 (empty), -EINPROGRESS (waiting for a core) or the failed release's error. */
static int
journal_rollback(struct kvxd *d, struct kvxd_peer *p)
{
	while (p->j.n > 0) {
		struct kvxd_journal_entry *e = &p->j.e[p->j.n - 1];
		int rc = journal_release(d, p, e);

		if (rc == -EINPROGRESS)
			return rc;
		if (rc) {
			KVX_ERR("peer %s: rollback stopped, %d entr%s left: %s", p->name, p->j.n,
				p->j.n == 1 ? "y" : "ies", strerror(-rc));
			return rc;
		}
		p->j.n--;
		if (e->kind == KVXD_J_QP) {
			bool more = false;

			for (int i = 0; i < p->j.n; i++)
				more |= p->j.e[i].kind == KVXD_J_QP;
			if (!more) { /* every QP of that session is destroyed: fences complete */
				p->qp_sessions_ended++;
				kvxd_abort_peer_fenced(d, p);
			}
		}
	}
	if (p->state == KVXD_PEER_CLOSING)
		peer_set_state(d, p, KVXD_PEER_IDLE);
	return 0;
}

int
kvxd_journal_pending(const struct kvxd *d)
{
	int n = 0;

	for (int i = 0; i < d->npeers; i++)
		if (d->peers[i].state != KVXD_PEER_READY)
			n += d->peers[i].j.n;
	return n;
}

/* A polling core gave a QP back after QP_REMOVE: continue that peer's rollback. */
void
kvxd_qpc_retired(struct kvxd *d, struct kvxd_qpc *q)
{
	struct kvxd_peer *p = q->peer >= 0 && q->peer < d->npeers ? &d->peers[q->peer] : NULL;

	for (int i = 0; p && i < p->j.n; i++) {
		struct kvxd_journal_entry *e = &p->j.e[i];

		if (e->kind == KVXD_J_QP && p->qpc[e->lane] == q) {
			e->step = KVXD_REL_RETIRED;
			journal_rollback(d, p);
			return;
		}
	}
	/* not journaled (shutdown of a stopped core): release directly */
	if (q->qp && kvx_vx->qp_destroy(q->qp) != 0) {
		KVX_ERR("qp 0x%x: destroy failed; kept", q->qpn);
		return;
	}
	kvx_pcore_qpc_free(q);
	d->live_qpcs--;
}

/* ---- setup --------------------------------------------------------------------------------- */

/* A rail's MTU: the configured one, at most what the device runs. */
static uint32_t
rail_mtu(const struct kvxd *d, int rail)
{
	uint32_t cfg = d->cfg.rails[rail].mtu, dev = d->rails[rail].info.active_mtu;

	return dev && dev < cfg ? dev : cfg;
}

static struct kvx_vx_qp_attr
qp_attr(struct kvxd *d, struct kvxd_peer *p, int lane, const struct kvx_wire_qp_info *ri)
{
	int rail = kvxd_lane_rail(d, lane);
	struct kvx_vx_qp_attr a = {
		.local_psn = p->psn[lane],
		.mtu = rail_mtu(d, rail),
		.port = d->cfg.rails[rail].port,
		.gid_index = d->cfg.rails[rail].gid_index,
		.retry_cnt = d->cfg.retry_cnt,
		.rnr_retry = d->cfg.rnr_retry,
		.ack_timeout = d->cfg.ack_timeout,
	};

	if (ri) {
		a.remote_qpn = ri->qp[lane].qpn;
		a.remote_psn = ri->qp[lane].psn;
		memcpy(a.remote_gid, ri->rail[rail].gid, 16);
		if (ri->rail[rail].mtu < a.mtu)
			a.mtu = ri->rail[rail].mtu;
	}
	return a;
}

/* The session slot, right after the control connection: from here on the peer has a session
 * to roll back. */
static int
take_slot(struct kvxd_peer *p)
{
	p->sent_ready = p->got_ready = p->stalled = false;
	journal_push(p, KVXD_J_SLOT, 0);
	FAULT(p, KVX_FAULT_HS_AFTER_SLOT);
	return 0;
}

/* Create one QP per core on every rail (a lane each), move it to INIT, pre-post its
 * receives, and send QP_INFO. */
static int
setup_qps(struct kvxd *d, struct kvxd_peer *p)
{
	struct kvx_wire_msg m = {.type = KVX_WIRE_QP_INFO};
	int rc;

	for (int c = 0; c < d->ncores * d->nrails; c++) { /* c: the lane */
		int core = kvxd_lane_core(d, c), rail = kvxd_lane_rail(d, c);
		struct kvx_vx_qp_attr a;
		struct kvxd_qpc *q = kvx_pcore_qpc_alloc(d->cfg.sq_depth, d->cfg.rq_depth,
							 d->rails[rail].info.max_sge);
		struct kvxd_msg add = {.type = KVXD_MSG_QP_ADD, .qpc = q};
		uint64_t *ids;
		int posted;

		if (!q)
			return -ENOMEM;
		p->qpc[c] = q;
		journal_push(p, KVXD_J_QPC, c);
		FAULT(p, KVX_FAULT_HS_AFTER_QPC);
		rc = kvx_vx->qp_create(d->rails[rail].dev, d->cores[core].cq[rail], d->cfg.sq_depth,
				       d->cfg.rq_depth, &q->qp);
		if (rc)
			return rc;
		journal_push(p, KVXD_J_QP, c);
		FAULT(p, KVX_FAULT_HS_AFTER_QP_CREATE);
		q->qpn = kvx_vx->qp_num(q->qp);
		q->peer = p->idx;
		q->rail = rail;
		/* the session it will be published as: set before its core owns it, so that an
		 * immediate that overtakes QP_ACTIVATE is judged by the right session */
		q->epoch = p->epoch + 1;
		p->psn[c] = kvx_vx_random_psn();
		a = qp_attr(d, p, c, NULL);
		rc = kvx_vx->qp_to_init(q->qp, &a);
		if (rc)
			return rc;
		FAULT(p, KVX_FAULT_HS_AFTER_QP_INIT);
		ids = malloc(sizeof(*ids) * q->rq_depth);
		if (!ids)
			return -ENOMEM;
		for (uint32_t i = 0; i < q->rq_depth; i++)
			ids[i] = (uint64_t)(uintptr_t)&q->recv_tag;
		posted = 0;
		rc = kvx_vx->post_recv_burst(q->qp, ids, (int)q->rq_depth, &posted);
		free(ids);
		/* From here its core owns the QP's completions (receives flush into the core's CQ
		 * when the QP is fenced), whether or not every receive was posted. */
		q->rq_posted = (uint32_t)posted;
		q->rq_deficit = q->rq_depth - (uint32_t)posted;
		if (kvx_pcore_send(&d->cores[core], &add) == 0) {
			if (p->j.n && p->j.e[p->j.n - 1].kind == KVXD_J_QP)
				p->j.e[p->j.n - 1].handed = true;
			d->live_qpcs++;
		} else if (rc == 0) {
			rc = -EAGAIN;
		}
		if (rc)
			return rc;
		FAULT(p, KVX_FAULT_HS_AFTER_RECV_POST);
		m.u.qp_info.qp[c].qpn = q->qpn;
		m.u.qp_info.qp[c].psn = p->psn[c];
	}
	m.u.qp_info.nrails = (uint8_t)d->nrails;
	for (int k = 0; k < d->nrails; k++) {
		memcpy(m.u.qp_info.rail[k].gid, d->rails[k].info.gid, 16);
		m.u.qp_info.rail[k].mtu = rail_mtu(d, k);
	}
	m.u.qp_info.ncores = (uint16_t)d->ncores;
	peer_set_state(d, p, KVXD_PEER_QP_EXCHANGE);
	return kvxd_peer_send(d, p, &m);
}

/* The GID a peer's QP_INFO carries for a rail must be the configured one (rail 0), or else
 * the IPv4-mapped GID (RoCE v2) of an address the peer may connect from (its address or
 * allow_from, which lists its other rails' addresses): an authenticated peer still cannot
 * point our QPs at another host. */
static bool
gid_ok(const struct kvx_config_peer *cp, const uint8_t gid[16], int rail)
{
	static const uint8_t v4mapped[12] = {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff};
	uint32_t a;

	if (cp->has_gid && rail == 0)
		return memcmp(cp->gid, gid, 16) == 0;
	if (rail > 0 && rail <= cp->n_rail_gid)
		return memcmp(cp->rail_gid[rail - 1], gid, 16) == 0;
	if (memcmp(gid, v4mapped, sizeof(v4mapped)) != 0)
		return false;
	a = (uint32_t)gid[12] << 24 | (uint32_t)gid[13] << 16 | (uint32_t)gid[14] << 8 | gid[15];
	return kvx_config_peer_addr_ok(cp, a);
}

static bool rail_down(struct kvxd *d, struct kvxd_peer *p, int rail, const char *why);
static int publish(struct kvxd *d, struct kvxd_peer *p);
static void peer_fail(struct kvxd *d, struct kvxd_peer *p, int rc, const char *what);

/* Validate the remote's QP data and hand the moves of every QP to RTR and RTS to the verbs
 * worker (control/vwork.h): kvxd_peer_connect_done() goes on once they are made. */
static int
connect_qps(struct kvxd *d, struct kvxd_peer *p, const struct kvx_wire_qp_info *ri)
{
	struct kvxd_vjob *j = &p->vjob;

	if (ri->ncores != d->ncores) {
		snprintf(p->last_error, sizeof(p->last_error),
			 "polling core count mismatch: ours %d, theirs %u", d->ncores, ri->ncores);
		return -EPROTO;
	}
	if (ri->nrails != d->nrails) {
		snprintf(p->last_error, sizeof(p->last_error),
			 "rail count mismatch: ours %d ([rdma] and [rail.N]), theirs %u", d->nrails,
			 ri->nrails);
		return -EPROTO;
	}
	if (j->busy || p->sent_ready) { /* the sequence check lets one QP_INFO through */
		snprintf(p->last_error, sizeof(p->last_error), "QP_INFO again in one session");
		return -EPROTO;
	}
	for (int k = 0; k < d->nrails; k++) {
		char gid[INET6_ADDRSTRLEN];

		if (gid_ok(&d->cfg.peers[p->idx], ri->rail[k].gid, k))
			continue;
		inet_ntop(AF_INET6, ri->rail[k].gid, gid, sizeof(gid));
		d->ctr.gid_mismatch++;
		snprintf(p->last_error, sizeof(p->last_error),
			 "QP_INFO rail %d GID %s is not the peer's (address %s, see [peer.%s] gid "
			 "and allow_from)",
			 k, gid, p->addr.host, p->name);
		return -EACCES;
	}
	j->kind = KVXD_VJOB_CONNECT;
	j->peer = p->idx;
	j->lanes = 0;
	for (int c = 0; c < d->ncores * d->nrails; c++) { /* c: the lane */
		if (p->rails_down & 1u << kvxd_lane_rail(d, c))
			continue; /* that rail could not be set up on another core */
		j->lanes |= 1u << c;
		j->qp[c] = p->qpc[c]->qp;
		j->attr[c] = qp_attr(d, p, c, ri);
		j->rail[c] = (uint8_t)kvxd_lane_rail(d, c);
	}
	journal_push(p, KVXD_J_CONNECT, 0);
	kvxd_vwork_submit(d, j);
	return 0;
}

/* The verbs worker made the moves of connect_qps(): record the QPs that took writes (armed),
 * fence a rail whose QPs could not be connected while another rail is left, send QP_READY,
 * and publish if the peer's came already. */
static int
qps_connected(struct kvxd *d, struct kvxd_peer *p, const struct kvxd_vjob *j)
{
	struct kvx_wire_msg m = {.type = KVX_WIRE_QP_READY};
	int rc;

	/* every QP that can take writes is fenced first by a rollback, whatever ends this one */
	for (int c = 0; c < d->ncores * d->nrails; c++)
		if (j->lanes & 1u << c && j->stage[c] >= KVXD_VJOB_RTR)
			journal_push(p, KVXD_J_QP_ARMED, c);
	for (int c = 0; c < d->ncores * d->nrails; c++) { /* c: the lane */
		int rail = kvxd_lane_rail(d, c);

		if (!(j->lanes & 1u << c) || p->rails_down & 1u << rail)
			continue; /* not tried, or its rail already fenced on an earlier lane */
		if (j->stage[c] >= KVXD_VJOB_RTR)
			FAULT(p, KVX_FAULT_HS_AFTER_RTR);
		if (j->stage[c] == KVXD_VJOB_RTS) {
			FAULT(p, KVX_FAULT_HS_AFTER_RTS);
			continue;
		}
		if (j->stage[c] == KVXD_VJOB_NONE) { /* kvxd stops */
			snprintf(p->last_error, sizeof(p->last_error),
				 "QPs not connected: stopping");
			return -ECANCELED;
		}
		/* the session comes up on the other rails (a cut link: rxe cannot resolve the
		 * peer's address) */
		if (rail_down(d, p, rail,
			      j->stage[c] == KVXD_VJOB_FAILED ? "could not reach the peer"
							      : "could not be made ready"))
			continue;
		snprintf(p->last_error, sizeof(p->last_error), "QP 0x%x to %s: %s", p->qpc[c]->qpn,
			 j->stage[c] == KVXD_VJOB_FAILED ? "RTR" : "RTS",
			 strerror(j->rc[c] < 0 ? -j->rc[c] : EIO));
		return j->rc[c] < 0 ? j->rc[c] : -EIO;
	}
	p->sent_ready = true;
	rc = kvxd_peer_send(d, p, &m);
	if (rc)
		return rc;
	return p->got_ready ? publish(d, p) : 0;
}

void
kvxd_peer_connect_done(struct kvxd *d, struct kvxd_vjob *j)
{
	struct kvxd_peer *p = &d->peers[j->peer];
	int rc;

	if (p->state != KVXD_PEER_QP_EXCHANGE) {
		/* the session ended meanwhile: its rollback waited for the worker */
		journal_rollback(d, p);
		return;
	}
	if (d->stopping) { /* no session comes up while kvxd stops */
		kvxd_peer_reset(d, p, "stopping");
		return;
	}
	/* the calls are made: what they acquired is journaled next */
	if (p->j.n > 0 && p->j.e[p->j.n - 1].kind == KVXD_J_CONNECT)
		p->j.n--;
	else
		KVX_ERR("peer %s: QPs connected without their journal entry", p->name);
	rc = qps_connected(d, p, j);
	if (rc)
		peer_fail(d, p, rc, p->last_error[0] ? p->last_error : "connect QPs");
}

/* Tell every core which rails p's WRITEs avoid and whether they are held.  false: a core's
 * inbox could not take it (no memory: logged). */
static bool
rails_send(struct kvxd *d, struct kvxd_peer *p)
{
	struct kvxd_msg m = {.type = KVXD_MSG_PEER_RAILS,
			     .peer = p->idx,
			     .rails_down = p->rails_down,
			     .hold = p->rail_hold};
	bool ok = true;

	for (int c = 0; c < d->ncores; c++)
		ok = kvx_pcore_send(&d->cores[c], &m) == 0 && ok;
	return ok;
}

/* Take a rail out of p's session (its QP failed, or could not be connected) while another
 * is left; the session is replaced to try it again after the backoff.  false: no rail would
 * be left. */
static bool
rail_down(struct kvxd *d, struct kvxd_peer *p, int rail, const char *why)
{
	uint64_t now = kvxd_now_ms();
	uint8_t all = (uint8_t)((1u << d->nrails) - 1);

	if (d->nrails < 2 || rail < 0 || rail >= d->nrails ||
	    (uint8_t)(p->rails_down | 1u << rail) == all)
		return false;
	if (p->rails_down & 1u << rail)
		return true; /* another core's QP on that rail: already down */
	/* a session that ran a while on all its rails starts the backoff again */
	if (!p->rails_down && p->ready_ms && now - p->ready_ms > 60000)
		p->rail_backoff_ms = 0;
	p->rail_backoff_ms = p->rail_backoff_ms ? p->rail_backoff_ms * 2 : RAIL_BACKOFF_MS;
	if (p->rail_backoff_ms > RAIL_BACKOFF_MAX_MS)
		p->rail_backoff_ms = RAIL_BACKOFF_MAX_MS;
	p->rails_down |= (uint8_t)(1u << rail);
	p->rail_retry_ms = now + p->rail_backoff_ms;
	d->ctr.rails_fenced++;
	KVX_WARN("peer %s: rail %d (%s) %s: the other rail%s carry the rooms; the session is "
		 "replaced to try it again in %llu ms",
		 p->name, rail, d->cfg.rails[rail].device, why, d->nrails > 2 ? "s" : "",
		 (unsigned long long)p->rail_backoff_ms);
	return true;
}

bool
kvxd_peer_rail_failed(struct kvxd *d, struct kvxd_peer *p, int rail)
{
	/* false: nothing left to carry the rooms, the caller replaces the session now */
	return rail_down(d, p, rail, "failed (its rooms failed)") && rails_send(d, p);
}

static uint64_t
rail_hold_ask_ms(const struct kvxd *d)
{
	/* in ns: at most 2 x 4096 x 7 << 31, about 1.2e14 */
	uint64_t ns = (2 * 4096ull * ((uint64_t)d->cfg.retry_cnt + 1)) << d->cfg.ack_timeout;
	uint64_t ms = ns / 1000000 + 1;

	return ms < RAIL_HOLD_ASK_MS	  ? RAIL_HOLD_ASK_MS
	       : ms > RAIL_BACKOFF_MAX_MS ? RAIL_BACKOFF_MAX_MS
					  : ms;
}

/* Replace p's session, nothing of ours in flight to it, so that the next one tries every rail;
 * rooms carry on (their ROOM_META comes again over the new session).  Each node counts the
 * replacements that try its own failed rails again: here if one of ours failed, and at a peer
 * that asked us to, when our BYE comes. */
static void
rail_replace(struct kvxd *d, struct kvxd_peer *p, const char *why)
{
	struct kvx_wire_msg bye = {.type = KVX_WIRE_BYE, .u.bye_reason = KVXD_BYE_REPLACE};

	if (p->rails_down)
		d->ctr.rail_retries++;
	kvxd_peer_send(d, p, &bye);
	p->replacing = true;
	kvxd_peer_reset(d, p, why);
}

/* The replacement that tries the failed rails again, once nothing is in flight to p: hold new
 * WRITEs on every core; once all said they are idle, ask the peer to do the same and replace the
 * session (kvxd_peer_rail_idle).  Each wait is bounded: our WRITEs that do not end in time
 * (from rail_hold_ms; twice that when the peer asked for the hold), or a peer that does not
 * replace the session in time (from hold_asked_ms), and we replace it anyway, what is still in
 * flight flushing (its rooms fail, safely). */
static void
rail_tick(struct kvxd *d, struct kvxd_peer *p, uint64_t now)
{
	uint64_t bound = rail_hold_ask_ms(d);
	/* a hold the peer asked for: its own bound comes first (it replaces the session) */
	bool ours = p->rail_hold && !p->hold_asked_ms &&
		    now >= p->rail_hold_ms + (p->hold_for_peer ? 2 * bound : bound);

	if (p->state == KVXD_PEER_READY &&
	    (ours || (p->hold_asked_ms && now >= p->hold_asked_ms + bound))) {
		d->ctr.rail_hold_timeouts++;
		KVX_WARN("peer %s: %s within %llu ms: replacing the session now (what is still in "
			 "flight flushes)",
			 p->name,
			 ours ? "our WRITEs to it did not end"
			      : "it did not replace the session after our ask to hold its WRITEs",
			 (unsigned long long)bound);
		rail_replace(d, p, "replacing the session to try its failed rail again");
		return;
	}
	if (p->state != KVXD_PEER_READY || !p->rails_down || p->rail_hold || now < p->rail_retry_ms)
		return;
	p->rail_hold = true;
	p->rail_hold_ms = now;
	p->rail_idle_cores = 0;
	if (!rails_send(d, p))
		p->rail_hold = false; /* tried again at the next tick */
}

void
kvxd_peer_qp_stuck(struct kvxd *d, int peer, const struct kvxd_qpc *q, uint32_t gen)
{
	struct kvxd_peer *p;
	int rc;

	if (peer < 0 || peer >= d->npeers)
		return;
	p = &d->peers[peer];
	for (int l = 0; l < d->ncores * d->nrails; l++) {
		if ((uintptr_t)p->qpc[l] != (uintptr_t)q)
			continue;
		if (!q->qp || q->epoch != gen)
			return; /* another session's QP in the same place now */
		rc = kvx_vx->qp_to_err(q->qp);
		if (rc) {
			/* its connection's replacement moves it there later */
			KVX_WARN("peer %s: qp 0x%x refused a post and cannot be moved to the "
				 "error state: %s",
				 p->name, q->qpn, strerror(-rc));
			return;
		}
		d->ctr.qp_stuck++;
		KVX_WARN("peer %s: qp 0x%x (rail %d) refused a post (a WR of the list, or its "
			 "doorbell): moved to the error state, what it holds flushes",
			 p->name, q->qpn, q->rail);
		return;
	}
}

/* The lane of p's session whose QP is q, or -1. */
static int
lane_of(const struct kvxd *d, const struct kvxd_peer *p, const struct kvxd_qpc *q)
{
	for (int l = 0; l < d->ncores * d->nrails; l++)
		if (p->qpc[l] == q)
			return l;
	return -1;
}

void
kvxd_peer_qp_errored(struct kvxd *d, int peer, const struct kvxd_qpc *q, uint32_t gen)
{
	struct kvx_wire_msg bye = {.type = KVX_WIRE_BYE};
	struct kvxd_peer *p;
	int lane;

	if (peer < 0 || peer >= d->npeers)
		return;
	p = &d->peers[peer];
	if (p->state != KVXD_PEER_READY || gen != p->epoch)
		return; /* the session ended: the peer's rollback fenced its end of every QP */
	lane = lane_of(d, p, q);
	if (lane < 0 || p->lanes_fenced & 1ull << lane)
		return; /* told already, or fenced here as the peer asked (its end failed) */
	p->lanes_fenced |= 1ull << lane;
	if (p->features & KVX_WIRE_FEAT_LANE_FENCE) {
		bye.u.bye_reason = KVXD_BYE_FENCE | (uint32_t)lane << 8;
		if (kvxd_peer_send(d, p, &bye) == 0) {
			d->ctr.lane_fences_asked++;
			return;
		}
	}
	/* it cannot be asked: its rollback fences its end, and what q carried is acknowledged
	 * over the next session */
	bye.u.bye_reason = KVXD_BYE_REPLACE;
	d->ctr.qp_replaced++;
	kvxd_peer_send(d, p, &bye);
	p->replacing = true;
	kvxd_peer_reset(d, p,
			"QP error: replacing the connection (the peer cannot be asked to "
			"fence its end of the QP)");
}

bool
kvxd_peer_lane_fenced_by_peer(const struct kvxd *d, const struct kvxd_peer *p,
			      const struct kvxd_qpc *q)
{
	int lane = lane_of(d, p, q);

	return lane >= 0 && p->lanes_fenced_by_peer & 1ull << lane;
}

/* The peer's QP of a lane failed (its BYE FENCE): our end goes to the error state before we read
 * its next frame, which may acknowledge rooms whose WRITEs that QP sent.  Our core then sees the
 * QP in error: its rail is down here too (several rails), or the peer replaces the session. */
static int
on_fence(struct kvxd *d, struct kvxd_peer *p, uint32_t lane)
{
	struct kvxd_qpc *q;
	int rc;

	if (lane >= (uint32_t)(d->ncores * d->nrails)) {
		snprintf(p->last_error, sizeof(p->last_error),
			 "BYE FENCE for lane %u: the session has %d", lane, d->ncores * d->nrails);
		return -EPROTO;
	}
	if (p->state != KVXD_PEER_READY || p->lanes_fenced & 1ull << lane)
		return 0; /* in setup no QP carried anything; fenced (or failed here) already */
	q = p->qpc[lane];
	if (!q || !q->qp)
		return 0;
	p->lanes_fenced |= 1ull << lane;
	p->lanes_fenced_by_peer |= 1ull << lane;
	rc = kvx_vx->qp_to_err(q->qp);
	if (rc) {
		snprintf(p->last_error, sizeof(p->last_error),
			 "cannot move qp 0x%x to the error state as the peer asked: %s", q->qpn,
			 strerror(-rc));
		return rc; /* the session ends: its rollback fences and destroys the QP */
	}
	d->ctr.lane_fences_made++;
	KVX_WARN("peer %s: its QP of lane %u (rail %d) failed: our qp 0x%x moved to the error "
		 "state, as it asked, before any of its acknowledgements",
		 p->name, lane, q->rail, q->qpn);
	return 0;
}

/* Nothing of ours in flight to p on any rail, our WRITEs held: replace the session now if p asked
 * us to (HOLD_ASK: its own are held and done) or cannot be asked; else ask it. */
static void
rail_all_idle(struct kvxd *d, struct kvxd_peer *p)
{
	struct kvx_wire_msg ask = {.type = KVX_WIRE_BYE, .u.bye_reason = KVXD_BYE_HOLD_ASK};

	if (p->hold_for_peer) {
		rail_replace(d, p,
			     "replacing the session, as the peer asked, to try its failed "
			     "rail again");
		return;
	}
	if (p->hold_asked_ms)
		return; /* asked: its BYE REPLACE ends the session (or rail_tick, in time) */
	if ((p->features & KVX_WIRE_FEAT_HOLD_ASK) && kvxd_peer_send(d, p, &ask) == 0) {
		p->hold_asked_ms = kvxd_now_ms() | 1;
		d->ctr.rail_hold_asks++;
		return;
	}
	rail_replace(d, p, "replacing the session to try its failed rail again");
}

void
kvxd_peer_rail_idle(struct kvxd *d, struct kvxd_peer *p, int core, uint32_t gen)
{
	if (p->state != KVXD_PEER_READY || !p->rail_hold || gen != p->epoch || core < 0 ||
	    core >= d->ncores)
		return;
	p->rail_idle_cores |= 1u << core;
	if (p->rail_idle_cores == (1u << d->ncores) - 1)
		rail_all_idle(d, p);
}

/* The peer asks us to hold our WRITEs to it and replace the session once none is in flight
 * (KVXD_BYE_HOLD_ASK): its retry of a failed rail would flush them otherwise. */
static void
hold_answer(struct kvxd *d, struct kvxd_peer *p)
{
	p->hold_for_peer = true;
	if (p->rail_hold) { /* our own retry's hold, its cores' reports count for both */
		if (p->rail_idle_cores == (1u << d->ncores) - 1)
			rail_all_idle(d, p);
		return;
	}
	p->rail_hold = true;
	p->rail_hold_ms = kvxd_now_ms();
	p->rail_idle_cores = 0;
	if (!rails_send(d, p)) /* a core without memory for it: the peer replaces in time */
		KVX_WARN("peer %s: cannot hold our WRITEs on every core as it asked", p->name);
}

/* Setup complete: hand the QPs to the polling cores.  The journal stays as it is and becomes
 * the published peer's teardown: one release path for both. */
static int
publish(struct kvxd *d, struct kvxd_peer *p)
{
	FAULT(p, KVX_FAULT_HS_BEFORE_PUBLISH);
	p->rail_hold = false; /* rails_down: those connect_qps could not connect */
	p->lanes_fenced = p->lanes_fenced_by_peer = 0;
	p->hold_asked_ms = 0;
	p->hold_for_peer = false;
	if (d->nrails > 1 && !rails_send(d, p))
		return -EAGAIN;
	p->epoch++;
	for (int i = 0; i < p->j.n; i++) {
		struct kvxd_journal_entry *e = &p->j.e[i];
		struct kvxd_msg m = {
			.type = KVXD_MSG_QP_ACTIVATE, .qpc = p->qpc[e->lane], .gen = p->epoch};

		if (e->kind == KVXD_J_QP &&
		    kvx_pcore_send(&d->cores[kvxd_lane_core(d, e->lane)], &m))
			return -EAGAIN;
	}
	peer_set_state(d, p, KVXD_PEER_READY);
	p->lost = false;
	p->last_rx_ms = kvxd_now_ms();
	p->next_hb_ms = p->last_rx_ms + d->cfg.heartbeat_ms;
	p->deadline_ms = 0;
	p->busy_ms = p->last_rx_ms; /* on_demand: idle_ms counts from here */
	p->ready_ms = p->last_rx_ms;
	p->ready_at = ++d->handshake_clock;
	p->dial_held_ms = 0;
	p->idle_asked_ms = 0;
	p->try_once = false;
	p->n_handshakes++;
	p->last_error[0] = '\0';
	KVX_INFO("peer %s ready (epoch %u, %d QP%s)", p->name, p->epoch, d->ncores * d->nrails,
		 d->ncores * d->nrails > 1 ? "s" : "");
	p->status_retry = !kvxd_peer_flush_status(d, p);
	kvxd_abort_resend_for_peer(d, p);
	kvxd_rooms_send_meta(d, p);
	return 0;
}

void
kvxd_peer_reset(struct kvxd *d, struct kvxd_peer *p, const char *why)
{
	bool answered = p->state == KVXD_PEER_HELLO || p->state == KVXD_PEER_QP_EXCHANGE;
	bool was_ready = p->state == KVXD_PEER_READY;
	bool in_setup = answered || p->state == KVXD_PEER_CONNECTING;
	bool quiet = p->quiet; /* nothing failed: rooms carry on (idle close, crossing dials) */

	p->quiet = false;
	if (p->state == KVXD_PEER_IDLE && p->j.n == 0)
		return;
	if (quiet && p->state != KVXD_PEER_IDLE && p->state != KVXD_PEER_CLOSING) {
		KVX_INFO("peer %s: closing connection (%s): %s", p->name,
			 kvxd_peer_state_str(p->state), why);
	} else if (p->state != KVXD_PEER_IDLE && p->state != KVXD_PEER_CLOSING) {
		KVX_WARN("peer %s: closing connection (%s): %s", p->name,
			 kvxd_peer_state_str(p->state), why);
		snprintf(p->last_error, sizeof(p->last_error), "%s", why);
		p->n_resets++;
		d->ctr.peer_resets++;
	}
	if (p->s.fd >= 0) {
		if (p->s.tx_off < p->s.tx_len)
			kvxd_stream_flush(d, &p->s); /* best effort: frames already queued */
		epoll_ctl(d->epfd, EPOLL_CTL_DEL, p->s.fd, NULL); /* read nothing more */
	}
	peer_set_state(d, p, KVXD_PEER_CLOSING);
	if (p->rails_down || p->rail_hold) { /* the next session tries every rail */
		p->rails_down = 0;
		p->rail_hold = false;
		rails_send(d, p);
	}
	p->hold_asked_ms = 0;
	p->hold_for_peer = false;
	p->deadline_ms = 0;
	p->retry_at_ms = kvxd_now_ms() + RECONNECT_MS;
	p->sweep_at_ms = kvxd_now_ms() + SWEEP_MS;
	if (in_setup && !quiet)
		p->n_setup_failures++;
	p->fence_req = false; /* this reset is the fence */
	p->want = true;	      /* on_demand: rooms may need the next session */
	p->dialer = false;
	if (answered && !quiet)
		kvxd_abort_peer_setup_failed(d, p);
	if (p->try_once) {
		p->paused = true;
		p->try_once = false;
	}
	/* fences armed QPs first (reverse order), then retires published ones through their
	 * cores; the original error stays in last_error */
	journal_rollback(d, p);
	if (was_ready) {
		p->lost = !p->replacing && !quiet && !d->stopping; /* until it is back, new rooms
								    * from it fail at once */
		kvxd_abort_source_lost(d, p, p->lost);
	}
	p->replacing = false;
}

static void
peer_fail(struct kvxd *d, struct kvxd_peer *p, int rc, const char *what)
{
	char why[300];

	if (strncmp(p->last_error, "injected fault", 14) == 0 ||
	    (p->last_error[0] && what == p->last_error))
		snprintf(why, sizeof(why), "%s", p->last_error);
	else
		snprintf(why, sizeof(why), "%s: %s", what, rc < 0 ? strerror(-rc) : "failed");
	kvxd_peer_reset(d, p, why);
}

void
kvxd_peers_flush(struct kvxd *d)
{
	/* a peer reset here may queue frames to peers already passed (failure pushes): again */
	for (int pass = 0; pass < 4 && d->peer_tx_queued; pass++) {
		d->peer_tx_queued = false;
		for (int i = 0; i < d->npeers; i++) {
			struct kvxd_peer *p = &d->peers[i];
			int rc;

			/* a full socket is written on EPOLLOUT */
			if (p->s.fd < 0 || p->s.tx_off >= p->s.tx_len || p->s.want_out)
				continue;
			rc = kvxd_stream_flush(d, &p->s);
			if (rc)
				peer_fail(d, p, rc, "send");
		}
	}
}

static uint32_t
auth_features(const struct kvxd *d)
{
	return (d->auth.none ? KVX_AUTH_FEAT_NONE : 0) | KVX_WIRE_FEAT_HOLD_ASK |
	       KVX_WIRE_FEAT_LANE_FENCE;
}

/* Initiator: HELLO with a fresh nonce, kept for the MACs. */
static int
send_hello(struct kvxd *d, struct kvxd_peer *p)
{
	struct kvx_wire_msg m = {.type = KVX_WIRE_HELLO};

	p->nonce_i = kvx_rand_u64();
	p->session = p->epoch + 1;
	m.u.hello.version = KVX_WIRE_VERSION;
	m.u.hello.features = auth_features(d);
	snprintf(m.u.hello.name, sizeof(m.u.hello.name), "%s", d->cfg.name);
	m.u.hello.nonce = p->nonce_i;
	m.u.hello.session = p->session;
	return kvxd_peer_send(d, p, &m);
}

/* Whether the far end's authentication mode matches ours; why in err when not. */
static bool
features_ok(const struct kvxd *d, uint32_t theirs, char *err, size_t errlen)
{
	bool none = theirs & KVX_AUTH_FEAT_NONE;

	if (none == d->auth.none)
		return true;
	snprintf(err, errlen, "%s",
		 none ? "it runs unauthenticated (auth = none) and we authenticate"
		      : "it authenticates and we run unauthenticated (auth = none)");
	return false;
}

/* Initiator: the acceptor's HELLO_ACK must name the peer we dialed, speak our version and
 * carry a valid MAC over this handshake; then we prove ourselves (AUTH). */
static int
on_hello_ack(struct kvxd *d, struct kvxd_peer *p, const struct kvx_wire_hello *h)
{
	struct kvx_wire_msg m = {.type = KVX_WIRE_AUTH};
	struct kvx_auth_transcript t = {
		.version = KVX_WIRE_VERSION,
		.features_i = auth_features(d),
		.features_a = h->features,
		.name_i = d->cfg.name,
		.name_a = p->name,
		.nonce_i = p->nonce_i,
		.nonce_a = h->nonce,
		.session = p->session,
	};
	char why[128];
	int rc;

	if (strcmp(h->name, p->name) != 0) {
		snprintf(p->last_error, sizeof(p->last_error), "dialed %s but %s answered", p->name,
			 h->name);
		return -EPROTO;
	}
	if (h->version != KVX_WIRE_VERSION) {
		d->ctr.conn_refused_version++;
		snprintf(p->last_error, sizeof(p->last_error),
			 "peer speaks protocol version %u, we speak %u", h->version,
			 KVX_WIRE_VERSION);
		return -EPROTONOSUPPORT;
	}
	if (!features_ok(d, h->features, why, sizeof(why))) {
		d->ctr.conn_refused_auth++;
		snprintf(p->last_error, sizeof(p->last_error), "authentication: %s", why);
		return -EACCES;
	}
	if (h->session != p->session || !kvx_auth_verify(&d->auth, KVX_AUTH_ACCEPTOR, &t, h->mac)) {
		d->ctr.conn_refused_auth++;
		snprintf(p->last_error, sizeof(p->last_error),
			 "authentication failed: HELLO_ACK's MAC does not verify (wrong secret?)");
		return -EACCES;
	}
	p->features = h->features;
	rc = kvx_auth_mac(&d->auth, KVX_AUTH_INITIATOR, &t, m.u.auth_mac);
	if (rc)
		return rc;
	rc = kvxd_peer_send(d, p, &m);
	if (rc)
		return rc;
	return setup_qps(d, p);
}

/* Every peer socket: small control frames (ABORT_ACK, ROOM_STATUS) must not wait for Nagle;
 * TCP keepalive probes a connection silent for the heartbeat bound (a backstop to HEARTBEAT). */
static void
socket_opts(struct kvxd *d, int fd)
{
	uint64_t silent_s = ((uint64_t)d->cfg.heartbeat_ms * d->cfg.heartbeat_misses + 999) / 1000;
	int one = 1, idle = silent_s ? (int)(silent_s < 32767 ? silent_s : 32767) : 10, intvl = 1,
	    cnt = 3;

	setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
	setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
	setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
	setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof(intvl));
	setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof(cnt));
}

/* Dial from our own listen address (when it is a specific one): peers check the source address
 * of every connection against the address they have for us. */
static int
bind_source(struct kvxd *d, int fd)
{
	struct sockaddr_in sa = {.sin_family = AF_INET};

	if (d->cfg.listen.host[0] == '\0' ||
	    inet_pton(AF_INET, d->cfg.listen.host, &sa.sin_addr) != 1 ||
	    sa.sin_addr.s_addr == htonl(INADDR_ANY))
		return 0;
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		return -errno;
	return 0;
}

static int
dial_acquire(struct kvxd *d, struct kvxd_peer *p)
{
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(p->addr.port)};
	int fd, rc;

	inet_pton(AF_INET, p->addr.host, &sa.sin_addr);
	fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	socket_opts(d, fd);
	p->s.fd = fd;
	p->s.ev = (struct kvxd_fd){.kind = KVXD_FD_PEER, .ptr = p};
	journal_push(p, KVXD_J_SOCKET, 0);
	rc = bind_source(d, fd);
	if (rc)
		return rc;
	if (kvxd_epoll_add(d, fd, &p->s.ev, EPOLLIN | EPOLLOUT))
		return -errno;
	p->s.want_out = true;
	FAULT(p, KVX_FAULT_HS_AFTER_SOCKET);
	rc = take_slot(p);
	if (rc)
		return rc;
	kvx_wire_seq_init(&p->seq, true);
	p->dialer = true;
	peer_set_state(d, p, KVXD_PEER_CONNECTING);
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 && errno != EINPROGRESS)
		return -errno;
	return 0;
}

static void
dial(struct kvxd *d, struct kvxd_peer *p)
{
	int rc;

	if (p->j.n && journal_rollback(d, p)) /* finish an earlier rollback first */
		return;
	p->last_error[0] = '\0';
	p->deadline_ms = kvxd_now_ms() + d->cfg.handshake_ms;
	p->dial_held_ms = 0;
	peer_set_state(d, p, KVXD_PEER_CONNECTING);
	rc = dial_acquire(d, p);
	if (rc)
		peer_fail(d, p, rc, "connect");
}

/* ---- sessions on demand ([node] connect = on_demand) ----------------------------------------- */

static bool
peer_in_setup(const struct kvxd_peer *p)
{
	return p->state == KVXD_PEER_CONNECTING || p->state == KVXD_PEER_HELLO ||
	       p->state == KVXD_PEER_QP_EXCHANGE;
}

/* The peer asks to close an idle session: agree (BYE IDLE, then end it quietly) when nothing of
 * ours depends on it, else ignore the ask (it asks again after idle_ms). */
static void
idle_answer(struct kvxd *d, struct kvxd_peer *p)
{
	struct kvx_wire_msg bye = {.type = KVX_WIRE_BYE, .u.bye_reason = KVXD_BYE_IDLE};

	/* and none for a while: a WR of a prefill room that just ended may still wait for its
	 * completion on the asker's side */
	if (!d->cfg.on_demand || !kvxd_rooms_idle_peer(d, p) ||
	    kvxd_now_ms() < p->busy_ms + IDLE_ANSWER_GRACE_MS)
		return;
	kvxd_peer_send(d, p, &bye);
	d->ctr.sessions_idle_closed++;
	p->quiet = true;
	kvxd_peer_reset(d, p, "idle: closed at the peer's request");
}

/* READY, on_demand: ask the peer to close a session that nothing of ours has needed for
 * idle_ms (the rooms that used it have all left; asked again every idle_ms while it refuses). */
static void
idle_tick(struct kvxd *d, struct kvxd_peer *p, uint64_t now)
{
	struct kvx_wire_msg ask = {.type = KVX_WIRE_BYE, .u.bye_reason = KVXD_BYE_IDLE_ASK};

	if (!d->cfg.on_demand || !d->cfg.idle_ms || p->state != KVXD_PEER_READY ||
	    now < p->busy_ms + d->cfg.idle_ms || now < p->idle_asked_ms + d->cfg.idle_ms)
		return;
	if (!kvxd_rooms_idle_peer(d, p)) {
		p->busy_ms = now; /* still used: look again in idle_ms */
		return;
	}
	if (kvxd_peer_send(d, p, &ask) == 0)
		p->idle_asked_ms = now;
}

/* on_demand: how long pending connections we answered may keep us from dialling their peer,
 * in all, each time a room wants it.  The peer's AUTH comes one round trip after our HELLO_ACK;
 * anyone at the peer's address can send a HELLO and never authenticate, and would otherwise
 * hold our dials off for as long as it keeps opening connections.  Dialling anyway only makes
 * the dials cross, which AUTH settles. */
#define PENDING_AUTH_WAIT_MS 250

/* A pending connection of p's got past HELLO: it may become p's session (we answered it). */
static bool
pending_of(const struct kvxd *d, const struct kvxd_peer *p)
{
	const struct kvxd_pending *pc;

	cds_list_for_each_entry(pc, &d->pending, link)
	{
		if (pc->peer == p->idx && !pc->settled)
			return true;
	}
	return false;
}

/* on_demand: the sessions each polling core's CQ holds at once.  A session has one QP on every
 * core, each with up to sq_depth sends and rq_depth receives in flight. */
static int
session_max(const struct kvxd *d)
{
	uint64_t per = (uint64_t)d->cfg.sq_depth + d->cfg.rq_depth;
	uint64_t n = per ? d->cfg.cq_depth / per : 0;

	return n > KVX_MAX_PEERS ? KVX_MAX_PEERS : (int)n;
}

/* Sessions that hold QPs or may create them soon: every peer in setup, READY, or whose QPs are
 * still being destroyed.  A pending connection counts only once its AUTH verifies (it is then
 * its peer's session in setup): anyone at a peer's address can open ones that never
 * authenticate, and counting those let them make our dials wait and our idle sessions close. */
static int
sessions_live(const struct kvxd *d)
{
	int n = 0;

	for (int i = 0; i < d->npeers; i++)
		n += d->peers[i].state != KVXD_PEER_IDLE || d->peers[i].j.n > 0;
	return n;
}

/* Room for one more session?  If not, ask the session idle longest (nothing of ours needs it)
 * to close now rather than after idle_ms, at most once a second each. */
static bool
session_room(struct kvxd *d, uint64_t now)
{
	struct kvx_wire_msg ask = {.type = KVX_WIRE_BYE, .u.bye_reason = KVXD_BYE_IDLE_ASK};
	struct kvxd_peer *oldest = NULL;

	if (sessions_live(d) < session_max(d))
		return true;
	for (int i = 0; i < d->npeers; i++) {
		struct kvxd_peer *p = &d->peers[i];

		if (p->state != KVXD_PEER_READY ||
		    (p->idle_asked_ms && now < p->idle_asked_ms + 1000))
			continue;
		if ((!oldest || p->busy_ms < oldest->busy_ms) && kvxd_rooms_idle_peer(d, p))
			oldest = p;
	}
	if (oldest && kvxd_peer_send(d, oldest, &ask) == 0)
		oldest->idle_asked_ms = now;
	return false;
}

/* IDLE with its retry due: dial?  connect = always: the peer whose name sorts first dials.
 * on_demand: either side, when a room of ours waits for its ROOM_META to go to p, and not
 * while p's own dial to us is being answered. */
static bool
dial_due(struct kvxd *d, struct kvxd_peer *p, uint64_t now)
{
	if (!d->cfg.on_demand)
		return p->initiator;
	if (!p->want && !p->lost)
		return false;
	/* a room waits for p; or p's last session failed: new rooms from it fail at once until
	 * it is back, so no room would ever ask for it */
	p->want = kvxd_rooms_need_peer(d, p) || p->lost;
	if (!p->want)
		return false;
	if (pending_of(d, p)) { /* the peer dials us: wait for its AUTH, a while */
		if (!p->dial_held_ms)
			p->dial_held_ms = now;
		if (now < p->dial_held_ms + PENDING_AUTH_WAIT_MS)
			return false;
	}
	if (!session_room(d, now)) { /* waits for a session to close */
		d->ctr.sessions_cq_waits++;
		p->retry_at_ms = now + RECONNECT_MS;
		return false;
	}
	d->ctr.sessions_on_demand++;
	return true;
}

static void pending_expire(struct kvxd *d, uint64_t now);

/* READY peers: a HEARTBEAT every heartbeat_ms; a peer from which nothing arrived for
 * heartbeat_misses intervals is lost (a dead host is noticed while idle, not only when a
 * transfer to it fails).  Returns true when the peer was reset. */
static bool
heartbeat(struct kvxd *d, struct kvxd_peer *p, uint64_t now)
{
	uint64_t silent_ms = (uint64_t)d->cfg.heartbeat_ms * d->cfg.heartbeat_misses;

	if (p->state != KVXD_PEER_READY || !d->cfg.heartbeat_ms)
		return false;
	if (now >= p->last_rx_ms + silent_ms) {
		d->ctr.peers_silent++;
		snprintf(p->last_error, sizeof(p->last_error),
			 "silent for %llu ms (%u heartbeats of %u ms missed)",
			 (unsigned long long)(now - p->last_rx_ms), d->cfg.heartbeat_misses,
			 d->cfg.heartbeat_ms);
		peer_fail(d, p, -ETIMEDOUT, p->last_error);
		return true;
	}
	if (now >= p->next_hb_ms) {
		struct kvx_wire_msg m = {.type = KVX_WIRE_HEARTBEAT,
					 .u.heartbeat_ns = now * 1000000};

		p->next_hb_ms = now + d->cfg.heartbeat_ms;
		if (kvxd_peer_send(d, p, &m) == 0)
			d->ctr.heartbeats_sent++;
	}
	return false;
}

uint64_t
kvxd_peer_next_due(const struct kvxd *d)
{
	uint64_t due = UINT64_MAX;

	for (int i = 0; i < d->npeers; i++) {
		const struct kvxd_peer *p = &d->peers[i];

		if (p->deadline_ms && p->deadline_ms < due && p->state != KVXD_PEER_READY &&
		    p->state != KVXD_PEER_CLOSING && p->state != KVXD_PEER_IDLE)
			due = p->deadline_ms;
	}
	return due;
}

void
kvxd_peer_tick(struct kvxd *d, uint64_t now)
{
	pending_expire(d, now);
	for (int i = 0; i < d->npeers; i++) {
		struct kvxd_peer *p = &d->peers[i];

		if (p->fence_req) {
			p->fence_req = false;
			kvxd_peer_reset(d, p, p->fence_why);
			continue;
		}
		if (p->status_retry && p->state == KVXD_PEER_READY)
			p->status_retry = !kvxd_peer_flush_status(d, p);
		if (heartbeat(d, p, now))
			continue;
		if (p->deadline_ms && now >= p->deadline_ms && p->state != KVXD_PEER_READY &&
		    p->state != KVXD_PEER_CLOSING && p->state != KVXD_PEER_IDLE) {
			snprintf(p->last_error, sizeof(p->last_error),
				 "handshake timeout after %u ms in %s", d->cfg.handshake_ms,
				 kvxd_peer_state_str(p->state));
			peer_fail(d, p, -ETIMEDOUT, p->last_error);
			continue;
		}
		if ((p->state == KVXD_PEER_IDLE || p->state == KVXD_PEER_CLOSING) && p->j.n &&
		    now >= p->sweep_at_ms) {
			/* periodic sweep of an unfinished rollback */
			p->sweep_at_ms = now + SWEEP_MS;
			journal_rollback(d, p);
		}
		if ((p->unlisted || p->moved) && !p->removing && p->state != KVXD_PEER_READY) {
			/* gone from etcd, or listed elsewhere, while its session lived: the session
			 * has ended now.  A moved peer is found again by a full read (etcd's tick,
			 * in this same pass), where the registry then lists it */
			d->ctr.members_lost++;
			d->members_reread |= p->moved;
			kvxd_peer_remove(d, p,
					 p->moved
						 ? "moved to another address or GID (etcd); its "
						   "session ended"
						 : "left the membership (etcd); its session ended");
			continue;
		}
		idle_tick(d, p, now);
		rail_tick(d, p, now);
		if (!d->stopping && !p->paused && p->state == KVXD_PEER_IDLE &&
		    now >= p->retry_at_ms && dial_due(d, p, now))
			dial(d, p);
		peer_try_vacate(d, p);
	}
}

int
kvxd_peer_admin(struct kvxd *d, const char *name, const char *verb)
{
	struct kvxd_peer *p = kvxd_peer_find(d, name);

	if (!p)
		return -ENOENT;
	if (strcmp(verb, "pause") == 0) {
		p->paused = true;
		p->try_once = false;
		kvxd_peer_reset(d, p, "paused by the operator");
	} else if (strcmp(verb, "resume") == 0) {
		p->paused = p->try_once = false;
		p->retry_at_ms = 0;
	} else if (strcmp(verb, "try") == 0) {
		p->paused = false;
		p->try_once = true;
		p->retry_at_ms = 0;
	} else {
		return -EINVAL;
	}
	return 0;
}

/* ---- frames -------------------------------------------------------------------------------- */

/* Refuse a ROOM_META: counted, and reported to its sender (a failure push, like any source's)
 * so that its room fails at once instead of waiting. */
static void
meta_refuse(struct kvxd *d, struct kvxd_peer *p, const struct kvx_wire_room_meta *rm, uint64_t *ctr,
	    int error, const char *why)
{
	struct kvx_wire_room_status st = {.room = rm->room,
					  .gen = rm->gen,
					  .src_idx = rm->src_idx,
					  .state = KVX_ROOM_FAILED,
					  .error = error,
					  .dst_rank = rm->dst_rank,
					  .src_rank = rm->src_rank};

	(*ctr)++;
	snprintf(st.reason, sizeof(st.reason), "ROOM_META refused by %s: %s", d->cfg.name, why);
	KVX_DEBUG("peer %s: room %llu: %s", p->name, (unsigned long long)rm->room, st.reason);
	kvxd_peer_push_status(d, p, &st);
}

/* A ROOM_META as the polling core keeps it: one allocation, the regions' pages after it. */
static struct kvxd_meta *
meta_new(const struct kvxd_peer *p, const struct kvx_wire_room_meta *rm)
{
	uint64_t total = 0;
	struct kvxd_meta *meta;
	uint32_t *at;

	for (uint32_t g = 0; g < rm->nreg; g++)
		total += rm->reg[g].npages; /* at most KVX_WIRE_MAX_PAGES (decoded) */
	meta = malloc(sizeof(*meta) + sizeof(uint32_t) * total);
	if (!meta)
		return NULL;
	*meta = (struct kvxd_meta){.peer = p->idx,
				   .epoch = p->epoch,
				   .gen = rm->gen,
				   .token = rm->token,
				   .src_idx = rm->src_idx,
				   .nsrc = rm->nsrc,
				   .dst_rank = rm->dst_rank,
				   .nreg = rm->nreg};
	at = meta->pages;
	for (uint32_t g = 0; g < rm->nreg; g++) {
		const struct kvx_wire_region *w = &rm->reg[g];

		meta->reg[g] = (struct kvxd_meta_region){.addr = w->addr,
							 .page_size = w->page_size,
							 .pool_npages = w->pool_npages,
							 .nbufs = w->nbufs,
							 .src_off = w->src_off,
							 .dst_off = w->dst_off,
							 .len = w->len,
							 .npages = w->npages,
							 .pages = at};
		memcpy(meta->reg[g].rkey, w->rkey, sizeof(meta->reg[g].rkey));
		for (uint32_t i = 0; i < w->npages; i++)
			*at++ = kvx_wire_region_page(w, i);
	}
	return meta;
}

/*
 * A decode endpoint's metadata for one of our prefill rooms, (room, src_rank).  The first
 * endpoint (peer, dst_rank) to send it owns the room.  Another endpoint never redirects it: it
 * becomes one more destination of a fan-out room (up to the ndest the engine's chunks name),
 * and before the engine said, its metadata waits (parked, at most KVXD_MAX_TARGETS); beyond
 * ndest it is refused and reported.  Rooms a peer's metadata creates count against its
 * max_rooms_per_peer.
 */
static void
on_room_meta(struct kvxd *d, struct kvxd_peer *p, const struct kvx_wire_room_meta *rm)
{
	struct kvxd_room *r = kvxd_room_find(d, rm->room, rm->src_rank, KVX_ROOM_PREFILL);
	struct kvxd_meta *meta;
	struct kvxd_msg m = {.type = KVXD_MSG_ROOM_META};
	int own = r ? kvxd_room_owner(r, p->idx, rm->dst_rank) : -1;

	if (r && r->engine_gone && !r->nowners && !r->removing &&
	    kvxd_room_state(r) == KVX_ROOM_FAILED) {
		/* its engine went before this metadata came: the room cannot be fed */
		meta_refuse(d, p, rm, &d->ctr.meta_refused_engine_gone, -ECONNRESET,
			    "the prefill engine of this room disconnected");
		return;
	}
	if (r && r->tomb_peer == p->idx + 1 && r->tomb_rank == rm->dst_rank &&
	    r->tomb_gen == rm->gen) {
		/* it aborted this generation itself (before the id's reuse below: a room that
		 * ended since would otherwise be taken as that reuse) */
		d->ctr.meta_refused_aborted++;
		return;
	}
	if (r && kvx_room_state_terminal(kvxd_room_state(r)) && kvxd_room_quiescent(r) &&
	    (own < 0 || r->owner[own].gen != rm->gen) && r->ntgt == 0 && !r->tombstone &&
	    !r->refused && ((own >= 0 && r->engine_id < 0) || r->engine_closed || r->engine_gone)) {
		/* an id reused for a new request, once the room's engine let it go (or none ever
		 * took it, for its own endpoint): until then the engine's late chunks of the
		 * earlier attempt are the room's.  Taken by the new room, they would be written
		 * into its pages, the last one with the immediate that completes it, while the
		 * chunks before them went to the earlier attempt's pages: a SUCCESS with holes.
		 * Not even once the earlier attempt's last chunk came: the engine's close of it
		 * names only the id, and would find the new room */
		kvxd_room_remove(d, r);
		r = NULL;
		own = -1;
	}
	if (r && own >= 0 && r->owner[own].gen != rm->gen) {
		/* its own endpoint reuses the id while the room cannot go yet: it is still live
		 * (decode lost the session and opened the id again), it failed for a refused
		 * chunk and waits for its engine's close, its earlier attempt still drains or
		 * owes its ABORT_ACK (decode fenced and released it), or its engine has not closed
		 * it.  Told at once, the owner keeping that attempt's generation; taken, this
		 * metadata would reach a core that drops it (the room has its metadata, or
		 * ended), and the new room would hear nothing until its timeout */
		const char *why;

		if (!kvx_room_state_terminal(kvxd_room_state(r)))
			why = "the room's earlier attempt is still live here: open it again once "
			      "it "
			      "ended";
		else if (r->refused)
			why = "the room failed here (a chunk was refused) and its engine has not "
			      "closed it yet";
		else if (!kvxd_room_quiescent(r) || r->ntgt)
			why = "the room's earlier attempt still drains here: open it again later";
		else
			why = "the prefill engine has not closed the room's earlier attempt yet: "
			      "open it again later";
		meta_refuse(d, p, rm, &d->ctr.meta_refused_owner, -EBUSY, why);
		return;
	}
	if (r && r->nowners && own < 0 && kvx_room_state_terminal(kvxd_room_state(r))) {
		/* another endpoint's metadata for a room that ended (and is not yet gone): told at
		 * once, never taken */
		meta_refuse(d, p, rm, &d->ctr.meta_refused_owner, -EBUSY,
			    "the room already ended here");
		return;
	}
	if (r && r->nowners && own < 0) {
		/* another decode endpoint: one more destination, if the room feeds that many */
		if (r->ndest && r->nowners >= r->ndest) {
			meta_refuse(d, p, rm, &d->ctr.meta_refused_owner, -EBUSY,
				    "the room belongs to another decode endpoint");
			return;
		}
		if (!r->ndest) { /* the engine has not said yet: wait for its first chunk */
			if (!kvxd_room_meta_parked(d, r, p->idx, rm->dst_rank) &&
			    p->rooms_held + p->parked_held >= d->cfg.max_rooms_per_peer) {
				/* parked metadata is held like a room's: one that parked on
				 * rooms without end would hold memory no cap bounds */
				meta_refuse(d, p, rm, &d->ctr.meta_refused_cap, -EDQUOT,
					    "the peer holds max_rooms_per_peer rooms and parked "
					    "metadata");
				return;
			}
			meta = meta_new(p, rm);
			if (!meta)
				return;
			if (!kvxd_room_meta_park(d, r, meta)) {
				free(meta);
				meta_refuse(d, p, rm, &d->ctr.meta_refused_owner, -EBUSY,
					    "too many decode endpoints for one room");
				return;
			}
			d->ctr.meta_parked++;
			return;
		}
	}
	if (!r || (r->tombstone && r->engine_id < 0 && !r->nowners)) {
		if (p->rooms_held + p->parked_held >= d->cfg.max_rooms_per_peer) {
			meta_refuse(d, p, rm, &d->ctr.meta_refused_cap, -EDQUOT,
				    "the peer holds max_rooms_per_peer rooms and parked metadata");
			return;
		}
		if (!r)
			r = kvxd_prefill_room_new(d, rm->room, rm->src_rank, -1);
		if (!r)
			return;
		kvxd_room_charge(d, r, p->idx, false);
		/* another endpoint's tombstone: this one's room now */
		r->tombstone = r->drained = false;
	}
	meta = meta_new(p, rm);
	if (!meta)
		return;
	kvxd_room_set_owner(d, r, p->idx, rm->dst_rank, rm->gen);
	m.room = &r->pc;
	m.ptr = meta;
	if (kvx_pcore_send(&d->cores[r->pc.core], &m))
		free(meta);
}

/* A source's failure push: only from the peer that is that source of that room. */
static void
on_room_status(struct kvxd *d, struct kvxd_peer *p, const struct kvx_wire_room_status *st)
{
	struct kvxd_room *r = kvxd_room_find(d, st->room, st->dst_rank, KVX_ROOM_DECODE);
	char reason[KVXD_REASON_MAX];

	d->ctr.status_received++;
	if (!r || r->removing || kvxd_room_aborting(r) || r->open_gen != st->gen ||
	    st->state != KVX_ROOM_FAILED)
		return; /* another generation, or already aborting: counted, dropped */
	if (st->src_idx >= r->pc.nsrc || r->pc.src_peer[st->src_idx] != p->idx ||
	    r->src_rank[st->src_idx] != st->src_rank) {
		d->ctr.status_refused_owner++;
		return;
	}
	snprintf(reason, sizeof(reason), "source %s: %s", p->name, st->reason);
	/* a peer's number is not trusted to be an errno: FAILED always carries one */
	kvxd_decode_abort(d, r, st->error < 0 && st->error > -4096 ? st->error : -EPROTO, reason);
}

static int
on_frame(struct kvxd *d, struct kvxd_peer *p, const struct kvx_wire_msg *m)
{
	int rc;

	switch (m->type) {
	case KVX_WIRE_HELLO_ACK:
		return on_hello_ack(d, p, &m->u.hello);
	case KVX_WIRE_QP_INFO:
		return connect_qps(d, p, &m->u.qp_info);
	case KVX_WIRE_QP_READY:
		p->got_ready = true;
		if (!p->sent_ready)
			return 0;
		rc = publish(d, p);
		return rc;
	case KVX_WIRE_ROOM_META:
		if (m->u.room_meta.nrails != d->nrails) {
			/* the session agreed on the rails (QP_INFO): a key short is a broken peer
			 */
			d->ctr.frames_bad++;
			snprintf(p->last_error, sizeof(p->last_error),
				 "ROOM_META with keys for %u rails, the session has %d",
				 m->u.room_meta.nrails, d->nrails);
			return -EPROTO;
		}
		on_room_meta(d, p, &m->u.room_meta);
		return 0;
	case KVX_WIRE_ROOM_STATUS:
		on_room_status(d, p, &m->u.room_status);
		return 0;
	case KVX_WIRE_ABORT:
		kvxd_on_abort(d, p, &m->u.abort);
		return 0;
	case KVX_WIRE_ABORT_ACK:
		kvxd_on_abort_ack(d, p, &m->u.abort_ack);
		return 0;
	case KVX_WIRE_BYE:
		if (p->state == KVXD_PEER_READY && m->u.bye_reason == KVXD_BYE_IDLE_ASK) {
			idle_answer(d, p);
			return 0;
		}
		if ((m->u.bye_reason & 0xff) == KVXD_BYE_FENCE)
			return on_fence(d, p, m->u.bye_reason >> 8);
		if (m->u.bye_reason == KVXD_BYE_HOLD_ASK) {
			/* not READY yet, or one rail (no peer of ours asks then): the asker
			 * replaces the session in time */
			if (p->state == KVXD_PEER_READY && d->nrails > 1)
				hold_answer(d, p);
			return 0;
		}
		if (p->state == KVXD_PEER_READY && m->u.bye_reason == KVXD_BYE_IDLE &&
		    p->idle_asked_ms) {
			/* the answer to our IDLE_ASK: rooms of ours that started since carry on
			 * (their ROOM_META goes again on the next session) */
			d->ctr.sessions_idle_closed++;
			p->quiet = true;
			kvxd_peer_reset(d, p, "idle: closed by both sides");
			return 0;
		}
		if (m->u.bye_reason == KVXD_BYE_BUSY && p->dialer && peer_in_setup(p)) {
			/* no CQ room at the peer for now, or it still rolls back our last session:
			 * dial again later, nothing failed */
			p->quiet = true;
			kvxd_peer_reset(d, p,
					"the peer is busy (no room for another session, or still "
					"closing the last one): dialling again shortly");
			p->retry_at_ms = kvxd_now_ms() + BUSY_RETRY_MS;
			return 0;
		}
		/* reason 1: the peer replaces its QPs after an error; its rooms carry on.  Any
		 * other reason (shutdown, or an IDLE we never asked for) ends the session as a
		 * loss. */
		p->replacing = m->u.bye_reason == KVXD_BYE_REPLACE;
		if (p->replacing && p->hold_asked_ms)
			d->ctr.rail_retries++; /* the answer to our HOLD_ASK: our retry */
		snprintf(p->last_error, sizeof(p->last_error), "peer said BYE (%s)",
			 p->replacing ? "replacing its QPs" : "shutting down");
		return -ECONNRESET;
	default:
		return 0; /* HEARTBEAT */
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
		p->last_rx_ms = kvxd_now_ms();
		off += n;
		if (p->state != KVXD_PEER_READY && kvx_fault_hit(KVX_FAULT_HS_STALL))
			p->stalled = true; /* from now on this session never answers */
		if (p->stalled)
			continue;
		rc = on_frame(d, p, &m);
		if (rc || p->state == KVXD_PEER_CLOSING || p->s.fd < 0)
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

	if (p->state == KVXD_PEER_CLOSING || p->state == KVXD_PEER_IDLE)
		return;
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
		peer_set_state(d, p, KVXD_PEER_HELLO);
		rc = send_hello(d, p);
		if (rc) {
			peer_fail(d, p, rc, "send HELLO");
			return;
		}
	}
	if (events & EPOLLOUT) {
		rc = kvxd_stream_flush(d, &p->s);
		if (rc) {
			peer_fail(d, p, rc, "send");
			return;
		}
	}
	if (events & (EPOLLIN | EPOLLHUP | EPOLLERR)) {
		int frc = kvxd_stream_fill(&p->s);

		rc = drain_frames(d, p);
		if (rc) {
			peer_fail(d, p, rc, p->last_error[0] ? p->last_error : "protocol");
			return;
		}
		if (frc && p->state != KVXD_PEER_CLOSING) {
			peer_fail(d, p, frc,
				  frc == -ECONNRESET ? "peer closed the connection" : "recv");
			return;
		}
	}
}

/* ---- accepting ----------------------------------------------------------------------------- */

/* One log line per refused connection, at most REFUSE_LOG_PER_S a second; the rest are counted
 * and summed up in the next window's first line.  Every refusal is also a counter. */
#define REFUSE_LOG_PER_S 10

static void __attribute__((format(printf, 3, 4)))
refuse_log(struct kvxd *d, uint32_t addr, const char *fmt, ...)
{
	char msg[256];
	va_list ap;

	if (!kvx_log_allow(&d->refuse_log, kvxd_now_ms(), REFUSE_LOG_PER_S,
			   "refused connection(s)"))
		return;
	va_start(ap, fmt);
	vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	KVX_WARN("incoming connection from %u.%u.%u.%u refused: %s", addr >> 24, (addr >> 16) & 255,
		 (addr >> 8) & 255, addr & 255, msg);
}

/* Close a pending connection.  Its memory is freed only after this loop iteration
 * (kvxd_pending_reap): an event for it may still wait in the iteration's batch, for example when
 * a peer's removal or an eviction drops it while another descriptor is dispatched. */
static void
pending_drop(struct kvxd *d, struct kvxd_pending *pc, bool close_fd)
{
	cds_list_del(&pc->link);
	d->npending--;
	if (close_fd && pc->s.fd >= 0) {
		epoll_ctl(d->epfd, EPOLL_CTL_DEL, pc->s.fd, NULL);
		close(pc->s.fd);
	}
	pc->s.fd = -1;
	kvxd_stream_free(&pc->s);
	pc->dead = true;
	cds_list_add(&pc->link, &d->pending_dead);
}

void
kvxd_pending_reap(struct kvxd *d)
{
	struct kvxd_pending *pc, *tmp;

	cds_list_for_each_entry_safe(pc, tmp, &d->pending_dead, link)
	{
		cds_list_del(&pc->link);
		free(pc);
	}
}

void
kvxd_pending_close_all(struct kvxd *d)
{
	struct kvxd_pending *pc, *tmp;

	cds_list_for_each_entry_safe(pc, tmp, &d->pending, link) pending_drop(d, pc, true);
	kvxd_pending_reap(d);
}

/* Whether some configured peer may connect from addr at all. */
static bool
addr_known(const struct kvxd *d, uint32_t addr)
{
	for (int i = 0; i < d->npeers; i++)
		if (!d->peers[i].vacant && !d->peers[i].removing &&
		    kvx_config_peer_addr_ok(&d->cfg.peers[i], addr))
			return true;
	return false;
}

/* How far a pending connection has come: -1 settled (it will not become a session), 0 silent
 * (nothing received, nothing waiting in its socket), 1 bytes waiting or received, 2 its HELLO
 * answered (it is authenticating). */
static int
pending_progress(const struct kvxd_pending *pc)
{
	char c;

	if (pc->settled)
		return -1;
	if (pc->peer >= 0)
		return 2;
	if (pc->s.rx_len || recv(pc->s.fd, &c, 1, MSG_PEEK | MSG_DONTWAIT) > 0)
		return 1;
	return 0;
}

/* The connection to close for a new one (from addr, or from anywhere when addr is 0 and
 * any_addr): the oldest of those that have come least far.  A peer that connects and says
 * HELLO at once is not the one closed, whatever a flood of silent connections around it does. */
static struct kvxd_pending *
pending_victim(struct kvxd *d, uint32_t addr, bool any_addr)
{
	struct kvxd_pending *pc, *best = NULL;
	int best_p = 3;

	cds_list_for_each_entry(pc, &d->pending, link)
	{
		int prog;

		if (!any_addr && pc->addr != addr)
			continue;
		prog = pending_progress(pc);
		if (prog < best_p) { /* the list is oldest first: ties keep the oldest */
			best = pc;
			best_p = prog;
		}
	}
	return best;
}

/* Make room for one more pending connection from addr: past pending_per_addr from that
 * address, or pending_max in all, one goes (pending_victim: the oldest silent one first).
 * Connections that only hold a socket open cannot lock a peer out, and every one of them
 * expires after pending_ms. */
static void
pending_make_room(struct kvxd *d, uint32_t addr)
{
	struct kvxd_pending *pc;
	uint32_t same = 0;

	cds_list_for_each_entry(pc, &d->pending, link)
	{
		same += pc->addr == addr;
	}
	if (same >= d->cfg.pending_per_addr && (pc = pending_victim(d, addr, false))) {
		d->ctr.pending_evicted++;
		refuse_log(d, addr, "more than %u pending connections from it: one closed",
			   d->cfg.pending_per_addr);
		pending_drop(d, pc, true);
	}
	if ((uint32_t)d->npending >= d->cfg.pending_max && (pc = pending_victim(d, 0, true))) {
		d->ctr.pending_evicted++;
		refuse_log(d, pc->addr, "more than %u pending connections: one closed",
			   d->cfg.pending_max);
		pending_drop(d, pc, true);
	}
}

void
kvxd_peer_accept(struct kvxd *d)
{
	for (;;) {
		struct sockaddr_in sa;
		socklen_t salen = sizeof(sa);
		int fd = accept4(d->tcp_fd, (struct sockaddr *)&sa, &salen,
				 SOCK_NONBLOCK | SOCK_CLOEXEC);
		struct kvxd_pending *pc;
		uint32_t addr;

		if (fd < 0)
			return;
		addr = sa.sin_family == AF_INET ? ntohl(sa.sin_addr.s_addr) : 0;
		if (!addr_known(d, addr)) {
			d->ctr.conn_refused_addr++;
			refuse_log(d, addr, "not an address of any configured peer");
			close(fd);
			continue;
		}
		pending_make_room(d, addr);
		pc = calloc(1, sizeof(*pc));
		if (!pc) {
			close(fd);
			continue;
		}
		pc->s.fd = fd;
		pc->s.ev = (struct kvxd_fd){.kind = KVXD_FD_PENDING, .ptr = pc};
		pc->addr = addr;
		pc->peer = -1;
		pc->deadline_ms = kvxd_now_ms() + d->cfg.pending_ms;
		kvx_wire_seq_init(&pc->seq, false);
		socket_opts(d, fd);
		if (kvxd_epoll_add(d, fd, &pc->s.ev, EPOLLIN)) {
			close(fd);
			free(pc);
			continue;
		}
		cds_list_add_tail(&pc->link, &d->pending);
		d->npending++;
	}
}

/* Close the pending connections whose deadline passed. */
static void
pending_expire(struct kvxd *d, uint64_t now)
{
	struct kvxd_pending *pc, *tmp;

	cds_list_for_each_entry_safe(pc, tmp, &d->pending, link)
	{
		if (now < pc->deadline_ms)
			continue;
		if (!pc->settled) { /* a settled one authenticated: its peer was to close it */
			d->ctr.pending_expired++;
			refuse_log(d, pc->addr, "did not authenticate within %u ms",
				   d->cfg.pending_ms);
		}
		pending_drop(d, pc, true);
	}
}

/* Acceptor, after AUTH verified: adopt the socket (journaled), take the slot, create the QPs
 * (QP_INFO), and go on with whatever followed AUTH in the stream. */
static int
accept_acquire(struct kvxd *d, struct kvxd_peer *p, struct kvxd_pending *pc, size_t used)
{
	int rc;

	p->features = pc->hello.features;
	p->s.fd = pc->s.fd;
	p->s.ev = (struct kvxd_fd){.kind = KVXD_FD_PEER, .ptr = p};
	p->s.rx = pc->s.rx;
	p->s.rx_len = pc->s.rx_len;
	p->s.rx_cap = pc->s.rx_cap;
	pc->s.rx = NULL;
	pc->s.fd = -1;
	/* our HELLO_ACK may still be queued: the bytes move with the socket */
	p->s.tx = pc->s.tx;
	p->s.tx_len = pc->s.tx_len;
	p->s.tx_off = pc->s.tx_off;
	p->s.tx_cap = pc->s.tx_cap;
	p->s.want_out = pc->s.want_out;
	pc->s.tx = NULL;
	pending_drop(d, pc, false);
	journal_push(p, KVXD_J_SOCKET, 0);
	kvxd_epoll_mod(d, p->s.fd, &p->s.ev, EPOLLIN | (p->s.want_out ? EPOLLOUT : 0));
	memmove(p->s.rx, p->s.rx + used, p->s.rx_len - used); /* keep what follows */
	p->s.rx_len -= used;
	FAULT(p, KVX_FAULT_HS_AFTER_SOCKET);
	rc = take_slot(p);
	if (rc)
		return rc;
	peer_set_state(d, p, KVXD_PEER_HELLO);
	rc = setup_qps(d, p);
	if (rc)
		return rc;
	return drain_frames(d, p);
}

/* An authenticated pending connection that is not to become a session: read and drop what
 * comes on it until its peer closes it, for pending_ms at most from now (an AUTH that came just
 * before the connection's deadline still gets the time to read our answer and close). */
static void
pending_settle(struct kvxd *d, struct kvxd_pending *pc)
{
	pc->settled = true;
	pc->s.rx_len = 0;
	pc->deadline_ms = kvxd_now_ms() + d->cfg.pending_ms;
}

/* Refuse an authenticated pending connection for now: count it, answer BYE BUSY (its dialer
 * gives up quietly, nothing fails, and dials again shortly), log why.  The connection stays
 * open, read and dropped (settled), until the dialer closes it on our BYE or it expires: its
 * QP_INFO may be on the way, and closing with it unread would reset the connection, which can
 * overtake the BYE and make the dialer count a failed setup and fail its rooms. */
static void
pending_refuse_busy(struct kvxd *d, struct kvxd_pending *pc, uint64_t *ctr, const char *why)
{
	struct kvx_wire_msg bye = {.type = KVX_WIRE_BYE, .u.bye_reason = KVXD_BYE_BUSY};
	uint8_t buf[64];
	char err[64];
	int n = kvx_wire_encode(&bye, buf, sizeof(buf), err, sizeof(err));

	(*ctr)++;
	if (n > 0 && kvxd_stream_queue(&pc->s, buf, (size_t)n) == 0)
		kvxd_stream_flush(d, &pc->s);
	KVX_INFO("peer %s: %s (BYE BUSY)", d->peers[pc->peer].name, why);
	pending_settle(d, pc);
}

/* HELLO on a pending connection: a configured, allowed peer that we do not dial, from one of
 * its addresses, speaking our version and our authentication mode.  Answer HELLO_ACK with our
 * nonce and MAC.  No peer state changes.  Returns 0, or -1 after counting and logging. */
static int
pending_hello(struct kvxd *d, struct kvxd_pending *pc, const struct kvx_wire_hello *h)
{
	struct kvxd_peer *p = kvxd_peer_find(d, h->name);
	struct kvx_wire_msg m = {.type = KVX_WIRE_HELLO_ACK};
	struct kvx_auth_transcript t;
	uint8_t buf[KVX_WIRE_FRAME_MAX];
	char why[128];
	int n;

	/* connect = always: the peer whose name sorts first dials; on_demand: either side */
	bool ours = p && p->initiator && !d->cfg.on_demand;

	if (!p || !p->allowed || ours || p->paused) {
		d->ctr.conn_refused_name++;
		refuse_log(d, pc->addr, "HELLO from '%s': %s", h->name,
			   !p		 ? "not a configured peer"
			   : !p->allowed ? "not on the allow-list"
			   : ours	 ? "we dial that peer"
					 : "paused by the operator");
		return -1;
	}
	if (!kvx_config_peer_addr_ok(&d->cfg.peers[p->idx], pc->addr)) {
		d->ctr.conn_refused_addr++;
		refuse_log(d, pc->addr, "HELLO from '%s', whose address is %s (see allow_from)",
			   p->name, p->addr.host);
		return -1;
	}
	if (h->version != KVX_WIRE_VERSION) {
		d->ctr.conn_refused_version++;
		refuse_log(d, pc->addr, "peer %s speaks protocol version %u, we speak %u", p->name,
			   h->version, KVX_WIRE_VERSION);
		return -1;
	}
	if (!features_ok(d, h->features, why, sizeof(why))) {
		d->ctr.conn_refused_auth++;
		refuse_log(d, pc->addr, "peer %s: %s", p->name, why);
		return -1;
	}
	if (d->cfg.on_demand && p->initiator && p->dialer && p->state == KVXD_PEER_CONNECTING) {
		/* crossing dials, ours not even connected (the peer may be unreachable this way):
		 * answer the peer's.  Ours is given up (quietly) only once the peer's AUTH
		 * verifies: anyone at the peer's address can send this HELLO, and giving ours up
		 * here let it cancel every dial of ours that had not connected yet. */
		KVX_DEBUG("peer %s: dialled us while our dial has not connected: answering",
			  p->name);
	} else if (d->cfg.on_demand && p->initiator && p->dialer && peer_in_setup(p)) {
		/* crossing dials: ours wins (our name sorts first).  This one is left unanswered
		 * (it expires after pending_ms): the peer gives its own dial up, without failing
		 * anything, when ours reaches it. */
		d->ctr.dial_collisions++;
		KVX_INFO("peer %s: dialled us while we dial it: our dial goes on", p->name);
		return 0;
	}
	pc->peer = p->idx;
	pc->hello = *h;
	pc->nonce_a = kvx_rand_u64();
	t = (struct kvx_auth_transcript){
		.version = KVX_WIRE_VERSION,
		.features_i = h->features,
		.features_a = auth_features(d),
		.name_i = p->name,
		.name_a = d->cfg.name,
		.nonce_i = h->nonce,
		.nonce_a = pc->nonce_a,
		.session = h->session,
	};
	m.u.hello.version = KVX_WIRE_VERSION;
	m.u.hello.features = auth_features(d);
	snprintf(m.u.hello.name, sizeof(m.u.hello.name), "%s", d->cfg.name);
	m.u.hello.nonce = pc->nonce_a;
	m.u.hello.session = h->session;
	if (kvx_auth_mac(&d->auth, KVX_AUTH_ACCEPTOR, &t, m.u.hello.mac))
		return -1;
	n = kvx_wire_encode(&m, buf, sizeof(buf), why, sizeof(why));
	if (n < 0 || kvxd_stream_queue(&pc->s, buf, (size_t)n) || kvxd_stream_flush(d, &pc->s))
		return -1;
	pc->answered = ++d->handshake_clock;
	d->ctr.frames_tx++;
	return 0;
}

/* AUTH on a pending connection: the initiator's MAC over this handshake.  Only now may the
 * connection replace the peer's session. */
static bool
pending_auth_ok(struct kvxd *d, struct kvxd_pending *pc, const uint8_t *mac)
{
	struct kvxd_peer *p = &d->peers[pc->peer];
	struct kvx_auth_transcript t = {
		.version = KVX_WIRE_VERSION,
		.features_i = pc->hello.features,
		.features_a = auth_features(d),
		.name_i = p->name,
		.name_a = d->cfg.name,
		.nonce_i = pc->hello.nonce,
		.nonce_a = pc->nonce_a,
		.session = pc->hello.session,
	};

	if (kvx_auth_verify(&d->auth, KVX_AUTH_INITIATOR, &t, mac))
		return true;
	d->ctr.conn_refused_auth++;
	refuse_log(d, pc->addr,
		   "peer %s: authentication failed (AUTH's MAC does not verify: "
		   "wrong secret, or a replayed handshake)",
		   p->name);
	return false;
}

/* An accepted connection: HELLO, then AUTH; after a verified AUTH it becomes the peer's
 * session (superseding the old one).  Anything else closes it. */
void
kvxd_pending_on_event(struct kvxd *d, struct kvxd_pending *pc, uint32_t events)
{
	size_t off = 0;
	int rc = 0;

	if (pc->dead)
		return; /* dropped earlier in this iteration */
	if (events & EPOLLOUT && kvxd_stream_flush(d, &pc->s)) {
		pending_drop(d, pc, true);
		return;
	}
	rc = kvxd_stream_fill(&pc->s);
	if (pc->settled) { /* its peer gives this dial up: read and drop until it closes */
		pc->s.rx_len = 0;
		if (rc)
			pending_drop(d, pc, true);
		return;
	}
	while (off < pc->s.rx_len) {
		struct kvx_wire_msg m;
		struct kvxd_peer *p;
		char err[160];
		int n = kvx_wire_decode(pc->s.rx + off, pc->s.rx_len - off, &m, err, sizeof(err));

		if (n == 0)
			break;
		if (n < 0 || kvx_wire_seq_check(&pc->seq, m.type, err, sizeof(err)) ||
		    (m.type != KVX_WIRE_HELLO && m.type != KVX_WIRE_AUTH)) {
			d->ctr.frames_bad++;
			refuse_log(d, pc->addr, "%s",
				   n < 0 || m.type == KVX_WIRE_HELLO || m.type == KVX_WIRE_AUTH
					   ? err
					   : "a frame other than HELLO or AUTH before AUTH");
			pending_drop(d, pc, true);
			return;
		}
		d->ctr.frames_rx++;
		off += (size_t)n;
		if (m.type == KVX_WIRE_HELLO) {
			if (pending_hello(d, pc, &m.u.hello)) {
				pending_drop(d, pc, true);
				return;
			}
			continue;
		}
		if (pc->peer < 0) {
			/* its HELLO was left unanswered (crossing dials: ours goes on), so no peer
			 * is bound to it and nothing is to be authenticated */
			d->ctr.frames_bad++;
			refuse_log(d, pc->addr,
				   "AUTH on a connection whose HELLO was not answered");
			pending_drop(d, pc, true);
			return;
		}
		if (!pending_auth_ok(d, pc, m.u.auth_mac)) {
			pending_drop(d, pc, true);
			return;
		}
		/* authenticated: a new session supersedes the old one (the peer restarted or
		 * replaces its QPs) once the old one is rolled back; until then the peer is
		 * refused and dials again */
		p = &d->peers[pc->peer];
		if (d->cfg.on_demand && p->dialer && p->initiator &&
		    (p->state == KVXD_PEER_QP_EXCHANGE ||
		     (p->state == KVXD_PEER_READY && p->ready_at > pc->answered))) {
			/* crossing dials, each answered by the other side (ours had not connected
			 * when the peer's HELLO came): ours wins, our name sorts first.  We sent
			 * our AUTH when we entered QP_EXCHANGE, so the peer gives its own dial up
			 * (quietly) when it reaches it, and closes this connection; until then what
			 * comes on it is ignored.  Had ours not been answered yet, no AUTH of ours
			 * is on the way, and ours gives up below.  Ours may even be READY already
			 * (this AUTH came late): a session that became READY after we answered
			 * this connection is that dial of ours, not one the peer restarted from */
			d->ctr.dial_collisions++;
			pending_settle(d, pc); /* what it read is dropped */
			KVX_INFO("peer %s: both dials answered: ours goes on", p->name);
			if (rc) /* it closed already: it authenticated, so nothing is refused */
				pending_drop(d, pc, true);
			return;
		}
		if (d->cfg.on_demand && p->state == KVXD_PEER_IDLE && !p->j.n &&
		    !session_room(d, kvxd_now_ms())) {
			/* a session more than the CQs hold.  Checked only now that the peer has
			 * proved itself: connections that never authenticate take no CQ room and
			 * never make us ask an idle session to close */
			pending_refuse_busy(d, pc, &d->ctr.sessions_refused_busy,
					    "dialled us; no CQ room for another session yet");
			return;
		}
		if (d->cfg.on_demand && p->dialer && peer_in_setup(p)) {
			/* crossing dials: the peer's wins (its name sorts first, or ours had not
			 * been answered); ours gives up without failing anything */
			d->ctr.dial_collisions++;
			p->quiet = true;
		}
		kvxd_peer_reset(d, p, "superseded by a new authenticated session");
		if (p->j.n && journal_rollback(d, p)) {
			/* a planned replacement (a rail retried, QPs replaced) comes here when our
			 * cores are still flushing the old QPs: BYE BUSY, and the dialer tries
			 * again shortly without failing its rooms */
			pending_refuse_busy(d, pc, &d->ctr.conn_refused_busy,
					    "previous session still rolling back; refused for now");
			return;
		}
		p->seq = pc->seq;
		p->last_error[0] = '\0';
		p->deadline_ms = kvxd_now_ms() + d->cfg.handshake_ms;
		rc = accept_acquire(d, p, pc, off);
		if (rc)
			peer_fail(d, p, rc, p->last_error[0] ? p->last_error : "setup");
		return;
	}
	if (off) {
		memmove(pc->s.rx, pc->s.rx + off, pc->s.rx_len - off);
		pc->s.rx_len -= off;
	}
	if (rc) {
		refuse_log(d, pc->addr, "closed before it authenticated");
		pending_drop(d, pc, true);
	}
}
