/* SPDX-License-Identifier: Apache-2.0 */
/*
 * core/rand: values drawn from the per-thread buffer are never handed out twice, across buffer
 * refills and across threads, and kvx_rand_u32_nonzero is never 0.  Negative control: the
 * rand_reuse mutant (the buffer position does not advance) must fail this.
 */
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>

#include <cmocka.h>

#include "core/rand.h"

#define DRAWS 4096 /* 32 KiB of draws: 64 buffer refills */

static int
cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* 64-bit draws from a CSPRNG: a repeat among 2 x 4096 has probability about 2^-41. */
static void
assert_all_distinct(uint64_t *v, size_t n)
{
	qsort(v, n, sizeof(*v), cmp_u64);
	for (size_t i = 1; i < n; i++)
		assert_true(v[i] != v[i - 1]);
}

static void
test_u64_draws_are_distinct_across_refills(void **state)
{
	static uint64_t v[DRAWS];

	(void)state;
	for (size_t i = 0; i < DRAWS; i++)
		v[i] = kvx_rand_u64();
	assert_all_distinct(v, DRAWS);
}

static void
test_u32_nonzero(void **state)
{
	(void)state;
	for (int i = 0; i < 100000; i++)
		assert_true(kvx_rand_u32_nonzero() != 0);
}

static void *
draw_thread(void *arg)
{
	uint64_t *v = arg;

	for (size_t i = 0; i < DRAWS; i++)
		v[i] = kvx_rand_u64();
	return NULL;
}

/* Two threads each draw from their own buffer: no value is seen by both. */
static void
test_threads_do_not_share_draws(void **state)
{
	static uint64_t v[2 * DRAWS];
	pthread_t t;

	(void)state;
	assert_int_equal(pthread_create(&t, NULL, draw_thread, v), 0);
	draw_thread(v + DRAWS);
	assert_int_equal(pthread_join(t, NULL), 0);
	assert_all_distinct(v, 2 * DRAWS);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_u64_draws_are_distinct_across_refills),
		cmocka_unit_test(test_u32_nonzero),
		cmocka_unit_test(test_threads_do_not_share_draws),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
