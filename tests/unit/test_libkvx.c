/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libkvx against a fake kvxd: a thread that serves one connection on a SOCK_SEQPACKET socket
 * in a temporary directory, answers HELLO, POOL_REG, POOL_UNREG, ROOM_OPEN, ROOM_CLOSE,
 * ROOM_ABORT and ADMIN per core/engine_proto.h, records what it received (message counts, the
 * last message, the fd that came with POOL_REG), and can be scripted to inject EVENTs before a
 * reply, fail the next room or pool request with a status, send a malformed reply, hold a reply
 * back, or close the connection.
 *
 * The fake answers requests in order, so an ADMIN "sync" round trip proves that every message
 * sent before it has been received and recorded.
 *
 * Rings: by default the fake is a kvxd without rings (it refuses RINGS with -EOPNOTSUPP).  With
 * rings_ok it accepts RINGS as control/engine.c does (a sealed memfd holding the submission and
 * event rings, the engine's ends of two wake socket pairs) and from then on takes requests from
 * the submission ring (parking on its wake end like kvxd) and puts replies and events into the
 * event ring (libkvx counts as always parked there: one wake-up per batch, or, when libkvx asked
 * for KVX_ENG_RINGS_REARM, one until libkvx drained it, as kvxd does).  It records which
 * requests came through the ring and which through the socket, and can be scripted to stop reading
 * the submission ring for a while, to corrupt the event ring, or to send a broken RINGS reply.
 *
 * libkvx's ring reads go through ring_get_hook (kvx_shring_get renamed around the include): a
 * test can hold the fake's publishing of chunk events until libkvx has found a given ring
 * empty, to put the publishing at a chosen point of a read.
 */
#include "core/shring.h"

static int ring_get_hook(struct kvx_shring *r, void *buf, uint32_t cap);
#define kvx_shring_get ring_get_hook
#include "control/libkvx.c"
#undef kvx_shring_get

#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>

#include <cmocka.h>

#include "wake_bytes.h"

#include <dirent.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <sys/mman.h>

enum bad_reply {
	BAD_NONE = 0,
	BAD_HDR_LEN,   /* hdr.len differs from the datagram size */
	BAD_TEXT_LEN,  /* text_len does not match the size */
	BAD_TYPE,      /* a HELLO (not a REPLY) carrying the request's seq */
	BAD_SHORT,     /* a REPLY header without the reply's fixed part */
	BAD_FUTURE,    /* a REPLY for a seq never sent */
	BAD_STATUS,    /* a positive status */
	BAD_VALUE_ZERO /* value 0 (no pool id 0, no generation 0) */
};

/* A broken RINGS reply (status 0 unless said otherwise). */
enum bad_rings {
	RINGS_GOOD = 0,
	RINGS_TWO_FDS,	   /* the memfd and one wake end */
	RINGS_FOUR_FDS,	   /* one fd too many */
	RINGS_NO_FDS,	   /* no fds at all */
	RINGS_SMALL_MEMFD, /* the memfd holds one ring, not two */
	RINGS_ODD_SIZE,	   /* value is not a power of two */
	RINGS_REFUSED_FDS, /* status -EOPNOTSUPP, yet the three fds come along */
	RINGS_EVENTFDS,	   /* wake ends that are eventfds, not sockets (shared descriptions) */
	RINGS_UNSEALED,	   /* a file on a filesystem without seals: it could shrink under us */
};

/* Corrupt the event ring instead of answering the next request. */
enum corrupt_ring {
	CORRUPT_NONE = 0,
	CORRUPT_TAIL_AHEAD, /* the tail published far beyond what the ring holds */
	CORRUPT_LONG_REC,   /* a record longer than what the tail published */
};

struct fake {
	char dir[32];
	char path[108]; /* sizeof(sockaddr_un.sun_path) */
	int lfd;
	int cfd;
	pthread_t thr;
	pthread_mutex_t mu;
	/* script, read by the server under mu */
	char node[KVX_NAME_MAX + 16];
	int hello_status;
	int inject_before; /* EVENTs sent before the next reply */
	int inject_after;  /* EVENTs sent after the next reply */
	int bad;	   /* enum bad_reply, for the next reply */
	bool close_next;   /* close instead of the next reply */
	bool hold_next;	   /* do not answer the next request; answer it just before the one after */
	int64_t value;	   /* reply value of POOL_REG, ROOM_OPEN and ROOM_ABORT */
	int status_next;   /* status of the next reply to a room or pool request, then 0 */
	bool by_room;	   /* ROOM_OPEN and ROOM_CLOSE answer by room id (by_room_result) */
	uint64_t ev_room;  /* room id of the next injected event (then incremented) */
	bool rings_ok;	   /* accept RINGS (set before the connect) */
	bool rearm_unknown;	  /* refuse KVX_ENG_RINGS_REARM as an older kvxd does (-EINVAL) */
	bool wake_ends_unknown;	  /* refuse KVX_ENG_RINGS_WAKE_ENDS the same way */
	bool no_pages;		  /* a kvxd without ADMIN_AT (replies -EOPNOTSUPP) */
	int rings_bad;		  /* enum bad_rings, for the RINGS reply */
	uint64_t ring_size;	  /* data bytes of each ring (0: kvxd's 512 KiB) */
	int64_t ring_pause_until; /* now_ms() before which the submission ring is not read */
	int chunk_events;	  /* EVENTs put when the next CHUNK arrives */
	bool chunk_fills;	  /* the next CHUNK fills the event ring (fill_and_starve) */
	int filled;		  /* how many events that put */
	int corrupt;		  /* enum corrupt_ring, for the next request */
	int delay_ms;		  /* sleep before answering the next request (the client waits) */
	int core_rings;		  /* core rings to give an engine that asks for them */
	int ev_core;		  /* core ring the injected events go into (-1: the event ring) */
	bool core_reply;	  /* the next reply goes into core ring 0 (no kvxd would) */
	bool ev_split;		  /* only the first injected event goes into core ring ev_core */
	/* gate: the next CHUNK's events are published only once libkvx has found gate_ring
	 * empty (the gate opens), and libkvx's read goes on once they are (gate_done) */
	struct kvx_shring *gate_ring;
	bool gate_open, gate_done;
	pthread_cond_t gate_cv;
	/* observations, under mu */
	int nmsgs;
	int ntype[128];
	int bad_in; /* malformed requests received */
	uint64_t last_seq;
	uint8_t last[KVX_ENG_MSG_MAX];
	uint8_t hello[64]; /* the last HELLO */
	size_t hello_len;
	size_t last_len;
	int nfds;
	struct stat fd_st;
	uint64_t held_seq;
	int32_t held_status; /* the held reply's (by_room), else 0 */
	int64_t held_value;
	int nsock, nring;    /* requests taken from the socket, from the submission ring */
	int ntype_sock[128]; /* per type, those that came on the socket */
	int chunk_disorder;  /* CHUNKs whose chunk_index was not the count of chunks before them */
	bool done;	     /* the server returned (its fds are closed) */
	/* the rings: the server thread's own */
	bool rings;
	void *ring_map;
	size_t ring_map_len;
	struct kvx_shring sub, evt;			/* the server consumes sub, produces evt */
	struct kvx_shring cevt[KVX_ENG_CORE_RINGS_MAX]; /* and the core rings */
	int ncevt;
	size_t rings_len;     /* the RINGS request's length */
	uint32_t rings_flags; /* its flags (0 for the header alone) */
	int rings_refused;    /* RINGS requests refused for KVX_ENG_RINGS_REARM */
	int chunk_flushes;    /* CHUNKs whose events were put and notified */
	int srv_ev_core;      /* ev_core and core_reply as the server took them with a request */
	bool srv_split;
	bool srv_core_reply;
	int sub_wake, evt_wake;
};

struct fixture {
	struct fake f;
	struct kvx_conn *c;
};

/* by_room: a ROOM_OPEN of room R is answered with generation R, a ROOM_CLOSE with 0, except
 * for a room whose id ends in 7: -EDQUOT to an open, -EBUSY to a close. */
static void
by_room_result(const uint8_t *buf, int32_t *status, int64_t *value)
{
	const struct kvx_eng_hdr *h = (const struct kvx_eng_hdr *)buf;
	uint64_t room;

	if (h->type == KVX_ENG_ROOM_OPEN) {
		room = ((const struct kvx_eng_room_open *)buf)->room;
		*status = room % 10 == 7 ? -EDQUOT : 0;
		*value = (int64_t)room;
	} else if (h->type == KVX_ENG_ROOM_CLOSE) {
		room = ((const struct kvx_eng_room_close *)buf)->room;
		*status = room % 10 == 7 ? -EBUSY : 0;
		*value = 0;
	}
}

/* The fake whose gate ring_get_hook opens (set by a test that arms the gate). */
static struct fake *gate_fake;

static void
gate_deadline(struct timespec *ts)
{
	clock_gettime(CLOCK_REALTIME, ts);
	ts->tv_sec += 5;
}

/* The server, before publishing a CHUNK's events: is the gate armed?  Then wait (up to 5 s)
 * until libkvx opens it. */
static bool
gate_wait_open(struct fake *f)
{
	struct timespec ts;
	bool armed;

	gate_deadline(&ts);
	pthread_mutex_lock(&f->mu);
	armed = f->gate_ring != NULL;
	while (armed && !f->gate_open)
		if (pthread_cond_timedwait(&f->gate_cv, &f->mu, &ts) == ETIMEDOUT)
			break;
	pthread_mutex_unlock(&f->mu);
	return armed;
}

static void
gate_mark_done(struct fake *f)
{
	pthread_mutex_lock(&f->mu);
	f->gate_done = true;
	pthread_cond_broadcast(&f->gate_cv);
	pthread_mutex_unlock(&f->mu);
}

static int
ring_get_hook(struct kvx_shring *r, void *buf, uint32_t cap)
{
	struct fake *f = gate_fake;
	struct timespec ts;
	int n = kvx_shring_get(r, buf, cap);

	if (n != 0 || !f)
		return n;
	pthread_mutex_lock(&f->mu);
	if (f->gate_ring == r && !f->gate_open) {
		/* libkvx found the ring empty: the fake publishes now, before this read goes on */
		f->gate_open = true;
		pthread_cond_broadcast(&f->gate_cv);
		gate_deadline(&ts);
		while (!f->gate_done)
			if (pthread_cond_timedwait(&f->gate_cv, &f->mu, &ts) == ETIMEDOUT)
				break;
	}
	pthread_mutex_unlock(&f->mu);
	return 0;
}

/* One message to the client: into the event ring once the session has rings (waiting up to 2 s
 * for room; the caller wakes the client with ring_flush), else onto the socket. */
static void
send_raw_to(struct fake *f, const void *buf, size_t len, int core)
{
	ssize_t n;

	if (f->rings) {
		struct kvx_shring *r = core >= 0 && core < f->ncevt ? &f->cevt[core] : &f->evt;

		for (int i = 0; i < 2000 && kvx_shring_put(r, buf, (uint32_t)len) == -ENOBUFS; i++)
			usleep(1000);
		return;
	}
	n = send(f->cfd, buf, len, MSG_NOSIGNAL);
	(void)n;
}

static void
send_raw(struct fake *f, const void *buf, size_t len)
{
	send_raw_to(f, buf, len, -1);
}

/* After a batch: wake the client (parked on every event ring; a oneshot ring wakes it once until
 * it drained its wake end and set the flag again). */
static void
ring_flush(struct fake *f)
{
	if (!f->rings)
		return;
	kvx_shring_notify(&f->evt);
	for (int k = 0; k < f->ncevt; k++)
		kvx_shring_notify(&f->cevt[k]);
}

static void
send_reply(struct fake *f, uint64_t seq, int32_t status, int64_t value, const char *text)
{
	uint64_t buf[(sizeof(struct kvx_eng_reply) + 256) / 8 + 1];
	struct kvx_eng_reply *r = (struct kvx_eng_reply *)buf;
	size_t tl = text ? strlen(text) : 0;

	assert_true(tl <= 256);
	memset(buf, 0, sizeof(buf));
	r->hdr.type = KVX_ENG_REPLY;
	r->hdr.len = (uint32_t)(sizeof(*r) + tl);
	r->hdr.seq = seq;
	r->status = status;
	r->text_len = (uint32_t)tl;
	r->value = value;
	memcpy(r + 1, text, tl);
	send_raw_to(f, buf, sizeof(*r) + tl, f->srv_core_reply ? 0 : -1);
	f->srv_core_reply = false;
}

static void
send_bad_reply(struct fake *f, int kind, uint64_t seq)
{
	uint64_t buf[(sizeof(struct kvx_eng_reply) + 16) / 8 + 1];
	struct kvx_eng_reply *r = (struct kvx_eng_reply *)buf;
	size_t len = sizeof(*r) + 2;

	memset(buf, 0, sizeof(buf));
	r->hdr.type = KVX_ENG_REPLY;
	r->hdr.seq = seq;
	r->text_len = 2;
	r->value = 1;
	memcpy(r + 1, "ok", 2);
	switch (kind) {
	case BAD_HDR_LEN:
		r->hdr.len = (uint32_t)len + 4;
		break;
	case BAD_TEXT_LEN:
		r->text_len = 7;
		break;
	case BAD_TYPE:
		r->hdr.type = KVX_ENG_HELLO;
		break;
	case BAD_SHORT:
		len = sizeof(r->hdr);
		break;
	case BAD_FUTURE:
		r->hdr.seq = seq + 1000;
		break;
	case BAD_STATUS:
		r->status = 5;
		break;
	case BAD_VALUE_ZERO:
		r->value = 0;
		break;
	}
	if (kind != BAD_HDR_LEN)
		r->hdr.len = (uint32_t)len;
	send_raw(f, buf, len);
}

static void
event_msg(struct kvx_eng_event *e, uint64_t room, int state)
{
	memset(e, 0, sizeof(*e));
	e->hdr.type = KVX_ENG_EVENT;
	e->hdr.len = sizeof(*e);
	e->ev.room = room;
	e->ev.generation = 2;
	e->ev.state = state;
	e->ev.error = state == KVX_STATE_FAILED ? -EIO : 0;
	snprintf(e->ev.reason, sizeof(e->ev.reason), "room %llu", (unsigned long long)room);
}

/* Events into the event ring until it has no room (kvxd's full path), then ask for a wake-up
 * when the client takes one (kvx_shring_starve), as kvxd does.  Returns how many went in. */
static int
fill_and_starve(struct fake *f, uint64_t room)
{
	struct kvx_eng_event e;
	int n = 0;

	for (;; n++) {
		event_msg(&e, room + (uint64_t)n, KVX_STATE_TRANSFERRING);
		if (kvx_shring_put(&f->evt, &e, sizeof(e)) == -ENOBUFS)
			break;
	}
	assert_false(kvx_shring_starve(&f->evt)); /* nothing taken meanwhile */
	return n;
}

static void
send_event(struct fake *f, uint64_t room, int state)
{
	struct kvx_eng_event e;

	event_msg(&e, room, state);
	send_raw_to(f, &e, sizeof(e), f->srv_ev_core);
	if (f->srv_split)
		f->srv_ev_core = -1; /* the rest into the event ring */
}

/* Is the request of n bytes in buf well-formed (sizes consistent with counts)? */
static bool
request_ok(const uint8_t *buf, size_t n)
{
	const struct kvx_eng_hdr *h = (const struct kvx_eng_hdr *)buf;

	if (n < sizeof(*h) || h->len != n || h->flags)
		return false;
	switch (h->type) {
	case KVX_ENG_HELLO:
		return n == sizeof(struct kvx_eng_hello);
	case KVX_ENG_POOL_REG:
		return n == sizeof(struct kvx_eng_pool_reg);
	case KVX_ENG_POOL_UNREG:
		return n == sizeof(struct kvx_eng_pool_unreg);
	case KVX_ENG_ROOM_CLOSE:
		return n == sizeof(struct kvx_eng_room_close);
	case KVX_ENG_ROOM_ABORT:
		return n == sizeof(struct kvx_eng_room_abort);
	case KVX_ENG_ADMIN:
		return n > sizeof(struct kvx_eng_admin);
	case KVX_ENG_ADMIN_AT:
		return n > sizeof(struct kvx_eng_admin_at);
	case KVX_ENG_RINGS: /* the header alone: no core rings asked for */
		return n == sizeof(struct kvx_eng_rings) || n == sizeof(struct kvx_eng_hdr);
	case KVX_ENG_ROOM_OPEN: {
		const struct kvx_eng_room_open *m = (const void *)buf;
		const struct kvx_eng_region *rg = (const void *)(m + 1);
		size_t fixed, total = 0;

		if (n < sizeof(*m) || m->nregions > KVX_MAX_REGIONS ||
		    m->nsources > KVX_MAX_SOURCES)
			return false;
		fixed = sizeof(*m) + m->nregions * sizeof(*rg) +
			m->nsources * sizeof(struct kvx_eng_source);
		if (n < fixed)
			return false;
		for (uint32_t i = 0; i < m->nregions; i++)
			total += rg[i].npages;
		return n == fixed + total * 4;
	}
	case KVX_ENG_CHUNK: {
		const struct kvx_eng_chunk *m = (const void *)buf;

		return n >= sizeof(*m) && n == sizeof(*m) + (size_t)m->npages * 4;
	}
	default:
		return false;
	}
}

/* A REPLY carrying nfds fds (SCM_RIGHTS; none when nfds is 0), straight onto the socket. */
/* ADMIN_AT as kvxd pages it, 100 bytes a page: "fail" -> -ENOENT with its explanation, "big" ->
 * 1000 bytes (a..z repeated), "lie" -> pages whose total changes on the way, anything else
 * "ok:CMD"; with no_pages, -EOPNOTSUPP as a kvxd without pages. */
static int
admin_page(struct fake *f, const struct kvx_eng_admin_at *m, size_t cl, char *text, size_t tlen,
	   int64_t *total)
{
	const char *cmd = (const char *)(m + 1);
	char full[1100];
	size_t len;
	int status = 0;

	if (f->no_pages) {
		snprintf(text, tlen, "unknown request type");
		*total = 0;
		return -EOPNOTSUPP;
	}
	if (cl == 4 && !memcmp(cmd, "fail", 4)) {
		status = -ENOENT;
		snprintf(full, sizeof(full), "no such command\n");
	} else if ((cl == 3 && !memcmp(cmd, "big", 3)) || (cl == 3 && !memcmp(cmd, "lie", 3))) {
		for (int i = 0; i < 1000; i++)
			full[i] = (char)('a' + i % 26);
		full[1000] = '\0';
	} else {
		snprintf(full, sizeof(full), "ok:%.*s", (int)(cl > 200 ? 200 : cl), cmd);
	}
	len = strlen(full);
	*total = (int64_t)len + (cl == 3 && !memcmp(cmd, "lie", 3) && m->offset ? 7 : 0);
	if (m->offset > len) {
		snprintf(text, tlen, "no such page");
		*total = 0;
		return -ESTALE;
	}
	snprintf(text, tlen, "%.*s", (int)(len - m->offset < 100 ? len - m->offset : 100),
		 full + m->offset);
	return status;
}

static void
send_reply_fds(struct fake *f, uint64_t seq, int32_t status, int64_t value, const int *fds,
	       int nfds)
{
	struct kvx_eng_reply r = {.hdr = {.type = KVX_ENG_REPLY, .len = sizeof(r), .seq = seq},
				  .status = status,
				  .value = value};
	union {
		char buf[CMSG_SPACE(4 * sizeof(int))];
		struct cmsghdr align;
	} ctl;
	struct iovec iov = {.iov_base = &r, .iov_len = sizeof(r)};
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
	struct cmsghdr *cm;

	assert_true(nfds >= 0 && nfds <= 4);
	memset(&ctl, 0, sizeof(ctl));
	if (nfds) {
		mh.msg_control = ctl.buf;
		mh.msg_controllen = CMSG_SPACE((size_t)nfds * sizeof(int));
		cm = CMSG_FIRSTHDR(&mh);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN((size_t)nfds * sizeof(int));
		memcpy(CMSG_DATA(cm), fds, (size_t)nfds * sizeof(int));
	}
	assert_int_equal(sendmsg(f->cfd, &mh, MSG_NOSIGNAL), sizeof(r));
}

/* KVX_ENG_RINGS, as control/engine.c's rings_setup and rings_reply do it: a sealed memfd holding
 * the submission ring (offset 0) and the event ring, the engine's ends of two wake socket pairs,
 * the reply with all three and value = the ring size.  A bad reply (enum bad_rings) leaves the
 * fake on the socket. */
static void
fake_rings(struct fake *f, uint64_t seq, int bad, uint64_t size, int ncore)
{
	size_t one = kvx_shring_map_bytes(size), total = (2 + (size_t)ncore) * one;
	int fds[4], sub[2], evt[2];

	assert_true(one > 0);
	assert_int_equal(kvx_shring_wake_pair(sub), 0);
	assert_int_equal(kvx_shring_wake_pair(evt), 0);
	if (bad == RINGS_UNSEALED) /* the build directory's filesystem: F_GET_SEALS fails */
		fds[0] = open(".", O_TMPFILE | O_RDWR | O_CLOEXEC, 0600);
	else
		fds[0] = memfd_create("fake-rings", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	if (bad == RINGS_EVENTFDS) {
		fds[1] = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
		fds[2] = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
		close(sub[1]);
		close(evt[1]);
	} else {
		fds[1] = sub[1];
		fds[2] = evt[1];
	}
	fds[3] = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	assert_true(fds[0] >= 0 && fds[1] >= 0 && fds[2] >= 0 && fds[3] >= 0);
	assert_int_equal(ftruncate(fds[0], (off_t)(bad == RINGS_SMALL_MEMFD ? one : total)), 0);
	if (bad != RINGS_UNSEALED)
		assert_int_equal(
			fcntl(fds[0], F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL), 0);
	else
		assert_true(fcntl(fds[0], F_GET_SEALS) < 0); /* what the case is about */
	if (bad == RINGS_GOOD) {
		f->ring_map = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_SHARED, fds[0], 0);
		assert_true(f->ring_map != MAP_FAILED);
		f->ring_map_len = total;
		assert_int_equal(kvx_shring_format(f->ring_map, size), 0);
		assert_int_equal(kvx_shring_format((uint8_t *)f->ring_map + one, size), 0);
		assert_int_equal(kvx_shring_attach(&f->sub, f->ring_map, one, size, sub[0], false),
				 0);
		assert_int_equal(kvx_shring_attach(&f->evt, (uint8_t *)f->ring_map + one, one, size,
						   evt[0], true),
				 0);
		/* the engine starts parked, and libkvx stays so */
		kvx_shring_park_prepare(&f->evt);
		for (int k = 0; k < ncore; k++) {
			uint8_t *at = (uint8_t *)f->ring_map + (2 + (size_t)k) * one;

			assert_int_equal(kvx_shring_format(at, size), 0);
			assert_int_equal(
				kvx_shring_attach(&f->cevt[k], at, one, size, evt[0], true), 0);
			kvx_shring_park_prepare(&f->cevt[k]);
		}
		f->ncevt = ncore;
	}
	switch (bad) {
	case RINGS_TWO_FDS:
		send_reply_fds(f, seq, 0, (int64_t)size, fds, 2);
		break;
	case RINGS_FOUR_FDS:
		send_reply_fds(f, seq, 0, (int64_t)size, fds, 4);
		break;
	case RINGS_NO_FDS:
		send_reply_fds(f, seq, 0, (int64_t)size, fds, 0);
		break;
	case RINGS_ODD_SIZE:
		send_reply_fds(f, seq, 0, (int64_t)size + 8, fds, 3);
		break;
	case RINGS_REFUSED_FDS:
		send_reply_fds(f, seq, -EOPNOTSUPP, 0, fds, 3);
		break;
	default:
		send_reply_fds(f, seq, 0, (int64_t)size, fds, 3);
		break;
	}
	for (int i = 0; i < 4; i++) /* the engine's now; the mapping stays */
		close(fds[i]);
	if (bad == RINGS_GOOD) {
		f->sub_wake = sub[0];
		f->evt_wake = evt[0];
		f->rings = true;
	} else {
		close(sub[0]);
		close(evt[0]);
	}
}

/* Instead of a reply: write into the event ring what no kvxd would (enum corrupt_ring). */
static void
fake_corrupt(struct fake *f, int how)
{
	/* the producer's tail is the first word of the ring's shared header (core/shring.c) */
	uint64_t *tail = (uint64_t *)(void *)f->evt.sh;
	uint32_t rec[2] = {60000, 0x6d5a}; /* len, REC_MSG (core/shring.c) */

	if (how == CORRUPT_TAIL_AHEAD) {
		__atomic_store_n(tail, f->evt.pos + 3 * f->evt.size, __ATOMIC_RELEASE);
	} else {
		memcpy(f->evt.data + (f->evt.pos & f->evt.mask), rec, sizeof(rec));
		__atomic_store_n(tail, f->evt.pos + 64, __ATOMIC_RELEASE);
	}
	kvx_shring_notify(&f->evt);
}

/* The next request into buf: off the socket (blocking) before the rings, then out of the
 * submission ring (parked on its wake end like kvxd, not read while ring_pause_until is ahead),
 * or off the socket when it is readable.  Returns its size, 0 at end of stream, or < 0. */
static ssize_t
fake_recv(struct fake *f, void *buf, size_t cap, struct msghdr *mh, bool *via_ring)
{
	struct iovec iov = {.iov_base = buf, .iov_len = cap};

	mh->msg_iov = &iov;
	mh->msg_iovlen = 1;
	*via_ring = false;
	while (f->rings) {
		struct pollfd p[2] = {{.fd = f->cfd, .events = POLLIN},
				      {.fd = f->sub_wake, .events = POLLIN}};
		bool parked = false;
		int64_t until;
		int r;

		pthread_mutex_lock(&f->mu);
		until = f->ring_pause_until;
		pthread_mutex_unlock(&f->mu);
		if (now_ms() >= until) {
			ssize_t n = kvx_shring_get(&f->sub, buf, (uint32_t)cap);

			if (n != 0) {
				*via_ring = n > 0;
				mh->msg_controllen = 0; /* no fds came along */
				return n;
			}
			kvx_shring_park_prepare(&f->sub);
			if (!kvx_shring_empty(&f->sub)) {
				kvx_shring_park_done(&f->sub, false);
				continue;
			}
			parked = true;
		} else {
			p[1].fd = -1; /* paused: the ring's wake-ups are not looked at */
		}
		r = poll(p, 2, 5);
		if (parked)
			kvx_shring_park_done(&f->sub, r > 0 && (p[1].revents & POLLIN));
		if (r > 0 && p[0].revents)
			break;
	}
	return recvmsg(f->cfd, mh, MSG_CMSG_CLOEXEC);
}

static void *
fake_serve(void *arg)
{
	struct fake *f = arg;
	static uint64_t buf[KVX_ENG_MSG_MAX / 8];
	union {
		char b[CMSG_SPACE(4 * sizeof(int))];
		struct cmsghdr align;
	} ctl;
	char text[300];

	f->cfd = accept4(f->lfd, NULL, NULL, SOCK_CLOEXEC);
	if (f->cfd < 0)
		goto out;
	for (;;) {
		struct msghdr mh = {.msg_control = ctl.b, .msg_controllen = sizeof(ctl.b)};
		const struct kvx_eng_hdr *h = (const struct kvx_eng_hdr *)buf;
		int before, after, bad, status = 0, status_next, fd = -1, rings_bad, corrupt;
		int chunk_events, delay, core_rings;
		bool fills;
		bool do_close, hold, rings_ok, via_ring;
		uint64_t held, room, ring_size;
		int32_t held_status;
		int64_t held_value;
		bool by_room;
		int64_t value;
		struct cmsghdr *cm;
		ssize_t n;
		int i;

		n = fake_recv(f, buf, sizeof(buf), &mh, &via_ring);
		if (n <= 0)
			break;
		for (cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm))
			if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS)
				memcpy(&fd, CMSG_DATA(cm), sizeof(fd));

		pthread_mutex_lock(&f->mu);
		f->nmsgs++;
		if (!request_ok((const uint8_t *)buf, (size_t)n)) {
			f->bad_in++;
			pthread_mutex_unlock(&f->mu);
			continue;
		}
		f->ntype[h->type & 127]++;
		if (via_ring) {
			f->nring++;
		} else {
			f->nsock++;
			f->ntype_sock[h->type & 127]++;
		}
		if (h->type == KVX_ENG_CHUNK && ((const struct kvx_eng_chunk *)buf)->chunk_index !=
							(uint32_t)f->ntype[KVX_ENG_CHUNK] - 1)
			f->chunk_disorder++;
		f->last_seq = h->seq;
		memcpy(f->last, buf, (size_t)n);
		f->last_len = (size_t)n;
		if (h->type == KVX_ENG_HELLO && (size_t)n <= sizeof(f->hello)) {
			memcpy(f->hello, buf, (size_t)n);
			f->hello_len = (size_t)n;
		}
		if (fd >= 0) {
			f->nfds++;
			fstat(fd, &f->fd_st);
			close(fd);
		}
		before = f->inject_before;
		after = f->inject_after;
		bad = f->bad;
		do_close = f->close_next;
		hold = f->hold_next;
		held = f->held_seq;
		held_status = f->held_status;
		held_value = f->held_value;
		by_room = f->by_room;
		value = f->value;
		room = f->ev_room;
		rings_ok = f->rings_ok;
		rings_bad = f->rings_bad;
		ring_size = f->ring_size ? f->ring_size : 512u << 10;
		core_rings = f->core_rings;
		f->srv_ev_core = f->ev_core;
		f->srv_split = f->ev_split;
		f->srv_core_reply = f->core_reply;
		f->core_reply = false;
		corrupt = f->corrupt;
		f->corrupt = CORRUPT_NONE;
		delay = f->delay_ms;
		f->delay_ms = 0;
		chunk_events = h->type == KVX_ENG_CHUNK ? f->chunk_events : 0;
		fills = h->type == KVX_ENG_CHUNK && f->chunk_fills;
		if (h->type == KVX_ENG_CHUNK) {
			f->chunk_events = 0;
			f->chunk_fills = false;
			f->ev_room += (uint64_t)chunk_events;
		}
		status_next = 0;
		if (h->type != KVX_ENG_CHUNK && h->type != KVX_ENG_HELLO &&
		    h->type != KVX_ENG_ADMIN && h->type != KVX_ENG_ADMIN_AT) {
			status_next = f->status_next;
			f->status_next = 0;
		}
		f->inject_before = f->inject_after = 0;
		f->bad = BAD_NONE;
		f->close_next = f->hold_next = false;
		f->held_seq = 0;
		if (h->type != KVX_ENG_CHUNK || do_close)
			f->ev_room += (uint64_t)(before + after);
		if (hold && h->type != KVX_ENG_CHUNK) {
			f->held_seq = h->seq;
			f->held_status = 0;
			f->held_value = 0;
			if (f->by_room)
				by_room_result((const uint8_t *)buf, &f->held_status,
					       &f->held_value);
		}
		pthread_mutex_unlock(&f->mu);

		if (delay)
			usleep((useconds_t)delay * 1000);
		if (corrupt && f->rings) {
			fake_corrupt(f, corrupt);
			continue;
		}
		if (fills && f->rings) {
			int k = fill_and_starve(f, room);

			room += (uint64_t)k;
			ring_flush(f);
			pthread_mutex_lock(&f->mu);
			f->filled = k;
			f->ev_room += (uint64_t)k;
			pthread_mutex_unlock(&f->mu);
			continue;
		}
		if (h->type == KVX_ENG_CHUNK && !do_close) {
			bool gated = gate_wait_open(f);

			for (i = 0; i < chunk_events; i++)
				send_event(f, room++, KVX_STATE_TRANSFERRING);
			ring_flush(f);
			pthread_mutex_lock(&f->mu);
			f->chunk_flushes++;
			pthread_mutex_unlock(&f->mu);
			if (gated)
				gate_mark_done(f);
			continue; /* no reply; the script waits for the next request */
		}
		if (h->type == KVX_ENG_RINGS && rings_ok && !f->rings) {
			uint32_t fl = (size_t)n == sizeof(struct kvx_eng_rings)
					      ? ((const struct kvx_eng_rings *)buf)->flags
					      : 0;
			bool refuse;

			pthread_mutex_lock(&f->mu);
			f->rings_len = (size_t)n;
			f->rings_flags = fl;
			refuse = (f->rearm_unknown && (fl & KVX_ENG_RINGS_REARM)) ||
				 (f->wake_ends_unknown && (fl & KVX_ENG_RINGS_WAKE_ENDS));
			f->rings_refused += refuse;
			pthread_mutex_unlock(&f->mu);
			if (refuse) { /* as control/engine.c did before the flag */
				send_reply(f, h->seq, -EINVAL, 0, "unknown RINGS flags");
				continue;
			}
			fake_rings(f, h->seq, rings_bad, ring_size,
				   fl & KVX_ENG_RINGS_CORE ? core_rings : 0);
			/* as kvxd: a re-arming engine is woken once until it drained its wake end
			 */
			kvx_shring_set_oneshot(&f->evt, fl & KVX_ENG_RINGS_REARM);
			for (int k = 0; k < f->ncevt; k++)
				kvx_shring_set_oneshot(&f->cevt[k], fl & KVX_ENG_RINGS_REARM);
			continue;
		}
		for (i = 0; i < before; i++)
			send_event(f, room++, KVX_STATE_TRANSFERRING + i % 3);
		if (do_close)
			break;
		if (held)
			send_reply(f, held, held_status, held_value, "stale");
		if (hold) {
			ring_flush(f);
			continue;
		}
		if (bad) {
			send_bad_reply(f, bad, h->seq);
			ring_flush(f);
			continue;
		}
		text[0] = '\0';
		switch (h->type) {
		case KVX_ENG_HELLO:
			status = f->hello_status;
			snprintf(text, sizeof(text), "%s", f->node);
			break;
		case KVX_ENG_RINGS: /* this fake is a kvxd without rings */
			status = -EOPNOTSUPP;
			snprintf(text, sizeof(text), "no rings");
			break;
		case KVX_ENG_ADMIN: {
			const char *cmd = (const char *)buf + sizeof(struct kvx_eng_admin);
			size_t cl = (size_t)n - sizeof(struct kvx_eng_admin);

			if (cl == 4 && !memcmp(cmd, "fail", 4)) {
				status = -ENOENT;
				snprintf(text, sizeof(text), "no such command\n");
			} else {
				snprintf(text, sizeof(text), "ok:%.*s", (int)(cl > 200 ? 200 : cl),
					 cmd);
			}
			break;
		}
		case KVX_ENG_ADMIN_AT:
			status = admin_page(f, (const struct kvx_eng_admin_at *)buf,
					    (size_t)n - sizeof(struct kvx_eng_admin_at), text,
					    sizeof(text), &value);
			break;
		default:
			status = status_next;
			if (by_room)
				by_room_result((const uint8_t *)buf, &status, &value);
			break;
		}
		send_reply(f, h->seq, status, value, text);
		for (i = 0; i < after; i++)
			send_event(f, room++, KVX_STATE_SUCCESS);
		ring_flush(f); /* one wake-up for the reply and the events after it */
	}
	/* a test that read our ends is ordered before their close by this lock */
	pthread_mutex_lock(&f->mu);
	pthread_mutex_unlock(&f->mu);
	close(f->cfd);
	f->cfd = -1;
	if (f->rings) {
		munmap(f->ring_map, f->ring_map_len);
		close(f->sub_wake);
		close(f->evt_wake);
		f->rings = false;
	}
