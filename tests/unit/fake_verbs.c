/* SPDX-License-Identifier: Apache-2.0 */
#include "fake_verbs.h"

#include <errno.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/eventfd.h>
#include <time.h>
#include <unistd.h>

#define FAKE_CQ_DEPTH 65536
#define FAKE_MAX_QP 256
#define FAKE_MAX_MR 256
#define FAKE_MAX_HELD 4096

enum { QPS_RESET, QPS_INIT, QPS_RTR, QPS_RTS, QPS_ERR };

struct kvx_vx_dev {
	char name[64];
	uint64_t writes; /* executed on its QPs */
};

struct kvx_vx_mr {
	struct kvx_vx_dev *dev; /* its keys are valid on this device's QPs only */
	uint8_t *addr;
	size_t len;
	uint32_t lkey, rkey;
};

struct kvx_vx_cq {
	struct kvx_vx_wc wc[FAKE_CQ_DEPTH];
	uint32_t head, tail;
	int fd;
	bool armed; /* like ibv_req_notify_cq: the next completion signals fd, once */
	struct kvx_vx_dev *dev;
};

struct kvx_vx_qp {
	struct kvx_vx_dev *dev;
	uint32_t qpn;
	int state;
	struct kvx_vx_cq *cq;
	uint32_t remote_qpn;
	uint64_t recv_ids[1024];
	uint32_t recv_head, recv_tail;
	struct kvx_vx_write held[FAKE_MAX_HELD];
	uint32_t held_head, held_tail;
};

static struct fake_vx_live live;
/* the MR table: registrations run on kvxd's verbs workers while polling cores post (and the
 * fake executes) on theirs, as a device's table is read by the NIC while the host changes it */
static pthread_mutex_t mr_mu = PTHREAD_MUTEX_INITIALIZER;
static struct kvx_vx_mr *mrs[FAKE_MAX_MR];
static struct kvx_vx_qp *qps[FAKE_MAX_QP];
static uint32_t next_key = 0x100, next_qpn = 0x11;
static bool hold_mode, defer_flush;
static int refuse_doorbell_nth, refuse_doorbell_err;	  /* fake_vx_refuse_doorbell */
static int refuse_wr_nth, refuse_wr_count, refuse_wr_err; /* fake_vx_refuse_wr */
static uint32_t fake_max_sge = KVX_VX_MAX_SGE;
static uint64_t writes_executed;
static uint32_t fail_write_status; /* fake_vx_fail_next_write */
static uint64_t cq_arms;	   /* cq_arm calls */
/* fake_vx_keep_late: writes that failed or flushed at their requester, still in the network */
#define FAKE_MAX_LATE 64
static bool keep_late;
struct fake_late {
	uint32_t rqpn, rkey;
	uint64_t raddr, len;
	uint8_t *data;
};
static struct fake_late late[FAKE_MAX_LATE];
static int nlate;
static struct {
	char op[32];
	int nth, err;
	bool sticky; /* nth and every later call */
} fail_script[16];
/* the script is read by the verbs worker's calls too (control/vwork.h, when a test starts it) */
static pthread_mutex_t script_mu = PTHREAD_MUTEX_INITIALIZER;

/* fake_vx_block(op): the next call of op waits (on a verbs worker's thread) */
static pthread_mutex_t block_mu = PTHREAD_MUTEX_INITIALIZER;
static pthread_cond_t block_cv = PTHREAD_COND_INITIALIZER;
static bool block_armed, block_open;
static char block_op[16];
static bool block_waiting;
static struct kvx_vx_qp *blocked_qp;
static int destroyed_in_call;
static pthread_t block_caller; /* the test's thread: its own calls never block */

