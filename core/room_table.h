/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Room table: a lock-free hash table of u64 keys, each with a u64 sub-key (0 unless given) (liburcu
 * cds_lfht, QSBR flavour).  Entries embed a struct kvx_room_table_node; the table never allocates
 * or frees entries.  A removed entry may still be seen by readers until a grace period has passed:
 * free it with call_rcu() (on the control core, never on a polling core).
 *
 * RCU rules (QSBR): every caller is a registered RCU thread and online (rcu_register_thread(),
 * rcu_thread_online()); lookups and iteration hold rcu_read_lock() (a no-op under QSBR, kept
 * for the checker) and use the result only before their next quiescent state.  add/del may run
 * concurrently with readers and with each other.  None of these functions block or allocate,
 * except create/destroy.
 */
#ifndef KVX_CORE_ROOM_TABLE_H
#define KVX_CORE_ROOM_TABLE_H

#include <stdint.h>

#include <urcu-qsbr.h>
#include <urcu/rculfhash.h>

struct kvx_room_table;

struct kvx_room_table_node {
	struct cds_lfht_node lfht;
	uint64_t key, sub;
};

/* Thread: any registered thread, not in a read-side section.  NULL on allocation failure. */
struct kvx_room_table *kvx_room_table_create(unsigned long initial_buckets);

/* The table must be empty.  Thread: registered, online, outside any read-side section and not
 * a call_rcu worker.  Returns 0, -EBUSY if not empty. */
int kvx_room_table_destroy(struct kvx_room_table *t);

/* Insert n under key unless the key is present.  Returns 0 or -EEXIST. */
int kvx_room_table_add(struct kvx_room_table *t, struct kvx_room_table_node *n, uint64_t key);

/* The same, under (key, sub): a room of several engine ranks (sub = rank and role). */
int kvx_room_table_add_sub(struct kvx_room_table *t, struct kvx_room_table_node *n, uint64_t key,
			   uint64_t sub);

/* The node with key (and sub-key 0), or NULL.  Caller holds rcu_read_lock(). */
struct kvx_room_table_node *kvx_room_table_lookup(struct kvx_room_table *t, uint64_t key);
/* The node with (key, sub), or NULL.  Caller holds rcu_read_lock(). */
struct kvx_room_table_node *kvx_room_table_lookup_sub(struct kvx_room_table *t, uint64_t key,
						      uint64_t sub);

/* Remove n.  Returns 0, or -ENOENT if n was already removed (by anyone). */
int kvx_room_table_del(struct kvx_room_table *t, struct kvx_room_table_node *n);

/* Call fn on every node (order unspecified); stops early when fn returns non-zero and returns
 * that value.  Caller holds rcu_read_lock(). */
int kvx_room_table_for_each(struct kvx_room_table *t,
			    int (*fn)(struct kvx_room_table_node *n, void *arg), void *arg);

/* QSBR with a model of it for ThreadSanitizer.  liburcu is not built for TSan, so TSan cannot
 * see that a call_rcu callback runs after every reader's next quiescent state: each reader's
 * quiescent state (and going offline) is a release on one shared token, and a reclaiming
 * callback starts with an acquire of it.  Outside TSan builds these are the plain liburcu
 * calls.  Thread: registered RCU threads (reclaim: a call_rcu callback). */
void kvx_rcu_quiescent(void);
void kvx_rcu_offline(void);
void kvx_rcu_online(void);
void kvx_rcu_reclaim_begin(void);
/* The end of a reclaiming callback, and rcu_barrier() (after which every callback's effects
 * are visible). */
void kvx_rcu_reclaim_end(void);
void kvx_rcu_barrier(void);

/* Number of nodes (approximate while writers run). */
unsigned long kvx_room_table_count(struct kvx_room_table *t);

#endif /* KVX_CORE_ROOM_TABLE_H */
