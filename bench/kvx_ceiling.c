/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kvx-ceiling: the software ceiling of the polling cores, on any machine (no RDMA, no VM).
 *
 * One prefill polling core and one decode polling core (struct kvxd_core, stepped with
 * kvx_pcore_poll_once) are connected by one fake RC QP pair on the fake verbs backend
 * (tests/unit/fake_verbs.c: it executes every RDMA WRITE synchronously, a memcpy inside the
 * prefill core's post call, and it is not thread-safe, so everything runs on this one thread,
 * like tests/unit/pcore_harness.h).  This program plays the control core: it opens rooms with
 * the messages kvxd's control core sends (decode: a room in the by_id and by_token tables and
 * ROOM_OPEN; prefill: a room in by_id, ROOM_META, CHUNK ...), consumes both outboxes (EVENT,
 * CHUNK_FREE, DRAINED, ROOM_FREE ...), and removes a room like kvxd_room_remove (out of the
 * tables, ROOM_DROP, reused after its ROOM_FREE and a grace period).  It keeps --inflight rooms
 * going; each slot owns its rooms, its ROOM_META and its chunks, preallocated: nothing is
 * allocated per room.
 *
 * Shapes (pages per room x buffers, like scripts/bench.sh's kvx-bench shapes): 1page (1 x 1),
 * 64k (16 x 4, contiguous: one WRITE per buffer), 64k-scatter (16 x 4, destination pages
 * permuted: one WRITE per page and buffer), 64k-gather (16 x 4, source pages permuted: one WRITE
 * per buffer gathering 16 scatter-gather entries).  Pages are --page-size bytes
 * (default 64): the fake device copies the data inside the prefill core's post call, and small
 * pages keep the figure about the software path.
 *
 * Measurement: CLOCK_MONOTONIC is read before and after every kvx_pcore_poll_once call.  A
 * core's time is the sum over its calls that did work (poll_once > 0); calls that found nothing
 * (idle polls) are counted and reported apart.  rooms/s of a core = the rooms that core took to
 * SUCCESS (its own st.rooms_success) / its time; WRs/s = its st.wr_posted / its time.  The
 * prefill core's time includes the fake device's post_write_chain (which executes the writes);
 * it is also read around each such call (unless --no-device-split) and reported apart, so
 * "excl_device" is the kvx software alone (it then leaves out a real provider's WQE building
 * too).  The driver's time is the wall time outside both cores' calls, less the time spent
 * filling and verifying pages (reported apart as check ns/room).
 *
 * Correctness: every room must reach SUCCESS on both sides, every chunk, meta and room must come
 * back exactly once, no core may count an error, and the WR and byte counts must be the ones
 * the shape implies.  Every --check-every'th room (default 1: all) has its source pages filled
 * with a pattern of (room, page, buffer, word) and its destination pages compared on decode's
 * SUCCESS.  Exit 0 if all held, 1 otherwise, 2 on a usage error.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#define BENCH_PROG "kvx-ceiling"
#include "opt.h"

#include "core/fault.h"
#include "verbs/pcore.h"

#include "fake_verbs.h"

#define NSEC 1000000000ull
#define INFLIGHT_MAX 4096
#define PAGES_MAX 1024
#define BUFS_MAX 16
#define PAGE_SIZE_MAX (1u << 20)
#define NPERM 64       /* scatter permutations, used in turn */
#define RQ_DEPTH 1024  /* the decode QP's receives (the fake holds at most 1024) */
#define STUCK_STEPS 64 /* steps without any work while rooms are in flight */
#define LIMBO_BATCH 64 /* slots waiting for a grace period before one synchronize_rcu */
#define PEER 0	       /* the prefill node as decode sees it, and decode as prefill sees it */
#define EPOCH 1	       /* the session of the QP pair */
#define ROOM_GEN 7     /* decode's generation of every room */
#define DEFAULT_SECONDS 2.0

enum slot_flag {
	DC_SUCCESS = 1u << 0,
	PF_SUCCESS = 1u << 1,
	PF_DRAINED = 1u << 2,
	DC_FREED = 1u << 3,
	PF_FREED = 1u << 4,
};

struct shape {
	const char *name;
	uint32_t pages, bufs;
	enum { SCATTER_NONE, SCATTER_DST, SCATTER_SRC } scatter;
};

/* 64k-scatter permutes the destination pages (one WRITE per page and buffer: the WR-rate
 * shape); 64k-gather the source pages (the destination stays consecutive: one WRITE per buffer
 * gathering 16 entries). */
static const struct shape shapes[] = {
	{"1page", 1, 1, SCATTER_NONE},
	{"64k", 16, 4, SCATTER_NONE},
	{"64k-scatter", 16, 4, SCATTER_DST},
	{"64k-gather", 16, 4, SCATTER_SRC},
};
#define NSHAPES (sizeof(shapes) / sizeof(shapes[0]))

struct opts {
	bool shape_on[NSHAPES];
	uint32_t page_size, pages, bufs, chunks, inflight, sq_depth, check_every;
	bool pages_set, bufs_set;
	uint64_t rooms; /* 0: run for seconds */
	double seconds;
	uint64_t seed;
	bool json, device_split;
};

/* One room slot: its decode and prefill rooms (the control core embeds them in its own rooms
 * the same way), its ROOM_META and its chunks; pages [idx * P, (idx + 1) * P) of both pools. */
struct slot {
	struct kvx_pcore_room dr, pr;
	struct kvxd_meta *meta;
	uint32_t idx, flags, chunks_out;
	uint64_t seq; /* the room's number in the run: its pattern, its permutation */
	bool check;
	struct slot *next; /* free or limbo list */
};

struct side {
	struct kvxd_core core;
	struct kvxd_pool pool;
	uint8_t *mem;
	struct kvxd_qpc *qpc;
	uint64_t busy_ns, idle_ns, busy_calls, idle_calls, device_ns, device_calls;
};

struct run {
	const struct opts *o;
	const struct shape *sh;
	uint32_t pages, bufs, chunks, chunk_pages, inflight;
	struct kvx_vx_dev *dev;
	struct kvx_room_table *by_id, *by_token;
	struct side pf, dc;
	struct slot *slots;
	uint8_t *chunk_mem;
	size_t chunk_stride;
	uint32_t *perm; /* NPERM permutations of pages */
	struct slot *free_head, *limbo_head;
	uint32_t limbo_n, inflight_now;
	uint64_t started, done, checked, next_token, next_id, grace_periods;
	uint64_t wall_ns, check_ns;
	uint64_t cpu_ns, nivcsw; /* this thread's CPU time and involuntary switches in the run */
	bool failed;
	char why[256];
};

/* The side whose poll_once runs now: the fake device's time is charged to it. */
static struct side *cur_side;
static struct kvx_vx_ops timed_ops;

static inline uint64_t
now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * NSEC + (uint64_t)ts.tv_nsec;
}

