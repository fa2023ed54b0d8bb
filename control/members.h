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

#endif /* KVX_CONTROL_MEMBERS_H */
