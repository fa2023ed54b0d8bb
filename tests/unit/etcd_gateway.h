/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A scripted etcd v3 JSON gateway in the test's own process, for tests/unit/test_etcd.c and
 * tests/fuzz/fuzz_etcd.c: a non-blocking listener on 127.0.0.1 that answers lease grant, put,
 * range, keepalive and watch like etcd 3.4's gateway, polled from the test's loop (gw_poll);
 * raw_next replaces the next answer with any bytes.  Include after nodes_harness.h (gw_send
 * steps the nodes while a socket is full) and define GW_PREFIX, the key prefix, first.
 */
#ifndef KVX_TESTS_ETCD_GATEWAY_H
#define KVX_TESTS_ETCD_GATEWAY_H

#include <arpa/inet.h>
#include <json-c/json.h>
#include <netinet/in.h>
#include <openssl/evp.h>
#include <sys/socket.h>

#include "core/auth.h"

struct gw_conn {
	int fd;
	char req[8192];
	size_t len;
	bool answered;
};

static struct {
	int lfd;
	uint16_t port;
	struct gw_conn c[16];
	int watch_fd; /* the open watch stream, -1: none */
	int grants, puts, ranges, keepalives, watches;
	/* what a range lists: keys and values as text, sorted by key; served a page at a time
	 * like etcd (key, range_end, limit, keys_only; "more" when the limit cut it) */
	struct {
		char key[128];
		char *value; /* malloc'd: it may be large */
	} kv[128];
	int nkv;
	char rev[24];	 /* the revision ranges say (gw_range's range_rev) */
	int range_pages; /* range calls that had a limit */
	/* values are signed as kvxd signs its own (control/etcd.c) with these keys, at the
	 * registration time t (0: 1); a value given as "!TEXT" is TEXT, unsigned */
	const struct kvx_auth_keys *sign;
	uint64_t t;
	bool range_clen;       /* ranges answered with a Content-Length (etcd's gateway: chunked) */
	bool lease_lost;       /* keepalives answer without a TTL */
	bool watch_503;	       /* watches are refused */
	bool hold_ranges;      /* range calls wait for their answer while this is set */
	bool hold_keepalives;  /* and keepalives */
	int grant_ttl;	       /* the TTL grants and keepalives give (0: 3 s) */
	const char *range_rev; /* the revision gw_range writes (NULL: "10") */
	bool lax;	       /* fuzzing: no checks of what the client sends */
	const char *raw_next;  /* the next call gets these bytes, then the connection closes */
	size_t raw_len;
} gw;

static void
b64(char *out, const char *in)
{
	EVP_EncodeBlock((unsigned char *)out, (const unsigned char *)in, (int)strlen(in));
}

/* A value as an entry under key holds it (malloc'd): val signed, or "!TEXT" as TEXT. */
static char *
gw_signed(const char *key, const char *val)
{
	uint8_t mac[KVX_AUTH_MAC_LEN];
	size_t cap = strlen(val) + 128, n;
	char *out = malloc(cap);

	assert_non_null(out);
	if (val[0] == '!' || !gw.sign) {
		snprintf(out, cap, "%s", val[0] == '!' ? val + 1 : val);
		return out;
	}
	n = (size_t)snprintf(out, cap, "%s t=%llu", val, (unsigned long long)(gw.t ? gw.t : 1));
	assert_int_equal(kvx_auth_entry_mac(gw.sign, key, out, mac), 0);
	n += (size_t)snprintf(out + n, cap - n, " sig=");
	for (int i = 0; i < KVX_AUTH_MAC_LEN; i++)
		n += (size_t)snprintf(out + n, cap - n, "%02x", mac[i]);
	return out;
}

static int
gw_kv_cmp(const void *a, const void *b)
{
	return strcmp(((const char *)a), ((const char *)b)); /* key is the first member */
}

/* What ranges list from now on: n KEY, VALUE pairs (text), at the revision range_rev (NULL:
 * "10").  A value GW_OWN is what the node registered under that key (a put), if it did. */
