/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The Prometheus endpoint (control/metrics_http.c) on a node of the fake verbs, stepped by hand
 * with the fake clock, against real loopback clients: GET /metrics answers the exposition and
 * closes; other methods, paths and malformed requests get their status; and each bound holds
 * against a hostile client: a request head over KVXD_HTTP_REQ_MAX is refused (431) and closed,
 * a client that never finishes is closed at its deadline and not before, clients over the cap
 * are refused (503) while those within it are kept, and the loop never sleeps past a deadline.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "control/kvxd.h"
#include "control/metrics_http.h"
#include "core/fault.h"

#include "nodes_harness.h"

#define A N[0]
#define STEPS 200

static int
setup(void **state)
{
	static const char *const names[] = {"a"};

	(void)state;
	nodes_setup(1, names);
	A.cfg.has_metrics = true;
	snprintf(A.cfg.metrics_listen.host, sizeof(A.cfg.metrics_listen.host), "127.0.0.1");
	A.cfg.metrics_listen.port = 0; /* any free port */
	assert_int_equal(kvxd_metrics_http_start(&A), 0);
	assert_true(kvxd_metrics_http_port(&A) > 0);
	return 0;
}

static int
teardown(void **state)
{
	(void)state;
	kvxd_metrics_http_stop(&A);
	assert_int_equal(A.http_conns, 0);
	nodes_teardown();
	return 0;
}

static void
step(void)
{
	kvxd_loop_once(&A, 0);
}

static int
client(void)
{
	struct sockaddr_in sa = {.sin_family = AF_INET,
				 .sin_port = htons(kvxd_metrics_http_port(&A)),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);

	assert_true(fd >= 0);
	assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	return fd;
}

static void
send_all(int fd, const char *s, size_t n)
{
	while (n) {
		ssize_t k = send(fd, s, n, MSG_NOSIGNAL);

		assert_true(k > 0);
		s += k;
		n -= (size_t)k;
	}
}

/*
 * Step the loop and read what the client gets until the server closes the connection (EOF or a
 * reset): true, with what came in *got (malloc'd, NUL-terminated).  False if it is still open
 * after STEPS steps.
 */
static bool
read_until_closed(int fd, char **got)
{
	size_t len = 0, cap = 1 << 16;
	char *buf = malloc(cap);

	assert_non_null(buf);
	for (int i = 0; i < STEPS; i++) {
		ssize_t n;

		step();
		while ((n = recv(fd, buf + len, cap - 1 - len, MSG_DONTWAIT)) > 0) {
			len += (size_t)n;
			if (len + 1 == cap) {
				cap *= 2;
				buf = realloc(buf, cap);
				assert_non_null(buf);
			}
		}
		if (n == 0 || (n < 0 && errno == ECONNRESET)) {
			buf[len] = '\0';
			*got = buf;
			return true;
		}
		assert_true(errno == EAGAIN || errno == EWOULDBLOCK);
	}
	buf[len] = '\0';
	*got = buf;
	return false;
}

/* Still open: nothing to read and no EOF after a few steps. */
static bool
still_open(int fd)
{
	char c;

	for (int i = 0; i < 5; i++)
		step();
	return recv(fd, &c, 1, MSG_DONTWAIT) < 0 && (errno == EAGAIN || errno == EWOULDBLOCK);
}

/* One request, its whole answer. */
static char *
exchange(const char *req)
{
	int fd = client();
	char *got;

	send_all(fd, req, strlen(req));
	if (!read_until_closed(fd, &got))
		fail_msg("no complete answer to '%s' (got '%.200s')", req, got);
	close(fd);
	/* the server's side goes at the client's close (it had the whole answer) */
	for (int i = 0; i < 10 && A.http_conns; i++)
		step();
	assert_int_equal(A.http_conns, 0);
	return got;
}

