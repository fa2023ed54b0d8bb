/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kvxd's shared state: layer 0 of control/ (control/README.md).  Data only; each layer's
 * functions are declared in its own header.
 *
 * kvxd's control core: one event loop (epoll) on the main thread, pinned to control_cpu, for
 * peer TCP connections (handshakes, room metadata, failure push), engine Unix sockets, timers,
 * and the outboxes of the polling cores.  Everything here runs on that one thread unless a
 * comment says otherwise; it is a registered QSBR reader, offline while it waits in epoll.
 */
#ifndef KVX_CONTROL_KVXD_H
#define KVX_CONTROL_KVXD_H

#include <pthread.h>
#include <sched.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include <urcu/list.h>

#include "kvx/kvx.h"
#include "core/auth.h"
#include "core/config.h"
#include "core/engine_proto.h"
#include "core/hist.h"
#include "core/log.h"
#include "core/room_table.h"
#include "core/shring.h"
#include "core/slab.h"
#include "core/wire.h"
#include "verbs/pcore.h"
#include "verbs/vx.h"
#include "control/timer.h"

#define KVXD_MAX_ENGINES 64
#define KVXD_MAX_POOLS 256
#define KVXD_BYE_REPLACE 1 /* BYE reason: replacing QPs after an error */
/* [node] connect = on_demand: a session no room used for idle_ms is closed in two steps, so
 * that neither side can have anything in flight.  IDLE_ASK: "no room of mine needs you; close if
 * none of yours needs me" (the session stays; the peer ignores it if it has rooms).  IDLE: "none
 * of mine either: closed" (both sides end the session quietly: rooms carry on, and a room that
 * needs the peer later sets up a new session). */
#define KVXD_BYE_IDLE_ASK 2
#define KVXD_BYE_IDLE 3
/* The answer to a dial we cannot take yet: on_demand, to a HELLO when our CQs have no room for
 * another session (we ask our longest idle session to close meanwhile); and to an AUTH while
 * our cores still flush the peer's last session (a planned replacement on a slow node).  The
 * dialer gives up quietly (nothing fails) and dials again shortly. */
#define KVXD_BYE_BUSY 4
/* Several rails: the node whose retry of a failed rail comes first has nothing of its own in flight
 * to the peer (its WRITEs held), but the peer's WRITEs to it may still be.  HOLD_ASK: "hold yours
 * and, once none is in flight, replace the session (BYE REPLACE)", so that the replacement
 * flushes nobody's WRITEs.  Sent only to a peer whose HELLO has KVX_WIRE_FEAT_HOLD_ASK; the asker
 * replaces the session itself if no BYE REPLACE comes in time. */
#define KVXD_BYE_HOLD_ASK 5
/* FENCE | lane << 8: "my QP of that lane failed: move your end of it to the error state now".
 * A QP in error sends nothing more, but what it sent may still be in the network (held in a
 * neighbour entry that is not resolved, a switch buffer): the peer's end of the QP, still in
 * RTS, would place it, in pages the peer released meanwhile.  The sender acknowledges nothing
 * that QP carried before this BYE (the ABORT_ACKs come behind it on the same stream), and the
 * peer fences before it reads the next frame (DESIGN.md 5, rule 6: a responder QP in error
 * accepts no further write).  Sent only to a peer whose HELLO has KVX_WIRE_FEAT_LANE_FENCE; any
 * other peer's session is replaced at once instead.  The session stays. */
#define KVXD_BYE_FENCE 6
#define KVXD_MAX_LANES                                                            \
	(KVX_MAX_CORES * KVX_MAX_RAILS) /* a session's QPs: one per core per rail \
					 */
#define KVXD_JOURNAL_MAX (4 * KVXD_MAX_LANES + 8)
/* Freed chunks kept for reuse (kvxd_chunk_alloc), at most this many bytes, headers included;
 * past it a freed chunk goes back to free().  4 MiB keeps e.g. 13000 chunks of 64 pages, or 255
 * of the largest (KVX_MAX_ROOM_PAGES pages, 16 KiB each): more than a node has in flight at
 * once between its control core and its polling cores, in steady state. */
#define KVXD_CHUNK_CACHE_BYTES (4ull << 20)

