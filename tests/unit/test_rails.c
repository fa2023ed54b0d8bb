/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Two rails (RDMA devices) per node between real control cores on the fake verbs: "a" decodes,
 * "b" prefills.  A session has a QP per core on every rail; a pool is registered on every rail
 * and a ROOM_META carries its key on each; a room's WRITEs go round robin over the rails in
 * KVXD_STRIPE_BYTES pieces, each under the keys of its own rail (the fake refuses a key of
 * another device); the room's last WRITE, the one with the immediate that tells decode it is
 * whole, goes only once every other WRITE of the room completed on every rail; an error on
 * one rail fails the rooms that had WRITEs there, drained once nothing of theirs is in flight on
 * any rail; the session carries on over the other rail and is replaced, once nothing is in
 * flight, after a backoff, to try the failed rail again.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "control/engine.h"
#include "control/kvxd.h"
#include "control/loop.h"
#include "control/peer.h"
#include "control/peer_io.h"
#include "control/rooms.h"
#include "core/fault.h"

#include "nodes_harness.h"

#define A N[0]
#define B N[1]
#define PS (32u << 10) /* two pages per striped WRITE (KVXD_STRIPE_BYTES) */
#define NP 32
#define SRC 16 /* b's source pages; a's destination pages are 0.. */
#define ROOM_PAGES 16

static struct kvxd_pool pool[MAX_NODES];
static uint8_t *mem[MAX_NODES];

static int
setup(void **state)
{
	static const char *const names[] = {"a", "b"};

	(void)state;
	harness_rails = 2;
	nodes_setup(2, names);
	for (int i = 0; i < 2; i++)
		node_pool_init(&N[i], &pool[i], &mem[i], PS, NP);
	kvxd_peer_admin(&A, "b", "resume");
	PUMP_UNTIL(node_ready(&A, "b") && node_ready(&B, "a"));
	pump_ms(2); /* the cores took their QPs */
	return 0;
}

static int
teardown(void **state)
{
	(void)state;
	fake_vx_hold(false);
	for (int i = 0; i < 2; i++)
		nodes_remove_rooms(&N[i]);
	for (int i = 0; i < 2; i++)
		node_pool_fini(&pool[i], mem[i]);
	nodes_teardown();
	harness_rails = 1;
	return 0;
}

/* a's decode room id from b, destination pages 0..n-1. */
static struct kvxd_room *
open_room(uint64_t id, uint32_t n)
{
	char names[1][KVX_NAME_MAX] = {{0}};
	uint32_t pages[NP];

	snprintf(names[0], sizeof(names[0]), "b");
	for (uint32_t i = 0; i < n; i++)
		pages[i] = i;
	assert_true(kvxd_decode_room_open(&A, -1, id, &pool[0], pages, n,
					  (const char(*)[KVX_NAME_MAX])names, 1) > 0);
	return kvxd_room_find(&A, id, 0, KVX_ROOM_DECODE);
}

static struct kvxd_room *
prefill_room(uint64_t id)
{
	return kvxd_room_find(&B, id, 0, KVX_ROOM_PREFILL);
}

/* The polling core of the room b submitted last (its QPs and counters are that core's). */
static int b_core;

/* b writes room id's chunk of n pages from destination page first, its pages
 * SRC+first..SRC+first+n-1 (filled with a pattern of id); last: the room's last chunk. */
static void
submit_part(uint64_t id, uint32_t first, uint32_t n, bool last)
{
	struct kvxd_msg m = {.type = KVXD_MSG_CHUNK};
	struct kvxd_chunk *ch;
	struct kvxd_room *r;

	for (uint64_t i = 0; i < (uint64_t)n * PS; i++)
		mem[1][(uint64_t)(SRC + first) * PS + i] = (uint8_t)(id * 31 + i / 4093 + first);
	PUMP_UNTIL(prefill_room(id) &&
		   kvxd_room_state(prefill_room(id)) >= KVX_ROOM_WAITING_FOR_INPUT);
	r = prefill_room(id);
	ch = kvxd_chunk_alloc(&B, n);
	assert_non_null(ch);
	*ch = (struct kvxd_chunk){
		.pool = &pool[1], .npages = n, .dst_offset = first, .nbufs = 1, .last = last};
	for (uint32_t i = 0; i < n; i++)
		ch->pages[i] = SRC + first + i;
	atomic_fetch_add(&pool[1].refs, 1);
	m.room = &r->pc;
	m.ptr = ch;
	b_core = r->pc.core;
	assert_int_equal(kvx_pcore_send(&B.cores[r->pc.core], &m), 0);
}

