/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The one owner of rooms on the control side (layer 2 of control/, control/README.md):
 * constructors, lookup, removal, the per-peer and per-engine room lists, the per-peer caps,
 * the room timers (one deadline per room in a timer heap: no table scans), and telling an
 * engine how its room ended, exactly once.  What a room's deadline means is decided a layer
 * up (control/abort.c, kvxd_abort_on_timer); the loop pops due rooms (kvxd_rooms_due).
 *
 * Thread: the control core only, a registered QSBR reader.  Rooms are found through two
 * cds_lfht tables (by id+role, and by token for WRITE_WITH_IMM) that the polling cores read
 * under QSBR; only the control core adds and removes.  A room is freed only after its core
 * gave it back (ROOM_DROP, then ROOM_FREE) and a grace period, so a pointer from
 * kvxd_room_find() stays valid for the rest of the loop iteration.
 */
#ifndef KVX_CONTROL_ROOMS_H
#define KVX_CONTROL_ROOMS_H

#include <stdbool.h>
#include <stdint.h>

#include <urcu/list.h>

#include "control/kvxd.h"
#include "control/timer.h"

/*
 * Decode abort (DESIGN.md section 5), one state per room, changed only by kvxd_abort_set()
 * (control/abort.c):
 *   NONE     no abort;
 *   ARMED    a fresh generation is armed and the ABORTs are out: waiting, per notified
 *            source, for its ABORT_ACK of that generation or for its QPs to be fenced;
 *   FENCING  the release deadline passed: every silent source's QPs are being fenced (error
 *            state, then destroyed through its connection's journal);
 *   RELEASED every notified source acknowledged or was fenced: ROOM_RELEASE went to the core
 *            (exactly once).  A timer alone never gets a room here.
 * NONE -> ARMED -> (FENCING ->) RELEASED; nothing leaves RELEASED.
 */
enum kvxd_abort_state {
	KVXD_ABORT_NONE = 0,
	KVXD_ABORT_ARMED,
	KVXD_ABORT_FENCING,
	KVXD_ABORT_RELEASED,
	KVXD_ABORT_STATE_COUNT,
};
_Static_assert(KVXD_ABORT_STATE_COUNT == 4, "kvxd_counters.abort_transitions is 4 x 4");

/* A room's place on one peer's list: which room, and which of its sources that peer is. */
struct kvxd_room_link {
	struct cds_list_head node; /* on struct kvxd_peer.rooms */
	struct kvxd_room *room;
	int idx;
	int peer; /* whose list */
};

/* One region of a decode room: destination pages of a pool (the room holds a reference). */
struct kvxd_region {
	struct kvxd_pool *pool;
	uint32_t npages;
	uint32_t *pages;
};

/* What a decode open asks for (DESIGN.md section 6): regions, and sources by node and rank,
 * each with its slice of every region's pages.  Checked by kvxd_decode_room_open_shape. */
struct kvxd_room_shape {
	uint32_t nreg, nsrc;
	struct {
		struct kvxd_pool *pool;
		uint32_t npages;
		const uint32_t *pages;
	} reg[KVX_MAX_REGIONS];
	char names[KVX_MAX_SOURCES][KVX_NAME_MAX];
	uint32_t src_rank[KVX_MAX_SOURCES];
	struct kvx_slice slice[KVX_MAX_SOURCES][KVX_MAX_REGIONS];
};

/* The pools one prefill room's chunks may read (kvxd_room_hold_pool): max_pools_per_engine's
 * default.  A pool holds a room's layers as its buffers, so a room reads one pool per region. */
#define KVXD_ROOM_SRC_POOLS 16

/*
 * The control core's room.  Every field below pc is written and read by the control core only;
 * pc is the polling core's part (verbs/pcore.h), with its own ownership rules.
 */
