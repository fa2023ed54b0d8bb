/* SPDX-License-Identifier: Apache-2.0 */
/* The room timers' heap (control/timer.c): order, moving, cancelling, reservation. */
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "control/timer.h"

#define N 2000

static uint64_t
lcg(uint64_t *s)
{
	*s = *s * 6364136223846793005ull + 1442695040888963407ull;
	return *s >> 33;
}

/* Armed in random order, popped in deadline order, each exactly once. */
static void
test_pops_in_deadline_order(void **state)
{
	struct kvxd_timer_heap th = {0};
	static struct kvxd_timer t[N];
	uint64_t seed = 1, last = 0;
	int popped = 0;

	(void)state;
	assert_int_equal(kvxd_timer_reserve(&th, N), 0);
	for (int i = 0; i < N; i++)
		kvxd_timer_arm(&th, &t[i], 1 + lcg(&seed) % 100000);
	assert_null(kvxd_timer_pop_due(&th, 0)); /* nothing due yet */
	for (struct kvxd_timer *x; (x = kvxd_timer_pop_due(&th, UINT64_MAX - 1)); popped++) {
		assert_true(x->due_ms >= last);
		assert_false(kvxd_timer_armed(x));
		last = x->due_ms;
	}
	assert_int_equal(popped, N);
	assert_int_equal(kvxd_timer_next(&th), KVXD_TIMER_NEVER);
	kvxd_timer_unreserve(&th, N);
	kvxd_timer_heap_fini(&th);
}

/* Moving a deadline earlier or later and cancelling keep the heap in order; a cancelled
 * timer never fires, a moved one fires at its new time only. */
static void
test_move_and_cancel(void **state)
{
	struct kvxd_timer_heap th = {0};
	static struct kvxd_timer t[N];
	uint64_t seed = 7, last = 0;
	int popped = 0, cancelled = 0;

	(void)state;
	assert_int_equal(kvxd_timer_reserve(&th, N), 0);
	for (int i = 0; i < N; i++)
		kvxd_timer_arm(&th, &t[i], 1000 + lcg(&seed) % 1000);
	for (int i = 0; i < N; i += 3)
		kvxd_timer_arm(&th, &t[i], 1 + lcg(&seed) % 3000); /* earlier or later */
	for (int i = 1; i < N; i += 5, cancelled++)
		kvxd_timer_cancel(&th, &t[i]);
	kvxd_timer_arm(&th, &t[2], KVXD_TIMER_NEVER); /* NEVER cancels too */
	cancelled++;
	assert_false(kvxd_timer_armed(&t[2]));
	for (struct kvxd_timer *x; (x = kvxd_timer_pop_due(&th, 5000)); popped++) {
		assert_true(x->due_ms >= last);
		assert_true(x != &t[2] && (x - t) % 5 != 1);
		last = x->due_ms;
	}
	assert_int_equal(popped, N - cancelled);
	kvxd_timer_unreserve(&th, N);
	kvxd_timer_heap_fini(&th);
}

/* Only what is due at now comes out; kvxd_timer_next says when the next one is. */
static void
test_only_due_timers_pop(void **state)
{
	struct kvxd_timer_heap th = {0};
	struct kvxd_timer a = {0}, b = {0}, c = {0}; /* a timer starts zeroed (disarmed) */

	(void)state;
	assert_int_equal(kvxd_timer_reserve(&th, 3), 0);
	kvxd_timer_arm(&th, &a, 30);
	kvxd_timer_arm(&th, &b, 10);
	kvxd_timer_arm(&th, &c, 20);
	assert_int_equal(kvxd_timer_next(&th), 10);
	assert_ptr_equal(kvxd_timer_pop_due(&th, 15), &b);
	assert_null(kvxd_timer_pop_due(&th, 15));
	assert_int_equal(kvxd_timer_next(&th), 20);
	assert_ptr_equal(kvxd_timer_pop_due(&th, 30), &c);
	assert_ptr_equal(kvxd_timer_pop_due(&th, 30), &a);
	kvxd_timer_unreserve(&th, 3);
	kvxd_timer_heap_fini(&th);
}

/* The heap grows only when its owners reserve, so arming never allocates. */
static void
test_reserve_grows_capacity(void **state)
{
	struct kvxd_timer_heap th = {0};

	(void)state;
	assert_int_equal(kvxd_timer_reserve(&th, 1), 0);
	assert_true(th.cap >= 1);
	assert_int_equal(kvxd_timer_reserve(&th, 5000), 0);
	assert_true(th.cap >= 5001);
	assert_int_equal(kvxd_timer_reserve(&th, UINT32_MAX), -ENOMEM); /* refused, unchanged */
	assert_int_equal(th.reserved, 5001);
	kvxd_timer_unreserve(&th, 5001);
	kvxd_timer_heap_fini(&th);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_pops_in_deadline_order),
		cmocka_unit_test(test_move_and_cancel),
		cmocka_unit_test(test_only_due_timers_pop),
		cmocka_unit_test(test_reserve_grows_capacity),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
