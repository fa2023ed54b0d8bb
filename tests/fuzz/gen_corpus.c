/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Writes the seed corpora of tests/fuzz/corpus/ (checked in; rerun after a format change):
 *   gen_corpus DIR   ->  DIR/fuzz_wire/, DIR/fuzz_engine/, DIR/fuzz_peer/
 * fuzz_wire: one valid frame of every type (kvx_wire_encode) and a whole handshake.
 * fuzz_engine: request sequences in fuzz_engine.c's record format.
 * fuzz_peer: frame and action sequences in fuzz_peer.c's record format.
 * The fuzz_config seeds are copies of the shipped configs (configs/NAME.ini).
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/engine_proto.h"
#include "core/room.h"
#include "core/wire.h"
#include "fuzz_peer_ops.h"

static const char *outdir;

struct buf {
	uint8_t b[1 << 16];
	size_t n;
};

static void
put(struct buf *b, const void *p, size_t n)
{
	if (b->n + n > sizeof(b->b)) {
		fprintf(stderr, "gen_corpus: seed too large\n");
		exit(1);
	}
	memcpy(b->b + b->n, p, n);
	b->n += n;
}

static void
put_u8(struct buf *b, uint8_t v)
{
	put(b, &v, 1);
}

static void
put_le16(struct buf *b, uint16_t v)
{
	uint8_t x[2] = {(uint8_t)v, (uint8_t)(v >> 8)};

	put(b, x, 2);
}

static void
save(const char *target, const char *name, const struct buf *b)
{
	char path[512];
	FILE *f;

	snprintf(path, sizeof(path), "%s/%s", outdir, target);
	mkdir(path, 0755);
	snprintf(path, sizeof(path), "%s/%s/%s", outdir, target, name);
	f = fopen(path, "wb");
	if (!f || fwrite(b->b, 1, b->n, f) != b->n || fclose(f)) {
		fprintf(stderr, "gen_corpus: %s: %s\n", path, strerror(errno));
		exit(1);
	}
}

/* ---- wire frames ---- */

static const uint8_t pages_le[16] = {0, 0, 0, 0, 1, 0, 0, 0, 2, 0, 0, 0, 3, 0, 0, 0};

static struct kvx_wire_msg
frame(uint16_t type)
{
	struct kvx_wire_msg m = {.type = type};

	switch (type) {
	case KVX_WIRE_HELLO:
	case KVX_WIRE_HELLO_ACK:
		m.u.hello.version = KVX_WIRE_VERSION;
		snprintf(m.u.hello.name, sizeof(m.u.hello.name), "%s",
			 type == KVX_WIRE_HELLO ? "a" : "b");
		m.u.hello.nonce = 0x0123456789abcdefull;
		m.u.hello.session = 1;
		if (type == KVX_WIRE_HELLO_ACK)
			memset(m.u.hello.mac, 0xa5, sizeof(m.u.hello.mac));
		break;
	case KVX_WIRE_AUTH:
		memset(m.u.auth_mac, 0x5a, sizeof(m.u.auth_mac));
		break;
	case KVX_WIRE_QP_INFO:
		m.u.qp_info.nrails = 1;
		m.u.qp_info.rail[0].gid[10] = m.u.qp_info.rail[0].gid[11] = 0xff;
		m.u.qp_info.rail[0].gid[12] = 127;
		m.u.qp_info.rail[0].gid[15] = 1;
		m.u.qp_info.rail[0].mtu = 1024;
		m.u.qp_info.ncores = 1;
		m.u.qp_info.qp[0].qpn = 0x11;
		m.u.qp_info.qp[0].psn = 0x123456;
		break;
	case KVX_WIRE_ROOM_META:
		m.u.room_meta = (struct kvx_wire_room_meta){.room = 1,
							    .gen = 1,
							    .token = 1u << 8,
							    .src_idx = 0,
							    .nsrc = 1,
							    .nrails = 1,
							    .nreg = 1};
		m.u.room_meta.reg[0] = (struct kvx_wire_region){.addr = 0x10000,
								.rkey = {0x100},
								.page_size = 256,
								.pool_npages = 16,
								.nbufs = 1,
								.npages = 4,
								.pages_le = pages_le};
		break;
	case KVX_WIRE_ROOM_STATUS:
		m.u.room_status.room = 1;
		m.u.room_status.gen = 1;
		m.u.room_status.state = KVX_ROOM_FAILED;
		m.u.room_status.error = -EIO;
		snprintf(m.u.room_status.reason, sizeof(m.u.room_status.reason), "%s",
			 "WR error: remote access");
		break;
	case KVX_WIRE_ABORT:
		m.u.abort.room = 1;
		m.u.abort.gen = 2;
		snprintf(m.u.abort.endpoint, sizeof(m.u.abort.endpoint), "%s", "a");
		break;
	case KVX_WIRE_ABORT_ACK:
		m.u.abort_ack.room = 1;
		m.u.abort_ack.gen = 2;
		break;
	case KVX_WIRE_HEARTBEAT:
		m.u.heartbeat_ns = 1000000000ull;
		break;
	case KVX_WIRE_BYE:
		m.u.bye_reason = 1;
		break;
	}
	return m;
}

