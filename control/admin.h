/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Operator commands (layer 7 of control/, control/README.md).  Thread: the control core.
 */
#ifndef KVX_CONTROL_ADMIN_H
#define KVX_CONTROL_ADMIN_H

#include "control/kvxd.h"
#include "control/metrics.h"

/* Run an operator command for engine session `engine` (-1: none); its text goes to out.  peers,
 * rooms, counters (metrics; "counters json": as JSON; -EMSGSIZE when they do not fit in len) and
 * help are open to every engine (rooms: its own only, every room for an admin: room ids are not
 * told to other engines); every other command changes state and needs admin (else -EPERM,
 * counted). */
int kvxd_admin(struct kvxd *d, const char *cmd, bool admin, int engine, char *out, size_t len);
/* The same, the whole text in a buffer that grows up to KVXD_ADMIN_TEXT_MAX (b is set up here;
 * free it with kvxd_metrics_buf_fini): the engine protocol's KVX_ENG_ADMIN_AT pages it out. */
#define KVXD_ADMIN_TEXT_MAX (4u << 20)
/* "counters" answers engines that are not operators from one rendering per format this long */
#define KVXD_ADMIN_CACHE_MS 100
int kvxd_admin_text(struct kvxd *d, const char *cmd, bool admin, int engine,
		    struct kvxd_metrics_buf *b);

/* Free what kvxd_admin keeps (the "counters" renderings).  At shutdown. */
void kvxd_admin_fini(struct kvxd *d);

#endif /* KVX_CONTROL_ADMIN_H */
