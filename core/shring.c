/* SPDX-License-Identifier: Apache-2.0 */
#include "core/shring.h"

#include <errno.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

enum { REC_MSG = 0x6d5a, REC_PAD = 0x7061 }; /* a zeroed header is neither */

/* receives per drain, of up to this many bytes each: a producer that floods cannot hold us,
 * and one that sent all its socket takes at once is drained in a few wake-ups */
#define WAKE_DRAIN_MAX 16
#define WAKE_DRAIN_BYTES 4096

/* The shared header: one cache line per writer, so neither side's stores bounce the other's
 * line on the normal path.  starved shares parked's line: the producer sets it only when the
 * ring is full. */
struct kvx_shring_shared {
	_Alignas(64) _Atomic uint64_t tail; /* producer: bytes published */
	_Alignas(64) _Atomic uint64_t head; /* consumer: bytes consumed */
	_Alignas(64) _Atomic uint32_t parked;
	_Atomic uint32_t starved; /* the producer waits for room (kvx_shring_starve) */
	_Alignas(64) uint8_t data[];
};

struct rec_hdr {
	uint32_t len;  /* payload bytes */
	uint32_t kind; /* REC_MSG or REC_PAD */
};

_Static_assert(sizeof(struct rec_hdr) == KVX_SHRING_REC_HDR, "record header");
_Static_assert(sizeof(struct kvx_shring_shared) == 192, "shared header: three lines");

static bool
size_ok(uint64_t size)
{
	return size >= KVX_SHRING_MIN && size <= KVX_SHRING_MAX && !(size & (size - 1));
}

static uint64_t
rec_bytes(uint64_t len)
{
	return (KVX_SHRING_REC_HDR + len + 7) & ~(uint64_t)7;
}

size_t
kvx_shring_map_bytes(uint64_t size)
{
	return size_ok(size) ? sizeof(struct kvx_shring_shared) + (size_t)size : 0;
}

int
kvx_shring_format(void *mem, uint64_t size)
{
	if (!mem || !size_ok(size))
		return -EINVAL;
	memset(mem, 0, kvx_shring_map_bytes(size));
	return 0;
}

int
kvx_shring_wake_pair(int sv[2])
{
	if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) < 0) {
		sv[0] = sv[1] = -1;
		return -errno;
	}
	return 0;
}

int
kvx_shring_wake_drain(int wake_fd)
{
	char b[WAKE_DRAIN_BYTES];

	for (int i = 0; i < WAKE_DRAIN_MAX; i++) {
		ssize_t n = recv(wake_fd, b, sizeof(b), MSG_DONTWAIT);

		if (n == 0)
			return -EPIPE; /* the other side closed its end */
		if (n < (ssize_t)sizeof(b))
			break; /* all taken (or EAGAIN, or an error the next wait reports) */
	}
	return 0;
}

int
kvx_shring_attach(struct kvx_shring *r, void *mem, size_t map_len, uint64_t size, int wake_fd,
		  bool producer)
{
	memset(r, 0, sizeof(*r));
	if (!mem || !size_ok(size) || map_len < kvx_shring_map_bytes(size) || wake_fd < 0)
		return -EINVAL;
	r->sh = mem;
	r->data = r->sh->data;
	r->size = size;
	r->mask = size - 1;
	r->wake_fd = wake_fd;
	r->producer = producer;
	/* a ring is attached empty (formatted by its creator before either side uses it): both
	 * indices start at 0 privately, whatever the shared header says by now */
	return 0;
}

uint32_t
kvx_shring_max_msg(const struct kvx_shring *r)
{
	return (uint32_t)(r->size / 4 - KVX_SHRING_REC_HDR);
}

/* ---- producer ------------------------------------------------------------------------------ */

/* The consumer's head, checked: it never goes backwards and never passes what we published. */
static int
load_head_mo(struct kvx_shring *r, memory_order mo)
{
	uint64_t h = atomic_load_explicit(&r->sh->head, mo);

	if (h < r->other || h > r->pos) {
		r->broken = true;
		return -EPROTO;
	}
	r->other = h;
	return 0;
}