out:
	pthread_mutex_lock(&f->mu);
	f->done = true;
	pthread_mutex_unlock(&f->mu);
	return NULL;
}

static int
fake_start(struct fake *f)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};

	memset(f, 0, sizeof(*f));
	f->cfd = -1;
	f->sub_wake = f->evt_wake = -1;
	snprintf(f->node, sizeof(f->node), "kvx-test.node_1");
	f->value = 7;
	f->ev_room = 100;
	f->ev_core = f->srv_ev_core = -1;
	pthread_mutex_init(&f->mu, NULL);
	pthread_cond_init(&f->gate_cv, NULL);
	snprintf(f->dir, sizeof(f->dir), "/tmp/kvx-test-XXXXXX");
	if (!mkdtemp(f->dir))
		return -errno;
	snprintf(f->path, sizeof(f->path), "%s/kvxd.sock", f->dir);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", f->path);
	f->lfd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (f->lfd < 0)
		return -errno;
	if (bind(f->lfd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(f->lfd, 4) < 0)
		return -errno;
	if (pthread_create(&f->thr, NULL, fake_serve, f))
		return -EAGAIN;
	return 0;
}

static void
fake_stop(struct fake *f)
{
	/* the client disconnected already: the server sees end of stream and returns */
	shutdown(f->lfd, SHUT_RDWR);
	pthread_join(f->thr, NULL);
	close(f->lfd);
	unlink(f->path);
	rmdir(f->dir);
	gate_fake = NULL;
	pthread_cond_destroy(&f->gate_cv);
	pthread_mutex_destroy(&f->mu);
}

