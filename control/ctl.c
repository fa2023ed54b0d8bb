/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The control core's event loop: epoll over listeners, peers, engines, signals and the
 * polling cores' outboxes; a 20 ms tick for timeouts.  Thread: the control core (main thread),
 * a registered QSBR reader, offline only inside epoll_wait.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <time.h>
#include <unistd.h>

#include "control/kvxd.h"
#include "core/log.h"

#define TICK_MS 20
#define DRAIN_BOUND_MS 3000

static uint64_t
monotonic_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

uint64_t (*kvxd_clock_ms)(void) = monotonic_ms;

uint64_t
kvxd_now_ms(void)
{
	return kvxd_clock_ms();
}

int
kvxd_epoll_add(struct kvxd *d, int fd, struct kvxd_fd *ev, uint32_t events)
{
	struct epoll_event e = {.events = events, .data.ptr = ev};

	return epoll_ctl(d->epfd, EPOLL_CTL_ADD, fd, &e) < 0 ? -errno : 0;
}

void
kvxd_epoll_mod(struct kvxd *d, int fd, struct kvxd_fd *ev, uint32_t events)
{
	struct epoll_event e = {.events = events, .data.ptr = ev};

	epoll_ctl(d->epfd, EPOLL_CTL_MOD, fd, &e);
}

/* ---- rooms --------------------------------------------------------------------------------- */

struct kvxd_room *
kvxd_room_find(struct kvxd *d, uint64_t id, int role)
{
	struct kvx_room_table_node *n;

	rcu_read_lock();
	n = kvx_room_table_lookup(d->by_id, kvxd_room_key(id, role));
	rcu_read_unlock();
	/* the control core frees rooms only through call_rcu after its own quiescent state, so
	 * the pointer stays valid for the rest of this loop iteration */
	return n ? caa_container_of(n, struct kvxd_room, by_id) : NULL;
}

/* May the room's bookkeeping go?  Decode: SUCCESS or RELEASED (never while a source may still
 * write).  Prefill: finished, every WR completed, every ACK target acknowledged. */
bool
kvxd_room_removable(const struct kvxd_room *r)
{
	int st = kvxd_room_state(r);

	if (r->role == KVX_ROOM_DECODE)
		return st == KVX_ROOM_SUCCESS || st == KVX_ROOM_RELEASED;
	return (st == KVX_ROOM_SUCCESS || st == KVX_ROOM_FAILED) && kvxd_room_quiescent(r) &&
	       r->ntgt == 0;
}

bool
kvxd_room_quiescent(const struct kvxd_room *r)
{
	return atomic_load_explicit(&r->wr_posted, memory_order_acquire) ==
	       atomic_load_explicit(&r->wr_done, memory_order_acquire);
}

static void
room_free_rcu(struct rcu_head *h)
{
	struct kvxd_room *r = caa_container_of(h, struct kvxd_room, rcu);

	kvx_rcu_reclaim_begin();
	kvxd_pool_put(r->pool);
	free(r->meta);
	free(r->pages);
	free(r->src_names);
	free(r);
	kvx_rcu_reclaim_end();
}

struct kvxd_room *
kvxd_prefill_room_new(struct kvxd *d, uint64_t id, int engine_id)
{
	struct kvxd_room *r = calloc(1, sizeof(*r));
	int rc;

	if (!r)
		return NULL;
	r->id = id;
	r->role = r->fsm.role = KVX_ROOM_PREFILL;
	r->engine_id = engine_id;
	r->held_by = -1;
	r->core = (int)(id % (uint64_t)d->ncores);
	r->opened_ms = kvxd_now_ms();
	rcu_read_lock();
	rc = kvx_room_table_add(d->by_id, &r->by_id, kvxd_room_key(r->id, r->role));
	rcu_read_unlock();
	if (rc) {
		free(r);
		return NULL;
	}
	return r;
}