enum kvxd_fd_kind {
	KVXD_FD_TCP_LISTEN = 1,
	KVXD_FD_ENG_LISTEN,
	KVXD_FD_PEER,
	KVXD_FD_PENDING,
	KVXD_FD_ENGINE,
	KVXD_FD_ENGINE_RING, /* an engine session's submission-ring wake end (ptr: the session) */
	KVXD_FD_ENGINE_ROOM, /* its event ring's wake end: the engine took what we wait to put */
	KVXD_FD_OUTBOX,
	KVXD_FD_SIGNAL,
	KVXD_FD_METRICS_LISTEN, /* [metrics] listen (control/metrics_http.h) */
	KVXD_FD_METRICS_CONN,	/* one of its connections */
	KVXD_FD_ETCD,		/* a connection to etcd's gateway (control/etcd.h) */
	KVXD_FD_VWORK,		/* the verbs worker's done wake-up (control/vwork.h) */
};

struct kvxd_fd {
	int kind;
	void *ptr;
};

/* A byte stream with framing buffers (peer connections and not-yet-identified sockets). */
struct kvxd_stream {
	int fd; /* -1: none */
	struct kvxd_fd ev;
	uint8_t *rx;
	size_t rx_len, rx_cap;
	uint8_t *tx;
	size_t tx_len, tx_off, tx_cap;
	bool want_out;
};

/* An accepted TCP connection that has not authenticated yet: it must say HELLO (a configured,
 * allowed peer that we do not dial, from one of that peer's addresses), get our HELLO_ACK and
 * answer with a valid AUTH before pending_ms.  Until then it touches no peer state.  One that
 * authenticated but is not to become a session (settled) stays here until its peer closes it. */
struct kvxd_pending {
	struct cds_list_head link; /* d->pending, oldest first */
	struct kvxd_stream s;
	uint32_t addr; /* source IPv4, host byte order */
	uint64_t deadline_ms;
	struct kvx_wire_seq seq;
	struct kvx_wire_hello hello; /* the initiator's HELLO, once received */
	int peer;		     /* -1 until HELLO named one */
	bool dead;		     /* dropped: on d->pending_dead until the loop iteration ends */
	bool settled; /* authenticated, but not to become a session: our own dial to its peer won
		       * (crossing dials), or it was answered BYE BUSY.  What comes on it is read
		       * and dropped until the peer closes it: closed by us with frames of its
		       * unread, it would be reset, and the reset can overtake our BYE */
	uint64_t nonce_a;  /* ours, in HELLO_ACK */
	uint64_t answered; /* when we sent HELLO_ACK (d->handshake_clock) */
};

enum kvxd_journal_kind {
	KVXD_J_SOCKET = 1, /* the control connection: close it */
	KVXD_J_SLOT,	   /* the peer-table slot (the session): free it */
	KVXD_J_QPC,	   /* a core's QP context (memory): free it */
	KVXD_J_QP,	   /* a QP on a core's CQ: destroy it (through its core once published) */
	KVXD_J_QP_ARMED,   /* a QP past RTR, able to take writes: fence it (error state) first */
	KVXD_J_CONNECT,	   /* the QPs' moves to RTR and RTS, on the verbs worker: wait for it */
};

enum kvxd_release_step {
	KVXD_REL_NONE = 0,
	KVXD_REL_REMOVING, /* published QP: its core drains it (QP_REMOVE sent) */
	KVXD_REL_RETIRED,  /* its core gave it back: destroy it */
};

struct kvxd_journal_entry {
	uint8_t kind;
	uint8_t lane; /* KVXD_J_QPC..: the QP's lane (core and rail, kvxd_lane_core/_rail) */
	uint8_t step; /* enum kvxd_release_step (KVXD_J_QP) */
	bool handed;  /* KVXD_J_QP: published to its polling core */
};

/* Every native resource a peer setup acquired, in order (DESIGN.md section 4). */
struct kvxd_journal {
	struct kvxd_journal_entry e[KVXD_JOURNAL_MAX];
	int n;
};

enum kvxd_peer_state {
	KVXD_PEER_IDLE = 0,    /* no connection; the initiator retries at retry_at_ms */
	KVXD_PEER_CONNECTING,  /* TCP connect in progress */
	KVXD_PEER_HELLO,       /* HELLO sent / awaited */
	KVXD_PEER_QP_EXCHANGE, /* QPs created, QP_INFO / QP_READY exchange */
	KVXD_PEER_READY,       /* published to the polling cores */
	KVXD_PEER_CLOSING,     /* torn down; the journal is still being rolled back */
	KVXD_PEER_STATE_COUNT,
};

struct kvxd_status_entry {
	struct kvx_wire_room_status st;
	uint64_t queued_ms;
	uint32_t sent_epoch; /* 0: not sent yet */
};

/* Verbs calls that may block, made by the verbs workers (control/vwork.h) off the control core.
 * Written by the control core before it is submitted, by its worker until it is done, read by
 * the control core after. */