static int
fake_count(struct fake *f)
{
	int n;

	pthread_mutex_lock(&f->mu);
	n = f->nmsgs;
	pthread_mutex_unlock(&f->mu);
	return n;
}

/* One ADMIN round trip: every message sent before it has been recorded when it returns. */
static void
sync_fake(struct kvx_conn *c)
{
	char out[64];

	assert_int_equal(kvx_admin(c, "sync", out, sizeof(out)), 0);
	assert_string_equal(out, "ok:sync");
}

static int
setup_fake(void **state)
{
	struct fixture *fx = calloc(1, sizeof(*fx));

	if (!fx || fake_start(&fx->f) < 0)
		return -1;
	*state = fx;
	return 0;
}

static int
setup_conn(void **state)
{
	struct fixture *fx;

	if (setup_fake(state) < 0)
		return -1;
	fx = *state;
	fx->c = kvx_connect(fx->f.path);
	return fx->c ? 0 : -1;
}

static int
teardown(void **state)
{
	struct fixture *fx = *state;

	kvx_disconnect(fx->c);
	fake_stop(&fx->f);
	free(fx);
	req_timeout_ms = REQ_TIMEOUT_MS;
	return 0;
}

static int
memfd_sized(size_t bytes)
{
	int fd = memfd_create("test-pool", MFD_CLOEXEC);

	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, (off_t)bytes), 0);
	return fd;
}

/* ---- tests ---- */

static void
test_connect_learns_node_name(void **state)
{
	struct fixture *fx = *state;
	const struct kvx_eng_hello *m = (const void *)fx->f.hello;
	const struct kvx_eng_hdr *r = (const void *)fx->f.last;

	assert_string_equal(kvx_node_name(fx->c), "kvx-test.node_1");
	assert_true(kvx_conn_fd(fx->c) >= 0);
	pthread_mutex_lock(&fx->f.mu);
	/* HELLO, then RINGS, which this kvxd refuses: the session stays on the socket */
	assert_int_equal(fx->f.nmsgs, 2);
	assert_int_equal(fx->f.ntype[KVX_ENG_HELLO], 1);
	assert_int_equal(fx->f.ntype[KVX_ENG_RINGS], 1);
	assert_int_equal(fx->f.hello_len, sizeof(*m));
	assert_int_equal(m->version, KVX_ENG_VERSION);
	assert_int_equal(m->hdr.seq, 1);
	assert_int_equal(r->type, KVX_ENG_RINGS);
	assert_int_equal(r->seq, 2);
	pthread_mutex_unlock(&fx->f.mu);
	assert_false(fx->c->rings);
}

static void
test_connect_refused(void **state)
{
	struct fixture *fx = *state;
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	char path[108];
	int fd;

	/* a bound socket nobody listens on */
	snprintf(path, sizeof(path), "%s/dead.sock", fx->f.dir);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	fd = socket(AF_UNIX, SOCK_SEQPACKET, 0);
	assert_true(fd >= 0);
	assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	errno = 0;
	assert_null(kvx_connect(path));
	assert_int_equal(errno, ECONNREFUSED);
	close(fd);
	unlink(path);

	errno = 0;
	assert_null(kvx_connect(path));
	assert_int_equal(errno, ENOENT);
	errno = 0;
	assert_null(kvx_connect(NULL));
	assert_int_equal(errno, EINVAL);

	/* the fake is still waiting for its one client */
	fx->c = kvx_connect(fx->f.path);
	assert_non_null(fx->c);
}

static void
test_connect_refuses_bad_hello_reply(void **state)
{
	struct fixture *fx = *state;

	pthread_mutex_lock(&fx->f.mu);
	snprintf(fx->f.node, sizeof(fx->f.node), "bad name");
	pthread_mutex_unlock(&fx->f.mu);
	errno = 0;
	assert_null(kvx_connect(fx->f.path));
	assert_int_equal(errno, EBADMSG);
}

static void
test_connect_reports_hello_status(void **state)
{
	struct fixture *fx = *state;

	pthread_mutex_lock(&fx->f.mu);
	fx->f.hello_status = -EACCES;
	pthread_mutex_unlock(&fx->f.mu);
	errno = 0;
	assert_null(kvx_connect(fx->f.path));
	assert_int_equal(errno, EACCES);
}

static void
test_state_str(void **state)
{
	(void)state;
	assert_string_equal(kvx_state_str(KVX_STATE_BOOTSTRAPPING), "BOOTSTRAPPING");
	assert_string_equal(kvx_state_str(KVX_STATE_WAITING_FOR_INPUT), "WAITING_FOR_INPUT");
	assert_string_equal(kvx_state_str(KVX_STATE_TRANSFERRING), "TRANSFERRING");
	assert_string_equal(kvx_state_str(KVX_STATE_SUCCESS), "SUCCESS");
	assert_string_equal(kvx_state_str(KVX_STATE_FAILED), "FAILED");
	assert_string_equal(kvx_state_str(KVX_STATE_DRAINING), "DRAINING");
	assert_string_equal(kvx_state_str(KVX_STATE_RELEASED), "RELEASED");
	assert_string_equal(kvx_state_str(7), "?");
	assert_string_equal(kvx_state_str(-1), "?");
}

static void
test_bad_arguments_send_nothing(void **state)
{
	struct fixture *fx = *state;
	struct kvx_conn *c = fx->c;
	struct kvx_pool_geometry g = {.page_size = 4096, .npages = 4, .nbufs = 2};
	struct kvx_pool_geometry bad;
	static uint32_t pages[KVX_MAX_ROOM_PAGES + 1];
	static char longcmd[KVX_ENG_MSG_MAX + 1];
	const char *src[KVX_MAX_SOURCES + 1];
	const char *one[] = {"pf0"};
	char name64[KVX_NAME_MAX + 1];
	struct kvx_event ev;
	char out[16];
	int before, memfd, small, i;

	for (i = 0; i <= KVX_MAX_SOURCES; i++)
		src[i] = "pf0";
	memset(name64, 'a', KVX_NAME_MAX);
	name64[KVX_NAME_MAX] = '\0';
	memset(longcmd, 'x', sizeof(longcmd) - 1);
	memfd = memfd_sized(4096 * 4 * 2);
	small = memfd_sized(4096 * 4 * 2 - 1);
	sync_fake(c);
	before = fake_count(&fx->f);

	/* NULL connection */
	assert_int_equal(kvx_pool_register(NULL, memfd, &g), -EINVAL);
	assert_int_equal(kvx_pool_unregister(NULL, 1), -EINVAL);
	assert_int_equal(kvx_room_open(NULL, 1, 1, pages, 1, one, 1), -EINVAL);
	assert_int_equal(kvx_chunk_submit(NULL, 1, 0, 1, pages, 1, 0, 1), -EINVAL);
	assert_int_equal(kvx_room_close(NULL, 1), -EINVAL);
	assert_int_equal(kvx_room_abort(NULL, 1), -EINVAL);
	assert_int_equal(kvx_event_read(NULL, &ev, 1, 0), -EINVAL);
	assert_int_equal(kvx_admin(NULL, "x", out, sizeof(out)), -EINVAL);
	assert_int_equal(kvx_conn_fd(NULL), -EINVAL);
	assert_null(kvx_node_name(NULL));

	/* pool geometry and fd */
	assert_int_equal(kvx_pool_register(c, memfd, NULL), -EINVAL);
	assert_int_equal(kvx_pool_register(c, -1, &g), -EINVAL);
	bad = g, bad.page_size = 0;
	assert_int_equal(kvx_pool_register(c, memfd, &bad), -EINVAL);
	bad = g, bad.page_size = 4000;
	assert_int_equal(kvx_pool_register(c, memfd, &bad), -EINVAL);
	bad = g, bad.page_size = 32u << 20;
	assert_int_equal(kvx_pool_register(c, memfd, &bad), -EINVAL);
	bad = g, bad.npages = 0;
	assert_int_equal(kvx_pool_register(c, memfd, &bad), -EINVAL);
	bad = g, bad.nbufs = 0;
	assert_int_equal(kvx_pool_register(c, memfd, &bad), -EINVAL);
	bad = g, bad.page_size = 16u << 20, bad.npages = UINT32_MAX, bad.nbufs = UINT32_MAX;
	assert_int_equal(kvx_pool_register(c, memfd, &bad), -EINVAL); /* size overflows */
	assert_int_equal(kvx_pool_register(c, small, &g), -EINVAL);   /* memfd too small */
	assert_int_equal(kvx_pool_unregister(c, 0), -EINVAL);
	assert_int_equal(kvx_pool_unregister(c, -3), -EINVAL);

	/* room open */
	assert_int_equal(kvx_room_open(c, KVX_ROOM_ID_MAX + 1, 1, pages, 1, one, 1), -EINVAL);
	assert_int_equal(kvx_room_open(c, 1, 0, pages, 1, one, 1), -EINVAL);
	assert_int_equal(kvx_room_open(c, 1, 1, NULL, 1, one, 1), -EINVAL);
	assert_int_equal(kvx_room_open(c, 1, 1, pages, 0, one, 1), -EINVAL);
	assert_int_equal(kvx_room_open(c, 1, 1, pages, KVX_MAX_ROOM_PAGES + 1, one, 1), -EINVAL);
	assert_int_equal(kvx_room_open(c, 1, 1, pages, 1, NULL, 1), -EINVAL);
	assert_int_equal(kvx_room_open(c, 1, 1, pages, 1, one, 0), -EINVAL);
	assert_int_equal(kvx_room_open(c, 1, 1, pages, 1, src, KVX_MAX_SOURCES + 1), -EINVAL);
	{
		const char *bad_names[] = {"", "bad name", "a/b", "tab\t", "\xc3\xa9", name64};
		const char *s2[2] = {"pf0", NULL};

		for (i = 0; i < (int)(sizeof(bad_names) / sizeof(bad_names[0])); i++) {
			s2[1] = bad_names[i];
			assert_int_equal(kvx_room_open(c, 1, 1, pages, 1, s2, 2), -EINVAL);
		}
		s2[1] = NULL;
		assert_int_equal(kvx_room_open(c, 1, 1, pages, 1, s2, 2), -EINVAL);
		s2[1] = "pf0"; /* the same source twice */
		assert_int_equal(kvx_room_open(c, 1, 1, pages, 1, s2, 2), -EINVAL);
	}

	/* chunk */
	assert_int_equal(kvx_chunk_submit(c, KVX_ROOM_ID_MAX + 1, 0, 1, pages, 1, 0, 1), -EINVAL);
	assert_int_equal(kvx_chunk_submit(c, 1, 0, 0, pages, 1, 0, 1), -EINVAL);
	assert_int_equal(kvx_chunk_submit(c, 1, 0, 1, NULL, 1, 0, 1), -EINVAL);
	assert_int_equal(kvx_chunk_submit(c, 1, 0, 1, pages, 0, 0, 1), -EINVAL);
	assert_int_equal(kvx_chunk_submit(c, 1, 0, 1, pages, KVX_MAX_ROOM_PAGES + 1, 0, 1),
			 -EINVAL);
	assert_int_equal(kvx_chunk_submit(c, 1, 0, 1, pages, 2, KVX_MAX_ROOM_PAGES - 1, 1),
			 -EINVAL);
	assert_int_equal(kvx_chunk_submit(c, 1, 0, 1, pages, 1, UINT32_MAX, 1), -EINVAL);

	/* close, abort, events, admin */
	assert_int_equal(kvx_room_close(c, KVX_ROOM_ID_MAX + 1), -EINVAL);
	assert_int_equal(kvx_room_abort(c, KVX_ROOM_ID_MAX + 1), -EINVAL);
	assert_int_equal(kvx_room_abort(c, UINT64_MAX), -EINVAL);
	assert_int_equal(kvx_event_read(c, NULL, 1, 0), -EINVAL);
	assert_int_equal(kvx_event_read(c, &ev, 0, 0), -EINVAL);
	assert_int_equal(kvx_admin(c, NULL, out, sizeof(out)), -EINVAL);
	assert_int_equal(kvx_admin(c, "", out, sizeof(out)), -EINVAL);
	assert_int_equal(kvx_admin(c, "x", NULL, 4), -EINVAL);
	assert_int_equal(kvx_admin(c, longcmd, out, sizeof(out)), -EINVAL); /* > MSG_MAX */

	/* nothing reached kvxd: the sync is the only message since `before` */
	sync_fake(c);
	assert_int_equal(fake_count(&fx->f), before + 1);
	pthread_mutex_lock(&fx->f.mu);
	assert_int_equal(fx->f.bad_in, 0);
	pthread_mutex_unlock(&fx->f.mu);

	/* and the limits themselves are accepted */
	assert_int_equal(kvx_room_open(c, KVX_ROOM_ID_MAX, 1, pages, KVX_MAX_ROOM_PAGES, src, 1),
			 7);
	assert_int_equal(
		kvx_chunk_submit(c, KVX_ROOM_ID_MAX, 0, 1, pages, KVX_MAX_ROOM_PAGES, 0, 1), 0);
	assert_int_equal(kvx_room_abort(c, KVX_ROOM_ID_MAX), 7);
	sync_fake(c);
	assert_int_equal(fake_count(&fx->f), before + 5);
	close(memfd);
	close(small);
}