static void
put_frame(struct buf *b, const struct kvx_wire_msg *m)
{
	uint8_t enc[KVX_WIRE_FRAME_MAX];
	char err[160];
	int n = kvx_wire_encode(m, enc, sizeof(enc), err, sizeof(err));

	if (n < 0) {
		fprintf(stderr, "gen_corpus: encode %s: %s\n", kvx_wire_type_str(m->type), err);
		exit(1);
	}
	put(b, enc, (size_t)n);
}

static void
gen_wire(void)
{
	static const uint16_t handshake[] = {KVX_WIRE_HELLO, KVX_WIRE_HELLO_ACK, KVX_WIRE_AUTH,
					     KVX_WIRE_QP_INFO, KVX_WIRE_QP_READY};
	struct buf b;
	char name[64];

	for (uint16_t t = 1; t <= KVX_WIRE_TYPE_MAX; t++) {
		struct kvx_wire_msg m = frame(t);

		b.n = 0;
		put_frame(&b, &m);
		snprintf(name, sizeof(name), "%02u-%s", t, kvx_wire_type_str(t));
		save("fuzz_wire", name, &b);
	}
	b.n = 0;
	for (size_t i = 0; i < sizeof(handshake) / sizeof(handshake[0]); i++) {
		struct kvx_wire_msg m = frame(handshake[i]);

		put_frame(&b, &m);
	}
	for (uint16_t t = KVX_WIRE_ROOM_META; t <= KVX_WIRE_BYE; t++) {
		struct kvx_wire_msg m = frame(t);

		put_frame(&b, &m);
	}
	save("fuzz_wire", "session", &b);
}

/* ---- engine requests (fuzz_engine.c: op byte, kind in the low 2 bits) ---- */

enum { E_SEND = 0, E_PUMP = 1, E_CLOCK = 2, E_RECONNECT = 3 };
#define E_FIXLEN (1u << 2) /* SEND arg bit 0 */
#define E_FD (2u << 2)	   /* SEND arg bit 1 */

static uint64_t eng_seq;

static void
eng_send(struct buf *b, void *msg, size_t len, uint16_t type, bool fd)
{
	struct kvx_eng_hdr *h = msg;

	h->type = type;
	h->flags = 0;
	h->len = (uint32_t)len;
	h->seq = ++eng_seq;
	put_u8(b, E_SEND | (fd ? E_FD : 0));
	put_le16(b, (uint16_t)len);
	put(b, msg, len);
}

static void
eng_hello(struct buf *b)
{
	struct kvx_eng_hello m = {.version = KVX_ENG_VERSION};

	eng_send(b, &m, sizeof(m), KVX_ENG_HELLO, false);
}

static void
eng_pool(struct buf *b)
{
	struct kvx_eng_pool_reg m = {.geom = {.page_size = 4096, .npages = 16, .nbufs = 2}};

	eng_send(b, &m, sizeof(m), KVX_ENG_POOL_REG, true);
}

