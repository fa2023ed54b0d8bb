/* SPDX-License-Identifier: Apache-2.0 */
/*
 * core/shring: the shared-memory ring of the engine sessions.  The ring lives in a memfd mapped
 * twice (two addresses, as in two processes); the producer writes through one mapping and the
 * consumer reads through the other.  What the far side writes into the shared pages is hostile:
 * impossible indices and records are refused (-EPROTO), never followed.  Negative controls: the
 * mutants shring_tail_unchecked, shring_record_unchecked and shring_head_unchecked.
 */
#include <errno.h>
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdatomic.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <fcntl.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cmocka.h>

#include "core/shring.h"

#define SIZE (64u << 10)

struct two {
	int memfd;
	int wake[2]; /* the wake pair: the producer's end, the consumer's end */
	size_t len;
	uint8_t *pmap, *cmap; /* producer's and consumer's mappings */
	struct kvx_shring p, c;
};

static struct two T;

static int
setup(void **state)
{
	(void)state;
	T.len = kvx_shring_map_bytes(SIZE);
	assert_true(T.len > SIZE);
	T.memfd = memfd_create("shring", MFD_CLOEXEC);
	assert_true(T.memfd >= 0);
	assert_int_equal(ftruncate(T.memfd, (off_t)T.len), 0);
	T.pmap = mmap(NULL, T.len, PROT_READ | PROT_WRITE, MAP_SHARED, T.memfd, 0);
	T.cmap = mmap(NULL, T.len, PROT_READ | PROT_WRITE, MAP_SHARED, T.memfd, 0);
	assert_true(T.pmap != MAP_FAILED && T.cmap != MAP_FAILED && T.pmap != T.cmap);
	assert_int_equal(kvx_shring_wake_pair(T.wake), 0);
	assert_int_equal(kvx_shring_format(T.pmap, SIZE), 0);
	assert_int_equal(kvx_shring_attach(&T.p, T.pmap, T.len, SIZE, T.wake[0], true), 0);
	assert_int_equal(kvx_shring_attach(&T.c, T.cmap, T.len, SIZE, T.wake[1], false), 0);
	return 0;
}

static int
teardown(void **state)
{
	(void)state;
	munmap(T.pmap, T.len);
	munmap(T.cmap, T.len);
	close(T.memfd);
	if (T.wake[0] >= 0)
		close(T.wake[0]);
	if (T.wake[1] >= 0)
		close(T.wake[1]);
	return 0;
}

static void
fill(uint8_t *b, uint32_t len, uint32_t seed)
{
	for (uint32_t i = 0; i < len; i++)
		b[i] = (uint8_t)(seed * 31 + i * 7);
}

static bool
check(const uint8_t *b, uint32_t len, uint32_t seed)
{
	for (uint32_t i = 0; i < len; i++)
		if (b[i] != (uint8_t)(seed * 31 + i * 7))
			return false;
	return true;
}

static bool
fd_readable(int fd)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};

	return poll(&p, 1, 0) == 1;
}

/* Shared-header offsets (core/shring.c): tail on the first line, head on the second. */
static _Atomic uint64_t *
shared_tail(uint8_t *map)
{
	return (_Atomic uint64_t *)map;
}

static _Atomic uint64_t *
shared_head(uint8_t *map)
{
	return (_Atomic uint64_t *)(map + 64);
}

/* Messages of many lengths go through in order, byte-exact, across many wraps (pads). */
static void
test_fifo_across_wraps(void **state)
{
	static uint8_t in[16384], out[16384];
	uint32_t sent = 0, got = 0;

	(void)state;
	while (got < 5000) {
		uint32_t len = 1 + (sent * 977) % 9000;
		ssize_t n;

		fill(in, len, sent);
		if (sent < 5000 && kvx_shring_put(&T.p, in, len) == 0) {
			sent++;
			continue;
		}
		n = kvx_shring_get(&T.c, out, sizeof(out));
		assert_true(n > 0);
		assert_int_equal(n, 1 + (got * 977) % 9000);
		assert_true(check(out, (uint32_t)n, got));
		got++;
	}
	assert_int_equal(kvx_shring_get(&T.c, out, sizeof(out)), 0);
	assert_true(kvx_shring_empty(&T.c));
	assert_true(T.p.full > 0); /* the full path was taken, and recovered from */
}

/* Full: a put that does not fit is refused with nothing written; once the consumer moves on,
 * it fits.  Oversized and empty messages are refused outright. */