#define GW_OWN "=registered"
static void
gw_range(const char *const *kv, int n)
{
	char *keep[128] = {NULL}; /* GW_OWN entries: what a put stored */
	int m = 0;

	assert_true(n <= 128);
	for (int i = 0; i < n; i++)
		for (int k = 0; strcmp(kv[2 * i + 1], GW_OWN) == 0 && k < gw.nkv; k++)
			if (strcmp(gw.kv[k].key, kv[2 * i]) == 0) {
				keep[i] = gw.kv[k].value;
				gw.kv[k].value = NULL;
			}
	for (int i = 0; i < gw.nkv; i++)
		free(gw.kv[i].value);
	for (int i = 0; i < n; i++) {
		if (strcmp(kv[2 * i + 1], GW_OWN) == 0 && !keep[i])
			continue; /* not registered yet */
		snprintf(gw.kv[m].key, sizeof(gw.kv[m].key), "%s", kv[2 * i]);
		gw.kv[m++].value = keep[i] ? keep[i] : gw_signed(kv[2 * i], kv[2 * i + 1]);
	}
	gw.nkv = m;
	qsort(gw.kv, (size_t)m, sizeof(gw.kv[0]), gw_kv_cmp);
	snprintf(gw.rev, sizeof(gw.rev), "%s", gw.range_rev ? gw.range_rev : "10");
}

/* base64 of text of any length (malloc'd) */
static char *
gw_b64_alloc(const char *in)
{
	size_t n = strlen(in);
	char *out = malloc(4 * (n / 3 + 1) + 1);

	assert_non_null(out);
	EVP_EncodeBlock((unsigned char *)out, (const unsigned char *)in, (int)n);
	return out;
}

/* base64 (of at most 255 bytes) decoded into out: its length (a key's NUL bytes count) */
static size_t
gw_unb64(char *out, const char *in)
{
	size_t n = strlen(in);
	int len;

	assert_true(n < 340);
	len = EVP_DecodeBlock((unsigned char *)out, (const unsigned char *)in, (int)n);
	assert_true(len >= 0);
	while (n && in[n - 1] == '=') { /* the decoder counts padding as bytes */
		n--;
		len--;
	}
	return (size_t)len;
}

/* Keys compared as etcd does: bytes, a prefix first. */
static int
gw_key_cmp(const char *a, size_t alen, const char *b, size_t blen)
{
	int c = memcmp(a, b, alen < blen ? alen : blen);

	return c ? c : (alen > blen) - (alen < blen);
}

/* A put: what etcd holds under its key from now on (as text). */
static void
gw_put_store(const char *body)
{
	struct json_object *o = json_tokener_parse(body), *k, *v;
	char key[256] = "", *val;
	size_t vlen;
	int i;

	if (!o || !json_object_object_get_ex(o, "key", &k) ||
	    !json_object_object_get_ex(o, "value", &v) ||
	    strlen(json_object_get_string(k)) >= 340) {
		json_object_put(o);
		return;
	}
	key[gw_unb64(key, json_object_get_string(k))] = '\0';
	vlen = strlen(json_object_get_string(v));
	val = malloc(vlen / 4 * 3 + 4);
	assert_non_null(val);
	EVP_DecodeBlock((unsigned char *)val, (const unsigned char *)json_object_get_string(v),
			(int)vlen);
	val[vlen / 4 * 3] = '\0'; /* text: padding decodes to NULs */
	json_object_put(o);
	for (i = 0; i < gw.nkv && strcmp(gw.kv[i].key, key) != 0; i++)
		;
	if (i == gw.nkv) {
		if (gw.nkv == (int)(sizeof(gw.kv) / sizeof(gw.kv[0]))) {
			free(val);
			return;
		}
		snprintf(gw.kv[gw.nkv++].key, sizeof(gw.kv[0].key), "%s", key);
	} else {
		free(gw.kv[i].value);
	}
	gw.kv[i].value = val;
	qsort(gw.kv, (size_t)gw.nkv, sizeof(gw.kv[0]), gw_kv_cmp);
}