static void
test_get_metrics(void **state)
{
	char *got, *body;
	unsigned long clen;
	const char *cl;

	(void)state;
	A.ctr.frames_rx = 1234;
	got = exchange("GET /metrics HTTP/1.1\r\nHost: localhost\r\nAccept: */*\r\n\r\n");
	assert_true(strncmp(got, "HTTP/1.0 200 OK\r\n", 17) == 0);
	assert_non_null(
		strstr(got, "\r\nContent-Type: text/plain; version=0.0.4; charset=utf-8\r\n"));
	assert_non_null(strstr(got, "\r\nConnection: close\r\n"));
	body = strstr(got, "\r\n\r\n");
	assert_non_null(body);
	body += 4;
	cl = strstr(got, "Content-Length: ");
	assert_non_null(cl);
	clen = strtoul(cl + 16, NULL, 10);
	assert_int_equal(clen, strlen(body));
	assert_non_null(strstr(body, "# HELP kvx_frames_rx_total "));
	assert_non_null(strstr(body, "kvx_frames_rx_total{node=\"a\"} 1234\n"));
	assert_non_null(strstr(body, "# TYPE kvx_room_latency_seconds histogram\n"));
	assert_int_equal(A.ctr.http_200, 1);
	assert_int_equal(A.http_conns, 0);
	free(got);

	/* a query string, an HTTP/1.0 request with bare newlines */
	got = exchange("GET /metrics?x=1 HTTP/1.0\n\n");
	assert_true(strncmp(got, "HTTP/1.0 200 OK\r\n", 17) == 0);
	free(got);
	/* HEAD: the headers only */
	got = exchange("HEAD /metrics HTTP/1.1\r\n\r\n");
	assert_true(strncmp(got, "HTTP/1.0 200 OK\r\n", 17) == 0);
	assert_string_equal(strstr(got, "\r\n\r\n"), "\r\n\r\n");
	free(got);
	assert_int_equal(A.ctr.http_200, 3);
}

/* One rendering serves every scrape for 100 ms: a client scraping in a loop cannot make the
 * control core render without pause.  After that, a scrape sees the counters as they are. */
static void
test_renderings_are_shared_for_100_ms(void **state)
{
	char *got;

	(void)state;
	A.ctr.frames_rx = 1;
	got = exchange("GET /metrics HTTP/1.1\r\n\r\n");
	assert_non_null(strstr(got, "kvx_frames_rx_total{node=\"a\"} 1\n"));
	free(got);
	A.ctr.frames_rx = 2;
	for (int i = 0; i < 20; i++) {
		got = exchange("GET /metrics HTTP/1.1\r\n\r\n");
		assert_non_null(strstr(got, "kvx_frames_rx_total{node=\"a\"} 1\n"));
		free(got);
	}
	assert_int_equal(A.ctr.http_renders, 1);
	assert_int_equal(A.ctr.http_200, 21);
	fake_ms += 99;
	got = exchange("GET /metrics HTTP/1.1\r\n\r\n");
	assert_non_null(strstr(got, "kvx_frames_rx_total{node=\"a\"} 1\n"));
	free(got);
	fake_ms += 1;
	got = exchange("GET /metrics HTTP/1.1\r\n\r\n");
	assert_non_null(strstr(got, "kvx_frames_rx_total{node=\"a\"} 2\n"));
	assert_non_null(strstr(got, "kvx_metrics_http_renders_total{node=\"a\"} 2\n"));
	free(got);
}

static void
test_other_requests(void **state)
{
	static const struct {
		const char *req, *status;
	} cases[] = {
		{"GET / HTTP/1.1\r\n\r\n", "HTTP/1.0 404 Not Found\r\n"},
		{"GET /metricsx HTTP/1.1\r\n\r\n", "HTTP/1.0 404 Not Found\r\n"},
		{"POST /metrics HTTP/1.1\r\nContent-Length: 0\r\n\r\n",
		 "HTTP/1.0 405 Method Not Allowed\r\n"},
		{"GET /metrics\r\n\r\n", "HTTP/1.0 400 Bad Request\r\n"},
		{"\r\n\r\n", "HTTP/1.0 400 Bad Request\r\n"},
		{"GET /metrics SPDY/3\r\n\r\n", "HTTP/1.0 400 Bad Request\r\n"},
	};

	(void)state;
	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		char *got = exchange(cases[i].req);

		if (strncmp(got, cases[i].status, strlen(cases[i].status)) != 0)
			fail_msg("'%s' answered '%.60s', want '%s'", cases[i].req, got,
				 cases[i].status);
		free(got);
	}
	assert_int_equal(A.ctr.http_404, 2);
	assert_int_equal(A.ctr.http_405, 1);
	assert_int_equal(A.ctr.http_400, 3);
	assert_int_equal(A.ctr.http_200, 0);
}

/* A request head longer than KVXD_HTTP_REQ_MAX is refused and the connection closed, however
 * much more the client would send; one just within the bound is served. */