enum kvxd_vjob_kind {
	/* one session's QPs to RTR and RTS: on a RoCE device (rxe among them) the move to RTR
	 * resolves the peer's address in the kernel, and where it cannot (a cut link) that call
	 * blocks for about a second */
	KVXD_VJOB_CONNECT = 0,
	/* a pool's memory registered on every rail: the kernel pins every page, in time
	 * proportional to the pool (0.29 s for 256 MiB in the VM) */
	KVXD_VJOB_MR_REG,
	/* a pool's memory deregistered on every rail, then unmapped: the kernel unpins every
	 * page and tears the mapping down (5 and 34 ms for 256 MiB in the VM) */
	KVXD_VJOB_MR_DEREG,
	/* worker threads of their own each: a long registration never delays a session */
	KVXD_VJOB_KINDS,
};
/* Connect workers ([cores] connect_workers): sessions whose QPs' moves block (a cut rail: a
 * second per peer) come up side by side, so that one peer's cut link does not hold the other
 * peers' sessions.  Registration workers ([cores] mr_workers): the engines of a node (one per
 * GPU) register their pools side by side, so that one engine's large pool does not hold the
 * others' start.  One deregistration worker. */
#define KVXD_VWORK_THREADS_MAX (2 * KVX_CFG_WORKERS_MAX + 1)

struct kvxd_vjob {
	struct kvxd_vjob *next;
	uint8_t kind; /* enum kvxd_vjob_kind */
	bool busy;    /* submitted, and not yet taken back by the control core */
	bool cancel;  /* its session ended: calls not yet made are skipped (atomic) */
	/* KVXD_VJOB_CONNECT (in the peer) */
	int peer;	/* its index in d->peers */
	uint32_t lanes; /* the lanes to bring up (a bit each) */
	struct kvx_vx_qp *qp[KVXD_MAX_LANES];
	struct kvx_vx_qp_attr attr[KVXD_MAX_LANES];
	uint8_t rail[KVXD_MAX_LANES];
	/* results by lane: how far it got (enum kvxd_vjob_stage) and the failed call's error */
	uint8_t stage[KVXD_MAX_LANES];
	int rc[KVXD_MAX_LANES];
	/* KVXD_VJOB_MR_REG and _DEREG (allocated by the engine layer): the pool's MRs go into
	 * (out of) pool->mr[], which nothing reads until the job is done (the pool is
	 * registering, its refs held; or deregistering, an orphan nothing holds) */
	struct kvxd_pool *pool;
	int engine_id; /* the engine that asked, and its request (answered when done); */
	uint64_t seq;  /* _DEREG: engine_id -1 when no engine waits (it left, or the sweep) */
	bool unmapped; /* _DEREG: every rail deregistered, and the memory unmapped */
	/* _DEREG of a pool whose registration failed: its POOL_REG's answer (error and text),
	 * given once the pool is gone (an engine that tries again finds its slot free) */
	int answer;
	char why[160];
	int nrails;
	struct kvx_vx_dev *dev[KVX_MAX_RAILS];
	int mr_rc, mr_rail; /* the first rail whose registration failed, and its error */
};

enum kvxd_vjob_stage {
	KVXD_VJOB_NONE = 0, /* not tried: its rail failed on an earlier lane, or kvxd stops */
	KVXD_VJOB_FAILED,   /* the move to RTR failed (rc) */
	KVXD_VJOB_RTR,	    /* at RTR; the move to RTS failed (rc) */
	KVXD_VJOB_RTS,
};

