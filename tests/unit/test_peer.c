/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Peer setup with journaled rollback (DESIGN.md section 4), on the fake verbs: two control
 * cores ("a" dials, "b" accepts) in this process, talking over loopback TCP, stepped by hand
 * with a fake clock.  For every fault point a failed setup must leave the fake's live
 * resources where they started; a failing release keeps exactly the unreleased entries and
 * the next setup finishes that rollback before it acquires anything; the original error is
 * what the caller sees.
 *
 * Built twice: normally, and with -DKVXD_TEST_SKIP_JOURNAL (acquisitions not journaled), the
 * negative control, which ctest expects to fail.
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
#include "fake_verbs.h"

static uint64_t fake_ms = 1000000;

static uint64_t
fake_clock(void)
{
	return fake_ms;
}

static struct kvxd A, B;

static int
listen_any(struct kvxd *d)
{
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof(sa);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

	assert_true(fd >= 0);
	assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(listen(fd, 16), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
	d->tcp_fd = fd;
	d->tcp_ev = (struct kvxd_fd){.kind = KVXD_FD_TCP_LISTEN};
	assert_int_equal(kvxd_epoll_add(d, fd, &d->tcp_ev, EPOLLIN), 0);
	return ntohs(sa.sin_port);
}

static void
node_init(struct kvxd *d, const char *name, const char *peer)
{
	memset(d, 0, sizeof(*d));
	snprintf(d->cfg.name, sizeof(d->cfg.name), "%s", name);
	d->cfg.sq_depth = d->cfg.rq_depth = 32;
	d->cfg.cq_depth = 256;
	d->cfg.mtu = 1024;
	d->cfg.retry_cnt = 6;
	d->cfg.ack_timeout = 14;
	d->cfg.handshake_ms = 3000;
	d->cfg.waiting_ms = 60000;
	d->cfg.n_peers = 1;
	snprintf(d->cfg.peers[0].name, sizeof(d->cfg.peers[0].name), "%s", peer);
	snprintf(d->cfg.peers[0].addr.host, sizeof(d->cfg.peers[0].addr.host), "127.0.0.1");
	d->cfg.peers[0].allowed = true;
	d->tcp_fd = d->eng_fd = d->sig_fd = -1;
	assert_int_equal(kvx_vx->dev_open(name, 1, 1, &d->dev), 0);
	assert_int_equal(kvx_vx->dev_query(d->dev, &d->dev_info), 0);
	d->by_id = kvx_room_table_create(16);
	d->by_token = kvx_room_table_create(16);
	assert_int_equal(
		kvx_pcore_init(&d->cores[0], 0, -1, d->dev, &d->cfg, d->by_id, d->by_token), 0);
	d->ncores = 1;
	d->epfd = epoll_create1(EPOLL_CLOEXEC);
	assert_true(d->epfd >= 0);
}

static void
pump_once(void)
{
	kvx_pcore_poll_once(&A.cores[0]);
	kvx_pcore_poll_once(&B.cores[0]);
	kvxd_loop_once(&A, 0);
	kvxd_loop_once(&B, 0);
}

/* Step both nodes (advancing the fake clock by 1 ms a step) until cond holds. */
#define PUMP_UNTIL(cond)                                                                 \
	do {                                                                             \
		int i_;                                                                  \
		for (i_ = 0; i_ < 20000 && !(cond); i_++) {                              \
			pump_once();                                                     \
			fake_ms++;                                                       \
			if (i_ % 64 == 63)                                               \
				usleep(100);                                             \
		}                                                                        \
		if (!(cond))                                                             \
			fail_msg("timed out waiting for %s (a %s j%d, b %s j%d)", #cond, \
				 kvxd_peer_state_str(A.peers[0].state), A.peers[0].j.n,  \
				 kvxd_peer_state_str(B.peers[0].state), B.peers[0].j.n); \
	} while (0)

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
	return PA->state == KVXD_PEER_IDLE && PA->j.n == 0 && PB->state == KVXD_PEER_IDLE &&
	       PB->j.n == 0 && A.live_qpcs == 0 && B.live_qpcs == 0;
}

static struct fake_vx_live base;

static void
assert_live_at_base(void)
{
	struct fake_vx_live now = fake_vx_live();

	assert_int_equal(now.qp, base.qp);
	assert_int_equal(now.mr, base.mr);
	assert_int_equal(now.cq, base.cq);
	assert_int_equal(now.dev, base.dev);
}

static int
setup(void **state)
{
	int port;

	fake_vx_install();
	kvx_fault_disarm_all();
	kvxd_clock_ms = fake_clock;
	node_init(&A, "a", "b");
	node_init(&B, "b", "a");
	port = listen_any(&B);
	A.cfg.peers[0].addr.port = (uint16_t)port;
	B.cfg.peers[0].addr.port = 1; /* b never dials a */
	listen_any(&A);
	kvxd_peer_init_all(&A);
	kvxd_peer_init_all(&B);
	assert_true(PA->initiator);
	assert_false(PB->initiator);
	PA->paused = true; /* each test decides when a dials */
	base = fake_vx_live();
	return 0;
}

static int
teardown(void **state)
{
	kvxd_peer_admin(&A, "b", "pause");
	kvxd_peer_admin(&B, "a", "pause");
	for (int i = 0; i < 5000 && !both_idle(); i++) {
		pump_once();
		fake_ms++;
	}
	for (struct kvxd *d = &A; d; d = d == &A ? &B : NULL) {
		rcu_barrier();
		kvx_pcore_fini(&d->cores[0]);
		kvx_room_table_destroy(d->by_id);
		kvx_room_table_destroy(d->by_token);
		kvx_vx->dev_close(d->dev);
		close(d->tcp_fd);
		close(d->epfd);
		for (int i = 0; i < KVXD_MAX_PENDING; i++)
			if (d->pending[i])
				pending_drop(d, d->pending[i], true);
		free(d->peers[0].pend_status);
	}
	return 0;
}

