/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kvx-bench: the bundled load generator.  One process is an engine of a prefill kvxd and an
 * engine of a decode kvxd at the same time; it keeps K rooms in flight between them, verifies
 * every byte that lands, and reports throughput and room latency.
 *
 * Pools: one memfd per side, nbufs buffers of inflight * pages pages each.  Room slot s owns
 * pages [s*P, (s+1)*P) of both pools (with --scatter its destination pages are a fresh random
 * permutation of that range per room, so the runs kvxd merges are broken up).
 *
 * Per room: fill the slot's source pages (every buffer) with a pattern derived from (room id,
 * page index in the room, buffer index); poison its destination pages; kvx_room_open on
 * decode with sources = {prefill node}; kvx_chunk_submit the P pages as C chunks on prefill.
 * The room's result is decided by decode SUCCESS (then every destination byte is verified) or
 * FAILED on either side.  The slot is reused only when no write of the room can still land in
 * its destination pages (decode SUCCESS or RELEASED, or a FAILED decode room that kvxd let us
 * close: it answers -EBUSY while a source may still write) and prefill has SUCCESS or FAILED
 * (its writes are complete, so the source pages may be refilled); then the room is closed on
 * both sides.  A room that does not get there within --timeout is counted as timed out and its
 * slot is retired (never reused).
 *
 * Exit: 0 iff no room timed out, every byte of every successful room verified and (unless
 * --allow-failures) no room failed; 1 otherwise or on an error; 2 on a usage error.
 */
#include "kvx/kvx.h"

#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <math.h>
#include <poll.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/random.h>
#include <time.h>
#include <unistd.h>

#define NSEC 1000000000LL
#define WATCHDOG_S 60 /* default --timeout: beyond kvxd's default waiting timeout (30 s) */
#define CLOSE_RETRY_NS (20 * 1000000LL) /* kvx_room_close said -EBUSY: try again after this */
#define POLL_MAX_MS 100
#define EVENT_BATCH 64
#define FAIL_LOG_MAX 10 /* failure lines printed to stderr; then only counted */
#define ROOM_BASE_MASK ((1ULL << 62) - 1)
#define POISON 0xdb
#define INFLIGHT_MAX 4096
#define BUFS_MAX 4096
#define PAGE_SIZE_MAX (16u << 20)

struct opts {
	const char *prefill;
	const char *decode;
	uint64_t rooms;
	bool rooms_set;
	double duration; /* seconds; 0: run a room count */
	double timeout;	 /* seconds: per-room watchdog */
	uint32_t inflight;
	uint32_t page_size;
	uint32_t pages;
	uint32_t chunks;
	uint32_t bufs;
	bool scatter;
	bool allow_failures;
	bool json;
	bool seed_set;
	uint64_t seed;
};

struct side {
	const char *label; /* "prefill" or "decode" */
	const char *path;
	struct kvx_conn *c;
	int memfd;
	uint8_t *base;
	size_t bytes;
	int pool;
};

enum slot_phase {
	SLOT_FREE = 0,	  /* no room */
	SLOT_ACTIVE = 1,  /* a room is open in it */
	SLOT_RETIRED = 2, /* its room timed out: pages may still be written, never reused */
};

struct slot {
	int phase;	  /* enum slot_phase */
	uint64_t room;	  /* room id while ACTIVE */
	int64_t t_open;	  /* ns */
	int dec_state;	  /* last decode state seen, -1: none */
	int pre_state;	  /* last prefill state seen, -1: none */
	bool dec_success; /* decode SUCCESS seen (counted, verified) */
	bool dec_failed;  /* decode FAILED seen (counted) */
	bool pre_failed;  /* prefill FAILED seen (counted) */
	bool dec_closed;  /* kvx_room_close done on decode */
	bool pre_closed;  /* kvx_room_close done on prefill */
	int64_t t_retry;  /* ns: when to retry a close that returned -EBUSY, 0: none */
	uint32_t *dst;	  /* pages[P]: destination pool page of room page i */
};