struct kvxd_peer {
	int idx;
	char name[KVX_CFG_NAME_MAX];
	struct kvx_config_addr addr;
	bool initiator; /* we dial (our name sorts first) */
	bool allowed;
	enum kvxd_peer_state state; /* written only by peer_set_state() (peer.c) */
	struct kvxd_stream s;
	struct kvx_wire_seq seq;
	struct kvxd_journal j;
	struct kvxd_qpc *qpc[KVXD_MAX_LANES]; /* by lane: core * nrails + rail */
	uint32_t psn[KVXD_MAX_LANES];
	bool sent_ready, got_ready;
	struct kvxd_vjob vjob; /* its QPs' connection, while on the verbs worker */
	bool paused;	       /* operator: no connection until resumed */
	bool try_once;	       /* operator: one attempt, pause again if it fails */
	bool stalled;	       /* fault handshake.stall: ignore this session's input */
	bool replacing;	       /* this reset replaces QPs after an error (BYE 1): rooms carry on */
	bool lost;	       /* its last session ended by failure, and no new one is up yet */
	bool fence_req;	       /* kvxd_peer_fence_request(): reset at the next kvxd_peer_tick() */
	bool quiet;  /* this reset ends a session both sides agreed to close, or a dial that
		      * crossing dials superseded: nothing failed, rooms carry on */
	bool dialer; /* the setup in progress (or the session) is one we dialled */
	bool want;   /* on_demand: a room may need a session (checked when a dial is due) */
	/* connect = on_demand: when a room last needed this session, and when we last asked
	 * the peer to close it (KVXD_BYE_IDLE_ASK) */
	uint64_t busy_ms, idle_asked_ms;
	/* runtime membership (kvxd_peer_add/remove, control/members.h): a removed peer is torn
	 * down like a lost one and never dialled or accepted again; its slot is freed (vacant,
	 * reused by a later add) once it is idle, its journal empty and no room links to it */
	bool removing;
	bool vacant;
	bool discovered; /* found through etcd ([membership]), not a [peer.*] section */
	bool seen;	 /* discovered: listed by the registry's last full read */
	/* discovered, no longer listed, but its session was READY: kept until that session
	 * ends (kvxd_peer_tick removes it then), so that a lease that lapsed while etcd was slow
	 * does not tear down a healthy session */
	bool unlisted;
	/* discovered, listed at another address or GID while its session was READY: the live,
	 * authenticated session is kept (whoever can write to etcd must not end it); once it
	 * ends, kvxd_peer_tick removes the peer and asks for a full read, which finds it where
	 * the registry then says */
	bool moved;
	uint64_t
		etcd_epoch; /* found through etcd: its entry's registration time (older: refused) */
	char fence_why[160];
	uint32_t epoch;
	/* several rails: rails whose QP failed in this session (its rooms' WRITEs avoid them), when
	 * the session is replaced to try them again (rail_retry_ms, after rail_backoff_ms: 5 s,
	 * doubling to 60 s), and that replacement's drain: new WRITEs held until no core has one
	 * in flight (rail_idle_cores: the cores that said so) */
	uint8_t rails_down;
	bool rail_hold;
	uint32_t rail_idle_cores;
	/* ... its two sides (KVXD_BYE_HOLD_ASK): when we asked the peer to hold its WRITEs (0: not
	 * asked), since when we hold ours (rail_hold), and whether we do because it asked */
	uint64_t hold_asked_ms, rail_hold_ms;
	bool hold_for_peer;
	uint32_t features; /* its HELLO's (this session's) */
	/* KVXD_BYE_FENCE, by lane: lanes of this session whose QP failed here (the peer told to
	 * fence its end) or that we fenced as the peer asked; the latter alone */
	uint64_t lanes_fenced, lanes_fenced_by_peer;
	uint64_t rail_retry_ms, rail_backoff_ms, ready_ms;
	uint64_t dial_held_ms;	   /* on_demand: since when a pending connection of its holds our
				    * dial off (0: none; dial_due) */
	uint64_t ready_at;	   /* when it last became READY (d->handshake_clock) */
	uint64_t nonce_i, session; /* initiator: the HELLO of the handshake in progress */
	uint64_t last_rx_ms, next_hb_ms; /* READY: the last frame from it; our next HEARTBEAT */
	uint64_t deadline_ms, retry_at_ms, sweep_at_ms;
	uint64_t qp_sessions_ended; /* sessions whose every QP was destroyed (fences wait on it) */
	char last_error[256];
	/* ROOM_STATUS frames of the last waiting_ms, sent or not.  A frame written into a
	 * connection that the far side was closing at the same moment is lost with it, so every
	 * new session of the peer starts by (re)sending these; decode drops duplicates. */
	struct kvxd_status_entry *pend_status;
	int npend_status, cap_status;
	bool status_retry; /* an entry could not be sent on the live session: the tick retries */
	uint64_t n_handshakes, n_setup_failures, n_resets;
	uint64_t hs_start_us; /* when this setup left IDLE (the handshake histogram) */
	/* what this peer's frames made us hold: rooms its ROOM_META created, tombstones its
	 * ABORTs left ([security] max_rooms_per_peer, max_tombstones_per_peer), and its ROOM_METAs
	 * parked on other endpoints' rooms until their engine says how many endpoints they feed
	 * (they count against max_rooms_per_peer with the rooms) */
	uint32_t rooms_held, tombstones_held, parked_held;
	/* the slot's epoch when this peer took it: what carries an earlier epoch (a parked
	 * ROOM_META) is an earlier peer's, and never charged to this one */
	uint32_t slot_epoch;
	/* the rooms that depend on it: decode rooms it is a source of, prefill rooms it owns
	 * (struct kvxd_room_link, control/rooms.h) */
	struct cds_list_head rooms;
};

/* One reply or event waiting for the engine's socket to take it (a whole SEQPACKET message). */
struct kvxd_outmsg {
	struct kvxd_outmsg *next;
	uint32_t len;
	bool event;
	uint8_t data[];
};

