/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The real verbs backend (libibverbs).  Thin: one seam function per verbs call, errors logged
 * once with errno text and object ids, completions translated to struct kvx_vx_wc.
 */
#include "verbs/vx.h"

#include <errno.h>
#include <fcntl.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <arpa/inet.h>

#include <infiniband/verbs.h>

#include "core/log.h"

struct kvx_vx_dev {
	struct ibv_context *ctx;
	struct ibv_pd *pd;
	uint8_t port;
	uint8_t gid_index;
	uint32_t max_sge; /* min(KVX_VX_MAX_SGE, the device's max_sge) */
	uint32_t max_cqe;
	char name[64];
};

/* struct kvx_vx_sge is passed to the device as struct ibv_sge, without a copy. */
_Static_assert(sizeof(struct kvx_vx_sge) == sizeof(struct ibv_sge), "sge size");
_Static_assert(offsetof(struct kvx_vx_sge, addr) == offsetof(struct ibv_sge, addr), "sge addr");
_Static_assert(offsetof(struct kvx_vx_sge, len) == offsetof(struct ibv_sge, length), "sge len");
_Static_assert(offsetof(struct kvx_vx_sge, lkey) == offsetof(struct ibv_sge, lkey), "sge lkey");

struct kvx_vx_mr {
	struct ibv_mr *mr;
};

struct kvx_vx_cq {
	struct ibv_comp_channel *ch;
	struct ibv_cq *cq;
	unsigned int unacked;
};

struct kvx_vx_qp {
	struct ibv_qp *qp;
	struct kvx_vx_dev *dev;
};

const struct kvx_vx_ops *kvx_vx = &kvx_vx_ibv_ops;

uint32_t
kvx_vx_random_psn(void)
{
	uint32_t v = 0;

	if (getrandom(&v, sizeof(v), 0) != sizeof(v))
		v = (uint32_t)random();
	return v & 0xffffff;
}

static int
ibv_dev_open(const char *name, uint8_t port, uint8_t gid_index, struct kvx_vx_dev **out)
{
	struct ibv_device **list;
	struct kvx_vx_dev *d;
	int n = 0, rc;

	d = calloc(1, sizeof(*d));
	if (!d)
		return -ENOMEM;
	list = ibv_get_device_list(&n);
	if (!list) {
		rc = -errno;
		KVX_ERR("ibv_get_device_list: %s", strerror(errno));
		goto err_free;
	}
	for (int i = 0; i < n; i++) {
		if (strcmp(ibv_get_device_name(list[i]), name) == 0) {
			d->ctx = ibv_open_device(list[i]);
			break;
		}
	}
	ibv_free_device_list(list);
	if (!d->ctx) {
		rc = -ENODEV;
		KVX_ERR("RDMA device %s not found or cannot be opened (%d devices)", name, n);
		goto err_free;
	}
	d->pd = ibv_alloc_pd(d->ctx);
	if (!d->pd) {
		rc = errno ? -errno : -ENOMEM;
		KVX_ERR("ibv_alloc_pd(%s): %s", name, strerror(-rc));
		goto err_close;
	}
	{
		struct ibv_device_attr da;

		rc = ibv_query_device(d->ctx, &da);
		if (rc) {
			rc = -rc;
			KVX_ERR("ibv_query_device(%s): %s", name, strerror(-rc));
			goto err_pd;
		}
		if (da.max_sge < 1) {
			rc = -EINVAL;
			KVX_ERR("RDMA device %s reports max_sge %d", name, da.max_sge);
			goto err_pd;
		}
		d->max_sge = da.max_sge < KVX_VX_MAX_SGE ? (uint32_t)da.max_sge : KVX_VX_MAX_SGE;
		d->max_cqe = da.max_cqe > 0 ? (uint32_t)da.max_cqe : 0;
	}
	d->port = port;
	d->gid_index = gid_index;
	snprintf(d->name, sizeof(d->name), "%s", name);
	*out = d;
	return 0;

err_pd:
	ibv_dealloc_pd(d->pd);
err_close:
	ibv_close_device(d->ctx);
err_free:
	free(d);
	return rc;
}

