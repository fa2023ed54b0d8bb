/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kvx-bench's byte check (bench/kvx_bench.c page_fill / page_verify): the VM tests and make bench
 * call a room good when page_verify finds no byte off, and the bench no longer clears destination
 * pages before a room.  So what a page holds when kvxd did not write it, or wrote the wrong
 * thing, must fail the check: another room's page, another page of the same room, the right page
 * shifted by a word, the page's canary, zeros; and one wrong byte counts as one.  Negative
 * controls: the bench_verify_blind and bench_pattern_flat mutants must fail this.
 *
 * make bench's sampled check (--window-check sampled: page_fill_sampled / page_verify_sampled,
 * the first and last word of every 512 bytes, for the rooms filled inside the window) must
 * agree with the full pattern, fail the same wrong pages, and fail a page with a packet's worth
 * of bytes missing or cut short; rooms outside the window and runs without the option are
 * checked whole.  Negative controls: bench_sample_first_only, bench_sampled_outside_window.
 */
#include <getopt.h>
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

/* What a page of room 7 (page 3, buffer 1) may hold when kvxd did not write it, or wrote the
 * wrong thing: each is handed to `wrong`, with the seed it should have. */
static void
wrong_pages(void (*wrong)(const uint8_t *p, uint64_t seed))
{
	uint64_t want = pattern_seed(7, 3, 1);

	page_fill(other, PS, pattern_seed(6, 3, 1)); /* the slot's previous room */
	wrong(other, want);
	page_fill(other, PS, pattern_seed(8, 3, 1)); /* a later room */
	wrong(other, want);
	page_fill(other, PS, pattern_seed(7, 4, 1)); /* another page of the room */
	wrong(other, want);
	page_fill(other, PS, pattern_seed(7, 3, 0)); /* another buffer */
	wrong(other, want);
	page_fill(other, PS, canary_seed(7, 3, 1)); /* released, then not written again */
	wrong(other, want);
	memset(other, 0, PS); /* never written */
	wrong(other, want);
	/* the right page, one word off (a write at the wrong offset) */
	page_fill(page, PS + 8, want);
	wrong(page + 8, want);
}