/*
 * An engine session on the Unix socket.  Thread: the control core only.  The control core never
 * waits on the engine's socket: replies and events go out in order through outq (sent at once
 * when the socket takes them, else on EPOLLOUT); when more than [engine] reply_queue_kb bytes
 * wait, the session is doomed.  A doomed session is closed (engine_close: its pools orphaned,
 * its rooms told nothing more) at the end of the loop iteration by kvxd_engine_reap(), so no
 * caller ever holds a freed engine.
 */
#define KVXD_BUSY_IDS_MAX 256 /* struct kvxd_engine.busy_ids */

struct kvxd_engine {
	int id;
	int fd;
	struct kvxd_fd ev;
	bool hello;
	uint32_t rank; /* declared in its HELLO: its rooms are keyed (id, rank) */
	/* credentials captured at accept (SO_PEERCRED, full group list): never re-read */
	uid_t uid;
	gid_t gid;
	pid_t pid;
	bool admin; /* root, kvxd's uid, or a member of [engine] admin_group */
	/* over max_sessions_per_uid: the first request is answered with this -errno and text,
	 * then the session closes */
	int refused;
	char refused_text[160];
	bool doomed;	 /* closed at the end of this loop iteration */
	bool reset_seen; /* its socket said ECONNRESET: what it sent before is still read */
	bool gone;	 /* its end of the socket closed: what it sent before is taken, its operator
			  * commands are not run (nobody reads their answers) */
	bool sock_held;	 /* its socket is not read while a polling core's inbox is nearly full
			  * (control/engine.c socket_hold): no EPOLLIN until the cores caught up */
	uint32_t nrooms; /* rooms whose engine_id is this session (max_rooms_per_engine) */
	uint64_t chunk_bytes; /* its chunks kvxd holds (max_chunk_mb_per_engine) */
	/* ids of attempts a chunk of which was refused against this engine's own ended room of
	 * that id (it closed it while it drained, or its end was told), against another's room,
	 * or without a room (its user's rooms at twice max_rooms_per_uid): the attempt's next
	 * chunk, once that room is gone, fails the room it opens, and no other session of its
	 * user and rank makes or takes a live room of the id.  Cleared by the engine's close. */
	uint64_t busy_ids[KVXD_BUSY_IDS_MAX];
	uint32_t nbusy;
	struct cds_list_head rooms; /* those rooms (struct kvxd_room.eng_link) */
	struct kvxd_outmsg *outq_head, *outq_tail;
	/* KVX_ENG_ADMIN_AT: the text of the command being paged out (NULL: none) */
	char *admin_text;
	size_t admin_text_len;
	int admin_rc; /* the command's status, in every page's reply */
	char admin_cmd[256];
	/* the loop pass (kvxd.loop_pass) in which it last had an operator command run: nothing
	 * more of it is taken in that pass (a "rooms" or "counters" walks or renders a table) */
	uint64_t admin_pass;
	bool holds; /* its user holds its rank (control/engine.c rank_take) */
	uint64_t outq_bytes;
	/* KVX_ENG_RINGS (core/engine_proto.h): the shared-memory rings, once set up */
	bool rings;
	bool evt_dirty;		    /* put into the event ring since the last notify */
	bool wake_ends;		    /* KVX_ENG_RINGS_WAKE_ENDS: states on the way wake nobody */
	struct kvx_shring sub, evt; /* kvxd consumes sub and produces evt */
	void *ring_map;
	size_t ring_map_len;
	int sub_wake, evt_wake;
	struct kvxd_fd ring_ev;
	struct kvxd_fd room_ev; /* evt_wake: the engine made room in its event ring */
	/* with core rings: one event ring per polling core, each produced by its core (its
	 * decode rooms' events, verbs/pcore.h); the memfd holds them after the two rings above */
	struct kvx_pcore_evq *evq[KVX_MAX_CORES];
	int nevq;
	struct rings_gc
		*ring_gc; /* made with the rings: their deferred release (control/engine.c) */
};

