/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Room table: the single-threaded contract (add/lookup/del/for_each/count/destroy), destroy
 * right after a mass delete (a shrink in flight), and readers racing a writer that frees
 * removed entries through call_rcu().
 *
 * Negative control for the concurrency test: build with -DKVX_TEST_FREE_WITHOUT_GRACE_PERIOD
 * (e.g. cmake -DCMAKE_C_FLAGS=-DKVX_TEST_FREE_WITHOUT_GRACE_PERIOD) and the writer frees a
 * removed entry at once; readers then see the poison (plain build) or ASan reports a
 * heap-use-after-free.
 */
#include <stdarg.h>
#include <stddef.h>
#include <setjmp.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "core/room_table.c" /* key_hash() */

/* ThreadSanitizer cannot see liburcu 0.13's synchronisation (the library is not built for it).
 * room_table.c models publication; this test models the grace period of its call_rcu frees: a
 * thread's accesses before its quiescent state (or before call_rcu) happen before the callback.
 * The liburcu-internal hand-offs TSan still flags are listed in __tsan_default_suppressions(). */
#if defined(__SANITIZE_THREAD__)
#define TEST_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define TEST_TSAN 1
#endif
#endif
#ifdef TEST_TSAN
#include <sanitizer/tsan_interface.h>
static int tsan_gp;
#define tsan_quiescent() __tsan_release(&tsan_gp)
#define tsan_grace_elapsed() __tsan_acquire(&tsan_gp)

/* liburcu-internal hand-offs, ordered by its own (uninstrumented) futexes and atomics: the
 * cds_lfht resize worker's work items and completions, the table and bucket memory it allocates
 * and cds_lfht_destroy frees, rcu_barrier()'s completion freed by the call_rcu thread.  Their
 * liburcu frames have no symbols, so the match is on the module: it also hides a race inside
 * key_match() (called from cds_lfht_lookup), where the key is immutable while in the table. */
const char *__tsan_default_suppressions(void);
const char *
__tsan_default_suppressions(void)
{
	return "race:liburcu-cds.so\n"
	       "race:urcu_qsbr_barrier\n";
}
#else
#define tsan_quiescent() ((void)0)
#define tsan_grace_elapsed() ((void)0)
#endif

#define MAGIC 0x6b76785f726f6f6dULL  /* "kvx_room" */
#define POISON 0xdeaddeaddeaddeadULL /* written by the free callback just before free() */

struct entry {
	struct kvx_room_table_node node;
	uint64_t magic; /* after the node: glibc's free() scribbles the first 16 bytes */
	struct rcu_head rcu;
};

static struct entry *
entry_of(struct kvx_room_table_node *n)
{
	return caa_container_of(n, struct entry, node);
}

