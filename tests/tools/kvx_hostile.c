/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kvx-hostile: a scripted hostile (or broken) peer for the VM tests.  It speaks kvx's wire
 * protocol over raw TCP to one kvxd and checks that every attempt is refused: the connection
 * is closed, and never answered with anything that would let it in.
 *
 *   kvx-hostile --to IP:PORT --from IP --name PEER MODE [ARG]
 *
 * Modes (exit 0 when kvxd refused as it should, 1 when it did not, 2 on a usage or local error):
 *   wrong-secret        HELLO, then an AUTH made with a key that is not the cluster's
 *   no-secret           HELLO claiming "auth = none"; and HELLO, then an AUTH with the empty key
 *   hello               HELLO from an address that is not the peer's: closed before any answer
 *   replay SECRET_FILE  a valid HELLO and the AUTH it earned, replayed on a new connection
 *   idle N SECONDS      N connections that never say anything, held SECONDS
 *   malformed           for every frame type and a few framing errors, one connection each
 *                       (before and after HELLO): closed, nothing else
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "core/auth.h"
#include "core/wire.h"

static struct sockaddr_in to, from;
static const char *peer_name;
static int failures;

static void
check(int ok, const char *what)
{
	printf("%s %s\n", ok ? "ok  " : "FAIL", what);
	if (!ok)
		failures++;
}

static int
dial(void)
{
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	if (fd < 0 || bind(fd, (struct sockaddr *)&from, sizeof(from)) < 0 ||
	    connect(fd, (struct sockaddr *)&to, sizeof(to)) < 0) {
		perror("kvx-hostile: connect");
		exit(2);
	}
	return fd;
}

static void
send_raw(int fd, const void *buf, size_t len)
{
	if (send(fd, buf, len, MSG_NOSIGNAL) != (ssize_t)len && errno != EPIPE &&
	    errno != ECONNRESET) {
		perror("kvx-hostile: send");
		exit(2);
	}
}

static void
send_msg(int fd, const struct kvx_wire_msg *m)
{
	uint8_t buf[KVX_WIRE_FRAME_MAX];
	char err[160];
	int n = kvx_wire_encode(m, buf, sizeof(buf), err, sizeof(err));

	if (n < 0) {
		fprintf(stderr, "kvx-hostile: encode: %s\n", err);
		exit(2);
	}
	send_raw(fd, buf, (size_t)n);
}

/* The next frame (1), the connection closed (0), or nothing within 5 s (-1). */
static int
recv_msg(int fd, struct kvx_wire_msg *m)
{
	static uint8_t buf[KVX_WIRE_FRAME_MAX];
	size_t len = 0;
	char err[160];

	for (;;) {
		struct pollfd p = {.fd = fd, .events = POLLIN};
		ssize_t n;
		int k;

		if (poll(&p, 1, 5000) <= 0)
			return -1;
		n = recv(fd, buf + len, sizeof(buf) - len, 0);
		if (n <= 0)
			return 0;
		len += (size_t)n;
		k = kvx_wire_decode(buf, len, m, err, sizeof(err));
		if (k > 0)
			return 1;
		if (k < 0) {
			fprintf(stderr, "kvx-hostile: kvxd sent a bad frame: %s\n", err);
			return 1;
		}
	}
}

static struct kvx_wire_msg
hello(uint64_t nonce, uint32_t features)
{
	struct kvx_wire_msg m = {.type = KVX_WIRE_HELLO};

	m.u.hello.version = KVX_WIRE_VERSION;
	m.u.hello.features = features;
	snprintf(m.u.hello.name, sizeof(m.u.hello.name), "%s", peer_name);
	m.u.hello.nonce = nonce;
	m.u.hello.session = 1;
	return m;
}

static struct kvx_wire_msg
auth(const struct kvx_auth_keys *k, const struct kvx_wire_msg *h, const struct kvx_wire_msg *ack)
{
	struct kvx_wire_msg m = {.type = KVX_WIRE_AUTH};
	struct kvx_auth_transcript t = {.version = KVX_WIRE_VERSION,
					.features_i = h->u.hello.features,
					.features_a = ack->u.hello.features,
					.name_i = h->u.hello.name,
					.name_a = ack->u.hello.name,
					.nonce_i = h->u.hello.nonce,
					.nonce_a = ack->u.hello.nonce,
					.session = h->u.hello.session};

	kvx_auth_mac(k, KVX_AUTH_INITIATOR, &t, m.u.auth_mac);
	return m;
}