static void
test_setup_and_teardown_release_everything(void **state)
{
	kvxd_peer_admin(&A, "b", "resume");
	PUMP_UNTIL(both_ready());
	assert_int_equal(fake_vx_live().qp, base.qp + 2);
	assert_int_equal(PA->epoch, 1);
	/* the published peer's teardown uses the same journal */
	assert_int_equal(PA->j.n, 5); /* socket, slot, qpc, qp, armed */
	kvxd_peer_admin(&A, "b", "pause");
	PUMP_UNTIL(both_idle());
	assert_live_at_base();
}

static const enum kvx_fault_point acquisition_points[] = {
	KVX_FAULT_HS_AFTER_SOCKET,    KVX_FAULT_HS_AFTER_SLOT,	  KVX_FAULT_HS_AFTER_QPC,
	KVX_FAULT_HS_AFTER_QP_CREATE, KVX_FAULT_HS_AFTER_QP_INIT, KVX_FAULT_HS_AFTER_RECV_POST,
	KVX_FAULT_HS_AFTER_RTR,	      KVX_FAULT_HS_AFTER_RTS,	  KVX_FAULT_HS_BEFORE_PUBLISH,
};

/* Fail the first side that reaches the point (skip = how many hits to let pass). */
static void
fail_at(enum kvx_fault_point pt, int skip)
{
	char spec[96], err[256];
	struct kvxd_peer *hit;
	char want[96];

	snprintf(spec, sizeof(spec), "%s:%d", kvx_fault_name(pt), skip);
	assert_int_equal(kvx_fault_arm_list(spec, err, sizeof(err)), 0);
	kvxd_peer_admin(&A, "b", "try");
	PUMP_UNTIL(kvx_fault_fired(pt) > 0 && both_idle());
	/* nothing leaked, on either side */
	assert_live_at_base();
	/* the side that failed reports the original error, not a rollback error */
	snprintf(want, sizeof(want), "injected fault %s", kvx_fault_name(pt));
	hit = strstr(PA->last_error, want) ? PA : strstr(PB->last_error, want) ? PB : NULL;
	if (!hit)
		fail_msg("%s: a: '%s', b: '%s'", spec, PA->last_error, PB->last_error);
	assert_true(PA->n_setup_failures + PB->n_setup_failures >= 1);
}

static void
test_every_acquisition_point_rolls_back(void **state)
{
	for (size_t i = 0; i < sizeof(acquisition_points) / sizeof(acquisition_points[0]); i++) {
		unsigned long before = kvx_fault_fired(acquisition_points[i]);

		fail_at(acquisition_points[i], 0);
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
	assert_int_equal(p->j.n, 4);
	assert_int_equal(p->j.e[0].kind, KVXD_J_SOCKET);
	assert_int_equal(p->j.e[1].kind, KVXD_J_SLOT);
	assert_int_equal(p->j.e[2].kind, KVXD_J_QPC);
	assert_int_equal(p->j.e[3].kind, KVXD_J_QP);
	assert_non_null(strstr(p->last_error, "injected fault handshake.after_rts"));
	assert_true(fake_vx_qp_in_error(p->qpc[0]->qp)); /* the armed QP was fenced */
	qp_before = fake_vx_live().qp;
	assert_true(qp_before >= base.qp + 1);

	/* the next setup with that peer first finishes the rollback (here a's dial, or b's
	 * acceptance of the new HELLO), before it acquires anything */
	if (p == PA) {
		PA->paused = false;
		dial(&A, PA);
		assert_int_equal(fake_vx_live().qp, base.qp + (PB->j.n ? 1 : 0));
	} else {
		kvxd_peer_admin(&A, "b", "resume");
		PUMP_UNTIL(PB->j.n == 0 || PB->state == KVXD_PEER_HELLO);
	}
	PUMP_UNTIL(both_ready());
	assert_int_equal(fake_vx_live().qp, base.qp + 2);
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
	struct kvxd_room *r = calloc(1, sizeof(*r));
	char err[256];

	/* a decode room on a waiting for its source b */
	r->id = 42;
	r->role = r->fsm.role = KVX_ROOM_DECODE;
	r->nsrc = 1;
	r->engine_id = -1;
	r->src_names = calloc(1, sizeof(*r->src_names));
	snprintf(r->src_names[0], sizeof(r->src_names[0]), "b");
	rcu_read_lock();
	assert_int_equal(kvx_room_table_add(A.by_id, &r->by_id, kvxd_room_key(42, r->role)), 0);
	rcu_read_unlock();
	assert_int_equal(kvx_fault_arm_list("handshake.after_rtr:0", err, sizeof(err)), 0);
	kvxd_peer_admin(&A, "b", "try");
	/* it fails through decode's abort path; no source was notified, so nothing can write
	 * into its pages and it is released at once */
	PUMP_UNTIL(kvxd_room_state(r) == KVX_ROOM_RELEASED);
	assert_non_null(strstr(r->reason, "setup failed"));
	assert_true(r->aborting && r->released);
	PUMP_UNTIL(both_idle());
	kvxd_room_remove(&A, r);
	for (int i = 0; i < 10; i++) /* the core gives it back; the control core frees it */
		pump_once();
	assert_int_equal(kvx_room_table_count(A.by_id), 0);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
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