static int
load_head(struct kvx_shring *r)
{
	return load_head_mo(r, memory_order_acquire);
}

bool
kvx_shring_starve(struct kvx_shring *r)
{
	uint64_t seen = r->other;

	if (r->broken)
		return false;
	/* seq_cst: ordered before the head load (pairs with the fence in kvx_shring_taken) */
	atomic_store_explicit(&r->sh->starved, 1, memory_order_seq_cst);
	if (load_head_mo(r, memory_order_seq_cst))
		return true; /* the next put reports it */
	return r->other != seen;
}

uint64_t
kvx_shring_room(struct kvx_shring *r)
{
	if (r->broken || load_head(r))
		return 0;
	return r->size - (r->pos - r->other);
}

int
kvx_shring_put(struct kvx_shring *r, const void *msg, uint32_t len)
{
	uint64_t need = rec_bytes(len), off = r->pos & r->mask, to_end = r->size - off;
	uint64_t pad = need > to_end ? to_end : 0; /* the record would cross the end */
	struct rec_hdr h = {.len = len, .kind = REC_MSG};

	if (r->broken)
		return -EPROTO;
	if (len == 0 || len > kvx_shring_max_msg(r))
		return -EMSGSIZE;
	if (r->size - (r->pos - r->other) < pad + need) {
		if (load_head(r))
			return -EPROTO;
		if (r->size - (r->pos - r->other) < pad + need) {
			r->full++;
			return -ENOBUFS;
		}
	}
	if (pad) {
		struct rec_hdr p = {.len = (uint32_t)(pad - KVX_SHRING_REC_HDR), .kind = REC_PAD};

		memcpy(r->data + off, &p, sizeof(p));
		r->pos += pad;
		off = 0;
	}
	memcpy(r->data + off, &h, sizeof(h));
	memcpy(r->data + off + KVX_SHRING_REC_HDR, msg, len);
	r->pos += need;
	/* seq_cst: ordered before the parked load in kvx_shring_notify (pairs with the consumer's
	 * parked store and tail load) */
	atomic_store_explicit(&r->sh->tail, r->pos, memory_order_seq_cst);
	return 0;
}

/* One byte on our wake end for the other side.  Never blocks, whatever the other side does with
 * its end: EAGAIN means its end is full (it is woken anyway), EPIPE that it closed it (its
 * session ends by its socket). */
static void
wake_send(struct kvx_shring *r)
{
	const char one = 1;

	(void)!send(r->wake_fd, &one, 1, MSG_DONTWAIT | MSG_NOSIGNAL);
	r->wakes++;
}

bool
kvx_shring_notify(struct kvx_shring *r)
{
	if (!atomic_load_explicit(&r->sh->parked, memory_order_seq_cst))
		return false;
	/* the load first: while the consumer reads, the flag's line is only read, never written;
	 * the exchange makes one wake-up of all the batches until the consumer announces again */
	if (r->oneshot && !atomic_exchange_explicit(&r->sh->parked, 0, memory_order_seq_cst))
		return false;
	wake_send(r);
	return true;
}

void
kvx_shring_set_oneshot(struct kvx_shring *r, bool oneshot)
{
	r->oneshot = oneshot;
}

/* ---- consumer ------------------------------------------------------------------------------ */

/* The producer's tail, checked: never behind what we consumed, never more than the ring
 * ahead of it. */
static int
load_tail(struct kvx_shring *r, memory_order mo)
{
	uint64_t t = atomic_load_explicit(&r->sh->tail, mo);

	if (t < r->pos || t - r->pos > r->size) {
		r->broken = true;
		return -EPROTO;
	}
	r->other = t;
	return 0;
}

