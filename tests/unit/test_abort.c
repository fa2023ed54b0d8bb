/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The ABORT / ABORT_ACK exchange (DESIGN.md section 5) between real control cores on the fake
 * verbs: "a" and "c" are decode nodes, "b" the prefill node they both take rooms from.  Time is
 * a fake clock; the prefill side's writes can be held in flight (fake_vx_hold).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <sys/socket.h>
#include <unistd.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <time.h>

#include <cmocka.h>

#include "control/kvxd.h"
#include "control/abort.h"
#include "control/admin.h"
#include "control/cred.h"
#include "control/engine.h"
#include "control/engine_io.h"
#include "control/loop.h"
#include "control/peer.h"
#include "control/peer_io.h"
#include "control/rooms.h"
#include "core/fault.h"

#include "nodes_harness.h"

#define A N[0]
#define B N[1]
#define C N[2]
#define PS 256
#define NP 16

static struct kvxd_pool pool[MAX_NODES];
static uint8_t *mem[MAX_NODES];

static int
setup(void **state)
{
	static const char *const names[] = {"a", "b", "c"};

	nodes_setup(3, names);
	for (int i = 0; i < 3; i++)
		node_pool_init(&N[i], &pool[i], &mem[i], PS, NP);
	kvxd_peer_admin(&A, "b", "resume");
	kvxd_peer_admin(&B, "c", "resume");
	PUMP_UNTIL(node_ready(&A, "b") && node_ready(&B, "a") && node_ready(&B, "c") &&
		   node_ready(&C, "b"));
	base.qp += 4; /* the two connections stay until teardown pauses them */
	return 0;
}

static int
teardown(void **state)
{
	fake_vx_hold(false);
	for (int i = 0; i < 3; i++) {
		/* rooms go first (they hold pool references), then the pools */
		nodes_remove_rooms(&N[i]);
	}
	base.qp -= 4;
	for (int i = 0; i < 3; i++) {
		node_pool_fini(&pool[i], mem[i]);
	}
	nodes_teardown();
	return 0;
}

static struct kvxd_room *
room(struct kvxd *d, uint64_t id, int role)
{
	return kvxd_room_find(d, id, 0, role);
}

/* Decode node d opens room id (pages 0..n-1 of its pool) with b as its only source, and b
 * learns it. */
static struct kvxd_room *
open_room(struct kvxd *d, uint64_t id, uint32_t n)
{
	static const char names[1][KVX_NAME_MAX] = {"b"};
	uint32_t pages[NP];
	int64_t gen;

	for (uint32_t i = 0; i < n; i++)
		pages[i] = i;
	gen = kvxd_decode_room_open(d, -1, id, &pool[d - N], pages, n, names, 1);
	assert_true(gen > 0);
	PUMP_UNTIL(room(&B, id, KVX_ROOM_PREFILL) &&
		   kvxd_room_state(room(&B, id, KVX_ROOM_PREFILL)) == KVX_ROOM_WAITING_FOR_INPUT);
	return room(d, id, KVX_ROOM_DECODE);
}

/* b submits a chunk of the room: its pages first..first+n-1 to the same destination pages, the
 * room's last or not. */
static void
submit_part(uint64_t id, uint32_t first, uint32_t n, bool last)
{
	struct kvxd_room *r = room(&B, id, KVX_ROOM_PREFILL);
	struct kvxd_chunk *ch = kvxd_chunk_alloc(&B, n); /* B's loop frees it (CHUNK_FREE) */
	struct kvxd_msg m = {.type = KVXD_MSG_CHUNK, .room = &r->pc, .ptr = ch};

	assert_non_null(ch);
	*ch = (struct kvxd_chunk){
		.pool = &pool[1], .npages = n, .nbufs = 1, .dst_offset = first, .last = last};
	for (uint32_t i = 0; i < n; i++)
		ch->pages[i] = first + i;
	atomic_fetch_add(&pool[1].refs, 1);
	assert_int_equal(kvx_pcore_send(&B.cores[r->pc.core], &m), 0);
	for (int i = 0; i < 10; i++)
		pump_once();
}

/* b submits the room's one chunk (its pages 0..n-1 to destination offset 0). */
static void
submit(uint64_t id, uint32_t n)
{
	submit_part(id, 0, n, true);
}

static void
test_abort_waits_for_drain_then_releases(void **state)
{
	struct kvxd_room *d = open_room(&A, 100, 4);
	uint32_t open_gen = d->pc.gen;
	int64_t gen;

	fake_vx_hold(true);
	submit(100, 4);
	gen = kvxd_decode_abort(&A, d, -ECANCELED, "test");
	assert_true(gen != (int64_t)open_gen); /* a new generation, armed before the ABORT */
	pump_ms(50);
	assert_int_equal(kvxd_room_state(d), KVX_ROOM_DRAINING);
	assert_int_equal(kvxd_room_state(room(&B, 100, KVX_ROOM_PREFILL)), KVX_ROOM_FAILED);
	/* the write is still in flight: no ACK, no release */
	assert_int_equal(B.ctr.acks_sent, 0);
	assert_false(kvxd_room_released(d));
	fake_vx_release(peer_of(&B, "a")->qpc[0]->qp, 10);
	/* d may go (no engine holds it) once RELEASED: read it the moment it is */
	PUMP_UNTIL(kvxd_room_state(d) == KVX_ROOM_RELEASED);
	assert_int_equal(d->pc.gen, (uint32_t)gen); /* the released event carries it */
	assert_int_equal(B.ctr.acks_sent, 1);
	assert_int_equal(A.ctr.acks_received, 1);
	assert_int_equal(A.ctr.releases, 1);
	assert_int_equal(A.ctr.fences, 0);
}

/* A replaced connection (not a failure) re-issues a room to the peer's next session.  The room
 * aborted before that: its source was notified on the old session, whose QPs a's cores still
 * hand back, and a QP is only sure to place nothing once destroyed (DESIGN.md 5, rule 6).  The
 * pages are released once they are, not before (before: at once, as if never notified). */
static void
test_abort_after_replacement_waits_for_the_old_qps(void **state)
{
	struct kvxd_room *d = open_room(&A, 107, 2);
	struct kvxd_peer *ab = peer_of(&A, "b");
	uint64_t ended = ab->qp_sessions_ended;

	(void)state;
	ab->replacing = true;
	kvxd_peer_reset(&A, ab, "replaced (test)"); /* its cores have not handed the QPs back */
	assert_true(ab->qp_sessions_ended == ended);
	assert_true(kvxd_decode_abort(&A, d, -ECANCELED, "test") > 0);
	assert_false(kvxd_room_released(d));
	PUMP_UNTIL(kvxd_room_released(d));
	assert_true(ab->qp_sessions_ended > ended); /* released once they were destroyed */
	assert_int_equal(A.ctr.releases, 1);
}

