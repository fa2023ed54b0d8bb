/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <unistd.h>

#include "control/vwork.h"
#include "core/log.h"

/* Bring the job's lanes to RTR, then RTS, in lane order.  A rail whose lane failed is not
 * tried again on its other lanes (the control core fences that rail), and once kvxd stops or
 * the session ended (cancel) nothing more is tried: over a cut link each call takes a second,
 * and the sessions queued behind wait for it. */
static void
run_connect(struct kvxd_vwork *w, struct kvxd_vjob *j)
{
	uint32_t failed_rails = 0;

	for (int c = 0; c < KVXD_MAX_LANES; c++) {
		if (!(j->lanes & 1u << c))
			continue;
		j->stage[c] = KVXD_VJOB_NONE;
		j->rc[c] = 0;
		if (failed_rails & 1u << j->rail[c] ||
		    __atomic_load_n(&w->stop, __ATOMIC_RELAXED) ||
		    __atomic_load_n(&j->cancel, __ATOMIC_RELAXED))
			continue;
		j->rc[c] = kvx_vx->qp_to_rtr(j->qp[c], &j->attr[c]);
		if (j->rc[c]) {
			j->stage[c] = KVXD_VJOB_FAILED;
			failed_rails |= 1u << j->rail[c];
			continue;
		}
		j->stage[c] = KVXD_VJOB_RTR;
		j->rc[c] = kvx_vx->qp_to_rts(j->qp[c], &j->attr[c]);
		if (j->rc[c]) {
			failed_rails |= 1u << j->rail[c];
			continue;
		}
		j->stage[c] = KVXD_VJOB_RTS;
	}
}

/* Register the pool's memory on every rail, until one fails (-ECANCELED once kvxd stops).
 * The rails registered before a failure keep their MR: the control core deregisters them. */
static void
run_mr_reg(struct kvxd_vwork *w, struct kvxd_vjob *j)
{
	struct kvxd_pool *p = j->pool;

	j->mr_rc = 0;
	for (int k = 0; k < j->nrails; k++) {
		j->mr_rail = k;
		if (__atomic_load_n(&w->stop, __ATOMIC_RELAXED)) {
			j->mr_rc = -ECANCELED;
			return;
		}
		j->mr_rc = kvx_vx->mr_reg(j->dev[k], p->base, p->len, &p->mr[k]);
		if (j->mr_rc) {
			p->mr[k] = NULL;
			return;
		}
	}
}

/* Deregister the pool's memory on every rail that has it, until one fails; once none is left,
 * unmap it (the unmap of a large mapping takes its time too).  Once kvxd stops nothing is
 * tried: the control core deregisters what is left at its shutdown. */
static void
run_mr_dereg(struct kvxd_vwork *w, struct kvxd_vjob *j)
{
	struct kvxd_pool *p = j->pool;

	j->mr_rc = 0;
	j->unmapped = false;
	for (int k = 0; k < KVX_MAX_RAILS; k++) {
		if (!p->mr[k])
			continue;
		if (__atomic_load_n(&w->stop, __ATOMIC_RELAXED))
			return;
		j->mr_rail = k;
		j->mr_rc = kvx_vx->mr_dereg(p->mr[k]);
		if (j->mr_rc)
			return;
		p->mr[k] = NULL;
	}
	munmap(p->base, p->map_len);
	j->unmapped = true;
}

static void
run_job(struct kvxd_vwork *w, struct kvxd_vjob *j)
{
	if (j->kind == KVXD_VJOB_CONNECT)
		run_connect(w, j);
	else if (j->kind == KVXD_VJOB_MR_DEREG)
		run_mr_dereg(w, j);
	else
		run_mr_reg(w, j);
}

static void
push_done(struct kvxd_vwork *w, struct kvxd_vjob *j)
{
	j->next = w->done;
	w->done = j;
}

