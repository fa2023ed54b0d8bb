/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Peer setup with journaled rollback (DESIGN.md section 4), on the fake verbs: two control
 * cores ("a" dials, "b" accepts) in this process, talking over loopback TCP, stepped by hand
 * with a fake clock.  For every fault point a failed setup must leave the fake's live
 * resources where they started; a failing release keeps exactly the unreleased entries and
 * the next setup finishes that rollback before it acquires anything; the original error is
 * what the caller sees.
 *
 * Built twice: normally, and with the skip_journal mutant (tests/mutants/: acquisitions not
 * journaled), the negative control, which ctest expects to fail.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "control/peer.c"
#include "control/vwork.h"

#include "nodes_harness.h"

#define A N[0]
#define B N[1]
#define PA (&A.peers[0])
#define PB (&B.peers[0])

static bool
both_ready(void)
{
	return PA->state == KVXD_PEER_READY && PB->state == KVXD_PEER_READY;
}

static bool
both_idle(void)
{
	return all_idle();
}

static int
setup(void **state)
{
	static const char *const names[] = {"a", "b"};

	nodes_setup(2, names);
	assert_true(PA->initiator);
	assert_false(PB->initiator);
	return 0;
}

static int
teardown(void **state)
{
	nodes_teardown();
	return 0;
}

static void
test_setup_and_teardown_release_everything(void **state)
{
	kvxd_peer_admin(&A, "b", "resume");
	PUMP_UNTIL(both_ready());
	assert_int_equal(fake_vx_live().qp, base.qp + 2 * harness_lanes());
	assert_int_equal(PA->epoch, 1);
	/* the published peer's teardown uses the same journal: socket, slot, a qpc and a qp
	 * per lane, an armed QP per lane */
	assert_int_equal(PA->j.n, 2 + 3 * harness_lanes());
	kvxd_peer_admin(&A, "b", "pause");
	PUMP_UNTIL(both_idle());
	assert_live_at_base();
}

static const enum kvx_fault_point acquisition_points[] = {
	KVX_FAULT_HS_AFTER_SOCKET,    KVX_FAULT_HS_AFTER_SLOT,	  KVX_FAULT_HS_AFTER_QPC,
	KVX_FAULT_HS_AFTER_QP_CREATE, KVX_FAULT_HS_AFTER_QP_INIT, KVX_FAULT_HS_AFTER_RECV_POST,
	KVX_FAULT_HS_AFTER_RTR,	      KVX_FAULT_HS_AFTER_RTS,	  KVX_FAULT_HS_BEFORE_PUBLISH,
};

/* Is pt passed once per lane (a core and a rail) of a setup? */
static bool
per_lane(enum kvx_fault_point pt)
{
	return pt != KVX_FAULT_HS_AFTER_SOCKET && pt != KVX_FAULT_HS_AFTER_SLOT &&
	       pt != KVX_FAULT_HS_BEFORE_PUBLISH;
}

/* Fail the first side that reaches the point (skip = how many hits to let pass). */
static void
fail_at(enum kvx_fault_point pt, int skip)
{
	char spec[96], err[256];
	struct kvxd_peer *hit;
	char want[96];

	unsigned long before = kvx_fault_fired(pt);

	snprintf(spec, sizeof(spec), "%s:%d", kvx_fault_name(pt), skip);
	assert_int_equal(kvx_fault_arm_list(spec, err, sizeof(err)), 0);
	kvxd_peer_admin(&A, "b", "try");
	PUMP_UNTIL(kvx_fault_fired(pt) > before && both_idle());
	/* nothing leaked, on either side */
	assert_live_at_base();
	/* the side that failed reports the original error, not a rollback error */
	snprintf(want, sizeof(want), "injected fault %s", kvx_fault_name(pt));
	hit = strstr(PA->last_error, want) ? PA : strstr(PB->last_error, want) ? PB : NULL;
	if (!hit)
		fail_msg("%s: a: '%s', b: '%s'", spec, PA->last_error, PB->last_error);
	assert_true(PA->n_setup_failures + PB->n_setup_failures >= 1);
}

/* Every acquisition point fails a setup, and the rollback leaves nothing.  With several lanes
 * (KVX_TEST_CORES=2) each per-lane point also fails at its second hit: a later lane's, with
 * the earlier lanes' QPs already acquired, or the other side's. */