struct bench {
	struct opts o;
	struct side pre;
	struct side dec;
	struct slot *slots;
	uint32_t *src;	 /* scratch: source page list of a chunk */
	uint32_t npages; /* pages per buffer in each pool: inflight * pages */
	uint64_t rng;	 /* xorshift state for --scatter and the room base */
	uint64_t room_base;
	uint64_t next_room;
	uint64_t opened;  /* rooms opened or refused by decode */
	uint64_t active;  /* slots ACTIVE */
	uint64_t retired; /* slots RETIRED */
	uint64_t ok;	  /* rooms with decode SUCCESS */
	uint64_t failed_decode;
	uint64_t failed_prefill;
	uint64_t timed_out;
	uint64_t bytes; /* verified-or-not bytes of successful rooms */
	uint64_t mismatched;
	uint64_t stray_events;
	uint64_t writes; /* merged RDMA writes the submitted chunks make */
	uint64_t write_bytes;
	uint64_t *lat; /* ns, open -> decode SUCCESS, per successful room */
	size_t nlat;
	size_t lat_cap;
	unsigned fail_logged;
	int64_t t_start;
	int64_t t_stop;	     /* ns: stop opening rooms (duration), 0: none */
	int64_t watchdog_ns; /* --timeout */
};

static volatile sig_atomic_t interrupted;

static void
on_sigint(int sig)
{
	(void)sig;
	interrupted = 1;
}

static int64_t
now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * NSEC + ts.tv_nsec;
}

static uint64_t
splitmix64(uint64_t x)
{
	x += 0x9e3779b97f4a7c15ULL;
	x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
	x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
	return x ^ (x >> 31);
}

static uint64_t
xorshift64(uint64_t *s)
{
	uint64_t x = *s;

	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	*s = x;
	return x;
}

/* The pattern of room page `page` of buffer `buf`: a xorshift64 stream seeded from all three. */
static uint64_t
pattern_seed(uint64_t room, uint32_t page, uint32_t buf)
{
	uint64_t s = splitmix64(splitmix64(room) ^ ((uint64_t)buf << 32 | page));

	return s ? s : 1;
}

static void
page_fill(uint8_t *p, size_t len, uint64_t seed)
{
	uint64_t *w = (uint64_t *)p; /* pages are 64-byte aligned: mmap base, page_size % 64 */
	size_t i;

	for (i = 0; i < len / sizeof(uint64_t); i++)
		w[i] = xorshift64(&seed);
}

/* Returns the number of bytes of p that differ from the pattern. */
static uint64_t
page_verify(const uint8_t *p, size_t len, uint64_t seed)
{
	const uint64_t *w = (const uint64_t *)p;
	uint64_t bad = 0, d;
	size_t i;
	int k;

	for (i = 0; i < len / sizeof(uint64_t); i++) {
		d = w[i] ^ xorshift64(&seed);
		if (d)
			for (k = 0; k < 8; k++)
				bad += ((d >> (8 * k)) & 0xff) != 0;
	}
	return bad;
}

static uint8_t *
page_addr(const struct bench *b, const struct side *sd, uint32_t buf, uint32_t page)
{
	return sd->base + ((size_t)buf * b->npages + page) * b->o.page_size;
}

/* ---- options ---- */

static void
usage(FILE *f)
{
	fprintf(f,
		"usage: kvx-bench --prefill SOCK --decode SOCK [options]\n"
		"  --prefill SOCK     engine socket of the prefill (source) kvxd\n"
		"  --decode SOCK      engine socket of the decode (destination) kvxd\n"
		"  --rooms N          rooms to run (default 64; with --duration: an upper bound)\n"
		"  --duration SEC     open rooms until SEC seconds have passed, then finish\n"
		"  --inflight K       rooms in flight (default 8, at most %d)\n"
		"  --page-size B      page size in bytes, a multiple of 64 (default 4096)\n"
		"  --pages P          pages per room (default 16, at most %d)\n"
		"  --chunks C         chunks per room (default 1, at most P)\n"
		"  --bufs NB          buffers per pool (default 4)\n"
		"  --scatter          random destination page order per room\n"
		"  --seed S           seed of the room ids and --scatter (default: random)\n"
		"  --allow-failures   failed rooms do not fail the run (timeouts and bad bytes "
		"do)\n"
		"  --timeout SEC      a room not done SEC s after its open counts as timed out "
		"(default %d)\n"
		"  --json             print the result as one JSON object\n"
		"  -h, --help         this help\n",
		INFLIGHT_MAX, KVX_MAX_ROOM_PAGES, WATCHDOG_S);
}

static int
parse_u64(const char *name, const char *s, uint64_t min, uint64_t max, uint64_t *out)
{
	unsigned long long v;
	char *end;

	errno = 0;
	if (!s || !*s || *s == '-' || *s == '+')
		goto bad;
	v = strtoull(s, &end, 0);
	if (errno || *end || v < min || v > max)
		goto bad;
	*out = v;
	return 0;
bad:
	fprintf(stderr,
		"kvx-bench: --%s: expected an integer in [%" PRIu64 ", %" PRIu64 "], got '%s'\n",
		name, min, max, s ? s : "");
	return -EINVAL;
}

