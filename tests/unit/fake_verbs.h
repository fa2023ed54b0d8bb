/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A fake verbs backend for unit tests (never for the product): resources are counted, RDMA
 * writes between fake QPs of one process are executed with memcpy against registered fake
 * MRs, completions are scripted (immediate, or held until the test releases them), errors
 * are injected on any control call or as error completions.  Single-threaded use only.
 */
#ifndef KVX_TESTS_FAKE_VERBS_H
#define KVX_TESTS_FAKE_VERBS_H

#include <stdbool.h>
#include <stdint.h>

#include "verbs/vx.h"

extern const struct kvx_vx_ops fake_vx_ops;

struct fake_vx_live {
	int dev, mr, cq, qp;
};

/* Install the fake as kvx_vx and reset every counter and script. */
void fake_vx_install(void);
struct fake_vx_live fake_vx_live(void);

/* Make the nth (1-based) next call of op ("qp_create", "qp_to_rtr", "qp_destroy", "mr_reg",
 * ...) fail with err (negative errno). */
void fake_vx_fail_call(const char *op, int nth, int err);
/* The same for the nth call and every later one, until fake_vx_fail_stop(op) (which ends
 * only such entries). */
void fake_vx_fail_from(const char *op, int nth, int err);
void fake_vx_fail_stop(const char *op);
/* The next call of op ("qp_to_rtr" or "mr_reg") made on another thread than the caller's (a
 * verbs worker's) blocks, as rxe's move to RTR does while it cannot resolve the peer's address
 * and a registration while the kernel pins a large pool, until fake_vx_unblock(), or fails
 * -ETIMEDOUT after 2 s.  While it waits, fake_vx_blocked() is true, and destroying its QP is
 * refused (-EBUSY, as uverbs does) and counted (fake_vx_destroyed_in_call). */
void fake_vx_block(const char *op);
bool fake_vx_blocked(void);
void fake_vx_unblock(void);
int fake_vx_destroyed_in_call(void);

/* The nth (1-based) next post_write_chain queues every WR of its list on the QP, where they
 * never run, and fails with err without naming a bad WR (*posted = all of them): rxe's answer on
 * a QP not in RTS.  They wait in hold mode's queue and flush when the QP goes to ERR (a test
 * leaves them there: fake_vx_release would run them, which rxe never does). */
void fake_vx_refuse_doorbell(int nth, int err);
/* Refuse count WRs from the nth one offered from now on (1-based): each ends its list there
 * with err, the WRs before it taken (a device's bad_wr). */
void fake_vx_refuse_wr(int nth, int count, int err);
/* Hold mode: posted writes are queued on their QP and complete only when released. */
void fake_vx_hold(bool on);
/* Execute (and complete) up to n held writes of qp in order; returns how many. */
int fake_vx_release(struct kvx_vx_qp *qp, int n);
/* Complete the next held write of qp with an error status (the QP goes to ERR, the rest of
 * its held writes flush). */
int fake_vx_fail_next(struct kvx_vx_qp *qp, uint32_t status);
int fake_vx_held(struct kvx_vx_qp *qp);
/* The next write the fake runs, on any QP (posted outside hold mode, or released), completes
 * with status instead, as fake_vx_fail_next's does; 0: none (reset by install). */
void fake_vx_fail_next_write(uint32_t status);
/* Stuck mode: a QP that goes to error keeps its held writes unflushed until fake_vx_flush(). */
/* Send completions the fake generated so far (signalled WRs and failed ones). */
uint64_t fake_vx_send_cqes(void);
/* The scatter-gather entries a WR may have (default KVX_VX_MAX_SGE; reset by install). */
void fake_vx_set_max_sge(uint32_t n);
void fake_vx_defer_flush(bool on);
void fake_vx_flush(struct kvx_vx_qp *qp);
/* Its receive queue's flushes alone (rxe's responder and completer flush their queues each on
 * its own: the receives may come before the writes). */
void fake_vx_flush_recv(struct kvx_vx_qp *qp);
/* Writes executed so far (data landed). */
uint64_t fake_vx_writes_executed(void);
bool fake_vx_qp_in_error(struct kvx_vx_qp *qp);
/* Late packets: while on, a held write that fails or flushes at its requester is also kept, its
 * data as it was then, as packets still in the network would be (a neighbour entry that is not
 * resolved holds them, as measured in the VM).  fake_vx_deliver_late() hands every kept one to
 * its responder QP: placed if that QP is in RTR or RTS and the key fits (an immediate consumes
 * nothing), dropped by a QP in error.  Returns how many were placed; forgets them all. */
void fake_vx_keep_late(bool on);
int fake_vx_deliver_late(void);
/* cq_arm calls so far (scriptable as "cq_arm"). */
uint64_t fake_vx_cq_arms(void);
/* Raise an armed CQ's event as a completion would (the CQ is disarmed); false if it was not
 * armed (a CQ that is not armed raises nothing). */
bool fake_vx_cq_fire(struct kvx_vx_cq *c);
/* Writes executed on the device's QPs (a rail's share). */
uint64_t fake_vx_dev_writes(const struct kvx_vx_dev *d);

#endif /* KVX_TESTS_FAKE_VERBS_H */