/* b writes room id's one chunk, its pages SRC..SRC+n-1. */
static void
submit(uint64_t id, uint32_t n)
{
	submit_part(id, 0, n, true);
}

/* Both sides' engines close room id (r: a's decode room). */
static void
close_room(struct kvxd_room *d, uint64_t id)
{
	struct kvxd_room *p = prefill_room(id);

	assert_non_null(p);
	PUMP_UNTIL(kvxd_room_removable(p));
	kvxd_room_remove(&A, d);
	kvxd_room_remove(&B, p);
	pump_ms(2);
}

/* b's QP to a on rail k (one polling core: lane k); the test fails if the session is gone. */
static struct kvx_vx_qp *
b_qp(int k)
{
	struct kvxd_qpc *q = peer_of(&B, "a")->qpc[kvxd_lane(&B, b_core, k)];

	assert_non_null(q);
	return q->qp;
}

static void
test_session_has_a_qp_on_every_rail(void **state)
{
	(void)state;
	for (int i = 0; i < 2; i++) {
		struct kvxd_peer *p = peer_of(&N[i], i ? "a" : "b");

		assert_int_equal(N[i].nrails, 2);
		for (int c = 0; c < N[i].ncores; c++) {
			assert_int_equal(N[i].cores[c].nrails, 2);
			for (int k = 0; k < 2; k++) {
				assert_non_null(p->qpc[kvxd_lane(&N[i], c, k)]);
				assert_int_equal(p->qpc[kvxd_lane(&N[i], c, k)]->rail, k);
				assert_ptr_equal(N[i].cores[c].qpc_by_peer[p->idx][k],
						 p->qpc[kvxd_lane(&N[i], c, k)]);
			}
		}
	}
	/* and a pool has a key on each rail */
	assert_int_not_equal(pool[0].rkey[0], pool[0].rkey[1]);
}

/* A room's WRITEs go over both rails, under each rail's keys, and its bytes all land. */
static void
test_room_striped_over_both_rails(void **state)
{
	struct kvxd_room *r;
	uint64_t w0 = fake_vx_dev_writes(B.rails[0].dev), w1 = fake_vx_dev_writes(B.rails[1].dev);

	(void)state;
	r = open_room(1, ROOM_PAGES);
	submit(1, ROOM_PAGES);
	PUMP_UNTIL(kvxd_room_state(r) == KVX_ROOM_SUCCESS);
	assert_memory_equal(mem[0], mem[1] + (uint64_t)SRC * PS, (size_t)ROOM_PAGES * PS);
	/* 16 pages of 32 KiB: 8 WRITEs of 64 KiB, four on each rail */
	assert_int_equal(fake_vx_dev_writes(B.rails[0].dev) - w0, 4);
	assert_int_equal(fake_vx_dev_writes(B.rails[1].dev) - w1, 4);
	assert_int_equal(atomic_load(&B.cores[b_core].st.rail_wrs[0]), 4);
	assert_int_equal(atomic_load(&B.cores[b_core].st.rail_wrs[1]), 4);
	assert_int_equal(atomic_load(&B.cores[b_core].st.rail_bytes[1]), 4ull * 2 * PS);
	close_room(r, 1);
}

/* Each rail ends the room on its own: b's last WRITE on each rail carries an immediate, each
 * saying there are two, and neither waits for the other rail (all eight WRITEs go at once).  a
 * counts the room whole only once both came, each behind its own rail's WRITEs: decode never
 * hears "whole" while a rail still carries the room's bytes. */
static void
test_every_rail_ends_its_own_writes(void **state)
{
	struct kvxd_core_stats *st;
	struct kvxd_room *r;
	uint64_t imm0;
	int held;

	(void)state;
	fake_vx_hold(true);
	r = open_room(2, ROOM_PAGES);
	submit(2, ROOM_PAGES);
	st = &B.cores[b_core].st;
	PUMP_UNTIL(fake_vx_held(b_qp(0)) + fake_vx_held(b_qp(1)) == 8);
	imm0 = atomic_load(&A.cores[r->pc.core].st.recv_imm);
	held = fake_vx_held(b_qp(0));
	assert_int_equal(fake_vx_release(b_qp(0), held), held);
	PUMP_UNTIL(atomic_load(&A.cores[r->pc.core].st.recv_imm) == imm0 + 1);
	pump_ms(5);
	/* rail 0's immediate came: rail 1 still has the room's WRITEs, and its immediate is on
	 * the last of them */
	assert_int_equal(kvxd_room_state(r), KVX_ROOM_TRANSFERRING);
	for (held = fake_vx_held(b_qp(1)); held > 1; held--) {
		assert_int_equal(fake_vx_release(b_qp(1), 1), 1);
		pump_ms(2);
		assert_int_equal(kvxd_room_state(r), KVX_ROOM_TRANSFERRING);
	}
	assert_int_equal(fake_vx_release(b_qp(1), 1), 1);
	PUMP_UNTIL(kvxd_room_state(r) == KVX_ROOM_SUCCESS);
	assert_memory_equal(mem[0], mem[1] + (uint64_t)SRC * PS, (size_t)ROOM_PAGES * PS);
	assert_int_equal(atomic_load(&A.cores[r->pc.core].st.bad_imm), 0);
	assert_int_equal(atomic_load(&st->imm_held), 0);
	assert_int_equal(atomic_load(&st->imm_split), 1);
	fake_vx_hold(false);
	close_room(r, 2);
}