/* A range request's answer (malloc'd): the entries from key (base64) up to range_end, at most
 * limit of them (0: all), "more" when there were more. */
static char *
gw_range_answer(const char *body)
{
	struct json_object *o = json_tokener_parse(body), *x;
	char from[256] = "", to[256] = "\xff";
	size_t flen = 0, tlen = 1;
	int64_t limit = 0;
	bool keys_only = false, more = false;
	size_t cap = 256, off;
	char *ans;
	int n = 0;

	if (o && json_object_object_get_ex(o, "key", &x))
		flen = gw_unb64(from, json_object_get_string(x));
	if (o && json_object_object_get_ex(o, "range_end", &x))
		tlen = gw_unb64(to, json_object_get_string(x));
	if (o && json_object_object_get_ex(o, "limit", &x))
		limit = json_object_get_int64(x);
	if (o && json_object_object_get_ex(o, "keys_only", &x))
		keys_only = json_object_get_boolean(x);
	json_object_put(o);
	gw.range_pages += limit > 0;
	for (int i = 0; i < gw.nkv; i++)
		cap += 64 + 2 * strlen(gw.kv[i].key) + 2 * strlen(gw.kv[i].value);
	ans = malloc(cap);
	assert_non_null(ans);
	off = (size_t)snprintf(ans, cap, "{\"header\":{\"revision\":\"%s\"},\"kvs\":[", gw.rev);
	/* keys outside the range (a gateway that answers wrong) come first, in the first page */
	for (int i = 0; i < 2 * gw.nkv; i++) {
		const char *key = gw.kv[i % gw.nkv].key;
		size_t klen = strlen(key);
		bool in = gw_key_cmp(key, klen, GW_PREFIX, strlen(GW_PREFIX)) >= 0 &&
			  gw_key_cmp(key, klen, to, tlen) < 0;
		char *k, *v;

		if (i < gw.nkv ? in || flen != strlen(GW_PREFIX) : !in)
			continue;
		if (in && gw_key_cmp(key, klen, from, flen) < 0)
			continue;
		if (in && limit && n == limit) {
			more = true;
			break;
		}
		k = gw_b64_alloc(key);
		v = gw_b64_alloc(gw.kv[i % gw.nkv].value);
		if (keys_only)
			off += (size_t)snprintf(ans + off, cap - off, "%s{\"key\":\"%s\"}",
						n ? "," : "", k);
		else
			off += (size_t)snprintf(ans + off, cap - off,
						"%s{\"key\":\"%s\",\"value\":\"%s\"}", n ? "," : "",
						k, v);
		free(k);
		free(v);
		n++;
	}
	snprintf(ans + off, cap - off, "],\"more\":%s,\"count\":\"%d\"}", more ? "true" : "false",
		 n);
	return ans;
}

