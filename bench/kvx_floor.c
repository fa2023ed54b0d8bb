/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kvx-floor: the floor of a one-page room's latency on this fabric, whatever software moves it.
 *
 * A room that decode opens and prefill fills needs at least two one-way trips over the fabric:
 * its metadata to prefill, then the page to decode.  This program does only that, with kvx's own
 * verbs layer (verbs/vx.h) and nothing else: no kvxd, no control core, no rooms table, no
 * engine protocol.  One process opens both devices (decode's and prefill's, as the VM's two
 * nodes have them), connects one RC QP pair and repeats, one room at a time:
 *
 *   decode:  WRITE_WITH_IMM of a 64-byte metadata record (the page's address and rkey, the
 *            room's sequence number) into prefill's metadata buffer;
 *   prefill: on its RECV_WITH_IMM, reads the record, stamps the sequence number into the first
 *            and last 8 bytes of its page and WRITE_WITH_IMMs the page (--size bytes) to decode;
 *   decode:  on its RECV_WITH_IMM, checks both stamps: the page landed.
 *
 * The latency of a room is from decode's request to its check, read with CLOCK_MONOTONIC.
 * --threads says who does decode's part:
 *   2  decode's "engine" and "polling core" are one thread, prefill's polling core another
 *      (two busy threads, as ib_write_lat has: the floor of any design);
 *   3  decode's engine is a thread of its own that hands the request to decode's polling core
 *      and waits for its answer through two words of shared memory (the floor of kvx's
 *      design: DESIGN.md section 6 puts the engine and the polling core in different threads).
 *      --engine-process: that engine is a process of its own (forked, the two words and the
 *      latencies in shared memory), as an engine and kvxd are: the floor of kvx's design with
 *      the process switches it needs (on the VM's emulated CPUs a switch between processes
 *      costs far more than one between threads of a process).
 *      --prefill-engine: that engine plays prefill's engine too, as kvx-bench does: prefill's
 *      polling core tells it of each record and posts the page once it submits the chunk
 *      (two hand-offs to the engine per room, as a room in kvx has: ROOM_META's arrival at
 *      prefill, then decode's SUCCESS).
 * --park says who blocks instead of spinning while it waits:
 *   none    every thread spins (kvxd's polling cores with idle_park_us = 0, an engine that
 *           busy-polls its event ring);
 *   engine  decode's engine (--threads 3) waits on an eventfd, as an engine blocked in libkvx
 *           does; the polling cores spin;
 *   all     the polling cores park on their CQ's completion channel too, as kvxd's do with
 *           idle_park_us = 1 (the VM's configs).
 *
 * --inflight N (N > 1): the floor of a one-page room's rate instead.  Decode's engine and polling
 * core are one thread (--threads 2) and keep N rooms in flight: each room gets its own page slot
 * on both sides, and prefill answers each record with its page as above.  --batch B: decode
 * sends the records of up to B rooms in one WRITE_WITH_IMM (as kvxd sends every ROOM_META of a
 * loop iteration to a peer in one frame), and prefill posts their pages as one chain.  The
 * rate is the rooms after --warmup over the time they took.
 *
 * Prints one line, `floor: threads=N park=WHO engine=thread|process[,prefill] size=B rooms=N
 * p50_us=X p99_us=Y min_us=Z` (or `floor: rate inflight=N batch=B park=WHO size=B rooms=N
 * rooms_per_s=X`). Exit 0, 1 if a room failed (a stamp missing, a completion in error, 5 s without
 * an answer), 2 on a usage error.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <poll.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#define BENCH_PROG "kvx-floor"
#include "opt.h"

#include "verbs/vx.h"

#define META_BYTES 64u
#define INFLIGHT_MAX 1024u
#define BATCH_MAX 64u
#define TIMEOUT_NS (5ll * 1000 * 1000 * 1000)

/* the metadata record decode writes into prefill's buffer */
struct meta {
	uint64_t raddr;
	uint32_t rkey;
	uint32_t pad;
	uint64_t seq;
};

struct side {
	struct kvx_vx_dev *dev;
	struct kvx_vx_cq *cq;
	struct kvx_vx_qp *qp;
	struct kvx_vx_mr *mr;
	uint8_t *buf; /* the metadata area, then the pages (meta_off, page_off) */
	struct kvx_vx_dev_info info;
	uint32_t psn;
	uint8_t gid_index;
	struct kvx_vx_wc wc[32]; /* polled, not yet taken: wc[wc_i .. wc_n) */
	int wc_i, wc_n;
};

/* decode's engine and polling core (--threads 3): one writer per line */
struct handoff {
	_Alignas(64) _Atomic uint64_t req;   /* the engine: the room it asks for */
	_Alignas(64) _Atomic uint64_t done;  /* the polling core: the room it checked (or ~0) */
	_Alignas(64) _Atomic uint64_t meta;  /* --prefill-engine, prefill's core: the room whose
					      * record came */
	_Alignas(64) _Atomic uint64_t chunk; /* the engine: the room whose chunk it submits */
	_Alignas(64) _Atomic bool stop;
	int req_fd, done_fd, stop_fd, meta_fd, chunk_fd; /* --park: eventfds */
};

struct floor {
	struct side dec, pre;
	uint32_t size, rooms, warmup, threads;
	/* rooms in flight, records per WRITE (at most), and the metadata area's slots: a slot of
	 * batch j is taken again by batch j + slots, once batch j has ended (slots > inflight) */
	uint32_t inflight, batch, slots;
	uint32_t depth;	     /* each QP's send and receive queue */
	bool park;	     /* the polling cores park when idle */
	bool engine_park;    /* decode's engine waits for its answer on an eventfd */
	bool engine_process; /* decode's engine (--threads 3) is a process of its own */
	bool prefill_engine; /* it is prefill's engine too: it submits each room's chunk */
	struct handoff *h;   /* shared with the engine's process (MAP_SHARED) */
	uint64_t *lat;	     /* the same */
	_Atomic int error;   /* a failure, -errno */
};

static const struct kvx_vx_ops *vx = &kvx_vx_ibv_ops;

static int64_t
now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000000000 + ts.tv_nsec;
}

/* Either side's buffer: the metadata area (slots of batch records: decode writes each batch
 * from its own slot to prefill's), then one page per room in flight. */
static uint64_t
meta_off(const struct floor *f, uint64_t batch)
{
	return (batch % f->slots) * f->batch * (uint64_t)META_BYTES;
}

static uint64_t
page_off(const struct floor *f, uint64_t seq)
{
	return (uint64_t)f->slots * f->batch * META_BYTES + (seq % f->inflight) * f->size;
}

static int
side_open(const struct floor *f, struct side *s, const char *dev, uint8_t gid_index)
{
	size_t bytes = page_off(f, f->inflight - 1) + f->size;
	int rc;

	s->gid_index = gid_index;
	if ((rc = vx->dev_open(dev, 1, gid_index, &s->dev)) ||
	    (rc = vx->dev_query(s->dev, &s->info)))
		return rc;
	if (posix_memalign((void **)&s->buf, 4096, bytes))
		return -ENOMEM;
	memset(s->buf, 0, bytes);
	if ((rc = vx->mr_reg(s->dev, s->buf, bytes, &s->mr)) ||
	    (rc = vx->cq_create(s->dev, (int)(4 * f->depth), &s->cq)) ||
	    (rc = vx->qp_create(s->dev, s->cq, f->depth, f->depth, &s->qp)))
		return rc;
	s->psn = kvx_vx_random_psn();
	return 0;
}

static int
side_connect(const struct floor *f, struct side *s, const struct side *o, uint32_t mtu)
{
	struct kvx_vx_qp_attr a = {.remote_qpn = vx->qp_num(o->qp),
				   .remote_psn = o->psn,
				   .local_psn = s->psn,
				   .mtu = mtu,
				   .port = 1,
				   .gid_index = s->gid_index,
				   .retry_cnt = 6,
				   .rnr_retry = 6,
				   .ack_timeout = 14};
	uint64_t ids[64] = {0};
	int rc, posted = 0;

	memcpy(a.remote_gid, o->info.gid, sizeof(a.remote_gid));
	if ((rc = vx->qp_to_init(s->qp, &a)) || (rc = vx->qp_to_rtr(s->qp, &a)) ||
	    (rc = vx->qp_to_rts(s->qp, &a)))
		return rc;
	for (uint32_t n = 0; n < f->depth; n += 64) {
		int k = f->depth - n < 64 ? (int)(f->depth - n) : 64;

		if ((rc = vx->post_recv_burst(s->qp, ids, k, &posted)))
			return rc;
	}
	return 0;
}

static void
side_close(struct side *s)
{
	if (s->qp)
		vx->qp_destroy(s->qp);
	if (s->cq)
		vx->cq_destroy(s->cq);
	if (s->mr)
		vx->mr_dereg(s->mr);
	if (s->dev)
		vx->dev_close(s->dev);
	free(s->buf);
}

static void
write_set(struct side *s, struct kvx_vx_write *w, struct kvx_vx_sge *sg, uint64_t off, uint32_t len,
	  uint64_t raddr, uint32_t rkey, uint32_t imm)
{
	*sg = (struct kvx_vx_sge){.addr = (uint64_t)(uintptr_t)(s->buf + off),
				  .len = len,
				  .lkey = vx->mr_lkey(s->mr)};
	*w = (struct kvx_vx_write){.wr_id = 1000,
				   .sg = sg,
				   .nsge = 1,
				   .raddr = raddr,
				   .rkey = rkey,
				   .with_imm = true,
				   .imm = imm,
				   .signaled = true};
}

static int
post_one(struct side *s, uint64_t off, uint32_t len, uint64_t raddr, uint32_t rkey, uint32_t imm)
{
	struct kvx_vx_write w;
	struct kvx_vx_sge sg;
	int posted = 0;

	write_set(s, &w, &sg, off, len, raddr, rkey, imm);
	return vx->post_write_chain(s->qp, &w, 1, &posted);
}

/* The immediate of a batch of records: its slot and how many. */
static uint32_t
batch_imm(const struct floor *f, uint64_t batch, uint32_t count)
{
	return (uint32_t)(batch % f->slots) << 16 | count;
}

/* Wait until the CQ or fd (-1: none) has something: poll it once more after arming, then
 * block.  kvxd's park, in short. */
static int
park(struct side *s, int fd, int64_t deadline)
{
	struct pollfd p[2] = {{.fd = vx->cq_fd(s->cq), .events = POLLIN},
			      {.fd = fd, .events = POLLIN}};
	int ms = (int)((deadline - now_ns()) / 1000000);

	if (ms <= 0)
		return -ETIMEDOUT;
	if (poll(p, fd >= 0 ? 2 : 1, ms) < 0)
		return -errno;
	if (p[0].revents & POLLIN) {
		vx->cq_ack_events(s->cq);
		return vx->cq_arm(s->cq);
	}
	return 0;
}

/* Poll s's CQ until its next RECV_WITH_IMM (WRITE completions are taken on the way); stop
 * early when *stop turns true.  Returns 1 with *imm, 0 if stopped, or -errno. */
static int
wait_recv(struct floor *f, struct side *s, uint32_t *imm, int extra_fd)
{
	int64_t deadline = now_ns() + TIMEOUT_NS;
	uint64_t id = 0;
	int posted;

	for (;;) {
		while (s->wc_i < s->wc_n) {
			const struct kvx_vx_wc *wc = &s->wc[s->wc_i++];

			if (wc->status != KVX_VX_WC_SUCCESS) {
				fprintf(stderr, BENCH_PROG ": completion in error: %s\n",
					wc->status_str);
				return -EIO;
			}
			if (wc->opcode == KVX_VX_WC_RECV_WITH_IMM) {
				*imm = wc->imm;
				return vx->post_recv_burst(s->qp, &id, 1, &posted) ?: 1;
			}
		}
		s->wc_i = 0;
		s->wc_n = vx->cq_poll_burst(s->cq, s->wc, 32);
		if (s->wc_n < 0) {
			int rc = s->wc_n;

			s->wc_n = 0;
			return rc;
		}
		if (s->wc_n)
			continue;
		if (atomic_load_explicit(&f->h->stop, memory_order_relaxed))
			return 0;
		if (now_ns() > deadline)
			return -ETIMEDOUT;
		if (f->park) {
			int rc = park(s, extra_fd, deadline);

			if (rc)
				return rc;
		}
	}
}

/* One more on eventfd fd: whoever waits on it wakes. */
static int
wake(int fd)
{
	uint64_t one = 1;

	return write(fd, &one, sizeof(one)) == sizeof(one) ? 0 : -errno;
}

/* --prefill-engine: tell the engine that room seq's record came, and wait for its chunk.
 * Returns 0, 1 if stopped, or -errno. */
static int
prefill_ask(struct floor *f, uint64_t seq)
{
	int64_t deadline = now_ns() + TIMEOUT_NS;

	atomic_store_explicit(&f->h->meta, seq, memory_order_release);
	if (f->engine_park && wake(f->h->meta_fd))
		return -errno;
	while (atomic_load_explicit(&f->h->chunk, memory_order_acquire) != seq) {
		if (atomic_load_explicit(&f->h->stop, memory_order_relaxed))
			return 1;
		if (now_ns() > deadline)
			return -ETIMEDOUT;
		if (f->park) {
			struct pollfd p[2] = {{.fd = f->h->chunk_fd, .events = POLLIN},
					      {.fd = f->h->stop_fd, .events = POLLIN}};
			uint64_t v;

			if (atomic_load_explicit(&f->h->chunk, memory_order_acquire) != seq &&
			    poll(p, 2, 100) > 0 && (p[0].revents & POLLIN) &&
			    read(f->h->chunk_fd, &v, sizeof(v)) < 0)
				return -errno;
		}
	}
	return 0;
}

/* prefill's polling core: answer every batch of records with their pages, one chain */
static void *
prefill_main(void *arg)
{
	struct floor *f = arg;
	struct side *s = &f->pre;
	struct kvx_vx_write w[BATCH_MAX];
	struct kvx_vx_sge sg[BATCH_MAX];

	for (;;) {
		uint32_t imm, count, slot;
		int rc = wait_recv(f, s, &imm, f->h->stop_fd), posted = 0;

		if (rc <= 0) {
			if (rc < 0)
				f->error = rc;
			return NULL;
		}
		slot = imm >> 16;
		count = imm & 0xffff;
		if (slot >= f->slots || count == 0 || count > f->batch) {
			fprintf(stderr, BENCH_PROG ": prefill: immediate %#x\n", imm);
			f->error = -EPROTO;
			return NULL;
		}
		for (uint32_t i = 0; i < count; i++) {
			struct meta m;
			uint64_t pg;

			memcpy(&m, s->buf + meta_off(f, slot) + (uint64_t)i * META_BYTES,
			       sizeof(m));
			if (f->prefill_engine && (rc = prefill_ask(f, m.seq)) != 0) {
				if (rc < 0)
					f->error = rc;
				return NULL;
			}
			pg = page_off(f, m.seq);
			memcpy(s->buf + pg, &m.seq, 8);
			memcpy(s->buf + pg + f->size - 8, &m.seq, 8);
			write_set(s, &w[i], &sg[i], pg, f->size, m.raddr, m.rkey, (uint32_t)m.seq);
		}
		rc = vx->post_write_chain(s->qp, w, (int)count, &posted);
		if (rc) {
			f->error = rc;
			return NULL;
		}
	}
}

/* Decode: the records of rooms seq .. seq + count - 1 out to prefill, as batch number batch. */
static int
decode_send(struct floor *f, uint64_t batch, uint64_t seq, uint32_t count)
{
	struct side *s = &f->dec;
	uint64_t off = meta_off(f, batch);

	for (uint32_t i = 0; i < count; i++) {
		struct meta m = {.raddr = (uint64_t)(uintptr_t)(s->buf + page_off(f, seq + i)),
				 .rkey = vx->mr_rkey(s->mr),
				 .seq = seq + i};

		memcpy(s->buf + off + (uint64_t)i * META_BYTES, &m, sizeof(m));
	}
	return post_one(s, off, count * META_BYTES, (uint64_t)(uintptr_t)(f->pre.buf + off),
			vx->mr_rkey(f->pre.mr), batch_imm(f, batch, count));
}

/* Decode: the next page came, with immediate imm: it must be room seq's, stamped. */
static int
decode_check(struct floor *f, uint64_t seq, uint32_t imm)
{
	const uint8_t *pg = f->dec.buf + page_off(f, seq);
	uint64_t head, tail;

	memcpy(&head, pg, 8);
	memcpy(&tail, pg + f->size - 8, 8);
	if (imm != (uint32_t)seq || head != seq || tail != seq) {
		fprintf(stderr,
			BENCH_PROG ": room %" PRIu64 ": immediate %u, stamps %" PRIu64
				   " and %" PRIu64 "\n",
			seq, imm, head, tail);
		return -EPROTO;
	}
	return 0;
}

/* decode's polling core's part of room seq (one at a time): its record out, its page in */
static int
decode_room(struct floor *f, uint64_t seq, int extra_fd)
{
	uint32_t imm;
	int rc = decode_send(f, seq, seq, 1);

	if (rc)
		return rc;
	rc = wait_recv(f, &f->dec, &imm, extra_fd);
	if (rc <= 0)
		return rc ? rc : -ECANCELED;
	return decode_check(f, seq, imm);
}

/* decode's polling core (--threads 3): take the engine's request, do the room, answer */
static void *
decode_core_main(void *arg)
{
	struct floor *f = arg;
	uint64_t last = 0;

	for (;;) {
		uint64_t seq = atomic_load_explicit(&f->h->req, memory_order_acquire);
		int rc;

		if (atomic_load_explicit(&f->h->stop, memory_order_relaxed))
			return NULL;
		if (seq == last) {
			if (f->park) {
				struct pollfd p = {.fd = f->h->req_fd, .events = POLLIN};
				uint64_t v;

				if (atomic_load_explicit(&f->h->req, memory_order_acquire) ==
					    last &&
				    poll(&p, 1, 100) > 0 && read(f->h->req_fd, &v, sizeof(v)) < 0)
					return NULL;
			}
			continue;
		}
		rc = decode_room(f, seq, -1);
		if (rc) {
			f->error = rc;
			seq = UINT64_MAX;
		}
		atomic_store_explicit(&f->h->done, seq, memory_order_release);
		if (f->engine_park && wake(f->h->done_fd))
			return NULL;
		if (rc)
			return NULL;
		last = seq;
	}
}

/* decode's engine (--threads 3): ask for room seq and wait for its answer */
static int
engine_room(struct floor *f, uint64_t seq)
{
	int64_t deadline = now_ns() + TIMEOUT_NS;
	uint64_t done;

	bool chunked = !f->prefill_engine; /* --prefill-engine: the chunk is submitted */

	atomic_store_explicit(&f->h->req, seq, memory_order_release);
	if (f->park && wake(f->h->req_fd))
		return -errno;
	while ((done = atomic_load_explicit(&f->h->done, memory_order_acquire)) != seq) {
		if (done == UINT64_MAX)
			return f->error ? f->error : -EIO;
		if (!chunked && atomic_load_explicit(&f->h->meta, memory_order_acquire) == seq) {
			/* prefill's engine: the record came, the chunk goes at once */
			atomic_store_explicit(&f->h->chunk, seq, memory_order_release);
			if (f->park && wake(f->h->chunk_fd))
				return -errno;
			chunked = true;
			continue;
		}
		if (now_ns() > deadline)
			return -ETIMEDOUT;
		if (f->engine_park) {
			struct pollfd p[2] = {{.fd = f->h->done_fd, .events = POLLIN},
					      {.fd = f->h->meta_fd, .events = POLLIN}};
			uint64_t v;

			if (atomic_load_explicit(&f->h->done, memory_order_acquire) == seq ||
			    (!chunked &&
			     atomic_load_explicit(&f->h->meta, memory_order_acquire) == seq))
				continue;
			if (poll(p, chunked ? 1 : 2, 100) < 0)
				return -errno;
			for (int k = 0; k < 2; k++)
				if ((p[k].revents & POLLIN) && read(p[k].fd, &v, sizeof(v)) < 0)
					return -errno;
		}
	}
	return 0;
}

/* Zeroed memory shared with a child (--engine-process), or NULL. */
static void *
shared_alloc(size_t len)
{
	void *p = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);

	return p == MAP_FAILED ? NULL : p;
}

static int
cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;

	return x < y ? -1 : x > y;
}