static void
test_every_acquisition_point_rolls_back(void **state)
{
	for (size_t i = 0; i < sizeof(acquisition_points) / sizeof(acquisition_points[0]); i++)
		for (int skip = 0;
		     skip < (harness_lanes() > 1 && per_lane(acquisition_points[i]) ? 2 : 1);
		     skip++) {
			unsigned long before = kvx_fault_fired(acquisition_points[i]);

			fail_at(acquisition_points[i], skip);
			assert_int_equal(kvx_fault_fired(acquisition_points[i]), before + 1);
			/* and a retry succeeds */
			kvxd_peer_admin(&A, "b", "resume");
			PUMP_UNTIL(both_ready());
			kvxd_peer_admin(&A, "b", "pause");
			PUMP_UNTIL(both_idle());
			assert_live_at_base();
		}
}

static void
test_failing_release_keeps_entries_and_next_setup_finishes_it(void **state)
{
	char err[256];
	struct kvxd_peer *p;
	int qp_before;

	/* after_rts fires on the first side to reach RTS; its rollback then fails to destroy
	 * the QP: the fence (ARMED) is released, the QP, its context, slot and socket stay */
	assert_int_equal(
		kvx_fault_arm_list("handshake.after_rts:0,rollback.destroy_qp:0", err, sizeof(err)),
		0);
	kvxd_peer_admin(&A, "b", "try");
	PUMP_UNTIL(kvx_fault_fired(KVX_FAULT_RB_DESTROY_QP) > 0 &&
		   (PA->state == KVXD_PEER_CLOSING || PB->state == KVXD_PEER_CLOSING));
	p = PA->state == KVXD_PEER_CLOSING ? PA : PB;
	/* every lane's QP and context stay (the failed destroy is the last lane's: the rollback
	 * stops there), and those of the lanes before it */
	assert_int_equal(p->j.n, 2 + 2 * harness_lanes());
	assert_int_equal(p->j.e[0].kind, KVXD_J_SOCKET);
	assert_int_equal(p->j.e[1].kind, KVXD_J_SLOT);
	for (int l = 0; l < harness_lanes(); l++) {
		assert_int_equal(p->j.e[2 + 2 * l].kind, KVXD_J_QPC);
		assert_int_equal(p->j.e[3 + 2 * l].kind, KVXD_J_QP);
	}
	assert_non_null(strstr(p->last_error, "injected fault handshake.after_rts"));
	assert_true(fake_vx_qp_in_error(p->qpc[0]->qp)); /* the armed QP was fenced */
	qp_before = fake_vx_live().qp;
	assert_true(qp_before >= base.qp + harness_lanes());

	/* the next setup with that peer first finishes the rollback (here a's dial, or b's
	 * acceptance of the new HELLO), before it acquires anything */
	if (p == PA) {
		PA->paused = false;
		dial(&A, PA);
		assert_int_equal(fake_vx_live().qp, base.qp + (PB->j.n ? harness_lanes() : 0));
	} else {
		kvxd_peer_admin(&A, "b", "resume");
		PUMP_UNTIL(PB->j.n == 0 || PB->state == KVXD_PEER_HELLO);
	}
	PUMP_UNTIL(both_ready());
	assert_int_equal(fake_vx_live().qp, base.qp + 2 * harness_lanes());
	kvxd_peer_admin(&A, "b", "pause");
	PUMP_UNTIL(both_idle());
	assert_live_at_base();
}

/* Every release point: the failed release keeps its entry and those before it, and the
 * control core's periodic sweep finishes the rollback (nobody dials: a is paused). */
static void
test_periodic_sweep_finishes_every_failed_release(void **state)
{
	static const enum kvx_fault_point rb[] = {KVX_FAULT_RB_QP_TO_ERR, KVX_FAULT_RB_DESTROY_QP,
						  KVX_FAULT_RB_RELEASE_SLOT,
						  KVX_FAULT_RB_CLOSE_SOCKET};

	for (size_t i = 0; i < sizeof(rb) / sizeof(rb[0]); i++) {
		char spec[128], err[256];
		unsigned long before = kvx_fault_fired(rb[i]);

		snprintf(spec, sizeof(spec), "handshake.after_rts:0,%s:0", kvx_fault_name(rb[i]));
		assert_int_equal(kvx_fault_arm_list(spec, err, sizeof(err)), 0);
		kvxd_peer_admin(&A, "b", "try");
		PUMP_UNTIL(kvx_fault_fired(rb[i]) == before + 1);
		assert_true(PA->j.n > 0 || PB->j.n > 0); /* the rest of that rollback is pending */
		assert_true(kvxd_journal_pending(&A) + kvxd_journal_pending(&B) > 0);
		PUMP_UNTIL(both_idle());
		assert_live_at_base();
		kvxd_peer_admin(&A, "b", "pause");
	}
}

