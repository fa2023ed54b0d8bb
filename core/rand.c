/* SPDX-License-Identifier: Apache-2.0 */
#include "core/rand.h"

#include <errno.h>
#include <string.h>
#include <sys/random.h>

/* Per thread: kernel CSPRNG output not handed out yet (room tokens and generations are drawn
 * per room: one getrandom per RAND_BUF bytes, not two per room).  Every byte is used once. */
#define RAND_BUF 512
static __thread uint8_t rbuf[RAND_BUF];
static __thread size_t rbuf_left;

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

/* Small draws come from the thread's buffer. */
static void
rand_small(void *out, size_t len)
{
	if (rbuf_left < len) {
		kvx_rand_bytes(rbuf, RAND_BUF);
		rbuf_left = RAND_BUF;
	}
	memcpy(out, rbuf + RAND_BUF - rbuf_left, len);
	memset(rbuf + RAND_BUF - rbuf_left, 0, len); /* handed out: not kept */
	rbuf_left -= len;
}

uint64_t
kvx_rand_u64(void)
{
	uint64_t v;

	rand_small(&v, sizeof(v));
	return v;
}

uint32_t
kvx_rand_u32_nonzero(void)
{
	uint32_t v;

	do
		rand_small(&v, sizeof(v));
	while (v == 0);
	return v;
}