void
fake_vx_install(void)
{
	kvx_vx = &fake_vx_ops;
	memset(&live, 0, sizeof(live));
	memset(mrs, 0, sizeof(mrs));
	memset(qps, 0, sizeof(qps));
	memset(fail_script, 0, sizeof(fail_script));
	hold_mode = defer_flush = false;
	refuse_doorbell_nth = refuse_doorbell_err = 0;
	refuse_wr_nth = refuse_wr_count = refuse_wr_err = 0;
	fake_max_sge = KVX_VX_MAX_SGE;
	writes_executed = 0;
	fail_write_status = 0;
	cq_arms = 0;
	keep_late = false;
	for (int i = 0; i < nlate; i++)
		free(late[i].data);
	nlate = 0;
	pthread_mutex_lock(&block_mu);
	block_armed = block_open = false;
	destroyed_in_call = 0;
	pthread_mutex_unlock(&block_mu);
}

void
fake_vx_block(const char *op)
{
	pthread_mutex_lock(&block_mu);
	snprintf(block_op, sizeof(block_op), "%s", op);
	block_armed = true;
	block_open = false;
	block_caller = pthread_self();
	pthread_mutex_unlock(&block_mu);
}

bool
fake_vx_blocked(void)
{
	bool b;

	pthread_mutex_lock(&block_mu);
	b = block_waiting;
	pthread_mutex_unlock(&block_mu);
	return b;
}

void
fake_vx_unblock(void)
{
	pthread_mutex_lock(&block_mu);
	block_open = true;
	pthread_cond_broadcast(&block_cv);
	pthread_mutex_unlock(&block_mu);
}

int
fake_vx_destroyed_in_call(void)
{
	int n;

	pthread_mutex_lock(&block_mu);
	n = destroyed_in_call;
	pthread_mutex_unlock(&block_mu);
	return n;
}

/* The blocked call: until fake_vx_unblock(), or -ETIMEDOUT after 2 s (rxe's resolution gives up
 * after 1 s). */
static int
block_wait(const char *op, struct kvx_vx_qp *q)
{
	struct timespec until;
	int rc = 0;

	pthread_mutex_lock(&block_mu);
	if (!block_armed || strcmp(op, block_op) != 0 ||
	    pthread_equal(pthread_self(), block_caller)) {
		pthread_mutex_unlock(&block_mu);
		return 0;
	}
	block_armed = false;
	block_waiting = true;
	blocked_qp = q;
	clock_gettime(CLOCK_REALTIME, &until);
	until.tv_sec += 2;
	while (!block_open && rc == 0)
		rc = pthread_cond_timedwait(&block_cv, &block_mu, &until);
	blocked_qp = NULL;
	block_waiting = false;
	block_open = false;
	pthread_mutex_unlock(&block_mu);
	return rc ? -ETIMEDOUT : 0;
}

struct fake_vx_live
fake_vx_live(void)
{
	return live;
}

static void
script_add(const char *op, int nth, int err, bool sticky)
{
	pthread_mutex_lock(&script_mu);
	for (int i = 0; i < 16; i++)
		if (!fail_script[i].nth) {
			snprintf(fail_script[i].op, sizeof(fail_script[i].op), "%s", op);
			fail_script[i].nth = nth;
			fail_script[i].err = err;
			fail_script[i].sticky = sticky;
			break;
		}
	pthread_mutex_unlock(&script_mu);
}

void
fake_vx_fail_call(const char *op, int nth, int err)
{
	script_add(op, nth, err, false);
}

void
fake_vx_fail_from(const char *op, int nth, int err)
{
	script_add(op, nth, err, true);
}

void
fake_vx_fail_stop(const char *op)
{
	for (int i = 0; i < 16; i++)
		if (fail_script[i].sticky && strcmp(fail_script[i].op, op) == 0)
			fail_script[i].nth = 0;
}

/* Returns the scripted error for this call of op, or 0. */
static int
scripted(const char *op)
{
	int rc = 0;

	pthread_mutex_lock(&script_mu);
	for (int i = 0; i < 16; i++) {
		if (!fail_script[i].nth || strcmp(fail_script[i].op, op) != 0)
			continue;
		if (fail_script[i].sticky && fail_script[i].nth == 1) {
			rc = fail_script[i].err; /* this call and every later one */
			break;
		}
		if (--fail_script[i].nth == 0) {
			rc = fail_script[i].err;
			break;
		}
	}
	pthread_mutex_unlock(&script_mu);
	return rc;
}

