/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The control core's event loop: epoll over listeners, peers, engines, signals and the
 * polling cores' outboxes; room deadlines from the room owner's timer heap, peer timers from
 * the peer layer.  Layer 9 of control/ (control/README.md): the top, it calls every layer.
 * Thread: the control core (main thread), a registered QSBR reader, offline only inside
 * epoll_wait.
 */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <time.h>
#include <unistd.h>

#include "control/abort.h"
#include "control/engine.h"
#include "control/engine_io.h"
#include "control/etcd.h"
#include "control/loop.h"
#include "control/members.h"
#include "control/metrics_http.h"
#include "control/peer.h"
#include "control/peer_io.h"
#include "control/rooms.h"
#include "control/vwork.h"
#include "core/log.h"

#define TICK_MS 20
#define DRAIN_BOUND_MS 3000

/* ---- outboxes ------------------------------------------------------------------------------ */

/* An event its core could not put into the engine's core ring (full: the engine does not read;
 * or the engine broke that ring) goes through the session's own event ring (queued behind what
 * waits there, never dropped while the session lives), and so do the room's later events.  An
 * end comes with the room's one tell, which the core won (claim): it goes back if nobody takes
 * the event.  A broken core ring ends the session, like a broken event ring. */
static void
tell_spilled(struct kvxd *d, struct kvxd_room *r, const struct kvx_event *ev, bool claim)
{
	struct kvx_pcore_evq *q = atomic_load_explicit(&r->pc.evq, memory_order_acquire);
	struct kvxd_engine *e = r->engine_id >= 0 ? kvxd_engine_by_id(d, r->engine_id) : NULL;

	d->ctr.events_core_claimed++;
	if (e && q && atomic_load_explicit(&q->broken, memory_order_relaxed)) {
		kvxd_engine_doom(d, e, "its core event ring is corrupt");
		e = NULL;
	}
	if ((!e || kvxd_engine_send_event(d, r->engine_id, ev)) && claim)
		atomic_store(&r->pc.told, false); /* the claim goes back: a later engine is told */
}

