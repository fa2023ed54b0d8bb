/* SPDX-License-Identifier: Apache-2.0 */
#include "verbs/pcore.h"

#include <assert.h>
#include <errno.h>
#include <poll.h>
#include <stdarg.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "core/engine_proto.h"
#include "core/fault.h"
#include "core/log.h"

#define RQ_REPLENISH_BATCH 16
#define PARK_TIMEOUT_MS 100

static uint64_t
now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + ts.tv_nsec;
}

static inline void
stat_add(_Atomic uint64_t *ctr, uint64_t v)
{
	/* single writer: a relaxed load + store, no locked instruction */
	atomic_store_explicit(ctr, atomic_load_explicit(ctr, memory_order_relaxed) + v,
			      memory_order_relaxed);
}

/* ---- outbox -------------------------------------------------------------------------------- */

static void
out_put(struct kvxd_core *c, const struct kvxd_msg *m)
{
	/* The loop reserves room before taking work (see poll_once), so this cannot fail. */
	if (kvx_mbox_put(c->outbox, m))
		stat_add(&c->st.outbox_full, 1); /* unreachable by construction; counted */
}

/* out_put without waking a parked control core: its next wake-up takes it (at most a tick
 * away, or at once when the outbox is half full). */
static void
quiet_put(struct kvxd_core *c, const struct kvxd_msg *m)
{
	if (kvx_mbox_put_quiet(c->outbox, m))
		stat_add(&c->st.outbox_full, 1); /* unreachable by construction; counted */
}

/* The engine of a ring this iteration put into is woken at its end (evq_notify). */
static void
evq_dirty(struct kvxd_core *c, struct kvx_pcore_evq *q)
{
	if (q->dirty)
		return;
	if (c->nevq_dirty == KVXD_BATCH) { /* more sessions than the list holds: wake one now */
		struct kvx_pcore_evq *old = c->evq_dirty[--c->nevq_dirty];

		old->dirty = false;
		if (kvx_shring_notify(&old->ring))
			stat_add(&c->st.engine_wakes, 1);
	}
	q->dirty = true;
	c->evq_dirty[c->nevq_dirty++] = q;
}

/* End of an iteration (before its next quiescent state: the rings stay mapped until then). */
static void
evq_notify(struct kvxd_core *c)
{
	while (c->nevq_dirty) {
		struct kvx_pcore_evq *q = c->evq_dirty[--c->nevq_dirty];

		q->dirty = false;
		if (kvx_shring_notify(&q->ring))
			stat_add(&c->st.engine_wakes, 1);
	}
}

/* A room's end for its engine: decode SUCCESS or RELEASED (its pages are the engine's again),
 * prefill SUCCESS or FAILED (its writes are over). */
static bool
end_for_engine(const struct kvx_pcore_room *r)
{
	int st = r->fsm.state;

	if (r->role == KVX_ROOM_PREFILL)
		return st == KVX_ROOM_SUCCESS || st == KVX_ROOM_FAILED;
	return st == KVX_ROOM_SUCCESS || st == KVX_ROOM_RELEASED;
}

/* A room's event straight into its engine's event ring on this core, when its session has one:
 * every event of the room goes there, in order (one producer), until one does not fit (the
 * engine does not read): from then on the room's events go through the control core
 * (evq_spilled), after what is in the core ring (libkvx reads its core rings first).  While the
 * room has no ring (a prefill room whose engine has not claimed it yet, its ROOM_META having come
 * first; one whose engine left; an engine without core rings) a state on the way goes to the
 * control core as KVXD_TOLD_NOBODY, which hands it only to an engine that has no core ring for
 * the room when it takes it: an engine that claimed the room meanwhile hears the later states
 * through its core ring, and this one never (it would come behind them), as it never hears the
 * states from before its claim when the control core took them first.  So the room's later
 * events still take the core ring once an engine claims it.  The room's end (end_for_engine) is
 * its one tell, won here (told) before it is put: the control core, which still gets every EVENT
 * for its own books, tells nothing more.  Returns how it was told (enum kvxd_told). */
static uint8_t
tell_core(struct kvxd_core *c, struct kvx_pcore_room *r)
{
	struct kvx_eng_event m = {.hdr = {.type = KVX_ENG_EVENT, .len = sizeof(m)},
				  .ev = {.room = r->id,
					 .generation = r->gen,
					 .state = r->fsm.state,
					 .error = r->error}};
	bool end = end_for_engine(r);
	struct kvx_pcore_evq *q;
	bool no = false;
	int rc;

	if (r->evq_spilled)
		return KVXD_TOLD_NO;
	q = atomic_load_explicit(&r->evq, memory_order_acquire);
	if (!q) /* nobody's core ring: the control core tells (an end: kvxd_room_tell) */
		return end ? KVXD_TOLD_NO : KVXD_TOLD_NOBODY;
	if (atomic_load_explicit(&q->broken, memory_order_relaxed))
		return KVXD_TOLD_NO;
	if (end && !atomic_compare_exchange_strong(&r->told, &no, true))
		return KVXD_TOLD_NO; /* told already: the control core counts the duplicate */
	memcpy(m.ev.reason, r->reason, sizeof(m.ev.reason) - 1);
	rc = kvx_shring_put(&q->ring, &m, sizeof(m));
	if (rc == 0) {
		stat_add(&c->st.events_core, 1);
		/* an engine that waits for ends is not woken for a state on the way */
		if (!q->wake_ends || kvx_eng_state_wakes(m.ev.state))
			evq_dirty(c, q);
		return KVXD_TOLD_CORE;
	}
	/* full (the engine does not read), or broken (-EPROTO: the control core ends the
	 * session): this event and the room's later ones go through the control core; an end
	 * goes with its claim */
	if (rc == -EPROTO)
		atomic_store_explicit(&q->broken, true, memory_order_relaxed);
	r->evq_spilled = true;
	stat_add(&c->st.events_core_full, 1);
	return end ? KVXD_TOLD_CLAIM : KVXD_TOLD_SPILL;
}

/* The control core learns every state for its books.  One its engine heard already from the
 * core ring (a state on the way, or SUCCESS) waits for the control core's next wake-up
 * (quiet_put): nobody waits on it there, and the wake-up would be one more thread switch per
 * room.  Anything else wakes it: an event it must send itself, and FAILED or RELEASED, which
 * its abort and failure paths act on at once.  at_us keeps the room's latency honest when the
 * control core takes the EVENT late. */
static void
emit_event(struct kvxd_core *c, struct kvx_pcore_room *r)
{
	struct kvxd_msg m = {.type = KVXD_MSG_EVENT,
			     .room = r,
			     .room_id = r->id,
			     .gen = r->gen,
			     .state = r->fsm.state,
			     .error = r->error};
	int st = r->fsm.state;

	memcpy(m.reason, r->reason, sizeof(m.reason));
	if (c->clock_us && kvx_room_state_terminal(st)) /* the histograms take only ends */
		m.at_us = c->clock_us();
	m.told = tell_core(c, r);
	if (m.told == KVXD_TOLD_CORE && st != KVX_ROOM_FAILED && st != KVX_ROOM_RELEASED)
		quiet_put(c, &m);
	else
		out_put(c, &m);
}

/* A chunk or a meta back to the control core to be freed: nothing waits on it, so it does not
 * wake a parked control core (kvx_mbox_put_quiet); its next wake-up takes it.  The outbox is
 * reserved like out_put's. */
static void
give_back(struct kvxd_core *c, uint32_t type, void *ptr)
{
	struct kvxd_msg m = {.type = type, .ptr = ptr};

	if (kvx_mbox_put_quiet(c->outbox, &m))
		stat_add(&c->st.outbox_full, 1); /* unreachable by construction; counted */
}

/* ---- rooms --------------------------------------------------------------------------------- */

static int
room_set(struct kvxd_core *c, struct kvx_pcore_room *r, enum kvx_room_state to)
{
	int rc = kvx_room_fsm_set(&r->fsm, to, &c->room_ctr);

	if (rc == 0) {
		if (to == KVX_ROOM_SUCCESS)
			stat_add(&c->st.rooms_success, 1);
		else if (to == KVX_ROOM_FAILED)
			stat_add(&c->st.rooms_failed, 1);
		emit_event(c, r);
	}
	return rc;
}

static void
ready_remove(struct kvxd_core *c, struct kvx_pcore_room *r)
{
	struct kvx_pcore_room **pp = &c->ready_head, *prev = NULL;

	if (!r->in_ready)
		return;
	while (*pp && *pp != r) {
		prev = *pp;
		pp = &(*pp)->ready_next;
	}
	if (*pp) {
		*pp = r->ready_next;
		if (c->ready_tail == r)
			c->ready_tail = prev;
	}
	r->ready_next = NULL;
	r->in_ready = false;
}