static uint64_t
xorshift(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

/* ---- single-threaded contract ---- */

#define NFUNC 1000

static struct entry func_entries[NFUNC];

static void
test_add_lookup_del(void **state)
{
	struct kvx_room_table *t = kvx_room_table_create(0);
	struct entry dup;
	int i;

	assert_non_null(t);
	assert_int_equal(kvx_room_table_count(t), 0);
	for (i = 0; i < NFUNC; i++) {
		func_entries[i].magic = MAGIC;
		assert_int_equal(kvx_room_table_add(t, &func_entries[i].node, (uint64_t)i * 7919),
				 0);
	}
	assert_int_equal(kvx_room_table_count(t), NFUNC);

	/* A second node under a present key is refused; the first one stays. */
	assert_int_equal(kvx_room_table_add(t, &dup.node, 3 * 7919), -EEXIST);
	rcu_read_lock();
	for (i = 0; i < NFUNC; i++) {
		struct kvx_room_table_node *n = kvx_room_table_lookup(t, (uint64_t)i * 7919);

		assert_ptr_equal(n, &func_entries[i].node);
		assert_int_equal(n->key, (uint64_t)i * 7919);
	}
	assert_null(kvx_room_table_lookup(t, 1));
	assert_null(kvx_room_table_lookup(t, UINT64_MAX));
	rcu_read_unlock();
	assert_int_equal(kvx_room_table_count(t), NFUNC);

	for (i = 0; i < NFUNC; i += 2)
		assert_int_equal(kvx_room_table_del(t, &func_entries[i].node), 0);
	for (i = 0; i < NFUNC; i += 2)
		assert_int_equal(kvx_room_table_del(t, &func_entries[i].node), -ENOENT);
	assert_int_equal(kvx_room_table_count(t), NFUNC / 2);
	rcu_read_lock();
	for (i = 0; i < NFUNC; i++) {
		struct kvx_room_table_node *n = kvx_room_table_lookup(t, (uint64_t)i * 7919);

		if (i % 2)
			assert_ptr_equal(n, &func_entries[i].node);
		else
			assert_null(n);
	}
	rcu_read_unlock();

	/* A removed key can be added again (here the node was never visible to a reader). */
	assert_int_equal(kvx_room_table_add(t, &func_entries[0].node, 0), 0);
	assert_int_equal(kvx_room_table_count(t), NFUNC / 2 + 1);

	assert_int_equal(kvx_room_table_destroy(t), -EBUSY);
	/* still usable after a refused destroy */
	assert_int_equal(kvx_room_table_del(t, &func_entries[0].node), 0);
	for (i = 1; i < NFUNC; i += 2)
		assert_int_equal(kvx_room_table_del(t, &func_entries[i].node), 0);
	assert_int_equal(kvx_room_table_count(t), 0);
	assert_int_equal(kvx_room_table_destroy(t), 0);
}

/* One key under several sub-keys (a room id of several engine ranks and two roles): distinct
 * entries, each found under its own (key, sub) only; a present (key, sub) is refused. */
static void
test_sub_keys_are_distinct(void **state)
{
	struct kvx_room_table *t = kvx_room_table_create(0);
	static struct entry e[4], dup;
	static const uint64_t sub[4] = {0, 1, 2, (uint64_t)65535 << 1 | 1};

	(void)state;
	assert_non_null(t);
	for (int i = 0; i < 4; i++)
		assert_int_equal(kvx_room_table_add_sub(t, &e[i].node, 42, sub[i]), 0);
	assert_int_equal(kvx_room_table_add_sub(t, &dup.node, 42, 2), -EEXIST);
	rcu_read_lock();
	for (int i = 0; i < 4; i++)
		assert_ptr_equal(kvx_room_table_lookup_sub(t, 42, sub[i]), &e[i].node);
	assert_ptr_equal(kvx_room_table_lookup(t, 42), &e[0].node); /* sub-key 0 */
	assert_null(kvx_room_table_lookup_sub(t, 42, 3));
	assert_null(kvx_room_table_lookup_sub(t, 43, 1));
	rcu_read_unlock();
	for (int i = 0; i < 4; i++)
		assert_int_equal(kvx_room_table_del(t, &e[i].node), 0);
	assert_int_equal(kvx_room_table_destroy(t), 0);
}

static void
test_key_extremes(void **state)
{
	static const uint64_t keys[] = {
		0, 1, INT64_MAX, (uint64_t)INT64_MAX + 1, UINT64_MAX, 1ULL << 32, (1ULL << 32) + 1};
	struct entry e[sizeof(keys) / sizeof(keys[0])];
	struct kvx_room_table *t = kvx_room_table_create(1);
	size_t i;

	assert_non_null(t);
	for (i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
		assert_int_equal(kvx_room_table_add(t, &e[i].node, keys[i]), 0);
	rcu_read_lock();
	for (i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
		assert_ptr_equal(kvx_room_table_lookup(t, keys[i]), &e[i].node);
	rcu_read_unlock();
	for (i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
		assert_int_equal(kvx_room_table_del(t, &e[i].node), 0);
	assert_int_equal(kvx_room_table_destroy(t), 0);
}

static void
test_create_sizes(void **state)
{
	static const unsigned long sizes[] = {0, 1, 3, 64, 1000, 1UL << 16};
	size_t i;

	for (i = 0; i < sizeof(sizes) / sizeof(sizes[0]); i++) {
		struct kvx_room_table *t = kvx_room_table_create(sizes[i]);

		assert_non_null(t);
		assert_int_equal(kvx_room_table_destroy(t), 0);
	}
	assert_null(kvx_room_table_create(~0UL));
}

struct walk {
	uint64_t key_sum;
	int calls;
	int stop_after; /* return 7 on this call (1-based); 0: never */
	struct kvx_room_table *del_from;
};

static int
walk_fn(struct kvx_room_table_node *n, void *arg)
{
	struct walk *w = arg;

	w->key_sum += n->key;
	w->calls++;
	assert_int_equal(entry_of(n)->magic, MAGIC);
	if (w->del_from)
		assert_int_equal(kvx_room_table_del(w->del_from, n), 0);
	return w->calls == w->stop_after ? 7 : 0;
}

static void
test_for_each(void **state)
{
	struct kvx_room_table *t = kvx_room_table_create(2);
	struct walk w;
	uint64_t sum = 0;
	int i;

	assert_non_null(t);
	memset(&w, 0, sizeof(w));
	rcu_read_lock();
	assert_int_equal(kvx_room_table_for_each(t, walk_fn, &w), 0);
	rcu_read_unlock();
	assert_int_equal(w.calls, 0);

	for (i = 0; i < 100; i++) {
		func_entries[i].magic = MAGIC;
		assert_int_equal(kvx_room_table_add(t, &func_entries[i].node, 1000 + i), 0);
		sum += 1000 + i;
	}

	/* every node exactly once */
	rcu_read_lock();
	assert_int_equal(kvx_room_table_for_each(t, walk_fn, &w), 0);
	rcu_read_unlock();
	assert_int_equal(w.calls, 100);
	assert_int_equal(w.key_sum, sum);

	/* early stop returns fn's value */
	memset(&w, 0, sizeof(w));
	w.stop_after = 10;
	rcu_read_lock();
	assert_int_equal(kvx_room_table_for_each(t, walk_fn, &w), 7);
	rcu_read_unlock();
	assert_int_equal(w.calls, 10);

	/* fn may delete the node it is given */
	memset(&w, 0, sizeof(w));
	w.del_from = t;
	rcu_read_lock();
	assert_int_equal(kvx_room_table_for_each(t, walk_fn, &w), 0);
	rcu_read_unlock();
	assert_int_equal(w.calls, 100);
	assert_int_equal(w.key_sum, sum);
	assert_int_equal(kvx_room_table_count(t), 0);
	assert_int_equal(kvx_room_table_destroy(t), 0);
}

/* Grow the table, empty it (liburcu queues a shrink, which waits for a grace period) and
 * destroy it at once from this online thread: destroy must not wait for itself. */
#define NMASS (1 << 14)

static struct entry mass_entries[NMASS];

static void
test_destroy_after_mass_delete(void **state)
{
	int round, i;

	for (round = 0; round < 4; round++) {
		struct kvx_room_table *t = kvx_room_table_create(1);

		assert_non_null(t);
		for (i = 0; i < NMASS; i++)
			assert_int_equal(kvx_room_table_add(t, &mass_entries[i].node, i), 0);
		for (i = 0; i < NMASS; i++)
			assert_int_equal(kvx_room_table_del(t, &mass_entries[i].node), 0);
		assert_int_equal(kvx_room_table_destroy(t), 0);
		assert_true(rcu_read_ongoing()); /* still online */
	}
}

/* ---- readers against a writer that frees through call_rcu ---- */

#define NREADERS 2
#define KEYSPACE 64 /* small: readers hit live entries often */
#define LIVE_MAX 32
#if defined(TEST_TSAN)
#define WRITER_OPS 100000
#elif defined(__SANITIZE_ADDRESS__)
#define WRITER_OPS 300000
#else
#define WRITER_OPS 4000000
#endif

struct race {
	struct kvx_room_table *t;
	pthread_barrier_t start;
	int done; /* writer finished; release/acquire */
	/* results, read by the main thread after join */
	uint64_t published;	/* entries added (writer) */
	uint64_t freed;		/* entries freed (free callback, atomic) */
	uint64_t writer_errors; /* unexpected add/del results */
	struct {
		uint64_t lookups, hits, poisoned, corrupt;
	} reader[NREADERS];
};

static struct race race;

static void
entry_free(struct entry *e)
{
	__atomic_store_n(&e->magic, POISON, __ATOMIC_RELAXED);
	free(e);
	__atomic_fetch_add(&race.freed, 1, __ATOMIC_RELAXED);
}

static void
entry_free_rcu(struct rcu_head *head)
{
	tsan_grace_elapsed();
	entry_free(caa_container_of(head, struct entry, rcu));
}

/* A removed entry: readers may still hold it until they pass a quiescent state. */
static void
entry_retire(struct entry *e)
{
#ifdef KVX_TEST_FREE_WITHOUT_GRACE_PERIOD
	(void)entry_free_rcu;
	entry_free(e); /* negative control: wrong on purpose */
#else
	tsan_quiescent();
	call_rcu(&e->rcu, entry_free_rcu);
#endif
}

struct reader_arg {
	int idx;
};

static void *
reader_main(void *p)
{
	struct reader_arg *a = p;
	uint64_t seed = 0x9e3779b97f4a7c15ULL * (uint64_t)(a->idx + 1);
	uint64_t lookups = 0, hits = 0, poisoned = 0, corrupt = 0;

	pthread_barrier_wait(&race.start);
	rcu_register_thread(); /* QSBR: registered threads start online */
	while (!__atomic_load_n(&race.done, __ATOMIC_ACQUIRE)) {
		uint64_t key = xorshift(&seed) % KEYSPACE;
		struct kvx_room_table_node *n;

		rcu_read_lock();
		n = kvx_room_table_lookup(race.t, key);
		if (n) {
			struct entry *e = entry_of(n);
			uint64_t m1, m2;
			int spin;

			m1 = __atomic_load_n(&e->magic, __ATOMIC_RELAXED);
			for (spin = 0; spin < 64; spin++) /* hold the entry a little */
				caa_cpu_relax();
			m2 = __atomic_load_n(&e->magic, __ATOMIC_RELAXED);
			if (m1 == POISON || m2 == POISON)
				poisoned++;
			else if (m1 != MAGIC || m2 != MAGIC || n->key != key)
				corrupt++;
			hits++;
		}
		lookups++;
		rcu_read_unlock();
		tsan_quiescent();
		rcu_quiescent_state(); /* nothing from this iteration is used after here */
	}
	rcu_unregister_thread();

	race.reader[a->idx].lookups = lookups;
	race.reader[a->idx].hits = hits;
	race.reader[a->idx].poisoned = poisoned;
	race.reader[a->idx].corrupt = corrupt;
	return NULL;
}

static void *
writer_main(void *p)
{
	struct entry *live[LIVE_MAX];
	uint64_t seed = 0x2545f4914f6cdd1dULL;
	int nlive = 0, op, i;

	pthread_barrier_wait(&race.start);
	rcu_register_thread();
	for (op = 0; op < WRITER_OPS; op++) {
		uint64_t r = xorshift(&seed);

		/* add with probability (LIVE_MAX - nlive) / LIVE_MAX: about half full */
		if ((int)(r % LIVE_MAX) >= nlive) {
			struct entry *e = malloc(sizeof(*e));

			if (!e) {
				race.writer_errors++;
				break;
			}
			e->magic = MAGIC;
			if (kvx_room_table_add(race.t, &e->node, (r >> 8) % KEYSPACE) == 0) {
				live[nlive++] = e;
				race.published++;
			} else {
				free(e); /* never visible: no grace period needed */
			}
		} else {
			i = (int)((r >> 16) % (uint64_t)nlive);
			if (kvx_room_table_del(race.t, &live[i]->node) != 0)
				race.writer_errors++;
			entry_retire(live[i]);
			live[i] = live[--nlive];
		}
		rcu_quiescent_state();
	}
	for (i = 0; i < nlive; i++) {
		if (kvx_room_table_del(race.t, &live[i]->node) != 0)
			race.writer_errors++;
		entry_retire(live[i]);
	}
	__atomic_store_n(&race.done, 1, __ATOMIC_RELEASE);
	rcu_unregister_thread();
	return NULL;
}

static void
test_readers_vs_writer(void **state)
{
	pthread_t readers[NREADERS], writer;
	struct reader_arg args[NREADERS];
	uint64_t freed_before_barrier, hits = 0, lookups = 0;
	int i;

	memset(&race, 0, sizeof(race));
	race.t = kvx_room_table_create(4);
	assert_non_null(race.t);
	assert_int_equal(pthread_barrier_init(&race.start, NULL, NREADERS + 1), 0);

	rcu_thread_offline(); /* this thread blocks in join: let grace periods pass meanwhile */
	for (i = 0; i < NREADERS; i++) {
		args[i].idx = i;
		assert_int_equal(pthread_create(&readers[i], NULL, reader_main, &args[i]), 0);
	}
	assert_int_equal(pthread_create(&writer, NULL, writer_main, NULL), 0);
	assert_int_equal(pthread_join(writer, NULL), 0);
	for (i = 0; i < NREADERS; i++)
		assert_int_equal(pthread_join(readers[i], NULL), 0);
	rcu_thread_online();
	pthread_barrier_destroy(&race.start);

	freed_before_barrier = __atomic_load_n(&race.freed, __ATOMIC_RELAXED);
	rcu_barrier(); /* every call_rcu callback has run */

	for (i = 0; i < NREADERS; i++) {
		print_message("reader %d: %llu lookups, %llu hits, %llu poisoned, %llu corrupt\n",
			      i, (unsigned long long)race.reader[i].lookups,
			      (unsigned long long)race.reader[i].hits,
			      (unsigned long long)race.reader[i].poisoned,
			      (unsigned long long)race.reader[i].corrupt);
		lookups += race.reader[i].lookups;
		hits += race.reader[i].hits;
	}
	print_message("writer: %llu published, %llu freed before rcu_barrier, %llu after\n",
		      (unsigned long long)race.published, (unsigned long long)freed_before_barrier,
		      (unsigned long long)__atomic_load_n(&race.freed, __ATOMIC_RELAXED));

	for (i = 0; i < NREADERS; i++) {
		assert_int_equal(race.reader[i].poisoned, 0);
		assert_int_equal(race.reader[i].corrupt, 0);
	}
	assert_int_equal(race.writer_errors, 0);
	/* the test did race: readers found entries, and entries were freed while they ran */
	assert_true(lookups > 1000);
	assert_true(hits > 100);
	assert_true(freed_before_barrier > 0);
	assert_int_equal(__atomic_load_n(&race.freed, __ATOMIC_RELAXED), race.published);

	assert_int_equal(kvx_room_table_count(race.t), 0);
	assert_int_equal(kvx_room_table_destroy(race.t), 0);
}

static int
group_setup(void **state)
{
	rcu_register_thread();
	return 0;
}

static int
group_teardown(void **state)
{
	rcu_barrier();
	rcu_unregister_thread();
	return 0;
}

/* The unseeded hash kvx used before (splitmix64's finaliser) and its inverse: an attacker
 * who knows the function picks ids whose hashes share their low bits (one bucket). */
static uint64_t
mul_inverse(uint64_t a)
{
	uint64_t x = a; /* Newton: correct to 3, 6, 12, 24, 48, 96 bits */

	for (int i = 0; i < 5; i++)
		x *= 2 - a * x;
	return x;
}

static uint64_t
unshift(uint64_t y, int s)
{
	uint64_t x = y;

	for (int i = 0; i < 64 / s + 1; i++)
		x = y ^ (x >> s);
	return x;
}

static uint64_t
fmix64(uint64_t key)
{
	key ^= key >> 30;
	key *= 0xbf58476d1ce4e5b9ULL;
	key ^= key >> 27;
	key *= 0x94d049bb133111ebULL;
	return key ^ (key >> 31);
}

static uint64_t
fmix64_inverse(uint64_t h)
{
	h = unshift(h, 31);
	h *= mul_inverse(0x94d049bb133111ebULL);
	h = unshift(h, 27);
	h *= mul_inverse(0xbf58476d1ce4e5b9ULL);
	return unshift(h, 30);
}

/* 4096 room ids that all collided in one bucket under the old unseeded hash spread over the
 * buckets under the keyed one, and two tables hash differently (a random key each). */
static void
test_hash_is_keyed(void **state)
{
	struct kvx_room_table *t1 = kvx_room_table_create(1024), *t2 = kvx_room_table_create(1024);
	static uint16_t per_bucket[1024];
	int max = 0, same = 0;

	(void)state;
	assert_non_null(t1);
	assert_non_null(t2);
	memset(per_bucket, 0, sizeof(per_bucket));
	for (uint64_t i = 1; i <= 4096; i++) {
		uint64_t id = fmix64_inverse(i << 20); /* old hash: low 20 bits all zero */
		unsigned long h = key_hash(t1, id, 0);

		assert_true(fmix64(id) == i << 20);
		if (++per_bucket[h & 1023] > max)
			max = per_bucket[h & 1023];
		same += h == key_hash(t2, id, 0);
	}
	assert_true(max <= 20); /* 4 per bucket on average; one bucket under the old hash */
	assert_int_equal(same, 0);
	assert_int_equal(kvx_room_table_destroy(t1), 0);
	assert_int_equal(kvx_room_table_destroy(t2), 0);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_add_lookup_del),
		cmocka_unit_test(test_hash_is_keyed),
		cmocka_unit_test(test_key_extremes),
		cmocka_unit_test(test_create_sizes),
		cmocka_unit_test(test_for_each),
		cmocka_unit_test(test_sub_keys_are_distinct),
		cmocka_unit_test(test_destroy_after_mass_delete),
		cmocka_unit_test(test_readers_vs_writer),
	};

	return cmocka_run_group_tests(tests, group_setup, group_teardown);
}