struct kvxd_room {
	struct kvx_pcore_room pc;
	struct rcu_head rcu;
	struct kvxd_timer tm; /* its next deadline (kvxd_room_timer_arm) */
	/* immutable after creation; decode: its regions, and its sources' names, ranks and slices
	 */
	struct kvxd_region reg[KVX_MAX_REGIONS];
	uint32_t nreg;
	char (*src_names)[64];
	uint32_t src_rank[KVX_MAX_SOURCES];
	struct kvx_slice slice[KVX_MAX_SOURCES][KVX_MAX_REGIONS];
	uint32_t open_gen; /* decode: the generation the open returned */
	/* lifetime */
	int engine_id; /* -1: none (yet), or the engine went away */
	bool removing;
	uint64_t opened_ms;
	uint64_t opened_us; /* the latency histogram's start (kvxd_now_us) */
	bool end_seen;	    /* its end went into the histograms (kvxd_room_ended) */
	uint64_t bytes;	    /* prefill: what its chunks asked to write (the bytes histogram) */
	bool waiting_fired; /* its waiting timeout fired (once) */
	/* ownership and caps */
	/* prefill: its owners, the decode endpoints (peer, rank) whose ROOM_META it took (fan-out:
	 * up to ndest, in arrival order), each with that metadata's generation */
	struct {
		int peer;
		uint32_t rank, gen;
	} owner[KVXD_MAX_TARGETS];
	uint8_t nowners;
	/* prefill: how many decode endpoints its engine's chunks said it feeds (0: no chunk yet).
	 * Until then another endpoint's ROOM_META waits here, and is taken (up to ndest) or
	 * refused once the engine said (kvxd_peer_meta_unpark). */
	uint8_t ndest, nparked;
	struct kvxd_meta *parked[KVXD_MAX_TARGETS];
	int held_by;	    /* the peer whose ROOM_META or ABORT created it (its caps), -1 = none */
	bool held_tomb;	    /* ... charged as a tombstone */
	int tomb_peer;	    /* prefill: 1 + a peer that aborted it before any ROOM_META, 0 = none */
	uint32_t tomb_rank; /* ... the aborting endpoint's rank */
	uint32_t tomb_gen;  /* ... and the generation it aborted: that ROOM_META is refused */
	/* peer lists: decode, one link per source (on peers[pc.src_peer[i]].rooms); prefill,
	 * link 0 on its owner's list (meta_peer) */
	struct kvxd_room_link peer_link[KVX_MAX_SOURCES];
	uint32_t peer_linked; /* bit i: peer_link[i] is on a list */
	uint32_t meta_sent_mask;
	/* decode abort: its state (enum kvxd_abort_state), the armed generation, who
	 * acknowledged, who is being fenced and who was */
	uint8_t ab_state;
	uint32_t abort_gen;
	uint32_t ack_mask, fenced_mask, fencing_mask;
	uint64_t abort_ms, release_deadline_ms;
	uint64_t abort_us; /* the abort-to-release histogram's start */
	uint64_t fence_target[KVX_MAX_SOURCES];
	/* decode: sources notified on a session that ended without failing (a replaced
	 * connection) whose QPs may not be destroyed yet: one could still place a write, so no
	 * release before peers[].qp_sessions_ended reaches stale_target[i] (DESIGN.md 5, rule 6) */
	uint32_t stale_mask;
	uint64_t stale_target[KVX_MAX_SOURCES];
	/* prefill ACK targets: one per decode endpoint, each with its generation, kept until
	 * acknowledged, even past an engine's close */
	struct {
		int peer;
		uint32_t rank; /* the decode endpoint is (peer, rank) */
		uint32_t gen;
	} tgt[KVXD_MAX_TARGETS];
	int ntgt;
	bool drained, tombstone, engine_closed;
	bool abort_sent; /* prefill: its core was told (ROOM_ABORT); later ABORTs only retarget */
	/* its engine: on that engine's room list; told its terminal event (prefill SUCCESS or
	 * FAILED, decode SUCCESS or RELEASED: exactly once); the engine disconnected (since
	 * gone_ms); prefill: the engine submitted its last chunk */
	struct cds_list_head eng_link;
	bool on_eng_list, engine_gone, last_submitted; /* told: pc.told */
	/* prefill: a chunk of it was refused (control/engine.c chunk_refuse_room): it stays
	 * failed, never taken for a new request of the same id, until its engine closes it */
	bool refused;
	uint64_t gone_ms;
	/* prefill: the pools its chunks read, each referenced until the room is freed (a chunk's
	 * own reference goes back once its core built its WRs, which may still be reading) */
	struct kvxd_pool *src_pool[KVXD_ROOM_SRC_POOLS];
	uint8_t nsrc_pool;
};