static void
ready_add(struct kvxd_core *c, struct kvx_pcore_room *r)
{
	if (r->in_ready)
		return;
	r->in_ready = true;
	r->ready_next = NULL;
	if (c->ready_tail)
		c->ready_tail->ready_next = r;
	else
		c->ready_head = r;
	c->ready_tail = r;
}

/* A room's pending chunks leave it at once; they go back to the control core from the dead
 * list (dead_give_back), a bounded batch per iteration. */
static void
drop_pending(struct kvxd_core *c, struct kvx_pcore_room *r)
{
	if (r->pend_head) {
		if (c->dead_tail)
			c->dead_tail->next = r->pend_head;
		else
			c->dead_head = r->pend_head;
		c->dead_tail = r->pend_tail;
		stat_add(&c->st.chunks_deferred, 1);
	}
	r->pend_head = r->pend_tail = NULL;
	r->post_d = r->post_b = r->post_i = 0;
	ready_remove(c, r);
}

/* Take work only while the outbox can take all it may produce, so out_put() never fails.
 * A room's failure is up to KVXD_MAX_TARGETS status pushes (fan-out), its event, its drain
 * and a chunk or meta given back; an iteration fails at most the rooms of its completions
 * (KVXD_BATCH), of its messages (8) and of the ready rooms it takes (KVXD_BATCH, ready_drain:
 * their chunks posted, in parts, or whose post fails), plus one a marker's completion retires. */
#define OUTBOX_RESERVE ((KVXD_MAX_TARGETS + 3) * (3 * KVXD_BATCH + 8 + 1) + 64)
#define DEAD_BATCH 64 /* chunks given back per iteration, at most */

/* Give dropped chunks back while the outbox has room beyond what this iteration reserved.
 * Returns how many went. */
static int
dead_give_back(struct kvxd_core *c, uint32_t reserve)
{
	int n = 0;

	while (c->dead_head && n < DEAD_BATCH && kvx_mbox_free_count(c->outbox) > reserve) {
		struct kvxd_chunk *ch = c->dead_head;

		c->dead_head = ch->next;
		if (!c->dead_head)
			c->dead_tail = NULL;
		give_back(c, KVXD_MSG_CHUNK_FREE, ch);
		n++;
	}
	return n;
}

/* Fail a room (sticky).  A prefill room pushes the failure to its decode endpoint at once. */
static void room_fail(struct kvxd_core *c, struct kvx_pcore_room *r, int error, const char *fmt,
		      ...) __attribute__((format(printf, 4, 5)));

static void
room_fail(struct kvxd_core *c, struct kvx_pcore_room *r, int error, const char *fmt, ...)
{
	va_list ap;

	if (r->fsm.state == KVX_ROOM_FAILED || kvx_room_state_terminal(r->fsm.state))
		return;
	r->error = error;
	va_start(ap, fmt);
	vsnprintf(r->reason, sizeof(r->reason), fmt, ap);
	va_end(ap);
	drop_pending(c, r);
	room_set(c, r, KVX_ROOM_FAILED);
	for (int d = 0; r->role == KVX_ROOM_PREFILL && d < r->nmeta; d++) {
		/* every decode endpoint of the room learns at once (DESIGN.md 5, rule 7) */
		const struct kvxd_meta *mt = r->metas[d];
		struct kvxd_msg m = {.type = KVXD_MSG_STATUS_PUSH,
				     .room = r,
				     .room_id = r->id,
				     .gen = mt->gen,
				     .peer = mt->peer,
				     .src_idx = mt->src_idx,
				     .state = KVX_ROOM_FAILED,
				     .error = error,
				     .dst_rank = mt->dst_rank,
				     .src_rank = r->rank};

		memcpy(m.reason, r->reason, sizeof(m.reason));
		out_put(c, &m);
	}
}

static uint64_t
room_outstanding(const struct kvx_pcore_room *r)
{
	return atomic_load_explicit(&r->wr_posted, memory_order_relaxed) -
	       atomic_load_explicit(&r->wr_done, memory_order_relaxed);
}

/* Prefill: SUCCESS once the last chunk is posted and every WR completed without error. */
static void
prefill_check_done(struct kvxd_core *c, struct kvx_pcore_room *r)
{
	if (r->fsm.state == KVX_ROOM_TRANSFERRING && r->last_posted && !r->pend_head &&
	    room_outstanding(r) == 0)
		room_set(c, r, KVX_ROOM_SUCCESS);
}

static void
drain_remove(struct kvxd_core *c, struct kvx_pcore_room *r)
{
	struct kvx_pcore_room **pp = &c->drain_head;

	if (!r->in_drain)
		return;
	while (*pp && *pp != r)
		pp = &(*pp)->drain_next;
	if (*pp)
		*pp = r->drain_next;
	r->drain_next = NULL;
	r->in_drain = false;
}

/* A QP that carried errored WRs of the room: the room drains only once it is quiescent. */
static void
err_qpc_add(struct kvx_pcore_room *r, struct kvxd_qpc *q)
{
	for (int i = 0; i < r->nerr_qpc; i++)
		if (r->err_qpc[i] == q)
			return;
	/* a room posts on one QP per destination and rail (a replaced connection carries none
	 * of its WRs: the room failed with the old one) */
	assert(r->nerr_qpc < KVXD_MAX_TARGETS * KVX_MAX_RAILS);
	r->err_qpc[r->nerr_qpc++] = q;
}

/* Are the room's errored QPs quiescent?  One that is stays so (an errored QP takes no new
 * WR): it is dropped from the set here, before the control core can retire and free it (a
 * quiescent errored QP is rechecked for every waiting room, drain_recheck, before its
 * QP_QUIESCED goes out), so the set never points at a freed QP while other WRs of a fan-out
 * room are still in flight on another. */
static bool
err_qpcs_quiescent(struct kvx_pcore_room *r)
{
	int n = 0;

	for (int i = 0; i < r->nerr_qpc; i++)
		if (r->err_qpc[i]->sq_used || r->err_qpc[i]->chain_n || !r->err_qpc[i]->err_sent)
			r->err_qpc[n++] = r->err_qpc[i];
	r->nerr_qpc = (uint8_t)n;
	return n == 0;
}

/* Prefill: may this room be acknowledged?  Only when it is FAILED (or SUCCESS), every WR it
 * ever posted has its completion, and every QP that carried its errored WRs has reaped a
 * completion for every WR posted on it (DESIGN.md 5, invariant 1).  Reports it once. */
static void
prefill_check_drained(struct kvxd_core *c, struct kvx_pcore_room *r)
{
	int st = r->fsm.state;
	bool qps_quiet;

	if (r->role != KVX_ROOM_PREFILL || r->drained_sent ||
	    (st != KVX_ROOM_FAILED && st != KVX_ROOM_SUCCESS))
		return;
	/* the errored QPs first, always: a quiescent one leaves the set before it can be freed */
	qps_quiet = err_qpcs_quiescent(r);

	if (room_outstanding(r) == 0 && qps_quiet) {
		struct kvxd_msg m = {.type = KVXD_MSG_DRAINED, .room = r, .room_id = r->id};

		if (c->drain_bulk && kvx_mbox_free_count(c->outbox) <= OUTBOX_RESERVE) {
			/* one recheck may drain every room an errored QP held (up to a send
			 * queue's worth per QP): their DRAINED go only beyond what this iteration
			 * reserved, the rest at the next iterations, none into a full outbox (the
			 * room is on the drain list; its QPs already left its set) */
			c->drain_again = true;
			return;
		}
		drain_remove(c, r);
		r->drained_sent = true;
		r->nerr_qpc = 0; /* the QPs may be retired and freed from here on */
		if (st == KVX_ROOM_SUCCESS) {
			/* nobody waits on a SUCCESS's drain: the room's end went to its engine
			 * already, and the control core takes this at its next wake-up (the
			 * engine's close of the room brings one), where it was one more thread
			 * switch per room.  An abort or failure that reaches the room later
			 * wakes it (drained_nudge) */
			r->drained_quiet = true;
			quiet_put(c, &m);
		} else {
			out_put(c, &m);
		}
	} else if (!r->in_drain) {
		r->in_drain = true;
		r->drain_next = c->drain_head;
		c->drain_head = r;
	}
}

