/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Polling cores: the data path.  A polling core owns one CQ, its QPs (one RC QP per peer), the
 * mutable state of its shard of rooms, and WR accounting.  kvx_pcore_poll_once() is one
 * iteration: quiescent state, poll completions in a batch, drain the inbox, post the WR chains
 * (one doorbell per QP), wake the engines whose core rings it put events into.  It takes no
 * lock, allocates nothing and never blocks.  Its only syscalls are waking a control core that
 * announced it is parked (one eventfd write, see core/mbox.h), waking an engine (one
 * non-blocking send per core ring and iteration, see struct kvx_pcore_evq) and whatever the verbs
 * provider does to ring a doorbell (rxe, a software device, enters the kernel there; a hardware NIC
 * does not).  Parking (poll on the completion channel and the inbox, RCU-offline, bounded) happens
 * only after idle_park_us of idleness.
 *
 * Ownership: the control core allocates rooms, chunks, metas and QP contexts and frees them;
 * between handing an object to a core (inbox) and getting it back (outbox) only that core
 * writes it.  Rooms are found through two cds_lfht tables (by id+role, and by token for
 * WRITE_WITH_IMM) that both cores read under QSBR; only the control core adds and removes.
 */
#ifndef KVX_VERBS_PCORE_H
#define KVX_VERBS_PCORE_H

#include <pthread.h>
#include <urcu/list.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>

#include "kvx/kvx.h"
#include "core/config.h"
#include "core/mbox.h"
#include "core/room.h"
#include "core/room_table.h"
#include "core/shring.h"
#include "verbs/vx.h"

#define KVXD_REASON_MAX 96
#define KVXD_BATCH 32
/* A room's WRITE_WITH_IMM carries token base | (immediates - 1) << KVXD_IMM_SRC_BITS | source
 * index: the source ends its share with one immediate per rail it wrote on (each behind that
 * rail's WRITEs, which its RC QP orders), and says in each how many there are */
#define KVXD_IMM_SRC_BITS 4   /* source index (16 sources) */
#define KVXD_IMM_COUNT_BITS 2 /* immediates of the source's share, less one (1..4) */
#define KVXD_TOKEN_SHIFT (KVXD_IMM_SRC_BITS + KVXD_IMM_COUNT_BITS)
_Static_assert((1u << KVXD_IMM_SRC_BITS) == KVX_MAX_SOURCES, "a source index per source");
_Static_assert((1u << KVXD_IMM_COUNT_BITS) == KVX_MAX_RAILS, "an immediate per rail");
#define KVXD_MAX_TARGETS 8 /* decode endpoints of one prefill room (fan-out) */
_Static_assert(KVXD_MAX_TARGETS == KVX_MAX_DESTS, "one bound for the engine and the cores");
#define KVXD_WR_MAX_BYTES (1u << 30) /* one RDMA WRITE moves at most this much */
/* With several rails, a WRITE moves at most this much, and a room's WRITEs go round robin
 * over the rails (Mooncake stripes slices of this size across its NICs) */
#define KVXD_STRIPE_BYTES (64u << 10)

/* A pool an engine registered (control core owns it; immutable while referenced). */
struct kvxd_pool {
	int id;
	int engine_id;
	uid_t uid; /* the registering engine's (pinned bytes are capped per uid) */
	uint8_t *base;
	size_t len;	/* the geometry's bytes, from base */
	size_t map_len; /* the mapping's (len up to a whole huge page on hugetlbfs): pinned */
	uint32_t page_size, npages, nbufs;
	/* registered on every rail (kvxd's [rdma] and [rail.N] devices), in rail order */
	uint32_t lkey[KVX_MAX_RAILS], rkey[KVX_MAX_RAILS];
	struct kvx_vx_mr *mr[KVX_MAX_RAILS];
	atomic_int refs;    /* rooms and chunks that point here */
	bool orphan;	    /* its engine went away, or it is being deregistered: unregister once
			     * refs drops to 0 (kvxd_pool_sweep); no new room or chunk takes it */
	bool registering;   /* its registration runs on a verbs worker: no room or chunk takes
			     * it, and its refs hold one for the registration */
	bool deregistering; /* its deregistration runs on a verbs worker (an orphan): it keeps
			     * its slot, and counts as pinned, until that returns */
	bool dereg_warned;  /* a rail's deregistration failed (logged once) */
	uint64_t dereg_retry_ms; /* not retried before (kvxd_now_ms), after a failure */
};