static void
eng_room_open(struct buf *b, uint64_t room, uint32_t npages)
{
	struct {
		struct kvx_eng_room_open m;
		struct kvx_eng_region reg;
		struct kvx_eng_source src[1];
		uint32_t pages[16];
	} r = {.m = {.room = room, .nregions = 1, .nsources = 1},
	       .reg = {.pool_id = 1, .npages = npages}};

	snprintf(r.src[0].name, sizeof(r.src[0].name), "%s", "b");
	for (uint32_t i = 0; i < npages; i++)
		r.pages[i] = i;
	eng_send(b, &r, sizeof(r.m) + sizeof(r.reg) + sizeof(r.src) + 4 * npages, KVX_ENG_ROOM_OPEN,
		 false);
}

static void
eng_chunk(struct buf *b, uint64_t room, uint32_t npages, bool last)
{
	struct {
		struct kvx_eng_chunk m;
		uint32_t pages[16];
	} c = {.m = {.room = room, .pool_id = 1, .npages = npages, .last = last}};

	for (uint32_t i = 0; i < npages; i++)
		c.pages[i] = i;
	eng_send(b, &c, sizeof(c.m) + 4 * npages, KVX_ENG_CHUNK, false);
}

static void
eng_room(struct buf *b, uint16_t type, uint64_t room)
{
	struct kvx_eng_room_close m = {.room = room};

	eng_send(b, &m, sizeof(m), type, false);
}

static void
eng_admin(struct buf *b, const char *cmd)
{
	struct {
		struct kvx_eng_admin m;
		char text[64];
	} a;

	snprintf(a.text, sizeof(a.text), "%s", cmd);
	eng_send(b, &a, sizeof(a.m) + strlen(cmd), KVX_ENG_ADMIN, false);
}

static void
eng_op(struct buf *b, unsigned int kind, unsigned int arg)
{
	put_u8(b, (uint8_t)(kind | arg << 2));
}

static void
gen_engine(void)
{
	struct buf b;

	b.n = 0;
	eng_hello(&b);
	eng_pool(&b);
	eng_room_open(&b, 7, 4);
	eng_op(&b, E_PUMP, 3);
	eng_room(&b, KVX_ENG_ROOM_ABORT, 7);
	eng_op(&b, E_CLOCK, 20);
	eng_op(&b, E_PUMP, 7);
	eng_room(&b, KVX_ENG_ROOM_CLOSE, 7);
	save("fuzz_engine", "open-abort-close", &b);

	b.n = 0;
	eng_hello(&b);
	eng_pool(&b);
	eng_room_open(&b, 8, 16);
	eng_op(&b, E_CLOCK, 63); /* past the waiting timeout */
	eng_op(&b, E_CLOCK, 63);
	eng_op(&b, E_PUMP, 15);
	eng_room(&b, KVX_ENG_ROOM_CLOSE, 8);
	save("fuzz_engine", "open-timeout", &b);

	b.n = 0;
	eng_hello(&b);
	eng_pool(&b);
	eng_chunk(&b, 9, 2, false);
	eng_chunk(&b, 9, 2, true);
	eng_op(&b, E_PUMP, 7);
	eng_room(&b, KVX_ENG_ROOM_CLOSE, 9);
	eng_send(&b, &(struct kvx_eng_pool_unreg){.pool_id = 1}, sizeof(struct kvx_eng_pool_unreg),
		 KVX_ENG_POOL_UNREG, false);
	save("fuzz_engine", "chunks-unreg", &b);

	b.n = 0;
	eng_hello(&b);
	eng_admin(&b, "peers");
	eng_admin(&b, "rooms");
	eng_admin(&b, "counters");
	eng_admin(&b, "help");
	eng_admin(&b, "fault wr.corrupt_rkey:1");
	save("fuzz_engine", "admin", &b);

	b.n = 0;
	eng_hello(&b);
	eng_pool(&b);
	eng_admin(&b, "peer b resume");
	eng_op(&b, E_PUMP, 63);
	eng_room_open(&b, 10, 4);
	eng_op(&b, E_PUMP, 15);
	eng_room(&b, KVX_ENG_ROOM_ABORT, 10);
	eng_op(&b, E_PUMP, 31);
	eng_op(&b, E_RECONNECT, 0);
	eng_hello(&b);
	eng_room(&b, KVX_ENG_ROOM_CLOSE, 10);
	save("fuzz_engine", "connected-peer", &b);
}

