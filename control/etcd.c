/* SPDX-License-Identifier: Apache-2.0 */
/* Membership through etcd's v3 JSON gateway (control/etcd.h). */
#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#include <json-c/json.h>
#include <openssl/evp.h>

#include "control/etcd.h"
#include "control/members.h"
#include "control/peer_io.h"
#include "core/log.h"

#define HEAD_MAX 16384	    /* a response's status line and headers */
#define BODY_MAX (1u << 20) /* a response, or one watch message */
/* The prefix is read RANGE_PAGE entries at a time, each page at most RANGE_BODY_MAX: more than
 * one entry of etcd's largest (its requests are at most 1.5 MiB by default, 2 MiB in base64).
 * A page too large is read again with an eighth of its entries, down to one, and the next pages
 * grow back twice at a time: however many keys, and however large, a key writer puts under
 * the prefix, the read goes through (before, one read of everything had to fit BODY_MAX: one
 * large key stopped membership on every node). */
#define RANGE_PAGE 64
#define RANGE_BODY_MAX (4u << 20)
/* a read of more pages than this is given up (and tried again): a gateway that says "more"
 * for ever, with pages that barely move on, never keeps the client reading */
#define RANGE_PAGES_MAX (1 << 16)
#define CALL_MS 3000	      /* a call's deadline */
#define RETRY_MS 1000	      /* after a failure */
#define REASSERT_MAX_MS 60000 /* our own key written again at most this far apart, at the worst */
/* a watch that says nothing for this long is set up again: a proxy or a broken path may drop it
 * without a word.  kvxd asks for progress notifications, which etcd sends on a quiet watch every
 * 10 minutes by default (--experimental-watch-progress-notify-interval), so a healthy watch is
 * never this silent; TCP keepalives on its socket find a peer host that went away sooner */
#define WATCH_QUIET_MS (11 * 60 * 1000)
#define WATCH_KEEPIDLE_S 10 /* TCP keepalive on the watch: probes after 10 s of silence, */
#define WATCH_KEEPINTVL_S 2 /* every 2 s, */
#define WATCH_KEEPCNT 3	    /* 3 unanswered end it */

enum call { C_NONE = 0, C_GRANT, C_PUT, C_RANGE, C_KEEPALIVE, C_WATCH };

static const char *const call_name[] = {"", "lease grant", "put", "range", "keepalive", "watch"};

/* chunked transfer coding: where the parser is */
enum chunk_state { CH_SIZE, CH_DATA, CH_DATA_END, CH_TRAILER };

/* One HTTP/1.1 exchange on its own connection (Connection: close). */
struct http {
	int fd; /* -1: none */
	struct kvxd_fd ev;
	enum call call;
	bool connected;
	char *tx;
	size_t tx_len, tx_off;
	char head[HEAD_MAX];
	size_t head_len;
	bool head_done;
	int status;
	bool chunked;
	int64_t clen; /* Content-Length, -1: none */
	enum chunk_state cs;
	uint64_t cleft;
	char cline[64];
	size_t cline_len;
	bool done; /* the whole body is in */
	char *body;
	size_t body_len, body_cap;
	uint64_t body_total; /* bytes of body received (a Content-Length body) */
	uint64_t deadline;   /* 0: none */
};

enum stage { S_IDLE = 0, S_GRANT, S_PUT, S_RANGE, S_RUN };

static const char *const stage_name[] = {"connecting", "granting a lease", "registering",
					 "reading the prefix", "registered"};

struct kvxd_etcd {
	/* the lease's keepalives have a connection of their own: a slow read or registration
	 * never holds them back past the lease */
	struct http call, watch, ka;
	enum stage st;
	char lease[24]; /* the lease ID, decimal, as etcd writes it */
	uint64_t retry_at, keepalive_at;
	uint64_t lease_ok_at; /* the lease was last known alive then (registered, or renewed) */
	/* the lease as etcd granted it (at most lease_s): keepalives every third of it */
	uint64_t ttl_ms;
	uint64_t watch_at;     /* a watch that ended is set up again from then on (after a read) */
	uint64_t resync_at;    /* a full read then: an entry was refused for want of room */
	uint64_t watch_log_ms; /* the last "watch ended" line (at most one per 10 s) */
	bool reregister;       /* our own key was deleted: register again */
	bool own_clash;	       /* our name listed with another value: said once */
	/* our own key holds what we did not write (a forged entry, or an older one of ours):
	 * written again, RETRY_MS after the last time, twice that after each time it did not
	 * stay (up to REASSERT_MAX_MS: two nodes of one name and different secrets each write
	 * their own), RETRY_MS again once it did */
	bool reassert;
	uint64_t reassert_at, reassert_gap;
	uint64_t epoch; /* when we registered (ns since the epoch): in our entry, signed */
	int64_t revision;
	/* the full read, a page at a time: the next page's first key (base64, malloc'd; NULL: the
	 * prefix), the revision every page reads (the first page's; 0: not read yet) and the
	 * page's size (RANGE_PAGE, less after a page too large) */
	char *page_key;
	int64_t page_rev;
	int page_limit;
	uint32_t pages; /* pages of this read so far */
	/* a key is the prefix (at most 100 bytes) and a name (at most 63): base64 of 163 bytes */
	char key_b64[256], begin_b64[256], end_b64[256], val_b64[520];
	char val[384]; /* what we register, as text */
	char last_error[160];
	bool failing; /* the last attempt failed: log only the first failure of a run */
};

/* ---- base64 (keys and values) -------------------------------------------------------------- */

static int
b64_encode(char *out, size_t cap, const char *in)
{
	size_t n = strlen(in);

	if (4 * ((n + 2) / 3) + 1 > cap)
		return -1;
	EVP_EncodeBlock((unsigned char *)out, (const unsigned char *)in, (int)n);
	return 0;
}

/* Decode into out (NUL-terminated, no NUL inside).  0, or -1 when it is not base64 of text that
 * fits. */