static int
parse_u32(const char *name, const char *s, uint32_t min, uint32_t max, uint32_t *out)
{
	uint64_t v;
	int r = parse_u64(name, s, min, max, &v);

	if (!r)
		*out = (uint32_t)v;
	return r;
}

static int
parse_seconds(const char *name, const char *s, double *out)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(s, &end);
	if (errno || end == s || *end || !isfinite(v) || v <= 0 || v > 1e7) {
		fprintf(stderr, "kvx-bench: --%s: expected seconds > 0, got '%s'\n", name, s);
		return -EINVAL;
	}
	*out = v;
	return 0;
}

enum {
	OPT_PREFILL = 256,
	OPT_DECODE,
	OPT_ROOMS,
	OPT_DURATION,
	OPT_INFLIGHT,
	OPT_PAGE_SIZE,
	OPT_PAGES,
	OPT_CHUNKS,
	OPT_BUFS,
	OPT_SCATTER,
	OPT_SEED,
	OPT_ALLOW_FAILURES,
	OPT_JSON,
	OPT_TIMEOUT,
};

/* Returns 0, 1 (--help: exit 0) or -EINVAL (usage error). */
static int
parse_opts(int argc, char **argv, struct opts *o)
{
	static const struct option lo[] = {
		{"prefill", required_argument, NULL, OPT_PREFILL},
		{"decode", required_argument, NULL, OPT_DECODE},
		{"rooms", required_argument, NULL, OPT_ROOMS},
		{"duration", required_argument, NULL, OPT_DURATION},
		{"inflight", required_argument, NULL, OPT_INFLIGHT},
		{"page-size", required_argument, NULL, OPT_PAGE_SIZE},
		{"pages", required_argument, NULL, OPT_PAGES},
		{"chunks", required_argument, NULL, OPT_CHUNKS},
		{"bufs", required_argument, NULL, OPT_BUFS},
		{"scatter", no_argument, NULL, OPT_SCATTER},
		{"seed", required_argument, NULL, OPT_SEED},
		{"allow-failures", no_argument, NULL, OPT_ALLOW_FAILURES},
		{"json", no_argument, NULL, OPT_JSON},
		{"timeout", required_argument, NULL, OPT_TIMEOUT},
		{"help", no_argument, NULL, 'h'},
		{NULL, 0, NULL, 0},
	};
	int opt, r = 0;

	*o = (struct opts){
		.rooms = 64,
		.inflight = 8,
		.page_size = 4096,
		.pages = 16,
		.chunks = 1,
		.bufs = 4,
		.timeout = WATCHDOG_S,
	};
	opterr = 1;
	while ((opt = getopt_long(argc, argv, "h", lo, NULL)) != -1) {
		switch (opt) {
		case OPT_PREFILL:
			o->prefill = optarg;
			break;
		case OPT_DECODE:
			o->decode = optarg;
			break;
		case OPT_ROOMS:
			r = parse_u64("rooms", optarg, 1, UINT64_MAX / 2, &o->rooms);
			o->rooms_set = true;
			break;
		case OPT_DURATION:
			r = parse_seconds("duration", optarg, &o->duration);
			break;
		case OPT_TIMEOUT:
			r = parse_seconds("timeout", optarg, &o->timeout);
			break;
		case OPT_INFLIGHT:
			r = parse_u32("inflight", optarg, 1, INFLIGHT_MAX, &o->inflight);
			break;
		case OPT_PAGE_SIZE:
			r = parse_u32("page-size", optarg, 64, PAGE_SIZE_MAX, &o->page_size);
			if (!r && o->page_size % 64) {
				fprintf(stderr,
					"kvx-bench: --page-size: must be a multiple of 64\n");
				r = -EINVAL;
			}
			break;
		case OPT_PAGES:
			r = parse_u32("pages", optarg, 1, KVX_MAX_ROOM_PAGES, &o->pages);
			break;
		case OPT_CHUNKS:
			r = parse_u32("chunks", optarg, 1, KVX_MAX_ROOM_PAGES, &o->chunks);
			break;
		case OPT_BUFS:
			r = parse_u32("bufs", optarg, 1, BUFS_MAX, &o->bufs);
			break;
		case OPT_SCATTER:
			o->scatter = true;
			break;
		case OPT_SEED:
			r = parse_u64("seed", optarg, 0, UINT64_MAX, &o->seed);
			o->seed_set = true;
			break;
		case OPT_ALLOW_FAILURES:
			o->allow_failures = true;
			break;
		case OPT_JSON:
			o->json = true;
			break;
		case 'h':
			return 1;
		default:
			return -EINVAL; /* getopt printed why */
		}
		if (r)
			return r;
	}
	if (optind < argc) {
		fprintf(stderr, "kvx-bench: unexpected argument '%s'\n", argv[optind]);
		return -EINVAL;
	}
	if (!o->prefill || !o->decode) {
		fprintf(stderr, "kvx-bench: --prefill and --decode are required\n");
		return -EINVAL;
	}
	if (o->chunks > o->pages) {
		fprintf(stderr, "kvx-bench: --chunks (%u) must not exceed --pages (%u)\n",
			o->chunks, o->pages);
		return -EINVAL;
	}
	return 0;
}