/* A room failed on the source for a refused chunk stays there until its engine closes it.  Its
 * own endpoint reusing the id meanwhile (a new generation) is told at once that the room failed
 * there; before, its metadata was dropped and the new room waited for its timeout. */
static void
test_reuse_of_a_refused_room_told_at_once(void **state)
{
	struct kvxd_room *da = open_room(&A, 108, 2), *pb = room(&B, 108, KVX_ROOM_PREFILL);
	static const char names[1][KVX_NAME_MAX] = {"b"};
	uint32_t pages[2] = {0, 1};
	uint64_t refused = B.ctr.meta_refused_owner;

	(void)state;
	pb->refused = true; /* as control/engine.c chunk_refuse_room leaves it */
	assert_true(kvxd_decode_abort(&A, da, -ECANCELED, "test") > 0);
	PUMP_UNTIL(kvxd_room_released(da));
	kvxd_room_remove(&A, da);
	pump_once();
	assert_true(kvxd_decode_room_open(&A, -1, 108, &pool[0], pages, 2, names, 1) > 0);
	da = room(&A, 108, KVX_ROOM_DECODE);
	PUMP_UNTIL(kvxd_room_released(da));
	assert_int_equal(B.ctr.meta_refused_owner, refused + 1);
	assert_int_equal(A.ctr.waiting_timeouts, 0);
	assert_ptr_equal(room(&B, 108, KVX_ROOM_PREFILL), pb); /* still the engine's */
}

/* A source's room that ended but still has a WR in flight (its QP retries after decode fenced
 * it: rxe takes seconds), and decode's engine opens the id again: the source tells it at once
 * that the earlier attempt still drains there.  Before, the new metadata went to a core that
 * dropped it (the room had ended) and the new room heard nothing until its waiting timeout. */
static void
test_reuse_while_the_source_drains_told_at_once(void **state)
{
	struct kvxd_room *da = open_room(&A, 109, 2), *pb = room(&B, 109, KVX_ROOM_PREFILL);
	static const char names[1][KVX_NAME_MAX] = {"b"};
	uint32_t pages[2] = {0, 1};
	uint64_t refused = B.ctr.meta_refused_owner, t0;

	(void)state;
	assert_true(kvxd_decode_abort(&A, da, -ECANCELED, "test") > 0);
	PUMP_UNTIL(kvxd_room_released(da));
	kvxd_room_remove(&A, da);
	pump_once();
	atomic_fetch_add(&pb->pc.wr_posted, 1); /* a WR of the earlier attempt still in flight */
	t0 = fake_ms;
	assert_true(kvxd_decode_room_open(&A, -1, 109, &pool[0], pages, 2, names, 1) > 0);
	da = room(&A, 109, KVX_ROOM_DECODE);
	PUMP_UNTIL(kvxd_room_state(da) == KVX_ROOM_DRAINING);
	assert_true(fake_ms - t0 < 100);
	assert_int_equal(B.ctr.meta_refused_owner, refused + 1);
	atomic_fetch_add(&pb->pc.wr_done, 1); /* it completes: the source drains, and ACKs */
	PUMP_UNTIL(kvxd_room_released(da));
	assert_int_equal(A.ctr.waiting_timeouts, 0);
	assert_int_equal(A.ctr.fences, 0);
}

static void
test_stale_generation_ack_never_releases(void **state)
{
	struct kvxd_room *d = open_room(&A, 101, 2);
	struct kvx_wire_abort_ack ack = {.room = 101};
	int64_t gen;

	fake_vx_hold(true);
	submit(101, 2);
	gen = kvxd_decode_abort(&A, d, -ECANCELED, "test");
	pump_ms(20);
	ack.gen = (uint32_t)gen - 1; /* the open generation's */
	kvxd_on_abort_ack(&A, peer_of(&A, "b"), &ack);
	ack.gen = (uint32_t)gen + 1;
	kvxd_on_abort_ack(&A, peer_of(&A, "b"), &ack);
	pump_ms(20);
	assert_int_equal(A.ctr.acks_stale, 2);
	assert_false(kvxd_room_released(d));
	assert_int_equal(kvxd_room_state(d), KVX_ROOM_DRAINING);
	fake_vx_release(peer_of(&B, "a")->qpc[0]->qp, 10);
	PUMP_UNTIL(kvxd_room_released(d));
	assert_int_equal(A.ctr.releases, 1);
}

static void
test_early_ack_is_kept(void **state)
{
	struct kvxd_room *d = open_room(&A, 102, 2);
	struct kvx_wire_abort_ack ack = {.room = 102};
	int64_t gen = kvxd_decode_abort(&A, d, -ECANCELED, "test");

	/* the ACK is handled before a's core has even applied the abort (still in its inbox) */
	assert_int_equal(kvxd_room_state(d), KVX_ROOM_WAITING_FOR_INPUT);
	ack.gen = (uint32_t)gen;
	kvxd_on_abort_ack(&A, peer_of(&A, "b"), &ack);
	assert_true(kvxd_room_released(d));
	PUMP_UNTIL(kvxd_room_state(d) == KVX_ROOM_RELEASED);
	pump_ms(20); /* b's own ACK arrives too: counted, released once */
	assert_int_equal(A.ctr.releases, 1);
}

/* An engine session on a socketpair that nobody reads (its few events fit the socket): a room
 * attached to it stays in the tables after it ends, so the test may look at it until the
 * session closes (kvxd_engine_close_all).  Without it, an engine-less decode room is removed
 * and freed as soon as it is RELEASED, under the test's feet. */
static struct kvxd_engine *
pin_engine(struct kvxd *d, int sv[2])
{
	struct kvxd_engine *e = calloc(1, sizeof(*e));

	assert_non_null(e);
	assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0, sv), 0);
	e->id = 900;
	e->fd = sv[0];
	e->sub_wake = e->evt_wake = -1;
	e->hello = true;
	CDS_INIT_LIST_HEAD(&e->rooms);
	for (int i = 0; i < KVXD_MAX_ENGINES; i++)
		if (!d->engines[i]) {
			kvxd_engine_slot_set(d, i, e);
			return e;
		}
	fail_msg("no engine slot");
	return NULL;
}

static void
test_waiting_timeout_is_an_abort(void **state)
{
	struct kvxd_room *d = open_room(&A, 103, 2);
	uint32_t open_gen = d->pc.gen;
	int sv[2];

	kvxd_room_attach_engine(pin_engine(&A, sv), d);

	B.cfg.waiting_ms = 10 * A.cfg.waiting_ms; /* only decode's timer runs out */
	pump_ms((int)A.cfg.waiting_ms + 300);
	assert_int_equal(A.ctr.waiting_timeouts, 1);
	assert_true(kvxd_room_aborting(d));
	assert_true(d->abort_gen != open_gen);
	assert_int_equal(B.ctr.aborts_received, 1);
	PUMP_UNTIL(kvxd_room_state(d) == KVX_ROOM_RELEASED);
	assert_int_equal(d->pc.gen, d->abort_gen);
	assert_int_equal(A.ctr.fences, 0);
	kvxd_engine_close_all(&A); /* d may go from here on */
	close(sv[1]);
}

