/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libkvx: the engine library (include/kvx/kvx.h), the client side of the engine <-> kvxd
 * protocol (core/engine_proto.h).
 *
 * One SOCK_SEQPACKET connection per struct kvx_conn.  Requests carry an increasing seq and wait
 * (bounded by req_timeout_ms) for the REPLY with the same seq; EVENTs that arrive meanwhile are
 * queued in arrival order and handed out later by kvx_event_read().  A REPLY whose seq belongs
 * to an earlier request (one that timed out) is dropped.  kvx_room_openv / kvx_room_closev send
 * up to BATCH_WINDOW requests before they wait: the replies of that window are recorded by seq
 * whenever they arrive (also while a send waits for room), the wait bounded the same way.
 *
 * The fd handed out by kvx_conn_fd() is an epoll fd over the socket and an eventfd that is
 * signalled while the queue holds events, so it is readable whenever kvx_event_read() has
 * something to return, including events queued while a request waited for its reply.
 *
 * Rings (KVX_ENG_RINGS, core/engine_proto.h): after HELLO, libkvx asks kvxd for the session's
 * shared-memory rings (unless KVX_RINGS=0 is in the environment, or kvxd refuses: then the
 * socket carries everything as before).  With rings, requests without an fd go into the
 * submission ring (kvxd is woken, through the submission ring's wake socket pair, only when
 * it announced that it blocks), replies and events come out of the event ring, whose wake end
 * is in kvx_conn_fd()'s set; libkvx always counts as parked there, and asks for re-armed
 * wake-ups (KVX_ENG_RINGS_REARM, unless KVX_RINGS_REARM=0): kvxd takes a ring's parked flag
 * with the wake-up it sends, and libkvx sets it again each time it drained its wake end
 * (evt_drain), so one wake-up stands for every batch until then and never a wake-up is lost.
 * libkvx checks what kvxd writes into the rings like any datagram (core/shring.h checks the
 * indices and records).
 *
 * Every argument is checked before anything is sent: a bad argument returns -EINVAL and leaves
 * the session untouched.  Once kvxd has gone away every call returns -ECONNRESET (queued
 * events are still delivered first).  The socket is never blocked on: every send and receive
 * is MSG_DONTWAIT and waits happen in poll() with a deadline.
 *
 * Only the kvx_* API is exported: everything else here is static, and the library never logs
 * (errors are returned).
 */
#include "kvx/kvx.h"
#include "kvx/version.h"
#include "core/engine_proto.h"
#include "core/shring.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <poll.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#define REQ_TIMEOUT_MS 10000
#define PAGE_SIZE_MAX (16u << 20)
#define EVQ_INIT 64
#define EVQ_MAX (1u << 20)  /* events queued and not yet read: beyond this the session ends */
#define RX_FDS_MAX 8	    /* fds kvxd sends (only with the RINGS reply); any others are closed */
#define RING_FULL_WAIT_MS 1 /* the submission ring is full: look again after this */

/* How long a request waits for its reply (and a send for room); the unit tests shorten it. */
static int req_timeout_ms = REQ_TIMEOUT_MS;
/* A pool's registration and deregistration take time in proportion to the pool (kvxd answers
 * once the kernel pinned or unpinned every page and unmapped it: 0.19 to 0.29 s for a 256 MiB
 * pool's registration in the VM, about 1 s per GiB): their replies are waited for this much
 * longer per GiB (of the largest pool, 64 GiB, for an unregistration). */
#define POOL_MS_PER_GIB 2000
#define POOL_GIB_MAX 64

/* How long a pool of `bytes` may take to be registered or deregistered. */
static int64_t
pool_timeout_ms(uint64_t bytes)
{
	uint64_t gib = (bytes >> 30) + 1;

	return req_timeout_ms +
	       POOL_MS_PER_GIB * (int64_t)(gib < POOL_GIB_MAX ? gib : POOL_GIB_MAX);
}

#define KVX_CHUNK_BATCH_MAX 1024 /* kvx_chunk_submitv */
#define KVX_ROOM_BATCH_MAX 1024	 /* kvx_room_openv, kvx_room_closev */
#define BATCH_WINDOW 64		 /* requests of a batch in flight at once (their replies wait) */

/* The reply to one request of a batch in flight, recorded by dispatch() whenever it arrives. */
struct batch_reply {
	int32_t status;
	int64_t value;
	bool got;
};

struct kvx_conn {
	int fd;		     /* SOCK_SEQPACKET socket to kvxd */
	int efd;	     /* eventfd: readable while evq holds events, or ring_more */
	int pfd;	     /* epoll over fd and efd: kvx_conn_fd() */
	int err;	     /* sticky -ECONNRESET once kvxd went away, else 0 */
	int pending_err;     /* error met while draining, returned once the queue is empty */
	bool efd_set;	     /* efd counter is non-zero */
	bool ring_more;	     /* the rings held something when a call last returned */
	uint64_t seq;	     /* last sequence number used */
	struct kvx_event *q; /* ring of queued events */
	uint32_t q_cap;
	uint32_t q_max; /* EVQ_MAX */
	uint32_t q_head;
	uint32_t q_len;
	char node[KVX_NAME_MAX];
	uint32_t rank;
	uint32_t flags; /* kvx_connect_flags()'s: KVX_CONNECT_WAKE_ENDS */
	bool batching;	/* kvx_chunk_submitv: one ring wake-up at the end of the batch */
	/* kvx_room_openv / kvx_room_closev: the requests of seq bfirst .. bfirst + bsent - 1 are
	 * in flight; their replies land in brep (bgot of them so far), in whatever order and
	 * whenever they are received, also while a send waits for room */
	uint64_t bfirst;
	uint32_t bsent, bgot;
	struct batch_reply brep[BATCH_WINDOW];
	/* KVX_ENG_RINGS */
	bool rings;
	struct kvx_shring sub, evt; /* we produce sub, consume evt */
	/* core rings (KVX_ENG_RINGS_CORE): one more event ring per kvxd polling core, EVENTs
	 * only; read after evt, round robin */
	struct kvx_shring cevt[KVX_ENG_CORE_RINGS_MAX];
	int ncevt, cnext;
	void *ring_map;
	size_t ring_map_len;
	int sub_wake, evt_wake;
	bool rearm;   /* KVX_ENG_RINGS_REARM: announce parked again after each drain (evt_drain) */
	int want_fds; /* fds the next received datagram may carry (the RINGS reply) */
	int got_fds[3]; /* what it carried */
	int ngot_fds;
	uint64_t rx[KVX_ENG_MSG_MAX / sizeof(uint64_t)]; /* one received datagram */
	uint64_t tx[KVX_ENG_MSG_MAX / sizeof(uint64_t)]; /* one request being built */
};

const char *
kvx_version(void)
{
	return KVX_VERSION_STRING;
}