static void
test_stalled_handshake_times_out_and_rolls_back(void **state)
{
	char err[256];
	uint64_t t0;

	/* let two frames through, then the receiving side stops answering mid-setup, with
	 * QPs already created on both sides */
	assert_int_equal(kvx_fault_arm_list("handshake.stall:2", err, sizeof(err)), 0);
	kvxd_peer_admin(&A, "b", "try");
	PUMP_UNTIL(kvx_fault_fired(KVX_FAULT_HS_STALL) > 0);
	assert_true(fake_vx_live().qp > base.qp);
	t0 = fake_ms;
	PUMP_UNTIL(both_idle());
	assert_true(fake_ms - t0 >= 2000); /* rolled back by the handshake timeout */
	assert_live_at_base();
	assert_non_null(strstr(PA->last_error, "timeout") ? PA->last_error : PB->last_error);
}

static void
test_rooms_of_a_failed_peer_fail(void **state)
{
	static const char names[1][KVX_NAME_MAX] = {"b"};
	static const uint32_t pages[1] = {0};
	static struct kvxd_pool pool = {.npages = 1, .page_size = 4096};
	const int src_peer[1] = {PA->idx};
	struct kvxd_room *r;
	char err[256];

	/* a decode room on a waiting for its source b (through the room owner: on b's list) */
	r = decode_room_new1(&A, 42, -1, &pool, pages, 1, names, src_peer, 1);
	assert_non_null(r);
	assert_int_equal(kvx_fault_arm_list("handshake.after_rtr:0", err, sizeof(err)), 0);
	kvxd_peer_admin(&A, "b", "try");
	/* it fails through decode's abort path; no source was notified, so nothing can write
	 * into its pages and it is released at once */
	PUMP_UNTIL(kvxd_room_state(r) == KVX_ROOM_RELEASED);
	if (!strstr(r->pc.reason, "setup failed"))
		fail_msg("reason: %s", r->pc.reason);
	assert_true(kvxd_room_aborting(r) && kvxd_room_released(r));
	/* released, and no engine holds it: it leaves the tables at once (the room owner's
	 * settle on the RELEASED event, no table scan) */
	PUMP_UNTIL(both_idle() && kvx_room_table_count(A.by_id) == 0 && A.ctr.rooms_freed == 1);
}

/* A move to RTR that blocks (rxe resolving a peer it cannot reach: about a second each time)
 * runs on the verbs worker: a's control core goes on meanwhile, with the handshake waiting in
 * QP_EXCHANGE; and a session torn down during the call destroys none of its QPs until the call
 * has returned (uverbs refuses that: EBUSY, and the worker would still hold the QP). */
static void
test_blocked_rtr_does_not_stall_the_control_core(void **state)
{
	uint64_t pass;

	(void)state;
	assert_int_equal(kvxd_vwork_start(&A), 0);
	fake_vx_block("qp_to_rtr");
	kvxd_peer_admin(&A, "b", "resume");
	PUMP_UNTIL(fake_vx_blocked());
	pass = A.loop_pass;
	pump_ms(50);
	assert_true(fake_vx_blocked());
	assert_true(A.loop_pass >= pass + 50);
	assert_int_equal(PA->state, KVXD_PEER_QP_EXCHANGE);
	assert_int_equal(PA->j.e[PA->j.n - 1].kind, KVXD_J_CONNECT);
	assert_false(PA->sent_ready);
	fake_vx_unblock();
	PUMP_UNTIL(both_ready());
	assert_int_equal(PA->j.n, 2 + 3 * harness_lanes());

	/* torn down while the call waits: the rollback waits for it */
	kvxd_peer_admin(&A, "b", "pause");
	PUMP_UNTIL(both_idle());
	fake_vx_block("qp_to_rtr");
	kvxd_peer_admin(&A, "b", "resume");
	PUMP_UNTIL(fake_vx_blocked());
	kvxd_peer_admin(&A, "b", "pause");
	pump_ms(50);
	assert_true(fake_vx_blocked());
	assert_int_equal(PA->state, KVXD_PEER_CLOSING);
	assert_int_equal(PA->j.e[PA->j.n - 1].kind, KVXD_J_CONNECT);
	fake_vx_unblock();
	PUMP_UNTIL(both_idle());
	assert_int_equal(fake_vx_destroyed_in_call(), 0);
	assert_live_at_base();
	kvxd_vwork_stop(&A);
}

