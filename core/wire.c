/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The node <-> node control-protocol codec (see core/wire.h).  Every field is read and written
 * byte by byte in little-endian order; no host struct is ever copied onto the wire.  Decoding
 * is strict and canonical: a frame that decodes re-encodes to exactly the same bytes.
 */
#include "core/wire.h"

#include "core/room.h"

#include <assert.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#define MAX_SRC 16		   /* ROOM_META nsrc; src_idx of every message is below it */
#define ROOM_ID_LIMIT (1ull << 63) /* room ids are < 2^63 */
#define QP_NUM_LIMIT (1u << 24)	   /* QP numbers and PSNs are 24-bit */

static const char *const type_names[KVX_WIRE_TYPE_MAX + 1] = {
	[KVX_WIRE_HELLO] = "HELLO",	    [KVX_WIRE_HELLO_ACK] = "HELLO_ACK",
	[KVX_WIRE_QP_INFO] = "QP_INFO",	    [KVX_WIRE_QP_READY] = "QP_READY",
	[KVX_WIRE_ROOM_META] = "ROOM_META", [KVX_WIRE_ROOM_STATUS] = "ROOM_STATUS",
	[KVX_WIRE_ABORT] = "ABORT",	    [KVX_WIRE_ABORT_ACK] = "ABORT_ACK",
	[KVX_WIRE_HEARTBEAT] = "HEARTBEAT", [KVX_WIRE_BYE] = "BYE",
	[KVX_WIRE_AUTH] = "AUTH",
};

const char *
kvx_wire_type_str(uint16_t type)
{
	if (type == 0 || type > KVX_WIRE_TYPE_MAX)
		return "UNKNOWN";
	return type_names[type];
}

static int __attribute__((format(printf, 4, 5)))
fail(char *err, size_t errlen, int rc, const char *fmt, ...)
{
	va_list ap;

	if (err != NULL && errlen > 0) {
		va_start(ap, fmt);
		vsnprintf(err, errlen, fmt, ap);
		va_end(ap);
	}
	return rc;
}

/* ---- little-endian helpers ---- */