/* Read n events, at most max per call (later calls wait up to timeout_ms for events still in
 * flight), and check they are rooms first_room, first_room + 1, ... in that order. */
static void
expect_events(struct kvx_conn *c, int max, int timeout_ms, int n, uint64_t first_room)
{
	struct kvx_event ev[8];
	int i, got = 0, r;

	assert_true(max <= 8 && n <= 8);
	while (got < n) {
		r = kvx_event_read(c, ev + got, max < n - got ? max : n - got, timeout_ms);
		assert_true(r > 0 && r <= max);
		got += r;
	}
	for (i = 0; i < n; i++) {
		char want[32];

		assert_int_equal(ev[i].room, first_room + (uint64_t)i);
		assert_int_equal(ev[i].generation, 2);
		snprintf(want, sizeof(want), "room %llu", (unsigned long long)(first_room + i));
		assert_string_equal(ev[i].reason, want);
	}
}

static bool
fd_readable(int fd)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};

	return poll(&p, 1, 0) == 1 && (p.revents & POLLIN);
}

/* libkvx keeps at most q_max events unread (EVQ_MAX; 64 here).  One more, met while a call
 * waits for its reply, is not dropped in silence (it may be a room's end): the session ends,
 * every call fails with -ENOBUFS, and kvxd sees the session go.  Before, the event was lost and
 * the call failed once. */
static void
test_event_queue_full_ends_the_session(void **state)
{
	struct fixture *fx = *state;
	char out[32], b = 0;

	fx->c->q_max = 64;
	pthread_mutex_lock(&fx->f.mu);
	fx->f.inject_before = 100;
	pthread_mutex_unlock(&fx->f.mu);
	assert_int_equal(kvx_admin(fx->c, "rooms", out, sizeof(out)), -ENOBUFS);
	assert_int_equal(kvx_room_close(fx->c, 1), -ENOBUFS);
	assert_int_equal(kvx_admin(fx->c, "rooms", out, sizeof(out)), -ENOBUFS);
	/* shut down: kvxd reads the end of the session */
	assert_true(send(fx->c->fd, &b, 1, MSG_DONTWAIT | MSG_NOSIGNAL) < 0 && errno == EPIPE);
}

static void
test_events_before_reply_are_queued_in_order(void **state)
{
	struct fixture *fx = *state;
	struct kvx_event ev;
	char out[32];

	pthread_mutex_lock(&fx->f.mu);
	fx->f.inject_before = 3; /* rooms 100, 101, 102, then the reply and nothing after it */
	pthread_mutex_unlock(&fx->f.mu);
	assert_int_equal(kvx_admin(fx->c, "rooms", out, sizeof(out)), 0);
	assert_string_equal(out, "ok:rooms");

	/* the socket is empty now, yet the fd reports the queued events until they are read */
	assert_true(fd_readable(kvx_conn_fd(fx->c)));
	expect_events(fx->c, 2, 0, 2, 100);
	assert_true(fd_readable(kvx_conn_fd(fx->c)));
	expect_events(fx->c, 8, 0, 1, 102);
	assert_false(fd_readable(kvx_conn_fd(fx->c)));
	assert_int_equal(kvx_event_read(fx->c, &ev, 1, 0), 0);
	assert_int_equal(kvx_event_read(fx->c, &ev, 1, 30), 0); /* waits, then nothing */

	/* events queued during a request come before events that arrive after it */
	pthread_mutex_lock(&fx->f.mu);
	fx->f.inject_before = 1; /* 103 */
	fx->f.inject_after = 1;	 /* 104, after the reply */
	pthread_mutex_unlock(&fx->f.mu);
	assert_int_equal(kvx_room_close(fx->c, 1), 0);
	pthread_mutex_lock(&fx->f.mu);
	fx->f.inject_before = 1; /* 105 */
	fx->f.inject_after = 2;	 /* 106, 107 */
	pthread_mutex_unlock(&fx->f.mu);
	assert_int_equal(kvx_room_close(fx->c, 2), 0);
	expect_events(fx->c, 3, 1000, 5, 103);
	assert_int_equal(kvx_event_read(fx->c, &ev, 1, 0), 0);
	assert_false(fd_readable(kvx_conn_fd(fx->c)));
}

static void
test_pool_register_passes_memfd(void **state)
{
	struct fixture *fx = *state;
	struct kvx_pool_geometry g = {.page_size = 4096, .npages = 4, .nbufs = 3};
	const struct kvx_eng_pool_reg *m = (const void *)fx->f.last;
	struct stat mine;
	int memfd = memfd_sized(4096 * 4 * 3);

	assert_int_equal(fstat(memfd, &mine), 0);
	assert_int_equal(kvx_pool_register(fx->c, memfd, &g), 7);
	pthread_mutex_lock(&fx->f.mu);
	assert_int_equal(fx->f.nfds, 1);
	assert_true(S_ISREG(fx->f.fd_st.st_mode));
	assert_int_equal(fx->f.fd_st.st_size, 4096 * 4 * 3);
	assert_int_equal(fx->f.fd_st.st_ino, mine.st_ino);
	assert_int_equal(fx->f.fd_st.st_dev, mine.st_dev);
	assert_int_equal(fx->f.last_len, sizeof(*m));
	assert_int_equal(m->hdr.type, KVX_ENG_POOL_REG);
	assert_memory_equal(&m->geom, &g, sizeof(g));
	pthread_mutex_unlock(&fx->f.mu);
	/* the caller keeps its own fd */
	assert_int_equal(fcntl(memfd, F_GETFD), FD_CLOEXEC);
	assert_int_equal(kvx_pool_unregister(fx->c, 7), 0);
	pthread_mutex_lock(&fx->f.mu);
	assert_int_equal(((const struct kvx_eng_pool_unreg *)fx->f.last)->pool_id, 7);
	pthread_mutex_unlock(&fx->f.mu);
	close(memfd);
}

/* A pool's registration and deregistration are answered once the kernel pinned or unpinned every
 * page (seconds for a GPU's pool): libkvx waits longer for them than for other requests, which
 * still time out at the request timeout. */
static void
test_pool_calls_wait_longer(void **state)
{
	struct fixture *fx = *state;
	struct kvx_pool_geometry g = {.page_size = 4096, .npages = 4, .nbufs = 3};
	int memfd = memfd_sized(4096 * 4 * 3);
	char out[32];

	req_timeout_ms = 100;
	pthread_mutex_lock(&fx->f.mu);
	fx->f.delay_ms = 400;
	pthread_mutex_unlock(&fx->f.mu);
	assert_int_equal(kvx_pool_register(fx->c, memfd, &g), 7);
	pthread_mutex_lock(&fx->f.mu);
	fx->f.delay_ms = 400;
	pthread_mutex_unlock(&fx->f.mu);
	assert_int_equal(kvx_pool_unregister(fx->c, 7), 0);
	pthread_mutex_lock(&fx->f.mu);
	fx->f.delay_ms = 400;
	pthread_mutex_unlock(&fx->f.mu);
	assert_int_equal(kvx_admin(fx->c, "peers", out, sizeof(out)), -ETIMEDOUT);
	close(memfd);
}

static void
test_room_open_message(void **state)
{
	struct fixture *fx = *state;
	const uint32_t pages[] = {5, 9, 2};
	const char *src[] = {"pf0", "prefill-1.rack_2"};
	const struct kvx_eng_room_open *m = (const void *)fx->f.last;
	const struct kvx_eng_region *rg = (const void *)(m + 1);
	const struct kvx_eng_source *es = (const void *)(rg + 1);
	char zero[KVX_NAME_MAX] = {0};
	struct kvx_slice whole[KVX_MAX_REGIONS] = {0};

	pthread_mutex_lock(&fx->f.mu);
	fx->f.value = 3;
	pthread_mutex_unlock(&fx->f.mu);
	assert_int_equal(kvx_room_open(fx->c, 1234, 2, pages, 3, src, 2), 3);
	pthread_mutex_lock(&fx->f.mu);
	assert_int_equal(fx->f.bad_in, 0);
	assert_int_equal(fx->f.last_len, sizeof(*m) + sizeof(*rg) + 2 * sizeof(*es) + 3 * 4);
	assert_int_equal(m->hdr.type, KVX_ENG_ROOM_OPEN);
	assert_int_equal(m->room, 1234);
	assert_int_equal(m->nregions, 1);
	assert_int_equal(rg->pool_id, 2);
	assert_int_equal(rg->npages, 3);
	assert_int_equal(m->nsources, 2);
	assert_string_equal(es[0].name, "pf0");
	assert_memory_equal(es[0].name + 3, zero, KVX_NAME_MAX - 3);
	assert_int_equal(es[0].rank, 0);
	assert_memory_equal(es[0].slice, whole, sizeof(whole));
	assert_string_equal(es[1].name, "prefill-1.rack_2");
	assert_memory_equal(es + 2, pages, sizeof(pages));
	pthread_mutex_unlock(&fx->f.mu);
}

static void
test_chunk_submit_sends_one_datagram(void **state)
{
	struct fixture *fx = *state;
	const uint32_t pages[] = {40, 41, 42, 7};
	const struct kvx_eng_chunk *m = (const void *)fx->f.last;
	uint64_t chunk_seq;
	int before;

	sync_fake(fx->c);
	before = fake_count(&fx->f);
	/* returns without a reply (the fake never sends one for a chunk) */
	assert_int_equal(kvx_chunk_submit(fx->c, 99, 5, 3, pages, 4, 12, 9), 0);
	for (int i = 0; i < 200 && fake_count(&fx->f) == before; i++)
		usleep(5000);
	pthread_mutex_lock(&fx->f.mu);
	assert_int_equal(fx->f.nmsgs, before + 1);
	assert_int_equal(fx->f.ntype[KVX_ENG_CHUNK], 1);
	assert_int_equal(fx->f.bad_in, 0);
	assert_int_equal(fx->f.last_len, sizeof(*m) + sizeof(pages));
	assert_int_equal(m->hdr.type, KVX_ENG_CHUNK);
	assert_int_equal(m->hdr.len, sizeof(*m) + sizeof(pages));
	assert_int_equal(m->room, 99);
	assert_int_equal(m->chunk_index, 5);
	assert_int_equal(m->pool_id, 3);
	assert_int_equal(m->npages, 4);
	assert_int_equal(m->dst_offset, 12);
	assert_int_equal(m->last, 1);
	assert_int_equal(m->region, 0);
	assert_int_equal(m->buf_first, 0);
	assert_int_equal(m->buf_count, 0);
	assert_memory_equal(m + 1, pages, sizeof(pages));
	chunk_seq = m->hdr.seq;
	pthread_mutex_unlock(&fx->f.mu);

	/* sequence numbers keep increasing across chunks and requests */
	assert_int_equal(kvx_chunk_submit(fx->c, 99, 6, 3, pages, 1, 16, 0), 0);
	sync_fake(fx->c);
	pthread_mutex_lock(&fx->f.mu);
	assert_int_equal(fx->f.ntype[KVX_ENG_CHUNK], 2);
	assert_int_equal(fx->f.last_seq, chunk_seq + 2);
	pthread_mutex_unlock(&fx->f.mu);
}

/* kvx_chunk_submitv: a batch goes out as one CHUNK per chunk, in order, with every field
 * (region, buffers, ndest); a batch with one bad chunk is refused whole, nothing sent. */