static void
test_full_then_room(void **state)
{
	static uint8_t msg[4096], out[16384];
	int puts = 0;

	(void)state;
	memset(msg, 0xab, sizeof(msg));
	while (kvx_shring_put(&T.p, msg, sizeof(msg)) == 0)
		puts++;
	assert_int_equal(puts, SIZE / (sizeof(msg) + 8));
	assert_int_equal(kvx_shring_put(&T.p, msg, sizeof(msg)), -ENOBUFS);
	assert_int_equal(kvx_shring_get(&T.c, out, sizeof(out)), sizeof(msg));
	assert_int_equal(kvx_shring_put(&T.p, msg, sizeof(msg)), 0);
	assert_int_equal(kvx_shring_put(&T.p, msg, kvx_shring_max_msg(&T.p) + 1), -EMSGSIZE);
	assert_int_equal(kvx_shring_put(&T.p, msg, 0), -EMSGSIZE);
	for (int i = 0; i < puts; i++)
		assert_int_equal(kvx_shring_get(&T.c, out, sizeof(out)), sizeof(msg));
	assert_int_equal(kvx_shring_get(&T.c, out, sizeof(out)), 0);
}

/* A message longer than the consumer's buffer is a protocol error, not a truncation. */
static void
test_message_longer_than_buffer(void **state)
{
	uint8_t msg[100] = {0}, out[64];

	(void)state;
	assert_int_equal(kvx_shring_put(&T.p, msg, sizeof(msg)), 0);
	assert_int_equal(kvx_shring_get(&T.c, out, sizeof(out)), -EPROTO);
	assert_int_equal(kvx_shring_get(&T.c, out, sizeof(out)), -EPROTO); /* sticky */
}

/* A peek copies the start of the next message and leaves it there, across the pads of many
 * wraps: the get after it returns the same message; a message longer than the peek's buffer is
 * no error for it (its whole length is returned); an empty ring peeks 0; a lying record is
 * -EPROTO, sticky, for the peek as for the get. */
static void
test_peek_leaves_the_message(void **state)
{
	static uint8_t in[16384], out[16384];
	uint8_t head[16];
	uint32_t sent = 0, got = 0;
	uint32_t *h;

	(void)state;
	assert_int_equal(kvx_shring_peek(&T.c, head, sizeof(head)), 0);
	while (got < 2000) {
		uint32_t len = 1 + (sent * 977) % 9000;
		ssize_t n;

		fill(in, len, sent);
		if (sent < 2000 && kvx_shring_put(&T.p, in, len) == 0) {
			sent++;
			continue;
		}
		memset(head, 0, sizeof(head));
		n = kvx_shring_peek(&T.c, head, sizeof(head));
		assert_int_equal(n, 1 + (got * 977) % 9000);
		assert_int_equal(kvx_shring_peek(&T.c, head, sizeof(head)), n); /* still there */
		assert_true(
			check(head, (uint32_t)n < sizeof(head) ? (uint32_t)n : sizeof(head), got));
		assert_int_equal(kvx_shring_get(&T.c, out, sizeof(out)), n);
		assert_true(check(out, (uint32_t)n, got));
		got++;
	}
	assert_int_equal(kvx_shring_peek(&T.c, head, sizeof(head)), 0);

	teardown(NULL), setup(NULL);
	h = (uint32_t *)(T.pmap + 192);
	assert_int_equal(kvx_shring_put(&T.p, in, 64), 0);
	h[0] = 4096; /* longer than the 72 bytes published */
	assert_int_equal(kvx_shring_peek(&T.c, head, sizeof(head)), -EPROTO);
	h[0] = 64; /* the record is right again: the ring stays broken */
	assert_int_equal(kvx_shring_get(&T.c, out, sizeof(out)), -EPROTO);
	assert_int_equal(kvx_shring_peek(&T.c, head, sizeof(head)), -EPROTO);
}

/* take_peeked takes exactly the message the peek copied whole, whatever the producer wrote into
 * the record since (a hostile engine that shows one request to the peek and another to a get):
 * the next message is the one after it.  Without a whole peek just before (none, a get since, a
 * peek into a shorter buffer, an empty ring), there is nothing to take. */
