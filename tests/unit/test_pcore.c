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

#include "verbs/pcore.h"

#include "pcore_harness.h"

static void
test_room_success_and_merge(void **state)
{
	uint32_t src[8] = {0, 1, 2, 3, 10, 11, 12, 13}, dst[8] = {20, 21, 22, 23, 30, 31, 40, 41};
	struct kvx_pcore_room *d, *p;

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

/* Selective signalling: one completion per chunk (its last WR); the WRs before it are retired
 * and credited by that completion, none early. */
static void
test_one_completion_per_chunk(void **state)
{
	uint32_t src[4] = {0, 2, 4, 6}, dst[4] = {1, 3, 5, 7}; /* 4 runs x 3 buffers = 12 WRs */
	struct kvx_pcore_room *d = decode_room(20, dst, 4), *p = prefill_room(d, dst, 4);
	uint64_t cqes = fake_vx_send_cqes();

	for (int i = 0; i < 4; i++)
		fill(src[i], (uint8_t)(0x20 + i));
	submit(p, 0, src, 4, 0, true);
	run();
	assert_non_null(find_event(p, KVX_ROOM_SUCCESS));
	assert_non_null(find_event(d, KVX_ROOM_SUCCESS));
	for (int i = 0; i < 4; i++)
		assert_true(landed(dst[i], (uint8_t)(0x20 + i)));
	assert_int_equal(fake_vx_writes_executed(), 12);
	assert_int_equal(fake_vx_send_cqes() - cqes, 1);
	assert_int_equal(atomic_load(&E.pf.core.st.wr_credited), 11);
	assert_int_equal(atomic_load(&p->wr_posted), atomic_load(&p->wr_done));
	assert_int_equal(E.pf.qpc->sq_used, 0);
}

/* A chunk that needs more WRs than the send queue holds (32 scattered pages x 3 buffers = 96
 * WRs, send queue 64) goes in parts over several iterations, each part's last WR signalled,
 * and every byte lands (before: refused, the room FAILED). */
static void
test_chunk_larger_than_the_send_queue_goes_in_parts(void **state)
{
	uint32_t src[32], dst[32];
	struct kvx_pcore_room *d, *p;
	uint64_t cqes = fake_vx_send_cqes();

	for (uint32_t i = 0; i < 32; i++) {
		src[i] = 2 * i; /* no two consecutive: one WR per page and buffer */
		dst[i] = 63 - 2 * i;
		fill(src[i], (uint8_t)i);
	}
	d = decode_room(21, dst, 32);
	p = prefill_room(d, dst, 32);
	submit(p, 0, src, 32, 0, true);
	run();
	assert_non_null(find_event(p, KVX_ROOM_SUCCESS));
	assert_non_null(find_event(d, KVX_ROOM_SUCCESS));
	for (uint32_t i = 0; i < 32; i++)
		assert_true(landed(dst[i], (uint8_t)i));
	assert_int_equal(fake_vx_writes_executed(), 96);
	assert_int_equal(atomic_load(&E.pf.core.st.chunk_parts), 1); /* 64, then 32 */
	assert_int_equal(fake_vx_send_cqes() - cqes, 2);
	assert_int_equal(atomic_load(&E.pf.core.st.chunks_too_big), 0);
	assert_int_equal(atomic_load(&p->wr_posted), 96);
	assert_int_equal(atomic_load(&p->wr_posted), atomic_load(&p->wr_done));
	assert_int_equal(count_msgs(KVXD_MSG_CHUNK_FREE), 1);
}

/* Scattered source pages whose destination pages are consecutive go in one WRITE per buffer,
 * gathered from one scatter-gather entry per source run (9, 10, 11 are one entry), every byte
 * in its place (before: one WRITE per page). */
static void
test_scattered_sources_gather_into_one_write(void **state)
{
	uint32_t src[8] = {40, 3, 17, 9, 10, 11, 50, 1}, dst[8];
	struct kvx_pcore_room *d, *p;

	for (uint32_t i = 0; i < 8; i++) {
		dst[i] = 4 + i;
		fill(src[i], (uint8_t)(0x40 + 3 * i));
	}
	d = decode_room(22, dst, 8);
	p = prefill_room(d, dst, 8);
	submit(p, 0, src, 8, 0, true);
	run();
	assert_non_null(find_event(p, KVX_ROOM_SUCCESS));
	assert_non_null(find_event(d, KVX_ROOM_SUCCESS));
	for (uint32_t i = 0; i < 8; i++)
		assert_true(landed(dst[i], (uint8_t)(0x40 + 3 * i)));
	assert_int_equal(fake_vx_writes_executed(), NB);
	assert_int_equal(atomic_load(&E.pf.core.st.sge_posted), 6 * NB);
	assert_int_equal(atomic_load(&E.pf.core.st.bytes_posted), 8ull * PS * NB);
}

/* A gather never exceeds the QP's scatter-gather limit: with 4 entries, 10 scattered source
 * pages to 10 consecutive destination pages take 3 WRITEs per buffer (4 + 4 + 2), every byte in
 * its place (the device refuses a WR with more entries than the QP was created with). */
static void
test_gather_is_capped_by_the_qp_limit(void **state)
{
	uint32_t src[10], dst[10];
	struct kvx_pcore_room *d, *p;

	fake_vx_set_max_sge(4);
	E.pf.qpc->max_sge = 4;
	for (uint32_t i = 0; i < 10; i++) {
		src[i] = 60 - 3 * i;
		dst[i] = 20 + i;
		fill(src[i], (uint8_t)(0x70 + i));
	}
	d = decode_room(23, dst, 10);
	p = prefill_room(d, dst, 10);
	submit(p, 0, src, 10, 0, true);
	run();
	assert_non_null(find_event(p, KVX_ROOM_SUCCESS));
	assert_non_null(find_event(d, KVX_ROOM_SUCCESS));
	for (uint32_t i = 0; i < 10; i++)
		assert_true(landed(dst[i], (uint8_t)(0x70 + i)));
	assert_int_equal(fake_vx_writes_executed(), 3 * NB);
	assert_int_equal(atomic_load(&E.pf.core.st.sge_posted), 10 * NB);
}

static void
test_chunks_wait_for_meta(void **state)
{
	uint32_t src[2] = {5, 6}, dst[2] = {7, 8};
	struct kvx_pcore_room *d = decode_room(6, dst, 2), *p = track(calloc(1, sizeof(*p)));
	struct kvxd_msg m = {.type = KVXD_MSG_ROOM_META, .room = p};

	fill(5, 1);
	fill(6, 2);
	p->id = 6;
	p->role = p->fsm.role = KVX_ROOM_PREFILL;
	submit(p, 0, src, 2, 0, true); /* before the metadata */
	run();
	assert_null(find_event(p, KVX_ROOM_TRANSFERRING));
	assert_int_equal(fake_vx_writes_executed(), 0);
	m.ptr = make_meta(d, dst, 2, 0);
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
	struct kvx_pcore_room *d = decode_room(9, dst, 4), *p = prefill_room(d, dst, 4);
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
	assert_int_equal(count_msgs(KVXD_MSG_QP_ERRORED), 1);
	assert_true(msg_index(KVXD_MSG_QP_ERRORED) < msg_index(KVXD_MSG_DRAINED));
}

/* The room's last WR fails after the others completed (unsignalled): its one error completion
 * retires them all and leaves nothing outstanding, in the poll itself.  The errored QP is still
 * reported first (QP_ERRORED), so that the control core has the peer fence its end of the QP
 * before the room's ACK can go (DESIGN.md 5, rule 6), and before the QP quiesces. */
static void
test_errored_qp_reported_before_its_rooms_drain(void **state)
{
	uint32_t src[4] = {0, 1, 2, 3}, dst[4] = {4, 5, 6, 7};
	struct kvx_pcore_room *d = decode_room(13, dst, 4), *p = prefill_room(d, dst, 4);

	(void)state;
	fake_vx_hold(true);
	submit(p, 0, src, 4, 0, true);
	run();
	assert_int_equal(fake_vx_held(E.pf.qpc->qp), 3);
	assert_int_equal(fake_vx_release(E.pf.qpc->qp, 2), 2);
	assert_int_equal(fake_vx_fail_next(E.pf.qpc->qp, KVX_VX_WC_RETRY_EXC_ERR), 0);
	run();
	assert_non_null(find_event(p, KVX_ROOM_FAILED));
	assert_int_equal(count_msgs(KVXD_MSG_QP_ERRORED), 1);
	assert_int_equal(count_msgs(KVXD_MSG_DRAINED), 1);
	assert_true(msg_index(KVXD_MSG_QP_ERRORED) < msg_index(KVXD_MSG_DRAINED));
	assert_true(msg_index(KVXD_MSG_QP_ERRORED) < msg_index(KVXD_MSG_QP_QUIESCED));
	fake_vx_hold(false);
}

static void
test_error_counts_until_siblings_flush(void **state)
{
	uint32_t src[4] = {0, 2, 4, 6}, dst[4] = {1, 3, 5, 7}; /* 4 runs x 3 buffers = 12 WRs */
	struct kvx_pcore_room *d = decode_room(11, dst, 4), *p = prefill_room(d, dst, 4);

	fake_vx_hold(true);
	submit(p, 0, src, 4, 0, true);
	run();
	assert_int_equal(fake_vx_held(E.pf.qpc->qp), 12);
	assert_int_equal(atomic_load(&p->wr_posted) - atomic_load(&p->wr_done), 12);
	assert_int_equal(fake_vx_release(E.pf.qpc->qp, 3), 3);
	run();
	/* unsignalled: they completed silently, and stay counted until a completion retires
	 * them (never credited early) */
	assert_int_equal(atomic_load(&p->wr_posted) - atomic_load(&p->wr_done), 12);
	/* one errored WR: its completion retires the three before it (they succeeded); the room
	 * fails, its WRs stay counted until the siblings flush */
	assert_int_equal(fake_vx_fail_next(E.pf.qpc->qp, KVX_VX_WC_RETRY_EXC_ERR), 0);
	run();
	assert_int_equal(atomic_load(&E.pf.core.st.wr_credited), 3);
	assert_non_null(find_event(p, KVX_ROOM_FAILED));
	assert_int_equal(atomic_load(&p->wr_posted), atomic_load(&p->wr_done));
	assert_int_equal(count_msgs(KVXD_MSG_QP_QUIESCED), 1);
	fake_vx_hold(false);
}

/* A room whose one chunk (4 runs x 3 buffers = 12 WRs, one signalled) meets a QP that refuses
 * count WRs from the nth (fake_vx_refuse_wr), run until the cores are idle. */
static struct kvx_pcore_room *
refused_room(uint64_t id, int nth, int count, int err)
{
	uint32_t src[4] = {0, 2, 4, 6}, dst[4] = {1, 3, 5, 7};
	struct kvx_pcore_room *d = decode_room(id, dst, 4), *p = prefill_room(d, dst, 4);

	fake_vx_refuse_wr(nth, count, err);
	submit(p, 0, src, 4, 0, true);
	run();
	return p;
}

/* A QP that takes a list in part (bad_wr mid-list): the WRs it took run, the last of them
 * unsignalled, so no completion would ever retire them and the room would never drain (its
 * source pages never given back).  A signalled marker posted after them retires them all. */
static void
test_list_taken_in_part_is_retired_by_a_marker(void **state)
{
	struct kvx_pcore_room *p = refused_room(14, 12, 1, -EINVAL); /* its last, signalled WR */

	assert_int_equal(get_event(p, KVX_ROOM_FAILED)->error, -EINVAL);
	assert_int_equal(atomic_load(&p->wr_posted), 11);
	assert_int_equal(atomic_load(&p->wr_done), 11);
	assert_int_equal(count_msgs(KVXD_MSG_DRAINED), 1);
	assert_int_equal(E.pf.qpc->sq_used, 0);
	/* the QP is still in RTS, its receives posted: it goes to ERR to quiesce */
	assert_int_equal(count_msgs(KVXD_MSG_QP_STUCK), 1);
	assert_int_equal(count_msgs(KVXD_MSG_QP_QUIESCED), 0);
	assert_int_equal(kvx_vx->qp_to_err(E.pf.qpc->qp), 0); /* the control core's answer */
	run();
	assert_int_equal(count_msgs(KVXD_MSG_QP_QUIESCED), 1);
}

/* A list refused from its first WR: nothing was taken, but the QP, in RTS with its receives
 * posted, would never quiesce: it goes to ERR (QP_STUCK) and is replaced. */
static void
test_refused_list_moves_the_qp_to_error(void **state)
{
	struct kvx_pcore_room *p = refused_room(16, 1, 1, -ENOMEM);

	assert_int_equal(get_event(p, KVX_ROOM_FAILED)->error, -ENOMEM);
	assert_int_equal(atomic_load(&p->wr_posted), 0);
	assert_int_equal(count_msgs(KVXD_MSG_DRAINED), 1);
	assert_int_equal(count_msgs(KVXD_MSG_QP_STUCK), 1);
	assert_int_equal(kvx_vx->qp_to_err(E.pf.qpc->qp), 0);
	run();
	assert_int_equal(count_msgs(KVXD_MSG_QP_QUIESCED), 1);
}

/* The marker refused too: the QP goes to ERR (QP_STUCK), where the marker is taken and
 * flushed, and the WRs before it are retired then; nothing is credited before. */
static void
test_refused_marker_waits_for_the_error_state(void **state)
{
	struct kvx_pcore_room *p = refused_room(15, 12, 1000, -ENOMEM);

	assert_non_null(find_event(p, KVX_ROOM_FAILED));
	assert_int_equal(count_msgs(KVXD_MSG_QP_STUCK), 1);
	assert_int_equal(atomic_load(&p->wr_posted) - atomic_load(&p->wr_done), 11);
	assert_int_equal(count_msgs(KVXD_MSG_DRAINED), 0);
	assert_int_equal(count_msgs(KVXD_MSG_QP_QUIESCED), 0);
	/* the control core's answer to QP_STUCK; in ERR the device takes WRs (and flushes them) */
	assert_int_equal(kvx_vx->qp_to_err(E.pf.qpc->qp), 0);
	fake_vx_refuse_wr(0, 0, 0);
	run();
	assert_int_equal(atomic_load(&p->wr_posted), atomic_load(&p->wr_done));
	assert_int_equal(count_msgs(KVXD_MSG_DRAINED), 1);
	assert_int_equal(count_msgs(KVXD_MSG_QP_QUIESCED), 1);
}

/* An iteration takes at most KVXD_BATCH ready rooms (the outbox reserve counts on it), and the
 * rooms it took that still wait (their peer not connected) go behind the rest: a room ready
 * behind KVXD_BATCH + 1 waiting ones moves in the iteration after next, not never. */
static void
test_waiting_rooms_never_hold_back_the_rest(void **state)
{
	uint32_t src[1] = {0}, dst[1] = {1};
	struct kvx_pcore_room *d, *p;

	fill(0, 0x5a);
	for (uint32_t i = 0; i <= KVXD_BATCH; i++) {
		d = decode_room(100 + i, dst, 1);
		p = prefill_room_peer(d, dst, 1, 1); /* peer 1: not connected */
		submit(p, 0, src, 1, 0, true);
	}
	run();
	d = decode_room(99, dst, 1);
	p = prefill_room(d, dst, 1);
	submit(p, 0, src, 1, 0, true);
	kvx_pcore_poll_once(&E.pf.core); /* takes p in, visits KVXD_BATCH waiting rooms */
	assert_int_equal(atomic_load(&p->wr_posted), 0);
	kvx_pcore_poll_once(&E.pf.core);
	assert_int_not_equal(atomic_load(&p->wr_posted), 0);
	run();
	assert_non_null(find_event(p, KVX_ROOM_SUCCESS));
	assert_true(landed(1, 0x5a));
}

static void
test_chunk_for_failed_room_is_skipped(void **state)
{
	uint32_t src[2] = {0, 1}, dst[2] = {2, 3};
	struct kvx_pcore_room *d = decode_room(12, dst, 2), *p = prefill_room(d, dst, 2);
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
	struct kvx_pcore_room *d = decode_room(13, dst, 2), *p = prefill_room(d, dst, 2);
	const struct kvxd_msg *ev;

	submit(p, 0, src, 4, 0, true);
	run();
	ev = get_event(p, KVX_ROOM_FAILED);
	assert_int_equal(ev->error, -EINVAL);
	assert_non_null(reason_has(ev, "beyond"));
	assert_int_equal(fake_vx_writes_executed(), 0);
	assert_int_equal(count_msgs(KVXD_MSG_QP_QUIESCED), 0);
}

/* An unsignalled 8-byte WRITE_WITH_IMM from the prefill QP (peer 0, d's source) into d's
 * pages, outside the core's books: it borrows the QP's last WR slot (no test here fills the
 * send queue), and only a failure would complete it, on d. */
static void
post_raw_imm(struct kvx_pcore_room *d, uint32_t imm)
{
	struct kvx_vx_sge sg = {
		.addr = (uint64_t)(uintptr_t)E.pf.mem, .len = 8, .lkey = E.pf.pool.lkey[0]};
	struct kvx_vx_write w = {.sg = &sg,
				 .nsge = 1,
				 .raddr = (uint64_t)(uintptr_t)E.dc.mem,
				 .rkey = E.dc.pool.rkey[0],
				 .with_imm = true,
				 .imm = imm};
	struct kvxd_wr *wr = &E.pf.qpc->wrs[E.pf.qpc->sq_depth - 1];
	int posted;

	w.wr_id = (uint64_t)(uintptr_t)wr;
	wr->room = d;
	kvx_vx->post_write_chain(E.pf.qpc->qp, &w, 1, &posted);
	E.pf.qpc->sq_used++;
	atomic_fetch_add(&d->wr_posted, 1);
}

static void
test_stale_immediate_is_counted_not_applied(void **state)
{
	uint32_t dst[2] = {2, 3};
	struct kvx_pcore_room *d = decode_room(14, dst, 2);

	post_raw_imm(d, d->token | 3); /* source 3 of a 1-source room */
	run();
	assert_null(find_event(d, KVX_ROOM_SUCCESS));
	assert_int_equal(atomic_load(&E.dc.core.st.bad_imm), 1);
}

/* An immediate from the room's own source that says its share ends with more immediates than
 * the session has rails (one here): counted as bad, not taken, so it does not spoil the count of
 * the source's real immediate, which then completes the room. */
static void
test_immediate_beyond_the_rails_not_taken(void **state)
{
	uint32_t src[1] = {1}, dst[1] = {2};
	struct kvx_pcore_room *d = decode_room(18, dst, 1), *p;

	(void)state;
	post_raw_imm(d, d->token | 1u << KVXD_IMM_SRC_BITS); /* "two" */
	run();
	assert_null(find_event(d, KVX_ROOM_SUCCESS));
	p = prefill_room(d, dst, 1);
	submit(p, 0, src, 1, 0, true);
	run();
	assert_non_null(find_event(d, KVX_ROOM_SUCCESS));
	assert_int_equal(atomic_load(&E.dc.core.st.bad_imm), 1);
}

/* A WRITE_WITH_IMM carrying a room's token, from a peer that is not that room's source (it
 * learned or guessed the token): not credited.  Before: decode reported SUCCESS and handed the
 * pages back while the real source could still write.  Then the real source's counts. */
static void
test_immediate_from_another_peer_not_credited(void **state)
{
	uint32_t src[1] = {1}, dst[1] = {2};
	struct kvx_pcore_room *d = decode_room(15, dst, 1), *imposter, *p;

	connect_second_pair();
	imposter = prefill_room_peer(d, dst, 1, 1); /* peer 1, with d's token */
	submit(imposter, 0, src, 1, 0, true);
	run();
	assert_int_equal(fake_vx_writes_executed(), NB); /* its writes land (its own rkey) ... */
	assert_null(find_event(d, KVX_ROOM_SUCCESS));	 /* ... but prove nothing */
	assert_int_equal(atomic_load(&E.dc.core.st.imm_not_owner), 1);
	/* the real source (peer 0) is on its own room object on the prefill side */
	kvx_room_table_del(E.by_id, &imposter->by_id);
	p = prefill_room(d, dst, 1);
	submit(p, 0, src, 1, 0, true);
	run();
	assert_non_null(find_event(d, KVX_ROOM_SUCCESS));
}

/* An immediate for a room of another polling core (the token table is shared; the room's source
 * writes on the QP of the room's own core) arrives on this core's QP: not credited, and the
 * room, its state and its event ring (that core's alone) are left untouched. */
static void
test_immediate_on_another_core_not_credited(void **state)
{
	uint32_t src[1] = {1}, dst[1] = {2};
	struct kvx_pcore_room *d = decode_room(17, dst, 1), *p = prefill_room(d, dst, 1);

	d->core = E.dc.core.idx + 1; /* the room is core 1's */
	submit(p, 0, src, 1, 0, true);
	run();
	assert_null(find_event(d, KVX_ROOM_SUCCESS));
	assert_int_equal(d->src_done_mask, 0);
	assert_int_equal(atomic_load(&E.dc.core.st.imm_not_owner), 1);
}

/* The source's immediate from a session its ROOM_META did not go out on: not credited. */
static void
test_immediate_from_another_session_not_credited(void **state)
{
	uint32_t src[1] = {1}, dst[1] = {2};
	struct kvx_pcore_room *d = decode_room(16, dst, 1), *p = prefill_room(d, dst, 1);

	d->meta_epoch[0] = 2; /* decode re-issued it on session 2; the QPs are session 1's */
	submit(p, 0, src, 1, 0, true);
	run();
	assert_null(find_event(d, KVX_ROOM_SUCCESS));
	assert_int_equal(atomic_load(&E.dc.core.st.imm_not_owner), 1);
}

/* A dropped room goes back to the control core (ROOM_FREE) without waking it where it is
 * parked: only memory waits on it, and the control core's next wake-up takes it (mutant
 * room_free_loud). */
static void
test_room_free_wakes_no_control_core(void **state)
{
	uint32_t dst[1] = {3};
	struct kvx_pcore_room *d = decode_room(40, dst, 1);
	struct kvxd_msg m = {.type = KVXD_MSG_ROOM_DROP, .room = d};
	uint64_t wakes;

	(void)state;
	run(); /* its ROOM_OPEN */
	kvx_mbox_park_prepare(E.dc.core.outbox);
	wakes = kvx_mbox_wakes(E.dc.core.outbox);
	assert_int_equal(kvx_pcore_send(&E.dc.core, &m), 0);
	kvx_pcore_poll_once(&E.dc.core);
	assert_int_equal(kvx_mbox_wakes(E.dc.core.outbox), wakes);
	assert_false(kvx_mbox_empty(E.dc.core.outbox));
	kvx_mbox_park_done(E.dc.core.outbox, false);
	run();
	assert_int_equal(count_msgs(KVXD_MSG_ROOM_FREE), 1);
}

/* A polling core of two rails (fake0 and fake1), beside the harness's: its own setup and
 * teardown, so that a failed test still releases it. */
static struct kvxd_core park_core;
static struct kvx_vx_dev *park_dev1;

static int
setup_two_rails(void **state)
{
	struct kvx_config cfg = {.cq_depth = 64, .sq_depth = 64, .rq_depth = 64};
	struct kvx_vx_dev *devs[2];

	setup(state);
	assert_int_equal(kvx_vx->dev_open("fake1", 1, 1, &park_dev1), 0);
	devs[0] = E.dev;
	devs[1] = park_dev1;
	assert_int_equal(kvx_pcore_init(&park_core, 2, -1, devs, 2, &cfg, E.by_id, E.by_token), 0);
	return 0;
}

static int
teardown_two_rails(void **state)
{
	kvx_pcore_fini(&park_core);
	assert_int_equal(kvx_vx->dev_close(park_dev1), 0);
	return teardown(state);
}

/* A park arms a CQ only when it is not armed already: an armed CQ stays armed until a
 * completion raises its event, and each arm is a system call on rxe.  Two rails: a park that
 * took no event arms nothing more; after rail 1's event, the next park arms rail 1 alone; a CQ
 * whose event was taken is always armed again, or its next completion would wake nobody
 * (mutants park_rearms_all, park_never_rearms). */
static void
test_park_arms_only_the_cq_that_fired(void **state)
{
	struct kvxd_core *c = &park_core;
	uint64_t arms = fake_vx_cq_arms();

	(void)state;
	kvx_pcore_park(c); /* nothing comes: both armed, the wait ends at its bound */
	assert_int_equal(fake_vx_cq_arms(), arms + 2);
	kvx_pcore_park(c); /* both still armed: no call */
	assert_int_equal(fake_vx_cq_arms(), arms + 2);
	assert_true(fake_vx_cq_fire(c->cq[1])); /* a completion on rail 1 */
	kvx_pcore_park(c);			/* takes rail 1's event */
	assert_int_equal(fake_vx_cq_arms(), arms + 2);
	kvx_pcore_park(c); /* arms rail 1 again, not rail 0 */
	assert_int_equal(fake_vx_cq_arms(), arms + 3);
	/* both are armed: each raises its event */
	assert_true(fake_vx_cq_fire(c->cq[0]));
	assert_true(fake_vx_cq_fire(c->cq[1]));
	kvx_pcore_park(c); /* takes both */
	kvx_pcore_park(c); /* arms both */
	assert_int_equal(fake_vx_cq_arms(), arms + 5);
	assert_true(fake_vx_cq_fire(c->cq[0]));
	assert_true(fake_vx_cq_fire(c->cq[1]));
	kvx_pcore_park(c); /* takes both, arms nothing in the same call */
	assert_int_equal(fake_vx_cq_arms(), arms + 5);
}

/* A CQ whose arm failed is not taken for armed: the park does not sleep (nothing would wake it
 * for that rail) and the next park arms it (mutant park_arm_failure_trusted). */
static void
test_park_arms_again_after_a_failed_arm(void **state)
{
	struct kvxd_core *c = &park_core;
	uint64_t arms = fake_vx_cq_arms(), parks = atomic_load(&c->st.parks);

	(void)state;
	fake_vx_fail_call("cq_arm", 2, -EIO); /* rail 1's, in the first park */
	kvx_pcore_park(c);
	assert_int_equal(fake_vx_cq_arms(), arms + 1);
	assert_int_equal(atomic_load(&c->st.parks), parks); /* it did not sleep */
	assert_false(fake_vx_cq_fire(c->cq[1]));	    /* rail 1 is not armed */
	kvx_pcore_park(c); /* arms rail 1 alone, then sleeps to the bound */
	assert_int_equal(fake_vx_cq_arms(), arms + 2);
	assert_int_equal(atomic_load(&c->st.parks), parks + 1);
	assert_true(fake_vx_cq_fire(c->cq[0]));
	assert_true(fake_vx_cq_fire(c->cq[1]));
	kvx_pcore_park(c);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_room_success_and_merge, setup, teardown),
		cmocka_unit_test_setup_teardown(test_park_arms_only_the_cq_that_fired,
						setup_two_rails, teardown_two_rails),
		cmocka_unit_test_setup_teardown(test_park_arms_again_after_a_failed_arm,
						setup_two_rails, teardown_two_rails),
		cmocka_unit_test_setup_teardown(test_one_completion_per_chunk, setup, teardown),
		cmocka_unit_test_setup_teardown(test_chunk_larger_than_the_send_queue_goes_in_parts,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_scattered_sources_gather_into_one_write, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_gather_is_capped_by_the_qp_limit, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_chunks_wait_for_meta, setup, teardown),
		cmocka_unit_test_setup_teardown(test_wr_error_fails_room_and_quiesces_qp, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_errored_qp_reported_before_its_rooms_drain,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_error_counts_until_siblings_flush, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_list_taken_in_part_is_retired_by_a_marker,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_refused_marker_waits_for_the_error_state,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_refused_list_moves_the_qp_to_error, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_waiting_rooms_never_hold_back_the_rest, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_chunk_for_failed_room_is_skipped, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_chunk_beyond_room_fails_cleanly, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_stale_immediate_is_counted_not_applied, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_immediate_beyond_the_rails_not_taken, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_immediate_from_another_peer_not_credited,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_room_free_wakes_no_control_core, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_immediate_on_another_core_not_credited, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_immediate_from_another_session_not_credited,
						setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
