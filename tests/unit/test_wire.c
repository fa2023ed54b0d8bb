/* SPDX-License-Identifier: Apache-2.0 */
/*
 * core/wire.c: the node <-> node control-protocol codec and sequence checker.
 *
 * Malformed frames are built by raw_encode(), an independent, unvalidating serializer that
 * follows the field order documented in core/wire.h, so decode is tested against bytes the
 * codec's own encoder would refuse to produce.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>

#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "core/room.h"
#include "core/wire.h"

#define BASE_NPAGES 5
#define BASE_POOL_NPAGES 64
#define PAGES_CAP 5000 /* room for an over-maximum page count */

static uint8_t pages_le[PAGES_CAP * 4];

/* ---- little-endian helpers and a raw (unvalidating) frame builder ---- */

static void
le_put(uint8_t *p, uint64_t v, unsigned int n)
{
	assert_true(n <= 8);
	for (unsigned int i = 0; i < n; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

struct frame {
	uint8_t b[KVX_WIRE_FRAME_MAX + 256];
	size_t n;
};

static void
fb_uint(struct frame *f, uint64_t v, unsigned int n)
{
	assert_true(f->n + n <= sizeof(f->b));
	le_put(f->b + f->n, v, n);
	f->n += n;
}

static void
fb_bytes(struct frame *f, const void *p, size_t n)
{
	assert_true(f->n + n <= sizeof(f->b));
	if (n) /* an empty region of a bad case has no pages array */
		memcpy(f->b + f->n, p, n);
	f->n += n;
}

static void
fb_str(struct frame *f, const char *s, size_t size)
{
	size_t n = strnlen(s, size);

	fb_uint(f, n, 2);
	fb_bytes(f, s, n);
}

/* Write the 12-byte header for the payload appended so far. */
static size_t
fb_finish(struct frame *f, uint16_t type)
{
	le_put(f->b, KVX_WIRE_MAGIC, 4);
	le_put(f->b + 4, KVX_WIRE_VERSION, 2);
	le_put(f->b + 6, type, 2);
	le_put(f->b + 8, f->n - KVX_WIRE_HDR_LEN, 4);
	return f->n;
}

static size_t
raw_encode(const struct kvx_wire_msg *m, struct frame *f)
{
	const struct kvx_wire_hello *h = &m->u.hello;
	const struct kvx_wire_qp_info *q = &m->u.qp_info;
	const struct kvx_wire_room_meta *rm = &m->u.room_meta;
	const struct kvx_wire_room_status *rs = &m->u.room_status;

	f->n = KVX_WIRE_HDR_LEN;
	switch (m->type) {
	case KVX_WIRE_HELLO:
	case KVX_WIRE_HELLO_ACK:
		fb_uint(f, h->version, 2);
		fb_uint(f, h->features, 4);
		fb_str(f, h->name, sizeof(h->name));
		fb_uint(f, h->nonce, 8);
		fb_uint(f, h->session, 8);
		if (m->type == KVX_WIRE_HELLO_ACK)
			fb_bytes(f, h->mac, sizeof(h->mac));
		break;
	case KVX_WIRE_AUTH:
		fb_bytes(f, m->u.auth_mac, sizeof(m->u.auth_mac));
		break;
	case KVX_WIRE_QP_INFO:
		fb_uint(f, q->nrails, 1);
		for (unsigned int k = 0; k < q->nrails && k < KVX_WIRE_MAX_RAILS; k++) {
			fb_bytes(f, q->rail[k].gid, 16);
			fb_uint(f, q->rail[k].mtu, 4);
		}
		fb_uint(f, q->ncores, 2);
		for (unsigned int i = 0; i < (unsigned int)q->ncores * q->nrails &&
					 i < KVX_WIRE_MAX_CORES * KVX_WIRE_MAX_RAILS;
		     i++) {
			fb_uint(f, q->qp[i].qpn, 4);
			fb_uint(f, q->qp[i].psn, 4);
		}
		break;
	case KVX_WIRE_ROOM_META:
		fb_uint(f, rm->room, 8);
		fb_uint(f, rm->gen, 4);
		fb_uint(f, rm->token, 4);
		fb_uint(f, rm->src_idx, 2);
		fb_uint(f, rm->nsrc, 2);
		fb_uint(f, rm->dst_rank, 4);
		fb_uint(f, rm->src_rank, 4);
		fb_uint(f, rm->nrails, 1);
		fb_uint(f, rm->nreg, 1);
		for (unsigned int k = 0; k < rm->nreg && k < KVX_WIRE_MAX_REGIONS; k++) {
			const struct kvx_wire_region *g = &rm->reg[k];

			fb_uint(f, g->addr, 8);
			for (unsigned int r = 0; r < rm->nrails && r < KVX_WIRE_MAX_RAILS; r++)
				fb_uint(f, g->rkey[r], 4);
			fb_uint(f, g->page_size, 4);
			fb_uint(f, g->pool_npages, 4);
			fb_uint(f, g->nbufs, 4);
			fb_uint(f, g->src_off, 4);
			fb_uint(f, g->dst_off, 4);
			fb_uint(f, g->len, 4);
			fb_uint(f, g->npages, 4);
			fb_bytes(f, g->pages_le, (size_t)g->npages * 4);
		}
		break;
	case KVX_WIRE_ROOM_STATUS:
		fb_uint(f, rs->room, 8);
		fb_uint(f, rs->gen, 4);
		fb_uint(f, rs->src_idx, 2);
		fb_uint(f, rs->state, 1);
		fb_uint(f, (uint32_t)rs->error, 4);
		fb_str(f, rs->reason, sizeof(rs->reason));
		fb_uint(f, rs->dst_rank, 4);
		fb_uint(f, rs->src_rank, 4);
		break;
	case KVX_WIRE_ABORT:
		fb_uint(f, m->u.abort.room, 8);
		fb_uint(f, m->u.abort.gen, 4);
		fb_str(f, m->u.abort.endpoint, sizeof(m->u.abort.endpoint));
		fb_uint(f, m->u.abort.dst_rank, 4);
		fb_uint(f, m->u.abort.src_rank, 4);
		fb_uint(f, m->u.abort.open_gen, 4);
		break;
	case KVX_WIRE_ABORT_ACK:
		fb_uint(f, m->u.abort_ack.room, 8);
		fb_uint(f, m->u.abort_ack.gen, 4);
		fb_uint(f, m->u.abort_ack.src_idx, 2);
		fb_uint(f, m->u.abort_ack.dst_rank, 4);
		fb_uint(f, m->u.abort_ack.src_rank, 4);
		break;
	case KVX_WIRE_HEARTBEAT:
		fb_uint(f, m->u.heartbeat_ns, 8);
		break;
	case KVX_WIRE_BYE:
		fb_uint(f, m->u.bye_reason, 4);
		break;
	default:
		break;
	}
	return fb_finish(f, m->type);
}

/* ---- valid messages ---- */

static void
set_page(uint32_t i, uint32_t page)
{
	le_put(pages_le + (size_t)i * 4, page, 4);
}

/* A valid message of each type, with distinctive values in every byte of every field. */
static void
base_msg(uint16_t type, struct kvx_wire_msg *m)
{
	static const uint32_t pages[BASE_NPAGES] = {0, 63, 7, 1, 42};

	memset(m, 0, sizeof(*m));
	m->type = type;
	switch (type) {
	case KVX_WIRE_HELLO:
	case KVX_WIRE_HELLO_ACK:
		m->u.hello.version = KVX_WIRE_VERSION;
		m->u.hello.features = 0xa1b2c3d4u;
		snprintf(m->u.hello.name, sizeof(m->u.hello.name), "node-a_1.rack7");
		m->u.hello.nonce = 0x0102030405060708ull;
		m->u.hello.session = 0xf1e2d3c4b5a69788ull;
		for (unsigned int i = 0; i < KVX_WIRE_MAC_LEN; i++)
			m->u.hello.mac[i] = type == KVX_WIRE_HELLO_ACK ? (uint8_t)(0x80 + i) : 0;
		break;
	case KVX_WIRE_AUTH:
		for (unsigned int i = 0; i < KVX_WIRE_MAC_LEN; i++)
			m->u.auth_mac[i] = (uint8_t)(0x40 + 3 * i);
		break;
	case KVX_WIRE_QP_INFO:
		m->u.qp_info.nrails = 2;
		for (unsigned int i = 0; i < 16; i++) {
			m->u.qp_info.rail[0].gid[i] = (uint8_t)(0xf0 + i);
			m->u.qp_info.rail[1].gid[i] = (uint8_t)(0x10 + i);
		}
		m->u.qp_info.rail[0].mtu = 4096;
		m->u.qp_info.rail[1].mtu = 1024;
		m->u.qp_info.ncores = 3;
		for (unsigned int i = 0; i < 6; i++) { /* 3 cores x 2 rails */
			m->u.qp_info.qp[i].qpn = 0x123456 + i;
			m->u.qp_info.qp[i].psn = 0xabcdef - i;
		}
		break;
	case KVX_WIRE_ROOM_META:
		for (unsigned int i = 0; i < BASE_NPAGES; i++)
			set_page(i, pages[i]);
		set_page(PAGES_CAP - 2, 7); /* region 1: two pages of a small pool */
		set_page(PAGES_CAP - 1, 2);
		m->u.room_meta = (struct kvx_wire_room_meta){
			.room = 0x7fedcba987654321ull,
			.gen = 0x11223344u,
			.token = 0xdeadbeefu,
			.src_idx = 2,
			.nsrc = 3,
			.dst_rank = 0x1234,
			.src_rank = 0xfedc,
			.nrails = 2,
			.nreg = 2,
		};
		m->u.room_meta.reg[0] = (struct kvx_wire_region){
			.addr = 0x00007f0012340000ull,
			.rkey = {0x55667788u, 0x99aabbccu},
			.page_size = 16384,
			.pool_npages = BASE_POOL_NPAGES,
			.nbufs = 4,
			.npages = BASE_NPAGES,
			.pages_le = pages_le,
		};
		/* an auxiliary region, head-sliced: bytes 1024.. of the source page land at
		 * 2048.. of each destination page */
		m->u.room_meta.reg[1] = (struct kvx_wire_region){
			.addr = 0x00007f00abcd0000ull,
			.rkey = {0x01020304u, 0x05060708u},
			.page_size = 4096,
			.pool_npages = 8,
			.nbufs = 1,
			.src_off = 1024,
			.dst_off = 2048,
			.len = 2048,
			.npages = 2,
			.pages_le = pages_le + (size_t)(PAGES_CAP - 2) * 4,
		};
		break;
	case KVX_WIRE_ROOM_STATUS:
		m->u.room_status.room = 0x0123456789abcdefull;
		m->u.room_status.gen = 0x99887766u;
		m->u.room_status.src_idx = 15;
		m->u.room_status.state = KVX_ROOM_FAILED;
		m->u.room_status.error = -ETIMEDOUT;
		m->u.room_status.dst_rank = 3;
		m->u.room_status.src_rank = 65535;
		snprintf(m->u.room_status.reason, sizeof(m->u.room_status.reason),
			 "WC error: transport retry counter exceeded (qpn 0x12)");
		break;
	case KVX_WIRE_ABORT:
		m->u.abort.room = 0x42;
		m->u.abort.gen = 7;
		snprintf(m->u.abort.endpoint, sizeof(m->u.abort.endpoint), "decode-0");
		m->u.abort.dst_rank = 1;
		m->u.abort.src_rank = 2;
		m->u.abort.open_gen = 0xfffffff1u;
		break;
	case KVX_WIRE_ABORT_ACK:
		m->u.abort_ack.room = 0x7fffffffffffffffull;
		m->u.abort_ack.gen = 0xfffffffeu;
		m->u.abort_ack.src_idx = 9;
		m->u.abort_ack.dst_rank = 7;
		m->u.abort_ack.src_rank = 6;
		break;
	case KVX_WIRE_HEARTBEAT:
		m->u.heartbeat_ns = 0x1122334455667788ull;
		break;
	case KVX_WIRE_BYE:
		m->u.bye_reason = 0xcafef00du;
		break;
	default:
		break;
	}
}

static void
assert_msg_equal(const struct kvx_wire_msg *a, const struct kvx_wire_msg *b)
{
	assert_int_equal(a->type, b->type);
	switch (a->type) {
	case KVX_WIRE_HELLO:
	case KVX_WIRE_HELLO_ACK:
		assert_int_equal(a->u.hello.version, b->u.hello.version);
		assert_int_equal(a->u.hello.features, b->u.hello.features);
		assert_string_equal(a->u.hello.name, b->u.hello.name);
		assert_true(a->u.hello.nonce == b->u.hello.nonce);
		assert_true(a->u.hello.session == b->u.hello.session);
		assert_memory_equal(a->u.hello.mac, b->u.hello.mac, KVX_WIRE_MAC_LEN);
		break;
	case KVX_WIRE_AUTH:
		assert_memory_equal(a->u.auth_mac, b->u.auth_mac, KVX_WIRE_MAC_LEN);
		break;
	case KVX_WIRE_QP_INFO:
		assert_int_equal(a->u.qp_info.nrails, b->u.qp_info.nrails);
		for (unsigned int k = 0; k < a->u.qp_info.nrails; k++) {
			assert_memory_equal(a->u.qp_info.rail[k].gid, b->u.qp_info.rail[k].gid, 16);
			assert_int_equal(a->u.qp_info.rail[k].mtu, b->u.qp_info.rail[k].mtu);
		}
		assert_int_equal(a->u.qp_info.ncores, b->u.qp_info.ncores);
		for (unsigned int i = 0;
		     i < (unsigned int)a->u.qp_info.ncores * a->u.qp_info.nrails; i++) {
			assert_int_equal(a->u.qp_info.qp[i].qpn, b->u.qp_info.qp[i].qpn);
			assert_int_equal(a->u.qp_info.qp[i].psn, b->u.qp_info.qp[i].psn);
		}
		break;
	case KVX_WIRE_ROOM_META: {
		const struct kvx_wire_room_meta *x = &a->u.room_meta, *y = &b->u.room_meta;

		assert_true(x->room == y->room);
		assert_int_equal(x->gen, y->gen);
		assert_int_equal(x->token, y->token);
		assert_int_equal(x->src_idx, y->src_idx);
		assert_int_equal(x->nsrc, y->nsrc);
		assert_int_equal(x->dst_rank, y->dst_rank);
		assert_int_equal(x->src_rank, y->src_rank);
		assert_int_equal(x->nreg, y->nreg);
		for (unsigned int k = 0; k < x->nreg; k++) {
			const struct kvx_wire_region *g = &x->reg[k], *h = &y->reg[k];

			assert_true(g->addr == h->addr);
			for (unsigned int r = 0; r < x->nrails; r++)
				assert_int_equal(g->rkey[r], h->rkey[r]);
			assert_int_equal(g->page_size, h->page_size);
			assert_int_equal(g->pool_npages, h->pool_npages);
			assert_int_equal(g->nbufs, h->nbufs);
			assert_int_equal(g->src_off, h->src_off);
			assert_int_equal(g->dst_off, h->dst_off);
			assert_int_equal(g->len, h->len);
			assert_int_equal(g->npages, h->npages);
			for (uint32_t i = 0; i < g->npages; i++)
				assert_int_equal(kvx_wire_region_page(g, i),
						 kvx_wire_region_page(h, i));
		}
		break;
	}
	case KVX_WIRE_ROOM_STATUS:
		assert_true(a->u.room_status.room == b->u.room_status.room);
		assert_int_equal(a->u.room_status.gen, b->u.room_status.gen);
		assert_int_equal(a->u.room_status.src_idx, b->u.room_status.src_idx);
		assert_int_equal(a->u.room_status.state, b->u.room_status.state);
		assert_int_equal(a->u.room_status.error, b->u.room_status.error);
		assert_string_equal(a->u.room_status.reason, b->u.room_status.reason);
		assert_int_equal(a->u.room_status.dst_rank, b->u.room_status.dst_rank);
		assert_int_equal(a->u.room_status.src_rank, b->u.room_status.src_rank);
		break;
	case KVX_WIRE_ABORT:
		assert_true(a->u.abort.room == b->u.abort.room);
		assert_int_equal(a->u.abort.gen, b->u.abort.gen);
		assert_string_equal(a->u.abort.endpoint, b->u.abort.endpoint);
		assert_int_equal(a->u.abort.dst_rank, b->u.abort.dst_rank);
		assert_int_equal(a->u.abort.src_rank, b->u.abort.src_rank);
		assert_int_equal(a->u.abort.open_gen, b->u.abort.open_gen);
		break;
	case KVX_WIRE_ABORT_ACK:
		assert_true(a->u.abort_ack.room == b->u.abort_ack.room);
		assert_int_equal(a->u.abort_ack.gen, b->u.abort_ack.gen);
		assert_int_equal(a->u.abort_ack.src_idx, b->u.abort_ack.src_idx);
		assert_int_equal(a->u.abort_ack.dst_rank, b->u.abort_ack.dst_rank);
		assert_int_equal(a->u.abort_ack.src_rank, b->u.abort_ack.src_rank);
		break;
	case KVX_WIRE_HEARTBEAT:
		assert_true(a->u.heartbeat_ns == b->u.heartbeat_ns);
		break;
	case KVX_WIRE_BYE:
		assert_int_equal(a->u.bye_reason, b->u.bye_reason);
		break;
	default:
		break;
	}
}

/* encode -> decode -> equal fields; the encoding equals the raw reference bytes. */
static void
roundtrip(const struct kvx_wire_msg *m)
{
	static uint8_t buf[KVX_WIRE_FRAME_MAX];
	static struct frame ref;
	struct kvx_wire_msg out;
	char err[160] = "";
	int n, rc;

	n = kvx_wire_encode(m, buf, sizeof(buf), err, sizeof(err));
	if (n < 0)
		fail_msg("encode %s: %d %s", kvx_wire_type_str(m->type), n, err);
	assert_int_equal((size_t)n, raw_encode(m, &ref));
	assert_memory_equal(buf, ref.b, n);

	memset(&out, 0xa5, sizeof(out));
	rc = kvx_wire_decode(buf, n, &out, err, sizeof(err));
	if (rc != n)
		fail_msg("decode %s: %d %s", kvx_wire_type_str(m->type), rc, err);
	assert_msg_equal(m, &out);
	if (m->type == KVX_WIRE_ROOM_META)
		assert_ptr_equal(out.u.room_meta.reg[0].pages_le, buf + KVX_WIRE_HDR_LEN + 30 + 44);
}

/* ---- tests: round trips and layout ---- */

static void
test_type_str(void **state)
{
	assert_string_equal(kvx_wire_type_str(KVX_WIRE_HELLO), "HELLO");
	assert_string_equal(kvx_wire_type_str(KVX_WIRE_ROOM_META), "ROOM_META");
	assert_string_equal(kvx_wire_type_str(KVX_WIRE_BYE), "BYE");
	assert_string_equal(kvx_wire_type_str(0), "UNKNOWN");
	assert_string_equal(kvx_wire_type_str(KVX_WIRE_TYPE_MAX + 1), "UNKNOWN");
}

static void
test_roundtrip_every_type(void **state)
{
	struct kvx_wire_msg m;

	for (uint16_t t = 1; t <= KVX_WIRE_TYPE_MAX; t++) {
		base_msg(t, &m);
		roundtrip(&m);
	}
}

static void
test_roundtrip_maxima(void **state)
{
	struct kvx_wire_msg m;

	base_msg(KVX_WIRE_HELLO_ACK, &m);
	memset(m.u.hello.name, 'z', KVX_WIRE_NAME_MAX);
	m.u.hello.name[KVX_WIRE_NAME_MAX] = '\0';
	m.u.hello.version = 0xffff;
	roundtrip(&m);

	base_msg(KVX_WIRE_QP_INFO, &m);
	m.u.qp_info.ncores = KVX_WIRE_MAX_CORES;
	m.u.qp_info.nrails = KVX_WIRE_MAX_RAILS;
	for (unsigned int k = 0; k < KVX_WIRE_MAX_RAILS; k++)
		m.u.qp_info.rail[k].mtu = 256u << k;
	for (unsigned int i = 0; i < KVX_WIRE_MAX_CORES * KVX_WIRE_MAX_RAILS; i++) {
		m.u.qp_info.qp[i].qpn = 0xffffff - i;
		m.u.qp_info.qp[i].psn = i;
	}
	roundtrip(&m);

	base_msg(KVX_WIRE_ROOM_META, &m);
	m.u.room_meta.nreg = 1;
	m.u.room_meta.reg[0].npages = KVX_WIRE_MAX_PAGES;
	m.u.room_meta.reg[0].pool_npages = 0xffffffffu;
	m.u.room_meta.reg[0].nbufs = 1;
	m.u.room_meta.reg[0].page_size = 1;
	m.u.room_meta.reg[0].addr = 0;
	m.u.room_meta.nsrc = 16;
	m.u.room_meta.src_idx = 15;
	m.u.room_meta.dst_rank = KVX_WIRE_RANK_MAX;
	for (uint32_t i = 0; i < KVX_WIRE_MAX_PAGES; i++)
		set_page(i, 0xfffffffeu - i * 977);
	roundtrip(&m);

	base_msg(KVX_WIRE_ROOM_STATUS, &m);
	memset(m.u.room_status.reason, '~', KVX_WIRE_REASON_MAX);
	m.u.room_status.reason[KVX_WIRE_REASON_MAX] = '\0';
	m.u.room_status.error = 0;
	m.u.room_status.state = KVX_ROOM_STATE_COUNT - 1;
	roundtrip(&m);

	base_msg(KVX_WIRE_ROOM_STATUS, &m);
	m.u.room_status.reason[0] = '\0'; /* an empty reason is fine */
	m.u.room_status.error = INT32_MIN;
	roundtrip(&m);
}

/* The exact bytes: little-endian header and fields regardless of the host. */
static void
test_little_endian_layout(void **state)
{
	static const uint8_t want[] = {
		'K',  'V',  'X',  '1',				/* magic */
		0x06, 0x00,					/* version */
		0x08, 0x00,					/* type ABORT_ACK */
		0x16, 0x00, 0x00, 0x00,				/* payload length 22 */
		0x08, 0x07, 0x06, 0x05, 0x04, 0x03, 0x02, 0x01, /* room */
		0xd4, 0xc3, 0xb2, 0xa1,				/* gen */
		0x0b, 0x00,					/* src_idx */
		0x02, 0x01, 0x00, 0x00,				/* dst_rank */
		0xff, 0xff, 0x00, 0x00,				/* src_rank */
	};
	struct kvx_wire_msg m = {.type = KVX_WIRE_ABORT_ACK};
	uint8_t buf[64];
	char err[160];

	m.u.abort_ack.room = 0x0102030405060708ull;
	m.u.abort_ack.gen = 0xa1b2c3d4u;
	m.u.abort_ack.src_idx = 11;
	m.u.abort_ack.dst_rank = 0x102;
	m.u.abort_ack.src_rank = 0xffff;
	assert_int_equal(kvx_wire_encode(&m, buf, sizeof(buf), err, sizeof(err)), sizeof(want));
	assert_memory_equal(buf, want, sizeof(want));
}

/* ---- tests: framing ---- */

static void
test_prefixes_need_more(void **state)
{
	static uint8_t buf[KVX_WIRE_FRAME_MAX], pre[KVX_WIRE_FRAME_MAX];
	struct kvx_wire_msg m, out;
	char err[160];
	int n;

	for (uint16_t t = 1; t <= KVX_WIRE_TYPE_MAX; t++) {
		base_msg(t, &m);
		n = kvx_wire_encode(&m, buf, sizeof(buf), err, sizeof(err));
		assert_true(n >= KVX_WIRE_HDR_LEN);
		for (int len = 0; len < n; len++) {
			int rc;

			/* Bytes past the prefix are 0xff: reading them would change the answer
			 * (a 0xffffffff payload length is -EMSGSIZE). */
			memcpy(pre, buf, len);
			memset(pre + len, 0xff, sizeof(pre) - len);
			rc = kvx_wire_decode(pre, len, &out, err, sizeof(err));

			if (rc != 0)
				fail_msg("%s prefix %d/%d: %d %s", kvx_wire_type_str(t), len, n, rc,
					 err);
		}
		assert_int_equal(kvx_wire_decode(buf, n, &out, err, sizeof(err)), n);
		assert_msg_equal(&m, &out);
	}
}

static void
test_back_to_back(void **state)
{
	uint8_t buf[1024];
	struct kvx_wire_msg a, b, out;
	char err[160];
	int na, nb;

	base_msg(KVX_WIRE_ROOM_META, &a);
	base_msg(KVX_WIRE_HEARTBEAT, &b);
	na = kvx_wire_encode(&a, buf, sizeof(buf), err, sizeof(err));
	assert_true(na > 0);
	nb = kvx_wire_encode(&b, buf + na, sizeof(buf) - na, err, sizeof(err));
	assert_true(nb > 0);

	/* Both frames plus half a third: the first call consumes exactly the first frame. */
	assert_int_equal(kvx_wire_decode(buf, na + nb + 5, &out, err, sizeof(err)), na);
	assert_msg_equal(&a, &out);
	assert_int_equal(kvx_wire_decode(buf + na, nb + 5, &out, err, sizeof(err)), nb);
	assert_msg_equal(&b, &out);
	assert_int_equal(kvx_wire_decode(buf + na + nb, 5, &out, err, sizeof(err)), 0);
}

static void
expect_decode(const uint8_t *buf, size_t len, int want_rc, const char *want_msg)
{
	struct kvx_wire_msg out;
	char err[256] = "";
	int rc = kvx_wire_decode(buf, len, &out, err, sizeof(err));

	if (rc != want_rc)
		fail_msg("decode: rc %d, want %d (err \"%s\", want \"%s\")", rc, want_rc, err,
			 want_msg);
	if (strstr(err, want_msg) == NULL)
		fail_msg("decode: err \"%s\" lacks \"%s\"", err, want_msg);
}

static void
expect_encode(const struct kvx_wire_msg *m, int want_rc, const char *want_msg)
{
	uint8_t buf[KVX_WIRE_FRAME_MAX];
	char err[256] = "";
	int rc = kvx_wire_encode(m, buf, sizeof(buf), err, sizeof(err));

	if (rc != want_rc)
		fail_msg("encode: rc %d, want %d (err \"%s\", want \"%s\")", rc, want_rc, err,
			 want_msg);
	if (strstr(err, want_msg) == NULL)
		fail_msg("encode: err \"%s\" lacks \"%s\"", err, want_msg);
}

/* The payload length claims fewer bytes than the fields need: the first missing field is named. */
static void
test_truncated_payload(void **state)
{
	static const struct {
		uint16_t type;
		size_t cut; /* bytes removed from the end of the payload */
		const char *field;
	} cases[] = {
		{KVX_WIRE_HEARTBEAT, 1, "HEARTBEAT: payload truncated at sent_ns"},
		{KVX_WIRE_BYE, 4, "BYE: payload truncated at reason"},
		{KVX_WIRE_HELLO, 8, "HELLO: payload truncated at session"},
		{KVX_WIRE_HELLO, 8 + 8 + 3, "HELLO: payload truncated at name"},
		{KVX_WIRE_QP_INFO, 2, "QP_INFO: payload truncated at qp[5].psn"},
		{KVX_WIRE_ROOM_META, 1, "ROOM_META: payload truncated at pages"},
		/* region 1's two pages, and one byte of its npages */
		{KVX_WIRE_ROOM_META, 2 * 4 + 1, "ROOM_META: payload truncated at npages"},
		{KVX_WIRE_ROOM_META, 2 * 4 + 44 + 1, "ROOM_META: payload truncated at pages"},
		{KVX_WIRE_ROOM_STATUS, 1, "ROOM_STATUS: payload truncated at src_rank"},
		{KVX_WIRE_ROOM_STATUS, 8 + 1, "ROOM_STATUS: payload truncated at reason"},
		{KVX_WIRE_ABORT, 3, "ABORT: payload truncated at open_gen"},
		{KVX_WIRE_ABORT, 4 + 3, "ABORT: payload truncated at src_rank"},
		{KVX_WIRE_ABORT, 12 + 3, "ABORT: payload truncated at endpoint"},
		{KVX_WIRE_ABORT_ACK, 1, "ABORT_ACK: payload truncated at src_rank"},
		{KVX_WIRE_ABORT_ACK, 8 + 1, "ABORT_ACK: payload truncated at src_idx"},
	};
	static struct frame f;
	struct kvx_wire_msg m;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		size_t n;

		base_msg(cases[i].type, &m);
		n = raw_encode(&m, &f) - cases[i].cut;
		le_put(f.b + 8, n - KVX_WIRE_HDR_LEN, 4);
		/* The whole (short) frame is there, followed by unrelated bytes. */
		expect_decode(f.b, n + 8, -EBADMSG, cases[i].field);
	}
}

static void
test_trailing_byte(void **state)
{
	static struct frame f;
	struct kvx_wire_msg m;

	for (uint16_t t = 1; t <= KVX_WIRE_TYPE_MAX; t++) {
		char want[64];

		base_msg(t, &m);
		raw_encode(&m, &f);
		fb_uint(&f, 0, 1);
		fb_finish(&f, t);
		snprintf(want, sizeof(want), "%s: 1 trailing byte", kvx_wire_type_str(t));
		expect_decode(f.b, f.n, -EBADMSG, want);
	}
}

/* An oversized length is refused from the 12-byte header alone. */
static void
test_oversized_length_header_only(void **state)
{
	uint8_t hdr[KVX_WIRE_HDR_LEN];

	le_put(hdr, KVX_WIRE_MAGIC, 4);
	le_put(hdr + 4, KVX_WIRE_VERSION, 2);
	le_put(hdr + 6, KVX_WIRE_ROOM_META, 2);

	le_put(hdr + 8, KVX_WIRE_FRAME_MAX - KVX_WIRE_HDR_LEN + 1, 4);
	expect_decode(hdr, sizeof(hdr), -EMSGSIZE, "ROOM_META: frame length 65537");
	le_put(hdr + 8, 0xffffffffu, 4);
	expect_decode(hdr, sizeof(hdr), -EMSGSIZE, "exceeds 65536");
	/* Exactly the maximum is a legal length: wait for the payload. */
	le_put(hdr + 8, KVX_WIRE_FRAME_MAX - KVX_WIRE_HDR_LEN, 4);
	expect_decode(hdr, sizeof(hdr), 0, "");
}

static void
test_bad_header(void **state)
{
	static struct frame f;
	struct kvx_wire_msg m;
	size_t n;

	base_msg(KVX_WIRE_HEARTBEAT, &m);
	n = raw_encode(&m, &f);

	le_put(f.b, 0x3258564bu, 4); /* "KVX2" */
	expect_decode(f.b, n, -EPROTO, "bad magic 0x3258564b");
	expect_decode(f.b, KVX_WIRE_HDR_LEN, -EPROTO, "magic"); /* header alone is enough */
	le_put(f.b, KVX_WIRE_MAGIC, 4);

	le_put(f.b + 4, 1, 2); /* the unauthenticated protocol of earlier kvx */
	expect_decode(f.b, n, -EPROTO, "version 1");
	le_put(f.b + 4, 2, 2); /* before ranks and regions */
	expect_decode(f.b, n, -EPROTO, "version 2");
	le_put(f.b + 4, 3, 2); /* before rails */
	expect_decode(f.b, n, -EPROTO, "version 3");
	le_put(f.b + 4, 4, 2); /* before ABORT named its ROOM_META's generation */
	expect_decode(f.b, n, -EPROTO, "version 4");
	le_put(f.b + 4, 5, 2); /* before a source ended its share with an immediate per rail */
	expect_decode(f.b, n, -EPROTO, "version 5");
	le_put(f.b + 4, 7, 2);
	expect_decode(f.b, n, -EPROTO, "version 7");
	le_put(f.b + 4, 0, 2);
	expect_decode(f.b, KVX_WIRE_HDR_LEN, -EPROTO, "version 0");
	le_put(f.b + 4, KVX_WIRE_VERSION, 2);

	le_put(f.b + 6, 0, 2);
	expect_decode(f.b, n, -EPROTO, "unknown message type 0");
	le_put(f.b + 6, KVX_WIRE_TYPE_MAX + 1, 2);
	expect_decode(f.b, n, -EPROTO, "unknown message type 12");
	le_put(f.b + 6, 0xffff, 2);
	expect_decode(f.b, KVX_WIRE_HDR_LEN, -EPROTO, "unknown message type 65535");

	/* A bad magic wins over an oversized length. */
	le_put(f.b, 0, 4);
	le_put(f.b + 8, 0xffffffffu, 4);
	expect_decode(f.b, KVX_WIRE_HDR_LEN, -EPROTO, "magic");
}

/* ---- tests: field values (decode -EBADMSG and encode -EINVAL, same message) ---- */

enum field {
	F_HELLO_VERSION,
	F_HELLO_NAME,
	F_QP_MTU,
	F_QP_NCORES,
	F_QP_NRAILS,
	F_RM_NRAILS,
	F_QP_QPN2,
	F_QP_PSN0,
	F_RM_ROOM,
	F_RM_NSRC,
	F_RM_SRC_IDX,
	F_RM_PAGE_SIZE,
	F_RM_POOL_NPAGES,
	F_RM_NBUFS,
	F_RM_ADDR,
	F_RM_NPAGES,
	F_RM_PAGE3,
	F_RM_NREG,
	F_RM_DST_RANK,
	F_RM_SRC_RANK,
	F_RM_R1_LEN,
	F_RM_R1_SRC_OFF,
	F_RM_R1_DST_OFF,
	F_RM_R1_NPAGES,
	F_RS_ROOM,
	F_RS_SRC_IDX,
	F_RS_STATE,
	F_RS_ERROR,
	F_RS_REASON,
	F_AB_ROOM,
	F_AB_ENDPOINT,
	F_AA_ROOM,
	F_AA_SRC_IDX,
	F_RS_DST_RANK,
	F_AB_SRC_RANK,
	F_AA_DST_RANK,
};

struct bad_case {
	uint16_t type;
	enum field field;
	uint64_t value;	  /* numeric fields */
	const char *text; /* string fields, copied without NUL when it fills the array */
	const char *want; /* substring of the error */
};

static void
copy_text(char *dst, size_t size, const char *text)
{
	size_t n = strlen(text);

	assert_true(n <= size);
	memset(dst, 0, size);
	memcpy(dst, text, n);
}

static void
apply(struct kvx_wire_msg *m, const struct bad_case *c)
{
	struct kvx_wire_room_meta *rm = &m->u.room_meta;

	base_msg(c->type, m);
	switch (c->field) {
	case F_HELLO_VERSION:
		m->u.hello.version = (uint16_t)c->value;
		break;
	case F_HELLO_NAME:
		copy_text(m->u.hello.name, sizeof(m->u.hello.name), c->text);
		break;
	case F_QP_MTU:
		m->u.qp_info.rail[1].mtu = (uint32_t)c->value;
		break;
	case F_QP_NRAILS:
		m->u.qp_info.nrails = (uint8_t)c->value;
		break;
	case F_RM_NRAILS:
		rm->nrails = (uint8_t)c->value;
		break;
	case F_QP_NCORES:
		m->u.qp_info.ncores = (uint16_t)c->value;
		break;
	case F_QP_QPN2:
		m->u.qp_info.qp[2].qpn = (uint32_t)c->value;
		break;
	case F_QP_PSN0:
		m->u.qp_info.qp[0].psn = (uint32_t)c->value;
		break;
	case F_RM_ROOM:
		rm->room = c->value;
		break;
	case F_RM_NSRC:
		rm->nsrc = (uint16_t)c->value;
		break;
	case F_RM_SRC_IDX:
		rm->src_idx = (uint16_t)c->value;
		break;
	case F_RM_PAGE_SIZE:
		rm->reg[0].page_size = (uint32_t)c->value;
		break;
	case F_RM_POOL_NPAGES:
		rm->reg[0].pool_npages = (uint32_t)c->value;
		break;
	case F_RM_NBUFS:
		rm->reg[0].nbufs = (uint32_t)c->value;
		break;
	case F_RM_ADDR:
		rm->reg[0].addr = c->value;
		break;
	case F_RM_NPAGES:
		rm->reg[0].npages = (uint32_t)c->value;
		break;
	case F_RM_PAGE3:
		set_page(3, (uint32_t)c->value);
		break;
	case F_RM_NREG:
		rm->nreg = (uint8_t)c->value;
		break;
	case F_RM_DST_RANK:
		rm->dst_rank = (uint32_t)c->value;
		break;
	case F_RM_SRC_RANK:
		rm->src_rank = (uint32_t)c->value;
		break;
	case F_RM_R1_LEN:
		rm->reg[1].len = (uint32_t)c->value;
		break;
	case F_RM_R1_SRC_OFF:
		rm->reg[1].src_off = (uint32_t)c->value;
		break;
	case F_RM_R1_DST_OFF:
		rm->reg[1].dst_off = (uint32_t)c->value;
		break;
	case F_RM_R1_NPAGES:
		rm->reg[1].npages = (uint32_t)c->value;
		break;
	case F_RS_DST_RANK:
		m->u.room_status.dst_rank = (uint32_t)c->value;
		break;
	case F_AB_SRC_RANK:
		m->u.abort.src_rank = (uint32_t)c->value;
		break;
	case F_AA_DST_RANK:
		m->u.abort_ack.dst_rank = (uint32_t)c->value;
		break;
	case F_RS_ROOM:
		m->u.room_status.room = c->value;
		break;
	case F_RS_SRC_IDX:
		m->u.room_status.src_idx = (uint16_t)c->value;
		break;
	case F_RS_STATE:
		m->u.room_status.state = (uint8_t)c->value;
		break;
	case F_RS_ERROR:
		m->u.room_status.error = (int32_t)c->value;
		break;
	case F_RS_REASON:
		copy_text(m->u.room_status.reason, sizeof(m->u.room_status.reason), c->text);
		break;
	case F_AB_ROOM:
		m->u.abort.room = c->value;
		break;
	case F_AB_ENDPOINT:
		copy_text(m->u.abort.endpoint, sizeof(m->u.abort.endpoint), c->text);
		break;
	case F_AA_ROOM:
		m->u.abort_ack.room = c->value;
		break;
	case F_AA_SRC_IDX:
		m->u.abort_ack.src_idx = (uint16_t)c->value;
		break;
	}
}

static void
run_bad_cases(const struct bad_case *cases, size_t n)
{
	static struct frame f;
	struct kvx_wire_msg m;

	for (size_t i = 0; i < n; i++) {
		size_t len;

		apply(&m, &cases[i]);
		len = raw_encode(&m, &f);
		expect_decode(f.b, len, -EBADMSG, cases[i].want);
		apply(&m, &cases[i]);
		expect_encode(&m, -EINVAL, cases[i].want);
	}
	/* Negative control: the unmodified messages are accepted by both. */
	for (uint16_t t = 1; t <= KVX_WIRE_TYPE_MAX; t++) {
		base_msg(t, &m);
		roundtrip(&m);
	}
}

#define RUN_BAD(cases) run_bad_cases((cases), sizeof(cases) / sizeof((cases)[0]))

static void
test_bad_counts(void **state)
{
	static const struct bad_case cases[] = {
		{KVX_WIRE_QP_INFO, F_QP_NCORES, 0, NULL, "QP_INFO: ncores 0 out of range 1..8"},
		{KVX_WIRE_QP_INFO, F_QP_NCORES, 9, NULL, "QP_INFO: ncores 9 out of range 1..8"},
		{KVX_WIRE_ROOM_META, F_RM_NPAGES, 0, NULL, "ROOM_META: region 0: npages is 0"},
		{KVX_WIRE_ROOM_META, F_RM_NPAGES, 4097, NULL, "pages in all regions exceed 4096"},
		{KVX_WIRE_ROOM_META, F_RM_NPAGES, 5000, NULL, "pages in all regions exceed 4096"},
		/* the regions together: 4095 + 2 */
		{KVX_WIRE_ROOM_META, F_RM_NPAGES, 4095, NULL, "pages in all regions exceed 4096"},
		{KVX_WIRE_ROOM_META, F_RM_R1_NPAGES, 0, NULL, "ROOM_META: region 1: npages is 0"},
		{KVX_WIRE_ROOM_META, F_RM_NREG, 0, NULL, "ROOM_META: nreg 0 out of range 1..4"},
		{KVX_WIRE_ROOM_META, F_RM_NREG, 5, NULL, "ROOM_META: nreg 5 out of range 1..4"},
		{KVX_WIRE_ROOM_META, F_RM_DST_RANK, 65536, NULL,
		 "ROOM_META: dst_rank 65536 exceeds 65535"},
		{KVX_WIRE_ROOM_META, F_RM_SRC_RANK, 0xffffffffu, NULL,
		 "ROOM_META: src_rank 4294967295 exceeds 65535"},
		{KVX_WIRE_ROOM_STATUS, F_RS_DST_RANK, 65536, NULL,
		 "ROOM_STATUS: dst_rank 65536 exceeds 65535"},
		{KVX_WIRE_ABORT, F_AB_SRC_RANK, 1u << 31, NULL,
		 "ABORT: src_rank 2147483648 exceeds 65535"},
		{KVX_WIRE_ABORT_ACK, F_AA_DST_RANK, 70000, NULL,
		 "ABORT_ACK: dst_rank 70000 exceeds 65535"},
		/* a slice must fit the destination page; length 0 (the whole page) has no offsets
		 */
		{KVX_WIRE_ROOM_META, F_RM_R1_LEN, 2049, NULL,
		 "ROOM_META: region 1: slice 2048+2049 (source offset 1024) does not fit a "
		 "4096-byte "
		 "page"},
		{KVX_WIRE_ROOM_META, F_RM_R1_DST_OFF, 0xfffff800u, NULL,
		 "ROOM_META: region 1: slice 4294965248+2048"},
		{KVX_WIRE_ROOM_META, F_RM_R1_SRC_OFF, 0xfffff801u, NULL,
		 "ROOM_META: region 1: slice 2048+2048 (source offset 4294965249)"},
		{KVX_WIRE_ROOM_META, F_RM_R1_LEN, 0, NULL,
		 "ROOM_META: region 1: slice 2048+0 (source offset 1024) does not fit"},
		{KVX_WIRE_ROOM_META, F_RM_NSRC, 0, NULL, "ROOM_META: nsrc 0 out of range 1..16"},
		{KVX_WIRE_ROOM_META, F_RM_NSRC, 17, NULL, "ROOM_META: nsrc 17 out of range 1..16"},
		{KVX_WIRE_ROOM_META, F_RM_SRC_IDX, 3, NULL,
		 "ROOM_META: src_idx 3 not below nsrc 3"},
		{KVX_WIRE_ROOM_META, F_RM_PAGE_SIZE, 0, NULL,
		 "ROOM_META: region 0: page_size, pool_npages and nbufs must be non-zero (0, 64, "
		 "4)"},
		{KVX_WIRE_ROOM_META, F_RM_POOL_NPAGES, 0, NULL,
		 "ROOM_META: region 0: page_size, pool_npages and nbufs must be non-zero (16384, "
		 "0, "
		 "4)"},
		{KVX_WIRE_ROOM_META, F_RM_NBUFS, 0, NULL,
		 "ROOM_META: region 0: page_size, pool_npages and nbufs must be non-zero (16384, "
		 "64, 0)"},
		{KVX_WIRE_ROOM_META, F_RM_ADDR, 0xfffffffffff00000ull, NULL,
		 "ROOM_META: region 0: addr 0xfffffffffff00000 + nbufs 4 x pool_npages 64 x "
		 "page_size 16384 overflows 64 bits"},
		{KVX_WIRE_QP_INFO, F_QP_MTU, 0, NULL, "QP_INFO: rail 1: mtu 0 is not"},
		{KVX_WIRE_QP_INFO, F_QP_MTU, 1500, NULL, "QP_INFO: rail 1: mtu 1500 is not"},
		{KVX_WIRE_QP_INFO, F_QP_NRAILS, 0, NULL, "QP_INFO: nrails 0 out of range 1..4"},
		{KVX_WIRE_QP_INFO, F_QP_NRAILS, 5, NULL, "QP_INFO: nrails 5 out of range 1..4"},
		{KVX_WIRE_ROOM_META, F_RM_NRAILS, 0, NULL, "ROOM_META: nrails 0 out of range 1..4"},
		{KVX_WIRE_ROOM_META, F_RM_NRAILS, 5, NULL, "ROOM_META: nrails 5 out of range 1..4"},
		{KVX_WIRE_QP_INFO, F_QP_QPN2, 0x1000000, NULL,
		 "QP_INFO: qp[2].qpn 0x1000000 exceeds 24 bits"},
		{KVX_WIRE_QP_INFO, F_QP_PSN0, 0xffffffff, NULL, "QP_INFO: qp[0].psn 0xffffffff"},
		{KVX_WIRE_HELLO, F_HELLO_VERSION, 0, NULL, "HELLO: version 0 is invalid"},
		{KVX_WIRE_ROOM_STATUS, F_RS_SRC_IDX, 16, NULL,
		 "ROOM_STATUS: src_idx 16 exceeds 15"},
		{KVX_WIRE_ROOM_STATUS, F_RS_STATE, KVX_ROOM_STATE_COUNT, NULL,
		 "ROOM_STATUS: state 7 is not a room state"},
		{KVX_WIRE_ROOM_STATUS, F_RS_ERROR, 5, NULL, "ROOM_STATUS: error 5 is not"},
		{KVX_WIRE_ABORT_ACK, F_AA_SRC_IDX, 16, NULL, "ABORT_ACK: src_idx 16 exceeds 15"},
	};

	RUN_BAD(cases);
}

static void
test_bad_strings(void **state)
{
	static const struct bad_case cases[] = {
		{KVX_WIRE_HELLO, F_HELLO_NAME, 0,
		 "0123456789012345678901234567890123456789012345678901234567890123",
		 "HELLO: name length 64 exceeds 63"},
		{KVX_WIRE_HELLO_ACK, F_HELLO_NAME, 0,
		 "0123456789012345678901234567890123456789012345678901234567890123",
		 "HELLO_ACK: name length 64 exceeds 63"},
		{KVX_WIRE_ABORT, F_AB_ENDPOINT, 0,
		 "0123456789012345678901234567890123456789012345678901234567890123",
		 "ABORT: endpoint length 64 exceeds 63"},
		{KVX_WIRE_ROOM_STATUS, F_RS_REASON, 0,
		 "012345678901234567890123456789012345678901234567890123456789012345678901234567890"
		 "1"
		 "23456789012345",
		 "ROOM_STATUS: reason length 96 exceeds 95"},
		{KVX_WIRE_ROOM_STATUS, F_RS_REASON, 0, "line one\nline two",
		 "ROOM_STATUS: reason has non-printable byte 0x0a at 8"},
	};

	RUN_BAD(cases);
}

/* A string length far over its maximum, and one with an embedded NUL (decode only). */
static void
test_bad_string_encodings(void **state)
{
	static struct frame f;

	f.n = KVX_WIRE_HDR_LEN;
	fb_uint(&f, 1, 2);
	fb_uint(&f, 0, 4);
	fb_uint(&f, 60000, 2);
	for (int i = 0; i < 60000; i++)
		fb_uint(&f, 'a', 1);
	fb_uint(&f, 0, 8); /* nonce */
	fb_uint(&f, 0, 8); /* session */
	fb_finish(&f, KVX_WIRE_HELLO);
	expect_decode(f.b, f.n, -EBADMSG, "HELLO: name length 60000 exceeds 63");

	f.n = KVX_WIRE_HDR_LEN;
	fb_uint(&f, 5, 8);
	fb_uint(&f, 1, 4);
	fb_uint(&f, 3, 2);
	fb_bytes(&f, "a\0b", 3);
	fb_finish(&f, KVX_WIRE_ABORT);
	expect_decode(f.b, f.n, -EBADMSG, "ABORT: endpoint contains a NUL byte");
}

static void
test_bad_names(void **state)
{
	static const struct bad_case cases[] = {
		{KVX_WIRE_HELLO, F_HELLO_NAME, 0, "", "HELLO: name is empty"},
		{KVX_WIRE_HELLO, F_HELLO_NAME, 0, "node a",
		 "HELLO: name has invalid byte 0x20 at 4"},
		{KVX_WIRE_HELLO_ACK, F_HELLO_NAME, 0, "../etc",
		 "HELLO_ACK: name has invalid byte 0x2f"},
		{KVX_WIRE_HELLO, F_HELLO_NAME, 0, "n\xc3\xa9",
		 "HELLO: name has invalid byte 0xc3 at 1"},
		{KVX_WIRE_ABORT, F_AB_ENDPOINT, 0, "", "ABORT: endpoint is empty"},
		{KVX_WIRE_ABORT, F_AB_ENDPOINT, 0, "host:4000",
		 "ABORT: endpoint has invalid byte 0x3a at 4"},
	};

	RUN_BAD(cases);
}

static void
test_room_top_bit(void **state)
{
	static const struct bad_case cases[] = {
		{KVX_WIRE_ROOM_META, F_RM_ROOM, 1ull << 63, NULL,
		 "ROOM_META: room 0x8000000000000000 has the top bit set"},
		{KVX_WIRE_ROOM_STATUS, F_RS_ROOM, UINT64_MAX, NULL,
		 "ROOM_STATUS: room 0xffffffffffffffff has the top bit set"},
		{KVX_WIRE_ABORT, F_AB_ROOM, 1ull << 63, NULL, "ABORT: room 0x8000000000000000"},
		{KVX_WIRE_ABORT_ACK, F_AA_ROOM, (1ull << 63) | 1, NULL,
		 "ABORT_ACK: room 0x8000000000000001"},
	};

	RUN_BAD(cases);
}

static void
test_page_outside_pool(void **state)
{
	static const struct bad_case cases[] = {
		{KVX_WIRE_ROOM_META, F_RM_PAGE3, BASE_POOL_NPAGES, NULL,
		 "ROOM_META: region 0: pages[3] 64 not below pool_npages 64"},
		{KVX_WIRE_ROOM_META, F_RM_PAGE3, 0xffffffffu, NULL,
		 "ROOM_META: region 0: pages[3] 4294967295 not below pool_npages 64"},
		/* Shrinking the pool below page 63 (pages[1]) makes that page the offender. */
		{KVX_WIRE_ROOM_META, F_RM_POOL_NPAGES, 63, NULL,
		 "ROOM_META: region 0: pages[1] 63 not below pool_npages 63"},
	};

	RUN_BAD(cases);
}

/* ---- tests: encode ---- */

static void
test_encode_enospc(void **state)
{
	uint8_t buf[256];
	struct kvx_wire_msg m;
	char err[160];

	for (uint16_t t = 1; t <= KVX_WIRE_TYPE_MAX; t++) {
		int n;

		base_msg(t, &m);
		n = kvx_wire_encode(&m, buf, sizeof(buf), err, sizeof(err));
		assert_true(n > 0);
		for (int cap = 0; cap < n; cap++) {
			int rc;

			memset(buf, 0xee, sizeof(buf));
			err[0] = '\0';
			rc = kvx_wire_encode(&m, buf, cap, err, sizeof(err));
			if (rc != -ENOSPC)
				fail_msg("%s cap %d/%d: rc %d", kvx_wire_type_str(t), cap, n, rc);
			assert_non_null(strstr(err, kvx_wire_type_str(t)));
			for (size_t j = cap; j < sizeof(buf); j++)
				assert_int_equal(buf[j], 0xee); /* nothing written past cap */
		}
		assert_int_equal(kvx_wire_encode(&m, buf, n, err, sizeof(err)), n);
	}
}

static void
test_encode_einval(void **state)
{
	struct kvx_wire_msg m;

	memset(&m, 0, sizeof(m));
	m.type = 0;
	expect_encode(&m, -EINVAL, "unknown message type 0");
	m.type = KVX_WIRE_TYPE_MAX + 1;
	expect_encode(&m, -EINVAL, "unknown message type 12");

	/* A name that fills its array without a NUL is over the maximum. */
	base_msg(KVX_WIRE_HELLO, &m);
	memset(m.u.hello.name, 'x', sizeof(m.u.hello.name));
	expect_encode(&m, -EINVAL, "HELLO: name length 64 exceeds 63");

	base_msg(KVX_WIRE_ROOM_META, &m);
	m.u.room_meta.reg[1].pages_le = NULL;
	expect_encode(&m, -EINVAL, "ROOM_META: region 1: pages_le");

	/* -EINVAL wins over -ENOSPC: the range check comes first. */
	base_msg(KVX_WIRE_QP_INFO, &m);
	m.u.qp_info.ncores = 0;
	{
		uint8_t small[4];
		char err[160] = "";

		assert_int_equal(kvx_wire_encode(&m, small, sizeof(small), err, sizeof(err)),
				 -EINVAL);
		assert_non_null(strstr(err, "ncores"));
	}

	/* err may be NULL. */
	assert_int_equal(kvx_wire_encode(&m, NULL, 0, NULL, 0), -EINVAL);
}

/* ---- tests: sequence ---- */

static void
seq_ok(struct kvx_wire_seq *s, uint16_t type)
{
	char err[160] = "";
	int rc = kvx_wire_seq_check(s, type, err, sizeof(err));

	if (rc != 0)
		fail_msg("seq %s: %d %s", kvx_wire_type_str(type), rc, err);
}

static void
test_seq_initiator_valid(void **state)
{
	struct kvx_wire_seq s;

	kvx_wire_seq_init(&s, true);
	seq_ok(&s, KVX_WIRE_HELLO_ACK);
	seq_ok(&s, KVX_WIRE_QP_INFO);
	seq_ok(&s, KVX_WIRE_QP_READY);
	for (int round = 0; round < 2; round++) {
		seq_ok(&s, KVX_WIRE_ROOM_META);
		seq_ok(&s, KVX_WIRE_ROOM_STATUS);
		seq_ok(&s, KVX_WIRE_ABORT);
		seq_ok(&s, KVX_WIRE_ABORT_ACK);
		seq_ok(&s, KVX_WIRE_HEARTBEAT);
	}
	seq_ok(&s, KVX_WIRE_BYE);
}

static void
test_seq_acceptor_valid(void **state)
{
	struct kvx_wire_seq s;

	kvx_wire_seq_init(&s, false);
	seq_ok(&s, KVX_WIRE_HELLO);
	seq_ok(&s, KVX_WIRE_AUTH);
	seq_ok(&s, KVX_WIRE_QP_INFO);
	seq_ok(&s, KVX_WIRE_QP_READY);
	seq_ok(&s, KVX_WIRE_HEARTBEAT);
	seq_ok(&s, KVX_WIRE_ABORT_ACK);
	seq_ok(&s, KVX_WIRE_ROOM_STATUS);
	seq_ok(&s, KVX_WIRE_ROOM_META);
	seq_ok(&s, KVX_WIRE_ABORT);
	seq_ok(&s, KVX_WIRE_BYE);
}

static void
test_seq_bye_any_time(void **state)
{
	static const uint16_t acc[] = {KVX_WIRE_HELLO, KVX_WIRE_AUTH, KVX_WIRE_QP_INFO,
				       KVX_WIRE_QP_READY};
	static const uint16_t ini[] = {KVX_WIRE_HELLO_ACK, KVX_WIRE_QP_INFO, KVX_WIRE_QP_READY,
				       KVX_WIRE_HEARTBEAT};
	struct kvx_wire_seq s;

	for (int steps = 0; steps <= 4; steps++) {
		kvx_wire_seq_init(&s, false);
		for (int i = 0; i < steps; i++)
			seq_ok(&s, acc[i]);
		seq_ok(&s, KVX_WIRE_BYE);
		seq_ok(&s, KVX_WIRE_BYE);
		kvx_wire_seq_init(&s, true);
		for (int i = 0; i < steps; i++)
			seq_ok(&s, ini[i]);
		seq_ok(&s, KVX_WIRE_BYE);
	}
}

static void
test_seq_refused(void **state)
{
	static const struct {
		bool initiator;
		uint16_t before[4]; /* accepted first; 0 ends */
		uint16_t type;
		const char *want;
	} cases[] = {
		/* room messages and HEARTBEAT before QP_READY, at every earlier step */
		{false, {0}, KVX_WIRE_ROOM_META, "ROOM_META before QP_READY"},
		{false, {KVX_WIRE_HELLO}, KVX_WIRE_ROOM_STATUS, "ROOM_STATUS before QP_READY"},
		{false,
		 {KVX_WIRE_HELLO, KVX_WIRE_AUTH, KVX_WIRE_QP_INFO},
		 KVX_WIRE_ABORT,
		 "ABORT before QP_READY"},
		{true, {KVX_WIRE_HELLO_ACK}, KVX_WIRE_ABORT_ACK, "ABORT_ACK before QP_READY"},
		{true,
		 {KVX_WIRE_HELLO_ACK, KVX_WIRE_QP_INFO},
		 KVX_WIRE_HEARTBEAT,
		 "HEARTBEAT before QP_READY"},
		{true,
		 {KVX_WIRE_HELLO_ACK, KVX_WIRE_QP_INFO},
		 KVX_WIRE_ROOM_META,
		 "ROOM_META before QP_READY"},
		/* QP_INFO / QP_READY before the hello exchange or out of order */
		{false, {0}, KVX_WIRE_QP_INFO, "QP_INFO before AUTH"},
		{false, {KVX_WIRE_HELLO}, KVX_WIRE_QP_INFO, "QP_INFO before AUTH"},
		{true, {0}, KVX_WIRE_QP_INFO, "QP_INFO before HELLO_ACK"},
		{false, {0}, KVX_WIRE_QP_READY, "QP_READY before AUTH"},
		{true, {0}, KVX_WIRE_QP_READY, "QP_READY before HELLO_ACK"},
		{false, {KVX_WIRE_HELLO}, KVX_WIRE_QP_READY, "QP_READY before AUTH"},
		{false,
		 {KVX_WIRE_HELLO, KVX_WIRE_AUTH},
		 KVX_WIRE_QP_READY,
		 "QP_READY before QP_INFO"},
		/* AUTH: the acceptor's, once, after HELLO */
		{false, {0}, KVX_WIRE_AUTH, "AUTH before HELLO"},
		{false, {KVX_WIRE_HELLO, KVX_WIRE_AUTH}, KVX_WIRE_AUTH, "second AUTH"},
		{true, {0}, KVX_WIRE_AUTH, "AUTH received by the initiator"},
		{true, {KVX_WIRE_HELLO_ACK}, KVX_WIRE_AUTH, "AUTH received by the initiator"},
		{true, {KVX_WIRE_HELLO_ACK}, KVX_WIRE_QP_READY, "QP_READY before QP_INFO"},
		/* seconds */
		{false, {KVX_WIRE_HELLO}, KVX_WIRE_HELLO, "second HELLO"},
		{false,
		 {KVX_WIRE_HELLO, KVX_WIRE_AUTH, KVX_WIRE_QP_INFO, KVX_WIRE_QP_READY},
		 KVX_WIRE_HELLO,
		 "second HELLO"},
		{true, {KVX_WIRE_HELLO_ACK}, KVX_WIRE_HELLO_ACK, "second HELLO_ACK"},
		{false,
		 {KVX_WIRE_HELLO, KVX_WIRE_AUTH, KVX_WIRE_QP_INFO},
		 KVX_WIRE_QP_INFO,
		 "second QP_INFO"},
		{true,
		 {KVX_WIRE_HELLO_ACK, KVX_WIRE_QP_INFO, KVX_WIRE_QP_READY},
		 KVX_WIRE_QP_INFO,
		 "second QP_INFO"},
		{false,
		 {KVX_WIRE_HELLO, KVX_WIRE_AUTH, KVX_WIRE_QP_INFO, KVX_WIRE_QP_READY},
		 KVX_WIRE_QP_READY,
		 "second QP_READY"},
		/* wrong role */
		{false, {0}, KVX_WIRE_HELLO_ACK, "HELLO_ACK received by the acceptor"},
		{false,
		 {KVX_WIRE_HELLO, KVX_WIRE_AUTH, KVX_WIRE_QP_INFO, KVX_WIRE_QP_READY},
		 KVX_WIRE_HELLO_ACK,
		 "HELLO_ACK received by the acceptor"},
		{true, {0}, KVX_WIRE_HELLO, "HELLO received by the initiator"},
		{true,
		 {KVX_WIRE_HELLO_ACK, KVX_WIRE_QP_INFO, KVX_WIRE_QP_READY},
		 KVX_WIRE_HELLO,
		 "HELLO received by the initiator"},
		/* unknown */
		{false, {0}, 0, "unknown message type 0"},
		{true,
		 {KVX_WIRE_HELLO_ACK, KVX_WIRE_QP_INFO, KVX_WIRE_QP_READY},
		 12,
		 "unknown message type 12"},
	};

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		struct kvx_wire_seq s, saved;
		char err[160] = "";
		int rc;

		kvx_wire_seq_init(&s, cases[i].initiator);
		for (int j = 0; j < 4 && cases[i].before[j] != 0; j++)
			seq_ok(&s, cases[i].before[j]);
		saved = s;
		rc = kvx_wire_seq_check(&s, cases[i].type, err, sizeof(err));
		if (rc != -EPROTO || strstr(err, cases[i].want) == NULL)
			fail_msg("case %zu: rc %d err \"%s\", want -EPROTO \"%s\"", i, rc, err,
				 cases[i].want);
		/* A refusal leaves the state as it was. */
		assert_memory_equal(&s, &saved, sizeof(s));
	}
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_type_str),
		cmocka_unit_test(test_roundtrip_every_type),
		cmocka_unit_test(test_roundtrip_maxima),
		cmocka_unit_test(test_little_endian_layout),
		cmocka_unit_test(test_prefixes_need_more),
		cmocka_unit_test(test_back_to_back),
		cmocka_unit_test(test_truncated_payload),
		cmocka_unit_test(test_trailing_byte),
		cmocka_unit_test(test_oversized_length_header_only),
		cmocka_unit_test(test_bad_header),
		cmocka_unit_test(test_bad_counts),
		cmocka_unit_test(test_bad_strings),
		cmocka_unit_test(test_bad_string_encodings),
		cmocka_unit_test(test_bad_names),
		cmocka_unit_test(test_room_top_bit),
		cmocka_unit_test(test_page_outside_pool),
		cmocka_unit_test(test_encode_enospc),
		cmocka_unit_test(test_encode_einval),
		cmocka_unit_test(test_seq_initiator_valid),
		cmocka_unit_test(test_seq_acceptor_valid),
		cmocka_unit_test(test_seq_bye_any_time),
		cmocka_unit_test(test_seq_refused),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