static void
test_chunk_submitv_batch(void **state)
{
	struct fixture *fx = *state;
	const uint32_t p0[] = {1, 2}, p1[] = {3}, p2[] = {4, 5, 6};
	struct kvx_chunk ch[3] = {
		{.room = 7, .chunk_index = 0, .pool_id = 2, .npages = 2, .src_pages = p0},
		{.room = 7,
		 .chunk_index = 1,
		 .pool_id = 2,
		 .npages = 1,
		 .src_pages = p1,
		 .region = 1,
		 .buf_first = 2,
		 .buf_count = 1,
		 .ndest = 2},
		{.room = 8,
		 .chunk_index = 0,
		 .pool_id = 3,
		 .npages = 3,
		 .src_pages = p2,
		 .dst_offset = 9,
		 .region = 3,
		 .buf_first = 5,
		 .buf_count = 2,
		 .ndest = 8,
		 .last = 1},
	};
	const struct kvx_eng_chunk *m = (const void *)fx->f.last;
	int before;

	sync_fake(fx->c);
	before = fake_count(&fx->f);
	assert_int_equal(kvx_chunk_submitv(fx->c, ch, 3), 3);
	sync_fake(fx->c);
	pthread_mutex_lock(&fx->f.mu);
	assert_int_equal(fx->f.nmsgs, before + 4); /* 3 chunks and the sync */
	assert_int_equal(fx->f.ntype[KVX_ENG_CHUNK], 3);
	assert_int_equal(fx->f.bad_in, 0);
	pthread_mutex_unlock(&fx->f.mu);
	/* a batch of one, its fields read back as the fake's last message */
	before = fake_count(&fx->f);
	assert_int_equal(kvx_chunk_submitv(fx->c, &ch[2], 1), 1);
	for (int i = 0; i < 200 && fake_count(&fx->f) == before; i++)
		usleep(5000);
	pthread_mutex_lock(&fx->f.mu);
	assert_int_equal(fx->f.ntype[KVX_ENG_CHUNK], 4);
	assert_int_equal(m->hdr.type, KVX_ENG_CHUNK);
	assert_int_equal(fx->f.last_len, sizeof(*m) + sizeof(p2));
	assert_int_equal(m->room, 8);
	assert_int_equal(m->pool_id, 3);
	assert_int_equal(m->npages, 3);
	assert_int_equal(m->dst_offset, 9);
	assert_int_equal(m->region, 3);
	assert_int_equal(m->buf_first, 5);
	assert_int_equal(m->buf_count, 2);
	assert_int_equal(m->ndest, 8);
	assert_int_equal(m->last, 1);
	assert_memory_equal(m + 1, p2, sizeof(p2));
	pthread_mutex_unlock(&fx->f.mu);
	/* one bad chunk refuses the whole batch: a region beyond the room's, too many
	 * destinations, no pages */
	{
		struct kvx_chunk bad[3] = {ch[0], ch[1], ch[2]};

		bad[1].region = KVX_MAX_REGIONS;
		assert_int_equal(kvx_chunk_submitv(fx->c, bad, 3), -EINVAL);
		bad[1] = ch[1];
		bad[2].ndest = KVX_MAX_DESTS + 1;
		assert_int_equal(kvx_chunk_submitv(fx->c, bad, 3), -EINVAL);
		bad[2] = ch[2];
		bad[0].npages = 0;
		assert_int_equal(kvx_chunk_submitv(fx->c, bad, 3), -EINVAL);
		assert_int_equal(kvx_chunk_submitv(fx->c, bad, 0), -EINVAL);
	}
	sync_fake(fx->c);
	pthread_mutex_lock(&fx->f.mu);
	assert_int_equal(fx->f.ntype[KVX_ENG_CHUNK], 4); /* nothing of the bad batches */
	pthread_mutex_unlock(&fx->f.mu);
}

static void
test_room_abort_message(void **state)
{
	struct fixture *fx = *state;
	const struct kvx_eng_room_abort *m = (const void *)fx->f.last;
	uint64_t seq;

	sync_fake(fx->c);
	pthread_mutex_lock(&fx->f.mu);
	seq = fx->f.last_seq;
	fx->f.value = 5; /* the abort generation */
	pthread_mutex_unlock(&fx->f.mu);
	assert_int_equal(kvx_room_abort(fx->c, 4321), 5);
	pthread_mutex_lock(&fx->f.mu);
	assert_int_equal(fx->f.bad_in, 0);
	assert_int_equal(fx->f.ntype[KVX_ENG_ROOM_ABORT], 1);
	assert_int_equal(fx->f.last_len, sizeof(*m));
	assert_int_equal(sizeof(*m), sizeof(struct kvx_eng_hdr) + sizeof(uint64_t));
	assert_int_equal(m->hdr.type, KVX_ENG_ROOM_ABORT);
	assert_int_equal(m->hdr.flags, 0);
	assert_int_equal(m->hdr.len, sizeof(*m));
	assert_int_equal(m->hdr.seq, seq + 1);
	assert_int_equal(m->room, 4321);
	/* a generation is 32 bits on events: the largest one is returned whole */
	fx->f.value = UINT32_MAX;
	pthread_mutex_unlock(&fx->f.mu);
	assert_int_equal(kvx_room_abort(fx->c, KVX_ROOM_ID_MAX), (int64_t)UINT32_MAX);
	pthread_mutex_lock(&fx->f.mu);
	assert_int_equal(m->room, KVX_ROOM_ID_MAX);
	assert_int_equal(fx->f.ntype[KVX_ENG_ROOM_ABORT], 2);
	pthread_mutex_unlock(&fx->f.mu);
}

/* The events kvxd sends before the reply (the room's FAILED, say) are queued, not lost. */
static void
test_room_abort_queues_events_before_reply(void **state)
{
	struct fixture *fx = *state;
	struct kvx_event ev;

	pthread_mutex_lock(&fx->f.mu);
	fx->f.inject_before = 2; /* rooms 100, 101 */
	fx->f.inject_after = 1;	 /* room 102 */
	fx->f.value = 3;
	pthread_mutex_unlock(&fx->f.mu);
	assert_int_equal(kvx_room_abort(fx->c, 100), 3);
	expect_events(fx->c, 8, 1000, 3, 100);
	assert_int_equal(kvx_event_read(fx->c, &ev, 1, 0), 0);
}

static void
test_room_abort_status_passthrough(void **state)
{
	struct fixture *fx = *state;
	static const int errs[] = {-ENOENT, -EALREADY, -EINVAL, -EPERM};
	size_t i;

	for (i = 0; i < sizeof(errs) / sizeof(errs[0]); i++) {
		pthread_mutex_lock(&fx->f.mu);
		fx->f.status_next = errs[i];
		fx->f.value = 9; /* ignored on error */
		pthread_mutex_unlock(&fx->f.mu);
		assert_int_equal(kvx_room_abort(fx->c, 77 + i), errs[i]);
	}
	/* the session goes on: the next abort gets its generation */
	assert_int_equal(kvx_room_abort(fx->c, 80), 9);
	pthread_mutex_lock(&fx->f.mu);
	assert_int_equal(fx->f.ntype[KVX_ENG_ROOM_ABORT], 5);
	assert_int_equal(fx->f.bad_in, 0);
	pthread_mutex_unlock(&fx->f.mu);
}

static void
test_room_abort_bad_reply(void **state)
{
	struct fixture *fx = *state;
	static const int64_t values[] = {0, -1, (int64_t)UINT32_MAX + 1, INT64_MAX};
	size_t i;

	/* a generation of 0, a negative one, or one events could not carry, is no answer */
	for (i = 0; i < sizeof(values) / sizeof(values[0]); i++) {
		pthread_mutex_lock(&fx->f.mu);
		fx->f.value = values[i];
		pthread_mutex_unlock(&fx->f.mu);
		assert_int_equal(kvx_room_abort(fx->c, 1), -EBADMSG);
	}
	pthread_mutex_lock(&fx->f.mu);
	fx->f.bad = BAD_STATUS;
	pthread_mutex_unlock(&fx->f.mu);
	assert_int_equal(kvx_room_abort(fx->c, 1), -EBADMSG);
	pthread_mutex_lock(&fx->f.mu);
	fx->f.value = 2;
	pthread_mutex_unlock(&fx->f.mu);
	assert_int_equal(kvx_room_abort(fx->c, 1), 2);

	/* kvxd gone */
	req_timeout_ms = 2000;
	pthread_mutex_lock(&fx->f.mu);
	fx->f.close_next = true;
	pthread_mutex_unlock(&fx->f.mu);
	assert_int_equal(kvx_room_abort(fx->c, 1), -ECONNRESET);
	assert_int_equal(kvx_room_abort(fx->c, 1), -ECONNRESET);
}

static void
test_server_close_is_econnreset(void **state)
{
	struct fixture *fx = *state;
	const uint32_t pages[] = {1};
	struct kvx_event ev[4];
	char out[16];

	req_timeout_ms = 2000; /* a missed end of stream fails here instead of hanging */
	pthread_mutex_lock(&fx->f.mu);
	fx->f.inject_before = 2; /* queued, then the fake closes instead of replying */
	fx->f.close_next = true;
	pthread_mutex_unlock(&fx->f.mu);
	assert_int_equal(kvx_admin(fx->c, "rooms", out, sizeof(out)), -ECONNRESET);
	assert_int_equal(kvx_room_close(fx->c, 1), -ECONNRESET);
	assert_int_equal(kvx_chunk_submit(fx->c, 1, 0, 1, pages, 1, 0, 1), -ECONNRESET);
	/* events that arrived before the close are still delivered, then the reset */
	assert_true(fd_readable(kvx_conn_fd(fx->c)));
	expect_events(fx->c, 4, 0, 2, 100);
	assert_int_equal(kvx_event_read(fx->c, ev, 4, 0), -ECONNRESET);
	assert_int_equal(kvx_event_read(fx->c, ev, 4, 1000), -ECONNRESET);
}

static void
test_server_close_wakes_event_read(void **state)
{
	struct fixture *fx = *state;
	const uint32_t pages[] = {1};
	struct kvx_event ev;
	int64_t t0;

	/* the fake closes the session on receiving this chunk; a blocked read wakes with it */
	pthread_mutex_lock(&fx->f.mu);
	fx->f.close_next = true;
	pthread_mutex_unlock(&fx->f.mu);
	assert_int_equal(kvx_chunk_submit(fx->c, 1, 0, 1, pages, 1, 0, 1), 0);
	t0 = now_ms();
	assert_int_equal(kvx_event_read(fx->c, &ev, 1, 5000), -ECONNRESET);
	assert_true(now_ms() - t0 < 4000);
	assert_int_equal(kvx_room_close(fx->c, 5), -ECONNRESET);
}

static void
test_malformed_reply_is_ebadmsg(void **state)
{
	struct fixture *fx = *state;
	static const int kinds[] = {BAD_HDR_LEN, BAD_TEXT_LEN, BAD_TYPE,
				    BAD_SHORT,	 BAD_FUTURE,   BAD_STATUS};
	const uint32_t pages[] = {1};
	const char *src[] = {"pf0"};
	int memfd = memfd_sized(4096);
	struct kvx_pool_geometry g = {.page_size = 4096, .npages = 1, .nbufs = 1};
	char out[32];
	size_t i;

	for (i = 0; i < sizeof(kinds) / sizeof(kinds[0]); i++) {
		pthread_mutex_lock(&fx->f.mu);
		fx->f.bad = kinds[i];
		pthread_mutex_unlock(&fx->f.mu);
		assert_int_equal(kvx_admin(fx->c, "counters", out, sizeof(out)), -EBADMSG);
		/* the session goes on */
		sync_fake(fx->c);
	}
	/* a pool id or generation of 0 is no answer */
	pthread_mutex_lock(&fx->f.mu);
	fx->f.bad = BAD_VALUE_ZERO;
	pthread_mutex_unlock(&fx->f.mu);
	assert_int_equal(kvx_pool_register(fx->c, memfd, &g), -EBADMSG);
	pthread_mutex_lock(&fx->f.mu);
	fx->f.bad = BAD_VALUE_ZERO;
	pthread_mutex_unlock(&fx->f.mu);
	assert_int_equal(kvx_room_open(fx->c, 1, 1, pages, 1, src, 1), -EBADMSG);
	sync_fake(fx->c);
	close(memfd);
}

static void
test_reply_timeout_then_late_reply_dropped(void **state)
{
	struct fixture *fx = *state;
	char out[32];
	int64_t t0;

	req_timeout_ms = 200;
	pthread_mutex_lock(&fx->f.mu);
	fx->f.hold_next = true;
	pthread_mutex_unlock(&fx->f.mu);
	t0 = now_ms();
	assert_int_equal(kvx_admin(fx->c, "peers", out, sizeof(out)), -ETIMEDOUT);
	assert_true(now_ms() - t0 >= 190);
	/* the fake now sends the late "stale" reply first, then the answer to this request */
	assert_int_equal(kvx_admin(fx->c, "rooms", out, sizeof(out)), 0);
	assert_string_equal(out, "ok:rooms");
}

static void
test_admin_text(void **state)
{
	struct fixture *fx = *state;
	char out[32], tiny[4];

	assert_int_equal(kvx_admin(fx->c, "fail", out, sizeof(out)), -ENOENT);
	assert_string_equal(out, "no such command\n"); /* the error's explanation */
	assert_int_equal(kvx_admin(fx->c, "fault qp_create:2", out, sizeof(out)), 0);
	assert_string_equal(out, "ok:fault qp_create:2");
	assert_int_equal(kvx_admin(fx->c, "peers", tiny, sizeof(tiny)), 0);
	assert_string_equal(tiny, "ok:"); /* truncated, NUL-terminated */
	assert_int_equal(kvx_admin(fx->c, "peers", NULL, 0), 0);
}

/* A reply longer than one message comes in pages (KVX_ENG_ADMIN_AT): all of it with
 * kvx_admin_text, truncated with kvx_admin; pages that do not add up are -EPROTO; a kvxd
 * without pages is asked the old way. */
static void
test_admin_pages(void **state)
{
	struct fixture *fx = *state;
	char out[64], *t = NULL;

	pthread_mutex_lock(&fx->f.mu);
	fx->f.ntype[KVX_ENG_ADMIN_AT] = 0;
	pthread_mutex_unlock(&fx->f.mu);
	assert_int_equal(kvx_admin_text(fx->c, "big", &t), 0);
	assert_non_null(t);
	assert_int_equal(strlen(t), 1000);
	for (int i = 0; i < 1000; i++)
		assert_int_equal(t[i], 'a' + i % 26);
	free(t);
	pthread_mutex_lock(&fx->f.mu);
	assert_int_equal(fx->f.ntype[KVX_ENG_ADMIN_AT], 10); /* ten pages of 100 */
	pthread_mutex_unlock(&fx->f.mu);
	assert_int_equal(kvx_admin(fx->c, "big", out, sizeof(out)), 0);
	assert_int_equal(strlen(out), 63);
	assert_int_equal(kvx_admin_text(fx->c, "fail", &t), -ENOENT);
	assert_string_equal(t, "no such command\n");
	free(t);
	assert_int_equal(kvx_admin_text(fx->c, "lie", &t), -EPROTO);
	assert_null(t);
	assert_int_equal(kvx_admin_text(fx->c, NULL, &t), -EINVAL);
	assert_int_equal(kvx_admin_text(fx->c, "x", NULL), -EINVAL);
	pthread_mutex_lock(&fx->f.mu);
	fx->f.no_pages = true;
	fx->f.ntype[KVX_ENG_ADMIN] = 0;
	pthread_mutex_unlock(&fx->f.mu);
	assert_int_equal(kvx_admin_text(fx->c, "rooms", &t), 0);
	assert_string_equal(t, "ok:rooms");
	free(t);
	pthread_mutex_lock(&fx->f.mu);
	assert_int_equal(fx->f.ntype[KVX_ENG_ADMIN], 1); /* asked the old way */
	pthread_mutex_unlock(&fx->f.mu);
}

/* ---- rings (KVX_ENG_RINGS) ---- */

/* A connection on rings of size data bytes (0: kvxd's), with core_rings core rings offered
 * (libkvx asks for them unless KVX_CORE_RINGS=0; with 0 offered it does not ask). */
static int
setup_rings_with(void **state, uint64_t size, int core_rings)
{
	struct fixture *fx;

	if (setup_fake(state) < 0)
		return -1;
	fx = *state;
	pthread_mutex_lock(&fx->f.mu);
	fx->f.rings_ok = true;
	fx->f.ring_size = size;
	fx->f.core_rings = core_rings;
	pthread_mutex_unlock(&fx->f.mu);
	if (setenv("KVX_CORE_RINGS", core_rings ? "1" : "0", 1))
		return -1;
	fx->c = kvx_connect(fx->f.path);
	unsetenv("KVX_CORE_RINGS");
	return fx->c && fx->c->rings ? 0 : -1;
}

static int
setup_rings_sized(void **state, uint64_t size)
{
	return setup_rings_with(state, size, 0);
}

static int
setup_rings(void **state)
{
	return setup_rings_sized(state, 0);
}

/* Rings of 4 KiB: a few dozen chunks fill the submission ring. */
static int
setup_rings_small(void **state)
{
	return setup_rings_sized(state, 4096);
}

static void
fake_pause_ring(struct fake *f, int64_t until)
{
	pthread_mutex_lock(&f->mu);
	f->ring_pause_until = until;
	pthread_mutex_unlock(&f->mu);
}

static bool
fd_readable_within(int fd, int timeout_ms)
{
	struct pollfd p = {.fd = fd, .events = POLLIN};

	return poll(&p, 1, timeout_ms) == 1 && (p.revents & POLLIN);
}