/* One prefill submission, copied out of the engine's message: src pages of buffers
 * [buf_first, buf_first + nbufs) to the destination pages dst_offset.. of region `region`. */
struct kvxd_chunk {
	struct kvxd_chunk *next;
	struct kvxd_pool *pool;
	uint32_t index, npages, dst_offset;
	uint32_t region, buf_first, nbufs;
	uint32_t ndest; /* decode endpoints the room feeds (1..KVXD_MAX_TARGETS) */
	bool last;
	int engine_id; /* the session it is charged to (max_chunk_mb_per_engine); 0: none */
	uint32_t pages[];
};

/* One region of a ROOM_META: the destination pool, this source's slice of each page (len 0:
 * the whole page) and the region's destination pages (into the meta's pages[]). */
struct kvxd_meta_region {
	uint64_t addr;
	uint32_t rkey[KVX_MAX_RAILS]; /* the destination pool's key on each rail */
	uint32_t page_size, pool_npages, nbufs;
	uint32_t src_off, dst_off, len;
	uint32_t npages;
	const uint32_t *pages;
};

/* Prefill: the decode side's ROOM_META for this source. */
struct kvxd_meta {
	int peer;	/* index in the control core's peer table */
	uint32_t epoch; /* the peer session it arrived on: valid for that session's QPs only */
	uint32_t gen, token;
	uint16_t src_idx, nsrc;
	uint32_t dst_rank; /* the decode endpoint's rank on its node */
	uint32_t nreg;
	/* the control core's, while the metadata is parked: its endpoint aborted the room (the
	 * ABORT was acknowledged at once: nothing was written to it) */
	bool aborted;
	struct kvxd_meta_region reg[KVX_MAX_REGIONS];
	uint32_t pages[]; /* every region's pages, region by region */
};

/*
 * One engine session's event ring produced by one polling core (KVX_ENG_RINGS with core rings,
 * core/engine_proto.h): the core puts a room's events there itself, so the engine hears them
 * without the control core on the way.  The core is the ring's only producer.  The control
 * core makes it with the session, points the session's rooms of this core at it
 * (kvx_pcore_room.evq: a decode room before handing it over, a prefill room when the session's
 * first chunk for it claims it, which may be after its core has it), clears those pointers when the
 * engine leaves, and frees it (and unmaps the ring) only after an RCU grace period: the core loads
 * a room's evq when it uses it and is done with it before its next quiescent state.
 */
struct kvx_pcore_evq {
	struct kvx_shring ring; /* core: the producer's side */
	bool dirty;		/* core: put into since this iteration began (wake the engine) */
	atomic_bool broken;	/* core sets it: the engine wrote an impossible head (-EPROTO) */
	bool wake_ends;		/* KVX_ENG_RINGS_WAKE_ENDS (set before the core sees the ring) */
};

/* How a room's EVENT (KVXD_MSG_EVENT) was told to its engine. */
enum kvxd_told {
	KVXD_TOLD_NO = 0,    /* not: the control core tells it (kvxd_room_tell) */
	KVXD_TOLD_CORE = 1,  /* the core put it into the session's core event ring */
	KVXD_TOLD_CLAIM = 2, /* the core claimed the room's one tell (told = true) but its ring
			      * had no room: the control core sends it, through its own ring */
	KVXD_TOLD_SPILL = 3, /* a state on the way (not the end) that the core ring had no room
			      * for: the control core sends it, through its own ring */
	KVXD_TOLD_NOBODY = 4 /* a state on the way while the room had no core ring (a prefill
			      * room no engine had claimed yet, or whose engine left, or an
			      * engine without core rings): the control core sends it only to an
			      * engine that has no core ring for the room when it takes it */
};