static struct kvxd_vjob *
pop_todo(struct kvxd_vwork *w, int kind)
{
	struct kvxd_vjob *j = w->todo[kind];

	if (j) {
		w->todo[kind] = j->next;
		if (!w->todo[kind])
			w->todo_tail[kind] = &w->todo[kind];
	}
	return j;
}

static void *
worker(void *arg)
{
	struct kvxd_vwork *w = ((struct kvxd_vwork_arg *)arg)->w;
	int kind = ((struct kvxd_vwork_arg *)arg)->kind;
	uint64_t one = 1;

	pthread_mutex_lock(&w->mu);
	for (;;) {
		struct kvxd_vjob *j;

		while (!w->todo[kind] && !w->stop)
			pthread_cond_wait(&w->cv[kind], &w->mu);
		j = pop_todo(w, kind);
		if (!j)
			break; /* stopping, and nothing queued */
		pthread_mutex_unlock(&w->mu);
		run_job(w, j);
		pthread_mutex_lock(&w->mu);
		push_done(w, j);
		/* a full counter (never: the loop reads it every pass) only means "readable" */
		if (write(w->efd, &one, sizeof(one)) < 0 && errno != EAGAIN)
			KVX_ERR("verbs worker: eventfd write: %s", strerror(errno));
	}
	pthread_mutex_unlock(&w->mu);
	return NULL;
}

static void
init_queues(struct kvxd_vwork *w)
{
	for (int k = 0; k < KVXD_VJOB_KINDS; k++)
		if (!w->todo_tail[k])
			w->todo_tail[k] = &w->todo[k];
}

/* Threads of each kind, in kind order, from the configuration (a count the configuration
 * cannot have, as a node of the unit tests' may leave it: the default). */
static int
set_kind_threads(struct kvxd_vwork *w, const struct kvx_config *cfg)
{
	const uint32_t want[KVXD_VJOB_KINDS] = {cfg->connect_workers, cfg->mr_workers, 1};
	int n = 0;

	for (int k = 0; k < KVXD_VJOB_KINDS; k++) {
		w->kind_threads[k] = want[k] >= 1 && want[k] <= KVX_CFG_WORKERS_MAX
					     ? (int)want[k]
					     : KVX_CFG_WORKERS_DEFAULT;
		n += w->kind_threads[k];
	}
	return n;
}

/* The kind of thread i's jobs. */
static int
thread_kind(const struct kvxd_vwork *w, int i)
{
	int k = 0;

	while (k < KVXD_VJOB_KINDS - 1 && i >= w->kind_threads[k])
		i -= w->kind_threads[k++];
	return k;
}

static void
wake_all(struct kvxd_vwork *w)
{
	for (int k = 0; k < KVXD_VJOB_KINDS; k++)
		pthread_cond_broadcast(&w->cv[k]);
}

int
kvxd_vwork_start(struct kvxd *d)
{
	static const char *const names[KVXD_VJOB_KINDS] = {"kvxd-connect", "kvxd-mr-reg",
							   "kvxd-mr-dereg"};
	struct kvxd_vwork *w = &d->vwork;
	int rc, n = 0, total = set_kind_threads(w, &d->cfg);

	init_queues(w);
	w->stop = false;
	w->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (w->efd < 0)
		return -errno;
	pthread_mutex_init(&w->mu, NULL);
	for (int k = 0; k < KVXD_VJOB_KINDS; k++)
		pthread_cond_init(&w->cv[k], NULL);
	w->ev = (struct kvxd_fd){.kind = KVXD_FD_VWORK, .ptr = w};
	rc = kvxd_epoll_add(d, w->efd, &w->ev, EPOLLIN);
	for (; rc == 0 && n < total; n++) {
		int kind = thread_kind(w, n);

		w->arg[n] = (struct kvxd_vwork_arg){.w = w, .kind = kind};
		rc = -pthread_create(&w->thread[n], NULL, worker, &w->arg[n]);
		if (rc)
			break;
		pthread_setname_np(w->thread[n], names[kind]);
		if (w->has_cpus &&
		    (errno = pthread_setaffinity_np(w->thread[n], sizeof(w->cpus), &w->cpus)))
			KVX_WARN("verbs worker %s: cannot set its CPUs: %s", names[kind],
				 strerror(errno));
	}
	if (rc) {
		pthread_mutex_lock(&w->mu);
		w->stop = true;
		wake_all(w);
		pthread_mutex_unlock(&w->mu);
		while (n-- > 0)
			pthread_join(w->thread[n], NULL);
		for (int k = 0; k < KVXD_VJOB_KINDS; k++)
			pthread_cond_destroy(&w->cv[k]);
		pthread_mutex_destroy(&w->mu);
		close(w->efd);
		w->efd = -1;
		w->stop = false;
		return rc;
	}
	w->nthreads = total;
	w->started = true;
	return 0;
}

