/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kvxctl: operator commands to the local kvxd over its engine socket.
 *
 *   kvxctl [-s SOCKET] CMD [ARGS...]
 *   kvxctl [-s SOCKET] --json [counters]
 *   kvxctl --version     its version and the version of the libkvx it loaded
 *
 * CMD and ARGS are joined with single spaces and sent as one admin command (kvx_admin); the
 * reply text goes to stdout.  --json prints the counters, gauges and histograms as one JSON
 * object ("counters json"): {"node": NAME, "metrics": {NAME: {"type": T, "samples": [...]}}}.  Exit
 * 0 on success, 1 on an error (the message goes to stderr), 2 on a usage error.
 */
#include "kvx/kvx.h"
#include "kvx/version.h"

#include <errno.h>
#include <getopt.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define DEFAULT_SOCKET "/run/kvx/kvxd.sock"
#define CMD_MAX (60 * 1024) /* an admin command fits one engine message */

static void
usage(FILE *f)
{
	fprintf(f, "usage: kvxctl [-s SOCKET] CMD [ARGS...]\n"
		   "       kvxctl [-s SOCKET] --json [counters]\n"
		   "  -s SOCKET  kvxd engine socket (default " DEFAULT_SOCKET ")\n"
		   "  -j, --json the counters, gauges and histograms as JSON\n"
		   "  -h, --help this help\n"
		   "  --version  kvxctl's version and the loaded libkvx's\n"
		   "commands (kvxd): peers, rooms, counters, fault NAME:N, ...\n");
}

int
main(int argc, char **argv)
{
	const char *sock = DEFAULT_SOCKET;
	static char cmd[CMD_MAX];
	char *out = NULL;
	static const struct option longopts[] = {
		{"json", no_argument, NULL, 'j'},
		{"help", no_argument, NULL, 'h'},
		{"version", no_argument, NULL, 'V'},
		{NULL, 0, NULL, 0},
	};
	struct kvx_conn *c;
	size_t used = 0, n;
	bool json = false;
	int opt, i, r;

	while ((opt = getopt_long(argc, argv, "+s:jh", longopts, NULL)) != -1) {
		switch (opt) {
		case 's':
			sock = optarg;
			break;
		case 'j':
			json = true;
			break;
		case 'h':
			usage(stdout);
			return 0;
		case 'V':
			printf("kvxctl %s (libkvx %s)\n", KVX_VERSION_STRING, kvx_version());
			return 0;
		default:
			usage(stderr);
			return 2;
		}
	}
	if (json) {
		/* the counters are the only JSON there is: "counters" may be named or not */
		if (optind < argc && (strcmp(argv[optind], "counters") != 0 || optind + 1 < argc)) {
			fprintf(stderr, "kvxctl: --json prints the counters; it takes no other "
					"command\n");
			usage(stderr);
			return 2;
		}
		snprintf(cmd, sizeof(cmd), "counters json");
		used = strlen(cmd);
	} else if (optind >= argc) {
		fprintf(stderr, "kvxctl: missing command\n");
		usage(stderr);
		return 2;
	}
	for (i = json ? argc : optind; i < argc; i++) {
		n = strlen(argv[i]);
		if (used + (used ? 1 : 0) + n >= sizeof(cmd)) {
			fprintf(stderr, "kvxctl: command too long (at most %zu bytes)\n",
				sizeof(cmd) - 1);
			return 2;
		}
		if (used)
			cmd[used++] = ' ';
		memcpy(cmd + used, argv[i], n);
		used += n;
	}
	cmd[used] = '\0';
	if (!used) {
		fprintf(stderr, "kvxctl: empty command\n");
		return 2;
	}

	c = kvx_connect(sock);
	if (!c) {
		fprintf(stderr, "kvxctl: %s: %s\n", sock, strerror(errno));
		return 1;
	}
	r = kvx_admin_text(c, cmd, &out); /* the whole reply, however long (paged) */
	kvx_disconnect(c);
	n = out ? strlen(out) : 0;
	if (r < 0) {
		while (n && out[n - 1] == '\n')
			out[--n] = '\0';
		fprintf(stderr, "kvxctl: %s: %s%s%s\n", cmd, strerror(-r), n ? ": " : "",
			n ? out : "");
		free(out);
		return 1;
	}
	if (n) {
		fputs(out, stdout);
		if (out[n - 1] != '\n')
			fputc('\n', stdout);
	}
	free(out);
	if (fflush(stdout) != 0) {
		fprintf(stderr, "kvxctl: writing output: %s\n", strerror(errno));
		return 1;
	}
	return 0;
}