static int
b64_decode(char *out, size_t cap, const char *in)
{
	size_t n = strlen(in), pad = 0;
	int len;

	if (n == 0) {
		out[0] = '\0';
		return 0;
	}
	if (n % 4 || n / 4 * 3 >= cap)
		return -1;
	pad = (in[n - 1] == '=') + (n > 1 && in[n - 2] == '=');
	len = EVP_DecodeBlock((unsigned char *)out, (const unsigned char *)in, (int)n);
	if (len < 0 || (size_t)len < pad)
		return -1;
	len -= (int)pad;
	out[len] = '\0';
	return strlen(out) == (size_t)len ? 0 : -1;
}

/* ---- HTTP ---------------------------------------------------------------------------------- */

static void
http_close(struct kvxd *d, struct http *h)
{
	if (h->fd >= 0) {
		epoll_ctl(d->epfd, EPOLL_CTL_DEL, h->fd, NULL);
		close(h->fd);
	}
	free(h->tx);
	free(h->body);
	*h = (struct http){.fd = -1};
}

static int
http_start(struct kvxd *d, struct http *h, enum call call, const char *path, const char *json,
	   uint64_t now)
{
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(d->cfg.etcd.port)};
	size_t blen = strlen(json);
	int n;

	http_close(d, h);
	h->call = call;
	h->clen = -1;
	h->deadline = now + CALL_MS; /* the watch: until its head arrives */
	h->ev = (struct kvxd_fd){.kind = KVXD_FD_ETCD, .ptr = h};
	h->tx = malloc(blen + 256);
	if (!h->tx)
		return -ENOMEM;
	n = snprintf(h->tx, blen + 256,
		     "POST %s HTTP/1.1\r\nHost: %s:%u\r\nContent-Type: application/json\r\n"
		     "Content-Length: %zu\r\nConnection: close\r\n\r\n%s",
		     path, d->cfg.etcd.host, d->cfg.etcd.port, blen, json);
	if (n < 0 || (size_t)n >= blen + 256)
		return -EINVAL;
	h->tx_len = (size_t)n;
	if (inet_pton(AF_INET, d->cfg.etcd.host, &sa.sin_addr) != 1)
		return -EINVAL;
	h->fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (h->fd < 0)
		return -errno;
	if (connect(h->fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 && errno != EINPROGRESS) {
		n = -errno;
		close(h->fd);
		h->fd = -1;
		return n;
	}
	n = kvxd_epoll_add(d, h->fd, &h->ev, EPOLLOUT | EPOLLIN);
	if (n) {
		close(h->fd);
		h->fd = -1;
	}
	return n;
}

/* The largest body the call takes. */
static uint64_t
body_max(const struct http *h)
{
	return h->call == C_RANGE ? RANGE_BODY_MAX : BODY_MAX;
}

static int
body_put(struct http *h, const char *p, size_t n)
{
	if (h->body_len + n > body_max(h))
		return -EMSGSIZE;
	if (h->body_len + n + 1 > h->body_cap) {
		size_t cap = h->body_cap ? h->body_cap : 4096;
		char *nb;

		while (cap < h->body_len + n + 1)
			cap *= 2;
		nb = realloc(h->body, cap);
		if (!nb)
			return -ENOMEM;
		h->body = nb;
		h->body_cap = cap;
	}
	memcpy(h->body + h->body_len, p, n);
	h->body_len += n;
	h->body[h->body_len] = '\0';
	return 0;
}

/* The chunked transfer coding, byte by byte where it must be. */
static int
chunked_feed(struct http *h, const char *p, size_t n)
{
	while (n > 0 && !h->done) {
		if (h->cs == CH_DATA) {
			size_t take = h->cleft < n ? (size_t)h->cleft : n;
			int rc = body_put(h, p, take);

			if (rc)
				return rc;
			p += take;
			n -= take;
			h->cleft -= take;
			if (h->cleft == 0)
				h->cs = CH_DATA_END;
			continue;
		}
		/* a line: the chunk size, the CRLF after the data, or a trailer */
		if (*p != '\n') {
			if (h->cline_len + 1 >= sizeof(h->cline))
				return -EPROTO;
			h->cline[h->cline_len++] = *p;
		} else {
			char *end;
			uint64_t size;

			if (h->cline_len && h->cline[h->cline_len - 1] == '\r')
				h->cline_len--;
			h->cline[h->cline_len] = '\0';
			if (h->cs == CH_SIZE) {
				errno = 0;
				size = strtoull(h->cline, &end, 16);
				if (end == h->cline || errno || (*end && *end != ';') ||
				    !isxdigit((unsigned char)h->cline[0]))
					return -EPROTO;
				/* too large: a range's page is read with fewer entries */
				if (size > body_max(h))
					return -EMSGSIZE;
				h->cleft = size;
				h->cs = size ? CH_DATA : CH_TRAILER;
			} else if (h->cs == CH_DATA_END) {
				if (h->cline_len)
					return -EPROTO;
				h->cs = CH_SIZE;
			} else if (h->cline_len == 0) { /* CH_TRAILER: the empty line ends it */
				h->done = true;
			}
			h->cline_len = 0;
		}
		p++;
		n--;
	}
	return 0;
}

static int
head_parse(struct http *h)
{
	char *line, *save = NULL;

	h->head[h->head_len] = '\0';
	line = strtok_r(h->head, "\r\n", &save);
	if (!line || sscanf(line, "HTTP/1.%*d %d", &h->status) != 1)
		return -EPROTO;
	while ((line = strtok_r(NULL, "\r\n", &save))) {
		if (strncasecmp(line, "Transfer-Encoding:", 18) == 0)
			h->chunked = strcasestr(line + 18, "chunked") != NULL;
		else if (strncasecmp(line, "Content-Length:", 15) == 0) {
			char *end;
			unsigned long long v = strtoull(line + 15, &end, 10);

			if (v > body_max(h))
				return -EMSGSIZE;
			h->clen = (int64_t)v;
		}
	}
	if (h->clen == 0 && !h->chunked)
		h->done = true;
	return 0;
}