/* The control core acts on a room it told to abort or fail (its ABORT_ACK waits for the drain):
 * a DRAINED that went quietly before is taken now. */
static void
drained_nudge(struct kvxd_core *c, struct kvx_pcore_room *r)
{
	if (!r->drained_quiet)
		return;
	r->drained_quiet = false;
	kvx_mbox_nudge(c->outbox);
}

/* An errored QP became quiescent: the rooms waiting for it may drain now. */
static void
drain_recheck(struct kvxd_core *c)
{
	struct kvx_pcore_room *r = c->drain_head, *next;

	c->drain_again = false;
	c->drain_bulk = true;
	for (; r; r = next) {
		next = r->drain_next;
		prefill_check_drained(c, r);
	}
	c->drain_bulk = false;
}

/* ---- QP contexts --------------------------------------------------------------------------- */

struct kvxd_qpc *
kvx_pcore_qpc_alloc(uint32_t sq_depth, uint32_t rq_depth, uint32_t max_sge)
{
	struct kvxd_qpc *q;

	if (max_sge < 1 || max_sge > KVX_VX_MAX_SGE)
		return NULL;
	q = calloc(1, sizeof(*q));
	if (!q)
		return NULL;
	q->max_sge = max_sge;
	q->recv_tag = KVXD_TAG_RECV;
	q->sq_depth = sq_depth;
	q->rq_depth = rq_depth;
	q->wrs = calloc(sq_depth, sizeof(*q->wrs));
	q->chain = calloc(sq_depth, sizeof(*q->chain));
	q->sges = calloc((size_t)sq_depth * max_sge, sizeof(*q->sges));
	if (!q->wrs || !q->chain || !q->sges) {
		kvx_pcore_qpc_free(q);
		return NULL;
	}
	for (uint32_t i = 0; i < sq_depth; i++) {
		q->wrs[i].kind = KVXD_TAG_SEND;
		q->wrs[i].qpc = q;
		q->wrs[i].next_free = i + 1 < sq_depth ? (int)i + 1 : -1;
	}
	q->free_head = 0;
	return q;
}

void
kvx_pcore_qpc_free(struct kvxd_qpc *q)
{
	if (!q)
		return;
	free(q->wrs);
	free(q->chain);
	free(q->sges);
	free(q);
}

static struct kvxd_wr *
wr_get(struct kvxd_qpc *q)
{
	struct kvxd_wr *w;

	if (q->free_head < 0)
		return NULL;
	w = &q->wrs[q->free_head];
	q->free_head = w->next_free;
	return w;
}

static void
out_append(struct kvxd_qpc *q, struct kvxd_wr *w)
{
	w->next_out = NULL;
	if (q->out_tail)
		q->out_tail->next_out = w;
	else
		q->out_head = w;
	q->out_tail = w;
}

static void
wr_put(struct kvxd_qpc *q, struct kvxd_wr *w)
{
	w->room = NULL;
	w->next_free = q->free_head;
	q->free_head = (int)(w - q->wrs);
}

static void
qpc_check_quiesced(struct kvxd_core *c, struct kvxd_qpc *q)
{
	struct kvxd_msg m = {.qpc = q, .peer = q->peer, .gen = q->epoch};

	if (q->errored && !q->err_sent)
		return; /* its QP_ERRORED first (flush_chains) */
	if (q->errored && !q->sq_used && !q->chain_n && c->drain_head)
		drain_recheck(c);
	if (q->sq_used || q->rq_posted || q->chain_n)
		return;
	if (q->closing) {
		struct kvxd_qpc **pp = &c->qpcs;

		while (*pp && *pp != q)
			pp = &(*pp)->next;
		if (*pp)
			*pp = q->next;
		if (c->qpc_by_peer[q->peer][q->rail] == q)
			c->qpc_by_peer[q->peer][q->rail] = NULL;
		m.type = KVXD_MSG_QP_RETIRED;
		out_put(c, &m);
	} else if (q->errored && !q->quiesce_sent) {
		q->quiesce_sent = true;
		m.type = KVXD_MSG_QP_QUIESCED;
		out_put(c, &m);
	}
}

static void
qpc_mark_errored(struct kvxd_core *c, struct kvxd_qpc *q)
{
	if (q->errored)
		return;
	q->errored = true;
	/* New chunks for this peer wait for the replacement connection. */
	if (c->qpc_by_peer[q->peer][q->rail] == q)
		c->qpc_by_peer[q->peer][q->rail] = NULL;
}

/* ---- posting ------------------------------------------------------------------------------- */

/*
 * One WRITE from chunk index i of buffer b into region g: destination pages consecutive (at
 * most max_pages), the source pages gathered in runs of consecutive pages into at most
 * q->max_sge entries of sg.  A sliced region moves one page's slice per WRITE.  Returns the
 * pages it covers (>= 1); *nsge: the entries used.  Lengths fit 32 bits: a WRITE covers at
 * most KVXD_WR_MAX_BYTES.
 */
static uint32_t
wr_gather(const struct kvxd_qpc *q, const struct kvxd_chunk *ch, const struct kvxd_meta_region *g,
	  uint64_t b, uint32_t i, uint32_t max_pages, struct kvx_vx_sge *sg, uint32_t *nsge)
{
	const struct kvxd_pool *p = ch->pool;
	uint64_t ps = p->page_size;
	uint32_t d = g->pages[ch->dst_offset + i], n = 0, k = 0;

	if (g->len) { /* a slice of one page */
		sg[0] = (struct kvx_vx_sge){
			.addr = (uint64_t)(uintptr_t)(p->base +
						      (b * p->npages + ch->pages[i]) * ps +
						      g->src_off),
			.len = g->len,
			.lkey = p->lkey[q->rail]};
		*nsge = 1;
		return 1;
	}
	while (i + n < ch->npages && n < max_pages) {
		uint64_t s = ch->pages[i + n];

		if (n && g->pages[ch->dst_offset + i + n] != d + n)
			break; /* the destination run ends: the next WRITE starts there */
		if (n && ch->pages[i + n - 1] + 1 == s) {
			sg[k - 1].len += (uint32_t)ps; /* the source run goes on */
		} else {
			if (k == q->max_sge)
				break;
			sg[k++] = (struct kvx_vx_sge){
				.addr = (uint64_t)(uintptr_t)(p->base + (b * p->npages + s) * ps),
				.len = (uint32_t)ps,
				.lkey = p->lkey[q->rail]};
		}
		n++;
	}
	*nsge = k;
	return n;
}

/* Can the room write to m's endpoint now: on every rail a QP of the session the metadata
 * came on, not failing?  If not it waits for that connection, or for the metadata again on a
 * replacement. */
static bool
meta_qps_usable(const struct kvxd_core *c, const struct kvxd_meta *m)
{
	int up = 0;

	if (c->hold[m->peer])
		return false; /* its session is about to be replaced: nothing new goes out */
	for (int k = 0; k < c->nrails; k++) {
		const struct kvxd_qpc *q = c->qpc_by_peer[m->peer][k];

		if (c->rails_down[m->peer] & (1u << k))
			continue; /* a failed rail: the others carry the room */
		if (!q || q->errored || q->closing || q->epoch != m->epoch)
			return false;
		up++;
	}
	return up > 0;
}

/* The QP the room's next WRITE to m's endpoint goes on (meta_qps_usable holds): rail by rail
 * in turn from the core's stripe cursor, the first with send-queue room.  NULL: none now. */
static struct kvxd_qpc *
stripe_qpc(struct kvxd_core *c, const struct kvxd_meta *m)
{
	for (int k = 0; k < c->nrails; k++) {
		uint32_t rail = (c->stripe + (uint32_t)k) % c->nrails;
		struct kvxd_qpc *q = c->qpc_by_peer[m->peer][rail];

		if (c->rails_down[m->peer] & (1u << rail))
			continue;
		if (q->sq_used + (uint64_t)q->chain_n < q->sq_depth) {
			c->stripe = (c->stripe + (uint32_t)k + 1) % c->nrails;
			return q;
		}
	}
	return NULL;
}

/* Rail k's QP to m's endpoint if it can carry what follows the share's WRITEs there (the QP
 * they went on, same session, up), else NULL. */
static struct kvxd_qpc *
imm_rail_qpc(struct kvxd_core *c, const struct kvx_pcore_room *r, const struct kvxd_meta *m,
	     uint32_t k)
{
	struct kvxd_qpc *q = c->qpc_by_peer[m->peer][k];

	if ((c->rails_down[m->peer] & (1u << k)) || !q || q->errored || q->closing ||
	    q->epoch != r->used_epoch[r->post_d])
		return NULL;
	return q;
}