struct kvxd_counters {
	uint64_t frames_rx, frames_tx, frames_bad, peer_resets, engine_msgs, engine_bad,
		chunks_refused,	      /* each fails its room (control/engine.c chunk_refuse_room) */
		chunks_refused_again, /* of those, its room's failure was on the way already */
		chunks_refused_roomless, /* of those, failed without a room: the user's rooms are
					  * twice max_rooms_per_uid */
		engine_rings, engine_ring_wakes, engine_ring_holds, engine_socket_holds,
		events_sent, events_dropped, events_core, events_core_claimed, events_before_claim,
		status_pushed, status_queued, status_dropped, status_evicted, status_received,
		rooms_opened, rooms_closed, waiting_timeouts, qp_replaced, qp_stuck, rails_fenced,
		rail_retries, rail_hold_asks, rail_hold_timeouts, lane_fences_asked,
		lane_fences_made, aborts, releases, abort_release_ms_sum, acks_received, acks_stale,
		acks_unknown, acks_sent, acks_unsent, aborts_received, tombstones, fences,
		session_fences;
	/* refused peer connections and messages, by reason (issue 7) */
	uint64_t conn_refused_addr, conn_refused_name, conn_refused_version, conn_refused_auth,
		conn_refused_busy, pending_expired, pending_evicted, gid_mismatch;
	uint64_t heartbeats_sent, peers_silent;
	/* connect = on_demand: sessions set up because a room needed them, closed idle, and
	 * crossing dials resolved (the dial of the peer whose name sorts first wins) */
	uint64_t sessions_on_demand, sessions_idle_closed, dial_collisions;
	/* ... and sessions that had to wait for CQ room: ours (a dial put off) and the peers'
	 * (an authenticated dial answered BYE BUSY) */
	uint64_t sessions_cq_waits, sessions_refused_busy;
	/* membership: peers added and removed at runtime, reloads done and refused (SIGHUP) */
	uint64_t peers_added, peers_removed, reloads, reloads_refused;
	/* membership through etcd: nodes found and lost, entries refused (a bad name or address,
	 * no slot or CQ room), registrations, gateway calls failed, the watch restarted */
	uint64_t members_found, members_lost, members_refused, etcd_registered, etcd_errors,
		etcd_watch_restarts,
		etcd_pages_shrunk, /* pages of the full read too large: read with fewer entries */
		etcd_reasserted;   /* our key held what we did not write: written again */
	uint64_t peer_transitions[KVXD_PEER_STATE_COUNT][KVXD_PEER_STATE_COUNT];
	uint64_t abort_transitions[4][4]; /* enum kvxd_abort_state (control/rooms.h) */
	uint64_t abort_refused;		  /* illegal abort transitions asked (a bug: logged) */
	uint64_t events_duplicate, engine_lost_rooms, meta_refused_engine_gone;
	uint64_t rooms_freed; /* given back by their core (ROOM_FREE) and queued for freeing */
	uint64_t meta_refused_owner, meta_refused_aborted, meta_refused_cap, status_refused_owner,
		aborts_not_owner, tombstones_refused;
	uint64_t meta_parked; /* ROOM_METAs of a further endpoint waiting for the engine's ndest */
	/* the engine socket: connections refused (credentials), operator commands refused (not
	 * an admin), sessions closed for not reading (reply_queue_kb), requests over a cap, rooms
	 * refused for a rank another user's engine holds */
	uint64_t engine_refused, admin_denied, engine_admin_gone, engine_queue_overflows,
		cap_sessions, cap_operator_slots, cap_pools, cap_pools_uid, cap_pinned, cap_rooms,
		cap_rooms_uid, engine_rank_refused;
	/* the metrics endpoint (control/metrics_http.h): answers by status, connections refused
	 * (over the cap, every one with its request in), connections closed for a newer one (over
	 * the cap, the oldest without its request), connections closed at their deadline */
	uint64_t http_200, http_400, http_404, http_405, http_431, http_500, http_refused_busy,
		http_evicted, http_timeouts, http_renders, http_resets;
};

/* Where the end of a room falls in kvxd_hists.room_latency[role][...] */
enum kvxd_room_outcome {
	KVXD_OUTCOME_SUCCESS = 0, /* both roles */
	KVXD_OUTCOME_FAILED,	  /* prefill FAILED, decode RELEASED (an abort or a failure) */
	KVXD_OUTCOME_COUNT,
};

/*
 * Histograms (core/hist.h), written by the control core where the events happen: a room's
 * end as its core reports it (loop.c, rooms.c), a release (abort.c), a peer reaching READY
 * (peer.c).  Durations in microseconds (kvx_hist_us), sizes in bytes (kvx_hist_bytes).
 */
struct kvxd_hists {
	/* open (decode: the engine's open; prefill: the room's creation by a ROOM_META, a chunk
	 * or an ABORT) to its end as its engine is told it (prefill SUCCESS | FAILED, decode
	 * SUCCESS | RELEASED), by role (enum kvx_room_role) and outcome */
	struct kvx_hist room_latency[2][KVXD_OUTCOME_COUNT];
	struct kvx_hist abort_release; /* decode: abort armed to pages released */
	struct kvx_hist handshake;     /* a peer leaving IDLE to READY (a successful setup) */
	/* bytes a room moved on its device's rail when it succeeded, by role (one rail today) */
	struct kvx_hist room_bytes[2];
};

