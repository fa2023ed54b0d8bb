/* SPDX-License-Identifier: Apache-2.0 */
/*
 * What kvxd exports (control/metrics.h).  Layer 6 of control/ (control/README.md): it reads the
 * state every lower layer keeps.  Thread: the control core.
 *
 * One walk (render_all) calls family() once per metric family and sample() / hist() once per
 * series; the output format is decided there and nowhere else.  Text: "# HELP" (optional) and
 * "# TYPE" lines, then the family's samples, each labelled node="NAME" first.  JSON: the node
 * once at the top, each family as {"type": T, "samples": [{"labels": {...}, "value": V}]}, a
 * histogram sample as {"labels", "count", "sum", "buckets": [[LE, CUMULATIVE], ..., ["+Inf", N]]}.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "control/abort.h"
#include "control/metrics.h"
#include "control/peer.h"
#include "control/peer_io.h"
#include "control/rooms.h"
#include "core/fault.h"
#include "core/hist.h"
#include "core/mbox.h"

struct lbl {
	const char *k, *v;
};

/* a label list for sample() and hist(): L({"core", "0"}, {"state", "READY"}) */
#define L(...)                     \
	(const struct lbl[])       \
	{                          \
		__VA_ARGS__,       \
		{                  \
			NULL, NULL \
		}                  \
	}
#define NOLBL ((const struct lbl[]){{NULL, NULL}})

struct out {
	struct kvxd_metrics_buf *b;
	enum kvxd_metrics_format fmt;
	unsigned flags;
	const char *node;
	const char *name; /* the family being written */
	int nfam, nsamp;  /* JSON: families and samples written so far (for commas) */
};

static const char *const role_label[2] = {
	[KVX_ROOM_DECODE] = "decode", [KVX_ROOM_PREFILL] = "prefill"};

/* ---- the buffer ---------------------------------------------------------------------------- */

static bool
reserve(struct kvxd_metrics_buf *b, size_t more)
{
	size_t want = b->len + more + 1, cap;
	char *p;

	if (b->overflow)
		return false;
	if (want <= b->cap)
		return true;
	if (!b->grow || want > b->max) {
		b->overflow = true;
		return false;
	}
	cap = b->cap ? b->cap : 4096;
	while (cap < want)
		cap *= 2;
	if (cap > b->max)
		cap = b->max;
	p = realloc(b->p, cap);
	if (!p) {
		b->overflow = true;
		return false;
	}
	b->p = p;
	b->cap = cap;
	return true;
}

static void __attribute__((format(printf, 2, 0)))
buf_vprintf(struct kvxd_metrics_buf *b, const char *fmt, va_list ap)
{
	va_list again;
	int n;

	if (b->overflow || !reserve(b, 0))
		return;
	va_copy(again, ap);
	n = vsnprintf(b->p + b->len, b->cap - b->len, fmt, ap);
	if (n < 0) {
		b->overflow = true;
	} else if (b->len + (size_t)n >= b->cap) { /* it did not fit: grow and write it again */
		b->p[b->len] = '\0';
		if (reserve(b, (size_t)n)) {
			vsnprintf(b->p + b->len, b->cap - b->len, fmt, again);
			b->len += (size_t)n;
		}
	} else {
		b->len += (size_t)n;
	}
	va_end(again);
}

void
kvxd_metrics_buf_printf(struct kvxd_metrics_buf *b, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	buf_vprintf(b, fmt, ap);
	va_end(ap);
}

static void __attribute__((format(printf, 2, 3))) put(struct out *o, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	buf_vprintf(o->b, fmt, ap);
	va_end(ap);
}

/* A label value or help text, escaped for the format: text label values escape \ " and
 * newline, help text \ and newline; JSON strings \ " and control characters. */
static void
put_escaped(struct out *o, const char *s, bool help)
{
	for (; *s; s++) {
		unsigned char c = (unsigned char)*s;

		if (c == '\\')
			put(o, "\\\\");
		else if (c == '"' && !help)
			put(o, "\\\"");
		else if (c == '\n')
			put(o, "\\n");
		else if (c < 0x20 && o->fmt == KVXD_METRICS_JSON)
			put(o, "\\u%04x", c);
		else
			put(o, "%c", c);
	}
}

/* v / 10^decimals, exactly: "12", "0.000008" */
static const char *
scaled(char *buf, size_t len, uint64_t v, unsigned decimals)
{
	uint64_t p10 = 1;

	for (unsigned i = 0; i < decimals; i++)
		p10 *= 10;
	if (decimals == 0)
		snprintf(buf, len, "%" PRIu64, v);
	else
		snprintf(buf, len, "%" PRIu64 ".%0*" PRIu64, v / p10, (int)decimals, v % p10);
	return buf;
}