/* ---- setup ---- */

static int
side_open(struct bench *b, struct side *sd)
{
	struct kvx_pool_geometry g = {
		.page_size = b->o.page_size,
		.npages = b->npages,
		.nbufs = b->o.bufs,
	};
	char name[32];
	int r;

	sd->memfd = -1;
	sd->base = MAP_FAILED;
	sd->c = kvx_connect(sd->path);
	if (!sd->c) {
		r = -errno;
		fprintf(stderr, "kvx-bench: %s: %s\n", sd->path, strerror(errno));
		return r;
	}
	if (__builtin_mul_overflow((size_t)b->o.page_size, (size_t)b->npages, &sd->bytes) ||
	    __builtin_mul_overflow(sd->bytes, (size_t)b->o.bufs, &sd->bytes)) {
		fprintf(stderr, "kvx-bench: %s pool size overflows\n", sd->label);
		return -EOVERFLOW;
	}
	snprintf(name, sizeof(name), "kvx-bench-%s", sd->label);
	sd->memfd = memfd_create(name, MFD_CLOEXEC);
	if (sd->memfd < 0) {
		r = -errno;
		fprintf(stderr, "kvx-bench: memfd_create: %s\n", strerror(errno));
		return r;
	}
	if (ftruncate(sd->memfd, (off_t)sd->bytes) < 0) {
		r = -errno;
		fprintf(stderr, "kvx-bench: %s pool of %zu bytes: %s\n", sd->label, sd->bytes,
			strerror(errno));
		return r;
	}
	sd->base = mmap(NULL, sd->bytes, PROT_READ | PROT_WRITE, MAP_SHARED, sd->memfd, 0);
	if (sd->base == MAP_FAILED) {
		r = -errno;
		fprintf(stderr, "kvx-bench: mmap %s pool of %zu bytes: %s\n", sd->label, sd->bytes,
			strerror(errno));
		return r;
	}
	memset(sd->base, 0, sd->bytes); /* fault it in before kvxd registers it */
	r = kvx_pool_register(sd->c, sd->memfd, &g);
	if (r < 0) {
		fprintf(stderr, "kvx-bench: %s: pool register (%u x %u pages of %u bytes): %s\n",
			sd->path, g.nbufs, g.npages, g.page_size, strerror(-r));
		return r;
	}
	sd->pool = r;
	return 0;
}

static void
side_close(struct side *sd)
{
	if (sd->c && sd->pool > 0)
		kvx_pool_unregister(sd->c, sd->pool);
	kvx_disconnect(sd->c);
	sd->c = NULL;
	if (sd->base != MAP_FAILED && sd->base)
		munmap(sd->base, sd->bytes);
	if (sd->memfd >= 0)
		close(sd->memfd);
}

/* ---- rooms ---- */

static void
fail_log(struct bench *b, uint64_t room, const char *what, const struct kvx_event *ev, int err)
{
	if (b->fail_logged++ >= FAIL_LOG_MAX) {
		if (b->fail_logged == FAIL_LOG_MAX + 1)
			fprintf(stderr, "kvx-bench: further failures are counted, not shown\n");
		return;
	}
	if (ev)
		fprintf(stderr, "kvx-bench: room %" PRIu64 ": %s FAILED (gen %u, %s%s%s)\n", room,
			what, ev->generation, ev->error ? strerror(-ev->error) : "no error code",
			ev->reason[0] ? ": " : "", ev->reason);
	else
		fprintf(stderr, "kvx-bench: room %" PRIu64 ": %s: %s\n", room, what,
			strerror(-err));
}

static struct slot *
slot_find(struct bench *b, uint64_t room)
{
	uint32_t i;

	for (i = 0; i < b->o.inflight; i++)
		if (b->slots[i].phase == SLOT_ACTIVE && b->slots[i].room == room)
			return &b->slots[i];
	return NULL;
}

