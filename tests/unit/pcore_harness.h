/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Test harness for the polling cores: one prefill core and one decode core in this process,
 * stepped by hand (kvx_pcore_poll_once), connected by a fake RC QP pair (tests/unit/fake_verbs).
 * Include after <cmocka.h> and the polling-core code (verbs/pcore.h, or verbs/pcore.c itself).
 */
#ifndef KVX_TESTS_PCORE_HARNESS_H
#define KVX_TESTS_PCORE_HARNESS_H

#include "core/fault.h"
#include "fake_verbs.h"

#define PS 256
#define NP 64
#define NB 3

struct side {
	struct kvxd_core core;
	struct kvxd_pool pool;
	uint8_t *mem;
	struct kvxd_qpc *qpc, *qpc2; /* to peer 0, and (optionally) to peer 1 */
};

struct env {
	struct kvx_vx_dev *dev;
	struct kvx_room_table *by_id, *by_token;
	struct side pf, dc; /* prefill, decode */
	struct kvxd_msg out[4096];
	int nout;
	uint32_t next_token;
	struct kvx_pcore_room *rooms[128];
	int nrooms;
};

static struct env E;

static __attribute__((unused)) void
pool_init(struct side *s)
{
	struct kvx_vx_mr *mr;

	s->mem = calloc(NB * NP, PS);
	assert_int_equal(kvx_vx->mr_reg(E.dev, s->mem, NB * NP * PS, &mr), 0);
	s->pool = (struct kvxd_pool){.base = s->mem,
				     .len = NB * NP * PS,
				     .page_size = PS,
				     .npages = NP,
				     .nbufs = NB,
				     .lkey = {kvx_vx->mr_lkey(mr)},
				     .rkey = {kvx_vx->mr_rkey(mr)},
				     .mr = {mr}};
}

static __attribute__((unused)) void
connect_qpcs(int peer, uint32_t epoch, struct kvxd_qpc **pfq, struct kvxd_qpc **dcq)
{
	struct kvx_vx_qp_attr a = {.port = 1};
	struct kvxd_qpc *pf = kvx_pcore_qpc_alloc(64, 64, KVX_VX_MAX_SGE),
			*dc = kvx_pcore_qpc_alloc(64, 64, KVX_VX_MAX_SGE);
	uint64_t ids[64];
	int posted;

	assert_int_equal(kvx_vx->qp_create(E.dev, E.pf.core.cq[0], 64, 64, &pf->qp), 0);
	assert_int_equal(kvx_vx->qp_create(E.dev, E.dc.core.cq[0], 64, 64, &dc->qp), 0);
	pf->qpn = kvx_vx->qp_num(pf->qp);
	dc->qpn = kvx_vx->qp_num(dc->qp);
	a.remote_qpn = dc->qpn;
	kvx_vx->qp_to_init(pf->qp, &a);
	kvx_vx->qp_to_rtr(pf->qp, &a);
	kvx_vx->qp_to_rts(pf->qp, &a);
	a.remote_qpn = pf->qpn;
	kvx_vx->qp_to_init(dc->qp, &a);
	kvx_vx->qp_to_rtr(dc->qp, &a);
	kvx_vx->qp_to_rts(dc->qp, &a);
	for (int i = 0; i < 64; i++)
		ids[i] = (uint64_t)(uintptr_t)&dc->recv_tag;
	assert_int_equal(kvx_vx->post_recv_burst(dc->qp, ids, 64, &posted), 0);
	dc->rq_posted = 64;
	for (int i = 0; i < 64; i++) /* every QP has its receives, as in kvxd */
		ids[i] = (uint64_t)(uintptr_t)&pf->recv_tag;
	assert_int_equal(kvx_vx->post_recv_burst(pf->qp, ids, 64, &posted), 0);
	pf->rq_posted = 64;
	for (int k = 0; k < 2; k++) {
		struct kvxd_core *core = k ? &E.dc.core : &E.pf.core;
		struct kvxd_qpc *q = k ? dc : pf;
		struct kvxd_msg m = {.type = KVXD_MSG_QP_ADD, .qpc = q};
		struct kvxd_msg act = {.type = KVXD_MSG_QP_ACTIVATE, .qpc = q, .gen = epoch};

		q->peer = peer;
		q->epoch = epoch; /* as the control core sets it before QP_ADD */
		assert_int_equal(kvx_pcore_send(core, &m), 0);
		assert_int_equal(kvx_pcore_send(core, &act), 0);
	}
	*pfq = pf;
	*dcq = dc;
}

static __attribute__((unused)) void
connect_pair(void)
{
	connect_qpcs(0, 1, &E.pf.qpc, &E.dc.qpc);
}

/* A second connection (peer 1), for tests that need two QPs on one core. */
static __attribute__((unused)) void
connect_second_pair(void)
{
	connect_qpcs(1, 1, &E.pf.qpc2, &E.dc.qpc2);
}

