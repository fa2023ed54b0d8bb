/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The control core's rooms (control/rooms.h): construction, lookup, lists, timers, removal.
 * Layer 2 of control/ (control/README.md).  Thread: the control core.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "control/engine_io.h"
#include "control/peer_io.h"
#include "control/rooms.h"
#include "core/log.h"
#include "core/rand.h"

/* ---- lookup and construction --------------------------------------------------------------- */

struct kvxd_room *
kvxd_room_find(struct kvxd *d, uint64_t id, uint32_t rank, int role)
{
	struct kvx_room_table_node *n;

	rcu_read_lock();
	n = kvx_room_table_lookup_sub(d->by_id, id, kvxd_room_sub(rank, role));
	rcu_read_unlock();
	/* the control core frees rooms only through call_rcu after its own quiescent state, so
	 * the pointer stays valid for the rest of this loop iteration */
	return n ? caa_container_of(n, struct kvxd_room, pc.by_id) : NULL;
}

static void
room_free(struct kvxd_room *r)
{
	for (uint32_t i = 0; i < r->nreg; i++) {
		kvxd_pool_put(r->reg[i].pool);
		free(r->reg[i].pages);
	}
	for (int i = 0; i < r->nsrc_pool; i++)
		kvxd_pool_put(r->src_pool[i]);
	for (int i = 0; i < r->pc.nmeta; i++)
		free(r->pc.metas[i]);
	for (int i = 0; i < r->nparked; i++)
		free(r->parked[i]);
	free(r->src_names);
	free(r);
}

int
kvxd_room_hold_pool(struct kvxd_room *r, struct kvxd_pool *p)
{
	for (int i = 0; i < r->nsrc_pool; i++)
		if (r->src_pool[i] == p)
			return 0;
	if (r->nsrc_pool == KVXD_ROOM_SRC_POOLS)
		return -E2BIG;
	r->src_pool[r->nsrc_pool++] = p;
	atomic_fetch_add(&p->refs, 1);
	return 0;
}

static void
room_free_rcu(struct rcu_head *h)
{
	struct kvxd_room *r = caa_container_of(h, struct kvxd_room, rcu);

	kvx_rcu_reclaim_begin();
	room_free(r);
	kvx_rcu_reclaim_end();
}

void
kvxd_room_free_deferred(struct kvxd_room *r)
{
	call_rcu(&r->rcu, room_free_rcu);
}

/* The fields every room starts with; its place in the timer heap is reserved. */
static struct kvxd_room *
room_alloc(struct kvxd *d, uint64_t id, int role, int engine_id)
{
	struct kvxd_room *r = calloc(1, sizeof(*r));

	if (!r)
		return NULL;
	if (kvxd_timer_reserve(&d->room_timers, 1)) {
		free(r);
		return NULL;
	}
	r->pc.id = id;
	r->pc.role = r->pc.fsm.role = (uint8_t)role;
	r->pc.core = (int)(id % (uint64_t)d->ncores);
	r->engine_id = engine_id;
	r->held_by = -1;
	r->opened_ms = kvxd_now_ms();
	r->opened_us = kvxd_now_us();
	CDS_INIT_LIST_HEAD(&r->eng_link);
	return r;
}

static void
room_unalloc(struct kvxd *d, struct kvxd_room *r)
{
	kvxd_timer_unreserve(&d->room_timers, 1);
	room_free(r);
}

static void
peer_link(struct kvxd *d, struct kvxd_room *r, int i, int peer)
{
	if (peer < 0 || peer >= d->npeers || (r->peer_linked & (1u << i)))
		return;
	r->peer_link[i].room = r;
	r->peer_link[i].idx = i;
	r->peer_link[i].peer = peer;
	cds_list_add_tail(&r->peer_link[i].node, &d->peers[peer].rooms);
	r->peer_linked |= 1u << i;
	d->peers[peer].busy_ms = kvxd_now_ms(); /* connect = on_demand: idle_ms starts again */
}

static void
peer_unlink_all(struct kvxd *d, struct kvxd_room *r)
{
	for (int i = 0; i < KVX_MAX_SOURCES; i++)
		if (r->peer_linked & (1u << i)) {
			cds_list_del(&r->peer_link[i].node);
			d->peers[r->peer_link[i].peer].busy_ms = kvxd_now_ms();
		}
	r->peer_linked = 0;
}