static void
test_take_peeked_takes_what_was_peeked(void **state)
{
	uint8_t a[64], b[64], out[256];
	uint8_t *rec = T.pmap + 192 + 8; /* the first record's payload */

	(void)state;
	assert_int_equal(kvx_shring_take_peeked(&T.c), -EINVAL);
	assert_int_equal(kvx_shring_peek(&T.c, out, sizeof(out)), 0);
	assert_int_equal(kvx_shring_take_peeked(&T.c), -EINVAL);
	fill(a, sizeof(a), 1);
	fill(b, sizeof(b), 2);
	assert_int_equal(kvx_shring_put(&T.p, a, sizeof(a)), 0);
	assert_int_equal(kvx_shring_put(&T.p, b, sizeof(b)), 0);
	assert_int_equal(kvx_shring_peek(&T.c, out, 16), sizeof(a)); /* not whole */
	assert_int_equal(kvx_shring_take_peeked(&T.c), -EINVAL);
	assert_int_equal(kvx_shring_peek(&T.c, out, sizeof(out)), sizeof(a));
	assert_true(check(out, sizeof(a), 1));
	memset(rec, 0x5a, sizeof(a)); /* rewritten after the peek */
	assert_int_equal(kvx_shring_take_peeked(&T.c), 0);
	assert_int_equal(kvx_shring_take_peeked(&T.c), -EINVAL); /* once */
	assert_int_equal(kvx_shring_get(&T.c, out, sizeof(out)), sizeof(b));
	assert_true(check(out, sizeof(b), 2));
	assert_int_equal(kvx_shring_peek(&T.c, out, sizeof(out)), 0);
	assert_true(kvx_shring_empty(&T.c));
	/* a get after a peek takes the record as it is then, and leaves nothing to take */
	assert_int_equal(kvx_shring_put(&T.p, a, sizeof(a)), 0);
	assert_int_equal(kvx_shring_peek(&T.c, out, sizeof(out)), sizeof(a));
	assert_int_equal(kvx_shring_get(&T.c, out, sizeof(out)), sizeof(a));
	assert_int_equal(kvx_shring_take_peeked(&T.c), -EINVAL);
}

/* A hostile producer publishes a tail far beyond what the ring holds (after one good record):
 * refused, even though the record at the head looks fine. */
static void
test_hostile_tail(void **state)
{
	uint8_t msg[64] = {0}, out[256];

	(void)state;
	assert_int_equal(kvx_shring_put(&T.p, msg, sizeof(msg)), 0);
	atomic_store(shared_tail(T.pmap), (uint64_t)SIZE * 3);
	assert_int_equal(kvx_shring_get(&T.c, out, sizeof(out)), -EPROTO);
	assert_false(kvx_shring_empty(&T.c));
}

/* A hostile producer writes record headers that lie: a length beyond what it published, a
 * length that crosses the ring's end, an unknown kind, a pad that does not reach the end. */
static void
test_hostile_records(void **state)
{
	uint8_t msg[64] = {0}, out[SIZE];
	uint32_t *h = (uint32_t *)(T.pmap + 192); /* the first record's header */

	(void)state;
	assert_int_equal(kvx_shring_put(&T.p, msg, sizeof(msg)), 0);
	h[0] = 4096; /* longer than the 72 bytes published */
	assert_int_equal(kvx_shring_get(&T.c, out, sizeof(out)), -EPROTO);

	teardown(NULL), setup(NULL);
	h = (uint32_t *)(T.pmap + 192);
	atomic_store(shared_tail(T.pmap), SIZE); /* "published" the whole ring */
	h[0] = SIZE;				 /* one record longer than the ring */
	h[1] = 0x6d5a;
	assert_int_equal(kvx_shring_get(&T.c, out, sizeof(out)), -EPROTO);

	teardown(NULL), setup(NULL);
	h = (uint32_t *)(T.pmap + 192);
	assert_int_equal(kvx_shring_put(&T.p, msg, sizeof(msg)), 0);
	h[1] = 0x1234; /* unknown kind */
	assert_int_equal(kvx_shring_get(&T.c, out, sizeof(out)), -EPROTO);

	teardown(NULL), setup(NULL);
	h = (uint32_t *)(T.pmap + 192);
	assert_int_equal(kvx_shring_put(&T.p, msg, sizeof(msg)), 0);
	h[1] = 0x7061; /* a pad that stops short of the end */
	assert_int_equal(kvx_shring_get(&T.c, out, sizeof(out)), -EPROTO);
}

/* A hostile consumer moves its head backwards or past the tail: the producer refuses to trust
 * it (it would overwrite records not read yet, or count room that is not there). */