static __attribute__((unused)) int
setup(void **state)
{
	struct kvx_config cfg = {.cq_depth = 1024, .sq_depth = 64, .rq_depth = 64};

	memset(&E, 0, sizeof(E));
	fake_vx_install();
	kvx_fault_disarm_all();
	rcu_register_thread();
	assert_int_equal(kvx_vx->dev_open("fake0", 1, 1, &E.dev), 0);
	E.by_id = kvx_room_table_create(64);
	E.by_token = kvx_room_table_create(64);
	assert_int_equal(kvx_pcore_init(&E.pf.core, 0, -1, &E.dev, 1, &cfg, E.by_id, E.by_token),
			 0);
	assert_int_equal(kvx_pcore_init(&E.dc.core, 1, -1, &E.dev, 1, &cfg, E.by_id, E.by_token),
			 0);
	pool_init(&E.pf);
	pool_init(&E.dc);
	connect_pair();
	E.next_token = 1u << KVXD_TOKEN_SHIFT;
	return 0;
}

static __attribute__((unused)) struct kvx_pcore_room *
track(struct kvx_pcore_room *r)
{
	assert_true(E.nrooms < 128);
	E.rooms[E.nrooms++] = r;
	return r;
}

static __attribute__((unused)) int
teardown(void **state)
{
	for (int i = 0; i < E.nrooms; i++) {
		struct kvx_pcore_room *r = E.rooms[i];

		kvx_room_table_del(E.by_id, &r->by_id);
		if (r->role == KVX_ROOM_DECODE)
			kvx_room_table_del(E.by_token, &r->by_token);
		while (r->pend_head) {
			struct kvxd_chunk *ch = r->pend_head;

			r->pend_head = ch->next;
			free(ch);
		}
		for (int d = 0; d < r->nmeta; d++)
			free(r->metas[d]);
		free(r);
	}
	for (struct side *s = &E.pf; s; s = s == &E.pf ? &E.dc : NULL) {
		assert_int_equal(kvx_vx->qp_destroy(s->qpc->qp), 0);
		kvx_pcore_qpc_free(s->qpc);
		if (s->qpc2) {
			assert_int_equal(kvx_vx->qp_destroy(s->qpc2->qp), 0);
			kvx_pcore_qpc_free(s->qpc2);
		}
		assert_int_equal(kvx_vx->mr_dereg(s->pool.mr[0]), 0);
		free(s->mem);
		kvx_pcore_fini(&s->core);
	}
	assert_int_equal(kvx_room_table_destroy(E.by_id), 0);
	assert_int_equal(kvx_room_table_destroy(E.by_token), 0);
	assert_int_equal(kvx_vx->dev_close(E.dev), 0);
	/* everything the test acquired through the seam was released */
	assert_int_equal(fake_vx_live().qp, 0);
	assert_int_equal(fake_vx_live().mr, 0);
	assert_int_equal(fake_vx_live().cq, 0);
	assert_int_equal(fake_vx_live().dev, 0);
	rcu_unregister_thread();
	return 0;
}

/* Step both cores until neither does anything; collect their outboxes. */
static __attribute__((unused)) void
run(void)
{
	for (int i = 0; i < 1000; i++) {
		int work = kvx_pcore_poll_once(&E.pf.core) + kvx_pcore_poll_once(&E.dc.core);
		int n;

		for (struct kvxd_core *c = &E.pf.core; c; c = c == &E.pf.core ? &E.dc.core : NULL)
			while ((n = kvx_mbox_get_burst(c->outbox, &E.out[E.nout], 16)) > 0) {
				for (int k = E.nout; k < E.nout + n; k++)
					if (E.out[k].type == KVXD_MSG_CHUNK_FREE ||
					    E.out[k].type == KVXD_MSG_META_FREE)
						free(E.out[k].ptr);
				E.nout += n;
				work += n;
				assert_true(E.nout < 4000);
			}
		if (!work)
			return;
	}
	fail_msg("cores never went idle");
}

static __attribute__((unused)) const struct kvxd_msg *
find_event(struct kvx_pcore_room *r, int state)
{
	for (int i = 0; i < E.nout; i++)
		if (E.out[i].type == KVXD_MSG_EVENT && E.out[i].room == r &&
		    E.out[i].state == state)
			return &E.out[i];
	return NULL;
}

static __attribute__((unused)) const struct kvxd_msg *
get_event(struct kvx_pcore_room *r, int state)
{
	const struct kvxd_msg *m = find_event(r, state);

	if (!m) {
		fail_msg("no %s event", kvx_room_state_str(state));
		__builtin_unreachable();
	}
	return m;
}

static __attribute__((unused)) const char *
reason_has(const struct kvxd_msg *m, const char *what)
{
	static char reason[KVXD_REASON_MAX + 1];

	memcpy(reason, m->reason, KVXD_REASON_MAX);
	return strstr(reason, what);
}

static __attribute__((unused)) int
count_msgs(uint32_t type)
{
	int n = 0;

	for (int i = 0; i < E.nout; i++)
		n += E.out[i].type == type;
	return n;
}

/* The index in the outbox of the first message of that type, or -1. */
static __attribute__((unused)) int
msg_index(uint32_t type)
{
	for (int i = 0; i < E.nout; i++)
		if (E.out[i].type == type)
			return i;
	return -1;
}

