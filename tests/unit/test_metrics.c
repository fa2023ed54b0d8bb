/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What kvxd exports (control/metrics.c, core/hist.h): the log-scale buckets; the text
 * exposition checked line by line against the format (HELP/TYPE before samples, each family
 * once and together, labels, a histogram's buckets cumulative with +Inf equal to _count, _sum
 * and _count present); the JSON rendering well-formed and equal in content; the histograms fed
 * where their events happen (a handshake, a room's end, an abort's release) on two nodes over
 * the fake verbs; and `counters` fitting one admin reply.
 */
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "control/kvxd.h"
#include "control/admin.h"
#include "control/metrics.h"
#include "core/fault.h"
#include "core/hist.h"

#include "nodes_harness.h"

#define A N[0]
#define B N[1]

static uint64_t fake_us = 5000000;

static uint64_t
fake_clock_us(void)
{
	return fake_us;
}

static int
setup(void **state)
{
	static const char *const names[] = {"a", "b"};

	(void)state;
	nodes_setup(2, names);
	kvxd_clock_us = fake_clock_us;
	snprintf(A.cfg.device, sizeof(A.cfg.device), "rxe0");
	return 0;
}

static int
teardown(void **state)
{
	(void)state;
	nodes_remove_rooms(&A);
	nodes_teardown();
	return 0;
}

static char *
render(struct kvxd *d, enum kvxd_metrics_format fmt, unsigned flags)
{
	struct kvxd_metrics_buf b = {.grow = true, .max = 1 << 22};

	assert_int_equal(kvxd_metrics_render(d, fmt, flags, &b), 0);
	assert_non_null(b.p);
	assert_int_equal(strlen(b.p), b.len);
	return b.p;
}

/* ---- a checker of the text exposition format (version 0.0.4) ------------------------------- */

#define MAX_FAMILIES 256

struct series {
	char key[512]; /* the labels without le */
	double last_le;
	double last_count;
	bool inf;
	double inf_count;
	bool sum;
};

struct checker {
	char fams[MAX_FAMILIES][128];
	int nfams;
	char fam[128], type[16], help[128];
	struct series s[64];
	int ns;
	char msg[600];
	int histograms, samples;
};

static bool __attribute__((format(printf, 3, 4)))
bad(struct checker *k, const char *line, const char *fmt, ...)
{
	va_list ap;
	int n;

	va_start(ap, fmt);
	n = vsnprintf(k->msg, sizeof(k->msg), fmt, ap);
	va_end(ap);
	if (n >= 0 && (size_t)n < sizeof(k->msg))
		snprintf(k->msg + n, sizeof(k->msg) - (size_t)n, " in '%.200s'", line);
	return false;
}

static bool
metric_name_ok(const char *s, size_t n)
{
	if (n == 0 || !(isalpha((unsigned char)s[0]) || s[0] == '_' || s[0] == ':'))
		return false;
	for (size_t i = 1; i < n; i++)
		if (!(isalnum((unsigned char)s[i]) || s[i] == '_' || s[i] == ':'))
			return false;
	return true;
}

/* {k="v",...}: the labels (le taken out into *le), the node label first.  Returns the text after
 * '}', or NULL. */
