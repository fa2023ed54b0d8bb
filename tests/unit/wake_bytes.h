/* SPDX-License-Identifier: Apache-2.0 */
/*
 * wake_bytes(fd): the bytes waiting on one end of a ring's wake socket pair (core/shring.h), that
 * is the wake-ups sent to it and not yet taken.  Include after <cmocka.h>.
 */
#ifndef KVX_TESTS_WAKE_BYTES_H
#define KVX_TESTS_WAKE_BYTES_H

#include <sys/ioctl.h>

static int
wake_bytes(int fd)
{
	int n = -1;

	assert_int_equal(ioctl(fd, FIONREAD, &n), 0);
	return n;
}

#endif /* KVX_TESTS_WAKE_BYTES_H */