static void
test_request_too_large_is_closed(void **state)
{
	size_t big = 4 * KVXD_HTTP_REQ_MAX;
	char *req = malloc(big + 1), *got;
	int fd;

	(void)state;
	assert_non_null(req);
	/* within the bound: long headers, then the blank line */
	snprintf(req, big, "GET /metrics HTTP/1.1\r\nX-Pad: ");
	memset(req + strlen(req), 'a', KVXD_HTTP_REQ_MAX - 64 - strlen(req));
	memcpy(req + KVXD_HTTP_REQ_MAX - 64, "\r\n\r\n", 5);
	assert_true(strlen(req) < KVXD_HTTP_REQ_MAX);
	got = exchange(req);
	assert_true(strncmp(got, "HTTP/1.0 200 OK\r\n", 17) == 0);
	free(got);

	/* over it, and never ending: four times the bound without a blank line */
	snprintf(req, big, "GET /metrics HTTP/1.1\r\nX-Pad: ");
	memset(req + strlen(req), 'a', big - strlen(req));
	req[big] = '\0';
	fd = client();
	send_all(fd, req, big);
	if (!read_until_closed(fd, &got))
		fail_msg("a %zu-byte request head was not refused (bound %d)", big,
			 KVXD_HTTP_REQ_MAX);
	/* the answer may be lost to the reset that closing over unread bytes sends */
	assert_true(got[0] == '\0' || strncmp(got, "HTTP/1.0 431 ", 13) == 0);
	assert_int_equal(A.ctr.http_431, 1);
	assert_int_equal(A.http_conns, 0);
	free(got);
	close(fd);
	free(req);
}

/* A client that never finishes its request (slow loris) is closed at its deadline, not before;
 * the loop's sleep ends at that deadline. */
static void
test_slow_client_closed_at_its_deadline(void **state)
{
	uint64_t t0 = fake_ms;
	char *got;
	int fd = client();

	(void)state;
	send_all(fd, "GET /met", 8);
	assert_true(still_open(fd));
	assert_int_equal(A.http_conns, 1);
	assert_true(kvxd_metrics_http_next_due(&A) == t0 + KVXD_HTTP_DEADLINE_MS);
	fake_ms = t0 + KVXD_HTTP_DEADLINE_MS - 1;
	send_all(fd, "r", 1); /* a byte now and then does not extend it */
	assert_true(still_open(fd));
	fake_ms = t0 + KVXD_HTTP_DEADLINE_MS;
	if (!read_until_closed(fd, &got))
		fail_msg("a client that never finished its request is still open at its deadline");
	assert_string_equal(got, "");
	assert_int_equal(A.ctr.http_timeouts, 1);
	assert_int_equal(A.http_conns, 0);
	assert_true(kvxd_metrics_http_next_due(&A) == KVXD_TIMER_NEVER);
	free(got);
	close(fd);
}

/* The endpoint's listening socket, found among this process's descriptors by its port. */
static int
listener_fd(void)
{
	for (int fd = 3; fd < 4096; fd++) {
		struct sockaddr_in sa;
		socklen_t len = sizeof(sa);
		int acc = 0;
		socklen_t alen = sizeof(acc);

		if (getsockname(fd, (struct sockaddr *)&sa, &len) == 0 &&
		    sa.sin_family == AF_INET && ntohs(sa.sin_port) == kvxd_metrics_http_port(&A) &&
		    getsockopt(fd, SOL_SOCKET, SO_ACCEPTCONN, &acc, &alen) == 0 && acc)
			return fd;
	}
	fail_msg("no listening socket on port %u", kvxd_metrics_http_port(&A));
	return -1;
}

/* A client whose receive buffer is as small as the kernel allows, served by a socket whose send
 * buffer is too (set on the listener, which accepted sockets inherit): an answer does not fit,
 * so its connection stays open with its request in (writing) for as long as it does not
 * read. */
static int
client_small_window(void)
{
	struct sockaddr_in sa = {.sin_family = AF_INET,
				 .sin_port = htons(kvxd_metrics_http_port(&A)),
				 .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0), one = 1;

	assert_true(fd >= 0);
	assert_int_equal(setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &one, sizeof(one)), 0);
	assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	return fd;
}

/* The client fd (connected) asks and is answered 200; it closes. */
static void
served(int fd)
{
	char *got;

	send_all(fd, "GET /metrics HTTP/1.1\r\n\r\n", 25);
	assert_true(read_until_closed(fd, &got));
	assert_true(strncmp(got, "HTTP/1.0 200 OK\r\n", 17) == 0);
	free(got);
	close(fd);
}