/* HELLO, HELLO_ACK, then AUTH under keys k: must be closed without another frame. */
static void
try_auth(const struct kvx_auth_keys *k, uint32_t features, const char *what)
{
	struct kvx_wire_msg h = hello(0x5eed0000 + (uint64_t)rand(), features), ack, m;
	int fd = dial(), rc;

	send_msg(fd, &h);
	rc = recv_msg(fd, &ack);
	if (rc != 1 || ack.type != KVX_WIRE_HELLO_ACK) {
		check(rc == 0, what); /* refused at HELLO already */
		close(fd);
		return;
	}
	m = auth(k, &h, &ack);
	send_msg(fd, &m);
	rc = recv_msg(fd, &m);
	check(rc == 0, what);
	close(fd);
}

static void
mode_wrong_secret(void)
{
	struct kvx_auth_keys k = {.n = 1, .len = {32}};

	memset(k.key[0], 0x42, 32);
	try_auth(&k, 0, "wrong secret: AUTH refused, connection closed");
}

static void
mode_no_secret(void)
{
	struct kvx_auth_keys none = {.none = true};
	struct kvx_wire_msg h = hello(7, KVX_AUTH_FEAT_NONE), m;
	int fd = dial();

	send_msg(fd, &h);
	check(recv_msg(fd, &m) == 0, "HELLO claiming auth = none: closed before any answer");
	close(fd);
	try_auth(&none, 0, "no secret (the empty key): AUTH refused");
}

static void
mode_hello(void)
{
	struct kvx_wire_msg h = hello(9, 0), m;
	int fd = dial();

	send_msg(fd, &h);
	check(recv_msg(fd, &m) == 0, "HELLO from this address: closed before any answer");
	close(fd);
}

static void
mode_replay(const char *secret)
{
	struct kvx_config cfg = {.auth = KVX_AUTH_HMAC_SHA256};
	struct kvx_auth_keys k;
	struct kvx_wire_msg h = hello(0xfeedface, 0), ack1, ack2, a1, m;
	char err[256];
	int fd, rc;

	snprintf(cfg.secret_file, sizeof(cfg.secret_file), "%s", secret);
	if (kvx_auth_keys_load(&k, &cfg, err, sizeof(err))) {
		fprintf(stderr, "kvx-hostile: %s\n", err);
		exit(2);
	}
	/* the capture: a HELLO and the AUTH that its HELLO_ACK earned (never sent: sending it
	 * would be a real, authenticated session) */
	fd = dial();
	send_msg(fd, &h);
	check(recv_msg(fd, &ack1) == 1 && ack1.type == KVX_WIRE_HELLO_ACK, "HELLO answered");
	a1 = auth(&k, &h, &ack1);
	close(fd);
	/* the replay */
	fd = dial();
	send_msg(fd, &h);
	rc = recv_msg(fd, &ack2);
	check(rc == 1 && ack2.u.hello.nonce != ack1.u.hello.nonce, "replayed HELLO: a fresh nonce");
	send_msg(fd, &a1);
	check(recv_msg(fd, &m) == 0, "replayed AUTH refused, connection closed");
	close(fd);
	kvx_auth_keys_clear(&k);
}

static void
mode_idle(int n, int secs)
{
	int *fds = calloc((size_t)n, sizeof(int)), closed = 0;

	for (int i = 0; i < n; i++)
		fds[i] = dial();
	printf("holding %d idle connections for %d s\n", n, secs);
	fflush(stdout);
	sleep((unsigned)secs);
	for (int i = 0; i < n; i++) {
		char c;
		struct pollfd p = {.fd = fds[i], .events = POLLIN};

		if (poll(&p, 1, 0) == 1 && recv(fds[i], &c, 1, MSG_DONTWAIT) == 0)
			closed++;
		close(fds[i]);
	}
	printf("%d of %d closed by kvxd (deadline or cap)\n", closed, n);
	check(closed == n, "every idle connection closed by kvxd");
	free(fds);
}