static void
gw_start(void)
{
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof(sa);

	memset(&gw, 0, sizeof(gw));
	gw.watch_fd = -1;
	for (int i = 0; i < 16; i++)
		gw.c[i].fd = -1;
	gw.lfd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
	assert_true(gw.lfd >= 0);
	assert_int_equal(bind(gw.lfd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(listen(gw.lfd, 16), 0);
	getsockname(gw.lfd, (struct sockaddr *)&sa, &len);
	gw.port = ntohs(sa.sin_port);
}

static void
gw_send(int fd, const char *p, size_t n)
{
	while (n) {
		ssize_t w = send(fd, p, n, MSG_NOSIGNAL);

		if (w < 0 &&
		    errno == EAGAIN) { /* let the client read (the gateway not re-entered) */
			void (*hook)(void) = pump_hook;

			pump_hook = NULL;
			pump_once();
			pump_hook = hook;
			fake_ms++;
			continue;
		}
		if (w <= 0)
			return;
		p += w;
		n -= (size_t)w;
	}
}

static void
gw_reply(struct gw_conn *c, const char *body, bool chunked)
{
	char head[256];
	int n;

	if (chunked) {
		/* as etcd's gateway answers: no Content-Length, the message as one chunk */
		n = snprintf(head, sizeof(head),
			     "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
			     "Transfer-Encoding: chunked\r\n\r\n%zx\r\n",
			     strlen(body) + 1);
		gw_send(c->fd, head, (size_t)n);
		gw_send(c->fd, body, strlen(body));
		gw_send(c->fd, "\n\r\n0\r\n\r\n", 8);
		return;
	}
	n = snprintf(head, sizeof(head),
		     "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
		     "Content-Length: %zu\r\n\r\n",
		     strlen(body));
	gw_send(c->fd, head, (size_t)n);
	gw_send(c->fd, body, strlen(body));
}

static void
gw_close(struct gw_conn *c)
{
	if (c->fd == gw.watch_fd)
		gw.watch_fd = -1;
	close(c->fd);
	c->fd = -1;
}

/* one watch message, as the gateway frames it (a chunk, a JSON object and a newline) */
static void
gw_watch(const char *json)
{
	char buf[4096];
	int n = snprintf(buf, sizeof(buf), "%zx\r\n%s\n\r\n", strlen(json) + 1, json);

	assert_true(n > 0 && (size_t)n < sizeof(buf));
	assert_true(gw.watch_fd >= 0);
	gw_send(gw.watch_fd, buf, (size_t)n);
}

static void
gw_watch_end(void)
{
	for (int i = 0; i < 16; i++)
		if (gw.c[i].fd >= 0 && gw.c[i].fd == gw.watch_fd) {
			gw_send(gw.c[i].fd, "0\r\n\r\n", 5);
			gw_close(&gw.c[i]);
		}
}

static void
gw_answer(struct gw_conn *c)
{
	char *body = strstr(c->req, "\r\n\r\n");

	c->answered = true;
	if (gw.raw_next) {
		gw_send(c->fd, gw.raw_next, gw.raw_len);
		gw.raw_next = NULL;
		gw_close(c);
		return;
	}
	if (strncmp(c->req, "POST /v3/lease/grant ", 21) == 0) {
		char ans[128];

		snprintf(ans, sizeof(ans),
			 "{\"header\":{\"revision\":\"1\"},\"ID\":\"77\",\"TTL\":\"%d\"}",
			 gw.grant_ttl ? gw.grant_ttl : 3);
		gw.grants++;
		gw_reply(c, ans, false);
	} else if (strncmp(c->req, "POST /v3/kv/put ", 16) == 0) {
		char k[64];

		b64(k, GW_PREFIX "a");
		assert_true(gw.lax || strstr(body, k)); /* our own key */
		assert_true(gw.lax || strstr(body, "\"lease\": \"77\""));
		gw.puts++;
		gw_put_store(body + 4);
		gw_reply(c, "{\"header\":{\"revision\":\"2\"}}", false);
	} else if (strncmp(c->req, "POST /v3/kv/range ", 18) == 0) {
		char *ans = gw_range_answer(body ? body + 4 : "");

		gw.ranges++;
		gw_reply(c, ans, !gw.range_clen);
		free(ans);
	} else if (strncmp(c->req, "POST /v3/lease/keepalive ", 25) == 0) {
		char ans[128];

		snprintf(ans, sizeof(ans),
			 "{\"result\":{\"header\":{},\"ID\":\"77\",\"TTL\":\"%d\"}}",
			 gw.grant_ttl ? gw.grant_ttl : 3);
		gw.keepalives++;
		gw_reply(c, gw.lease_lost ? "{\"result\":{\"header\":{},\"ID\":\"77\"}}" : ans,
			 true);
	} else if (gw.watch_503 && strncmp(c->req, "POST /v3/watch ", 15) == 0) {
		static const char no[] = "HTTP/1.1 503 Unavailable\r\nContent-Length: 0\r\n\r\n";

		gw.watches++;
		gw_send(c->fd, no, sizeof(no) - 1);
	} else if (strncmp(c->req, "POST /v3/watch ", 15) == 0) {
		static const char head[] = "HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
					   "Transfer-Encoding: chunked\r\n\r\n";

		assert_true(gw.lax ||
			    strstr(body, "\"start_revision\": \"11\"")); /* after the read */
		gw.watches++;
		gw_send(c->fd, head, sizeof(head) - 1);
		gw.watch_fd = c->fd;
		gw_watch("{\"result\":{\"header\":{\"revision\":\"10\"},\"created\":true}}");
		return;
	} else {
		fail_msg("the client asked %.40s", c->req);
	}
	gw_close(c);
}

static void
gw_poll(void)
{
	int fd;

	while ((fd = accept4(gw.lfd, NULL, NULL, SOCK_NONBLOCK)) >= 0) {
		int i = 0;

		while (i < 16 && gw.c[i].fd >= 0)
			i++;
		assert_true(i < 16);
		gw.c[i] = (struct gw_conn){.fd = fd};
	}
	for (int i = 0; i < 16; i++) {
		struct gw_conn *c = &gw.c[i];
		ssize_t r;
		char *end;

		if (c->fd < 0)
			continue;
		r = recv(c->fd, c->req + c->len, sizeof(c->req) - 1 - c->len, 0);
		if (r == 0) {
			gw_close(c);
			continue;
		}
		if (r > 0) {
			c->len += (size_t)r;
			c->req[c->len] = '\0';
		}
		end = strstr(c->req, "\r\n\r\n");
		if (!c->answered && end &&
		    !(gw.hold_ranges && strncmp(c->req, "POST /v3/kv/range ", 18) == 0) &&
		    !(gw.hold_keepalives &&
		      strncmp(c->req, "POST /v3/lease/keepalive ", 25) == 0)) {
			const char *cl = strstr(c->req, "Content-Length: ");

			if (cl && c->len - (size_t)(end + 4 - c->req) >= strtoul(cl + 16, NULL, 10))
				gw_answer(c);
		}
	}
}

/* Requests starting with what (a method and path) held unanswered on open connections. */
static __attribute__((unused)) int
gw_held(const char *what)
{
	int n = 0;

	for (int i = 0; i < 16; i++)
		n += gw.c[i].fd >= 0 && !gw.c[i].answered &&
		     strncmp(gw.c[i].req, what, strlen(what)) == 0;
	return n;
}

/* Start the gateway, have pump_once() poll it, and point node d's [membership] at it (lease 3 s,
 * advertising 127.0.0.1:7470). */
static __attribute__((unused)) void
gw_start_for(struct kvxd *d)
{
	gw_start();
	gw.sign = &d->auth;
	pump_hook = gw_poll;
	d->cfg.cq_depth = 1u << 16;
	d->cfg.has_etcd = true;
	snprintf(d->cfg.etcd.host, sizeof(d->cfg.etcd.host), "127.0.0.1");
	d->cfg.etcd.port = gw.port;
	snprintf(d->cfg.etcd_prefix, sizeof(d->cfg.etcd_prefix), GW_PREFIX);
	d->cfg.lease_s = 3;
	snprintf(d->cfg.listen.host, sizeof(d->cfg.listen.host), "127.0.0.1");
	d->cfg.listen.port = 7470;
}

/* Stop d's etcd client and the gateway. */
static __attribute__((unused)) void
gw_stop_for(struct kvxd *d)
{
	kvxd_etcd_stop(d);
	for (int i = 0; i < 16; i++)
		if (gw.c[i].fd >= 0)
			gw_close(&gw.c[i]);
	close(gw.lfd);
	pump_hook = NULL;
	for (int i = 0; i < gw.nkv; i++)
		free(gw.kv[i].value);
	gw.nkv = 0;
}

#endif /* KVX_TESTS_ETCD_GATEWAY_H */