const char *
kvx_state_str(int state)
{
	static const char *const names[] = {
		[KVX_STATE_BOOTSTRAPPING] = "BOOTSTRAPPING",
		[KVX_STATE_WAITING_FOR_INPUT] = "WAITING_FOR_INPUT",
		[KVX_STATE_TRANSFERRING] = "TRANSFERRING",
		[KVX_STATE_SUCCESS] = "SUCCESS",
		[KVX_STATE_FAILED] = "FAILED",
		[KVX_STATE_DRAINING] = "DRAINING",
		[KVX_STATE_RELEASED] = "RELEASED",
	};

	if (state < 0 || (size_t)state >= sizeof(names) / sizeof(names[0]))
		return "?";
	return names[state];
}

static int64_t
now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

/* Milliseconds left until deadline (a now_ms() value; -1: none), for poll(). */
static int
remaining_ms(int64_t deadline)
{
	int64_t left;

	if (deadline < 0)
		return -1;
	left = deadline - now_ms();
	if (left <= 0)
		return 0;
	return left > INT_MAX ? INT_MAX : (int)left;
}

static bool
name_valid(const char *s)
{
	size_t n, i;

	if (!s)
		return false;
	n = strnlen(s, KVX_NAME_MAX);
	if (n == 0 || n >= KVX_NAME_MAX)
		return false;
	for (i = 0; i < n; i++) {
		char ch = s[i];

		if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
		      (ch >= '0' && ch <= '9') || ch == '_' || ch == '.' || ch == '-'))
			return false;
	}
	return true;
}

/* ---- event queue ---- */

static void
efd_update(struct kvx_conn *c)
{
	uint64_t v = 1;

	bool want = c->q_len || c->ring_more;

	if (want && !c->efd_set) {
		if (write(c->efd, &v, sizeof(v)) == sizeof(v))
			c->efd_set = true;
	} else if (!want && c->efd_set) {
		if (read(c->efd, &v, sizeof(v)) == sizeof(v) || errno == EAGAIN)
			c->efd_set = false;
	}
}

static int
evq_push(struct kvx_conn *c, const struct kvx_event *ev)
{
	if (c->q_len == c->q_cap) {
		uint32_t ncap = c->q_cap ? c->q_cap * 2 : EVQ_INIT;
		struct kvx_event *nq;
		uint32_t i;

		nq = c->q_cap < c->q_max ? malloc(ncap * sizeof(*nq)) : NULL;
		if (!nq) {
			/* an event came that cannot be kept (too many unread, or no memory):
			 * rather than lose it (a room's end among them), the session ends,
			 * loudly: every call fails from now on, and kvxd sees it go (its rooms
			 * take the engine-loss path) */
			shutdown(c->fd, SHUT_RDWR);
			c->err = -ENOBUFS;
			return c->err;
		}
		for (i = 0; i < c->q_len; i++)
			nq[i] = c->q[(c->q_head + i) % c->q_cap];
		free(c->q);
		c->q = nq;
		c->q_cap = ncap;
		c->q_head = 0;
	}
	c->q[(c->q_head + c->q_len) % c->q_cap] = *ev;
	c->q_len++;
	efd_update(c);
	return 0;
}

static int
evq_pop(struct kvx_conn *c, struct kvx_event *ev, int max)
{
	int n = 0;

	while (n < max && c->q_len) {
		ev[n++] = c->q[c->q_head];
		c->q_head = (c->q_head + 1) % c->q_cap;
		c->q_len--;
	}
	efd_update(c);
	return n;
}

/* ---- transport ---- */

static int
conn_reset(struct kvx_conn *c)
{
	c->err = -ECONNRESET;
	return c->err;
}

/* Receive one datagram from the socket into c->rx without blocking.  Returns its size (> 0),
 * -EAGAIN, -ECONNRESET (kvxd closed; sticky), -EBADMSG (truncated) or another -errno. */
static int
sock_recv(struct kvx_conn *c)
{
	union {
		char buf[CMSG_SPACE(RX_FDS_MAX * sizeof(int))];
		struct cmsghdr align;
	} ctl;
	struct iovec iov = {.iov_base = c->rx, .iov_len = sizeof(c->rx)};
	struct msghdr mh = {
		.msg_iov = &iov,
		.msg_iovlen = 1,
		.msg_control = ctl.buf,
		.msg_controllen = sizeof(ctl.buf),
	};
	struct cmsghdr *cm;
	ssize_t n;

	do {
		n = recvmsg(c->fd, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
	} while (n < 0 && errno == EINTR);
	if (n < 0) {
		if (errno == EAGAIN || errno == EWOULDBLOCK)
			return -EAGAIN;
		if (errno == ECONNRESET || errno == EPIPE || errno == ENOTCONN)
			return conn_reset(c);
		return -errno;
	}
	/* kvxd sends fds only with the RINGS reply (want_fds of them): close any others so that
	 * a confused peer cannot leak them into us */
	for (cm = CMSG_FIRSTHDR(&mh); cm; cm = CMSG_NXTHDR(&mh, cm)) {
		if (cm->cmsg_level == SOL_SOCKET && cm->cmsg_type == SCM_RIGHTS) {
			size_t nfd = (cm->cmsg_len - CMSG_LEN(0)) / sizeof(int);
			size_t i;

			for (i = 0; i < nfd; i++) {
				int fd;

				memcpy(&fd, CMSG_DATA(cm) + i * sizeof(int), sizeof(fd));
				if (nfd == (size_t)c->want_fds && c->ngot_fds < c->want_fds)
					c->got_fds[c->ngot_fds++] = fd;
				else
					close(fd);
			}
		}
	}
	if (n == 0)
		return conn_reset(c); /* end of stream: kvxd closed the session */
	if (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC))
		return -EBADMSG;
	return (int)n;
}

/* The next message from kvxd into c->rx without blocking: out of the event ring once the
 * session has rings (the socket is then read only when a wait saw it readable), else off the
 * socket.  Returns its size (> 0), -EAGAIN or -errno (-EPROTO: the ring is corrupt; sticky). */
static int
recv_one(struct kvx_conn *c)
{
	bool evt_ready;
	ssize_t n;

	if (!c->rings)
		return sock_recv(c);
	/*
	 * The core rings first: a room whose event did not fit its core ring has its later
	 * events in the event ring, published after what waits in the core ring.  Look at the
	 * event ring before the core rings, and take from it only what was there then: an
	 * event seen in it was published before the look, so every core-ring event that came
	 * before it is seen by the core-ring reads that follow.  (Looking at the event ring after
	 * the core rings could take a spilled event whose room's earlier event reached its core
	 * ring in between.)
	 */
	evt_ready = !kvx_shring_empty(&c->evt);
	n = 0;
	for (int k = 0; n == 0 && k < c->ncevt; k++) {
		struct kvx_shring *r = &c->cevt[c->cnext];

		c->cnext = (c->cnext + 1) % c->ncevt;
		n = kvx_shring_get(r, c->rx, sizeof(c->rx));
		/* a core ring carries EVENTs and nothing else */
		if (n > 0 && ((size_t)n < sizeof(struct kvx_eng_hdr) ||
			      ((const struct kvx_eng_hdr *)c->rx)->type != KVX_ENG_EVENT))
			n = -EPROTO;
	}
	if (n == 0 && evt_ready && (n = kvx_shring_get(&c->evt, c->rx, sizeof(c->rx))) > 0)
		kvx_shring_taken(&c->evt); /* kvxd may wait for the room */
	if (n > 0)
		return (int)n;
	if (n < 0) {
		c->err = -EPROTO;
		return c->err;
	}
	return -EAGAIN;
}