/* The room's last chunk goes on one rail, its earlier chunk went on both: the other rail's
 * WRITEs are ended by a zero-length WRITE_WITH_IMM behind them, and the room is whole only once
 * the WRITEs of both rails landed (rail 1's are held while the last chunk goes). */
static void
test_last_chunk_on_one_rail_ends_both(void **state)
{
	struct kvxd_room *r;
	uint64_t w0, w1, imm0;

	(void)state;
	fake_vx_hold(true);
	r = open_room(11, ROOM_PAGES);
	submit_part(11, 0, ROOM_PAGES - 1, false); /* 8 WRITEs, four on each rail */
	PUMP_UNTIL(fake_vx_held(b_qp(0)) + fake_vx_held(b_qp(1)) == 8);
	assert_int_equal(fake_vx_release(b_qp(0), 4), 4);
	w0 = fake_vx_dev_writes(B.rails[0].dev);
	w1 = fake_vx_dev_writes(B.rails[1].dev);
	imm0 = atomic_load(&A.cores[r->pc.core].st.recv_imm);
	submit_part(11, ROOM_PAGES - 1, 1, true);
	/* one WRITE of one page on one rail, a zero-length one on the other: two immediates */
	PUMP_UNTIL(fake_vx_held(b_qp(0)) + fake_vx_held(b_qp(1)) == 6);
	fake_vx_release(b_qp(0), fake_vx_held(b_qp(0)));
	pump_ms(5);
	assert_int_not_equal(kvxd_room_state(r), KVX_ROOM_SUCCESS); /* rail 1's are held */
	fake_vx_release(b_qp(1), fake_vx_held(b_qp(1)));
	PUMP_UNTIL(kvxd_room_state(r) == KVX_ROOM_SUCCESS);
	assert_int_equal(fake_vx_dev_writes(B.rails[0].dev) - w0, 1);
	assert_int_equal(fake_vx_dev_writes(B.rails[1].dev) - w1, 5);
	assert_int_equal(atomic_load(&A.cores[r->pc.core].st.recv_imm), imm0 + 2);
	assert_int_equal(atomic_load(&B.cores[b_core].st.imm_split), 1);
	assert_memory_equal(mem[0], mem[1] + (uint64_t)SRC * PS, (size_t)ROOM_PAGES * PS);
	fake_vx_hold(false);
	close_room(r, 11);
}

/* b's core c is told which rails of its session to a are down, as a fence of a rail tells
 * every core (rails_send). */
static void
rails_down_to_core(int c, uint8_t rails_down)
{
	struct kvxd_msg m = {.type = KVXD_MSG_PEER_RAILS,
			     .peer = peer_of(&B, "a")->idx,
			     .rails_down = rails_down};

	assert_int_equal(kvx_pcore_send(&B.cores[c], &m), 0);
	pump_ms(2);
}

/* Rail 1 goes down after the room's WRITEs on it completed, before its last chunk: the last
 * chunk goes on rail 0, and the share's one immediate waits until every WRITE of the room
 * completed, then goes on a rail that is up. */