static int
lat_push(struct bench *b, uint64_t ns)
{
	if (b->nlat == b->lat_cap) {
		size_t ncap = b->lat_cap ? b->lat_cap * 2 : 1024;
		uint64_t *n = realloc(b->lat, ncap * sizeof(*n));

		if (!n)
			return -ENOMEM;
		b->lat = n;
		b->lat_cap = ncap;
	}
	b->lat[b->nlat++] = ns;
	return 0;
}

/* Fill, poison, open on decode, submit on prefill.  Returns 0 (the slot is ACTIVE, or the open
 * was refused by decode and counted as a failed room) or -errno (fatal). */
static int
room_start(struct bench *b, uint32_t s)
{
	struct slot *sl = &b->slots[s];
	const uint32_t P = b->o.pages, C = b->o.chunks, ps = b->o.page_size;
	const char *sources[1] = {kvx_node_name(b->pre.c)};
	uint64_t room = b->next_room++;
	uint32_t i, j, buf, off, n;
	int64_t gen;
	int r;

	for (i = 0; i < P; i++)
		sl->dst[i] = s * P + i;
	if (b->o.scatter) {
		for (i = P - 1; i > 0; i--) {
			uint32_t k = (uint32_t)(xorshift64(&b->rng) % (i + 1));
			uint32_t t = sl->dst[i];

			sl->dst[i] = sl->dst[k];
			sl->dst[k] = t;
		}
	}
	for (buf = 0; buf < b->o.bufs; buf++) {
		for (i = 0; i < P; i++) {
			page_fill(page_addr(b, &b->pre, buf, s * P + i), ps,
				  pattern_seed(room, i, buf));
			memset(page_addr(b, &b->dec, buf, sl->dst[i]), POISON, ps);
		}
	}

	b->opened++;
	sl->t_open = now_ns();
	gen = kvx_room_open(b->dec.c, room, b->dec.pool, sl->dst, P, sources, 1);
	if (gen < 0) {
		if (gen == -ECONNRESET || gen == -ETIMEDOUT || gen == -EBADMSG) {
			fprintf(stderr, "kvx-bench: %s: room open: %s\n", b->dec.path,
				strerror((int)-gen));
			return (int)gen;
		}
		b->failed_decode++;
		fail_log(b, room, "decode room open", NULL, (int)gen);
		return 0;
	}

	sl->phase = SLOT_ACTIVE;
	sl->room = room;
	sl->dec_state = -1;
	sl->pre_state = -1;
	sl->dec_success = sl->dec_failed = sl->pre_failed = false;
	sl->dec_closed = sl->pre_closed = false;
	sl->t_retry = 0;
	b->active++;

	for (off = 0, j = 0; j < C; j++, off += n) {
		n = P / C + (j < P % C ? 1 : 0);
		for (i = 0; i < n; i++) {
			b->src[i] = s * P + off + i;
			/* kvxd merges pages contiguous on both sides into one WRITE per buffer */
			if (i == 0 || sl->dst[off + i] != sl->dst[off + i - 1] + 1)
				b->writes += b->o.bufs;
		}
		b->write_bytes += (uint64_t)n * ps * b->o.bufs;
		r = kvx_chunk_submit(b->pre.c, room, j, b->pre.pool, b->src, n, off, j == C - 1);
		if (r < 0) {
			fprintf(stderr,
				"kvx-bench: %s: chunk submit (room %" PRIu64 ", chunk %u): %s\n",
				b->pre.path, room, j, strerror(-r));
			return r;
		}
	}
	return 0;
}

static uint64_t
room_verify(struct bench *b, const struct slot *sl)
{
	uint64_t bad = 0;
	uint32_t buf, i;

	for (buf = 0; buf < b->o.bufs; buf++)
		for (i = 0; i < b->o.pages; i++)
			bad += page_verify(page_addr(b, &b->dec, buf, sl->dst[i]), b->o.page_size,
					   pattern_seed(sl->room, i, buf));
	return bad;
}

/* Close the room on one side.  Returns 0 (closed or unknown there), -EBUSY (try later) or
 * -errno (fatal). */
static int
room_close_side(struct bench *b, struct side *sd, uint64_t room)
{
	int r = kvx_room_close(sd->c, room);

	if (r == 0 || r == -ENOENT || r == -EBUSY)
		return r;
	if (r == -ECONNRESET || r == -ETIMEDOUT || r == -EBADMSG) {
		fprintf(stderr, "kvx-bench: %s: room close: %s\n", sd->path, strerror(-r));
		return r;
	}
	fprintf(stderr, "kvx-bench: %s: room %" PRIu64 " close: %s (ignored)\n", sd->path, room,
		strerror(-r));
	return 0;
}