/* With rings: does any event ring hold something? */
static bool
rings_any(struct kvx_conn *c)
{
	if (!kvx_shring_empty(&c->evt))
		return true;
	for (int k = 0; k < c->ncevt; k++)
		if (!kvx_shring_empty(&c->cevt[k]))
			return true;
	return false;
}

/* With rings: take the wake-ups on the event rings' wake end, then (KVX_ENG_RINGS_REARM) say
 * on every event ring that we count as parked again, before anything looks at the rings: kvxd
 * cleared the flag of the ring it woke us for, and wakes us again only once it is set (a put
 * after this store sees it; one before it is in the ring for our next look, which is
 * seq_cst: rings_any, before any wait and before we return to the engine).  Returns what
 * kvx_shring_wake_drain returns. */
static int
evt_drain(struct kvx_conn *c)
{
	int r = kvx_shring_wake_drain(c->evt_wake);

	if (c->rearm) {
		kvx_shring_park_prepare(&c->evt);
		for (int k = 0; k < c->ncevt; k++)
			kvx_shring_park_prepare(&c->cevt[k]);
	}
	return r;
}

/* With rings: block until the event ring may have something, the socket is readable (kvxd
 * went away), or the deadline (-1: none).  Reads the event ring's eventfd when it was reported.
 * A datagram on the socket is received into c->rx: returns its size (> 0); else 0 (look at
 * the ring again) or -errno (-ETIMEDOUT at the deadline). */
static int
ring_wait(struct kvx_conn *c, int64_t deadline)
{
	struct pollfd p[2] = {{.fd = c->evt_wake, .events = POLLIN},
			      {.fd = c->fd, .events = POLLIN}};
	int r;

	if (rings_any(c))
		return 0;
	r = poll(p, 2, remaining_ms(deadline)); /* once even at the deadline: is kvxd there? */
	if (r < 0)
		return errno == EINTR ? 0 : -errno;
	if (r == 0)
		return -ETIMEDOUT;
	if ((p[0].revents & (POLLIN | POLLHUP | POLLERR)) && evt_drain(c) == -EPIPE &&
	    !p[1].revents) {
		/* kvxd closed its wake end but not the session: its end would stay readable,
		 * and every wait here would return at once, for good (a spin, no deadline) */
		return rings_any(c) ? 0 : conn_reset(c);
	}
	if (p[1].revents) {
		/* what kvxd put into the ring before it went away comes first */
		if (rings_any(c))
			return 0;
		r = sock_recv(c);
		return r == -EAGAIN ? 0 : r;
	}
	/* woken for nothing at the deadline: it has passed all the same */
	if (deadline >= 0 && now_ms() >= deadline && !rings_any(c))
		return -ETIMEDOUT;
	return 0;
}

/* With rings, before returning to the caller: the event ring's wake-ups may have been taken
 * while messages stay in the ring (a reply came before them, or only max events were taken):
 * our own eventfd (efd_update) keeps kvx_conn_fd() readable while the rings hold something.
 * (The engine's end of the wake pair cannot wake itself: what it sends goes to kvxd.) */
static void
ring_rearm(struct kvx_conn *c)
{
	c->ring_more = c->rings && rings_any(c);
	efd_update(c);
}

/*
 * Dispatch the datagram of n bytes in c->rx.  want is the seq whose REPLY the caller waits for
 * (0: none).  Returns 1 when it is that reply (well-formed), 0 when it was consumed (an EVENT
 * queued, or a stale REPLY of an earlier request dropped), or -errno (-EBADMSG: malformed).
 */
static int
dispatch(struct kvx_conn *c, int n, uint64_t want)
{
	const struct kvx_eng_hdr *h = (const struct kvx_eng_hdr *)c->rx;

	if ((size_t)n < sizeof(*h) || h->len != (uint32_t)n)
		return -EBADMSG;
	switch (h->type) {
	case KVX_ENG_EVENT: {
		struct kvx_eng_event *e = (struct kvx_eng_event *)c->rx;

		if ((size_t)n != sizeof(*e))
			return -EBADMSG;
		e->ev.reason[sizeof(e->ev.reason) - 1] = '\0';
		return evq_push(c, &e->ev);
	}
	case KVX_ENG_REPLY: {
		const struct kvx_eng_reply *r = (const struct kvx_eng_reply *)c->rx;

		bool of_batch = c->bsent && h->seq >= c->bfirst && h->seq - c->bfirst < c->bsent;

		if ((want && h->seq == want) || of_batch) {
			if ((size_t)n < sizeof(*r) || r->text_len > KVX_ENG_TEXT_MAX ||
			    sizeof(*r) + r->text_len != (size_t)n || r->status > 0)
				return -EBADMSG;
			if (!of_batch)
				return 1;
			if (c->brep[h->seq - c->bfirst].got)
				return -EBADMSG; /* a second reply to one request */
			c->brep[h->seq - c->bfirst] = (struct batch_reply){
				.status = r->status, .value = r->value, .got = true};
			c->bgot++;
			return 0;
		}
		if (h->seq != 0 && h->seq <= c->seq)
			return 0; /* the late reply of a request that timed out */
		return -EBADMSG;
	}
	default:
		return -EBADMSG;
	}
}

/* Receive and dispatch everything available, up to `room` queued events.  Returns 0 or -errno
 * (including -ECONNRESET). */
static int
drain(struct kvx_conn *c, uint32_t room)
{
	int n, r;

	while (c->q_len < room) {
		n = recv_one(c);
		if (n == -EAGAIN)
			return 0;
		if (n < 0)
			return n;
		r = dispatch(c, n, 0);
		if (r < 0)
			return r;
	}
	return 0;
}

/* With rings: put one request into the submission ring and wake kvxd if it blocks.  While the
 * ring is full, takes what kvxd sends meanwhile (kvxd may wait for room in the event ring) and
 * looks again every RING_FULL_WAIT_MS, up to the deadline. */
static int
ring_send(struct kvx_conn *c, const void *buf, size_t len, int64_t deadline)
{
	for (;;) {
		int r = kvx_shring_put(&c->sub, buf, (uint32_t)len);

		if (r == 0) {
			if (!c->batching)
				kvx_shring_notify(&c->sub);
			return 0;
		}
		if (r != -ENOBUFS) {
			if (r == -EPROTO)
				c->err = -EPROTO;
			return r;
		}
		kvx_shring_notify(&c->sub); /* what is in it already */
		r = drain(c, EVQ_MAX);
		if (r < 0)
			return r;
		if (now_ms() >= deadline)
			return -ETIMEDOUT;
		poll(NULL, 0, RING_FULL_WAIT_MS);
	}
}

/* Send one datagram (with fd as SCM_RIGHTS when fd >= 0).  While the socket is full, waits for
 * room up to the request timeout, draining incoming events meanwhile (kvxd may itself be
 * blocked sending to us). */
