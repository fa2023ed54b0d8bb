/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Membership at runtime (layer 6 of control/, control/README.md): the configuration file's
 * [peer.*] sections reloaded (SIGHUP) and applied to the peer table as additions and removals
 * (control/peer.h: kvxd_peer_add, kvxd_peer_remove).  A peer whose section is unchanged is not
 * touched; a changed one (address, allow_from, gid, allow-list) is removed and added again.
 * Nothing else of the file is applied: a change elsewhere is logged as waiting for a restart.
 * Thread: the control core; nothing here blocks but reading the file.
 */
#ifndef KVX_CONTROL_MEMBERS_H
#define KVX_CONTROL_MEMBERS_H

#include <stddef.h>

#include "control/kvxd.h"

/* Apply next's peers.  All or nothing: 0, or -EINVAL / -ENOSPC / -ENOBUFS with the reason in
 * err and nothing changed (another node name; more peers than free slots; more than the
 * completion queues have room for). */
int kvxd_members_apply(struct kvxd *d, const struct kvx_config *next, char *err, size_t errlen);

/* Read d->cfg_path again and apply its peers.  0, or -errno with "FILE:LINE: message" (or the
 * reason) in err; a refused reload changes nothing and is counted and logged. */
int kvxd_members_reload(struct kvxd *d, char *err, size_t errlen);

/*
 * Nodes found through a registry (etcd, control/etcd.h).  A node is a peer like a configured
 * one (authenticated the same way, its connections only from its address) except that the
 * [security] allow-list names configured peers only.  A [peer.*] section of the same name
 * wins.  found: the node name is at addr, its QPs with gids[0..ngid) (rail 0's, then its other
 * rails'; none: the IPv4-mapped GID of its address, as for a section without gid) (a new peer,
 * or a moved one: removed and added).
 * 0, or -EINVAL (a bad name) / -ENOSPC / -ENOBUFS (kvxd_peer_add), counted.  lost: the node
 * left (its key was deleted or its lease expired): removed.  A full read of the registry is
 * framed by sync_begin and sync_end: a discovered peer it did not list is removed.
 */
int kvxd_members_found(struct kvxd *d, const char *name, const struct kvx_config_addr *addr,
		       const uint8_t (*gids)[16], int ngid);
void kvxd_members_lost(struct kvxd *d, const char *name);
void kvxd_members_sync_begin(struct kvxd *d);
void kvxd_members_sync_end(struct kvxd *d);

#endif /* KVX_CONTROL_MEMBERS_H */