/* ---- families and samples ------------------------------------------------------------------ */

static void
family_end(struct out *o)
{
	if (o->name && o->fmt == KVXD_METRICS_JSON)
		put(o, "]}");
	o->name = NULL;
}

static void
family(struct out *o, const char *name, const char *type, const char *help)
{
	family_end(o);
	o->name = name;
	o->nsamp = 0;
	if (o->fmt == KVXD_METRICS_JSON) {
		put(o, "%s\"%s\":{\"type\":\"%s\",\"samples\":[", o->nfam++ ? "," : "", name, type);
		return;
	}
	if (o->flags & KVXD_METRICS_HELP) {
		put(o, "# HELP %s ", name);
		put_escaped(o, help, true);
		put(o, "\n");
	}
	put(o, "# TYPE %s %s\n", name, type);
}

/* Text: {node="N",k="v",...[,extra]}; JSON: "labels":{"k":"v",...} (the node is at the top). */
static void
put_labels(struct out *o, const struct lbl *l, const char *extra_k, const char *extra_v)
{
	bool json = o->fmt == KVXD_METRICS_JSON;
	int n = 0;

	put(o, json ? "\"labels\":{" : "{");
	if (!json) {
		put(o, "node=\"");
		put_escaped(o, o->node, false);
		put(o, "\"");
		n++;
	}
	for (; l && l->k; l++) {
		put(o, json ? "%s\"%s\":\"" : "%s%s=\"", n++ ? "," : "", l->k);
		put_escaped(o, l->v, false);
		put(o, "\"");
	}
	if (extra_k)
		put(o, json ? "%s\"%s\":\"%s\"" : "%s%s=\"%s\"", n++ ? "," : "", extra_k, extra_v);
	put(o, "}");
}

static void
sample(struct out *o, const struct lbl *l, uint64_t v)
{
	if (o->fmt == KVXD_METRICS_JSON) {
		put(o, "%s{", o->nsamp++ ? "," : "");
		put_labels(o, l, NULL, NULL);
		put(o, ",\"value\":%" PRIu64 "}", v);
		return;
	}
	put(o, "%s", o->name);
	put_labels(o, l, NULL, NULL);
	put(o, " %" PRIu64 "\n", v);
}

/* One histogram series: the buckets made cumulative (each le counts every observation at or
 * below it, +Inf all of them), then _sum and _count. */
static void
hist(struct out *o, const struct lbl *l, const struct kvx_hist *h, const struct kvx_hist_scale *s)
{
	bool json = o->fmt == KVXD_METRICS_JSON;
	char le[32], sum[32];
	uint64_t cum = 0;

	scaled(sum, sizeof(sum), h->sum, s->decimals);
	if (json) {
		put(o, "%s{", o->nsamp++ ? "," : "");
		put_labels(o, l, NULL, NULL);
		put(o, ",\"count\":%" PRIu64 ",\"sum\":%s,\"buckets\":[", h->count, sum);
	}
	for (unsigned i = 0; i <= s->n; i++) {
		cum += h->bucket[i];
		if (i < s->n)
			scaled(le, sizeof(le), kvx_hist_bound(s, i), s->decimals);
		else
			snprintf(le, sizeof(le), "+Inf");
		if (json) {
			put(o, i < s->n ? "%s[%s,%" PRIu64 "]" : "%s[\"%s\",%" PRIu64 "]",
			    i ? "," : "", le, cum);
			continue;
		}
		put(o, "%s_bucket", o->name);
		put_labels(o, l, "le", le);
		put(o, " %" PRIu64 "\n", cum);
	}
	if (json) {
		put(o, "]}");
		return;
	}
	put(o, "%s_sum", o->name);
	put_labels(o, l, NULL, NULL);
	put(o, " %s\n%s_count", sum, o->name);
	put_labels(o, l, NULL, NULL);
	put(o, " %" PRIu64 "\n", h->count);
}

/* A family with one unlabelled sample. */
static void
one(struct out *o, const char *name, const char *type, const char *help, uint64_t v)
{
	family(o, name, type, help);
	sample(o, NOLBL, v);
}

#define COUNTER(name, help, v) one(o, "kvx_" name, "counter", help, (v))
#define GAUGE(name, help, v) one(o, "kvx_" name, "gauge", help, (v))

/* ---- the metrics --------------------------------------------------------------------------- */