struct kvxd {
	struct kvx_config cfg;
	const char *cfg_path;
	/* the RDMA devices ([rdma] and [rail.N]): each polling core has a CQ on every rail, and
	 * each peer session a QP per core on every rail */
	struct kvxd_rail {
		struct kvx_vx_dev *dev;
		struct kvx_vx_dev_info info;
	} rails[KVX_MAX_RAILS];
	int nrails;
	struct kvxd_core cores[KVX_MAX_CORES];
	int ncores;
	struct kvx_room_table *by_id, *by_token;
	struct kvxd_peer peers[KVX_MAX_PEERS];
	int npeers;
	struct kvx_auth_keys auth;
	struct cds_list_head pending; /* struct kvxd_pending, oldest first */
	int npending;
	/* counts HELLO_ACKs sent and sessions made READY: which came first, however close (a
	 * crossing dial's AUTH against a peer that restarted; kvxd_pending_on_event) */
	uint64_t handshake_clock;
	/* pending connections dropped during this loop iteration: events for them may still be
	 * in the iteration's batch, so they are freed after it (kvxd_pending_reap) */
	struct cds_list_head pending_dead;
	/* log lines a client can cause, each kind at most so many a second (kvx_log_allow):
	 * refused connections, refused operator commands, etcd entries not taken */
	struct kvx_log_limit refuse_log, admin_refused_log, members_refused_log;
	/* "counters" for engines that are not operators: one rendering per format (text, JSON)
	 * serves all of them for a while (control/admin.c; NULL: none yet) */
	char *admin_cache[2];
	size_t admin_cache_len[2];
	uint64_t admin_cache_at[2];
	/* Engine sessions and pools by slot, written only through kvxd_engine_slot_set() and
	 * kvxd_pool_slot_set(): every slot in use is below engines_end and pools_end, where
	 * every scan of them stops (the loop scans engines[] several times per iteration). */
	struct kvxd_engine *engines[KVXD_MAX_ENGINES];
	int engines_end;
	bool rings_held; /* this pass left submission rings' requests for the cores' inboxes */
	int socks_held;	 /* sessions whose socket waits for the cores' inboxes (sock_held) */
	bool socks_turn; /* the rings took of the cores' room while sockets waited: theirs next */
	int rings_next;	 /* the session the next pass takes submission rings from first */
	int next_engine_id;
	struct kvxd_pool *pools[KVXD_MAX_POOLS];
	int pools_end;
	int next_pool_id;
	uint32_t next_gen, next_token;
	int epfd, tcp_fd, eng_fd, sig_fd;
	int cpu_claim_fd[KVX_MAX_CORES]; /* held claims of our polling CPUs (verbs/topo.h) */
	int n_cpu_claims;
	/* the engine socket (kvxd_engine_listen): kvxd's own uid, the socket file's group and
	 * identity (only that file is unlinked at exit), the admin group if configured */
	uid_t self_uid;
	gid_t sock_gid, admin_gid;
	bool has_admin_gid;
	uid_t rank_uid[KVX_CFG_RANK_USERS_MAX]; /* [engine] rank_users' users, resolved */
	dev_t eng_dev;
	ino_t eng_ino;
	struct kvxd_fd tcp_ev, eng_ev, sig_ev, outbox_ev[KVX_MAX_CORES];
	/* the verbs workers (control/vwork.h): threads once started; until then (unit tests)
	 * their jobs run on the control core at its next loop pass */
	struct kvxd_vwork {
		bool started, stop;
		/* the CPUs its threads run on (kvxd_worker_cpus): not the control core's, which
		 * their CPU work (pinning, unpinning, unmapping) would take from it */
		bool has_cpus;
		cpu_set_t cpus;
		int efd;
		struct kvxd_fd ev;
		int nbusy; /* jobs submitted, not yet taken back */
		/* by kind (each taken by its threads in order): FIFO; done: LIFO, taken whole */
		struct kvxd_vjob *todo[KVXD_VJOB_KINDS], *done;
		struct kvxd_vjob **todo_tail[KVXD_VJOB_KINDS];
		pthread_mutex_t mu;
		pthread_cond_t cv[KVXD_VJOB_KINDS];
		int nthreads; /* started: kind_threads[] in all */
		int kind_threads[KVXD_VJOB_KINDS];
		pthread_t thread[KVXD_VWORK_THREADS_MAX];
		struct kvxd_vwork_arg {
			struct kvxd_vwork *w;
			int kind;
		} arg[KVXD_VWORK_THREADS_MAX];
	} vwork;
	bool stopping;
	uint64_t loop_pass; /* kvxd_loop_once() calls so far */
	/* a peer's frames wait in its stream: kvxd_peers_flush() writes them (after the engines
	 * were woken, so a decode engine's open is answered before its ROOM_META goes out; every
	 * frame of an iteration to one peer in one send) */
	bool peer_tx_queued;
	int live_qpcs; /* handed to polling cores, not yet retired */
	uint64_t start_ms;
	struct kvxd_timer_heap room_timers; /* one deadline per room (control/rooms.h) */
	/* the memory of struct kvxd_chunk (kvxd_chunk_alloc): size classes of 1, 2, 4 ...
	 * KVX_MAX_ROOM_PAGES pages, KVXD_CHUNK_CACHE_BYTES cached; its counters (st) are shown
	 * with ctr by the "counters" command */
	struct kvx_slab chunks;
	uint32_t nrooms[2];		/* rooms in the id table, by role (control/rooms.c) */
	struct kvxd_metrics_http *http; /* [metrics] listen: the endpoint, or NULL */
	struct kvxd_etcd *etcd;		/* [membership] etcd: the client, or NULL */
	bool members_reread;		/* a peer that moved was removed: etcd reads everything */
	uint32_t http_conns;		/* its open connections */
	struct kvxd_counters ctr;
	struct kvxd_hists hist;
};

