/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The node <-> node control protocol (TCP): versioned, length-prefixed, little-endian frames
 * with strict decoding.
 *
 * Frame: a 12-byte header  u32 magic ("KVX1" = 0x3158564b)  u16 version  u16 type
 *        u32 payload length, then the payload.  Every field is little-endian; strings are
 *        u16 length + bytes (no NUL), at most their documented maximum.
 *
 * Decoding is strict: a frame whose magic or version is wrong, whose type is unknown, whose
 * length exceeds KVX_WIRE_FRAME_MAX, whose payload is shorter or longer than its fields, or
 * whose counts/strings exceed their maxima is refused with a clear error string.  The caller
 * closes that peer's connection and counts it; nothing else is affected.
 *
 * Sequence: a session starts HELLO (initiator) -> HELLO_ACK (acceptor, with its MAC) -> AUTH
 * (initiator, with its MAC; core/auth.h) -> QP_INFO (both: the initiator after it sent AUTH,
 * the acceptor after AUTH verified) -> QP_READY (both, after each side sent its QP_INFO).  Room
 * messages and HEARTBEAT are valid only after the local side has received QP_READY; BYE at any
 * time. kvx_wire_seq_check() enforces this per received frame.
 */
#ifndef KVX_CORE_WIRE_H
#define KVX_CORE_WIRE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define KVX_WIRE_MAGIC 0x3158564bu /* "KVX1" little-endian */
#define KVX_WIRE_VERSION                                                  \
	6 /* 2: HELLO_ACK carries a MAC, AUTH; 3: ranks, regions, slices; \
	   * 4: rails (QP_INFO per rail, ROOM_META an rkey per rail);     \
	   * 5: ABORT names the generation its ROOM_META carried;         \
	   * 6: a source ends its share with an immediate per rail */
#define KVX_WIRE_HDR_LEN 12
#define KVX_WIRE_FRAME_MAX (64 * 1024) /* header + payload */
#define KVX_WIRE_NAME_MAX 63	       /* node names, bytes */
#define KVX_WIRE_REASON_MAX 95	       /* ROOM_STATUS reason, bytes */
#define KVX_WIRE_MAX_CORES 8	       /* QP_INFO: polling cores */
#define KVX_WIRE_MAX_RAILS 4	       /* QP_INFO, ROOM_META: RDMA devices (rails) */
#define KVX_WIRE_MAX_PAGES 4096	       /* ROOM_META destination pages, all regions */
#define KVX_WIRE_MAX_REGIONS 4	       /* ROOM_META regions */
#define KVX_WIRE_RANK_MAX 65535u       /* engine ranks */
#define KVX_WIRE_MAC_LEN 32	       /* HMAC-SHA256 */

enum kvx_wire_type {
	KVX_WIRE_HELLO = 1,
	KVX_WIRE_HELLO_ACK = 2,
	KVX_WIRE_QP_INFO = 3,
	KVX_WIRE_QP_READY = 4,
	KVX_WIRE_ROOM_META = 5,
	KVX_WIRE_ROOM_STATUS = 6,
	KVX_WIRE_ABORT = 7,
	KVX_WIRE_ABORT_ACK = 8,
	KVX_WIRE_HEARTBEAT = 9,
	KVX_WIRE_BYE = 10,
	KVX_WIRE_AUTH = 11,
	KVX_WIRE_TYPE_MAX = 11,
};

/* HELLO and HELLO_ACK: u16 version, u32 features, str name, u64 nonce, u64 session; HELLO_ACK
 * then u8 mac[32] (the acceptor's MAC, core/auth.h).  AUTH: u8 mac[32] (the initiator's).
 * Features: KVX_AUTH_FEAT_NONE (core/auth.h), KVX_WIRE_FEAT_HOLD_ASK: this node answers a
 * BYE HOLD_ASK (control/kvxd.h), and KVX_WIRE_FEAT_LANE_FENCE (below).  Unknown bits are
 * ignored. */
#define KVX_WIRE_FEAT_HOLD_ASK 0x2u
/* KVX_WIRE_FEAT_LANE_FENCE: this node answers a BYE FENCE (control/kvxd.h): it moves its end of
 * the named QP to the error state before it reads the next frame. */
#define KVX_WIRE_FEAT_LANE_FENCE 0x4u
struct kvx_wire_hello {
	uint16_t version;
	uint32_t features;
	char name[KVX_WIRE_NAME_MAX + 1]; /* NUL-terminated after decode */
	uint64_t nonce;			  /* fresh random per handshake */
	uint64_t session;	       /* the initiator's connection epoch, echoed in HELLO_ACK */
	uint8_t mac[KVX_WIRE_MAC_LEN]; /* HELLO_ACK only */
};

/* QP_INFO: u8 nrails, nrails x (u8 gid[16], u32 mtu), u16 ncores, then ncores x nrails x
 * (u32 qpn, u32 psn): the QP of core c on rail r at qp[c * nrails + r] */
struct kvx_wire_qp_info {
	uint8_t nrails; /* 1..KVX_WIRE_MAX_RAILS */
	struct {
		uint8_t gid[16];
		uint32_t mtu;
	} rail[KVX_WIRE_MAX_RAILS];
	uint16_t ncores; /* 1..KVX_WIRE_MAX_CORES */
	struct {
		uint32_t qpn; /* 24-bit */
		uint32_t psn; /* 24-bit */
	} qp[KVX_WIRE_MAX_CORES * KVX_WIRE_MAX_RAILS];
};

