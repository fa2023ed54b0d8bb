/* SPDX-License-Identifier: Apache-2.0 */
/*
 * core/mbox.c: the bounded SPSC mailbox and its park/wake protocol.  Order and capacity; a
 * full mailbox refuses (nothing written); a busy consumer costs the producer no wake-up; a
 * parked consumer is always woken (a lost wake-up would stall the consumer thread below, which
 * waits on the eventfd with a long timeout and counts every time it expired with work
 * pending).  Negative control: the no_wake mutant (tests/mutants/) must fail this.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "core/mbox.c" /* the no_wake mutant replaces it */

struct msg {
	uint64_t seq;
	uint64_t pad[3];
};

static void
test_order_and_capacity(void **state)
{
	struct kvx_mbox *m = kvx_mbox_create(8, sizeof(struct msg));
	struct msg in = {0}, out[16];
	uint64_t next = 0, got = 0;

	(void)state;
	assert_non_null(m);
	assert_null(kvx_mbox_create(6, 8)); /* not a power of two */
	assert_null(kvx_mbox_create(8, 0));
	for (int round = 0; round < 1000; round++) { /* many wrap-arounds */
		int k = 1 + round % 8, n;

		for (int i = 0; i < k; i++) {
			in.seq = next++;
			assert_int_equal(kvx_mbox_put(m, &in), 0);
		}
		assert_int_equal(kvx_mbox_free_count(m), 8 - k);
		if (k == 8) { /* full: refused, nothing written */
			in.seq = 999999;
			assert_int_equal(kvx_mbox_put(m, &in), -ENOBUFS);
		}
		n = kvx_mbox_get_burst(m, out, 16);
		assert_int_equal(n, k);
		for (int i = 0; i < n; i++)
			assert_true(out[i].seq == got++);
		assert_true(kvx_mbox_empty(m));
	}
	kvx_mbox_destroy(m);
}

static bool
fd_readable(int fd)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};

	return poll(&p, 1, 0) == 1;
}

static void
test_wake_only_when_parked(void **state)
{
	struct kvx_mbox *m = kvx_mbox_create(64, sizeof(struct msg));
	struct msg in = {0}, out[64];

	(void)state;
	for (int i = 0; i < 10; i++)
		assert_int_equal(kvx_mbox_put(m, &in), 0);
	assert_false(fd_readable(kvx_mbox_fd(m))); /* a busy consumer: no syscall, no wake */
	assert_int_equal(kvx_mbox_get_burst(m, out, 64), 10);
	kvx_mbox_park_prepare(m);
	assert_true(kvx_mbox_empty(m)); /* the re-check after announcing */
	assert_int_equal(kvx_mbox_put(m, &in), 0);
	assert_true(fd_readable(kvx_mbox_fd(m))); /* parked: woken */
	kvx_mbox_park_done(m, true);
	assert_false(fd_readable(kvx_mbox_fd(m))); /* the wake-up was consumed */
	assert_int_equal(kvx_mbox_get_burst(m, out, 64), 1);
	kvx_mbox_kick(m);
	assert_true(fd_readable(kvx_mbox_fd(m)));
	kvx_mbox_park_done(m, true);
	assert_false(fd_readable(kvx_mbox_fd(m)));
	/* a wake-up the wait did not report (it landed after the wait): kept, so the next park
	 * returns at once instead of sleeping on work that is there */
	kvx_mbox_park_prepare(m);
	assert_int_equal(kvx_mbox_put(m, &in), 0);
	kvx_mbox_park_done(m, false);
	assert_true(fd_readable(kvx_mbox_fd(m)));
	kvx_mbox_park_done(m, true);
	kvx_mbox_destroy(m);
}

/* A batch put while the consumer is parked wakes it once: one eventfd write, not one per
 * message (the eventfd's counter is the number of writes). */
static void
test_one_wake_per_park(void **state)
{
	struct kvx_mbox *m = kvx_mbox_create(64, sizeof(struct msg));
	struct msg in = {0}, out[64];
	uint64_t writes = 0;

	(void)state;
	kvx_mbox_park_prepare(m);
	for (int i = 0; i < 32; i++)
		assert_int_equal(kvx_mbox_put(m, &in), 0);
	assert_int_equal(read(kvx_mbox_fd(m), &writes, sizeof(writes)), sizeof(writes));
	assert_int_equal(writes, 1);
	kvx_mbox_park_done(m, false);
	assert_int_equal(kvx_mbox_get_burst(m, out, 64), 32);
	/* the next park is woken again */
	kvx_mbox_park_prepare(m);
	assert_int_equal(kvx_mbox_put(m, &in), 0);
	assert_int_equal(kvx_mbox_put(m, &in), 0);
	assert_true(fd_readable(kvx_mbox_fd(m)));
	kvx_mbox_park_done(m, true);
	assert_false(fd_readable(kvx_mbox_fd(m)));
	assert_int_equal(kvx_mbox_get_burst(m, out, 64), 2);
	kvx_mbox_destroy(m);
}