static int
ibv_dev_close(struct kvx_vx_dev *d)
{
	int rc = ibv_dealloc_pd(d->pd);

	if (rc) {
		KVX_ERR("ibv_dealloc_pd(%s): %s", d->name, strerror(rc));
		return -rc;
	}
	if (ibv_close_device(d->ctx)) {
		KVX_ERR("ibv_close_device(%s): %s", d->name, strerror(errno));
		return -errno;
	}
	free(d);
	return 0;
}

static int
ibv_dev_query(struct kvx_vx_dev *d, struct kvx_vx_dev_info *info)
{
	struct ibv_port_attr pa;
	union ibv_gid gid;
	int rc;

	rc = ibv_query_port(d->ctx, d->port, &pa);
	if (rc) {
		KVX_ERR("ibv_query_port(%s, %u): %s", d->name, d->port, strerror(rc));
		return -rc;
	}
	rc = ibv_query_gid(d->ctx, d->port, d->gid_index, &gid);
	if (rc) {
		KVX_ERR("ibv_query_gid(%s, %u, %u): %s", d->name, d->port, d->gid_index,
			strerror(rc));
		return -rc;
	}
	memcpy(info->gid, gid.raw, 16);
	info->active_mtu = 128u << pa.active_mtu;
	info->numa_node = -1;
	info->max_sge = d->max_sge;
	info->max_cqe = d->max_cqe;
	snprintf(info->name, sizeof(info->name), "%s", d->name);
	return 0;
}

static int
ibv_mr_reg(struct kvx_vx_dev *d, void *addr, size_t len, struct kvx_vx_mr **out)
{
	struct kvx_vx_mr *m = calloc(1, sizeof(*m));

	if (!m)
		return -ENOMEM;
	m->mr = ibv_reg_mr(d->pd, addr, len, IBV_ACCESS_LOCAL_WRITE | IBV_ACCESS_REMOTE_WRITE);
	if (!m->mr) {
		int rc = errno ? -errno : -ENOMEM;

		KVX_ERR("ibv_reg_mr(%s, %zu bytes): %s", d->name, len, strerror(-rc));
		free(m);
		return rc;
	}
	*out = m;
	return 0;
}

static int
ibv_mr_dereg(struct kvx_vx_mr *m)
{
	uint32_t rkey = m->mr->rkey;
	int rc = ibv_dereg_mr(m->mr);

	if (rc) {
		KVX_ERR("ibv_dereg_mr(rkey 0x%x): %s", rkey, strerror(rc));
		return -rc;
	}
	free(m);
	return 0;
}

static uint32_t
ibv_mr_lkey(const struct kvx_vx_mr *m)
{
	return m->mr->lkey;
}

static uint32_t
ibv_mr_rkey(const struct kvx_vx_mr *m)
{
	return m->mr->rkey;
}

static int
ibv_cq_create_(struct kvx_vx_dev *d, int depth, struct kvx_vx_cq **out)
{
	struct kvx_vx_cq *c = calloc(1, sizeof(*c));
	int rc;

	if (!c)
		return -ENOMEM;
	c->ch = ibv_create_comp_channel(d->ctx);
	if (!c->ch) {
		rc = errno ? -errno : -ENOMEM;
		KVX_ERR("ibv_create_comp_channel(%s): %s", d->name, strerror(-rc));
		goto err_free;
	}
	if (fcntl(c->ch->fd, F_SETFL, fcntl(c->ch->fd, F_GETFL) | O_NONBLOCK) < 0) {
		rc = -errno;
		KVX_ERR("fcntl(comp channel): %s", strerror(errno));
		goto err_destroy_channel;
	}
	c->cq = ibv_create_cq(d->ctx, depth, c, c->ch, 0);
	if (!c->cq) {
		rc = errno ? -errno : -ENOMEM;
		KVX_ERR("ibv_create_cq(%s, %d): %s", d->name, depth, strerror(-rc));
		goto err_destroy_channel;
	}
	*out = c;
	return 0;

err_destroy_channel:
	ibv_destroy_comp_channel(c->ch);
err_free:
	free(c);
	return rc;
}