struct kvxd_room *
kvxd_prefill_room_new(struct kvxd *d, uint64_t id, uint32_t rank, int engine_id)
{
	struct kvxd_room *r = room_alloc(d, id, KVX_ROOM_PREFILL, engine_id);
	int rc;

	if (!r)
		return NULL;
	r->pc.rank = rank;
	rcu_read_lock();
	rc = kvx_room_table_add_sub(d->by_id, &r->pc.by_id, id,
				    kvxd_room_sub(rank, KVX_ROOM_PREFILL));
	rcu_read_unlock();
	if (rc) {
		room_unalloc(d, r);
		return NULL;
	}
	d->nrooms[KVX_ROOM_PREFILL]++;
	/* its waiting timeout, and how long it stays for a late engine or a late ROOM_META */
	kvxd_room_timer_arm(d, r, r->opened_ms + d->cfg.waiting_ms);
	return r;
}

/* A token base for WRITE_WITH_IMM: random, its low bits free for the source index. */
static uint32_t
token_alloc(void)
{
	uint32_t t;

	do
		t = kvx_rand_u32_nonzero() & ~((1u << KVXD_TOKEN_SHIFT) - 1);
	while (t == 0);
	return t;
}

struct kvxd_room *
kvxd_decode_room_new(struct kvxd *d, uint64_t id, uint32_t rank, int engine_id,
		     const struct kvxd_room_shape *sh, const int *src_peer)
{
	struct kvxd_room *r = room_alloc(d, id, KVX_ROOM_DECODE, engine_id);
	struct kvxd_engine *e = engine_id >= 0 ? kvxd_engine_by_id(d, engine_id) : NULL;

	if (!r)
		return NULL;
	r->src_names = calloc(sh->nsrc, sizeof(*r->src_names));
	if (!r->src_names) {
		room_unalloc(d, r);
		return NULL;
	}
	for (uint32_t i = 0; i < sh->nreg; i++) {
		r->reg[i].pages = malloc(sizeof(uint32_t) * (size_t)sh->reg[i].npages);
		if (!r->reg[i].pages) {
			while (i--)
				free(r->reg[i].pages);
			room_unalloc(d, r);
			return NULL;
		}
		memcpy(r->reg[i].pages, sh->reg[i].pages,
		       sizeof(uint32_t) * (size_t)sh->reg[i].npages);
		r->reg[i].npages = sh->reg[i].npages;
	}
	for (uint32_t i = 0; i < sh->nreg; i++) {
		r->reg[i].pool = sh->reg[i].pool;
		atomic_fetch_add(&sh->reg[i].pool->refs, 1);
	}
	r->nreg = sh->nreg;
	for (uint32_t i = 0; i < sh->nsrc; i++) {
		snprintf(r->src_names[i], sizeof(r->src_names[i]), "%s", sh->names[i]);
		r->src_rank[i] = sh->src_rank[i];
		memcpy(r->slice[i], sh->slice[i], sizeof(r->slice[i]));
		r->pc.src_peer[i] = src_peer[i];
	}
	r->pc.gen = r->open_gen = kvx_rand_u32_nonzero(); /* unguessable; compared for equality */
	r->pc.nsrc = (uint16_t)sh->nsrc;
	r->pc.rank = rank;
	rcu_read_lock();
	kvx_room_table_add_sub(d->by_id, &r->pc.by_id, id, kvxd_room_sub(rank, KVX_ROOM_DECODE));
	do
		r->pc.token = token_alloc();
	while (kvx_room_table_add(d->by_token, &r->pc.by_token, r->pc.token));
	rcu_read_unlock();
	d->nrooms[KVX_ROOM_DECODE]++;
	if (e)
		kvxd_room_attach_engine(e, r); /* until the room leaves: kvxd_room_engine_left */
	for (uint32_t i = 0; i < sh->nsrc; i++)
		peer_link(d, r, (int)i, src_peer[i]);
	kvxd_room_timer_arm(d, r, r->opened_ms + d->cfg.waiting_ms);
	return r;
}

/* ---- ownership and caps -------------------------------------------------------------------- */

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