/* The cap's worth of clients that ask and never read (their answers do not fit): fds[]. */
static void
fill_with_unread(int fds[KVXD_HTTP_MAX_CONNS])
{
	for (int i = 0; i < KVXD_HTTP_MAX_CONNS; i++) {
		fds[i] = client_small_window();
		send_all(fds[i], "GET /metrics HTTP/1.1\r\n\r\n", 25);
		step();
	}
	for (int i = 0; i < 5; i++)
		step();
	assert_int_equal(A.http_conns, KVXD_HTTP_MAX_CONNS);
}

/* Close the clients fds[]; the server's side of each goes. */
static void
close_all(int fds[KVXD_HTTP_MAX_CONNS])
{
	for (int i = 0; i < KVXD_HTTP_MAX_CONNS; i++)
		close(fds[i]);
	for (int i = 0; i < 10 && A.http_conns; i++)
		step();
	assert_int_equal(A.http_conns, 0);
}

/* Over KVXD_HTTP_MAX_CONNS, connections that only hold a socket open (no request yet) make room
 * for a new client, oldest first: a scraper that sends its request at once is served while a
 * host keeps the cap's worth of silent connections open (before: it was answered 503 for as
 * long as the flood went on; mutant metrics_http_no_eviction).  When every connection has its
 * request in, the new client is answered 503 and closed at once. */
static void
test_clients_over_the_cap(void **state)
{
	int fds[KVXD_HTTP_MAX_CONNS], extra;
	char *got;

	(void)state;
	for (int i = 0; i < KVXD_HTTP_MAX_CONNS; i++) {
		fds[i] = client();
		step();
	}
	for (int i = 0; i < 5 && A.http_conns < KVXD_HTTP_MAX_CONNS; i++)
		step();
	assert_int_equal(A.http_conns, KVXD_HTTP_MAX_CONNS);
	/* a scraper: the oldest connection without its request goes, and it is served.  That one
	 * sends a byte right after the scraper connects, so the loop's batch holds its event
	 * after the listener's: the eviction must leave it to be freed after the batch (under
	 * ASan, a use after free before) */
	extra = client();
	send_all(fds[0], "G", 1);
	served(extra);
	assert_int_equal(A.ctr.http_evicted, 1);
	assert_int_equal(A.ctr.http_refused_busy, 0);
	assert_false(still_open(fds[0]));
	for (int i = 1; i < KVXD_HTTP_MAX_CONNS; i++)
		assert_true(still_open(fds[i]));
	close(fds[0]);
	for (int i = 1; i < KVXD_HTTP_MAX_CONNS; i++)
		close(fds[i]);
	for (int i = 0; i < 10 && A.http_conns; i++)
		step();
	assert_int_equal(A.http_conns, 0);

	/* every connection with its request in, its answer unread: the next one is refused */
	{
		int one = 1;

		assert_int_equal(
			setsockopt(listener_fd(), SOL_SOCKET, SO_SNDBUF, &one, sizeof(one)), 0);
	}
	fill_with_unread(fds);
	extra = client();
	if (!read_until_closed(extra, &got))
		fail_msg("client %d over a cap of %d, all writing, was kept",
			 KVXD_HTTP_MAX_CONNS + 1, KVXD_HTTP_MAX_CONNS);
	assert_true(strncmp(got, "HTTP/1.0 503 ", 13) == 0);
	assert_int_equal(A.ctr.http_refused_busy, 1);
	assert_int_equal(A.ctr.http_evicted, 1);
	free(got);
	close(extra);
	close_all(fds);
}

/* Read what the client has until the server's close shows: -ECONNRESET for a reset, 0 for an
 * orderly close (the answer's end), -EAGAIN while it is open. */
static int
close_seen(int fd)
{
	char buf[4096];

	for (;;) {
		ssize_t n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);

		if (n > 0)
			continue;
		if (n == 0)
			return 0;
		return errno == EWOULDBLOCK ? -EAGAIN : -errno;
	}
}

/* A client that asks and never reads: its connection is kept (and counted against the cap)
 * until its deadline, then closed with a reset, so that the kernel keeps nothing of its answer.
 * Before, the socket was closed as soon as the kernel had taken the whole answer and left to
 * the kernel with it: the cap and the deadline never applied, and 4,000 such clients held about
 * 400 MiB of the host's TCP memory (mutant metrics_http_close_sent).  The same for a client that
 * shuts its sending side after its request and never reads: its close is not the end. */