static void
on_outbox_msg(struct kvxd *d, struct kvxd_msg *m)
{
	struct kvxd_room *r = m->room ? kvxd_room_of(m->room) : NULL;

	switch (m->type) {
	case KVXD_MSG_EVENT: {
		struct kvx_event ev = {.room = m->room_id,
				       .generation = m->gen,
				       .state = m->state,
				       .error = m->error};

		memcpy(ev.reason, m->reason, sizeof(ev.reason));
		ev.reason[sizeof(ev.reason) - 1] = '\0';
		/* the end of a room is told exactly once (a late engine is told when it comes,
		 * kvxd_room_tell); other states as they happen.  Nobody to tell: an orphan goes
		 * once it is quiescent (see tick). */
		kvxd_room_ended(d, r, m->state, m->at_us); /* the histograms, once */
		if (r->pc.role == KVX_ROOM_PREFILL && kvx_room_state_terminal(m->state))
			kvxd_room_meta_refuse_parked(d, r); /* waiting endpoints are told now */
		if (m->told == KVXD_TOLD_CORE) { /* its core put it into the engine's core ring */
			d->ctr.events_core++;
			d->ctr.events_sent++;
		} else if (m->told == KVXD_TOLD_SPILL && atomic_load(&r->pc.told)) {
			/* a state on the way whose room's end its engine was told meanwhile (its
			 * next call saw the end before this EVENT was taken): never after the
			 * end */
		} else if (m->told == KVXD_TOLD_SPILL || m->told == KVXD_TOLD_CLAIM)
			tell_spilled(d, r, &ev, m->told == KVXD_TOLD_CLAIM);
		else if (kvxd_room_terminal_for_engine(r, m->state))
			kvxd_room_tell(d, r, &ev);
		else if (m->told == KVXD_TOLD_NOBODY &&
			 atomic_load_explicit(&r->pc.evq, memory_order_acquire)) {
			/* an engine claimed the room after its core put this: it hears the later
			 * states through its core ring, and this one would come behind them.
			 * Counted only while the room's end is not told: after it, the end holds
			 * it back, whatever the claim */
			if (!atomic_load(&r->pc.told))
				d->ctr.events_before_claim++;
		} else if (!atomic_load(&r->pc.told))
			kvxd_engine_send_event(d, r->engine_id, &ev);
		/* else a state from before the room's end, which its engine heard already (a
		 * prefill room's end told to an engine that claimed the room after its core put
		 * this EVENT): never after the end */
		kvxd_room_settle(d, r);
		break;
	}
	case KVXD_MSG_STATUS_PUSH: {
		struct kvx_wire_room_status st = {.room = m->room_id,
						  .gen = m->gen,
						  .src_idx = m->src_idx,
						  .state = m->state,
						  .error = m->error,
						  .dst_rank = m->dst_rank,
						  .src_rank = m->src_rank};

		snprintf(st.reason, sizeof(st.reason), "%s", m->reason);
		if (m->peer >= 0 && m->peer < d->npeers)
			kvxd_peer_push_status(d, &d->peers[m->peer], &st);
		break;
	}
	case KVXD_MSG_QP_QUIESCED: {
		struct kvxd_peer *p = &d->peers[m->qpc->peer];

		/* Every WR on the errored QP has its completion: replace the connection with
		 * fresh QPs on both sides (never reset and reuse a QP).  With several rails the
		 * rail is taken down first, also on the side that fenced its end as the peer
		 * asked (the order of the tests below matters); with one, that side leaves the
		 * replacement to the peer, whose QP failed. */
		if (p->state == KVXD_PEER_READY && m->gen == p->epoch &&
		    !kvxd_peer_rail_failed(d, p, m->qpc->rail) &&
		    !kvxd_peer_lane_fenced_by_peer(d, p, m->qpc)) {
			struct kvx_wire_msg bye = {.type = KVX_WIRE_BYE,
						   .u.bye_reason = KVXD_BYE_REPLACE};

			d->ctr.qp_replaced++;
			kvxd_peer_send(d, p, &bye); /* tell it its rooms carry on */
			p->replacing = true;
			kvxd_peer_reset(d, p, "QP error: replacing the connection");
		}
		break;
	}
	case KVXD_MSG_QP_STUCK:
		kvxd_peer_qp_stuck(d, m->peer, m->qpc, m->gen);
		break;
	case KVXD_MSG_QP_ERRORED: /* before any DRAINED of the rooms it carried */
		kvxd_peer_qp_errored(d, m->peer, m->qpc, m->gen);
		break;
	case KVXD_MSG_PEER_IDLE:
		if (m->peer >= 0 && m->peer < d->npeers)
			kvxd_peer_rail_idle(d, &d->peers[m->peer], m->src_idx, m->gen);
		break;
	case KVXD_MSG_QP_RETIRED:
		kvxd_qpc_retired(d, m->qpc);
		break;
	case KVXD_MSG_ROOM_FREE:
		d->ctr.rooms_freed++;
		kvxd_room_free_deferred(r);
		break;
	case KVXD_MSG_CHUNK_FREE: /* to the chunk cache, its pool reference dropped */
		kvxd_chunk_free(d, m->ptr);
		break;
	case KVXD_MSG_META_FREE:
		free(m->ptr);
		break;
	case KVXD_MSG_DRAINED:
		kvxd_on_drained(d, r);
		kvxd_room_settle(d, r);
		break;
	default:
		break;
	}
}

static int
drain_outboxes(struct kvxd *d)
{
	struct kvxd_msg msgs[32];
	int total = 0;

	for (int c = 0; c < d->ncores; c++) {
		int n;

		while ((n = kvx_mbox_get_burst(d->cores[c].outbox, msgs, 32)) > 0) {
			for (int i = 0; i < n; i++)
				on_outbox_msg(d, &msgs[i]);
			total += n;
		}
	}
	return total;
}

/* Every room whose deadline came (the heap gives them in order), then the peers' timers. */
static void
tick(struct kvxd *d, uint64_t now)
{
	struct kvxd_room *r;

	while ((r = kvxd_rooms_due(d, now)))
		kvxd_abort_on_timer(d, r, now);
	kvxd_peer_tick(d, now); /* after the rooms: it acts on the fences they asked for */
	kvxd_pool_sweep(d, now);
	kvxd_metrics_http_tick(d, now);
	kvxd_etcd_tick(d, now);
}