/* Decode (--inflight N > 1): keep N rooms in flight, their records in batches of up to
 * --batch, until warmup + rooms pages have come; *secs: the time the rooms after the warm-up
 * took. */
static int
decode_rate(struct floor *f, double *secs)
{
	uint64_t total = (uint64_t)f->warmup + f->rooms, sent = 0, done = 0, batch = 0;
	int64_t t0 = now_ns();

	while (done < total) {
		uint64_t inflight = sent - done, count = f->batch;
		uint32_t imm;
		int rc;

		if (count > f->inflight - inflight)
			count = f->inflight - inflight;
		if (count > total - sent)
			count = total - sent;
		if (count && (count == f->batch || inflight == 0 || sent + count == total)) {
			rc = decode_send(f, batch++, sent + 1, (uint32_t)count);
			if (rc)
				return rc;
			sent += count;
			continue;
		}
		rc = wait_recv(f, &f->dec, &imm, -1);
		if (rc <= 0)
			return rc ? rc : -ECANCELED;
		rc = decode_check(f, done + 1, imm);
		if (rc)
			return rc;
		if (++done == f->warmup)
			t0 = now_ns();
	}
	*secs = (double)(now_ns() - t0) / 1e9;
	return 0;
}

/* One room at a time, timed: decode's engine (--threads 3) or decode's one thread (2). */
static int
rooms(struct floor *f)
{
	int rc = 0;

	for (uint64_t seq = 1; !rc && seq <= (uint64_t)f->warmup + f->rooms; seq++) {
		int64_t t0 = now_ns();

		rc = f->threads == 3 ? engine_room(f, seq) : decode_room(f, seq, -1);
		if (!rc && seq > f->warmup)
			f->lat[seq - 1 - f->warmup] = (uint64_t)(now_ns() - t0);
	}
	return rc;
}