static void
test_share_of_a_rail_gone_down_waits(void **state)
{
	struct kvxd_room *r;
	uint64_t imm0;

	(void)state;
	fake_vx_hold(true);
	r = open_room(12, ROOM_PAGES);
	submit_part(12, 0, ROOM_PAGES - 1, false); /* four WRITEs on each rail */
	PUMP_UNTIL(fake_vx_held(b_qp(0)) + fake_vx_held(b_qp(1)) == 8);
	assert_int_equal(fake_vx_release(b_qp(1), 4), 4); /* rail 1's complete */
	pump_ms(2);
	rails_down_to_core(b_core, 2);
	imm0 = atomic_load(&A.cores[r->pc.core].st.recv_imm);
	submit_part(12, ROOM_PAGES - 1, 1, true);
	/* rail 0: the room's four earlier WRITEs, then its last; no immediate while they are
	 * held */
	PUMP_UNTIL(fake_vx_held(b_qp(0)) == 5);
	pump_ms(5);
	assert_int_equal(fake_vx_held(b_qp(0)), 5);
	assert_int_equal(fake_vx_held(b_qp(1)), 0);
	fake_vx_release(b_qp(0), 5);
	PUMP_UNTIL(fake_vx_held(b_qp(0)) == 1); /* now the immediate, zero-length */
	assert_int_not_equal(kvxd_room_state(r), KVX_ROOM_SUCCESS);
	fake_vx_release(b_qp(0), 1);
	PUMP_UNTIL(kvxd_room_state(r) == KVX_ROOM_SUCCESS);
	assert_int_equal(atomic_load(&A.cores[r->pc.core].st.recv_imm), imm0 + 1);
	assert_int_equal(atomic_load(&B.cores[b_core].st.imm_held), 1);
	assert_memory_equal(mem[0], mem[1] + (uint64_t)SRC * PS, (size_t)ROOM_PAGES * PS);
	rails_down_to_core(b_core, 0);
	fake_vx_hold(false);
	close_room(r, 12);
}

/* An error on one rail: the room fails on both sides, and b reports it drained (nothing of it
 * can still write) only once its WRITEs on both rails have their completions: the failed rail's
 * flushes, and the other rail's, which succeed. */
static void
test_rail_error_drains_every_rail(void **state)
{
	struct kvx_vx_qp *q0, *q1;
	struct kvxd_room *r, *p;

	(void)state;
	fake_vx_hold(true);
	fake_vx_defer_flush(true);
	r = open_room(3, ROOM_PAGES);
	submit(3, ROOM_PAGES);
	PUMP_UNTIL(fake_vx_held(b_qp(0)) + fake_vx_held(b_qp(1)) == 8);
	q0 = b_qp(0);
	q1 = b_qp(1);
	p = prefill_room(3);
	assert_int_equal(fake_vx_fail_next(q1, KVX_VX_WC_RETRY_EXC_ERR), 0);
	PUMP_UNTIL(kvxd_room_state(p) == KVX_ROOM_FAILED);
	pump_ms(5);
	assert_true(fake_vx_held(q0) > 0 && fake_vx_held(q1) > 0);
	assert_false(p->pc.drained_sent);
	fake_vx_flush(q1); /* the failed rail flushes: rail 0 still holds the room's WRITEs */
	pump_ms(5);
	assert_false(p->pc.drained_sent);
	fake_vx_release(q0, fake_vx_held(q0));
	PUMP_UNTIL(p->pc.drained_sent);
	PUMP_UNTIL(kvxd_room_state(r) == KVX_ROOM_RELEASED); /* a aborted it: b's failure */
	fake_vx_defer_flush(false);
	fake_vx_hold(false);
	kvxd_room_remove(&A, r);
	kvxd_room_remove(&B, p);
}

/* One rail's QP fails: the rooms with WRITEs on it fail, the session stays (same epoch) and the
 * next rooms go over the other rail only; after the backoff, once nothing is in flight (a room
 * whose WRITEs are, finishes first), the session is replaced and rooms use both rails again. */