static void
put_le(uint8_t *p, uint64_t v, unsigned int n)
{
	unsigned int i;

	for (i = 0; i < n; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t
get_le(const uint8_t *p, unsigned int n)
{
	uint64_t v = 0;
	unsigned int i;

	for (i = 0; i < n; i++)
		v |= (uint64_t)p[i] << (8 * i);
	return v;
}

/* ---- field validation, shared by encode (-EINVAL) and decode (-EBADMSG) ---- */

static bool
name_char_ok(unsigned char c)
{
	return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') ||
	       c == '_' || c == '.' || c == '-';
}

/* A node name: 1..KVX_WIRE_NAME_MAX bytes of [A-Za-z0-9_.-]. */
static bool
check_name(const char *s, size_t size, const char *tname, const char *field, char *err,
	   size_t errlen)
{
	size_t n = strnlen(s, size), i;

	if (n == 0) {
		fail(err, errlen, 0, "%s: %s is empty", tname, field);
		return false;
	}
	if (n > KVX_WIRE_NAME_MAX) {
		fail(err, errlen, 0, "%s: %s length %zu exceeds %d", tname, field, n,
		     KVX_WIRE_NAME_MAX);
		return false;
	}
	for (i = 0; i < n; i++) {
		if (!name_char_ok((unsigned char)s[i])) {
			fail(err, errlen, 0,
			     "%s: %s has invalid byte 0x%02x at %zu (allowed: A-Z a-z 0-9 _ . -)",
			     tname, field, (unsigned char)s[i], i);
			return false;
		}
	}
	return true;
}

/* A free-text reason: 0..KVX_WIRE_REASON_MAX bytes of printable ASCII (it ends up in logs). */
static bool
check_text(const char *s, size_t size, const char *tname, const char *field, char *err,
	   size_t errlen)
{
	size_t n = strnlen(s, size), i;

	if (n > KVX_WIRE_REASON_MAX) {
		fail(err, errlen, 0, "%s: %s length %zu exceeds %d", tname, field, n,
		     KVX_WIRE_REASON_MAX);
		return false;
	}
	for (i = 0; i < n; i++) {
		unsigned char c = (unsigned char)s[i];

		if (c < 0x20 || c > 0x7e) {
			fail(err, errlen, 0, "%s: %s has non-printable byte 0x%02x at %zu", tname,
			     field, c, i);
			return false;
		}
	}
	return true;
}

static bool
check_room(uint64_t room, const char *tname, char *err, size_t errlen)
{
	if (room >= ROOM_ID_LIMIT) {
		fail(err, errlen, 0, "%s: room 0x%016llx has the top bit set (must be < 2^63)",
		     tname, (unsigned long long)room);
		return false;
	}
	return true;
}

static bool
check_src_idx(uint16_t src_idx, const char *tname, char *err, size_t errlen)
{
	if (src_idx >= MAX_SRC) {
		fail(err, errlen, 0, "%s: src_idx %u exceeds %d", tname, src_idx, MAX_SRC - 1);
		return false;
	}
	return true;
}

static bool
check_ncores(uint16_t ncores, char *err, size_t errlen)
{
	if (ncores == 0 || ncores > KVX_WIRE_MAX_CORES) {
		fail(err, errlen, 0, "QP_INFO: ncores %u out of range 1..%d", ncores,
		     KVX_WIRE_MAX_CORES);
		return false;
	}
	return true;
}

static bool
check_nrails(uint8_t nrails, const char *tname, char *err, size_t errlen)
{
	if (nrails == 0 || nrails > KVX_WIRE_MAX_RAILS) {
		fail(err, errlen, 0, "%s: nrails %u out of range 1..%d", tname, nrails,
		     KVX_WIRE_MAX_RAILS);
		return false;
	}
	return true;
}

static bool
check_nreg(uint8_t nreg, char *err, size_t errlen)
{
	if (nreg == 0 || nreg > KVX_WIRE_MAX_REGIONS) {
		fail(err, errlen, 0, "ROOM_META: nreg %u out of range 1..%d", nreg,
		     KVX_WIRE_MAX_REGIONS);
		return false;
	}
	return true;
}

/* Pages of all regions read so far (total), plus npages of the next: within the frame's cap. */
static bool
check_npages(uint64_t total, uint32_t npages, uint32_t k, char *err, size_t errlen)
{
	if (npages == 0) {
		fail(err, errlen, 0, "ROOM_META: region %u: npages is 0", k);
		return false;
	}
	if (total + npages > KVX_WIRE_MAX_PAGES) {
		fail(err, errlen, 0, "ROOM_META: %llu pages in all regions exceed %d",
		     (unsigned long long)(total + npages), KVX_WIRE_MAX_PAGES);
		return false;
	}
	return true;
}

static bool
check_hello(const struct kvx_wire_hello *h, const char *tname, char *err, size_t errlen)
{
	if (h->version == 0) {
		fail(err, errlen, 0, "%s: version 0 is invalid", tname);
		return false;
	}
	return check_name(h->name, sizeof(h->name), tname, "name", err, errlen);
}

static bool
check_qp_info(const struct kvx_wire_qp_info *q, char *err, size_t errlen)
{
	unsigned int i;

	if (!check_nrails(q->nrails, "QP_INFO", err, errlen))
		return false;
	for (i = 0; i < q->nrails; i++) {
		switch (q->rail[i].mtu) {
		case 256:
		case 512:
		case 1024:
		case 2048:
		case 4096:
			break;
		default:
			fail(err, errlen, 0,
			     "QP_INFO: rail %u: mtu %u is not 256, 512, 1024, 2048 or 4096", i,
			     q->rail[i].mtu);
			return false;
		}
	}
	if (!check_ncores(q->ncores, err, errlen))
		return false;
	for (i = 0; i < (unsigned int)q->ncores * q->nrails; i++) {
		if (q->qp[i].qpn >= QP_NUM_LIMIT) {
			fail(err, errlen, 0, "QP_INFO: qp[%u].qpn 0x%x exceeds 24 bits", i,
			     q->qp[i].qpn);
			return false;
		}
		if (q->qp[i].psn >= QP_NUM_LIMIT) {
			fail(err, errlen, 0, "QP_INFO: qp[%u].psn 0x%x exceeds 24 bits", i,
			     q->qp[i].psn);
			return false;
		}
	}
	return true;
}

static bool
check_rank(uint32_t rank, const char *tname, const char *field, char *err, size_t errlen)
{
	if (rank > KVX_WIRE_RANK_MAX) {
		fail(err, errlen, 0, "%s: %s %u exceeds %u", tname, field, rank, KVX_WIRE_RANK_MAX);
		return false;
	}
	return true;
}

static bool
check_region(const struct kvx_wire_region *g, uint32_t k, char *err, size_t errlen)
{
	uint64_t span;
	uint32_t i, page;

	if (g->page_size == 0 || g->pool_npages == 0 || g->nbufs == 0) {
		fail(err, errlen, 0,
		     "ROOM_META: region %u: page_size, pool_npages and nbufs must be "
		     "non-zero (%u, %u, %u)",
		     k, g->page_size, g->pool_npages, g->nbufs);
		return false;
	}
	/* The pool spans nbufs * pool_npages * page_size bytes from addr: it must not wrap. */
	span = (uint64_t)g->nbufs * g->pool_npages;
	if (span > UINT64_MAX / g->page_size || span * g->page_size > UINT64_MAX - g->addr) {
		fail(err, errlen, 0,
		     "ROOM_META: region %u: addr 0x%llx + nbufs %u x pool_npages %u x page_size %u "
		     "overflows 64 bits",
		     k, (unsigned long long)g->addr, g->nbufs, g->pool_npages, g->page_size);
		return false;
	}
	if (g->len == 0 ? (g->src_off || g->dst_off)
			: (uint64_t)g->dst_off + g->len > g->page_size ||
				  (uint64_t)g->src_off + g->len > UINT32_MAX) {
		fail(err, errlen, 0,
		     "ROOM_META: region %u: slice %u+%u (source offset %u) does not fit a %u-byte "
		     "page",
		     k, g->dst_off, g->len, g->src_off, g->page_size);
		return false;
	}
	if (g->npages == 0) {
		fail(err, errlen, 0, "ROOM_META: region %u: npages is 0", k);
		return false;
	}
	if (g->pages_le == NULL) {
		fail(err, errlen, 0, "ROOM_META: region %u: pages_le is NULL", k);
		return false;
	}
	for (i = 0; i < g->npages; i++) {
		page = kvx_wire_region_page(g, i);
		if (page >= g->pool_npages) {
			fail(err, errlen, 0,
			     "ROOM_META: region %u: pages[%u] %u not below pool_npages %u", k, i,
			     page, g->pool_npages);
			return false;
		}
	}
	return true;
}

static bool
check_room_meta(const struct kvx_wire_room_meta *rm, char *err, size_t errlen)
{
	uint64_t total = 0;

	if (!check_room(rm->room, "ROOM_META", err, errlen))
		return false;
	if (rm->nsrc == 0 || rm->nsrc > MAX_SRC) {
		fail(err, errlen, 0, "ROOM_META: nsrc %u out of range 1..%d", rm->nsrc, MAX_SRC);
		return false;
	}
	if (rm->src_idx >= rm->nsrc) {
		fail(err, errlen, 0, "ROOM_META: src_idx %u not below nsrc %u", rm->src_idx,
		     rm->nsrc);
		return false;
	}
	if (!check_rank(rm->dst_rank, "ROOM_META", "dst_rank", err, errlen) ||
	    !check_rank(rm->src_rank, "ROOM_META", "src_rank", err, errlen) ||
	    !check_nrails(rm->nrails, "ROOM_META", err, errlen) ||
	    !check_nreg(rm->nreg, err, errlen))
		return false;
	for (uint32_t k = 0; k < rm->nreg; k++)
		total += rm->reg[k].npages;
	if (total > KVX_WIRE_MAX_PAGES) {
		fail(err, errlen, 0, "ROOM_META: %llu pages in all regions exceed %d",
		     (unsigned long long)total, KVX_WIRE_MAX_PAGES);
		return false;
	}
	for (uint32_t k = 0; k < rm->nreg; k++)
		if (!check_region(&rm->reg[k], k, err, errlen))
			return false;
	return true;
}

static bool
check_room_status(const struct kvx_wire_room_status *rs, char *err, size_t errlen)
{
	if (!check_room(rs->room, "ROOM_STATUS", err, errlen) ||
	    !check_src_idx(rs->src_idx, "ROOM_STATUS", err, errlen) ||
	    !check_rank(rs->dst_rank, "ROOM_STATUS", "dst_rank", err, errlen) ||
	    !check_rank(rs->src_rank, "ROOM_STATUS", "src_rank", err, errlen))
		return false;
	if (rs->state >= KVX_ROOM_STATE_COUNT) {
		fail(err, errlen, 0, "ROOM_STATUS: state %u is not a room state (0..%d)", rs->state,
		     KVX_ROOM_STATE_COUNT - 1);
		return false;
	}
	if (rs->error > 0) {
		fail(err, errlen, 0, "ROOM_STATUS: error %d is not a negative errno or 0",
		     (int)rs->error);
		return false;
	}
	return check_text(rs->reason, sizeof(rs->reason), "ROOM_STATUS", "reason", err, errlen);
}

/* Every range rule of every message; the message is written to err on false. */
static bool
check_msg(const struct kvx_wire_msg *m, char *err, size_t errlen)
{
	const char *tname = kvx_wire_type_str(m->type);

	switch (m->type) {
	case KVX_WIRE_HELLO:
	case KVX_WIRE_HELLO_ACK:
		return check_hello(&m->u.hello, tname, err, errlen);
	case KVX_WIRE_QP_INFO:
		return check_qp_info(&m->u.qp_info, err, errlen);
	case KVX_WIRE_ROOM_META:
		return check_room_meta(&m->u.room_meta, err, errlen);
	case KVX_WIRE_ROOM_STATUS:
		return check_room_status(&m->u.room_status, err, errlen);
	case KVX_WIRE_ABORT:
		return check_room(m->u.abort.room, tname, err, errlen) &&
		       check_name(m->u.abort.endpoint, sizeof(m->u.abort.endpoint), tname,
				  "endpoint", err, errlen) &&
		       check_rank(m->u.abort.dst_rank, tname, "dst_rank", err, errlen) &&
		       check_rank(m->u.abort.src_rank, tname, "src_rank", err, errlen);
	case KVX_WIRE_ABORT_ACK:
		return check_room(m->u.abort_ack.room, tname, err, errlen) &&
		       check_src_idx(m->u.abort_ack.src_idx, tname, err, errlen) &&
		       check_rank(m->u.abort_ack.dst_rank, tname, "dst_rank", err, errlen) &&
		       check_rank(m->u.abort_ack.src_rank, tname, "src_rank", err, errlen);
	case KVX_WIRE_QP_READY:
	case KVX_WIRE_HEARTBEAT:
	case KVX_WIRE_BYE:
	case KVX_WIRE_AUTH:
		return true;
	default:
		fail(err, errlen, 0, "unknown message type %u", m->type);
		return false;
	}
}

uint32_t
kvx_wire_region_page(const struct kvx_wire_region *g, uint32_t i)
{
	assert(i < g->npages);
	return (uint32_t)get_le(g->pages_le + (size_t)i * 4, 4);
}

/* ---- encode ---- */

/* Writes past cap are dropped and remembered; the caller checks overflow once at the end. */
struct writer {
	uint8_t *p;
	size_t cap;
	size_t off;
	bool overflow;
};

static void
put_bytes(struct writer *w, const void *src, size_t n)
{
	if (w->overflow || n > w->cap - w->off) {
		w->overflow = true;
		return;
	}
	if (n > 0)
		memcpy(w->p + w->off, src, n);
	w->off += n;
}

static void
put_uint(struct writer *w, uint64_t v, unsigned int n)
{
	if (w->overflow || n > w->cap - w->off) {
		w->overflow = true;
		return;
	}
	put_le(w->p + w->off, v, n);
	w->off += n;
}

/* String: u16 length + bytes.  check_msg() has bounded the length. */
static void
put_str(struct writer *w, const char *s, size_t size)
{
	size_t n = strnlen(s, size);

	put_uint(w, n, 2);
	put_bytes(w, s, n);
}

static void
put_payload(struct writer *w, const struct kvx_wire_msg *m)
{
	const struct kvx_wire_hello *h = &m->u.hello;
	const struct kvx_wire_qp_info *q = &m->u.qp_info;
	const struct kvx_wire_room_meta *rm = &m->u.room_meta;
	const struct kvx_wire_room_status *rs = &m->u.room_status;
	unsigned int i;

	switch (m->type) {
	case KVX_WIRE_HELLO:
	case KVX_WIRE_HELLO_ACK:
		put_uint(w, h->version, 2);
		put_uint(w, h->features, 4);
		put_str(w, h->name, sizeof(h->name));
		put_uint(w, h->nonce, 8);
		put_uint(w, h->session, 8);
		if (m->type == KVX_WIRE_HELLO_ACK)
			put_bytes(w, h->mac, sizeof(h->mac));
		break;
	case KVX_WIRE_AUTH:
		put_bytes(w, m->u.auth_mac, sizeof(m->u.auth_mac));
		break;
	case KVX_WIRE_QP_INFO:
		put_uint(w, q->nrails, 1);
		for (i = 0; i < q->nrails; i++) {
			put_bytes(w, q->rail[i].gid, sizeof(q->rail[i].gid));
			put_uint(w, q->rail[i].mtu, 4);
		}
		put_uint(w, q->ncores, 2);
		for (i = 0; i < (unsigned int)q->ncores * q->nrails; i++) {
			put_uint(w, q->qp[i].qpn, 4);
			put_uint(w, q->qp[i].psn, 4);
		}
		break;
	case KVX_WIRE_QP_READY:
		break;
	case KVX_WIRE_ROOM_META:
		put_uint(w, rm->room, 8);
		put_uint(w, rm->gen, 4);
		put_uint(w, rm->token, 4);
		put_uint(w, rm->src_idx, 2);
		put_uint(w, rm->nsrc, 2);
		put_uint(w, rm->dst_rank, 4);
		put_uint(w, rm->src_rank, 4);
		put_uint(w, rm->nrails, 1);
		put_uint(w, rm->nreg, 1);
		for (i = 0; i < rm->nreg; i++) {
			const struct kvx_wire_region *g = &rm->reg[i];

			put_uint(w, g->addr, 8);
			for (unsigned int k = 0; k < rm->nrails; k++)
				put_uint(w, g->rkey[k], 4);
			put_uint(w, g->page_size, 4);
			put_uint(w, g->pool_npages, 4);
			put_uint(w, g->nbufs, 4);
			put_uint(w, g->src_off, 4);
			put_uint(w, g->dst_off, 4);
			put_uint(w, g->len, 4);
			put_uint(w, g->npages, 4);
			put_bytes(w, g->pages_le, (size_t)g->npages * 4);
		}
		break;
	case KVX_WIRE_ROOM_STATUS:
		put_uint(w, rs->room, 8);
		put_uint(w, rs->gen, 4);
		put_uint(w, rs->src_idx, 2);
		put_uint(w, rs->state, 1);
		put_uint(w, (uint32_t)rs->error, 4);
		put_str(w, rs->reason, sizeof(rs->reason));
		put_uint(w, rs->dst_rank, 4);
		put_uint(w, rs->src_rank, 4);
		break;
	case KVX_WIRE_ABORT:
		put_uint(w, m->u.abort.room, 8);
		put_uint(w, m->u.abort.gen, 4);
		put_str(w, m->u.abort.endpoint, sizeof(m->u.abort.endpoint));
		put_uint(w, m->u.abort.dst_rank, 4);
		put_uint(w, m->u.abort.src_rank, 4);
		put_uint(w, m->u.abort.open_gen, 4);
		break;
	case KVX_WIRE_ABORT_ACK:
		put_uint(w, m->u.abort_ack.room, 8);
		put_uint(w, m->u.abort_ack.gen, 4);
		put_uint(w, m->u.abort_ack.src_idx, 2);
		put_uint(w, m->u.abort_ack.dst_rank, 4);
		put_uint(w, m->u.abort_ack.src_rank, 4);
		break;
	case KVX_WIRE_HEARTBEAT:
		put_uint(w, m->u.heartbeat_ns, 8);
		break;
	case KVX_WIRE_BYE:
		put_uint(w, m->u.bye_reason, 4);
		break;
	default:
		assert(0 && "check_msg() refuses unknown types");
	}
}

int
kvx_wire_encode(const struct kvx_wire_msg *m, uint8_t *buf, size_t cap, char *err, size_t errlen)
{
	struct writer w = {.p = buf, .cap = cap, .off = KVX_WIRE_HDR_LEN};

	if (!check_msg(m, err, errlen))
		return -EINVAL;
	if (cap < KVX_WIRE_HDR_LEN)
		return fail(err, errlen, -ENOSPC,
			    "%s: buffer of %zu bytes is smaller than the header",
			    kvx_wire_type_str(m->type), cap);
	put_payload(&w, m);
	if (w.overflow)
		return fail(err, errlen, -ENOSPC, "%s: buffer of %zu bytes is too small",
			    kvx_wire_type_str(m->type), cap);
	/* The maxima keep every message far below the frame limit. */
	assert(w.off <= KVX_WIRE_FRAME_MAX);
	put_le(buf, KVX_WIRE_MAGIC, 4);
	put_le(buf + 4, KVX_WIRE_VERSION, 2);
	put_le(buf + 6, m->type, 2);
	put_le(buf + 8, w.off - KVX_WIRE_HDR_LEN, 4);
	return (int)w.off;
}

/* ---- decode ---- */

/* Reads the payload; the first field that does not fit is named in err. */
struct reader {
	const uint8_t *p;
	size_t len;
	size_t off;
	const char *tname;
	char *err;
	size_t errlen;
};

static bool
need(struct reader *r, size_t n, const char *field)
{
	if (n > r->len - r->off) {
		fail(r->err, r->errlen, 0,
		     "%s: payload truncated at %s (needs %zu bytes, %zu left)", r->tname, field, n,
		     r->len - r->off);
		return false;
	}
	return true;
}

static bool
get_uint(struct reader *r, uint64_t *v, unsigned int n, const char *field)
{
	if (!need(r, n, field))
		return false;
	*v = get_le(r->p + r->off, n);
	r->off += n;
	return true;
}

static bool
get_u8(struct reader *r, uint8_t *v, const char *field)
{
	uint64_t x;

	if (!get_uint(r, &x, 1, field))
		return false;
	*v = (uint8_t)x;
	return true;
}

static bool
get_u16(struct reader *r, uint16_t *v, const char *field)
{
	uint64_t x;

	if (!get_uint(r, &x, 2, field))
		return false;
	*v = (uint16_t)x;
	return true;
}

static bool
get_u32(struct reader *r, uint32_t *v, const char *field)
{
	uint64_t x;

	if (!get_uint(r, &x, 4, field))
		return false;
	*v = (uint32_t)x;
	return true;
}

static bool
get_u64(struct reader *r, uint64_t *v, const char *field)
{
	return get_uint(r, v, 8, field);
}

/* String: u16 length (at most max) + bytes, stored NUL-terminated in dst[max + 1]. */
static bool
get_str(struct reader *r, char *dst, size_t max, const char *field)
{
	uint64_t n;

	if (!get_uint(r, &n, 2, field))
		return false;
	if (n > max) {
		fail(r->err, r->errlen, 0, "%s: %s length %llu exceeds %zu", r->tname, field,
		     (unsigned long long)n, max);
		return false;
	}
	if (!need(r, n, field))
		return false;
	/* An embedded NUL would silently shorten the string: refuse it. */
	if (memchr(r->p + r->off, '\0', n) != NULL) {
		fail(r->err, r->errlen, 0, "%s: %s contains a NUL byte", r->tname, field);
		return false;
	}
	memcpy(dst, r->p + r->off, n);
	dst[n] = '\0';
	r->off += n;
	return true;
}

static bool
get_payload(struct reader *r, struct kvx_wire_msg *m)
{
	struct kvx_wire_hello *h = &m->u.hello;
	struct kvx_wire_qp_info *q = &m->u.qp_info;
	struct kvx_wire_room_meta *rm = &m->u.room_meta;
	struct kvx_wire_room_status *rs = &m->u.room_status;
	char field[16];
	uint32_t error;
	uint64_t total;
	unsigned int i;

	switch (m->type) {
	case KVX_WIRE_HELLO:
	case KVX_WIRE_HELLO_ACK:
		if (!get_u16(r, &h->version, "version") || !get_u32(r, &h->features, "features") ||
		    !get_str(r, h->name, KVX_WIRE_NAME_MAX, "name") ||
		    !get_u64(r, &h->nonce, "nonce") || !get_u64(r, &h->session, "session"))
			return false;
		if (m->type == KVX_WIRE_HELLO)
			return true;
		if (!need(r, sizeof(h->mac), "mac"))
			return false;
		memcpy(h->mac, r->p + r->off, sizeof(h->mac));
		r->off += sizeof(h->mac);
		return true;
	case KVX_WIRE_AUTH:
		if (!need(r, sizeof(m->u.auth_mac), "mac"))
			return false;
		memcpy(m->u.auth_mac, r->p + r->off, sizeof(m->u.auth_mac));
		r->off += sizeof(m->u.auth_mac);
		return true;
	case KVX_WIRE_QP_INFO:
		if (!get_u8(r, &q->nrails, "nrails"))
			return false;
		if (!check_nrails(q->nrails, "QP_INFO", r->err, r->errlen))
			return false;
		for (i = 0; i < q->nrails; i++) {
			if (!need(r, sizeof(q->rail[i].gid), "gid"))
				return false;
			memcpy(q->rail[i].gid, r->p + r->off, sizeof(q->rail[i].gid));
			r->off += sizeof(q->rail[i].gid);
			if (!get_u32(r, &q->rail[i].mtu, "mtu"))
				return false;
		}
		if (!get_u16(r, &q->ncores, "ncores"))
			return false;
		if (!check_ncores(q->ncores, r->err, r->errlen))
			return false;
		for (i = 0; i < (unsigned int)q->ncores * q->nrails; i++) {
			snprintf(field, sizeof(field), "qp[%u].qpn", i);
			if (!get_u32(r, &q->qp[i].qpn, field))
				return false;
			snprintf(field, sizeof(field), "qp[%u].psn", i);
			if (!get_u32(r, &q->qp[i].psn, field))
				return false;
		}
		return true;
	case KVX_WIRE_QP_READY:
		return true;
	case KVX_WIRE_ROOM_META:
		if (!get_u64(r, &rm->room, "room") || !get_u32(r, &rm->gen, "gen") ||
		    !get_u32(r, &rm->token, "token") || !get_u16(r, &rm->src_idx, "src_idx") ||
		    !get_u16(r, &rm->nsrc, "nsrc") || !get_u32(r, &rm->dst_rank, "dst_rank") ||
		    !get_u32(r, &rm->src_rank, "src_rank") || !get_u8(r, &rm->nrails, "nrails") ||
		    !get_u8(r, &rm->nreg, "nreg"))
			return false;
		if (!check_nrails(rm->nrails, "ROOM_META", r->err, r->errlen) ||
		    !check_nreg(rm->nreg, r->err, r->errlen))
			return false;
		for (i = 0, total = 0; i < rm->nreg; i++) {
			struct kvx_wire_region *g = &rm->reg[i];

			if (!get_u64(r, &g->addr, "addr"))
				return false;
			for (unsigned int k = 0; k < rm->nrails; k++)
				if (!get_u32(r, &g->rkey[k], "rkey"))
					return false;
			if (!get_u32(r, &g->page_size, "page_size") ||
			    !get_u32(r, &g->pool_npages, "pool_npages") ||
			    !get_u32(r, &g->nbufs, "nbufs") ||
			    !get_u32(r, &g->src_off, "src_off") ||
			    !get_u32(r, &g->dst_off, "dst_off") || !get_u32(r, &g->len, "len") ||
			    !get_u32(r, &g->npages, "npages"))
				return false;
			if (!check_npages(total, g->npages, i, r->err, r->errlen))
				return false;
			if (!need(r, (size_t)g->npages * 4, "pages"))
				return false;
			g->pages_le = r->p + r->off;
			r->off += (size_t)g->npages * 4;
			total += g->npages;
		}
		return true;
	case KVX_WIRE_ROOM_STATUS:
		if (!get_u64(r, &rs->room, "room") || !get_u32(r, &rs->gen, "gen") ||
		    !get_u16(r, &rs->src_idx, "src_idx") || !get_u8(r, &rs->state, "state") ||
		    !get_u32(r, &error, "error"))
			return false;
		rs->error = (int32_t)error;
		return get_str(r, rs->reason, KVX_WIRE_REASON_MAX, "reason") &&
		       get_u32(r, &rs->dst_rank, "dst_rank") &&
		       get_u32(r, &rs->src_rank, "src_rank");
	case KVX_WIRE_ABORT:
		return get_u64(r, &m->u.abort.room, "room") && get_u32(r, &m->u.abort.gen, "gen") &&
		       get_str(r, m->u.abort.endpoint, KVX_WIRE_NAME_MAX, "endpoint") &&
		       get_u32(r, &m->u.abort.dst_rank, "dst_rank") &&
		       get_u32(r, &m->u.abort.src_rank, "src_rank") &&
		       get_u32(r, &m->u.abort.open_gen, "open_gen");
	case KVX_WIRE_ABORT_ACK:
		return get_u64(r, &m->u.abort_ack.room, "room") &&
		       get_u32(r, &m->u.abort_ack.gen, "gen") &&
		       get_u16(r, &m->u.abort_ack.src_idx, "src_idx") &&
		       get_u32(r, &m->u.abort_ack.dst_rank, "dst_rank") &&
		       get_u32(r, &m->u.abort_ack.src_rank, "src_rank");
	case KVX_WIRE_HEARTBEAT:
		return get_u64(r, &m->u.heartbeat_ns, "sent_ns");
	case KVX_WIRE_BYE:
		return get_u32(r, &m->u.bye_reason, "reason");
	default:
		assert(0 && "the header check refuses unknown types");
		return false;
	}
}

int
kvx_wire_decode(const uint8_t *buf, size_t len, struct kvx_wire_msg *m, char *err, size_t errlen)
{
	struct reader r;
	uint32_t magic, plen;
	uint16_t version, type;
	uint64_t flen;

	if (len < KVX_WIRE_HDR_LEN)
		return 0;
	magic = (uint32_t)get_le(buf, 4);
	version = (uint16_t)get_le(buf + 4, 2);
	type = (uint16_t)get_le(buf + 6, 2);
	plen = (uint32_t)get_le(buf + 8, 4);
	if (magic != KVX_WIRE_MAGIC)
		return fail(err, errlen, -EPROTO, "bad magic 0x%08x (expected 0x%08x)", magic,
			    KVX_WIRE_MAGIC);
	if (version != KVX_WIRE_VERSION)
		return fail(err, errlen, -EPROTO, "unsupported frame version %u (expected %d)",
			    version, KVX_WIRE_VERSION);
	if (type == 0 || type > KVX_WIRE_TYPE_MAX)
		return fail(err, errlen, -EPROTO, "unknown message type %u", type);
	flen = (uint64_t)KVX_WIRE_HDR_LEN + plen;
	if (flen > KVX_WIRE_FRAME_MAX)
		return fail(err, errlen, -EMSGSIZE,
			    "%s: frame length %llu (payload length %u) exceeds %d",
			    kvx_wire_type_str(type), (unsigned long long)flen, plen,
			    KVX_WIRE_FRAME_MAX);
	if (len < flen)
		return 0;

	memset(m, 0, sizeof(*m));
	m->type = type;
	r = (struct reader){
		.p = buf + KVX_WIRE_HDR_LEN,
		.len = plen,
		.tname = kvx_wire_type_str(type),
		.err = err,
		.errlen = errlen,
	};
	if (!get_payload(&r, m))
		return -EBADMSG;
	if (r.off != r.len)
		return fail(err, errlen, -EBADMSG, "%s: %zu trailing byte(s) after the last field",
			    r.tname, r.len - r.off);
	if (!check_msg(m, err, errlen))
		return -EBADMSG;
	return (int)flen;
}

/* ---- sequence ---- */

void
kvx_wire_seq_init(struct kvx_wire_seq *s, bool initiator)
{
	memset(s, 0, sizeof(*s));
	s->initiator = initiator;
}

int
kvx_wire_seq_check(struct kvx_wire_seq *s, uint16_t type, char *err, size_t errlen)
{
	const char *tname = kvx_wire_type_str(type);
	bool hello_done = s->initiator ? s->got_hello_ack : s->got_auth;
	const char *hello_need = s->initiator ? "HELLO_ACK" : "AUTH";

	switch (type) {
	case KVX_WIRE_BYE:
		return 0;
	case KVX_WIRE_HELLO:
		if (s->initiator)
			return fail(err, errlen, -EPROTO, "HELLO received by the initiator");
		if (s->got_hello)
			return fail(err, errlen, -EPROTO, "second HELLO");
		s->got_hello = true;
		return 0;
	case KVX_WIRE_HELLO_ACK:
		if (!s->initiator)
			return fail(err, errlen, -EPROTO, "HELLO_ACK received by the acceptor");
		if (s->got_hello_ack)
			return fail(err, errlen, -EPROTO, "second HELLO_ACK");
		s->got_hello_ack = true;
		return 0;
	case KVX_WIRE_AUTH:
		if (s->initiator)
			return fail(err, errlen, -EPROTO, "AUTH received by the initiator");
		if (!s->got_hello)
			return fail(err, errlen, -EPROTO, "AUTH before HELLO");
		if (s->got_auth)
			return fail(err, errlen, -EPROTO, "second AUTH");
		s->got_auth = true;
		return 0;
	case KVX_WIRE_QP_INFO:
		if (!hello_done)
			return fail(err, errlen, -EPROTO, "QP_INFO before %s", hello_need);
		if (s->got_qp_info)
			return fail(err, errlen, -EPROTO, "second QP_INFO");
		s->got_qp_info = true;
		return 0;
	case KVX_WIRE_QP_READY:
		if (!hello_done)
			return fail(err, errlen, -EPROTO, "QP_READY before %s", hello_need);
		if (s->got_qp_ready)
			return fail(err, errlen, -EPROTO, "second QP_READY");
		if (!s->got_qp_info)
			return fail(err, errlen, -EPROTO, "QP_READY before QP_INFO");
		s->got_qp_ready = true;
		return 0;
	case KVX_WIRE_ROOM_META:
	case KVX_WIRE_ROOM_STATUS:
	case KVX_WIRE_ABORT:
	case KVX_WIRE_ABORT_ACK:
	case KVX_WIRE_HEARTBEAT:
		if (!s->got_qp_ready)
			return fail(err, errlen, -EPROTO, "%s before QP_READY", tname);
		return 0;
	default:
		return fail(err, errlen, -EPROTO, "unknown message type %u", type);
	}
}
