/* SPDX-License-Identifier: Apache-2.0 */
/* Room state machine: every (role, from, to) triple against an independent list of the legal
 * ones, counters, stickiness, name tables and the debug trace. */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "core/log.h"
#include "core/room.h"

/* Short names for the table and the paths below. */
#define B KVX_ROOM_BOOTSTRAPPING
#define W KVX_ROOM_WAITING_FOR_INPUT
#define T KVX_ROOM_TRANSFERRING
#define S KVX_ROOM_SUCCESS
#define F KVX_ROOM_FAILED
#define D KVX_ROOM_DRAINING
#define R KVX_ROOM_RELEASED
#define N KVX_ROOM_STATE_COUNT

/* The legal transitions, written out from room.h / DESIGN.md section 1 (not from room.c). */
static const struct {
	int role; /* -1: both roles */
	int from, to;
} legal[] = {
	{-1, B, W},
	{-1, B, T},
	{-1, B, S},
	{-1, B, F}, /* main line, forward skips */
	{-1, W, T},
	{-1, W, S},
	{-1, W, F}, /* */
	{-1, T, S},
	{-1, T, F},		 /* */
	{KVX_ROOM_DECODE, F, D}, /* decode after an abort/failure */
	{KVX_ROOM_DECODE, F, R}, /* */
	{KVX_ROOM_DECODE, D, R}, /* */
};

static int
expect_legal(int role, int from, int to)
{
	size_t i;

	for (i = 0; i < sizeof(legal) / sizeof(legal[0]); i++)
		if ((legal[i].role < 0 || legal[i].role == role) && legal[i].from == from &&
		    legal[i].to == to)
			return 1;
	return 0;
}

static uint64_t
taken_total(const struct kvx_room_counters *c)
{
	uint64_t sum = 0;
	int i, j;

	for (i = 0; i < N; i++)
		for (j = 0; j < N; j++)
			sum += c->taken[i][j];
	return sum;
}

/* All 7 x 7 pairs x 2 roles, each from a fresh room in state `from`. */
static void
test_all_pairs(void **state)
{
	int role, from, to, nlegal = 0, nrefused = 0, nalready = 0;

	for (role = KVX_ROOM_DECODE; role <= KVX_ROOM_PREFILL; role++) {
		for (from = 0; from < N; from++) {
			for (to = 0; to < N; to++) {
				struct kvx_room_fsm f = {.state = from, .role = role};
				struct kvx_room_counters c;
				int rc;

				memset(&c, 0, sizeof(c));
				rc = kvx_room_fsm_set(&f, to, &c);
				assert_int_equal(f.role, role);
				if (from == to) {
					assert_int_equal(rc, -EALREADY);
					assert_int_equal(f.state, from);
					assert_int_equal(c.refused, 0);
					assert_int_equal(taken_total(&c), 0);
					assert_false(kvx_room_transition_valid(role, from, to));
					nalready++;
				} else if (expect_legal(role, from, to)) {
					if (rc != 0)
						fail_msg("%s %s -> %s refused",
							 kvx_room_role_str(role),
							 kvx_room_state_str(from),
							 kvx_room_state_str(to));
					assert_int_equal(f.state, to);
					assert_int_equal(c.taken[from][to], 1);
					assert_int_equal(taken_total(&c), 1);
					assert_int_equal(c.refused, 0);
					assert_true(kvx_room_transition_valid(role, from, to));
					nlegal++;
				} else {
					if (rc != -EINVAL)
						fail_msg("%s %s -> %s: %d, want -EINVAL",
							 kvx_room_role_str(role),
							 kvx_room_state_str(from),
							 kvx_room_state_str(to), rc);
					assert_int_equal(f.state, from);
					assert_int_equal(c.refused, 1);
					assert_int_equal(taken_total(&c), 0);
					assert_false(kvx_room_transition_valid(role, from, to));
					nrefused++;
				}
			}
		}
	}
	/* 9 main-line transitions per role + 3 decode-only; the rest of the 84 refused. */
	assert_int_equal(nlegal, 21);
	assert_int_equal(nalready, 14);
	assert_int_equal(nrefused, 2 * N * N - 21 - 14);
}

