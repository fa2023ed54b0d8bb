/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer harness for core/wire.c.  Decodes the input frame by frame; every frame that
 * decodes is re-encoded, and the re-encoding must (1) succeed, (2) be byte-identical to the
 * input frame (decoding is strict, so the wire form is canonical) and (3) decode to the same
 * message.  Decoded types are also fed to a sequence checker of each role.
 * Built by the KVX_FUZZ build (tests/fuzz/CMakeLists.txt); `make fuzz` runs it.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/wire.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

#define CHECK(cond, ...)                                                                      \
	do {                                                                                  \
		if (!(cond)) {                                                                \
			fprintf(stderr, "fuzz_wire: %s:%d: %s: ", __FILE__, __LINE__, #cond); \
			fprintf(stderr, __VA_ARGS__);                                         \
			fprintf(stderr, "\n");                                                \
			abort();                                                              \
		}                                                                             \
	} while (0)

static void
check_same(const struct kvx_wire_msg *a, const struct kvx_wire_msg *b)
{
	CHECK(a->type == b->type, "type %u vs %u", a->type, b->type);
	switch (a->type) {
	case KVX_WIRE_HELLO:
	case KVX_WIRE_HELLO_ACK:
		CHECK(a->u.hello.version == b->u.hello.version, "version");
		CHECK(a->u.hello.features == b->u.hello.features, "features");
		CHECK(strcmp(a->u.hello.name, b->u.hello.name) == 0, "name");
		CHECK(a->u.hello.nonce == b->u.hello.nonce, "nonce");
		CHECK(a->u.hello.session == b->u.hello.session, "session");
		CHECK(memcmp(a->u.hello.mac, b->u.hello.mac, KVX_WIRE_MAC_LEN) == 0, "mac");
		break;
	case KVX_WIRE_AUTH:
		CHECK(memcmp(a->u.auth_mac, b->u.auth_mac, KVX_WIRE_MAC_LEN) == 0, "mac");
		break;
	case KVX_WIRE_QP_INFO:
		CHECK(a->u.qp_info.nrails == b->u.qp_info.nrails, "nrails");
		CHECK(a->u.qp_info.nrails >= 1 && a->u.qp_info.nrails <= KVX_WIRE_MAX_RAILS,
		      "nrails %u", a->u.qp_info.nrails);
		for (unsigned int k = 0; k < a->u.qp_info.nrails; k++) {
			CHECK(memcmp(a->u.qp_info.rail[k].gid, b->u.qp_info.rail[k].gid, 16) == 0,
			      "gid");
			CHECK(a->u.qp_info.rail[k].mtu == b->u.qp_info.rail[k].mtu, "mtu");
		}
		CHECK(a->u.qp_info.ncores == b->u.qp_info.ncores, "ncores");
		CHECK(a->u.qp_info.ncores >= 1 && a->u.qp_info.ncores <= KVX_WIRE_MAX_CORES,
		      "ncores %u", a->u.qp_info.ncores);
		for (unsigned int i = 0;
		     i < (unsigned int)a->u.qp_info.ncores * a->u.qp_info.nrails; i++) {
			CHECK(a->u.qp_info.qp[i].qpn == b->u.qp_info.qp[i].qpn, "qpn %u", i);
			CHECK(a->u.qp_info.qp[i].psn == b->u.qp_info.qp[i].psn, "psn %u", i);
		}
		break;
	case KVX_WIRE_ROOM_META: {
		const struct kvx_wire_room_meta *x = &a->u.room_meta, *y = &b->u.room_meta;

		CHECK(x->room == y->room && x->gen == y->gen && x->token == y->token, "room");
		CHECK(x->src_idx == y->src_idx && x->nsrc == y->nsrc, "src");
		CHECK(x->src_idx < x->nsrc, "src_idx %u nsrc %u", x->src_idx, x->nsrc);
		CHECK(x->dst_rank == y->dst_rank && x->src_rank == y->src_rank, "ranks");
		CHECK(x->dst_rank <= KVX_WIRE_RANK_MAX && x->src_rank <= KVX_WIRE_RANK_MAX, "rank");
		CHECK(x->nreg == y->nreg && x->nreg >= 1 && x->nreg <= KVX_WIRE_MAX_REGIONS,
		      "nreg %u", x->nreg);
		CHECK(x->nrails == y->nrails && x->nrails >= 1 && x->nrails <= KVX_WIRE_MAX_RAILS,
		      "nrails %u", x->nrails);
		for (uint32_t k = 0, total = 0; k < x->nreg; k++) {
			const struct kvx_wire_region *g = &x->reg[k], *h = &y->reg[k];

			CHECK(g->addr == h->addr &&
				      !memcmp(g->rkey, h->rkey, sizeof(g->rkey[0]) * x->nrails),
			      "addr/rkey");
			CHECK(g->page_size == h->page_size && g->pool_npages == h->pool_npages &&
				      g->nbufs == h->nbufs,
			      "pool");
			CHECK(g->src_off == h->src_off && g->dst_off == h->dst_off &&
				      g->len == h->len,
			      "slice");
			CHECK(g->len ? (uint64_t)g->dst_off + g->len <= g->page_size
				     : !g->src_off && !g->dst_off,
			      "slice %u+%u", g->dst_off, g->len);
			CHECK(g->npages == h->npages, "npages");
			total += g->npages;
			CHECK(g->npages >= 1 && total <= KVX_WIRE_MAX_PAGES, "npages %u",
			      g->npages);
			for (uint32_t i = 0; i < g->npages; i++) {
				uint32_t p = kvx_wire_region_page(g, i);

				CHECK(p == kvx_wire_region_page(h, i), "page %u", i);
				CHECK(p < g->pool_npages, "page %u = %u", i, p);
			}
		}
		break;
	}
	case KVX_WIRE_ROOM_STATUS:
		CHECK(a->u.room_status.room == b->u.room_status.room, "room");
		CHECK(a->u.room_status.gen == b->u.room_status.gen, "gen");
		CHECK(a->u.room_status.src_idx == b->u.room_status.src_idx, "src_idx");
		CHECK(a->u.room_status.state == b->u.room_status.state, "state");
		CHECK(a->u.room_status.error == b->u.room_status.error, "error");
		CHECK(strcmp(a->u.room_status.reason, b->u.room_status.reason) == 0, "reason");
		break;
	case KVX_WIRE_ABORT:
		CHECK(a->u.abort.room == b->u.abort.room, "room");
		CHECK(a->u.abort.gen == b->u.abort.gen, "gen");
		CHECK(strcmp(a->u.abort.endpoint, b->u.abort.endpoint) == 0, "endpoint");
		break;
	case KVX_WIRE_ABORT_ACK:
		CHECK(a->u.abort_ack.room == b->u.abort_ack.room, "room");
		CHECK(a->u.abort_ack.gen == b->u.abort_ack.gen, "gen");
		CHECK(a->u.abort_ack.src_idx == b->u.abort_ack.src_idx, "src_idx");
		break;
	case KVX_WIRE_HEARTBEAT:
		CHECK(a->u.heartbeat_ns == b->u.heartbeat_ns, "sent_ns");
		break;
	case KVX_WIRE_BYE:
		CHECK(a->u.bye_reason == b->u.bye_reason, "reason");
		break;
	case KVX_WIRE_QP_READY:
		break;
	default:
		CHECK(0, "decoded unknown type %u", a->type);
	}
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static uint8_t enc[KVX_WIRE_FRAME_MAX];
	struct kvx_wire_seq seq_ini, seq_acc;
	struct kvx_wire_msg m, m2;
	char err[256], err2[256];
	size_t off = 0;

	kvx_wire_seq_init(&seq_ini, true);
	kvx_wire_seq_init(&seq_acc, false);
	while (off < size) {
		int n, n2, rc;

		err[0] = '\0';
		n = kvx_wire_decode(data + off, size - off, &m, err, sizeof(err));
		if (n == 0)
			break; /* need more */
		if (n < 0) {
			CHECK(n == -EPROTO || n == -EMSGSIZE || n == -EBADMSG, "decode rc %d", n);
			CHECK(err[0] != '\0', "decode rc %d without a message", n);
			break;
		}
		CHECK(n >= KVX_WIRE_HDR_LEN && (size_t)n <= size - off, "decode length %d", n);
		CHECK(n <= KVX_WIRE_FRAME_MAX, "decode length %d", n);

		n2 = kvx_wire_encode(&m, enc, sizeof(enc), err2, sizeof(err2));
		CHECK(n2 == n, "re-encode %s: %d (%s), decoded %d", kvx_wire_type_str(m.type), n2,
		      n2 < 0 ? err2 : "", n);
		CHECK(memcmp(enc, data + off, n) == 0, "re-encoding of %s differs",
		      kvx_wire_type_str(m.type));
		/* One byte short must be -ENOSPC, never a partial frame. */
		CHECK(kvx_wire_encode(&m, enc, (size_t)n - 1, err2, sizeof(err2)) == -ENOSPC,
		      "short encode");

		n2 = kvx_wire_encode(&m, enc, sizeof(enc), err2, sizeof(err2));
		CHECK(n2 == n, "re-encode");
		rc = kvx_wire_decode(enc, n2, &m2, err2, sizeof(err2));
		CHECK(rc == n2, "re-decode %s: %d (%s)", kvx_wire_type_str(m.type), rc, err2);
		check_same(&m, &m2);

		/* Every prefix of a good frame is "need more". */
		CHECK(kvx_wire_decode(enc, (size_t)n2 - 1, &m2, err2, sizeof(err2)) == 0, "prefix");

		rc = kvx_wire_seq_check(&seq_ini, m.type, err2, sizeof(err2));
		CHECK(rc == 0 || rc == -EPROTO, "seq rc %d", rc);
		rc = kvx_wire_seq_check(&seq_acc, m.type, err2, sizeof(err2));
		CHECK(rc == 0 || rc == -EPROTO, "seq rc %d", rc);
		off += (size_t)n;
	}
	return 0;
}
