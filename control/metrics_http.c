/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The Prometheus endpoint (control/metrics_http.h).  Layer 7 of control/ (control/README.md):
 * it serves what control/metrics.c renders.  Thread: the control core.
 *
 * Why a responder of our own and not libmicrohttpd: the endpoint answers one GET and closes, so
 * the HTTP it needs is a request line and a blank line; everything here runs on kvxd's own
 * epoll set and timer rules (the loop's clock, which tests replace), so a test can step it and
 * check each bound deterministically; a client over the cap is refused at once with a 503
 * (libmicrohttpd in its external-epoll mode stops accepting at its limit, leaving clients in
 * the kernel's backlog, and times connections out in whole seconds on its own clock); and no
 * library joins the daemon, its sanitizer builds or its fuzz targets.
 *
 * A connection's life: accepted (or refused over the cap), reads its request head into a buffer
 * that grows to KVXD_HTTP_REQ_MAX and no further, gets its whole answer rendered at once, writes
 * it as the socket takes it, shuts its sending side, and closes once the client has all of it
 * (the client closed, or nothing of the answer is left in the kernel) or at its deadline, with a
 * reset if the kernel still holds part of the answer.  Closed at once, a socket whose client
 * does not read would be left to the kernel (orphaned) with the answer, outside every bound
 * here: thousands of such clients held hundreds of MiB of the host's TCP memory.  Connections
 * are kept oldest first; all have the same deadline length, so the first is always the next to
 * expire.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/sockios.h>
#include <sys/epoll.h>
#include <sys/ioctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <urcu/list.h>

#include "control/metrics.h"
#include "control/metrics_http.h"
#include "core/log.h"

#define RX_START 512 /* a request head's first buffer; it doubles up to KVXD_HTTP_REQ_MAX */
#define PAUSE_MS 100 /* out of descriptors: the listener rests this long */
#define CONTENT_TYPE "text/plain; version=0.0.4; charset=utf-8"
/* One rendering serves every scrape for this long: a client scraping in a loop, over as many
 * connections as the cap allows, costs the control core at most 10 renderings a second, and a
 * Prometheus server (one scrape every few seconds) always sees a fresh one. */
#define CACHE_MS 100

struct conn {
	struct cds_list_head link; /* h->conns, oldest first */
	int fd;
	struct kvxd_fd ev;
	uint64_t deadline_ms;
	char *rx; /* the request head so far */
	size_t rx_len, rx_cap;
	char *tx; /* the whole answer, once the request is complete */
	size_t tx_len, tx_off;
	uint64_t asked_ms; /* when its request was complete */
	bool sent;	   /* all of the answer is the kernel's and our side is shut */
	bool dead;	   /* closed for a newer one while the loop's batch may still name it */
};

struct kvxd_metrics_http {
	int fd;
	uint16_t port;
	struct kvxd_fd ev;
	struct cds_list_head conns;
	/* evicted: freed after the loop's batch (kvxd_metrics_http_reap) */
	struct cds_list_head dead;
	uint64_t paused_until;	       /* 0: accepting */
	struct kvxd_metrics_buf cache; /* the last rendering (cache.p NULL: none) */
	uint64_t cache_at;
};

static const char resp_503[] = "HTTP/1.0 503 Service Unavailable\r\nContent-Type: text/plain\r\n"
			       "Content-Length: 25\r\nConnection: close\r\n\r\n"
			       "too many metrics clients\n";

/* ---- connections --------------------------------------------------------------------------- */

/* Bytes of the answer the kernel still holds (sent and not acknowledged, or not sent yet). */
static int
unacked(const struct conn *c)
{
	int n = 0;

	return ioctl(c->fd, SIOCOUTQ, &n) == 0 ? n : 1;
}

/* Make the next close a reset when the kernel still holds part of the answer: the kernel then
 * keeps nothing of the socket.  Returns whether it will. */
static bool
reset_if_unread(struct kvxd *d, struct conn *c)
{
	struct linger lg = {.l_onoff = 1, .l_linger = 0};

	if (!c->tx || (c->tx_off == c->tx_len && unacked(c) == 0))
		return false;
	if (setsockopt(c->fd, SOL_SOCKET, SO_LINGER, &lg, sizeof(lg)))
		return false;
	d->ctr.http_resets++;
	return true;
}

static void
conn_close(struct kvxd *d, struct conn *c)
{
	cds_list_del(&c->link);
	close(c->fd); /* leaves the epoll set with it */
	free(c->rx);
	free(c->tx);
	free(c);
	d->http_conns--;
}

/* The answer: status line, headers, and the body unless the request was HEAD. */
static int
answer(struct kvxd *d, struct conn *c, int code, const char *reason, const char *type,
       const char *body, size_t body_len, bool head)
{
	char hdr[256];
	int n;

	n = snprintf(hdr, sizeof(hdr),
		     "HTTP/1.0 %d %s\r\nContent-Type: %s\r\nContent-Length: %zu\r\n%s"
		     "Connection: close\r\n\r\n",
		     code, reason, type, body_len, code == 405 ? "Allow: GET, HEAD\r\n" : "");
	c->tx_len = (size_t)n + (head ? 0 : body_len);
	c->tx = malloc(c->tx_len);
	if (!c->tx)
		return -ENOMEM;
	memcpy(c->tx, hdr, (size_t)n);
	if (!head)
		memcpy(c->tx + n, body, body_len);
	c->tx_off = 0;
	switch (code) {
	case 200:
		d->ctr.http_200++;
		break;
	case 400:
		d->ctr.http_400++;
		break;
	case 404:
		d->ctr.http_404++;
		break;
	case 405:
		d->ctr.http_405++;
		break;
	case 431:
		d->ctr.http_431++;
		break;
	default:
		d->ctr.http_500++;
		break;
	}
	return 0;
}

static int
error_answer(struct kvxd *d, struct conn *c, int code, const char *reason, bool head)
{
	char body[96];
	int n = snprintf(body, sizeof(body), "%d %s\n", code, reason);

	return answer(d, c, code, reason, "text/plain", body, (size_t)n, head);
}

/* The last rendering may serve a scrape at now (the clock never seen going back). */
static bool
fresh(const struct kvxd_metrics_http *h, uint64_t now)
{
	return h->cache.p && now >= h->cache_at && now < h->cache_at + CACHE_MS;
}

/* A complete request head is in c->rx (NUL-terminated): its answer into c->tx. */
static int
request(struct kvxd *d, struct conn *c)
{
	char *line = c->rx, *sp1, *sp2, *end;
	struct kvxd_metrics_buf b = {.grow = true, .max = KVXD_HTTP_BODY_MAX};
	uint64_t now = kvxd_now_ms();
	size_t plen;
	bool head;

	end = line + strcspn(line, "\r\n");
	*end = '\0';
	sp1 = strchr(line, ' ');
	sp2 = sp1 ? strchr(sp1 + 1, ' ') : NULL;
	if (!sp1 || !sp2 || strncmp(sp2 + 1, "HTTP/", 5) != 0 || sp1 == line)
		return error_answer(d, c, 400, "Bad Request", false);
	*sp1 = *sp2 = '\0';
	head = strcmp(line, "HEAD") == 0;
	if (!head && strcmp(line, "GET") != 0)
		return error_answer(d, c, 405, "Method Not Allowed", false);
	plen = strcspn(sp1 + 1, "?");
	if (plen != strlen("/metrics") || strncmp(sp1 + 1, "/metrics", plen) != 0)
		return error_answer(d, c, 404, "Not Found", head);
	if (!fresh(d->http, now)) {
		kvxd_metrics_buf_fini(&d->http->cache);
		d->ctr.http_renders++;
		if (kvxd_metrics_render(d, KVXD_METRICS_TEXT, KVXD_METRICS_HELP, &b)) {
			KVX_WARN("metrics: the exposition is over %u bytes: answered 500",
				 KVXD_HTTP_BODY_MAX);
			kvxd_metrics_buf_fini(&b);
			return error_answer(d, c, 500, "Internal Server Error", head);
		}
		d->http->cache = b;
		d->http->cache_at = now;
	}
	return answer(d, c, 200, "OK", CONTENT_TYPE, d->http->cache.p, d->http->cache.len, head);
}

/* All of the answer is the kernel's: close once the client has it, now if it has; else shut our
 * side (the client reads to the end) and wait for the client's close or the deadline. */
static void
conn_sent(struct kvxd *d, struct conn *c)
{
	if (unacked(c) == 0 || shutdown(c->fd, SHUT_WR)) {
		reset_if_unread(d, c);
		conn_close(d, c);
		return;
	}
	kvxd_epoll_mod(d, c->fd, &c->ev, EPOLLIN | EPOLLRDHUP);
	c->sent = true;
}

/* A sent connection's socket is readable: the client closed (or reset), or sent more, which is
 * read and dropped.  Its close ends the connection once the kernel holds nothing of the answer;
 * with part of it still there (the client shut its sending side and reads on, or never reads)
 * the loop stops watching the socket and the connection goes at the deadline. */
static void
conn_drain(struct kvxd *d, struct conn *c, uint32_t events)
{
	char buf[512];
	ssize_t n = 0;

	for (int i = 0; i < 8; i++) { /* bounded: what a client sends costs it as much */
		n = recv(c->fd, buf, sizeof(buf), MSG_DONTWAIT);
		if (n <= 0)
			break;
	}
	if (n > 0 || (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR) &&
		      !(events & (EPOLLERR | EPOLLHUP))))
		return; /* more later */
	if (n == 0 && unacked(c) > 0) {
		/* the deadline decides.  Out of the epoll set: with both directions shut, its
		 * EPOLLHUP cannot be masked and would wake the loop on every pass (the socket
		 * leaves the set anyway when it is closed) */
		epoll_ctl(d->epfd, EPOLL_CTL_DEL, c->fd, NULL);
		return;
	}
	reset_if_unread(d, c);
	conn_close(d, c);
}

/* Write what the socket takes; once all of it went, conn_sent.  Never waits. */
static void
conn_write(struct kvxd *d, struct conn *c)
{
	while (c->tx_off < c->tx_len) {
		ssize_t n = send(c->fd, c->tx + c->tx_off, c->tx_len - c->tx_off,
				 MSG_DONTWAIT | MSG_NOSIGNAL);

		if (n > 0) {
			c->tx_off += (size_t)n;
			continue;
		}
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) {
			kvxd_epoll_mod(d, c->fd, &c->ev, EPOLLOUT);
			return;
		}
		break; /* the client went away */
	}
	if (c->tx_off == c->tx_len) {
		conn_sent(d, c);
		return;
	}
	reset_if_unread(d, c);
	conn_close(d, c);
}