static inline struct kvxd_room *
kvxd_room_of(struct kvx_pcore_room *pc)
{
	return caa_container_of(pc, struct kvxd_room, pc);
}

static inline int
kvxd_room_state(const struct kvxd_room *r)
{
	return kvx_pcore_room_state(&r->pc);
}

static inline bool
kvxd_room_aborting(const struct kvxd_room *r)
{
	return r->ab_state != KVXD_ABORT_NONE;
}

static inline bool
kvxd_room_released(const struct kvxd_room *r)
{
	return r->ab_state == KVXD_ABORT_RELEASED;
}

/* Prefill: r holds a reference to pool p until it is freed (its WRITEs read p until every WR
 * completed, and a room leaves only then).  0, or -E2BIG: r already reads KVXD_ROOM_SRC_POOLS
 * other pools.  Control core. */
int kvxd_room_hold_pool(struct kvxd_room *r, struct kvxd_pool *p);

/* The room with this id, engine rank and role, or NULL.  Valid until the end of the loop
 * iteration. */
struct kvxd_room *kvxd_room_find(struct kvxd *d, uint64_t id, uint32_t rank, int role);
/* A new prefill room in the table (BOOTSTRAPPING, not yet on any core), or NULL (no memory,
 * or the id is there). */
struct kvxd_room *kvxd_prefill_room_new(struct kvxd *d, uint64_t id, uint32_t rank, int engine_id);
/* A new decode room of this shape (checked by the caller) in both tables, on its engine's
 * (engine_id >= 0) and its sources' lists, with a fresh generation and token; not yet on its
 * core.  src_peer[i]: source i's peer.  NULL: no memory. */
struct kvxd_room *kvxd_decode_room_new(struct kvxd *d, uint64_t id, uint32_t rank, int engine_id,
				       const struct kvxd_room_shape *sh, const int *src_peer);
/* Take a room out of the tables, its lists and its timer; its core gives it back (ROOM_FREE)
 * after every earlier message about it, and it is freed after a grace period. */
void kvxd_room_remove(struct kvxd *d, struct kvxd_room *r);
/* Remove the room if nothing needs it any more: its engine went or closed it, it is removable
 * and it does not linger for a late engine or a late ROOM_META.  Called on every event that
 * can make a room removable (state events, drains, ACKs, engine close, timers). */
void kvxd_room_settle(struct kvxd *d, struct kvxd_room *r);
/* Its core gave it back (ROOM_FREE): free it after a grace period. */
void kvxd_room_free_deferred(struct kvxd_room *r);
/* Decode: SUCCESS or RELEASED.  Prefill: finished, every WR completed, every ACK target
 * acknowledged. */
bool kvxd_room_removable(const struct kvxd_room *r);
/* connect = on_demand.  kvxd_rooms_need_peer: a decode room of ours waits for its ROOM_META to
 * go to p (a session is wanted).  kvxd_rooms_idle_peer: nothing of ours depends on p: every
 * room on its list is removable (decode: SUCCESS or RELEASED; prefill: ended, every WR
 * completed). */
bool kvxd_rooms_need_peer(struct kvxd *d, struct kvxd_peer *p);
bool kvxd_rooms_idle_peer(struct kvxd *d, struct kvxd_peer *p);
/* Every WR the room posted has completed (acquire loads of the core's counters). */
bool kvxd_room_quiescent(const struct kvxd_room *r);

/* Charge a room to a peer's cap (rooms, or tombstones), or move the charge; -1 uncharges. */
void kvxd_room_charge(struct kvxd *d, struct kvxd_room *r, int peer, bool tombstone);
/* Prefill: the room took the ROOM_META of endpoint (peer, rank) (one of its owners from now
 * on, on that peer's list; again: its generation is updated).  At most KVXD_MAX_TARGETS. */
void kvxd_room_set_owner(struct kvxd *d, struct kvxd_room *r, int peer, uint32_t rank,
			 uint32_t gen);
/* Prefill: the index of endpoint (peer, rank) among the room's owners, or -1. */
int kvxd_room_owner(const struct kvxd_room *r, int peer, uint32_t rank);
/* Prefill: another endpoint's ROOM_META before the engine said how many endpoints the room
 * feeds: kept (replacing that endpoint's earlier one), and charged to its peer (parked_held)
 * until it leaves.  false: KVXD_MAX_TARGETS are parked. */
