/* SPDX-License-Identifier: Apache-2.0 */
/* Membership at runtime: reloading [peer.*] (control/members.h). */
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "control/members.h"
#include "control/peer.h"
#include "control/peer_io.h"
#include "core/log.h"

static bool
live(const struct kvxd_peer *p)
{
	return !p->vacant && !p->removing;
}

/* The file's settings other than its peers, as kvx_config_print writes them (NULL: no memory).
 * cq_depth is the running one's: left unset it is sized from the peers. */
static char *
settings_text(const struct kvx_config *cfg, uint32_t cq_depth)
{
	struct kvx_config *c = malloc(sizeof(*c));
	char *buf = NULL;
	size_t len = 0;
	FILE *f;

	if (!c)
		return NULL;
	*c = *cfg;
	c->n_peers = 0;
	c->cq_depth = cq_depth;
	f = open_memstream(&buf, &len);
	if (f) {
		kvx_config_print(c, f);
		fclose(f);
	}
	free(c);
	return buf;
}

static void
warn_other_settings(const struct kvxd *d, const struct kvx_config *next)
{
	char *a = settings_text(&d->cfg, d->cfg.cq_depth);
	char *b = settings_text(next, d->cfg.cq_depth);

	if (a && b && strcmp(a, b) != 0)
		KVX_WARN("reload: %s changes settings outside [peer.*]; they take effect when kvxd "
			 "restarts",
			 d->cfg_path ? d->cfg_path : "the configuration");
	free(a);
	free(b);
}

int
kvxd_members_apply(struct kvxd *d, const struct kvx_config *next, char *err, size_t errlen)
{
	bool drop[KVX_MAX_PEERS] = {false}, add[KVX_MAX_PEERS] = {false};
	int ndrop = 0, nchanged = 0, nadd = 0, slots = KVX_MAX_PEERS - d->npeers, room;

	if (strcmp(next->name, d->cfg.name) != 0) {
		snprintf(err, errlen,
			 "[node] name is '%s', the running node is '%s': a node is renamed only "
			 "by a restart",
			 next->name, d->cfg.name);
		return -EINVAL;
	}
	for (int i = 0; i < d->npeers; i++) {
		const struct kvx_config_peer *np;

		slots += d->peers[i].vacant;
		if (!live(&d->peers[i]))
			continue;
		np = kvx_config_peer_find(next, d->peers[i].name);
		if (d->peers[i].discovered && !np)
			continue; /* not the file's: the registry's */
		if (!np || !kvx_config_peer_same(np, &d->cfg.peers[i])) {
			drop[i] = true;
			ndrop++;
			nchanged += np != NULL;
		}
	}
	for (int k = 0; k < next->n_peers; k++) {
		struct kvxd_peer *p = kvxd_peer_find(d, next->peers[k].name);

		if (!p || drop[p->idx] || p->discovered) {
			if (p && p->discovered && !drop[p->idx]) {
				drop[p->idx] = true; /* the section wins over the registry */
				ndrop++;
				nchanged++;
			}
			add[k] = true;
			nadd++;
		}
	}
	/* a removed peer keeps its slot and its CQ share until it is torn down */
	room = kvxd_peer_room(d);
	if (nadd > slots) {
		snprintf(err, errlen,
			 "%d peers to add and %d free peer slots (at most %d peers, removed ones "
			 "included until they are torn down)",
			 nadd, slots, KVX_MAX_PEERS);
		return -ENOSPC;
	}
	if (nadd > room) {
		snprintf(err, errlen,
			 "%d peers to add and room for %d: [rdma] cq_depth %u takes 2 x (sq_depth "
			 "%u + rq_depth %u) per peer, removed ones included until they are torn "
			 "down; set a larger cq_depth and restart",
			 nadd, room, d->cfg.cq_depth, d->cfg.sq_depth, d->cfg.rq_depth);
		return -ENOBUFS;
	}
	/* a section removed may have kept a node that etcd lists (the section wins over the
	 * registry): read etcd again, or that node is not found until the watch ends */
	if (ndrop > nchanged)
		d->members_reread = true;
	for (int i = 0; i < d->npeers; i++)
		if (drop[i])
			kvxd_peer_remove(d, &d->peers[i],
					 kvx_config_peer_find(next, d->peers[i].name)
						 ? "its [peer] section changed (reload)"
						 : "removed from the configuration (reload)");
	for (int k = 0; k < next->n_peers; k++) {
		int rc = add[k] ? kvxd_peer_add(d, &next->peers[k]) : 0;

		if (rc) /* checked above: a bug */
			KVX_ERR("reload: peer %s not added: %s", next->peers[k].name,
				strerror(-rc));
	}
	d->ctr.reloads++;
	KVX_INFO("reload: %d peer%s added, %d removed, %d changed, %d unchanged", nadd - nchanged,
		 nadd - nchanged == 1 ? "" : "s", ndrop - nchanged, nchanged, next->n_peers - nadd);
	return 0;
}