/* ---- peer target (fuzz_peer.c: see fuzz_peer_ops.h) ---- */

static void
peer_frame(struct buf *b, uint8_t to, const struct kvx_wire_msg *m)
{
	struct buf f = {.n = 0};

	put_frame(&f, m);
	put_u8(b, FP_FRAME | (to | FP_FRAME_LIVE_ROOM) << 3);
	put_le16(b, (uint16_t)f.n);
	put(b, f.b, f.n);
}

static void
peer_op(struct buf *b, unsigned int op, unsigned int arg)
{
	put_u8(b, (uint8_t)(op | arg << 3));
}

static void
gen_peer(void)
{
	struct kvx_wire_msg m;
	struct buf b;

	/* decode a opens a room from b; b's engine submits it; a hostile b aborts it */
	b.n = 0;
	peer_op(&b, FP_OPEN, 3);
	peer_op(&b, FP_STEP, 7);
	peer_op(&b, FP_SUBMIT, 1);
	peer_op(&b, FP_STEP, 7);
	m = frame(KVX_WIRE_ROOM_STATUS);
	peer_frame(&b, 0, &m);
	peer_op(&b, FP_STEP, 15);
	save("fuzz_peer", "open-submit-status", &b);

	/* b pushes a failure for a room it was not sent yet */
	b.n = 0;
	peer_op(&b, FP_OPEN, 5);
	peer_op(&b, FP_HOLD, 1);
	peer_op(&b, FP_STEP, 1);
	m = frame(KVX_WIRE_ROOM_STATUS);
	peer_frame(&b, 0, &m);
	peer_op(&b, FP_SUBMIT, 0);
	peer_op(&b, FP_HOLD, 2);
	peer_op(&b, FP_STEP, 15);
	save("fuzz_peer", "status-while-waiting", &b);

	b.n = 0;
	peer_op(&b, FP_OPEN, 1);
	peer_op(&b, FP_STEP, 3);
	peer_op(&b, FP_ABORT, 0);
	m = frame(KVX_WIRE_ABORT_ACK);
	peer_frame(&b, 0, &m);
	peer_frame(&b, 0, &m);
	peer_op(&b, FP_CLOCK, 20);
	peer_op(&b, FP_STEP, 15);
	save("fuzz_peer", "abort-ack-twice", &b);

	b.n = 0;
	m = frame(KVX_WIRE_ROOM_META);
	peer_frame(&b, 1, &m);
	peer_op(&b, FP_STEP, 3);
	m = frame(KVX_WIRE_ABORT);
	peer_frame(&b, 1, &m);
	peer_op(&b, FP_SUBMIT, 0);
	peer_op(&b, FP_STEP, 7);
	peer_frame(&b, 1, &m);
	peer_op(&b, FP_STEP, 7);
	save("fuzz_peer", "meta-abort-chunk", &b);

	b.n = 0;
	peer_op(&b, FP_OPEN, 0);
	peer_op(&b, FP_HOLD, 1);
	peer_op(&b, FP_SUBMIT, 0);
	peer_op(&b, FP_STEP, 3);
	m = frame(KVX_WIRE_BYE);
	peer_frame(&b, 0, &m);
	peer_op(&b, FP_CLOCK, 40);
	peer_op(&b, FP_HOLD, 0);
	peer_op(&b, FP_STEP, 31);
	save("fuzz_peer", "bye-replace-mid-transfer", &b);

	b.n = 0;
	peer_op(&b, FP_OPEN, 2);
	m = frame(KVX_WIRE_HEARTBEAT);
	peer_frame(&b, 0, &m);
	m = frame(KVX_WIRE_HELLO);
	peer_frame(&b, 1, &m);
	peer_op(&b, FP_CLOCK, 63);
	peer_op(&b, FP_CLOCK, 63);
	peer_op(&b, FP_STEP, 31);
	peer_op(&b, FP_CLOSE, 2);
	save("fuzz_peer", "reset-timeout-close", &b);
}

int
main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: gen_corpus DIR\n");
		return 2;
	}
	outdir = argv[1];
	mkdir(outdir, 0755);
	gen_wire();
	gen_engine();
	gen_peer();
	return 0;
}