/* Append a zero-length WRITE_WITH_IMM to q's chain (it has room), signalled: the last WR of
 * the part there. */
static void
imm_write(struct kvxd_core *c, struct kvx_pcore_room *r, const struct kvxd_meta *m,
	  struct kvxd_qpc *q, uint32_t imm)
{
	struct kvxd_wr *w = wr_get(q);
	const struct kvxd_meta_region *g = &m->reg[0];

	w->room = r;
	q->chain[q->chain_n++] = (struct kvx_vx_write){
		.wr_id = (uint64_t)(uintptr_t)w,
		.raddr = g->addr + g->dst_off,
		.rkey = g->rkey[q->rail],
		.signaled = true,
		.with_imm = true,
		.imm = imm,
	};
	stat_add(&c->st.rail_wrs[q->rail], 1);
	atomic_store_explicit(&r->wr_posted,
			      atomic_load_explicit(&r->wr_posted, memory_order_relaxed) + 1,
			      memory_order_relaxed);
}

/*
 * End the share of destination post_d, whose last chunk is built: decode counts it whole once
 * it took every immediate of it.  One WRITE_WITH_IMM per rail the share's WRITEs went on, each
 * behind them on that rail's QP (an RC QP places its own WRITEs in order, not another rail's):
 * the part's last WRITE on the rail carries it, or else a zero-length one follows.  Each says
 * how many there are.  No rail waits for another, so the room's end costs no round trip.
 * When the share's WRITEs went over a replaced connection too (imm_mixed), or a rail they went
 * on is down, its immediates wait until every WRITE of the room completed (then they prove
 * nothing about order) and go on any rail.  used, base: the QPs this part's WRs went on and
 * their chains' lengths before it.  Returns whether the share is ended (false: a send queue is
 * full, or the WRITEs are still in flight); *added counts the WRs it appended.
 */
static bool
imm_end(struct kvxd_core *c, struct kvx_pcore_room *r, const struct kvxd_meta *m,
	struct kvxd_qpc *const used[], const int base[], int *added)
{
	uint32_t d = r->post_d, imm;
	struct kvxd_qpc *q;

	if (!r->imm_count) {
		bool wait = (r->imm_mixed & (1u << d)) != 0;

		r->imm_todo = r->rails_used[d];
		for (uint32_t k = 0; k < (uint32_t)c->nrails; k++)
			if ((r->imm_todo & (1u << k)) && !imm_rail_qpc(c, r, m, k))
				wait = true;
		if (wait)
			r->imm_todo = 1; /* one, once the room's WRITEs completed */
		r->imm_count = (uint8_t)__builtin_popcount(r->imm_todo);
		r->imm_waited = wait;
	}
	imm = m->token | (uint32_t)(r->imm_count - 1) << KVXD_IMM_SRC_BITS | m->src_idx;
	for (uint32_t k = 0; k < (uint32_t)c->nrails && !r->imm_waited; k++) {
		if (!(r->imm_todo & (1u << k)))
			continue;
		if (used[k] && used[k]->chain_n > base[k]) {
			struct kvx_vx_write *x = &used[k]->chain[used[k]->chain_n - 1];

			x->with_imm = true;
			x->imm = imm;
		} else if (!(q = imm_rail_qpc(c, r, m, k))) {
			r->imm_waited = true; /* the rail went down since: the rest wait */
			break;
		} else if (q->sq_used + (uint64_t)q->chain_n < q->sq_depth) {
			imm_write(c, r, m, q, imm);
			(*added)++;
		} else {
			continue; /* its send queue is full: at a later iteration */
		}
		r->imm_todo &= (uint8_t) ~(1u << k);
	}
	if (r->imm_waited && room_outstanding(r) == 0)
		/* on any rail, all at once, once nothing of the room is in flight */
		while (r->imm_todo && (q = stripe_qpc(c, m))) {
			imm_write(c, r, m, q, imm);
			(*added)++;
			r->imm_todo &= (uint8_t)(r->imm_todo - 1);
		}
	if (r->imm_todo)
		return false;
	if (r->imm_waited)
		stat_add(&c->st.imm_held, 1);
	else if (r->imm_count > 1)
		stat_add(&c->st.imm_split, 1);
	return true;
}

/*
 * Build as much of one chunk as the send queues have room for into the QPs' chains, from where
 * the room left off (post_b: the buffer, counted from the chunk's first; post_i: the page): a
 * chunk larger than the send queues goes in parts over several iterations, never refused for
 * its size.  Contiguous runs (source and destination pages both consecutive) merge into one
 * WRITE per buffer, split at KVXD_WR_MAX_BYTES, or with several rails at KVXD_STRIPE_BYTES, the
 * WRITEs going round robin over the rails' QPs (stripe_qpc); a sliced region writes each page's
 * slice on its own.  Every count and length is computed in 64 bits.  Only each QP's last WR of
 * the part is signalled (its completion retires the part there).  The last chunk ends the
 * destination's share with its immediates (imm_end).  Returns WRs added (0: nothing could go
 * now); *done: the whole chunk is built.
 */
static int
chunk_build(struct kvxd_core *c, struct kvx_pcore_room *r, const struct kvxd_meta *m,
	    const struct kvxd_chunk *ch, bool *done)
{
	const struct kvxd_meta_region *g = &m->reg[ch->region];
	uint64_t ps = g->page_size;
	uint64_t wr_max = c->nrails > 1 ? KVXD_STRIPE_BYTES : KVXD_WR_MAX_BYTES;
	uint32_t max_run = (uint32_t)(wr_max / ps ? wr_max / ps : 1);
	int base[KVX_MAX_RAILS];
	struct kvxd_qpc *used[KVX_MAX_RAILS] = {0};
	struct kvxd_qpc *last_q = NULL;
	int added = 0;
	bool corrupt = false, refuse;

	*done = false;
	if (kvx_fault_hit(KVX_FAULT_WR_CORRUPT_RKEY))
		corrupt = true;
	refuse = kvx_fault_hit(KVX_FAULT_WR_REFUSED);
	while (r->post_b < ch->nbufs) {
		struct kvxd_qpc *q = stripe_qpc(c, m);
		struct kvxd_wr *w;
		struct kvx_vx_sge *sg;
		uint64_t b = (uint64_t)ch->buf_first + r->post_b;
		uint64_t d = g->pages[ch->dst_offset + r->post_i];
		uint32_t nsge, run;
		struct kvx_vx_write *x;

		if (!q)
			break;
		w = wr_get(q);
		sg = &q->sges[(size_t)(w - q->wrs) * q->max_sge];
		run = wr_gather(q, ch, g, b, r->post_i, max_run, sg, &nsge);
		if (!r->rails_used[r->post_d])
			r->used_epoch[r->post_d] = q->epoch;
		else if (r->used_epoch[r->post_d] != q->epoch)
			r->imm_mixed |= (uint8_t)(1u << r->post_d);
		r->rails_used[r->post_d] |= (uint8_t)(1u << q->rail);
		if (!used[q->rail]) {
			used[q->rail] = q;
			base[q->rail] = q->chain_n;
		}
		w->room = r;
		x = &q->chain[q->chain_n++];
		*x = (struct kvx_vx_write){
			.wr_id = (uint64_t)(uintptr_t)w,
			.sg = sg,
			.nsge = nsge,
			.raddr = g->addr + (b * g->pool_npages + d) * ps + g->dst_off,
			.rkey = corrupt ? g->rkey[q->rail] ^ 0x5a5a00u : g->rkey[q->rail],
		};
		stat_add(&c->st.bytes_posted, g->len ? g->len : run * ps);
		stat_add(&c->st.rail_bytes[q->rail], g->len ? g->len : run * ps);
		stat_add(&c->st.rail_wrs[q->rail], 1);
		stat_add(&c->st.sge_posted, nsge);
		atomic_store_explicit(&r->wr_posted,
				      atomic_load_explicit(&r->wr_posted, memory_order_relaxed) + 1,
				      memory_order_relaxed);
		added++;
		last_q = q;
		r->post_i += run;
		if (r->post_i >= ch->npages) {
			r->post_i = 0;
			r->post_b++;
		}
	}
	for (int k = 0; k < KVX_MAX_RAILS; k++)
		if (used[k] && used[k]->chain_n > base[k])
			used[k]->chain[used[k]->chain_n - 1].signaled = true;
	if (refuse && last_q) /* one entry beyond the QP's: the device refuses that WR */
		last_q->chain[last_q->chain_n - 1].nsge = last_q->max_sge + 1;
	if (r->post_b >= ch->nbufs && (!ch->last || imm_end(c, r, m, used, base, &added))) {
		*done = true;
		r->post_b = r->post_i = 0;
		r->imm_todo = r->imm_count = 0;
		r->imm_waited = false;
	} else if (added) {
		stat_add(&c->st.chunk_parts, 1);
	}
	return added;
}