/* A quiet put (a give-back nothing waits on) leaves a parked consumer asleep until the mailbox
 * is half full: then it wakes it, once; a loud put after quiet ones wakes it at once.  Every
 * message is there for the next drain, in order. */
static void
test_quiet_put_wakes_only_half_full(void **state)
{
	struct kvx_mbox *m = kvx_mbox_create(16, sizeof(struct msg));
	struct msg in = {0}, out[16];
	uint64_t writes = 0;

	(void)state;
	kvx_mbox_park_prepare(m);
	for (int i = 0; i < 7; i++) {
		in.seq = (uint64_t)i;
		assert_int_equal(kvx_mbox_put_quiet(m, &in), 0);
	}
	assert_false(fd_readable(kvx_mbox_fd(m))); /* 7 of 16: asleep, no syscall */
	assert_int_equal(kvx_mbox_wakes(m), 0);
	in.seq = 7;
	assert_int_equal(kvx_mbox_put_quiet(m, &in), 0); /* 8 of 16: half full */
	assert_int_equal(read(kvx_mbox_fd(m), &writes, sizeof(writes)), sizeof(writes));
	assert_int_equal(writes, 1);
	assert_int_equal(kvx_mbox_wakes(m), 1);
	in.seq = 8;
	assert_int_equal(kvx_mbox_put_quiet(m, &in), 0); /* woken already: no second write */
	assert_false(fd_readable(kvx_mbox_fd(m)));
	kvx_mbox_park_done(m, false);
	assert_int_equal(kvx_mbox_get_burst(m, out, 16), 9);
	for (int i = 0; i < 9; i++)
		assert_int_equal(out[i].seq, (uint64_t)i);
	/* quiet, then loud: the loud one wakes */
	kvx_mbox_park_prepare(m);
	assert_int_equal(kvx_mbox_put_quiet(m, &in), 0);
	assert_false(fd_readable(kvx_mbox_fd(m)));
	assert_int_equal(kvx_mbox_put(m, &in), 0);
	assert_true(fd_readable(kvx_mbox_fd(m)));
	assert_int_equal(kvx_mbox_wakes(m), 2);
	kvx_mbox_park_done(m, true);
	assert_int_equal(kvx_mbox_get_burst(m, out, 16), 2);
	/* a busy consumer: a quiet put costs nothing either, and full is full */
	for (int i = 0; i < 16; i++)
		assert_int_equal(kvx_mbox_put_quiet(m, &in), 0);
	assert_int_equal(kvx_mbox_put_quiet(m, &in), -ENOBUFS);
	assert_false(fd_readable(kvx_mbox_fd(m)));
	kvx_mbox_destroy(m);
}

#define N_MSGS 200000

struct race {
	struct kvx_mbox *m;
	uint64_t received, out_of_order, stalls, parks;
	_Atomic bool gave_up; /* after a stall: the test has failed, stop both sides */
};

/* The consumer of a polling core: drain, announce, re-check, block on the eventfd. */
static void *
consumer(void *arg)
{
	struct race *r = arg;
	struct msg out[32];

	while (r->received < N_MSGS) {
		int n = kvx_mbox_get_burst(r->m, out, 32);

		for (int i = 0; i < n; i++)
			r->out_of_order += out[i].seq != r->received++;
		if (n)
			continue;
		kvx_mbox_park_prepare(r->m);
		if (kvx_mbox_empty(r->m)) {
			struct pollfd p = {.fd = kvx_mbox_fd(r->m), .events = POLLIN};

			r->parks++;
			if (poll(&p, 1, 2000) == 0 && !kvx_mbox_empty(r->m)) {
				r->stalls++; /* work was there and nobody woke us */
				r->gave_up = true;
				kvx_mbox_park_done(r->m, true);
				return NULL;
			}
			kvx_mbox_park_done(r->m, p.revents & POLLIN);
			continue;
		}
		kvx_mbox_park_done(r->m, false);
	}
	return NULL;
}

static void
test_no_lost_wakeup(void **state)
{
	struct race r = {.m = kvx_mbox_create(256, sizeof(struct msg))};
	struct msg in = {0};
	pthread_t t;

	(void)state;
	assert_int_equal(pthread_create(&t, NULL, consumer, &r), 0);
	for (uint64_t i = 0; i < N_MSGS && !r.gave_up; i++) {
		in.seq = i;
		while (kvx_mbox_put(r.m, &in) == -ENOBUFS && !r.gave_up)
			sched_yield();
		if (i % 4096 == 0)
			usleep(200); /* let the consumer park now and then */
	}
	pthread_join(t, NULL);
	assert_int_equal(r.stalls, 0);
	assert_int_equal(r.received, N_MSGS);
	assert_int_equal(r.out_of_order, 0);
	assert_int_equal(r.stalls, 0);
	assert_true(r.parks > 0); /* the protocol was exercised */
	kvx_mbox_destroy(r.m);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_order_and_capacity),
		cmocka_unit_test(test_wake_only_when_parked),
		cmocka_unit_test(test_one_wake_per_park),
		cmocka_unit_test(test_quiet_put_wakes_only_half_full),
		cmocka_unit_test(test_no_lost_wakeup),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
