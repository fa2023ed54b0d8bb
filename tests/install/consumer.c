/* SPDX-License-Identifier: Apache-2.0 */
/*
 * consumer: an engine built against an installed libkvx only (`pkg-config --cflags --libs kvx`),
 * never against the source tree.  It shows that the headers compile on their own, that the
 * library links and loads, that the loaded library is the version the headers describe, and
 * that a call reports a missing kvxd cleanly.
 *
 *   consumer SOCKET    SOCKET must not exist: kvx_connect() must fail with ENOENT
 *
 * Prints "consumer: libkvx VERSION, headers VERSION" and the connect error; exits 0 when all of
 * that holds, 1 otherwise.
 */
#include <kvx/kvx.h>
#include <kvx/version.h>

#include <errno.h>
#include <stdio.h>
#include <string.h>

int
main(int argc, char **argv)
{
	struct kvx_conn *c;

	if (argc != 2) {
		fprintf(stderr, "usage: consumer SOCKET\n");
		return 2;
	}
	printf("consumer: libkvx %s, headers %s\n", kvx_version(), KVX_VERSION_STRING);
	if (strcmp(kvx_version(), KVX_VERSION_STRING) != 0) {
		fprintf(stderr, "consumer: the loaded libkvx is not the headers' version\n");
		return 1;
	}
	if (strcmp(kvx_state_str(KVX_STATE_SUCCESS), "SUCCESS") != 0) {
		fprintf(stderr, "consumer: kvx_state_str(KVX_STATE_SUCCESS) = %s\n",
			kvx_state_str(KVX_STATE_SUCCESS));
		return 1;
	}
	errno = 0;
	c = kvx_connect(argv[1]);
	if (c) {
		fprintf(stderr, "consumer: kvx_connect(%s) succeeded\n", argv[1]);
		kvx_disconnect(c);
		return 1;
	}
	printf("consumer: kvx_connect(%s): %s\n", argv[1], strerror(errno));
	return errno == ENOENT ? 0 : 1;
}