/* kvxd closes its end of the event ring's wake-up pair but not the session: that end reads EOF
 * for good.  A wait on it must not return at once forever (a spin that ignored every deadline,
 * even timeout 0): libkvx ends the connection (-ECONNRESET).  SIGALRM ends the test if not. */
static void
test_rings_wake_end_closed_ends_the_connection(void **state)
{
	struct fixture *fx = *state;
	struct kvx_event ev[4];
	char out[32];

	sync_fake(fx->c);
	pthread_mutex_lock(&fx->f.mu);
	shutdown(fx->f.evt_wake, SHUT_RDWR); /* as if closed: kvxd's end reads EOF */
	pthread_mutex_unlock(&fx->f.mu);
	alarm(10);
	assert_int_equal(kvx_event_read(fx->c, ev, 4, 0), -ECONNRESET);
	assert_int_equal(kvx_admin(fx->c, "peers", out, sizeof(out)), -ECONNRESET);
	alarm(0);
}

/* Every request goes through the submission ring and every reply and event comes back through
 * the event ring: after HELLO and RINGS the socket carries nothing.  kvx_conn_fd() is readable
 * whenever events wait, in the ring or in the queue, and they are read in order. */
static void
test_rings_carry_requests_replies_and_events(void **state)
{
	struct fixture *fx = *state;
	struct kvx_conn *c = fx->c;
	const uint32_t pages[] = {4, 5};
	const char *src[] = {"pf0"};
	int pfd = kvx_conn_fd(c);
	struct kvx_event ev;
	char out[32];

	pthread_mutex_lock(&fx->f.mu);
	assert_int_equal(fx->f.nsock, 2);
	assert_int_equal(fx->f.ntype_sock[KVX_ENG_HELLO], 1);
	assert_int_equal(fx->f.ntype_sock[KVX_ENG_RINGS], 1);
	assert_int_equal(fx->f.nring, 0);
	fx->f.value = 3;
	pthread_mutex_unlock(&fx->f.mu);
	assert_false(fd_readable(pfd));

	assert_int_equal(kvx_room_open(c, 10, 2, pages, 2, src, 1), 3);
	assert_int_equal(kvx_chunk_submit(c, 10, 0, 2, pages, 2, 0, 1), 0);
	assert_int_equal(kvx_room_abort(c, 10), 3);
	assert_int_equal(kvx_room_close(c, 10), 0);
	assert_int_equal(kvx_admin(c, "rooms", out, sizeof(out)), 0);
	assert_string_equal(out, "ok:rooms");
	pthread_mutex_lock(&fx->f.mu);
	assert_int_equal(fx->f.nring, 5);
	assert_int_equal(fx->f.ntype[KVX_ENG_ROOM_OPEN], 1);
	assert_int_equal(fx->f.ntype[KVX_ENG_CHUNK], 1);
	assert_int_equal(fx->f.ntype[KVX_ENG_ROOM_ABORT], 1);
	assert_int_equal(fx->f.ntype[KVX_ENG_ROOM_CLOSE], 1);
	assert_int_equal(fx->f.ntype[KVX_ENG_ADMIN_AT], 1);
	assert_int_equal(fx->f.nsock, 2);
	assert_int_equal(fx->f.bad_in, 0);
	/* events kvxd puts on its own (three, on the next chunk) */
	fx->f.chunk_events = 3; /* rooms 100, 101, 102 */
	pthread_mutex_unlock(&fx->f.mu);
	/* the wake-ups of the replies may be left over (the fd may wake for nothing): a read takes
	 * them */
	assert_int_equal(kvx_event_read(c, &ev, 1, 0), 0);
	assert_false(fd_readable(pfd));

	assert_int_equal(kvx_chunk_submit(c, 10, 1, 2, pages, 1, 2, 0), 0);
	assert_true(fd_readable_within(pfd, 5000));
	/* one at a time: what is left in the ring keeps the fd readable */
	expect_events(c, 1, 0, 1, 100);
	assert_true(fd_readable(pfd));
	expect_events(c, 1, 0, 1, 101);
	assert_true(fd_readable(pfd));
	expect_events(c, 8, 0, 1, 102);
	assert_false(fd_readable(pfd));
	assert_int_equal(kvx_event_read(c, &ev, 1, 0), 0);

	/* around a reply: the event before it is queued, those after it stay readable */
	pthread_mutex_lock(&fx->f.mu);
	fx->f.inject_before = 1; /* 103 */
	fx->f.inject_after = 2;	 /* 104, 105 */
	pthread_mutex_unlock(&fx->f.mu);
	assert_int_equal(kvx_room_close(c, 11), 0);
	assert_true(fd_readable_within(pfd, 5000));
	expect_events(c, 8, 1000, 3, 103);
	assert_false(fd_readable(pfd));
	assert_int_equal(kvx_event_read(c, &ev, 1, 30), 0); /* waits, then nothing */

	/* events right behind the reply libkvx was woken for: they keep the fd readable */
	pthread_mutex_lock(&fx->f.mu);
	fx->f.inject_after = 2; /* 106, 107 */
	fx->f.delay_ms = 50;	/* libkvx waits on the event ring's eventfd first */
	pthread_mutex_unlock(&fx->f.mu);
	assert_int_equal(kvx_room_close(c, 12), 0);
	assert_true(fd_readable_within(pfd, 1000));
	expect_events(c, 8, 0, 2, 106);
	assert_false(fd_readable(pfd));

	/* a blocked read wakes for an event */
	pthread_mutex_lock(&fx->f.mu);
	fx->f.chunk_events = 1; /* 108 */
	pthread_mutex_unlock(&fx->f.mu);
	assert_int_equal(kvx_chunk_submit(c, 10, 2, 2, pages, 1, 3, 1), 0);
	expect_events(c, 8, 5000, 1, 108);

	pthread_mutex_lock(&fx->f.mu);
	assert_int_equal(fx->f.nring, 9);
	assert_int_equal(fx->f.nsock, 2);
	assert_int_equal(fx->f.bad_in, 0);
	pthread_mutex_unlock(&fx->f.mu);
}

static void
spin_ended(int sig)
{
	static const char msg[] = "test_libkvx: a read spun for 10 s\n";

	(void)sig;
	(void)!write(2, msg, sizeof(msg) - 1);
	_exit(1);
}

static int
setup_core_rings(void **state)
{
	return setup_rings_with(state, 0, 2);
}

/* Core rings (KVX_ENG_RINGS_CORE): libkvx asks for them and reads events out of every one of
 * them as out of the event ring; kvx_conn_fd() wakes for each (they share its eventfd). */
static void
test_core_rings_carry_events(void **state)
{
	struct fixture *fx = *state;
	struct kvx_conn *c = fx->c;
	const uint32_t pages[] = {4, 5};
	int pfd = kvx_conn_fd(c);
	struct kvx_event ev;

	/* a libkvx that never takes what a core ring holds would spin here: end it instead,
	 * as a failure */
	signal(SIGALRM, spin_ended);
	alarm(10);
	assert_int_equal(c->ncevt, 2);
	assert_int_equal(kvx_event_read(c, &ev, 1, 0), 0);
	pthread_mutex_lock(&fx->f.mu);
	fx->f.chunk_events = 2; /* rooms 100, 101 into core ring 1 */
	fx->f.ev_core = 1;
	pthread_mutex_unlock(&fx->f.mu);
	assert_int_equal(kvx_chunk_submit(c, 10, 0, 2, pages, 2, 0, 1), 0);
	assert_true(fd_readable_within(pfd, 5000));
	expect_events(c, 1, 0, 1, 100);
	assert_true(fd_readable(pfd)); /* what is left in a core ring keeps the fd readable */
	expect_events(c, 8, 0, 1, 101);
	assert_false(fd_readable(pfd));
	/* a blocked read wakes for an event in core ring 0 */
	pthread_mutex_lock(&fx->f.mu);
	fx->f.chunk_events = 1; /* 102 */
	fx->f.ev_core = 0;
	pthread_mutex_unlock(&fx->f.mu);
	assert_int_equal(kvx_chunk_submit(c, 10, 1, 2, pages, 2, 0, 1), 0);
	expect_events(c, 8, 5000, 1, 102);
	alarm(0);
}

/* libkvx reads its core rings before the event ring: a room whose event did not fit its core
 * ring has its later events in the event ring, published after what waits in the core ring.
 * The fake puts room 100's event into core ring 1, then 101's into the event ring, in one
 * batch: 100 comes first (mutant event_ring_first: 101 does). */
static void
test_core_rings_read_before_the_event_ring(void **state)
{
	struct fixture *fx = *state;
	struct kvx_conn *c = fx->c;
	const uint32_t pages[] = {4, 5};

	pthread_mutex_lock(&fx->f.mu);
	fx->f.chunk_events = 2; /* 100 into core ring 1, 101 into the event ring */
	fx->f.ev_core = 1;
	fx->f.ev_split = true;
	pthread_mutex_unlock(&fx->f.mu);
	assert_int_equal(kvx_chunk_submit(c, 10, 0, 2, pages, 2, 0, 1), 0);
	expect_events(c, 8, 5000, 2, 100);
}

/* The same order when the fake publishes in the middle of libkvx's read: right after libkvx
 * found core ring 1 empty, the fake puts room 100's event into it and 101's into the event ring.
 * libkvx looked at the event ring before the core rings, so it leaves 101 for its next look and
 * takes 100 first (mutant event_ring_looked_last: looking at the event ring after the core
 * rings takes 101 first). */
static void
test_core_ring_order_holds_while_reading(void **state)
{
	struct fixture *fx = *state;
	struct kvx_conn *c = fx->c;
	const uint32_t pages[] = {4, 5};

	gate_fake = &fx->f;
	pthread_mutex_lock(&fx->f.mu);
	fx->f.chunk_events = 2; /* 100 into core ring 1, 101 into the event ring */
	fx->f.ev_core = 1;
	fx->f.ev_split = true;
	fx->f.gate_ring = &c->cevt[1];
	pthread_mutex_unlock(&fx->f.mu);
	assert_int_equal(kvx_chunk_submit(c, 10, 0, 2, pages, 2, 0, 1), 0);
	expect_events(c, 8, 5000, 2, 100);
	pthread_mutex_lock(&fx->f.mu);
	assert_true(fx->f.gate_open && fx->f.gate_done); /* the publishing was inside the read */
	pthread_mutex_unlock(&fx->f.mu);
}

/* A core ring carries EVENTs only: a REPLY in one is what no kvxd writes, and the session is
 * broken (-EPROTO, sticky), not confused. */
static void
test_core_ring_reply_is_a_protocol_error(void **state)
{
	struct fixture *fx = *state;
	struct kvx_conn *c = fx->c;

	pthread_mutex_lock(&fx->f.mu);
	fx->f.core_reply = true;
	pthread_mutex_unlock(&fx->f.mu);
	assert_int_equal(kvx_room_close(c, 11), -EPROTO);
	assert_int_equal(kvx_room_close(c, 12), -EPROTO);
}

/* With nothing in the environment libkvx asks for core rings (the full request) and maps the
 * ones kvxd offers (mutant core_rings_default_off: only with KVX_CORE_RINGS=1, as before). */
static void
test_core_rings_on_by_default(void **state)
{
	struct fixture *fx = *state;

	pthread_mutex_lock(&fx->f.mu);
	fx->f.rings_ok = true;
	fx->f.core_rings = 2;
	pthread_mutex_unlock(&fx->f.mu);
	unsetenv("KVX_CORE_RINGS");
	fx->c = kvx_connect(fx->f.path); /* nothing in the environment */
	assert_non_null(fx->c);
	assert_true(fx->c->rings);
	assert_int_equal(fx->c->ncevt, 2);
	pthread_mutex_lock(&fx->f.mu);
	assert_int_equal(fx->f.rings_len, sizeof(struct kvx_eng_rings));
	pthread_mutex_unlock(&fx->f.mu);
	assert_int_equal(kvx_room_close(fx->c, 11), 0);
}

static void wait_chunk_flushes(struct fake *f, int n);

/* Connect with KVX_CORE_RINGS=0 (and KVX_RINGS_REARM=0 when rearm_off) to a fake that offers two
 * core rings: the session is on rings without core rings; *len and *flags are what the RINGS
 * request carried. */
static void
connect_without_core_rings(struct fixture *fx, bool rearm_off, size_t *len, uint32_t *flags)
{
	pthread_mutex_lock(&fx->f.mu);
	fx->f.rings_ok = true;
	fx->f.core_rings = 2;
	pthread_mutex_unlock(&fx->f.mu);
	assert_int_equal(setenv("KVX_CORE_RINGS", "0", 1), 0);
	if (rearm_off)
		assert_int_equal(setenv("KVX_RINGS_REARM", "0", 1), 0);
	fx->c = kvx_connect(fx->f.path);
	unsetenv("KVX_CORE_RINGS");
	unsetenv("KVX_RINGS_REARM");
	assert_non_null(fx->c);
	assert_true(fx->c->rings);
	assert_int_equal(fx->c->ncevt, 0);
	assert_int_equal(fx->c->rearm, !rearm_off);
	pthread_mutex_lock(&fx->f.mu);
	*len = fx->f.rings_len;
	*flags = fx->f.rings_flags;
	pthread_mutex_unlock(&fx->f.mu);
}

/* KVX_CORE_RINGS=0: libkvx asks for the rings without core rings (re-armed wake-ups only),
 * whatever kvxd would offer (mutant core_rings_env_ignored). */
static void
test_core_rings_off_by_environment(void **state)
{
	struct fixture *fx = *state;
	uint32_t flags;
	size_t len;

	connect_without_core_rings(fx, false, &len, &flags);
	assert_int_equal(len, sizeof(struct kvx_eng_rings));
	assert_int_equal(flags, KVX_ENG_RINGS_REARM);
	assert_int_equal(kvx_room_close(fx->c, 11), 0);
}

/* KVX_CORE_RINGS=0 and KVX_RINGS_REARM=0: the rings asked for with the header alone (the request
 * the oldest kvxd takes); events still wake the engine, one wake-up per batch. */
static void
test_rings_rearm_off_by_environment(void **state)
{
	struct fixture *fx = *state;
	const uint32_t pages[] = {4};
	uint32_t flags;
	size_t len;

	connect_without_core_rings(fx, true, &len, &flags);
	assert_int_equal(len, sizeof(struct kvx_eng_hdr));
	assert_int_equal(flags, 0);
	pthread_mutex_lock(&fx->f.mu);
	fx->f.chunk_events = 1;
	pthread_mutex_unlock(&fx->f.mu);
	assert_int_equal(kvx_chunk_submit(fx->c, 10, 0, 2, pages, 1, 0, 0), 0);
	wait_chunk_flushes(&fx->f, 1);
	assert_true(fd_readable_within(kvx_conn_fd(fx->c), 5000));
	/* unread, a second batch wakes it again: one byte per batch */
	pthread_mutex_lock(&fx->f.mu);
	fx->f.chunk_events = 1;
	pthread_mutex_unlock(&fx->f.mu);
	assert_int_equal(kvx_chunk_submit(fx->c, 10, 1, 2, pages, 1, 1, 1), 0);
	wait_chunk_flushes(&fx->f, 2);
	assert_int_equal(wake_bytes(fx->c->evt_wake), 2);
}

/* A kvxd that does not know KVX_ENG_RINGS_REARM refuses the request (-EINVAL, unknown flags, as
 * control/engine.c did before it): libkvx asks once more without it, and gets its rings, woken
 * once per batch (mutant rings_rearm_no_retry: it stayed on the socket). */