static void
test_release_timeout_fences_before_release(void **state)
{
	struct kvxd_room *d = open_room(&A, 104, 2);
	char err[128];
	uint32_t epoch = peer_of(&A, "b")->epoch;

	fake_vx_hold(true);
	submit(104, 2); /* the write never completes: b never ACKs */
	kvxd_decode_abort(&A, d, -ECANCELED, "test");
	assert_int_equal(kvx_fault_arm_list("rollback.destroy_qp:0", err, sizeof(err)), 0);
	pump_ms((int)A.cfg.release_ms + 150); /* rooms are scanned every 100 ms */
	assert_int_equal(A.ctr.fences, 1);
	/* the fence's QP destroy failed: the timer alone must not release */
	pump_ms(500);
	assert_false(kvxd_room_released(d));
	assert_int_equal(kvxd_room_state(d), KVX_ROOM_DRAINING);
	/* the sweep destroys it: now the pages go back */
	PUMP_UNTIL(kvxd_room_released(d));
	PUMP_UNTIL(kvxd_room_state(d) == KVX_ROOM_RELEASED);
	/* and the peer comes back with fresh QPs */
	fake_vx_hold(false);
	kvxd_peer_admin(&A, "b", "resume");
	PUMP_UNTIL(node_ready(&A, "b") && node_ready(&B, "a"));
	assert_true(peer_of(&A, "b")->epoch > epoch);
}

/* A post whose doorbell is refused after the QP took its WRs (rxe, a QP not in RTS): they never
 * run, and only the QP's move to ERR flushes them.  The prefill core asks its control core for
 * that move at once: the room fails and drains, and the decode side's abort is acknowledged and
 * released well within the release timeout, without a fence (mutant qp_stuck_ignored: nothing
 * moves the QP until the decode side fences it, release_ms later). */
static void
test_refused_doorbell_flushes_at_once(void **state)
{
	struct kvxd_room *d = open_room(&A, 112, 4);
	uint64_t t0 = fake_ms;

	(void)state;
	fake_vx_refuse_doorbell(1, -EINVAL);
	submit(112, 4);
	PUMP_UNTIL(kvxd_room_state(d) == KVX_ROOM_RELEASED);
	assert_true(fake_ms - t0 < A.cfg.release_ms / 2);
	assert_int_equal(B.ctr.qp_stuck, 1);
	assert_int_equal(kvxd_room_state(room(&B, 112, KVX_ROOM_PREFILL)), KVX_ROOM_FAILED);
	/* released by b's ACK or by the end of the QPs b's writes used (the connection's
	 * replacement): either proves nothing can write; a timer did not */
	assert_int_equal(A.ctr.releases, 1);
	assert_int_equal(A.ctr.fences, 0);
	/* the connection is replaced with fresh QPs, as after any QP error */
	PUMP_UNTIL(node_ready(&A, "b") && node_ready(&B, "a"));
	assert_int_equal(B.ctr.qp_replaced, 1);
}

/* A second decode endpoint that sends ROOM_META for a room another endpoint owns, before b's
 * engine said how many endpoints the room feeds: its metadata waits (parked); once the engine
 * says one (what its first chunk does, control/engine.c), it is refused, counted, and reported
 * to it (its room fails at once and releases: nothing of b's writes to it); its ABORT is
 * acknowledged at once and leaves the owner's room alone.  The owner's room moves its data to
 * the owner only.  (Before: the later ROOM_META redirected nothing but the first-come one won
 * silently, and any endpoint's ABORT failed the owner's room.) */
static void
test_second_endpoint_cannot_take_a_room(void **state)
{
	struct kvxd_room *da = open_room(&A, 105, 2), *dc, *pb;
	static const char names[1][KVX_NAME_MAX] = {"b"};
	uint32_t pages[2] = {0, 1};

	dc = room(&C, 105, KVX_ROOM_DECODE);
	assert_null(dc);
	assert_true(kvxd_decode_room_open(&C, -1, 105, &pool[2], pages, 2, names, 1) > 0);
	dc = room(&C, 105, KVX_ROOM_DECODE);
	PUMP_UNTIL(B.ctr.meta_parked == 1);
	pb = room(&B, 105, KVX_ROOM_PREFILL);
	assert_int_equal(pb->nowners, 1);
	assert_int_equal(B.ctr.meta_refused_owner, 0);
	pb->ndest = 1; /* b's engine: one decode endpoint */
	kvxd_room_meta_unpark(&B, pb);
	assert_int_equal(B.ctr.meta_refused_owner, 1);
	PUMP_UNTIL(kvxd_room_released(dc)); /* failure pushed, c aborts, b ACKs at once */
	assert_int_equal(C.ctr.fences, 0);
	assert_int_equal(B.ctr.aborts_not_owner, 1);
	assert_int_equal(pb->nowners, 1);
	assert_int_equal(pb->owner[0].peer, peer_of(&B, "a")->idx);
	assert_int_equal(pb->ntgt, 0); /* c's ABORT touched nothing of a's room */
	assert_int_not_equal(kvxd_room_state(pb), KVX_ROOM_FAILED);
	memset(mem[1], 0x3c, 2 * PS);
	submit(105, 2);
	PUMP_UNTIL(kvxd_room_state(da) == KVX_ROOM_SUCCESS);
	assert_memory_equal(mem[0], mem[1], 2 * PS);
	for (int i = 0; i < 2 * PS; i++)
		assert_int_equal(mem[2][i], 0); /* c's pages were never written */
}

/* A room that ended before its engine came (a aborted it: drained and acknowledged) is not
 * taken by another endpoint's ROOM_META for the same id: c is told the room ended, and b's
 * engine's late chunk goes to a's failed room (skipped), never to c.  Before, c's ROOM_META
 * removed the room and made its own, and the chunk was written into c's pages. */
