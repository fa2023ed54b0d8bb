/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Room table: a typed wrapper around liburcu's cds_lfht (QSBR flavour).  The header carries the
 * rules; notes on the liburcu side:
 *
 * - cds_lfht_add_unique/lookup/del/first/next/count_nodes need a registered, online reader inside
 *   a read-side section.  lookup and for_each leave the section to the caller (the result lives
 *   in it); add, del and count open their own (read-side sections nest; under QSBR they are
 *   no-ops).
 * - cds_lfht_destroy of an auto-resizing table (liburcu 0.10 to 0.13) waits for the resize
 *   worker, and a shrink in that worker calls synchronize_rcu(): an online QSBR caller would wait
 *   for itself.  destroy therefore goes offline around it, as rcu_barrier() does.
 */
#include "core/room_table.h"

#include <assert.h>
#include <errno.h>
#include <stdlib.h>

#include "core/log.h"
#include "core/rand.h"

/* ThreadSanitizer cannot see liburcu 0.13's barriers and atomics (not built for it), so it would
 * report every reader of a freshly added node as racing with the node's initialisation.  Model
 * the publication edge: release in add before cds_lfht_add_unique's commit (rcu_assign_pointer),
 * acquire on every node a reader gets to (rcu_dereference).  No code outside TSan builds. */
#if defined(__SANITIZE_THREAD__)
#define ROOM_TABLE_TSAN 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define ROOM_TABLE_TSAN 1
#endif
#endif
#ifdef ROOM_TABLE_TSAN
#include <sanitizer/tsan_interface.h>
#define tsan_publish(n) __tsan_release(n)
#define tsan_subscribe(n) __tsan_acquire(n)
#else
#define tsan_publish(n) ((void)(n))
#define tsan_subscribe(n) ((void)(n))
#endif

#define ROOM_TABLE_MAX_BUCKETS (1UL << 30)

static char grace_token; /* the TSan sync object of the QSBR model */

void
kvx_rcu_quiescent(void)
{
	tsan_publish(&grace_token);
	rcu_quiescent_state();
}

void
kvx_rcu_offline(void)
{
	tsan_publish(&grace_token);
	rcu_thread_offline();
}

void
kvx_rcu_online(void)
{
	rcu_thread_online();
}

void
kvx_rcu_reclaim_begin(void)
{
	tsan_subscribe(&grace_token);
}

static char barrier_token;

void
kvx_rcu_reclaim_end(void)
{
	tsan_publish(&barrier_token);
}

void
kvx_rcu_barrier(void)
{
	/* the caller's own accesses come before the callbacks it waits for: rcu_barrier() goes
	 * through a grace period, with the caller offline */
	tsan_publish(&grace_token);
	rcu_barrier();
	tsan_subscribe(&barrier_token);
}

struct kvx_room_table {
	struct cds_lfht *ht;
	uint64_t k0, k1; /* the hash key: random per table */
};

#define ROTL(x, b) (uint64_t)(((x) << (b)) | ((x) >> (64 - (b))))
#define SIPROUND                   \
	do {                       \
		v0 += v1;          \
		v1 = ROTL(v1, 13); \
		v1 ^= v0;          \
		v0 = ROTL(v0, 32); \
		v2 += v3;          \
		v3 = ROTL(v3, 16); \
		v3 ^= v2;          \
		v0 += v3;          \
		v3 = ROTL(v3, 21); \
		v3 ^= v0;          \
		v2 += v1;          \
		v1 = ROTL(v1, 17); \
		v1 ^= v2;          \
		v2 = ROTL(v2, 32); \
	} while (0)

/* SipHash-1-3 of two 64-bit words (a key and its sub-key) under the table's random 128-bit key
 * (the construction of Aumasson and Bernstein, the keyed hash the Linux kernel and Rust's HashMap
 * use against hash flooding): room ids, ranks and tokens come from peers and engines, so nobody
 * who does not know the key can choose keys that collide. */
static inline unsigned long
key_hash(const struct kvx_room_table *t, uint64_t key, uint64_t sub)
{
	uint64_t v0 = t->k0 ^ 0x736f6d6570736575ULL, v1 = t->k1 ^ 0x646f72616e646f6dULL;
	uint64_t v2 = t->k0 ^ 0x6c7967656e657261ULL, v3 = t->k1 ^ 0x7465646279746573ULL;
	uint64_t b = (uint64_t)16 << 56;

	v3 ^= key;
	SIPROUND;
	v0 ^= key;
	v3 ^= sub;
	SIPROUND;
	v0 ^= sub;
	v3 ^= b;
	SIPROUND;
	v0 ^= b;
	v2 ^= 0xff;
	SIPROUND;
	SIPROUND;
	SIPROUND;
	return (unsigned long)(v0 ^ v1 ^ v2 ^ v3);
}

struct key2 {
	uint64_t key, sub;
};

static int
key_match(struct cds_lfht_node *node, const void *key)
{
	const struct kvx_room_table_node *n =
		caa_container_of(node, struct kvx_room_table_node, lfht);

	tsan_subscribe(node);
	const struct key2 *k = key;

	return n->key == k->key && n->sub == k->sub;
}

static unsigned long
roundup_pow2(unsigned long v)
{
	unsigned long p = 1;

	while (p < v)
		p <<= 1;
	return p;
}

