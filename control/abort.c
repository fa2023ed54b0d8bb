/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Abort and drain-aware acknowledgement (DESIGN.md section 5).  Thread: the control core.
 *
 * Decode: one abort function for every path (engine abort, waiting timeout, a source's
 * failure, a peer whose setup failed).  It arms a new generation before any ABORT goes out,
 * keeps the pages held (DRAINING), counts ABORT_ACKs of that generation from distinct sources,
 * and releases exactly once: when every notified source acknowledged, or when the release
 * timeout expired and every silent source's QPs were fenced (error state) and destroyed.  A
 * timer alone never releases.
 *
 * Prefill: an ABORT marks the room FAILED before anything else (its core does, sticky); the
 * room keeps one ACK target per decode endpoint, each with its generation; when its core
 * reports the room drained (every WR completed, its errored QP quiescent), every target gets
 * its ABORT_ACK.  An ABORT touches only the aborting endpoint's own target: from an endpoint
 * that does not own the room (its ROOM_META is not the room's), or for an unknown or cleared
 * room, it is acknowledged at once (nothing of that endpoint's can be written from here) and
 * leaves a tombstone that refuses that endpoint's ROOM_META of that generation.
 *
 * Layer 3 of control/ (control/README.md): it calls the room owner and the senders below it;
 * a fence is asked of the peer layer above (kvxd_peer_fence_request), which tells it back when
 * the QPs are destroyed (kvxd_abort_peer_fenced).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "control/abort.h"
#include "control/engine_io.h"
#include "control/peer_io.h"
#include "core/log.h"
#include "core/rand.h"

static const char *const abort_state_names[] = {"NONE", "ARMED", "FENCING", "RELEASED"};

/* The legal next states: arm, fence once the release deadline passed, release (after the
 * fence, or straight from ARMED when every source acknowledged). */
static const bool abort_next[KVXD_ABORT_STATE_COUNT][KVXD_ABORT_STATE_COUNT] = {
	[KVXD_ABORT_NONE] = {[KVXD_ABORT_ARMED] = true},
	[KVXD_ABORT_ARMED] = {[KVXD_ABORT_FENCING] = true, [KVXD_ABORT_RELEASED] = true},
	[KVXD_ABORT_FENCING] = {[KVXD_ABORT_RELEASED] = true},
};

const char *
kvxd_abort_state_str(int state)
{
	return state >= 0 && state < KVXD_ABORT_STATE_COUNT ? abort_state_names[state] : "?";
}

int
kvxd_abort_set(struct kvxd *d, struct kvxd_room *r, enum kvxd_abort_state to)
{
	enum kvxd_abort_state from = r->ab_state;

	if (!abort_next[from][to]) {
		KVX_ERR("room %llu: illegal abort transition %s -> %s",
			(unsigned long long)r->pc.id, kvxd_abort_state_str((int)from),
			kvxd_abort_state_str((int)to));
		d->ctr.abort_refused++;
		return -EINVAL;
	}
	KVX_DEBUG("room %llu: abort %s -> %s", (unsigned long long)r->pc.id,
		  kvxd_abort_state_str((int)from), kvxd_abort_state_str((int)to));
	d->ctr.abort_transitions[from][to]++;
	r->ab_state = (uint8_t)to;
	return 0;
}

/* The abort's generation: random (not guessable by a peer), never the open's. */
static uint32_t
next_gen(const struct kvxd_room *r)
{
	uint32_t g;

	do
		g = kvx_rand_u32_nonzero();
	while (g == r->open_gen);
	return g;
}

static uint32_t
notified_mask(const struct kvxd_room *r)
{
	return r->meta_sent_mask;
}

static void
release(struct kvxd *d, struct kvxd_room *r)
{
	struct kvxd_msg m = {.type = KVXD_MSG_ROOM_RELEASE, .room = &r->pc, .gen = r->abort_gen};
	uint64_t now = kvxd_now_ms();

	if (kvxd_abort_set(d, r, KVXD_ABORT_RELEASED))
		return; /* exactly once */
	d->ctr.releases++;
	d->ctr.abort_release_ms_sum += now - r->abort_ms;
	kvx_hist_observe(&d->hist.abort_release, &kvx_hist_us, kvxd_now_us() - r->abort_us);
	KVX_DEBUG("room %llu gen %u released after %llu ms (acked 0x%x fenced 0x%x)",
		  (unsigned long long)r->pc.id, r->abort_gen,
		  (unsigned long long)(now - r->abort_ms), r->ack_mask, r->fenced_mask);
	if (kvx_pcore_send(&d->cores[r->pc.core], &m))
		KVX_ERR("core %d: no memory to queue: room %llu not released", r->pc.core,
			(unsigned long long)r->pc.id);
}

/* Are the QPs of every session a source was notified on and that ended (stale_mask) destroyed?
 * Forgets those that are. */
static bool
stale_sessions_gone(const struct kvxd *d, struct kvxd_room *r)
{
	for (int i = 0; r->stale_mask && i < r->pc.nsrc; i++)
		if ((r->stale_mask & (1u << i)) &&
		    d->peers[r->pc.src_peer[i]].qp_sessions_ended >= r->stale_target[i])
			r->stale_mask &= ~(1u << i);
	return r->stale_mask == 0;
}

static void
maybe_release(struct kvxd *d, struct kvxd_room *r)
{
	uint32_t need = notified_mask(r);

	if ((r->ab_state == KVXD_ABORT_ARMED || r->ab_state == KVXD_ABORT_FENCING) &&
	    ((r->ack_mask | r->fenced_mask) & need) == need && stale_sessions_gone(d, r))
		release(d, r);
}

static void kvxd_abort_source_fenced(struct kvxd *d, struct kvxd_room *r, int i);

static void
send_abort(struct kvxd *d, struct kvxd_room *r, int i)
{
	struct kvxd_peer *p = &d->peers[r->pc.src_peer[i]];
	struct kvx_wire_msg w = {.type = KVX_WIRE_ABORT};

	w.u.abort.room = r->pc.id;
	w.u.abort.gen = r->abort_gen;
	w.u.abort.dst_rank = r->pc.rank;
	w.u.abort.src_rank = r->src_rank[i];
	w.u.abort.open_gen = r->open_gen; /* the generation its ROOM_META carried */
	snprintf(w.u.abort.endpoint, sizeof(w.u.abort.endpoint), "%s", d->cfg.name);
	if (p->state != KVXD_PEER_READY || kvxd_peer_send(d, p, &w))
		KVX_DEBUG("room %llu: ABORT to %s not sent (%s): resent when it is back, or the "
			  "release timeout fences",
			  (unsigned long long)r->pc.id, p->name, kvxd_peer_state_str(p->state));
}

static void
resend_one(struct kvxd *d, struct kvxd_room *r, int i, void *arg)
{
	uint32_t bit = 1u << i;

	(void)arg;
	if (r->pc.role != KVX_ROOM_DECODE || r->removing ||
	    (r->ab_state != KVXD_ABORT_ARMED && r->ab_state != KVXD_ABORT_FENCING))
		return;
	if ((r->meta_sent_mask & bit) && !((r->ack_mask | r->fenced_mask) & bit))
		send_abort(d, r, i);
}

/* A peer's new session: an ABORT (or its ACK) lost with the old connection is asked again. */
void
kvxd_abort_resend_for_peer(struct kvxd *d, struct kvxd_peer *p)
{
	kvxd_rooms_of_peer(d, p, resend_one, NULL);
}

int64_t
kvxd_decode_abort(struct kvxd *d, struct kvxd_room *r, int error, const char *reason)
{
	struct kvxd_msg m = {.type = KVXD_MSG_ROOM_ABORT, .room = &r->pc, .error = error};
	int state = kvxd_room_state(r);

	if (r->pc.role != KVX_ROOM_DECODE)
		return -EINVAL;
	if (kvxd_room_aborting(r))
		return r->abort_gen; /* one abort per room: the first one's generation */
	if (state == KVX_ROOM_SUCCESS)
		return -EALREADY;
	/* arm first: an ACK is only ever counted for this generation */
	kvxd_abort_set(d, r, KVXD_ABORT_ARMED);
	r->abort_gen = next_gen(r);
	r->ack_mask = r->fenced_mask = r->fencing_mask = 0;
	r->abort_ms = kvxd_now_ms();
	r->abort_us = kvxd_now_us();
	r->release_deadline_ms = r->abort_ms + d->cfg.release_ms;
	kvxd_room_timer_arm(d, r, r->release_deadline_ms);
	d->ctr.aborts++;
	m.gen = r->abort_gen;
	snprintf(m.reason, sizeof(m.reason), "%s", reason);
	if (kvx_pcore_send(&d->cores[r->pc.core], &m))
		KVX_ERR("core %d: no memory to queue: room %llu abort not applied", r->pc.core,
			(unsigned long long)r->pc.id);
	for (int i = 0; i < r->pc.nsrc; i++) {
		if (!(r->meta_sent_mask & (1u << i)))
			continue;
		if (d->peers[r->pc.src_peer[i]].state == KVXD_PEER_READY)
			send_abort(d, r, i);
		else /* no session: nothing can write once its old QPs are destroyed */
			kvxd_abort_source_fenced(d, r, i);
	}
	maybe_release(d, r); /* nobody was notified: nothing can write */
	return r->abort_gen;
}

void
kvxd_on_abort_ack(struct kvxd *d, struct kvxd_peer *p, const struct kvx_wire_abort_ack *a)
{
	struct kvxd_room *r = kvxd_room_find(d, a->room, a->dst_rank, KVX_ROOM_DECODE);
	int src = -1;

	d->ctr.acks_received++;
	if (!r || !kvxd_room_aborting(r)) {
		d->ctr.acks_unknown++; /* no such abort (any more): never releases */
		return;
	}
	if (r->abort_gen != a->gen) {
		d->ctr.acks_stale++; /* another generation: never releases */
		return;
	}
	/* distinct sources: the source is the peer that sent it, and the rank it names there */
	for (int i = 0; i < r->pc.nsrc; i++)
		if (r->pc.src_peer[i] == p->idx && r->src_rank[i] == a->src_rank)
			src = i;
	if (src < 0) {
		d->ctr.acks_stale++;
		return;
	}
	r->ack_mask |= 1u << src;
	maybe_release(d, r);
}

static bool
peer_has_qps(const struct kvxd_peer *p)
{
	for (int k = 0; k < p->j.n; k++)
		if (p->j.e[k].kind == KVXD_J_QP)
			return true;
	return false;
}

/* Source i counts as fenced once every QP its peer has now is destroyed (none: at once). */
static void
begin_fence(struct kvxd *d, struct kvxd_room *r, int i)
{
	struct kvxd_peer *p = &d->peers[r->pc.src_peer[i]];

	r->fencing_mask |= 1u << i;
	r->fence_target[i] = p->qp_sessions_ended + (peer_has_qps(p) ? 1 : 0);
	if (p->qp_sessions_ended >= r->fence_target[i])
		r->fenced_mask |= 1u << i;
}

static void
kvxd_abort_source_fenced(struct kvxd *d, struct kvxd_room *r, int i)
{
	if (kvxd_room_released(r) || ((r->ack_mask | r->fenced_mask | r->fencing_mask) & (1u << i)))
		return;
	d->ctr.session_fences++;
	begin_fence(d, r, i);
	maybe_release(d, r);
}

/* ---- prefill ------------------------------------------------------------------------------- */

/* ACK an ABORT of (room, src_rank) to the decode endpoint (peer, dst_rank). */
static void
send_ack(struct kvxd *d, uint64_t room, uint32_t src_rank, int peer, uint32_t dst_rank,
	 uint32_t gen)
{
	struct kvx_wire_msg w = {.type = KVX_WIRE_ABORT_ACK};
	struct kvxd_peer *p = &d->peers[peer];

	w.u.abort_ack.room = room;
	w.u.abort_ack.gen = gen;
	w.u.abort_ack.dst_rank = dst_rank;
	w.u.abort_ack.src_rank = src_rank;
	w.u.abort_ack.src_idx = 0; /* decode knows its source by the connection */
	if (p->state == KVXD_PEER_READY && kvxd_peer_send(d, p, &w) == 0)
		d->ctr.acks_sent++;
	else
		d->ctr.acks_unsent++; /* that decode falls back to its release timeout + fence */
}

static void
ack_all(struct kvxd *d, struct kvxd_room *r)
{
	for (int i = 0; i < r->ntgt; i++)
		send_ack(d, r->pc.id, r->pc.rank, r->tgt[i].peer, r->tgt[i].rank, r->tgt[i].gen);
	r->ntgt = 0;
	kvxd_room_settle(d, r); /* its ACK targets were what kept it */
}

void
kvxd_on_drained(struct kvxd *d, struct kvxd_room *r)
{
	r->drained = true;
	ack_all(d, r);
}

void
kvxd_on_abort(struct kvxd *d, struct kvxd_peer *p, const struct kvx_wire_abort *a)
{
	struct kvxd_room *r = kvxd_room_find(d, a->room, a->src_rank, KVX_ROOM_PREFILL);
	struct kvxd_msg m = {.type = KVXD_MSG_ROOM_ABORT, .error = -ECANCELED};
	int i;

	d->ctr.aborts_received++;
	if (!r) {
		/* unknown or cleared: nothing of it is outstanding, so it is acknowledged at once;
		 * a tombstone remembers that this endpoint aborted this generation, so that its
		 * ROOM_META, should it still come, is refused.  Capped per peer. */
		if (p->tombstones_held >= d->cfg.max_tombstones_per_peer) {
			d->ctr.tombstones_refused++;
			send_ack(d, a->room, a->src_rank, p->idx, a->dst_rank, a->gen);
			return;
		}
		r = kvxd_prefill_room_new(d, a->room, a->src_rank, -1);
		if (!r) {
			send_ack(d, a->room, a->src_rank, p->idx, a->dst_rank, a->gen);
			return;
		}
		snprintf(r->pc.reason, sizeof(r->pc.reason),
			 "aborted by %s before it was known here", p->name);
		r->tombstone = r->drained = true;
		r->tomb_peer = p->idx + 1;
		r->tomb_rank = a->dst_rank;
		r->tomb_gen = a->open_gen; /* its ROOM_META's, not the abort's */
		kvxd_room_charge(d, r, p->idx, true);
		d->ctr.tombstones++;
		send_ack(d, r->pc.id, a->src_rank, p->idx, a->dst_rank, a->gen);
		return;
	}
	if (kvxd_room_owner(r, p->idx, a->dst_rank) < 0) {
		/* not this endpoint's room: none of its pages can be written from here, so it is
		 * acknowledged at once and the room is left alone; if the room has no metadata
		 * yet, that endpoint's ROOM_META of this generation will be refused */
		d->ctr.aborts_not_owner++;
		/* its parked metadata of that generation is never taken now */
		kvxd_room_meta_abort_parked(r, p->idx, a->dst_rank, a->open_gen);
		if (r->nowners == 0) {
			r->tomb_peer = p->idx + 1;
			r->tomb_rank = a->dst_rank;
			r->tomb_gen = a->open_gen; /* its ROOM_META's, not the abort's */
		}
		send_ack(d, r->pc.id, a->src_rank, p->idx, a->dst_rank, a->gen);
		return;
	}
	/* one target per decode endpoint, with its own (latest) generation */
	for (i = 0; i < r->ntgt; i++)
		if (r->tgt[i].peer == p->idx && r->tgt[i].rank == a->dst_rank)
			break;
	if (i == r->ntgt) {
		if (r->ntgt == KVXD_MAX_TARGETS) {
			KVX_ERR("room %llu: more than %d decode endpoints abort it",
				(unsigned long long)r->pc.id, KVXD_MAX_TARGETS);
			return;
		}
		r->ntgt++;
	}
	r->tgt[i].peer = p->idx;
	r->tgt[i].rank = a->dst_rank;
	r->tgt[i].gen = a->gen;
	if (r->drained) {
		ack_all(d, r);
		return;
	}
	if (r->abort_sent)
		return; /* its core failed it already; the drain ACKs the new generation */
	r->abort_sent = true;
	m.room = &r->pc;
	snprintf(m.reason, sizeof(m.reason), "aborted by %s (generation %u)", p->name, a->gen);
	if (kvx_pcore_send(&d->cores[r->pc.core], &m))
		KVX_ERR("core %d: no memory to queue: room %llu abort not applied", r->pc.core,
			(unsigned long long)r->pc.id);
}

/* ---- timers -------------------------------------------------------------------------------- */

/* Has the session whose QPs carried this source's writes been fenced and destroyed? */
static bool
fence_done(struct kvxd *d, struct kvxd_room *r, int i)
{
	return d->peers[r->pc.src_peer[i]].qp_sessions_ended >= r->fence_target[i];
}

/* Release deadline: fence every silent source (error state, then destroy, through the journal
 * of its connection; asked of the peer layer), and release once all of them are fenced.  Also
 * called when a peer's QPs were destroyed (a fence completed). */
static void
abort_check(struct kvxd *d, struct kvxd_room *r, uint64_t now)
{
	uint32_t need = notified_mask(r);

	if (r->ab_state != KVXD_ABORT_ARMED && r->ab_state != KVXD_ABORT_FENCING)
		return;
	for (int i = 0; i < r->pc.nsrc; i++) {
		uint32_t bit = 1u << i;

		if (!(need & bit) || (r->ack_mask & bit) || (r->fenced_mask & bit))
			continue;
		if ((r->fencing_mask & bit) && fence_done(d, r, i)) {
			r->fenced_mask |= bit;
			continue;
		}
		if (!(r->fencing_mask & bit) && now >= r->release_deadline_ms) {
			struct kvxd_peer *p = &d->peers[r->pc.src_peer[i]];

			if (r->ab_state == KVXD_ABORT_ARMED)
				kvxd_abort_set(d, r, KVXD_ABORT_FENCING);
			if (peer_has_qps(p)) {
				char why[160];

				snprintf(why, sizeof(why),
					 "fence: room %llu got no ABORT_ACK within %u ms",
					 (unsigned long long)r->pc.id, d->cfg.release_ms);
				d->ctr.fences++;
				/* error state first (the journal's order), then destroyed */
				kvxd_peer_fence_request(d, p, why);
			}
			begin_fence(d, r, i);
		}
	}
	maybe_release(d, r);
}

/* The waiting timeout of a decode room: the same abort as any other path. */
static void
decode_waiting_timeout(struct kvxd *d, struct kvxd_room *r, const char *reason)
{
	kvxd_decode_abort(d, r, -ETIMEDOUT, reason);
}

/* The room's next deadline after now, or KVXD_TIMER_NEVER. */
static uint64_t
next_due(const struct kvxd *d, const struct kvxd_room *r, uint64_t now)
{
	uint64_t waiting = r->opened_ms + d->cfg.waiting_ms, due = KVXD_TIMER_NEVER;
	int st = kvxd_room_state(r);

#define DUE(t)                              \
	do {                                \
		if ((t) > now && (t) < due) \
			due = (t);          \
	} while (0)
	if (r->pc.role == KVX_ROOM_DECODE) {
		if (r->ab_state == KVXD_ABORT_ARMED)
			DUE(r->release_deadline_ms);
		else if (r->ab_state == KVXD_ABORT_NONE && !r->waiting_fired &&
			 !kvx_room_state_terminal(st))
			DUE(waiting);
		return due;
	}
	if (!r->waiting_fired && !kvx_room_state_terminal(st))
		DUE(waiting);
	if (r->tombstone)
		DUE(waiting);
	if (r->engine_id < 0 && r->engine_gone && !r->nowners)
		DUE(r->gone_ms + d->cfg.waiting_ms);
	if (r->engine_id < 0 && !r->engine_gone && !atomic_load(&r->pc.told))
		DUE(waiting);
#undef DUE
	return due;
}

void
kvxd_abort_on_timer(struct kvxd *d, struct kvxd_room *r, uint64_t now)
{
	int state = kvxd_room_state(r);

	if (r->removing)
		return;
	if (r->pc.role == KVX_ROOM_DECODE && kvxd_room_aborting(r)) {
		abort_check(d, r, now);
	} else if (r->tombstone && r->ntgt == 0 && now >= r->opened_ms + d->cfg.waiting_ms) {
		kvxd_room_remove(d, r);
		return;
	} else if (!kvx_room_state_terminal(state) && !r->waiting_fired &&
		   now >= r->opened_ms + d->cfg.waiting_ms) {
		char reason[KVXD_REASON_MAX];

		snprintf(reason, sizeof(reason), "waiting timeout (%u ms) in %s", d->cfg.waiting_ms,
			 kvx_room_state_str(state));
		d->ctr.waiting_timeouts++;
		r->waiting_fired = true; /* once */
		if (r->pc.role == KVX_ROOM_DECODE) {
			decode_waiting_timeout(d, r, reason);
		} else {
			struct kvxd_msg m = {
				.type = KVXD_MSG_ROOM_FAIL, .error = -ETIMEDOUT, .room = &r->pc};

			snprintf(m.reason, sizeof(m.reason), "%s", reason);
			kvx_pcore_send(&d->cores[r->pc.core], &m);
		}
	}
	kvxd_room_settle(d, r);
	kvxd_room_timer_arm(d, r, next_due(d, r, now));
}

/* ---- peers and engines --------------------------------------------------------------------- */

static void
fail_dependent(struct kvxd *d, struct kvxd_room *r, int i, void *arg)
{
	struct kvxd_peer *p = arg;
	struct kvxd_msg m = {.type = KVXD_MSG_ROOM_FAIL, .error = -EHOSTUNREACH, .room = &r->pc};

	(void)i;
	if (r->removing || kvx_room_state_terminal(kvxd_room_state(r)))
		return;
	snprintf(m.reason, sizeof(m.reason), "peer %s: setup failed: %s", p->name, p->last_error);
	if (r->pc.role == KVX_ROOM_DECODE)
		kvxd_decode_abort(d, r, m.error, m.reason);
	else
		kvx_pcore_send(&d->cores[r->pc.core], &m);
}

/* Rooms that depended on a peer whose setup failed end FAILED, with the reason. */
void
kvxd_abort_peer_setup_failed(struct kvxd *d, struct kvxd_peer *p)
{
	kvxd_rooms_of_peer(d, p, fail_dependent, p);
}

struct lost_arg {
	struct kvxd_peer *p;
	bool failed;
};

static void
source_lost(struct kvxd *d, struct kvxd_room *r, int i, void *arg)
{
	struct lost_arg *w = arg;
	char reason[KVXD_REASON_MAX];
	uint32_t bit = 1u << i;

	if (r->pc.role != KVX_ROOM_DECODE || r->removing)
		return;
	if (!(r->meta_sent_mask & bit)) {
		/* not issued to it yet: nothing to fence, but it would only wait */
		if (w->failed && !kvxd_room_aborting(r) &&
		    !kvx_room_state_terminal(kvxd_room_state(r))) {
			snprintf(reason, sizeof(reason), "source %s lost: %s", w->p->name,
				 w->p->last_error);
			kvxd_decode_abort(d, r, -ECONNRESET, reason);
		}
		return;
	}
	if (kvxd_room_aborting(r)) {
		kvxd_abort_source_fenced(d, r, i);
	} else if (kvx_room_state_terminal(kvxd_room_state(r))) {
		return;
	} else if (w->failed) {
		snprintf(reason, sizeof(reason), "source %s lost: %s", w->p->name,
			 w->p->last_error);
		kvxd_decode_abort(d, r, -ECONNRESET, reason);
	} else {
		/* sent again on the next session; the session it went on may still place a write
		 * until its QPs are destroyed: no release before that */
		r->meta_sent_mask &= ~bit;
		r->stale_mask |= bit;
		r->stale_target[i] = w->p->qp_sessions_ended + (peer_has_qps(w->p) ? 1 : 0);
	}
}

/* A published session with a source ended.  Decode rooms fed by it: an abort waiting for its
 * ACK now waits for those QPs' destruction instead (a fence); a room in flight is aborted if
 * the peer failed, or else re-issued to the peer's next session (its metadata is bound to the
 * old one, so nothing the prefill still holds can be written without it). */
void
kvxd_abort_source_lost(struct kvxd *d, struct kvxd_peer *p, bool failed)
{
	struct lost_arg w = {.p = p, .failed = failed};

	kvxd_rooms_of_peer(d, p, source_lost, &w);
}

static void
fenced_one(struct kvxd *d, struct kvxd_room *r, int i, void *arg)
{
	(void)i;
	(void)arg;
	if (r->pc.role == KVX_ROOM_DECODE && !r->removing && kvxd_room_aborting(r))
		abort_check(d, r, kvxd_now_ms());
}

void
kvxd_abort_peer_fenced(struct kvxd *d, struct kvxd_peer *p)
{
	kvxd_rooms_of_peer(d, p, fenced_one, NULL);
}

void
kvxd_abort_engine_lost(struct kvxd *d, struct kvxd_room *r)
{
	int st = kvxd_room_state(r);

	r->engine_gone = true;
	r->engine_closed = true;
	r->engine_id = -1;
	r->gone_ms = kvxd_now_ms();
	if (r->removing)
		return;
	if (r->pc.role == KVX_ROOM_DECODE) {
		if (!kvx_room_state_terminal(st) && !kvxd_room_aborting(r)) {
			d->ctr.engine_lost_rooms++;
			kvxd_decode_abort(d, r, -ECONNRESET, "the decode engine disconnected");
		}
		kvxd_room_settle(d, r);
		return;
	}
	if (st != KVX_ROOM_SUCCESS && st != KVX_ROOM_FAILED && !r->last_submitted) {
		struct kvxd_msg m = {
			.type = KVXD_MSG_ROOM_FAIL, .error = -ECONNRESET, .room = &r->pc};

		d->ctr.engine_lost_rooms++;
		snprintf(m.reason, sizeof(m.reason), "the prefill engine disconnected");
		kvx_pcore_send(&d->cores[r->pc.core], &m);
	}
	/* it may stay a while for a late ROOM_META (kvxd_room_settle): its timer says when */
	kvxd_room_timer_arm(d, r, next_due(d, r, r->gone_ms));
	kvxd_room_settle(d, r);
}
