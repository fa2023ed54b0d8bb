/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Operator commands (control/admin.h).  Layer 7 of control/ (control/README.md): it reads
 * every table and calls the peer layer for pause/resume.  Thread: the control core.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "control/abort.h"
#include "control/admin.h"
#include "control/engine_io.h"
#include "control/members.h"
#include "control/metrics.h"
#include "control/peer_io.h"
#include "control/peer.h"
#include "control/rooms.h"
#include "core/fault.h"
#include "core/log.h"

struct rooms_walk {
	struct kvxd_metrics_buf *b;
	int n;
	int engine; /* -2: every room (an operator); else only that session's */
};

#define ADMIN_HELP                                                                        \
	"commands: peers | rooms (its own; an operator's: all) | counters [json] | help " \
	"(every engine); fault NAME:N[,NAME:N] | peer NAME pause|resume|try | reload "    \
	"(operators)\n"

static int
room_line(struct kvx_room_table_node *n, void *arg)
{
	struct rooms_walk *w = arg;
	struct kvxd_room *r = caa_container_of(n, struct kvxd_room, pc.by_id);
	int st = kvxd_room_state(r);
	/* the core's reason is final once the room is terminal (verbs/pcore.h) */
	const char *reason = kvx_room_state_terminal(st) ? r->pc.reason : "";

	if (w->engine != -2 && r->engine_id != w->engine)
		return 0; /* another engine's, or nobody's yet: its id is not told */
	w->n++;
	kvxd_metrics_buf_printf(
		w->b, "room %llu %s gen %u state %s abort %s outstanding %llu%s%s\n",
		(unsigned long long)r->pc.id, kvx_room_role_str(r->pc.role),
		r->pc.role == KVX_ROOM_DECODE ? r->open_gen
		: r->nowners		      ? r->owner[0].gen
					      : 0,
		kvx_room_state_str(st), kvxd_abort_state_str(r->ab_state),
		(unsigned long long)(atomic_load(&r->pc.wr_posted) - atomic_load(&r->pc.wr_done)),
		reason[0] ? " reason: " : "", reason);
	return 0;
}

/* "counters" for an engine that is not an operator: one rendering per format serves every such
 * engine for KVXD_ADMIN_CACHE_MS, as GET /metrics does (before, each was rendered afresh: 16
 * sessions asking every loop pass rendered about 7,000 times a second, and every heartbeat,
 * ABORT and ACK waited behind them).  An operator's is rendered afresh. */
static int
counters_cached(struct kvxd *d, enum kvxd_metrics_format f, struct kvxd_metrics_buf *b)
{
	int k = f == KVXD_METRICS_JSON;
	uint64_t now = kvxd_now_ms();

	if (!d->admin_cache[k] || now < d->admin_cache_at[k] ||
	    now >= d->admin_cache_at[k] + KVXD_ADMIN_CACHE_MS) {
		struct kvxd_metrics_buf r = {.grow = true, .max = KVXD_ADMIN_TEXT_MAX};

		free(d->admin_cache[k]);
		d->admin_cache[k] = NULL;
		if (kvxd_metrics_render(d, f, 0, &r) || !r.p) {
			kvxd_metrics_buf_fini(&r);
			b->overflow = true; /* answered "larger than" (kvxd_admin) */
			return -EMSGSIZE;
		}
		d->admin_cache[k] = r.p;
		d->admin_cache_len[k] = r.len;
		d->admin_cache_at[k] = now;
	}
	kvxd_metrics_buf_printf(b, "%.*s", (int)d->admin_cache_len[k], d->admin_cache[k]);
	return b->overflow ? -EMSGSIZE : 0;
}

void
kvxd_admin_fini(struct kvxd *d)
{
	for (int k = 0; k < 2; k++) {
		free(d->admin_cache[k]);
		d->admin_cache[k] = NULL;
	}
}