static void
control_counters(struct out *o, struct kvxd *d)
{
	const struct kvxd_counters *c = &d->ctr;

	COUNTER("frames_rx_total", "control frames received from peers", c->frames_rx);
	COUNTER("frames_tx_total", "control frames sent to peers", c->frames_tx);
	COUNTER("frames_bad_total", "malformed or out-of-sequence frames (connection closed)",
		c->frames_bad);
	COUNTER("peer_resets_total", "peer sessions torn down", c->peer_resets);
	COUNTER("engine_msgs_total", "requests from engines", c->engine_msgs);
	COUNTER("engine_bad_total", "malformed engine requests", c->engine_bad);
	COUNTER("chunks_refused_total", "chunks refused (each fails its room)", c->chunks_refused);
	COUNTER("chunks_refused_again_total",
		"refused chunks whose room's failure was on the way already (one per room)",
		c->chunks_refused_again);
	COUNTER("log_lines_dropped_total",
		"log lines not written: the log's reader did not take them at once",
		kvx_log_dropped());
	COUNTER("chunks_refused_roomless_total",
		"refused chunks whose attempt failed without a room (the user's rooms are twice "
		"max_rooms_per_uid)",
		c->chunks_refused_roomless);
	COUNTER("events_sent_total", "events queued to engines", c->events_sent);
	COUNTER("events_dropped_total", "events with no engine to take them", c->events_dropped);
	COUNTER("events_core_total",
		"of events_sent: put into an engine's core event ring by its polling core",
		c->events_core);
	COUNTER("events_core_claimed_total",
		"events a polling core could not put into a full or broken core ring "
		"(sent through the session's event ring instead)",
		c->events_core_claimed);
	COUNTER("events_before_claim_total",
		"states of a prefill room its engine claimed after the room's core put them, "
		"taken before the room's end was told (not told: the later ones came through "
		"its core ring)",
		c->events_before_claim);
	COUNTER("status_pushed_total", "ROOM_STATUS failures pushed to decode endpoints",
		c->status_pushed);
	COUNTER("status_queued_total", "ROOM_STATUS frames queued for a peer", c->status_queued);
	COUNTER("status_dropped_total", "ROOM_STATUS frames dropped", c->status_dropped);
	COUNTER("room_status_evicted_sent_total",
		"sent ROOM_STATUS frames forgotten past waiting_ms", c->status_evicted);
	COUNTER("status_received_total", "ROOM_STATUS frames received", c->status_received);
	COUNTER("rooms_opened_total", "rooms opened", c->rooms_opened);
	COUNTER("rooms_closed_total", "rooms closed by their engine", c->rooms_closed);
	COUNTER("rooms_freed_total", "rooms given back by their core and freed", c->rooms_freed);
	COUNTER("waiting_timeouts_total", "rooms aborted by the waiting timeout",
		c->waiting_timeouts);
	COUNTER("qp_replaced_total", "connections replaced after a QP error (never reused)",
		c->qp_replaced);
	COUNTER("qp_stuck_total",
		"QPs moved to the error state at once because they took WRs but refused the "
		"doorbell (their WRs flush)",
		c->qp_stuck);
	COUNTER("rails_fenced_total",
		"rails a session stopped using after their QP failed (the others carry on)",
		c->rails_fenced);
	COUNTER("rail_retries_total",
		"sessions replaced, once nothing was in flight, that try this node's failed rails "
		"again (whichever node replaced it)",
		c->rail_retries);
	COUNTER("rail_hold_asks_total",
		"rail retries that asked the peer to hold its WRITEs and replace the session once "
		"none was in flight",
		c->rail_hold_asks);
	COUNTER("lane_fences_asked_total",
		"QPs of ours that failed while their session stayed up: the peer was told to move "
		"its end to the error state before any room they carried was acknowledged",
		c->lane_fences_asked);
	COUNTER("lane_fences_made_total",
		"our ends of QPs moved to the error state because the peer's end failed (its BYE "
		"FENCE), before we read its next frame",
		c->lane_fences_made);
	COUNTER("rail_hold_timeouts_total",
		"rail retries whose drain did not end in time (our WRITEs, or the peer's after our "
		"ask): the session was replaced anyway, what was in flight flushing",
		c->rail_hold_timeouts);
	GAUGE("journal_pending_entries", "handshake journal entries not rolled back yet",
	      (uint64_t)kvxd_journal_pending(d));
	COUNTER("aborts_total", "decode aborts armed", c->aborts);
	COUNTER("releases_total", "decode rooms released after an abort", c->releases);
	COUNTER("abort_release_ms_sum", "milliseconds from abort to release, summed",
		c->abort_release_ms_sum);
	COUNTER("aborts_received_total", "ABORTs received (prefill)", c->aborts_received);
	COUNTER("abort_acks_sent_total", "ABORT_ACKs sent after the drain", c->acks_sent);
	COUNTER("abort_acks_unsent_total", "ABORT_ACKs that could not be sent", c->acks_unsent);
	COUNTER("abort_acks_received_total", "ABORT_ACKs received", c->acks_received);
	COUNTER("abort_acks_stale_total", "ABORT_ACKs of another generation (ignored)",
		c->acks_stale);
	COUNTER("abort_acks_unknown_total", "ABORT_ACKs for no current abort (ignored)",
		c->acks_unknown);
	COUNTER("tombstones_total", "tombstones left by ABORTs of unknown rooms", c->tombstones);
	COUNTER("fences_total", "sources fenced at the release timeout", c->fences);
	COUNTER("source_lost_fences_total", "sources fenced because their session ended",
		c->session_fences);
	GAUGE("auth_disabled", "1 when [security] auth = none", d->auth.none ? 1 : 0);
	COUNTER("heartbeats_sent_total", "heartbeats sent", c->heartbeats_sent);
	COUNTER("peers_silent_total", "peers lost by the heartbeat rule", c->peers_silent);
	COUNTER("sessions_on_demand_total", "peer sessions dialled because a room needed them",
		c->sessions_on_demand);
	COUNTER("sessions_idle_closed_total",
		"peer sessions closed by both sides after [timeouts] idle_ms without rooms",
		c->sessions_idle_closed);
	COUNTER("dial_collisions_total",
		"crossing dials resolved (the dial of the peer whose name sorts first wins)",
		c->dial_collisions);
	COUNTER("sessions_cq_waits_total",
		"dials put off because the CQs had no room for another session (on_demand)",
		c->sessions_cq_waits);
	COUNTER("sessions_refused_busy_total",
		"peers' dials answered BYE BUSY: no CQ room for another session (on_demand)",
		c->sessions_refused_busy);
	COUNTER("peers_added_total", "peers added at runtime (reload)", c->peers_added);
	COUNTER("peers_removed_total", "peers removed at runtime (reload)", c->peers_removed);
	COUNTER("reloads_total", "configuration reloads applied (SIGHUP)", c->reloads);
	COUNTER("members_found_total", "nodes found through etcd and taken as peers",
		c->members_found);
	COUNTER("members_lost_total", "nodes gone from etcd (left, lease expired, moved)",
		c->members_lost);
	COUNTER("members_refused_total",
		"etcd entries refused (a bad name or address, no slot or CQ room)",
		c->members_refused);
	COUNTER("etcd_registered_total", "registrations of this node in etcd (a lease and a put)",
		c->etcd_registered);
	COUNTER("etcd_errors_total", "calls to etcd's gateway that failed", c->etcd_errors);
	COUNTER("etcd_watch_restarts_total",
		"times the watch of the prefix ended and was set up "
		"again after a full read",
		c->etcd_watch_restarts);
	COUNTER("etcd_pages_shrunk_total",
		"pages of the membership read over 4 MiB, read again with fewer entries",
		c->etcd_pages_shrunk);
	COUNTER("etcd_reasserted_total",
		"times our own key held an entry we did not write (forged, or older) and ours was "
		"written again",
		c->etcd_reasserted);
	COUNTER("reloads_refused_total",
		"configuration reloads refused (an invalid file, no room for the peers)",
		c->reloads_refused);
	COUNTER("events_duplicate_suppressed_total", "room ends not told twice",
		c->events_duplicate);
	family(o, "kvx_peer_transitions_total", "counter", "peer state transitions");
	for (int f = 0; f < KVXD_PEER_STATE_COUNT; f++)
		for (int t = 0; t < KVXD_PEER_STATE_COUNT; t++)
			if (c->peer_transitions[f][t])
				sample(o,
				       L({"from", kvxd_peer_state_str(f)},
					 {"to", kvxd_peer_state_str(t)}),
				       c->peer_transitions[f][t]);
	family(o, "kvx_abort_transitions_total", "counter", "decode abort state transitions");
	for (int f = 0; f < KVXD_ABORT_STATE_COUNT; f++)
		for (int t = 0; t < KVXD_ABORT_STATE_COUNT; t++)
			if (c->abort_transitions[f][t])
				sample(o,
				       L({"from", kvxd_abort_state_str(f)},
					 {"to", kvxd_abort_state_str(t)}),
				       c->abort_transitions[f][t]);
	COUNTER("abort_refused_total", "illegal abort transitions asked (a bug: logged)",
		c->abort_refused);
	COUNTER("engine_lost_rooms_total", "rooms failed because their engine went away",
		c->engine_lost_rooms);
	COUNTER("room_meta_refused_engine_gone_total", "ROOM_METAs refused: the engine is gone",
		c->meta_refused_engine_gone);
	COUNTER("peer_conn_refused_address_total", "connections refused: source address",
		c->conn_refused_addr);
	COUNTER("peer_conn_refused_name_total", "connections refused: unknown or disallowed name",
		c->conn_refused_name);
	COUNTER("peer_conn_refused_version_total", "connections refused: protocol version",
		c->conn_refused_version);
	COUNTER("peer_conn_refused_auth_total", "connections refused: authentication",
		c->conn_refused_auth);
	COUNTER("peer_conn_refused_busy_total", "connections refused: pending caps",
		c->conn_refused_busy);
	COUNTER("peer_pending_expired_total", "pending connections past pending_ms",
		c->pending_expired);
	COUNTER("peer_pending_evicted_total", "pending connections closed for newer ones",
		c->pending_evicted);
	GAUGE("peer_pending",
	      "accepted connections that are not a session: not authenticated yet, or refused "
	      "and read until their peer closes them",
	      (uint64_t)d->npending);
	COUNTER("peer_gid_mismatch_total", "QP_INFOs with a GID that is not the peer's",
		c->gid_mismatch);
	COUNTER("room_meta_refused_owner_total", "ROOM_METAs refused: another endpoint's room",
		c->meta_refused_owner);
	COUNTER("room_meta_parked_total",
		"ROOM_METAs of a further decode endpoint that waited for the engine's fan-out",
		c->meta_parked);
	COUNTER("room_meta_refused_aborted_total", "ROOM_METAs refused: aborted generation",
		c->meta_refused_aborted);
	COUNTER("room_meta_refused_cap_total", "ROOM_METAs refused: max_rooms_per_peer",
		c->meta_refused_cap);
	COUNTER("room_status_refused_owner_total", "ROOM_STATUS refused: not the room's source",
		c->status_refused_owner);
	COUNTER("aborts_not_owner_total", "ABORTs that touched only the sender's own target",
		c->aborts_not_owner);
	COUNTER("tombstones_refused_total", "tombstones refused: max_tombstones_per_peer",
		c->tombstones_refused);
	COUNTER("engine_refused_total", "engine connections refused (credentials)",
		c->engine_refused);
	COUNTER("engine_admin_denied_total", "operator commands refused (not an admin)",
		c->admin_denied);
	COUNTER("engine_admin_gone_total",
		"operator commands of a session that went, not run (nobody reads the answer)",
		c->engine_admin_gone);
	COUNTER("engine_queue_overflows_total", "engines disconnected for not reading",
		c->engine_queue_overflows);
	COUNTER("engine_rank_refused_total",
		"rooms refused to an engine: its rank's rooms are another user's engine's",
		c->engine_rank_refused);
	COUNTER("engine_rings_total", "engine sessions moved to shared-memory rings",
		c->engine_rings);
	COUNTER("engine_ring_wakes_total", "wake-ups sent to engines parked on their event ring",
		c->engine_ring_wakes);
	COUNTER("engine_ring_holds_total",
		"submission rings left for later: a polling core's inbox was nearly full",
		c->engine_ring_holds);
	COUNTER("engine_socket_holds_total",
		"engine sockets left unread for later: a polling core's inbox was nearly full",
		c->engine_socket_holds);
	/* chunk memory (kvxd_chunk_alloc, core/slab.h): in steady state only hits grow; misses
	 * and big ones were malloc'd, released ones free()'d past the bound */
	COUNTER("chunk_cache_hits_total", "chunks taken from the chunk cache", d->chunks.st.hits);
	COUNTER("chunk_cache_misses_total", "chunks malloc'd: their size class was empty",
		d->chunks.st.misses);
	COUNTER("chunk_cache_big_total", "chunks larger than every size class (malloc'd)",
		d->chunks.st.big);
	COUNTER("chunk_cache_released_total", "chunks free()'d past the cache's bound",
		d->chunks.st.released);
	COUNTER("chunk_alloc_failed_total", "chunk allocations that failed", d->chunks.st.failed);
	GAUGE("chunk_cache_bytes", "bytes of free chunks kept for reuse",
	      d->chunks.st.cached_bytes);
	GAUGE("chunks_live", "chunks allocated and not yet freed", d->chunks.st.live);
	family(o, "kvx_engine_cap_refused_total", "counter", "engine requests over a cap");
	sample(o, L({"cap", "max_sessions_per_uid"}), c->cap_sessions);
	sample(o, L({"cap", "operator_slots"}), c->cap_operator_slots); /* engines past 60 */
	sample(o, L({"cap", "max_pools_per_engine"}), c->cap_pools);
	sample(o, L({"cap", "max_pools_per_uid"}), c->cap_pools_uid);
	sample(o, L({"cap", "max_rooms_per_uid"}), c->cap_rooms_uid);
	sample(o, L({"cap", "max_pinned_mb_per_uid"}), c->cap_pinned);
	sample(o, L({"cap", "max_rooms_per_engine"}), c->cap_rooms);
	COUNTER("fault_wr_corrupt_rkey_fired_total", "wr.corrupt_rkey fired",
		kvx_fault_fired(KVX_FAULT_WR_CORRUPT_RKEY));
	family(o, "kvx_fault_fired_total", "counter", "fault points fired");
	for (int f = 0; f < KVX_FAULT_COUNT; f++)
		sample(o, L({"point", kvx_fault_name(f)}), kvx_fault_fired(f));
	family(o, "kvx_metrics_http_responses_total", "counter",
	       "answers of the metrics endpoint, by HTTP status");
	sample(o, L({"code", "200"}), c->http_200);
	sample(o, L({"code", "400"}), c->http_400);
	sample(o, L({"code", "404"}), c->http_404);
	sample(o, L({"code", "405"}), c->http_405);
	sample(o, L({"code", "431"}), c->http_431);
	sample(o, L({"code", "500"}), c->http_500);
	COUNTER("metrics_http_refused_total",
		"metrics connections refused over the cap (every open one had its request in)",
		c->http_refused_busy);
	COUNTER("metrics_http_evicted_total",
		"metrics connections without their request yet, closed for a newer one over the "
		"cap",
		c->http_evicted);
	COUNTER("metrics_http_timeouts_total", "metrics connections closed at their deadline",
		c->http_timeouts);
	COUNTER("metrics_http_resets_total",
		"metrics connections closed with a reset: their client left part of the answer "
		"unread",
		c->http_resets);
	COUNTER("metrics_http_renders_total",
		"expositions rendered for the endpoint (one serves every scrape for 100 ms)",
		c->http_renders);
}