void
kvxd_vwork_stop(struct kvxd *d)
{
	struct kvxd_vwork *w = &d->vwork;

	if (!w->started)
		return;
	pthread_mutex_lock(&w->mu);
	__atomic_store_n(&w->stop, true, __ATOMIC_RELAXED);
	wake_all(w);
	pthread_mutex_unlock(&w->mu);
	for (int i = 0; i < w->nthreads; i++)
		pthread_join(w->thread[i], NULL);
	/* every queued job went through run_job (stopping: no call) and is done */
	epoll_ctl(d->epfd, EPOLL_CTL_DEL, w->efd, NULL);
	close(w->efd);
	w->efd = -1;
	for (int k = 0; k < KVXD_VJOB_KINDS; k++)
		pthread_cond_destroy(&w->cv[k]);
	pthread_mutex_destroy(&w->mu);
	w->started = false;
}

void
kvxd_vwork_submit(struct kvxd *d, struct kvxd_vjob *j)
{
	struct kvxd_vwork *w = &d->vwork;
	int kind = j->kind < KVXD_VJOB_KINDS ? j->kind : KVXD_VJOB_MR_REG;

	init_queues(w);
	j->next = NULL;
	j->busy = true;
	j->cancel = false;
	w->nbusy++;
	if (w->started)
		pthread_mutex_lock(&w->mu);
	*w->todo_tail[kind] = j;
	w->todo_tail[kind] = &j->next;
	if (w->started) {
		pthread_cond_signal(&w->cv[kind]);
		pthread_mutex_unlock(&w->mu);
	}
}

void
kvxd_vwork_on_event(struct kvxd *d)
{
	uint64_t n;

	if (read(d->vwork.efd, &n, sizeof(n)) < 0 && errno != EAGAIN)
		KVX_ERR("verbs worker: eventfd read: %s", strerror(errno));
}

void
kvxd_vwork_run_inline(struct kvxd *d)
{
	struct kvxd_vwork *w = &d->vwork;

	if (w->started)
		return;
	init_queues(w);
	for (int k = 0; k < KVXD_VJOB_KINDS; k++) {
		struct kvxd_vjob *j;

		while ((j = pop_todo(w, k))) {
			run_job(w, j);
			push_done(w, j);
		}
	}
}

struct kvxd_vjob *
kvxd_vwork_take_done(struct kvxd *d)
{
	struct kvxd_vwork *w = &d->vwork;
	struct kvxd_vjob *list, *rev = NULL;

	if (!w->nbusy)
		return NULL;
	if (w->started)
		pthread_mutex_lock(&w->mu);
	list = w->done;
	w->done = NULL;
	if (w->started)
		pthread_mutex_unlock(&w->mu);
	while (list) { /* oldest first */
		struct kvxd_vjob *j = list;

		list = j->next;
		j->next = rev;
		rev = j;
		j->busy = false;
		w->nbusy--;
	}
	return rev;
}
