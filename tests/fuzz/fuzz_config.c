/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target for core/config.c.  The input is an INI file: it is written to a memfd and
 * loaded through its /proc/self/fd path with kvx_config_load().
 *  - A refused file returns -EINVAL with a "path:line: message" error, never anything else.
 *  - A file with a NUL byte is refused (a line would end there silently).
 *  - A file that loads is printed with kvx_config_print(); the printed text must load again
 *    to a byte-identical struct kvx_config (the loader copies padding too), and print to the
 *    very same text.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <unistd.h>

#include "core/config.h"
#include "core/log.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

#define CHECK(cond, ...)                                                                        \
	do {                                                                                    \
		if (!(cond)) {                                                                  \
			fprintf(stderr, "fuzz_config: %s:%d: %s: ", __FILE__, __LINE__, #cond); \
			fprintf(stderr, __VA_ARGS__);                                           \
			fprintf(stderr, "\n");                                                  \
			abort();                                                                \
		}                                                                               \
	} while (0)

static int in_fd = -1, out_fd = -1;
static char in_path[64], out_path[64];

static int
memfd(const char *name, char *path, size_t len)
{
	int fd = memfd_create(name, MFD_CLOEXEC);

	CHECK(fd >= 0, "memfd_create: %s", strerror(errno));
	snprintf(path, len, "/proc/self/fd/%d", fd);
	return fd;
}

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	kvx_log_init("fuzz_config", -1); /* silent */
	in_fd = memfd("fuzz_config.in", in_path, sizeof(in_path));
	out_fd = memfd("fuzz_config.out", out_path, sizeof(out_path));
	return 0;
}

static void
put(int fd, const void *buf, size_t len)
{
	CHECK(ftruncate(fd, 0) == 0, "ftruncate: %s", strerror(errno));
	CHECK(pwrite(fd, buf, len, 0) == (ssize_t)len, "pwrite: %s", strerror(errno));
}

/* Print cfg into out_fd; returns the text (malloc'd, NUL-terminated). */
static char *
print(const struct kvx_config *cfg)
{
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);

	CHECK(f != NULL, "open_memstream");
	kvx_config_print(cfg, f);
	CHECK(fclose(f) == 0, "fclose");
	put(out_fd, text, len);
	return text;
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct kvx_config a, b;
	char err[1024], err2[1024];
	char *t1, *t2;
	int rc;

	put(in_fd, data, size);
	memset(&a, 0xa5, sizeof(a));
	err[0] = '\0';
	rc = kvx_config_load(&a, in_path, err, sizeof(err));
	if (rc != 0) {
		struct kvx_config untouched;

		CHECK(rc == -EINVAL, "load rc %d (%s)", rc, err);
		CHECK(strncmp(err, in_path, strlen(in_path)) == 0 && err[strlen(in_path)] == ':',
		      "error without its path: '%s'", err);
		memset(&untouched, 0xa5, sizeof(untouched));
		CHECK(memcmp(&a, &untouched, sizeof(a)) == 0, "a refused file wrote the config");
		return 0;
	}
	CHECK(err[0] == '\0', "success with an error message '%s'", err);
	CHECK(memchr(data, '\0', size) == NULL, "a file with a NUL byte loaded");
	CHECK(a.n_peers >= 0 && a.n_peers <= KVX_MAX_PEERS, "n_peers %d", a.n_peers);
	for (int i = 0; i < a.n_peers; i++)
		CHECK(kvx_config_peer_find(&a, a.peers[i].name) == &a.peers[i], "peer %s",
		      a.peers[i].name);

	t1 = print(&a);
	memset(&b, 0x5a, sizeof(b));
	err2[0] = '\0';
	rc = kvx_config_load(&b, out_path, err2, sizeof(err2));
	CHECK(rc == 0, "the printed config does not load: %s\n--- input:\n%.*s\n--- printed:\n%s",
	      err2, (int)size, (const char *)data, t1);
	CHECK(memcmp(&a, &b, sizeof(a)) == 0,
	      "the printed config loads to another struct\n--- input:\n%.*s\n--- printed:\n%s",
	      (int)size, (const char *)data, t1);
	t2 = print(&b);
	CHECK(strcmp(t1, t2) == 0, "printing is not stable\n--- first:\n%s\n--- second:\n%s", t1,
	      t2);
	free(t1);
	free(t2);
	return 0;
}