static void
test_rings_rearm_refused_by_an_older_kvxd(void **state)
{
	struct fixture *fx = *state;
	const uint32_t pages[] = {4};
	int pfd, refused, asked;
	uint32_t flags;

	pthread_mutex_lock(&fx->f.mu);
	fx->f.rings_ok = true;
	fx->f.rearm_unknown = true;
	pthread_mutex_unlock(&fx->f.mu);
	fx->c = kvx_connect(fx->f.path);
	assert_non_null(fx->c);
	assert_true(fx->c->rings);
	assert_false(fx->c->rearm);
	pfd = kvx_conn_fd(fx->c);
	pthread_mutex_lock(&fx->f.mu);
	refused = fx->f.rings_refused;
	flags = fx->f.rings_flags;
	asked = fx->f.ntype_sock[KVX_ENG_RINGS];
	fx->f.chunk_events = 1;
	pthread_mutex_unlock(&fx->f.mu);
	assert_int_equal(refused, 1);
	assert_int_equal(flags, KVX_ENG_RINGS_CORE);
	assert_int_equal(asked, 2);
	assert_int_equal(kvx_chunk_submit(fx->c, 10, 0, 2, pages, 1, 0, 0), 0);
	assert_true(fd_readable_within(pfd, 5000));
	expect_events(fx->c, 8, 0, 1, 100);
	pthread_mutex_lock(&fx->f.mu);
	fx->f.chunk_events = 1;
	pthread_mutex_unlock(&fx->f.mu);
	assert_int_equal(kvx_chunk_submit(fx->c, 10, 1, 2, pages, 1, 1, 1), 0);
	assert_true(fd_readable_within(pfd, 5000));
	expect_events(fx->c, 8, 0, 1, 101);
}

/* kvx_connect_flags(KVX_CONNECT_WAKE_ENDS) asks kvxd for wake-ups for ends only, with the other
 * flags (mutant wake_ends_not_asked); unknown flags are refused.  (kvx_connect asks for
 * KVX_ENG_RINGS_CORE | KVX_ENG_RINGS_REARM alone: test_core_rings_on_by_default.) */
static void
test_connect_flags_wake_ends(void **state)
{
	struct fixture *fx = *state;
	uint32_t flags;

	pthread_mutex_lock(&fx->f.mu);
	fx->f.rings_ok = true;
	pthread_mutex_unlock(&fx->f.mu);
	errno = 0;
	assert_null(kvx_connect_flags(fx->f.path, 0, 2));
	assert_int_equal(errno, EINVAL);
	fx->c = kvx_connect_flags(fx->f.path, 0, KVX_CONNECT_WAKE_ENDS);
	assert_non_null(fx->c);
	assert_true(fx->c->rings);
	pthread_mutex_lock(&fx->f.mu);
	flags = fx->f.rings_flags;
	pthread_mutex_unlock(&fx->f.mu);
	assert_int_equal(flags, KVX_ENG_RINGS_CORE | KVX_ENG_RINGS_REARM | KVX_ENG_RINGS_WAKE_ENDS);
	assert_int_equal(kvx_room_close(fx->c, 11), 0);
}

/* Connect with KVX_CONNECT_WAKE_ENDS to a fake kvxd that refuses KVX_ENG_RINGS_WAKE_ENDS, and
 * KVX_ENG_RINGS_REARM too when rearm_unknown, as older kvxd do (-EINVAL, unknown flags): the
 * rings come after `asked` requests, `refused` of them refused, the last with `flags`. */
static void
connect_wake_ends_to_older(struct fixture *fx, bool rearm_unknown, int refused, int asked,
			   uint32_t flags)
{
	int got_refused, got_asked;
	uint32_t got_flags;

	pthread_mutex_lock(&fx->f.mu);
	fx->f.rings_ok = true;
	fx->f.wake_ends_unknown = true;
	fx->f.rearm_unknown = rearm_unknown;
	pthread_mutex_unlock(&fx->f.mu);
	fx->c = kvx_connect_flags(fx->f.path, 0, KVX_CONNECT_WAKE_ENDS);
	assert_non_null(fx->c);
	assert_true(fx->c->rings);
	assert_int_equal(fx->c->rearm, !rearm_unknown);
	pthread_mutex_lock(&fx->f.mu);
	got_refused = fx->f.rings_refused;
	got_flags = fx->f.rings_flags;
	got_asked = fx->f.ntype_sock[KVX_ENG_RINGS];
	pthread_mutex_unlock(&fx->f.mu);
	assert_int_equal(got_refused, refused);
	assert_int_equal(got_asked, asked);
	assert_int_equal(got_flags, flags);
	assert_int_equal(kvx_room_close(fx->c, 11), 0);
}

/* A kvxd that does not know KVX_ENG_RINGS_WAKE_ENDS refuses it: libkvx asks once more without it,
 * keeping the others, and has its rings (mutant wake_ends_retry_drops_rearm: it dropped
 * KVX_ENG_RINGS_REARM as well). */
static void
test_wake_ends_refused_by_an_older_kvxd(void **state)
{
	connect_wake_ends_to_older(*state, false, 1, 2, KVX_ENG_RINGS_CORE | KVX_ENG_RINGS_REARM);
}

/* One that knows neither KVX_ENG_RINGS_WAKE_ENDS nor KVX_ENG_RINGS_REARM is asked three times,
 * the third with core rings alone. */
static void
test_wake_ends_and_rearm_refused_by_an_older_kvxd(void **state)
{
	connect_wake_ends_to_older(*state, true, 2, 3, KVX_ENG_RINGS_CORE);
}

/* Wait until the fake has put and notified the events of n CHUNKs. */
static void
wait_chunk_flushes(struct fake *f, int n)
{
	for (int i = 0; i < 5000; i++) {
		bool done;

		pthread_mutex_lock(&f->mu);
		done = f->chunk_flushes >= n;
		pthread_mutex_unlock(&f->mu);
		if (done)
			return;
		usleep(1000);
	}
	fail_msg("the fake did not flush %d chunks' events", n);
}

/* KVX_ENG_RINGS_REARM (asked for by default): kvxd wakes the engine once for all the batches it
 * puts until the engine drained its wake end (one byte for three batches here, where it was one
 * per batch: mutant shring_oneshot_ignored), and the engine says it is parked again each time it
 * drains it, so the batch after a read wakes it again (mutant rings_rearm_forgotten: the fd
 * stayed unreadable with an event in the ring). */
static void
test_rings_rearm_one_wake_until_drained(void **state)
{
	struct fixture *fx = *state;
	struct kvx_conn *c = fx->c;
	const uint32_t pages[] = {4};
	int pfd = kvx_conn_fd(c);
	struct kvx_event ev;

	uint32_t flags;

	assert_true(c->rearm);
	pthread_mutex_lock(&fx->f.mu);
	flags = fx->f.rings_flags;
	pthread_mutex_unlock(&fx->f.mu);
	assert_int_equal(flags, KVX_ENG_RINGS_REARM); /* (not under the lock: a failure unwinds) */
	sync_fake(c);
	assert_int_equal(kvx_event_read(c, &ev, 1, 0), 0); /* takes the replies' wake-ups */
	assert_int_equal(wake_bytes(c->evt_wake), 0);
	for (int i = 0; i < 3; i++) {
		pthread_mutex_lock(&fx->f.mu);
		fx->f.chunk_events = 1; /* rooms 100, 101, 102 */
		pthread_mutex_unlock(&fx->f.mu);
		assert_int_equal(
			kvx_chunk_submit(c, 10, (uint32_t)i, 2, pages, 1, (uint32_t)i, i == 2), 0);
		wait_chunk_flushes(&fx->f, i + 1);
	}
	assert_int_equal(wake_bytes(c->evt_wake), 1);
	assert_true(fd_readable(pfd));
	expect_events(c, 8, 0, 3, 100);
	assert_false(fd_readable(pfd));
	/* drained and parked again: the next batch wakes us */
	for (int round = 0; round < 3; round++) {
		pthread_mutex_lock(&fx->f.mu);
		fx->f.chunk_events = 1; /* rooms 103, 104, 105 */
		pthread_mutex_unlock(&fx->f.mu);
		assert_int_equal(kvx_chunk_submit(c, 11 + (uint64_t)round, 0, 2, pages, 1, 0, 1),
				 0);
		assert_true(fd_readable_within(pfd, 5000));
		assert_int_equal(wake_bytes(c->evt_wake), 1);
		expect_events(c, 8, 0, 1, 103 + (uint64_t)round);
		assert_false(fd_readable(pfd));
	}
}

/* KVX_RINGS=0: libkvx does not ask for rings, the session stays on the socket. */
static void
test_rings_off_by_environment(void **state)
{
	struct fixture *fx = *state;
	char out[32];

	pthread_mutex_lock(&fx->f.mu);
	fx->f.rings_ok = true;
	pthread_mutex_unlock(&fx->f.mu);
	assert_int_equal(setenv("KVX_RINGS", "0", 1), 0);
	fx->c = kvx_connect(fx->f.path);
	unsetenv("KVX_RINGS");
	assert_non_null(fx->c);
	assert_false(fx->c->rings);
	assert_int_equal(kvx_admin(fx->c, "rooms", out, sizeof(out)), 0);
	pthread_mutex_lock(&fx->f.mu);
	assert_int_equal(fx->f.ntype[KVX_ENG_RINGS], 0);
	assert_int_equal(fx->f.nsock, 2); /* HELLO, ADMIN */
	assert_int_equal(fx->f.nring, 0);
	pthread_mutex_unlock(&fx->f.mu);
}

/* A full submission ring: kvx_chunk_submit waits until kvxd takes some; nothing is lost or
 * reordered. */
static void
test_rings_full_submission_ring_waits(void **state)
{
	struct fixture *fx = *state;
	const uint32_t pages[] = {1};
	const int total = 400; /* a 4 KiB ring holds about 70 */
	int64_t t0, worst = 0;

	fake_pause_ring(&fx->f, now_ms() + 300);
	for (int i = 0; i < total; i++) {
		t0 = now_ms();
		assert_int_equal(kvx_chunk_submit(fx->c, 7, (uint32_t)i, 1, pages, 1, 0, 0), 0);
		if (now_ms() - t0 > worst)
			worst = now_ms() - t0;
	}
	assert_true(fx->c->sub.full > 0);
	assert_true(worst >= 100); /* one submit waited for the fake to read again */
	sync_fake(fx->c);
	pthread_mutex_lock(&fx->f.mu);
	assert_int_equal(fx->f.ntype[KVX_ENG_CHUNK], total);
	assert_int_equal(fx->f.chunk_disorder, 0);
	assert_int_equal(fx->f.bad_in, 0);
	assert_int_equal(fx->f.nsock, 2);
	pthread_mutex_unlock(&fx->f.mu);
}

/* kvxd that finds no room in the event ring asks for a wake-up (kvx_shring_starve) instead of
 * looking again every millisecond: the first event libkvx takes sends it one (one byte on
 * libkvx's end of the event ring's wake pair, read on kvxd's), and the rest arrive whole and
 * in order. */
static void
test_rings_taking_from_a_full_event_ring_wakes_kvxd(void **state)
{
	struct fixture *fx = *state;
	const uint32_t pages[] = {1};
	int kvxd_end, filled = 0;

	pthread_mutex_lock(&fx->f.mu);
	fx->f.chunk_fills = true;
	pthread_mutex_unlock(&fx->f.mu);
	assert_int_equal(kvx_chunk_submit(fx->c, 7, 0, 1, pages, 1, 0, 1), 0);
	for (int i = 0; i < 500 && !filled; i++) {
		usleep(10000);
		pthread_mutex_lock(&fx->f.mu);
		filled = fx->f.filled;
		pthread_mutex_unlock(&fx->f.mu);
	}
	assert_true(filled > 8); /* a 4 KiB ring */
	kvxd_end = fx->f.evt.wake_fd;
	assert_false(fd_readable(kvxd_end)); /* nothing taken yet */
	expect_events(fx->c, 1, 5000, 1, 100);
	assert_true(fd_readable_within(kvxd_end, 1000));
	assert_int_equal(kvx_shring_wake_drain(kvxd_end), 0);
	/* the fake closes that end when the session ends: ordered after this read through its
	 * lock (ThreadSanitizer sees the socket's end of stream as no order) */
	pthread_mutex_lock(&fx->f.mu);
	pthread_mutex_unlock(&fx->f.mu);
	/* one wake-up per request for room: the next events take none */
	expect_events(fx->c, 1, 0, 1, 101);
	assert_false(fd_readable(kvxd_end));
	for (int k = 2; k < filled; k += 8)
		expect_events(fx->c, 8, 0, filled - k < 8 ? filled - k : 8, 100 + (uint64_t)k);
}

/* A submission ring that stays full: the submit returns -ETIMEDOUT after the request timeout,
 * the request is not half sent, and the session goes on once kvxd reads again. */
static void
test_rings_full_submission_ring_times_out(void **state)
{
	struct fixture *fx = *state;
	const uint32_t pages[] = {1};
	int64_t t0 = 0;
	int k, r = 0;

	req_timeout_ms = 200;
	fake_pause_ring(&fx->f, INT64_MAX);
	for (k = 0; k < 1000; k++) {
		t0 = now_ms();
		r = kvx_chunk_submit(fx->c, 7, (uint32_t)k, 1, pages, 1, 0, 0);
		if (r)
			break;
	}
	assert_int_equal(r, -ETIMEDOUT);
	assert_true(now_ms() - t0 >= 190);
	assert_true(k > 10);
	fake_pause_ring(&fx->f, 0);
	assert_int_equal(kvx_chunk_submit(fx->c, 7, (uint32_t)k, 1, pages, 1, 0, 1), 0);
	sync_fake(fx->c);
	pthread_mutex_lock(&fx->f.mu);
	assert_int_equal(fx->f.ntype[KVX_ENG_CHUNK], k + 1);
	assert_int_equal(fx->f.chunk_disorder, 0);
	assert_int_equal(fx->f.bad_in, 0);
	pthread_mutex_unlock(&fx->f.mu);
}

/* After an -EPROTO every call fails with it and nothing more reaches kvxd. */
static void
expect_broken(struct fixture *fx)
{
	const uint32_t pages[] = {1};
	const char *src[] = {"pf0"};
	struct kvx_event ev[4];
	char out[32];
	int n = fake_count(&fx->f);

	assert_int_equal(kvx_admin(fx->c, "rooms", out, sizeof(out)), -EPROTO);
	assert_int_equal(kvx_room_open(fx->c, 1, 1, pages, 1, src, 1), -EPROTO);
	assert_int_equal(kvx_chunk_submit(fx->c, 1, 0, 1, pages, 1, 0, 1), -EPROTO);
	assert_int_equal(kvx_room_abort(fx->c, 1), -EPROTO);
	assert_int_equal(kvx_room_close(fx->c, 1), -EPROTO);
	assert_int_equal(kvx_pool_unregister(fx->c, 1), -EPROTO);
	assert_int_equal(kvx_event_read(fx->c, ev, 4, 0), -EPROTO);
	assert_int_equal(kvx_event_read(fx->c, ev, 4, 50), -EPROTO);
	usleep(20000);
	assert_int_equal(fake_count(&fx->f), n);
}

/* kvxd publishes a tail far beyond its ring while libkvx waits for a reply. */
static void
test_rings_corrupt_event_ring_tail(void **state)
{
	struct fixture *fx = *state;
	char out[32];

	req_timeout_ms = 2000; /* a missed corruption fails here instead of hanging */
	pthread_mutex_lock(&fx->f.mu);
	fx->f.corrupt = CORRUPT_TAIL_AHEAD;
	pthread_mutex_unlock(&fx->f.mu);
	assert_int_equal(kvx_admin(fx->c, "rooms", out, sizeof(out)), -EPROTO);
	expect_broken(fx);
}

/* kvxd puts a record longer than what it published while libkvx waits for events. */
static void
test_rings_corrupt_event_ring_record(void **state)
{
	struct fixture *fx = *state;
	const uint32_t pages[] = {1};
	struct kvx_event ev[4];
	int64_t t0;

	pthread_mutex_lock(&fx->f.mu);
	fx->f.corrupt = CORRUPT_LONG_REC;
	pthread_mutex_unlock(&fx->f.mu);
	assert_int_equal(kvx_chunk_submit(fx->c, 1, 0, 1, pages, 1, 0, 1), 0);
	t0 = now_ms();
	assert_int_equal(kvx_event_read(fx->c, ev, 4, 5000), -EPROTO);
	assert_true(now_ms() - t0 < 4000);
	expect_broken(fx);
}