void
kvxd_room_charge(struct kvxd *d, struct kvxd_room *r, int peer, bool tombstone)
{
	if (r->held_by >= 0) {
		struct kvxd_peer *old = &d->peers[r->held_by];

		if (r->held_tomb)
			old->tombstones_held--;
		else
			old->rooms_held--;
	}
	r->held_by = peer;
	r->held_tomb = tombstone;
	if (peer >= 0) {
		if (tombstone)
			d->peers[peer].tombstones_held++;
		else
			d->peers[peer].rooms_held++;
	}
}

/* Take a room out of the tables; its core returns it (ROOM_FREE) after every earlier message
 * about it, and it is freed after a grace period. */
void
kvxd_room_remove(struct kvxd *d, struct kvxd_room *r)
{
	struct kvxd_msg m = {.type = KVXD_MSG_ROOM_DROP, .room = r};

	if (r->removing)
		return;
	r->removing = true;
	kvxd_room_charge(d, r, -1, false);
	kvxd_engine_room_left(d, r);
	kvx_room_table_del(d->by_id, &r->by_id);
	if (r->role == KVX_ROOM_DECODE)
		kvx_room_table_del(d->by_token, &r->by_token);
	if (kvx_pcore_send(&d->cores[r->core], &m))
		KVX_ERR("core %d: no memory to queue: room %llu leaks", r->core,
			(unsigned long long)r->id);
}

int
kvxd_send_room_meta(struct kvxd *d, struct kvxd_room *r, int src)
{
	struct kvxd_peer *p = kvxd_peer_find(d, r->src_names[src]);
	struct kvx_wire_msg m = {.type = KVX_WIRE_ROOM_META};
	struct kvx_wire_room_meta *rm = &m.u.room_meta;
	uint8_t *le;
	int rc;

	if (!p || p->state != KVXD_PEER_READY || (r->meta_sent_mask & (1u << src)))
		return -EAGAIN;
	le = malloc(4 * (size_t)r->npages);
	if (!le)
		return -ENOMEM;
	for (uint32_t i = 0; i < r->npages; i++) {
		le[4 * i] = r->pages[i] & 0xff;
		le[4 * i + 1] = (r->pages[i] >> 8) & 0xff;
		le[4 * i + 2] = (r->pages[i] >> 16) & 0xff;
		le[4 * i + 3] = r->pages[i] >> 24;
	}
	*rm = (struct kvx_wire_room_meta){.room = r->id,
					  .gen = r->gen,
					  .token = r->token,
					  .src_idx = (uint16_t)src,
					  .nsrc = r->nsrc,
					  .addr = (uint64_t)(uintptr_t)r->pool->base,
					  .rkey = r->pool->rkey,
					  .page_size = r->pool->page_size,
					  .pool_npages = r->pool->npages,
					  .nbufs = r->pool->nbufs,
					  .npages = r->npages,
					  .pages_le = le};
	/* before it goes out: the source's WRITE_WITH_IMM counts only on this session's QPs */
	__atomic_store_n(&r->meta_epoch[src], p->epoch, __ATOMIC_RELEASE);
	rc = kvxd_peer_send(d, p, &m);
	free(le);
	if (rc == 0)
		r->meta_sent_mask |= 1u << src;
	return rc;
}

static int
meta_for_peer(struct kvx_room_table_node *n, void *arg)
{
	struct kvxd_peer_walk *w = arg;
	struct kvxd_room *r = caa_container_of(n, struct kvxd_room, by_id);

	if (r->role != KVX_ROOM_DECODE || r->removing ||
	    kvx_room_state_terminal(kvxd_room_state(r)))
		return 0;
	for (int i = 0; i < r->nsrc; i++)
		if (strcmp(r->src_names[i], w->p->name) == 0)
			kvxd_send_room_meta(w->d, r, i);
	return 0;
}

/* A peer became ready: send the metadata of the rooms that were waiting for it. */
void
kvxd_send_meta_for_peer(struct kvxd *d, struct kvxd_peer *p)
{
	struct kvxd_peer_walk w = {.d = d, .p = p};

	rcu_read_lock();
	kvx_room_table_for_each(d->by_id, meta_for_peer, &w);
	rcu_read_unlock();
}