static void
test_wrong_pages_fail(void **state)
{
	uint64_t want = pattern_seed(7, 3, 1);

	(void)state;
	wrong_pages(assert_wrong);
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

/* A page filled whole passes the sampled check; one filled sampled over another room's page
 * passes it but not the full check (the words between the samples kept what they held). */
static void
test_sampled_agrees_with_full(void **state)
{
	uint64_t want = pattern_seed(7, 3, 1);

	(void)state;
	page_fill(page, PS, want);
	assert_int_equal(page_verify_sampled(page, PS, want), 0);
	page_fill(page, PS, pattern_seed(6, 3, 1));
	page_fill_sampled(page, PS, want);
	assert_int_equal(page_verify_sampled(page, PS, want), 0);
	assert_true(page_verify(page, PS, want) > PS / 2);
}

/* at least 7 of every 8 sampled bytes of a wrong page differ: 2 words of 8 bytes per 512 */
static void
assert_wrong_sampled(const uint8_t *p, uint64_t seed)
{
	uint64_t bad = page_verify_sampled(p, PS, seed), sampled = PS / 512 * 16;

	assert_true(bad >= sampled - sampled / 8);
	assert_true(bad <= sampled);
}

static void
test_sampled_wrong_pages_fail(void **state)
{
	(void)state;
	wrong_pages(assert_wrong_sampled);
	page_fill_sampled(other, PS, pattern_seed(8, 3, 1)); /* a later room, filled sampled */
	assert_wrong_sampled(other, pattern_seed(7, 3, 1));
}

/* The right page with a stretch of it still holding the previous room's bytes: a packet lost
 * anywhere in it (1024 bytes, the VM's path MTU), or the write cut short by 512 or by 8. */
static void
test_sampled_catches_missing_bytes(void **state)
{
	uint64_t want = pattern_seed(9, 2, 0), old = pattern_seed(8, 2, 0);

	(void)state;
	page_fill(other, PS, old);
	for (uint32_t at = 0; at + 1024 <= PS; at += 256) {
		page_fill(page, PS, want);
		memcpy(page + at, other + at, 1024);
		assert_true(page_verify_sampled(page, PS, want) >= 16);
	}
	page_fill(page, PS, want);
	memcpy(page + PS - 512, other + PS - 512, 512);
	assert_true(page_verify_sampled(page, PS, want) >= 14);
	page_fill(page, PS, want);
	memcpy(page + PS - 8, other + PS - 8, 8);
	assert_true(page_verify_sampled(page, PS, want) >= 7);
}

/* A page size that is no multiple of 512 (a multiple of 64): its last, short stretch is
 * sampled too, last word included. */
static void
test_sampled_short_last_stretch(void **state)
{
	const size_t ps = PS - 448; /* 3648: seven stretches of 512 and one of 64 */
	uint64_t want = pattern_seed(5, 1, 1);

	(void)state;
	page_fill(other, PS, pattern_seed(4, 1, 1));
	memcpy(page, other, PS);
	page_fill_sampled(page, ps, want);
	assert_int_equal(page_verify_sampled(page, ps, want), 0);
	page[ps - 1] ^= 1;
	assert_int_equal(page_verify_sampled(page, ps, want), 1);
	page[ps - 1] ^= 1;
	page[ps - 64] ^= 1; /* the first word of the short stretch */
	assert_int_equal(page_verify_sampled(page, ps, want), 1);
}

/* Only rooms filled inside the window are sampled, and only with the option. */
static void
test_sampled_only_inside_the_window(void **state)
{
	struct bench b;

	(void)state;
	memset(&b, 0, sizeof(b));
	b.t_warm = 1000;
	b.t_cool = 2000;
	b.o.window_sampled = true;
	assert_false(room_sampled(&b, 999));
	assert_true(room_sampled(&b, 1000));
	assert_true(room_sampled(&b, 1999));
	assert_false(room_sampled(&b, 2000));
	b.o.window_sampled = false;
	assert_false(room_sampled(&b, 1500));
}

static int
parse(struct opts *o, const char *const *args, int n)
{
	char *argv[16];

	for (int i = 0; i < n; i++)
		argv[i] = (char *)args[i];
	memset(o, 0, sizeof(*o));
	optind = 0; /* glibc: start over */
	opterr = 0;
	return parse_opts(n, argv, o);
}

/* --window-check takes full or sampled; sampled needs --duration (it has no window without). */
static void
test_window_check_option(void **state)
{
	const char *ok[] = {"kvx-bench", "--prefill",	   "p",	     "--decode", "d", "--duration",
			    "3",	 "--window-check", "sampled"};
	const char *no_duration[] = {"kvx-bench", "--prefill",	    "p",      "--decode",
				     "d",	  "--window-check", "sampled"};
	const char *bad[] = {"kvx-bench", "--prefill",	    "p",   "--decode", "d", "--duration",
			     "3",	  "--window-check", "some"};
	const char *full[] = {"kvx-bench", "--prefill",	     "p",   "--decode",
			      "d",	   "--window-check", "full"};
	struct opts o;

	(void)state;
	assert_int_equal(parse(&o, ok, 9), 0);
	assert_true(o.window_sampled);
	assert_int_equal(parse(&o, no_duration, 7), -EINVAL);
	assert_int_equal(parse(&o, bad, 9), -EINVAL);
	assert_int_equal(parse(&o, full, 7), 0);
	assert_false(o.window_sampled);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_own_pattern_passes),
		cmocka_unit_test(test_wrong_pages_fail),
		cmocka_unit_test(test_one_byte_counts_one),
		cmocka_unit_test(test_sampled_agrees_with_full),
		cmocka_unit_test(test_sampled_wrong_pages_fail),
		cmocka_unit_test(test_sampled_catches_missing_bytes),
		cmocka_unit_test(test_sampled_short_last_stretch),
		cmocka_unit_test(test_sampled_only_inside_the_window),
		cmocka_unit_test(test_window_check_option),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