/* The command's text into b (appended). */
static int
admin_run(struct kvxd *d, const char *cmd, bool admin, int engine, struct kvxd_metrics_buf *b)
{
#define P(...) kvxd_metrics_buf_printf(b, __VA_ARGS__)
	if (strcmp(cmd, "peers") == 0) {
		for (int i = 0; i < d->npeers; i++) {
			struct kvxd_peer *p = &d->peers[i];

			if (p->vacant)
				continue;
			P("peer %s %s:%u state %s epoch %u handshakes %llu setup_failures %llu "
			  "resets %llu journal_pending %d%s%s%s\n",
			  p->name, p->addr.host, p->addr.port, kvxd_peer_state_str(p->state),
			  p->epoch, (unsigned long long)p->n_handshakes,
			  (unsigned long long)p->n_setup_failures, (unsigned long long)p->n_resets,
			  p->state == KVXD_PEER_READY ? 0 : p->j.n,
			  p->removing	  ? " removing"
			  : p->discovered ? " discovered"
					  : "",
			  p->last_error[0] ? " last_error: " : "", p->last_error);
		}
		return 0;
	}
	if (strcmp(cmd, "rooms") == 0) {
		struct rooms_walk w = {.b = b, .engine = admin ? -2 : engine};
		struct kvxd_engine *e = admin || engine < 0 ? NULL : kvxd_engine_by_id(d, engine);
		struct kvxd_room *r;

		rcu_read_lock();
		if (admin)
			kvx_room_table_for_each(d->by_id, room_line, &w);
		else if (e) /* its own rooms, and no walk of the others' */
			cds_list_for_each_entry(r, &e->rooms, eng_link)
			{
				room_line(&r->pc.by_id, &w);
			}
		rcu_read_unlock();
		P("rooms %d\n", w.n);
		return 0;
	}
	if (strcmp(cmd, "counters") == 0 || strcmp(cmd, "metrics") == 0 ||
	    strcmp(cmd, "counters json") == 0) {
		/* what GET /metrics serves, without the HELP lines (or as JSON) */
		enum kvxd_metrics_format f =
			strcmp(cmd, "counters json") == 0 ? KVXD_METRICS_JSON : KVXD_METRICS_TEXT;

		return admin ? kvxd_metrics_render(d, f, 0, b) : counters_cached(d, f, b);
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

		const char *a = cmd + 5, *sp = strchr(a, ' ');

		/* never cut short and run: a name over the bound is not the name it starts with */
		if (!sp || sp == a || (size_t)(sp - a) >= sizeof(name) ||
		    strlen(sp + 1) >= sizeof(verb) || !sp[1] || strchr(sp + 1, ' ')) {
			P("usage: peer NAME pause|resume|try (NAME at most %zu bytes)\n",
			  sizeof(name) - 1);
			return -EINVAL;
		}
		memcpy(name, a, (size_t)(sp - a));
		name[sp - a] = '\0';
		snprintf(verb, sizeof(verb), "%s", sp + 1);
		rc = kvxd_peer_admin(d, name, verb);
		P(rc == 0 ? "peer %s: %s\n" : "peer %s: cannot %s\n", name, verb);
		return rc;
	}
	if (strcmp(cmd, "reload") == 0) {
		/* what SIGHUP does, with the outcome in the reply */
		char err[512];
		uint64_t added = d->ctr.peers_added, removed = d->ctr.peers_removed;
		int rc = kvxd_members_reload(d, err, sizeof(err));

		if (rc)
			P("reload refused, nothing changed: %s\n", err);
		else
			P("reloaded %s: %llu peer%s added, %llu removed\n",
			  d->cfg_path ? d->cfg_path : "",
			  (unsigned long long)(d->ctr.peers_added - added),
			  d->ctr.peers_added - added == 1 ? "" : "s",
			  (unsigned long long)(d->ctr.peers_removed - removed));
		return rc;
	}
	if (strncmp(cmd, "fault ", 6) == 0) {
		char err[256] = "";
		int rc = kvx_fault_arm_list(cmd + 6, err, sizeof(err));

		if (rc == 0)
			P("armed %s\n", cmd + 6);
		else
			P("%s", err);
		return rc;
	}
	P(ADMIN_HELP);
	return -EINVAL;
#undef P
}

/* The reply text when it does not fit: what was rendered goes, this replaces it. */
static void
too_long(struct kvxd_metrics_buf *b, const char *cmd)
{
	size_t cap = b->grow ? b->max : b->cap;

	b->len = 0;
	b->overflow = false;
	b->p[0] = '\0';
	kvxd_metrics_buf_printf(
		b, "the reply to '%s' is larger than %zu bytes%s\n", cmd, cap,
		strncmp(cmd, "counters", 8) == 0 ? ": scrape [metrics] listen instead" : "");
}

int
kvxd_admin(struct kvxd *d, const char *cmd, bool admin, int engine, char *out, size_t len)
{
	struct kvxd_metrics_buf b = {.p = out, .cap = len};
	int rc;

	out[0] = '\0';
	rc = admin_run(d, cmd, admin, engine, &b);
	if (b.overflow && strncmp(cmd, "counters", 8) == 0) {
		too_long(&b, cmd); /* a cut exposition would mislead */
		return -EMSGSIZE;
	}
	return rc; /* peers and rooms: the lines that fit, as before pages existed */
}

int
kvxd_admin_text(struct kvxd *d, const char *cmd, bool admin, int engine, struct kvxd_metrics_buf *b)
{
	int rc;

	*b = (struct kvxd_metrics_buf){.grow = true, .max = KVXD_ADMIN_TEXT_MAX};
	rc = admin_run(d, cmd, admin, engine, b);
	if (b->overflow || !b->p) {
		if (!b->p || !b->cap) {
			kvxd_metrics_buf_fini(b);
			return -ENOMEM;
		}
		too_long(b, cmd);
		return -EMSGSIZE;
	}
	return rc;
}