static void
test_hostile_head(void **state)
{
	uint8_t msg[64] = {0}, out[64];

	(void)state;
	assert_int_equal(kvx_shring_put(&T.p, msg, sizeof(msg)), 0);
	atomic_store(shared_head(T.cmap), 1u << 20); /* past everything published */
	assert_int_equal(kvx_shring_room(&T.p), 0);
	assert_int_equal(kvx_shring_put(&T.p, msg, sizeof(msg)), -EPROTO);

	teardown(NULL), setup(NULL);
	for (int i = 0; i < 2; i++)
		assert_int_equal(kvx_shring_put(&T.p, msg, sizeof(msg)), 0);
	assert_int_equal(kvx_shring_get(&T.c, out, sizeof(out)), sizeof(msg));
	assert_true(kvx_shring_room(&T.p) > 0); /* head seen at 72 */
	atomic_store(shared_head(T.cmap), 8);	/* backwards */
	assert_int_equal(kvx_shring_room(&T.p), 0);
	assert_int_equal(kvx_shring_put(&T.p, msg, sizeof(msg)), -EPROTO);
}

/* The producer wakes only a consumer that announced it parks. */
static void
test_wake_only_when_parked(void **state)
{
	uint8_t msg[8] = {1}, out[8];

	(void)state;
	assert_int_equal(kvx_shring_put(&T.p, msg, sizeof(msg)), 0);
	assert_false(kvx_shring_notify(&T.p));
	assert_false(fd_readable(T.wake[1]));
	assert_int_equal(kvx_shring_get(&T.c, out, sizeof(out)), sizeof(msg));
	kvx_shring_park_prepare(&T.c);
	assert_true(kvx_shring_empty(&T.c));
	assert_int_equal(kvx_shring_put(&T.p, msg, sizeof(msg)), 0);
	assert_true(kvx_shring_notify(&T.p));
	assert_true(fd_readable(T.wake[1]));
	assert_int_equal(kvx_shring_park_done(&T.c, true), 0);
	assert_false(fd_readable(T.wake[1]));
	assert_false(kvx_shring_empty(&T.c));
	assert_int_equal(T.p.wakes, 1);
}

/* A oneshot producer takes the consumer's announcement with its wake-up: the batches after it
 * send nothing until the consumer announces again (mutant shring_oneshot_ignored: one byte per
 * batch); one that is not oneshot wakes a parked consumer after every batch. */
static void
test_oneshot_wakes_once_per_announcement(void **state)
{
	uint8_t msg[8] = {1}, out[8];

	(void)state;
	kvx_shring_set_oneshot(&T.p, true);
	kvx_shring_park_prepare(&T.c);
	for (int i = 0; i < 3; i++) {
		assert_int_equal(kvx_shring_put(&T.p, msg, sizeof(msg)), 0);
		assert_int_equal(kvx_shring_notify(&T.p), i == 0);
	}
	assert_int_equal(T.p.wakes, 1);
	assert_true(fd_readable(T.wake[1]));
	assert_int_equal(kvx_shring_wake_drain(T.wake[1]), 0);
	kvx_shring_park_prepare(&T.c); /* drained: announced again, then the ring looked at */
	for (int i = 0; i < 3; i++)
		assert_int_equal(kvx_shring_get(&T.c, out, sizeof(out)), sizeof(msg));
	assert_true(kvx_shring_empty(&T.c));
	assert_int_equal(kvx_shring_put(&T.p, msg, sizeof(msg)), 0);
	assert_true(kvx_shring_notify(&T.p));
	assert_false(kvx_shring_notify(&T.p));
	assert_int_equal(T.p.wakes, 2);
	assert_int_equal(kvx_shring_wake_drain(T.wake[1]), 0);
	/* not oneshot: every batch wakes the parked consumer */
	kvx_shring_set_oneshot(&T.p, false);
	kvx_shring_park_prepare(&T.c);
	assert_true(kvx_shring_notify(&T.p));
	assert_true(kvx_shring_notify(&T.p));
	assert_int_equal(T.p.wakes, 4);
}

/* The other way: a producer without room asks for a wake-up (kvx_shring_starve); the consumer's
 * next take sends one byte to the producer's end (kvx_shring_taken), once per request.  A
 * consumer that took something before the request was seen makes starve say "try again". */
