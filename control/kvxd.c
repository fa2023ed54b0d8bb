/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The daemon's shared state (control/kvxd.h): its clock, its epoll registrations, pool
 * references and the chunk cache.  Layer 0 of control/ (see control/README.md): it calls
 * nothing above it.  Thread: the control core.
 */
#include <errno.h>
#include <sys/epoll.h>
#include <time.h>

#include "control/kvxd.h"

static uint64_t
monotonic_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

static uint64_t
monotonic_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000 + ts.tv_nsec / 1000;
}

uint64_t (*kvxd_clock_ms)(void) = monotonic_ms;
uint64_t (*kvxd_clock_us)(void) = monotonic_us;

uint64_t
kvxd_now_ms(void)
{
	return kvxd_clock_ms();
}

uint64_t
kvxd_now_us(void)
{
	return kvxd_clock_us();
}

int
kvxd_epoll_add(struct kvxd *d, int fd, struct kvxd_fd *ev, uint32_t events)
{
	struct epoll_event e = {.events = events, .data.ptr = ev};

	return epoll_ctl(d->epfd, EPOLL_CTL_ADD, fd, &e) < 0 ? -errno : 0;
}

void
kvxd_engine_slot_set(struct kvxd *d, int i, struct kvxd_engine *e)
{
	d->engines[i] = e;
	if (e && i >= d->engines_end)
		d->engines_end = i + 1;
	while (d->engines_end > 0 && !d->engines[d->engines_end - 1])
		d->engines_end--;
}

void
kvxd_pool_slot_set(struct kvxd *d, int i, struct kvxd_pool *p)
{
	d->pools[i] = p;
	if (p && i >= d->pools_end)
		d->pools_end = i + 1;
	while (d->pools_end > 0 && !d->pools[d->pools_end - 1])
		d->pools_end--;
}

void
kvxd_epoll_mod(struct kvxd *d, int fd, struct kvxd_fd *ev, uint32_t events)
{
	struct epoll_event e = {.events = events, .data.ptr = ev};

	epoll_ctl(d->epfd, EPOLL_CTL_MOD, fd, &e);
}

void
kvxd_pool_put(struct kvxd_pool *p)
{
	if (p)
		atomic_fetch_sub(&p->refs, 1);
}

/* the engine layer refuses a chunk of more pages, so every chunk has a size class */
_Static_assert(KVX_MAX_ROOM_PAGES <= (1u << (KVX_SLAB_CLASSES_MAX - 1)),
	       "a chunk of KVX_MAX_ROOM_PAGES pages needs a size class");

int
kvxd_chunk_cache_init(struct kvxd *d)
{
	return kvx_slab_init(&d->chunks, sizeof(struct kvxd_chunk), sizeof(uint32_t),
			     KVX_MAX_ROOM_PAGES, KVXD_CHUNK_CACHE_BYTES);
}

void
kvxd_chunk_cache_fini(struct kvxd *d)
{
	kvx_slab_fini(&d->chunks);
}

struct kvxd_chunk *
kvxd_chunk_alloc(struct kvxd *d, uint32_t npages)
{
	return kvx_slab_alloc(&d->chunks, npages);
}

void
kvxd_chunk_free(struct kvxd *d, struct kvxd_chunk *ch)
{
	if (!ch)
		return;
	/* its engine's charge back (kvxd_engine_by_id's scan: control/engine_io.c is a layer
	 * above this file) */
	for (int i = 0; ch->engine_id > 0 && i < d->engines_end; i++)
		if (d->engines[i] && d->engines[i]->id == ch->engine_id) {
			d->engines[i]->chunk_bytes -= kvxd_chunk_bytes(ch->npages);
			break;
		}
	kvxd_pool_put(ch->pool);
	kvx_slab_free(&d->chunks, ch);
}