/*
 * A room as its polling core sees it.  The control core embeds it in its own room (struct
 * kvxd_room, control/rooms.h: the abort state, ACK targets, engine and peer links live there)
 * and writes nothing of it after handing the room to its core (ROOM_OPEN, ROOM_META or CHUNK),
 * except where a field says otherwise.  Field ownership:
 *   - immutable: set by the control core before the room is in the tables, never changed;
 *   - core: written by the owning core only (single writer).  The control core reads fsm.state,
 *     wr_posted and wr_done relaxed or with acquire (kvxd_room_state, kvxd_room_quiescent) and
 *     everything else only from the messages the core sends (EVENT carries state, generation,
 *     error and reason), except that gen, error and reason are final once a prefill room is
 *     SUCCESS or FAILED: after an acquire load that saw that state it may read them;
 *   - meta_epoch: the control core stores it with release before the ROOM_META that it binds
 *     goes out; the core loads it with acquire;
 *   - evq: the control core stores it (release), for a decode room before the room goes to its
 *     core, for a prefill room when its engine claims it (the core may have it already: an event
 *     it puts while evq is NULL makes it send all later ones through the control core, see
 *     tell_core), and clears it when the room's engine leaves; the core loads it (acquire) once
 *     per use;
 *   - told: the room's end was told to its engine (exactly once).  Whoever tells it wins it
 *     first with a compare-and-swap: the core (an end into evq) or the control core
 *     (kvxd_room_tell).  A claim that cannot be delivered is released with a store.
 */
struct kvx_pcore_room {
	/* immutable */
	struct kvx_room_table_node by_id;    /* key: id << 1 | role */
	struct kvx_room_table_node by_token; /* decode: key = token base */
	uint64_t id;
	uint32_t rank; /* its engine's rank: rooms are keyed by (id, rank, role) */
	uint32_t token;
	int core;
	uint8_t role;
	uint16_t nsrc;
	int src_peer[KVX_MAX_SOURCES]; /* decode: the peer of each source */
	uint32_t meta_epoch[KVX_MAX_SOURCES];
	struct kvx_pcore_evq *_Atomic evq; /* its engine's event ring on this core, if any */
	atomic_bool told;
	/* core */
	struct kvx_room_fsm fsm;
	bool evq_spilled; /* an event could not go into evq: the rest go by the control core */
	uint32_t gen;	  /* the generation its events carry: decode's open or abort generation,
			   * prefill's from its ROOM_META */
	_Atomic uint64_t wr_posted, wr_done;
	int32_t error;
	char reason[KVXD_REASON_MAX];
	uint32_t src_done_mask;
	/* decode: each source's immediates taken, and how many its first said it sends */
	uint8_t imm_seen[KVX_MAX_SOURCES], imm_want[KVX_MAX_SOURCES];
	struct kvxd_chunk *pend_head, *pend_tail; /* prefill: not yet posted */
	struct kvx_pcore_room *ready_next;	  /* prefill: in the core's ready list */
	bool in_ready, last_posted;
	/* prefill, by destination: the rails its WRITEs went on, and the session of their QPs
	 * (imm_mixed: of more than one session, a replaced connection) */
	uint8_t rails_used[KVXD_MAX_TARGETS];
	uint32_t used_epoch[KVXD_MAX_TARGETS];
	uint8_t imm_mixed;
	/* prefill, the destination whose last chunk is being ended (post_d): the rails whose
	 * immediate has not gone yet, how many immediates its share ends with (0: not decided
	 * yet), and whether they wait for every WRITE of the room to complete */
	uint8_t imm_todo, imm_count;
	bool imm_waited;
	/* prefill: the ROOM_META of each decode endpoint it feeds (fan-out), in arrival order,
	 * and how many its engine's chunks said it feeds (0: no chunk yet).  Its chunks are
	 * posted once all ndest are known, to each of them in turn. */
	struct kvxd_meta *metas[KVXD_MAX_TARGETS];
	uint8_t nmeta, ndest;
	/* prefill: the QPs its errored WRs were on (at most one per destination and rail) */
	struct kvxd_qpc *err_qpc[KVXD_MAX_TARGETS * KVX_MAX_RAILS];
	uint8_t nerr_qpc;
	struct kvx_pcore_room *drain_next; /* prefill: in the core's drain-wait list */
	bool in_drain, drained_sent;
	bool drained_quiet; /* its DRAINED went without waking the control core (a SUCCESS) */
	uint32_t post_d, post_b, post_i; /* prefill: where the chunk at pend_head continues
					  * (destination, buffer, page): a chunk larger than
					  * the send queue goes in parts */
};

enum kvxd_tag_kind { KVXD_TAG_SEND = 1, KVXD_TAG_RECV = 2 };

