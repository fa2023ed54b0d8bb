/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Command-line number parsing shared by the bench programs (kvx-bench, kvx-ceiling).  Define
 * BENCH_PROG (the program's name, for error messages) before including.  Errors go to stderr.
 */
#ifndef KVX_BENCH_OPT_H
#define KVX_BENCH_OPT_H

#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

/* An unsigned integer in [min, max] (decimal, 0x hex or 0 octal; no sign).  0 or -EINVAL. */
static int
parse_u64(const char *name, const char *s, uint64_t min, uint64_t max, uint64_t *out)
{
	unsigned long long v;
	char *end;

	errno = 0;
	if (!s || !*s || *s == '-' || *s == '+')
		goto bad;
	v = strtoull(s, &end, 0);
	if (errno || *end || v < min || v > max)
		goto bad;
	*out = v;
	return 0;
bad:
	fprintf(stderr,
		BENCH_PROG ": --%s: expected an integer in [%" PRIu64 ", %" PRIu64 "], got '%s'\n",
		name, min, max, s ? s : "");
	return -EINVAL;
}

static int
parse_u32(const char *name, const char *s, uint32_t min, uint32_t max, uint32_t *out)
{
	uint64_t v;
	int r = parse_u64(name, s, min, max, &v);

	if (!r)
		*out = (uint32_t)v;
	return r;
}

#endif /* KVX_BENCH_OPT_H */