void
kvxd_room_set_owner(struct kvxd *d, struct kvxd_room *r, int peer, uint32_t rank, uint32_t gen)
{
	int k = kvxd_room_owner(r, peer, rank);

	if (k < 0) {
		if (r->nowners == KVXD_MAX_TARGETS)
			return; /* the callers never get here: they cap at ndest */
		k = r->nowners++;
		r->owner[k].peer = peer;
		r->owner[k].rank = rank;
		peer_link(d, r, k, peer);
	}
	r->owner[k].gen = gen;
}

/* Parked metadata m came from its slot's present peer (not an earlier one, gone: m came in an
 * epoch before the slot was that one's), who is charged for it. */
static bool
parked_current(const struct kvxd *d, const struct kvxd_meta *m)
{
	return (int32_t)(m->epoch - d->peers[m->peer].slot_epoch) >= 0;
}

bool
kvxd_room_meta_parked(const struct kvxd *d, const struct kvxd_room *r, int peer, uint32_t rank)
{
	for (int i = 0; i < r->nparked; i++)
		if (r->parked[i]->peer == peer && r->parked[i]->dst_rank == rank &&
		    parked_current(d, r->parked[i]))
			return true;
	return false;
}

/* Parked metadata m leaves its room: its peer holds one less. */
static void
parked_uncharge(struct kvxd *d, const struct kvxd_meta *m)
{
	struct kvxd_peer *p = &d->peers[m->peer];

	if (parked_current(d, m) && p->parked_held)
		p->parked_held--;
}

bool
kvxd_room_meta_park(struct kvxd *d, struct kvxd_room *r, struct kvxd_meta *m)
{
	for (int i = 0; i < r->nparked; i++)
		if (r->parked[i]->peer == m->peer && r->parked[i]->dst_rank == m->dst_rank) {
			/* the same endpoint's again (charged once), or the slot's earlier peer's
			 * (charged to nobody now): m is charged in its place */
			parked_uncharge(d, r->parked[i]);
			free(r->parked[i]);
			r->parked[i] = m;
			d->peers[m->peer].parked_held++;
			return true;
		}
	if (r->nparked == KVXD_MAX_TARGETS)
		return false;
	r->parked[r->nparked++] = m;
	d->peers[m->peer].parked_held++;
	return true;
}

/* Refuse parked metadata m: its endpoint is told at once (a failure push, like any source's). */
static void
parked_refuse(struct kvxd *d, struct kvxd_room *r, struct kvxd_meta *m, int error, const char *why)
{
	struct kvx_wire_room_status st = {.room = r->pc.id,
					  .gen = m->gen,
					  .src_idx = m->src_idx,
					  .state = KVX_ROOM_FAILED,
					  .error = error,
					  .dst_rank = m->dst_rank,
					  .src_rank = r->pc.rank};

	parked_uncharge(d, m);
	if (m->aborted) { /* its endpoint aborted: it was told (ABORT_ACK) and wants no more */
		free(m);
		return;
	}
	d->ctr.meta_refused_owner++;
	snprintf(st.reason, sizeof(st.reason), "ROOM_META refused by %s: %s", d->cfg.name, why);
	if (d->peers[m->peer].epoch == m->epoch)
		kvxd_peer_push_status(d, &d->peers[m->peer], &st);
	free(m);
}

void
kvxd_room_meta_refuse_parked(struct kvxd *d, struct kvxd_room *r)
{
	int st = kvxd_room_state(r);
	char why[KVXD_REASON_MAX];

	if (!r->nparked)
		return;
	/* FAILED is final: its error and reason may be read (rooms.h, struct kvx_pcore_room) */
	snprintf(why, sizeof(why), "the room ended: %s",
		 st == KVX_ROOM_FAILED ? r->pc.reason : kvx_room_state_str(st));
	for (int i = 0; i < r->nparked; i++)
		parked_refuse(d, r, r->parked[i], st == KVX_ROOM_FAILED ? r->pc.error : -EBUSY,
			      why);
	r->nparked = 0;
}