static int
ibv_cq_destroy_(struct kvx_vx_cq *c)
{
	int rc;

	if (c->unacked)
		ibv_ack_cq_events(c->cq, c->unacked);
	rc = ibv_destroy_cq(c->cq);
	if (rc) {
		KVX_ERR("ibv_destroy_cq: %s", strerror(rc));
		return -rc;
	}
	rc = ibv_destroy_comp_channel(c->ch);
	if (rc) {
		KVX_ERR("ibv_destroy_comp_channel: %s", strerror(rc));
		return -rc;
	}
	free(c);
	return 0;
}

static uint32_t
wc_status(enum ibv_wc_status s)
{
	switch (s) {
	case IBV_WC_SUCCESS:
		return KVX_VX_WC_SUCCESS;
	case IBV_WC_WR_FLUSH_ERR:
		return KVX_VX_WC_FLUSH_ERR;
	case IBV_WC_RETRY_EXC_ERR:
		return KVX_VX_WC_RETRY_EXC_ERR;
	case IBV_WC_REM_ACCESS_ERR:
		return KVX_VX_WC_REM_ACCESS_ERR;
	default:
		return KVX_VX_WC_OTHER_ERR;
	}
}

static int
ibv_cq_poll_burst(struct kvx_vx_cq *c, struct kvx_vx_wc *out, int max)
{
	struct ibv_wc wc[32];
	int n, total = 0;

	while (total < max) {
		int want = max - total < 32 ? max - total : 32;

		n = ibv_poll_cq(c->cq, want, wc);
		if (n < 0)
			return total ? total : -EIO;
		for (int i = 0; i < n; i++) {
			struct kvx_vx_wc *o = &out[total + i];

			o->wr_id = wc[i].wr_id;
			o->status = wc_status(wc[i].status);
			o->status_str = ibv_wc_status_str(wc[i].status);
			o->qpn = wc[i].qp_num;
			o->imm = 0;
			if (wc[i].status != IBV_WC_SUCCESS)
				/* opcode is undefined on error; the wr_id tag tells send from recv
				 */
				o->opcode = KVX_VX_WC_RECV;
			else if (wc[i].opcode == IBV_WC_RECV_RDMA_WITH_IMM) {
				o->opcode = KVX_VX_WC_RECV_WITH_IMM;
				o->imm = ntohl(wc[i].imm_data);
			} else if (wc[i].opcode & IBV_WC_RECV)
				o->opcode = KVX_VX_WC_RECV;
			else
				o->opcode = KVX_VX_WC_WRITE;
		}
		total += n;
		if (n < want)
			break;
	}
	return total;
}

static int
ibv_cq_arm(struct kvx_vx_cq *c)
{
	int rc = ibv_req_notify_cq(c->cq, 0);

	return rc ? -rc : 0;
}

static int
ibv_cq_fd(struct kvx_vx_cq *c)
{
	return c->ch->fd;
}

static int
ibv_cq_ack_events(struct kvx_vx_cq *c)
{
	struct ibv_cq *cq;
	void *ctx;

	/* one read: a CQ raises one event per arm, and the polling core arms it again only after
	 * taking it (a loop until EAGAIN cost a wasted read per wake-up); an event left behind
	 * keeps the fd readable for the next wait */
	if (ibv_get_cq_event(c->ch, &cq, &ctx) == 0)
		c->unacked++;
	if (c->unacked >= 64) {
		ibv_ack_cq_events(c->cq, c->unacked);
		c->unacked = 0;
	}
	return 0;
}

