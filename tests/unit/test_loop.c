/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The control loop (control/loop.c): how long it sleeps (never past a room deadline, briefly
 * while a core's overflow ring waits), and what it does with the cores' outboxes (a room that
 * ends and has no engine leaves at once: the room owner's settle, no periodic scan).  Two
 * nodes on the fake verbs; the fake clock stands still unless a test moves it.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include <cmocka.h>

#include "control/kvxd.h"
#include "control/abort.h"
#include "control/loop.h"
#include "control/rooms.h"
#include "core/fault.h"

#include "nodes_harness.h"

#define A N[0]

static struct kvxd_pool pool = {.npages = 4, .page_size = 4096};
static const char names1[1][KVX_NAME_MAX] = {"b"};
static const uint32_t pages[1] = {0};

static int
setup(void **state)
{
	static const char *const names[] = {"a", "b"};

	(void)state;
	nodes_setup(2, names);
	return 0;
}

static int
teardown(void **state)
{
	(void)state;
	nodes_remove_rooms(&A);
	nodes_teardown();
	return 0;
}

static double
elapsed_s(const struct timespec *t0)
{
	struct timespec t1;

	clock_gettime(CLOCK_MONOTONIC, &t1);
	return (double)(t1.tv_sec - t0->tv_sec) + (double)(t1.tv_nsec - t0->tv_nsec) / 1e9;
}

/* A decode room on a (source b), on its core. */
static struct kvxd_room *
open_room(uint64_t id)
{
	const int src[1] = {peer_of(&A, "b")->idx};
	struct kvxd_room *r = decode_room_new1(&A, id, -1, &pool, pages, 1, names1, src, 1);
	struct kvxd_msg m = {.type = KVXD_MSG_ROOM_OPEN};

	assert_non_null(r);
	m.room = &r->pc;
	assert_int_equal(kvx_pcore_send(&A.cores[r->pc.core], &m), 0);
	return r;
}

/* A room that ends with no engine to hold it goes on the event that ends it: the clock does
 * not move, so a periodic scan would never run. */
static void
test_ended_room_leaves_without_a_scan(void **state)
{
	struct kvxd_room *r = open_room(1);
	uint64_t t = fake_ms;

	(void)state;
	/* no source was sent its metadata: nothing can write, the abort releases at once */
	assert_true(kvxd_decode_abort(&A, r, -ECANCELED, "test") > 0);
	for (int i = 0; i < 20 && kvx_room_table_count(A.by_id); i++) {
		node_poll_cores(&A);
		kvxd_loop_once(&A, 0);
	}
	assert_int_equal(fake_ms, t);
	assert_int_equal(kvx_room_table_count(A.by_id), 0);
	assert_int_equal(A.room_timers.n, 0); /* and its deadline went with it */
}

/* With a room deadline 30 ms away (fake clock) the loop waits about that long for events, not
 * the 15 s it was given; at the deadline it fires the room's timer. */
static void
test_loop_sleeps_until_the_next_deadline(void **state)
{
	struct kvxd_room *r = open_room(2);
	uint64_t due = r->opened_ms + A.cfg.waiting_ms;
	struct timespec t0;

	(void)state;
	kvx_pcore_poll_once(&A.cores[r->pc.core]);
	kvxd_loop_once(&A, 0);
	fake_ms = due - 30;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	kvxd_loop_once(&A, 15000);
	assert_true(elapsed_s(&t0) < 10.0);
	assert_false(kvxd_room_aborting(r)); /* not before its deadline */
	fake_ms = due;
	kvxd_loop_once(&A, 15000);
	assert_true(kvxd_room_aborting(r)); /* its waiting timeout: an abort */
	assert_int_equal(A.ctr.waiting_timeouts, 1);
}

/* While a core's overflow ring holds messages the loop comes back within a millisecond to
 * retry them, however long it was told it may wait. */
static void
test_loop_retries_a_full_inbox_soon(void **state)
{
	struct kvxd_room *r = open_room(3);
	struct kvxd_msg m = {.type = KVXD_MSG_ROOM_OPEN};
	struct timespec t0;

	(void)state;
	m.room = &r->pc;
	while (kvx_mbox_free_count(A.cores[r->pc.core].inbox) > 0)
		assert_int_equal(kvx_pcore_send(&A.cores[r->pc.core], &m), 0);
	assert_int_equal(kvx_pcore_send(&A.cores[r->pc.core], &m), 0); /* into the overflow ring */
	assert_true(A.cores[r->pc.core].ovf_len > 0);
	clock_gettime(CLOCK_MONOTONIC, &t0);
	kvxd_loop_once(&A, 15000);
	assert_true(elapsed_s(&t0) < 10.0);
	while (A.cores[r->pc.core].ovf_len > 0) { /* the core takes them; the loop moves the rest */
		kvx_pcore_poll_once(&A.cores[r->pc.core]);
		kvxd_loop_once(&A, 0);
	}
	while (!kvx_mbox_empty(
		A.cores[r->pc.core].inbox)) { /* and the core works through the rest */
		kvx_pcore_poll_once(&A.cores[r->pc.core]);
		kvxd_loop_once(&A, 0);
	}
	assert_int_equal(A.cores[r->pc.core].ovf_len, 0);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_ended_room_leaves_without_a_scan, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_loop_sleeps_until_the_next_deadline, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_loop_retries_a_full_inbox_soon, setup,
						teardown),
	};

	int rc;

	rcu_register_thread();
	rc = cmocka_run_group_tests(tests, NULL, NULL);
	rcu_unregister_thread();
	return rc;
}