/* --engine-process: rooms() in a child that touches only the shared words, the eventfds and the
 * shared latencies (a child of a threaded process may call only what is async-signal-safe:
 * these loops are atomics, clock_gettime, poll, read and write).  The pages the devices use
 * stay the parent's: the kernel copies pinned pages for a child at fork (Linux 5.12 and
 * later), and the child ends with _exit, never touching them. */
static int
engine_fork(struct floor *f)
{
	int status = 0;
	pid_t pid = fork();

	if (pid < 0)
		return -errno;
	if (pid == 0)
		_exit(rooms(f) ? 1 : 0);
	while (waitpid(pid, &status, 0) < 0)
		if (errno != EINTR)
			return -errno;
	if (WIFEXITED(status) && WEXITSTATUS(status) == 0)
		return 0;
	return f->error ? f->error : -EIO;
}

static int
run(struct floor *f, double *secs)
{
	pthread_t pre, dcore;
	bool have_dcore = false;
	int rc = 0;

	if (pthread_create(&pre, NULL, prefill_main, f))
		return -EAGAIN;
	if (f->threads == 3) {
		if (pthread_create(&dcore, NULL, decode_core_main, f))
			rc = -EAGAIN;
		else
			have_dcore = true;
	}
	if (f->inflight > 1)
		rc = decode_rate(f, secs);
	else if (!rc && f->engine_process)
		rc = engine_fork(f);
	else if (!rc)
		rc = rooms(f);
	atomic_store(&f->h->stop, true);
	if ((wake(f->h->req_fd) || wake(f->h->stop_fd)) && !rc)
		rc = -errno;
	pthread_join(pre, NULL);
	if (have_dcore)
		pthread_join(dcore, NULL);
	return rc ? rc : f->error;
}