static void
test_failed_rail_fenced_others_carry_on(void **state)
{
	struct kvxd_peer *pb = peer_of(&B, "a");
	struct kvxd_room *r, *p;
	uint32_t epoch = pb->epoch;
	uint64_t w0, w1;
	int held;

	(void)state;
	fake_vx_hold(true);
	r = open_room(5, ROOM_PAGES);
	submit(5, ROOM_PAGES);
	PUMP_UNTIL(fake_vx_held(b_qp(0)) + fake_vx_held(b_qp(1)) == 8);
	p = prefill_room(5);
	assert_int_equal(fake_vx_fail_next(b_qp(1), KVX_VX_WC_RETRY_EXC_ERR), 0);
	held = fake_vx_held(b_qp(0));
	fake_vx_release(b_qp(0), held);
	PUMP_UNTIL(p->pc.drained_sent);
	PUMP_UNTIL(kvxd_room_state(r) == KVX_ROOM_RELEASED); /* a aborted it: b's failure */
	fake_vx_hold(false);
	kvxd_room_remove(&A, r);
	kvxd_room_remove(&B, p);
	assert_int_equal(B.ctr.rails_fenced, 1);
	assert_int_equal(pb->rails_down, 2);
	assert_int_equal(pb->epoch, epoch); /* the session stays */
	assert_true(node_ready(&B, "a"));

	/* the next rooms: rail 0 only */
	w0 = fake_vx_dev_writes(B.rails[0].dev);
	w1 = fake_vx_dev_writes(B.rails[1].dev);
	for (uint64_t id = 6; id < 9; id++) {
		r = open_room(id, ROOM_PAGES);
		submit(id, ROOM_PAGES);
		PUMP_UNTIL(kvxd_room_state(r) == KVX_ROOM_SUCCESS);
		assert_memory_equal(mem[0], mem[1] + (uint64_t)SRC * PS, (size_t)ROOM_PAGES * PS);
		close_room(r, id);
	}
	assert_int_equal(fake_vx_dev_writes(B.rails[0].dev) - w0, 3 * 8);
	assert_int_equal(fake_vx_dev_writes(B.rails[1].dev), w1);
	assert_int_equal(pb->epoch, epoch);

	/* the backoff passes while a room's WRITEs are in flight: the replacement waits for
	 * them, and the room carries on over the new session */
	fake_vx_hold(true);
	r = open_room(10, ROOM_PAGES);
	submit(10, ROOM_PAGES);
	PUMP_UNTIL(fake_vx_held(b_qp(0)) == 8);
	pump_ms(5100);
	assert_int_equal(B.ctr.rail_retries, 0);
	assert_int_equal(pb->epoch, epoch);
	fake_vx_release(b_qp(0), 8);
	fake_vx_hold(false);
	PUMP_UNTIL(kvxd_room_state(r) == KVX_ROOM_SUCCESS);
	assert_memory_equal(mem[0], mem[1] + (uint64_t)SRC * PS, (size_t)ROOM_PAGES * PS);
	close_room(r, 10);
	PUMP_UNTIL(B.ctr.rail_retries == 1 && node_ready(&B, "a") && node_ready(&A, "b"));
	pump_ms(2);
	assert_true(pb->epoch > epoch);
	assert_int_equal(pb->rails_down, 0);
	w1 = fake_vx_dev_writes(B.rails[1].dev);
	r = open_room(9, ROOM_PAGES);
	submit(9, ROOM_PAGES);
	PUMP_UNTIL(kvxd_room_state(r) == KVX_ROOM_SUCCESS);
	assert_memory_equal(mem[0], mem[1] + (uint64_t)SRC * PS, (size_t)ROOM_PAGES * PS);
	assert_int_equal(fake_vx_dev_writes(B.rails[1].dev) - w1, 4);
	close_room(r, 9);
}

/* b's QP on rail 1 fails while WRITEs it sent are still in the network (in the VM: held in its
 * neighbour entry, unresolved while the link was cut, and sent once the link came back, seconds
 * later).  Its rooms fail and are acknowledged; a releases their pages and its engine reuses them.
 * a's end of that QP must be in error by then (b's BYE FENCE, ahead of the acknowledgements), so
 * that the late WRITEs land nowhere; the session stays.  Negative control: mutants
 * lane_fence_not_sent and lane_fence_ignored (the late WRITEs land in the reused pages). */
static void
test_failed_lane_fenced_at_the_peer_before_release(void **state)
{
	struct kvxd_peer *pa = peer_of(&A, "b"), *pb = peer_of(&B, "a");
	uint32_t epoch = pb->epoch;
	struct kvxd_room *r, *p;
	int lane;

	(void)state;
	fake_vx_hold(true);
	fake_vx_keep_late(true);
	r = open_room(12, ROOM_PAGES);
	submit(12, ROOM_PAGES);
	PUMP_UNTIL(fake_vx_held(b_qp(0)) + fake_vx_held(b_qp(1)) == 8);
	p = prefill_room(12);
	lane = kvxd_lane(&B, b_core, 1);
	assert_false(fake_vx_qp_in_error(pa->qpc[lane]->qp));
	assert_int_equal(fake_vx_fail_next(b_qp(1), KVX_VX_WC_RETRY_EXC_ERR), 0);
	fake_vx_release(b_qp(0), fake_vx_held(b_qp(0)));
	PUMP_UNTIL(kvxd_room_state(r) == KVX_ROOM_RELEASED);
	fake_vx_hold(false);
	memset(mem[0], 0x5a, (size_t)ROOM_PAGES * PS); /* a's engine reuses the released pages */
	fake_vx_deliver_late();
	for (size_t i = 0; i < (size_t)ROOM_PAGES * PS; i++)
		if (mem[0][i] != 0x5a)
			fail_msg("byte %zu of a released page changed: a late WRITE landed", i);
	assert_true(fake_vx_qp_in_error(pa->qpc[lane]->qp));
	assert_int_equal(B.ctr.lane_fences_asked, 1);
	assert_int_equal(A.ctr.lane_fences_made, 1);
	kvxd_room_remove(&A, r);
	kvxd_room_remove(&B, p);
	pump_ms(5);
	assert_true(node_ready(&A, "b") && node_ready(&B, "a"));
	assert_int_equal(pb->epoch, epoch); /* the session stays, on rail 0 */
	assert_int_equal(A.ctr.qp_replaced + B.ctr.qp_replaced, 0);
	fake_vx_keep_late(false);
}

