/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Polling-core data path on the fake verbs: one prefill core and one decode core in this
 * process, stepped by hand (kvx_pcore_poll_once), connected by a fake RC QP pair.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/fault.h"
#include "fake_verbs.h"
#include "verbs/pcore.h"

#define PS 256
#define NP 64
#define NB 3

struct side {
	struct kvxd_core core;
	struct kvxd_pool pool;
	uint8_t *mem;
	struct kvxd_qpc *qpc;
};

struct env {
	struct kvx_vx_dev *dev;
	struct kvx_room_table *by_id, *by_token;
	struct side pf, dc; /* prefill, decode */
	struct kvxd_msg out[4096];
	int nout;
	uint32_t next_token;
	struct kvxd_room *rooms[64];
	int nrooms;
};

static struct env E;

static void
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
				     .lkey = kvx_vx->mr_lkey(mr),
				     .rkey = kvx_vx->mr_rkey(mr),
				     .mr = mr};
}

static void
connect_pair(void)
{
	struct kvx_vx_qp_attr a = {.port = 1};
	uint64_t ids[64];
	int posted;

	E.pf.qpc = kvx_pcore_qpc_alloc(64, 64);
	E.dc.qpc = kvx_pcore_qpc_alloc(64, 64);
	assert_int_equal(kvx_vx->qp_create(E.dev, E.pf.core.cq, 64, 64, &E.pf.qpc->qp), 0);
	assert_int_equal(kvx_vx->qp_create(E.dev, E.dc.core.cq, 64, 64, &E.dc.qpc->qp), 0);
	E.pf.qpc->qpn = kvx_vx->qp_num(E.pf.qpc->qp);
	E.dc.qpc->qpn = kvx_vx->qp_num(E.dc.qpc->qp);
	a.remote_qpn = E.dc.qpc->qpn;
	kvx_vx->qp_to_init(E.pf.qpc->qp, &a);
	kvx_vx->qp_to_rtr(E.pf.qpc->qp, &a);
	kvx_vx->qp_to_rts(E.pf.qpc->qp, &a);
	a.remote_qpn = E.pf.qpc->qpn;
	kvx_vx->qp_to_init(E.dc.qpc->qp, &a);
	kvx_vx->qp_to_rtr(E.dc.qpc->qp, &a);
	kvx_vx->qp_to_rts(E.dc.qpc->qp, &a);
	for (int i = 0; i < 64; i++)
		ids[i] = (uint64_t)(uintptr_t)&E.dc.qpc->recv_tag;
	assert_int_equal(kvx_vx->post_recv_burst(E.dc.qpc->qp, ids, 64, &posted), 0);
	E.dc.qpc->rq_posted = 64;
	for (struct side *s = &E.pf; s; s = s == &E.pf ? &E.dc : NULL) {
		struct kvxd_msg m = {.type = KVXD_MSG_QP_ADD, .qpc = s->qpc};
		struct kvxd_msg act = {.type = KVXD_MSG_QP_ACTIVATE, .qpc = s->qpc, .gen = 1};

		s->qpc->peer = 0;
		assert_int_equal(kvx_pcore_send(&s->core, &m), 0);
		assert_int_equal(kvx_pcore_send(&s->core, &act), 0);
	}
}

static int
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
	assert_int_equal(kvx_pcore_init(&E.pf.core, 0, -1, E.dev, &cfg, E.by_id, E.by_token), 0);
	assert_int_equal(kvx_pcore_init(&E.dc.core, 1, -1, E.dev, &cfg, E.by_id, E.by_token), 0);
	pool_init(&E.pf);
	pool_init(&E.dc);
	connect_pair();
	E.next_token = 1u << KVXD_TOKEN_SHIFT;
	return 0;
}

static struct kvxd_room *
track(struct kvxd_room *r)
{
	assert_true(E.nrooms < 64);
	E.rooms[E.nrooms++] = r;
	return r;
}