/* Bytes from the socket.  0, or -errno (the exchange is broken). */
static int
http_feed(struct http *h, const char *p, size_t n)
{
	int rc;

	if (!h->head_done) {
		size_t i;

		for (i = 0; i < n && !h->head_done; i++) {
			if (h->head_len + 1 >= HEAD_MAX)
				return -EMSGSIZE;
			h->head[h->head_len++] = p[i];
			if (h->head_len >= 4 &&
			    memcmp(h->head + h->head_len - 4, "\r\n\r\n", 4) == 0)
				h->head_done = true;
		}
		if (!h->head_done)
			return 0;
		rc = head_parse(h);
		if (rc)
			return rc;
		p += i;
		n -= i;
	}
	if (h->chunked)
		return chunked_feed(h, p, n);
	if (h->clen >= 0 && h->body_total + n > (uint64_t)h->clen)
		n = (size_t)((uint64_t)h->clen - h->body_total); /* nothing after the body */
	rc = body_put(h, p, n);
	if (rc)
		return rc;
	h->body_total += n;
	if (h->clen >= 0 && h->body_total == (uint64_t)h->clen)
		h->done = true;
	return 0;
}

/* Drive one exchange.  1: the response is complete (or, for the watch, bytes arrived); 0: in
 * progress; -errno: broken (closed before the end counts). */
static int
http_io(struct kvxd *d, struct http *h, uint32_t events)
{
	char buf[16384];
	bool got = false;

	if (!h->connected && (events & (EPOLLOUT | EPOLLERR | EPOLLHUP))) {
		int err = 0;
		socklen_t len = sizeof(err);

		struct sockaddr_in peer;
		socklen_t plen = sizeof(peer);

		if (getsockopt(h->fd, SOL_SOCKET, SO_ERROR, &err, &len) < 0)
			err = errno;
		if (err)
			return -err;
		/* an event of this batch for the connection this one replaced: still connecting */
		if (getpeername(h->fd, (struct sockaddr *)&peer, &plen) < 0)
			return errno == ENOTCONN ? 0 : -errno;
		h->connected = true;
	}
	if (!h->connected)
		return 0;
	while (h->tx_off < h->tx_len) {
		ssize_t w = send(h->fd, h->tx + h->tx_off, h->tx_len - h->tx_off, MSG_NOSIGNAL);

		if (w < 0) {
			if (errno == EAGAIN || errno == EINTR)
				return 0; /* EPOLLOUT again */
			return -errno;
		}
		h->tx_off += (size_t)w;
	}
	if (h->tx) {
		free(h->tx);
		h->tx = NULL;
		kvxd_epoll_mod(d, h->fd, &h->ev, EPOLLIN);
	}
	for (;;) {
		ssize_t r = recv(h->fd, buf, sizeof(buf), 0);
		int rc;

		if (r < 0) {
			if (errno == EAGAIN || errno == EINTR)
				break;
			return -errno;
		}
		if (r == 0) { /* closed: the end of a body that had no length, else too early */
			if (h->head_done && !h->chunked && h->clen < 0)
				h->done = true;
			if (h->done)
				return 1;
			return -ECONNRESET;
		}
		rc = http_feed(h, buf, (size_t)r);
		if (rc)
			return rc;
		got = true;
		if (h->done)
			return 1;
		if (h->call == C_WATCH)
			break; /* its messages are taken before more is read (level-triggered) */
	}
	return got && h->call == C_WATCH ? 1 : 0;
}

/* ---- the membership client ----------------------------------------------------------------- */

static const char *
jstr(struct json_object *o, const char *key)
{
	struct json_object *v;

	return o && json_object_object_get_ex(o, key, &v) &&
			       json_object_is_type(v, json_type_string)
		       ? json_object_get_string(v)
		       : NULL;
}

static struct json_object *
jobj(struct json_object *o, const char *key, json_type t)
{
	struct json_object *v;

	return o && json_object_object_get_ex(o, key, &v) && json_object_is_type(v, t) ? v : NULL;
}

/* etcd writes 64-bit integers as decimal strings */
static bool
jint(struct json_object *o, const char *key, int64_t *out)
{
	const char *s = jstr(o, key);
	char *end;

	if (!s || !*s)
		return false;
	errno = 0;
	*out = strtoll(s, &end, 10);
	return !*end && !errno;
}

static void fail(struct kvxd *d, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

static void
fail(struct kvxd *d, const char *fmt, ...)
{
	struct kvxd_etcd *e = d->etcd;
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(e->last_error, sizeof(e->last_error), fmt, ap);
	va_end(ap);
	d->ctr.etcd_errors++;
	if (!e->failing)
		KVX_WARN("membership: etcd %s:%u: %s (%s); retrying every %d ms, the peers found "
			 "stay",
			 d->cfg.etcd.host, d->cfg.etcd.port, e->last_error, stage_name[e->st],
			 RETRY_MS);
	e->failing = true;
	http_close(d, &e->call);
	http_close(d, &e->watch);
	http_close(d, &e->ka);
	e->st = S_IDLE;
	e->retry_at = kvxd_now_ms() + RETRY_MS;
}

/* The watch's socket probes a silent peer (a host gone, a path cut) instead of waiting on it. */
static void
watch_keepalive(int fd)
{
	int one = 1, idle = WATCH_KEEPIDLE_S, intvl = WATCH_KEEPINTVL_S, cnt = WATCH_KEEPCNT;

	setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &one, sizeof(one));
	setsockopt(fd, IPPROTO_TCP, TCP_KEEPIDLE, &idle, sizeof(idle));
	setsockopt(fd, IPPROTO_TCP, TCP_KEEPINTVL, &intvl, sizeof(intvl));
	setsockopt(fd, IPPROTO_TCP, TCP_KEEPCNT, &cnt, sizeof(cnt));
}