/* The request head is complete when a blank line ends it. */
static bool
head_complete(const struct conn *c)
{
	return memmem(c->rx, c->rx_len, "\r\n\r\n", 4) || memmem(c->rx, c->rx_len, "\n\n", 2);
}

/* Read what the socket has, up to the bound; answer once the head is complete.  Never waits. */
static void
conn_read(struct kvxd *d, struct conn *c)
{
	for (;;) {
		ssize_t n;

		if (c->rx_len + 1 >= c->rx_cap) { /* full (one byte kept for the NUL) */
			char *p;

			if (c->rx_cap >= KVXD_HTTP_REQ_MAX) {
				/* the bound: a head this long is refused, never buffered */
				if (error_answer(d, c, 431, "Request Header Fields Too Large",
						 false))
					break;
				conn_write(d, c);
				return;
			}
			p = realloc(c->rx, c->rx_cap * 2);
			if (!p)
				break;
			c->rx = p;
			c->rx_cap *= 2;
		}
		n = recv(c->fd, c->rx + c->rx_len, c->rx_cap - 1 - c->rx_len, MSG_DONTWAIT);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return; /* more later, before the deadline */
		if (n <= 0)
			break; /* closed before its request was complete, or broken */
		c->rx_len += (size_t)n;
		c->rx[c->rx_len] = '\0';
		if (head_complete(c)) {
			c->asked_ms = kvxd_now_ms();
			if (request(d, c))
				break;
			conn_write(d, c);
			return;
		}
	}
	conn_close(d, c);
}

