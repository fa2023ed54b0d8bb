/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The control core's event loop (layer 9 of control/, control/README.md).  Thread: the control
 * core (main thread), a registered QSBR reader, offline only inside epoll_wait.
 */
#ifndef KVX_CONTROL_LOOP_H
#define KVX_CONTROL_LOOP_H

#include "control/kvxd.h"

/* Loop until SIGTERM/SIGINT, then drain (bounded), fence and retire every QP.  0. */
int kvxd_run(struct kvxd *d);
/* One iteration: drain the cores' outboxes, retry their overflow rings, wait for events at
 * most timeout_ms (less when a room or peer deadline comes sooner), handle them, run the due
 * timers, close doomed engine sessions.  Tests step it. */
void kvxd_loop_once(struct kvxd *d, int timeout_ms);
/* Hand the verbs workers' done jobs to their layers (peer: QPs connected; engine: a pool). */
void kvxd_loop_vwork_done(struct kvxd *d);
/* After the polling cores stopped: destroy QPs they still hold, free every room. */
void kvxd_shutdown_release(struct kvxd *d);

#endif /* KVX_CONTROL_LOOP_H */
