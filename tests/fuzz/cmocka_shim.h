/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The few cmocka assertions tests/unit/nodes_harness.h uses, for fuzz targets (no cmocka
 * runner): a failed one prints where and aborts, which libFuzzer reports as a crash.
 */
#ifndef KVX_TESTS_FUZZ_CMOCKA_SHIM_H
#define KVX_TESTS_FUZZ_CMOCKA_SHIM_H

#include <stdio.h>
#include <stdlib.h>

#define fail_msg(...)                                                                 \
	do {                                                                          \
		fprintf(stderr, "%s:%d: harness check failed: ", __FILE__, __LINE__); \
		fprintf(stderr, __VA_ARGS__);                                         \
		fprintf(stderr, "\n");                                                \
		abort();                                                              \
	} while (0)
#define assert_true(c)                      \
	do {                                \
		if (!(c))                   \
			fail_msg("%s", #c); \
	} while (0)
#define assert_false(c) assert_true(!(c))
#define assert_non_null(p) assert_true((p) != NULL)
#define assert_null(p) assert_true((p) == NULL)
#define assert_int_equal(a, b)                                              \
	do {                                                                \
		long long a_ = (long long)(a), b_ = (long long)(b);         \
		if (a_ != b_)                                               \
			fail_msg("%s == %s: %lld != %lld", #a, #b, a_, b_); \
	} while (0)
#define assert_int_not_equal(a, b) assert_true((long long)(a) != (long long)(b))
#define assert_string_equal(a, b) assert_true(strcmp((a), (b)) == 0)
#define assert_memory_equal(a, b, n) assert_true(memcmp((a), (b), (n)) == 0)

#endif /* KVX_TESTS_FUZZ_CMOCKA_SHIM_H */