void
kvxd_room_meta_unpark(struct kvxd *d, struct kvxd_room *r)
{
	if (kvx_room_state_terminal(kvxd_room_state(r))) {
		kvxd_room_meta_refuse_parked(d, r); /* nothing will be written to them */
		return;
	}
	for (int i = 0; i < r->nparked; i++) {
		struct kvxd_meta *m = r->parked[i];
		struct kvxd_msg msg = {.type = KVXD_MSG_ROOM_META, .room = &r->pc, .ptr = m};

		if (r->nowners < r->ndest && d->peers[m->peer].epoch == m->epoch && m->aborted) {
			/* one of the room's destinations aborted while it waited: as an owner's
			 * abort, it fails the room for every endpoint (those taken before it are
			 * told by its core's failure push, those after it refused below) */
			struct kvxd_msg ab = {
				.type = KVXD_MSG_ROOM_ABORT, .room = &r->pc, .error = -ECANCELED};

			snprintf(ab.reason, sizeof(ab.reason),
				 "aborted by %s (rank %u) while its ROOM_META waited",
				 d->peers[m->peer].name, m->dst_rank);
			parked_refuse(d, r, m, 0, NULL);
			for (int k = i + 1; k < r->nparked; k++)
				parked_refuse(d, r, r->parked[k], -ECANCELED, ab.reason);
			r->nparked = 0;
			if (!r->abort_sent) {
				r->abort_sent = true; /* later ABORTs only retarget (abort.c) */
				if (kvx_pcore_send(&d->cores[r->pc.core], &ab))
					KVX_ERR("core %d: no memory to queue: room %llu abort not "
						"applied",
						r->pc.core, (unsigned long long)r->pc.id);
			}
			return;
		}
		if (r->nowners < r->ndest && d->peers[m->peer].epoch == m->epoch) {
			parked_uncharge(d, m); /* an owner's now, as the room's endpoints are */
			kvxd_room_set_owner(d, r, m->peer, m->dst_rank, m->gen);
			if (kvx_pcore_send(&d->cores[r->pc.core], &msg))
				free(m);
			continue;
		}
		{
			char why[64];

			snprintf(why, sizeof(why), "the room feeds %u decode endpoints", r->ndest);
			parked_refuse(d, r, m, -EBUSY, why);
		}
	}
	r->nparked = 0;
}

void
kvxd_room_meta_abort_parked(struct kvxd_room *r, int peer, uint32_t rank, uint32_t gen)
{
	for (int i = 0; i < r->nparked; i++)
		if (r->parked[i]->peer == peer && r->parked[i]->dst_rank == rank &&
		    r->parked[i]->gen == gen)
			r->parked[i]->aborted = true;
}

int
kvxd_room_owner(const struct kvxd_room *r, int peer, uint32_t rank)
{
	for (int k = 0; k < r->nowners; k++)
		if (r->owner[k].peer == peer && r->owner[k].rank == rank)
			return k;
	return -1;
}

void
kvxd_room_attach_engine(struct kvxd_engine *e, struct kvxd_room *r)
{
	r->engine_id = e->id;
	cds_list_add_tail(&r->eng_link, &e->rooms);
	r->on_eng_list = true;
	e->nrooms++;
	/* a room's events go straight from its core into the engine's core ring: a decode
	 * room's from the start (this is before its ROOM_OPEN and its ROOM_META go out: its
	 * first delivery, which may reach its core before a quiet ROOM_OPEN does, comes after
	 * that metadata, whose session epoch on_recv_wc reads with acquire first); a prefill
	 * room's from its engine's first chunk (a state its core put before that, its ROOM_META
	 * having come first, is not told to this engine: see tell_core) */
	if (r->pc.core < e->nevq)
		atomic_store_explicit(&r->pc.evq, e->evq[r->pc.core], memory_order_release);
}

void
kvxd_room_engine_left(struct kvxd *d, struct kvxd_room *r)
{
	struct kvxd_engine *e = r->engine_id >= 0 ? kvxd_engine_by_id(d, r->engine_id) : NULL;

	atomic_store_explicit(&r->pc.evq, NULL, memory_order_release);
	if (r->on_eng_list) {
		cds_list_del(&r->eng_link);
		r->on_eng_list = false;
		if (e && e->nrooms)
			e->nrooms--;
	}
}