/* Milliseconds on the monotonic clock; tests may replace kvxd_clock_ms. */
extern uint64_t (*kvxd_clock_ms)(void);
uint64_t kvxd_now_ms(void);

/* A session's QP lanes: lane = core * nrails + rail. */
static inline int
kvxd_lane(const struct kvxd *d, int core, int rail)
{
	return core * d->nrails + rail;
}

static inline int
kvxd_lane_core(const struct kvxd *d, int lane)
{
	return lane / d->nrails;
}

static inline int
kvxd_lane_rail(const struct kvxd *d, int lane)
{
	return lane % d->nrails;
}
/* Microseconds on the monotonic clock, for the histograms only (never a deadline); tests may
 * replace kvxd_clock_us. */
extern uint64_t (*kvxd_clock_us)(void);
uint64_t kvxd_now_us(void);

/* Register / change a descriptor in the loop's epoll set: 0 or -errno (add). */
int kvxd_epoll_add(struct kvxd *d, int fd, struct kvxd_fd *ev, uint32_t events);
/* Put e (NULL: empty the slot) into engines[i], and p into pools[i]; the ends follow. */
void kvxd_engine_slot_set(struct kvxd *d, int i, struct kvxd_engine *e);
void kvxd_pool_slot_set(struct kvxd *d, int i, struct kvxd_pool *p);
void kvxd_epoll_mod(struct kvxd *d, int fd, struct kvxd_fd *ev, uint32_t events);

/* A room or chunk no longer points at the pool. */
void kvxd_pool_put(struct kvxd_pool *p);

/*
 * Chunks (struct kvxd_chunk, verbs/pcore.h), allocated and freed by the control core only:
 * engines submit them (control/engine.c), polling cores give them back (KVXD_MSG_CHUNK_FREE).
 * Their memory comes from d->chunks, a size-class cache (core/slab.h), so that in steady state
 * a chunk costs no malloc and no free.  Thread: the control core; nothing here blocks.
 */
/* Set d->chunks up (start-up, before any chunk): 0 or -errno (core/slab.h). */
int kvxd_chunk_cache_init(struct kvxd *d);
/* free() the cached chunks (teardown, after every chunk came back); later frees go to free(). */
void kvxd_chunk_cache_fini(struct kvxd *d);
/* A chunk with room for npages pages, its fields unset; NULL when out of memory (counted in
 * d->chunks.st.failed: the caller refuses the chunk with -ENOMEM). */
struct kvxd_chunk *kvxd_chunk_alloc(struct kvxd *d, uint32_t npages);
/* Give back a chunk kvxd_chunk_alloc() returned (NULL: nothing): its pool reference (ch->pool,
 * may be NULL) is dropped, its bytes no longer charged to its engine (ch->engine_id, if that
 * session is still there), and its memory cached or freed. */
void kvxd_chunk_free(struct kvxd *d, struct kvxd_chunk *ch);
/* What a chunk of npages pages counts against max_chunk_mb_per_engine. */
static inline uint64_t
kvxd_chunk_bytes(uint32_t npages)
{
	return sizeof(struct kvxd_chunk) + (uint64_t)npages * sizeof(uint32_t);
}

#endif /* KVX_CONTROL_KVXD_H */