/* The next page of the full read. */
static void
range_start(struct kvxd *d, uint64_t now)
{
	struct kvxd_etcd *e = d->etcd;
	const char *from = e->page_key ? e->page_key : e->begin_b64;
	size_t cap = strlen(from) + strlen(e->end_b64) + 160;
	char *json = malloc(cap);
	int rc = -ENOMEM;

	e->st = S_RANGE;
	if (json) {
		int n = snprintf(json, cap,
				 "{\"key\": \"%s\", \"range_end\": \"%s\", \"limit\": %d", from,
				 e->end_b64, e->page_limit);

		if (e->page_rev) /* every page sees the same revision: the watch starts after it */
			snprintf(json + n, cap - (size_t)n, ", \"revision\": \"%" PRId64 "\"}",
				 e->page_rev);
		else
			snprintf(json + n, cap - (size_t)n, "}");
		rc = http_start(d, &e->call, C_RANGE, "/v3/kv/range", json, now);
		free(json);
	}
	if (rc)
		fail(d, "%s: %s", call_name[C_RANGE], strerror(-rc));
}

/* The next page starts right after key (base64): the key with a NUL byte after it.  0, or
 * -EPROTO when it is not base64, or not after the page's own first key (a gateway that answers
 * the same page again would read for ever). */
static int
page_after(struct kvxd_etcd *e, const char *key)
{
	size_t n = key ? strlen(key) : 0, pad, len, cur_len = 0;
	const char *cur = e->page_key ? e->page_key : e->begin_b64;
	unsigned char *raw, *now_raw;
	char *next;
	int k, c;

	if (!n || n % 4)
		return -EPROTO;
	pad = (key[n - 1] == '=') + (n > 1 && key[n - 2] == '=');
	raw = malloc(n / 4 * 3 + 1);
	now_raw = malloc(strlen(cur) / 4 * 3 + 1);
	next = malloc(n / 3 * 4 + 12);
	if (!raw || !now_raw || !next) {
		free(raw);
		free(now_raw);
		free(next);
		return -ENOMEM;
	}
	k = EVP_DecodeBlock(raw, (const unsigned char *)key, (int)n);
	c = EVP_DecodeBlock(now_raw, (const unsigned char *)cur, (int)strlen(cur));
	if (k < 0 || (size_t)k < pad || c < 0) {
		free(raw);
		free(now_raw);
		free(next);
		return -EPROTO;
	}
	len = (size_t)k - pad;
	cur_len = (size_t)c - (size_t)((cur[0] && cur[strlen(cur) - 1] == '=') +
				       (strlen(cur) > 1 && cur[strlen(cur) - 2] == '='));
	c = memcmp(raw, now_raw, len < cur_len ? len : cur_len);
	free(now_raw);
	if (c < 0 || (c == 0 && len < cur_len)) {
		free(raw);
		free(next);
		return -EPROTO; /* before where the page started */
	}
	raw[len] = '\0'; /* the key, then a NUL: the first key after it */
	EVP_EncodeBlock((unsigned char *)next, raw, (int)len + 1);
	free(raw);
	free(e->page_key);
	e->page_key = next;
	return 0;
}

static void
start(struct kvxd *d, enum call call, uint64_t now)
{
	struct kvxd_etcd *e = d->etcd;
	struct http *h = call == C_WATCH ? &e->watch : call == C_KEEPALIVE ? &e->ka : &e->call;
	char json[1024];
	const char *path = "";
	int rc;

	switch (call) {
	case C_GRANT:
		path = "/v3/lease/grant";
		snprintf(json, sizeof(json), "{\"TTL\": %u}", d->cfg.lease_s);
		e->st = S_GRANT;
		break;
	case C_PUT:
		path = "/v3/kv/put";
		snprintf(json, sizeof(json),
			 "{\"key\": \"%s\", \"value\": \"%s\", \"lease\": \"%s\"}", e->key_b64,
			 e->val_b64, e->lease);
		e->st = S_PUT;
		break;
	case C_RANGE: /* a full read, from its first page */
		free(e->page_key);
		e->page_key = NULL;
		e->page_rev = 0;
		e->page_limit = RANGE_PAGE;
		e->pages = 0;
		range_start(d, now);
		return;
	case C_KEEPALIVE:
		path = "/v3/lease/keepalive";
		snprintf(json, sizeof(json), "{\"ID\": \"%s\"}", e->lease);
		break;
	case C_WATCH:
		path = "/v3/watch";
		snprintf(json, sizeof(json),
			 "{\"create_request\": {\"key\": \"%s\", \"range_end\": \"%s\", "
			 "\"start_revision\": \"%" PRId64 "\", \"progress_notify\": true}}",
			 e->begin_b64, e->end_b64, e->revision + 1);
		break;
	case C_NONE:
		return;
	}
	rc = http_start(d, h, call, path, json, now);
	if (rc)
		fail(d, "%s: %s", call_name[call], strerror(-rc));
	else if (call == C_KEEPALIVE && h->deadline > now + e->ttl_ms / 3)
		h->deadline = now + e->ttl_ms / 3; /* given up in time for more tries */
	else if (call == C_WATCH)
		watch_keepalive(h->fd);
}

/* A key under our prefix: the node's name, or NULL. */
static const char *
key_name(const struct kvxd *d, const char *key, char *buf, size_t cap)
{
	size_t plen = strlen(d->cfg.etcd_prefix);

	if (!key || b64_decode(buf, cap, key) || strncmp(buf, d->cfg.etcd_prefix, plen) != 0)
		return NULL;
	return buf + plen;
}

/* A node's value: "IPv4:port", then its QPs' GIDs in IPv6 notation, one per rail (rail 0's
 * first), each after a blank.  0 or -1. */
static int
value_parse(char *v, struct kvx_config_addr *addr, uint8_t (*gids)[16], int *ngid)
{
	char *sp = strchr(v, ' ');

	*ngid = 0;
	while (sp) {
		char *gid = sp + 1;

		*sp = '\0';
		sp = strchr(gid, ' ');
		if (sp)
			*sp = '\0';
		if (*ngid == KVX_MAX_RAILS || inet_pton(AF_INET6, gid, gids[*ngid]) != 1)
			return -1;
		(*ngid)++;
		if (sp)
			*sp = ' '; /* the next one starts after it */
	}
	if (kvx_config_addr_parse(v, addr) || strcmp(addr->host, "0.0.0.0") == 0)
		return -1;
	return 0;
}