static int
send_msg(struct kvx_conn *c, const void *buf, size_t len, int fd)
{
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} ctl;
	struct iovec iov = {.iov_base = (void *)buf, .iov_len = len};
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
	int64_t deadline = now_ms() + req_timeout_ms;
	struct pollfd p;
	ssize_t n;
	int r;

	if (c->rings && fd < 0)
		return ring_send(c, buf, len, deadline);
	if (fd >= 0) {
		struct cmsghdr *cm;

		memset(&ctl, 0, sizeof(ctl));
		mh.msg_control = ctl.buf;
		mh.msg_controllen = sizeof(ctl.buf);
		cm = CMSG_FIRSTHDR(&mh);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(cm), &fd, sizeof(fd));
	}
	for (;;) {
		n = sendmsg(c->fd, &mh, MSG_DONTWAIT | MSG_NOSIGNAL);
		if (n >= 0)
			return (size_t)n == len ? 0 : -EMSGSIZE;
		if (errno == EINTR)
			continue;
		if (errno == EPIPE || errno == ECONNRESET || errno == ENOTCONN)
			return conn_reset(c);
		if (errno != EAGAIN && errno != EWOULDBLOCK)
			return -errno;
		if (now_ms() >= deadline)
			return -ETIMEDOUT;
		p.fd = c->fd;
		p.events = POLLIN | POLLOUT;
		p.revents = 0;
		r = poll(&p, 1, remaining_ms(deadline));
		if (r < 0 && errno != EINTR)
			return -errno;
		if (r == 0)
			return -ETIMEDOUT;
		if (r > 0 && (p.revents & (POLLIN | POLLHUP | POLLERR))) {
			r = drain(c, EVQ_MAX);
			if (r < 0)
				return r;
		}
	}
}

/* Wait for the REPLY to seq; on success it is in c->rx.  seq 0: for the replies to every request
 * of the batch in flight (c->brep).  Events are queued meanwhile. */
static int
wait_reply_for(struct kvx_conn *c, uint64_t seq, int64_t timeout_ms)
{
	int64_t deadline = now_ms() + timeout_ms;
	struct pollfd p;
	int n, r;

	for (;;) {
		if (!seq && c->bgot == c->bsent)
			return 0;
		n = recv_one(c);
		if (n == -EAGAIN && c->rings) {
			n = ring_wait(c, deadline);
			/* past the deadline even if the rings keep waking us; what they hold
			 * is read first (the reply may be there) */
			if (n == 0 && now_ms() >= deadline && !rings_any(c))
				return -ETIMEDOUT;
			if (n == 0)
				continue;
		}
		if (n == -EAGAIN) {
			if (now_ms() >= deadline)
				return -ETIMEDOUT; /* even if poll keeps saying "ready" */
			p.fd = c->fd;
			p.events = POLLIN;
			p.revents = 0;
			r = poll(&p, 1, remaining_ms(deadline));
			if (r < 0 && errno != EINTR)
				return -errno;
			if (r == 0)
				return -ETIMEDOUT;
			continue;
		}
		if (n < 0)
			return n;
		r = dispatch(c, n, seq);
		if (r < 0)
			return r;
		if (r == 1)
			return 0;
	}
}

static int
wait_reply(struct kvx_conn *c, uint64_t seq)
{
	return wait_reply_for(c, seq, req_timeout_ms);
}

/*
 * Send the request of len bytes built in c->tx (type set here, seq assigned here), passing fd
 * when >= 0, and, unless it is a CHUNK, wait for its reply.  On 0 the reply is in c->rx and
 * *rep points at it; its status is the caller's to interpret.
 */
/* Send one request and wait up to timeout_ms for its reply (into *rep; NULL: none awaited). */
static int
request_for(struct kvx_conn *c, uint16_t type, size_t len, int fd, const struct kvx_eng_reply **rep,
	    int64_t timeout_ms)
{
	struct kvx_eng_hdr *h = (struct kvx_eng_hdr *)c->tx;
	int r;

	if (c->err)
		return c->err;
	if (len < sizeof(*h) || len > KVX_ENG_MSG_MAX)
		return -EINVAL;
	h->type = type;
	h->flags = 0;
	h->len = (uint32_t)len;
	h->seq = ++c->seq;
	r = send_msg(c, c->tx, len, fd);
	if (r < 0 || !rep)
		return r;
	r = wait_reply_for(c, h->seq, timeout_ms);
	ring_rearm(c);
	if (r < 0)
		return r;
	*rep = (const struct kvx_eng_reply *)c->rx;
	return 0;
}

static int
request(struct kvx_conn *c, uint16_t type, size_t len, int fd, const struct kvx_eng_reply **rep)
{
	return request_for(c, type, len, fd, rep, req_timeout_ms);
}

static void *
tx_msg(struct kvx_conn *c, size_t fixed)
{
	memset(c->tx, 0, fixed);
	return c->tx;
}

/* ---- rings ---- */

static void
rings_free(struct kvx_conn *c)
{
	if (c->ring_map)
		munmap(c->ring_map, c->ring_map_len);
	if (c->sub_wake >= 0)
		close(c->sub_wake);
	if (c->evt_wake >= 0)
		close(c->evt_wake);
	c->ring_map = NULL;
	c->sub_wake = c->evt_wake = -1;
	c->rings = false;
	c->ncevt = 0;
}

static bool
is_socket(int fd)
{
	struct stat st;

	return fstat(fd, &st) == 0 && S_ISSOCK(st.st_mode);
}

/* Ask kvxd for the session's rings (KVX_ENG_RINGS), with one core ring per polling core unless
 * KVX_CORE_RINGS=0 is in the environment.  Returns 0 with the rings
 * in use, 0 on the socket (KVX_RINGS=0, or kvxd refused them: an older kvxd says -EOPNOTSUPP), or
 * -errno when the session broke. */