/* Node n fences rail 1 towards p (its QP there failed); then b writes room id, its WRITEs held
 * in flight by the fake, while n's backoff passes.  a's decode room. */
static struct kvxd_room *
fence_with_writes_held(struct kvxd *n, struct kvxd_peer *p, uint64_t id)
{
	struct kvxd_room *r;

	assert_true(kvxd_peer_rail_failed(n, p, 1));
	assert_int_equal(p->rails_down, 2);
	fake_vx_hold(true);
	r = open_room(id, ROOM_PAGES);
	submit(id, ROOM_PAGES);
	PUMP_UNTIL(fake_vx_held(b_qp(0)) + fake_vx_held(b_qp(1)) == 8);
	pump_ms(5100);
	return r;
}

/* The node whose retry of a failed rail comes first may have nothing in flight itself (here a,
 * the decode side, fenced rail 1 on its own).  Replacing the session then would flush b's
 * WRITEs still in flight to it, failing their room.  a asks b to hold its WRITEs instead; b
 * replaces the session once none of its WRITEs is in flight, and the room carries on. */
static void
test_rail_retry_waits_for_the_peers_writes(void **state)
{
	struct kvxd_peer *pa = peer_of(&A, "b"), *pb = peer_of(&B, "a");
	uint32_t epoch = pa->epoch;
	struct kvxd_room *r;

	(void)state;
	r = fence_with_writes_held(&A, pa, 11); /* a's backoff passed, b's WRITEs in flight */
	assert_int_equal(A.ctr.rail_retries + B.ctr.rail_retries, 0);
	assert_int_equal(pa->epoch, epoch);
	assert_int_equal(A.ctr.rail_hold_asks, 1);
	assert_true(pb->rail_hold); /* b holds its next WRITEs to a */
	fake_vx_release(b_qp(0), fake_vx_held(b_qp(0)));
	fake_vx_release(b_qp(1), fake_vx_held(b_qp(1)));
	fake_vx_hold(false);
	PUMP_UNTIL(kvxd_room_state(r) == KVX_ROOM_SUCCESS &&
		   kvxd_room_state(prefill_room(11)) == KVX_ROOM_SUCCESS);
	assert_memory_equal(mem[0], mem[1] + (uint64_t)SRC * PS, (size_t)ROOM_PAGES * PS);
	close_room(r, 11);
	PUMP_UNTIL(node_ready(&A, "b") && node_ready(&B, "a"));
	assert_true(pa->epoch > epoch);
	/* b replaced it, once idle; the retry was a's */
	assert_int_equal(A.ctr.rail_hold_timeouts, 0);
	assert_int_equal(A.ctr.rail_retries, 1);
	assert_int_equal(B.ctr.rail_retries, 0);
	assert_int_equal(pa->rails_down, 0);
	assert_false(pb->rail_hold);
}

/* A peer asked to hold its WRITEs that does not replace the session in time (here its WRITEs
 * never complete) is replaced anyway, 2 s after the ask; what it had in flight flushes. */
static void
test_rail_retry_replaces_a_peer_that_does_not(void **state)
{
	struct kvxd_peer *pa = peer_of(&A, "b");
	uint32_t epoch = pa->epoch;
	struct kvxd_room *r;

	(void)state;
	r = fence_with_writes_held(&A, pa, 12);
	assert_int_equal(A.ctr.rail_hold_asks, 1);
	pump_ms(1800);
	assert_int_equal(A.ctr.rail_hold_timeouts, 0);
	assert_int_equal(pa->epoch, epoch);
	pump_ms(300);
	assert_int_equal(A.ctr.rail_hold_timeouts, 1);
	assert_int_equal(A.ctr.rail_retries, 1);
	fake_vx_hold(false);
	PUMP_UNTIL(kvx_room_state_terminal(kvxd_room_state(r)) && node_ready(&A, "b") &&
		   node_ready(&B, "a"));
	assert_true(pa->epoch > epoch);
	assert_int_equal(pa->rails_down, 0);
	assert_int_equal(pa->hold_asked_ms, 0);
}

/* Both nodes fenced the rail and their retries come at once: the asks cross, and the first node
 * that reads the other's replaces the session (its own WRITEs were held and done).  One
 * replacement, which tries each node's failed rail again; no core holds anything after it. */
