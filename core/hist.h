/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Fixed log-scale histograms: bucket i counts the values v with 2^(shift+i-1) < v <= 2^(shift+i)
 * (bucket 0 every v <= 2^shift), one more bucket everything above the last bound.  Observing is
 * a count-leading-zeros and three adds: no allocation, no search, no floating point.  The
 * buckets are stored per bucket (not cumulative); an exporter sums them.
 *
 * Thread: one writer, the thread that owns the histogram (in kvxd, the control core); no
 * atomics, no RCU.  A reader on another thread would need its own copy.
 */
#ifndef KVX_CORE_HIST_H
#define KVX_CORE_HIST_H

#include <stdint.h>

#define KVX_HIST_MAX_BUCKETS 32 /* finite buckets at most; one more for +Inf */

/* The bucket bounds of one kind of histogram: 2^shift .. 2^(shift+n-1) in the observed unit,
 * exported as value / 10^decimals (microseconds exported in seconds: 6), exactly. */
struct kvx_hist_scale {
	uint8_t shift, n, decimals;
};

/* Durations in microseconds, 8 us .. 2^26 us (67 s), exported in seconds. */
extern const struct kvx_hist_scale kvx_hist_us;
/* Sizes in bytes, 1 KiB .. 2^39 B (512 GiB). */
extern const struct kvx_hist_scale kvx_hist_bytes;

struct kvx_hist {
	uint64_t count;
	uint64_t sum;				   /* in the observed unit; wraps only past 2^64 */
	uint64_t bucket[KVX_HIST_MAX_BUCKETS + 1]; /* per bucket; [n] is above the last bound */
};

/* The bucket v falls in (0..s->n, s->n meaning above the last bound). */
static inline unsigned
kvx_hist_index(const struct kvx_hist_scale *s, uint64_t v)
{
	unsigned up; /* ceil(log2(v)): the smallest k with v <= 2^k */

	if (v <= 1)
		return 0;
	up = 64u - (unsigned)__builtin_clzll(v - 1);
	if (up <= s->shift)
		return 0;
	up -= s->shift;
	return up < s->n ? up : s->n;
}

static inline void
kvx_hist_observe(struct kvx_hist *h, const struct kvx_hist_scale *s, uint64_t v)
{
	h->bucket[kvx_hist_index(s, v)]++;
	h->count++;
	h->sum += v;
}

/* The upper bound of bucket i (i < s->n), in the observed unit. */
static inline uint64_t
kvx_hist_bound(const struct kvx_hist_scale *s, unsigned i)
{
	return 1ull << (s->shift + i);
}

#endif /* KVX_CORE_HIST_H */