static void
dispatch(struct kvxd *d, struct kvxd_fd *f, uint32_t events)
{
	switch (f->kind) {
	case KVXD_FD_TCP_LISTEN:
		kvxd_peer_accept(d);
		break;
	case KVXD_FD_ENG_LISTEN:
		kvxd_engine_accept(d);
		break;
	case KVXD_FD_PEER:
		kvxd_peer_on_event(d, f->ptr, events);
		break;
	case KVXD_FD_PENDING:
		kvxd_pending_on_event(d, f->ptr, events);
		break;
	case KVXD_FD_ENGINE:
		kvxd_engine_on_event(d, f->ptr, events);
		break;
	case KVXD_FD_OUTBOX:
		break; /* drained every iteration */
	case KVXD_FD_ENGINE_RING:
		break; /* read after the wait (kvxd_engine_ring_unpark), taken every iteration */
	case KVXD_FD_ENGINE_ROOM:
		kvxd_engine_ring_room(d, f->ptr); /* what waits goes in at the next iteration */
		break;
	case KVXD_FD_METRICS_LISTEN:
	case KVXD_FD_METRICS_CONN:
		kvxd_metrics_http_on_event(d, f, events);
		break;
	case KVXD_FD_ETCD:
		kvxd_etcd_on_event(d, f, events);
		break;
	case KVXD_FD_VWORK:
		kvxd_vwork_on_event(d); /* its done jobs are taken after the batch */
		break;
	case KVXD_FD_SIGNAL: {
		struct signalfd_siginfo si;

		char err[512];

		if (read(d->sig_fd, &si, sizeof(si)) != sizeof(si))
			break;
		if (si.ssi_signo == SIGHUP) {
			KVX_INFO("SIGHUP: reloading the peers of %s",
				 d->cfg_path ? d->cfg_path : "(none)");
			kvxd_members_reload(d, err, sizeof(err)); /* logs what it did */
			break;
		}
		KVX_INFO("signal %u: stopping", si.ssi_signo);
		d->stopping = true;
		break;
	}
	}
}

void
kvxd_loop_vwork_done(struct kvxd *d)
{
	struct kvxd_vjob *j = kvxd_vwork_take_done(d), *next;

	for (; j; j = next) {
		next = j->next;
		if (j->kind == KVXD_VJOB_CONNECT)
			kvxd_peer_connect_done(d, j);
		else if (j->kind == KVXD_VJOB_MR_DEREG)
			kvxd_engine_pool_dereg_done(d, j); /* frees j */
		else
			kvxd_engine_pool_done(d, j); /* frees j */
	}
}