static const char *
parse_labels(struct checker *k, const char *line, const char *p, char *key, size_t keylen, char *le,
	     size_t lelen)
{
	size_t off = 0;
	int n = 0;

	key[0] = le[0] = '\0';
	if (*p++ != '{')
		return bad(k, line, "no labels"), NULL;
	while (*p != '}') {
		char name[64], val[256];
		size_t nl = strspn(p, "abcdefghijklmnopqrstuvwxyz_");
		size_t vl = 0;

		if (nl == 0 || nl >= sizeof(name) || p[nl] != '=' || p[nl + 1] != '"')
			return bad(k, line, "bad label"), NULL;
		memcpy(name, p, nl);
		name[nl] = '\0';
		p += nl + 2;
		while (*p != '"') {
			if (*p == '\0' || *p == '\n' || vl + 2 >= sizeof(val))
				return bad(k, line, "unterminated label value"), NULL;
			if (*p == '\\') {
				p++;
				if (*p != '\\' && *p != '"' && *p != 'n')
					return bad(k, line, "bad escape"), NULL;
			}
			val[vl++] = *p++;
		}
		val[vl] = '\0';
		p++;
		if (n == 0 && (strcmp(name, "node") != 0 || strcmp(val, "a") != 0))
			return bad(k, line, "the first label is not node=\"a\""), NULL;
		n++;
		if (strcmp(name, "le") == 0)
			snprintf(le, lelen, "%s", val);
		else
			off += (size_t)snprintf(key + off, keylen - off, "%s=%s;", name, val);
		if (*p == ',')
			p++;
		else if (*p != '}')
			return bad(k, line, "labels not separated by ','"), NULL;
	}
	return p + 1;
}

static struct series *
series_of(struct checker *k, const char *key)
{
	for (int i = 0; i < k->ns; i++)
		if (strcmp(k->s[i].key, key) == 0)
			return &k->s[i];
	assert_true(k->ns < 64);
	memset(&k->s[k->ns], 0, sizeof(k->s[0]));
	snprintf(k->s[k->ns].key, sizeof(k->s[0].key), "%s", key);
	k->s[k->ns].last_le = -1;
	return &k->s[k->ns++];
}

static bool
check_sample(struct checker *k, const char *line)
{
	size_t nl = strcspn(line, "{ ");
	char name[160], key[512], le[32], *end;
	const char *p;
	double v;

	if (!metric_name_ok(line, nl) || nl >= sizeof(name))
		return bad(k, line, "bad metric name");
	memcpy(name, line, nl);
	name[nl] = '\0';
	if (!k->fam[0])
		return bad(k, line, "a sample before any # TYPE");
	p = parse_labels(k, line, line + nl, key, sizeof(key), le, sizeof(le));
	if (!p)
		return false;
	if (*p++ != ' ')
		return bad(k, line, "no blank before the value");
	v = strtod(p, &end);
	if (end == p || *end != '\0' || isnan(v))
		return bad(k, line, "bad value");
	k->samples++;
	if (strcmp(k->type, "histogram") != 0) {
		if (strcmp(name, k->fam) != 0)
			return bad(k, line, "sample of another family than %s", k->fam);
		if (le[0])
			return bad(k, line, "le on a %s", k->type);
		if (v < 0)
			return bad(k, line, "negative %s", k->type);
		return true;
	}
	{
		size_t fl = strlen(k->fam);
		const char *suffix = name + fl;
		struct series *s = series_of(k, key);

		if (strncmp(name, k->fam, fl) != 0)
			return bad(k, line, "sample of another family than %s", k->fam);
		if (strcmp(suffix, "_bucket") == 0) {
			double b;

			if (!le[0])
				return bad(k, line, "a bucket without le");
			if (s->inf || s->sum)
				return bad(k, line, "a bucket after +Inf or _sum");
			b = strcmp(le, "+Inf") == 0 ? INFINITY : strtod(le, &end);
			if (b != INFINITY && *end != '\0')
				return bad(k, line, "bad le");
			if (b <= s->last_le)
				return bad(k, line, "le not increasing");
			if (v < s->last_count)
				return bad(k, line, "buckets not cumulative (%g after %g)", v,
					   s->last_count);
			s->last_le = b;
			s->last_count = v;
			if (b == INFINITY) {
				s->inf = true;
				s->inf_count = v;
			}
			return true;
		}
		if (le[0])
			return bad(k, line, "le outside a bucket");
		if (strcmp(suffix, "_sum") == 0) {
			if (!s->inf)
				return bad(k, line, "_sum before the +Inf bucket");
			s->sum = true;
			return true;
		}
		if (strcmp(suffix, "_count") == 0) {
			if (!s->inf || !s->sum)
				return bad(k, line, "_count before +Inf or _sum");
			if (v != s->inf_count)
				return bad(k, line, "_count %g is not the +Inf bucket %g", v,
					   s->inf_count);
			k->histograms++;
			return true;
		}
		return bad(k, line, "not a histogram sample of %s", k->fam);
	}
}