static void
test_decode_abort_path(void **state)
{
	struct kvx_room_fsm f = {.state = B, .role = KVX_ROOM_DECODE};
	struct kvx_room_counters c;

	memset(&c, 0, sizeof(c));
	assert_int_equal(kvx_room_fsm_set(&f, W, &c), 0);
	assert_int_equal(kvx_room_fsm_set(&f, T, &c), 0);
	assert_int_equal(kvx_room_fsm_set(&f, F, &c), 0);
	assert_int_equal(kvx_room_fsm_set(&f, F, &c), -EALREADY); /* a second error */
	assert_int_equal(kvx_room_fsm_set(&f, S, &c), -EINVAL);	  /* sticky */
	assert_int_equal(kvx_room_fsm_set(&f, D, &c), 0);
	assert_int_equal(kvx_room_fsm_set(&f, F, &c), -EINVAL); /* backwards */
	assert_int_equal(kvx_room_fsm_set(&f, R, &c), 0);
	assert_int_equal(f.state, R);
	assert_true(kvx_room_state_terminal(f.state));

	assert_int_equal(c.taken[B][W], 1);
	assert_int_equal(c.taken[W][T], 1);
	assert_int_equal(c.taken[T][F], 1);
	assert_int_equal(c.taken[F][D], 1);
	assert_int_equal(c.taken[D][R], 1);
	assert_int_equal(taken_total(&c), 5);
	assert_int_equal(c.refused, 2);
}

static void
test_prefill_success_path(void **state)
{
	struct kvx_room_fsm f = {.state = B, .role = KVX_ROOM_PREFILL};
	struct kvx_room_counters c;
	int to;

	memset(&c, 0, sizeof(c));
	assert_int_equal(kvx_room_fsm_set(&f, W, &c), 0);
	assert_int_equal(kvx_room_fsm_set(&f, S, &c), 0); /* skip: one chunk */
	for (to = 0; to < N; to++)
		assert_int_equal(kvx_room_fsm_set(&f, to, &c), to == S ? -EALREADY : -EINVAL);
	assert_int_equal(f.state, S);
	assert_int_equal(c.taken[B][W], 1);
	assert_int_equal(c.taken[W][S], 1);
	assert_int_equal(taken_total(&c), 2);
	assert_int_equal(c.refused, N - 1);
}

/* FAILED is left only towards DRAINING/RELEASED, on decode only; never back to the main line. */
static void
test_failed_sticky(void **state)
{
	int role, to;

	for (role = KVX_ROOM_DECODE; role <= KVX_ROOM_PREFILL; role++) {
		for (to = 0; to < N; to++) {
			struct kvx_room_fsm f = {.state = F, .role = role};
			int rc = kvx_room_fsm_set(&f, to, NULL);

			if (to == F)
				assert_int_equal(rc, -EALREADY);
			else if (role == KVX_ROOM_DECODE && (to == D || to == R))
				assert_int_equal(rc, 0);
			else
				assert_int_equal(rc, -EINVAL);
			if (rc == 0)
				assert_int_equal(f.state, to);
			else
				assert_int_equal(f.state, F);
		}
	}
}

/* Counters accumulate across rooms sharing one instance (one per core); NULL is accepted. */
static void
test_counters_accumulate(void **state)
{
	struct kvx_room_counters c;
	int i;

	memset(&c, 0, sizeof(c));
	for (i = 0; i < 3; i++) {
		struct kvx_room_fsm f = {.state = T, .role = KVX_ROOM_PREFILL};

		assert_int_equal(kvx_room_fsm_set(&f, F, &c), 0);
		assert_int_equal(kvx_room_fsm_set(&f, D, &c), -EINVAL); /* decode-only */
		assert_int_equal(kvx_room_fsm_set(&f, F, &c), -EALREADY);
		assert_int_equal(kvx_room_fsm_set(&f, D, NULL), -EINVAL);
	}
	assert_int_equal(c.taken[T][F], 3);
	assert_int_equal(taken_total(&c), 3);
	assert_int_equal(c.refused, 3);
}

static void
test_valid_out_of_range(void **state)
{
	assert_false(kvx_room_transition_valid(2, B, W));
	assert_false(kvx_room_transition_valid(-1, B, W));
	assert_false(kvx_room_transition_valid(KVX_ROOM_DECODE, -1, W));
	assert_false(kvx_room_transition_valid(KVX_ROOM_DECODE, N, W));
	assert_false(kvx_room_transition_valid(KVX_ROOM_DECODE, B, N));
	assert_false(kvx_room_transition_valid(KVX_ROOM_DECODE, B, -1));
	assert_false(kvx_room_transition_valid(KVX_ROOM_DECODE, B, 200));
}