int
kvxd_members_reload(struct kvxd *d, char *err, size_t errlen)
{
	struct kvx_config *next = calloc(1, sizeof(*next));
	int rc;

	err[0] = '\0';
	if (!next) {
		rc = -ENOMEM;
	} else if (!d->cfg_path) {
		rc = -EINVAL;
		snprintf(err, errlen, "kvxd was not started from a configuration file");
	} else {
		rc = kvx_config_load(next, d->cfg_path, err, errlen);
		if (rc == 0)
			rc = kvxd_members_apply(d, next, err, errlen);
		if (rc == 0)
			warn_other_settings(d, next);
	}
	if (rc && !err[0])
		snprintf(err, errlen, "%s: %s", d->cfg_path ? d->cfg_path : "reload",
			 strerror(-rc));
	if (rc) {
		d->ctr.reloads_refused++;
		KVX_ERR("reload refused, nothing changed: %s", err);
	}
	free(next);
	return rc;
}

int
kvxd_members_found(struct kvxd *d, const char *name, const struct kvx_config_addr *addr,
		   const uint8_t (*gids)[16], int ngid)
{
	struct kvx_config_peer cp = {.allowed = true, .addr = *addr, .has_gid = ngid > 0};
	struct kvxd_peer *p;
	int rc;

	if (!kvx_config_name_ok(name)) {
		d->ctr.members_refused++;
		return -EINVAL;
	}
	if (strcmp(name, d->cfg.name) == 0)
		return 0; /* ourselves */
	p = kvxd_peer_find(d, name);
	if (p && !p->discovered)
		return 0; /* a [peer.*] section wins */
	if (ngid > KVX_MAX_RAILS)
		ngid = KVX_MAX_RAILS;
	for (int k = 0; k < ngid; k++)
		memcpy(k ? cp.rail_gid[k - 1] : cp.gid, gids[k], 16);
	cp.n_rail_gid = ngid > 1 ? ngid - 1 : 0;
	snprintf(cp.name, sizeof(cp.name), "%s", name);
	if (p && kvx_config_peer_same(&cp, &d->cfg.peers[p->idx])) {
		p->seen = true;
		p->unlisted = p->moved = false; /* listed again, where it was */
		return 0;
	}
	if (p && p->state == KVXD_PEER_READY) {
		/* its authenticated session stays: an entry anyone with etcd access may write
		 * never ends it (a node that did move loses that session to its heartbeat) */
		if (!p->moved)
			KVX_INFO("membership: %s is listed at %s:%u now; its live session is kept "
				 "until it ends",
				 name, addr->host, addr->port);
		p->seen = p->moved = true;
		p->unlisted = false;
		return 0;
	}
	if (p) {
		d->ctr.members_lost++;
		kvxd_peer_remove(d, p, "moved to another address or GID (etcd)");
	}
	rc = kvxd_peer_add(d, &cp);
	if (rc) {
		d->ctr.members_refused++;
		if (kvx_log_allow(&d->members_refused_log, kvxd_now_ms(), 10,
				  "nodes not taken as peers"))
			KVX_WARN("membership: node %s at %s:%u not taken as a peer: %s", name,
				 addr->host, addr->port,
				 rc == -ENOBUFS	 ? "no room in the completion queues (cq_depth)"
				 : rc == -ENOSPC ? "every peer slot is taken"
						 : strerror(-rc));
		return rc;
	}
	p = kvxd_peer_find(d, name);
	p->discovered = p->seen = true;
	d->ctr.members_found++;
	KVX_INFO("membership: found %s at %s:%u", name, addr->host, addr->port);
	return 0;
}

void
kvxd_members_lost(struct kvxd *d, const char *name)
{
	struct kvxd_peer *p = kvxd_peer_find(d, name);

	if (!p || !p->discovered)
		return;
	if (p->state == KVXD_PEER_READY) {
		p->moved = false; /* listed nowhere now */
		if (!p->unlisted)
			KVX_INFO("membership: %s is no longer listed; its live session is kept "
				 "until "
				 "it ends",
				 name);
		p->unlisted = true;
		return;
	}
	d->ctr.members_lost++;
	KVX_INFO("membership: %s left", name);
	kvxd_peer_remove(d, p, "left the membership (etcd)");
}

void
kvxd_members_sync_begin(struct kvxd *d)
{
	for (int i = 0; i < d->npeers; i++)
		d->peers[i].seen = false;
}

void
kvxd_members_sync_end(struct kvxd *d)
{
	for (int i = 0; i < d->npeers; i++)
		if (live(&d->peers[i]) && d->peers[i].discovered && !d->peers[i].seen)
			kvxd_members_lost(d, d->peers[i].name);
}