/* If both sides are settled, close the room and free the slot.  Returns 0 or -errno (fatal). */
static int
slot_settle(struct bench *b, struct slot *sl, int64_t now)
{
	/* prefill: its writes are complete */
	bool pre_done = sl->pre_state == KVX_STATE_SUCCESS || sl->pre_state == KVX_STATE_FAILED;
	bool dec_done;
	int r;

	if (sl->t_retry && now < sl->t_retry)
		return 0;
	sl->t_retry = 0;
	/* decode: no write of the room can land any more */
	dec_done = sl->dec_state == KVX_STATE_SUCCESS || sl->dec_state == KVX_STATE_RELEASED ||
		   sl->dec_closed;
	if (!dec_done && sl->dec_failed) {
		/* a FAILED room's pages are back when kvxd reports RELEASED or lets the room be
		 * closed: it refuses (-EBUSY) while a source may still write into them */
		r = room_close_side(b, &b->dec, sl->room);
		if (r == -EBUSY)
			goto busy;
		if (r < 0)
			return r;
		sl->dec_closed = dec_done = true;
	}
	if (!dec_done || !pre_done)
		return 0;
	if (!sl->dec_closed) {
		r = room_close_side(b, &b->dec, sl->room);
		if (r == -EBUSY)
			goto busy;
		if (r < 0)
			return r;
		sl->dec_closed = true;
	}
	if (!sl->pre_closed) {
		r = room_close_side(b, &b->pre, sl->room);
		if (r == -EBUSY)
			goto busy;
		if (r < 0)
			return r;
		sl->pre_closed = true;
	}
	sl->phase = SLOT_FREE;
	b->active--;
	return 0;
busy:
	sl->t_retry = now + CLOSE_RETRY_NS;
	return 0;
}

static int
on_event(struct bench *b, bool decode, const struct kvx_event *ev, int64_t now)
{
	struct slot *sl = slot_find(b, ev->room);
	int *st;

	if (!sl || ev->state < 0 || ev->state > KVX_STATE_RELEASED) {
		b->stray_events++;
		return 0;
	}
	st = decode ? &sl->dec_state : &sl->pre_state;
	if (ev->state <= *st)
		return 0; /* states only move forward: a repeat, nothing new */
	*st = ev->state;

	if (decode && ev->state == KVX_STATE_SUCCESS && !sl->dec_success && !sl->dec_failed) {
		uint64_t bad;

		sl->dec_success = true;
		b->ok++;
		b->bytes += (uint64_t)b->o.pages * b->o.page_size * b->o.bufs;
		if (lat_push(b, (uint64_t)(now - sl->t_open)) < 0)
			return -ENOMEM;
		bad = room_verify(b, sl);
		if (bad) {
			b->mismatched += bad;
			fprintf(stderr,
				"kvx-bench: room %" PRIu64 ": %" PRIu64
				" bytes differ from what prefill sent\n",
				sl->room, bad);
		}
	} else if (decode && ev->state >= KVX_STATE_FAILED && !sl->dec_failed) {
		/* FAILED, or DRAINING/RELEASED whose FAILED we never saw */
		sl->dec_failed = true;
		b->failed_decode++;
		fail_log(b, sl->room, "decode", ev, 0);
	} else if (!decode && ev->state == KVX_STATE_FAILED && !sl->pre_failed) {
		sl->pre_failed = true;
		b->failed_prefill++;
		fail_log(b, sl->room, "prefill", ev, 0);
	}
	return slot_settle(b, sl, now);
}

static int
read_events(struct bench *b, struct side *sd, int64_t *now, int *got)
{
	struct kvx_event ev[EVENT_BATCH];
	int n, i, r;

	do {
		n = kvx_event_read(sd->c, ev, EVENT_BATCH, 0);
		if (n < 0) {
			fprintf(stderr, "kvx-bench: %s: reading events: %s\n", sd->path,
				strerror(-n));
			return n;
		}
		*now = now_ns();
		for (i = 0; i < n; i++) {
			r = on_event(b, sd == &b->dec, &ev[i], *now);
			if (r < 0)
				return r;
		}
		*got += n;
	} while (n == EVENT_BATCH);
	return 0;
}

