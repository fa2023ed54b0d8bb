/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The verbs seam.  Everything kvx does to the hardware goes through kvx_vx (an ops table), so
 * that unit tests can swap in a fake with scripted completions and injected errors
 * (tests/unit/fake_verbs.c) and count live resources.  verbs/vx_ibv.c is the real backend on
 * libibverbs; only it includes <infiniband/verbs.h>.
 *
 * Threads: dev/mr/cq/qp create, modify and destroy run on the control core (or at start-up);
 * cq_poll, post_write_chain and post_recv_burst run on the owning polling core and never block
 * or allocate; cq_wait may block (the poller goes RCU-offline around it).
 * Returns: 0 / -errno, or a count for _burst.  Failures are logged once where they happen, with
 * errno text and object ids.
 */
#ifndef KVX_VERBS_VX_H
#define KVX_VERBS_VX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct kvx_vx_dev;
struct kvx_vx_mr;
struct kvx_vx_cq;
struct kvx_vx_qp;

struct kvx_vx_dev_info {
	uint8_t gid[16];
	uint32_t active_mtu; /* bytes */
	int numa_node;	     /* -1 if unknown */
	uint32_t max_sge;    /* scatter-gather entries per send WR, at most KVX_VX_MAX_SGE */
	uint32_t max_cqe;    /* entries one CQ may have */
	char name[64];
};

/* Scatter-gather entries a WRITE may gather from (the QPs are created with this many, or
 * with the device's limit if it is lower: kvx_vx_dev_info.max_sge). */
#define KVX_VX_MAX_SGE 16

/* One local buffer of a WRITE (the layout of struct ibv_sge). */
struct kvx_vx_sge {
	uint64_t addr;
	uint32_t len;
	uint32_t lkey;
};

enum kvx_vx_wc_status {
	KVX_VX_WC_SUCCESS = 0,
	KVX_VX_WC_FLUSH_ERR = 1,
	KVX_VX_WC_RETRY_EXC_ERR = 2,
	KVX_VX_WC_REM_ACCESS_ERR = 3,
	KVX_VX_WC_OTHER_ERR = 4,
};

enum kvx_vx_wc_opcode {
	KVX_VX_WC_WRITE = 0,	     /* a posted RDMA WRITE (or WRITE_WITH_IMM) completed */
	KVX_VX_WC_RECV_WITH_IMM = 1, /* a remote WRITE_WITH_IMM consumed one posted receive */
	KVX_VX_WC_RECV = 2,	     /* flushed receive (status != SUCCESS) */
};

struct kvx_vx_wc {
	uint64_t wr_id;
	uint32_t status;	/* enum kvx_vx_wc_status */
	uint32_t opcode;	/* enum kvx_vx_wc_opcode */
	uint32_t imm;		/* host order, for RECV_WITH_IMM */
	uint32_t qpn;		/* local QP number */
	const char *status_str; /* ibv_wc_status_str() text for the log */
};

/* One RDMA WRITE: the local buffers sg[0..nsge) gathered in order, to raddr under rkey.  sg
 * must stay valid until the WR completes (a device reads it at post time, the fake backend's
 * hold mode later). */
struct kvx_vx_write {
	uint64_t wr_id;
	const struct kvx_vx_sge *sg;
	uint32_t nsge; /* 1 .. the QP's max_sge (0: a zero-length WRITE, pcore's marker) */
	uint64_t raddr;
	uint32_t rkey;
	bool with_imm;
	uint32_t imm;  /* host order */
	bool signaled; /* false: a completion only if it fails (or is flushed); a later
			* signalled WR's completion retires it (an RC send queue completes in
			* order) */
};

/* What the far side needs and what we need of it to connect an RC QP. */
struct kvx_vx_qp_attr {
	uint32_t remote_qpn;
	uint32_t remote_psn;
	uint8_t remote_gid[16];
	uint32_t local_psn;
	uint32_t mtu; /* bytes */
	uint8_t port;
	uint8_t gid_index;
	uint8_t retry_cnt; /* <= 6 on rxe (7 = infinite) */
	uint8_t rnr_retry;
	uint8_t ack_timeout;
};

struct kvx_vx_ops {
	const char *name;
	int (*dev_open)(const char *name, uint8_t port, uint8_t gid_index, struct kvx_vx_dev **out);
	int (*dev_close)(struct kvx_vx_dev *d);
	int (*dev_query)(struct kvx_vx_dev *d, struct kvx_vx_dev_info *info);

	int (*mr_reg)(struct kvx_vx_dev *d, void *addr, size_t len, struct kvx_vx_mr **out);
	int (*mr_dereg)(struct kvx_vx_mr *mr);
	uint32_t (*mr_lkey)(const struct kvx_vx_mr *mr);
	uint32_t (*mr_rkey)(const struct kvx_vx_mr *mr);

	int (*cq_create)(struct kvx_vx_dev *d, int depth, struct kvx_vx_cq **out);
	int (*cq_destroy)(struct kvx_vx_cq *cq);
	int (*cq_poll_burst)(struct kvx_vx_cq *cq, struct kvx_vx_wc *wc, int max);
	/* Arm the CQ for the next completion; cq_fd() becomes readable when one arrives. */
	int (*cq_arm)(struct kvx_vx_cq *cq);
	int (*cq_fd)(struct kvx_vx_cq *cq);
	/* Take the CQ's event (one) after cq_fd() was readable, counted for acknowledgement (in
	 * batches, the rest at cq_destroy); non-blocking.
	 * An armed CQ raises one event and stays disarmed until cq_arm: arm it again only after
	 * taking its event. */
	int (*cq_ack_events)(struct kvx_vx_cq *cq);

	int (*qp_create)(struct kvx_vx_dev *d, struct kvx_vx_cq *cq, uint32_t sq_depth,
			 uint32_t rq_depth, struct kvx_vx_qp **out);
	int (*qp_destroy)(struct kvx_vx_qp *qp);
	uint32_t (*qp_num)(const struct kvx_vx_qp *qp);
	int (*qp_to_init)(struct kvx_vx_qp *qp, const struct kvx_vx_qp_attr *a);
	int (*qp_to_rtr)(struct kvx_vx_qp *qp, const struct kvx_vx_qp_attr *a);
	int (*qp_to_rts)(struct kvx_vx_qp *qp, const struct kvx_vx_qp_attr *a);
	/* Move to the error state: a responder in error accepts no further writes (the fence). */
	int (*qp_to_err)(struct kvx_vx_qp *qp);

	/* Post n writes as one chain (one doorbell); a WR raises a completion if it is signalled
	 * or fails.  Returns 0, or -errno with *posted = how many of the chain's head were
	 * accepted (queued on the QP: each will complete, if only flushed). */
	int (*post_write_chain)(struct kvx_vx_qp *qp, const struct kvx_vx_write *w, int n,
				int *posted);
	/* Post n zero-length receives (for WRITE_WITH_IMM) with the given wr_ids.  Returns 0, or
	 * -errno with *posted = how many of the head were accepted. */
	int (*post_recv_burst)(struct kvx_vx_qp *qp, const uint64_t *wr_ids, int n, int *posted);
};

/* The backend in use; the real one unless a test swapped it. */
extern const struct kvx_vx_ops *kvx_vx;
extern const struct kvx_vx_ops kvx_vx_ibv_ops;

/* Random 24-bit PSN (never continue an old sequence). */
uint32_t kvx_vx_random_psn(void);

#endif /* KVX_VERBS_VX_H */