/* Per polling core: its single-writer counters (verbs/pcore.h), read relaxed. */
static void
core_counters(struct out *o, struct kvxd *d)
{
	static const struct {
		const char *name, *help;
		size_t off;
	} ctr[] = {
#define S(n, f, h) {"kvx_core_" n, h, offsetof(struct kvxd_core_stats, f)}
		S("iterations_total", iterations, "polling loop iterations"),
		S("parks_total", parks, "times the core parked while idle"),
		S("wr_posted_total", wr_posted, "work requests posted"),
		S("wc_ok_total", wc_ok, "successful completions"),
		S("wc_error_total", wc_err, "error completions"),
		S("wc_flush_total", wc_flush, "flushed completions"),
		S("recv_imm_total", recv_imm, "WRITE_WITH_IMM received"),
		S("bad_imm_total", bad_imm,
		  "immediates naming no room, or not what the room's source may send"),
		S("bytes_posted_total", bytes_posted, "bytes posted in RDMA writes"),
		S("rooms_success_total", rooms_success, "rooms that reached SUCCESS"),
		S("rooms_failed_total", rooms_failed, "rooms that reached FAILED"),
		S("outbox_full_total", outbox_full,
		  "times the outbox to the control core was full"),
		S("chunks_skipped_total", chunks_skipped, "chunks skipped (room FAILED)"),
		S("recv_error_total", recv_err, "receive completions in error"),
		S("imm_not_owner_total", imm_not_owner,
		  "immediates on a QP that is not the source's"),
		S("chunks_too_big_total", chunks_too_big, "chunks refused as too big"),
		S("wr_credited_total", wr_credited, "work requests credited by a completion"),
		S("chunk_parts_total", chunk_parts, "chunk parts posted"),
		S("sge_posted_total", sge_posted, "scatter-gather entries posted"),
		S("imm_held_total", imm_held,
		  "room shares whose immediate waited for every WRITE of the room to complete (a "
		  "rail down, or a replaced connection)"),
		S("imm_split_total", imm_split,
		  "room shares ended by an immediate on each of several rails"),
		S("events_core_total", events_core,
		  "decode room events put into an engine's core event ring"),
		S("events_core_full_total", events_core_full,
		  "decode room events not put: the core ring was full or broken"),
		S("engine_wakes_total", engine_wakes, "engine eventfd writes for core rings"),
#undef S
	};
	char core[12];

	for (size_t k = 0; k < sizeof(ctr) / sizeof(ctr[0]); k++) {
		family(o, ctr[k].name, "counter", ctr[k].help);
		for (int i = 0; i < d->ncores; i++) {
			_Atomic uint64_t *v =
				(_Atomic uint64_t *)((char *)&d->cores[i].st + ctr[k].off);

			snprintf(core, sizeof(core), "%d", i);
			sample(o, L({"core", core}), atomic_load_explicit(v, memory_order_relaxed));
		}
	}
	family(o, "kvx_core_control_wakes_total", "counter",
	       "times the core woke the parked control core (eventfd writes to its outbox)");
	for (int i = 0; i < d->ncores; i++) {
		snprintf(core, sizeof(core), "%d", i);
		sample(o, L({"core", core}),
		       d->cores[i].outbox ? kvx_mbox_wakes(d->cores[i].outbox) : 0);
	}
	/* what each rail (device) carried: a room's WRITEs are striped over every rail */
	static const struct {
		const char *name, *help;
		size_t off; /* an array of KVX_MAX_RAILS counters in struct kvxd_core_stats */
	} rail_ctr[] = {
		{"kvx_rail_wr_posted_total", "work requests posted, by core and rail",
		 offsetof(struct kvxd_core_stats, rail_wrs)},
		{"kvx_rail_bytes_posted_total", "bytes posted, by core and rail",
		 offsetof(struct kvxd_core_stats, rail_bytes)},
	};

	for (size_t f = 0; f < sizeof(rail_ctr) / sizeof(rail_ctr[0]); f++) {
		family(o, rail_ctr[f].name, "counter", rail_ctr[f].help);
		for (int i = 0; i < d->ncores; i++)
			for (int k = 0; k < d->nrails; k++) {
				_Atomic uint64_t *v = (_Atomic uint64_t *)((char *)&d->cores[i].st +
									   rail_ctr[f].off) +
						      k;
				char rail[12];

				snprintf(core, sizeof(core), "%d", i);
				snprintf(rail, sizeof(rail), "%d", k);
				sample(o,
				       L({"core", core}, {"rail", rail},
					 {"device", d->cfg.rails[k].device}),
				       atomic_load_explicit(v, memory_order_relaxed));
			}
	}
	family(o, "kvx_core_inbox_overflow_total", "counter",
	       "messages that waited on the overflow ring behind a full inbox");
	for (int i = 0; i < d->ncores; i++) {
		snprintf(core, sizeof(core), "%d", i);
		sample(o, L({"core", core}), d->cores[i].ovf_queued);
	}
	family(o, "kvx_core_inbox_overflow_max", "gauge", "the overflow ring's high-water mark");
	for (int i = 0; i < d->ncores; i++) {
		snprintf(core, sizeof(core), "%d", i);
		sample(o, L({"core", core}), d->cores[i].ovf_max);
	}
	family(o, "kvx_core_inbox_overflow_queued", "gauge",
	       "messages waiting on the overflow ring now");
	for (int i = 0; i < d->ncores; i++) {
		snprintf(core, sizeof(core), "%d", i);
		sample(o, L({"core", core}), d->cores[i].ovf_len);
	}
	/* WRs posted whose completion has not been reaped yet (errored groups included: they
	 * stay counted until their QP flushed) */
	family(o, "kvx_core_wr_unresolved", "gauge", "work requests posted and not completed yet");
	for (int i = 0; i < d->ncores; i++) {
		struct kvxd_core_stats *s = &d->cores[i].st;

		snprintf(core, sizeof(core), "%d", i);
		sample(o, L({"core", core}),
		       atomic_load_explicit(&s->wr_posted, memory_order_relaxed) -
			       atomic_load_explicit(&s->wc_ok, memory_order_relaxed) -
			       atomic_load_explicit(&s->wc_err, memory_order_relaxed) -
			       atomic_load_explicit(&s->wc_flush, memory_order_relaxed));
	}
}