/* Does the chunk fit the room's metadata: its region, its destination pages, its buffers in
 * both pools, and this source's slice of the region in its own pages? */
static bool
chunk_fits_room(const struct kvxd_meta *m, const struct kvxd_chunk *ch, char *why, size_t len)
{
	const struct kvxd_meta_region *g;
	const struct kvxd_pool *p = ch->pool;

	if (ch->region >= m->nreg) {
		snprintf(why, len, "chunk %u: region %u, the room has %u", ch->index, ch->region,
			 m->nreg);
		return false;
	}
	g = &m->reg[ch->region];
	if (ch->npages == 0 || ch->nbufs == 0) {
		snprintf(why, len, "chunk %u: no pages or no buffers", ch->index);
		return false;
	}
	if ((uint64_t)ch->dst_offset + ch->npages > g->npages) {
		snprintf(why, len, "chunk %u: pages %u+%u beyond region %u's %u destination pages",
			 ch->index, ch->dst_offset, ch->npages, ch->region, g->npages);
		return false;
	}
	if ((uint64_t)ch->buf_first + ch->nbufs > g->nbufs) {
		snprintf(why, len, "chunk %u: buffers %u+%u beyond the destination's %u", ch->index,
			 ch->buf_first, ch->nbufs, g->nbufs);
		return false;
	}
	if (g->len == 0 && p->page_size != g->page_size) {
		snprintf(why, len, "page size mismatch: source %u B, destination %u B",
			 p->page_size, g->page_size);
		return false;
	}
	if (g->len && (uint64_t)g->src_off + g->len > p->page_size) {
		snprintf(why, len, "slice %u+%u beyond the source's %u-byte page", g->src_off,
			 g->len, p->page_size);
		return false;
	}
	return true;
}

/* Post what the ready rooms can post now: each chunk to each destination in turn (fan-out),
 * freed once it went to all of them.  Returns chunks moved. */
static int
ready_drain(struct kvxd_core *c)
{
	struct kvx_pcore_room *r = c->ready_head, *next, *kept = NULL;
	int moved = 0, visited = 0;

	/* at most KVXD_BATCH rooms an iteration, what OUTBOX_RESERVE counts on */
	for (; r && moved < KVXD_BATCH && visited < KVXD_BATCH; r = next) {
		next = r->ready_next;
		visited++;
		while (r->pend_head && moved < KVXD_BATCH) {
			struct kvxd_chunk *ch = r->pend_head;
			bool blocked = false;

			while (r->post_d < r->ndest) {
				const struct kvxd_meta *m = r->metas[r->post_d];
				char why[KVXD_REASON_MAX];
				bool done;
				int n;

				if (!meta_qps_usable(c, m)) {
					blocked = true; /* waits for the connection its metadata
							 * came on, or for the metadata again on a
							 * replacement */
					break;
				}
				if (!chunk_fits_room(m, ch, why, sizeof(why))) {
					room_fail(c, r, -EINVAL, "%s", why);
					prefill_check_drained(c, r);
					return moved;
				}
				n = chunk_build(c, r, m, ch, &done);
				if (n > 0 && r->fsm.state < KVX_ROOM_TRANSFERRING)
					room_set(c, r, KVX_ROOM_TRANSFERRING);
				if (!done) {
					blocked = true; /* send queues full, or the share's
							 * immediates wait for its WRITEs:
							 * continue after completions */
					break;
				}
				r->post_d++;
			}
			if (blocked)
				break;
			r->post_d = 0;
			r->pend_head = ch->next;
			if (!r->pend_head)
				r->pend_tail = NULL;
			if (ch->last)
				r->last_posted = true;
			give_back(c, KVXD_MSG_CHUNK_FREE, ch);
			moved++;
		}
		if (!r->pend_head)
			ready_remove(c, r);
		else
			kept = r;
	}
	/* The rooms visited that still wait go behind the others: rooms waiting for their
	 * connection never hold back the ones after them. */
	if (r && kept) {
		c->ready_tail->ready_next = c->ready_head;
		c->ready_head = r;
		kept->ready_next = NULL;
		c->ready_tail = kept;
	}
	return moved;
}

/*
 * The zero-length signalled WRITE that retires the WRs before it (q->marker: the last WR the QP
 * took, to the same remote address and key).  A refused marker moves the QP to ERR (QP_STUCK),
 * where it is taken and flushed: tried again at every iteration until then.
 */
static int
post_marker(struct kvxd_qpc *q)
{
	struct kvxd_wr *w = wr_get(q); /* the list's refused WRs gave their slots back */
	int posted = 0;

	if (!w)
		return 0;
	w->room = NULL;
	q->marker.wr_id = (uint64_t)(uintptr_t)w;
	q->marker.sg = NULL;
	q->marker.nsge = 0;
	q->marker.with_imm = false;
	q->marker.signaled = true;
	if (kvx_vx->post_write_chain(q->qp, &q->marker, 1, &posted))
		q->stuck = true;
	if (!posted) {
		wr_put(q, w);
		return 0;
	}
	q->sq_used++;
	out_append(q, w);
	q->marker_due = false;
	return 1;
}

static int
flush_chains(struct kvxd_core *c)
{
	int work = 0;

	for (struct kvxd_qpc *q = c->qpcs, *next; q; q = next) {
		int posted = 0, rc;

		next = q->next; /* a closing q may be retired below: never read after that */

		if (q->chain_n) {
			rc = kvx_vx->post_write_chain(q->qp, q->chain, q->chain_n, &posted);
			q->sq_used += posted;
			stat_add(&c->st.wr_posted, posted);
			for (int i = 0; i < posted; i++)
				out_append(q, (struct kvxd_wr *)(uintptr_t)q->chain[i].wr_id);
			if (rc) {
				/* The rest never reached the QP: fail their rooms and uncount them
				 * (each WR undoes only its own contribution). */
				for (int i = posted; i < q->chain_n; i++) {
					struct kvxd_wr *w =
						(struct kvxd_wr *)(uintptr_t)q->chain[i].wr_id;
					struct kvx_pcore_room *r = w->room;

					atomic_store_explicit(
						&r->wr_posted,
						atomic_load_explicit(&r->wr_posted,
								     memory_order_relaxed) -
							1,
						memory_order_relaxed);
					room_fail(c, r, rc, "post_send failed on qp 0x%x: %s",
						  q->qpn, strerror(-rc));
					wr_put(q, w);
					err_qpc_add(r, q);
					prefill_check_drained(c, r); /* waits for chain_n */
				}
				qpc_mark_errored(c, q);
			}
			/* A refused post leaves the QP in RTS, its receives posted: it goes to ERR
			 * (QP_STUCK), where what it holds flushes and it quiesces.  When it took
			 * every WR of the list (a refused doorbell), those never run: their rooms
			 * wait for their flushes. */
			if (rc)
				q->stuck = true;
			/* It took the list in part: the WRs it took may have run already, the last
			 * of them unsignalled, a completion that never comes, flushed or not.  A
			 * signalled marker after them retires them all. */
			if (rc && posted > 0 && posted < q->chain_n &&
			    !q->chain[posted - 1].signaled) {
				q->marker = q->chain[posted - 1];
				q->marker_due = true;
			}
			q->chain_n = 0;
			if (rc)
				drain_recheck(c);
		}
		if (q->marker_due)
			work += post_marker(q);
		if (q->errored && !q->err_sent && kvx_mbox_free_count(c->outbox) > 0) {
			/* before any DRAINED of the rooms it carried, and before its QP_QUIESCED
			 * or QP_RETIRED: the control core has the peer fence its end first */
			struct kvxd_msg m = {.type = KVXD_MSG_QP_ERRORED,
					     .qpc = q,
					     .peer = q->peer,
					     .gen = q->epoch};

			q->err_sent = true;
			out_put(c, &m);
			qpc_check_quiesced(c, q); /* QP_RETIRED, for a closing q: freed any time */
			continue;
		}
		if (q->stuck && !q->stuck_sent && kvx_mbox_free_count(c->outbox) > 0) {
			/* the move to ERR is a syscall: the control core's, at once, not when the
			 * connection's replacement comes round (a full outbox: next iteration) */
			struct kvxd_msg m = {.type = KVXD_MSG_QP_STUCK,
					     .qpc = q,
					     .peer = q->peer,
					     .gen = q->epoch};

			q->stuck_sent = true;
			out_put(c, &m);
		}
		if (q->rq_deficit >= RQ_REPLENISH_BATCH && !q->errored && !q->closing) {
			uint64_t ids[RQ_REPLENISH_BATCH * 4];
			int n = q->rq_deficit < RQ_REPLENISH_BATCH * 4 ? (int)q->rq_deficit
								       : RQ_REPLENISH_BATCH * 4;

			int rposted = 0;

			for (int i = 0; i < n; i++)
				ids[i] = (uint64_t)(uintptr_t)&q->recv_tag;
			kvx_vx->post_recv_burst(q->qp, ids, n, &rposted);
			q->rq_posted += rposted;
			q->rq_deficit -= rposted;
		}
	}
	return work;
}