/* the clock kvxd gives its cores (kvxd_now_us: CLOCK_MONOTONIC in µs) */
static uint64_t
now_us(void)
{
	return now_ns() / 1000;
}

static int
timed_post_write_chain(struct kvx_vx_qp *qp, const struct kvx_vx_write *w, int n, int *posted)
{
	uint64_t t0 = now_ns();
	int rc = fake_vx_ops.post_write_chain(qp, w, n, posted);

	cur_side->device_ns += now_ns() - t0;
	cur_side->device_calls++;
	return rc;
}

static void fail(struct run *r, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void
fail(struct run *r, const char *fmt, ...)
{
	va_list ap;

	if (r->failed)
		return;
	r->failed = true;
	va_start(ap, fmt);
	vsnprintf(r->why, sizeof(r->why), fmt, ap);
	va_end(ap);
	for (char *c = r->why; *c; c++) /* it goes into a JSON string as it is */
		if (*c == '"' || *c == '\\' || (unsigned char)*c < 0x20)
			*c = '\'';
}

static uint64_t
xorshift(uint64_t *s)
{
	uint64_t x = *s;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	*s = x;
	return x;
}

/* The word at (room seq, page index in the room, buffer, word index). */
static inline uint64_t
pattern(uint64_t seq, uint32_t page, uint32_t buf, uint32_t word)
{
	uint64_t x = seq * 0x9e3779b97f4a7c15ull ^
		     ((uint64_t)page << 40 | (uint64_t)buf << 32 | (uint64_t)word);

	x ^= x >> 30;
	x *= 0xbf58476d1ce4e5b9ull;
	x ^= x >> 27;
	x *= 0x94d049bb133111ebull;
	return x ^ (x >> 31);
}

/* ---- pools and the QP pair (like tests/unit/pcore_harness.h) ------------------------------- */

static int
pool_init(struct run *r, struct side *s)
{
	size_t npages = (size_t)r->inflight * r->pages, len = npages * r->bufs * r->o->page_size;
	struct kvx_vx_mr *mr;
	int rc;

	s->mem = aligned_alloc(64, len);
	if (!s->mem)
		return -ENOMEM;
	memset(s->mem, 0, len);
	rc = kvx_vx->mr_reg(r->dev, s->mem, len, &mr);
	if (rc) {
		free(s->mem);
		s->mem = NULL;
		return rc;
	}
	s->pool = (struct kvxd_pool){.base = s->mem,
				     .len = len,
				     .page_size = r->o->page_size,
				     .npages = (uint32_t)npages,
				     .nbufs = r->bufs,
				     .lkey = {kvx_vx->mr_lkey(mr)},
				     .rkey = {kvx_vx->mr_rkey(mr)},
				     .mr = {mr}};
	return 0;
}

static int
connect_pair(struct run *r)
{
	struct kvx_vx_qp_attr a = {.port = 1};
	struct kvxd_qpc *pf = kvx_pcore_qpc_alloc(r->o->sq_depth, RQ_DEPTH, KVX_VX_MAX_SGE);
	struct kvxd_qpc *dc = kvx_pcore_qpc_alloc(r->o->sq_depth, RQ_DEPTH, KVX_VX_MAX_SGE);
	static uint64_t ids[RQ_DEPTH];
	int posted, rc;

	r->pf.qpc = pf;
	r->dc.qpc = dc;
	if (!pf || !dc)
		return -ENOMEM;
	rc = kvx_vx->qp_create(r->dev, r->pf.core.cq[0], r->o->sq_depth, RQ_DEPTH, &pf->qp);
	if (rc)
		return rc;
	rc = kvx_vx->qp_create(r->dev, r->dc.core.cq[0], r->o->sq_depth, RQ_DEPTH, &dc->qp);
	if (rc)
		return rc;
	pf->qpn = kvx_vx->qp_num(pf->qp);
	dc->qpn = kvx_vx->qp_num(dc->qp);
	a.remote_qpn = dc->qpn;
	if ((rc = kvx_vx->qp_to_init(pf->qp, &a)) || (rc = kvx_vx->qp_to_rtr(pf->qp, &a)) ||
	    (rc = kvx_vx->qp_to_rts(pf->qp, &a)))
		return rc;
	a.remote_qpn = pf->qpn;
	if ((rc = kvx_vx->qp_to_init(dc->qp, &a)) || (rc = kvx_vx->qp_to_rtr(dc->qp, &a)) ||
	    (rc = kvx_vx->qp_to_rts(dc->qp, &a)))
		return rc;
	for (int i = 0; i < RQ_DEPTH; i++)
		ids[i] = (uint64_t)(uintptr_t)&dc->recv_tag;
	rc = kvx_vx->post_recv_burst(dc->qp, ids, RQ_DEPTH, &posted);
	if (rc)
		return rc;
	dc->rq_posted = (uint32_t)posted;
	for (int k = 0; k < 2; k++) {
		struct kvxd_core *core = k ? &r->dc.core : &r->pf.core;
		struct kvxd_qpc *q = k ? dc : pf;
		struct kvxd_msg add = {.type = KVXD_MSG_QP_ADD, .qpc = q};
		struct kvxd_msg act = {.type = KVXD_MSG_QP_ACTIVATE, .qpc = q, .gen = EPOCH};

		q->peer = PEER;
		q->epoch = EPOCH; /* as the control core sets it before QP_ADD */
		if ((rc = kvx_pcore_send(core, &add)) || (rc = kvx_pcore_send(core, &act)))
			return rc;
	}
	return 0;
}

/* ---- rooms --------------------------------------------------------------------------------- */

static inline struct kvxd_chunk *
chunk_at(const struct run *r, uint32_t slot, uint32_t k)
{
	return (struct kvxd_chunk *)(r->chunk_mem +
				     ((size_t)slot * r->chunks + k) * r->chunk_stride);
}

static inline struct slot *
slot_of_chunk(struct run *r, const struct kvxd_chunk *ch)
{
	size_t i = (size_t)((const uint8_t *)ch - r->chunk_mem) / r->chunk_stride;

	return &r->slots[i / r->chunks];
}

/* The source and destination pages of page i of the room in slot s. */
static inline uint32_t
src_page(const struct run *r, const struct slot *s, uint32_t i)
{
	const uint32_t *perm = r->perm + (size_t)(s->seq % NPERM) * r->pages;

	return s->idx * r->pages + (r->sh->scatter == SCATTER_SRC ? perm[i] : i);
}

static inline uint32_t
dst_page(const struct run *r, const struct slot *s, uint32_t i)
{
	const uint32_t *perm = r->perm + (size_t)(s->seq % NPERM) * r->pages;

	return s->idx * r->pages + (r->sh->scatter == SCATTER_DST ? perm[i] : i);
}

static uint8_t *
page_addr(const struct run *r, const struct side *sd, uint32_t buf, uint32_t page)
{
	return sd->mem + ((size_t)buf * sd->pool.npages + page) * r->o->page_size;
}

static void
fill_source(struct run *r, struct slot *s)
{
	uint32_t words = r->o->page_size / 8;

	for (uint32_t b = 0; b < r->bufs; b++)
		for (uint32_t i = 0; i < r->pages; i++) {
			uint64_t *p =
				(uint64_t *)(void *)page_addr(r, &r->pf, b, src_page(r, s, i));

			for (uint32_t w = 0; w < words; w++)
				p[w] = pattern(s->seq, i, b, w);
		}
}

static bool
verify_dest(struct run *r, struct slot *s)
{
	uint32_t words = r->o->page_size / 8;

	for (uint32_t b = 0; b < r->bufs; b++)
		for (uint32_t i = 0; i < r->pages; i++) {
			const uint64_t *p = (const uint64_t *)(const void *)page_addr(
				r, &r->dc, b, dst_page(r, s, i));

			for (uint32_t w = 0; w < words; w++)
				if (p[w] != pattern(s->seq, i, b, w)) {
					fail(r,
					     "room %" PRIu64 ": destination page %u buffer %u word "
					     "%u differs from its source",
					     s->dr.id, i, b, w);
					return false;
				}
		}
	return true;
}

static void
send_or_fail(struct run *r, struct kvxd_core *c, const struct kvxd_msg *m)
{
	int rc = kvx_pcore_send(c, m);

	if (rc)
		fail(r, "kvx_pcore_send to core %d: %s", c->idx, strerror(-rc));
}

/* Open one room in slot s, as the control core does: decode first (tables, ROOM_OPEN), then
 * the prefill room (table, ROOM_META as it comes from decode's node, the chunks). */
static void
room_start(struct run *r, struct slot *s)
{
	struct kvx_pcore_room *dr = &s->dr, *pr = &s->pr;
	struct kvxd_meta *meta = s->meta;
	struct kvxd_msg m;
	uint64_t t0;

	s->seq = r->started++;
	s->flags = 0;
	s->check = r->o->check_every && s->seq % r->o->check_every == 0;
	if (s->check) {
		t0 = now_ns();
		fill_source(r, s);
		r->check_ns += now_ns() - t0;
	}

	memset(dr, 0, sizeof(*dr));
	dr->id = r->next_id++;
	dr->role = dr->fsm.role = KVX_ROOM_DECODE;
	dr->gen = ROOM_GEN;
	dr->nsrc = 1;
	dr->core = 1;
	dr->token = (uint32_t)(r->next_token << KVXD_TOKEN_SHIFT);
	r->next_token = (r->next_token + 1) & ((1u << (32 - KVXD_TOKEN_SHIFT)) - 1);
	if (!r->next_token)
		r->next_token = 1;
	dr->src_peer[0] = PEER;	   /* its source is the prefill node ... */
	dr->meta_epoch[0] = EPOCH; /* ... and its ROOM_META went out in this session */
	if (kvx_room_table_add_sub(r->by_id, &dr->by_id, dr->id, kvxd_room_sub(0, dr->role)) ||
	    kvx_room_table_add(r->by_token, &dr->by_token, dr->token)) {
		fail(r, "room %" PRIu64 ": already in the tables", dr->id);
		return;
	}
	m = (struct kvxd_msg){.type = KVXD_MSG_ROOM_OPEN, .room = dr};
	send_or_fail(r, &r->dc.core, &m);

	memset(pr, 0, sizeof(*pr));
	pr->id = dr->id;
	pr->role = pr->fsm.role = KVX_ROOM_PREFILL;
	pr->core = 0;
	*meta = (struct kvxd_meta){.peer = PEER,
				   .epoch = EPOCH,
				   .gen = dr->gen,
				   .token = dr->token,
				   .nsrc = 1,
				   .nreg = 1};
	meta->reg[0] = (struct kvxd_meta_region){.addr = (uint64_t)(uintptr_t)r->dc.mem,
						 .rkey = {r->dc.pool.rkey[0]},
						 .page_size = r->o->page_size,
						 .pool_npages = r->dc.pool.npages,
						 .nbufs = r->bufs,
						 .npages = r->pages,
						 .pages = meta->pages};
	for (uint32_t i = 0; i < r->pages; i++)
		meta->pages[i] = dst_page(r, s, i);
	if (kvx_room_table_add_sub(r->by_id, &pr->by_id, pr->id, kvxd_room_sub(0, pr->role))) {
		fail(r, "room %" PRIu64 ": already in the prefill table", pr->id);
		return;
	}
	m = (struct kvxd_msg){.type = KVXD_MSG_ROOM_META, .room = pr, .ptr = meta};
	send_or_fail(r, &r->pf.core, &m);

	for (uint32_t k = 0; k < r->chunks; k++) {
		struct kvxd_chunk *ch = chunk_at(r, s->idx, k);
		uint32_t first = k * r->chunk_pages;
		uint32_t n = k + 1 == r->chunks ? r->pages - first : r->chunk_pages;

		*ch = (struct kvxd_chunk){.pool = &r->pf.pool,
					  .index = k,
					  .npages = n,
					  .dst_offset = first,
					  .nbufs = r->bufs,
					  .last = k + 1 == r->chunks};
		for (uint32_t i = 0; i < n; i++)
			ch->pages[i] = src_page(r, s, first + i);
		m = (struct kvxd_msg){.type = KVXD_MSG_CHUNK, .room = pr, .ptr = ch};
		send_or_fail(r, &r->pf.core, &m);
	}
	s->chunks_out = r->chunks;
	r->inflight_now++;
}

/* Out of the tables, ROOM_DROP: the core gives the room back with ROOM_FREE (kvxd_room_remove). */
static void
room_remove(struct run *r, struct side *sd, struct kvx_pcore_room *pc)
{
	struct kvxd_msg m = {.type = KVXD_MSG_ROOM_DROP, .room = pc};

	kvx_room_table_del(r->by_id, &pc->by_id);
	if (pc->role == KVX_ROOM_DECODE)
		kvx_room_table_del(r->by_token, &pc->by_token);
	send_or_fail(r, &sd->core, &m);
}

static void
slot_done(struct run *r, struct slot *s)
{
	if (s->chunks_out)
		fail(r, "room %" PRIu64 ": %u chunks never came back", s->dr.id, s->chunks_out);
	r->done++;
	r->inflight_now--;
	/* A removed table node may still be seen by a reader until a grace period has passed
	 * (core/room_table.h): the slot waits in limbo before its rooms go back in the tables. */
	s->next = r->limbo_head;
	r->limbo_head = s;
	r->limbo_n++;
}

/* Move the slots in limbo to the free list after a grace period.  This thread is a registered
 * QSBR reader, online: liburcu's synchronize_rcu() takes it offline while it waits. */
static void
limbo_flush(struct run *r)
{
	struct slot *s;

	if (!r->limbo_head)
		return;
	synchronize_rcu();
	kvx_rcu_reclaim_begin(); /* the TSan model of the grace period (core/room_table.h) */
	r->grace_periods++;
	while ((s = r->limbo_head)) {
		r->limbo_head = s->next;
		s->next = r->free_head;
		r->free_head = s;
	}
	r->limbo_n = 0;
	kvx_rcu_reclaim_end();
}

static struct slot *
slot_of_room(struct kvx_pcore_room *pc)
{
	return pc->role == KVX_ROOM_DECODE ? caa_container_of(pc, struct slot, dr)
					   : caa_container_of(pc, struct slot, pr);
}

static void
on_event(struct run *r, struct side *sd, const struct kvxd_msg *m)
{
	struct slot *s = slot_of_room(m->room);
	bool decode = m->room->role == KVX_ROOM_DECODE;

	switch (m->state) {
	case KVX_ROOM_WAITING_FOR_INPUT:
	case KVX_ROOM_TRANSFERRING:
		return;
	case KVX_ROOM_SUCCESS:
		if (m->gen != ROOM_GEN)
			fail(r, "room %" PRIu64 ": SUCCESS with generation %u", m->room_id, m->gen);
		if (decode) {
			s->flags |= DC_SUCCESS;
			if (s->check) {
				uint64_t t0 = now_ns();

				if (verify_dest(r, s))
					r->checked++;
				r->check_ns += now_ns() - t0;
			}
			room_remove(r, sd, &s->dr);
		} else {
			s->flags |= PF_SUCCESS;
		}
		return;
	default:
		fail(r, "%s room %" PRIu64 ": %s (error %d: %.*s)", decode ? "decode" : "prefill",
		     m->room_id, kvx_room_state_str(m->state), m->error, KVXD_REASON_MAX,
		     m->reason);
	}
}

static void
on_outbox_msg(struct run *r, struct side *sd, const struct kvxd_msg *m)
{
	struct slot *s;

	switch (m->type) {
	case KVXD_MSG_EVENT:
		on_event(r, sd, m);
		break;
	case KVXD_MSG_CHUNK_FREE:
		s = slot_of_chunk(r, m->ptr);
		if (!s->chunks_out--)
			fail(r, "room %" PRIu64 ": a chunk came back twice", s->pr.id);
		break;
	case KVXD_MSG_DRAINED:
		s = slot_of_room(m->room);
		if (!(s->flags & PF_SUCCESS))
			fail(r, "prefill room %" PRIu64 ": DRAINED before SUCCESS", m->room_id);
		s->flags |= PF_DRAINED;
		room_remove(r, sd, &s->pr);
		break;
	case KVXD_MSG_ROOM_FREE:
		s = slot_of_room(m->room);
		s->flags |= m->room->role == KVX_ROOM_DECODE ? DC_FREED : PF_FREED;
		if ((s->flags & (DC_FREED | PF_FREED)) == (DC_FREED | PF_FREED))
			slot_done(r, s);
		break;
	default:
		/* META_FREE (a ROOM_META replaced), STATUS_PUSH, QP_QUIESCED, QP_RETIRED: none
		 * belongs to a run without faults */
		fail(r, "core %d: unexpected message type %u (room %" PRIu64 ")", sd->core.idx,
		     m->type, m->room_id);
	}
}

static int
drain_outbox(struct run *r, struct side *sd)
{
	struct kvxd_msg msgs[32];
	int n, total = 0;

	while ((n = kvx_mbox_get_burst(sd->core.outbox, msgs, 32)) > 0) {
		for (int i = 0; i < n; i++)
			on_outbox_msg(r, sd, &msgs[i]);
		total += n;
	}
	return total;
}

/* One poll_once of a core, timed. */
static inline int
step_core(struct side *sd, uint64_t *t)
{
	uint64_t t1;
	int w;

	cur_side = sd;
	w = kvx_pcore_poll_once(&sd->core);
	t1 = now_ns();
	if (w) {
		sd->busy_ns += t1 - *t;
		sd->busy_calls++;
	} else {
		sd->idle_ns += t1 - *t;
		sd->idle_calls++;
	}
	*t = t1;
	return w;
}

/* ---- one run ------------------------------------------------------------------------------- */

static int
perms_init(struct run *r)
{
	uint64_t seed = r->o->seed ? r->o->seed : 1;
	uint32_t p = r->pages;

	r->perm = calloc((size_t)NPERM * p, sizeof(*r->perm));
	if (!r->perm)
		return -ENOMEM;
	for (uint32_t k = 0; k < NPERM; k++) {
		uint32_t *v = r->perm + (size_t)k * p;
		bool adjacent;

		/* a shuffle with no page followed by its successor: no two pages merge */
		do {
			for (uint32_t i = 0; i < p; i++)
				v[i] = i;
			for (uint32_t i = p; i > 1; i--) {
				uint32_t j = (uint32_t)(xorshift(&seed) % i), t = v[i - 1];

				v[i - 1] = v[j];
				v[j] = t;
			}
			adjacent = false;
			for (uint32_t i = 0; i + 1 < p; i++)
				adjacent |= v[i + 1] == v[i] + 1;
		} while (adjacent && p > 2);
		if (adjacent) /* p == 2: (1, 0) */
			v[0] = 1, v[1] = 0;
	}
	return 0;
}

static int
run_setup(struct run *r)
{
	struct kvx_config cfg = {
		.cq_depth = 65536, .sq_depth = r->o->sq_depth, .rq_depth = RQ_DEPTH};
	size_t meta_size = sizeof(struct kvxd_meta) + sizeof(uint32_t) * r->pages;
	int rc;

	fake_vx_install();
	if (r->o->device_split) {
		timed_ops = fake_vx_ops;
		timed_ops.post_write_chain = timed_post_write_chain;
		kvx_vx = &timed_ops;
	}
	kvx_fault_disarm_all();
	rc = kvx_vx->dev_open("fake0", 1, 1, &r->dev);
	if (rc)
		return rc;
	r->by_id = kvx_room_table_create(4ul * r->inflight);
	r->by_token = kvx_room_table_create(4ul * r->inflight);
	if (!r->by_id || !r->by_token)
		return -ENOMEM;
	if ((rc = kvx_pcore_init(&r->pf.core, 0, -1, &r->dev, 1, &cfg, r->by_id, r->by_token)))
		return rc;
	if ((rc = kvx_pcore_init(&r->dc.core, 1, -1, &r->dev, 1, &cfg, r->by_id, r->by_token)))
		return rc;
	/* the cores stamp a room's end with the control core's clock, as in kvxd */
	r->pf.core.clock_us = r->dc.core.clock_us = now_us;
	if ((rc = pool_init(r, &r->pf)) || (rc = pool_init(r, &r->dc)))
		return rc;
	if ((rc = connect_pair(r)))
		return rc;
	if ((rc = perms_init(r)))
		return rc;
	r->slots = calloc(r->inflight, sizeof(*r->slots));
	/* room for every page of the room (the last chunk takes the rest of an uneven split) */
	r->chunk_stride =
		(sizeof(struct kvxd_chunk) + sizeof(uint32_t) * r->pages + 63) & ~(size_t)63;
	r->chunk_mem = calloc((size_t)r->inflight * r->chunks, r->chunk_stride);
	if (!r->slots || !r->chunk_mem)
		return -ENOMEM;
	for (uint32_t i = 0; i < r->inflight; i++) {
		struct slot *s = &r->slots[i];

		s->idx = i;
		s->meta = calloc(1, meta_size);
		if (!s->meta)
			return -ENOMEM;
		s->next = r->free_head;
		r->free_head = s;
	}
	r->next_token = 1;
	r->next_id = 1;
	return 0;
}

/* Returns 0 if everything was released (the fake counts it). */
static int
run_teardown(struct run *r)
{
	int rc = 0;

	for (struct side *s = &r->pf; s; s = s == &r->pf ? &r->dc : NULL) {
		if (s->qpc) {
			if (s->qpc->qp)
				rc |= kvx_vx->qp_destroy(s->qpc->qp);
			kvx_pcore_qpc_free(s->qpc);
		}
		if (s->mem) {
			rc |= kvx_vx->mr_dereg(s->pool.mr[0]);
			free(s->mem);
		}
		if (s->core.cq[0])
			kvx_pcore_fini(&s->core);
	}
	if (r->slots)
		for (uint32_t i = 0; i < r->inflight; i++)
			free(r->slots[i].meta);
	free(r->slots);
	free(r->chunk_mem);
	free(r->perm);
	if (r->by_id)
		rc |= kvx_room_table_destroy(r->by_id);
	if (r->by_token)
		rc |= kvx_room_table_destroy(r->by_token);
	if (r->dev)
		rc |= kvx_vx->dev_close(r->dev);
	if (fake_vx_live().qp || fake_vx_live().mr || fake_vx_live().cq || fake_vx_live().dev)
		rc |= 1;
	return rc ? -EIO : 0;
}

/* This thread's CPU time and involuntary context switches: a run that was not on its CPU all
 * the time (a busy host) has every figure inflated by the time it waited. */
static void
thread_usage(uint64_t *cpu_ns, uint64_t *nivcsw)
{
	struct timespec ts;
	struct rusage ru;

	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	*cpu_ns = (uint64_t)ts.tv_sec * NSEC + (uint64_t)ts.tv_nsec;
	*nivcsw = getrusage(RUSAGE_THREAD, &ru) ? 0 : (uint64_t)ru.ru_nivcsw;
}

static void
run_loop(struct run *r)
{
	uint64_t start = now_ns(), deadline = start + (uint64_t)(r->o->seconds * NSEC);
	uint32_t limbo_batch = r->inflight / 4 < LIMBO_BATCH ? r->inflight / 4 : LIMBO_BATCH;
	uint64_t cpu0, csw0;
	bool starting = true;
	int stuck = 0;

	if (!limbo_batch)
		limbo_batch = 1;
	thread_usage(&cpu0, &csw0);

	while (!r->failed && (starting || r->inflight_now)) {
		uint64_t t;
		int work = 0;

		if (starting && !r->free_head && r->limbo_n &&
		    (r->limbo_n >= limbo_batch || !r->inflight_now))
			limbo_flush(r);
		while (starting && r->free_head) {
			struct slot *s = r->free_head;

			r->free_head = s->next;
			room_start(r, s);
			work++;
			if (r->o->rooms && r->started == r->o->rooms)
				starting = false;
		}
		t = now_ns();
		work += step_core(&r->pf, &t);
		work += step_core(&r->dc, &t);
		work += drain_outbox(r, &r->pf);
		work += drain_outbox(r, &r->dc);
		if (!r->o->rooms && starting && t >= deadline)
			starting = false;
		if (work) {
			stuck = 0;
		} else if (++stuck >= STUCK_STEPS) {
			fail(r, "stuck: %u rooms in flight and neither core does anything",
			     r->inflight_now);
			break;
		}
	}
	limbo_flush(r);
	r->wall_ns = now_ns() - start;
	thread_usage(&r->cpu_ns, &r->nivcsw);
	r->cpu_ns -= cpu0;
	r->nivcsw -= csw0;
}

/* Cross-checks of the cores' own counters after a run. */
static void
run_check(struct run *r, uint64_t wrs_per_room)
{
	const struct kvxd_core_stats *p = &r->pf.core.st, *d = &r->dc.core.st;
	uint64_t bytes = r->done * r->pages * r->bufs * (uint64_t)r->o->page_size;

	if (r->failed)
		return;
	if (r->done != r->started)
		fail(r, "%" PRIu64 " rooms started, %" PRIu64 " done", r->started, r->done);
	else if (atomic_load(&p->rooms_success) != r->done ||
		 atomic_load(&d->rooms_success) != r->done)
		fail(r,
		     "rooms SUCCESS: prefill core %" PRIu64 ", decode core %" PRIu64
		     ", driver %" PRIu64,
		     (uint64_t)atomic_load(&p->rooms_success),
		     (uint64_t)atomic_load(&d->rooms_success), r->done);
	else if (atomic_load(&p->wr_posted) != r->done * wrs_per_room)
		fail(r, "WRs posted: %" PRIu64 ", the shape implies %" PRIu64,
		     (uint64_t)atomic_load(&p->wr_posted), r->done * wrs_per_room);
	else if (atomic_load(&p->bytes_posted) != bytes)
		fail(r, "bytes posted: %" PRIu64 ", the shape implies %" PRIu64,
		     (uint64_t)atomic_load(&p->bytes_posted), bytes);
	else if (fake_vx_writes_executed() != r->done * wrs_per_room)
		fail(r, "the fake device executed %" PRIu64 " writes, %" PRIu64 " posted",
		     fake_vx_writes_executed(), r->done * wrs_per_room);
	else if (atomic_load(&p->rooms_failed) || atomic_load(&d->rooms_failed) ||
		 atomic_load(&p->wc_err) || atomic_load(&p->wc_flush) ||
		 atomic_load(&d->recv_err) || atomic_load(&d->bad_imm) ||
		 atomic_load(&d->imm_not_owner) || atomic_load(&p->chunks_skipped) ||
		 atomic_load(&p->outbox_full) || atomic_load(&d->outbox_full))
		fail(r, "a core counted an error or a refusal");
	else if (atomic_load(&d->recv_imm) != r->done)
		fail(r, "decode core: %" PRIu64 " immediates for %" PRIu64 " rooms",
		     (uint64_t)atomic_load(&d->recv_imm), r->done);
}

static double
per_s(uint64_t n, uint64_t ns)
{
	return ns ? (double)n * 1e9 / (double)ns : 0.0;
}

static double
per_room(uint64_t ns, uint64_t rooms)
{
	return rooms ? (double)ns / (double)rooms : 0.0;
}

/* The cost of one clock read (the loop makes one per poll_once call, charged to that call). */
static double
clock_cost_ns(void)
{
	enum { N = 100000 };
	uint64_t t0 = now_ns(), t = t0;

	for (int i = 0; i < N; i++)
		t = now_ns();
	return (double)(t - t0) / N;
}

static const char METHOD[] =
	"CLOCK_MONOTONIC read before and after every kvx_pcore_poll_once call on one thread; a "
	"core's seconds are the sum over its calls that did work (idle calls apart); rooms/s = "
	"the core's st.rooms_success / those seconds, wrs/s = its st.wr_posted / those seconds; "
	"the fake device executes every write (memcpy) inside the prefill core's post call: in "
	"the prefill core's time, and also timed apart (excl_device)";

static void
report(const struct run *r, uint64_t wrs_per_room, double clk)
{
	const struct opts *o = r->o;
	uint64_t wrs = atomic_load(&r->pf.core.st.wr_posted);
	uint64_t pf_ns = r->pf.busy_ns, dc_ns = r->dc.busy_ns;
	uint64_t pf_x = pf_ns > r->pf.device_ns ? pf_ns - r->pf.device_ns : 0;
	uint64_t in_cores = pf_ns + dc_ns + r->pf.idle_ns + r->dc.idle_ns;
	uint64_t drv =
		r->wall_ns > in_cores + r->check_ns ? r->wall_ns - in_cores - r->check_ns : 0;
	const char *verified = r->failed ? "FAILED" : "ok";
	double cpu_share = r->wall_ns ? (double)r->cpu_ns / (double)r->wall_ns : 0.0;

	if (o->json) {
		printf("{\"tool\": \"kvx-ceiling\", \"shape\": \"%s\", \"page_size\": %u, "
		       "\"pages\": %u, \"bufs\": %u, \"chunks\": %u, \"inflight\": %u, "
		       "\"sq_depth\": %u, \"rooms\": %" PRIu64 ", \"wrs\": %" PRIu64
		       ", \"wrs_per_room\": %" PRIu64 ", \"bytes\": %" PRIu64 ", "
		       "\"checked_rooms\": %" PRIu64 ", \"verified\": \"%s\", ",
		       r->sh->name, o->page_size, r->pages, r->bufs, r->chunks, r->inflight,
		       o->sq_depth, r->done, wrs, wrs_per_room,
		       (uint64_t)atomic_load(&r->pf.core.st.bytes_posted), r->checked, verified);
		printf("\"prefill_core_s\": %.6f, \"prefill_core_rooms_per_s\": %.0f, "
		       "\"prefill_core_wrs_per_s\": %.0f, \"prefill_core_ns_per_room\": %.1f, "
		       "\"prefill_core_calls\": %" PRIu64 ", \"prefill_core_idle_calls\": %" PRIu64
		       ", \"prefill_core_idle_s\": %.6f, \"prefill_device_s\": %.6f, "
		       "\"prefill_device_calls\": %" PRIu64 ", "
		       "\"prefill_core_excl_device_rooms_per_s\": %.0f, "
		       "\"prefill_core_excl_device_wrs_per_s\": %.0f, "
		       "\"prefill_core_excl_device_ns_per_room\": %.1f, ",
		       pf_ns / 1e9, per_s(r->done, pf_ns), per_s(wrs, pf_ns),
		       per_room(pf_ns, r->done), r->pf.busy_calls, r->pf.idle_calls,
		       r->pf.idle_ns / 1e9, r->pf.device_ns / 1e9, r->pf.device_calls,
		       o->device_split ? per_s(r->done, pf_x) : 0.0,
		       o->device_split ? per_s(wrs, pf_x) : 0.0,
		       o->device_split ? per_room(pf_x, r->done) : 0.0);
		printf("\"decode_core_s\": %.6f, \"decode_core_rooms_per_s\": %.0f, "
		       "\"decode_core_ns_per_room\": %.1f, \"decode_core_calls\": %" PRIu64
		       ", \"decode_core_idle_calls\": %" PRIu64 ", \"decode_core_idle_s\": %.6f, ",
		       dc_ns / 1e9, per_s(r->done, dc_ns), per_room(dc_ns, r->done),
		       r->dc.busy_calls, r->dc.idle_calls, r->dc.idle_ns / 1e9);
		printf("\"driver_ns_per_room\": %.1f, \"check_ns_per_room\": %.1f, "
		       "\"grace_periods\": %" PRIu64 ", \"wall_s\": %.6f, "
		       "\"wall_rooms_per_s\": %.0f, \"thread_cpu_share\": %.3f, "
		       "\"involuntary_switches\": %" PRIu64 ", \"clock_read_ns\": %.1f, "
		       "\"device_split\": %s, \"method\": \"%s\"",
		       per_room(drv, r->done), per_room(r->check_ns, r->done), r->grace_periods,
		       r->wall_ns / 1e9, per_s(r->done, r->wall_ns), cpu_share, r->nivcsw, clk,
		       o->device_split ? "true" : "false", METHOD);
		if (r->failed)
			printf(", \"error\": \"%s\"", r->why);
		printf("}\n");
	} else {
		printf("ceiling: shape=%s page_size=%u pages=%u bufs=%u chunks=%u inflight=%u "
		       "rooms=%" PRIu64 " wrs=%" PRIu64 " prefill_core rooms/s=%.0f wrs/s=%.0f "
		       "ns/room=%.0f",
		       r->sh->name, o->page_size, r->pages, r->bufs, r->chunks, r->inflight,
		       r->done, wrs, per_s(r->done, pf_ns), per_s(wrs, pf_ns),
		       per_room(pf_ns, r->done));
		if (o->device_split)
			printf(" (excl_device rooms/s=%.0f wrs/s=%.0f ns/room=%.0f)",
			       per_s(r->done, pf_x), per_s(wrs, pf_x), per_room(pf_x, r->done));
		printf(" decode_core rooms/s=%.0f ns/room=%.0f driver ns/room=%.0f "
		       "check ns/room=%.0f wall rooms/s=%.0f cpu_share=%.3f checked=%" PRIu64
		       " verified=%s\n",
		       per_s(r->done, dc_ns), per_room(dc_ns, r->done), per_room(drv, r->done),
		       per_room(r->check_ns, r->done), per_s(r->done, r->wall_ns), cpu_share,
		       r->checked, verified);
	}
	if (r->failed)
		fprintf(stderr, "kvx-ceiling: shape %s: %s\n", r->sh->name, r->why);
}

static int
run_shape(const struct opts *o, const struct shape *sh, double clk)
{
	struct run *r = calloc(1, sizeof(*r));
	uint64_t wrs_per_room;
	int rc, failed;

	if (!r)
		return -ENOMEM;
	r->o = o;
	r->sh = sh;
	r->pages = o->pages_set ? o->pages : sh->pages;
	r->bufs = o->bufs_set ? o->bufs : sh->bufs;
	r->chunks = o->chunks < r->pages ? o->chunks : r->pages;
	r->chunk_pages = r->pages / r->chunks;
	r->inflight = o->inflight;
	/* contiguous, or scattered sources gathered (at most KVX_VX_MAX_SGE per WRITE): one WRITE
	 * per chunk and buffer; scattered destinations: one per page and buffer */
	wrs_per_room = (uint64_t)r->bufs *
		       (sh->scatter == SCATTER_DST && r->pages > 1 ? r->pages : r->chunks);
	rc = run_setup(r);
	if (rc) {
		fprintf(stderr, "kvx-ceiling: setup: %s\n", strerror(-rc));
		run_teardown(r);
		free(r);
		return -1;
	}
	run_loop(r);
	run_check(r, wrs_per_room);
	report(r, wrs_per_room, clk);
	failed = r->failed;
	if (!failed && run_teardown(r)) {
		fprintf(stderr, "kvx-ceiling: teardown: a resource was not released\n");
		failed = 1;
	}
	free(r);
	return failed ? -1 : 0;
}

/* ---- options ------------------------------------------------------------------------------- */

static void
usage(FILE *f)
{
	fprintf(f,
		"usage: kvx-ceiling [options]\n"
		"Drives one prefill and one decode polling core over the fake verbs device on "
		"this\n"
		"thread and reports rooms/s and WRs/s per polling core (time inside its "
		"poll_once).\n"
		"  --shape S          1page, 64k, 64k-scatter, 64k-gather, a comma list, or all "
		"(default "
		"1page)\n"
		"  --page-size B      bytes per page, a multiple of 8 (default 64: the fake "
		"device\n"
		"                     copies the data inside the prefill core's post call)\n"
		"  --pages N          pages per room (default: the shape's)\n"
		"  --bufs N           buffers per page index (default: the shape's)\n"
		"  --chunks N         chunks per room (default 1)\n"
		"  --inflight N       rooms in flight (default 256, at most %d)\n"
		"  --sq-depth N       the prefill QP's send queue (default 512, kvxd's)\n"
		"  --rooms N          rooms per shape (default: run for --seconds)\n"
		"  --seconds S        open rooms for S seconds per shape (default %.0f)\n"
		"  --check-every N    fill and verify every Nth room's pages (default 1; 0: none)\n"
		"  --seed N           seed of the scatter permutations (default 1)\n"
		"  --no-device-split  do not time the fake device's post call apart\n"
		"  --json             one JSON object per shape\n"
		"  -h, --help         this help\n",
		INFLIGHT_MAX, DEFAULT_SECONDS);
}

static int
parse_shapes(const char *arg, struct opts *o)
{
	char buf[128], *save = NULL, *tok;

	memset(o->shape_on, 0, sizeof(o->shape_on));
	if (strcmp(arg, "all") == 0) {
		for (size_t i = 0; i < NSHAPES; i++)
			o->shape_on[i] = true;
		return 0;
	}
	snprintf(buf, sizeof(buf), "%s", arg);
	for (tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		size_t i;

		for (i = 0; i < NSHAPES && strcmp(tok, shapes[i].name); i++)
			;
		if (i == NSHAPES) {
			fprintf(stderr, "kvx-ceiling: --shape: unknown shape '%s'\n", tok);
			return -EINVAL;
		}
		o->shape_on[i] = true;
	}
	return 0;
}

enum {
	OPT_SHAPE = 256,
	OPT_PAGE_SIZE,
	OPT_PAGES,
	OPT_BUFS,
	OPT_CHUNKS,
	OPT_INFLIGHT,
	OPT_SQ_DEPTH,
	OPT_ROOMS,
	OPT_SECONDS,
	OPT_CHECK_EVERY,
	OPT_SEED,
	OPT_NO_SPLIT,
	OPT_JSON,
};

/* Returns 0, 1 (--help) or -EINVAL. */
static int
parse_opts(int argc, char **argv, struct opts *o)
{
	static const struct option lo[] = {
		{"shape", required_argument, NULL, OPT_SHAPE},
		{"page-size", required_argument, NULL, OPT_PAGE_SIZE},
		{"pages", required_argument, NULL, OPT_PAGES},
		{"bufs", required_argument, NULL, OPT_BUFS},
		{"chunks", required_argument, NULL, OPT_CHUNKS},
		{"inflight", required_argument, NULL, OPT_INFLIGHT},
		{"sq-depth", required_argument, NULL, OPT_SQ_DEPTH},
		{"rooms", required_argument, NULL, OPT_ROOMS},
		{"seconds", required_argument, NULL, OPT_SECONDS},
		{"check-every", required_argument, NULL, OPT_CHECK_EVERY},
		{"seed", required_argument, NULL, OPT_SEED},
		{"no-device-split", no_argument, NULL, OPT_NO_SPLIT},
		{"json", no_argument, NULL, OPT_JSON},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	int opt, r = 0;
	char *end;

	*o = (struct opts){.page_size = 64,
			   .chunks = 1,
			   .inflight = 256,
			   .sq_depth = 512,
			   .check_every = 1,
			   .seconds = DEFAULT_SECONDS,
			   .seed = 1,
			   .device_split = true};
	o->shape_on[0] = true;
	while (!r && (opt = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
		switch (opt) {
		case OPT_SHAPE:
			r = parse_shapes(optarg, o);
			break;
		case OPT_PAGE_SIZE:
			r = parse_u32("page-size", optarg, 8, PAGE_SIZE_MAX, &o->page_size);
			if (!r && o->page_size % 8) {
				fprintf(stderr, "kvx-ceiling: --page-size: a multiple of 8\n");
				r = -EINVAL;
			}
			break;
		case OPT_PAGES:
			r = parse_u32("pages", optarg, 1, PAGES_MAX, &o->pages);
			o->pages_set = true;
			break;
		case OPT_BUFS:
			r = parse_u32("bufs", optarg, 1, BUFS_MAX, &o->bufs);
			o->bufs_set = true;
			break;
		case OPT_CHUNKS:
			r = parse_u32("chunks", optarg, 1, PAGES_MAX, &o->chunks);
			break;
		case OPT_INFLIGHT:
			r = parse_u32("inflight", optarg, 1, INFLIGHT_MAX, &o->inflight);
			break;
		case OPT_SQ_DEPTH:
			r = parse_u32("sq-depth", optarg, 16, 32768, &o->sq_depth);
			break;
		case OPT_ROOMS:
			r = parse_u64("rooms", optarg, 1, UINT64_MAX / 2, &o->rooms);
			break;
		case OPT_SECONDS:
			errno = 0;
			o->seconds = strtod(optarg, &end);
			if (errno || end == optarg || *end || !isfinite(o->seconds) ||
			    o->seconds <= 0 || o->seconds > 1e6) {
				fprintf(stderr,
					"kvx-ceiling: --seconds: expected seconds > 0, "
					"got '%s'\n",
					optarg);
				r = -EINVAL;
			}
			break;
		case OPT_CHECK_EVERY:
			r = parse_u32("check-every", optarg, 0, UINT32_MAX, &o->check_every);
			break;
		case OPT_SEED:
			r = parse_u64("seed", optarg, 0, UINT64_MAX, &o->seed);
			break;
		case OPT_NO_SPLIT:
			o->device_split = false;
			break;
		case OPT_JSON:
			o->json = true;
			break;
		case 'h':
			return 1;
		default:
			return -EINVAL;
		}
	}
	if (!r && optind < argc) {
		fprintf(stderr, "kvx-ceiling: unexpected argument '%s'\n", argv[optind]);
		r = -EINVAL;
	}
	if (!r && (uint64_t)o->inflight * (o->pages_set ? o->pages : 16) *
				  (o->bufs_set ? o->bufs : 4) * o->page_size >
			  (1ull << 32)) {
		fprintf(stderr, "kvx-ceiling: a pool of more than 4 GiB (inflight x pages x bufs x "
				"page size)\n");
		r = -EINVAL;
	}
	return r;
}

int
main(int argc, char **argv)
{
	struct opts o;
	int rc = parse_opts(argc, argv, &o), status = 0;
	double clk;

	if (rc) {
		usage(rc > 0 ? stdout : stderr);
		return rc > 0 ? 0 : 2;
	}
	rcu_register_thread();
	clk = clock_cost_ns();
	if (!o.json)
		printf("ceiling: method: %s; one clock read costs %.1f ns here\n", METHOD, clk);
	for (size_t i = 0; i < NSHAPES; i++)
		if (o.shape_on[i] && run_shape(&o, &shapes[i], clk))
			status = 1;
	rcu_unregister_thread();
	return status;
}