static int
teardown(void **state)
{
	for (int i = 0; i < E.nrooms; i++) {
		struct kvxd_room *r = E.rooms[i];

		kvx_room_table_del(E.by_id, &r->by_id);
		if (r->role == KVX_ROOM_DECODE)
			kvx_room_table_del(E.by_token, &r->by_token);
		while (r->pend_head) {
			struct kvxd_chunk *ch = r->pend_head;

			r->pend_head = ch->next;
			free(ch);
		}
		free(r->meta);
		free(r);
	}
	for (struct side *s = &E.pf; s; s = s == &E.pf ? &E.dc : NULL) {
		assert_int_equal(kvx_vx->qp_destroy(s->qpc->qp), 0);
		kvx_pcore_qpc_free(s->qpc);
		assert_int_equal(kvx_vx->mr_dereg(s->pool.mr), 0);
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
static void
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

static const struct kvxd_msg *
find_event(struct kvxd_room *r, int state)
{
	for (int i = 0; i < E.nout; i++)
		if (E.out[i].type == KVXD_MSG_EVENT && E.out[i].room == r &&
		    E.out[i].state == state)
			return &E.out[i];
	return NULL;
}

static const struct kvxd_msg *
get_event(struct kvxd_room *r, int state)
{
	const struct kvxd_msg *m = find_event(r, state);

	if (!m) {
		fail_msg("no %s event", kvx_room_state_str(state));
		__builtin_unreachable();
	}
	return m;
}

static const char *
reason_has(const struct kvxd_msg *m, const char *what)
{
	static char reason[KVXD_REASON_MAX + 1];

	memcpy(reason, m->reason, KVXD_REASON_MAX);
	return strstr(reason, what);
}

static int
count_msgs(uint32_t type)
{
	int n = 0;

	for (int i = 0; i < E.nout; i++)
		n += E.out[i].type == type;
	return n;
}

static struct kvxd_room *
decode_room(uint64_t id, const uint32_t *pages, uint32_t npages)
{
	struct kvxd_room *r = track(calloc(1, sizeof(*r)));
	struct kvxd_msg m = {.type = KVXD_MSG_ROOM_OPEN};

	r->id = id;
	r->role = r->fsm.role = KVX_ROOM_DECODE;
	r->gen = 7;
	r->nsrc = 1;
	r->npages = npages;
	r->pool = &E.dc.pool;
	r->core = 1;
	r->token = E.next_token;
	E.next_token += 1u << KVXD_TOKEN_SHIFT;
	assert_int_equal(kvx_room_table_add(E.by_id, &r->by_id, kvxd_room_key(id, r->role)), 0);
	assert_int_equal(kvx_room_table_add(E.by_token, &r->by_token, r->token), 0);
	m.room = r;
	assert_int_equal(kvx_pcore_send(&E.dc.core, &m), 0);
	(void)pages;
	return r;
}

static struct kvxd_room *
prefill_room(struct kvxd_room *dr, const uint32_t *dst, uint32_t npages)
{
	struct kvxd_room *r = track(calloc(1, sizeof(*r)));
	struct kvxd_meta *meta = calloc(1, sizeof(*meta) + 4 * npages);
	struct kvxd_msg m = {.type = KVXD_MSG_ROOM_META};

	r->id = dr->id;
	r->role = r->fsm.role = KVX_ROOM_PREFILL;
	r->core = 0;
	*meta = (struct kvxd_meta){.peer = 0,
				   .gen = dr->gen,
				   .token = dr->token,
				   .src_idx = 0,
				   .nsrc = 1,
				   .addr = (uint64_t)(uintptr_t)E.dc.mem,
				   .rkey = E.dc.pool.rkey,
				   .page_size = PS,
				   .pool_npages = NP,
				   .nbufs = NB,
				   .npages = npages};
	memcpy(meta->pages, dst, 4 * npages);
	assert_int_equal(kvx_room_table_add(E.by_id, &r->by_id, kvxd_room_key(r->id, r->role)), 0);
	m.room = r;
	m.ptr = meta;
	assert_int_equal(kvx_pcore_send(&E.pf.core, &m), 0);
	return r;
}

static void
submit(struct kvxd_room *r, uint32_t index, const uint32_t *src, uint32_t npages, uint32_t off,
       bool last)
{
	struct kvxd_chunk *ch = calloc(1, sizeof(*ch) + 4 * npages);
	struct kvxd_msg m = {.type = KVXD_MSG_CHUNK, .room = r, .ptr = ch};

	*ch = (struct kvxd_chunk){.pool = &E.pf.pool,
				  .index = index,
				  .npages = npages,
				  .dst_offset = off,
				  .last = last};
	memcpy(ch->pages, src, 4 * npages);
	assert_int_equal(kvx_pcore_send(&E.pf.core, &m), 0);
}

static void
fill(uint32_t page, uint8_t v)
{
	for (int b = 0; b < NB; b++)
		memset(E.pf.mem + ((size_t)b * NP + page) * PS, v + b, PS);
}

static bool
landed(uint32_t dpage, uint8_t v)
{
	for (int b = 0; b < NB; b++)
		for (int i = 0; i < PS; i++)
			if (E.dc.mem[((size_t)b * NP + dpage) * PS + i] != (uint8_t)(v + b))
				return false;
	return true;
}

static void
test_room_success_and_merge(void **state)
{
	uint32_t src[8] = {0, 1, 2, 3, 10, 11, 12, 13}, dst[8] = {20, 21, 22, 23, 30, 31, 40, 41};
	struct kvxd_room *d, *p;

	for (int i = 0; i < 8; i++)
		fill(src[i], (uint8_t)(0x10 * i));
	d = decode_room(5, dst, 8);
	p = prefill_room(d, dst, 8);
	submit(p, 0, src, 4, 0, false);
	submit(p, 1, src + 4, 4, 4, true);
	run();
	assert_non_null(find_event(d, KVX_ROOM_SUCCESS));
	assert_non_null(find_event(p, KVX_ROOM_SUCCESS));
	for (int i = 0; i < 8; i++)
		assert_true(landed(dst[i], (uint8_t)(0x10 * i)));
	/* runs: chunk 0 is one run (4 WRs, one per buffer); chunk 1 is runs {10,11->30,31} and
	 * {12,13->40,41}: 2 runs x 3 buffers */
	assert_int_equal(fake_vx_writes_executed(), 1 * NB + 2 * NB);
	assert_int_equal(atomic_load(&p->wr_posted), atomic_load(&p->wr_done));
	assert_int_equal(count_msgs(KVXD_MSG_CHUNK_FREE), 2);
	assert_int_equal(count_msgs(KVXD_MSG_QP_QUIESCED), 0);
}

static void
test_chunks_wait_for_meta(void **state)
{
	uint32_t src[2] = {5, 6}, dst[2] = {7, 8};
	struct kvxd_room *d = decode_room(6, dst, 2), *p = track(calloc(1, sizeof(*p)));
	struct kvxd_meta *meta = calloc(1, sizeof(*meta) + 8);
	struct kvxd_msg m = {.type = KVXD_MSG_ROOM_META, .room = p, .ptr = meta};

	fill(5, 1);
	fill(6, 2);
	p->id = 6;
	p->role = p->fsm.role = KVX_ROOM_PREFILL;
	submit(p, 0, src, 2, 0, true); /* before the metadata */
	run();
	assert_null(find_event(p, KVX_ROOM_TRANSFERRING));
	assert_int_equal(fake_vx_writes_executed(), 0);
	*meta = (struct kvxd_meta){.gen = d->gen,
				   .token = d->token,
				   .nsrc = 1,
				   .addr = (uint64_t)(uintptr_t)E.dc.mem,
				   .rkey = E.dc.pool.rkey,
				   .page_size = PS,
				   .pool_npages = NP,
				   .nbufs = NB,
				   .npages = 2};
	memcpy(meta->pages, dst, 8);
	kvx_pcore_send(&E.pf.core, &m);
	run();
	assert_non_null(find_event(d, KVX_ROOM_SUCCESS));
	assert_non_null(find_event(p, KVX_ROOM_SUCCESS));
	assert_true(landed(7, 1) && landed(8, 2));
}

static void
test_wr_error_fails_room_and_quiesces_qp(void **state)
{
	uint32_t src[4] = {0, 1, 2, 3}, dst[4] = {4, 5, 6, 7};
	struct kvxd_room *d = decode_room(9, dst, 4), *p = prefill_room(d, dst, 4);
	const struct kvxd_msg *ev;
	char err[128];

	assert_int_equal(kvx_fault_arm_list("wr.corrupt_rkey:0", err, sizeof(err)), 0);
	submit(p, 0, src, 4, 0, true);
	run();
	ev = get_event(p, KVX_ROOM_FAILED);
	assert_non_null(reason_has(ev, "remote access"));
	assert_int_equal(ev->error, -EIO);
	/* the failure is pushed to the decode endpoint at once */
	assert_int_equal(count_msgs(KVXD_MSG_STATUS_PUSH), 1);
	/* every WR has its completion: the QP is quiescent and must be replaced */
	assert_int_equal(atomic_load(&p->wr_posted), atomic_load(&p->wr_done));
	assert_int_equal(count_msgs(KVXD_MSG_QP_QUIESCED), 1);
	assert_null(find_event(d, KVX_ROOM_SUCCESS));
	assert_int_equal(fake_vx_writes_executed(), 0);
}

static void
test_error_counts_until_siblings_flush(void **state)
{
	uint32_t src[4] = {0, 2, 4, 6}, dst[4] = {1, 3, 5, 7}; /* 4 runs x 3 buffers = 12 WRs */
	struct kvxd_room *d = decode_room(11, dst, 4), *p = prefill_room(d, dst, 4);

	fake_vx_hold(true);
	submit(p, 0, src, 4, 0, true);
	run();
	assert_int_equal(fake_vx_held(E.pf.qpc->qp), 12);
	assert_int_equal(atomic_load(&p->wr_posted) - atomic_load(&p->wr_done), 12);
	assert_int_equal(fake_vx_release(E.pf.qpc->qp, 3), 3);
	run();
	assert_int_equal(atomic_load(&p->wr_posted) - atomic_load(&p->wr_done), 9);
	/* one errored WR: the room fails, its WRs stay counted until the siblings flush */
	assert_int_equal(fake_vx_fail_next(E.pf.qpc->qp, KVX_VX_WC_RETRY_EXC_ERR), 0);
	run();
	assert_non_null(find_event(p, KVX_ROOM_FAILED));
	assert_int_equal(atomic_load(&p->wr_posted), atomic_load(&p->wr_done));
	assert_int_equal(count_msgs(KVXD_MSG_QP_QUIESCED), 1);
	fake_vx_hold(false);
}

static void
test_chunk_for_failed_room_is_skipped(void **state)
{
	uint32_t src[2] = {0, 1}, dst[2] = {2, 3};
	struct kvxd_room *d = decode_room(12, dst, 2), *p = prefill_room(d, dst, 2);
	struct kvxd_msg f = {.type = KVXD_MSG_ROOM_FAIL, .room = p, .error = -ECANCELED};
	uint64_t posted;

	snprintf(f.reason, sizeof(f.reason), "test");
	run();
	kvx_pcore_send(&E.pf.core, &f);
	run();
	assert_non_null(find_event(p, KVX_ROOM_FAILED));
	posted = atomic_load(&p->wr_posted);
	submit(p, 0, src, 2, 0, true);
	run();
	assert_int_equal(atomic_load(&p->wr_posted), posted);
	assert_int_equal(count_msgs(KVXD_MSG_CHUNK_FREE), 1);
	assert_int_equal(fake_vx_writes_executed(), 0);
}

static void
test_chunk_beyond_room_fails_cleanly(void **state)
{
	uint32_t src[4] = {0, 1, 2, 3}, dst[2] = {2, 3};
	struct kvxd_room *d = decode_room(13, dst, 2), *p = prefill_room(d, dst, 2);
	const struct kvxd_msg *ev;

	submit(p, 0, src, 4, 0, true);
	run();
	ev = get_event(p, KVX_ROOM_FAILED);
	assert_int_equal(ev->error, -EINVAL);
	assert_non_null(reason_has(ev, "beyond"));
	assert_int_equal(fake_vx_writes_executed(), 0);
	assert_int_equal(count_msgs(KVXD_MSG_QP_QUIESCED), 0);
}

static void
test_stale_immediate_is_counted_not_applied(void **state)
{
	uint32_t dst[2] = {2, 3};
	struct kvxd_room *d = decode_room(14, dst, 2);
	struct kvx_vx_write w = {.laddr = (uint64_t)(uintptr_t)E.pf.mem,
				 .lkey = E.pf.pool.lkey,
				 .len = 8,
				 .raddr = (uint64_t)(uintptr_t)E.dc.mem,
				 .rkey = E.dc.pool.rkey,
				 .with_imm = true,
				 .imm = d->token | 3}; /* source 3 of a 1-source room */
	struct kvxd_wr *wr = &E.pf.qpc->wrs[E.pf.qpc->sq_depth - 1];
	int posted;

	w.wr_id = (uint64_t)(uintptr_t)wr;
	wr->room = d;
	kvx_vx->post_write_chain(E.pf.qpc->qp, &w, 1, &posted);
	E.pf.qpc->sq_used++;
	atomic_fetch_add(&d->wr_posted, 1); /* the send completion lands on this room */
	run();
	assert_null(find_event(d, KVX_ROOM_SUCCESS));
	assert_int_equal(atomic_load(&E.dc.core.st.bad_imm), 1);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_room_success_and_merge, setup, teardown),
		cmocka_unit_test_setup_teardown(test_chunks_wait_for_meta, setup, teardown),
		cmocka_unit_test_setup_teardown(test_wr_error_fails_room_and_quiesces_qp, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_error_counts_until_siblings_flush, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_chunk_for_failed_room_is_skipped, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_chunk_beyond_room_fails_cleanly, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_stale_immediate_is_counted_not_applied, setup,
						teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