/* ---- completions --------------------------------------------------------------------------- */

/* One posted WR is done: off the out list, its slot free, its room credited. */
static void
wr_retire(struct kvxd_qpc *q, struct kvxd_wr *w)
{
	struct kvx_pcore_room *r = w->room;

	q->out_head = w->next_out;
	if (!q->out_head)
		q->out_tail = NULL;
	q->sq_used--;
	wr_put(q, w);
	if (!r)
		return; /* a marker */
	atomic_store_explicit(&r->wr_done,
			      atomic_load_explicit(&r->wr_done, memory_order_relaxed) + 1,
			      memory_order_relaxed);
}

/*
 * A send completion retires its WR and, first, every unsignalled WR posted before it on that
 * QP (in order: they completed, successfully, before it).  Each retired WR credits its own
 * room; a room whose WRs all completed may succeed or drain.
 */
static void
on_send_wc(struct kvxd_core *c, const struct kvx_vx_wc *wc)
{
	struct kvxd_wr *w = (struct kvxd_wr *)(uintptr_t)wc->wr_id;
	struct kvxd_qpc *q = w->qpc;
	struct kvx_pcore_room *r = w->room;

	while (q->out_head && q->out_head != w) {
		struct kvxd_wr *done = q->out_head;
		struct kvx_pcore_room *dr = done->room;

		wr_retire(q, done);
		stat_add(&c->st.wr_credited, 1);
		if (dr != r) {
			prefill_check_done(c, dr);
			prefill_check_drained(c, dr);
		}
	}
	assert(q->out_head == w);
	wr_retire(q, w);
	if (!r) {
		/* the marker: every WR before it is retired, the QP is errored already */
		qpc_check_quiesced(c, q);
		return;
	}
	if (wc->status == KVX_VX_WC_SUCCESS) {
		stat_add(&c->st.wc_ok, 1);
		prefill_check_done(c, r);
	} else {
		err_qpc_add(r, q); /* its WRs stay counted until this QP has flushed */
		if (wc->status == KVX_VX_WC_FLUSH_ERR) {
			stat_add(&c->st.wc_flush, 1);
			room_fail(c, r, -ECANCELED,
				  "write flushed: qp 0x%x to peer %d failed earlier", q->qpn,
				  q->peer);
		} else {
			stat_add(&c->st.wc_err, 1);
			room_fail(c, r, -EIO, "RDMA write failed: %s (qp 0x%x)", wc->status_str,
				  q->qpn);
		}
		qpc_mark_errored(c, q);
	}
	/* The room first: its drain check drops q from its errored set while q is still this
	 * core's.  The quiescence check may send QP_RETIRED, after which the control core frees q
	 * at any moment; r is not on the drain list yet when this very completion failed it (the
	 * flush of a retired connection's last WR, the earlier ones landed unsignalled), so the
	 * recheck that comes before QP_RETIRED would not cover it. */
	prefill_check_drained(c, r);
	qpc_check_quiesced(c, q);
}

static void
on_recv_wc(struct kvxd_core *c, const struct kvx_vx_wc *wc)
{
	struct kvxd_qpc *q =
		caa_container_of((uint8_t *)(uintptr_t)wc->wr_id, struct kvxd_qpc, recv_tag);
	struct kvx_room_table_node *n;
	struct kvx_pcore_room *r;
	uint32_t src, bit, want;

	q->rq_posted--;
	if (wc->status != KVX_VX_WC_SUCCESS) {
		stat_add(&c->st.recv_err, 1); /* receives never carry data: flushes, mostly */
		qpc_mark_errored(c, q);
		qpc_check_quiesced(c, q);
		return;
	}
	q->rq_deficit++;
	stat_add(&c->st.recv_imm, 1);
	rcu_read_lock();
	n = kvx_room_table_lookup(c->by_token, wc->imm & ~((1u << KVXD_TOKEN_SHIFT) - 1));
	rcu_read_unlock();
	if (!n) {
		stat_add(&c->st.bad_imm, 1);
		return;
	}
	r = caa_container_of(n, struct kvx_pcore_room, by_token);
	if (r->core != c->idx) {
		/* the token table is every core's: a room of another core (its source writes on
		 * the QP of the room's own core) is never touched here, its state and event ring
		 * being that core's alone */
		stat_add(&c->st.imm_not_owner, 1);
		return;
	}
	src = wc->imm & ((1u << KVXD_IMM_SRC_BITS) - 1);
	want = ((wc->imm >> KVXD_IMM_SRC_BITS) & ((1u << KVXD_IMM_COUNT_BITS) - 1)) + 1;
	bit = 1u << src;
	if (src >= r->nsrc || (r->src_done_mask & bit) || kvx_room_state_terminal(r->fsm.state) ||
	    want > (uint32_t)c->nrails || (r->imm_seen[src] && want != r->imm_want[src])) {
		/* beyond the rails a session has, or not what the source's first said */
		stat_add(&c->st.bad_imm, 1);
		return;
	}
	/* only source src itself delivers its share: the immediate must come on a QP of that
	 * source's peer, in the session its ROOM_META went out on (a token alone proves nothing) */
	if (q->peer != r->src_peer[src] ||
	    q->epoch != __atomic_load_n(&r->meta_epoch[src], __ATOMIC_ACQUIRE)) {
		stat_add(&c->st.imm_not_owner, 1);
		return;
	}
	if (r->fsm.state == KVX_ROOM_BOOTSTRAPPING)
		/* its open, put quietly (kvx_pcore_send_quiet), still waits in the inbox, which
		 * this iteration takes after the CQs: the room waits for its input since it was
		 * opened, and its engine reads that state first, as it would have */
		room_set(c, r, KVX_ROOM_WAITING_FOR_INPUT);
	/* one immediate per rail the source wrote on, each behind its rail's WRITEs: its share
	 * is whole once it took them all */
	r->imm_want[src] = (uint8_t)want;
	if (++r->imm_seen[src] == want)
		r->src_done_mask |= bit;
	if (r->src_done_mask == (1u << r->nsrc) - 1)
		room_set(c, r, KVX_ROOM_SUCCESS);
	else if (r->fsm.state < KVX_ROOM_TRANSFERRING)
		room_set(c, r, KVX_ROOM_TRANSFERRING);
}

/* ---- inbox --------------------------------------------------------------------------------- */