static void
test_room_wake_only_when_starved(void **state)
{
	static uint8_t msg[4096], out[4096];

	(void)state;
	memset(msg, 0x5a, sizeof(msg));
	while (kvx_shring_put(&T.p, msg, sizeof(msg)) == 0)
		;
	assert_int_equal(kvx_shring_get(&T.c, out, sizeof(out)), sizeof(msg));
	assert_false(kvx_shring_taken(&T.c)); /* nobody asked */
	assert_false(fd_readable(T.wake[0]));
	assert_int_equal(kvx_shring_put(&T.p, msg, sizeof(msg)), 0);
	assert_int_equal(kvx_shring_put(&T.p, msg, sizeof(msg)), -ENOBUFS);
	assert_false(kvx_shring_starve(&T.p)); /* nothing taken since the put looked */
	assert_false(fd_readable(T.wake[0]));
	assert_int_equal(kvx_shring_get(&T.c, out, sizeof(out)), sizeof(msg));
	assert_true(kvx_shring_taken(&T.c));
	assert_true(fd_readable(T.wake[0]));
	assert_int_equal(kvx_shring_wake_drain(T.wake[0]), 0);
	assert_int_equal(kvx_shring_get(&T.c, out, sizeof(out)), sizeof(msg));
	assert_false(kvx_shring_taken(&T.c)); /* one wake-up per request */
	assert_false(fd_readable(T.wake[0]));
	assert_int_equal(T.c.wakes, 1);
	/* taken before the request: the producer is told to try again now */
	while (kvx_shring_put(&T.p, msg, sizeof(msg)) == 0)
		;
	assert_int_equal(kvx_shring_get(&T.c, out, sizeof(out)), sizeof(msg));
	assert_true(kvx_shring_starve(&T.p));
	assert_int_equal(kvx_shring_put(&T.p, msg, sizeof(msg)), 0);
}

/* Each side owns the file description of its wake end: a consumer (an engine, possibly hostile)
 * that clears O_NONBLOCK on its end, stops reading and fills it cannot make the producer
 * (kvxd's control core or a polling core) block in kvx_shring_notify.  With a shared eventfd it
 * could: the flags of a passed descriptor are shared, and a write to a saturated counter
 * blocks. */
static void
test_wake_never_blocks_the_producer(void **state)
{
	uint8_t msg[8] = {1};
	int fl, queued;

	(void)state;
	assert_int_equal(fcntl(T.wake[1], F_SETFL, 0), 0); /* the consumer makes its end blocking */
	fl = fcntl(T.wake[0], F_GETFL);
	assert_true(fl & O_NONBLOCK); /* ours is not the consumer's to change */
	assert_int_equal(kvx_shring_put(&T.p, msg, sizeof(msg)), 0);
	/* the consumer says it parks and never reads: far more wake-ups than its end holds */
	for (int i = 0; i < 200000; i++) {
		kvx_shring_park_prepare(&T.c);
		assert_true(kvx_shring_notify(&T.p));
	}
	assert_true(fd_readable(T.wake[1])); /* it is woken all the same */
	assert_int_equal(T.p.wakes, 200000);
	/* a drain takes what is waiting, in a bounded number of receives (16 of 4096 bytes): what
	 * stays keeps the end readable (a level-triggered wait comes back) */
	assert_int_equal(ioctl(T.wake[1], FIONREAD, &queued), 0);
	assert_true(queued > 0);
	assert_int_equal(kvx_shring_wake_drain(T.wake[1]), 0);
	assert_int_equal(fd_readable(T.wake[1]), queued > 16 * 4096);
}

/* A producer that closed its end: the consumer's end reads EOF, and park_done says so (kvxd ends
 * the session instead of waking on it forever). */
static void
test_wake_end_closed_is_told(void **state)
{
	(void)state;
	assert_false(fd_readable(T.wake[1]));
	close(T.wake[0]);
	T.wake[0] = -1;
	assert_true(fd_readable(T.wake[1]));
	kvx_shring_park_prepare(&T.c);
	assert_int_equal(kvx_shring_park_done(&T.c, true), -EPIPE);
}

/* A consumer that closed its end does not kill the producer with SIGPIPE: the wake-up is let go
 * (the session ends by its socket). */
static void
test_wake_to_a_closed_end_goes_on(void **state)
{
	uint8_t msg[8] = {1};

	(void)state;
	close(T.wake[1]);
	T.wake[1] = -1;
	assert_int_equal(kvx_shring_put(&T.p, msg, sizeof(msg)), 0);
	kvx_shring_park_prepare(&T.c);
	assert_true(kvx_shring_notify(&T.p));
	assert_int_equal(T.p.wakes, 1);
}