/* A node's entry: "BODY t=EPOCH sig=MAC", BODY its value (value_parse), EPOCH when it registered
 * (ns, decimal), MAC the entry's MAC (core/auth.h) over the key and "BODY t=EPOCH", in hex.
 * On success v is cut to BODY.  0; -EBADMSG: not of that form; -EACCES: a MAC no key of ours
 * makes (forged, or of another cluster). */
static int
entry_check(struct kvxd *d, const char *key, char *v, uint64_t *epoch)
{
	uint8_t mac[KVX_AUTH_MAC_LEN];
	char *sig = strrchr(v, ' '), *t, *end;
	bool ok;

	if (!sig || strncmp(sig, " sig=", 5) != 0 || strlen(sig + 5) != 2 * KVX_AUTH_MAC_LEN)
		return -EBADMSG;
	for (int i = 0; i < KVX_AUTH_MAC_LEN; i++) {
		unsigned int x;

		if (!isxdigit((unsigned char)sig[5 + 2 * i]) ||
		    !isxdigit((unsigned char)sig[6 + 2 * i]) ||
		    sscanf(sig + 5 + 2 * i, "%2x", &x) != 1)
			return -EBADMSG;
		mac[i] = (uint8_t)x;
	}
	*sig = '\0';
	ok = kvx_auth_entry_verify(&d->auth, key, v, mac);
	t = strrchr(v, ' ');
	if (!ok) {
		*sig = ' ';
		return -EACCES;
	}
	if (!t || strncmp(t, " t=", 3) != 0 || !isdigit((unsigned char)t[3]))
		return -EBADMSG;
	errno = 0;
	*epoch = strtoull(t + 3, &end, 10);
	if (*end || errno)
		return -EBADMSG;
	*t = '\0';
	return 0;
}

/* Our own key holds entry v (text): ours, or another node's under our name (a newer one that our
 * cluster's key signed: said once), or what we did not write, forged or older (written again:
 * a key writer cannot list us elsewhere for longer than it takes to notice). */
static void
own_entry(struct kvxd *d, const char *key, char *v)
{
	struct kvxd_etcd *e = d->etcd;
	struct kvx_config_addr addr;
	uint8_t gids[KVX_MAX_RAILS][16];
	uint64_t epoch = 0;
	int ngid, rc;
	bool clash = strcmp(v, e->val) != 0;

	if (!clash) {
		e->own_clash = false;
		if (kvxd_now_ms() >= e->reassert_at + e->reassert_gap)
			e->reassert_gap = 0; /* what we wrote last stayed a whole gap */
		return;
	}
	rc = entry_check(d, key, v, &epoch);
	if (rc || epoch <= e->epoch) {
		d->ctr.members_refused++;
		if (!e->reassert && kvx_log_allow(&d->members_refused_log, kvxd_now_ms(), 10,
						  "etcd entries refused"))
			KVX_WARN("membership: our key %s holds %s: writing ours again", key,
				 rc == -EACCES ? "an entry our key did not sign"
				 : rc	       ? "a bad entry"
					       : "an older entry of ours");
		e->reassert = true;
		return;
	}
	if (!e->own_clash) {
		d->ctr.members_refused++;
		KVX_WARN("membership: %s is listed at %s, registered after us: does another node "
			 "have "
			 "our name?",
			 key, value_parse(v, &addr, gids, &ngid) ? "a bad value" : addr.host);
	}
	e->own_clash = true;
}

/* One key and value: a node found.  Bad entries are counted and logged (at most 10 a second),
 * never taken: one not signed with our cluster's key, or older than the one we took. */
static void
node_put(struct kvxd *d, struct json_object *kv)
{
	char kbuf[256], vbuf[512];
	const char *name = key_name(d, jstr(kv, "key"), kbuf, sizeof(kbuf));
	const char *val = jstr(kv, "value");
	struct kvx_config_addr addr;
	uint8_t gids[KVX_MAX_RAILS][16];
	bool named = name && kvx_config_name_ok(name); /* else never logged as it is */
	const char *why = NULL;
	struct kvxd_peer *p;
	uint64_t epoch = 0;
	int ngid, rc;

	if (named && strcmp(name, d->cfg.name) == 0) {
		/* our own key: anything there that is not base64 text of a size we write is not
		 * ours either (written again, as own_entry does for a forged entry) */
		if (!val || b64_decode(vbuf, sizeof(vbuf), val))
			snprintf(vbuf, sizeof(vbuf), "?");
		own_entry(d, kbuf, vbuf);
		return;
	}
	if (!name || !val || b64_decode(vbuf, sizeof(vbuf), val))
		why = "";
	else if ((rc = entry_check(d, kbuf, vbuf, &epoch)))
		why = rc == -EACCES ? ": not signed with our cluster's key" : ": not signed";
	else if (value_parse(vbuf, &addr, gids, &ngid))
		why = ": a bad address";
	else if ((p = kvxd_peer_find(d, name)) && p->discovered && epoch < p->etcd_epoch)
		why = ": older than the entry taken (replayed)";
	if (why) {
		d->ctr.members_refused++;
		if (kvx_log_allow(&d->members_refused_log, kvxd_now_ms(), 10,
				  "etcd entries refused"))
			KVX_WARN("membership: a bad entry under %s refused (%s%s%s%s)",
				 d->cfg.etcd_prefix, named ? "name '" : "not a node name",
				 named ? name : "", named ? "'" : "", why);
		return;
	}
	rc = kvxd_members_found(d, name, &addr, (const uint8_t(*)[16])gids, ngid);
	if (rc == -EINVAL && /* counted there */
	    kvx_log_allow(&d->members_refused_log, kvxd_now_ms(), 10, "etcd entries refused"))
		KVX_WARN("membership: a bad entry under %s refused (not a node name)",
			 d->cfg.etcd_prefix);
	p = rc ? NULL : kvxd_peer_find(d, name);
	if (p && p->discovered && epoch > p->etcd_epoch)
		p->etcd_epoch = epoch;
	if ((rc == -ENOBUFS || rc == -ENOSPC) && !d->etcd->resync_at)
		d->etcd->resync_at = kvxd_now_ms() + 2 * RETRY_MS; /* once a slot may be free */
}