static void
usage(FILE *out)
{
	fprintf(out,
		"usage: " BENCH_PROG " [options]\n"
		"  --decode-dev NAME   decode's RDMA device (rxe1)\n"
		"  --prefill-dev NAME  prefill's RDMA device (rxe0)\n"
		"  --decode-gid N      decode's GID index (1)\n"
		"  --prefill-gid N     prefill's GID index (1)\n"
		"  --json              one line of JSON\n"
		"  --inflight N        rooms in flight, 1..1024 (1: latency; more: the rate)\n"
		"  --batch B           records per metadata WRITE, 1..64, at most N (1)\n"
		"  --mtu BYTES         path MTU: 256, 512, 1024, 2048 or 4096 (1024)\n"
		"  --size BYTES        the page, 16..1 MiB (4096)\n"
		"  --rooms N           rooms measured (2000), after --warmup N (200)\n"
		"  --threads 2|3       decode's engine in the polling core's thread (2) or "
		"its own (3)\n"
		"  --engine-process    decode's engine (--threads 3) in a process of its own\n"
		"  --prefill-engine    decode's engine (--threads 3) is prefill's too: it submits\n"
		"                      each room's chunk once the record came\n"
		"  --park all|engine|none  who blocks when idle instead of spinning: every "
		"thread,\n"
		"                      decode's engine alone (--threads 3), or none (none)\n");
}

