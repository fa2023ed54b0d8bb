/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Drain-aware acknowledgement on the prefill polling core (DESIGN.md 5, invariants 1-3): a
 * FAILED room reports DRAINED (and so may be ABORT_ACKed) only when every WR it posted has a
 * completion and the QP that carried its errored WRs has reaped a completion for every WR
 * posted on it.  Also built with each of the buggy_skip (the upstream seed: the skip path
 * clears the room's count wholesale), buggy_drain, buggy_any_session and buggy_global_drain
 * mutants (tests/mutants/), which must fail it.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/mbox.h"

/* Every mailbox put of the polling core goes through this hook: it counts the puts a full
 * mailbox refused, and (poison_retired) poisons a QP the moment its QP_RETIRED is in the outbox,
 * as the control core may free it from then on (test_retired_qp_not_read_after_its_last_flush). */
static int put_hook(struct kvx_mbox *b, const void *msg);
#define kvx_mbox_put(b, msg) put_hook(b, msg)
#include "verbs/pcore.c"
#undef kvx_mbox_put

#include "pcore_harness.h"

static bool poison_retired;
static struct kvxd_qpc *poisoned, poisoned_was;
static int put_failures; /* puts a full mailbox refused (the message was lost) */
static int loud_drained; /* DRAINED put loudly (kvx_mbox_put: wakes a parked control core) */

static int
put_hook(struct kvx_mbox *b, const void *msg)
{
	const struct kvxd_msg *m = msg;
	int rc = kvx_mbox_put(b, msg);

	put_failures += rc != 0;
	loud_drained += rc == 0 && m->type == KVXD_MSG_DRAINED;
	if (rc == 0 && poison_retired && !poisoned && m->type == KVXD_MSG_QP_RETIRED) {
		poisoned = m->qpc;
		poisoned_was = *m->qpc;
		memset(m->qpc, 0xa5, sizeof(*m->qpc)); /* freed and its memory reused */
	}
	return rc;
}

static int
drained(struct kvx_pcore_room *r)
{
	int n = 0;

	for (int i = 0; i < E.nout; i++)
		n += E.out[i].type == KVXD_MSG_DRAINED && E.out[i].room == r;
	return n;
}

static void
abort_prefill(struct kvx_pcore_room *p)
{
	struct kvxd_msg m = {.type = KVXD_MSG_ROOM_ABORT, .room = p, .error = -ECANCELED};

	snprintf(m.reason, sizeof(m.reason), "aborted by decode");
	assert_int_equal(kvx_pcore_send(&E.pf.core, &m), 0);
}

static uint64_t
outstanding(struct kvx_pcore_room *r)
{
	return atomic_load(&r->wr_posted) - atomic_load(&r->wr_done);
}

/* The upstream seed: a room with an unresolved errored WR group; a chunk dequeued after the
 * room went FAILED is skipped.  The count must stay where it was and nothing may be ACKed. */
static void
test_seed_stale_chunk_keeps_unresolved_count(void **state)
{
	uint32_t src[1] = {0}, dst[1] = {1}, src2[1] = {2};
	struct kvx_pcore_room *d = decode_room(20, dst, 1), *p = prefill_room(d, dst, 1);

	fake_vx_hold(true);
	fake_vx_defer_flush(true); /* the QP errs, but its WRs stay unresolved */
	submit(p, 0, src, 1, 0, false);
	run();
	assert_int_equal(outstanding(p), NB); /* one run, NB buffers */
	assert_int_equal(fake_vx_fail_next(E.pf.qpc->qp, KVX_VX_WC_REM_ACCESS_ERR), 0);
	run();
	assert_non_null(find_event(p, KVX_ROOM_FAILED));
	assert_int_equal(outstanding(p), NB - 1); /* the errored one completed, the rest not */
	submit(p, 1, src2, 1, 0, true);		  /* a stale chunk, dequeued after FAILED */
	abort_prefill(p);
	run();
	assert_int_equal(outstanding(p), NB - 1);
	assert_int_equal(drained(p), 0);
	/* once the QP flushes, every WR has its completion: now, and only now, DRAINED */
	fake_vx_flush(E.pf.qpc->qp);
	run();
	assert_int_equal(outstanding(p), 0);
	assert_int_equal(drained(p), 1);
	fake_vx_hold(false);
	fake_vx_defer_flush(false);
}

/* Siblings of an errored WR: another room's WRs on the same QP must flush before the errored
 * room may be ACKed, even when the errored room has nothing outstanding itself. */
static void
test_siblings_on_the_errored_qp_must_flush_first(void **state)
{
	uint32_t a_src[1] = {0}, a_dst[1] = {1}, b_src[3] = {2, 4, 6}, b_dst[3] = {3, 5, 7};
	struct kvx_pcore_room *da = decode_room(21, a_dst, 1), *pa = prefill_room(da, a_dst, 1);
	struct kvx_pcore_room *db = decode_room(22, b_dst, 3), *pb = prefill_room(db, b_dst, 3);

	fake_vx_hold(true);
	fake_vx_defer_flush(true);
	submit(pa, 0, a_src, 1, 0, true);
	submit(pb, 0, b_src, 3, 0, true);
	run();
	/* room a's NB WRs come first; the first fails, the rest of a's flush... */
	assert_int_equal(fake_vx_fail_next(E.pf.qpc->qp, KVX_VX_WC_RETRY_EXC_ERR), 0);
	for (int i = 1; i < NB; i++)
		assert_int_equal(fake_vx_fail_next(E.pf.qpc->qp, KVX_VX_WC_FLUSH_ERR), 0);
	abort_prefill(pa);
	run();
	assert_int_equal(outstanding(pa), 0);
	assert_true(outstanding(pb) > 0); /* ...but b's are still on the errored QP */
	assert_int_equal(drained(pa), 0);
	fake_vx_flush(E.pf.qpc->qp);
	run();
	assert_int_equal(outstanding(pb), 0);
	assert_int_equal(drained(pa), 1);
	fake_vx_hold(false);
	fake_vx_defer_flush(false);
}

/* A stuck QP (its WRs never complete) must not delay another room's ACK on another QP. */
static void
test_stuck_qp_does_not_delay_other_rooms(void **state)
{
	uint32_t src[1] = {0}, dst[1] = {1}, src2[1] = {2}, dst2[1] = {3};
	struct kvx_pcore_room *ds = decode_room(23, dst, 1), *ps = prefill_room(ds, dst, 1);
	struct kvx_pcore_room *dq = decode_room(24, dst2, 1), *pq;

	connect_second_pair();
	dq->src_peer[0] = 1; /* its source is the second peer */
	pq = prefill_room_peer(dq, dst2, 1, 1);
	fake_vx_hold(true);
	submit(ps, 0, src, 1, 0, true); /* stuck: never released */
	run();
	fake_vx_hold(false);
	submit(pq, 0, src2, 1, 0, false);
	abort_prefill(pq);
	abort_prefill(ps);
	run();
	assert_int_equal(drained(pq), 1);
	assert_int_equal(drained(ps), 0);
	assert_int_equal(outstanding(ps), NB);
	/* release the stuck one: it drains too */
	fake_vx_release(E.pf.qpc->qp, NB);
	run();
	assert_int_equal(drained(ps), 1);
}

/* Fan-out: a room feeding two decode endpoints (on peers 0 and 1) has errored WRs on both
 * QPs.  It may be ACKed only once both QPs are quiescent: here its own WRs all completed, but
 * another room's WRs still sit on the second errored QP, so it waits for that QP's flush too.
 * (err_qpc_first_only: only the first errored QP is awaited.) */
static void
test_fan_out_waits_for_every_errored_qp(void **state)
{
	uint32_t src[1] = {0}, dst[1] = {1}, q_src[1] = {2}, q_dst[1] = {3}, r_src[1] = {4};
	struct kvx_pcore_room *d0 = decode_room(30, dst, 1), *d1 = decode_room(31, dst, 1);
	struct kvx_pcore_room *p, *dq = decode_room(32, q_dst, 1), *q;
	struct kvx_pcore_room *dr = decode_room(35, q_dst, 1), *r;
	struct kvxd_meta *m1;
	struct kvxd_msg mm = {.type = KVXD_MSG_ROOM_META};

	connect_second_pair();
	d1->src_peer[0] = 1;
	p = prefill_room_peer(d0, dst, 1, 0);
	m1 = make_meta(d1, dst, 1, 1);
	m1->dst_rank = 1; /* the second endpoint: peer 1, rank 1 */
	mm.room = p;
	mm.ptr = m1;
	assert_int_equal(kvx_pcore_send(&E.pf.core, &mm), 0);
	dq->src_peer[0] = 1;
	q = prefill_room_peer(dq, q_dst, 1, 1); /* another room on the second QP */
	r = prefill_room_peer(dr, q_dst, 1, 0); /* and one on the first */
	fake_vx_hold(true);
	fake_vx_defer_flush(true);
	submit_to(p, 0, src, 1, 0, true, 2);
	run();
	submit(q, 0, q_src, 1, 0, true); /* after p's on the second QP */
	submit(r, 0, r_src, 1, 0, true); /* after p's on the first */
	run();
	assert_int_equal(outstanding(p), 2 * NB);
	/* every WR of p fails: the first on each QP with an error, the rest flushed */
	assert_int_equal(fake_vx_fail_next(E.pf.qpc->qp, KVX_VX_WC_REM_ACCESS_ERR), 0);
	for (int i = 1; i < NB; i++)
		assert_int_equal(fake_vx_fail_next(E.pf.qpc->qp, KVX_VX_WC_FLUSH_ERR), 0);
	run();
	assert_int_equal(fake_vx_fail_next(E.pf.qpc2->qp, KVX_VX_WC_RETRY_EXC_ERR), 0);
	for (int i = 1; i < NB; i++)
		assert_int_equal(fake_vx_fail_next(E.pf.qpc2->qp, KVX_VX_WC_FLUSH_ERR), 0);
	abort_prefill(p);
	run();
	assert_non_null(find_event(p, KVX_ROOM_FAILED));
	assert_int_equal(outstanding(p), 0);
	assert_true(outstanding(q) > 0 && outstanding(r) > 0); /* both QPs still busy */
	assert_int_equal(drained(p), 0);
	fake_vx_flush(E.pf.qpc->qp); /* the first QP is quiescent: the second still is not */
	run();
	assert_int_equal(outstanding(r), 0);
	assert_int_equal(drained(p), 0);
	fake_vx_flush(E.pf.qpc2->qp);
	run();
	assert_int_equal(outstanding(q), 0);
	assert_int_equal(drained(p), 1);
	fake_vx_hold(false);
	fake_vx_defer_flush(false);
}

/* Fan-out, the other order: the first QP's errored WRs have all completed (it is quiescent)
 * while the room's WRs to the second destination are still in flight.  The control core
 * retires the first QP (QP_REMOVE, QP_RETIRED) and frees it; when the second destination's
 * WRs complete, the room drains without looking at the retired QP.  Here the retired QP is
 * poisoned instead of freed (as reuse of its memory would), so a drain check that still reads
 * it never sees it quiescent (err_qpc_kept: the set keeps quiescent QPs, a use after free). */
static void
test_fan_out_drain_forgets_a_retired_qp(void **state)
{
	uint32_t src[1] = {0}, dst[1] = {1};
	struct kvx_pcore_room *d0 = decode_room(33, dst, 1), *d1 = decode_room(34, dst, 1), *p;
	struct kvxd_msg mm = {.type = KVXD_MSG_ROOM_META}, rm = {.type = KVXD_MSG_QP_REMOVE};
	struct kvxd_meta *m1;
	struct kvxd_qpc *old, saved;

	connect_second_pair();
	d1->src_peer[0] = 1;
	p = prefill_room_peer(d0, dst, 1, 0);
	m1 = make_meta(d1, dst, 1, 1);
	m1->dst_rank = 1;
	mm.room = p;
	mm.ptr = m1;
	assert_int_equal(kvx_pcore_send(&E.pf.core, &mm), 0);
	fake_vx_hold(true);
	fake_vx_defer_flush(true);
	submit_to(p, 0, src, 1, 0, true, 2);
	run();
	assert_int_equal(outstanding(p), 2 * NB);
	assert_int_equal(fake_vx_fail_next(E.pf.qpc->qp, KVX_VX_WC_REM_ACCESS_ERR), 0);
	for (int i = 1; i < NB; i++)
		assert_int_equal(fake_vx_fail_next(E.pf.qpc->qp, KVX_VX_WC_FLUSH_ERR), 0);
	fake_vx_flush(E.pf.qpc->qp); /* its receives too: the QP is quiescent */
	run();
	assert_non_null(find_event(p, KVX_ROOM_FAILED));
	assert_int_equal(outstanding(p), NB); /* the second destination's */
	assert_int_equal(count_msgs(KVXD_MSG_QP_QUIESCED), 1);
	/* the control core replaces the connection: the old QP is retired */
	old = E.pf.qpc;
	rm.qpc = old;
	assert_int_equal(kvx_pcore_send(&E.pf.core, &rm), 0);
	run();
	assert_int_equal(count_msgs(KVXD_MSG_QP_RETIRED), 1);
	saved = *old;
	memset(old, 0xa5, sizeof(*old)); /* freed and reused: nothing may read it any more */
	fake_vx_release(E.pf.qpc2->qp, NB);
	run();
	assert_int_equal(outstanding(p), 0);
	*old = saved; /* the harness frees it */
	assert_int_equal(drained(p), 1);
	fake_vx_hold(false);
	fake_vx_defer_flush(false);
}

/* A connection replacement retires a QP (the control core moves it to ERR and sends
 * QP_REMOVE) while a room's WRITEs are on it: the earlier ones landed unsignalled, its
 * receives flushed first, and the flush of the room's last WR is the completion that both
 * fails the room and makes the QP quiescent, so the core sends QP_RETIRED in that same
 * completion.  The control core may free the QP from then on (the hook poisons it at once):
 * the room's drain check must have dropped it before.  rooms_after_retire (the check after the
 * QP_RETIRED) reads the freed QP, never sees it quiescent, and the room is never DRAINED: the
 * use after free kvxd hit under ASan when a rail came back (test_rail_cut_unresolved). */
static void
test_retired_qp_not_read_after_its_last_flush(void **state)
{
	uint32_t src[1] = {0}, dst[1] = {1};
	struct kvx_pcore_room *d = decode_room(35, dst, 1), *p = prefill_room(d, dst, 1);
	struct kvxd_qpc *q = E.pf.qpc;
	struct kvxd_msg rm = {.type = KVXD_MSG_QP_REMOVE, .qpc = q};

	fake_vx_hold(true);
	fake_vx_defer_flush(true);
	submit(p, 0, src, 1, 0, true);
	run();
	assert_int_equal(outstanding(p), NB);
	assert_int_equal(fake_vx_release(q->qp, NB - 1), NB - 1); /* unsignalled: no CQE */
	run();
	assert_int_equal(outstanding(p), NB);
	/* the control core replaces the connection */
	assert_int_equal(kvx_vx->qp_to_err(q->qp), 0);
	assert_int_equal(kvx_pcore_send(&E.pf.core, &rm), 0);
	run();
	fake_vx_flush_recv(q->qp);
	run();
	assert_int_equal(count_msgs(KVXD_MSG_QP_RETIRED), 0); /* its last WR is still out */
	poison_retired = true;
	fake_vx_flush(q->qp);
	run();
	poison_retired = false;
	assert_int_equal(count_msgs(KVXD_MSG_QP_RETIRED), 1);
	assert_ptr_equal(poisoned, q);
	*q = poisoned_was; /* the harness frees it */
	poisoned = NULL;
	assert_non_null(find_event(p, KVX_ROOM_FAILED));
	assert_int_equal(outstanding(p), 0);
	assert_int_equal(drained(p), 1);
	fake_vx_hold(false);
	fake_vx_defer_flush(false);
}

/* An errored QP that becomes quiescent lets every room waiting for it drain at once (one
 * recheck of the drain list): up to a send queue's worth of rooms per QP, more than the
 * outbox reserve of an iteration.  Their DRAINED go only into the outbox beyond that reserve;
 * the others are told at the next iterations, as the control core empties the outbox, each
 * once (drain_unbounded: all at once, past the reserve, and past a full outbox's end at
 * scale, where out_put would drop them). */
#define DR_ROOMS 20
#define DR_ROOM_LEFT 5 /* outbox slots beyond the reserve when the QP quiesces */

static void
test_drain_recheck_keeps_the_outbox_reserve(void **state)
{
	struct kvx_pcore_room *p[DR_ROOMS];
	struct kvxd_msg filler = {.type = KVXD_MSG_PEER_IDLE, .peer = -1}, m;
	int told = 0, fill;

	put_failures = 0;
	fake_vx_hold(true);
	fake_vx_defer_flush(true);
	for (int i = 0; i < DR_ROOMS; i++) {
		uint32_t src[1] = {(uint32_t)i}, dst[1] = {(uint32_t)i};
		struct kvx_pcore_room *d = decode_room(200 + (uint64_t)i, dst, 1);

		p[i] = prefill_room(d, dst, 1);
		submit(p[i], 0, src, 1, 0, true);
	}
	run();
	assert_int_equal(fake_vx_fail_next(E.pf.qpc->qp, KVX_VX_WC_RETRY_EXC_ERR), 0);
	for (int i = 0; i < DR_ROOMS; i++)
		abort_prefill(p[i]);
	run(); /* every room FAILED, waiting for the QP's flush */
	for (int i = 0; i < DR_ROOMS; i++)
		assert_int_equal(drained(p[i]), 0);
	/* the outbox as full as an iteration may start with, and DR_ROOM_LEFT more */
	fill = (int)kvx_mbox_free_count(E.pf.core.outbox) - OUTBOX_RESERVE - DR_ROOM_LEFT;
	for (int i = 0; i < fill; i++)
		assert_int_equal(kvx_mbox_put(E.pf.core.outbox, &filler), 0);
	fake_vx_flush(E.pf.qpc->qp);
	for (int i = 0; i < 8; i++)
		kvx_pcore_poll_once(&E.pf.core); /* what the outbox lets it do */
	while (kvx_mbox_get_burst(E.pf.core.outbox, &m, 1) == 1) {
		told += m.type == KVXD_MSG_DRAINED;
		if (m.type != KVXD_MSG_PEER_IDLE)
			E.out[E.nout++] = m;
	}
	assert_true(told >= 1);
	assert_true(told <= DR_ROOM_LEFT);
	assert_int_equal(put_failures, 0);
	run(); /* the outbox empties: the rest are told */
	for (int i = 0; i < DR_ROOMS; i++)
		assert_int_equal(drained(p[i]), 1);
	fake_vx_hold(false);
	fake_vx_defer_flush(false);
}

/* A room that fails with more chunks waiting than the outbox holds (its metadata never came):
 * every chunk still goes back to the control core (CHUNK_FREE), in batches the outbox can
 * take, none dropped (dead_all_at_once: all at once, and the outbox overflows). */
#define MANY_CHUNKS 9000

static void
test_failed_room_gives_every_chunk_back(void **state)
{
	struct kvx_pcore_room *p = calloc(1, sizeof(*p));
	struct kvxd_msg fm = {.type = KVXD_MSG_ROOM_FAIL, .error = -ETIMEDOUT};
	struct kvxd_msg out[64];
	uint32_t src[1] = {0};
	int freed = 0, idle = 0;

	p->id = 40;
	p->role = p->fsm.role = KVX_ROOM_PREFILL;
	assert_int_equal(
		kvx_room_table_add_sub(E.by_id, &p->by_id, p->id, kvxd_room_sub(0, p->role)), 0);
	for (int k = 0; k < MANY_CHUNKS; k++) {
		struct kvxd_chunk *ch = calloc(1, sizeof(*ch) + 4);
		struct kvxd_msg m = {.type = KVXD_MSG_CHUNK, .room = p, .ptr = ch};

		*ch = (struct kvxd_chunk){
			.pool = &E.pf.pool, .index = (uint32_t)k, .npages = 1, .nbufs = NB};
		memcpy(ch->pages, src, 4);
		assert_int_equal(kvx_pcore_send(&E.pf.core, &m), 0);
		while (kvx_mbox_free_count(E.pf.core.inbox) < 64) /* it takes 8 per iteration */
			kvx_pcore_poll_once(&E.pf.core);
	}
	while (kvx_pcore_poll_once(&E.pf.core))
		;
	assert_int_equal(kvx_mbox_free_count(E.pf.core.outbox), 8192); /* they only wait */
	snprintf(fm.reason, sizeof(fm.reason), "waiting timeout");
	fm.room = p;
	assert_int_equal(kvx_pcore_send(&E.pf.core, &fm), 0);
	/* the control core lags: the core runs several iterations before anything is read */
	for (int i = 0; i < 200; i++)
		kvx_pcore_poll_once(&E.pf.core);
	while (idle < 3) {
		int n, work = kvx_pcore_poll_once(&E.pf.core);

		while ((n = kvx_mbox_get_burst(E.pf.core.outbox, out, 64)) > 0) {
			for (int i = 0; i < n; i++)
				if (out[i].type == KVXD_MSG_CHUNK_FREE) {
					free(out[i].ptr);
					freed++;
				}
			work += n;
		}
		idle = work ? 0 : idle + 1;
	}
	/* the room leaves before the checks, so that a failure here leaves the harness whole */
	kvx_room_table_del(E.by_id, &p->by_id);
	free(p);
	assert_null(E.pf.core.dead_head);
	assert_int_equal(freed, MANY_CHUNKS);
}

/* A successful room drains at once when aborted late; a skipped chunk for it changes nothing. */
static void
test_abort_after_success_drains_at_once(void **state)
{
	uint32_t src[2] = {0, 1}, dst[2] = {2, 3};
	struct kvx_pcore_room *d = decode_room(25, dst, 2), *p = prefill_room(d, dst, 2);

	submit(p, 0, src, 2, 0, true);
	run();
	assert_non_null(find_event(p, KVX_ROOM_SUCCESS));
	abort_prefill(p);
	run();
	assert_null(find_event(p, KVX_ROOM_FAILED)); /* SUCCESS is terminal */
	assert_int_equal(drained(p), 1);
}

/* A SUCCESS room's DRAINED does not wake the control core: nothing waits on it, the room's end
 * went to its engine already, and the engine's close wakes the control core anyway (mutant
 * drained_success_loud: one more thread switch per room).  A FAILED room's DRAINED does wake
 * it: its ABORT_ACK waits on it (mutant drained_failed_quiet). */
static void
test_success_drain_is_quiet_failure_drain_is_not(void **state)
{
	uint32_t src[1] = {0}, dst[1] = {1}, src2[1] = {2}, dst2[1] = {3};
	struct kvx_pcore_room *d = decode_room(27, dst, 1), *p = prefill_room(d, dst, 1);
	struct kvx_pcore_room *d2 = decode_room(28, dst2, 1), *p2 = prefill_room(d2, dst2, 1);

	(void)state;
	loud_drained = 0;
	submit(p, 0, src, 1, 0, true);
	run();
	assert_non_null(find_event(p, KVX_ROOM_SUCCESS));
	assert_int_equal(drained(p), 1);
	assert_int_equal(loud_drained, 0);
	assert_true(p->drained_quiet);

	fake_vx_hold(true);
	submit(p2, 0, src2, 1, 0, true);
	run();
	assert_int_equal(fake_vx_fail_next(E.pf.qpc->qp, KVX_VX_WC_REM_ACCESS_ERR), 0);
	run(); /* the error, then its siblings' flush */
	fake_vx_hold(false);
	assert_non_null(find_event(p2, KVX_ROOM_FAILED));
	assert_int_equal(drained(p2), 1);
	assert_int_equal(loud_drained, 1);
	assert_false(p2->drained_quiet);
}

/* The control core that aborts a room whose DRAINED went quietly (the room succeeded as the
 * abort came: the control core parked before the DRAINED was put, and its ABORT_ACK waits on
 * it) is woken when the room takes the abort (mutant drained_abort_no_nudge: it slept until
 * its next tick, up to 20 ms more on decode's abort -> release).  The same for ROOM_FAIL. */
static void
test_abort_of_a_quietly_drained_room_wakes_the_control_core(void **state)
{
	uint32_t src[1] = {0}, dst[1] = {1}, src2[1] = {2}, dst2[1] = {3};
	struct kvx_pcore_room *d = decode_room(29, dst, 1), *p = prefill_room(d, dst, 1);
	struct kvx_pcore_room *d2 = decode_room(30, dst2, 1), *p2 = prefill_room(d2, dst2, 1);
	struct kvxd_msg f = {.type = KVXD_MSG_ROOM_FAIL, .room = p2, .error = -ECONNRESET};
	uint64_t wakes;

	(void)state;
	submit(p, 0, src, 1, 0, true);
	submit(p2, 0, src2, 1, 0, true);
	run();
	assert_true(p->drained_quiet && p2->drained_quiet);
	kvx_mbox_park_prepare(E.pf.core.outbox); /* the control core parks */
	wakes = kvx_mbox_wakes(E.pf.core.outbox);
	abort_prefill(p);
	run();
	assert_null(find_event(p, KVX_ROOM_FAILED)); /* SUCCESS is terminal: nothing new is put */
	assert_int_equal(kvx_mbox_wakes(E.pf.core.outbox), wakes + 1);
	assert_false(p->drained_quiet);
	kvx_mbox_park_done(E.pf.core.outbox, true);

	kvx_mbox_park_prepare(E.pf.core.outbox);
	snprintf(f.reason, sizeof(f.reason), "its engine went away");
	assert_int_equal(kvx_pcore_send(&E.pf.core, &f), 0);
	run();
	assert_int_equal(kvx_mbox_wakes(E.pf.core.outbox), wakes + 2);
	assert_false(p2->drained_quiet);
	kvx_mbox_park_done(E.pf.core.outbox, true);
	assert_int_equal(drained(p), 1); /* once each */
	assert_int_equal(drained(p2), 1);
}

/* A room's metadata is bound to the peer session it came on: after the connection is
 * replaced, nothing the prefill still holds for the room is written until decode re-issues it
 * (otherwise a room decode aborted and released could be written through the new session). */
static void
test_metadata_is_bound_to_its_session(void **state)
{
	uint32_t src[2] = {0, 1}, dst[2] = {2, 3};
	struct kvx_pcore_room *d = decode_room(26, dst, 2), *p = prefill_room(d, dst, 2);
	struct kvxd_msg rm = {.type = KVXD_MSG_QP_REMOVE, .qpc = E.pf.qpc};
	struct kvxd_meta *meta = calloc(1, sizeof(*meta) + 8);
	struct kvxd_msg mm = {.type = KVXD_MSG_ROOM_META, .room = p, .ptr = meta};
	struct kvxd_qpc *old_pf = E.pf.qpc, *old_dc = E.dc.qpc;

	run(); /* p knows its metadata (session 1) */
	/* the connection is replaced: session 2 */
	kvx_vx->qp_to_err(old_pf->qp);
	assert_int_equal(kvx_pcore_send(&E.pf.core, &rm), 0);
	run();
	connect_qpcs(0, 2, &E.pf.qpc, &E.dc.qpc);
	E.pf.qpc2 = old_pf; /* the harness destroys both pairs */
	E.dc.qpc2 = old_dc;
	submit(p, 0, src, 2, 0, true);
	run();
	assert_int_equal(fake_vx_writes_executed(), 0);
	assert_null(find_event(d, KVX_ROOM_SUCCESS));
	/* decode re-issues the room on session 2: now it goes */
	*meta = *p->metas[0];
	meta->reg[0].pages = meta->pages; /* its own pages, not the old meta's */
	meta->epoch = 2;
	d->meta_epoch[0] = 2; /* what the control core records as it sends it */
	memcpy(meta->pages, dst, 8);
	assert_int_equal(kvx_pcore_send(&E.pf.core, &mm), 0);
	run();
	assert_non_null(find_event(d, KVX_ROOM_SUCCESS));
	assert_int_equal(fake_vx_writes_executed(), NB);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_seed_stale_chunk_keeps_unresolved_count, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_siblings_on_the_errored_qp_must_flush_first,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_fan_out_waits_for_every_errored_qp, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_fan_out_drain_forgets_a_retired_qp, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_retired_qp_not_read_after_its_last_flush,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_drain_recheck_keeps_the_outbox_reserve, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_failed_room_gives_every_chunk_back, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_stuck_qp_does_not_delay_other_rooms, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_abort_after_success_drains_at_once, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_metadata_is_bound_to_its_session, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_success_drain_is_quiet_failure_drain_is_not,
						setup, teardown),
		cmocka_unit_test_setup_teardown(
			test_abort_of_a_quietly_drained_room_wakes_the_control_core, setup,
			teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