bool kvxd_room_meta_park(struct kvxd *d, struct kvxd_room *r, struct kvxd_meta *m);
/* Prefill: endpoint (peer, rank) has metadata parked on r. */
bool kvxd_room_meta_parked(const struct kvxd *d, const struct kvxd_room *r, int peer,
			   uint32_t rank);
/* Prefill: the engine said (r->ndest): the parked metadata is taken in arrival order while
 * the room has fewer than ndest owners (on to its core), the rest refused and reported. */
void kvxd_room_meta_unpark(struct kvxd *d, struct kvxd_room *r);
/* Prefill: the room ended (SUCCESS or FAILED) with metadata parked: each of those endpoints is
 * refused and told at once (a failure push), never left to its waiting timeout. */
void kvxd_room_meta_refuse_parked(struct kvxd *d, struct kvxd_room *r);
/* Prefill: endpoint (peer, rank) aborted generation gen while that generation's metadata is
 * parked on r (its ABORT is acknowledged at once: nothing was written to it).  The metadata
 * keeps its place: if the engine's ndest makes it one of the room's destinations, the room fails
 * for every endpoint (as an owner's abort does); if not, it goes without a word.  Either way it
 * is never taken. */
void kvxd_room_meta_abort_parked(struct kvxd_room *r, int peer, uint32_t rank, uint32_t gen);
/* r becomes e's room (counted against max_rooms_per_engine, on e's list). */
void kvxd_room_attach_engine(struct kvxd_engine *e, struct kvxd_room *r);
/* r leaves its engine's list (its engine's room count drops). */
void kvxd_room_engine_left(struct kvxd *d, struct kvxd_room *r);

/* Call fn(d, r, i, arg) for every room on the peer's list: decode rooms with i = the index of
 * the source that is this peer, prefill rooms it owns with i = 0.  fn may remove r. */
void kvxd_rooms_of_peer(struct kvxd *d, struct kvxd_peer *p,
			void (*fn)(struct kvxd *d, struct kvxd_room *r, int i, void *arg),
			void *arg);

/* The room's next deadline (KVXD_TIMER_NEVER: none); replaces the one it had. */
void kvxd_room_timer_arm(struct kvxd *d, struct kvxd_room *r, uint64_t due_ms);
/* The next room due at now (its timer disarmed), or NULL. */
struct kvxd_room *kvxd_rooms_due(struct kvxd *d, uint64_t now);
/* The earliest room deadline (KVXD_TIMER_NEVER: none): the loop sleeps no longer. */
uint64_t kvxd_rooms_next_due(const struct kvxd *d);

/* Is state the end of the room as its engine sees it (prefill SUCCESS/FAILED, decode
 * SUCCESS/RELEASED)? */
bool kvxd_room_terminal_for_engine(const struct kvxd_room *r, int state);
/* Its core reported state: the first time it is the room's end for its engine
 * (kvxd_room_terminal_for_engine), the room's latency, and on SUCCESS its bytes, go into the
 * histograms (d->hist).  Later calls do nothing. */
void kvxd_room_ended(struct kvxd *d, struct kvxd_room *r, int state, uint64_t at_us);
/* Tell a room's engine its terminal event unless it was told already (exactly once).  Returns
 * true when this call told it. */
bool kvxd_room_tell(struct kvxd *d, struct kvxd_room *r, const struct kvx_event *ev);

/* Decode: send source src its ROOM_META on its peer's current session (bound to it): 0,
 * -EAGAIN (peer not READY, or sent already), -ENOMEM, or the send error. */
int kvxd_send_room_meta(struct kvxd *d, struct kvxd_room *r, int src);

/* A peer became ready: send the ROOM_META of the decode rooms that were waiting for it. */
void kvxd_rooms_send_meta(struct kvxd *d, struct kvxd_peer *p);

/* Shutdown: is every room quiescent; free every room and the timer heap (after the cores
 * stopped). */
bool kvxd_rooms_quiescent(struct kvxd *d);
void kvxd_rooms_free_all(struct kvxd *d);

#endif /* KVX_CONTROL_ROOMS_H */
