/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kvx-bench's byte check (bench/kvx_bench.c page_fill / page_verify): the VM tests and make bench
 * call a room good when page_verify finds no byte off, and the bench no longer clears destination
 * pages before a room.  So what a page holds when kvxd did not write it, or wrote the wrong
 * thing, must fail the check: another room's page, another page of the same room, the right page
 * shifted by a word, the page's canary, zeros; and one wrong byte counts as one.  Negative
 * controls: the bench_verify_blind and bench_pattern_flat mutants must fail this.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#pragma GCC diagnostic ignored "-Wunused-function"
int kvx_bench_main(int argc, char **argv);
#define main kvx_bench_main
#include "bench/kvx_bench.c"
#undef main

#define PS 4096u

static _Alignas(64) uint8_t page[PS + 8], other[PS];

static void
test_own_pattern_passes(void **state)
{
	(void)state;
	page_fill(page, PS, pattern_seed(7, 3, 1));
	assert_int_equal(page_verify(page, PS, pattern_seed(7, 3, 1)), 0);
}

/* at least 7 of every 8 bytes of a wrong page differ (a byte may match by chance) */
static void
assert_wrong(const uint8_t *p, uint64_t seed)
{
	uint64_t bad = page_verify(p, PS, seed);

	assert_true(bad >= PS - PS / 8);
	assert_true(bad <= PS);
}

static void
test_wrong_pages_fail(void **state)
{
	uint64_t want = pattern_seed(7, 3, 1);

	(void)state;
	page_fill(other, PS, pattern_seed(6, 3, 1)); /* the slot's previous room */
	assert_wrong(other, want);
	page_fill(other, PS, pattern_seed(8, 3, 1)); /* a later room */
	assert_wrong(other, want);
	page_fill(other, PS, pattern_seed(7, 4, 1)); /* another page of the room */
	assert_wrong(other, want);
	page_fill(other, PS, pattern_seed(7, 3, 0)); /* another buffer */
	assert_wrong(other, want);
	page_fill(other, PS, canary_seed(7, 3, 1)); /* released, then not written again */
	assert_wrong(other, want);
	memset(other, 0, PS); /* never written */
	assert_wrong(other, want);
	/* the right page, one word off (a write at the wrong offset) */
	page_fill(page, PS + 8, want);
	assert_wrong(page + 8, want);
	/* and the canary check: the room's own late write into its released page */
	page_fill(other, PS, want);
	assert_wrong(other, canary_seed(7, 3, 1));
}

static void
test_one_byte_counts_one(void **state)
{
	uint64_t want = pattern_seed(9, 0, 0);

	(void)state;
	for (uint32_t at = 0; at < PS; at += 1021) {
		page_fill(page, PS, want);
		page[at] ^= 0x40;
		assert_int_equal(page_verify(page, PS, want), 1);
	}
	page_fill(page, PS, want);
	page[PS - 1] ^= 1; /* the last byte */
	assert_int_equal(page_verify(page, PS, want), 1);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_own_pattern_passes),
		cmocka_unit_test(test_wrong_pages_fail),
		cmocka_unit_test(test_one_byte_counts_one),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
