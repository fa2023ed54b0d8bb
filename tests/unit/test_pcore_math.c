/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The chunk-to-WR arithmetic at its extremes, on the fake verbs: WR counts and byte lengths are
 * 64-bit products checked against explicit limits.  Before: `nruns * nbufs` wrapped to 0 for a
 * pool of 2^20 buffers (then 2^32 WRs were built: a NULL dereference in kvxd), and
 * `run * page_size` wrapped to 0 for 256 pages of 16 MiB (the room reported SUCCESS with the
 * destination never written).  Negative control: the wr_count_32bit mutant must fail this.
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

#include "verbs/pcore.h"

#include "pcore_harness.h"

/* A prefill room with a hand-made geometry (no memory behind it beyond the harness pools: the
 * fake refuses remote writes outside the registered MR, and nothing local is read unless a
 * write executes). */
static struct kvx_pcore_room *
huge_room(uint64_t id, struct kvxd_pool *src, uint32_t page_size, uint32_t pool_npages,
	  uint32_t nbufs, const uint32_t *dst, uint32_t npages, struct kvx_pcore_room **dec)
{
	struct kvx_pcore_room *d = decode_room(id, dst, npages), *r = track(calloc(1, sizeof(*r)));
	struct kvxd_meta *meta = make_meta(d, dst, npages, 0);
	struct kvxd_msg m = {.type = KVXD_MSG_ROOM_META, .room = r, .ptr = meta};

	*src = E.pf.pool;
	src->page_size = meta->reg[0].page_size = page_size;
	src->npages = meta->reg[0].pool_npages = pool_npages;
	src->nbufs = meta->reg[0].nbufs = nbufs;
	r->id = id;
	r->role = r->fsm.role = KVX_ROOM_PREFILL;
	assert_int_equal(kvx_room_table_add_sub(E.by_id, &r->by_id, id, kvxd_room_sub(0, r->role)),
			 0);
	assert_int_equal(kvx_pcore_send(&E.pf.core, &m), 0);
	*dec = d;
	return r;
}

static void
submit_pool(struct kvx_pcore_room *r, struct kvxd_pool *pool, const uint32_t *src, uint32_t npages)
{
	struct kvxd_chunk *ch = calloc(1, sizeof(*ch) + 4 * (size_t)npages);
	struct kvxd_msg m = {.type = KVXD_MSG_CHUNK, .room = r, .ptr = ch};

	*ch = (struct kvxd_chunk){
		.pool = pool, .npages = npages, .nbufs = pool->nbufs, .last = true};
	memcpy(ch->pages, src, 4 * (size_t)npages);
	assert_int_equal(kvx_pcore_send(&E.pf.core, &m), 0);
}

/* 4096 single-page runs x 2^20 buffers = 2^32 WRs: never refused for its size, never a count
 * that wraps: it goes in parts of at most a send queue, the first part's WRs address buffer 0
 * and the fake refuses them (the harness's MR is small), so the room fails on the device's
 * answer, not on arithmetic. */
static void
test_wr_count_does_not_wrap(void **state)
{
	static uint32_t src[4096], dst[4096];
	static struct kvxd_pool pool;
	struct kvx_pcore_room *d, *p;

	for (uint32_t i = 0; i < 4096; i++) {
		src[i] = i;
		dst[i] = 4095 - i; /* no two consecutive: one run per page */
	}
	p = huge_room(30, &pool, 4096, 4096, 1u << 20, dst, 4096, &d);
	submit_pool(p, &pool, src, 4096);
	run();
	assert_int_equal(atomic_load(&E.pf.core.st.chunks_too_big), 0);
	assert_int_equal(atomic_load(&E.pf.core.st.wr_posted), E.pf.qpc->sq_depth);
	assert_int_equal(atomic_load(&E.pf.core.st.chunk_parts), 1);
	assert_non_null(reason_has(get_event(p, KVX_ROOM_FAILED), "RDMA write failed"));
	assert_int_equal(atomic_load(&p->wr_posted), atomic_load(&p->wr_done));
	assert_null(find_event(d, KVX_ROOM_SUCCESS));
}

/* 256 contiguous pages of 16 MiB = 4 GiB in one buffer: four 1 GiB WRITEs, every byte
 * accounted (the fake refuses them: the harness's MR is small), never a 0-byte WRITE that
 * "succeeds". */
static void
test_write_length_does_not_wrap(void **state)
{
	static uint32_t src[256], dst[256];
	static struct kvxd_pool pool;
	struct kvx_pcore_room *d, *p;

	for (uint32_t i = 0; i < 256; i++)
		src[i] = dst[i] = i;
	p = huge_room(31, &pool, 16u << 20, 256, 1, dst, 256, &d);
	submit_pool(p, &pool, src, 256);
	run();
	assert_int_equal(atomic_load(&E.pf.core.st.bytes_posted), 4ull << 30);
	assert_int_equal(atomic_load(&E.pf.core.st.wr_posted), 4);
	assert_null(find_event(d, KVX_ROOM_SUCCESS));
	assert_non_null(find_event(p, KVX_ROOM_FAILED));
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_wr_count_does_not_wrap, setup, teardown),
		cmocka_unit_test_setup_teardown(test_write_length_does_not_wrap, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