void
fake_vx_hold(bool on)
{
	hold_mode = on;
}

uint64_t
fake_vx_writes_executed(void)
{
	return writes_executed;
}

static int
fdev_open(const char *name, uint8_t port, uint8_t gid_index, struct kvx_vx_dev **out)
{
	int rc = scripted("dev_open");

	if (rc)
		return rc;
	*out = calloc(1, sizeof(**out));
	snprintf((*out)->name, sizeof((*out)->name), "%s", name);
	live.dev++;
	return 0;
}

static int
fdev_close(struct kvx_vx_dev *d)
{
	free(d);
	live.dev--;
	return 0;
}

static int
fdev_query(struct kvx_vx_dev *d, struct kvx_vx_dev_info *info)
{
	memset(info, 0, sizeof(*info));
	info->gid[10] = info->gid[11] = 0xff;
	info->active_mtu = 1024;
	info->numa_node = -1;
	info->max_sge = fake_max_sge;
	info->max_cqe = 1u << 22;
	snprintf(info->name, sizeof(info->name), "%s", d->name);
	return 0;
}

static int
fmr_reg(struct kvx_vx_dev *d, void *addr, size_t len, struct kvx_vx_mr **out)
{
	int rc = block_wait("mr_reg", NULL);

	if (rc)
		return rc;
	rc = scripted("mr_reg");

	if (rc)
		return rc;
	pthread_mutex_lock(&mr_mu);
	for (int i = 0; i < FAKE_MAX_MR; i++)
		if (!mrs[i]) {
			struct kvx_vx_mr *m = calloc(1, sizeof(*m));

			if (!m)
				break;
			m->dev = d;
			m->addr = addr;
			m->len = len;
			m->lkey = next_key++;
			m->rkey = next_key++;
			mrs[i] = m;
			*out = m;
			live.mr++;
			pthread_mutex_unlock(&mr_mu);
			return 0;
		}
	pthread_mutex_unlock(&mr_mu);
	return -ENOMEM;
}

static int
fmr_dereg(struct kvx_vx_mr *m)
{
	int rc = block_wait("mr_dereg", NULL);

	if (rc)
		return rc;
	rc = scripted("mr_dereg");

	if (rc)
		return rc;
	pthread_mutex_lock(&mr_mu);
	for (int i = 0; i < FAKE_MAX_MR; i++)
		if (mrs[i] == m)
			mrs[i] = NULL;
	free(m);
	live.mr--;
	pthread_mutex_unlock(&mr_mu);
	return 0;
}

static uint32_t
fmr_lkey(const struct kvx_vx_mr *m)
{
	return m->lkey;
}

static uint32_t
fmr_rkey(const struct kvx_vx_mr *m)
{
	return m->rkey;
}

static int
fcq_create(struct kvx_vx_dev *d, int depth, struct kvx_vx_cq **out)
{
	int rc = scripted("cq_create");

	if (rc)
		return rc;
	*out = calloc(1, sizeof(**out));
	(*out)->fd = eventfd(0, EFD_NONBLOCK);
	(*out)->dev = d;
	live.cq++;
	return 0;
}

static int
fcq_destroy(struct kvx_vx_cq *c)
{
	close(c->fd);
	free(c);
	live.cq--;
	return 0;
}

/* An armed CQ raises its event once (its fd becomes readable) and is disarmed, like
 * ibv_req_notify_cq; a CQ that is not armed raises nothing.  Returns whether it raised one. */
static bool
cq_raise(struct kvx_vx_cq *c)
{
	uint64_t one = 1;

	if (!c->armed)
		return false;
	c->armed = false;
	return write(c->fd, &one, sizeof(one)) == sizeof(one);
}