/* NULL when text is a valid exposition, else what is wrong. */
static const char *
check_exposition(struct checker *k, const char *text)
{
	char *copy = strdup(text), *save = NULL, *line;
	bool ok = true;

	memset(k, 0, sizeof(*k));
	assert_non_null(copy);
	if (text[0] && text[strlen(text) - 1] != '\n')
		ok = bad(k, "", "no final newline");
	for (line = strtok_r(copy, "\n", &save); ok && line; line = strtok_r(NULL, "\n", &save)) {
		if (strncmp(line, "# HELP ", 7) == 0) {
			size_t nl = strcspn(line + 7, " ");

			if (!metric_name_ok(line + 7, nl) || line[7 + nl] != ' ')
				ok = bad(k, line, "bad HELP");
			else
				snprintf(k->help, sizeof(k->help), "%.*s", (int)nl, line + 7);
		} else if (strncmp(line, "# TYPE ", 7) == 0) {
			char name[128], type[16];

			if (sscanf(line + 7, "%127s %15s", name, type) != 2 ||
			    (strcmp(type, "counter") && strcmp(type, "gauge") &&
			     strcmp(type, "histogram"))) {
				ok = bad(k, line, "bad TYPE");
				break;
			}
			if (k->help[0] && strcmp(k->help, name) != 0)
				ok = bad(k, line, "HELP of %s before TYPE of another family",
					 k->help);
			for (int i = 0; ok && i < k->nfams; i++)
				if (strcmp(k->fams[i], name) == 0)
					ok = bad(k, line, "family declared twice");
			if (!ok)
				break;
			assert_true(k->nfams < MAX_FAMILIES);
			snprintf(k->fams[k->nfams++], sizeof(k->fams[0]), "%s", name);
			snprintf(k->fam, sizeof(k->fam), "%s", name);
			snprintf(k->type, sizeof(k->type), "%s", type);
			k->help[0] = '\0';
			for (int i = 0; i < k->ns; i++)
				if (!(k->s[i].inf && k->s[i].sum))
					ok = bad(k, line, "a histogram series left unfinished");
			k->ns = 0;
		} else if (line[0] == '#') {
			ok = bad(k, line, "a comment that is neither HELP nor TYPE");
		} else {
			ok = check_sample(k, line);
		}
	}
	free(copy);
	return ok ? NULL : k->msg;
}

/* The value of the series (the exact text before the value), or -1. */
static double
value_of(const char *text, const char *series)
{
	const char *p = text;
	size_t n = strlen(series);

	while ((p = strstr(p, series))) {
		if ((p == text || p[-1] == '\n') && p[n] == ' ')
			return strtod(p + n + 1, NULL);
		p += n;
	}
	return -1;
}

/* ---- a minimal JSON checker ------------------------------------------------------------------ */

static const char *json_value(const char *p);

static const char *
json_ws(const char *p)
{
	while (*p == ' ' || *p == '\n' || *p == '\t' || *p == '\r')
		p++;
	return p;
}

static const char *
json_string(const char *p)
{
	if (*p++ != '"')
		return NULL;
	while (*p != '"') {
		if ((unsigned char)*p < 0x20)
			return NULL;
		if (*p == '\\') {
			p++;
			if (*p == 'u') {
				for (int i = 1; i <= 4; i++)
					if (!isxdigit((unsigned char)p[i]))
						return NULL;
				p += 4;
			} else if (!strchr("\"\\/bfnrt", *p)) {
				return NULL;
			}
		}
		p++;
	}
	return p + 1;
}