void
kvxd_rooms_of_peer(struct kvxd *d, struct kvxd_peer *p,
		   void (*fn)(struct kvxd *d, struct kvxd_room *r, int i, void *arg), void *arg)
{
	struct cds_list_head *pos, *next;

	/* safe against fn removing the room (that unlinks only the room's own links, and a
	 * room is on one peer's list at most once) */
	cds_list_for_each_safe(pos, next, &p->rooms)
	{
		struct kvxd_room_link *l = caa_container_of(pos, struct kvxd_room_link, node);

		fn(d, l->room, l->idx, arg);
	}
}

bool
kvxd_rooms_need_peer(struct kvxd *d, struct kvxd_peer *p)
{
	struct kvxd_room_link *l;

	(void)d;
	cds_list_for_each_entry(l, &p->rooms, node)
	{
		const struct kvxd_room *r = l->room;

		if (r->pc.role == KVX_ROOM_DECODE && !r->removing &&
		    !(r->meta_sent_mask & (1u << l->idx)) && !kvxd_room_aborting(r) &&
		    !kvx_room_state_terminal(kvxd_room_state(r)))
			return true;
	}
	return false;
}

bool
kvxd_rooms_idle_peer(struct kvxd *d, struct kvxd_peer *p)
{
	struct kvxd_room_link *l;

	(void)d;
	cds_list_for_each_entry(l, &p->rooms, node)
	{
		if (!kvxd_room_removable(l->room))
			return false;
	}
	return true;
}

/* ---- removal ------------------------------------------------------------------------------- */

bool
kvxd_room_removable(const struct kvxd_room *r)
{
	int st = kvxd_room_state(r);

	if (r->pc.role == KVX_ROOM_DECODE)
		return st == KVX_ROOM_SUCCESS || st == KVX_ROOM_RELEASED;
	/* a FAILED one also waits for its DRAINED: the QP that carried its errored WRs may still
	 * flush, and an ABORT that came once it was gone would be acknowledged at once (ahead
	 * of that QP's BYE FENCE) */
	return (st == KVX_ROOM_SUCCESS || (st == KVX_ROOM_FAILED && r->drained)) &&
	       kvxd_room_quiescent(r) && r->ntgt == 0;
}

bool
kvxd_room_quiescent(const struct kvxd_room *r)
{
	return atomic_load_explicit(&r->pc.wr_posted, memory_order_acquire) ==
	       atomic_load_explicit(&r->pc.wr_done, memory_order_acquire);
}

void
kvxd_room_remove(struct kvxd *d, struct kvxd_room *r)
{
	struct kvxd_msg m = {.type = KVXD_MSG_ROOM_DROP, .room = &r->pc};

	if (r->removing)
		return;
	r->removing = true;
	kvxd_room_charge(d, r, -1, false);
	kvxd_room_meta_refuse_parked(d, r); /* told, and no longer charged to their peers */
	kvxd_room_engine_left(d, r);
	peer_unlink_all(d, r);
	kvxd_timer_cancel(&d->room_timers, &r->tm);
	kvxd_timer_unreserve(&d->room_timers, 1);
	kvx_room_table_del(d->by_id, &r->pc.by_id);
	d->nrooms[r->pc.role]--;
	if (r->pc.role == KVX_ROOM_DECODE)
		kvx_room_table_del(d->by_token, &r->pc.by_token);
	if (kvx_pcore_send(&d->cores[r->pc.core], &m))
		KVX_ERR("core %d: no memory to queue: room %llu leaks", r->pc.core,
			(unsigned long long)r->pc.id);
}

/* Does a prefill room without an engine stay a while?  One whose engine went before any
 * ROOM_META came stays waiting_ms, so that the decode endpoint's ROOM_META is answered with the
 * failure (control/peer.c); one that ended before any engine came stays as long, so that a
 * late engine is told how it ended.  Returns when it may go (0: now). */
static uint64_t
linger_until(const struct kvxd *d, const struct kvxd_room *r)
{
	if (r->pc.role != KVX_ROOM_PREFILL || r->engine_id >= 0)
		return 0;
	if (r->engine_gone && !r->nowners)
		return r->gone_ms + d->cfg.waiting_ms;
	if (!r->engine_gone && !atomic_load(&r->pc.told))
		return r->opened_ms + d->cfg.waiting_ms;
	return 0;
}

