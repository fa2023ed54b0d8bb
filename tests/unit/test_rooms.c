/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The room owner (control/rooms.c): constructors put a room on its sources' and its engine's
 * lists and reserve its timer; removal takes it off all of them; a peer's list is what peer
 * loss walks (no table scan).  Three nodes on the fake verbs: "a" takes rooms from "b" and "c".
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

#include "control/kvxd.h"
#include "control/abort.h"
#include "control/rooms.h"
#include "core/fault.h"

#include "nodes_harness.h"

#define A N[0]

static struct kvxd_pool pool = {.npages = 4, .page_size = 4096};
static const char names2[2][KVX_NAME_MAX] = {"b", "c"};
static const uint32_t pages[2] = {0, 1};

static int
setup(void **state)
{
	static const char *const names[] = {"a", "b", "c"};

	(void)state;
	nodes_setup(3, names);
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

struct visit {
	struct kvxd_room *r[8];
	int idx[8];
	int n;
};

static void
visit(struct kvxd *d, struct kvxd_room *r, int i, void *arg)
{
	struct visit *v = arg;

	(void)d;
	if (v->n < 8) {
		v->r[v->n] = r;
		v->idx[v->n] = i;
	}
	v->n++;
}

static struct visit
visits(struct kvxd *d, const char *peer)
{
	struct visit v = {0};

	kvxd_rooms_of_peer(d, peer_of(d, peer), visit, &v);
	return v;
}

static struct kvxd_room *
decode_room(uint64_t id)
{
	const int src[2] = {peer_of(&A, "b")->idx, peer_of(&A, "c")->idx};
	struct kvxd_room *r = decode_room_new1(&A, id, -1, &pool, pages, 2, names2, src, 2);

	assert_non_null(r);
	return r;
}

/* A decode room is on the list of each of its sources, with that source's index; a peer
 * walks only the rooms that depend on it. */
static void
test_decode_room_on_each_source_list(void **state)
{
	struct kvxd_room *r1 = decode_room(1), *r2 = decode_room(2);
	struct visit vb, vc;

	(void)state;
	vb = visits(&A, "b");
	vc = visits(&A, "c");
	assert_int_equal(vb.n, 2);
	assert_int_equal(vc.n, 2);
	assert_ptr_equal(vb.r[0], r1);
	assert_ptr_equal(vb.r[1], r2);
	assert_int_equal(vb.idx[0], 0); /* b is source 0 */
	assert_int_equal(vc.idx[0], 1); /* c is source 1 */
	kvxd_room_remove(&A, r1);
	vb = visits(&A, "b");
	vc = visits(&A, "c");
	assert_int_equal(vb.n, 1);
	assert_int_equal(vc.n, 1);
	assert_ptr_equal(vb.r[0], r2);
}

/* A prefill room joins its owner's list when its ROOM_META comes, once. */
static void
test_prefill_room_on_its_owner_list(void **state)
{
	struct kvxd_room *r = kvxd_prefill_room_new(&A, 7, 0, -1);

	(void)state;
	assert_non_null(r);
	assert_int_equal(visits(&A, "b").n, 0); /* no owner yet */
	kvxd_room_set_owner(&A, r, peer_of(&A, "b")->idx, 0, 5);
	kvxd_room_set_owner(&A, r, peer_of(&A, "b")->idx, 0, 5); /* a later session's META */
	assert_int_equal(visits(&A, "b").n, 1);
	assert_int_equal(visits(&A, "b").idx[0], 0);
	assert_int_equal(visits(&A, "c").n, 0);
	assert_int_equal(r->nowners, 1);
	assert_int_equal(r->owner[0].gen, 5);
	/* a second endpoint (fan-out): rank 1 of c, then rank 2 of b: one link per owner */
	kvxd_room_set_owner(&A, r, peer_of(&A, "c")->idx, 1, 6);
	kvxd_room_set_owner(&A, r, peer_of(&A, "b")->idx, 2, 7);
	assert_int_equal(r->nowners, 3);
	assert_int_equal(kvxd_room_owner(r, peer_of(&A, "c")->idx, 1), 1);
	assert_int_equal(kvxd_room_owner(r, peer_of(&A, "c")->idx, 0), -1);
	assert_int_equal(visits(&A, "c").n, 1);
	assert_int_equal(visits(&A, "c").idx[0], 1);
	assert_int_equal(visits(&A, "b").n, 2);
}

/* Every room holds one place in the timer heap from creation to removal, so that arming its
 * deadline never allocates; its waiting deadline is armed at creation. */
static void
test_rooms_reserve_their_timer(void **state)
{
	struct kvxd_room *r[3];

	(void)state;
	for (int i = 0; i < 3; i++)
		r[i] = decode_room(10 + (uint64_t)i);
	assert_int_equal(A.room_timers.reserved, 3);
	assert_int_equal(A.room_timers.n, 3);
	assert_int_equal(kvxd_rooms_next_due(&A), r[0]->opened_ms + A.cfg.waiting_ms);
	kvxd_room_remove(&A, r[1]);
	assert_int_equal(A.room_timers.reserved, 2);
	assert_int_equal(A.room_timers.n, 2);
	assert_false(kvxd_timer_armed(&r[1]->tm));
	kvxd_room_remove(&A, r[1]); /* twice: nothing more */
	assert_int_equal(A.room_timers.reserved, 2);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_decode_room_on_each_source_list, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_prefill_room_on_its_owner_list, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_rooms_reserve_their_timer, setup, teardown),
	};

	int rc;

	rcu_register_thread();
	rc = cmocka_run_group_tests(tests, NULL, NULL);
	rcu_unregister_thread();
	return rc;
}