static void
cq_push(struct kvx_vx_cq *c, uint64_t wr_id, uint32_t status, uint32_t opcode, uint32_t imm,
	uint32_t qpn)
{
	static const char *const str[] = {"success", "Work Request Flushed Error",
					  "transport retry counter exceeded", "remote access error",
					  "general error"};
	struct kvx_vx_wc *w = &c->wc[c->tail++ % FAKE_CQ_DEPTH];

	*w = (struct kvx_vx_wc){.wr_id = wr_id,
				.status = status,
				.opcode = opcode,
				.imm = imm,
				.qpn = qpn,
				.status_str = str[status < 5 ? status : 4]};
	/* a device writes completions to memory; only an armed CQ raises an event */
	cq_raise(c);
}

static int
fcq_poll(struct kvx_vx_cq *c, struct kvx_vx_wc *wc, int max)
{
	int n = 0;

	while (n < max && c->head != c->tail)
		wc[n++] = c->wc[c->head++ % FAKE_CQ_DEPTH];
	return n;
}

static int
fcq_arm(struct kvx_vx_cq *c)
{
	int rc = scripted("cq_arm");

	if (rc)
		return rc;
	cq_arms++;
	c->armed = true;
	return 0;
}

uint64_t
fake_vx_cq_arms(void)
{
	return cq_arms;
}

bool
fake_vx_cq_fire(struct kvx_vx_cq *c)
{
	return cq_raise(c);
}

static int
fcq_fd(struct kvx_vx_cq *c)
{
	return c->fd;
}

static int
fcq_ack(struct kvx_vx_cq *c)
{
	uint64_t v;

	if (read(c->fd, &v, sizeof(v)) < 0)
		return 0;
	return 0;
}

static struct kvx_vx_qp *
qp_by_num(uint32_t qpn)
{
	for (int i = 0; i < FAKE_MAX_QP; i++)
		if (qps[i] && qps[i]->qpn == qpn)
			return qps[i];
	return NULL;
}

static int
fqp_create(struct kvx_vx_dev *d, struct kvx_vx_cq *cq, uint32_t sq, uint32_t rq,
	   struct kvx_vx_qp **out)
{
	int rc = scripted("qp_create");

	if (rc)
		return rc;
	if (cq->dev != d)
		return -EINVAL; /* like a device: a CQ of another device's context */
	for (int i = 0; i < FAKE_MAX_QP; i++)
		if (!qps[i]) {
			struct kvx_vx_qp *q = calloc(1, sizeof(*q));

			q->dev = d;
			q->qpn = next_qpn++;
			q->cq = cq;
			qps[i] = q;
			*out = q;
			live.qp++;
			return 0;
		}
	return -ENOMEM;
}

static void
late_keep(const struct kvx_vx_qp *q, const struct kvx_vx_write *w)
{
	uint64_t len = 0, off = 0;
	uint8_t *data;

	if (!keep_late || nlate == FAKE_MAX_LATE || !w->nsge)
		return;
	for (uint32_t k = 0; k < w->nsge; k++)
		len += w->sg[k].len;
	data = malloc(len);
	if (!data)
		return;
	for (uint32_t k = 0; k < w->nsge; k++) {
		memcpy(data + off, (void *)(uintptr_t)w->sg[k].addr, w->sg[k].len);
		off += w->sg[k].len;
	}
	late[nlate++] = (struct fake_late){.rqpn = q->remote_qpn,
					   .rkey = w->rkey,
					   .raddr = w->raddr,
					   .len = len,
					   .data = data};
}

void
fake_vx_keep_late(bool on)
{
	keep_late = on;
}

int
fake_vx_deliver_late(void)
{
	int placed = 0;

	for (int i = 0; i < nlate; i++) {
		struct kvx_vx_qp *r = qp_by_num(late[i].rqpn);

		pthread_mutex_lock(&mr_mu);
		for (int k = 0; r && r->state >= QPS_RTR && r->state != QPS_ERR && k < FAKE_MAX_MR;
		     k++)
			if (mrs[k] && mrs[k]->rkey == late[i].rkey && mrs[k]->dev == r->dev &&
			    late[i].raddr >= (uint64_t)(uintptr_t)mrs[k]->addr &&
			    late[i].raddr + late[i].len <=
				    (uint64_t)(uintptr_t)mrs[k]->addr + mrs[k]->len) {
				memcpy((void *)(uintptr_t)late[i].raddr, late[i].data, late[i].len);
				placed++;
				break;
			}
		pthread_mutex_unlock(&mr_mu);
		free(late[i].data);
	}
	nlate = 0;
	return placed;
}