/* A per-peer gauge's sample: labelled by the peer's name, and a removed peer still being torn
 * down also by its slot (removing_slot), so that its series never has the labels of the peer
 * of the same name that may be in the table again meanwhile. */
static void
peer_sample(struct out *o, const struct kvxd *d, int i, uint64_t v)
{
	const struct kvxd_peer *p = &d->peers[i];
	char slot[16];

	if (p->vacant)
		return;
	snprintf(slot, sizeof(slot), "%d", i);
	if (p->removing)
		sample(o, L({"peer", p->name}, {"removing_slot", slot}), v);
	else
		sample(o, L({"peer", p->name}), v);
}

static void
gauges(struct out *o, struct kvxd *d)
{
	uint64_t n, bytes;

	family(o, "kvx_rooms", "gauge", "rooms in the room table");
	for (int r = 0; r < 2; r++)
		sample(o, L({"role", role_label[r]}), d->nrooms[r]);
	family(o, "kvx_peers", "gauge", "peers by state (removed ones until they are gone)");
	for (int s = 0; s < KVXD_PEER_STATE_COUNT; s++) {
		n = 0;
		for (int i = 0; i < d->npeers; i++)
			n += !d->peers[i].vacant && d->peers[i].state == (enum kvxd_peer_state)s;
		sample(o, L({"state", kvxd_peer_state_str(s)}), n);
	}
	n = 0;
	for (int i = 0; i < d->npeers; i++)
		n += d->peers[i].removing;
	GAUGE("peers_removing", "removed peers still being torn down", n);
	family(o, "kvx_peer_rooms_held", "gauge",
	       "rooms a peer's ROOM_METAs created (max_rooms_per_peer)");
	for (int i = 0; i < d->npeers; i++)
		peer_sample(o, d, i, d->peers[i].rooms_held);
	family(o, "kvx_peer_tombstones_held", "gauge",
	       "tombstones a peer's ABORTs left (max_tombstones_per_peer)");
	for (int i = 0; i < d->npeers; i++)
		peer_sample(o, d, i, d->peers[i].tombstones_held);
	family(o, "kvx_peer_parked_held", "gauge",
	       "a peer's ROOM_METAs parked on other endpoints' rooms (with its rooms: "
	       "max_rooms_per_peer)");
	for (int i = 0; i < d->npeers; i++)
		peer_sample(o, d, i, d->peers[i].parked_held);
	n = bytes = 0;
	for (int i = 0; i < d->engines_end; i++)
		if (d->engines[i]) {
			n++;
			bytes += d->engines[i]->outq_bytes;
		}
	GAUGE("engines", "engine sessions", n);
	GAUGE("engine_reply_queue_bytes", "replies and events waiting for engines to read", bytes);
	n = 0;
	for (int i = 0; i < d->pools_end; i++)
		n += d->pools[i] != NULL;
	GAUGE("pools", "registered pools", n);
	GAUGE("qps_live", "QP contexts handed to polling cores and not retired",
	      (uint64_t)(d->live_qpcs > 0 ? d->live_qpcs : 0));
	GAUGE("room_timers_armed", "room deadlines in the timer heap", d->room_timers.n);
	GAUGE("polling_cores", "polling cores", (uint64_t)d->ncores);
	GAUGE("metrics_http_connections", "open connections of the metrics endpoint",
	      d->http_conns);
	n = kvxd_now_ms();
	GAUGE("uptime_seconds", "seconds since kvxd started",
	      d->start_ms && n > d->start_ms ? (n - d->start_ms) / 1000 : 0);
}