static int
setup3(void **state)
{
	static const char *const names[] = {"a", "b", "c"};

	nodes_setup(3, names);
	return 0;
}

/* Sessions come up side by side: a's session with c comes up while the move to RTR of its
 * session with b is blocked (a cut link blocks it for a second; a rail cut to a hundred peers
 * would hold the last one's for a hundred seconds behind one worker).  Then b's comes up too. */
static void
test_blocked_connect_does_not_hold_other_sessions(void **state)
{
	(void)state;
	assert_true(peer_of(&A, "b")->initiator && peer_of(&A, "c")->initiator);
	assert_int_equal(kvxd_vwork_start(&A), 0);
	fake_vx_block("qp_to_rtr");
	kvxd_peer_admin(&A, "b", "resume");
	PUMP_UNTIL(fake_vx_blocked());
	kvxd_peer_admin(&A, "c", "resume");
	PUMP_UNTIL(!fake_vx_blocked() || (node_ready(&A, "c") && node_ready(&N[2], "a")));
	assert_true(fake_vx_blocked()); /* b's call still waits */
	assert_int_equal(peer_of(&A, "b")->state, KVXD_PEER_QP_EXCHANGE);
	fake_vx_unblock();
	PUMP_UNTIL(node_ready(&A, "b") && node_ready(&B, "a"));
	assert_true(node_ready(&A, "c"));
	kvxd_vwork_stop(&A);
}

/* [cores] connect_workers and mr_workers set the workers' threads.  With one connect worker,
 * a's session with c waits behind the blocked move to RTR of its session with b (the test
 * above's case, which four workers pass), and comes up once that call returns. */
static void
test_connect_workers_from_the_configuration(void **state)
{
	int kinds[KVXD_VJOB_KINDS] = {0};

	(void)state;
	A.cfg.connect_workers = 1;
	A.cfg.mr_workers = 3;
	assert_int_equal(kvxd_vwork_start(&A), 0);
	assert_int_equal(A.vwork.nthreads, 1 + 3 + 1);
	for (int i = 0; i < A.vwork.nthreads; i++)
		kinds[A.vwork.arg[i].kind]++;
	assert_int_equal(kinds[KVXD_VJOB_CONNECT], 1);
	assert_int_equal(kinds[KVXD_VJOB_MR_REG], 3);
	assert_int_equal(kinds[KVXD_VJOB_MR_DEREG], 1);
	fake_vx_block("qp_to_rtr");
	kvxd_peer_admin(&A, "b", "resume");
	PUMP_UNTIL(fake_vx_blocked());
	kvxd_peer_admin(&A, "c", "resume");
	for (int i = 0; i < 10; i++) {
		pump_ms(20); /* well inside handshake_ms */
		usleep(2000);
	}
	assert_true(fake_vx_blocked());
	assert_false(node_ready(&A, "c"));
	assert_int_equal(peer_of(&A, "c")->state, KVXD_PEER_QP_EXCHANGE);
	fake_vx_unblock();
	PUMP_UNTIL(node_ready(&A, "b") && node_ready(&B, "a") && node_ready(&A, "c") &&
		   node_ready(&N[2], "a"));
	kvxd_vwork_stop(&A);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_blocked_rtr_does_not_stall_the_control_core,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_blocked_connect_does_not_hold_other_sessions,
						setup3, teardown),
		cmocka_unit_test_setup_teardown(test_connect_workers_from_the_configuration, setup3,
						teardown),
		cmocka_unit_test_setup_teardown(test_setup_and_teardown_release_everything, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_every_acquisition_point_rolls_back, setup,
						teardown),
		cmocka_unit_test_setup_teardown(
			test_failing_release_keeps_entries_and_next_setup_finishes_it, setup,
			teardown),
		cmocka_unit_test_setup_teardown(test_periodic_sweep_finishes_every_failed_release,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_stalled_handshake_times_out_and_rolls_back,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_rooms_of_a_failed_peer_fail, setup, teardown),
	};

	int rc;

	rcu_register_thread();
	rc = cmocka_run_group_tests(tests, NULL, NULL);
	rcu_unregister_thread();
	return rc;
}
