/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The engine <-> kvxd protocol on the local Unix socket (SOCK_SEQPACKET: one message per
 * datagram, host byte order, same machine).  libkvx is the only client; kvxd's control core
 * the only server.  Every request carries a sequence number; requests other than CHUNK get one
 * REPLY with the same seq, in request order, except POOL_REG's and POOL_UNREG's: the pool's
 * registration and its deregistration run off the control core (they pin and unpin every page),
 * and the REPLY comes once it is done, after the replies to requests the session sent meanwhile
 * (libkvx's kvx_pool_register and kvx_pool_unregister wait for it, so they send none); several
 * registrations run side by side, so their replies may come in any order among themselves.
 * EVENTs arrive at any time, interleaved with replies.
 *
 * A message that is shorter than its fixed part, whose hdr.len differs from the datagram size,
 * or whose counts do not match its size is refused (REPLY -EBADMSG, or the session is closed
 * for a CHUNK), and only the sending engine's session is affected.
 *
 * Limits (kvxd's [engine] section; a refusal's reply text, or a CHUNK's FAILED event, names the
 * limit): -EDQUOT when a request would pass one of the caller's caps (max_pools_per_engine,
 * max_pools_per_uid, max_pinned_mb_per_uid, max_rooms_per_engine, max_rooms_per_uid; over
 * max_sessions_per_uid the session's first request is answered -EDQUOT and kvxd closes it); -ENOSPC
 * when the node's own table is full; -EPERM for an ADMIN command that changes state from an engine
 * that is not an admin (root, kvxd's uid, a member of admin_group: credentials captured at
 * connect).  kvxd never waits for an engine to read: replies and events wait in order in a queue,
 * and an engine that lets more than reply_queue_kb of them pile up is disconnected.
 */
#ifndef KVX_CORE_ENGINE_PROTO_H
#define KVX_CORE_ENGINE_PROTO_H

#include <stdbool.h>
#include <stdint.h>

#include "kvx/kvx.h"

/* 2: HELLO carries the rank; ROOM_OPEN has regions; CHUNK a region, buffers and ndest
 * 3: the rings' wake-ups are socket pairs, not eventfds (KVX_ENG_RINGS)
 * 4: an engine that takes from its event ring while kvxd waits for room there wakes kvxd
 *    (kvx_shring_taken): kvxd no longer looks again every millisecond */
#define KVX_ENG_VERSION 4
#define KVX_ENG_MSG_MAX (64 * 1024)		  /* largest datagram either side sends */
#define KVX_ENG_TEXT_MAX (KVX_ENG_MSG_MAX - 1024) /* admin reply text (counters: every metric) */

enum kvx_eng_type {
	KVX_ENG_HELLO = 1,	/* engine -> kvxd: first message; reply text = node name */
	KVX_ENG_POOL_REG = 2,	/* + one fd (SCM_RIGHTS); reply value = pool id */
	KVX_ENG_POOL_UNREG = 3, /* reply status */
	KVX_ENG_ROOM_OPEN = 4,	/* decode; reply value = generation */
	KVX_ENG_CHUNK = 5,	/* prefill; no reply, failures arrive as events */
	KVX_ENG_ROOM_CLOSE = 6, /* reply status */
	KVX_ENG_ADMIN = 7,	/* reply text */
	KVX_ENG_ROOM_ABORT = 8, /* decode; reply value = the abort generation */
	KVX_ENG_RINGS = 9,	/* after HELLO: move to shared-memory rings (see below) */
	KVX_ENG_ADMIN_AT = 10,	/* reply text from offset on; value = the whole text's length */
	KVX_ENG_REPLY = 64,	/* kvxd -> engine */
	KVX_ENG_EVENT = 65,	/* kvxd -> engine */
};

struct kvx_eng_hdr {
	uint16_t type;	/* enum kvx_eng_type */
	uint16_t flags; /* 0 */
	uint32_t len;	/* whole datagram, header included */
	uint64_t seq;	/* request sequence number; a REPLY echoes it; 0 for EVENT */
};

struct kvx_eng_hello {
	struct kvx_eng_hdr hdr;
	uint32_t version; /* KVX_ENG_VERSION */
	uint32_t rank;	  /* 0..KVX_RANK_MAX: the session's rooms are keyed by (id, rank) */
};

/*
 * KVX_ENG_RINGS: kvxd answers with a REPLY (value = the data bytes of each ring) carrying three
 * fds: a sealed memfd (it cannot shrink or grow) holding two core/shring rings, the submission
 * ring (engine -> kvxd) at offset 0 and the event ring (kvxd -> engine) right after it
 * (kvx_shring_map_bytes(value) each), then the engine's ends of two wake socket pairs
 * (core/shring.h: stream sockets, one byte a wake-up): the one it sends on for the submission
 * ring (kvxd blocks on the other end) and the one it blocks on for the event ring (kvxd sends
 * on the other end).  kvxd keeps its ends to itself, so nothing the engine does to its
 * descriptors can make kvxd block.
 * From that reply on, kvxd sends every REPLY and EVENT through the event ring, and the engine
 * sends every request that carries no fd through the submission ring (the same messages, checked
 * the same way); the socket stays for requests with an fd (POOL_REG) and tells each side that
 * the other went away.  The engine's side of the event ring starts parked: kvxd wakes it after
 * a batch unless the engine announced that it is reading the ring.  The other way, kvxd that
 * finds no room in the event ring says so in the ring (kvx_shring_starve), and the engine that
 * takes a message from it next sends one byte on its end of the event pair (kvx_shring_taken);
 * kvxd looks again only then.  An engine that closes its end of either pair ends its
 * session.  Refused with
 * -EALREADY when the session already has rings, -EBUSY while replies wait for the socket.
 *
 * Core rings: an engine that sets KVX_ENG_RINGS_CORE in flags (a request of the full length;
 * one of the header's length alone asks for none) also gets one more event ring per polling
 * core of kvxd, after the event ring in the memfd, in core order, of the same size; the
 * memfd's size says how many: (2 + n) * kvx_shring_map_bytes(value), n <= KVX_ENG_CORE_RINGS_MAX
 * (a REPLY's status is never positive).  Each is produced by its polling core
 * alone and carries only EVENTs: those of the session's rooms on that core (a decode room's from
 * its open, a prefill room's from the session's first chunk for it), told there without the
 * control core on the way, in order.  A room whose event does not fit its core ring has that
 * event and its later ones in the event ring instead, so an engine reads its core rings before
 * the event ring.  A prefill room's states from before the session claimed it are not told to
 * a session with core rings (its end is).  kvxd writes the same
 * engine wake end for all of them.  A room's end is told exactly once, on one of the rings.
 *
 * Re-armed wake-ups: an engine that sets KVX_ENG_RINGS_REARM says it sets the parked flag of
 * every event ring (its core rings too) again each time it drained its wake end, before it
 * looks at the rings.  kvxd then clears the flag when it wakes the engine (core/shring.h,
 * oneshot): one wake-up for all its batches, from every producer, until the engine drained it,
 * where it would otherwise send one per batch per producer.  An older kvxd refuses the flag
 * (-EINVAL, unknown flags): the engine asks again without it.
 *
 * Wake-ups for ends: an engine that sets KVX_ENG_RINGS_WAKE_ENDS is woken (its wake end written)
 * for REPLYs and for the EVENTs of kvx_eng_state_wakes() only: SUCCESS, FAILED and RELEASED.  An
 * EVENT of a state on the way (BOOTSTRAPPING, WAITING_FOR_INPUT, TRANSFERRING, DRAINING) still
 * goes into its ring, in order, and is read at the engine's next wake-up, which its room's end
 * brings at the latest: for an engine that waits for its rooms' ends, one wake-up per room and
 * side where it had one per state.  An older kvxd refuses the flag (-EINVAL): the engine asks
 * again without it.
 */
#define KVX_ENG_RINGS_CORE 1u
#define KVX_ENG_RINGS_REARM 2u
#define KVX_ENG_RINGS_WAKE_ENDS 4u
#define KVX_ENG_CORE_RINGS_MAX 8 /* kvxd's KVX_MAX_CORES */

/* The states whose EVENTs wake an engine that asked for KVX_ENG_RINGS_WAKE_ENDS: a room's end on
 * either side (decode's FAILED comes before its RELEASED, and says why). */
static inline bool
kvx_eng_state_wakes(int32_t state)
{
	return state == KVX_STATE_SUCCESS || state == KVX_STATE_FAILED ||
	       state == KVX_STATE_RELEASED;
}

struct kvx_eng_rings {
	struct kvx_eng_hdr hdr;
	uint32_t flags; /* KVX_ENG_RINGS_CORE, KVX_ENG_RINGS_REARM, KVX_ENG_RINGS_WAKE_ENDS */
	uint32_t pad;
};

struct kvx_eng_pool_reg {
	struct kvx_eng_hdr hdr;
	struct kvx_pool_geometry geom;
	uint32_t pad;
};

struct kvx_eng_pool_unreg {
	struct kvx_eng_hdr hdr;
	int32_t pool_id;
	uint32_t pad;
};

struct kvx_eng_region {
	int32_t pool_id;
	uint32_t npages;
};

struct kvx_eng_source {
	char name[KVX_NAME_MAX]; /* NUL-terminated */
	uint32_t rank;
	uint32_t pad;
	struct kvx_slice slice[KVX_MAX_REGIONS];
};

/* followed by struct kvx_eng_region regions[nregions], struct kvx_eng_source
 * sources[nsources], then uint32_t pages[sum of the regions' npages], region by region */
struct kvx_eng_room_open {
	struct kvx_eng_hdr hdr;
	uint64_t room;
	uint32_t nregions;
	uint32_t nsources;
};

/* followed by uint32_t pages[npages] */
struct kvx_eng_chunk {
	struct kvx_eng_hdr hdr;
	uint64_t room;
	uint32_t chunk_index;
	int32_t pool_id;
	uint32_t npages;
	uint32_t dst_offset;
	uint32_t last;
	uint32_t region;
	uint32_t buf_first;
	uint32_t buf_count; /* 0: to the pool's last buffer */
	uint32_t ndest;	    /* 0: 1 */
	uint32_t pad;
};

struct kvx_eng_room_close {
	struct kvx_eng_hdr hdr;
	uint64_t room;
};

struct kvx_eng_room_abort {
	struct kvx_eng_hdr hdr;
	uint64_t room;
};

_Static_assert(sizeof(struct kvx_eng_room_abort) == sizeof(struct kvx_eng_room_close),
	       "ROOM_ABORT and ROOM_CLOSE share one layout (libkvx builds both alike)");

/* followed by the command text (not NUL-terminated; hdr.len bounds it) */
struct kvx_eng_admin {
	struct kvx_eng_hdr hdr;
};

/* An admin command whose reply may be longer than one message: offset 0 runs the command and
 * keeps its whole text (at most 4 MiB) for this session; each reply carries the text from
 * offset on (up to KVX_ENG_TEXT_MAX bytes) and, in value, the whole text's length.  The engine
 * asks for the next offsets with the same command text until it has it all; another offset, or
 * another command, is refused with -ESTALE.  Followed by the command text. */
struct kvx_eng_admin_at {
	struct kvx_eng_hdr hdr;
	uint64_t offset;
};

/* followed by text_len bytes of text (not NUL-terminated) */
struct kvx_eng_reply {
	struct kvx_eng_hdr hdr;
	int32_t status; /* 0 or -errno */
	uint32_t text_len;
	int64_t value;
};

_Static_assert(sizeof(struct kvx_eng_reply) + KVX_ENG_TEXT_MAX <= KVX_ENG_MSG_MAX,
	       "a reply with the longest text is one datagram");

struct kvx_eng_event {
	struct kvx_eng_hdr hdr;
	struct kvx_event ev;
};

#endif /* KVX_CORE_ENGINE_PROTO_H */