int
main(int argc, char **argv)
{
	static const struct option opts[] = {{"decode-dev", required_argument, NULL, 'd'},
					     {"prefill-dev", required_argument, NULL, 'p'},
					     {"decode-gid", required_argument, NULL, 'D'},
					     {"prefill-gid", required_argument, NULL, 'G'},
					     {"json", no_argument, NULL, 'j'},
					     {"mtu", required_argument, NULL, 'm'},
					     {"size", required_argument, NULL, 's'},
					     {"rooms", required_argument, NULL, 'n'},
					     {"warmup", required_argument, NULL, 'w'},
					     {"threads", required_argument, NULL, 't'},
					     {"park", required_argument, NULL, 'P'},
					     {"engine-process", no_argument, NULL, 'E'},
					     {"prefill-engine", no_argument, NULL, 'R'},
					     {"inflight", required_argument, NULL, 'i'},
					     {"batch", required_argument, NULL, 'b'},
					     {"help", no_argument, NULL, 'h'},
					     {0}};
	struct floor f = {.size = 4096,
			  .rooms = 2000,
			  .warmup = 200,
			  .threads = 2,
			  .inflight = 1,
			  .batch = 1};
	double secs = 0;
	const char *ddev = "rxe1", *pdev = "rxe0";
	uint32_t dgid = 1, pgid = 1, mtu = 1024;
	bool json = false;
	int c, rc = 0;

	while ((c = getopt_long(argc, argv, "", opts, NULL)) != -1) {
		switch (c) {
		case 'd':
			ddev = optarg;
			break;
		case 'p':
			pdev = optarg;
			break;
		case 'D':
			rc = parse_u32("decode-gid", optarg, 0, 255, &dgid);
			break;
		case 'G':
			rc = parse_u32("prefill-gid", optarg, 0, 255, &pgid);
			break;
		case 'j':
			json = true;
			break;
		case 'm':
			rc = parse_u32("mtu", optarg, 256, 4096, &mtu);
			if (!rc && (mtu & (mtu - 1))) {
				/* verbs/vx_ibv.c would take any other value as 1024 */
				fprintf(stderr,
					BENCH_PROG ": --mtu: 256, 512, 1024, 2048 or 4096\n");
				rc = -EINVAL;
			}
			break;
		case 's':
			rc = parse_u32("size", optarg, 16, 1u << 20, &f.size);
			break;
		case 'n':
			rc = parse_u32("rooms", optarg, 1, 10000000, &f.rooms);
			break;
		case 'w':
			rc = parse_u32("warmup", optarg, 0, 10000000, &f.warmup);
			break;
		case 't':
			rc = parse_u32("threads", optarg, 2, 3, &f.threads);
			break;
		case 'P':
			if (!strcmp(optarg, "all"))
				f.park = f.engine_park = true;
			else if (!strcmp(optarg, "engine"))
				f.engine_park = true;
			else if (strcmp(optarg, "none")) {
				fprintf(stderr,
					BENCH_PROG ": --park: all, engine or none, got '%s'\n",
					optarg);
				rc = -EINVAL;
			}
			break;
		case 'E':
			f.engine_process = true;
			break;
		case 'R':
			f.prefill_engine = true;
			break;
		case 'i':
			rc = parse_u32("inflight", optarg, 1, INFLIGHT_MAX, &f.inflight);
			break;
		case 'b':
			rc = parse_u32("batch", optarg, 1, BATCH_MAX, &f.batch);
			break;
		case 'h':
			usage(stdout);
			return 0;
		default:
			usage(stderr);
			return 2;
		}
		if (rc)
			return 2;
		rc = 0;
	}
	if (optind < argc) {
		usage(stderr);
		return 2;
	}
	if (f.batch > f.inflight || (f.inflight > 1 && f.threads != 2)) {
		fprintf(stderr, BENCH_PROG ": --batch is at most --inflight, and --inflight N > 1 "
					   "goes with --threads 2\n");
		return 2;
	}
	if ((f.engine_process || f.prefill_engine) && (f.threads != 3 || f.inflight > 1)) {
		fprintf(stderr, BENCH_PROG ": --engine-process and --prefill-engine go with "
					   "--threads 3 and one room in flight\n");
		return 2;
	}
	f.slots = 2 * f.inflight;
	f.depth = f.inflight + 16;
	/* shared with the engine's process (--engine-process), zeroed */
	f.h = shared_alloc(sizeof(*f.h));
	f.lat = shared_alloc(sizeof(*f.lat) * (f.inflight > 1 ? 1 : f.rooms));
	if (!f.lat || !f.h) {
		fprintf(stderr, BENCH_PROG ": out of memory\n");
		return 1;
	}
	f.h->req_fd = eventfd(0, EFD_CLOEXEC);
	f.h->done_fd = eventfd(0, EFD_CLOEXEC);
	f.h->stop_fd = eventfd(0, EFD_CLOEXEC);
	f.h->meta_fd = eventfd(0, EFD_CLOEXEC);
	f.h->chunk_fd = eventfd(0, EFD_CLOEXEC);
	if (f.h->req_fd < 0 || f.h->done_fd < 0 || f.h->stop_fd < 0 || f.h->meta_fd < 0 ||
	    f.h->chunk_fd < 0) {
		fprintf(stderr, BENCH_PROG ": out of descriptors\n");
		return 1;
	}
	rc = side_open(&f, &f.dec, ddev, (uint8_t)dgid);
	if (!rc)
		rc = side_open(&f, &f.pre, pdev, (uint8_t)pgid);
	if (!rc)
		rc = side_connect(&f, &f.dec, &f.pre, mtu);
	if (!rc)
		rc = side_connect(&f, &f.pre, &f.dec, mtu);
	if (!rc && f.park && ((rc = vx->cq_arm(f.dec.cq)) || (rc = vx->cq_arm(f.pre.cq))))
		fprintf(stderr, BENCH_PROG ": arming a CQ: %s\n", strerror(-rc));
	if (!rc)
		rc = run(&f, &secs);
	if (!rc && f.inflight > 1) {
		const char *who = f.park ? "all" : "none";
		double rate = secs > 0 ? f.rooms / secs : 0;

		if (json)
			printf("{\"tool\": \"kvx-floor\", \"inflight\": %u, \"batch\": %u, "
			       "\"park\": \"%s\", \"size\": %u, \"rooms\": %u, \"seconds\": %.3f, "
			       "\"window_rooms_per_s\": %.1f, \"verified\": \"ok\"}\n",
			       f.inflight, f.batch, who, f.size, f.rooms, secs, rate);
		else
			printf("floor: rate inflight=%u batch=%u park=%s size=%u rooms=%u "
			       "rooms_per_s=%.1f\n",
			       f.inflight, f.batch, who, f.size, f.rooms, rate);
	} else if (!rc) {
		const char *who = f.park ? "all" : f.engine_park ? "engine" : "none";
		const char *engine = f.engine_process
					     ? (f.prefill_engine ? "process,prefill" : "process")
					     : (f.prefill_engine ? "thread,prefill" : "thread");
		double p50, p99, min;

		qsort(f.lat, f.rooms, sizeof(*f.lat), cmp_u64);
		p50 = f.lat[f.rooms / 2] / 1e3;
		p99 = f.lat[(uint64_t)f.rooms * 99 / 100] / 1e3;
		min = f.lat[0] / 1e3;
		if (json)
			/* kvx-bench's keys where they mean the same (scripts/bench.sh reads them)
			 */
			printf("{\"tool\": \"kvx-floor\", \"threads\": %u, \"park\": \"%s\", "
			       "\"engine\": \"%s\", \"size\": %u, \"rooms\": %u, "
			       "\"window_lat_p50_us\": %.1f, "
			       "\"window_lat_p99_us\": %.1f, \"lat_min_us\": %.1f, "
			       "\"verified\": \"ok\"}\n",
			       f.threads, who, engine, f.size, f.rooms, p50, p99, min);
		else
			printf("floor: threads=%u park=%s engine=%s size=%u rooms=%u p50_us=%.1f "
			       "p99_us=%.1f "
			       "min_us=%.1f\n",
			       f.threads, who, engine, f.size, f.rooms, p50, p99, min);
	} else
		fprintf(stderr, BENCH_PROG ": %s\n", strerror(-rc));
	side_close(&f.pre);
	side_close(&f.dec);
	close(f.h->req_fd);
	close(f.h->done_fd);
	close(f.h->stop_fd);
	close(f.h->meta_fd);
	close(f.h->chunk_fd);
	munmap(f.lat, sizeof(*f.lat) * (f.inflight > 1 ? 1 : f.rooms));
	munmap(f.h, sizeof(*f.h));
	return rc ? 1 : 0;
}
