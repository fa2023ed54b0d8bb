/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Operator commands (layer 7 of control/, control/README.md).  Thread: the control core.
 */
#ifndef KVX_CONTROL_ADMIN_H
#define KVX_CONTROL_ADMIN_H

#include "control/kvxd.h"
#include "control/metrics.h"

/* Run an operator command; its text goes to out.  peers, rooms, counters (metrics; "counters
 * json": as JSON; -EMSGSIZE when they do not fit in len) and help are open to every engine; every
 * other command changes state and needs admin (else -EPERM, counted). */
int kvxd_admin(struct kvxd *d, const char *cmd, bool admin, char *out, size_t len);
/* The same, the whole text in a buffer that grows up to KVXD_ADMIN_TEXT_MAX (b is set up here;
 * free it with kvxd_metrics_buf_fini): the engine protocol's KVX_ENG_ADMIN_AT pages it out. */
#define KVXD_ADMIN_TEXT_MAX (4u << 20)
int kvxd_admin_text(struct kvxd *d, const char *cmd, bool admin, struct kvxd_metrics_buf *b);

#endif /* KVX_CONTROL_ADMIN_H */