static void
test_rail_retry_asks_crossing(void **state)
{
	struct kvxd_peer *pa = peer_of(&A, "b"), *pb = peer_of(&B, "a");
	uint32_t ea = pa->epoch, eb = pb->epoch;

	(void)state;
	assert_true(kvxd_peer_rail_failed(&A, pa, 1));
	assert_true(kvxd_peer_rail_failed(&B, pb, 1));
	pump_ms(5100);
	PUMP_UNTIL(node_ready(&A, "b") && node_ready(&B, "a") && pa->epoch > ea && pb->epoch > eb);
	pump_ms(5);
	assert_int_equal(pa->epoch, ea + 1); /* one replacement */
	assert_int_equal(A.ctr.rail_hold_asks, 1);
	assert_int_equal(B.ctr.rail_hold_asks, 1);
	assert_int_equal(A.ctr.rail_hold_timeouts + B.ctr.rail_hold_timeouts, 0);
	assert_int_equal(A.ctr.rail_retries, 1);
	assert_int_equal(B.ctr.rail_retries, 1);
	assert_int_equal(pa->rails_down | pb->rails_down, 0);
	assert_false(pa->rail_hold || pb->rail_hold || pa->hold_asked_ms || pb->hold_asked_ms);
	for (int c = 0; c < A.ncores; c++)
		assert_false(A.cores[c].hold[pa->idx]);
	for (int c = 0; c < B.ncores; c++)
		assert_false(B.cores[c].hold[pb->idx]);
}

/* The retrying node's own WRITEs that never end (here held by the fake for good) do not hold
 * its next WRITEs to the peer for ever: after the bound the session is replaced anyway, and what
 * was in flight flushes (its room fails, safely). */
static void
test_rail_retry_drain_is_bounded(void **state)
{
	struct kvxd_peer *pb = peer_of(&B, "a");
	uint32_t epoch = pb->epoch;
	struct kvxd_room *r;

	(void)state;
	r = fence_with_writes_held(&B, pb, 13);
	assert_true(pb->rail_hold);
	assert_int_equal(B.ctr.rail_hold_asks, 0); /* its own WRITEs are still in flight */
	pump_ms(1800);
	assert_int_equal(pb->epoch, epoch);
	pump_ms(300);
	assert_int_equal(B.ctr.rail_hold_timeouts, 1);
	assert_int_equal(B.ctr.rail_retries, 1);
	fake_vx_hold(false);
	PUMP_UNTIL(kvx_room_state_terminal(kvxd_room_state(r)) && node_ready(&A, "b") &&
		   node_ready(&B, "a"));
	assert_true(pb->epoch > epoch);
	assert_false(pb->rail_hold);
}

/* A peer whose HELLO does not say it answers HOLD_ASK (an older kvxd) is not asked: the session
 * is replaced as soon as nothing of ours is in flight, as before. */
static void
test_rail_retry_without_the_feature_replaces_at_once(void **state)
{
	struct kvxd_peer *pa = peer_of(&A, "b");
	uint32_t epoch = pa->epoch;

	(void)state;
	assert_true(pa->features & KVX_WIRE_FEAT_HOLD_ASK);
	pa->features &= ~KVX_WIRE_FEAT_HOLD_ASK;
	assert_true(kvxd_peer_rail_failed(&A, pa, 1));
	pump_ms(5100);
	PUMP_UNTIL(node_ready(&A, "b") && node_ready(&B, "a") && pa->epoch > epoch);
	assert_int_equal(A.ctr.rail_hold_asks, 0);
	assert_int_equal(A.ctr.rail_retries, 1);
	assert_int_equal(pa->rails_down, 0);
	assert_true(pa->features & KVX_WIRE_FEAT_HOLD_ASK); /* the new session's HELLO */
}

/* A ROOM_META with keys for fewer rails than the session has is a broken peer: the session
 * ends, nothing is posted under a missing key. */
static void
test_meta_short_of_rails_refused(void **state)
{
	struct kvx_wire_msg m = {.type = KVX_WIRE_ROOM_META};
	uint8_t le[4] = {0};
	uint64_t bad = B.ctr.frames_bad, posted = atomic_load(&B.cores[b_core].st.wr_posted);

	(void)state;
	m.u.room_meta = (struct kvx_wire_room_meta){
		.room = 77, .gen = 1, .token = 0x100, .nsrc = 1, .nrails = 1, .nreg = 1};
	m.u.room_meta.reg[0] = (struct kvx_wire_region){.addr = (uint64_t)(uintptr_t)mem[0],
							.rkey = {pool[0].rkey[0]},
							.page_size = PS,
							.pool_npages = NP,
							.nbufs = 1,
							.npages = 1,
							.pages_le = le};
	assert_int_equal(kvxd_peer_send(&A, peer_of(&A, "b"), &m), 0);
	PUMP_UNTIL(B.ctr.frames_bad == bad + 1);
	assert_null(prefill_room(77));
	assert_int_equal(atomic_load(&B.cores[b_core].st.wr_posted), posted);
	PUMP_UNTIL(node_ready(&A, "b") && node_ready(&B, "a"));
}