static int
ibv_qp_create_(struct kvx_vx_dev *d, struct kvx_vx_cq *cq, uint32_t sq_depth, uint32_t rq_depth,
	       struct kvx_vx_qp **out)
{
	struct ibv_qp_init_attr ia = {
		.send_cq = cq->cq,
		.recv_cq = cq->cq,
		.cap = {.max_send_wr = sq_depth,
			.max_recv_wr = rq_depth,
			.max_send_sge = d->max_sge,
			.max_recv_sge = 1},
		.qp_type = IBV_QPT_RC,
		.sq_sig_all = 0,
	};
	struct kvx_vx_qp *q = calloc(1, sizeof(*q));

	if (!q)
		return -ENOMEM;
	q->qp = ibv_create_qp(d->pd, &ia);
	if (!q->qp) {
		int rc = errno ? -errno : -ENOMEM;

		KVX_ERR("ibv_create_qp(%s, sq %u rq %u): %s", d->name, sq_depth, rq_depth,
			strerror(-rc));
		free(q);
		return rc;
	}
	q->dev = d;
	*out = q;
	return 0;
}

static int
ibv_qp_destroy_(struct kvx_vx_qp *q)
{
	uint32_t qpn = q->qp->qp_num;
	int rc = ibv_destroy_qp(q->qp);

	if (rc) {
		KVX_ERR("ibv_destroy_qp(0x%x): %s", qpn, strerror(rc));
		return -rc;
	}
	free(q);
	return 0;
}

static uint32_t
ibv_qp_num(const struct kvx_vx_qp *q)
{
	return q->qp->qp_num;
}

static enum ibv_mtu
mtu_enum(uint32_t bytes)
{
	switch (bytes) {
	case 256:
		return IBV_MTU_256;
	case 512:
		return IBV_MTU_512;
	case 2048:
		return IBV_MTU_2048;
	case 4096:
		return IBV_MTU_4096;
	default:
		return IBV_MTU_1024;
	}
}

static int
modify(struct kvx_vx_qp *q, struct ibv_qp_attr *a, int mask, const char *what)
{
	int rc = ibv_modify_qp(q->qp, a, mask);

	if (rc) {
		KVX_ERR("ibv_modify_qp(0x%x -> %s): %s", q->qp->qp_num, what, strerror(rc));
		return -rc;
	}
	return 0;
}

static int
ibv_qp_to_init(struct kvx_vx_qp *q, const struct kvx_vx_qp_attr *p)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_INIT,
		.pkey_index = 0,
		.port_num = p->port,
		.qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_LOCAL_WRITE,
	};

	return modify(q, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_ACCESS_FLAGS,
		      "INIT");
}

static int
ibv_qp_to_rtr(struct kvx_vx_qp *q, const struct kvx_vx_qp_attr *p)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_RTR,
		.path_mtu = mtu_enum(p->mtu),
		.dest_qp_num = p->remote_qpn,
		.rq_psn = p->remote_psn,
		.max_dest_rd_atomic = 1,
		.min_rnr_timer = 12,
		.ah_attr = {.is_global = 1,
			    .port_num = p->port,
			    .grh = {.sgid_index = p->gid_index, .hop_limit = 64}},
	};

	memcpy(a.ah_attr.grh.dgid.raw, p->remote_gid, 16);
	return modify(q, &a,
		      IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU | IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
			      IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER,
		      "RTR");
}

static int
ibv_qp_to_rts(struct kvx_vx_qp *q, const struct kvx_vx_qp_attr *p)
{
	struct ibv_qp_attr a = {
		.qp_state = IBV_QPS_RTS,
		.sq_psn = p->local_psn,
		.timeout = p->ack_timeout,
		.retry_cnt = p->retry_cnt,
		.rnr_retry = p->rnr_retry,
		.max_rd_atomic = 1,
	};

	return modify(q, &a,
		      IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT | IBV_QP_RETRY_CNT |
			      IBV_QP_RNR_RETRY | IBV_QP_MAX_QP_RD_ATOMIC,
		      "RTS");
}