/* The lease lives ttl seconds (etcd's word) or lease_s (ours), whichever is shorter. */
static void
lease_ttl(struct kvxd *d, int64_t ttl)
{
	d->etcd->ttl_ms = d->cfg.lease_s * 1000ull;
	if (ttl < (int64_t)d->cfg.lease_s)
		d->etcd->ttl_ms = (uint64_t)ttl * 1000;
}

static int
on_grant(struct kvxd *d, struct json_object *o)
{
	struct kvxd_etcd *e = d->etcd;
	int64_t id, ttl;

	if (!jint(o, "ID", &id) || !jint(o, "TTL", &ttl) || ttl <= 0)
		return -EPROTO;
	snprintf(e->lease, sizeof(e->lease), "%" PRId64, id);
	lease_ttl(d, ttl);
	return 0;
}

/* One page of the full read.  0: the last; 1: more follow (page_key says from where); or
 * -EPROTO. */
static int
on_range(struct kvxd *d, struct json_object *o)
{
	struct kvxd_etcd *e = d->etcd;
	struct json_object *kvs = jobj(o, "kvs", json_type_array), *more;
	size_t n = kvs ? json_object_array_length(kvs) : 0;
	int64_t rev;

	if (!jint(jobj(o, "header", json_type_object), "revision", &rev) || rev < 0 ||
	    rev == INT64_MAX)
		return -EPROTO; /* the watch starts from the revision after it */
	if (++e->pages > RANGE_PAGES_MAX)
		return -EPROTO;
	if (!e->page_rev) { /* the first page: the read's revision */
		e->revision = e->page_rev = rev;
		kvxd_members_sync_begin(d);
	}
	for (size_t i = 0; i < n; i++)
		node_put(d, json_object_array_get_idx(kvs, i));
	/* back up towards RANGE_PAGE after a page too large */
	e->page_limit = e->page_limit < RANGE_PAGE / 2 ? 2 * e->page_limit : RANGE_PAGE;
	if (n && json_object_object_get_ex(o, "more", &more) &&
	    json_object_is_type(more, json_type_boolean) && json_object_get_boolean(more)) {
		int rc = page_after(e, jstr(json_object_array_get_idx(kvs, n - 1), "key"));

		return rc ? rc : 1;
	}
	kvxd_members_sync_end(d);
	return 0;
}

/* One watch message.  0, or -EPROTO / -ECANCELED (the watch must be set up again). */
static int
on_watch_msg(struct kvxd *d, struct json_object *msg)
{
	struct kvxd_etcd *e = d->etcd;
	struct json_object *r = jobj(msg, "result", json_type_object), *evs;
	struct json_object *canceled;
	int64_t rev;

	if (!r)
		return -EPROTO;
	if (json_object_object_get_ex(r, "canceled", &canceled) &&
	    json_object_get_boolean(canceled))
		return -ECANCELED; /* compacted past our revision, or etcd ended it */
	evs = jobj(r, "events", json_type_array);
	for (size_t i = 0; evs && i < json_object_array_length(evs); i++) {
		struct json_object *ev = json_object_array_get_idx(evs, i);
		struct json_object *kv = jobj(ev, "kv", json_type_object);
		const char *type = jstr(ev, "type");
		char kbuf[256];

		if (type && strcmp(type, "DELETE") == 0) {
			const char *name = key_name(d, jstr(kv, "key"), kbuf, sizeof(kbuf));

			if (name && strcmp(name, d->cfg.name) == 0)
				e->reregister = true; /* someone deleted our key */
			else if (name)
				kvxd_members_lost(d, name);
		} else {
			node_put(d, kv);
		}
	}
	if (jint(jobj(r, "header", json_type_object), "revision", &rev) && rev > e->revision &&
	    rev < INT64_MAX)
		e->revision = rev;
	return 0;
}

/* Complete lines of the watch stream, one JSON message each.  What is left (a line not yet
 * complete) moves to the front once, after all of them: a stream of short lines costs its
 * length, not its length times the buffer's. */
static int
watch_take(struct kvxd *d)
{
	struct http *h = &d->etcd->watch;
	size_t off = 0;
	char *nl;
	int rc = 0;

	while (!rc && off < h->body_len && (nl = memchr(h->body + off, '\n', h->body_len - off))) {
		char *line = h->body + off;
		struct json_object *o;

		*nl = '\0';
		off = (size_t)(nl - h->body) + 1;
		o = json_tokener_parse(line);
		if (!o && line[strspn(line, " \r\t")] != '\0')
			rc = -EPROTO;
		if (o)
			rc = on_watch_msg(d, o);
		json_object_put(o);
	}
	if (off) {
		memmove(h->body, h->body + off, h->body_len - off);
		h->body_len -= off;
		h->body[h->body_len] = '\0';
	}
	return rc;
}