#define N_MSGS 200000

struct race {
	uint64_t got, bad, stalls;
};

static void *
consumer(void *arg)
{
	struct race *r = arg;
	uint8_t out[512];

	while (r->got < N_MSGS) {
		ssize_t n = kvx_shring_get(&T.c, out, sizeof(out));

		if (n > 0) {
			uint32_t seq;

			memcpy(&seq, out, 4);
			r->bad += seq != r->got || (uint32_t)n != 4 + seq % 200;
			r->got++;
			continue;
		}
		if (n < 0) {
			r->bad++;
			return NULL;
		}
		kvx_shring_park_prepare(&T.c);
		if (kvx_shring_empty(&T.c)) {
			struct pollfd p = {.fd = T.wake[1], .events = POLLIN};

			if (poll(&p, 1, 2000) == 0 && !kvx_shring_empty(&T.c)) {
				r->stalls++; /* work was there and nobody woke us */
				kvx_shring_park_done(&T.c, false);
				return NULL;
			}
			kvx_shring_park_done(&T.c, p.revents & POLLIN);
			continue;
		}
		kvx_shring_park_done(&T.c, false);
	}
	return NULL;
}

/* Two threads through two mappings: every message arrives once, in order, intact, and the
 * consumer is never left parked with work in the ring. */
static void
test_two_threads(void **state)
{
	struct race r = {0};
	pthread_t t;
	uint8_t msg[512] = {0};

	(void)state;
	assert_int_equal(pthread_create(&t, NULL, consumer, &r), 0);
	for (uint32_t seq = 0; seq < N_MSGS;) {
		memcpy(msg, &seq, 4);
		if (kvx_shring_put(&T.p, msg, 4 + seq % 200) == 0) {
			seq++;
			if (seq % 8 == 0 || seq == N_MSGS)
				kvx_shring_notify(&T.p);
		} else {
			kvx_shring_notify(&T.p);
			sched_yield();
		}
	}
	assert_int_equal(pthread_join(t, NULL), 0);
	assert_int_equal(r.stalls, 0);
	assert_int_equal(r.bad, 0);
	assert_int_equal(r.got, N_MSGS);
}

/* The geometry comes from the creator: a mapping too short, or a size that is not a power of
 * two within bounds, is refused. */
static void
test_geometry(void **state)
{
	struct kvx_shring r;

	(void)state;
	assert_int_equal(kvx_shring_map_bytes(3000), 0);
	assert_int_equal(kvx_shring_map_bytes(SIZE + 8), 0);
	assert_int_equal(kvx_shring_attach(&r, T.cmap, T.len - 1, SIZE, T.wake[1], false), -EINVAL);
	assert_int_equal(kvx_shring_attach(&r, T.cmap, T.len, 2u << 30, T.wake[1], false), -EINVAL);
	assert_int_equal(kvx_shring_attach(&r, T.cmap, T.len, SIZE, -1, false), -EINVAL);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_fifo_across_wraps, setup, teardown),
		cmocka_unit_test_setup_teardown(test_full_then_room, setup, teardown),
		cmocka_unit_test_setup_teardown(test_room_wake_only_when_starved, setup, teardown),
		cmocka_unit_test_setup_teardown(test_message_longer_than_buffer, setup, teardown),
		cmocka_unit_test_setup_teardown(test_peek_leaves_the_message, setup, teardown),
		cmocka_unit_test_setup_teardown(test_take_peeked_takes_what_was_peeked, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_hostile_tail, setup, teardown),
		cmocka_unit_test_setup_teardown(test_hostile_records, setup, teardown),
		cmocka_unit_test_setup_teardown(test_hostile_head, setup, teardown),
		cmocka_unit_test_setup_teardown(test_wake_only_when_parked, setup, teardown),
		cmocka_unit_test_setup_teardown(test_oneshot_wakes_once_per_announcement, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_wake_never_blocks_the_producer, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_wake_end_closed_is_told, setup, teardown),
		cmocka_unit_test_setup_teardown(test_wake_to_a_closed_end_goes_on, setup, teardown),
		cmocka_unit_test_setup_teardown(test_two_threads, setup, teardown),
		cmocka_unit_test_setup_teardown(test_geometry, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