struct kvxd_qpc;

struct kvxd_wr {
	uint8_t kind; /* KVXD_TAG_SEND; first member: wr_id points here */
	struct kvx_pcore_room *room;
	struct kvxd_qpc *qpc;
	struct kvxd_wr *next_out; /* posted, in send-queue order (qpc->out_head) */
	int next_free;
};

/* One RC QP to one peer on one core and one rail. */
struct kvxd_qpc {
	uint8_t recv_tag; /* KVXD_TAG_RECV; the wr_id of every receive points here */
	struct kvx_vx_qp *qp;
	uint32_t qpn;
	int peer;
	int rail; /* the device it is on: its core's CQ of that rail; lkeys and rkeys of that rail
		   */
	uint32_t epoch; /* its session: set by the control core before QP_ADD (and again by
			 * QP_ACTIVATE, same value); the owning core reads it */
	uint32_t sq_depth, rq_depth;
	uint32_t sq_used; /* send WRs posted, not completed (= on the out list) */
	/* posted WRs in send-queue order: a completion retires every WR up to its own (only a
	 * chunk part's last WR is signalled; completions come in order on an RC QP) */
	struct kvxd_wr *out_head, *out_tail;
	uint32_t rq_posted; /* receives posted, not completed */
	uint32_t rq_deficit;
	bool errored, closing, quiesce_sent;
	/* QP_ERRORED went to the control core: it tells the peer to fence its end of this QP
	 * (DESIGN.md 5, rule 6) before anything the QP carried is acknowledged, so no room that
	 * had WRs on it drains, and no QP_QUIESCED or QP_RETIRED goes, before it */
	bool err_sent;
	bool stuck;	 /* it holds WRs it will not run (their doorbell was refused) */
	bool stuck_sent; /* and QP_STUCK went to the control core */
	bool marker_due; /* it took a list in part: marker still to post (post_marker) */
	struct kvx_vx_write marker;
	struct kvxd_wr *wrs;
	int free_head;
	uint32_t max_sge;
	struct kvx_vx_sge *sges; /* max_sge per WR slot: valid while that WR is outstanding */
	struct kvx_vx_write *chain;
	int chain_n;
	struct kvxd_qpc *next;
};

enum kvxd_msg_type {
	/* control -> core */
	KVXD_MSG_QP_ADD = 1,   /* qpc (INIT, receives posted): own its completions from now on */
	KVXD_MSG_QP_ACTIVATE,  /* qpc: connected; send to its peer through it (gen = epoch) */
	KVXD_MSG_QP_REMOVE,    /* qpc: the control core moved it to ERR; retire when drained */
	KVXD_MSG_ROOM_OPEN,    /* decode room: metas are going out */
	KVXD_MSG_ROOM_FAIL,    /* room: fail it (error, reason) */
	KVXD_MSG_ROOM_META,    /* prefill room + meta */
	KVXD_MSG_CHUNK,	       /* prefill room + chunk */
	KVXD_MSG_ROOM_DROP,    /* room left the tables: return it for freeing */
	KVXD_MSG_ROOM_ABORT,   /* decode: fail, arm gen, DRAINING; prefill: fail, report drain */
	KVXD_MSG_ROOM_RELEASE, /* decode: nothing can write any more: RELEASED (gen) */
	KVXD_MSG_PEER_RAILS,   /* peer: the rails its WRITEs avoid (rails_down), and whether new
				* WRITEs to it wait (hold: reply PEER_IDLE once none is in flight) */
	/* core -> control */
	KVXD_MSG_EVENT = 32,  /* room state changed (state, error, reason) */
	KVXD_MSG_STATUS_PUSH, /* prefill room failed: tell the decode endpoint */
	KVXD_MSG_QP_QUIESCED, /* errored qpc has no WR left: replace the connection */
	KVXD_MSG_QP_RETIRED,  /* qpc drained after QP_REMOVE: destroy it */
	KVXD_MSG_ROOM_FREE,   /* room: free after a grace period */
	KVXD_MSG_CHUNK_FREE,  /* chunk: free */
	KVXD_MSG_META_FREE,   /* meta: free */
	KVXD_MSG_PEER_IDLE,   /* peer held: no WR to it in flight on this core (gen = epoch,
			       * src_idx = the core) */
	KVXD_MSG_DRAINED,     /* prefill room FAILED/SUCCESS, every WR completed, its errored QP
			       * quiescent: nothing it posted can still write */
	KVXD_MSG_QP_STUCK,    /* qpc (gen = epoch) took a list of WRs but refused its doorbell (rxe,
			       * a QP not in RTS): they run never and complete only as flushes once
			       * the QP is in ERR: move it there now */
	KVXD_MSG_QP_ERRORED,  /* qpc (gen = epoch) is in error: its WRITEs may still be in the
			       * network (a peer's end of the QP still takes them): before any
			       * DRAINED of a room it carried */
};