static void
test_other_endpoint_cannot_take_an_ended_room(void **state)
{
	struct kvxd_room *da = open_room(&A, 106, 2), *dc, *pb = room(&B, 106, KVX_ROOM_PREFILL);
	static const char names[1][KVX_NAME_MAX] = {"b"};
	uint32_t pages[2] = {0, 1};

	(void)state;
	assert_true(kvxd_decode_abort(&A, da, -ECANCELED, "test") > 0);
	PUMP_UNTIL(kvxd_room_released(da));
	assert_int_equal(kvxd_room_state(pb), KVX_ROOM_FAILED);
	assert_true(kvxd_room_quiescent(pb));
	assert_true(kvxd_decode_room_open(&C, -1, 106, &pool[2], pages, 2, names, 1) > 0);
	dc = room(&C, 106, KVX_ROOM_DECODE);
	PUMP_UNTIL(kvxd_room_released(dc) || kvxd_room_state(dc) == KVX_ROOM_SUCCESS);
	assert_true(kvxd_room_released(dc));
	assert_ptr_equal(room(&B, 106, KVX_ROOM_PREFILL), pb); /* a's, still */
	memset(mem[1], 0x3c, 2 * PS);
	submit(106, 2); /* b's engine comes late */
	for (int i = 0; i < 200; i++)
		pump_once();
	for (int i = 0; i < 2 * PS; i++)
		assert_int_equal(mem[2][i], 0); /* c's pages were never written */
}

/* a's ROOM_META (by hand, as a late one would come) for b's room id of generation gen: pages 0
 * and 1 of a's pool. */
static void
meta_of_a(uint64_t id, uint32_t gen)
{
	static const uint8_t le[8] = {0, 0, 0, 0, 1, 0, 0, 0};
	struct kvx_wire_msg meta = {.type = KVX_WIRE_ROOM_META};

	meta.u.room_meta = (struct kvx_wire_room_meta){
		.room = id, .gen = gen, .token = 0x100, .nsrc = 1, .nrails = 1, .nreg = 1};
	meta.u.room_meta.reg[0] = (struct kvx_wire_region){.addr = (uint64_t)(uintptr_t)mem[0],
							   .rkey = {pool[0].rkey[0]},
							   .page_size = PS,
							   .pool_npages = NP,
							   .nbufs = 1,
							   .npages = 2,
							   .pages_le = le};
	assert_int_equal(kvxd_peer_send(&A, peer_of(&A, "b"), &meta), 0);
}

/* An ABORT for a room b does not know: ACKed at once, and a tombstone that refuses the
 * aborting endpoint's ROOM_META of the generation it aborted (the open's, which the ABORT
 * names; its own generation is another); a late chunk writes nothing. */
static void
test_abort_for_unknown_room_leaves_tombstone(void **state)
{
	struct kvx_wire_abort ab = {.room = 999, .gen = 77, .endpoint = "a", .open_gen = 5};
	struct kvxd_room *t;

	kvxd_on_abort(&B, peer_of(&B, "a"), &ab);
	assert_int_equal(B.ctr.tombstones, 1);
	assert_int_equal(B.ctr.acks_sent, 1); /* nothing outstanding: ACKed at once */
	assert_int_equal(peer_of(&B, "a")->tombstones_held, 1);
	t = room(&B, 999, KVX_ROOM_PREFILL);
	assert_non_null(t);
	assert_true(t->tombstone);
	/* a late chunk waits for metadata that a's ABORT made sure never counts */
	submit(999, 2);
	meta_of_a(999, 5);
	PUMP_UNTIL(B.ctr.meta_refused_aborted == 1);
	pump_ms(20);
	for (int c = 0; c < B.ncores; c++)
		assert_int_equal(atomic_load(&B.cores[c].st.wr_posted), 0); /* nothing written */
	assert_int_equal(A.ctr.acks_unknown, 1); /* a never asked: counted, dropped */
	assert_int_equal(t->nowners, 0);

	/* the same endpoint opens the id again: a new generation, which the tombstone lets in */
	meta_of_a(999, 6);
	PUMP_UNTIL(room(&B, 999, KVX_ROOM_PREFILL)->nowners == 1);
	t = room(&B, 999, KVX_ROOM_PREFILL);
	assert_int_equal(t->owner[0].gen, 6);
	assert_int_equal(B.ctr.meta_refused_aborted, 1);
}

/* An ABORT for a room b has from its own engine's chunk but no endpoint's metadata for yet
 * (not the aborting endpoint's room: ACKed at once, left alone): the aborting endpoint's
 * ROOM_META of the generation it aborted is refused when it comes, one of a new generation is
 * taken. */
static void
test_abort_before_meta_refuses_that_meta(void **state)
{
	struct kvx_wire_abort ab = {.room = 998, .gen = 77, .endpoint = "a", .open_gen = 5};
	struct kvxd_room *r;

	(void)state;
	/* b's engine first: its chunk makes the room, which no endpoint owns */
	r = kvxd_prefill_room_new(&B, 998, 0, -1);
	assert_non_null(r);
	submit(998, 2);
	assert_int_equal(r->nowners, 0);
	kvxd_on_abort(&B, peer_of(&B, "a"), &ab);
	assert_int_equal(B.ctr.aborts_not_owner, 1);
	assert_int_equal(B.ctr.tombstones, 0); /* the room is there: no tombstone made */
	assert_int_equal(B.ctr.acks_sent, 1);
	assert_ptr_equal(room(&B, 998, KVX_ROOM_PREFILL), r);
	meta_of_a(998, 5);
	PUMP_UNTIL(B.ctr.meta_refused_aborted == 1);
	pump_ms(20);
	for (int c = 0; c < B.ncores; c++)
		assert_int_equal(atomic_load(&B.cores[c].st.wr_posted), 0); /* nothing written */
	assert_int_equal(r->nowners, 0);

	/* a opens the id again: its new generation is the room's */
	meta_of_a(998, 6);
	PUMP_UNTIL(room(&B, 998, KVX_ROOM_PREFILL)->nowners == 1);
	assert_int_equal(room(&B, 998, KVX_ROOM_PREFILL)->owner[0].gen, 6);
	assert_int_equal(B.ctr.meta_refused_aborted, 1);
}

/* a opens id again (pages 0..n-1) once its earlier room there was released (and removed). */
static struct kvxd_room *
reopen(uint64_t id, uint32_t n)
{
	static const char names[1][KVX_NAME_MAX] = {"b"};
	uint32_t pages[NP];

	for (uint32_t i = 0; i < n; i++)
		pages[i] = i;
	if (room(&A, id, KVX_ROOM_DECODE))
		kvxd_room_remove(&A, room(&A, id, KVX_ROOM_DECODE));
	pump_once();
	assert_true(kvxd_decode_room_open(&A, -1, id, &pool[0], pages, n, names, 1) > 0);
	return room(&A, id, KVX_ROOM_DECODE);
}

/* a loses its session with b while a room is live there (a fences and releases it; no ABORT
 * goes out) and opens the id again: b, whose room is still live, refuses the new generation at
 * once.  Before, it took it, and its core, which had the earlier metadata, dropped it: a's new
 * room heard nothing until its timeout. */