static void
call_done(struct kvxd *d, struct http *h, uint64_t now)
{
	struct kvxd_etcd *e = d->etcd;
	enum call call = h->call;
	struct json_object *o;
	int rc = 0;

	if (h->status != 200) {
		fail(d, "%s: HTTP %d: %.120s", call_name[call], h->status, h->body ? h->body : "");
		return;
	}
	o = h->body ? json_tokener_parse(h->body) : NULL;
	if (!o) {
		fail(d, "%s: not JSON", call_name[call]);
		return;
	}
	switch (call) {
	case C_GRANT:
		rc = on_grant(d, o);
		break;
	case C_RANGE:
		rc = on_range(d, o);
		break;
	case C_KEEPALIVE: {
		int64_t ttl = 0;

		/* a lease that expired or is unknown comes back without a TTL: register again */
		if (!jint(jobj(o, "result", json_type_object), "TTL", &ttl) || ttl <= 0)
			rc = -ENOENT;
		else
			lease_ttl(d, ttl);
		break;
	}
	default:
		break;
	}
	json_object_put(o);
	http_close(d, h);
	if (call == C_RANGE && rc == 1) {
		range_start(d, now); /* the next page */
		return;
	}
	if (rc) {
		fail(d, "%s: %s", call_name[call],
		     rc == -ENOENT ? "our lease expired" : "an unexpected answer");
		if (rc == -ENOENT)
			e->retry_at = now; /* register again at once */
		return;
	}
	switch (call) {
	case C_GRANT:
		start(d, C_PUT, now);
		break;
	case C_PUT:
		d->ctr.etcd_registered++;
		e->lease_ok_at = now;
		e->keepalive_at = now + e->ttl_ms / 3;
		KVX_INFO("membership: registered as %s%s (lease %s, %u s)", d->cfg.etcd_prefix,
			 d->cfg.name, e->lease, d->cfg.lease_s);
		start(d, C_RANGE, now);
		break;
	case C_RANGE:
		if (e->failing)
			KVX_INFO("membership: etcd %s:%u answers again", d->cfg.etcd.host,
				 d->cfg.etcd.port);
		e->failing = false;
		e->st = S_RUN;
		start(d, C_WATCH, now);
		break;
	case C_KEEPALIVE: /* (etcd answers again: said once the read succeeds) */
		e->lease_ok_at = now;
		e->keepalive_at = now + e->ttl_ms / 3;
		break;
	default:
		break;
	}
}

/* The watch ended (or never started): read the prefix again, then watch anew, from watch_at on
 * (a gateway that ends every watch at once costs a read a second, and keepalives go first). */
static void
watch_ended(struct kvxd *d, const char *why, uint64_t now)
{
	struct kvxd_etcd *e = d->etcd;

	d->ctr.etcd_watch_restarts++;
	if (e->watch.head_done && e->watch.status == 200 && e->watch.deadline &&
	    now >= e->watch.deadline) {
		/* silent for WATCH_QUIET_MS, progress notifications included: dropped */
		KVX_WARN("membership: the watch said nothing for %d s: reading %s again",
			 WATCH_QUIET_MS / 1000, d->cfg.etcd_prefix);
	} else if (now >= e->watch_log_ms + 10000 || !e->watch_log_ms) {
		e->watch_log_ms = now;
		KVX_WARN("membership: the watch ended (%s): reading %s again", why,
			 d->cfg.etcd_prefix);
	}
	http_close(d, &e->watch);
	e->watch_at = now + RETRY_MS;
}

void
kvxd_etcd_on_event(struct kvxd *d, struct kvxd_fd *f, uint32_t events)
{
	struct kvxd_etcd *e = d->etcd;
	struct http *h = f->ptr;
	uint64_t now = kvxd_now_ms();
	int rc;

	if (!e || h->fd < 0)
		return;
	rc = http_io(d, h, events);
	if (h == &e->watch) {
		if (rc == 1 && h->head_done && h->status != 200)
			rc = -EPROTO;
		if (rc == 1 && h->head_done)
			h->deadline = now + WATCH_QUIET_MS; /* a stream from now on */
		if (rc == 1)
			rc = watch_take(d);
		if (e->reregister) {
			e->reregister = false;
			KVX_WARN("membership: our key %s%s was deleted: registering again",
				 d->cfg.etcd_prefix, d->cfg.name);
			http_close(d, &e->call);
			http_close(d, &e->ka);
			http_close(d, h);
			e->st = S_IDLE;
			e->retry_at = now;
			return;
		}
		if (rc < 0 || h->done)
			watch_ended(d, rc < 0 ? strerror(-rc) : "closed", now);
		return;
	}
	if (rc == -EMSGSIZE && h->call == C_RANGE && e->page_limit > 1) {
		/* a page over RANGE_BODY_MAX: the same page again, with fewer entries (one at
		 * the least, which always fits: etcd takes no larger entry) */
		d->ctr.etcd_pages_shrunk++;
		e->page_limit = e->page_limit > 8 ? e->page_limit / 8 : 1;
		range_start(d, now);
	} else if (rc < 0) {
		fail(d, "%s: %s", call_name[h->call], strerror(-rc));
	} else if (rc == 1) {
		call_done(d, h, now);
	}
}

void
kvxd_etcd_tick(struct kvxd *d, uint64_t now)
{
	struct kvxd_etcd *e = d->etcd;

	if (!e || d->stopping)
		return;
	if (e->call.fd >= 0 && e->call.deadline && now >= e->call.deadline) {
		fail(d, "%s: no answer in %d ms", call_name[e->call.call], CALL_MS);
		return;
	}
	if (e->ka.fd >= 0 && e->ka.deadline && now >= e->ka.deadline) {
		if (now >= e->lease_ok_at + e->ttl_ms) {
			/* no keepalive answered for a whole TTL: the lease is gone */
			fail(d, "keepalive: none answered in %" PRIu64 " ms, the lease's TTL",
			     e->ttl_ms);
			return;
		}
		/* a slow answer (an election, say): another try, while the lease still lives */
		d->ctr.etcd_errors++;
		http_close(d, &e->ka);
		e->keepalive_at = now;
	}
	if (d->members_reread) {
		/* a peer that moved lost its session: read where it is now */
		d->members_reread = false;
		if (e->st == S_RUN && !e->resync_at)
			e->resync_at = now;
	}
	if (e->watch.fd >= 0 && e->watch.deadline && now >= e->watch.deadline)
		watch_ended(d, "no answer", now); /* or silent too long (a stream) */
	if (e->st == S_RUN && e->resync_at && now >= e->resync_at) {
		/* an entry refused for want of room: read everything again.  With no watch open,
		 * a full read is on its way already (from watch_at on), and that is it: due, the
		 * resync is always taken, so the loop never finds it due again (a busy loop) */
		e->resync_at = 0;
		if (e->watch.fd >= 0) {
			http_close(d, &e->watch);
			e->watch_at = now;
		}
	}
	if (e->st == S_IDLE && now >= e->retry_at) {
		start(d, C_GRANT, now);
		return;
	}
	if ((e->st == S_RANGE || e->st == S_RUN) && e->ka.fd < 0 && now >= e->keepalive_at) {
		start(d, C_KEEPALIVE, now); /* the lease is what keeps us a member */
		if (e->st == S_IDLE)
			return; /* it failed */
	}
	if (e->reassert && e->st == S_RUN && e->call.fd < 0 && now >= e->reassert_at) {
		/* our key holds what we did not write: ours again (then a full read) */
		e->reassert = false;
		e->reassert_gap = e->reassert_gap ? e->reassert_gap * 2 : RETRY_MS;
		if (e->reassert_gap > REASSERT_MAX_MS)
			e->reassert_gap = REASSERT_MAX_MS;
		e->reassert_at = now + e->reassert_gap;
		d->ctr.etcd_reasserted++;
		start(d, C_PUT, now);
		return;
	}
	if (e->st == S_RUN && e->call.fd < 0 && e->watch.fd < 0 && now >= e->watch_at)
		start(d, C_RANGE, now); /* the watch ended: everything again from a full read */
}

