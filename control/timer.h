/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A binary min-heap of deadlines (layer 0 of control/, control/README.md).  A timer is
 * embedded in its owner (a room) and found back with container_of; arming, moving and
 * cancelling are O(log n), finding the next due one is O(1).  The heap grows only in
 * kvxd_timer_reserve(), so arming a timer that was reserved for never fails.
 * Thread: one (the control core); no RCU rule (it holds no RCU-protected pointers).
 */
#ifndef KVX_CONTROL_TIMER_H
#define KVX_CONTROL_TIMER_H

#include <stdbool.h>
#include <stdint.h>

#define KVXD_TIMER_NEVER UINT64_MAX

/* Embedded in its owner, zeroed (disarmed) before first use. */
struct kvxd_timer {
	uint64_t due_ms;
	uint32_t slot; /* 1 + its index in the heap; 0: not armed */
};

struct kvxd_timer_heap {
	struct kvxd_timer **h;
	uint32_t n, cap;
	uint32_t reserved; /* timers that may be armed at once (kvxd_timer_reserve) */
};

/* Room for `more` more armed timers (their owners call it when they are created, and
 * kvxd_timer_unreserve when they go).  0 or -ENOMEM (nothing changed). */
int kvxd_timer_reserve(struct kvxd_timer_heap *th, uint32_t more);
void kvxd_timer_unreserve(struct kvxd_timer_heap *th, uint32_t less);
void kvxd_timer_heap_fini(struct kvxd_timer_heap *th);

static inline bool
kvxd_timer_armed(const struct kvxd_timer *t)
{
	return t->slot != 0;
}

/* Arm t for due_ms, or move it there if armed; KVXD_TIMER_NEVER cancels it. */
void kvxd_timer_arm(struct kvxd_timer_heap *th, struct kvxd_timer *t, uint64_t due_ms);
void kvxd_timer_cancel(struct kvxd_timer_heap *th, struct kvxd_timer *t);
/* The earliest deadline, or KVXD_TIMER_NEVER when nothing is armed. */
uint64_t kvxd_timer_next(const struct kvxd_timer_heap *th);
/* Take the earliest timer due at now (it is disarmed), or NULL when none is. */
struct kvxd_timer *kvxd_timer_pop_due(struct kvxd_timer_heap *th, uint64_t now);

#endif /* KVX_CONTROL_TIMER_H */