/* A ROOM_META region: u64 addr, nrails x u32 rkey, u32 page_size, u32 pool_npages, u32 nbufs,
 * u32 src_off, u32 dst_off, u32 len, u32 npages, u32 pages[npages].  The pool's page p of
 * buffer b lives at addr + (b * pool_npages + p) * page_size; the source writes bytes
 * [src_off, src_off + len) of its page to [dst_off, dst_off + len) of each destination page
 * (len 0: the whole page, both offsets 0). */
struct kvx_wire_region {
	uint64_t addr;
	uint32_t rkey[KVX_WIRE_MAX_RAILS]; /* the pool's key on each rail (the meta's nrails) */
	uint32_t page_size;
	uint32_t pool_npages;
	uint32_t nbufs;
	uint32_t src_off, dst_off, len; /* dst_off + len <= page_size */
	uint32_t npages;		/* >= 1, each page < pool_npages */
	const uint8_t *pages_le; /* points into the decoded frame: npages little-endian u32 */
};

/* ROOM_META (decode endpoint (node, dst_rank) -> source (node, src_rank)): u64 room, u32 gen,
 * u32 token, u16 src_idx, u16 nsrc, u32 dst_rank, u32 src_rank, u8 nrails, u8 nreg, then nreg
 * regions; their pages add up to at most KVX_WIRE_MAX_PAGES. */
struct kvx_wire_room_meta {
	uint64_t room; /* < 2^63 */
	uint32_t gen;
	uint32_t token;	  /* immediate data for the source's final WRITE_WITH_IMM */
	uint16_t src_idx; /* < nsrc */
	uint16_t nsrc;	  /* 1..16 */
	uint32_t dst_rank, src_rank;
	uint8_t nrails; /* 1..KVX_WIRE_MAX_RAILS: rkeys per region */
	uint8_t nreg;	/* 1..KVX_WIRE_MAX_REGIONS */
	struct kvx_wire_region reg[KVX_WIRE_MAX_REGIONS];
};

/* ROOM_STATUS (source -> decode endpoint, at once on failure): u64 room, u32 gen, u16 src_idx,
 * u8 state, i32 error, str reason, u32 dst_rank, u32 src_rank */
struct kvx_wire_room_status {
	uint64_t room;
	uint32_t gen;
	uint16_t src_idx;
	uint8_t state; /* enum kvx_room_state */
	int32_t error; /* negative errno */
	char reason[KVX_WIRE_REASON_MAX + 1];
	uint32_t dst_rank, src_rank;
};

/* ABORT (decode endpoint -> source): u64 room, u32 gen (the abort's), str endpoint,
 * u32 dst_rank, u32 src_rank, u32 open_gen (the generation of the ROOM_META it aborts: a
 * source that has no room for it refuses that ROOM_META, should it come later) */
struct kvx_wire_abort {
	uint64_t room;
	uint32_t gen;
	char endpoint[KVX_WIRE_NAME_MAX + 1];
	uint32_t dst_rank, src_rank;
	uint32_t open_gen;
};

/* ABORT_ACK (source -> decode endpoint): u64 room, u32 gen, u16 src_idx, u32 dst_rank,
 * u32 src_rank */
struct kvx_wire_abort_ack {
	uint64_t room;
	uint32_t gen;
	uint16_t src_idx;
	uint32_t dst_rank, src_rank;
};

/* HEARTBEAT: u64 sent_ns.  BYE: u32 reason (0 = shutdown) */
struct kvx_wire_msg {
	uint16_t type; /* enum kvx_wire_type */
	union {
		struct kvx_wire_hello hello;
		struct kvx_wire_qp_info qp_info;
		struct kvx_wire_room_meta room_meta;
		struct kvx_wire_room_status room_status;
		struct kvx_wire_abort abort;
		struct kvx_wire_abort_ack abort_ack;
		uint64_t heartbeat_ns;
		uint32_t bye_reason;
		uint8_t auth_mac[KVX_WIRE_MAC_LEN];
	} u; /* QP_READY has no payload */
};

/* Encode m into buf.  Returns the frame length (> 0), -ENOSPC if cap is too small, or -EINVAL
 * if a field is out of range (err says which).  Thread: any. */
int kvx_wire_encode(const struct kvx_wire_msg *m, uint8_t *buf, size_t cap, char *err,
		    size_t errlen);

/* Decode the first frame in buf[0..len).  Returns the frame length consumed (> 0), 0 if more
 * bytes are needed (incomplete header or payload), or a negative error with a message in err:
 * -EPROTO (bad magic, version or unknown type), -EMSGSIZE (length over KVX_WIRE_FRAME_MAX),
 * -EBADMSG (payload truncated, trailing bytes, count or string over its maximum, bad value).
 * For ROOM_META, m->u.room_meta.pages_le points into buf.  Thread: any. */
int kvx_wire_decode(const uint8_t *buf, size_t len, struct kvx_wire_msg *m, char *err,
		    size_t errlen);

/* Destination page i of a decoded ROOM_META region. */
uint32_t kvx_wire_region_page(const struct kvx_wire_region *g, uint32_t i);

/* Sequence state of one session, from the local side's point of view. */
struct kvx_wire_seq {
	bool initiator;
	bool got_hello;	    /* acceptor: HELLO received */
	bool got_hello_ack; /* initiator: HELLO_ACK received */
	bool got_auth;	    /* acceptor: AUTH received */
	bool got_qp_info;
	bool got_qp_ready;
};

void kvx_wire_seq_init(struct kvx_wire_seq *s, bool initiator);

/* Check that a received frame of this type is allowed now and advance.  Returns 0 or -EPROTO
 * with a message in err ("ROOM_META before QP_READY", "second HELLO", ...). */
int kvx_wire_seq_check(struct kvx_wire_seq *s, uint16_t type, char *err, size_t errlen);

const char *kvx_wire_type_str(uint16_t type);

#endif /* KVX_CORE_WIRE_H */
