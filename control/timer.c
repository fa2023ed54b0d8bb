/* SPDX-License-Identifier: Apache-2.0 */
/* A binary min-heap of deadlines (control/timer.h). */
#include <assert.h>
#include <errno.h>
#include <stdlib.h>

#include "control/timer.h"

int
kvxd_timer_reserve(struct kvxd_timer_heap *th, uint32_t more)
{
	uint64_t want = (uint64_t)th->reserved + more;

	if (want > UINT32_MAX / 2)
		return -ENOMEM;
	if (want > th->cap) {
		uint64_t cap = th->cap ? th->cap : 1024;
		struct kvxd_timer **nh;

		while (cap < want)
			cap *= 2;
		nh = realloc(th->h, sizeof(*nh) * cap);
		if (!nh)
			return -ENOMEM;
		th->h = nh;
		th->cap = (uint32_t)cap;
	}
	th->reserved = (uint32_t)want;
	return 0;
}

void
kvxd_timer_unreserve(struct kvxd_timer_heap *th, uint32_t less)
{
	assert(th->reserved >= less);
	th->reserved -= less;
	assert(th->n <= th->reserved);
}

void
kvxd_timer_heap_fini(struct kvxd_timer_heap *th)
{
	free(th->h);
	*th = (struct kvxd_timer_heap){0};
}

static void
place(struct kvxd_timer_heap *th, uint32_t i, struct kvxd_timer *t)
{
	th->h[i] = t;
	t->slot = i + 1;
}

static void
sift_up(struct kvxd_timer_heap *th, uint32_t i)
{
	struct kvxd_timer *t = th->h[i];

	while (i > 0) {
		uint32_t parent = (i - 1) / 2;

		if (th->h[parent]->due_ms <= t->due_ms)
			break;
		place(th, i, th->h[parent]);
		i = parent;
	}
	place(th, i, t);
}

static void
sift_down(struct kvxd_timer_heap *th, uint32_t i)
{
	struct kvxd_timer *t = th->h[i];

	for (;;) {
		uint32_t l = 2 * i + 1, r = l + 1, m = i;
		uint64_t best = t->due_ms;

		if (l < th->n && th->h[l]->due_ms < best) {
			m = l;
			best = th->h[l]->due_ms;
		}
		if (r < th->n && th->h[r]->due_ms < best)
			m = r;
		if (m == i)
			break;
		place(th, i, th->h[m]);
		i = m;
	}
	place(th, i, t);
}

void
kvxd_timer_cancel(struct kvxd_timer_heap *th, struct kvxd_timer *t)
{
	uint32_t i;
	struct kvxd_timer *last;

	if (!t->slot)
		return;
	i = t->slot - 1;
	assert(i < th->n && th->h[i] == t);
	t->slot = 0;
	last = th->h[--th->n];
	if (i == th->n)
		return;
	place(th, i, last);
	if (i > 0 && th->h[(i - 1) / 2]->due_ms > last->due_ms)
		sift_up(th, i);
	else
		sift_down(th, i);
}

void
kvxd_timer_arm(struct kvxd_timer_heap *th, struct kvxd_timer *t, uint64_t due_ms)
{
	if (due_ms == KVXD_TIMER_NEVER) {
		kvxd_timer_cancel(th, t);
		return;
	}
	if (t->slot) {
		uint64_t old = t->due_ms;

		t->due_ms = due_ms;
		if (due_ms < old)
			sift_up(th, t->slot - 1);
		else if (due_ms > old)
			sift_down(th, t->slot - 1);
		return;
	}
	/* the owner reserved its place: the heap never grows here */
	assert(th->n < th->reserved && th->n < th->cap);
	t->due_ms = due_ms;
	th->h[th->n] = t;
	t->slot = ++th->n;
	sift_up(th, th->n - 1);
}

uint64_t
kvxd_timer_next(const struct kvxd_timer_heap *th)
{
	return th->n ? th->h[0]->due_ms : KVXD_TIMER_NEVER;
}

struct kvxd_timer *
kvxd_timer_pop_due(struct kvxd_timer_heap *th, uint64_t now)
{
	struct kvxd_timer *t;

	if (!th->n || th->h[0]->due_ms > now)
		return NULL;
	t = th->h[0];
	kvxd_timer_cancel(th, t);
	return t;
}