static void
on_msg(struct kvxd_core *c, struct kvxd_msg *m)
{
	struct kvx_pcore_room *r = m->room;

	switch (m->type) {
	case KVXD_MSG_QP_ADD:
		m->qpc->next = c->qpcs;
		c->qpcs = m->qpc;
		break;
	case KVXD_MSG_QP_ACTIVATE: {
		struct kvxd_qpc **slot = &c->qpc_by_peer[m->qpc->peer][m->qpc->rail];

		m->qpc->epoch = m->gen;
		if (!*slot || (*slot)->errored || (*slot)->closing)
			*slot = m->qpc;
		break;
	}
	case KVXD_MSG_QP_REMOVE:
		m->qpc->closing = true;
		if (c->qpc_by_peer[m->qpc->peer][m->qpc->rail] == m->qpc)
			c->qpc_by_peer[m->qpc->peer][m->qpc->rail] = NULL;
		qpc_check_quiesced(c, m->qpc);
		break;
	case KVXD_MSG_ROOM_OPEN:
		if (r->fsm.state == KVX_ROOM_BOOTSTRAPPING)
			room_set(c, r, KVX_ROOM_WAITING_FOR_INPUT);
		break;
	case KVXD_MSG_ROOM_FAIL:
		room_fail(c, r, m->error, "%s", m->reason);
		prefill_check_drained(c, r);
		drained_nudge(c, r);
		break;
	case KVXD_MSG_ROOM_ABORT:
		if (r->role == KVX_ROOM_DECODE) {
			/* the new generation is armed (by the control core) before any ABORT goes
			 * out; the pages stay held until ROOM_RELEASE */
			if (kvx_room_state_terminal(r->fsm.state) &&
			    r->fsm.state != KVX_ROOM_FAILED)
				break;
			r->gen = m->gen;
			room_fail(c, r, m->error, "%s", m->reason);
			room_set(c, r, KVX_ROOM_DRAINING);
		} else {
			/* FAILED first (sticky), before anything else: a later chunk is skipped */
			room_fail(c, r, m->error, "%s", m->reason);
			prefill_check_drained(c, r);
			drained_nudge(c, r);
		}
		break;
	case KVXD_MSG_ROOM_RELEASE:
		r->gen = m->gen;
		room_set(c, r, KVX_ROOM_RELEASED);
		break;
	case KVXD_MSG_ROOM_META: {
		struct kvxd_meta *nm = m->ptr;
		int d = 0;

		/* One ROOM_META per decode endpoint (peer, rank).  An endpoint's metadata binds
		 * the room to one peer session; a newer session of the same generation brings it
		 * again (DESIGN.md 5: a replaced connection never carries an old session's writes
		 * unless decode re-issued the room). */
		while (d < r->nmeta &&
		       (r->metas[d]->peer != nm->peer || r->metas[d]->dst_rank != nm->dst_rank))
			d++;
		if (kvx_room_state_terminal(r->fsm.state) && d == r->nmeta) {
			/* a further endpoint reaches a room that ended: it is told at once, as the
			 * room's endpoints were (nothing was or will be written to it) */
			struct kvxd_msg sm = {.type = KVXD_MSG_STATUS_PUSH,
					      .room = r,
					      .room_id = r->id,
					      .gen = nm->gen,
					      .peer = nm->peer,
					      .src_idx = nm->src_idx,
					      .state = KVX_ROOM_FAILED,
					      .error = r->fsm.state == KVX_ROOM_FAILED ? r->error
										       : -EBUSY,
					      .dst_rank = nm->dst_rank,
					      .src_rank = r->rank};

			snprintf(sm.reason, sizeof(sm.reason), "%s",
				 r->fsm.state == KVX_ROOM_FAILED ? r->reason
								 : "the room is complete");
			out_put(c, &sm);
			give_back(c, KVXD_MSG_META_FREE, nm);
			break;
		}
		if (kvx_room_state_terminal(r->fsm.state) ||
		    (d < r->nmeta &&
		     (nm->gen != r->metas[d]->gen || nm->epoch <= r->metas[d]->epoch)) ||
		    (d == r->nmeta && d == KVXD_MAX_TARGETS)) {
			give_back(c, KVXD_MSG_META_FREE, nm);
			break;
		}
		if (d < r->nmeta) {
			give_back(c, KVXD_MSG_META_FREE, r->metas[d]);
		} else if (r->ndest && d >= r->ndest) {
			/* more endpoints than its engine feeds: refused by the control core
			 * already; never posted to */
			give_back(c, KVXD_MSG_META_FREE, nm);
			room_fail(c, r, -EBUSY, "a decode endpoint beyond the room's %u", r->ndest);
			prefill_check_drained(c, r);
			break;
		} else {
			r->nmeta++;
		}
		r->metas[d] = nm;
		r->gen = r->metas[0]->gen;
		if (r->fsm.state == KVX_ROOM_BOOTSTRAPPING)
			room_set(c, r, KVX_ROOM_WAITING_FOR_INPUT);
		if (r->pend_head && r->ndest && r->nmeta == r->ndest)
			ready_add(c, r);
		break;
	}
	case KVXD_MSG_CHUNK: {
		struct kvxd_chunk *ch = m->ptr;

		if (r->fsm.state == KVX_ROOM_FAILED || kvx_room_state_terminal(r->fsm.state) ||
		    r->last_posted) {
			/* A chunk for a finished room is skipped; it undoes only itself. */
			stat_add(&c->st.chunks_skipped, 1);
			give_back(c, KVXD_MSG_CHUNK_FREE, ch);
			break;
		}
		if (ch->ndest == 0)
			ch->ndest = 1;
		if (ch->ndest > KVXD_MAX_TARGETS || (r->ndest && ch->ndest != r->ndest)) {
			stat_add(&c->st.chunks_skipped, 1);
			room_fail(c, r, -EINVAL, "chunk %u: %u decode endpoints, earlier chunks %u",
				  ch->index, ch->ndest, r->ndest);
			give_back(c, KVXD_MSG_CHUNK_FREE, ch);
			prefill_check_drained(c, r);
			break;
		}
		if (!r->ndest) {
			r->ndest = (uint8_t)ch->ndest;
			if (r->nmeta > r->ndest) {
				stat_add(&c->st.chunks_skipped, 1);
				room_fail(c, r, -EBUSY,
					  "%u decode endpoints sent metadata, the engine feeds %u",
					  r->nmeta, r->ndest);
				give_back(c, KVXD_MSG_CHUNK_FREE, ch);
				prefill_check_drained(c, r);
				break;
			}
		}
		ch->next = NULL;
		if (r->pend_tail)
			r->pend_tail->next = ch;
		else
			r->pend_head = ch;
		r->pend_tail = ch;
		if (r->nmeta == r->ndest)
			ready_add(c, r);
		break;
	}
	case KVXD_MSG_PEER_RAILS:
		if (m->peer < 0 || m->peer >= KVX_MAX_PEERS)
			break;
		c->rails_down[m->peer] = m->rails_down;
		if (m->hold && !c->hold[m->peer])
			c->nhold++;
		else if (!m->hold && c->hold[m->peer])
			c->nhold--;
		c->hold[m->peer] = m->hold;
		c->hold_told[m->peer] = false;
		break;
	case KVXD_MSG_ROOM_DROP:
		drop_pending(c, r);
		drain_remove(c, r);
		m->type = KVXD_MSG_ROOM_FREE; /* only memory to free: quiet */
		quiet_put(c, m);
		break;
	default:
		break;
	}
}

/* ---- the loop ------------------------------------------------------------------------------ */

/* Held peers with nothing in flight on this core any more: tell the control core (once). */
static void
hold_check(struct kvxd_core *c)
{
	int told = 0;

	for (int p = 0; p < KVX_MAX_PEERS; p++) {
		bool busy = false;
		uint32_t epoch = 0;

		if (!c->hold[p] || c->hold_told[p])
			continue;
		for (struct kvxd_qpc *q = c->qpcs; q && !busy; q = q->next)
			if (q->peer == p && !q->closing) {
				busy = q->sq_used || q->chain_n;
				epoch = q->epoch > epoch ? q->epoch : epoch;
			}
		if (!busy) {
			struct kvxd_msg m = {.type = KVXD_MSG_PEER_IDLE,
					     .peer = p,
					     .gen = epoch,
					     .src_idx = (uint16_t)c->idx};

			c->hold_told[p] = true;
			out_put(c, &m);
			if (++told == 8)
				return; /* within the outbox's reserve: the rest next iteration */
		}
	}
}

int
kvx_pcore_poll_once(struct kvxd_core *c)
{
	struct kvx_vx_wc wc[KVXD_BATCH];
	struct kvxd_msg msgs[8];
	int work = 0, n;

	kvx_rcu_quiescent();
	stat_add(&c->st.iterations, 1);
	if (kvx_mbox_free_count(c->outbox) < OUTBOX_RESERVE) {
		stat_add(&c->st.outbox_full, 1);
		return 0;
	}
	if (c->drain_again) /* rooms drained but not told yet: beyond the reserve */
		drain_recheck(c);
	/* KVXD_BATCH completions per iteration over all the rails' CQs (the outbox reserve counts
	 * that many), starting at the next rail each time so that none starves */
	for (int k = 0, budget = KVXD_BATCH; k < c->nrails && budget > 0; k++) {
		n = kvx_vx->cq_poll_burst(c->cq[(c->poll_rail + k) % c->nrails], wc, budget);
		for (int i = 0; i < n; i++) {
			const uint8_t *tag = (const uint8_t *)(uintptr_t)wc[i].wr_id;

			if (*tag == KVXD_TAG_SEND)
				on_send_wc(c, &wc[i]);
			else
				on_recv_wc(c, &wc[i]);
		}
		work += n > 0 ? n : 0;
		budget -= n > 0 ? n : 0;
	}
	c->poll_rail = (c->poll_rail + 1) % c->nrails;
	n = kvx_mbox_get_burst(c->inbox, msgs, 8);
	for (int i = 0; i < n; i++)
		on_msg(c, &msgs[i]);
	work += n;
	if (c->ready_head)
		work += ready_drain(c);
	work += flush_chains(c);
	if (c->nhold)
		hold_check(c);
	if (c->dead_head) /* after this iteration's own messages went out */
		work += dead_give_back(c, OUTBOX_RESERVE);
	if (c->nevq_dirty)
		evq_notify(c);
	return work + (c->drain_again ? 1 : 0); /* not idle: rooms wait to be told */
}