struct kvxd_msg {
	uint32_t type;
	int32_t error;
	struct kvx_pcore_room *room;
	struct kvxd_qpc *qpc;
	void *ptr; /* chunk or meta */
	uint64_t room_id;
	uint32_t gen;
	int peer;
	uint16_t src_idx;
	uint8_t state;
	uint32_t dst_rank, src_rank; /* STATUS_PUSH: the decode endpoint's rank and the room's */
	uint8_t rails_down;	     /* PEER_RAILS */
	bool hold;		     /* PEER_RAILS */
	uint8_t told;		     /* EVENT: enum kvxd_told */
	uint64_t at_us; /* EVENT of a room's end: when the core set it (clock_us); else 0 */
	char reason[KVXD_REASON_MAX];
};

/* Counters: single writer (the core), read relaxed by the control core. */
struct kvxd_core_stats {
	_Atomic uint64_t iterations, parks, wr_posted, wc_ok, wc_err, wc_flush, recv_imm, bad_imm,
		bytes_posted, rooms_success, rooms_failed, outbox_full, chunks_skipped, recv_err,
		imm_not_owner, chunks_too_big, wr_credited, chunk_parts, sge_posted,
		chunks_deferred, imm_held, imm_split, events_core, events_core_full, engine_wakes;
	/* by rail: WRs and bytes posted on it */
	_Atomic uint64_t rail_wrs[KVX_MAX_RAILS], rail_bytes[KVX_MAX_RAILS];
};

struct kvxd_core {
	int idx;
	int cpu; /* -1: not pinned */
	struct kvx_vx_cq *cq[KVX_MAX_RAILS];
	struct kvx_mbox *inbox, *outbox;
	struct kvx_room_table *by_id, *by_token;
	struct kvxd_qpc *qpcs;
	struct kvxd_qpc *qpc_by_peer[KVX_MAX_PEERS][KVX_MAX_RAILS];
	int nrails; /* CQs, one per rail (device) */
	/* by rail: armed by a park, and its event (if it was raised) not yet taken: an armed CQ
	 * stays armed until a completion fires it, and a raised event stays readable on its fd,
	 * so a park arms only the CQs whose event it took, never armed, or whose arm failed */
	bool cq_armed[KVX_MAX_RAILS];
	/* by peer (PEER_RAILS): rails its WRITEs avoid (a rail whose QP failed, until the session
	 * is replaced), and a hold: new WRITEs wait, PEER_IDLE once none is in flight */
	uint8_t rails_down[KVX_MAX_PEERS];
	bool hold[KVX_MAX_PEERS], hold_told[KVX_MAX_PEERS];
	int nhold;
	/* event rings put into this iteration: their engines are woken at its end (one wake-up
	 * per ring, only to an engine that announced it parks) */
	struct kvx_pcore_evq *evq_dirty[KVXD_BATCH];
	int nevq_dirty;
	int poll_rail;	 /* the CQ the next iteration polls first */
	uint32_t stripe; /* the rail the next striped WR starts on (round robin) */
	struct kvx_pcore_room *ready_head, *ready_tail;
	struct kvx_pcore_room *drain_head; /* FAILED prefill rooms waiting to drain */
	/* drain_recheck runs (its DRAINED use only the outbox beyond the iteration's reserve);
	 * a drained room is still to be told (the next iteration rechecks) */
	bool drain_bulk, drain_again;
	/* chunks of failed or dropped rooms not yet given back (CHUNK_FREE): a room may hold any
	 * number, so they go back a bounded batch per iteration, never past the outbox's room */
	struct kvxd_chunk *dead_head, *dead_tail;
	uint32_t idle_park_us;
	uint64_t idle_since_ns;
	/* the control core's clock (kvxd_now_us), set by it after init: an EVENT the control core
	 * takes later than it happened still counts from when it happened.  NULL: not stamped. */
	uint64_t (*clock_us)(void);
	atomic_bool stop;
	pthread_t thread;
	bool running;
	struct kvx_room_counters room_ctr;
	struct kvxd_core_stats st;
	/* control core only: messages the inbox could not take yet, in order (a ring that
	 * grows); every later message queues behind them.  Retried by kvx_pcore_flush(). */
	struct kvxd_msg *ovf;
	uint32_t ovf_head, ovf_len, ovf_cap;
	uint64_t ovf_queued, ovf_max; /* messages that went through it; its high-water mark */
};