static const char *
json_seq(const char *p, char close, bool object)
{
	p = json_ws(p + 1);
	if (*p == close)
		return p + 1;
	for (;;) {
		if (object) {
			p = json_string(json_ws(p));
			if (!p || *(p = json_ws(p)) != ':')
				return NULL;
			p++;
		}
		p = json_value(p);
		if (!p)
			return NULL;
		p = json_ws(p);
		if (*p == close)
			return p + 1;
		if (*p++ != ',')
			return NULL;
	}
}

static const char *
json_value(const char *p)
{
	char *end;

	p = json_ws(p);
	if (*p == '{')
		return json_seq(p, '}', true);
	if (*p == '[')
		return json_seq(p, ']', false);
	if (*p == '"')
		return json_string(p);
	if (*p == '-' || isdigit((unsigned char)*p)) {
		strtod(p, &end);
		return end;
	}
	return NULL;
}

static bool
json_valid(const char *text)
{
	const char *p = json_value(text);

	return p && *json_ws(p) == '\0';
}

/* ---- tests ----------------------------------------------------------------------------------- */

/* Bucket i holds 2^(shift+i-1) < v <= 2^(shift+i); the first everything at or below its bound,
 * one more everything above the last. */
static void
test_hist_buckets(void **state)
{
	const struct kvx_hist_scale *s = &kvx_hist_us;
	struct kvx_hist h = {0};

	(void)state;
	assert_int_equal(kvx_hist_index(s, 0), 0);
	assert_int_equal(kvx_hist_index(s, 1), 0);
	assert_int_equal(kvx_hist_index(s, 8), 0);
	assert_int_equal(kvx_hist_index(s, 9), 1);
	assert_int_equal(kvx_hist_index(s, 16), 1);
	assert_int_equal(kvx_hist_index(s, 17), 2);
	assert_int_equal(kvx_hist_bound(s, s->n - 1), 1ull << 26);
	assert_int_equal(kvx_hist_index(s, 1ull << 26), s->n - 1);
	assert_int_equal(kvx_hist_index(s, (1ull << 26) + 1), s->n);
	assert_int_equal(kvx_hist_index(s, UINT64_MAX), s->n);
	for (unsigned i = 0; i < s->n; i++) { /* every bound is in its own bucket */
		assert_int_equal(kvx_hist_index(s, kvx_hist_bound(s, i)), i);
		assert_int_equal(kvx_hist_index(s, kvx_hist_bound(s, i) + 1), i + 1);
	}
	assert_int_equal(kvx_hist_index(&kvx_hist_bytes, 4096), 2);
	kvx_hist_observe(&h, s, 5);
	kvx_hist_observe(&h, s, 100);
	assert_int_equal(h.count, 2);
	assert_int_equal(h.sum, 105);
	assert_int_equal(h.bucket[0], 1);
	assert_int_equal(h.bucket[4], 1);
}

/* The text is a valid exposition; one histogram's lines are exactly what its observations
 * make them (cumulative, +Inf = _count, _sum in seconds). */
