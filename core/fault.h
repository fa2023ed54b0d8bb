/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Named fault-injection points.  Inert by default: an unarmed point costs one relaxed load.
 * Armed with "name:N": let N hits pass, then fire once (":0" fires at the next hit), from the
 * config's [debug] faults, the KVX_FAULTS environment variable, or `kvxctl fault name:N`.
 * An unknown name is an error naming the known points.  A point after an acquisition fails the
 * setup right after that resource was acquired (and journaled); a rollback point makes that
 * release call fail.
 *
 * Threads: kvx_fault_arm/disarm from the control core or start-up; kvx_fault_hit from any
 * thread (lock-free, never blocks).
 */
#ifndef KVX_CORE_FAULT_H
#define KVX_CORE_FAULT_H

#include <stdbool.h>
#include <stddef.h>

enum kvx_fault_point {
	KVX_FAULT_WR_CORRUPT_RKEY,    /* wr.corrupt_rkey: a chunk's writes use a wrong rkey */
	KVX_FAULT_WR_REFUSED,	      /* wr.refused: the device refuses a chunk's last WR (more
				       * scatter-gather entries than the QP has), after taking
				       * the WRs before it */
	KVX_FAULT_HS_AFTER_SOCKET,    /* handshake.after_socket: control connection */
	KVX_FAULT_HS_AFTER_SLOT,      /* handshake.after_slot: the peer-table slot (session) */
	KVX_FAULT_HS_AFTER_QPC,	      /* handshake.after_qpc_alloc: a core's QP context */
	KVX_FAULT_HS_AFTER_QP_CREATE, /* handshake.after_qp_create */
	KVX_FAULT_HS_AFTER_QP_INIT,   /* handshake.after_qp_init */
	KVX_FAULT_HS_AFTER_RECV_POST, /* handshake.after_recv_post: pre-posted receives */
	KVX_FAULT_HS_AFTER_RTR,	      /* handshake.after_rtr: the QP accepts writes now */
	KVX_FAULT_HS_AFTER_RTS,	      /* handshake.after_rts */
	KVX_FAULT_HS_BEFORE_PUBLISH,  /* handshake.before_publish: all acquired, not published */
	KVX_FAULT_HS_STALL,	      /* handshake.stall: stop answering this peer mid-setup */
	KVX_FAULT_RB_QP_TO_ERR,	      /* rollback.qp_to_err: the fence of an armed QP */
	KVX_FAULT_RB_DESTROY_QP,      /* rollback.destroy_qp */
	KVX_FAULT_RB_RELEASE_SLOT,    /* rollback.release_slot */
	KVX_FAULT_RB_CLOSE_SOCKET,    /* rollback.close_socket */
	KVX_FAULT_COUNT,
};

/* Arm from a comma-separated list "name:N,name:N".  Returns 0, or -EINVAL with a message in
 * err (unknown point, bad count). */
int kvx_fault_arm_list(const char *spec, char *err, size_t errlen);
void kvx_fault_disarm_all(void);

/* Was the point reached its armed N-th time just now?  Thread: any. */
bool kvx_fault_hit(enum kvx_fault_point p);

const char *kvx_fault_name(enum kvx_fault_point p);
/* How many times each point fired since start (for counters). */
unsigned long kvx_fault_fired(enum kvx_fault_point p);

#endif /* KVX_CORE_FAULT_H */