void
kvxd_room_settle(struct kvxd *d, struct kvxd_room *r)
{
	bool engine_alive = r->engine_id >= 0 && kvxd_engine_by_id(d, r->engine_id);

	if (r->removing || (engine_alive && !r->engine_closed) || !kvxd_room_removable(r))
		return;
	if (kvxd_now_ms() < linger_until(d, r))
		return; /* its timer (armed at creation or when its engine went) comes back */
	kvxd_room_remove(d, r);
}

/* ---- timers -------------------------------------------------------------------------------- */

void
kvxd_room_timer_arm(struct kvxd *d, struct kvxd_room *r, uint64_t due_ms)
{
	if (r->removing)
		return;
	kvxd_timer_arm(&d->room_timers, &r->tm, due_ms);
}

struct kvxd_room *
kvxd_rooms_due(struct kvxd *d, uint64_t now)
{
	struct kvxd_timer *t = kvxd_timer_pop_due(&d->room_timers, now);

	return t ? caa_container_of(t, struct kvxd_room, tm) : NULL;
}

uint64_t
kvxd_rooms_next_due(const struct kvxd *d)
{
	return kvxd_timer_next(&d->room_timers);
}

/* ---- engines ------------------------------------------------------------------------------- */

bool
kvxd_room_terminal_for_engine(const struct kvxd_room *r, int state)
{
	if (r->pc.role == KVX_ROOM_PREFILL)
		return state == KVX_ROOM_SUCCESS || state == KVX_ROOM_FAILED;
	return state == KVX_ROOM_SUCCESS || state == KVX_ROOM_RELEASED;
}

void
kvxd_room_ended(struct kvxd *d, struct kvxd_room *r, int state, uint64_t at_us)
{
	int role = r->pc.role;
	uint64_t now = at_us ? at_us : kvxd_now_us();

	if (r->end_seen || !kvxd_room_terminal_for_engine(r, state))
		return;
	r->end_seen = true;
	kvx_hist_observe(
		&d->hist.room_latency[role][state == KVX_ROOM_SUCCESS ? KVXD_OUTCOME_SUCCESS
								      : KVXD_OUTCOME_FAILED],
		&kvx_hist_us, now > r->opened_us ? now - r->opened_us : 0);
	if (state != KVX_ROOM_SUCCESS)
		return;
	if (role == KVX_ROOM_DECODE && r->nreg) {
		uint64_t bytes = 0;

		for (uint32_t i = 0; i < r->nreg; i++)
			bytes += (uint64_t)r->reg[i].npages * r->reg[i].pool->page_size *
				 r->reg[i].pool->nbufs;
		kvx_hist_observe(&d->hist.room_bytes[role], &kvx_hist_bytes, bytes);
	} else if (role == KVX_ROOM_PREFILL)
		kvx_hist_observe(&d->hist.room_bytes[role], &kvx_hist_bytes, r->bytes);
}

bool
kvxd_room_tell(struct kvxd *d, struct kvxd_room *r, const struct kvx_event *ev)
{
	bool no = false;

	/* the room's one tell: this call or its core (the room's end into a core ring) */
	if (!atomic_compare_exchange_strong(&r->pc.told, &no, true)) {
		d->ctr.events_duplicate++;
		return false;
	}
	if (r->engine_id < 0 || kvxd_engine_send_event(d, r->engine_id, ev)) {
		atomic_store(&r->pc.told, false); /* a later engine is told (the claim goes back) */
		return false;
	}
	return true;
}

/* ---- peers --------------------------------------------------------------------------------- */