static void
test_exposition_format(void **state)
{
	struct checker k;
	const char *why;
	char *text;

	(void)state;
	memset(&A.hist.handshake, 0, sizeof(A.hist.handshake));
	kvx_hist_observe(&A.hist.handshake, &kvx_hist_us, 5);	       /* le 0.000008 */
	kvx_hist_observe(&A.hist.handshake, &kvx_hist_us, 100);	       /* le 0.000128 */
	kvx_hist_observe(&A.hist.handshake, &kvx_hist_us, 128);	       /* le 0.000128 */
	kvx_hist_observe(&A.hist.handshake, &kvx_hist_us, 1000000000); /* +Inf */
	A.ctr.frames_rx = 42;
	text = render(&A, KVXD_METRICS_TEXT, KVXD_METRICS_HELP);
	why = check_exposition(&k, text);
	if (why)
		fail_msg("%s", why);
	assert_true(k.histograms >= 8);
	assert_true(k.nfams > 80);
	assert_non_null(strstr(text, "# HELP kvx_frames_rx_total control frames received"));
	assert_non_null(strstr(text, "# TYPE kvx_frames_rx_total counter\n"
				     "kvx_frames_rx_total{node=\"a\"} 42\n"));
	assert_non_null(strstr(text, "# TYPE kvx_rooms gauge\n"));
	assert_non_null(strstr(text, "# TYPE kvx_peer_handshake_seconds histogram\n"));
#define H "kvx_peer_handshake_seconds"
	assert_true(value_of(text, H "_bucket{node=\"a\",le=\"0.000008\"}") == 1);
	assert_true(value_of(text, H "_bucket{node=\"a\",le=\"0.000016\"}") == 1);
	assert_true(value_of(text, H "_bucket{node=\"a\",le=\"0.000064\"}") == 1);
	assert_true(value_of(text, H "_bucket{node=\"a\",le=\"0.000128\"}") == 3);
	assert_true(value_of(text, H "_bucket{node=\"a\",le=\"0.000256\"}") == 3);
	assert_true(value_of(text, H "_bucket{node=\"a\",le=\"67.108864\"}") == 3);
	assert_true(value_of(text, H "_bucket{node=\"a\",le=\"+Inf\"}") == 4);
	assert_non_null(strstr(text, H "_sum{node=\"a\"} 1000.000233\n"));
	assert_true(value_of(text, H "_count{node=\"a\"}") == 4);
#undef H
	/* per core, with a core label; per device and rail */
	assert_true(value_of(text, "kvx_core_wr_posted_total{node=\"a\",core=\"0\"}") >= 0);
	assert_true(value_of(text, "kvx_room_bytes_count{node=\"a\",role=\"decode\",device="
				   "\"rxe0\",rail=\"0\"}") == 0);
	free(text);

	/* without HELP lines it is still valid */
	text = render(&A, KVXD_METRICS_TEXT, 0);
	assert_null(strstr(text, "# HELP"));
	why = check_exposition(&k, text);
	if (why)
		fail_msg("%s", why);
	free(text);
}

/* The checker itself catches what it is for (a checker that accepts everything proves
 * nothing). */
static void
test_checker_catches_broken_text(void **state)
{
	static const char *const broken[] = {
		"kvx_x{node=\"a\"} 1\n", /* no TYPE */
		"# TYPE kvx_x counter\nkvx_y{node=\"a\"} 1\n",
		"# TYPE kvx_x counter\nkvx_x{node=\"a\"} 1\n# TYPE kvx_x counter\n",
		/* buckets not cumulative */
		("# TYPE kvx_h histogram\nkvx_h_bucket{node=\"a\",le=\"1\"} 2\n"
		 "kvx_h_bucket{node=\"a\",le=\"2\"} 1\nkvx_h_bucket{node=\"a\",le=\"+Inf\"} 2\n"
		 "kvx_h_sum{node=\"a\"} 1\nkvx_h_count{node=\"a\"} 2\n"),
		/* _count is not the +Inf bucket */
		("# TYPE kvx_h histogram\nkvx_h_bucket{node=\"a\",le=\"1\"} 2\n"
		 "kvx_h_bucket{node=\"a\",le=\"+Inf\"} 2\nkvx_h_sum{node=\"a\"} 1\n"
		 "kvx_h_count{node=\"a\"} 3\n"),
		/* no +Inf bucket */
		("# TYPE kvx_h histogram\nkvx_h_bucket{node=\"a\",le=\"1\"} 2\n"
		 "kvx_h_sum{node=\"a\"} 1\nkvx_h_count{node=\"a\"} 2\n"),
		"# TYPE kvx_x counter\nkvx_x{node=\"a\"} one\n",
		"# TYPE kvx_x counter\nkvx_x 1\n",
	};
	struct checker k;

	(void)state;
	for (size_t i = 0; i < sizeof(broken) / sizeof(broken[0]); i++)
		if (!check_exposition(&k, broken[i]))
			fail_msg("broken text %zu passed: %s", i, broken[i]);
	assert_false(json_valid("{\"a\":1,}"));
	assert_false(json_valid("{\"a\":[1,2}"));
	assert_true(json_valid("{\"a\":[1,2.5,\"x\"],\"b\":{}}"));
}

