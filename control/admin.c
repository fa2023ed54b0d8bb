/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Operator commands (control/admin.h).  Layer 5 of control/ (control/README.md): it reads
 * every table and calls the peer layer for pause/resume.  Thread: the control core.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "control/abort.h"
#include "control/admin.h"
#include "control/peer_io.h"
#include "control/peer.h"
#include "control/rooms.h"
#include "core/fault.h"
#include "core/log.h"

struct rooms_walk {
	char *out;
	size_t len, off;
	int n;
};

#define ADMIN_HELP                                                                                \
	"commands: peers | rooms | counters | help (every engine); fault NAME:N[,NAME:N] | peer " \
	"NAME pause|resume|try (operators)\n"

static int
room_line(struct kvx_room_table_node *n, void *arg)
{
	struct rooms_walk *w = arg;
	struct kvxd_room *r = caa_container_of(n, struct kvxd_room, pc.by_id);
	int st = kvxd_room_state(r);
	/* the core's reason is final once the room is terminal (verbs/pcore.h) */
	const char *reason = kvx_room_state_terminal(st) ? r->pc.reason : "";

	w->n++;
	if (w->off + 200 < w->len)
		w->off += snprintf(w->out + w->off, w->len - w->off,
				   "room %llu %s gen %u state %s abort %s outstanding %llu%s%s\n",
				   (unsigned long long)r->pc.id, kvx_room_role_str(r->pc.role),
				   r->pc.role == KVX_ROOM_DECODE ? r->open_gen : r->meta_gen,
				   kvx_room_state_str(st), kvxd_abort_state_str(r->ab_state),
				   (unsigned long long)(atomic_load(&r->pc.wr_posted) -
							atomic_load(&r->pc.wr_done)),
				   reason[0] ? " reason: " : "", reason);
	return 0;
}