struct timeout_walk {
	struct kvxd *d;
	uint64_t now;
};

static int
room_timeouts(struct kvx_room_table_node *n, void *arg)
{
	struct timeout_walk *w = arg;
	struct kvxd_room *r = caa_container_of(n, struct kvxd_room, by_id);
	struct kvxd_msg m = {.type = KVXD_MSG_ROOM_FAIL, .error = -ETIMEDOUT, .room = r};
	int state = kvxd_room_state(r);

	if (r->removing)
		return 0;
	if (r->role == KVX_ROOM_DECODE && r->aborting) {
		kvxd_abort_tick_room(w->d, r, w->now);
		return 0;
	}
	if (r->tombstone && r->ntgt == 0 && w->now >= r->opened_ms + w->d->cfg.waiting_ms) {
		kvxd_room_remove(w->d, r);
		return 0;
	}
	if (kvx_room_state_terminal(state) || w->now < r->opened_ms + w->d->cfg.waiting_ms)
		return 0;
	snprintf(m.reason, sizeof(m.reason), "waiting timeout (%u ms) in %s", w->d->cfg.waiting_ms,
		 kvx_room_state_str(state));
	w->d->ctr.waiting_timeouts++;
	if (r->role == KVX_ROOM_DECODE) {
		kvxd_decode_waiting_timeout(w->d, r, m.reason);
	} else {
		r->opened_ms = UINT64_MAX / 2; /* once */
		kvx_pcore_send(&w->d->cores[r->core], &m);
	}
	return 0;
}

/* ---- outboxes ------------------------------------------------------------------------------ */

static void
on_outbox_msg(struct kvxd *d, struct kvxd_msg *m)
{
	struct kvxd_room *r = m->room;

	switch (m->type) {
	case KVXD_MSG_EVENT: {
		struct kvx_event ev = {.room = m->room_id,
				       .generation = m->gen,
				       .state = m->state,
				       .error = m->error};

		memcpy(ev.reason, m->reason, sizeof(ev.reason));
		ev.reason[sizeof(ev.reason) - 1] = '\0';
		/* the end of a room is told exactly once (a late engine is told when it comes,
		 * kvxd_engine_tell); other states as they happen.  Nobody to tell: an orphan goes
		 * once it is quiescent (see tick). */
		if (kvxd_room_terminal_for_engine(r, m->state))
			kvxd_engine_tell(d, r, &ev);
		else
			kvxd_engine_send_event(d, r->engine_id, &ev);
		break;
	}
	case KVXD_MSG_STATUS_PUSH: {
		struct kvx_wire_room_status st = {.room = m->room_id,
						  .gen = m->gen,
						  .src_idx = m->src_idx,
						  .state = m->state,
						  .error = m->error};

		snprintf(st.reason, sizeof(st.reason), "%s", m->reason);
		if (m->peer >= 0 && m->peer < d->npeers)
			kvxd_peer_push_status(d, &d->peers[m->peer], &st);
		break;
	}
	case KVXD_MSG_QP_QUIESCED: {
		struct kvxd_peer *p = &d->peers[m->qpc->peer];

		/* Every WR on the errored QP has its completion: replace the connection with
		 * fresh QPs on both sides (never reset and reuse a QP). */
		if (p->state == KVXD_PEER_READY && m->gen == p->epoch) {
			struct kvx_wire_msg bye = {.type = KVX_WIRE_BYE,
						   .u.bye_reason = KVXD_BYE_REPLACE};

			d->ctr.qp_replaced++;
			kvxd_peer_send(d, p, &bye); /* tell it its rooms carry on */
			p->replacing = true;
			kvxd_peer_reset(d, p, "QP error: replacing the connection");
		}
		break;
	}
	case KVXD_MSG_QP_RETIRED:
		kvxd_qpc_retired(d, m->qpc);
		break;
	case KVXD_MSG_ROOM_FREE:
		call_rcu(&r->rcu, room_free_rcu);
		break;
	case KVXD_MSG_CHUNK_FREE: {
		struct kvxd_chunk *ch = m->ptr;

		kvxd_pool_put(ch->pool);
		free(ch);
		break;
	}
	case KVXD_MSG_META_FREE:
		free(m->ptr);
		break;
	case KVXD_MSG_DRAINED:
		kvxd_on_drained(d, r);
		break;
	default:
		break;
	}
}