/* An armed CQ stays armed until a completion raises its event, so a CQ is armed again only
 * once its event was taken: with two rails a park after one rail's completion makes one arm
 * call, not two (on rxe each is an ioctl). */
void
kvx_pcore_park(struct kvxd_core *c)
{
	struct pollfd pfd[KVX_MAX_RAILS + 1];
	int nr = c->nrails;
	bool armed = true;

	for (int k = 0; k < nr; k++)
		pfd[k] = (struct pollfd){.fd = kvx_vx->cq_fd(c->cq[k]), .events = POLLIN};
	pfd[nr] = (struct pollfd){.fd = kvx_mbox_fd(c->inbox), .events = POLLIN};
	kvx_mbox_park_prepare(c->inbox);
	for (int k = 0; k < nr; k++) {
		if (!c->cq_armed[k])
			c->cq_armed[k] = kvx_vx->cq_arm(c->cq[k]) == 0;
		armed = armed && c->cq_armed[k];
	}
	if (armed && kvx_mbox_empty(c->inbox) && !c->ready_head) {
		/* one more look: a completion may have landed before the arm */
		if (kvx_pcore_poll_once(c) == 0) {
			kvx_rcu_offline();
			poll(pfd, (nfds_t)nr + 1, PARK_TIMEOUT_MS);
			kvx_rcu_online();
			stat_add(&c->st.parks, 1);
		}
	}
	/* read only what the wait reported: a read of an fd with nothing on it is a wasted
	 * syscall (on rxe in the VM, three per room per node before) */
	for (int k = 0; k < nr; k++)
		if (pfd[k].revents & POLLIN) {
			kvx_vx->cq_ack_events(c->cq[k]);
			c->cq_armed[k] = false;
		}
	kvx_mbox_park_done(c->inbox, pfd[nr].revents & POLLIN);
}

static void *
pcore_main(void *arg)
{
	struct kvxd_core *c = arg;
	char name[16];

	snprintf(name, sizeof(name), "kvx-poll%d", c->idx);
	pthread_setname_np(pthread_self(), name);
	if (c->cpu >= 0) {
		cpu_set_t set;

		CPU_ZERO(&set);
		CPU_SET(c->cpu, &set);
		if (pthread_setaffinity_np(pthread_self(), sizeof(set), &set))
			KVX_WARN("core %d: cannot pin to cpu %d", c->idx, c->cpu);
	}
	rcu_register_thread();
	c->idle_since_ns = now_ns();
	while (!atomic_load_explicit(&c->stop, memory_order_relaxed)) {
		if (kvx_pcore_poll_once(c)) {
			c->idle_since_ns = 0;
			continue;
		}
		if (!c->idle_park_us)
			continue;
		if (!c->idle_since_ns)
			c->idle_since_ns = now_ns();
		else if (now_ns() - c->idle_since_ns >= (uint64_t)c->idle_park_us * 1000) {
			kvx_pcore_park(c);
			c->idle_since_ns = 0;
		}
	}
	rcu_unregister_thread();
	return NULL;
}

int
kvx_pcore_init(struct kvxd_core *c, int idx, int cpu, struct kvx_vx_dev *const *devs, int ndev,
	       const struct kvx_config *cfg, struct kvx_room_table *by_id,
	       struct kvx_room_table *by_token)
{
	int rc;

	if (ndev < 1 || ndev > KVX_MAX_RAILS)
		return -EINVAL;
	memset(c, 0, sizeof(*c));
	c->idx = idx;
	c->cpu = cpu;
	c->by_id = by_id;
	c->by_token = by_token;
	c->idle_park_us = cfg->idle_park_us;
	for (c->nrails = 0; c->nrails < ndev; c->nrails++) {
		rc = kvx_vx->cq_create(devs[c->nrails], (int)cfg->cq_depth, &c->cq[c->nrails]);
		if (rc)
			goto err_destroy_cq;
	}
	rc = -ENOMEM;
	c->inbox = kvx_mbox_create(4096, sizeof(struct kvxd_msg));
	if (!c->inbox)
		goto err_destroy_cq;
	c->outbox = kvx_mbox_create(8192, sizeof(struct kvxd_msg));
	if (!c->outbox)
		goto err_destroy_inbox;
	return 0;

err_destroy_inbox:
	kvx_mbox_destroy(c->inbox);
	c->inbox = NULL;
err_destroy_cq:
	while (c->nrails > 0) {
		c->nrails--;
		kvx_vx->cq_destroy(c->cq[c->nrails]);
		c->cq[c->nrails] = NULL;
	}
	return rc;
}

void
kvx_pcore_fini(struct kvxd_core *c)
{
	kvx_mbox_destroy(c->outbox);
	kvx_mbox_destroy(c->inbox);
	free(c->ovf);
	c->ovf = NULL;
	c->ovf_len = c->ovf_cap = c->ovf_head = 0;
	for (int k = 0; k < KVX_MAX_RAILS; k++) {
		if (c->cq[k])
			kvx_vx->cq_destroy(c->cq[k]);
		c->cq[k] = NULL;
	}
}

int
kvx_pcore_start(struct kvxd_core *c)
{
	int rc = pthread_create(&c->thread, NULL, pcore_main, c);

	if (rc) {
		KVX_ERR("core %d: pthread_create: %s", c->idx, strerror(rc));
		return -rc;
	}
	c->running = true;
	return 0;
}

void
kvx_pcore_stop(struct kvxd_core *c)
{
	if (!c->running)
		return;
	atomic_store(&c->stop, true);
	kvx_mbox_kick(c->inbox);
	pthread_join(c->thread, NULL);
	c->running = false;
}

uint32_t
kvx_pcore_flush(struct kvxd_core *c)
{
	while (c->ovf_len && kvx_mbox_put(c->inbox, &c->ovf[c->ovf_head]) == 0) {
		c->ovf_head = (c->ovf_head + 1) % c->ovf_cap;
		c->ovf_len--;
	}
	return c->ovf_len;
}

int
kvx_pcore_try_send(struct kvxd_core *c, const struct kvxd_msg *m)
{
	if (c->ovf_len && kvx_pcore_flush(c))
		return -ENOBUFS;
	return kvx_mbox_put(c->inbox, m);
}

static int
pcore_send(struct kvxd_core *c, const struct kvxd_msg *m, bool quiet)
{
	if (c->ovf_len)
		kvx_pcore_flush(c);
	if (c->ovf_len == 0 &&
	    (quiet ? kvx_mbox_put_quiet(c->inbox, m) : kvx_mbox_put(c->inbox, m)) == 0)
		return 0;
	if (c->ovf_len == c->ovf_cap) { /* grow, unrolling the ring */
		uint32_t cap = c->ovf_cap ? 2 * c->ovf_cap : 1024;
		struct kvxd_msg *n = malloc(sizeof(*n) * cap);

		if (!n) {
			KVX_ERR("core %d: inbox full and no memory to queue a message", c->idx);
			return -ENOMEM;
		}
		for (uint32_t i = 0; i < c->ovf_len; i++)
			n[i] = c->ovf[(c->ovf_head + i) % c->ovf_cap];
		free(c->ovf);
		c->ovf = n;
		c->ovf_cap = cap;
		c->ovf_head = 0;
	}
	c->ovf[(c->ovf_head + c->ovf_len) % c->ovf_cap] = *m;
	c->ovf_len++;
	c->ovf_queued++;
	if (c->ovf_len > c->ovf_max)
		c->ovf_max = c->ovf_len;
	return 0;
}

int
kvx_pcore_send(struct kvxd_core *c, const struct kvxd_msg *m)
{
	return pcore_send(c, m, false);
}

int
kvx_pcore_send_quiet(struct kvxd_core *c, const struct kvxd_msg *m)
{
	return pcore_send(c, m, true); /* behind what waits, if anything does: in order */
}
