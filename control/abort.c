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
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "control/kvxd.h"
#include "core/log.h"
#include "core/rand.h"

/* The abort's generation: random (not guessable by a peer), never the open's. */
static uint32_t
next_gen(const struct kvxd_room *r)
{
	uint32_t g;

	do
		g = kvx_rand_u32_nonzero();
	while (g == r->gen);
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
	struct kvxd_msg m = {.type = KVXD_MSG_ROOM_RELEASE, .room = r, .gen = r->abort_gen};
	uint64_t now = kvxd_now_ms();

	if (r->released)
		return;
	r->released = true; /* exactly once */
	d->ctr.releases++;
	d->ctr.abort_release_ms_sum += now - r->abort_ms;
	KVX_DEBUG("room %llu gen %u released after %llu ms (acked 0x%x fenced 0x%x)",
		  (unsigned long long)r->id, r->abort_gen, (unsigned long long)(now - r->abort_ms),
		  r->ack_mask, r->fenced_mask);
	if (kvx_pcore_send(&d->cores[r->core], &m))
		KVX_ERR("core %d: no memory to queue: room %llu not released", r->core,
			(unsigned long long)r->id);
}

static void
maybe_release(struct kvxd *d, struct kvxd_room *r)
{
	uint32_t need = notified_mask(r);

	if (r->aborting && !r->released && ((r->ack_mask | r->fenced_mask) & need) == need)
		release(d, r);
}

static void
send_abort(struct kvxd *d, struct kvxd_room *r, int i)
{
	struct kvxd_peer *p = &d->peers[r->src_peer[i]];
	struct kvx_wire_msg w = {.type = KVX_WIRE_ABORT};

	w.u.abort.room = r->id;
	w.u.abort.gen = r->abort_gen;
	snprintf(w.u.abort.endpoint, sizeof(w.u.abort.endpoint), "%s", d->cfg.name);
	if (p->state != KVXD_PEER_READY || kvxd_peer_send(d, p, &w))
		KVX_DEBUG("room %llu: ABORT to %s not sent (%s): resent when it is back, or the "
			  "release timeout fences",
			  (unsigned long long)r->id, p->name, kvxd_peer_state_str(p->state));
}

static int
resend_one(struct kvx_room_table_node *n, void *arg)
{
	struct kvxd_peer_walk *w = arg;
	struct kvxd_room *r = caa_container_of(n, struct kvxd_room, by_id);

	if (r->role != KVX_ROOM_DECODE || !r->aborting || r->released || r->removing)
		return 0;
	for (int i = 0; i < r->nsrc; i++) {
		uint32_t bit = 1u << i;

		if (r->src_peer[i] == w->p->idx && (r->meta_sent_mask & bit) &&
		    !((r->ack_mask | r->fenced_mask) & bit))
			send_abort(w->d, r, i);
	}
	return 0;
}

/* A peer's new session: an ABORT (or its ACK) lost with the old connection is asked again. */
void
kvxd_abort_resend_for_peer(struct kvxd *d, struct kvxd_peer *p)
{
	struct kvxd_peer_walk w = {.d = d, .p = p};

	rcu_read_lock();
	kvx_room_table_for_each(d->by_id, resend_one, &w);
	rcu_read_unlock();
}

