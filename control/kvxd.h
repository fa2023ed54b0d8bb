/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kvxd's control core: one event loop (epoll) on the main thread, pinned to control_cpu, for
 * peer TCP connections (handshakes, room metadata, failure push), engine Unix sockets, timers,
 * and the outboxes of the polling cores.  Everything here runs on that one thread unless a
 * comment says otherwise; it is a registered QSBR reader, offline while it waits in epoll.
 */
#ifndef KVX_CONTROL_KVXD_H
#define KVX_CONTROL_KVXD_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include <urcu/list.h>

#include "kvx/kvx.h"
#include "core/auth.h"
#include "core/config.h"
#include "core/engine_proto.h"
#include "core/room_table.h"
#include "core/wire.h"
#include "verbs/pcore.h"
#include "verbs/vx.h"

#define KVXD_MAX_ENGINES 64
#define KVXD_MAX_POOLS 256
#define KVXD_BYE_REPLACE 1 /* BYE reason: replacing QPs after an error */
#define KVXD_JOURNAL_MAX (4 * KVX_MAX_CORES + 8)

enum kvxd_fd_kind {
	KVXD_FD_TCP_LISTEN = 1,
	KVXD_FD_ENG_LISTEN,
	KVXD_FD_PEER,
	KVXD_FD_PENDING,
	KVXD_FD_ENGINE,
	KVXD_FD_OUTBOX,
	KVXD_FD_SIGNAL,
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
 * answer with a valid AUTH before pending_ms.  Until then it touches no peer state. */
struct kvxd_pending {
	struct cds_list_head link; /* d->pending, oldest first */
	struct kvxd_stream s;
	uint32_t addr; /* source IPv4, host byte order */
	uint64_t deadline_ms;
	struct kvx_wire_seq seq;
	struct kvx_wire_hello hello; /* the initiator's HELLO, once received */
	int peer;		     /* -1 until HELLO named one */
	uint64_t nonce_a;	     /* ours, in HELLO_ACK */
};

enum kvxd_journal_kind {
	KVXD_J_SOCKET = 1, /* the control connection: close it */
	KVXD_J_SLOT,	   /* the peer-table slot (the session): free it */
	KVXD_J_QPC,	   /* a core's QP context (memory): free it */
	KVXD_J_QP,	   /* a QP on a core's CQ: destroy it (through its core once published) */
	KVXD_J_QP_ARMED,   /* a QP past RTR, able to take writes: fence it (error state) first */
};

enum kvxd_release_step {
	KVXD_REL_NONE = 0,
	KVXD_REL_REMOVING, /* published QP: its core drains it (QP_REMOVE sent) */
	KVXD_REL_RETIRED,  /* its core gave it back: destroy it */
};

struct kvxd_journal_entry {
	uint8_t kind;
	uint8_t core;
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
	struct kvxd_qpc *qpc[KVX_MAX_CORES];
	uint32_t psn[KVX_MAX_CORES];
	bool sent_ready, got_ready;
	bool paused;	/* operator: no connection until resumed */
	bool try_once;	/* operator: one attempt, pause again if it fails */
	bool stalled;	/* fault handshake.stall: ignore this session's input */
	bool replacing; /* this reset replaces QPs after an error (BYE 1): rooms carry on */
	bool lost;	/* its last session ended by failure, and no new one is up yet */
	uint32_t epoch;
	uint64_t nonce_i, session;	 /* initiator: the HELLO of the handshake in progress */
	uint64_t last_rx_ms, next_hb_ms; /* READY: the last frame from it; our next HEARTBEAT */
	uint64_t deadline_ms, retry_at_ms, sweep_at_ms;
	uint64_t qp_sessions_ended; /* sessions whose every QP was destroyed (fences wait on it) */
	char last_error[256];
	/* ROOM_STATUS frames of the last waiting_ms, sent or not.  A frame written into a
	 * connection that the far side was closing at the same moment is lost with it, so every
	 * new session of the peer starts by (re)sending these; decode drops duplicates. */
	struct kvxd_status_entry *pend_status;
	int npend_status, cap_status;
	uint64_t n_handshakes, n_setup_failures, n_resets;
	/* what this peer's frames made us hold: rooms its ROOM_META created, tombstones its
	 * ABORTs left ([security] max_rooms_per_peer, max_tombstones_per_peer) */
	uint32_t rooms_held, tombstones_held;
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
struct kvxd_engine {
	int id;
	int fd;
	struct kvxd_fd ev;
	bool hello;
	/* credentials captured at accept (SO_PEERCRED, full group list): never re-read */
	uid_t uid;
	gid_t gid;
	pid_t pid;
	bool admin; /* root, kvxd's uid, or a member of [engine] admin_group */
	/* over max_sessions_per_uid: the first request is answered with this -errno and text,
	 * then the session closes */
	int refused;
	char refused_text[160];
	bool close_after_flush; /* close once outq is empty */
	bool doomed;		/* closed at the end of this loop iteration */
	uint32_t nrooms;	/* rooms whose engine_id is this session (max_rooms_per_engine) */
	struct cds_list_head rooms; /* those rooms (struct kvxd_room.eng_link) */
	struct kvxd_outmsg *outq_head, *outq_tail;
	uint64_t outq_bytes;
};

/* A connecting process's credentials (kvxd_cred_read; kvxd_cred_fini frees groups). */
struct kvxd_cred {
	uid_t uid;
	gid_t gid; /* primary */
	pid_t pid;
	gid_t *groups; /* supplementary groups */
	int ngroups;
};

struct kvxd_counters {
	uint64_t frames_rx, frames_tx, frames_bad, peer_resets, engine_msgs, engine_bad,
		events_sent, events_dropped, status_pushed, status_queued, status_dropped,
		status_received, rooms_opened, rooms_closed, waiting_timeouts, qp_replaced, aborts,
		releases, abort_release_ms_sum, acks_received, acks_stale, acks_unknown, acks_sent,
		acks_unsent, aborts_received, tombstones, fences, session_fences;
	/* refused peer connections and messages, by reason (issue 7) */
	uint64_t conn_refused_addr, conn_refused_name, conn_refused_version, conn_refused_auth,
		conn_refused_busy, pending_expired, pending_evicted, gid_mismatch;
	uint64_t heartbeats_sent, peers_silent;
	uint64_t peer_transitions[KVXD_PEER_STATE_COUNT][KVXD_PEER_STATE_COUNT];
	uint64_t events_duplicate, engine_lost_rooms, meta_refused_engine_gone;
	uint64_t meta_refused_owner, meta_refused_aborted, meta_refused_cap, status_refused_owner,
		aborts_not_owner, tombstones_refused;
	/* the engine socket: connections refused (credentials), operator commands refused (not
	 * an admin), sessions closed for not reading (reply_queue_kb), requests over a cap */
	uint64_t engine_refused, admin_denied, engine_queue_overflows, cap_sessions, cap_pools,
		cap_pinned, cap_rooms;
};

struct kvxd {
	struct kvx_config cfg;
	const char *cfg_path;
	struct kvx_vx_dev *dev;
	struct kvx_vx_dev_info dev_info;
	struct kvxd_core cores[KVX_MAX_CORES];
	int ncores;
	struct kvx_room_table *by_id, *by_token;
	struct kvxd_peer peers[KVX_MAX_PEERS];
	int npeers;
	struct kvx_auth_keys auth;
	struct cds_list_head pending; /* struct kvxd_pending, oldest first */
	int npending;
	uint64_t refuse_log_ms; /* start of the current one-second log window */
	int refuse_logged, refuse_suppressed;
	struct kvxd_engine *engines[KVXD_MAX_ENGINES];
	int next_engine_id;
	struct kvxd_pool *pools[KVXD_MAX_POOLS];
	int next_pool_id;
	uint32_t next_gen, next_token;
	int epfd, tcp_fd, eng_fd, sig_fd;
	/* the engine socket (kvxd_engine_listen): kvxd's own uid, the socket file's group and
	 * identity (only that file is unlinked at exit), the admin group if configured */
	uid_t self_uid;
	gid_t sock_gid, admin_gid;
	bool has_admin_gid;
	dev_t eng_dev;
	ino_t eng_ino;
	struct kvxd_fd tcp_ev, eng_ev, sig_ev, outbox_ev[KVX_MAX_CORES];
	bool stopping;
	int live_qpcs; /* handed to polling cores, not yet retired */
	uint64_t start_ms;
	uint64_t last_room_scan_ms;
	struct kvxd_counters ctr;
};

/* Milliseconds on the monotonic clock; tests may replace kvxd_clock_ms. */
extern uint64_t (*kvxd_clock_ms)(void);
uint64_t kvxd_now_ms(void);

/* The argument of a walk over the room table about one peer. */
struct kvxd_peer_walk {
	struct kvxd *d;
	struct kvxd_peer *p;
	bool failed; /* the peer failed (vs. replacing its QPs) */
};

/* ctl.c */
int kvxd_run(struct kvxd *d);
/* One control-loop iteration (tests step it). */
void kvxd_loop_once(struct kvxd *d, int timeout_ms);
/* After the polling cores stopped: destroy QPs they still hold, free every room. */
void kvxd_shutdown_release(struct kvxd *d);
int kvxd_epoll_add(struct kvxd *d, int fd, struct kvxd_fd *ev, uint32_t events);
void kvxd_epoll_mod(struct kvxd *d, int fd, struct kvxd_fd *ev, uint32_t events);
void kvxd_room_remove(struct kvxd *d, struct kvxd_room *r);
/* A new prefill room in the table (BOOTSTRAPPING), or NULL (no memory, or the id is there). */
struct kvxd_room *kvxd_prefill_room_new(struct kvxd *d, uint64_t id, int engine_id);
/* Charge a room to a peer's cap (rooms, or tombstones), or move the charge; -1 uncharges. */
void kvxd_room_charge(struct kvxd *d, struct kvxd_room *r, int peer, bool tombstone);
bool kvxd_room_quiescent(const struct kvxd_room *r);
bool kvxd_room_removable(const struct kvxd_room *r);
struct kvxd_room *kvxd_room_find(struct kvxd *d, uint64_t id, int role);
void kvxd_send_meta_for_peer(struct kvxd *d, struct kvxd_peer *p);
int kvxd_send_room_meta(struct kvxd *d, struct kvxd_room *r, int src);

/* peer.c */
void kvxd_peer_init_all(struct kvxd *d);
void kvxd_peer_on_event(struct kvxd *d, struct kvxd_peer *p, uint32_t events);
void kvxd_pending_on_event(struct kvxd *d, struct kvxd_pending *pc, uint32_t events);
void kvxd_peer_accept(struct kvxd *d);
/* Close the accepted sockets that never authenticated (shutdown). */
void kvxd_pending_close_all(struct kvxd *d);
void kvxd_peer_tick(struct kvxd *d, uint64_t now);
void kvxd_peer_reset(struct kvxd *d, struct kvxd_peer *p, const char *why);
int kvxd_peer_send(struct kvxd *d, struct kvxd_peer *p, const struct kvx_wire_msg *m);
/* Send a ROOM_STATUS now, or as soon as the peer is READY again. */
void kvxd_peer_push_status(struct kvxd *d, struct kvxd_peer *p,
			   const struct kvx_wire_room_status *st);
struct kvxd_peer *kvxd_peer_find(struct kvxd *d, const char *name);
void kvxd_qpc_retired(struct kvxd *d, struct kvxd_qpc *q);
const char *kvxd_peer_state_str(int state);
int kvxd_peer_admin(struct kvxd *d, const char *name, const char *verb);
int kvxd_journal_pending(const struct kvxd *d);

/* abort.c */
int64_t kvxd_decode_abort(struct kvxd *d, struct kvxd_room *r, int error, const char *reason);
void kvxd_on_abort(struct kvxd *d, struct kvxd_peer *p, const struct kvx_wire_abort *a);
void kvxd_on_abort_ack(struct kvxd *d, struct kvxd_peer *p, const struct kvx_wire_abort_ack *a);
void kvxd_on_drained(struct kvxd *d, struct kvxd_room *r);
void kvxd_decode_waiting_timeout(struct kvxd *d, struct kvxd_room *r, const char *reason);
void kvxd_abort_tick_room(struct kvxd *d, struct kvxd_room *r, uint64_t now);
void kvxd_abort_resend_for_peer(struct kvxd *d, struct kvxd_peer *p);
/* Source i's session ended: its QPs are being destroyed; count it fenced once they are. */
void kvxd_abort_source_fenced(struct kvxd *d, struct kvxd_room *r, int i);

/* engine.c -- thread: the control core; none of these blocks on an engine. */
/* Create the engine socket at cfg.socket_path (start-up).  Whatever already sits at the path
 * is left alone unless it is kvxd's own stale socket (a socket owned by kvxd's uid that refuses
 * connections): -EEXIST when the path is not a socket, -EADDRINUSE when a process accepts
 * connections there, -EPERM when a stale socket belongs to another uid; each logged.  The file
 * is created no looser than cfg.socket_mode and then set to exactly it.  Also resolves
 * cfg.admin_group (-ENOENT when there is no such group). */
int kvxd_engine_listen(struct kvxd *d);
/* Close the listening socket; unlink the path only if it is still the socket we created. */
void kvxd_engine_unlisten(struct kvxd *d);
void kvxd_engine_accept(struct kvxd *d);
void kvxd_engine_on_event(struct kvxd *d, struct kvxd_engine *e, uint32_t events);
/* Queue (or send) an event to the engine; 0, or -ENOTCONN (gone), -ENOBUFS (its queue
 * overflowed: the session is doomed), -ENOMEM. */
int kvxd_engine_send_event(struct kvxd *d, int engine_id, const struct kvx_event *ev);
/* Close the sessions doomed during this loop iteration (end of kvxd_loop_once). */
void kvxd_engine_reap(struct kvxd *d);
/* A room left the tables (kvxd_room_remove): its engine's room count drops. */
void kvxd_engine_room_left(struct kvxd *d, struct kvxd_room *r);
void kvxd_engine_close_all(struct kvxd *d);
void kvxd_pool_put(struct kvxd_pool *p);
/* Tell a room's engine its terminal event unless it was told already (exactly once).  Returns
 * true when this call told it. */
bool kvxd_engine_tell(struct kvxd *d, struct kvxd_room *r, const struct kvx_event *ev);
/* Is state the end of the room as its engine sees it (prefill SUCCESS/FAILED, decode
 * SUCCESS/RELEASED)? */
bool kvxd_room_terminal_for_engine(const struct kvxd_room *r, int state);
/* Decode: open a room (the engine request's checks and effects).  Returns its generation, or
 * -errno (-EDQUOT: the engine has max_rooms_per_engine rooms). */
int64_t kvxd_decode_room_open(struct kvxd *d, int engine_id, uint64_t room, struct kvxd_pool *pool,
			      const uint32_t *pages, uint32_t npages,
			      const char (*names)[KVX_NAME_MAX], uint32_t nsources);
/* Unregister pools whose engine went away once nothing points at them. */
void kvxd_pool_sweep(struct kvxd *d);
/* Run an operator command; its text goes to out.  peers, rooms, counters (metrics) and help
 * are open to every engine; every other command changes state and needs admin (else -EPERM,
 * counted). */
int kvxd_admin(struct kvxd *d, const char *cmd, bool admin, char *out, size_t len);

/* Credentials of the process at the other end of a Unix socket: SO_PEERCRED, and the full
 * group list from SO_PEERGROUPS (getgrouplist() for the uid where the kernel lacks it; that
 * may consult NSS).  0 or -errno.  Thread: any. */
int kvxd_cred_read(int fd, struct kvxd_cred *c);
void kvxd_cred_fini(struct kvxd_cred *c);
/* Is gid c's primary group or one of its supplementary groups? */
bool kvxd_cred_in_group(const struct kvxd_cred *c, gid_t gid);
/* May c use the engine socket: root, kvxd's uid, or a member of the socket file's group. */
bool kvxd_cred_may_connect(const struct kvxd *d, const struct kvxd_cred *c);
/* May c run operator commands: root, kvxd's uid, or a member of [engine] admin_group. */
bool kvxd_cred_is_admin(const struct kvxd *d, const struct kvxd_cred *c);

#endif /* KVX_CONTROL_KVXD_H */