int
kvxd_send_room_meta(struct kvxd *d, struct kvxd_room *r, int src)
{
	struct kvxd_peer *p = &d->peers[r->pc.src_peer[src]];
	struct kvx_wire_msg m = {.type = KVX_WIRE_ROOM_META};
	struct kvx_wire_room_meta *rm = &m.u.room_meta;
	uint64_t total = 0;
	uint8_t *le, *at;
	int rc;

	if (p->state != KVXD_PEER_READY || (r->meta_sent_mask & (1u << src))) {
		p->want = true; /* connect = on_demand: this room needs a session */
		return -EAGAIN;
	}
	for (uint32_t g = 0; g < r->nreg; g++)
		total += r->reg[g].npages;
	le = malloc(4 * (size_t)total);
	if (!le)
		return -ENOMEM;
	*rm = (struct kvx_wire_room_meta){.room = r->pc.id,
					  .gen = r->open_gen,
					  .token = r->pc.token,
					  .src_idx = (uint16_t)src,
					  .nsrc = r->pc.nsrc,
					  .dst_rank = r->pc.rank,
					  .src_rank = r->src_rank[src],
					  .nrails = (uint8_t)d->nrails,
					  .nreg = (uint8_t)r->nreg};
	at = le;
	for (uint32_t g = 0; g < r->nreg; g++) {
		const struct kvxd_region *x = &r->reg[g];
		const struct kvx_slice *sl = &r->slice[src][g];

		rm->reg[g] = (struct kvx_wire_region){.addr = (uint64_t)(uintptr_t)x->pool->base,
						      .page_size = x->pool->page_size,
						      .pool_npages = x->pool->npages,
						      .nbufs = x->pool->nbufs,
						      .src_off = sl->src_offset,
						      .dst_off = sl->dst_offset,
						      .len = sl->length,
						      .npages = x->npages,
						      .pages_le = at};
		memcpy(rm->reg[g].rkey, x->pool->rkey, sizeof(rm->reg[g].rkey));
		for (uint32_t i = 0; i < x->npages; i++, at += 4) {
			at[0] = x->pages[i] & 0xff;
			at[1] = (x->pages[i] >> 8) & 0xff;
			at[2] = (x->pages[i] >> 16) & 0xff;
			at[3] = x->pages[i] >> 24;
		}
	}
	/* before it goes out: the source's WRITE_WITH_IMM counts only on this session's QPs */
	__atomic_store_n(&r->pc.meta_epoch[src], p->epoch, __ATOMIC_RELEASE);
	rc = kvxd_peer_send(d, p, &m);
	free(le);
	if (rc == 0)
		r->meta_sent_mask |= 1u << src;
	return rc;
}

/* ---- shutdown ------------------------------------------------------------------------------ */

static int
busy_room(struct kvx_room_table_node *n, void *arg)
{
	struct kvxd_room *r = caa_container_of(n, struct kvxd_room, pc.by_id);

	(void)arg;
	return kvxd_room_quiescent(r) ? 0 : 1;
}

bool
kvxd_rooms_quiescent(struct kvxd *d)
{
	int busy;

	rcu_read_lock();
	busy = kvx_room_table_for_each(d->by_id, busy_room, NULL);
	rcu_read_unlock();
	return !busy;
}

static int
free_room_walk(struct kvx_room_table_node *n, void *arg)
{
	struct kvxd *d = arg;
	struct kvxd_room *r = caa_container_of(n, struct kvxd_room, pc.by_id);

	if (kvx_room_table_del(d->by_id, &r->pc.by_id) == 0) {
		if (r->pc.role == KVX_ROOM_DECODE)
			kvx_room_table_del(d->by_token, &r->pc.by_token);
		kvxd_room_engine_left(d, r); /* off its engine's list before it is freed */
		peer_unlink_all(d, r);
		kvxd_timer_cancel(&d->room_timers, &r->tm);
		while (r->pc.pend_head) {
			struct kvxd_chunk *ch = r->pc.pend_head;

			r->pc.pend_head = ch->next;
			kvxd_chunk_free(d, ch);
		}
		call_rcu(&r->rcu, room_free_rcu);
	}
	return 0;
}

void
kvxd_rooms_free_all(struct kvxd *d)
{
	rcu_read_lock();
	kvx_room_table_for_each(d->by_id, free_room_walk, d);
	rcu_read_unlock();
	kvxd_timer_heap_fini(&d->room_timers);
}

static void
meta_for_peer(struct kvxd *d, struct kvxd_room *r, int i, void *arg)
{
	(void)arg;
	if (r->pc.role == KVX_ROOM_DECODE && !r->removing && !kvxd_room_aborting(r) &&
	    !kvx_room_state_terminal(kvxd_room_state(r)))
		kvxd_send_room_meta(d, r, i);
}

void
kvxd_rooms_send_meta(struct kvxd *d, struct kvxd_peer *p)
{
	kvxd_rooms_of_peer(d, p, meta_for_peer, NULL);
}