static void
on_conn(struct kvxd *d, struct conn *c, uint32_t events)
{
	if (c->dead)
		return; /* evicted earlier in this batch */
	if (c->sent) {
		conn_drain(d, c, events);
		return;
	}
	if (c->tx) {
		if (events & (EPOLLOUT | EPOLLERR | EPOLLHUP))
			conn_write(d, c);
		return;
	}
	if (events & (EPOLLIN | EPOLLERR | EPOLLHUP))
		conn_read(d, c);
}

/* Over the cap: close the oldest connection that has not sent its whole request yet, to make
 * room for a new one, else the oldest whose answer has waited KVXD_HTTP_GRACE_MS for its client
 * to read it (with a reset: the kernel keeps nothing of it).  Connections that only hold a
 * socket open, or ask and never read (one host can open the cap's worth every deadline), then
 * cannot lock a scraper out: its request comes at once and it reads its answer in far less
 * than the grace, and to close it first they must open the cap's worth in that time.  Returns
 * whether one went. */
static bool
evict_idle(struct kvxd *d, struct kvxd_metrics_http *h)
{
	uint64_t now = kvxd_now_ms();
	struct conn *c, *victim = NULL;

	cds_list_for_each_entry(c, &h->conns, link)
	{
		if (!c->tx) { /* oldest first */
			victim = c;
			break;
		}
		if (!victim && now >= c->asked_ms + KVXD_HTTP_GRACE_MS)
			victim = c;
	}
	if (!victim)
		return false;
	reset_if_unread(d, victim);
	/* an event for it may still wait in this iteration's batch (the listener's is being
	 * dispatched): its memory goes after the batch */
	d->ctr.http_evicted++;
	cds_list_del(&victim->link);
	close(victim->fd); /* leaves the epoll set with it */
	victim->fd = -1;
	victim->dead = true;
	cds_list_add(&victim->link, &h->dead);
	d->http_conns--;
	return true;
}

