/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The size-class cache in front of malloc (core/slab.c): a freed object is reused by the next
 * allocation of its class without malloc, classes are powers of two of units, the free lists
 * hold at most cache_max bytes, objects past the largest class go straight to malloc and free,
 * sizes never wrap, malloc failure is NULL.  ASan reports any leak (fini frees the cache) and
 * any use of a cached object; TSan any race when an object goes to another thread and back
 * through a mailbox and is reused (kvxd's chunks: control core -> polling core -> control).
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "core/mbox.h"
#include "core/slab.h"

/* A huge malloc is a NULL here, not a sanitizer's fatal report: the NULL path is under test. */
const char *__asan_default_options(void);
const char *__tsan_default_options(void);
const char *
__asan_default_options(void)
{
	return "allocator_may_return_null=1";
}
const char *
__tsan_default_options(void)
{
	return "allocator_may_return_null=1";
}

#define BASE 32 /* like struct kvxd_chunk */
#define UNIT 4	/* like a page index */
#define HDR 16	/* the header in front of every object */

static uint64_t
class_bytes(uint32_t units)
{
	return HDR + BASE + (uint64_t)units * UNIT;
}

/* Writes every byte an object of units units has (ASan: all of them are addressable). */
static void *
alloc_filled(struct kvx_slab *s, uint32_t units, int c)
{
	void *p = kvx_slab_alloc(s, units);

	assert_non_null(p);
	assert_int_equal((uintptr_t)p % _Alignof(max_align_t), 0);
	memset(p, c, BASE + (size_t)units * UNIT);
	return p;
}

/* A freed object comes back to the next allocation of its class: a hit, no malloc. */
static void
test_reuse(void **state)
{
	struct kvx_slab s;
	void *p, *q;

	(void)state;
	assert_int_equal(kvx_slab_init(&s, BASE, UNIT, 4096, 1 << 20), 0);
	p = alloc_filled(&s, 64, 1);
	assert_int_equal(s.st.misses, 1);
	assert_int_equal(s.st.hits, 0);
	assert_int_equal(s.st.live, 1);
	kvx_slab_free(&s, p);
	assert_int_equal(s.st.live, 0);
	assert_int_equal(s.st.cached, 1);
	assert_int_equal(s.st.cached_bytes, class_bytes(64));
	q = alloc_filled(&s, 64, 2);
	assert_ptr_equal(q, p);
	assert_int_equal(s.st.hits, 1);
	assert_int_equal(s.st.misses, 1);
	assert_int_equal(s.st.cached, 0);
	assert_int_equal(s.st.cached_bytes, 0);
	/* many rounds of the same working set: no malloc after the first */
	kvx_slab_free(&s, q);
	for (int round = 0; round < 100; round++) {
		void *v[8];

		for (int i = 0; i < 8; i++)
			v[i] = alloc_filled(&s, 64, i);
		for (int i = 0; i < 8; i++)
			kvx_slab_free(&s, v[i]);
	}
	assert_int_equal(s.st.misses, 8);
	assert_int_equal(s.st.hits, 1 + 100 * 8 - 7);
	assert_int_equal(s.st.big + s.st.released + s.st.failed, 0);
	kvx_slab_fini(&s);
	assert_int_equal(s.st.cached_bytes, 0);
}

/* u units take the class of the smallest power of two >= u: 3 and 4 share one, 5 does not;
 * every class is as large as its power of two. */
static void
test_size_classes(void **state)
{
	struct kvx_slab s;
	void *p, *q, *r;

	(void)state;
	assert_int_equal(kvx_slab_init(&s, BASE, UNIT, 4096, 1 << 20), 0);
	assert_int_equal(s.nclasses, 13); /* 1, 2, 4, ... 4096 */
	for (int k = 0; k < s.nclasses; k++)
		assert_int_equal(s.class_bytes[k], class_bytes(1u << k));
	p = alloc_filled(&s, 3, 3);
	kvx_slab_free(&s, p);
	assert_int_equal(s.st.cached_bytes, class_bytes(4));
	q = alloc_filled(&s, 4, 4); /* the same class: the same object, all 4 units usable */
	assert_ptr_equal(q, p);
	r = alloc_filled(&s, 5, 5); /* the next class: a new one */
	assert_ptr_not_equal(r, p);
	assert_int_equal(s.st.hits, 1);
	assert_int_equal(s.st.misses, 2);
	kvx_slab_free(&s, q);
	kvx_slab_free(&s, r);
	/* 0 and 1 unit share the first class; 2 has its own */
	p = alloc_filled(&s, 0, 0);
	kvx_slab_free(&s, p);
	assert_ptr_equal(alloc_filled(&s, 1, 1), p);
	q = alloc_filled(&s, 2, 2);
	assert_ptr_not_equal(q, p);
	kvx_slab_free(&s, p);
	kvx_slab_free(&s, q);
	/* the largest class holds max_units; a class rounded past a max_units that is not a
	 * power of two still serves only up to max_units */
	p = alloc_filled(&s, 4096, 6);
	assert_int_equal(s.st.big, 0);
	kvx_slab_free(&s, p);
	kvx_slab_fini(&s);

	assert_int_equal(kvx_slab_init(&s, BASE, UNIT, 100, 1 << 20), 0);
	assert_int_equal(s.nclasses, 8); /* up to 128 units */
	p = alloc_filled(&s, 100, 7);
	assert_int_equal(s.st.misses, 1);
	q = alloc_filled(&s, 101, 8);
	assert_int_equal(s.st.big, 1);
	kvx_slab_free(&s, p);
	kvx_slab_free(&s, q);
	kvx_slab_fini(&s);
}

/* The free lists never hold more than cache_max bytes: past it a free goes to free() and is
 * counted, and the next allocations beyond what was kept malloc again. */
static void
test_cache_bound(void **state)
{
	struct kvx_slab s;
	void *v[5];

	(void)state;
	assert_int_equal(kvx_slab_init(&s, BASE, UNIT, 4096, 2 * class_bytes(16) + 1), 0);
	for (int i = 0; i < 3; i++)
		v[i] = alloc_filled(&s, 16, i);
	for (int i = 0; i < 3; i++)
		kvx_slab_free(&s, v[i]);
	assert_int_equal(s.st.cached, 2);
	assert_int_equal(s.st.cached_bytes, 2 * class_bytes(16));
	assert_int_equal(s.st.released, 1);
	/* a smaller class does not fit in what is left either */
	v[3] = alloc_filled(&s, 1, 9);
	kvx_slab_free(&s, v[3]);
	assert_int_equal(s.st.released, 2);
	assert_true(s.st.cached_bytes <= s.cache_max);
	for (int i = 0; i < 3; i++)
		v[i] = alloc_filled(&s, 16, i);
	assert_int_equal(s.st.hits, 2);
	assert_int_equal(s.st.misses, 3 + 1 + 1);
	for (int i = 0; i < 3; i++)
		kvx_slab_free(&s, v[i]);
	kvx_slab_fini(&s);

	/* cache_max 0: a plain malloc/free */
	assert_int_equal(kvx_slab_init(&s, BASE, UNIT, 4096, 0), 0);
	for (int i = 0; i < 4; i++)
		kvx_slab_free(&s, alloc_filled(&s, 8, i));
	assert_int_equal(s.st.misses, 4);
	assert_int_equal(s.st.released, 4);
	assert_int_equal(s.st.cached_bytes, 0);
	kvx_slab_fini(&s);
}

/* More than max_units: malloc'd and free()'d each time, counted, never cached. */
static void
test_big_falls_back(void **state)
{
	struct kvx_slab s;

	(void)state;
	assert_int_equal(kvx_slab_init(&s, BASE, UNIT, 64, 1 << 20), 0);
	for (int i = 0; i < 3; i++) {
		void *p = alloc_filled(&s, 65 + 1000 * (uint32_t)i, i);

		assert_int_equal(s.st.big, (uint64_t)i + 1);
		kvx_slab_free(&s, p);
		assert_int_equal(s.st.cached, 0);
		assert_int_equal(s.st.cached_bytes, 0);
	}
	assert_int_equal(s.st.hits + s.st.misses + s.st.released, 0);
	assert_int_equal(s.st.live, 0);
	kvx_slab_fini(&s);
}

/* Sizes are 64-bit and checked: a geometry whose largest class does not fit is refused, an
 * object whose size wraps is NULL, and so is one malloc cannot give. */
static void
test_sizes_do_not_wrap(void **state)
{
	struct kvx_slab s;

	(void)state;
	assert_int_equal(kvx_slab_init(&s, BASE, 0, 64, 0), -EINVAL);
	assert_int_equal(kvx_slab_init(&s, BASE, UNIT, 0, 0), -EINVAL);
	assert_int_equal(kvx_slab_init(&s, BASE, UNIT, 1u << 30, 0), -EINVAL);
	assert_int_equal(kvx_slab_init(&s, BASE, SIZE_MAX / 8, 64, 0), -EOVERFLOW);
	assert_int_equal(kvx_slab_init(&s, SIZE_MAX - 8, UNIT, 1, 0), -EOVERFLOW);
	/* units * unit past 2^64: 2^32 - 1 units of 2^33 bytes */
	assert_int_equal(kvx_slab_init(&s, BASE, (size_t)1 << 33, 1, 1 << 20), 0);
	assert_null(kvx_slab_alloc(&s, UINT32_MAX));
	assert_int_equal(s.st.failed, 1);
	/* base + units * unit past 2^64: (2^63 + 2^31) + (2^32 - 1) * 2^31 is 2^64 exactly */
	assert_int_equal(kvx_slab_init(&s, ((size_t)1 << 63) + ((size_t)1 << 31), (size_t)1 << 31,
				       1, 1 << 20),
			 0);
	assert_null(kvx_slab_alloc(&s, UINT32_MAX));
	assert_int_equal(s.st.failed, 1);
	/* no wrap, but 2^62 bytes: malloc fails, NULL (the caller refuses with -ENOMEM) */
	assert_int_equal(kvx_slab_init(&s, BASE, (size_t)1 << 40, 1, 1 << 20), 0);
	assert_null(kvx_slab_alloc(&s, 1u << 22));
	assert_int_equal(s.st.failed, 1);
	assert_int_equal(s.st.big + s.st.live, 0);
	kvx_slab_fini(&s);
}

static uint64_t
lcg(uint64_t *x)
{
	*x = *x * 6364136223846793005ull + 1442695040888963407ull;
	return *x >> 33;
}

/* Random sizes, random order, a bound that binds: the counters add up, and after fini nothing
 * is left (LeakSanitizer checks at exit). */
static void
test_no_leak(void **state)
{
	static void *v[512];
	struct kvx_slab s;
	uint64_t x = 42;

	(void)state;
	assert_int_equal(kvx_slab_init(&s, BASE, UNIT, 256, 64 << 10), 0);
	for (int round = 0; round < 20000; round++) {
		int i = (int)(lcg(&x) % 512);

		if (v[i]) {
			kvx_slab_free(&s, v[i]);
			v[i] = NULL;
		} else {
			v[i] = alloc_filled(&s, (uint32_t)(lcg(&x) % 300), i);
		}
		assert_true(s.st.cached_bytes <= s.cache_max);
	}
	for (int i = 0; i < 512; i++) {
		kvx_slab_free(&s, v[i]);
		v[i] = NULL;
	}
	assert_int_equal(s.st.live, 0);
	assert_true(s.st.hits > 0 && s.st.released > 0 && s.st.big > 0);
	kvx_slab_fini(&s);
	assert_int_equal(s.st.cached, 0);
	assert_int_equal(s.st.cached_bytes, 0);
	/* after fini: still usable, nothing cached */
	kvx_slab_free(&s, alloc_filled(&s, 4, 4));
	assert_int_equal(s.st.cached, 0);
}

/* The other thread: takes objects from `in`, writes all of them, gives them back on `out`. */
struct handover {
	struct kvx_mbox *in, *out;
	int n;
};

static void *
worker(void *arg)
{
	struct handover *h = arg;

	for (int done = 0; done < h->n;) {
		uint8_t *p;

		if (kvx_mbox_get_burst(h->in, &p, 1) == 0) {
			sched_yield();
			continue;
		}
		memset(p + 1, 0xa5, BASE - 1 + (size_t)p[0] * UNIT);
		while (kvx_mbox_put(h->out, &p))
			sched_yield();
		done++;
	}
	return NULL;
}

/* Objects go to another thread and back through mailboxes (as chunks go to a polling core and
 * come back in CHUNK_FREE), then are reused: the owner's writes to a reused object and the
 * other thread's earlier ones are ordered by the mailboxes (TSan), and reuse does happen. */
static void
test_reuse_after_handover(void **state)
{
	struct handover h = {.in = kvx_mbox_create(64, sizeof(void *)),
			     .out = kvx_mbox_create(64, sizeof(void *)),
			     .n = 4000};
	struct kvx_slab s;
	pthread_t t;
	int sent = 0, back = 0;

	(void)state;
	assert_non_null(h.in);
	assert_non_null(h.out);
	assert_int_equal(kvx_slab_init(&s, BASE, UNIT, 64, 1 << 20), 0);
	assert_int_equal(pthread_create(&t, NULL, worker, &h), 0);
	while (back < h.n) {
		uint8_t *p;

		if (sent < h.n && sent - back < 32) {
			p = alloc_filled(&s, (uint32_t)(sent % 64), 0);
			p[0] = (uint8_t)(sent % 64);
			assert_int_equal(kvx_mbox_put(h.in, &p), 0);
			sent++;
		}
		if (kvx_mbox_get_burst(h.out, &p, 1) == 1) {
			assert_int_equal(p[1], 0xa5);
			kvx_slab_free(&s, p);
			back++;
		} else {
			sched_yield();
		}
	}
	pthread_join(t, NULL);
	assert_int_equal(s.st.live, 0);
	assert_true(s.st.hits > (uint64_t)h.n / 2);
	kvx_slab_fini(&s);
	kvx_mbox_destroy(h.in);
	kvx_mbox_destroy(h.out);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_reuse),
		cmocka_unit_test(test_size_classes),
		cmocka_unit_test(test_cache_bound),
		cmocka_unit_test(test_big_falls_back),
		cmocka_unit_test(test_sizes_do_not_wrap),
		cmocka_unit_test(test_no_leak),
		cmocka_unit_test(test_reuse_after_handover),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