static int
drain_outboxes(struct kvxd *d)
{
	struct kvxd_msg msgs[32];
	int total = 0;

	for (int c = 0; c < d->ncores; c++) {
		int n;

		while ((n = kvx_mbox_get_burst(d->cores[c].outbox, msgs, 32)) > 0) {
			for (int i = 0; i < n; i++)
				on_outbox_msg(d, &msgs[i]);
			total += n;
		}
	}
	return total;
}

struct orphan_walk {
	struct kvxd *d;
};

static int
orphan_sweep(struct kvx_room_table_node *n, void *arg)
{
	struct orphan_walk *w = arg;
	struct kvxd_room *r = caa_container_of(n, struct kvxd_room, by_id);
	bool engine_alive = false;

	if (r->removing)
		return 0;
	for (int i = 0; r->engine_id >= 0 && i < KVXD_MAX_ENGINES; i++)
		if (w->d->engines[i] && w->d->engines[i]->id == r->engine_id)
			engine_alive = true;
	/* a prefill room whose engine went before any ROOM_META came stays for waiting_ms: the
	 * decode endpoint's ROOM_META is answered with the failure (peer.c); one that ended
	 * before any engine came stays as long, so that a late engine is told how it ended */
	if (r->role == KVX_ROOM_PREFILL && r->engine_id < 0 &&
	    ((r->engine_gone && !r->meta_peer &&
	      kvxd_now_ms() < r->gone_ms + w->d->cfg.waiting_ms) ||
	     (!r->engine_gone && !r->engine_told &&
	      kvxd_now_ms() < r->opened_ms + w->d->cfg.waiting_ms)))
		return 0;
	if ((!engine_alive || r->engine_closed) && kvxd_room_removable(r))
		kvxd_room_remove(w->d, r);
	return 0;
}

static void
tick(struct kvxd *d, uint64_t now)
{
	struct timeout_walk tw = {.d = d, .now = now};
	struct orphan_walk ow = {.d = d};

	kvxd_peer_tick(d, now);
	if (now - d->last_room_scan_ms < 100)
		return;
	d->last_room_scan_ms = now;
	rcu_read_lock();
	kvx_room_table_for_each(d->by_id, room_timeouts, &tw);
	kvx_room_table_for_each(d->by_id, orphan_sweep, &ow);
	rcu_read_unlock();
	kvxd_pool_sweep(d);
}

static void
dispatch(struct kvxd *d, struct kvxd_fd *f, uint32_t events)
{
	switch (f->kind) {
	case KVXD_FD_TCP_LISTEN:
		kvxd_peer_accept(d);
		break;
	case KVXD_FD_ENG_LISTEN:
		kvxd_engine_accept(d);
		break;
	case KVXD_FD_PEER:
		kvxd_peer_on_event(d, f->ptr, events);
		break;
	case KVXD_FD_PENDING:
		kvxd_pending_on_event(d, f->ptr, events);
		break;
	case KVXD_FD_ENGINE:
		kvxd_engine_on_event(d, f->ptr, events);
		break;
	case KVXD_FD_OUTBOX:
		break; /* drained every iteration */
	case KVXD_FD_SIGNAL: {
		struct signalfd_siginfo si;

		if (read(d->sig_fd, &si, sizeof(si)) == sizeof(si)) {
			KVX_INFO("signal %u: stopping", si.ssi_signo);
			d->stopping = true;
		}
		break;
	}
	}
}