/* JSON: well-formed, the node at the top, the same values as the text. */
static void
test_json(void **state)
{
	char *json;

	(void)state;
	memset(&A.hist.abort_release, 0, sizeof(A.hist.abort_release));
	kvx_hist_observe(&A.hist.abort_release, &kvx_hist_us, 10);
	kvx_hist_observe(&A.hist.abort_release, &kvx_hist_us, 3000000000ull);
	A.ctr.frames_tx = 7;
	json = render(&A, KVXD_METRICS_JSON, 0);
	if (!json_valid(json))
		fail_msg("not JSON: %.400s", json);
	assert_true(strncmp(json, "{\"node\":\"a\",\"metrics\":{", 23) == 0);
	assert_non_null(strstr(json, "\"kvx_frames_tx_total\":{\"type\":\"counter\",\"samples\":"
				     "[{\"labels\":{},\"value\":7}]}"));
	assert_non_null(strstr(json, "\"kvx_core_wr_posted_total\":{\"type\":\"counter\","
				     "\"samples\":[{\"labels\":{\"core\":\"0\"},\"value\":"));
	assert_non_null(strstr(json, "\"kvx_abort_release_seconds\":{\"type\":\"histogram\","
				     "\"samples\":[{\"labels\":{},\"count\":2,\"sum\":3000.000010,"
				     "\"buckets\":[[0.000008,0],[0.000016,1],"));
	assert_non_null(strstr(json, "[67.108864,1],[\"+Inf\",2]]}"));
	free(json);
}

/* A room's end, an abort's release and a handshake each land in their histogram once, where
 * they happen; the gauges follow the tables. */