static void
histograms(struct out *o, struct kvxd *d)
{
	static const int terminal[2][KVXD_OUTCOME_COUNT] = {
		[KVX_ROOM_DECODE] = {KVX_ROOM_SUCCESS, KVX_ROOM_RELEASED},
		[KVX_ROOM_PREFILL] = {KVX_ROOM_SUCCESS, KVX_ROOM_FAILED},
	};

	family(o, "kvx_room_latency_seconds", "histogram",
	       "a room's open to its end as its engine is told it, by role and end state");
	for (int r = 0; r < 2; r++)
		for (int k = 0; k < KVXD_OUTCOME_COUNT; k++)
			hist(o,
			     L({"role", role_label[r]},
			       {"state", kvx_room_state_str(terminal[r][k])}),
			     &d->hist.room_latency[r][k], &kvx_hist_us);
	family(o, "kvx_abort_release_seconds", "histogram",
	       "decode: an abort armed to the room's pages released");
	hist(o, NOLBL, &d->hist.abort_release, &kvx_hist_us);
	family(o, "kvx_peer_handshake_seconds", "histogram",
	       "a peer setup from leaving IDLE to READY (successful setups)");
	hist(o, NOLBL, &d->hist.handshake, &kvx_hist_us);
	family(o, "kvx_room_bytes", "histogram",
	       "bytes a successful room moved, by role, device and rail (with several rails a "
	       "room is striped over all: rail \"all\"; kvx_rail_bytes_posted_total has each "
	       "rail's share)");
	for (int r = 0; r < 2; r++)
		hist(o,
		     L({"role", role_label[r]}, {"device", d->nrails > 1 ? "all" : d->cfg.device},
		       {"rail", d->nrails > 1 ? "all" : "0"}),
		     &d->hist.room_bytes[r], &kvx_hist_bytes);
}

int
kvxd_metrics_render(struct kvxd *d, enum kvxd_metrics_format fmt, unsigned flags,
		    struct kvxd_metrics_buf *b)
{
	struct out o = {.b = b, .fmt = fmt, .flags = flags, .node = d->cfg.name};

	reserve(b, 0);
	if (fmt == KVXD_METRICS_JSON) {
		put(&o, "{\"node\":\"");
		put_escaped(&o, d->cfg.name, false);
		put(&o, "\",\"metrics\":{");
	}
	control_counters(&o, d);
	core_counters(&o, d);
	gauges(&o, d);
	histograms(&o, d);
	family_end(&o);
	if (fmt == KVXD_METRICS_JSON)
		put(&o, "}}\n");
	return b->overflow ? -EMSGSIZE : 0;
}

void
kvxd_metrics_buf_fini(struct kvxd_metrics_buf *b)
{
	if (b->grow)
		free(b->p);
	b->p = NULL;
	b->len = b->cap = 0;
}