static void
flush_all(struct kvx_vx_qp *q)
{
	while (q->held_head != q->held_tail) {
		struct kvx_vx_write *w = &q->held[q->held_head++ % FAKE_MAX_HELD];

		late_keep(q, w);

		cq_push(q->cq, w->wr_id, KVX_VX_WC_FLUSH_ERR, KVX_VX_WC_WRITE, 0, q->qpn);
	}
	fake_vx_flush_recv(q);
}

static int
fqp_destroy(struct kvx_vx_qp *q)
{
	int rc = scripted("qp_destroy");
	bool in_call;

	if (rc)
		return rc;
	pthread_mutex_lock(&block_mu);
	in_call = q == blocked_qp;
	destroyed_in_call += in_call;
	pthread_mutex_unlock(&block_mu);
	if (in_call)
		return -EBUSY; /* as uverbs answers while another call holds the QP */
	for (int i = 0; i < FAKE_MAX_QP; i++)
		if (qps[i] == q)
			qps[i] = NULL;
	free(q);
	live.qp--;
	return 0;
}

static uint32_t
fqp_num(const struct kvx_vx_qp *q)
{
	return q->qpn;
}

static int
fqp_init(struct kvx_vx_qp *q, const struct kvx_vx_qp_attr *a)
{
	int rc = scripted("qp_to_init");

	if (rc)
		return rc;
	q->state = QPS_INIT;
	return 0;
}

static int
fqp_rtr(struct kvx_vx_qp *q, const struct kvx_vx_qp_attr *a)
{
	int rc = block_wait("qp_to_rtr", q);

	if (rc)
		return rc;
	rc = scripted("qp_to_rtr");

	if (rc)
		return rc;
	q->state = QPS_RTR;
	q->remote_qpn = a->remote_qpn;
	return 0;
}

static int
fqp_rts(struct kvx_vx_qp *q, const struct kvx_vx_qp_attr *a)
{
	int rc = scripted("qp_to_rts");

	if (rc)
		return rc;
	q->state = QPS_RTS;
	return 0;
}

static int
fqp_err(struct kvx_vx_qp *q)
{
	int rc = scripted("qp_to_err");

	if (rc)
		return rc;
	q->state = QPS_ERR;
	if (!defer_flush)
		flush_all(q);
	return 0;
}

uint64_t
fake_vx_dev_writes(const struct kvx_vx_dev *d)
{
	return d->writes;
}

bool
fake_vx_qp_in_error(struct kvx_vx_qp *q)
{
	return q->state == QPS_ERR;
}

/* Execute one write now: data lands, the requester completes, an immediate consumes one of
 * the responder's receives.  Returns the completion status. */
static uint64_t send_cqes; /* send completions generated (signalled or failed) */

/* A local buffer lies inside an MR registered on the QP's device under its lkey (mr_mu held). */
static bool
local_ok(const struct kvx_vx_qp *q, const struct kvx_vx_sge *sg)
{
	for (int i = 0; i < FAKE_MAX_MR; i++)
		if (mrs[i] && mrs[i]->lkey == sg->lkey && mrs[i]->dev == q->dev &&
		    sg->addr >= (uint64_t)(uintptr_t)mrs[i]->addr &&
		    sg->addr + sg->len <= (uint64_t)(uintptr_t)mrs[i]->addr + mrs[i]->len)
			return true;
	return false;
}

