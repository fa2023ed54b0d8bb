/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The size-class cache in front of malloc (core/slab.h).  Thread: the cache's owner only.
 */
#include <assert.h>
#include <errno.h>
#include <stdalign.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#include "core/slab.h"

#if defined(__SANITIZE_ADDRESS__)
#define SLAB_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define SLAB_ASAN 1
#endif
#endif
#ifdef SLAB_ASAN
#include <sanitizer/asan_interface.h>
#define poison(p, n) ASAN_POISON_MEMORY_REGION((p), (size_t)(n))
#define unpoison(p, n) ASAN_UNPOISON_MEMORY_REGION((p), (size_t)(n))
#else
#define poison(p, n) ((void)(p), (void)(n))
#define unpoison(p, n) ((void)(p), (void)(n))
#endif

#define CLASS_BIG UINT32_MAX
#define MAGIC_LIVE 0x6b76786cu /* handed out */
#define MAGIC_FREE 0x6b767866u /* on a free list */

/* In front of every object; the object starts right after it, aligned like malloc's. */
struct kvx_slab_obj {
	alignas(max_align_t) struct kvx_slab_obj *next; /* on its class's free list */
	uint32_t cls;					/* class index, or CLASS_BIG */
	uint32_t magic;
};

#define HDR ((uint64_t)sizeof(struct kvx_slab_obj))

/* Bytes to malloc for an object of units units: header + base + units * unit, or 0 when that
 * does not fit in 64 bits or in size_t. */
static uint64_t
obj_bytes(const struct kvx_slab *s, uint64_t units)
{
	uint64_t n;

	if (__builtin_mul_overflow(units, s->unit, &n) || __builtin_add_overflow(n, s->base, &n) ||
	    __builtin_add_overflow(n, HDR, &n) || (uint64_t)(size_t)n != n)
		return 0;
	return n;
}

/* The smallest k with 2^k >= units. */
static uint32_t
class_of(uint32_t units)
{
	return units <= 1 ? 0 : 64 - (uint32_t)__builtin_clzll((uint64_t)units - 1);
}

int
kvx_slab_init(struct kvx_slab *s, size_t base, size_t unit, uint32_t max_units, uint64_t cache_max)
{
	memset(s, 0, sizeof(*s));
	if (!unit || !max_units || max_units > (1u << (KVX_SLAB_CLASSES_MAX - 1)))
		return -EINVAL;
	s->base = base;
	s->unit = unit;
	s->max_units = max_units;
	s->nclasses = (int)class_of(max_units) + 1;
	for (int k = 0; k < s->nclasses; k++) {
		s->class_bytes[k] = obj_bytes(s, 1ull << k);
		if (!s->class_bytes[k]) {
			memset(s, 0, sizeof(*s));
			return -EOVERFLOW;
		}
	}
	s->cache_max = cache_max;
	return 0;
}

void
kvx_slab_fini(struct kvx_slab *s)
{
	for (int k = 0; k < s->nclasses; k++)
		while (s->free[k]) {
			struct kvx_slab_obj *o = s->free[k];

			s->free[k] = o->next;
			free(o);
		}
	s->st.cached = s->st.cached_bytes = 0;
	s->cache_max = 0;
}

void *
kvx_slab_alloc(struct kvx_slab *s, uint32_t units)
{
	struct kvx_slab_obj *o;
	uint64_t want, bytes;
	uint32_t cls;

	assert(s->unit); /* kvx_slab_init() first */
	want = obj_bytes(s, units);
	if (!want) {
		s->st.failed++;
		return NULL;
	}
	if (units > s->max_units) {
		cls = CLASS_BIG;
		bytes = want;
	} else {
		cls = class_of(units);
		bytes = s->class_bytes[cls];
		o = s->free[cls];
		if (o) {
			assert(o->magic == MAGIC_FREE && o->cls == cls);
			s->free[cls] = o->next;
			s->st.cached--;
			s->st.cached_bytes -= bytes;
			s->st.hits++;
			goto out;
		}
	}
	o = malloc((size_t)bytes);
	if (!o) {
		s->st.failed++;
		return NULL;
	}
	if (cls == CLASS_BIG)
		s->st.big++;
	else
		s->st.misses++;
	o->cls = cls;
out:
	o->next = NULL;
	o->magic = MAGIC_LIVE;
	s->st.live++;
	unpoison(o + 1, want - HDR);
	poison((uint8_t *)o + want, bytes - want); /* the class's slack past what was asked */
	return o + 1;
}

void
kvx_slab_free(struct kvx_slab *s, void *p)
{
	struct kvx_slab_obj *o;
	uint64_t bytes;

	if (!p)
		return;
	o = (struct kvx_slab_obj *)p - 1;
	assert(o->magic == MAGIC_LIVE); /* handed out by a kvx_slab, not freed yet */
	s->st.live--;
	if (o->cls == CLASS_BIG) {
		o->magic = 0;
		free(o);
		return;
	}
	assert(o->cls < (uint32_t)s->nclasses);
	bytes = s->class_bytes[o->cls];
	if (bytes > s->cache_max - s->st.cached_bytes) { /* cached_bytes <= cache_max */
		s->st.released++;
		o->magic = 0;
		free(o);
		return;
	}
	o->magic = MAGIC_FREE;
	o->next = s->free[o->cls];
	s->free[o->cls] = o;
	s->st.cached++;
	s->st.cached_bytes += bytes;
	poison(o + 1, bytes - HDR);
}
