/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A deterministic call_rcu() for the fuzz targets that run control cores.  liburcu's call_rcu
 * thread batches callbacks with a 10 ms sleep, so each rcu_barrier() of a per-input teardown
 * costs 10-20 ms; and callbacks that run at a moment of that thread's choosing make a crash
 * depend on timing.  These definitions take the place of liburcu-qsbr's (the executable's
 * symbols come first): call_rcu() queues, and fuzz_rcu_flush() -- called by the harness
 * between loop iterations, and by rcu_barrier() -- waits for a grace period with
 * synchronize_rcu() and runs what was queued before it, in order.  A callback still runs only
 * after a grace period, as liburcu guarantees; only the moment is fixed.
 * Thread: the fuzz target's one thread.
 */
#include <stddef.h>
#include <urcu-qsbr.h>

#include "fuzz_rcu.h"

static struct rcu_head *q_head, **q_tail = &q_head;

void
call_rcu(struct rcu_head *head, void (*func)(struct rcu_head *head))
{
	head->func = func;
	head->next.next = NULL;
	*q_tail = head;
	q_tail = (struct rcu_head **)&head->next.next;
}

void
fuzz_rcu_flush(void)
{
	while (q_head) {
		struct rcu_head *h = q_head;

		q_head = NULL;
		q_tail = &q_head;
		synchronize_rcu();
		while (h) {
			struct rcu_head *next = (struct rcu_head *)h->next.next;

			h->func(h); /* may queue more: the next round runs them */
			h = next;
		}
	}
}

void
rcu_barrier(void)
{
	fuzz_rcu_flush();
}
