/* SPDX-License-Identifier: Apache-2.0 */
#include "core/mbox.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "core/log.h"

struct kvx_mbox {
	/* producer line */
	_Alignas(64) _Atomic uint32_t tail;
	uint32_t head_cache;
	_Atomic uint64_t wakes; /* eventfd writes (any thread reads it, relaxed) */
	/* consumer line */
	_Alignas(64) _Atomic uint32_t head;
	_Atomic int parked;
	/* read-only after create */
	_Alignas(64) uint32_t mask;
	size_t msg_size;
	int efd;
	uint8_t *slots;
};

struct kvx_mbox *
kvx_mbox_create(uint32_t depth, size_t msg_size)
{
	struct kvx_mbox *m;

	if (depth < 2 || (depth & (depth - 1)) || msg_size == 0) {
		KVX_ERR("bad mailbox geometry depth=%u msg_size=%zu", depth, msg_size);
		return NULL;
	}
	m = aligned_alloc(64, sizeof(*m));
	if (!m)
		goto err;
	memset(m, 0, sizeof(*m));
	m->mask = depth - 1;
	m->msg_size = msg_size;
	m->slots = calloc(depth, msg_size);
	if (!m->slots)
		goto err_free_mbox;
	m->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (m->efd < 0)
		goto err_free_slots;
	return m;

err_free_slots:
	free(m->slots);
err_free_mbox:
	free(m);
err:
	KVX_ERR("cannot create mailbox: %s", strerror(errno));
	return NULL;
}

void
kvx_mbox_destroy(struct kvx_mbox *m)
{
	if (!m)
		return;
	close(m->efd);
	free(m->slots);
	free(m);
}

uint32_t
kvx_mbox_free_count(const struct kvx_mbox *m)
{
	uint32_t head = atomic_load_explicit(&((struct kvx_mbox *)m)->head, memory_order_acquire);
	uint32_t tail = atomic_load_explicit(&((struct kvx_mbox *)m)->tail, memory_order_relaxed);

	return m->mask + 1 - (tail - head);
}

static void
wake(struct kvx_mbox *m)
{
	uint64_t one = 1;

	if (write(m->efd, &one, sizeof(one)) < 0 && errno != EAGAIN)
		KVX_WARN("eventfd write: %s", strerror(errno));
}

/* One wake-up per park: the first message after the consumer parked takes the flag (the
 * consumer is woken and drains everything), the rest of a batch find it clear. */
static void
wake_parked(struct kvx_mbox *m)
{
	if (atomic_load_explicit(&m->parked, memory_order_seq_cst) &&
	    atomic_exchange_explicit(&m->parked, 0, memory_order_seq_cst)) {
		wake(m);
		atomic_fetch_add_explicit(&m->wakes, 1, memory_order_relaxed);
	}
}

/* Copy one message in; wake a parked consumer only when `loud`, or once the mailbox is half
 * full (a quiet message never waits behind a consumer that cannot drain in time). */
static int
put(struct kvx_mbox *m, const void *msg, bool loud)
{
	uint32_t tail = atomic_load_explicit(&m->tail, memory_order_relaxed);

	if (tail - m->head_cache > m->mask) {
		m->head_cache = atomic_load_explicit(&m->head, memory_order_acquire);
		if (tail - m->head_cache > m->mask)
			return -ENOBUFS;
	}
	memcpy(m->slots + (size_t)(tail & m->mask) * m->msg_size, msg, m->msg_size);
	atomic_store_explicit(&m->tail, tail + 1, memory_order_seq_cst);
	if (!loud) {
		/* half full by the cached head: refresh it, and wake if that is still so */
		if (tail + 1 - m->head_cache < (m->mask + 1) / 2)
			return 0;
		m->head_cache = atomic_load_explicit(&m->head, memory_order_acquire);
		if (tail + 1 - m->head_cache < (m->mask + 1) / 2)
			return 0;
	}
	wake_parked(m);
	return 0;
}

int
kvx_mbox_put(struct kvx_mbox *m, const void *msg)
{
	return put(m, msg, true);
}

int
kvx_mbox_put_quiet(struct kvx_mbox *m, const void *msg)
{
	return put(m, msg, false);
}

uint64_t
kvx_mbox_wakes(const struct kvx_mbox *m)
{
	return atomic_load_explicit(&((struct kvx_mbox *)m)->wakes, memory_order_relaxed);
}

int
kvx_mbox_get_burst(struct kvx_mbox *m, void *msgs, int max)
{
	uint32_t head = atomic_load_explicit(&m->head, memory_order_relaxed);
	uint32_t tail = atomic_load_explicit(&m->tail, memory_order_acquire);
	int n = 0;

	while (n < max && head != tail) {
		memcpy((uint8_t *)msgs + (size_t)n * m->msg_size,
		       m->slots + (size_t)(head & m->mask) * m->msg_size, m->msg_size);
		head++;
		n++;
	}
	if (n)
		atomic_store_explicit(&m->head, head, memory_order_release);
	return n;
}

bool
kvx_mbox_empty(const struct kvx_mbox *m)
{
	struct kvx_mbox *mm = (struct kvx_mbox *)m;

	return atomic_load_explicit(&mm->head, memory_order_relaxed) ==
	       atomic_load_explicit(&mm->tail, memory_order_seq_cst);
}

int
kvx_mbox_fd(const struct kvx_mbox *m)
{
	return m->efd;
}

void
kvx_mbox_park_prepare(struct kvx_mbox *m)
{
	atomic_store_explicit(&m->parked, 1, memory_order_seq_cst);
}

void
kvx_mbox_park_done(struct kvx_mbox *m, bool woken)
{
	uint64_t v;

	atomic_store_explicit(&m->parked, 0, memory_order_relaxed);
	if (woken && read(m->efd, &v, sizeof(v)) < 0 && errno != EAGAIN)
		KVX_WARN("eventfd read: %s", strerror(errno));
}

void
kvx_mbox_nudge(struct kvx_mbox *m)
{
	wake_parked(m);
}

void
kvx_mbox_kick(struct kvx_mbox *m)
{
	wake(m);
}