static void
test_own_new_generation_on_a_live_room_told(void **state)
{
	struct kvxd_room *da = open_room(&A, 121, 2), *pb = room(&B, 121, KVX_ROOM_PREFILL);
	uint64_t refused = B.ctr.meta_refused_owner;
	uint32_t g1 = pb->owner[0].gen;

	(void)state;
	kvxd_peer_reset(&A, peer_of(&A, "b"), "link failure (test)");
	PUMP_UNTIL(kvxd_room_released(da) && node_ready(&A, "b") && node_ready(&B, "a"));
	assert_ptr_equal(room(&B, 121, KVX_ROOM_PREFILL), pb);
	assert_false(kvx_room_state_terminal(kvxd_room_state(pb)));
	da = reopen(121, 2);
	PUMP_UNTIL(kvxd_room_released(da)); /* failed, told at once; nothing was in flight */
	assert_int_equal(da->pc.error, -EBUSY);
	assert_non_null(strstr(da->pc.reason, "still live"));
	assert_int_equal(B.ctr.meta_refused_owner, refused + 1);
	assert_int_equal(pb->owner[0].gen, g1); /* the owner keeps the live attempt's */
}

/* A tombstone's generation is refused before an ended room's id is taken as reused: a room
 * b's engine made, which a (not its owner) aborted, ends and its engine closes it; a's late
 * ROOM_META of the generation it aborted is refused, not taken as a new room. */
static void
test_tombstone_before_reuse(void **state)
{
	struct kvx_wire_abort ab = {.room = 130, .gen = 77, .endpoint = "a", .open_gen = 5};
	struct kvxd_room *r = kvxd_prefill_room_new(&B, 130, 0, -1);
	struct kvxd_msg f = {.type = KVXD_MSG_ROOM_FAIL, .error = -ECONNRESET, .room = &r->pc};

	(void)state;
	kvxd_on_abort(&B, peer_of(&B, "a"), &ab); /* not an owner: (a, rank 0, 5) refused */
	assert_int_equal(kvx_pcore_send(&B.cores[r->pc.core], &f), 0);
	PUMP_UNTIL(kvxd_room_state(r) == KVX_ROOM_FAILED && kvxd_room_quiescent(r));
	r->engine_closed = true; /* its engine closed it (the room lingers a while) */
	meta_of_a(130, 5);
	PUMP_UNTIL(B.ctr.meta_refused_aborted == 1);
	assert_ptr_equal(room(&B, 130, KVX_ROOM_PREFILL), r);
	assert_int_equal(r->nowners, 0);
}

/* A peer's send buffer counts only what waits: a peer that reads, but each time all but a
 * few bytes, takes 200 MiB of frames; one that stops reading is cut off at 64 MiB waiting.
 * Before, the bytes already sent counted until the buffer drained once: after 64 MiB the frames
 * that must arrive (ABORT_ACK, a failure push, a heartbeat) were refused with -ENOBUFS. */
static void
test_peer_send_buffer_counts_what_waits(void **state)
{
	static uint8_t blob[1 << 20];
	struct kvxd_stream s = {.fd = -1};
	int i;

	(void)state;
	for (i = 0; i < 200; i++) {
		assert_int_equal(kvxd_stream_queue(&s, blob, sizeof(blob)), 0);
		s.tx_off = s.tx_len - 10; /* what the socket took (kvxd_stream_flush) */
	}
	assert_true(s.tx_cap <= 4u << 20);
	/* a backlog is not moved for a few bytes sent: only once what went out is as much */
	for (i = 0; i < 32; i++)
		assert_int_equal(kvxd_stream_queue(&s, blob, sizeof(blob)), 0);
	s.tx_off = 100;
	assert_int_equal(kvxd_stream_queue(&s, blob, 200), 0);
	assert_int_equal(s.tx_off, 100);
	s.tx_off = 0; /* it stops reading */
	for (i = 0; i < 100 && kvxd_stream_queue(&s, blob, sizeof(blob)) == 0; i++)
		;
	assert_int_equal(kvxd_stream_queue(&s, blob, sizeof(blob)), -ENOBUFS);
	assert_true(s.tx_len - s.tx_off <= 64u << 20);
	assert_true(s.tx_len - s.tx_off > 62u << 20);
	kvxd_stream_free(&s);
}

/* ROOM_STATUS from a peer that is not the room's source (even with the right generation):
 * counted, and the room carries on.  Before: any peer that guessed (room, generation) aborted
 * it.  The real source's failure push still aborts it at once. */
static void
test_status_only_from_the_source(void **state)
{
	struct kvxd_room *d = open_room(&A, 108, 1);
	struct kvx_wire_msg st = {.type = KVX_WIRE_ROOM_STATUS};

	kvxd_peer_admin(&A, "c", "resume");
	PUMP_UNTIL(node_ready(&A, "c") && node_ready(&C, "a"));
	st.u.room_status = (struct kvx_wire_room_status){.room = 108,
							 .gen = d->pc.gen,
							 .src_idx = 0,
							 .state = KVX_ROOM_FAILED,
							 .error = -EIO};
	assert_int_equal(kvxd_peer_send(&C, peer_of(&C, "a"), &st), 0);
	PUMP_UNTIL(A.ctr.status_refused_owner == 1);
	assert_false(kvxd_room_aborting(d));
	assert_int_equal(A.ctr.aborts, 0);
	st.u.room_status.error = 0; /* not an errno: the engine must still get one */
	assert_int_equal(kvxd_peer_send(&B, peer_of(&B, "a"), &st), 0);
	PUMP_UNTIL(kvxd_room_aborting(d));
	PUMP_UNTIL(kvxd_room_state(d) >= KVX_ROOM_FAILED);
	assert_int_equal(d->pc.error, -EPROTO);
	PUMP_UNTIL(kvxd_room_released(d));
}

/* Both nodes' polling-core inboxes are full (a burst of messages the cores have not read yet)
 * when the abort, the prefill side's ABORT, the drain, the ACK and the release happen: nothing
 * is lost, the room is released exactly once.  Before: kvx_pcore_send() failed on a full inbox
 * and 13 call sites logged and dropped (a dropped release: never released). */
static void
stuff_inbox(struct kvxd *node, struct kvxd_room *r)
{
	for (int i = 0; i < 8192; i++) { /* no-ops for rooms past BOOTSTRAPPING */
		struct kvxd_msg m = {.type = KVXD_MSG_ROOM_OPEN, .room = &r->pc};

		kvx_pcore_send(&node->cores[r->pc.core], &m);
	}
	assert_int_equal(kvx_mbox_free_count(node->cores[r->pc.core].inbox), 0); /* it is full */
}