static int
rings_setup(struct kvx_conn *c)
{
	const char *env = getenv("KVX_RINGS"), *cenv = getenv("KVX_CORE_RINGS");
	const char *aenv = getenv("KVX_RINGS_REARM");
	const struct kvx_eng_reply *rep = NULL;
	struct epoll_event ee = {.events = EPOLLIN};
	struct kvx_eng_rings *m;
	struct stat st;
	uint64_t size, total;
	uint32_t flags = 0;
	size_t one;
	int r, ncore, seals;

	if (env && strcmp(env, "0") == 0)
		return 0;
	if (!cenv || strcmp(cenv, "0") != 0)
		flags = KVX_ENG_RINGS_CORE;
	/* KVX_RINGS_REARM=0: a wake-up per batch, as before */
	if (!aenv || strcmp(aenv, "0") != 0)
		flags |= KVX_ENG_RINGS_REARM;
	if (c->flags & KVX_CONNECT_WAKE_ENDS)
		flags |= KVX_ENG_RINGS_WAKE_ENDS;
	for (;;) {
		m = tx_msg(c, sizeof(*m));
		m->flags = flags;
		c->want_fds = 3;
		c->ngot_fds = 0;
		/* without flags, the header alone (what the oldest kvxd takes) */
		r = request(c, KVX_ENG_RINGS, m->flags ? sizeof(*m) : sizeof(m->hdr), -1, &rep);
		c->want_fds = 0;
		if (r < 0 || rep->status != -EINVAL ||
		    !(flags & (KVX_ENG_RINGS_REARM | KVX_ENG_RINGS_WAKE_ENDS)))
			break;
		/* a kvxd that does not know KVX_ENG_RINGS_WAKE_ENDS, or KVX_ENG_RINGS_REARM
		 * either: asked again without the newest flag (what a refusal carried is closed).
		 * Without the first, the engine is woken for every state; without the second, per
		 * batch */
		for (int i = 0; i < c->ngot_fds; i++)
			close(c->got_fds[i]);
		c->ngot_fds = 0;
		flags &= (flags & KVX_ENG_RINGS_WAKE_ENDS) ? ~KVX_ENG_RINGS_WAKE_ENDS
							   : ~KVX_ENG_RINGS_REARM;
	}
	if (r < 0)
		goto out;
	if (rep->status < 0) {
		r = 0; /* the socket it is */
		goto out;
	}
	r = -EBADMSG;
	size = (uint64_t)rep->value;
	one = kvx_shring_map_bytes(size);
	/* a memfd that holds every ring and cannot shrink under us (a SIGBUS in the engine);
	 * wake ends that are sockets (core/shring.h), made non-blocking.  (kvxd's rings take the
	 * largest message; a smaller ring refuses a larger request with -EMSGSIZE.)  Asked for core
	 * rings, the memfd's size says how many (an older kvxd gives none). */
	if (c->ngot_fds != 3 || !one || fstat(c->got_fds[0], &st) ||
	    (uint64_t)st.st_size < 2 * (uint64_t)one)
		goto out;
	ncore = 0;
	if (flags & KVX_ENG_RINGS_CORE) {
		uint64_t extra = (uint64_t)st.st_size / one - 2;

		if ((uint64_t)st.st_size % one || extra > KVX_ENG_CORE_RINGS_MAX)
			goto out;
		ncore = (int)extra;
	}
	total = (2 + (uint64_t)ncore) * one;
	seals = fcntl(c->got_fds[0], F_GET_SEALS); /* -1 on a file that has none: refused */
	if (!S_ISREG(st.st_mode) || seals < 0 || !(seals & F_SEAL_SHRINK) ||
	    !is_socket(c->got_fds[1]) || !is_socket(c->got_fds[2]) ||
	    fcntl(c->got_fds[1], F_SETFL, O_NONBLOCK) || fcntl(c->got_fds[2], F_SETFL, O_NONBLOCK))
		goto out;
	c->ring_map = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_SHARED, c->got_fds[0], 0);
	if (c->ring_map == MAP_FAILED) {
		c->ring_map = NULL;
		r = -errno;
		goto out;
	}
	c->ring_map_len = total;
	c->sub_wake = c->got_fds[1];
	c->evt_wake = c->got_fds[2];
	c->got_fds[1] = c->got_fds[2] = -1;
	if (kvx_shring_attach(&c->sub, c->ring_map, one, size, c->sub_wake, true) ||
	    kvx_shring_attach(&c->evt, (uint8_t *)c->ring_map + one, one, size, c->evt_wake, false))
		goto out;
	for (int k = 0; k < ncore; k++)
		if (kvx_shring_attach(&c->cevt[k], (uint8_t *)c->ring_map + (2 + (size_t)k) * one,
				      one, size, c->evt_wake, false))
			goto out;
	c->ncevt = ncore;
	c->cnext = 0;
	c->rearm = flags & KVX_ENG_RINGS_REARM;
	/* our submissions wake kvxd once per park of its (it announces each one anew) */
	kvx_shring_set_oneshot(&c->sub, true);
	ee.data.fd = c->evt_wake;
	if (epoll_ctl(c->pfd, EPOLL_CTL_ADD, c->evt_wake, &ee) < 0) {
		r = -errno;
		goto out;
	}
	c->rings = true;
	r = 0;
out:
	for (int i = 0; i < c->ngot_fds; i++)
		if (c->got_fds[i] >= 0 && (i == 0 || !c->rings))
			close(c->got_fds[i]);
	c->ngot_fds = 0;
	if (!c->rings)
		rings_free(c);
	return r;
}

/* ---- API ---- */

struct kvx_conn *
kvx_connect(const char *path)
{
	return kvx_connect_flags(path, 0, 0);
}

uint32_t
kvx_rank(const struct kvx_conn *c)
{
	return c ? c->rank : 0;
}

struct kvx_conn *
kvx_connect_rank(const char *path, uint32_t rank)
{
	return kvx_connect_flags(path, rank, 0);
}

struct kvx_conn *
kvx_connect_flags(const char *path, uint32_t rank, uint32_t flags)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	struct epoll_event ee = {.events = EPOLLIN};
	const struct kvx_eng_reply *rep = NULL;
	struct kvx_eng_hello *hello;
	struct kvx_conn *c;
	int r;

	if (!path || !*path || rank > KVX_RANK_MAX || (flags & ~KVX_CONNECT_WAKE_ENDS)) {
		errno = EINVAL;
		return NULL;
	}
	if (strlen(path) >= sizeof(sa.sun_path)) {
		errno = ENAMETOOLONG;
		return NULL;
	}
	memcpy(sa.sun_path, path, strlen(path) + 1);

	c = calloc(1, sizeof(*c));
	if (!c)
		return NULL;
	c->sub_wake = c->evt_wake = -1;
	c->rank = rank;
	c->flags = flags;
	c->q_max = EVQ_MAX;
	c->fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	if (c->fd < 0) {
		r = -errno;
		goto err_free;
	}
	if (connect(c->fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		r = -errno;
		goto err_close_fd;
	}
	c->efd = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
	if (c->efd < 0) {
		r = -errno;
		goto err_close_fd;
	}
	c->pfd = epoll_create1(EPOLL_CLOEXEC);
	if (c->pfd < 0) {
		r = -errno;
		goto err_close_efd;
	}
	ee.data.fd = c->fd;
	if (epoll_ctl(c->pfd, EPOLL_CTL_ADD, c->fd, &ee) < 0) {
		r = -errno;
		goto err_close_pfd;
	}
	ee.data.fd = c->efd;
	if (epoll_ctl(c->pfd, EPOLL_CTL_ADD, c->efd, &ee) < 0) {
		r = -errno;
		goto err_close_pfd;
	}

	hello = tx_msg(c, sizeof(*hello));
	hello->version = KVX_ENG_VERSION;
	hello->rank = rank;
	r = request(c, KVX_ENG_HELLO, sizeof(*hello), -1, &rep);
	if (r < 0)
		goto err_close_pfd;
	if (rep->status < 0) {
		r = rep->status;
		goto err_close_pfd;
	}
	if (rep->text_len == 0 || rep->text_len >= KVX_NAME_MAX) {
		r = -EBADMSG;
		goto err_close_pfd;
	}
	memcpy(c->node, rep + 1, rep->text_len);
	c->node[rep->text_len] = '\0';
	if (!name_valid(c->node)) {
		r = -EBADMSG;
		goto err_close_pfd;
	}
	r = rings_setup(c);
	if (r < 0)
		goto err_close_pfd;
	return c;

err_close_pfd:
	rings_free(c);
	close(c->pfd);
err_close_efd:
	close(c->efd);
err_close_fd:
	close(c->fd);
err_free:
	free(c->q);
	free(c);
	errno = -r;
	return NULL;
}