/* Watchdog and delayed closes.  Returns 0 or -errno (fatal). */
static int
slots_tick(struct bench *b, int64_t now)
{
	uint32_t i;
	int r;

	for (i = 0; i < b->o.inflight; i++) {
		struct slot *sl = &b->slots[i];

		if (sl->phase != SLOT_ACTIVE)
			continue;
		if (now - sl->t_open > b->watchdog_ns) {
			fprintf(stderr,
				"kvx-bench: room %" PRIu64 ": timed out after %gs (decode %s, "
				"prefill %s); its slot is retired\n",
				sl->room, b->o.timeout,
				sl->dec_state < 0 ? "no event" : kvx_state_str(sl->dec_state),
				sl->pre_state < 0 ? "no event" : kvx_state_str(sl->pre_state));
			b->timed_out++;
			sl->phase = SLOT_RETIRED;
			b->active--;
			b->retired++;
			continue;
		}
		if (sl->t_retry && now >= sl->t_retry) {
			r = slot_settle(b, sl, now);
			if (r < 0)
				return r;
		}
	}
	return 0;
}

static bool
may_open(const struct bench *b, int64_t now)
{
	if (interrupted || b->retired == b->o.inflight)
		return false;
	if (b->o.duration > 0 && now >= b->t_stop)
		return false;
	if ((b->o.duration <= 0 || b->o.rooms_set) && b->opened >= b->o.rooms)
		return false;
	return true;
}

static int
run(struct bench *b)
{
	struct pollfd pf[2];
	int64_t now, next;
	uint32_t s;
	int got, r, ms;

	b->t_start = now_ns();
	if (b->o.duration > 0)
		b->t_stop = b->t_start + (int64_t)(b->o.duration * NSEC);
	for (;;) {
		now = now_ns();
		for (s = 0; s < b->o.inflight && may_open(b, now); s++) {
			if (b->slots[s].phase != SLOT_FREE)
				continue;
			r = room_start(b, s);
			if (r < 0)
				return r;
			now = now_ns();
		}
		if (!b->active && !may_open(b, now))
			return 0;

		got = 0;
		r = read_events(b, &b->dec, &now, &got);
		if (!r)
			r = read_events(b, &b->pre, &now, &got);
		if (!r)
			r = slots_tick(b, now);
		if (r < 0)
			return r;
		if (got)
			continue;

		/* nothing happened: sleep until an event, a retry, the watchdog or the stop time */
		next = now + (int64_t)POLL_MAX_MS * 1000000;
		if (b->t_stop && b->t_stop > now && b->t_stop < next)
			next = b->t_stop;
		for (s = 0; s < b->o.inflight; s++)
			if (b->slots[s].phase == SLOT_ACTIVE && b->slots[s].t_retry &&
			    b->slots[s].t_retry < next)
				next = b->slots[s].t_retry;
		ms = next > now ? (int)((next - now + 999999) / 1000000) : 0;
		pf[0] = (struct pollfd){.fd = kvx_conn_fd(b->dec.c), .events = POLLIN};
		pf[1] = (struct pollfd){.fd = kvx_conn_fd(b->pre.c), .events = POLLIN};
		if (poll(pf, 2, ms) < 0 && errno != EINTR) {
			r = -errno;
			fprintf(stderr, "kvx-bench: poll: %s\n", strerror(errno));
			return r;
		}
	}
}

/* ---- report ---- */

static int
cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* Nearest-rank percentile of the sorted latencies, in microseconds (0 when there are none). */
static double
lat_pct_us(const struct bench *b, double pct)
{
	size_t k;

	if (!b->nlat)
		return 0;
	k = (size_t)ceil(pct / 100.0 * (double)b->nlat);
	if (k < 1)
		k = 1;
	if (k > b->nlat)
		k = b->nlat;
	return (double)b->lat[k - 1] / 1e3;
}

