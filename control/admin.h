/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Operator commands (layer 7 of control/, control/README.md).  Thread: the control core.
 */
#ifndef KVX_CONTROL_ADMIN_H
#define KVX_CONTROL_ADMIN_H

#include "control/kvxd.h"

/* Run an operator command; its text goes to out.  peers, rooms, counters (metrics; "counters
 * json": as JSON; -EMSGSIZE when they do not fit in len) and help are open to every engine; every
 * other command changes state and needs admin (else -EPERM, counted). */
int kvxd_admin(struct kvxd *d, const char *cmd, bool admin, char *out, size_t len);

#endif /* KVX_CONTROL_ADMIN_H */