void
kvx_disconnect(struct kvx_conn *c)
{
	int saved = errno;

	if (!c)
		return;
	rings_free(c);
	close(c->pfd);
	close(c->efd);
	close(c->fd);
	free(c->q);
	free(c);
	errno = saved;
}

const char *
kvx_node_name(const struct kvx_conn *c)
{
	return c ? c->node : NULL;
}

int
kvx_conn_fd(const struct kvx_conn *c)
{
	return c ? c->pfd : -EINVAL;
}

int
kvx_pool_register(struct kvx_conn *c, int memfd, const struct kvx_pool_geometry *g)
{
	const struct kvx_eng_reply *rep = NULL;
	struct kvx_eng_pool_reg *m;
	uint64_t bytes;
	struct stat st;
	int r;

	if (!c || !g || memfd < 0)
		return -EINVAL;
	if (g->page_size == 0 || g->page_size % 64 || g->page_size > PAGE_SIZE_MAX ||
	    g->npages == 0 || g->nbufs == 0)
		return -EINVAL;
	if (__builtin_mul_overflow((uint64_t)g->page_size, (uint64_t)g->npages, &bytes) ||
	    __builtin_mul_overflow(bytes, (uint64_t)g->nbufs, &bytes))
		return -EINVAL;
	/* the fd must be a regular file (memfd) holding the whole geometry */
	if (fstat(memfd, &st) < 0)
		return -errno;
	if (!S_ISREG(st.st_mode) || st.st_size < 0 || (uint64_t)st.st_size < bytes)
		return -EINVAL;

	m = tx_msg(c, sizeof(*m));
	m->geom = *g;
	r = request_for(c, KVX_ENG_POOL_REG, sizeof(*m), memfd, &rep, pool_timeout_ms(bytes));
	if (r < 0)
		return r;
	if (rep->status < 0)
		return rep->status;
	if (rep->value <= 0 || rep->value > INT_MAX)
		return -EBADMSG;
	return (int)rep->value;
}

int
kvx_pool_unregister(struct kvx_conn *c, int pool_id)
{
	const struct kvx_eng_reply *rep = NULL;
	struct kvx_eng_pool_unreg *m;
	int r;

	if (!c || pool_id <= 0)
		return -EINVAL;
	m = tx_msg(c, sizeof(*m));
	m->pool_id = pool_id;
	r = request_for(c, KVX_ENG_POOL_UNREG, sizeof(*m), -1, &rep,
			pool_timeout_ms((uint64_t)POOL_GIB_MAX << 30));
	if (r < 0)
		return r;
	return rep->status;
}

int64_t
kvx_room_open(struct kvx_conn *c, uint64_t room, int pool_id, const uint32_t *pages,
	      uint32_t npages, const char *const *sources, uint32_t nsources)
{
	struct kvx_source src[KVX_MAX_SOURCES] = {0};
	struct kvx_region reg = {.pool_id = pool_id, .npages = npages, .pages = pages};

	if (!sources || nsources == 0 || nsources > KVX_MAX_SOURCES)
		return -EINVAL;
	for (uint32_t i = 0; i < nsources; i++)
		src[i].node = sources[i];
	return kvx_room_open_regions(c, room, &reg, 1, src, nsources);
}

static bool
slice_valid(const struct kvx_slice *s)
{
	if (s->length == 0)
		return s->src_offset == 0 && s->dst_offset == 0;
	return (uint64_t)s->src_offset + s->length <= UINT32_MAX &&
	       (uint64_t)s->dst_offset + s->length <= UINT32_MAX;
}

/* The ROOM_OPEN request of one room: its size, or -EINVAL for a bad one (nothing is built). */
static int64_t
open_check(const struct kvx_room_req *q)
{
	uint64_t total = 0;
	size_t len;
	uint32_t i, j;

	if (!q || q->room > KVX_ROOM_ID_MAX || !q->regions || q->nregions == 0 ||
	    q->nregions > KVX_MAX_REGIONS || !q->sources || q->nsources == 0 ||
	    q->nsources > KVX_MAX_SOURCES)
		return -EINVAL;
	for (i = 0; i < q->nregions; i++) {
		if (q->regions[i].pool_id <= 0 || !q->regions[i].pages || q->regions[i].npages == 0)
			return -EINVAL;
		total += q->regions[i].npages;
	}
	if (total > KVX_MAX_ROOM_PAGES)
		return -EINVAL;
	for (i = 0; i < q->nsources; i++) {
		const struct kvx_source *sr = &q->sources[i];

		if (!name_valid(sr->node) || sr->rank > KVX_RANK_MAX)
			return -EINVAL;
		for (j = 0; j < q->nregions; j++)
			if (!slice_valid(&sr->slice[j]))
				return -EINVAL;
		for (j = q->nregions; j < KVX_MAX_REGIONS; j++)
			if (sr->slice[j].length || sr->slice[j].src_offset ||
			    sr->slice[j].dst_offset)
				return -EINVAL; /* a slice for a region the room does not have */
		for (j = 0; j < i; j++)
			if (!strcmp(sr->node, q->sources[j].node) && sr->rank == q->sources[j].rank)
				return -EINVAL; /* a source listed twice could never complete */
	}
	len = sizeof(struct kvx_eng_room_open) +
	      (size_t)q->nregions * sizeof(struct kvx_eng_region) +
	      (size_t)q->nsources * sizeof(struct kvx_eng_source) +
	      (size_t)total * sizeof(uint32_t);
	if (len > KVX_ENG_MSG_MAX)
		return -EINVAL;
	return (int64_t)len;
}

/* Build the ROOM_OPEN of a room open_check() took, len bytes, in c->tx. */
static void
open_build(struct kvx_conn *c, const struct kvx_room_req *q, size_t len)
{
	struct kvx_eng_room_open *m = tx_msg(c, len);
	struct kvx_eng_region *er = (struct kvx_eng_region *)(m + 1);
	struct kvx_eng_source *es = (struct kvx_eng_source *)(er + q->nregions);
	uint32_t *pg = (uint32_t *)(es + q->nsources);
	uint32_t i;

	m->room = q->room;
	m->nregions = q->nregions;
	m->nsources = q->nsources;
	for (i = 0; i < q->nregions; i++) {
		er[i].pool_id = q->regions[i].pool_id;
		er[i].npages = q->regions[i].npages;
		memcpy(pg, q->regions[i].pages, (size_t)q->regions[i].npages * sizeof(uint32_t));
		pg += q->regions[i].npages;
	}
	for (i = 0; i < q->nsources; i++) {
		memcpy(es[i].name, q->sources[i].node, strlen(q->sources[i].node));
		es[i].rank = q->sources[i].rank;
		memcpy(es[i].slice, q->sources[i].slice, sizeof(es[i].slice));
	}
}

/* A ROOM_OPEN reply's status and value as kvx_room_open_regions() returns them. */
static int64_t
open_result(int32_t status, int64_t value)
{
	if (status < 0)
		return status;
	if (value < 1 || value > UINT32_MAX)
		return -EBADMSG;
	return value;
}