static void
on_accept(struct kvxd *d, struct kvxd_metrics_http *h)
{
	for (int i = 0; i < KVXD_HTTP_ACCEPT_BURST; i++) {
		int fd = accept4(h->fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);
		struct conn *c;

		if (fd < 0) {
			if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS ||
			    errno == ENOMEM) {
				/* level-triggered: rest the listener instead of spinning */
				KVX_WARN("metrics: accept: %s: not accepting for %d ms",
					 strerror(errno), PAUSE_MS);
				h->paused_until = kvxd_now_ms() + PAUSE_MS;
				kvxd_epoll_mod(d, h->fd, &h->ev, 0);
			}
			return; /* EAGAIN: none left; anything else: that client's problem */
		}
		if (d->http_conns >= KVXD_HTTP_MAX_CONNS && !evict_idle(d, h)) {
			/* over the cap, and every connection has its request in: refused at once
			 * (best effort: the socket takes this much) */
			d->ctr.http_refused_busy++;
			(void)send(fd, resp_503, sizeof(resp_503) - 1, MSG_DONTWAIT | MSG_NOSIGNAL);
			close(fd);
			continue;
		}
		c = calloc(1, sizeof(*c));
		if (c)
			c->rx = malloc(RX_START);
		if (!c || !c->rx) {
			if (c)
				free(c);
			close(fd);
			continue;
		}
		c->fd = fd;
		c->rx_cap = RX_START;
		c->deadline_ms = kvxd_now_ms() + KVXD_HTTP_DEADLINE_MS;
		c->ev = (struct kvxd_fd){.kind = KVXD_FD_METRICS_CONN, .ptr = c};
		if (kvxd_epoll_add(d, fd, &c->ev, EPOLLIN)) {
			free(c->rx);
			free(c);
			close(fd);
			continue;
		}
		cds_list_add_tail(&c->link, &h->conns);
		d->http_conns++;
	}
}

/* ---- the loop's calls ---------------------------------------------------------------------- */