static int
ibv_qp_to_err(struct kvx_vx_qp *q)
{
	struct ibv_qp_attr a = {.qp_state = IBV_QPS_ERR};

	return modify(q, &a, IBV_QP_STATE, "ERR");
}

static int
ibv_post_write_chain(struct kvx_vx_qp *q, const struct kvx_vx_write *w, int n, int *posted)
{
	struct ibv_send_wr wr[64], *bad = NULL;
	int done = 0;

	*posted = 0;
	while (done < n) {
		int m = n - done < 64 ? n - done : 64, rc;

		for (int i = 0; i < m; i++) {
			const struct kvx_vx_write *x = &w[done + i];

			wr[i] = (struct ibv_send_wr){
				.wr_id = x->wr_id,
				.next = i + 1 < m ? &wr[i + 1] : NULL,
				/* the device only reads the list */
				.sg_list = (struct ibv_sge *)(uintptr_t)x->sg,
				.num_sge = (int)x->nsge,
				.opcode = x->with_imm ? IBV_WR_RDMA_WRITE_WITH_IMM
						      : IBV_WR_RDMA_WRITE,
				.send_flags = x->signaled ? IBV_SEND_SIGNALED : 0,
				.imm_data = htonl(x->imm),
				.wr.rdma = {.remote_addr = x->raddr, .rkey = x->rkey},
			};
		}
		rc = ibv_post_send(q->qp, wr, &bad);
		if (rc) {
			/* bad names the first WR not queued.  No bad: every WR of the list was
			 * queued and only ringing the doorbell failed (rxe, on a QP that is not in
			 * RTS: EINVAL, bad left NULL): they are the QP's, and complete (flushed)
			 * once it goes to ERR, so they count as posted.  Counting them as not
			 * posted gave their slots back while completions for them were still to
			 * come. */
			*posted = done + (int)(bad ? bad - wr : m);
			return -rc;
		}
		done += m;
	}
	*posted = done;
	return 0;
}

static int
ibv_post_recv_burst(struct kvx_vx_qp *q, const uint64_t *wr_ids, int n, int *posted)
{
	struct ibv_recv_wr wr[64], *bad = NULL;
	int done = 0;

	*posted = 0;
	while (done < n) {
		int m = n - done < 64 ? n - done : 64, rc;

		for (int i = 0; i < m; i++)
			wr[i] = (struct ibv_recv_wr){.wr_id = wr_ids[done + i],
						     .next = i + 1 < m ? &wr[i + 1] : NULL};
		rc = ibv_post_recv(q->qp, wr, &bad);
		if (rc) {
			*posted = done + (int)(bad ? bad - wr : 0);
			return -rc;
		}
		done += m;
	}
	*posted = done;
	return 0;
}

const struct kvx_vx_ops kvx_vx_ibv_ops = {
	.name = "ibverbs",
	.dev_open = ibv_dev_open,
	.dev_close = ibv_dev_close,
	.dev_query = ibv_dev_query,
	.mr_reg = ibv_mr_reg,
	.mr_dereg = ibv_mr_dereg,
	.mr_lkey = ibv_mr_lkey,
	.mr_rkey = ibv_mr_rkey,
	.cq_create = ibv_cq_create_,
	.cq_destroy = ibv_cq_destroy_,
	.cq_poll_burst = ibv_cq_poll_burst,
	.cq_arm = ibv_cq_arm,
	.cq_fd = ibv_cq_fd,
	.cq_ack_events = ibv_cq_ack_events,
	.qp_create = ibv_qp_create_,
	.qp_destroy = ibv_qp_destroy_,
	.qp_num = ibv_qp_num,
	.qp_to_init = ibv_qp_to_init,
	.qp_to_rtr = ibv_qp_to_rtr,
	.qp_to_rts = ibv_qp_to_rts,
	.qp_to_err = ibv_qp_to_err,
	.post_write_chain = ibv_post_write_chain,
	.post_recv_burst = ibv_post_recv_burst,
};