int64_t
kvx_room_open_regions(struct kvx_conn *c, uint64_t room, const struct kvx_region *regions,
		      uint32_t nregions, const struct kvx_source *sources, uint32_t nsources)
{
	const struct kvx_room_req q = {.room = room,
				       .regions = regions,
				       .nregions = nregions,
				       .sources = sources,
				       .nsources = nsources};
	const struct kvx_eng_reply *rep = NULL;
	int64_t len = open_check(&q);
	int r;

	if (!c || len < 0)
		return -EINVAL;
	open_build(c, &q, (size_t)len);
	r = request(c, KVX_ENG_ROOM_OPEN, (size_t)len, -1, &rep);
	if (r < 0)
		return r;
	return open_result(rep->status, rep->value);
}

/*
 * A batch of n requests of one type (kvx_room_openv: opens, with their checked lengths in len;
 * kvx_room_closev: closes of rooms[i]), BATCH_WINDOW at a time: a window's requests go out
 * back to back (on rings, one wake-up of kvxd), then its replies are collected, in any order.
 * res[i] gets request i's status, or its generation for an open.  Returns n, or the session's
 * -errno when a send or a wait failed: the requests not answered by then get it too.
 */
static int
batch_run(struct kvx_conn *c, uint16_t type, uint32_t n, const struct kvx_room_req *opens,
	  const int64_t *len, const uint64_t *rooms, int64_t *res)
{
	for (uint32_t w = 0; w < n; w += BATCH_WINDOW) {
		uint32_t m = n - w < BATCH_WINDOW ? n - w : BATCH_WINDOW, k, sent;
		int r = c->err, rw = 0;

		c->bfirst = c->seq + 1;
		c->bsent = c->bgot = 0;
		memset(c->brep, 0, sizeof(c->brep));
		c->batching = c->rings;
		for (k = 0; k < m && r == 0; k++) {
			size_t l = sizeof(struct kvx_eng_room_close);

			if (type == KVX_ENG_ROOM_OPEN) {
				l = (size_t)len[w + k];
				open_build(c, &opens[w + k], l);
			} else {
				struct kvx_eng_room_close *q = tx_msg(c, l);

				q->room = rooms[w + k];
			}
			r = request(c, type, l, -1, NULL);
			if (r == 0)
				c->bsent++;
		}
		if (c->batching) {
			c->batching = false;
			kvx_shring_notify(&c->sub);
		}
		if (c->bsent) {
			rw = wait_reply(c, 0);
			ring_rearm(c);
		}
		sent = c->bsent;
		c->bsent = 0; /* a reply that comes later is a late one: dropped */
		for (k = 0; k < sent; k++) {
			const struct batch_reply *b = &c->brep[k];

			if (!b->got)
				res[w + k] = rw < 0 ? rw : -ETIMEDOUT;
			else if (type == KVX_ENG_ROOM_OPEN)
				res[w + k] = open_result(b->status, b->value);
			else
				res[w + k] = b->status;
		}
		if (r == 0)
			r = rw;
		if (r < 0) {
			for (k = w + sent; k < n; k++)
				res[k] = r;
			return r;
		}
	}
	return (int)n;
}

int
kvx_room_openv(struct kvx_conn *c, const struct kvx_room_req *rooms, uint32_t n, int64_t *gen)
{
	int64_t len[KVX_ROOM_BATCH_MAX];

	if (!c || !rooms || !gen || n == 0 || n > KVX_ROOM_BATCH_MAX)
		return -EINVAL;
	for (uint32_t i = 0; i < n; i++) {
		len[i] = open_check(&rooms[i]);
		if (len[i] < 0)
			return -EINVAL;
	}
	return batch_run(c, KVX_ENG_ROOM_OPEN, n, rooms, len, NULL, gen);
}

int
kvx_room_closev(struct kvx_conn *c, const uint64_t *rooms, uint32_t n, int *status)
{
	int64_t res[BATCH_WINDOW];
	int r = 0;

	if (!c || !rooms || !status || n == 0 || n > KVX_ROOM_BATCH_MAX)
		return -EINVAL;
	for (uint32_t i = 0; i < n; i++)
		if (rooms[i] > KVX_ROOM_ID_MAX)
			return -EINVAL;
	/* a window at a time, so that the results fit res */
	for (uint32_t w = 0; w < n; w += BATCH_WINDOW) {
		uint32_t m = n - w < BATCH_WINDOW ? n - w : BATCH_WINDOW;

		r = batch_run(c, KVX_ENG_ROOM_CLOSE, m, NULL, NULL, rooms + w, res);
		for (uint32_t k = 0; k < m; k++)
			status[w + k] = (int)res[k];
		if (r < 0) {
			for (uint32_t k = w + m; k < n; k++)
				status[k] = r;
			return r;
		}
	}
	return (int)n;
}

int
kvx_chunk_submit(struct kvx_conn *c, uint64_t room, uint32_t chunk_index, int pool_id,
		 const uint32_t *src_pages, uint32_t npages, uint32_t dst_offset, int last)
{
	struct kvx_chunk ch = {.room = room,
			       .chunk_index = chunk_index,
			       .pool_id = pool_id,
			       .npages = npages,
			       .src_pages = src_pages,
			       .dst_offset = dst_offset,
			       .last = last};
	int r = kvx_chunk_submitv(c, &ch, 1);

	return r < 0 ? r : 0;
}

static bool
chunk_valid(const struct kvx_chunk *ch)
{
	return ch->room <= KVX_ROOM_ID_MAX && ch->pool_id > 0 && ch->src_pages && ch->npages > 0 &&
	       ch->npages <= KVX_MAX_ROOM_PAGES &&
	       ch->dst_offset <= KVX_MAX_ROOM_PAGES - ch->npages && ch->region < KVX_MAX_REGIONS &&
	       ch->ndest <= KVX_MAX_DESTS && (uint64_t)ch->buf_first + ch->buf_count <= UINT32_MAX;
}

int
kvx_chunk_submitv(struct kvx_conn *c, const struct kvx_chunk *chunks, uint32_t n)
{
	int r = 0;

	if (!c || !chunks || n == 0 || n > KVX_CHUNK_BATCH_MAX)
		return -EINVAL;
	for (uint32_t i = 0; i < n; i++)
		if (!chunk_valid(&chunks[i]))
			return -EINVAL;
	c->batching = c->rings;
	for (uint32_t i = 0; i < n && r == 0; i++) {
		const struct kvx_chunk *ch = &chunks[i];
		size_t len = sizeof(struct kvx_eng_chunk) + (size_t)ch->npages * sizeof(uint32_t);
		struct kvx_eng_chunk *m = tx_msg(c, sizeof(*m));

		m->room = ch->room;
		m->chunk_index = ch->chunk_index;
		m->pool_id = ch->pool_id;
		m->npages = ch->npages;
		m->dst_offset = ch->dst_offset;
		m->last = ch->last ? 1 : 0;
		m->region = ch->region;
		m->buf_first = ch->buf_first;
		m->buf_count = ch->buf_count;
		m->ndest = ch->ndest;
		memcpy(m + 1, ch->src_pages, (size_t)ch->npages * sizeof(uint32_t));
		r = request(c, KVX_ENG_CHUNK, len, -1, NULL);
	}
	if (c->batching) {
		c->batching = false;
		kvx_shring_notify(&c->sub);
	}
	return r < 0 ? r : (int)n;
}