static __attribute__((unused)) struct kvx_pcore_room *
decode_room(uint64_t id, const uint32_t *pages, uint32_t npages)
{
	struct kvx_pcore_room *r = track(calloc(1, sizeof(*r)));
	struct kvxd_msg m = {.type = KVXD_MSG_ROOM_OPEN};

	r->id = id;
	r->role = r->fsm.role = KVX_ROOM_DECODE;
	r->gen = 7;
	r->nsrc = 1;
	r->core = 1;
	r->token = E.next_token;
	E.next_token += 1u << KVXD_TOKEN_SHIFT;
	r->src_peer[0] = 0;   /* its source is peer 0 ... */
	r->meta_epoch[0] = 1; /* ... and its ROOM_META went out in session 1 */
	assert_int_equal(kvx_room_table_add_sub(E.by_id, &r->by_id, id, kvxd_room_sub(0, r->role)),
			 0);
	assert_int_equal(kvx_room_table_add(E.by_token, &r->by_token, r->token), 0);
	m.room = r;
	assert_int_equal(kvx_pcore_send(&E.dc.core, &m), 0);
	(void)pages;
	(void)npages;
	return r;
}

/* The ROOM_META decode room dr would send to its source (peer), for session 1. */
static __attribute__((unused)) struct kvxd_meta *
make_meta(struct kvx_pcore_room *dr, const uint32_t *dst, uint32_t npages, int peer)
{
	struct kvxd_meta *meta = calloc(1, sizeof(*meta) + 4 * npages);

	*meta = (struct kvxd_meta){
		.peer = peer, .epoch = 1, .gen = dr->gen, .token = dr->token, .nsrc = 1, .nreg = 1};
	meta->reg[0] = (struct kvxd_meta_region){.addr = (uint64_t)(uintptr_t)E.dc.mem,
						 .rkey = {E.dc.pool.rkey[0]},
						 .page_size = PS,
						 .pool_npages = NP,
						 .nbufs = NB,
						 .npages = npages,
						 .pages = meta->pages};
	memcpy(meta->pages, dst, 4 * npages);
	return meta;
}

static __attribute__((unused)) struct kvx_pcore_room *
prefill_room_peer(struct kvx_pcore_room *dr, const uint32_t *dst, uint32_t npages, int peer)
{
	struct kvx_pcore_room *r = track(calloc(1, sizeof(*r)));
	struct kvxd_meta *meta;
	struct kvxd_msg m = {.type = KVXD_MSG_ROOM_META};

	r->id = dr->id;
	r->role = r->fsm.role = KVX_ROOM_PREFILL;
	r->core = 0;
	meta = make_meta(dr, dst, npages, peer);
	assert_int_equal(
		kvx_room_table_add_sub(E.by_id, &r->by_id, r->id, kvxd_room_sub(0, r->role)), 0);
	m.room = r;
	m.ptr = meta;
	assert_int_equal(kvx_pcore_send(&E.pf.core, &m), 0);
	return r;
}

static __attribute__((unused)) struct kvx_pcore_room *
prefill_room(struct kvx_pcore_room *dr, const uint32_t *dst, uint32_t npages)
{
	return prefill_room_peer(dr, dst, npages, 0);
}

/* A chunk of every buffer for a room that feeds ndest decode endpoints (fan-out; 0: one). */
static __attribute__((unused)) void
submit_to(struct kvx_pcore_room *r, uint32_t index, const uint32_t *src, uint32_t npages,
	  uint32_t off, bool last, uint32_t ndest)
{
	struct kvxd_chunk *ch = calloc(1, sizeof(*ch) + 4 * npages);
	struct kvxd_msg m = {.type = KVXD_MSG_CHUNK, .room = r, .ptr = ch};

	*ch = (struct kvxd_chunk){.pool = &E.pf.pool,
				  .index = index,
				  .npages = npages,
				  .dst_offset = off,
				  .nbufs = NB,
				  .ndest = ndest,
				  .last = last};
	memcpy(ch->pages, src, 4 * npages);
	assert_int_equal(kvx_pcore_send(&E.pf.core, &m), 0);
}

static __attribute__((unused)) void
submit(struct kvx_pcore_room *r, uint32_t index, const uint32_t *src, uint32_t npages, uint32_t off,
       bool last)
{
	submit_to(r, index, src, npages, off, last, 0);
}

static __attribute__((unused)) void
fill(uint32_t page, uint8_t v)
{
	for (int b = 0; b < NB; b++)
		memset(E.pf.mem + ((size_t)b * NP + page) * PS, v + b, PS);
}

static __attribute__((unused)) bool
landed(uint32_t dpage, uint8_t v)
{
	for (int b = 0; b < NB; b++)
		for (int i = 0; i < PS; i++)
			if (E.dc.mem[((size_t)b * NP + dpage) * PS + i] != (uint8_t)(v + b))
				return false;
	return true;
}

#endif /* KVX_TESTS_PCORE_HARNESS_H */