uint64_t
kvxd_etcd_next_due(const struct kvxd *d)
{
	const struct kvxd_etcd *e = d->etcd;
	uint64_t due = KVXD_TIMER_NEVER;

	if (!e)
		return due;
	if (e->call.fd >= 0 && e->call.deadline)
		due = e->call.deadline;
	if (e->watch.fd >= 0 && e->watch.deadline && e->watch.deadline < due)
		due = e->watch.deadline;
	if (e->ka.fd >= 0 && e->ka.deadline && e->ka.deadline < due)
		due = e->ka.deadline;
	if (e->st == S_IDLE && e->retry_at < due)
		due = e->retry_at;
	if ((e->st == S_RANGE || e->st == S_RUN) && e->ka.fd < 0 && e->keepalive_at < due)
		due = e->keepalive_at;
	if (e->st == S_RUN && e->call.fd < 0 && e->watch.fd < 0 && e->watch_at < due)
		due = e->watch_at;
	if (e->st == S_RUN && e->resync_at && e->resync_at < due)
		due = e->resync_at;
	return due;
}

const char *
kvxd_etcd_state(const struct kvxd *d)
{
	return d->etcd ? stage_name[d->etcd->st] : "off";
}

int
kvxd_etcd_start(struct kvxd *d)
{
	struct kvxd_etcd *e;
	const struct kvx_config_addr *adv =
		d->cfg.has_advertise ? &d->cfg.advertise : &d->cfg.listen;
	static const uint8_t zero[16];
	char key[192], val[384], gid[INET6_ADDRSTRLEN];

	_Static_assert(sizeof(((struct kvx_config *)0)->etcd_prefix) + KVX_CFG_NAME_MAX <= 192,
		       "a key fits key[]");
	size_t n;

	if (!d->cfg.has_etcd)
		return 0;
	e = calloc(1, sizeof(*e));
	if (!e)
		return -ENOMEM;
	e->call.fd = e->watch.fd = e->ka.fd = -1;
	e->ttl_ms = d->cfg.lease_s * 1000ull;
	snprintf(key, sizeof(key), "%s%s", d->cfg.etcd_prefix, d->cfg.name);
	/* our QPs' GIDs, one per rail, so that peers check exactly them (not only an IPv4-mapped
	 * default, which holds for rail 0's address only) */
	n = (size_t)snprintf(val, sizeof(val), "%s:%u", adv->host, adv->port);
	for (int k = 0; k < d->nrails; k++) {
		if (memcmp(d->rails[k].info.gid, zero, 16) == 0 ||
		    !inet_ntop(AF_INET6, d->rails[k].info.gid, gid, sizeof(gid)))
			break;
		n += (size_t)snprintf(val + n, sizeof(val) - n, " %s", gid);
	}
	{
		struct timespec ts;
		uint8_t mac[KVX_AUTH_MAC_LEN];

		/* when we registered, signed with the key: a peer takes no older entry of ours */
		clock_gettime(CLOCK_REALTIME, &ts);
		e->epoch = (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
		n += (size_t)snprintf(val + n, sizeof(val) - n, " t=%" PRIu64, e->epoch);
		if (n + 5 + 2 * KVX_AUTH_MAC_LEN >= sizeof(val) ||
		    kvx_auth_entry_mac(&d->auth, key, val, mac)) {
			free(e);
			return -EINVAL;
		}
		n += (size_t)snprintf(val + n, sizeof(val) - n, " sig=");
		for (int i = 0; i < KVX_AUTH_MAC_LEN; i++)
			n += (size_t)snprintf(val + n, sizeof(val) - n, "%02x", mac[i]);
	}
	snprintf(e->val, sizeof(e->val), "%s", val);
	if (b64_encode(e->key_b64, sizeof(e->key_b64), key) ||
	    b64_encode(e->val_b64, sizeof(e->val_b64), val) ||
	    b64_encode(e->begin_b64, sizeof(e->begin_b64), d->cfg.etcd_prefix)) {
		free(e);
		return -EINVAL; /* the configuration's bounds make this impossible */
	}
	/* the range end of a prefix: the prefix with its last byte plus one ('/' + 1 = '0') */
	snprintf(key, sizeof(key), "%s", d->cfg.etcd_prefix);
	n = strlen(key);
	key[n - 1]++;
	b64_encode(e->end_b64, sizeof(e->end_b64), key);
	d->etcd = e;
	KVX_INFO("membership: etcd %s:%u, prefix %s, advertising %s, lease %u s", d->cfg.etcd.host,
		 d->cfg.etcd.port, d->cfg.etcd_prefix, val, d->cfg.lease_s);
	return 0;
}

void
kvxd_etcd_stop(struct kvxd *d)
{
	if (!d->etcd)
		return;
	http_close(d, &d->etcd->call);
	http_close(d, &d->etcd->watch);
	http_close(d, &d->etcd->ka);
	free(d->etcd->page_key);
	free(d->etcd);
	d->etcd = NULL;
}