struct kvx_room_table *
kvx_room_table_create(unsigned long initial_buckets)
{
	struct kvx_room_table *t;
	unsigned long size;

	if (initial_buckets > ROOM_TABLE_MAX_BUCKETS) {
		KVX_ERR("%lu initial buckets: more than %lu", initial_buckets,
			ROOM_TABLE_MAX_BUCKETS);
		return NULL;
	}
	size = roundup_pow2(initial_buckets ? initial_buckets : 1);

	t = calloc(1, sizeof(*t));
	if (!t) {
		KVX_ERR("calloc: out of memory");
		return NULL;
	}
	t->k0 = kvx_rand_u64();
	t->k1 = kvx_rand_u64();
	/* Never shrink below the initial size; grow without bound. */
	t->ht = cds_lfht_new(size, size, 0, CDS_LFHT_AUTO_RESIZE | CDS_LFHT_ACCOUNTING, NULL);
	if (!t->ht) {
		KVX_ERR("cds_lfht_new(%lu buckets) failed", size);
		goto err_free_table;
	}
	return t;

err_free_table:
	free(t);
	return NULL;
}

int
kvx_room_table_destroy(struct kvx_room_table *t)
{
	struct cds_lfht_iter iter;
	int was_online;
	int ret;

	assert(rcu_read_ongoing()); /* QSBR: registered and online */

	/* Check here rather than let cds_lfht_destroy fail: up to liburcu 0.13 it has stopped the
	 * table's resizing for good by the time it finds the table not empty. */
	rcu_read_lock();
	cds_lfht_first(t->ht, &iter);
	rcu_read_unlock();
	if (cds_lfht_iter_get_node(&iter))
		return -EBUSY;

	was_online = rcu_read_ongoing();
	if (was_online)
		rcu_thread_offline();
	ret = cds_lfht_destroy(t->ht, NULL);
	if (was_online)
		rcu_thread_online();
	if (ret) {
		/* Only on a broken contract (a writer still adding) or a liburcu bug. */
		KVX_ERR("cds_lfht_destroy: %d", ret);
		return ret == -EPERM ? -EBUSY : ret;
	}
	free(t);
	return 0;
}

int
kvx_room_table_add(struct kvx_room_table *t, struct kvx_room_table_node *n, uint64_t key)
{
	return kvx_room_table_add_sub(t, n, key, 0);
}

int
kvx_room_table_add_sub(struct kvx_room_table *t, struct kvx_room_table_node *n, uint64_t key,
		       uint64_t sub)
{
	struct cds_lfht_node *got;

	assert(rcu_read_ongoing());
	n->key = key;
	n->sub = sub;
	cds_lfht_node_init(&n->lfht);
	tsan_publish(&n->lfht);
	rcu_read_lock();
	got = cds_lfht_add_unique(t->ht, key_hash(t, key, sub), key_match,
				  &(struct key2){.key = key, .sub = sub}, &n->lfht);
	rcu_read_unlock();
	return got == &n->lfht ? 0 : -EEXIST;
}

struct kvx_room_table_node *
kvx_room_table_lookup(struct kvx_room_table *t, uint64_t key)
{
	return kvx_room_table_lookup_sub(t, key, 0);
}

struct kvx_room_table_node *
kvx_room_table_lookup_sub(struct kvx_room_table *t, uint64_t key, uint64_t sub)
{
	struct key2 k = {.key = key, .sub = sub};
	struct cds_lfht_iter iter;
	struct cds_lfht_node *node;

	assert(rcu_read_ongoing());
	cds_lfht_lookup(t->ht, key_hash(t, key, sub), key_match, &k, &iter);
	node = cds_lfht_iter_get_node(&iter);
	return node ? caa_container_of(node, struct kvx_room_table_node, lfht) : NULL;
}

int
kvx_room_table_del(struct kvx_room_table *t, struct kvx_room_table_node *n)
{
	int ret;

	assert(rcu_read_ongoing());
	rcu_read_lock();
	ret = cds_lfht_del(t->ht, &n->lfht);
	rcu_read_unlock();
	return ret ? -ENOENT : 0;
}

int
kvx_room_table_for_each(struct kvx_room_table *t,
			int (*fn)(struct kvx_room_table_node *n, void *arg), void *arg)
{
	struct cds_lfht_iter iter;
	struct cds_lfht_node *node;
	int ret;

	assert(rcu_read_ongoing());
	/* fn may delete the node it is given: cds_lfht iteration tolerates removals. */
	cds_lfht_for_each(t->ht, &iter, node)
	{
		tsan_subscribe(node);
		ret = fn(caa_container_of(node, struct kvx_room_table_node, lfht), arg);
		if (ret)
			return ret;
	}
	return 0;
}

/* A walk of the whole table (buckets and nodes, O(size)): exact when no writer runs, otherwise
 * somewhere between the counts at the start and at the end of the walk.  Not for a hot path. */
unsigned long
kvx_room_table_count(struct kvx_room_table *t)
{
	long before, after;
	unsigned long count;

	assert(rcu_read_ongoing());
	rcu_read_lock();
	cds_lfht_count_nodes(t->ht, &before, &count, &after);
	rcu_read_unlock();
	return count;
}