static uint32_t
execute(struct kvx_vx_qp *q, const struct kvx_vx_write *w)
{
	struct kvx_vx_qp *r = qp_by_num(q->remote_qpn);
	struct kvx_vx_mr *m = NULL;

	uint64_t len = 0, off = 0;

	if (!r || r->state == QPS_ERR || r->state < QPS_RTR)
		return KVX_VX_WC_RETRY_EXC_ERR;
	/* held until the data landed: a deregistration waits for a write in progress */
	pthread_mutex_lock(&mr_mu);
	for (uint32_t k = 0; k < w->nsge; k++) {
		if (!local_ok(q, &w->sg[k])) {
			pthread_mutex_unlock(&mr_mu);
			return KVX_VX_WC_OTHER_ERR; /* local protection */
		}
		len += w->sg[k].len;
	}
	for (int i = 0; i < FAKE_MAX_MR; i++)
		if (mrs[i] && mrs[i]->rkey == w->rkey && mrs[i]->dev == r->dev &&
		    w->raddr >= (uint64_t)(uintptr_t)mrs[i]->addr &&
		    w->raddr + len <= (uint64_t)(uintptr_t)mrs[i]->addr + mrs[i]->len)
			m = mrs[i];
	if (!m) {
		pthread_mutex_unlock(&mr_mu);
		return KVX_VX_WC_REM_ACCESS_ERR;
	}
	if (w->with_imm && r->recv_head == r->recv_tail) {
		pthread_mutex_unlock(&mr_mu);
		return KVX_VX_WC_OTHER_ERR; /* RNR */
	}
	for (uint32_t k = 0; k < w->nsge; k++) { /* gathered in order */
		memcpy((void *)(uintptr_t)(w->raddr + off), (void *)(uintptr_t)w->sg[k].addr,
		       w->sg[k].len);
		off += w->sg[k].len;
	}
	pthread_mutex_unlock(&mr_mu);
	writes_executed++;
	q->dev->writes++;
	if (w->with_imm)
		cq_push(r->cq, r->recv_ids[r->recv_head++ % 1024], KVX_VX_WC_SUCCESS,
			KVX_VX_WC_RECV_WITH_IMM, w->imm, r->qpn);
	return KVX_VX_WC_SUCCESS;
}

static void
complete(struct kvx_vx_qp *q, const struct kvx_vx_write *w, uint32_t status)
{
	/* like a device: an unsignalled WR completes silently unless it fails */
	if (w->signaled || status != KVX_VX_WC_SUCCESS) {
		cq_push(q->cq, w->wr_id, status, KVX_VX_WC_WRITE, 0, q->qpn);
		send_cqes++;
	}
	if (status != KVX_VX_WC_SUCCESS) {
		q->state = QPS_ERR;
		if (!defer_flush)
			flush_all(q);
	}
}

/* A write the fake runs now (posted outside hold mode, or released): executed, or failed with
 * fake_vx_fail_next_write's status (kept as a late write, as fake_vx_fail_next's). */
static void
run_write(struct kvx_vx_qp *q, const struct kvx_vx_write *w)
{
	uint32_t status = fail_write_status;

	if (!status) {
		complete(q, w, execute(q, w));
		return;
	}
	fail_write_status = 0;
	late_keep(q, w);
	complete(q, w, status);
}

void
fake_vx_fail_next_write(uint32_t status)
{
	fail_write_status = status;
}

void
fake_vx_set_max_sge(uint32_t n)
{
	fake_max_sge = n;
}

uint64_t
fake_vx_send_cqes(void)
{
	return send_cqes;
}

void
fake_vx_defer_flush(bool on)
{
	defer_flush = on;
}

void
fake_vx_flush(struct kvx_vx_qp *q)
{
	flush_all(q);
}

void
fake_vx_flush_recv(struct kvx_vx_qp *q)
{
	while (q->recv_head != q->recv_tail)
		cq_push(q->cq, q->recv_ids[q->recv_head++ % 1024], KVX_VX_WC_FLUSH_ERR,
			KVX_VX_WC_RECV, 0, q->qpn);
}