/* Consumer: find the next message record, a pad before it skipped (consumed: a pad is no
 * message).  Sets *offp and *hp (read once: the producer may rewrite it).  Returns 1, 0 when the
 * ring is empty, or -EPROTO (sticky) when what the producer wrote is impossible. */
static int
rec_next(struct kvx_shring *r, uint64_t *offp, struct rec_hdr *hp)
{
	struct rec_hdr h;
	uint64_t off, to_end;

	if (r->broken)
		return -EPROTO;
	if (r->pos == r->other && (load_tail(r, memory_order_acquire) || r->pos == r->other))
		return r->broken ? -EPROTO : 0;
	off = r->pos & r->mask;
	to_end = r->size - off;
	memcpy(&h, r->data + off, sizeof(h));
	if (h.kind == REC_PAD) {
		/* a pad runs exactly to the end, and the producer published past it */
		if ((uint64_t)h.len + KVX_SHRING_REC_HDR != to_end || r->other - r->pos <= to_end)
			goto bad;
		r->pos += to_end;
		off = 0;
		to_end = r->size;
		memcpy(&h, r->data, sizeof(h));
	}
	if (h.kind != REC_MSG || h.len == 0 || h.len > kvx_shring_max_msg(r) ||
	    rec_bytes(h.len) > to_end || rec_bytes(h.len) > r->other - r->pos)
		goto bad;
	*offp = off;
	*hp = h;
	return 1;
bad:
	r->broken = true;
	return -EPROTO;
}

/* Consumer: copy the next message out (up to cap bytes), taking it or not. */
static ssize_t
rec_read(struct kvx_shring *r, void *buf, uint32_t cap, bool take)
{
	struct rec_hdr h;
	uint64_t off;
	int rc = rec_next(r, &off, &h);

	r->peeked = 0;
	if (rc <= 0)
		return rc;
	if (take && h.len > cap) {
		r->broken = true;
		return -EPROTO;
	}
	memcpy(buf, r->data + off + KVX_SHRING_REC_HDR, h.len < cap ? h.len : cap);
	if (h.len <= cap)
		r->peeked = r->pos + rec_bytes(h.len);
	if (take)
		kvx_shring_take_peeked(r);
	return h.len;
}

ssize_t
kvx_shring_get(struct kvx_shring *r, void *buf, uint32_t cap)
{
	return rec_read(r, buf, cap, true);
}

ssize_t
kvx_shring_peek(struct kvx_shring *r, void *buf, uint32_t cap)
{
	return rec_read(r, buf, cap, false);
}

int
kvx_shring_take_peeked(struct kvx_shring *r)
{
	if (!r->peeked || r->broken)
		return -EINVAL;
	r->pos = r->peeked;
	r->peeked = 0;
	atomic_store_explicit(&r->sh->head, r->pos, memory_order_release);
	return 0;
}

bool
kvx_shring_taken(struct kvx_shring *r)
{
	/* after our head store, before the starved load (pairs with kvx_shring_starve) */
	atomic_thread_fence(memory_order_seq_cst);
	if (!atomic_load_explicit(&r->sh->starved, memory_order_relaxed) ||
	    !atomic_exchange_explicit(&r->sh->starved, 0, memory_order_relaxed))
		return false;
	wake_send(r);
	return true;
}

bool
kvx_shring_empty(struct kvx_shring *r)
{
	if (r->broken)
		return false; /* not empty: the caller's next get reports the break */
	if (r->pos != r->other)
		return false;
	/* seq_cst: after the parked store of park_prepare (pairs with the producer) */
	if (load_tail(r, memory_order_seq_cst))
		return false;
	return r->pos == r->other;
}

void
kvx_shring_park_prepare(struct kvx_shring *r)
{
	atomic_store_explicit(&r->sh->parked, 1, memory_order_seq_cst);
}

int
kvx_shring_park_done(struct kvx_shring *r, bool woken)
{
	atomic_store_explicit(&r->sh->parked, 0, memory_order_relaxed);
	return woken ? kvx_shring_wake_drain(r->wake_fd) : 0;
}