/* A request about one room ({hdr, room}): ROOM_ABORT or ROOM_CLOSE.  Returns request()'s
 * result; on 0, *rep is the reply. */
static int
room_request(struct kvx_conn *c, uint16_t type, uint64_t room, const struct kvx_eng_reply **rep)
{
	struct kvx_eng_room_close *m; /* same layout as struct kvx_eng_room_abort */

	if (!c || room > KVX_ROOM_ID_MAX)
		return -EINVAL;
	m = tx_msg(c, sizeof(*m));
	m->room = room;
	return request(c, type, sizeof(*m), -1, rep);
}

int64_t
kvx_room_abort(struct kvx_conn *c, uint64_t room)
{
	const struct kvx_eng_reply *rep = NULL;
	int r = room_request(c, KVX_ENG_ROOM_ABORT, room, &rep);

	if (r < 0)
		return r;
	if (rep->status < 0)
		return rep->status;
	/* the abort generation: a room generation, so 1..UINT32_MAX (events carry 32 bits) */
	if (rep->value < 1 || rep->value > UINT32_MAX)
		return -EBADMSG;
	return rep->value;
}

int
kvx_room_close(struct kvx_conn *c, uint64_t room)
{
	const struct kvx_eng_reply *rep = NULL;
	int r = room_request(c, KVX_ENG_ROOM_CLOSE, room, &rep);

	if (r < 0)
		return r;
	return rep->status;
}

int
kvx_event_read(struct kvx_conn *c, struct kvx_event *ev, int max, int timeout_ms)
{
	int64_t deadline;
	struct pollfd p;
	int r;

	if (!c || !ev || max <= 0)
		return -EINVAL;
	deadline = timeout_ms < 0 ? -1 : now_ms() + timeout_ms;
	if (c->rings && !c->err) /* first: a batch kvxd puts after this wakes us again */
		(void)evt_drain(c);
	for (;;) {
		if (!c->err && !c->pending_err) {
			r = drain(c, (uint32_t)max);
			if (r < 0 && r != -ECONNRESET)
				c->pending_err = r;
		}
		if (c->q_len) {
			r = evq_pop(c, ev, max);
			ring_rearm(c);
			return r;
		}
		if (c->pending_err) {
			r = c->pending_err;
			c->pending_err = 0;
			ring_rearm(c); /* the wake-ups were taken above: what the rings hold says */
			return r;
		}
		if (c->err)
			return c->err;
		if (c->rings) {
			r = ring_wait(c, deadline);
			if (r == -ETIMEDOUT) {
				ring_rearm(c); /* nothing there: kvx_conn_fd() not readable */
				return 0;
			}
			if (r > 0)
				r = dispatch(c, r, 0);
			if (r < 0 && r != -ECONNRESET)
				c->pending_err = r;
			continue;
		}
		if (timeout_ms == 0 || (deadline >= 0 && now_ms() >= deadline))
			return 0;
		p.fd = c->fd;
		p.events = POLLIN;
		p.revents = 0;
		r = poll(&p, 1, remaining_ms(deadline));
		if (r < 0 && errno != EINTR)
			return -errno;
		if (r == 0)
			return 0;
	}
}

#define ADMIN_TEXT_MAX (16u << 20) /* kvxd's bound on one command's text */

static int admin_single(struct kvx_conn *c, const char *cmd, char *out, size_t len);

int
kvx_admin_text(struct kvx_conn *c, const char *cmd, char **out)
{
	const struct kvx_eng_reply *rep = NULL;
	struct kvx_eng_admin_at *m;
	uint64_t off = 0, total = 0;
	char *text = NULL;
	size_t cl;
	int r, status = 0;

	if (!out)
		return -EINVAL;
	*out = NULL;
	if (!c || !cmd)
		return -EINVAL;
	cl = strnlen(cmd, KVX_ENG_MSG_MAX);
	if (cl == 0 || sizeof(*m) + cl > KVX_ENG_MSG_MAX)
		return -EINVAL;
	do {
		m = tx_msg(c, sizeof(*m));
		m->offset = off;
		memcpy(m + 1, cmd, cl);
		r = request(c, KVX_ENG_ADMIN_AT, sizeof(*m) + cl, -1, &rep);
		if (r < 0)
			goto fail;
		if (off == 0 && rep->status == -EOPNOTSUPP && rep->value == 0) {
			/* a kvxd without pages: one reply */
			text = malloc(KVX_ENG_TEXT_MAX + 1);
			if (!text)
				return -ENOMEM;
			r = admin_single(c, cmd, text, KVX_ENG_TEXT_MAX + 1);
			*out = text;
			return r;
		}
		if (rep->value < 0 || (uint64_t)rep->value > ADMIN_TEXT_MAX ||
		    (off && (uint64_t)rep->value != total) ||
		    rep->text_len > (uint64_t)rep->value - off ||
		    (!rep->text_len && off < (uint64_t)rep->value)) {
			r = -EPROTO; /* pages that do not add up */
			goto fail;
		}
		if (off == 0) {
			total = (uint64_t)rep->value;
			status = rep->status;
			text = malloc(total + 1);
			if (!text)
				return -ENOMEM;
		}
		memcpy(text + off, rep + 1, rep->text_len);
		off += rep->text_len;
	} while (off < total);
	text[total] = '\0';
	*out = text;
	return status;
fail:
	free(text);
	return r;
}

int
kvx_admin(struct kvx_conn *c, const char *cmd, char *out, size_t len)
{
	char *text = NULL;
	int r;

	if (!c || !cmd || (!out && len))
		return -EINVAL;
	if (out && len)
		out[0] = '\0';
	r = kvx_admin_text(c, cmd, &text);
	if (text && len) { /* the text is copied on error too: it explains the error */
		size_t n = strnlen(text, len - 1);

		memcpy(out, text, n);
		out[n] = '\0';
	}
	free(text);
	return r;
}

/* One KVX_ENG_ADMIN request and its one reply (a kvxd that does not page). */
static int
admin_single(struct kvx_conn *c, const char *cmd, char *out, size_t len)
{
	const struct kvx_eng_reply *rep = NULL;
	struct kvx_eng_admin *m;
	size_t n, cl;
	int r;

	if (!c || !cmd || (!out && len))
		return -EINVAL;
	cl = strnlen(cmd, KVX_ENG_MSG_MAX);
	if (cl == 0 || sizeof(*m) + cl > KVX_ENG_MSG_MAX)
		return -EINVAL;
	if (out)
		out[0] = '\0';

	m = tx_msg(c, sizeof(*m));
	memcpy(m + 1, cmd, cl);
	r = request(c, KVX_ENG_ADMIN, sizeof(*m) + cl, -1, &rep);
	if (r < 0)
		return r;
	/* the text is copied on error too: it explains the error */
	if (len) {
		n = rep->text_len < len - 1 ? rep->text_len : len - 1;
		memcpy(out, rep + 1, n);
		out[n] = '\0';
	}
	return rep->status;
}
