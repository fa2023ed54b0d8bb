/* SPDX-License-Identifier: Apache-2.0 */
/*
 * core/fault.c: named fault points.  "name:N" lets N hits pass and fires once; every point is
 * inert until armed; bad specs are refused with a message naming the known points; concurrent
 * hitters see exactly one fire.
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "core/fault.h"

static void
test_fires_once_after_n(void **state)
{
	char err[512];
	unsigned long before = kvx_fault_fired(KVX_FAULT_HS_AFTER_SLOT);

	(void)state;
	kvx_fault_disarm_all();
	for (int p = 0; p < KVX_FAULT_COUNT; p++)
		assert_false(kvx_fault_hit(p)); /* inert */
	/* one bad item refuses the whole list: nothing armed */
	assert_int_equal(kvx_fault_arm_list("handshake.after_slot:0,bogus:1", err, sizeof(err)),
			 -EINVAL);
	assert_false(kvx_fault_hit(KVX_FAULT_HS_AFTER_SLOT));
	assert_int_equal(kvx_fault_arm_list("handshake.after_slot:2, rollback.destroy_qp:0", err,
					    sizeof(err)),
			 0);
	assert_true(kvx_fault_hit(KVX_FAULT_RB_DESTROY_QP)); /* :0 fires at the next hit */
	assert_false(kvx_fault_hit(KVX_FAULT_RB_DESTROY_QP));
	assert_false(kvx_fault_hit(KVX_FAULT_HS_AFTER_SLOT));
	assert_false(kvx_fault_hit(KVX_FAULT_HS_AFTER_SLOT));
	assert_true(kvx_fault_hit(KVX_FAULT_HS_AFTER_SLOT));
	assert_false(kvx_fault_hit(KVX_FAULT_HS_AFTER_SLOT)); /* once */
	assert_int_equal(kvx_fault_fired(KVX_FAULT_HS_AFTER_SLOT), before + 1);
	assert_int_equal(kvx_fault_arm_list("handshake.stall:5", err, sizeof(err)), 0);
	kvx_fault_disarm_all();
	for (int i = 0; i < 10; i++)
		assert_false(kvx_fault_hit(KVX_FAULT_HS_STALL));
}

static void
test_bad_specs(void **state)
{
	char err[512];

	(void)state;
	assert_int_equal(kvx_fault_arm_list("no.such.point:1", err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "unknown fault point 'no.such.point'"));
	assert_non_null(strstr(err, "handshake.after_rtr")); /* names the known ones */
	assert_int_equal(kvx_fault_arm_list("handshake.stall", err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, "expected NAME:N"));
	assert_int_equal(kvx_fault_arm_list("handshake.stall:-1", err, sizeof(err)), -EINVAL);
	assert_int_equal(kvx_fault_arm_list("handshake.stall:1000001", err, sizeof(err)), -EINVAL);
	assert_int_equal(kvx_fault_arm_list("handshake.stall:1x", err, sizeof(err)), -EINVAL);
	assert_string_equal(kvx_fault_name(KVX_FAULT_WR_CORRUPT_RKEY), "wr.corrupt_rkey");
}

static _Atomic int fires;

static void *
hitter(void *arg)
{
	(void)arg;
	for (int i = 0; i < 200000; i++)
		if (kvx_fault_hit(KVX_FAULT_WR_CORRUPT_RKEY))
			fires++;
	return NULL;
}

static void
test_concurrent_hits_fire_once(void **state)
{
	char err[256];
	pthread_t t[4];

	(void)state;
	for (int round = 0; round < 20; round++) {
		fires = 0;
		assert_int_equal(kvx_fault_arm_list("wr.corrupt_rkey:50000", err, sizeof(err)), 0);
		for (int i = 0; i < 4; i++)
			assert_int_equal(pthread_create(&t[i], NULL, hitter, NULL), 0);
		for (int i = 0; i < 4; i++)
			pthread_join(t[i], NULL);
		assert_int_equal(fires, 1);
	}
	kvx_fault_disarm_all();
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_fires_once_after_n),
		cmocka_unit_test(test_bad_specs),
		cmocka_unit_test(test_concurrent_hits_fire_once),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