static void
report(struct bench *b, double secs)
{
	double mbps = secs > 0 ? (double)b->bytes / secs / 1e6 : 0;
	double rps = secs > 0 ? (double)b->ok / secs : 0;
	uint64_t msg = b->writes ? (b->write_bytes + b->writes / 2) / b->writes : 0;
	double p50, p99;

	qsort(b->lat, b->nlat, sizeof(*b->lat), cmp_u64);
	p50 = lat_pct_us(b, 50);
	p99 = lat_pct_us(b, 99);
	if (b->o.json) {
		printf("{\"rooms\": %" PRIu64 ", \"failed_decode\": %" PRIu64
		       ", \"failed_prefill\": %" PRIu64 ", \"timed_out\": %" PRIu64
		       ", \"bytes\": %" PRIu64 ", \"seconds\": %.6f, \"MBps\": %.3f"
		       ", \"GBps\": %.6f, \"rooms_per_s\": %.3f, \"lat_p50_us\": %.1f"
		       ", \"lat_p99_us\": %.1f, \"verified\": \"%s\", \"mismatched_bytes\": "
		       "%" PRIu64 ", \"msg_bytes\": %" PRIu64 "}\n",
		       b->opened, b->failed_decode, b->failed_prefill, b->timed_out, b->bytes, secs,
		       mbps, mbps / 1e3, rps, p50, p99, b->mismatched ? "FAIL" : "ok",
		       b->mismatched, msg);
	} else {
		printf("kvx-bench: prefill %s (%s) -> decode %s (%s)\n", kvx_node_name(b->pre.c),
		       b->pre.path, kvx_node_name(b->dec.c), b->dec.path);
		printf("  inflight %u  page_size %u  pages %u  chunks %u  bufs %u  scatter %s  "
		       "seed %" PRIu64 "\n",
		       b->o.inflight, b->o.page_size, b->o.pages, b->o.chunks, b->o.bufs,
		       b->o.scatter ? "yes" : "no", b->o.seed);
		printf("rooms %" PRIu64 "  failed decode %" PRIu64 " / prefill %" PRIu64
		       "  timed_out %" PRIu64 "\n",
		       b->opened, b->failed_decode, b->failed_prefill, b->timed_out);
		printf("bytes %" PRIu64 "  seconds %.3f  msg_bytes %" PRIu64 "\n", b->bytes, secs,
		       msg);
		printf("MB/s %.2f  GB/s %.4f  rooms/s %.1f\n", mbps, mbps / 1e3, rps);
		printf("latency_us p50 %.1f  p99 %.1f  (open -> decode SUCCESS, %zu rooms)\n", p50,
		       p99, b->nlat);
		printf("verified=%s (%" PRIu64 " mismatched bytes)\n",
		       b->mismatched ? "FAIL" : "ok", b->mismatched);
	}
	fflush(stdout);
}

int
main(int argc, char **argv)
{
	struct sigaction sa = {.sa_handler = on_sigint, .sa_flags = SA_RESETHAND};
	struct bench b = {
		.pre = {.label = "prefill", .memfd = -1, .base = MAP_FAILED},
		.dec = {.label = "decode", .memfd = -1, .base = MAP_FAILED},
	};
	int r, rc = 1;
	uint32_t s;

	r = parse_opts(argc, argv, &b.o);
	if (r == 1) {
		usage(stdout);
		return 0;
	}
	if (r < 0) {
		usage(stderr);
		return 2;
	}
	if (!b.o.seed_set && getrandom(&b.o.seed, sizeof(b.o.seed), 0) != sizeof(b.o.seed))
		b.o.seed = (uint64_t)now_ns() ^ ((uint64_t)getpid() << 32);
	b.rng = splitmix64(b.o.seed ^ 0x6b76782d62656e63ULL) | 1;
	b.room_base = splitmix64(b.o.seed) & ROOM_BASE_MASK;
	b.next_room = b.room_base;
	b.npages = b.o.inflight * b.o.pages;
	b.watchdog_ns = (int64_t)(b.o.timeout * NSEC);
	b.pre.path = b.o.prefill;
	b.dec.path = b.o.decode;

	b.slots = calloc(b.o.inflight, sizeof(*b.slots));
	b.src = calloc(b.o.pages, sizeof(*b.src));
	if (!b.slots || !b.src)
		goto out;
	for (s = 0; s < b.o.inflight; s++) {
		b.slots[s].dst = calloc(b.o.pages, sizeof(uint32_t));
		if (!b.slots[s].dst)
			goto out;
	}
	if (side_open(&b, &b.pre) < 0 || side_open(&b, &b.dec) < 0)
		goto out;

	sigemptyset(&sa.sa_mask);
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	r = run(&b);
	report(&b, (double)(now_ns() - b.t_start) / 1e9);
	if (r < 0)
		goto out;
	if (interrupted)
		fprintf(stderr, "kvx-bench: interrupted\n");
	if (b.stray_events)
		fprintf(stderr, "kvx-bench: %" PRIu64 " events for unknown rooms ignored\n",
			b.stray_events);
	if (b.ok == 0 && b.opened && !b.o.allow_failures)
		fprintf(stderr, "kvx-bench: no room succeeded\n");
	rc = (b.mismatched == 0 && b.timed_out == 0 &&
	      (b.o.allow_failures || (b.failed_decode == 0 && b.failed_prefill == 0)))
		     ? 0
		     : 1;
out:
	side_close(&b.dec);
	side_close(&b.pre);
	if (b.slots)
		for (s = 0; s < b.o.inflight; s++)
			free(b.slots[s].dst);
	free(b.slots);
	free(b.src);
	free(b.lat);
	return rc;
}