void
kvxd_loop_once(struct kvxd *d, int timeout_ms)
{
	struct epoll_event ev[64];
	uint64_t next, now;
	int n;

	d->loop_pass++;
	kvx_rcu_quiescent();
	if (drain_outboxes(d))
		timeout_ms = 0;
	if (kvxd_engine_rings_poll(d))
		timeout_ms = 0;
	kvxd_engine_rings_notify(d);
	kvxd_peers_flush(d); /* after the engines' wake-ups: a decode open's reply goes first */
	for (int c = 0; c < d->ncores; c++)
		if (kvx_pcore_flush(&d->cores[c]))
			timeout_ms = timeout_ms > 1 ? 1 : timeout_ms; /* retry soon */
	for (int c = 0; c < d->ncores; c++)
		kvx_mbox_park_prepare(d->cores[c].outbox);
	for (int c = 0; c < d->ncores; c++)
		if (!kvx_mbox_empty(d->cores[c].outbox))
			timeout_ms = 0;
	if (kvxd_engine_rings_park(d)) /* a submission ring has requests */
		/* held for the cores' inboxes: look again soon, not at once */
		timeout_ms = !d->rings_held ? 0 : timeout_ms > 1 ? 1 : timeout_ms;
	if (kvxd_engine_socks_release(d)) /* sockets held for the cores' inboxes, too */
		timeout_ms = timeout_ms > 1 ? 1 : timeout_ms;
	next = kvxd_rooms_next_due(d);
	if (kvxd_peer_next_due(d) < next)
		next = kvxd_peer_next_due(d);
	if (kvxd_metrics_http_next_due(d) < next)
		next = kvxd_metrics_http_next_due(d);
	if (kvxd_etcd_next_due(d) < next)
		next = kvxd_etcd_next_due(d);
	now = kvxd_now_ms();
	if (next != KVXD_TIMER_NEVER && timeout_ms > 0 && next < now + (uint64_t)timeout_ms)
		timeout_ms = next <= now ? 0 : (int)(next - now);
	kvx_rcu_offline();
	n = epoll_wait(d->epfd, ev, 64, timeout_ms);
	kvx_rcu_online();
	{
		bool woken[KVX_MAX_CORES] = {false};

		for (int i = 0; i < n; i++) {
			const struct kvxd_fd *f = ev[i].data.ptr;

			if (f->kind == KVXD_FD_OUTBOX)
				woken[(struct kvxd_core *)f->ptr - d->cores] = true;
		}
		for (int i = 0; i < d->engines_end; i++) {
			struct kvxd_engine *e = d->engines[i];
			bool w = false;

			for (int k = 0; e && e->rings && k < n; k++)
				w |= ev[k].data.ptr == &e->ring_ev;
			if (e)
				kvxd_engine_ring_unpark(d, e, w);
		}
		/* an outbox's eventfd is read only when epoll reported it */
		for (int c = 0; c < d->ncores; c++)
			kvx_mbox_park_done(d->cores[c].outbox, woken[c]);
	}
	for (int i = 0; i < n; i++)
		dispatch(d, ev[i].data.ptr, ev[i].events);
	drain_outboxes(d);
	kvxd_engine_rings_poll(d);
	kvxd_vwork_run_inline(d); /* no worker thread (unit tests): its jobs run here */
	kvxd_loop_vwork_done(d);
	tick(d, kvxd_now_ms());
	kvxd_engine_reap(d);  /* sessions doomed above: nothing holds them any more */
	kvxd_pending_reap(d); /* connections dropped above: no event of this batch is left */
	kvxd_metrics_http_reap(d);
}

int
kvxd_run(struct kvxd *d)
{
	uint64_t until;

	while (!d->stopping)
		kvxd_loop_once(d, TICK_MS);

	/* Stop taking work, let in-flight WRs complete (bounded), then fence and retire every
	 * QP through its core, and only then let main() tear the rest down in reverse order. */
	epoll_ctl(d->epfd, EPOLL_CTL_DEL, d->tcp_fd, NULL);
	epoll_ctl(d->epfd, EPOLL_CTL_DEL, d->eng_fd, NULL);
	until = kvxd_now_ms() + DRAIN_BOUND_MS;
	while (!kvxd_rooms_quiescent(d) && kvxd_now_ms() < until)
		kvxd_loop_once(d, 5);
	if (!kvxd_rooms_quiescent(d))
		KVX_WARN("stopping with WRs still in flight after %d ms: fencing", DRAIN_BOUND_MS);
	for (int i = 0; i < d->npeers; i++)
		kvxd_peer_reset(d, &d->peers[i], "shutting down");
	until = kvxd_now_ms() + DRAIN_BOUND_MS;
	while (d->live_qpcs > 0 && kvxd_now_ms() < until)
		kvxd_loop_once(d, 5);
	if (d->live_qpcs)
		KVX_WARN("%d QPs not retired in %d ms", d->live_qpcs, DRAIN_BOUND_MS);
	return 0;
}

void
kvxd_shutdown_release(struct kvxd *d)
{
	drain_outboxes(d);
	for (int c = 0; c < d->ncores; c++) {
		struct kvxd_qpc *q = d->cores[c].qpcs, *next;

		d->cores[c].qpcs = NULL;
		for (; q; q = next) {
			next = q->next;
			kvxd_qpc_retired(d, q);
		}
	}
	for (int c = 0; c < d->ncores; c++) { /* chunks of failed rooms not given back yet */
		struct kvxd_chunk *ch = d->cores[c].dead_head, *next;

		d->cores[c].dead_head = d->cores[c].dead_tail = NULL;
		for (; ch; ch = next) {
			next = ch->next;
			kvxd_chunk_free(d, ch);
		}
	}
	kvxd_rooms_free_all(d);
	kvx_rcu_barrier();
}