/* One malformed or out-of-sequence frame per connection, with or without a HELLO first. */
static void
mode_malformed(void)
{
	static const char *const junk_names[] = {"bad magic",	     "version 1",
						 "oversized length", "unknown type 0",
						 "unknown type 99",  "truncated HELLO"};

	for (int with_hello = 0; with_hello < 2; with_hello++) {
		for (uint16_t t = 1; t <= KVX_WIRE_TYPE_MAX + 6; t++) {
			uint8_t buf[64];
			struct kvx_wire_msg h = hello(11, 0), m;
			char what[128];
			int fd = dial();

			if (with_hello) {
				send_msg(fd, &h);
				if (recv_msg(fd, &m) != 1) {
					check(0, "HELLO answered");
					close(fd);
					continue;
				}
			}
			memset(buf, 0, sizeof(buf));
			buf[0] = 'K', buf[1] = 'V', buf[2] = 'X', buf[3] = '1';
			buf[4] = KVX_WIRE_VERSION;
			if (t <= KVX_WIRE_TYPE_MAX) {
				/* a frame of type t whose payload is 20 bytes of 0xff: wrong for
				 * every type (and out of sequence for most) */
				buf[6] = (uint8_t)t;
				buf[8] = 20;
				memset(buf + 12, 0xff, 20);
				snprintf(what, sizeof(what), "%s: malformed %s: closed",
					 with_hello ? "after HELLO" : "first frame",
					 kvx_wire_type_str(t));
				send_raw(fd, buf, 32);
			} else {
				int j = t - KVX_WIRE_TYPE_MAX - 1;

				buf[6] = KVX_WIRE_HELLO;
				buf[8] = 4;
				if (j == 0)
					buf[0] = 'X';
				if (j == 1)
					buf[4] = 1;
				if (j == 2)
					buf[10] = 0x10; /* 1 MiB */
				if (j == 3)
					buf[6] = 0;
				if (j == 4)
					buf[6] = 99;
				snprintf(what, sizeof(what), "%s: %s: closed",
					 with_hello ? "after HELLO" : "first frame", junk_names[j]);
				send_raw(fd, buf, 16);
			}
			check(recv_msg(fd, &m) == 0, what);
			close(fd);
		}
	}
}

static int
parse_ip(const char *s, struct sockaddr_in *sa, int port)
{
	sa->sin_family = AF_INET;
	sa->sin_port = htons((uint16_t)port);
	return inet_pton(AF_INET, s, &sa->sin_addr) == 1 ? 0 : -1;
}

int
main(int argc, char **argv)
{
	const char *mode = NULL, *arg = NULL, *arg2 = NULL;
	char host[64];

	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--to") == 0 && i + 1 < argc) {
			const char *c = strrchr(argv[++i], ':');

			if (!c || (size_t)(c - argv[i]) >= sizeof(host))
				return 2;
			memcpy(host, argv[i], (size_t)(c - argv[i]));
			host[c - argv[i]] = '\0';
			if (parse_ip(host, &to, atoi(c + 1)))
				return 2;
		} else if (strcmp(argv[i], "--from") == 0 && i + 1 < argc) {
			if (parse_ip(argv[++i], &from, 0))
				return 2;
		} else if (strcmp(argv[i], "--name") == 0 && i + 1 < argc) {
			peer_name = argv[++i];
		} else if (!mode) {
			mode = argv[i];
		} else if (!arg) {
			arg = argv[i];
		} else {
			arg2 = argv[i];
		}
	}
	if (!mode || !peer_name || !to.sin_port) {
		fprintf(stderr,
			"usage: kvx-hostile --to IP:PORT --from IP --name PEER MODE [ARG]\n");
		return 2;
	}
	srand((unsigned)time(NULL) ^ (unsigned)getpid());
	if (strcmp(mode, "wrong-secret") == 0)
		mode_wrong_secret();
	else if (strcmp(mode, "no-secret") == 0)
		mode_no_secret();
	else if (strcmp(mode, "hello") == 0)
		mode_hello();
	else if (strcmp(mode, "replay") == 0 && arg)
		mode_replay(arg);
	else if (strcmp(mode, "idle") == 0 && arg && arg2)
		mode_idle(atoi(arg), atoi(arg2));
	else if (strcmp(mode, "malformed") == 0)
		mode_malformed();
	else {
		fprintf(stderr, "kvx-hostile: unknown mode %s\n", mode);
		return 2;
	}
	printf("%s: %d failure(s)\n", mode, failures);
	return failures ? 1 : 0;
}
