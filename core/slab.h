/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A size-class cache in front of malloc for objects of one shape: a fixed part of `base` bytes
 * followed by `units` elements of `unit` bytes (a chunk: its header, then its pages).  Classes
 * are powers of two of units, 1, 2, 4, ... up to max_units rounded up to a power of two; an
 * object of u units takes the smallest class that holds u.  A freed object goes on its class's
 * free list, and the next allocation of that class takes it back without calling malloc, as
 * long as the free lists hold at most cache_max bytes; past that bound a free goes to free().
 * An object of more than max_units units is "big": malloc'd and free()'d every time, counted.
 *
 * Every object carries a 16-byte header in front of it (its class, a free-list link, a magic
 * that catches a pointer this cache did not hand out and a double free by assert()).  Under
 * AddressSanitizer a cached object is poisoned, so a use after kvx_slab_free() is still reported.
 *
 * Threads: one owner thread (the control core for kvxd's chunks) calls every function; there
 * is no lock.  An object may travel to another thread and back in between (a polling core's
 * inbox and outbox) as long as that hand-over orders memory (core/mbox.h does).  Nothing here
 * blocks except inside malloc and free.  All size arithmetic is in 64 bits with overflow checks.
 */
#ifndef KVX_CORE_SLAB_H
#define KVX_CORE_SLAB_H

#include <stddef.h>
#include <stdint.h>

#define KVX_SLAB_CLASSES_MAX 24 /* max_units up to 2^23 */

/* Counters: the owner thread's (kvxd shows its chunk cache's in the "counters" command). */
struct kvx_slab_stats {
	uint64_t hits;	       /* allocations taken from a free list (no malloc) */
	uint64_t misses;       /* allocations of a class whose free list was empty: malloc'd */
	uint64_t big;	       /* allocations of more than max_units: malloc'd, free()'d */
	uint64_t released;     /* frees of a class object past cache_max: free()'d */
	uint64_t failed;       /* allocations that returned NULL (malloc failed, or too large) */
	uint64_t live;	       /* allocated and not freed yet */
	uint64_t cached;       /* objects on the free lists now */
	uint64_t cached_bytes; /* their bytes (headers included): at most cache_max */
};

struct kvx_slab_obj; /* the header in front of every object (core/slab.c) */

struct kvx_slab {
	uint64_t base, unit;			    /* object bytes = base + units * unit */
	uint32_t max_units;			    /* larger objects are big */
	int nclasses;				    /* classes 0 .. nclasses - 1 hold 2^k units */
	uint64_t cache_max;			    /* bytes the free lists may hold */
	uint64_t class_bytes[KVX_SLAB_CLASSES_MAX]; /* malloc'd size of an object of class k */
	struct kvx_slab_obj *free[KVX_SLAB_CLASSES_MAX];
	struct kvx_slab_stats st;
};

/*
 * Set s up empty.  base, unit: the object's shape (unit >= 1); max_units: the largest object a
 * class holds (1 .. 2^(KVX_SLAB_CLASSES_MAX-1)); cache_max: the bound on cached bytes (0: cache
 * nothing, every free goes to free()).  Returns 0, or -EINVAL (unit 0, max_units out of range),
 * -EOVERFLOW (the largest class does not fit in 64 bits and size_t).  Owner thread.
 */
int kvx_slab_init(struct kvx_slab *s, size_t base, size_t unit, uint32_t max_units,
		  uint64_t cache_max);
/* free() every cached object and cache nothing from now on (cache_max = 0): s still takes
 * allocations and frees, which then go to malloc and free().  Objects still allocated are not
 * tracked here (st.live counts them): their owners give them back.  Owner thread. */
void kvx_slab_fini(struct kvx_slab *s);

/* An object of `units` units (base + units * unit usable bytes, uninitialised, aligned like
 * malloc's), or NULL when malloc fails or the size does not fit in size_t.  Owner thread. */
void *kvx_slab_alloc(struct kvx_slab *s, uint32_t units);
/* Give back an object kvx_slab_alloc(s) returned (NULL: nothing).  Owner thread. */
void kvx_slab_free(struct kvx_slab *s, void *p);

#endif /* KVX_CORE_SLAB_H */
