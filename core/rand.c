/* SPDX-License-Identifier: Apache-2.0 */
#include "core/rand.h"

#include <errno.h>
#include <sys/random.h>

void
kvx_rand_bytes(void *buf, size_t len)
{
	size_t got = 0;

	while (got < len) {
		ssize_t n = getrandom((char *)buf + got, len - got, 0);

		if (n > 0)
			got += (size_t)n;
		/* n < 0: EINTR, or EAGAIN/ENOSYS which do not happen with flags 0 on Linux >= 3.17:
		 * try again */
	}
}

uint64_t
kvx_rand_u64(void)
{
	uint64_t v;

	kvx_rand_bytes(&v, sizeof(v));
	return v;
}

uint32_t
kvx_rand_u32_nonzero(void)
{
	uint32_t v;

	do
		kvx_rand_bytes(&v, sizeof(v));
	while (v == 0);
	return v;
}