static void
test_full_inbox_loses_nothing(void **state)
{
	struct kvxd_room *d = open_room(&A, 110, 2), *p;

	fake_vx_hold(true);
	submit(110, 2);
	p = room(&B, 110, KVX_ROOM_PREFILL);
	stuff_inbox(&A, d);
	stuff_inbox(&B, p);
	assert_true(kvxd_decode_abort(&A, d, -ECANCELED, "test") > 0);
	/* the abort reaches both cores behind the burst */
	PUMP_UNTIL(kvxd_room_state(d) == KVX_ROOM_DRAINING &&
		   kvxd_room_state(p) == KVX_ROOM_FAILED);
	stuff_inbox(&A, d); /* and the release will queue behind another one */
	fake_vx_release(peer_of(&B, "a")->qpc[kvxd_lane(&B, p->pc.core, 0)]->qp, 10);
	PUMP_UNTIL(kvxd_room_state(d) == KVX_ROOM_RELEASED);
	assert_int_equal(A.ctr.releases, 1);
	assert_int_equal(A.ctr.fences, 0);
	assert_true(A.cores[d->pc.core].ovf_queued > 0 && B.cores[p->pc.core].ovf_queued > 0);
	assert_int_equal(A.cores[d->pc.core].ovf_len, 0);
}

/* A room removed while its core's inbox is full: the ROOM_DROP queues behind the burst and
 * the core still gives the room back, exactly once (before: logged and dropped, the room
 * leaked). */
static void
test_full_inbox_keeps_a_room_drop(void **state)
{
	struct kvxd_room *d = open_room(&A, 112, 2);
	uint64_t freed = A.ctr.rooms_freed;
	const int core = d->pc.core;

	(void)state;
	/* (no data is submitted: nothing writes into its pages) the inbox is full when the
	 * room goes, so its ROOM_DROP has to wait behind the burst */
	stuff_inbox(&A, d);
	kvxd_room_remove(&A, d);
	assert_true(A.cores[core].ovf_len > 0); /* queued, not dropped */
	PUMP_UNTIL(A.ctr.rooms_freed == freed + 1 && A.cores[core].ovf_len == 0);
	for (int i = 0; i < 100; i++)
		pump_once();
	assert_int_equal(A.ctr.rooms_freed, freed + 1); /* exactly once */
	assert_null(room(&A, 112, KVX_ROOM_DECODE));
}

/* The loop sleeps no longer than the next room deadline, and the deadline fires from the
 * room owner's heap (no table scan): a decode room's waiting timeout is an abort at its
 * deadline, not a scan period later. */
static void
test_loop_wakes_for_a_room_deadline(void **state)
{
	struct kvxd_room *d;
	struct timespec t0, t1;
	uint64_t due;

	(void)state;
	A.cfg.waiting_ms = 500;
	d = open_room(&A, 113, 2);
	due = d->opened_ms + A.cfg.waiting_ms;
	assert_int_equal(kvxd_rooms_next_due(&A), due);
	fake_ms = due - 1;
	kvxd_loop_once(&A, 0);
	assert_false(kvxd_room_aborting(d)); /* not before its deadline */
	fake_ms = due;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	kvxd_loop_once(&A, 60000); /* due now: does not wait the 60 s */
	clock_gettime(CLOCK_MONOTONIC, &t1);
	assert_true(t1.tv_sec - t0.tv_sec < 10);
	assert_true(kvxd_room_aborting(d));
	assert_int_equal(A.ctr.waiting_timeouts, 1);
	assert_int_equal(d->ab_state, KVXD_ABORT_ARMED);
	/* its next deadline is the release deadline */
	assert_int_equal(kvxd_rooms_next_due(&A), d->release_deadline_ms);
	PUMP_UNTIL(kvxd_room_state(d) == KVX_ROOM_RELEASED);
	assert_int_equal(A.ctr.abort_transitions[KVXD_ABORT_NONE][KVXD_ABORT_ARMED], 1);
	assert_int_equal(A.ctr.abort_transitions[KVXD_ABORT_ARMED][KVXD_ABORT_RELEASED], 1);
	A.cfg.waiting_ms = B.cfg.waiting_ms;
}

static void
push_statuses(struct kvxd *node, struct kvxd_peer *p, uint64_t first, int n)
{
	for (int i = 0; i < n; i++) {
		struct kvx_wire_room_status st = {.room = first + (uint64_t)i,
						  .gen = 1,
						  .state = KVX_ROOM_FAILED,
						  .error = -EIO};

		kvxd_peer_push_status(node, p, &st);
	}
}

/* The ROOM_STATUS queue never drops a failure (before: at 4096 entries the next one was
 * dropped, and its decode room waited for its timeout).  On a live session the oldest entries
 * already sent make room; with the peer down it grows, and the next session sends them all. */
static void
test_status_queue_never_drops(void **state)
{
	struct kvxd_peer *pa = peer_of(&B, "a");
	uint64_t pushed = B.ctr.status_pushed;

	(void)state;
	push_statuses(&B, pa, 900000, 5000);
	assert_int_equal(B.ctr.status_dropped, 0);
	assert_int_equal(B.ctr.status_pushed, pushed + 5000);
	assert_true(pa->npend_status <= 4096); /* bounded while the peer reads */
	assert_true(B.ctr.status_evicted >= 5000 - 4096);
	kvxd_peer_admin(&B, "a", "pause");
	PUMP_UNTIL(pa->state == KVXD_PEER_IDLE);
	push_statuses(&B, pa, 910000, 5000);
	assert_int_equal(B.ctr.status_dropped, 0);
	assert_true(pa->npend_status >= 5000); /* kept, none sent */
	assert_int_equal(B.ctr.status_pushed, pushed + 5000);
	kvxd_peer_admin(&B, "a", "resume");
	PUMP_UNTIL(pa->state == KVXD_PEER_READY && B.ctr.status_pushed == pushed + 10000);
	assert_int_equal(B.ctr.status_dropped, 0);
}

/* The peer's send buffer full but for 200 bytes (64 MiB is the most it holds). */
static void
fill_tx(struct kvxd_peer *p)
{
	static uint8_t blob[64 << 10];
	size_t want = (64u << 20) - 200;

	while (p->s.tx_len - p->s.tx_off < want) {
		size_t n = want - (p->s.tx_len - p->s.tx_off);

		assert_int_equal(
			kvxd_stream_queue(&p->s, blob, n < sizeof(blob) ? n : sizeof(blob)), 0);
	}
}

/* A failure push that could not be sent on a live session (our send buffer for the peer is full)
 * is sent again once it drains, on the same session (before: only a new session sent it, and
 * decode waited for its timeout).  A peer that does not read at all, so that 4096 pushes wait
 * unsent, has its session fenced (before: the queue grew without bound for as long as it sent
 * ROOM_METAs to refuse); the pushes are kept and go on its next session. */