/* kvxd goes away on rings: the events it put first are delivered, then -ECONNRESET. */
static void
test_rings_server_close_is_econnreset(void **state)
{
	struct fixture *fx = *state;
	struct kvx_event ev[4];
	char out[16];

	req_timeout_ms = 2000;
	pthread_mutex_lock(&fx->f.mu);
	fx->f.inject_before = 2; /* put into the ring, then the fake closes instead of replying */
	fx->f.close_next = true;
	fx->f.delay_ms = 50; /* libkvx waits on the ring and the socket first */
	pthread_mutex_unlock(&fx->f.mu);
	assert_int_equal(kvx_admin(fx->c, "rooms", out, sizeof(out)), -ECONNRESET);
	assert_int_equal(kvx_room_close(fx->c, 1), -ECONNRESET);
	expect_events(fx->c, 4, 0, 2, 100);
	assert_int_equal(kvx_event_read(fx->c, ev, 4, 0), -ECONNRESET);
	assert_int_equal(kvx_event_read(fx->c, ev, 4, 100), -ECONNRESET);
}

static int
count_fds(void)
{
	DIR *d = opendir("/proc/self/fd");
	int n = 0;

	assert_non_null(d);
	while (readdir(d))
		n++;
	closedir(d);
	return n;
}

/* A broken RINGS reply: libkvx closes every fd it got and fails the connect (kvxd has moved to
 * rings the session cannot use), or stays on the socket when kvxd refused. */
static void
test_rings_bad_reply_leaks_no_fd(void **state)
{
	static const int bads[] = {RINGS_TWO_FDS,     RINGS_FOUR_FDS, RINGS_NO_FDS,
				   RINGS_SMALL_MEMFD, RINGS_ODD_SIZE, RINGS_REFUSED_FDS,
				   RINGS_EVENTFDS,    RINGS_UNSEALED};
	static struct fake f;

	(void)state;
	for (size_t i = 0; i < sizeof(bads) / sizeof(bads[0]); i++) {
		int before = count_fds();
		struct kvx_conn *c;

		assert_int_equal(fake_start(&f), 0);
		pthread_mutex_lock(&f.mu);
		f.rings_ok = true;
		f.rings_bad = bads[i];
		pthread_mutex_unlock(&f.mu);
		errno = 0;
		c = kvx_connect(f.path);
		if (bads[i] == RINGS_REFUSED_FDS) {
			assert_non_null(c);
			assert_false(c->rings);
			sync_fake(c); /* on the socket */
			kvx_disconnect(c);
		} else {
			assert_null(c);
			assert_int_equal(errno, EBADMSG);
		}
		fake_stop(&f);
		assert_int_equal(count_fds(), before);
	}
}

/* Rooms for the batch tests: room ids[i], one page, from source "pf0". */
struct batch_rooms {
	uint32_t page[200];
	struct kvx_region reg[200];
	struct kvx_source src;
	struct kvx_room_req q[200];
};

static void
batch_rooms_init(struct batch_rooms *b, const uint64_t *ids, uint32_t n)
{
	memset(b, 0, sizeof(*b));
	b->src.node = "pf0";
	for (uint32_t i = 0; i < n; i++) {
		b->page[i] = i;
		b->reg[i] = (struct kvx_region){.pool_id = 2, .npages = 1, .pages = &b->page[i]};
		b->q[i] = (struct kvx_room_req){.room = ids[i],
						.regions = &b->reg[i],
						.nregions = 1,
						.sources = &b->src,
						.nsources = 1};
	}
}

/* A batch of opens, then of closes: every request of the batch goes out before any reply is
 * waited for (the fake holds its answer to the first request until the second one arrives, so
 * one request at a time would wait out the request timeout), each room gets its own result,
 * and the events that come between the replies are queued in order. */
static void
test_room_openv_closev_pipelined(void **state)
{
	struct fixture *fx = *state;
	const uint64_t ids[3] = {5, 17, 9};
	struct batch_rooms *b = malloc(sizeof(*b));
	int64_t gen[3], t0;
	int st[3], before;

	assert_non_null(b);
	batch_rooms_init(b, ids, 3);
	req_timeout_ms = 3000;
	pthread_mutex_lock(&fx->f.mu);
	fx->f.by_room = true;
	fx->f.hold_next = true;
	fx->f.inject_before = 2; /* rooms 100, 101: before the (held) first reply */
	pthread_mutex_unlock(&fx->f.mu);
	before = fake_count(&fx->f);
	t0 = now_ms();
	assert_int_equal(kvx_room_openv(fx->c, b->q, 3, gen), 3);
	assert_true(now_ms() - t0 < 2000);
	assert_int_equal(gen[0], 5);
	assert_int_equal(gen[1], -EDQUOT);
	assert_int_equal(gen[2], 9);
	pthread_mutex_lock(&fx->f.mu);
	assert_int_equal(fx->f.nmsgs, before + 3);
	assert_int_equal(fx->f.ntype[KVX_ENG_ROOM_OPEN], 3);
	assert_int_equal(fx->f.bad_in, 0);
	fx->f.hold_next = true;
	pthread_mutex_unlock(&fx->f.mu);
	expect_events(fx->c, 8, 0, 2, 100);

	t0 = now_ms();
	assert_int_equal(kvx_room_closev(fx->c, ids, 3, st), 3);
	assert_true(now_ms() - t0 < 2000);
	assert_int_equal(st[0], 0);
	assert_int_equal(st[1], -EBUSY);
	assert_int_equal(st[2], 0);
	/* the session goes on: a single request after the batch */
	assert_int_equal(kvx_room_close(fx->c, 27), -EBUSY);
	assert_int_equal(kvx_room_close(fx->c, 28), 0);
	free(b);
}

/* More rooms than one window (64 in flight): every room is answered, in the caller's order. */
static void
test_room_batches_beyond_a_window(void **state)
{
	struct fixture *fx = *state;
	struct batch_rooms *b = malloc(sizeof(*b));
	uint64_t ids[150];
	int64_t gen[150];
	int st[150];

	assert_non_null(b);
	for (int i = 0; i < 150; i++)
		ids[i] = 1000 + (uint64_t)i;
	batch_rooms_init(b, ids, 150);
	pthread_mutex_lock(&fx->f.mu);
	fx->f.by_room = true;
	pthread_mutex_unlock(&fx->f.mu);
	fake_pause_ring(&fx->f, now_ms() + 200); /* with rings: the ring fills, replies wait */
	assert_int_equal(kvx_room_openv(fx->c, b->q, 150, gen), 150);
	assert_int_equal(kvx_room_closev(fx->c, ids, 150, st), 150);
	for (int i = 0; i < 150; i++) {
		assert_int_equal(gen[i], ids[i] % 10 == 7 ? -EDQUOT : (int64_t)ids[i]);
		assert_int_equal(st[i], ids[i] % 10 == 7 ? -EBUSY : 0);
	}
	pthread_mutex_lock(&fx->f.mu);
	assert_int_equal(fx->f.ntype[KVX_ENG_ROOM_OPEN], 150);
	assert_int_equal(fx->f.ntype[KVX_ENG_ROOM_CLOSE], 150);
	assert_int_equal(fx->f.bad_in, 0);
	pthread_mutex_unlock(&fx->f.mu);
	free(b);
}

/* A batch libkvx refuses sends nothing; a batch kvxd does not answer in time returns
 * -ETIMEDOUT for the rooms without an answer, and the late answers are dropped; a batch
 * whose session breaks returns -ECONNRESET for every room left. */
static void
test_room_batch_errors(void **state)
{
	struct fixture *fx = *state;
	const uint64_t ids[3] = {5, 17, 9}, bad_ids[2] = {1, KVX_ROOM_ID_MAX + 1};
	struct batch_rooms *b = malloc(sizeof(*b));
	int64_t gen[3];
	int st[3], before;

	assert_non_null(b);
	batch_rooms_init(b, ids, 3);
	before = fake_count(&fx->f);
	b->q[1].nsources = 0;
	assert_int_equal(kvx_room_openv(fx->c, b->q, 3, gen), -EINVAL);
	b->q[1].nsources = 1;
	assert_int_equal(kvx_room_openv(fx->c, b->q, 0, gen), -EINVAL);
	assert_int_equal(kvx_room_openv(fx->c, b->q, 1025, gen), -EINVAL);
	assert_int_equal(kvx_room_openv(fx->c, b->q, 3, NULL), -EINVAL);
	assert_int_equal(kvx_room_closev(fx->c, bad_ids, 2, st), -EINVAL);
	assert_int_equal(kvx_room_closev(NULL, ids, 3, st), -EINVAL);
	sync_fake(fx->c);
	assert_int_equal(fake_count(&fx->f), before + 1); /* the sync alone */

	req_timeout_ms = 200;
	pthread_mutex_lock(&fx->f.mu);
	fx->f.by_room = true;
	fx->f.delay_ms = 400; /* before it answers the first close */
	pthread_mutex_unlock(&fx->f.mu);
	assert_int_equal(kvx_room_closev(fx->c, ids, 3, st), -ETIMEDOUT);
	for (int i = 0; i < 3; i++)
		assert_int_equal(st[i], -ETIMEDOUT);
	/* the three late answers come first, then this one's (the fake answers 400 ms after the
	 * first close, 200 ms after this one is sent: it waits longer than that, so that a busy
	 * host does not make the answer it must match late too) */
	req_timeout_ms = 2000;
	assert_int_equal(kvx_room_close(fx->c, 27), -EBUSY);
	assert_int_equal(kvx_room_openv(fx->c, b->q, 3, gen), 3);
	assert_int_equal(gen[0], 5);
	assert_int_equal(gen[1], -EDQUOT);

	pthread_mutex_lock(&fx->f.mu);
	fx->f.close_next = true;
	pthread_mutex_unlock(&fx->f.mu);
	assert_int_equal(kvx_room_closev(fx->c, ids, 3, st), -ECONNRESET);
	for (int i = 0; i < 3; i++)
		assert_int_equal(st[i], -ECONNRESET);
	assert_int_equal(kvx_room_closev(fx->c, ids, 3, st), -ECONNRESET);
	free(b);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_connect_learns_node_name, setup_conn,
						teardown),
		cmocka_unit_test_setup_teardown(test_connect_refused, setup_fake, teardown),
		cmocka_unit_test_setup_teardown(test_connect_refuses_bad_hello_reply, setup_fake,
						teardown),
		cmocka_unit_test_setup_teardown(test_connect_reports_hello_status, setup_fake,
						teardown),
		cmocka_unit_test(test_state_str),
		cmocka_unit_test_setup_teardown(test_bad_arguments_send_nothing, setup_conn,
						teardown),
		cmocka_unit_test_setup_teardown(test_event_queue_full_ends_the_session, setup_conn,
						teardown),
		cmocka_unit_test_setup_teardown(test_events_before_reply_are_queued_in_order,
						setup_conn, teardown),
		cmocka_unit_test_setup_teardown(test_pool_register_passes_memfd, setup_conn,
						teardown),
		cmocka_unit_test_setup_teardown(test_room_open_message, setup_conn, teardown),
		cmocka_unit_test_setup_teardown(test_chunk_submitv_batch, setup_conn, teardown),
		cmocka_unit_test_setup_teardown(test_chunk_submit_sends_one_datagram, setup_conn,
						teardown),
		cmocka_unit_test_setup_teardown(test_room_abort_message, setup_conn, teardown),
		cmocka_unit_test_setup_teardown(test_room_abort_queues_events_before_reply,
						setup_conn, teardown),
		cmocka_unit_test_setup_teardown(test_room_abort_status_passthrough, setup_conn,
						teardown),
		cmocka_unit_test_setup_teardown(test_room_abort_bad_reply, setup_conn, teardown),
		cmocka_unit_test_setup_teardown(test_server_close_is_econnreset, setup_conn,
						teardown),
		cmocka_unit_test_setup_teardown(test_server_close_wakes_event_read, setup_conn,
						teardown),
		cmocka_unit_test_setup_teardown(test_malformed_reply_is_ebadmsg, setup_conn,
						teardown),
		cmocka_unit_test_setup_teardown(test_pool_calls_wait_longer, setup_conn, teardown),
		cmocka_unit_test_setup_teardown(test_reply_timeout_then_late_reply_dropped,
						setup_conn, teardown),
		cmocka_unit_test_setup_teardown(test_admin_text, setup_conn, teardown),
		cmocka_unit_test_setup_teardown(test_admin_pages, setup_conn, teardown),
		cmocka_unit_test_setup_teardown(test_rings_carry_requests_replies_and_events,
						setup_rings, teardown),
		cmocka_unit_test_setup_teardown(test_core_rings_carry_events, setup_core_rings,
						teardown),
		cmocka_unit_test_setup_teardown(test_core_rings_read_before_the_event_ring,
						setup_core_rings, teardown),
		cmocka_unit_test_setup_teardown(test_core_ring_order_holds_while_reading,
						setup_core_rings, teardown),
		cmocka_unit_test_setup_teardown(test_core_ring_reply_is_a_protocol_error,
						setup_core_rings, teardown),
		cmocka_unit_test_setup_teardown(test_core_rings_on_by_default, setup_fake,
						teardown),
		cmocka_unit_test_setup_teardown(test_rings_rearm_off_by_environment, setup_fake,
						teardown),
		cmocka_unit_test_setup_teardown(test_rings_rearm_refused_by_an_older_kvxd,
						setup_fake, teardown),
		cmocka_unit_test_setup_teardown(test_connect_flags_wake_ends, setup_fake, teardown),
		cmocka_unit_test_setup_teardown(test_wake_ends_refused_by_an_older_kvxd, setup_fake,
						teardown),
		cmocka_unit_test_setup_teardown(test_wake_ends_and_rearm_refused_by_an_older_kvxd,
						setup_fake, teardown),
		cmocka_unit_test_setup_teardown(test_rings_rearm_one_wake_until_drained,
						setup_rings, teardown),
		cmocka_unit_test_setup_teardown(test_core_rings_off_by_environment, setup_fake,
						teardown),
		cmocka_unit_test_setup_teardown(test_rings_off_by_environment, setup_fake,
						teardown),
		cmocka_unit_test_setup_teardown(test_rings_full_submission_ring_waits,
						setup_rings_small, teardown),
		cmocka_unit_test_setup_teardown(test_rings_full_submission_ring_times_out,
						setup_rings_small, teardown),
		cmocka_unit_test_setup_teardown(test_rings_taking_from_a_full_event_ring_wakes_kvxd,
						setup_rings_small, teardown),
		cmocka_unit_test_setup_teardown(test_rings_wake_end_closed_ends_the_connection,
						setup_rings, teardown),
		cmocka_unit_test_setup_teardown(test_rings_corrupt_event_ring_tail, setup_rings,
						teardown),
		cmocka_unit_test_setup_teardown(test_rings_corrupt_event_ring_record, setup_rings,
						teardown),
		cmocka_unit_test_setup_teardown(test_rings_server_close_is_econnreset, setup_rings,
						teardown),
		cmocka_unit_test(test_rings_bad_reply_leaks_no_fd),
		cmocka_unit_test_setup_teardown(test_room_openv_closev_pipelined, setup_conn,
						teardown),
		cmocka_unit_test_setup_teardown(test_room_openv_closev_pipelined, setup_rings,
						teardown),
		cmocka_unit_test_setup_teardown(test_room_batches_beyond_a_window, setup_conn,
						teardown),
		cmocka_unit_test_setup_teardown(test_room_batches_beyond_a_window,
						setup_rings_small, teardown),
		cmocka_unit_test_setup_teardown(test_room_batch_errors, setup_conn, teardown),
		cmocka_unit_test_setup_teardown(test_room_batch_errors, setup_rings, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