static void
test_unread_answer_not_left_to_the_kernel(void **state)
{
	uint64_t t0 = fake_ms;
	int fd[2];

	(void)state;
	for (int k = 0; k < 2; k++) {
		fd[k] = client_small_window();
		send_all(fd[k], "GET /metrics HTTP/1.1\r\n\r\n", 25);
		if (k == 1)
			assert_int_equal(shutdown(fd[k], SHUT_WR), 0);
	}
	for (int i = 0; i < 20; i++)
		step();
	assert_int_equal(A.ctr.http_200, 2);
	assert_int_equal(A.http_conns, 2);
	assert_int_equal(A.ctr.http_resets, 0);
	/* and the loop is not woken for them meanwhile: the half-closed one's socket, shut both
	 * ways, says EPOLLHUP for good (before: the loop spun on it until the deadline; mutant
	 * metrics_http_hup_spins) */
	{
		struct epoll_event ev[16];
		int n = epoll_wait(A.epfd, ev, 16, 0);

		for (int i = 0; i < n; i++)
			assert_int_not_equal(((struct kvxd_fd *)ev[i].data.ptr)->kind,
					     KVXD_FD_METRICS_CONN);
	}
	fake_ms = t0 + KVXD_HTTP_DEADLINE_MS;
	for (int i = 0; i < 5 && A.http_conns; i++)
		step();
	assert_int_equal(A.http_conns, 0);
	assert_int_equal(A.ctr.http_timeouts, 2);
	assert_int_equal(A.ctr.http_resets, 2);
	for (int k = 0; k < 2; k++) {
		assert_int_equal(close_seen(fd[k]), -ECONNRESET);
		close(fd[k]);
	}
}

/* Over the cap with every connection's request in: one whose answer has waited
 * KVXD_HTTP_GRACE_MS for its client to read it makes room for a new client (with a reset).
 * Before, such clients, opened again every deadline, kept every scraper out (answered 503;
 * mutant metrics_http_no_grace_eviction). */
static void
test_unread_answers_do_not_lock_scrapers_out(void **state)
{
	int fds[KVXD_HTTP_MAX_CONNS], extra;

	(void)state;
	fill_with_unread(fds);
	fake_ms += KVXD_HTTP_GRACE_MS;
	extra = client();
	served(extra);
	assert_int_equal(A.ctr.http_refused_busy, 0);
	assert_int_equal(A.ctr.http_evicted, 1);
	assert_int_equal(A.ctr.http_resets, 1);
	assert_int_equal(close_seen(fds[0]), -ECONNRESET); /* the oldest */
	for (int i = 1; i < KVXD_HTTP_MAX_CONNS; i++)	   /* the others read their answer whole */
		assert_true(close_seen(fds[i]) != -ECONNRESET);
	close_all(fds);
}

/* A client that goes away mid-request costs nothing after: its connection is gone. */
static void
test_client_gone_mid_request(void **state)
{
	int fd = client();

	(void)state;
	send_all(fd, "GET /metrics HTT", 16);
	assert_true(still_open(fd));
	close(fd);
	for (int i = 0; i < 10 && A.http_conns; i++)
		step();
	assert_int_equal(A.http_conns, 0);
}

/* Without [metrics] listen there is no endpoint. */
static void
test_no_endpoint_without_the_key(void **state)
{
	(void)state;
	kvxd_metrics_http_stop(&A);
	A.cfg.has_metrics = false;
	assert_int_equal(kvxd_metrics_http_start(&A), 0);
	assert_null(A.http);
	assert_int_equal(kvxd_metrics_http_port(&A), 0);
	assert_true(kvxd_metrics_http_next_due(&A) == KVXD_TIMER_NEVER);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_renderings_are_shared_for_100_ms, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_get_metrics, setup, teardown),
		cmocka_unit_test_setup_teardown(test_other_requests, setup, teardown),
		cmocka_unit_test_setup_teardown(test_request_too_large_is_closed, setup, teardown),
		cmocka_unit_test_setup_teardown(test_slow_client_closed_at_its_deadline, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_clients_over_the_cap, setup, teardown),
		cmocka_unit_test_setup_teardown(test_client_gone_mid_request, setup, teardown),
		cmocka_unit_test_setup_teardown(test_unread_answer_not_left_to_the_kernel, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_unread_answers_do_not_lock_scrapers_out, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_no_endpoint_without_the_key, setup, teardown),
	};
	int rc;

	rcu_register_thread();
	rc = cmocka_run_group_tests(tests, NULL, NULL);
	rcu_unregister_thread();
	return rc;
}