/* A rail whose QPs cannot be connected (rxe cannot resolve the peer over a cut link) does not
 * keep the session down: it comes up on the other rail, and rooms flow. */
static void
test_session_up_without_a_rail_it_cannot_connect(void **state)
{
	struct kvxd_room *r;
	int ok = 0;

	(void)state;
	kvxd_peer_admin(&A, "b", "pause");
	PUMP_UNTIL(!node_ready(&A, "b") && !node_ready(&B, "a"));
	pump_ms(600);
	fake_vx_fail_call("qp_to_rtr", 2, -ETIMEDOUT); /* the first node's rail-1 QP */
	kvxd_peer_admin(&A, "b", "resume");
	PUMP_UNTIL(node_ready(&A, "b") && node_ready(&B, "a"));
	assert_int_equal(A.ctr.rails_fenced + B.ctr.rails_fenced, 1);
	assert_true(peer_of(&A, "b")->rails_down == 2 || peer_of(&B, "a")->rails_down == 2);
	/* b's WRITEs to a QP of a's that never connected fail once and fence the rail there */
	for (uint64_t id = 20; id < 24; id++) {
		r = open_room(id, ROOM_PAGES);
		submit(id, ROOM_PAGES);
		PUMP_UNTIL(kvxd_room_state(r) == KVX_ROOM_SUCCESS ||
			   kvxd_room_state(r) == KVX_ROOM_RELEASED);
		if (kvxd_room_state(r) == KVX_ROOM_SUCCESS) {
			assert_memory_equal(mem[0], mem[1] + (uint64_t)SRC * PS,
					    (size_t)ROOM_PAGES * PS);
			ok++;
		}
		close_room(r, id);
	}
	assert_true(ok >= 3);
	assert_true(node_ready(&A, "b") && node_ready(&B, "a"));
}

/* A rail's GID set for the peer ([peer.*] gid's list, or its etcd entry) is exact: a QP_INFO
 * whose rail-1 GID is another host's is refused. */
static void
test_rail_gid_checked(void **state)
{
	struct kvx_config_peer *cp = &B.cfg.peers[peer_of(&B, "a")->idx];
	uint64_t bad = B.ctr.gid_mismatch;

	(void)state;
	kvxd_peer_admin(&A, "b", "pause");
	PUMP_UNTIL(!node_ready(&A, "b") && !node_ready(&B, "a"));
	cp->n_rail_gid = 1;
	memset(cp->rail_gid[0], 0, 16);
	cp->rail_gid[0][10] = cp->rail_gid[0][11] = 0xff;
	cp->rail_gid[0][15] = 9; /* ::ffff:0.0.0.9, not a's */
	kvxd_peer_admin(&A, "b", "resume");
	PUMP_UNTIL(B.ctr.gid_mismatch > bad);
	assert_false(node_ready(&B, "a"));
	cp->rail_gid[0][15] = 0; /* a's: the session comes up */
	PUMP_UNTIL(node_ready(&A, "b") && node_ready(&B, "a"));
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_session_has_a_qp_on_every_rail, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_room_striped_over_both_rails, setup, teardown),
		cmocka_unit_test_setup_teardown(test_every_rail_ends_its_own_writes, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_last_chunk_on_one_rail_ends_both, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_share_of_a_rail_gone_down_waits, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_rail_error_drains_every_rail, setup, teardown),
		cmocka_unit_test_setup_teardown(test_failed_lane_fenced_at_the_peer_before_release,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_failed_rail_fenced_others_carry_on, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_rail_retry_waits_for_the_peers_writes, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_rail_retry_replaces_a_peer_that_does_not,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_rail_retry_asks_crossing, setup, teardown),
		cmocka_unit_test_setup_teardown(test_rail_retry_drain_is_bounded, setup, teardown),
		cmocka_unit_test_setup_teardown(
			test_rail_retry_without_the_feature_replaces_at_once, setup, teardown),
		cmocka_unit_test_setup_teardown(test_meta_short_of_rails_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(test_rail_gid_checked, setup, teardown),
		cmocka_unit_test_setup_teardown(test_session_up_without_a_rail_it_cannot_connect,
						setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
