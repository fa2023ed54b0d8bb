/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The verbs workers (layer 2 of control/, control/README.md): verbs calls that may block, run
 * off the control core.  On a RoCE device the move of a QP to RTR resolves the peer's address
 * in the kernel (its neighbour entry), and where that fails (a cut link) the call blocks for
 * about a second before it fails: measured on rxe, one ibv_modify_qp of 1.0 s per unreachable
 * rail.  Registering a pool's memory pins every page: 0.29 s for 256 MiB in the VM; its
 * deregistration and unmap unpin them and tear the mapping down: 5 and 34 ms for 256 MiB there,
 * seconds for a GPU node's pool.  On the control core each stalled every engine request,
 * heartbeat, abort and handshake of the node.
 *
 * Threads by kind of job (enum kvxd_vjob_kind: [cores] connect_workers for connects,
 * mr_workers for registrations, one for deregistrations), started with kvxd
 * (kvxd_vwork_start), the threads of a kind taking its jobs in order: a session's QPs
 * (struct kvxd_vjob in the peer, at most one per peer: two workers never share a session), a
 * pool's registration or its deregistration (one per pool, allocated by the engine layer: at
 * most KVXD_MAX_POOLS); so nothing to bound.  When a job is done the worker writes an eventfd
 * the loop waits on, and the loop hands the done jobs back to their layers
 * (kvxd_loop_vwork_done).  Until the workers are started (the unit tests' nodes) a job runs on
 * the control core at its next loop pass (kvxd_vwork_run_inline).
 * Threads: submit, take and run_inline on the control core; the job's calls on its worker.
 */
#ifndef KVX_CONTROL_VWORK_H
#define KVX_CONTROL_VWORK_H

#include "control/kvxd.h"

/* Start the threads (on d->vwork.cpus when has_cpus) and their eventfd (on d->epfd).  0 or
 * -errno. */
int kvxd_vwork_start(struct kvxd *d);
/* Let the jobs being run finish (the jobs behind them are done without a call: KVXD_VJOB_NONE)
 * and join the threads.  The done jobs stay to be taken.  Safe when never started. */
void kvxd_vwork_stop(struct kvxd *d);
/* Queue j (its peer, lanes, QPs and attributes set; j->busy must be false). */
void kvxd_vwork_submit(struct kvxd *d, struct kvxd_vjob *j);
/* Its eventfd was readable: clear it (the loop then takes the done jobs). */
void kvxd_vwork_on_event(struct kvxd *d);
/* Not started: run what is queued, on this thread. */
void kvxd_vwork_run_inline(struct kvxd *d);
/* The done jobs, each taken back (busy false), linked by next; NULL: none. */
struct kvxd_vjob *kvxd_vwork_take_done(struct kvxd *d);

#endif