void
kvxd_metrics_http_on_event(struct kvxd *d, struct kvxd_fd *f, uint32_t events)
{
	if (!d->http)
		return;
	if (f->kind == KVXD_FD_METRICS_LISTEN)
		on_accept(d, d->http);
	else
		on_conn(d, f->ptr, events);
}

void
kvxd_metrics_http_tick(struct kvxd *d, uint64_t now)
{
	struct kvxd_metrics_http *h = d->http;

	if (!h)
		return;
	while (!cds_list_empty(&h->conns)) {
		struct conn *c = cds_list_first_entry(&h->conns, struct conn, link);

		if (c->deadline_ms > now)
			break;
		d->ctr.http_timeouts++;
		reset_if_unread(d, c);
		conn_close(d, c);
	}
	if (h->paused_until && now >= h->paused_until) {
		h->paused_until = 0;
		kvxd_epoll_mod(d, h->fd, &h->ev, EPOLLIN);
	}
}

uint64_t
kvxd_metrics_http_next_due(const struct kvxd *d)
{
	struct kvxd_metrics_http *h = d->http;
	uint64_t next = KVXD_TIMER_NEVER;

	if (!h)
		return next;
	if (!cds_list_empty(&h->conns))
		next = cds_list_first_entry(&h->conns, struct conn, link)->deadline_ms;
	if (h->paused_until && h->paused_until < next)
		next = h->paused_until;
	return next;
}

/* ---- start and stop ------------------------------------------------------------------------ */

int
kvxd_metrics_http_start(struct kvxd *d)
{
	struct sockaddr_in sa = {.sin_family = AF_INET,
				 .sin_port = htons(d->cfg.metrics_listen.port)};
	socklen_t salen = sizeof(sa);
	struct kvxd_metrics_http *h;
	int one = 1, rc;

	if (!d->cfg.has_metrics)
		return 0;
	if (inet_pton(AF_INET, d->cfg.metrics_listen.host, &sa.sin_addr) != 1)
		return -EINVAL;
	h = calloc(1, sizeof(*h));
	if (!h)
		return -ENOMEM;
	CDS_INIT_LIST_HEAD(&h->conns);
	CDS_INIT_LIST_HEAD(&h->dead);
	h->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (h->fd < 0) {
		rc = -errno;
		goto err_free;
	}
	setsockopt(h->fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(h->fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ||
	    listen(h->fd, KVXD_HTTP_MAX_CONNS) < 0 ||
	    getsockname(h->fd, (struct sockaddr *)&sa, &salen) < 0) {
		rc = -errno;
		goto err_close;
	}
	h->port = ntohs(sa.sin_port);
	h->ev = (struct kvxd_fd){.kind = KVXD_FD_METRICS_LISTEN, .ptr = h};
	rc = kvxd_epoll_add(d, h->fd, &h->ev, EPOLLIN);
	if (rc)
		goto err_close;
	d->http = h;
	KVX_INFO("metrics: GET /metrics on %s:%u", d->cfg.metrics_listen.host, h->port);
	return 0;

err_close:
	KVX_ERR("metrics: listen %s:%u: %s", d->cfg.metrics_listen.host, d->cfg.metrics_listen.port,
		strerror(-rc));
	close(h->fd);
err_free:
	free(h);
	return rc;
}

void
kvxd_metrics_http_reap(struct kvxd *d)
{
	struct conn *c, *tmp;

	if (!d->http)
		return;
	cds_list_for_each_entry_safe(c, tmp, &d->http->dead, link)
	{
		cds_list_del(&c->link);
		free(c->rx);
		free(c->tx);
		free(c);
	}
}

void
kvxd_metrics_http_stop(struct kvxd *d)
{
	struct kvxd_metrics_http *h = d->http;

	if (!h)
		return;
	kvxd_metrics_http_reap(d);
	while (!cds_list_empty(&h->conns))
		conn_close(d, cds_list_first_entry(&h->conns, struct conn, link));
	close(h->fd);
	kvxd_metrics_buf_fini(&h->cache);
	free(h);
	d->http = NULL;
}

uint16_t
kvxd_metrics_http_port(const struct kvxd *d)
{
	return d->http ? d->http->port : 0;
}