void
kvxd_loop_once(struct kvxd *d, int timeout_ms)
{
	struct epoll_event ev[64];
	int n;

	kvx_rcu_quiescent();
	if (drain_outboxes(d))
		timeout_ms = 0;
	for (int c = 0; c < d->ncores; c++)
		if (kvx_pcore_flush(&d->cores[c]))
			timeout_ms = timeout_ms > 1 ? 1 : timeout_ms; /* retry soon */
	for (int c = 0; c < d->ncores; c++)
		kvx_mbox_park_prepare(d->cores[c].outbox);
	for (int c = 0; c < d->ncores; c++)
		if (!kvx_mbox_empty(d->cores[c].outbox))
			timeout_ms = 0;
	kvx_rcu_offline();
	n = epoll_wait(d->epfd, ev, 64, timeout_ms);
	kvx_rcu_online();
	for (int c = 0; c < d->ncores; c++)
		kvx_mbox_park_done(d->cores[c].outbox);
	for (int i = 0; i < n; i++)
		dispatch(d, ev[i].data.ptr, ev[i].events);
	drain_outboxes(d);
	tick(d, kvxd_now_ms());
	kvxd_engine_reap(d); /* sessions doomed above: nothing holds them any more */
}

static int
busy_room(struct kvx_room_table_node *n, void *arg)
{
	struct kvxd_room *r = caa_container_of(n, struct kvxd_room, by_id);

	(void)arg;
	return kvxd_room_quiescent(r) ? 0 : 1;
}

static bool
rooms_quiescent(struct kvxd *d)
{
	int busy;

	rcu_read_lock();
	busy = kvx_room_table_for_each(d->by_id, busy_room, NULL);
	rcu_read_unlock();
	return !busy;
}

int
kvxd_run(struct kvxd *d)
{
	uint64_t until;

	while (!d->stopping)
		kvxd_loop_once(d, TICK_MS);

	/* Stop taking work, let in-flight WRs complete (bounded), then fence and retire every
	 * QP through its core, and only then let main() tear the rest down in reverse order. */
	epoll_ctl(d->epfd, EPOLL_CTL_DEL, d->tcp_fd, NULL);
	epoll_ctl(d->epfd, EPOLL_CTL_DEL, d->eng_fd, NULL);
	until = kvxd_now_ms() + DRAIN_BOUND_MS;
	while (!rooms_quiescent(d) && kvxd_now_ms() < until)
		kvxd_loop_once(d, 5);
	if (!rooms_quiescent(d))
		KVX_WARN("stopping with WRs still in flight after %d ms: fencing", DRAIN_BOUND_MS);
	for (int i = 0; i < d->npeers; i++)
		kvxd_peer_reset(d, &d->peers[i], "shutting down");
	until = kvxd_now_ms() + DRAIN_BOUND_MS;
	while (d->live_qpcs > 0 && kvxd_now_ms() < until)
		kvxd_loop_once(d, 5);
	if (d->live_qpcs)
		KVX_WARN("%d QPs not retired in %d ms", d->live_qpcs, DRAIN_BOUND_MS);
	return 0;
}

static int
free_room_walk(struct kvx_room_table_node *n, void *arg)
{
	struct kvxd *d = arg;
	struct kvxd_room *r = caa_container_of(n, struct kvxd_room, by_id);

	if (kvx_room_table_del(d->by_id, &r->by_id) == 0) {
		if (r->role == KVX_ROOM_DECODE)
			kvx_room_table_del(d->by_token, &r->by_token);
		kvxd_engine_room_left(d, r); /* off its engine's list before it is freed */
		while (r->pend_head) {
			struct kvxd_chunk *ch = r->pend_head;

			r->pend_head = ch->next;
			kvxd_pool_put(ch->pool);
			free(ch);
		}
		call_rcu(&r->rcu, room_free_rcu);
	}
	return 0;
}

void
kvxd_shutdown_release(struct kvxd *d)
{
	drain_outboxes(d);
	for (int c = 0; c < d->ncores; c++) {
		struct kvxd_qpc *q = d->cores[c].qpcs, *next;

		d->cores[c].qpcs = NULL;
		for (; q; q = next) {
			next = q->next;
			kvxd_qpc_retired(d, q);
		}
	}
	rcu_read_lock();
	kvx_room_table_for_each(d->by_id, free_room_walk, d);
	rcu_read_unlock();
	kvx_rcu_barrier();
}