static void
test_status_unsent_retried_and_deaf_peer_fenced(void **state)
{
	struct kvxd_peer *pa = peer_of(&B, "a");
	uint64_t pushed = B.ctr.status_pushed, resets = pa->n_resets;

	(void)state;
	/* b's buffer for a all but full, as if a had stopped reading */
	fill_tx(pa);
	push_statuses(&B, pa, 930000, 20);
	assert_true(B.ctr.status_pushed < pushed + 20); /* some did not fit */
	assert_true(pa->status_retry);
	pa->s.tx_off = pa->s.tx_len = 0; /* a reads again (the blob is not a's to see) */
	pump_once();
	fake_ms += 30;
	pump_once();
	assert_int_equal(B.ctr.status_pushed, pushed + 20); /* the same session */
	assert_false(pa->status_retry);
	assert_int_equal(pa->n_resets, resets);
	/* now a reads nothing: past 4096 unsent, its session is fenced */
	fill_tx(pa);
	push_statuses(&B, pa, 940000, 5000);
	assert_true(pa->fence_req);
	assert_true(pa->npend_status <= 5000);
	pump_once();
	assert_int_equal(pa->n_resets, resets + 1);
	assert_int_equal(B.ctr.status_dropped, 0);
	/* its next session gets them all */
	PUMP_UNTIL(pa->state == KVXD_PEER_READY && B.ctr.status_pushed == pushed + 5020);
}

/* The decode abort's one transition function: NONE -> ARMED -> (FENCING ->) RELEASED, nothing
 * else; a refused transition leaves the state as it was and is counted. */
static void
test_abort_transitions(void **state)
{
	struct kvxd_room r = {.pc = {.id = 1}}, r2 = {.pc = {.id = 2}};
	uint64_t refused = A.ctr.abort_refused;

	(void)state;
	assert_int_equal(kvxd_abort_set(&A, &r, KVXD_ABORT_RELEASED),
			 -EINVAL); /* no ACK, no fence */
	assert_int_equal(kvxd_abort_set(&A, &r, KVXD_ABORT_FENCING), -EINVAL);
	assert_int_equal(r.ab_state, KVXD_ABORT_NONE);
	assert_int_equal(kvxd_abort_set(&A, &r, KVXD_ABORT_ARMED), 0);
	assert_int_equal(kvxd_abort_set(&A, &r, KVXD_ABORT_ARMED), -EINVAL); /* one abort */
	assert_int_equal(kvxd_abort_set(&A, &r, KVXD_ABORT_FENCING), 0);
	assert_int_equal(kvxd_abort_set(&A, &r, KVXD_ABORT_ARMED), -EINVAL); /* no way back */
	assert_int_equal(kvxd_abort_set(&A, &r, KVXD_ABORT_RELEASED), 0);
	for (int to = KVXD_ABORT_NONE; to < KVXD_ABORT_STATE_COUNT; to++) /* exactly once */
		assert_int_equal(kvxd_abort_set(&A, &r, (enum kvxd_abort_state)to), -EINVAL);
	assert_int_equal(r.ab_state, KVXD_ABORT_RELEASED);
	assert_int_equal(kvxd_abort_set(&A, &r2, KVXD_ABORT_ARMED), 0);
	assert_int_equal(kvxd_abort_set(&A, &r2, KVXD_ABORT_RELEASED), 0); /* every ACK came */
	assert_int_equal(A.ctr.abort_refused, refused + 8);
}

/* A prefill room's waiting timeout while its core's inbox is full: the fail is queued, not
 * dropped (before: sent once, never retried, and the room waited forever); the failure is
 * pushed to decode, which releases at once. */
static void
test_full_inbox_keeps_a_timeout_fail(void **state)
{
	struct kvxd_room *d, *p;

	B.cfg.waiting_ms = 50; /* before b creates the room: its deadline is armed then */
	d = open_room(&A, 111, 2);
	p = room(&B, 111, KVX_ROOM_PREFILL);
	fake_ms += 200;	    /* past b's deadline ... */
	stuff_inbox(&B, p); /* ... with the inbox full when b's tick fails the room */
	kvxd_loop_once(&B, 0);
	PUMP_UNTIL(kvxd_room_state(p) == KVX_ROOM_FAILED);
	assert_int_equal(B.ctr.waiting_timeouts, 1);
	assert_non_null(strstr(p->pc.reason, "waiting timeout"));
	PUMP_UNTIL(kvxd_room_state(d) == KVX_ROOM_RELEASED); /* pushed, not timed out on a */
	assert_int_equal(A.ctr.waiting_timeouts, 0);
	B.cfg.waiting_ms = A.cfg.waiting_ms;
}

/* The ABORT a decode room sends names the generation its ROOM_META carried: b refuses a's
 * ROOM_META (its cap), a aborts on b's push, and b, which has no room for it, keeps a tombstone
 * of that generation, not of the abort's. */
static void
test_abort_names_the_open_generation(void **state)
{
	static const char names[1][KVX_NAME_MAX] = {"b"};
	uint32_t pages[1] = {0}, open_gen;
	struct kvxd_room *d, *t;

	(void)state;
	B.cfg.max_rooms_per_peer = 0;
	assert_true(kvxd_decode_room_open(&A, -1, 140, &pool[0], pages, 1, names, 1) > 0);
	d = room(&A, 140, KVX_ROOM_DECODE);
	open_gen = d->open_gen;
	PUMP_UNTIL(kvxd_room_released(d));
	assert_int_equal(B.ctr.meta_refused_cap, 1);
	t = room(&B, 140, KVX_ROOM_PREFILL);
	assert_non_null(t);
	assert_true(t->tombstone);
	assert_int_equal(t->tomb_peer, peer_of(&B, "a")->idx + 1);
	assert_int_equal(t->tomb_gen, open_gen);
	assert_int_not_equal(t->tomb_gen,
			     d->abort_gen); /* the room stays until its engine's close */
}

/* Caps: tombstones and rooms one peer's frames can make b hold. */
static void
test_per_peer_caps(void **state)
{
	struct kvxd_peer *pa = peer_of(&B, "a");

	B.cfg.max_tombstones_per_peer = 3;
	for (uint64_t id = 2000; id < 2010; id++) {
		struct kvx_wire_abort ab = {.room = id, .gen = 5, .endpoint = "a"};

		kvxd_on_abort(&B, pa, &ab);
	}
	assert_int_equal(pa->tombstones_held, 3);
	assert_int_equal(B.ctr.tombstones_refused, 7);
	assert_int_equal(B.ctr.acks_sent, 10); /* every one ACKed all the same */
	B.cfg.max_rooms_per_peer = 1;
	open_room(&A, 106, 1);
	assert_int_equal(pa->rooms_held, 1);
	{
		static const char names[1][KVX_NAME_MAX] = {"b"};
		uint32_t pages[1] = {3};
		struct kvxd_room *d;

		assert_true(kvxd_decode_room_open(&A, -1, 107, &pool[0], pages, 1, names, 1) > 0);
		d = room(&A, 107, KVX_ROOM_DECODE);
		PUMP_UNTIL(B.ctr.meta_refused_cap == 1);
		PUMP_UNTIL(kvxd_room_released(d)); /* told at once, not after waiting_ms */
	}
	assert_null(room(&B, 107, KVX_ROOM_PREFILL));
}