int
kvxd_admin(struct kvxd *d, const char *cmd, bool admin, char *out, size_t len)
{
	size_t off = 0;

	out[0] = '\0';
#define P(...)                                                              \
	do {                                                                \
		if (off < len)                                              \
			off += snprintf(out + off, len - off, __VA_ARGS__); \
	} while (0)
	if (strcmp(cmd, "peers") == 0) {
		for (int i = 0; i < d->npeers; i++) {
			struct kvxd_peer *p = &d->peers[i];

			P("peer %s %s:%u state %s epoch %u handshakes %llu setup_failures %llu "
			  "resets %llu journal_pending %d%s%s\n",
			  p->name, p->addr.host, p->addr.port, kvxd_peer_state_str(p->state),
			  p->epoch, (unsigned long long)p->n_handshakes,
			  (unsigned long long)p->n_setup_failures, (unsigned long long)p->n_resets,
			  p->state == KVXD_PEER_READY ? 0 : p->j.n,
			  p->last_error[0] ? " last_error: " : "", p->last_error);
		}
		return 0;
	}
	if (strcmp(cmd, "rooms") == 0) {
		struct rooms_walk w = {.out = out, .len = len};

		rcu_read_lock();
		kvx_room_table_for_each(d->by_id, room_line, &w);
		rcu_read_unlock();
		off = w.off;
		P("rooms %d\n", w.n);
		return 0;
	}
	if (strcmp(cmd, "counters") == 0 || strcmp(cmd, "metrics") == 0) {
		const struct kvxd_counters *c = &d->ctr;

#define C(metric, v) P("kvx_" metric "{node=\"%s\"} %llu\n", d->cfg.name, (unsigned long long)(v))
		C("frames_rx_total", c->frames_rx);
		C("frames_tx_total", c->frames_tx);
		C("frames_bad_total", c->frames_bad);
		C("peer_resets_total", c->peer_resets);
		C("engine_msgs_total", c->engine_msgs);
		C("engine_bad_total", c->engine_bad);
		C("engine_rings_total", c->engine_rings);
		C("engine_ring_wakes_total", c->engine_ring_wakes);
		C("events_sent_total", c->events_sent);
		C("events_dropped_total", c->events_dropped);
		C("status_pushed_total", c->status_pushed);
		C("status_queued_total", c->status_queued);
		C("status_dropped_total", c->status_dropped);
		C("room_status_evicted_sent_total", c->status_evicted);
		C("status_received_total", c->status_received);
		C("rooms_opened_total", c->rooms_opened);
		C("rooms_closed_total", c->rooms_closed);
		C("rooms_freed_total", c->rooms_freed);
		C("waiting_timeouts_total", c->waiting_timeouts);
		C("qp_replaced_total", c->qp_replaced); /* recycled QPs: replaced, never reused */
		C("journal_pending_entries", kvxd_journal_pending(d));
		C("aborts_total", c->aborts);
		C("releases_total", c->releases);
		C("abort_release_ms_sum", c->abort_release_ms_sum);
		C("aborts_received_total", c->aborts_received);
		C("abort_acks_sent_total", c->acks_sent);
		C("abort_acks_unsent_total", c->acks_unsent);
		C("abort_acks_received_total", c->acks_received);
		C("abort_acks_stale_total", c->acks_stale);
		C("abort_acks_unknown_total", c->acks_unknown);
		C("tombstones_total", c->tombstones);
		C("fences_total", c->fences);
		C("source_lost_fences_total", c->session_fences);
		/* hostile or broken peers: every refusal, by reason */
		C("auth_disabled", d->auth.none ? 1 : 0);
		C("heartbeats_sent_total", c->heartbeats_sent);
		C("peers_silent_total", c->peers_silent);
		C("events_duplicate_suppressed_total", c->events_duplicate);
		for (int f = 0; f < KVXD_PEER_STATE_COUNT; f++)
			for (int t = 0; t < KVXD_PEER_STATE_COUNT; t++)
				if (c->peer_transitions[f][t])
					P("kvx_peer_transitions_total{node=\"%s\",from=\"%s\",to="
					  "\"%s\"} "
					  "%llu\n",
					  d->cfg.name, kvxd_peer_state_str(f),
					  kvxd_peer_state_str(t),
					  (unsigned long long)c->peer_transitions[f][t]);
		C("engine_lost_rooms_total", c->engine_lost_rooms);
		C("room_meta_refused_engine_gone_total", c->meta_refused_engine_gone);
		C("peer_conn_refused_address_total", c->conn_refused_addr);
		C("peer_conn_refused_name_total", c->conn_refused_name);
		C("peer_conn_refused_version_total", c->conn_refused_version);
		C("peer_conn_refused_auth_total", c->conn_refused_auth);
		C("peer_conn_refused_busy_total", c->conn_refused_busy);
		C("peer_pending_expired_total", c->pending_expired);
		C("peer_pending_evicted_total", c->pending_evicted);
		C("peer_pending", d->npending);
		C("peer_gid_mismatch_total", c->gid_mismatch);
		C("room_meta_refused_owner_total", c->meta_refused_owner);
		C("room_meta_refused_aborted_total", c->meta_refused_aborted);
		C("room_meta_refused_cap_total", c->meta_refused_cap);
		C("room_status_refused_owner_total", c->status_refused_owner);
		C("aborts_not_owner_total", c->aborts_not_owner);
		C("tombstones_refused_total", c->tombstones_refused);
		C("engine_refused_total", c->engine_refused);
		C("engine_admin_denied_total", c->admin_denied);
		C("engine_queue_overflows_total", c->engine_queue_overflows);
		/* chunk memory (kvxd_chunk_alloc, core/slab.h): in steady state only hits grow;
		 * misses and big ones were malloc'd, released ones free()'d past the bound */
		C("chunk_cache_hits_total", d->chunks.st.hits);
		C("chunk_cache_misses_total", d->chunks.st.misses);
		C("chunk_cache_big_total", d->chunks.st.big);
		C("chunk_cache_released_total", d->chunks.st.released);
		C("chunk_alloc_failed_total", d->chunks.st.failed);
		C("chunk_cache_bytes", d->chunks.st.cached_bytes);
		C("chunks_live", d->chunks.st.live);
#define CAP(key, v)                                                                        \
	P("kvx_engine_cap_refused_total{node=\"%s\",cap=\"" key "\"} %llu\n", d->cfg.name, \
	  (unsigned long long)(v))
		CAP("max_sessions_per_uid", c->cap_sessions);
		CAP("max_pools_per_engine", c->cap_pools);
		CAP("max_pinned_mb_per_uid", c->cap_pinned);
		CAP("max_rooms_per_engine", c->cap_rooms);
#undef CAP
		C("fault_wr_corrupt_rkey_fired_total", kvx_fault_fired(KVX_FAULT_WR_CORRUPT_RKEY));
		for (int f = 0; f < KVX_FAULT_COUNT; f++)
			P("kvx_fault_fired_total{node=\"%s\",point=\"%s\"} %lu\n", d->cfg.name,
			  kvx_fault_name(f), kvx_fault_fired(f));
		for (int i = 0; i < d->ncores; i++) {
			struct kvxd_core_stats *s = &d->cores[i].st;

#define S(metric, f)                                                             \
	P("kvx_core_" metric "{node=\"%s\",core=\"%d\"} %llu\n", d->cfg.name, i, \
	  (unsigned long long)atomic_load_explicit(&s->f, memory_order_relaxed))
			S("iterations_total", iterations);
			S("parks_total", parks);
			S("wr_posted_total", wr_posted);
			S("wc_ok_total", wc_ok);
			S("wc_error_total", wc_err);
			S("wc_flush_total", wc_flush);
			S("recv_imm_total", recv_imm);
			S("bad_imm_total", bad_imm);
			S("bytes_posted_total", bytes_posted);
			S("rooms_success_total", rooms_success);
			S("rooms_failed_total", rooms_failed);
			S("outbox_full_total", outbox_full);
			S("chunks_skipped_total", chunks_skipped);
			S("recv_error_total", recv_err);
			S("imm_not_owner_total", imm_not_owner);
			S("chunks_too_big_total", chunks_too_big);
			P("kvx_core_inbox_overflow_total{node=\"%s\",core=\"%d\"} %llu\n",
			  d->cfg.name, i, (unsigned long long)d->cores[i].ovf_queued);
			P("kvx_core_inbox_overflow_max{node=\"%s\",core=\"%d\"} %llu\n",
			  d->cfg.name, i, (unsigned long long)d->cores[i].ovf_max);
			/* WRs posted whose completion has not been reaped yet (errored groups
			 * included: they stay counted until their QP flushed) */
			P("kvx_core_wr_unresolved{node=\"%s\",core=\"%d\"} %llu\n", d->cfg.name, i,
			  (unsigned long long)(atomic_load_explicit(&s->wr_posted,
								    memory_order_relaxed) -
					       atomic_load_explicit(&s->wc_ok,
								    memory_order_relaxed) -
					       atomic_load_explicit(&s->wc_err,
								    memory_order_relaxed) -
					       atomic_load_explicit(&s->wc_flush,
								    memory_order_relaxed)));
#undef S
		}
#undef C
		return 0;
	}
	if (strcmp(cmd, "help") == 0) {
		P(ADMIN_HELP);
		return 0;
	}
	/* Everything below changes state: operators only (default deny, so a command added
	 * here later is covered too). */
	if (!admin) {
		d->ctr.admin_denied++;
		P("'%s' is an operator command: it needs root, kvxd's uid (%u) or membership in "
		  "[engine] admin_group%s%s%s\n" ADMIN_HELP,
		  cmd, (unsigned)d->self_uid, d->cfg.admin_group[0] ? " (" : " (none configured",
		  d->cfg.admin_group, ")");
		return -EPERM;
	}
	if (strncmp(cmd, "peer ", 5) == 0) {
		char name[KVX_CFG_NAME_MAX], verb[16];
		int rc;

		if (sscanf(cmd + 5, "%63s %15s", name, verb) != 2) {
			P("usage: peer NAME pause|resume|try\n");
			return -EINVAL;
		}
		rc = kvxd_peer_admin(d, name, verb);
		P(rc == 0 ? "peer %s: %s\n" : "peer %s: cannot %s\n", name, verb);
		return rc;
	}
	if (strncmp(cmd, "fault ", 6) == 0) {
		int rc = kvx_fault_arm_list(cmd + 6, out, len);

		if (rc == 0)
			P("armed %s\n", cmd + 6);
		return rc;
	}
	P(ADMIN_HELP);
	return -EINVAL;
#undef P
}