static void
test_histograms_fed_where_events_happen(void **state)
{
	static struct kvxd_pool pool = {.npages = 4, .page_size = 4096, .nbufs = 2};
	static const char names1[1][KVX_NAME_MAX] = {"b"};
	static const uint32_t pages[3] = {0, 1, 2};
	struct kvxd_hists before_a;
	struct kvxd_msg m = {.type = KVXD_MSG_ROOM_OPEN};
	struct kvxd_room *r;
	int src[1];
	char *text;

	(void)state;
	/* a handshake: a's setup with b, from leaving IDLE to READY */
	before_a = A.hist;
	kvxd_peer_admin(&A, "b", "resume");
	PUMP_UNTIL(peer_of(&A, "b")->state == KVXD_PEER_READY &&
		   peer_of(&B, "a")->state == KVXD_PEER_READY);
	assert_int_equal(A.hist.handshake.count, before_a.handshake.count + 1);
	text = render(&A, KVXD_METRICS_TEXT, 0);
	assert_true(value_of(text, "kvx_peers{node=\"a\",state=\"READY\"}") == 1);
	assert_true(value_of(text, "kvx_peers{node=\"a\",state=\"IDLE\"}") == 0);
	free(text);

	/* a decode room that is aborted before any source had its metadata: released at once */
	src[0] = peer_of(&A, "b")->idx;
	/* paused: no metadata goes to b, so the abort below releases at once */
	kvxd_peer_admin(&A, "b", "pause");
	PUMP_UNTIL(peer_of(&A, "b")->state == KVXD_PEER_IDLE);
	r = decode_room_new1(&A, 77, -1, &pool, pages, 3, names1, src, 1);
	assert_non_null(r);
	m.room = &r->pc;
	assert_int_equal(kvx_pcore_send(&A.cores[r->pc.core], &m), 0);
	assert_int_equal(A.nrooms[KVX_ROOM_DECODE], 1);
	fake_us += 3000; /* 3 ms open to abort */
	assert_true(kvxd_decode_abort(&A, r, -ECANCELED, "test") > 0);
	fake_us += 500; /* the release is immediate in fake time: the loop sees it next */
	for (int i = 0; i < 20 && kvx_room_table_count(A.by_id); i++) {
		node_poll_cores(&A);
		kvxd_loop_once(&A, 0);
	}
	assert_int_equal(kvx_room_table_count(A.by_id), 0);
	assert_int_equal(A.nrooms[KVX_ROOM_DECODE], 0);
	assert_int_equal(A.hist.abort_release.count, before_a.abort_release.count + 1);
	/* open to RELEASED: one observation, counted as decode RELEASED, 3 ms < v <= 4.096 ms */
	{
		const struct kvx_hist *h =
			&A.hist.room_latency[KVX_ROOM_DECODE][KVXD_OUTCOME_FAILED];
		const struct kvx_hist *was =
			&before_a.room_latency[KVX_ROOM_DECODE][KVXD_OUTCOME_FAILED];

		assert_int_equal(h->count, was->count + 1);
		assert_int_equal(h->bucket[kvx_hist_index(&kvx_hist_us, 3000)],
				 was->bucket[kvx_hist_index(&kvx_hist_us, 3000)] + 1);
	}
	text = render(&A, KVXD_METRICS_TEXT, 0);
	assert_true(value_of(text, "kvx_room_latency_seconds_count{node=\"a\",role=\"decode\","
				   "state=\"RELEASED\"}") >= 1);
	assert_true(value_of(text, "kvx_rooms{node=\"a\",role=\"decode\"}") == 0);
	assert_true(value_of(text, "kvx_abort_transitions_total{node=\"a\",from=\"ARMED\",to="
				   "\"RELEASED\"}") >= 1);
	free(text);
}

/* A room's end counts once, and only an end its engine is told (decode FAILED is not one). */
static void
test_room_end_counted_once(void **state)
{
	static struct kvxd_pool pool = {.npages = 4, .page_size = 4096, .nbufs = 2};
	static const char names1[1][KVX_NAME_MAX] = {"b"};
	static const uint32_t pages[3] = {0, 1, 2};
	const int src[1] = {peer_of(&A, "b")->idx};
	struct kvxd_hists was = A.hist;
	struct kvxd_room *r = decode_room_new1(&A, 78, -1, &pool, pages, 3, names1, src, 1);

	(void)state;
	assert_non_null(r);
	fake_us += 20;
	kvxd_room_ended(&A, r, KVX_ROOM_FAILED, 0); /* decode: not its end yet */
	assert_int_equal(A.hist.room_latency[0][1].count, was.room_latency[0][1].count);
	/* its core set SUCCESS 8 µs before the control core took the EVENT: the room took 12 */
	kvxd_room_ended(&A, r, KVX_ROOM_SUCCESS, fake_us - 8);
	kvxd_room_ended(&A, r, KVX_ROOM_SUCCESS, 0);
	assert_int_equal(A.hist.room_latency[0][0].count, was.room_latency[0][0].count + 1);
	assert_int_equal(A.hist.room_latency[0][0].sum, was.room_latency[0][0].sum + 12);
	/* its bytes: 3 pages x 4096 B x 2 buffers */
	assert_int_equal(A.hist.room_bytes[0].count, was.room_bytes[0].count + 1);
	assert_int_equal(A.hist.room_bytes[0].sum, was.room_bytes[0].sum + 3 * 4096 * 2);
	kvxd_room_remove(&A, r);
}

/* `counters` (what kvxctl prints) is the exposition without HELP lines, histograms included;
 * "counters json" too; a buffer too small says so.  On the largest node (every polling core,
 * every peer, every counter at its widest) it is longer than one engine message: the whole text
 * comes from kvxd_admin_text (paged out by KVX_ENG_ADMIN_AT), well inside its bound. */