/* Control core: set up a core (a CQ on each of the ndev devices, its rails in order;
 * mailboxes).  Returns 0 or -errno. */
int kvx_pcore_init(struct kvxd_core *c, int idx, int cpu, struct kvx_vx_dev *const *devs, int ndev,
		   const struct kvx_config *cfg, struct kvx_room_table *by_id,
		   struct kvx_room_table *by_token);
/* Control core, after the thread stopped and every qpc was retired. */
void kvx_pcore_fini(struct kvxd_core *c);

/* One iteration; returns the amount of work done (0 = idle).  Thread: the owning core (or a
 * test stepping it).  RCU: registered and online; passes a quiescent state. */
int kvx_pcore_poll_once(struct kvxd_core *c);
/* Block until a completion or a message arrives, at most a bounded time; arms only the CQs
 * whose event a park took (or never armed, or whose arm failed), and takes only the events
 * poll reported.
 * Thread: the owning core (or a test stepping it).  RCU: registered; offline while it waits. */
void kvx_pcore_park(struct kvxd_core *c);

/* Start / stop the pinned thread that loops poll_once (parking when idle). */
int kvx_pcore_start(struct kvxd_core *c);
void kvx_pcore_stop(struct kvxd_core *c);

/* Control core: send a message to the core.  Lossless: when the inbox is full (or earlier
 * messages still wait) it is queued in order on the overflow ring and delivered by
 * kvx_pcore_flush().  Returns 0, or -ENOMEM (the ring could not grow: logged).  Never blocks. */
int kvx_pcore_send(struct kvxd_core *c, const struct kvxd_msg *m);
/* Control core: kvx_pcore_send() for a message nothing waits on while the core is parked (a
 * decode room's open, for an engine woken only for its rooms' ends): it does not wake a parked
 * core (kvx_mbox_put_quiet), which takes it at its next wake-up (a completion, another message,
 * or a park's bound).  Lossless and in order like kvx_pcore_send(). */
int kvx_pcore_send_quiet(struct kvxd_core *c, const struct kvxd_msg *m);
/* Control core: one that is not lossless, for back-pressure (engine chunks): 0 or -ENOBUFS when
 * the inbox is full or the overflow ring is not empty. */
int kvx_pcore_try_send(struct kvxd_core *c, const struct kvxd_msg *m);
/* Control core: move what the inbox takes from the overflow ring.  Returns messages still
 * waiting. */
uint32_t kvx_pcore_flush(struct kvxd_core *c);
/* A QP context for a send queue of sq_depth WRs of up to max_sge scatter-gather entries each
 * (1 .. KVX_VX_MAX_SGE: the QP's own limit, kvx_vx_dev_info.max_sge). */
struct kvxd_qpc *kvx_pcore_qpc_alloc(uint32_t sq_depth, uint32_t rq_depth, uint32_t max_sge);
void kvx_pcore_qpc_free(struct kvxd_qpc *q);

/* The by_id table's sub-key of a room: its engine rank and role (the key is the room id). */
static inline uint64_t
kvxd_room_sub(uint32_t rank, int role)
{
	return (uint64_t)rank << 1 | (uint64_t)role;
}

/* The room's state as its core last set it.  Thread: any (acquire; pairs with the core's
 * release in kvx_room_fsm_set). */
static inline int
kvx_pcore_room_state(const struct kvx_pcore_room *r)
{
	return __atomic_load_n(&r->fsm.state, __ATOMIC_ACQUIRE);
}

#endif /* KVX_VERBS_PCORE_H */