int64_t
kvxd_decode_abort(struct kvxd *d, struct kvxd_room *r, int error, const char *reason)
{
	struct kvxd_msg m = {.type = KVXD_MSG_ROOM_ABORT, .room = r, .error = error};
	int state = kvxd_room_state(r);

	if (r->role != KVX_ROOM_DECODE)
		return -EINVAL;
	if (r->aborting)
		return r->abort_gen; /* one abort per room: the first one's generation */
	if (state == KVX_ROOM_SUCCESS)
		return -EALREADY;
	/* arm first: an ACK is only ever counted for this generation */
	r->aborting = true;
	r->abort_gen = next_gen(r);
	r->ack_mask = r->fenced_mask = r->fencing_mask = 0;
	r->abort_ms = kvxd_now_ms();
	r->release_deadline_ms = r->abort_ms + d->cfg.release_ms;
	d->ctr.aborts++;
	m.gen = r->abort_gen;
	snprintf(m.reason, sizeof(m.reason), "%s", reason);
	if (kvx_pcore_send(&d->cores[r->core], &m))
		KVX_ERR("core %d: no memory to queue: room %llu abort not applied", r->core,
			(unsigned long long)r->id);
	for (int i = 0; i < r->nsrc; i++) {
		if (!(r->meta_sent_mask & (1u << i)))
			continue;
		if (d->peers[r->src_peer[i]].state == KVXD_PEER_READY)
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
	struct kvxd_room *r = kvxd_room_find(d, a->room, KVX_ROOM_DECODE);
	int src = -1;

	d->ctr.acks_received++;
	if (!r || !r->aborting) {
		d->ctr.acks_unknown++; /* no such abort (any more): never releases */
		return;
	}
	if (r->abort_gen != a->gen) {
		d->ctr.acks_stale++; /* another generation: never releases */
		return;
	}
	/* distinct sources: the source is the peer that sent it */
	for (int i = 0; i < r->nsrc; i++)
		if (r->src_peer[i] == p->idx)
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
	struct kvxd_peer *p = &d->peers[r->src_peer[i]];

	r->fencing_mask |= 1u << i;
	r->fence_target[i] = p->qp_sessions_ended + (peer_has_qps(p) ? 1 : 0);
	if (p->qp_sessions_ended >= r->fence_target[i])
		r->fenced_mask |= 1u << i;
}

void
kvxd_abort_source_fenced(struct kvxd *d, struct kvxd_room *r, int i)
{
	if (r->released || ((r->ack_mask | r->fenced_mask | r->fencing_mask) & (1u << i)))
		return;
	d->ctr.session_fences++;
	begin_fence(d, r, i);
	maybe_release(d, r);
}

/* ---- prefill ------------------------------------------------------------------------------- */

static void
send_ack(struct kvxd *d, uint64_t room, int peer, uint32_t gen)
{
	struct kvx_wire_msg w = {.type = KVX_WIRE_ABORT_ACK};
	struct kvxd_peer *p = &d->peers[peer];

	w.u.abort_ack.room = room;
	w.u.abort_ack.gen = gen;
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
		send_ack(d, r->id, r->tgt[i].peer, r->tgt[i].gen);
	r->ntgt = 0;
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
	struct kvxd_room *r = kvxd_room_find(d, a->room, KVX_ROOM_PREFILL);
	struct kvxd_msg m = {.type = KVXD_MSG_ROOM_ABORT, .error = -ECANCELED};
	int i;

	d->ctr.aborts_received++;
	if (!r) {
		/* unknown or cleared: nothing of it is outstanding, so it is acknowledged at once;
		 * a tombstone remembers that this endpoint aborted this generation, so that its
		 * ROOM_META, should it still come, is refused.  Capped per peer. */
		if (p->tombstones_held >= d->cfg.max_tombstones_per_peer) {
			d->ctr.tombstones_refused++;
			send_ack(d, a->room, p->idx, a->gen);
			return;
		}
		r = kvxd_prefill_room_new(d, a->room, -1);
		if (!r) {
			send_ack(d, a->room, p->idx, a->gen);
			return;
		}
		snprintf(r->reason, sizeof(r->reason), "aborted by %s before it was known here",
			 p->name);
		r->tombstone = r->drained = true;
		r->tomb_peer = p->idx + 1;
		r->tomb_gen = a->gen;
		kvxd_room_charge(d, r, p->idx, true);
		d->ctr.tombstones++;
		send_ack(d, r->id, p->idx, a->gen);
		return;
	}
	if (r->meta_peer != p->idx + 1) {
		/* not this endpoint's room: none of its pages can be written from here, so it is
		 * acknowledged at once and the room is left alone; if the room has no metadata
		 * yet, that endpoint's ROOM_META of this generation will be refused */
		d->ctr.aborts_not_owner++;
		if (r->meta_peer == 0) {
			r->tomb_peer = p->idx + 1;
			r->tomb_gen = a->gen;
		}
		send_ack(d, r->id, p->idx, a->gen);
		return;
	}
	/* one target per decode endpoint, with its own (latest) generation */
	for (i = 0; i < r->ntgt; i++)
		if (r->tgt[i].peer == p->idx)
			break;
	if (i == r->ntgt) {
		if (r->ntgt == KVXD_MAX_TARGETS) {
			KVX_ERR("room %llu: more than %d decode endpoints abort it",
				(unsigned long long)r->id, KVXD_MAX_TARGETS);
			return;
		}
		r->ntgt++;
	}
	r->tgt[i].peer = p->idx;
	r->tgt[i].gen = a->gen;
	if (r->drained) {
		ack_all(d, r);
		return;
	}
	if (r->abort_sent)
		return; /* its core failed it already; the drain ACKs the new generation */
	r->abort_sent = true;
	m.room = r;
	snprintf(m.reason, sizeof(m.reason), "aborted by %s (generation %u)", p->name, a->gen);
	if (kvx_pcore_send(&d->cores[r->core], &m))
		KVX_ERR("core %d: no memory to queue: room %llu abort not applied", r->core,
			(unsigned long long)r->id);
}

/* The waiting timeout of a decode room: the same abort as any other path. */
void
kvxd_decode_waiting_timeout(struct kvxd *d, struct kvxd_room *r, const char *reason)
{
	kvxd_decode_abort(d, r, -ETIMEDOUT, reason);
}

/* ---- timers -------------------------------------------------------------------------------- */

/* Has the session whose QPs carried this source's writes been fenced and destroyed? */
static bool
fence_done(struct kvxd *d, struct kvxd_room *r, int i)
{
	return d->peers[r->src_peer[i]].qp_sessions_ended >= r->fence_target[i];
}

/* Release timeout: fence every silent source (error state, then destroy, through the journal
 * of its connection), and release once all of them are fenced.  Called from the tick. */
void
kvxd_abort_tick_room(struct kvxd *d, struct kvxd_room *r, uint64_t now)
{
	uint32_t need = notified_mask(r);

	if (!r->aborting || r->released)
		return;
	for (int i = 0; i < r->nsrc; i++) {
		uint32_t bit = 1u << i;

		if (!(need & bit) || (r->ack_mask & bit) || (r->fenced_mask & bit))
			continue;
		if ((r->fencing_mask & bit) && fence_done(d, r, i)) {
			r->fenced_mask |= bit;
			continue;
		}
		if (!(r->fencing_mask & bit) && now >= r->release_deadline_ms) {
			struct kvxd_peer *p = &d->peers[r->src_peer[i]];

			if (peer_has_qps(p)) {
				char why[160];

				snprintf(why, sizeof(why),
					 "fence: room %llu got no ABORT_ACK within %u ms",
					 (unsigned long long)r->id, d->cfg.release_ms);
				d->ctr.fences++;
				/* error state first (the journal's order), then destroyed */
				kvxd_peer_reset(d, p, why);
			}
			begin_fence(d, r, i);
		}
	}
	maybe_release(d, r);
}