static void
test_admin_counters(void **state)
{
	static char out[KVX_ENG_TEXT_MAX];
	static struct kvxd saved;
	struct kvxd_metrics_buf b;
	struct checker k;
	const char *why;
	int i;

	(void)state;
	assert_int_equal(kvxd_admin(&A, "counters", false, -1, out, sizeof(out)), 0);
	why = check_exposition(&k, out);
	if (why)
		fail_msg("%s", why);
	assert_non_null(strstr(out, "kvx_room_latency_seconds_bucket{"));
	assert_null(strstr(out, "# HELP"));
	assert_int_equal(kvxd_admin(&A, "counters json", false, -1, out, sizeof(out)), 0);
	assert_true(json_valid(out));
	assert_int_equal(kvxd_admin(&A, "counters", false, -1, out, 1000), -EMSGSIZE);
	assert_non_null(strstr(out, "scrape [metrics] listen"));

	/* the largest node: every counter 20 digits wide */
	saved = A;
	A.ncores = KVX_MAX_CORES;
	for (i = 1; i < KVX_MAX_CORES; i++)
		memset(&A.cores[i], 0, sizeof(A.cores[i]));
	for (i = 0; i < KVX_MAX_CORES; i++)
		memset(&A.cores[i].st, 0xff, sizeof(A.cores[i].st));
	A.npeers = KVX_MAX_PEERS;
	for (i = 0; i < KVX_MAX_PEERS; i++)
		snprintf(A.peers[i].name, sizeof(A.peers[i].name), "%.*s%d", KVX_CFG_NAME_MAX - 4,
			 "a-peer-with-a-name-as-long-as-a-name-may-be-....................", i);
	memset(&A.ctr, 0xff, sizeof(A.ctr));
	memset(&A.hist, 0xff, sizeof(A.hist));
	fake_ms += KVXD_ADMIN_CACHE_MS; /* an engine's renderings above are not served again */
	assert_int_equal(kvxd_admin(&A, "counters", false, -1, out, sizeof(out)), -EMSGSIZE);
	assert_int_equal(kvxd_admin_text(&A, "counters", false, -1, &b), 0);
	print_message("counters at their largest: %zu bytes (bound %u)\n", b.len,
		      KVXD_ADMIN_TEXT_MAX);
	assert_true(b.len > sizeof(out) && b.len < KVXD_ADMIN_TEXT_MAX / 4);
	assert_int_equal(strlen(b.p), b.len);
	why = check_exposition(&k, b.p);
	if (why)
		fail_msg("%s", why);
	kvxd_metrics_buf_fini(&b);
	assert_int_equal(kvxd_admin_text(&A, "counters json", false, -1, &b), 0);
	print_message("counters json at their largest: %zu bytes\n", b.len);
	assert_true(json_valid(b.p));
	kvxd_metrics_buf_fini(&b);
	memcpy(A.cores, saved.cores, sizeof(A.cores)); /* those the test zeroed too */
	A.ncores = saved.ncores;
	A.npeers = saved.npeers;
	memcpy(A.peers, saved.peers, sizeof(A.peers));
	A.ctr = saved.ctr;
	A.hist = saved.hist;
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_hist_buckets),
		cmocka_unit_test(test_checker_catches_broken_text),
		cmocka_unit_test_setup_teardown(test_exposition_format, setup, teardown),
		cmocka_unit_test_setup_teardown(test_json, setup, teardown),
		cmocka_unit_test_setup_teardown(test_histograms_fed_where_events_happen, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_room_end_counted_once, setup, teardown),
		cmocka_unit_test_setup_teardown(test_admin_counters, setup, teardown),
	};

	int rc;

	rcu_register_thread();
	rc = cmocka_run_group_tests(tests, NULL, NULL);
	rcu_unregister_thread();
	return rc;
}