static int
fpost_write(struct kvx_vx_qp *q, const struct kvx_vx_write *w, int n, int *posted)
{
	int rc = scripted("post_write_chain");

	*posted = 0;
	if (rc)
		return rc;
	if (refuse_doorbell_nth && --refuse_doorbell_nth == 0) {
		/* rxe on a QP not in RTS: every WR is queued, the post fails without naming a bad
		 * WR, and they run never; they flush once the QP goes to ERR */
		for (int i = 0; i < n; i++)
			q->held[q->held_tail++ % FAKE_MAX_HELD] = w[i];
		*posted = n;
		return refuse_doorbell_err;
	}
	for (int i = 0; i < n; i++) {
		if (w[i].nsge > fake_max_sge || (!w[i].nsge && !w[i].signaled))
			return -EINVAL; /* like a device: the bad WR and the rest are refused (no
					 * entries: only a marker, or the immediate that ends a
					 * share on a rail, both signalled) */
		if (refuse_wr_count && --refuse_wr_nth <= 0) {
			refuse_wr_count--;
			return refuse_wr_err;
		}
		if (q->state == QPS_ERR) {
			cq_push(q->cq, w[i].wr_id, KVX_VX_WC_FLUSH_ERR, KVX_VX_WC_WRITE, 0, q->qpn);
		} else if (hold_mode) {
			q->held[q->held_tail++ % FAKE_MAX_HELD] = w[i];
		} else {
			run_write(q, &w[i]);
		}
		(*posted)++;
	}
	return 0;
}

static int
fpost_recv(struct kvx_vx_qp *q, const uint64_t *ids, int n, int *posted)
{
	int rc = scripted("post_recv_burst");

	*posted = 0;
	if (rc)
		return rc;
	*posted = n;
	for (int i = 0; i < n; i++) {
		if (q->state == QPS_ERR)
			cq_push(q->cq, ids[i], KVX_VX_WC_FLUSH_ERR, KVX_VX_WC_RECV, 0, q->qpn);
		else
			q->recv_ids[q->recv_tail++ % 1024] = ids[i];
	}
	return 0;
}

void
fake_vx_refuse_wr(int nth, int count, int err)
{
	refuse_wr_nth = nth;
	refuse_wr_count = count;
	refuse_wr_err = err;
}

void
fake_vx_refuse_doorbell(int nth, int err)
{
	refuse_doorbell_nth = nth;
	refuse_doorbell_err = err;
}

int
fake_vx_release(struct kvx_vx_qp *q, int n)
{
	int done = 0;

	while (done < n && q->held_head != q->held_tail && q->state != QPS_ERR) {
		struct kvx_vx_write w = q->held[q->held_head++ % FAKE_MAX_HELD];

		run_write(q, &w);
		done++;
	}
	return done;
}

int
fake_vx_fail_next(struct kvx_vx_qp *q, uint32_t status)
{
	struct kvx_vx_write w;

	if (q->held_head == q->held_tail)
		return -ENOENT;
	w = q->held[q->held_head++ % FAKE_MAX_HELD];
	late_keep(q, &w);
	complete(q, &w, status);
	return 0;
}

int
fake_vx_held(struct kvx_vx_qp *q)
{
	return (int)(q->held_tail - q->held_head);
}

const struct kvx_vx_ops fake_vx_ops = {
	.name = "fake",
	.dev_open = fdev_open,
	.dev_close = fdev_close,
	.dev_query = fdev_query,
	.mr_reg = fmr_reg,
	.mr_dereg = fmr_dereg,
	.mr_lkey = fmr_lkey,
	.mr_rkey = fmr_rkey,
	.cq_create = fcq_create,
	.cq_destroy = fcq_destroy,
	.cq_poll_burst = fcq_poll,
	.cq_arm = fcq_arm,
	.cq_fd = fcq_fd,
	.cq_ack_events = fcq_ack,
	.qp_create = fqp_create,
	.qp_destroy = fqp_destroy,
	.qp_num = fqp_num,
	.qp_to_init = fqp_init,
	.qp_to_rtr = fqp_rtr,
	.qp_to_rts = fqp_rts,
	.qp_to_err = fqp_err,
	.post_write_chain = fpost_write,
	.post_recv_burst = fpost_recv,
};
