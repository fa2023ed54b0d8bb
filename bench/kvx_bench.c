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
 * page index in the room, buffer index); kvx_room_open on decode with sources = {prefill node};
 * kvx_chunk_submit the P pages as C chunks on prefill (once decode answered the open; with
 * --chunks-first before the open, neither waiting for an answer, as an engine whose KV is ready
 * submits it without waiting for decode).  Destination pages are not cleared first:
 * what they hold (an earlier room's pattern, a canary, zeros at first) is not this room's
 * pattern (page_fill), so a page kvxd did not write fails the check as a poisoned one would.
 * The room's result is decided by decode SUCCESS (then every destination byte is verified) or
 * FAILED on either side.
 *
 * Abort mix (--abort-ratio R): each room is picked with probability R (its own seeded stream,
 * so --scatter draws do not move) and kvx_room_abort is called on decode at a point of its
 * life picked uniformly: right after the open, after a random 1..C-1 of its chunks (only when
 * C > 1), or after all C chunks plus a random 0..--abort-delay-us.  The prefill side does not know:
 * it submits all C chunks regardless, so chunks reach a source after the abort.  An abort answered
 * -EALREADY (the room had succeeded) is "lost" and the room is verified like any other.
 *
 * Slot reuse.  Decode pages are the bench's again on decode SUCCESS, or for a room that failed
 * or was aborted only on its RELEASED event (FAILED -> DRAINING -> RELEASED), whose generation
 * must be the one kvx_room_abort returned.  Released pages are then filled with a canary
 * (derived from room, page, buffer and "canary") and quarantined for --settle-ms; any byte that
 * changed meanwhile was written after the release.  Prefill's source pages are refilled only
 * once its room is SUCCESS or FAILED (its writes are complete), or, for a released room, once
 * kvxd lets the bench close the prefill room.  Then the room is closed on both sides (a close
 * answered -EBUSY is retried).  A room that does not get there within --timeout of its open
 * (plus --settle-ms once its canary is armed) is counted as timed out and its slot is retired
 * (never reused).
 *
 * Prefill loss (--survive-prefill-loss).  Without it, any error on the prefill connection ends
 * the run.  With it, the first -ECONNRESET/-EPIPE/-ENOTCONN of a libkvx call on the prefill
 * connection (or kvx_event_read reporting it closed) is the loss: its time is recorded, no room is
 * opened and no chunk submitted any more, delayed aborts still due are dropped, and the rooms whose
 * decode outcome was still open (in flight at the loss) are followed on decode only.  kvxd aborts
 * rooms whose source died and releases their pages once nothing can write (it fences: no
 * ABORT_ACK can come), so each must end RELEASED (then the canary quarantine runs as usual) or
 * SUCCESS (then it is verified); their decode FAILED/RELEASED is expected, not a failed room
 * (also when it arrived just before the loss was seen).  Prefill closes are skipped.  The report
 * adds prefill_lost, rooms_in_flight_at_loss and loss_to_last_release_us (detected loss -> the
 * last RELEASED among those rooms).
 *
 * Steady-state window (--duration runs).  Like perftest -D, which counts only a middle window
 * (it leaves out a margin at both ends), the bench reports, besides the whole run, a window: it
 * opens at the first decode SUCCESS seen --warmup-ms or more after the start (that room itself is
 * not counted) and ends with the last SUCCESS seen --cooldown-ms or more before --duration is up
 * (rooms are opened until then, so the pipeline stays full); its rate is the rooms and bytes of
 * the SUCCESSes inside it over the time between those two.
 * Every room is still filled and verified, on this thread while the other rooms' transfers go on;
 * event times are taken before any verification of the batch, room open times after the fill,
 * and the time spent filling and verifying inside the window is reported
 * (window_check_s).  With --window-check sampled (make bench), a room filled inside the window
 * gets the sampled fill and check (page_fill_sampled): perftest checks nothing, and in an
 * emulated guest the check's CPU is the transfer's; rooms outside the window are checked
 * whole, and so is every room of the tests.  MB is 10^6 bytes everywhere.
 *
 * Exit: 0 iff no room timed out, every byte of every successful room verified, no canary byte
 * changed, no RELEASED carried a wrong generation, kvxd kept the abort contract, and (unless
 * --allow-failures) no room failed without the bench aborting it; 1 otherwise or on an error;
 * 2 on a usage error.
 */
#include "kvx/kvx.h"
#include "kvx/version.h"

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
#include <sys/resource.h>
#include <time.h>
#include <unistd.h>

#define BENCH_PROG "kvx-bench"
#include "opt.h"

#define NSEC 1000000000LL
#define WATCHDOG_S 60 /* default --timeout: beyond kvxd's default waiting timeout (30 s) */
#define CLOSE_RETRY_NS (2 * 1000000LL) /* kvx_room_close said -EBUSY: try again after this */
#define POLL_MAX_MS 100
/* decode is done: prefill's end may lag this (default --prefill-wait-ms).  A room that decode
 * failed before its metadata reached the source (the source unreachable) is told at prefill
 * only by kvxd's waiting_ms: runs that cut links give its value. */
#define PRE_TELL_WAIT_MS 5000
#define EVENT_BATCH 64
#define FAIL_LOG_MAX 10 /* failure lines printed to stderr; then only counted */
#define ROOM_BASE_MASK ((1ULL << 62) - 1)
#define INFLIGHT_MAX 4096
#define GATHER_MAX 16 /* kvxd's scatter-gather entries per WRITE (KVX_VX_MAX_SGE) */
#define BUFS_MAX 4096
#define PAGE_SIZE_MAX (16u << 20)
#define CANARY_TAG 0x63616e617279ULL /* "canary" */
#define ABORT_DELAY_US 2000	     /* default --abort-delay-us */
#define ABORT_DELAY_US_MAX 60000000ULL
#define SETTLE_MS 200 /* default --settle-ms */
#define SETTLE_MS_MAX 600000
#define BATCH_MAX 64	    /* rooms per kvx_room_openv / kvx_room_closev call */
#define CHUNK_PEND_MAX 1024 /* chunks per kvx_chunk_submitv call (libkvx's bound) */

struct opts {
	const char *prefill;
	const char *decode;
	uint64_t rooms;
	bool rooms_set;
	double duration;      /* seconds; 0: run a room count */
	uint32_t warmup_ms;   /* --warmup-ms: the steady-state window opens after this */
	uint32_t cooldown_ms; /* --cooldown-ms: ... and closes this long before --duration */
	double timeout;	      /* seconds: per-room watchdog */
	uint32_t inflight;
	uint32_t page_size;
	uint32_t pages;
	uint32_t chunks;
	uint32_t bufs;
	bool scatter;
	bool scatter_src;
	bool allow_failures;
	bool json;
	bool seed_set;
	uint64_t seed;
	double abort_ratio;	  /* 0..1 */
	uint64_t abort_delay_us;  /* after the last chunk: a delay of 0..this */
	uint32_t settle_ms;	  /* quarantine of released pages holding the canary */
	uint32_t prefill_wait_ms; /* --prefill-wait-ms: prefill's end after decode's, at most */
	bool survive_prefill_loss;
	uint32_t drop_prefill_ms; /* --drop-prefill-engine-ms: close the prefill connection then */
	uint32_t last_chunk_delay_ms; /* --last-chunk-delay-ms: hold each room's last chunk back */
	bool single;	   /* --single: one request per call (no kvx_room_openv / closev batches) */
	bool wake_all;	   /* --wake-all: woken for every state (no KVX_CONNECT_WAKE_ENDS) */
	bool chunks_first; /* --chunks-first: prefill's chunks go before decode's open */
	bool window_sampled; /* --window-check sampled: rooms filled inside the window */
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

/* Where in a room's life the bench aborts it. */
enum abort_point {
	ABORT_NONE = 0, /* not picked */
	ABORT_AT_OPEN,	/* right after kvx_room_open, before any chunk */
	ABORT_MID,	/* after abort_k (1..C-1) chunks */
	ABORT_AFTER,	/* after all chunks, at t_abort_due */
	ABORT_POINTS,
};

struct slot {
	int phase;	     /* enum slot_phase */
	uint64_t room;	     /* room id while ACTIVE */
	int64_t t_open;	     /* ns */
	int dec_state;	     /* last decode state seen, -1: none */
	int pre_state;	     /* last prefill state seen, -1: none */
	bool dec_success;    /* decode SUCCESS seen and accepted (counted, verified) */
	bool dec_failed;     /* decode FAILED (or DRAINING/RELEASED) seen */
	bool dec_released;   /* decode RELEASED seen: no write of the room can land any more */
	bool pre_failed;     /* prefill FAILED seen */
	bool dec_closed;     /* kvx_room_close done on decode */
	bool pre_closed;     /* kvx_room_close done on prefill */
	int64_t t_retry;     /* ns: when to retry a close that returned -EBUSY, 0: none */
	int abort_at;	     /* enum abort_point */
	uint32_t abort_k;    /* ABORT_MID: chunks submitted before the abort */
	bool abort_due;	     /* ABORT_AFTER: kvx_room_abort still to be called, at t_abort_due */
	int64_t t_abort_due; /* ns */
	int64_t abort_gen;   /* > 0: the generation kvx_room_abort returned (the room is aborted) */
	bool abort_sent;     /* kvx_room_abort was accepted (even if SUCCESS then won the race) */
	int64_t t_abort;     /* ns: when kvx_room_abort was called */
	bool canary_armed;   /* released pages hold the canary until t_canary */
	bool canary_done;    /* ... and were checked: decode is done with the room */
	int64_t t_canary;    /* ns */
	bool fail_counted;   /* its decode failure counted in failed_decode */
	bool at_loss;	     /* in flight when the prefill connection was lost */
	int64_t t_released;  /* ns: its decode RELEASED, 0: none */
	/* how its end was told: terminal events seen per side (decode SUCCESS/RELEASED, prefill
	 * SUCCESS/FAILED; more than one is a duplicate); chunks went to prefill; how long to
	 * wait for prefill's end once decode is done */
	uint8_t dec_ends, pre_ends;
	bool last_due; /* --last-chunk-delay-ms: the last chunk goes at t_last_due */
	int64_t t_last_due;
	int64_t t_last; /* ns: when the held-back last chunk went; 0: not yet (or not held) */
	bool pre_submitted;
	bool close_due; /* done on both sides: its closes go in the next batch (closes_flush) */
	int64_t t_pre_wait;
	bool sampled;  /* filled inside the window with --window-check sampled: checked so */
	uint32_t *dst; /* pages[P]: destination pool page of room page i */
	uint32_t *src; /* pages[P]: source pool page of room page i */
	uint64_t
		prev_room; /* the slot's room before this one (has_prev), for a mismatch's report */
	bool has_prev, used;
};

/* Latency samples, ns. */
struct samples {
	uint64_t *v;
	size_t n;
	size_t cap;
};

struct bench {
	struct opts o;
	struct side pre;
	struct side dec;
	struct slot *slots;
	uint32_t *src; /* scratch: source page list of a chunk */
	/* chunks built and not yet submitted (chunks_flush): their pages are their slot's */
	struct kvx_chunk pend[CHUNK_PEND_MAX];
	uint32_t npend;
	uint32_t batch;	 /* rooms per open or close call: BATCH_MAX, 1 with --single */
	uint32_t npages; /* pages per buffer in each pool: inflight * pages */
	uint64_t rng;	 /* xorshift state for --scatter and the room base */
	uint64_t arng;	 /* xorshift state of the abort mix */
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
	struct samples lat;		    /* open -> decode SUCCESS, per successful room */
	struct samples abort_lat;	    /* kvx_room_abort call -> RELEASED, per aborted room */
	uint64_t abort_calls[ABORT_POINTS]; /* kvx_room_abort calls, by point */
	uint64_t aborted;		    /* rooms kvx_room_abort returned a generation for */
	uint64_t abort_lost;		    /* -EALREADY: the room had succeeded */
	uint64_t released;		    /* decode RELEASED events */
	uint64_t canary_checked;	    /* bytes of released pages checked after --settle-ms */
	uint64_t canary_changed;	    /* ... that were written meanwhile */
	uint64_t bad_generation;	    /* RELEASED with another generation than the abort's */
	uint64_t protocol_errors;	    /* other breaches of the abort contract */
	unsigned fail_logged;
	int64_t t_start;
	int64_t t_stop;		     /* ns: stop opening rooms (duration), 0: none */
	int64_t watchdog_ns;	     /* --timeout */
	int64_t settle_ns;	     /* --settle-ms */
	bool prefill_lost;	     /* --survive-prefill-loss: the prefill connection is gone */
	int64_t t_loss;		     /* ns: when the loss was detected */
	int64_t t_drop;		     /* ns: --drop-prefill-engine-ms's moment */
	int64_t t_last_loss_release; /* ns: last RELEASED of a room in flight at it, 0: none */
	uint64_t rooms_at_loss;	     /* rooms in flight at the loss */
	struct samples loss_lat;     /* loss -> RELEASED, per room in flight at it */
	/* the engine contract (kvx.h): rooms whose engine was never told how they ended, and
	 * terminal events that came twice, per side */
	uint64_t untold_decode, untold_prefill, dup_decode, dup_prefill;
	uint64_t close_busy; /* kvx_room_close answered -EBUSY (retried after CLOSE_RETRY_NS) */
	/* the steady-state window (--duration runs): it opens at the first decode SUCCESS at or
	 * after t_warm (t_win0, not counted) and ends at the last one counted (t_win1), at the
	 * latest t_cool */
	int64_t t_warm, t_cool;
	int64_t t_win0, t_win1; /* ns, 0: none yet */
	uint64_t win_rooms, win_bytes;
	struct samples win_lat; /* open -> decode SUCCESS, rooms counted in the window */
	/* --last-chunk-delay-ms: the held-back last chunk's submission -> decode SUCCESS, rooms
	 * counted in the window (the latency serving sees once prefill has computed: decode's
	 * metadata is there already) */
	struct samples win_last_lat;
	int64_t check_ns;	/* fill and verify time inside the window */
	uint64_t rooms_sampled; /* rooms verified sampled (--window-check sampled) */
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

/* The seed of room page `page` of buffer `buf`'s pattern (page_fill), from all three. */
static uint64_t
pattern_seed(uint64_t room, uint32_t page, uint32_t buf)
{
	uint64_t s = splitmix64(splitmix64(room) ^ ((uint64_t)buf << 32 | page));

	return s ? s : 1;
}

/* The canary of room page `page` of buffer `buf` once the room's pages are released: unlike
 * the room's own pattern, so that a late write of the room shows. */
static uint64_t
canary_seed(uint64_t room, uint32_t page, uint32_t buf)
{
	uint64_t s = splitmix64(pattern_seed(room, page, buf) ^ CANARY_TAG);

	return s ? s : 1;
}

/* A uniform double in [0, 1). */
static double
rand01(uint64_t *s)
{
	return (double)(xorshift64(s) >> 11) * 0x1p-53;
}

/* A page's pattern: word i is seed + i * PATTERN_STEP.  Seeds differ between rooms, pages,
 * buffers and the canary (splitmix64), so a page of another room, another page of the same room,
 * a page shifted by any number of words or one left as it was differs in every word; one add
 * per word keeps the fill and the check cheap (they run on the engine thread, inside the window,
 * where an emulated guest's CPU is shared with the transfer). */
#define PATTERN_STEP 0x9e3779b97f4a7c15ull

static void
page_fill(uint8_t *p, size_t len, uint64_t seed)
{
	uint64_t *w = (uint64_t *)p; /* pages are 64-byte aligned: mmap base, page_size % 64 */
	size_t i;

	for (i = 0; i < len / sizeof(uint64_t); i++, seed += PATTERN_STEP)
		w[i] = seed;
}

/* The bytes of a word that differ, given the word xor what it should be. */
static uint64_t
word_bytes_off(uint64_t d)
{
	uint64_t bad = 0;
	int k;

	for (k = 0; k < 8; k++)
		bad += ((d >> (8 * k)) & 0xff) != 0;
	return bad;
}

/* Returns the number of bytes of p that differ from the pattern. */
static uint64_t
page_verify(const uint8_t *p, size_t len, uint64_t seed)
{
	const uint64_t *w = (const uint64_t *)p;
	uint64_t bad = 0, any = 0, x = seed;
	size_t i, n = len / sizeof(uint64_t);

	for (i = 0; i < n; i++, x += PATTERN_STEP)
		any |= w[i] ^ x;
	if (!any)
		return 0;
	for (i = 0, x = seed; i < n; i++, x += PATTERN_STEP) /* count the bytes that differ */
		bad += word_bytes_off(w[i] ^ x);
	return bad;
}

/* The sampled check (--window-check sampled): only the first and the last word of every
 * SAMPLE_WORDS-word stretch of a page (512 bytes) are filled and checked, each with the value the
 * full pattern has there (seed + i * PATTERN_STEP), so the two checks agree on every word they
 * both look at.  The words in between keep what they held.  What a page holds when kvxd did not
 * write it (an earlier room's pattern, the canary, zeros), a write a word off, and a write cut
 * short or missing a packet of more than 496 bytes (the longest run of words not looked at; the
 * VM's path MTU is 1024) still fail it; a byte changed inside a stretch does not. */
#define SAMPLE_WORDS 64

/* The index of the last word of the stretch that starts at word i of an n-word page. */
static size_t
sample_last(size_t i, size_t n)
{
	return i + SAMPLE_WORDS - 1 < n ? i + SAMPLE_WORDS - 1 : n - 1;
}

static void
page_fill_sampled(uint8_t *p, size_t len, uint64_t seed)
{
	uint64_t *w = (uint64_t *)p;
	size_t i, j, n = len / sizeof(uint64_t);

	for (i = 0; i < n; i += SAMPLE_WORDS) {
		j = sample_last(i, n);
		w[i] = seed + i * PATTERN_STEP;
		w[j] = seed + j * PATTERN_STEP;
	}
}

/* Returns the number of bytes of p's sampled words that differ from the pattern. */
static uint64_t
page_verify_sampled(const uint8_t *p, size_t len, uint64_t seed)
{
	const uint64_t *w = (const uint64_t *)p;
	uint64_t bad = 0;
	size_t i, j, n = len / sizeof(uint64_t);

	for (i = 0; i < n; i += SAMPLE_WORDS) {
		j = sample_last(i, n);
		bad += word_bytes_off(w[i] ^ (seed + i * PATTERN_STEP));
		if (j != i)
			bad += word_bytes_off(w[j] ^ (seed + j * PATTERN_STEP));
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
		"  --warmup-ms MS     with --duration: the steady-state window (window_* in the\n"
		"                     report) opens at the first room done MS ms or more after\n"
		"                     the start (default 0) and ends at --duration\n"
		"  --cooldown-ms MS   ... or MS ms before it (default 0)\n"
		"  --inflight K       rooms in flight (default 8, at most %d)\n"
		"  --page-size B      page size in bytes, a multiple of 64 (default 4096)\n"
		"  --pages P          pages per room (default 16, at most %d)\n"
		"  --chunks C         chunks per room (default 1, at most P)\n"
		"  --bufs NB          buffers per pool (default 4)\n"
		"  --scatter          random destination page order per room\n"
		"  --scatter-src      random source page order per room (destination pages stay\n"
		"                     consecutive: kvxd gathers them into one WRITE per buffer)\n"
		"  --seed S           seed of the room ids and the scatters (default: random)\n"
		"  --allow-failures   failed rooms do not fail the run (timeouts and bad bytes "
		"do)\n"
		"  --timeout SEC      a room not done SEC s after its open counts as timed out "
		"(default %d)\n"
		"  --abort-ratio R    abort each room on decode with probability R (0..1, default "
		"0):\n"
		"                     right after its open, after some of its chunks, or after "
		"all\n"
		"                     of them plus a delay; prefill still submits every chunk\n"
		"  --abort-delay-us U that delay is 0..U microseconds (default %d)\n"
		"  --settle-ms MS     released pages hold a canary for MS ms before reuse; a byte\n"
		"                     that changes fails the run (default %d)\n"
		"  --prefill-wait-ms MS\n"
		"                     the prefill engine must be told how a room ended within MS\n"
		"                     ms of decode's end, or the run fails (default %d; a room\n"
		"                     decode failed while its source was unreachable ends there\n"
		"                     only at kvxd's waiting_ms)\n"
		"  --survive-prefill-loss\n"
		"                     when the prefill connection is lost, open no more rooms and\n"
		"                     follow the rooms in flight on decode: each must end\n"
		"                     RELEASED or SUCCESS, their failures are expected\n"
		"  --drop-prefill-engine-ms MS\n"
		"                     after MS ms, close the prefill connection (a prefill engine\n"
		"                     that dies; implies --survive-prefill-loss): every room in\n"
		"                     flight must be RELEASED on decode, reported as\n"
		"                     loss_release_p50_us / p99_us\n"
		"  --last-chunk-delay-ms MS\n"
		"                     submit each room's last chunk MS ms after the others\n"
		"                     (and report window_last_chunk_lat_*: from its submission\n"
		"                     to decode's SUCCESS)\n"
		"  --wake-all         connect without KVX_CONNECT_WAKE_ENDS: woken for every\n"
		"                     state of a room, not only for its end and for replies\n"
		"  --chunks-first     submit a room's chunks on prefill, then open it on decode,\n"
		"                     both before either answer is awaited (the clock starts\n"
		"                     before both): prefill's KV is ready at once and its\n"
		"                     engine does not wait for decode.  Default: the chunks go\n"
		"                     once decode's open was answered.  Not with --abort-ratio;\n"
		"                     decode refusing such a room's open ends the run (its\n"
		"                     prefill room waits for decode's metadata until [timeouts]\n"
		"                     waiting_ms)\n"
		"  --single           one room per open and close call and one chunk per submit\n"
		"                     call (default: the rooms ready at once go in one batch "
		"call,\n"
		"                     kvx_room_openv, kvx_room_closev, kvx_chunk_submitv)\n"
		"  --window-check full|sampled\n"
		"                     with --duration: check every byte of every room (full,\n"
		"                     the default), or, for the rooms filled between --warmup-ms\n"
		"                     and --cooldown-ms, only the first and last 8 bytes of\n"
		"                     every 512 (sampled: the fill and the check leave the\n"
		"                     window's CPU to the transfer; rooms outside it stay full)\n"
		"  --json             print the result as one JSON object\n"
		"  --version          kvx-bench's version and the loaded libkvx's\n"
		"  -h, --help         this help\n",
		INFLIGHT_MAX, KVX_MAX_ROOM_PAGES, WATCHDOG_S, ABORT_DELAY_US, SETTLE_MS,
		PRE_TELL_WAIT_MS);
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

static int
parse_ratio(const char *name, const char *s, double *out)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(s, &end);
	if (errno || end == s || *end || !isfinite(v) || v < 0 || v > 1) {
		fprintf(stderr, "kvx-bench: --%s: expected a number in [0, 1], got '%s'\n", name,
			s);
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
	OPT_SCATTER_SRC,
	OPT_SEED,
	OPT_ALLOW_FAILURES,
	OPT_JSON,
	OPT_TIMEOUT,
	OPT_ABORT_RATIO,
	OPT_ABORT_DELAY_US,
	OPT_SETTLE_MS,
	OPT_PREFILL_WAIT_MS,
	OPT_SURVIVE_PREFILL_LOSS,
	OPT_DROP_PREFILL_ENGINE_MS,
	OPT_LAST_CHUNK_DELAY_MS,
	OPT_WARMUP_MS,
	OPT_COOLDOWN_MS,
	OPT_SINGLE,
	OPT_WAKE_ALL,
	OPT_CHUNKS_FIRST,
	OPT_WINDOW_CHECK,
	OPT_VERSION,
};

/* Returns 0, 1 (--help: exit 0), 2 (--version: exit 0) or -EINVAL (usage error). */
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
		{"scatter-src", no_argument, NULL, OPT_SCATTER_SRC},
		{"seed", required_argument, NULL, OPT_SEED},
		{"allow-failures", no_argument, NULL, OPT_ALLOW_FAILURES},
		{"json", no_argument, NULL, OPT_JSON},
		{"timeout", required_argument, NULL, OPT_TIMEOUT},
		{"abort-ratio", required_argument, NULL, OPT_ABORT_RATIO},
		{"abort-delay-us", required_argument, NULL, OPT_ABORT_DELAY_US},
		{"settle-ms", required_argument, NULL, OPT_SETTLE_MS},
		{"prefill-wait-ms", required_argument, NULL, OPT_PREFILL_WAIT_MS},
		{"survive-prefill-loss", no_argument, NULL, OPT_SURVIVE_PREFILL_LOSS},
		{"drop-prefill-engine-ms", required_argument, NULL, OPT_DROP_PREFILL_ENGINE_MS},
		{"last-chunk-delay-ms", required_argument, NULL, OPT_LAST_CHUNK_DELAY_MS},
		{"warmup-ms", required_argument, NULL, OPT_WARMUP_MS},
		{"cooldown-ms", required_argument, NULL, OPT_COOLDOWN_MS},
		{"single", no_argument, NULL, OPT_SINGLE},
		{"wake-all", no_argument, NULL, OPT_WAKE_ALL},
		{"chunks-first", no_argument, NULL, OPT_CHUNKS_FIRST},
		{"window-check", required_argument, NULL, OPT_WINDOW_CHECK},
		{"help", no_argument, NULL, 'h'},
		{"version", no_argument, NULL, OPT_VERSION},
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
		.abort_delay_us = ABORT_DELAY_US,
		.settle_ms = SETTLE_MS,
		.prefill_wait_ms = PRE_TELL_WAIT_MS,
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
		case OPT_ABORT_RATIO:
			r = parse_ratio("abort-ratio", optarg, &o->abort_ratio);
			break;
		case OPT_ABORT_DELAY_US:
			r = parse_u64("abort-delay-us", optarg, 0, ABORT_DELAY_US_MAX,
				      &o->abort_delay_us);
			break;
		case OPT_SETTLE_MS:
			r = parse_u32("settle-ms", optarg, 0, SETTLE_MS_MAX, &o->settle_ms);
			break;
		case OPT_PREFILL_WAIT_MS:
			r = parse_u32("prefill-wait-ms", optarg, 0, SETTLE_MS_MAX,
				      &o->prefill_wait_ms);
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
		case OPT_SCATTER_SRC:
			o->scatter_src = true;
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
		case OPT_SURVIVE_PREFILL_LOSS:
			o->survive_prefill_loss = true;
			break;
		case OPT_DROP_PREFILL_ENGINE_MS: {
			uint64_t v;

			r = parse_u64("drop-prefill-engine-ms", optarg, 1, 3600000, &v);
			o->drop_prefill_ms = (uint32_t)v;
			o->survive_prefill_loss = true;
			break;
		}
		case OPT_LAST_CHUNK_DELAY_MS: {
			uint64_t v;

			r = parse_u64("last-chunk-delay-ms", optarg, 0, 60000, &v);
			o->last_chunk_delay_ms = (uint32_t)v;
			break;
		}
		case OPT_WARMUP_MS:
			r = parse_u32("warmup-ms", optarg, 0, 3600000, &o->warmup_ms);
			break;
		case OPT_COOLDOWN_MS:
			r = parse_u32("cooldown-ms", optarg, 0, 3600000, &o->cooldown_ms);
			break;
		case OPT_SINGLE:
			o->single = true;
			break;
		case OPT_WAKE_ALL:
			o->wake_all = true;
			break;
		case OPT_CHUNKS_FIRST:
			o->chunks_first = true;
			break;
		case OPT_WINDOW_CHECK:
			if (!strcmp(optarg, "sampled") || !strcmp(optarg, "full")) {
				o->window_sampled = optarg[0] == 's';
				break;
			}
			fprintf(stderr,
				"kvx-bench: --window-check: expected full or sampled, got '%s'\n",
				optarg);
			return -EINVAL;
		case 'h':
			return 1;
		case OPT_VERSION:
			return 2;
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
	if ((o->warmup_ms || o->cooldown_ms) &&
	    !(o->duration > 0 && (double)o->warmup_ms + o->cooldown_ms < o->duration * 1e3)) {
		fprintf(stderr, "kvx-bench: --warmup-ms and --cooldown-ms need a --duration longer "
				"than both\n");
		return -EINVAL;
	}
	if (o->window_sampled && !(o->duration > 0)) {
		fprintf(stderr, "kvx-bench: --window-check sampled needs --duration\n");
		return -EINVAL;
	}
	if (o->chunks_first && o->abort_ratio > 0) {
		fprintf(stderr, "kvx-bench: --chunks-first cannot abort rooms (--abort-ratio): "
				"an abort is planned between decode's open and the chunks\n");
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
	/* the bench waits for its rooms' ends: a wake-up per room and side, not per state */
	sd->c = kvx_connect_flags(sd->path, 0, b->o.wake_all ? 0 : KVX_CONNECT_WAKE_ENDS);
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

/* The bench's own fill and verify work that began at t0 (ns) is done: count its time if
 * it began inside the steady-state window. */
static void
check_time(struct bench *b, int64_t t0)
{
	if (b->t_win0 && t0 >= b->t_win0 && t0 < b->t_cool)
		b->check_ns += now_ns() - t0;
}

static int
samples_push(struct samples *sm, uint64_t ns)
{
	if (sm->n == sm->cap) {
		size_t ncap = sm->cap ? sm->cap * 2 : 1024;
		uint64_t *n = realloc(sm->v, ncap * sizeof(*n));

		if (!n)
			return -ENOMEM;
		sm->v = n;
		sm->cap = ncap;
	}
	sm->v[sm->n++] = ns;
	return 0;
}

static bool
fatal_err(int64_t r)
{
	return r == -ECONNRESET || r == -ETIMEDOUT || r == -EBADMSG;
}

static bool
conn_lost_err(int64_t r)
{
	return r == -ECONNRESET || r == -EPIPE || r == -ENOTCONN;
}

/* A libkvx call on the prefill connection returned r.  Returns true if it is a loss of that
 * connection the bench survives (--survive-prefill-loss): the first one is recorded, the rooms
 * whose decode outcome is still open are marked in flight at the loss (a decode failure of theirs
 * already counted is taken back: it was the loss, seen first on decode) and their delayed aborts
 * dropped.  From then on no room is opened, no chunk submitted and nothing asked of prefill. */
static bool
prefill_loss(struct bench *b, int64_t r, const char *what)
{
	uint64_t uncounted = 0;
	uint32_t i;

	if (!b->o.survive_prefill_loss || !conn_lost_err(r))
		return false;
	if (b->prefill_lost)
		return true;
	b->prefill_lost = true;
	b->t_loss = now_ns();
	for (i = 0; i < b->o.inflight; i++) {
		struct slot *sl = &b->slots[i];

		if (sl->phase != SLOT_ACTIVE || sl->dec_success)
			continue;
		sl->at_loss = true;
		sl->abort_due = false;
		sl->last_due = false;
		b->rooms_at_loss++;
		if (sl->fail_counted) {
			sl->fail_counted = false;
			b->failed_decode--;
			uncounted++;
		}
		if (sl->t_released > b->t_last_loss_release)
			b->t_last_loss_release = sl->t_released;
	}
	fprintf(stderr,
		"kvx-bench: %s: prefill connection lost (%s: %s); %" PRIu64
		" rooms in flight are followed on decode, no new rooms\n",
		b->pre.path, what, strerror((int)-r), b->rooms_at_loss);
	if (uncounted)
		fprintf(stderr,
			"kvx-bench: %" PRIu64 " decode failures seen just before are the loss's\n",
			uncounted);
	return true;
}

/* kvxd broke the abort contract in a way that is not a wrong generation. */
static void
protocol_error(struct bench *b, uint64_t room, const char *what)
{
	b->protocol_errors++;
	fprintf(stderr, "kvx-bench: room %" PRIu64 ": protocol error: %s\n", room, what);
}

/* Abort the slot's room on decode.  Returns 0 (answered: aborted, lost, or an unexpected status
 * that is counted) or -errno (fatal). */
static int
room_abort(struct bench *b, struct slot *sl)
{
	int64_t t0 = now_ns(), g;
	char what[96];

	sl->abort_due = false;
	b->abort_calls[sl->abort_at]++;
	g = kvx_room_abort(b->dec.c, sl->room);
	if (g > 0) {
		if (sl->dec_success) {
			snprintf(what, sizeof(what),
				 "abort returned generation %" PRId64 " after decode SUCCESS", g);
			protocol_error(b, sl->room, what);
			return 0;
		}
		sl->abort_gen = g;
		sl->abort_sent = true;
		sl->t_abort = t0;
		b->aborted++;
		return 0;
	}
	if (g == -EALREADY) {
		b->abort_lost++; /* it had succeeded: verified on its SUCCESS like any room */
		return 0;
	}
	if (fatal_err(g)) {
		fprintf(stderr, "kvx-bench: %s: room %" PRIu64 " abort: %s\n", b->dec.path,
			sl->room, strerror((int)-g));
		return (int)g;
	}
	/* -ENOENT for a room that is open, or any other refusal */
	snprintf(what, sizeof(what), "abort: %s", strerror((int)-g));
	protocol_error(b, sl->room, what);
	return 0;
}

/* Pick where in its life the room will be aborted (or not).  Always draws the same amount from
 * the abort stream, so a seed gives the same mix whatever kvxd answers. */
static void
abort_plan(struct bench *b, struct slot *sl)
{
	const uint32_t C = b->o.chunks;
	double pick = rand01(&b->arng);
	uint64_t where = xorshift64(&b->arng), k = xorshift64(&b->arng);
	uint64_t delay = xorshift64(&b->arng);

	sl->abort_at = ABORT_NONE;
	sl->abort_k = 0;
	sl->abort_due = false;
	sl->t_abort_due = 0;
	if (!(pick < b->o.abort_ratio))
		return;
	if (C > 1) {
		sl->abort_at = ABORT_AT_OPEN + (int)(where % 3);
		sl->abort_k = 1 + (uint32_t)(k % (C - 1));
	} else {
		sl->abort_at = where % 2 ? ABORT_AFTER : ABORT_AT_OPEN;
	}
	/* ABORT_AFTER: the delay is added to the time the last chunk was submitted */
	sl->t_abort_due = (int64_t)(delay % (b->o.abort_delay_us + 1)) * 1000;
}

/* A random permutation of v[0..n) (Fisher-Yates over the run's xorshift stream). */
static void
shuffle(struct bench *b, uint32_t *v, uint32_t n)
{
	for (uint32_t i = n ? n - 1 : 0; i > 0; i--) {
		uint32_t k = (uint32_t)(xorshift64(&b->rng) % (i + 1));
		uint32_t t = v[i];

		v[i] = v[k];
		v[k] = t;
	}
}

/* Submit the chunks built so far (one kvx_chunk_submitv call, one wake-up of prefill's kvxd).
 * Returns 0 (also when the prefill connection is lost and the bench survives it) or -errno. */
static int
chunks_flush(struct bench *b)
{
	uint32_t n = b->npend;
	int r;

	b->npend = 0;
	if (!n || b->prefill_lost)
		return 0;
	r = kvx_chunk_submitv(b->pre.c, b->pend, n);
	if (r < 0 && prefill_loss(b, r, "chunk submit"))
		return 0; /* its rooms are in flight at the loss: decode decides their end */
	if (r < 0) {
		fprintf(stderr, "kvx-bench: %s: chunk submit (room %" PRIu64 ", %u chunks): %s\n",
			b->pre.path, b->pend[0].room, n, strerror(-r));
		return r;
	}
	return 0;
}

/* Whether a room filled at t0 (ns) gets the sampled fill and check: only with --window-check
 * sampled, and only inside the window; the rooms before and after it are checked whole. */
static bool
room_sampled(const struct bench *b, int64_t t0)
{
	return b->o.window_sampled && t0 >= b->t_warm && t0 < b->t_cool;
}

/* Fill slot s's source pages for a new room, and plan its abort.  The room is opened by
 * rooms_open, in a batch. */
static void
room_prepare(struct bench *b, uint32_t s)
{
	struct slot *sl = &b->slots[s];
	const uint32_t P = b->o.pages, ps = b->o.page_size;
	uint32_t i, buf;
	int64_t t0;

	sl->prev_room = sl->room;
	sl->has_prev = sl->used;
	sl->used = true;
	sl->room = b->next_room++;
	sl->dec_ends = sl->pre_ends = 0;
	sl->last_due = false;
	sl->t_last = 0;
	sl->pre_submitted = false;
	sl->close_due = false;
	sl->t_pre_wait = 0;
	for (i = 0; i < P; i++)
		sl->dst[i] = sl->src[i] = s * P + i;
	if (b->o.scatter)
		shuffle(b, sl->dst, P);
	if (b->o.scatter_src)
		shuffle(b, sl->src, P);
	t0 = now_ns();
	sl->sampled = room_sampled(b, t0);
	for (buf = 0; buf < b->o.bufs; buf++) {
		for (i = 0; i < P; i++) {
			uint8_t *p = page_addr(b, &b->pre, buf, sl->src[i]);
			uint64_t seed = pattern_seed(sl->room, i, buf);

			if (sl->sampled)
				page_fill_sampled(p, ps, seed);
			else
				page_fill(p, ps, seed);
		}
	}
	check_time(b, t0);
	abort_plan(b, sl);
	b->opened++;
}

/* Slot s's room is open on decode (with --chunks-first: is about to be opened): build its
 * chunks for prefill (they go at the next chunks_flush), aborting on decode where planned.  Returns
 * 0 or -errno (fatal). */
static int
room_begin(struct bench *b, uint32_t s)
{
	struct slot *sl = &b->slots[s];
	const uint32_t P = b->o.pages, C = b->o.chunks, ps = b->o.page_size;
	const uint64_t room = sl->room;
	uint32_t i, j, off, n, sge;
	int r;

	sl->phase = SLOT_ACTIVE;
	sl->dec_state = -1;
	sl->pre_state = -1;
	sl->dec_success = sl->dec_failed = sl->dec_released = sl->pre_failed = false;
	sl->dec_closed = sl->pre_closed = false;
	sl->t_retry = 0;
	sl->abort_gen = 0;
	sl->abort_sent = false;
	sl->t_abort = 0;
	sl->canary_armed = sl->canary_done = false;
	sl->t_canary = 0;
	sl->fail_counted = sl->at_loss = false;
	sl->t_released = 0;
	b->active++;
	if (b->prefill_lost) {
		/* opened in a batch in which a chunk submission found the prefill connection gone:
		 * followed on decode like the rooms in flight at the loss, its abort not made */
		sl->at_loss = true;
		sl->abort_at = ABORT_NONE;
		b->rooms_at_loss++;
	}

	for (off = 0, j = 0; j < C; j++, off += n) {
		if ((sl->abort_at == ABORT_AT_OPEN && j == 0) ||
		    (sl->abort_at == ABORT_MID && j == sl->abort_k)) {
			/* the chunks before it are submitted first */
			r = chunks_flush(b);
			if (r == 0)
				r = room_abort(b, sl);
			if (r < 0)
				return r;
		}
		n = P / C + (j < P % C ? 1 : 0);
		for (i = 0, sge = 0; i < n; i++) {
			/* kvxd builds one WRITE per run of consecutive destination pages and
			 * buffer, gathering the source pages in runs of consecutive pages, up to
			 * GATHER_MAX entries per WRITE */
			if (i == 0 || sl->dst[off + i] != sl->dst[off + i - 1] + 1) {
				b->writes += b->o.bufs;
				sge = 1;
			} else if (sl->src[off + i] != sl->src[off + i - 1] + 1 &&
				   ++sge > GATHER_MAX) {
				b->writes += b->o.bufs;
				sge = 1;
			}
		}
		b->write_bytes += (uint64_t)n * ps * b->o.bufs;
		if (j == C - 1 && b->o.last_chunk_delay_ms) {
			sl->last_due = true;
			sl->t_last_due = now_ns() + (int64_t)b->o.last_chunk_delay_ms * 1000000;
			break;
		}
		if (b->prefill_lost)
			continue; /* nothing is asked of prefill any more */
		sl->pre_submitted = true;
		b->pend[b->npend++] = (struct kvx_chunk){.room = room,
							 .chunk_index = j,
							 .pool_id = b->pre.pool,
							 .npages = n,
							 .src_pages = sl->src + off,
							 .dst_offset = off,
							 .last = j == C - 1};
		if (b->npend == CHUNK_PEND_MAX || b->o.single) {
			r = chunks_flush(b);
			if (r < 0)
				return r;
		}
	}
	if (sl->abort_at == ABORT_AFTER) {
		sl->abort_due = true;
		sl->t_abort_due += now_ns();
	}
	return 0;
}

/* Open the prepared rooms of slots idx[0..n) on decode in one call (kvx_room_openv), then build
 * and submit their chunks on prefill.  A room decode refuses counts as failed, its slot stays
 * free.  Returns 0 or -errno (fatal). */
static int
rooms_open(struct bench *b, const uint32_t *idx, uint32_t n)
{
	struct kvx_room_req q[BATCH_MAX];
	struct kvx_region reg[BATCH_MAX];
	struct kvx_source src = {.node = kvx_node_name(b->pre.c)};
	int64_t gen[BATCH_MAX], t;
	int r, rv;

	for (uint32_t k = 0; k < n; k++) {
		struct slot *sl = &b->slots[idx[k]];

		reg[k] = (struct kvx_region){
			.pool_id = b->dec.pool, .npages = b->o.pages, .pages = sl->dst};
		q[k] = (struct kvx_room_req){.room = sl->room,
					     .regions = &reg[k],
					     .nregions = 1,
					     .sources = &src,
					     .nsources = 1};
	}
	t = now_ns();
	for (uint32_t k = 0; k < n; k++)
		b->slots[idx[k]].t_open = t;
	if (b->o.chunks_first) {
		/* prefill's chunks, then decode's open at once: neither waits for the other's
		 * answer (kvxd's prefill room waits for decode's metadata) */
		for (uint32_t k = 0; k < n; k++)
			if ((r = room_begin(b, idx[k])) < 0)
				return r;
		if ((r = chunks_flush(b)) < 0)
			return r;
	}
	rv = kvx_room_openv(b->dec.c, q, n, gen);
	if (rv < 0 && fatal_err(rv)) {
		fprintf(stderr, "kvx-bench: %s: room open: %s\n", b->dec.path, strerror(-rv));
		return rv;
	}
	for (uint32_t k = 0; k < n; k++) {
		struct slot *sl = &b->slots[idx[k]];

		if (rv < 0 || gen[k] < 0) {
			int64_t g = rv < 0 ? rv : gen[k];

			if (fatal_err(g)) {
				fprintf(stderr, "kvx-bench: %s: room open: %s\n", b->dec.path,
					strerror((int)-g));
				return (int)g;
			}
			if (b->o.chunks_first) {
				fprintf(stderr,
					"kvx-bench: room %" PRIu64 ": decode refused its open (%s) "
					"after its chunks went to prefill (--chunks-first): its "
					"prefill room waits for metadata until waiting_ms\n",
					sl->room, strerror((int)-g));
				return (int)g;
			}
			b->failed_decode++;
			fail_log(b, sl->room, "decode room open", NULL, (int)g);
			continue;
		}
		if (b->o.chunks_first)
			continue; /* begun above */
		r = room_begin(b, idx[k]);
		if (r < 0)
			return r;
	}
	return chunks_flush(b);
}

static uint64_t
room_verify(struct bench *b, const struct slot *sl)
{
	int64_t t0 = now_ns();
	uint64_t bad = 0;
	uint32_t buf, i;

	for (buf = 0; buf < b->o.bufs; buf++) {
		for (i = 0; i < b->o.pages; i++) {
			const uint8_t *p = page_addr(b, &b->dec, buf, sl->dst[i]);
			uint64_t seed = pattern_seed(sl->room, i, buf);

			bad += sl->sampled ? page_verify_sampled(p, b->o.page_size, seed)
					   : page_verify(p, b->o.page_size, seed);
		}
	}
	b->rooms_sampled += sl->sampled;
	check_time(b, t0);
	return bad;
}

/* Released pages: fill every destination page of the room (every buffer) with the canary. */
static void
canary_fill(struct bench *b, const struct slot *sl)
{
	int64_t t0 = now_ns();
	uint32_t buf, i;

	for (buf = 0; buf < b->o.bufs; buf++)
		for (i = 0; i < b->o.pages; i++)
			page_fill(page_addr(b, &b->dec, buf, sl->dst[i]), b->o.page_size,
				  canary_seed(sl->room, i, buf));
	check_time(b, t0);
}

/* After the quarantine: any byte that is not the canary was written after RELEASED. */
static void
canary_check(struct bench *b, const struct slot *sl)
{
	int64_t t0 = now_ns();
	uint64_t bad = 0;
	uint32_t buf, i;

	for (buf = 0; buf < b->o.bufs; buf++)
		for (i = 0; i < b->o.pages; i++)
			bad += page_verify(page_addr(b, &b->dec, buf, sl->dst[i]), b->o.page_size,
					   canary_seed(sl->room, i, buf));
	check_time(b, t0);
	b->canary_checked += (uint64_t)b->o.pages * b->o.page_size * b->o.bufs;
	if (bad) {
		b->canary_changed += bad;
		fprintf(stderr,
			"kvx-bench: room %" PRIu64 ": %" PRIu64
			" bytes of its released pages were written within %u ms of RELEASED\n",
			sl->room, bad, b->o.settle_ms);
	}
}

/* Close the rooms of slots sls[0..n) on one side, in one call (kvx_room_closev).  A room closed
 * or unknown there is done on that side; one still busy (-EBUSY) is retried after
 * CLOSE_RETRY_NS.  Returns 0 or -errno (fatal). */
static int
close_batch(struct bench *b, struct side *sd, struct slot **sls, uint32_t n, int64_t now)
{
	uint64_t ids[BATCH_MAX] = {0};
	int st[BATCH_MAX], r;

	for (uint32_t k = 0; k < n; k++)
		ids[k] = sls[k]->room;
	r = kvx_room_closev(sd->c, ids, n, st);
	if (r < 0 && sd == &b->pre && prefill_loss(b, r, "room close")) {
		for (uint32_t k = 0; k < n; k++)
			sls[k]->pre_closed = true; /* its kvxd is gone, and with it the room */
		return 0;
	}
	if (r < 0) {
		fprintf(stderr, "kvx-bench: %s: room close: %s\n", sd->path, strerror(-r));
		return r;
	}
	for (uint32_t k = 0; k < n; k++) {
		struct slot *sl = sls[k];

		if (st[k] == -EBUSY) {
			b->close_busy++;
			sl->close_due = false; /* slot_settle sets it again then */
			sl->t_retry = now + CLOSE_RETRY_NS;
			continue;
		}
		if (st[k] && st[k] != -ENOENT)
			fprintf(stderr, "kvx-bench: %s: room %" PRIu64 " close: %s (ignored)\n",
				sd->path, sl->room, strerror(-st[k]));
		if (sd == &b->dec)
			sl->dec_closed = true;
		else
			sl->pre_closed = true;
	}
	return 0;
}

/* The closes slot_settle asked for, a batch per side (b->batch rooms per call): decode's first,
 * then prefill's of the rooms decode closed; a slot whose room is closed on both sides is free.
 * Returns the slots freed (>= 0) or -errno (fatal). */
static int
closes_flush(struct bench *b, int64_t now)
{
	struct slot *sls[BATCH_MAX];
	uint32_t n, s;
	int r, freed = 0;

	for (int side = 0; side < 2; side++) {
		struct side *sd = side == 0 ? &b->dec : &b->pre;

		n = 0;
		for (s = 0; s < b->o.inflight; s++) {
			struct slot *sl = &b->slots[s];

			if (sl->phase != SLOT_ACTIVE || !sl->close_due)
				continue;
			if (side == 0 ? sl->dec_closed : !sl->dec_closed || sl->pre_closed)
				continue;
			if (side == 1 && b->prefill_lost) {
				sl->pre_closed = true; /* its kvxd is gone, and with it the room */
				continue;
			}
			sls[n++] = sl;
			if (n == b->batch) {
				r = close_batch(b, sd, sls, n, now);
				if (r < 0)
					return r;
				n = 0;
			}
		}
		if (n) {
			r = close_batch(b, sd, sls, n, now);
			if (r < 0)
				return r;
		}
	}
	for (s = 0; s < b->o.inflight; s++) {
		struct slot *sl = &b->slots[s];

		if (sl->phase == SLOT_ACTIVE && sl->close_due && sl->dec_closed && sl->pre_closed) {
			sl->close_due = false;
			sl->phase = SLOT_FREE;
			b->active--;
			freed++;
		}
	}
	return freed;
}

/* Move the slot on as far as it can go now: the canary of released pages, then the closes and
 * the free slot.  Returns 0 or -errno (fatal). */
static int
slot_settle(struct bench *b, struct slot *sl, int64_t now)
{
	bool pre_done, dec_done;

	if (sl->t_retry && now < sl->t_retry)
		return 0;
	sl->t_retry = 0;
	if (sl->abort_due)
		return 0; /* its abort is still to be sent */
	/* decode: SUCCESS hands the pages back; otherwise RELEASED, then the canary's quarantine */
	dec_done = sl->dec_success || sl->canary_done;
	if (!dec_done && sl->dec_released) {
		if (!sl->canary_armed) {
			canary_fill(b, sl);
			sl->canary_armed = true;
			sl->t_canary = now + b->settle_ns;
		}
		if (now < sl->t_canary)
			return 0;
		canary_check(b, sl);
		sl->canary_done = dec_done = true;
	}
	if (!dec_done)
		return 0;
	/* prefill: its writes are complete.  After a release, kvxd decides: a prefill room it
	 * lets us close (or does not know) reads no source page any more. */
	pre_done = sl->pre_state == KVX_STATE_SUCCESS || sl->pre_state == KVX_STATE_FAILED ||
		   b->prefill_lost; /* nothing is left there to read our source pages */
	if (!pre_done && sl->pre_submitted) {
		/* the prefill engine must be told how its room ended: give it a while */
		if (!sl->t_pre_wait)
			sl->t_pre_wait = now + (int64_t)b->o.prefill_wait_ms * 1000000;
		if (now < sl->t_pre_wait) {
			/* prefill's event settles the slot at once; this is the deadline */
			sl->t_retry = sl->t_pre_wait;
			return 0;
		}
		b->untold_prefill++;
		fprintf(stderr,
			"kvx-bench: room %" PRIu64 ": the prefill engine was never told how it "
			"ended\n",
			sl->room);
	}
	if (!pre_done && !sl->canary_done)
		return 0;
	sl->close_due = true; /* closes_flush closes it on both sides and frees the slot */
	return 0;
}

/* A room's decode SUCCESS seen at `now` (the time its event batch was read): count it in the
 * steady-state window if it falls inside.  Returns 0 or -ENOMEM. */
static int
window_count(struct bench *b, const struct slot *sl, int64_t now)
{
	if (!(b->o.duration > 0 && now >= b->t_warm && now <= b->t_cool))
		return 0;
	if (!b->t_win0) {
		b->t_win0 = now; /* the window opens: this batch is its start, not counted */
		return 0;
	}
	if (now == b->t_win0)
		return 0;
	b->win_rooms++;
	b->win_bytes += (uint64_t)b->o.pages * b->o.page_size * b->o.bufs;
	b->t_win1 = now;
	if (sl->t_last && samples_push(&b->win_last_lat, (uint64_t)(now - sl->t_last)) < 0)
		return -ENOMEM;
	return samples_push(&b->win_lat, (uint64_t)(now - sl->t_open));
}

/* What a page that failed the check holds, judged by its first word (each pattern starts with
 * its seed): this room's data for another page or buffer (a WRITE that landed in the wrong
 * place), the slot's previous room's data or canary (a WRITE that never landed, or a late one of
 * the previous room), zeros, or none of these.  off: the page's first wrong byte. */
#define EXPLAIN_ROOMS 512

static const char *
page_explain(const struct bench *b, const struct slot *sl, const uint8_t *p, uint32_t i,
	     uint32_t buf, uint64_t *off)
{
	const uint64_t *w = (const uint64_t *)p;
	uint64_t x = pattern_seed(sl->room, i, buf);
	size_t k, n = b->o.page_size / sizeof(uint64_t);

	*off = 0;
	for (k = 0; k < n; k++, x += PATTERN_STEP)
		if (w[k] != x) {
			*off = k * sizeof(uint64_t);
			break;
		}
	if (*off)
		return "its own data up to there";
	if (w[0] == 0)
		return "zeros";
	for (uint32_t c = 0; c < b->o.bufs; c++)
		for (uint32_t j = 0; j < b->o.pages; j++) {
			if (w[0] == pattern_seed(sl->room, j, c))
				return "this room's data for another page";
			if (sl->has_prev && w[0] == pattern_seed(sl->prev_room, j, c))
				return "the slot's previous room's data";
			if (sl->has_prev && w[0] == canary_seed(sl->prev_room, j, c))
				return "the slot's previous room's canary";
		}
	/* an older room's (any slot's): the last EXPLAIN_ROOMS opened */
	for (uint64_t a = 1; a <= EXPLAIN_ROOMS && a <= sl->room - b->room_base; a++)
		for (uint32_t c = 0; c < b->o.bufs; c++)
			for (uint32_t j = 0; j < b->o.pages; j++) {
				static char what[96];

				if (w[0] == pattern_seed(sl->room - a, j, c) ||
				    w[0] == canary_seed(sl->room - a, j, c)) {
					snprintf(what, sizeof(what),
						 "room %" PRIu64 "'s %s (page %u, buffer %u)",
						 sl->room - a,
						 w[0] == pattern_seed(sl->room - a, j, c)
							 ? "data"
							 : "canary",
						 j, c);
					return what;
				}
			}
	return "none of the bench's patterns";
}

/* A room that failed the check: which pages of which buffers, and what they hold (the first
 * few, on stderr), with the room's times since the start, to match against kvxd's logs. */
static void
room_explain(const struct bench *b, const struct slot *sl, int64_t now)
{
	int shown = 0;

	fprintf(stderr,
		"kvx-bench: room %" PRIu64 " (slot %td, previous room %s%" PRIu64
		"): opened %.3f s after the start, SUCCESS %.3f s after\n",
		sl->room, sl - b->slots, sl->has_prev ? "" : "none, ",
		sl->has_prev ? sl->prev_room : 0, (double)(sl->t_open - b->t_start) / 1e9,
		(double)(now - b->t_start) / 1e9);
	for (uint32_t buf = 0; buf < b->o.bufs; buf++)
		for (uint32_t i = 0; i < b->o.pages; i++) {
			const uint8_t *p = page_addr(b, &b->dec, buf, sl->dst[i]);
			uint64_t off;
			const char *what;

			if (!page_verify(p, b->o.page_size, pattern_seed(sl->room, i, buf)))
				continue;
			if (shown++ >= 6)
				continue;
			what = page_explain(b, sl, p, i, buf, &off);
			fprintf(stderr,
				"kvx-bench: room %" PRIu64 ": buffer %u page %u (pool page %u): %s"
				" (first wrong byte %" PRIu64 ")\n",
				sl->room, buf, i, sl->dst[i], what, off);
		}
	if (shown > 6)
		fprintf(stderr, "kvx-bench: room %" PRIu64 ": %d wrong pages in all\n", sl->room,
			shown);
}

static int
on_decode_success(struct bench *b, struct slot *sl, int64_t now)
{
	uint64_t bad;

	if (sl->abort_gen) {
		/* the abort lost the race: every source had delivered before it took effect, so
		 * nothing can still write and the pages hold the room's data; verify them */
		sl->abort_gen = 0;
		b->aborted--;
		b->abort_lost++;
	}
	if (sl->dec_success || sl->dec_failed)
		return 0;
	sl->dec_success = true;
	b->ok++;
	b->bytes += (uint64_t)b->o.pages * b->o.page_size * b->o.bufs;
	if (samples_push(&b->lat, (uint64_t)(now - sl->t_open)) < 0 || window_count(b, sl, now) < 0)
		return -ENOMEM;
	bad = room_verify(b, sl);
	if (bad) {
		b->mismatched += bad;
		fprintf(stderr,
			"kvx-bench: room %" PRIu64 ": %" PRIu64
			" bytes differ from what prefill sent\n",
			sl->room, bad);
		room_explain(b, sl, now);
	}
	/* an abort planned for later comes too late now: kvxd must answer -EALREADY */
	if (sl->abort_due)
		return room_abort(b, sl);
	return 0;
}

static int
on_decode_released(struct bench *b, struct slot *sl, const struct kvx_event *ev, int64_t now)
{
	sl->dec_released = true;
	sl->t_released = now;
	b->released++;
	if (sl->at_loss && now > b->t_last_loss_release)
		b->t_last_loss_release = now;
	if (sl->at_loss && samples_push(&b->loss_lat, (uint64_t)(now - b->t_loss)) < 0)
		return -ENOMEM;
	if (!sl->abort_gen)
		return 0; /* kvxd's own abort: its generation is kvxd's to pick */
	if (samples_push(&b->abort_lat, (uint64_t)(now - sl->t_abort)) < 0)
		return -ENOMEM;
	if (ev->generation != (uint64_t)sl->abort_gen) {
		b->bad_generation++;
		fprintf(stderr,
			"kvx-bench: room %" PRIu64 ": RELEASED with generation %u, but the abort "
			"returned %" PRId64 "\n",
			sl->room, ev->generation, sl->abort_gen);
	}
	return 0;
}

static int
on_event(struct bench *b, bool decode, const struct kvx_event *ev, int64_t now)
{
	struct slot *sl = slot_find(b, ev->room);
	int *st;
	int r = 0;

	if (!sl || ev->state < 0 || ev->state > KVX_STATE_RELEASED) {
		b->stray_events++;
		return 0;
	}
	if (decode ? ev->state == KVX_STATE_SUCCESS || ev->state == KVX_STATE_RELEASED
		   : ev->state == KVX_STATE_SUCCESS || ev->state == KVX_STATE_FAILED) {
		uint8_t *ends = decode ? &sl->dec_ends : &sl->pre_ends;

		if (++*ends > 1) {
			(*(decode ? &b->dup_decode : &b->dup_prefill))++;
			fprintf(stderr, "kvx-bench: room %" PRIu64 ": a second end on %s (%d)\n",
				sl->room, decode ? "decode" : "prefill", ev->state);
		}
	}
	st = decode ? &sl->dec_state : &sl->pre_state;
	if (ev->state <= *st)
		return 0; /* states only move forward: a repeat, nothing new */
	*st = ev->state;

	if (!decode) {
		/* an aborted room's prefill side ends FAILED (or SUCCESS if it finished first) */
		if (ev->state == KVX_STATE_FAILED && !sl->pre_failed) {
			sl->pre_failed = true;
			if (!sl->abort_sent) {
				b->failed_prefill++;
				fail_log(b, sl->room, "prefill", ev, 0);
			}
		}
		sl->t_retry = 0; /* it may have waited for this event (or a close retry: early) */
		return slot_settle(b, sl, now);
	}
	if (ev->state == KVX_STATE_SUCCESS) {
		r = on_decode_success(b, sl, now);
	} else if (ev->state >= KVX_STATE_FAILED) {
		/* FAILED, or DRAINING/RELEASED whose FAILED we never saw */
		if (!sl->dec_failed) {
			sl->dec_failed = true;
			sl->abort_due = false; /* failing already: a planned abort is moot */
			/* a room in flight at a prefill loss is expected to fail */
			if (!sl->abort_gen && !sl->at_loss) {
				b->failed_decode++;
				sl->fail_counted = true;
				fail_log(b, sl->room, "decode", ev, 0);
			}
		}
		if (ev->state == KVX_STATE_RELEASED)
			r = on_decode_released(b, sl, ev, now);
	}
	if (r < 0)
		return r;
	return slot_settle(b, sl, now);
}

static int
read_events(struct bench *b, struct side *sd, int64_t *now, int *got)
{
	struct kvx_event ev[EVENT_BATCH];
	int n, i, r;

	do {
		n = kvx_event_read(sd->c, ev, EVENT_BATCH, 0);
		if (n < 0 && sd == &b->pre && prefill_loss(b, n, "reading events"))
			return 0;
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

/* Watchdog, delayed aborts, quarantines and delayed closes.  Returns 0 or -errno (fatal). */
/* --last-chunk-delay-ms: the held-back last chunk of slot s's room.  Returns 0 or -errno. */
static int
last_chunk(struct bench *b, struct slot *sl, uint32_t s)
{
	const uint32_t P = b->o.pages, C = b->o.chunks;
	uint32_t n = P / C + (C - 1 < P % C ? 1 : 0), off = P - n;
	int r;

	sl->last_due = false;
	if (b->prefill_lost)
		return 0;
	for (uint32_t i = 0; i < n; i++)
		b->src[i] = sl->src[off + i];
	sl->pre_submitted = true;
	sl->t_last = now_ns();
	r = kvx_chunk_submit(b->pre.c, sl->room, C - 1, b->pre.pool, b->src, n, off, true);
	if (r < 0 && prefill_loss(b, r, "chunk submit"))
		return 0;
	if (r < 0)
		fprintf(stderr, "kvx-bench: %s: chunk submit (room %" PRIu64 "): %s\n", b->pre.path,
			sl->room, strerror(-r));
	return r < 0 ? r : 0;
}

static int
slots_tick(struct bench *b, int64_t now)
{
	int64_t deadline;
	uint32_t i;
	int r;

	for (i = 0; i < b->o.inflight; i++) {
		struct slot *sl = &b->slots[i];

		if (sl->phase != SLOT_ACTIVE)
			continue;
		deadline = sl->t_open + b->watchdog_ns + (sl->canary_armed ? b->settle_ns : 0);
		if (now > deadline) {
			fprintf(stderr,
				"kvx-bench: room %" PRIu64 ": timed out after %gs (decode %s, "
				"prefill %s%s); its slot is retired\n",
				sl->room, b->o.timeout,
				sl->dec_state < 0 ? "no event" : kvx_state_str(sl->dec_state),
				sl->pre_state < 0 ? "no event" : kvx_state_str(sl->pre_state),
				sl->abort_gen ? ", aborted" : "");
			b->timed_out++;
			if (!sl->dec_ends)
				b->untold_decode++;
			sl->phase = SLOT_RETIRED;
			b->active--;
			b->retired++;
			continue;
		}
		if (sl->last_due && now >= sl->t_last_due) {
			r = last_chunk(b, sl, i);
			if (r < 0)
				return r;
		}
		if (sl->abort_due && now >= sl->t_abort_due) {
			r = room_abort(b, sl);
			if (r < 0)
				return r;
		}
		r = slot_settle(b, sl, now);
		if (r < 0)
			return r;
	}
	return 0;
}

static bool
may_open(const struct bench *b, int64_t now)
{
	if (interrupted || b->retired == b->o.inflight || b->prefill_lost)
		return false;
	if (b->o.duration > 0 && now >= b->t_stop)
		return false;
	if ((b->o.duration <= 0 || b->o.rooms_set) && b->opened >= b->o.rooms)
		return false;
	return true;
}

/* The earliest time a slot needs the tick (a delayed abort, a quarantine's end, a close retry),
 * if before next. */
static int64_t
slots_next(const struct bench *b, int64_t next)
{
	uint32_t s;

	for (s = 0; s < b->o.inflight; s++) {
		const struct slot *sl = &b->slots[s];

		if (sl->phase != SLOT_ACTIVE)
			continue;
		if (sl->t_retry && sl->t_retry < next)
			next = sl->t_retry;
		if (sl->abort_due && sl->t_abort_due < next)
			next = sl->t_abort_due;
		if (sl->last_due && sl->t_last_due < next)
			next = sl->t_last_due;
		if (sl->canary_armed && !sl->canary_done && sl->t_canary < next)
			next = sl->t_canary;
	}
	return next;
}

static int
run(struct bench *b)
{
	struct pollfd pf[2];
	struct timespec ts;
	int64_t now, next;
	uint32_t s, open_idx[BATCH_MAX], nopen;
	int got, r;

	b->t_start = now_ns();
	b->t_drop = b->t_start + (int64_t)b->o.drop_prefill_ms * 1000000;
	if (b->o.duration > 0)
		b->t_stop = b->t_start + (int64_t)(b->o.duration * NSEC);
	b->t_warm = b->t_start + (int64_t)b->o.warmup_ms * 1000000;
	b->t_cool = b->t_stop - (int64_t)b->o.cooldown_ms * 1000000;
	for (;;) {
		now = now_ns();
		/* every free slot gets a room, b->batch rooms per open call */
		for (s = 0, nopen = 0; s < b->o.inflight && may_open(b, now); s++) {
			if (b->slots[s].phase != SLOT_FREE)
				continue;
			room_prepare(b, s);
			open_idx[nopen++] = s;
			if (nopen == b->batch) {
				r = rooms_open(b, open_idx, nopen);
				if (r < 0)
					return r;
				nopen = 0;
				now = now_ns();
			}
		}
		if (nopen) {
			r = rooms_open(b, open_idx, nopen);
			if (r < 0)
				return r;
			now = now_ns();
		}
		if (!b->active && !may_open(b, now))
			return 0;

		if (b->o.drop_prefill_ms && !b->prefill_lost && now >= b->t_drop) {
			/* the prefill engine dies: its connection closes without a word */
			kvx_disconnect(b->pre.c);
			b->pre.c = NULL;
			prefill_loss(b, -ECONNRESET, "dropped (--drop-prefill-engine-ms)");
		}
		got = 0;
		r = read_events(b, &b->dec, &now, &got);
		if (!r && !b->prefill_lost)
			r = read_events(b, &b->pre, &now, &got);
		if (!r)
			r = slots_tick(b, now);
		if (!r) {
			r = closes_flush(b, now);
			if (r > 0)
				got += r; /* free slots: open rooms in them at once */
		}
		if (r < 0)
			return r;
		if (got)
			continue;

		/* nothing happened: sleep until an event, a slot's next step, the watchdog's next
		 * look or the stop time (ppoll: abort delays are microseconds) */
		next = now + (int64_t)POLL_MAX_MS * 1000000;
		if (b->t_stop && b->t_stop > now && b->t_stop < next)
			next = b->t_stop;
		next = slots_next(b, next);
		if (b->o.drop_prefill_ms && !b->prefill_lost && b->t_drop < next)
			next = b->t_drop > now ? b->t_drop : now;
		if (next < now)
			next = now;
		ts.tv_sec = (time_t)((next - now) / NSEC);
		ts.tv_nsec = (long)((next - now) % NSEC);
		pf[0] = (struct pollfd){.fd = kvx_conn_fd(b->dec.c), .events = POLLIN};
		/* a lost connection's fd stays readable: leave it out */
		pf[1] = (struct pollfd){.fd = b->prefill_lost ? -1 : kvx_conn_fd(b->pre.c),
					.events = POLLIN};
		if (ppoll(pf, 2, &ts, NULL) < 0 && errno != EINTR) {
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

/* Nearest-rank percentile of sorted samples, in microseconds (0 when there are none). */
static double
pct_us(const struct samples *sm, double pct)
{
	size_t k;

	if (!sm->n)
		return 0;
	k = (size_t)ceil(pct / 100.0 * (double)sm->n);
	if (k < 1)
		k = 1;
	if (k > sm->n)
		k = sm->n;
	return (double)sm->v[k - 1] / 1e3;
}

static void
report(struct bench *b, double secs)
{
	double mbps = secs > 0 ? (double)b->bytes / secs / 1e6 : 0;
	double rps = secs > 0 ? (double)b->ok / secs : 0;
	uint64_t msg = b->writes ? (b->write_bytes + b->writes / 2) / b->writes : 0;
	double p50, p99, a50, a99, l50, l99, w50, w99, c50, c99;
	double wsecs = b->t_win1 > b->t_win0 ? (double)(b->t_win1 - b->t_win0) / 1e9 : 0;
	double wmbps = wsecs > 0 ? (double)b->win_bytes / wsecs / 1e6 : 0;
	double wrps = wsecs > 0 ? (double)b->win_rooms / wsecs : 0;
	double wcheck = (double)b->check_ns / 1e9;
	struct rusage ru;
	double loss_us = b->prefill_lost && b->t_last_loss_release > b->t_loss
				 ? (double)(b->t_last_loss_release - b->t_loss) / 1e3
				 : 0;

	if (b->lat.n)
		qsort(b->lat.v, b->lat.n, sizeof(*b->lat.v), cmp_u64);
	if (b->abort_lat.n)
		qsort(b->abort_lat.v, b->abort_lat.n, sizeof(*b->abort_lat.v), cmp_u64);
	p50 = pct_us(&b->lat, 50);
	p99 = pct_us(&b->lat, 99);
	a50 = pct_us(&b->abort_lat, 50);
	a99 = pct_us(&b->abort_lat, 99);
	if (b->loss_lat.n)
		qsort(b->loss_lat.v, b->loss_lat.n, sizeof(*b->loss_lat.v), cmp_u64);
	l50 = pct_us(&b->loss_lat, 50);
	l99 = pct_us(&b->loss_lat, 99);
	if (b->win_lat.n)
		qsort(b->win_lat.v, b->win_lat.n, sizeof(*b->win_lat.v), cmp_u64);
	w50 = pct_us(&b->win_lat, 50);
	w99 = pct_us(&b->win_lat, 99);
	if (b->win_last_lat.n)
		qsort(b->win_last_lat.v, b->win_last_lat.n, sizeof(*b->win_last_lat.v), cmp_u64);
	c50 = pct_us(&b->win_last_lat, 50);
	c99 = pct_us(&b->win_last_lat, 99);
	if (b->o.json) {
		printf("{\"rooms\": %" PRIu64 ", \"failed_decode\": %" PRIu64
		       ", \"failed_prefill\": %" PRIu64 ", \"timed_out\": %" PRIu64
		       ", \"bytes\": %" PRIu64 ", \"seconds\": %.6f, \"MBps\": %.3f"
		       ", \"GBps\": %.6f, \"rooms_per_s\": %.3f, \"lat_p50_us\": %.1f"
		       ", \"lat_p99_us\": %.1f, \"verified\": \"%s\", \"mismatched_bytes\": "
		       "%" PRIu64 ", \"msg_bytes\": %" PRIu64,
		       b->opened, b->failed_decode, b->failed_prefill, b->timed_out, b->bytes, secs,
		       mbps, mbps / 1e3, rps, p50, p99, b->mismatched ? "FAIL" : "ok",
		       b->mismatched, msg);
		printf(", \"wake_ends\": %s", b->o.wake_all ? "false" : "true");
		printf(", \"chunks_first\": %s", b->o.chunks_first ? "true" : "false");
		if (getrusage(RUSAGE_SELF, &ru) == 0)
			/* the whole run: how often kvx-bench blocked (each a wake-up later) */
			printf(", \"ctx_switches_voluntary\": %ld, \"ctx_switches_involuntary\": "
			       "%ld",
			       ru.ru_nvcsw, ru.ru_nivcsw);
		printf(", \"aborted\": %" PRIu64 ", \"abort_lost\": %" PRIu64
		       ", \"abort_at_open\": %" PRIu64 ", \"abort_mid_chunks\": %" PRIu64
		       ", \"abort_after_chunks\": %" PRIu64 ", \"released\": %" PRIu64
		       ", \"abort_release_p50_us\": %.1f, \"abort_release_p99_us\": %.1f"
		       ", \"canary_checked_bytes\": %" PRIu64 ", \"canary_changed_bytes\": %" PRIu64
		       ", \"bad_generation\": %" PRIu64 ", \"protocol_errors\": %" PRIu64,
		       b->aborted, b->abort_lost, b->abort_calls[ABORT_AT_OPEN],
		       b->abort_calls[ABORT_MID], b->abort_calls[ABORT_AFTER], b->released, a50,
		       a99, b->canary_checked, b->canary_changed, b->bad_generation,
		       b->protocol_errors);
		if (b->o.survive_prefill_loss)
			printf(", \"prefill_lost\": %s, \"loss_to_last_release_us\": %.1f"
			       ", \"rooms_in_flight_at_loss\": %" PRIu64
			       ", \"loss_release_p50_us\": %.1f, \"loss_release_p99_us\": %.1f",
			       b->prefill_lost ? "true" : "false", loss_us, b->rooms_at_loss, l50,
			       l99);
		if (b->o.duration > 0)
			printf(", \"MB_bytes\": 1000000, \"warmup_ms\": %u, \"cooldown_ms\": %u"
			       ", \"window_seconds\": %.6f, \"window_rooms\": %" PRIu64
			       ", \"window_bytes\": %" PRIu64
			       ", \"window_MBps\": %.3f, \"window_rooms_per_s\": %.3f"
			       ", \"window_lat_p50_us\": %.1f, \"window_lat_p99_us\": %.1f"
			       ", \"window_last_chunk_lat_p50_us\": %.1f"
			       ", \"window_last_chunk_lat_p99_us\": %.1f"
			       ", \"window_check_s\": %.3f, \"window_check\": \"%s\""
			       ", \"rooms_sampled\": %" PRIu64,
			       b->o.warmup_ms, b->o.cooldown_ms, wsecs, b->win_rooms, b->win_bytes,
			       wmbps, wrps, w50, w99, c50, c99, wcheck,
			       b->o.window_sampled ? "sampled" : "full", b->rooms_sampled);
		printf(", \"untold_decode\": %" PRIu64 ", \"untold_prefill\": %" PRIu64
		       ", \"duplicate_events_decode\": %" PRIu64
		       ", \"duplicate_events_prefill\": %" PRIu64 ", \"close_busy\": %" PRIu64,
		       b->untold_decode, b->untold_prefill, b->dup_decode, b->dup_prefill,
		       b->close_busy);
		printf("}\n");
	} else {
		printf("kvx-bench: prefill %s (%s) -> decode %s (%s)\n",
		       b->pre.c ? kvx_node_name(b->pre.c) : "(dropped)", b->pre.path,
		       kvx_node_name(b->dec.c), b->dec.path);
		printf("  inflight %u  page_size %u  pages %u  chunks %u  bufs %u  scatter %s  "
		       "scatter_src %s  seed %" PRIu64 "\n",
		       b->o.inflight, b->o.page_size, b->o.pages, b->o.chunks, b->o.bufs,
		       b->o.scatter ? "yes" : "no", b->o.scatter_src ? "yes" : "no", b->o.seed);
		if (b->o.abort_ratio > 0)
			printf("  abort_ratio %g  abort_delay_us %" PRIu64 "  settle_ms %u\n",
			       b->o.abort_ratio, b->o.abort_delay_us, b->o.settle_ms);
		printf("rooms %" PRIu64 "  failed decode %" PRIu64 " / prefill %" PRIu64
		       "  timed_out %" PRIu64 "\n",
		       b->opened, b->failed_decode, b->failed_prefill, b->timed_out);
		printf("bytes %" PRIu64 "  seconds %.3f  msg_bytes %" PRIu64 "\n", b->bytes, secs,
		       msg);
		printf("MB/s %.2f  GB/s %.4f  rooms/s %.1f  (MB = 10^6 B; the whole run)\n", mbps,
		       mbps / 1e3, rps);
		printf("latency_us p50 %.1f  p99 %.1f  (open -> decode SUCCESS, %zu rooms)\n", p50,
		       p99, b->lat.n);
		if (b->o.duration > 0)
			printf("window MB/s %.2f  rooms/s %.1f  latency_us p50 %.1f  p99 %.1f  "
			       "(%" PRIu64 " rooms, %" PRIu64 " bytes in %.3f s, %u ms warm-up and "
			       "%u ms cool-down left out; %.3f s of it filling and verifying)\n",
			       wmbps, wrps, w50, w99, b->win_rooms, b->win_bytes, wsecs,
			       b->o.warmup_ms, b->o.cooldown_ms, wcheck);
		if (b->o.duration > 0 && b->win_last_lat.n)
			printf("window last chunk -> decode SUCCESS latency_us p50 %.1f  p99 %.1f  "
			       "(%zu rooms)\n",
			       c50, c99, b->win_last_lat.n);
		printf("verified=%s (%" PRIu64 " mismatched bytes)\n",
		       b->mismatched ? "FAIL" : "ok", b->mismatched);
		if (b->o.window_sampled)
			printf("  %" PRIu64 " rooms filled in the window verified sampled (first "
			       "and last 8 bytes of every 512), the others whole\n",
			       b->rooms_sampled);
		if (b->o.abort_ratio > 0 || b->released || b->protocol_errors) {
			printf("aborted %" PRIu64 " (calls at open %" PRIu64 ", mid-chunks %" PRIu64
			       ", after chunks %" PRIu64 ")  abort_lost %" PRIu64
			       "  released %" PRIu64 "\n",
			       b->aborted, b->abort_calls[ABORT_AT_OPEN], b->abort_calls[ABORT_MID],
			       b->abort_calls[ABORT_AFTER], b->abort_lost, b->released);
			printf("abort_release_us p50 %.1f  p99 %.1f  (abort -> RELEASED, %zu "
			       "rooms)\n",
			       a50, a99, b->abort_lat.n);
			printf("canary=%s (%" PRIu64 " of %" PRIu64
			       " bytes changed)  bad_generation %" PRIu64
			       "  protocol_errors %" PRIu64 "\n",
			       b->canary_changed ? "FAIL" : "ok", b->canary_changed,
			       b->canary_checked, b->bad_generation, b->protocol_errors);
		}
		if (b->o.survive_prefill_loss)
			printf("prefill_lost %s  rooms_in_flight_at_loss %" PRIu64
			       "  loss_to_last_release_us %.1f  loss_release_us p50 %.1f  p99 "
			       "%.1f\n",
			       b->prefill_lost ? "yes" : "no", b->rooms_at_loss, loss_us, l50, l99);
		printf("untold decode %" PRIu64 " / prefill %" PRIu64
		       "  duplicate events decode %" PRIu64 " / prefill %" PRIu64 "\n",
		       b->untold_decode, b->untold_prefill, b->dup_decode, b->dup_prefill);
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
	if (r == 2) {
		printf("kvx-bench %s (libkvx %s)\n", KVX_VERSION_STRING, kvx_version());
		return 0;
	}
	if (r < 0) {
		usage(stderr);
		return 2;
	}
	if (!b.o.seed_set && getrandom(&b.o.seed, sizeof(b.o.seed), 0) != sizeof(b.o.seed))
		b.o.seed = (uint64_t)now_ns() ^ ((uint64_t)getpid() << 32);
	b.rng = splitmix64(b.o.seed ^ 0x6b76782d62656e63ULL) | 1;
	b.arng = splitmix64(b.o.seed ^ 0x6b76782d61626f72ULL) | 1;
	b.room_base = splitmix64(b.o.seed) & ROOM_BASE_MASK;
	b.next_room = b.room_base;
	b.npages = b.o.inflight * b.o.pages;
	b.watchdog_ns = (int64_t)(b.o.timeout * NSEC);
	b.settle_ns = (int64_t)b.o.settle_ms * 1000000;
	b.pre.path = b.o.prefill;
	b.dec.path = b.o.decode;

	b.slots = calloc(b.o.inflight, sizeof(*b.slots));
	b.src = calloc(b.o.pages, sizeof(*b.src));
	b.batch = b.o.single ? 1 : BATCH_MAX;
	if (!b.slots || !b.src)
		goto out;
	for (s = 0; s < b.o.inflight; s++) {
		b.slots[s].dst = calloc(b.o.pages, sizeof(uint32_t));
		b.slots[s].src = calloc(b.o.pages, sizeof(uint32_t));
		if (!b.slots[s].dst || !b.slots[s].src)
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
	if (b.ok == 0 && b.opened && !b.o.allow_failures && b.aborted < b.opened)
		fprintf(stderr, "kvx-bench: no room succeeded\n");
	rc = (b.mismatched == 0 && b.timed_out == 0 && b.canary_changed == 0 &&
	      b.bad_generation == 0 && b.protocol_errors == 0 && b.untold_decode == 0 &&
	      b.untold_prefill == 0 && b.dup_decode == 0 && b.dup_prefill == 0 &&
	      (b.o.allow_failures || (b.failed_decode == 0 && b.failed_prefill == 0)))
		     ? 0
		     : 1;
out:
	side_close(&b.dec);
	side_close(&b.pre);
	if (b.slots)
		for (s = 0; s < b.o.inflight; s++) {
			free(b.slots[s].dst);
			free(b.slots[s].src);
		}
	free(b.slots);
	free(b.src);
	free(b.lat.v);
	free(b.abort_lat.v);
	free(b.loss_lat.v);
	free(b.win_lat.v);
	free(b.win_last_lat.v);
	return rc;
}