/* Metadata parked on another endpoint's rooms (their engine has not said how many endpoints
 * they feed) counts against max_rooms_per_peer like the rooms a peer's metadata creates: c
 * parks on a's two rooms, and its own next room is refused; once one parked metadata leaves (its
 * room ended), c may hold one more.  Before, parked metadata was charged to nobody: a peer
 * could park up to 8 per room on every room, beyond any cap. */
static void
test_parked_metadata_counts_against_the_cap(void **state)
{
	static const char names[1][KVX_NAME_MAX] = {"b"};
	struct kvxd_peer *pc = peer_of(&B, "c");
	uint32_t pages[1] = {0};
	struct kvxd_room *a301, *c303;

	(void)state;
	B.cfg.max_rooms_per_peer = 2;
	a301 = open_room(&A, 301, 1);
	open_room(&A, 302, 1);
	assert_true(kvxd_decode_room_open(&C, -1, 301, &pool[2], pages, 1, names, 1) > 0);
	assert_true(kvxd_decode_room_open(&C, -1, 302, &pool[2], pages, 1, names, 1) > 0);
	PUMP_UNTIL(pc->parked_held == 2);
	assert_int_equal(pc->rooms_held, 0);
	assert_true(kvxd_decode_room_open(&C, -1, 303, &pool[2], pages, 1, names, 1) > 0);
	c303 = room(&C, 303, KVX_ROOM_DECODE);
	PUMP_UNTIL(B.ctr.meta_refused_cap == 1);
	PUMP_UNTIL(kvxd_room_released(c303)); /* told at once */
	/* a's room 301 ends: c's metadata parked on it is refused, and no longer held */
	assert_true(kvxd_decode_abort(&A, a301, -ECANCELED, "test") > 0);
	PUMP_UNTIL(pc->parked_held == 1);
	assert_true(kvxd_decode_room_open(&C, -1, 304, &pool[2], pages, 1, names, 1) > 0);
	PUMP_UNTIL(room(&B, 304, KVX_ROOM_PREFILL) != NULL);
	assert_int_equal(pc->rooms_held, 1);
	assert_int_equal(B.ctr.meta_refused_cap, 1);
}

/* The dialer of a session the acceptor still rolls back (its cores still wait for the old
 * QPs' flushes: a planned replacement, a rail retried, on a slow node) is refused with BYE BUSY
 * and dials again shortly: nothing counts as a failed setup, and the session comes back once
 * the rollback ends (busy_refusal_silent: the connection is only closed, and the dialer counts
 * a failed setup, which fails the rooms waiting for that peer). */
static void
test_redial_during_rollback_told_busy(void **state)
{
	struct kvxd_peer *pa = peer_of(&A, "b"), *pb = peer_of(&B, "a");
	struct kvx_vx_qp *old[KVXD_MAX_LANES] = {0}, *olda[KVXD_MAX_LANES] = {0};
	uint64_t failures;

	(void)open_room(&A, 130, 4);
	fake_vx_hold(true);
	fake_vx_defer_flush(true); /* b's QPs to a keep their WRs until fake_vx_flush */
	submit(130, 4);
	for (int l = 0; l < B.ncores * B.nrails; l++)
		old[l] = pb->qpc[l] ? pb->qpc[l]->qp : NULL;
	for (int l = 0; l < A.ncores * A.nrails; l++)
		olda[l] = pa->qpc[l] ? pa->qpc[l]->qp : NULL;
	kvxd_peer_admin(&A, "b", "pause");
	for (int l = 0; l < A.ncores * A.nrails; l++)
		if (olda[l])
			fake_vx_flush(olda[l]); /* a's rollback ends: only b's waits */
	PUMP_UNTIL(pa->j.n == 0 && pb->state == KVXD_PEER_CLOSING && pb->j.n > 0);
	fake_vx_defer_flush(false); /* from here QPs flush as they go to ERR: a's next ones too */
	failures = pa->n_setup_failures;
	kvxd_peer_admin(&A, "b", "resume");
	PUMP_UNTIL(B.ctr.conn_refused_busy >= 2); /* refused, and refused again after a retry */
	assert_int_equal(pa->n_setup_failures, failures);
	assert_true(pa->state != KVXD_PEER_READY);
	for (int l = 0; l < B.ncores * B.nrails; l++)
		if (old[l])
			fake_vx_flush(old[l]);
	PUMP_UNTIL(node_ready(&A, "b") && node_ready(&B, "a"));
	assert_int_equal(pa->n_setup_failures, failures);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_abort_waits_for_drain_then_releases, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_reuse_while_the_source_drains_told_at_once,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_parked_metadata_counts_against_the_cap, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_stale_generation_ack_never_releases, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_early_ack_is_kept, setup, teardown),
		cmocka_unit_test_setup_teardown(test_waiting_timeout_is_an_abort, setup, teardown),
		cmocka_unit_test_setup_teardown(test_refused_doorbell_flushes_at_once, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_release_timeout_fences_before_release, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_reuse_of_a_refused_room_told_at_once, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_abort_after_replacement_waits_for_the_old_qps,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_other_endpoint_cannot_take_an_ended_room,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_second_endpoint_cannot_take_a_room, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_per_peer_caps, setup, teardown),
		cmocka_unit_test_setup_teardown(test_status_only_from_the_source, setup, teardown),
		cmocka_unit_test_setup_teardown(test_full_inbox_loses_nothing, setup, teardown),
		cmocka_unit_test_setup_teardown(test_full_inbox_keeps_a_room_drop, setup, teardown),
		cmocka_unit_test_setup_teardown(test_status_queue_never_drops, setup, teardown),
		cmocka_unit_test_setup_teardown(test_status_unsent_retried_and_deaf_peer_fenced,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_abort_transitions, setup, teardown),
		cmocka_unit_test_setup_teardown(test_loop_wakes_for_a_room_deadline, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_full_inbox_keeps_a_timeout_fail, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_abort_before_meta_refuses_that_meta, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_own_new_generation_on_a_live_room_told, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_tombstone_before_reuse, setup, teardown),
		cmocka_unit_test(test_peer_send_buffer_counts_what_waits),
		cmocka_unit_test_setup_teardown(test_abort_for_unknown_room_leaves_tombstone, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_abort_names_the_open_generation, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_redial_during_rollback_told_busy, setup,
						teardown),
	};
	int rc;

	rcu_register_thread();
	rc = cmocka_run_group_tests(tests, NULL, NULL);
	rcu_unregister_thread();
	return rc;
}