static void
test_out_of_range_target_refused(void **state)
{
	struct kvx_room_fsm f = {.state = T, .role = KVX_ROOM_DECODE};
	struct kvx_room_counters c;

	memset(&c, 0, sizeof(c));
	assert_int_equal(kvx_room_fsm_set(&f, N, &c), -EINVAL);
	assert_int_equal(kvx_room_fsm_set(&f, (enum kvx_room_state)(T + 256), &c), -EINVAL);
	assert_int_equal(kvx_room_fsm_set(&f, (enum kvx_room_state) - 1, &c), -EINVAL);
	assert_int_equal(f.state, T);
	assert_int_equal(c.refused, 3);
}

static void
test_str_tables(void **state)
{
	static const char *const names[N] = {
		"BOOTSTRAPPING", "WAITING_FOR_INPUT", "TRANSFERRING", "SUCCESS",
		"FAILED",	 "DRAINING",	      "RELEASED"};
	int s;

	for (s = 0; s < N; s++)
		assert_string_equal(kvx_room_state_str(s), names[s]);
	assert_string_equal(kvx_room_state_str(-1), "?");
	assert_string_equal(kvx_room_state_str(N), "?");
	assert_string_equal(kvx_room_state_str(1000), "?");
	assert_string_equal(kvx_room_role_str(KVX_ROOM_DECODE), "DECODE");
	assert_string_equal(kvx_room_role_str(KVX_ROOM_PREFILL), "PREFILL");
	assert_string_equal(kvx_room_role_str(2), "?");
	assert_string_equal(kvx_room_role_str(-1), "?");
}

static void
test_terminal(void **state)
{
	int s;

	for (s = 0; s < N; s++)
		assert_int_equal(kvx_room_state_terminal(s), s == S || s == F || s == R);
}

/* Run one transition with stderr captured; returns what was logged. */
static void
capture_set(int level, struct kvx_room_fsm *f, int to, int want_rc, char *out, size_t outsz)
{
	FILE *tmp = tmpfile();
	int saved, n;

	assert_non_null(tmp);
	saved = dup(STDERR_FILENO);
	assert_true(saved >= 0);
	assert_true(dup2(fileno(tmp), STDERR_FILENO) >= 0);
	kvx_log_init("test", level);
	n = kvx_room_fsm_set(f, to, NULL);
	kvx_log_init("test", KVX_LOG_INFO);
	assert_true(dup2(saved, STDERR_FILENO) >= 0);
	close(saved);
	assert_int_equal(n, want_rc);

	rewind(tmp);
	n = (int)fread(out, 1, outsz - 1, tmp);
	out[n < 0 ? 0 : n] = '\0';
	fclose(tmp);
}

static void
test_debug_trace(void **state)
{
	struct kvx_room_fsm f = {.state = B, .role = KVX_ROOM_DECODE};
	char buf[1024];

	capture_set(KVX_LOG_DEBUG, &f, W, 0, buf, sizeof(buf));
	assert_non_null(strstr(buf, "DEBUG"));
	assert_non_null(strstr(buf, "DECODE room: BOOTSTRAPPING -> WAITING_FOR_INPUT"));

	capture_set(KVX_LOG_DEBUG, &f, B, -EINVAL, buf, sizeof(buf));
	assert_non_null(strstr(buf, "refused WAITING_FOR_INPUT -> BOOTSTRAPPING"));

	capture_set(KVX_LOG_INFO, &f, T, 0, buf, sizeof(buf));
	assert_string_equal(buf, ""); /* not traced above debug level */
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_all_pairs),
		cmocka_unit_test(test_decode_abort_path),
		cmocka_unit_test(test_prefill_success_path),
		cmocka_unit_test(test_failed_sticky),
		cmocka_unit_test(test_counters_accumulate),
		cmocka_unit_test(test_valid_out_of_range),
		cmocka_unit_test(test_out_of_range_target_refused),
		cmocka_unit_test(test_str_tables),
		cmocka_unit_test(test_terminal),
		cmocka_unit_test(test_debug_trace),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
