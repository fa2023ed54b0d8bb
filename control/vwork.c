/* SPDX-License-Identifier: Apache-2.0 */
#include <errno.h>
#include <pthread.h>
#include <stdint.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <unistd.h>

#include "control/vwork.h"
#include "core/log.h"

/* Bring the job's lanes to RTR, then RTS, in lane order.  A rail whose lane failed is not
 * tried again on its other lanes (the control core fences that rail), and once kvxd stops
 * nothing more is tried. */
static void
run_job(struct kvxd_vwork *w, struct kvxd_vjob *j)
{
	uint32_t failed_rails = 0;

	for (int c = 0; c < KVXD_MAX_LANES; c++) {
		if (!(j->lanes & 1u << c))
			continue;
		j->stage[c] = KVXD_VJOB_NONE;
		j->rc[c] = 0;
		if (failed_rails & 1u << j->rail[c] || __atomic_load_n(&w->stop, __ATOMIC_RELAXED))
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

static void
push_done(struct kvxd_vwork *w, struct kvxd_vjob *j)
{
	j->next = w->done;
	w->done = j;
}

static void *
worker(void *arg)
{
	struct kvxd_vwork *w = arg;
	uint64_t one = 1;

	pthread_mutex_lock(&w->mu);
	for (;;) {
		struct kvxd_vjob *j;

		while (!w->todo && !w->stop)
			pthread_cond_wait(&w->cv, &w->mu);
		if (!w->todo)
			break; /* stopping, and nothing queued */
		j = w->todo;
		w->todo = j->next;
		if (!w->todo)
			w->todo_tail = &w->todo;
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

int
kvxd_vwork_start(struct kvxd *d)
{
	struct kvxd_vwork *w = &d->vwork;
	int rc;

	w->todo_tail = &w->todo;
	w->efd = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
	if (w->efd < 0)
		return -errno;
	pthread_mutex_init(&w->mu, NULL);
	pthread_cond_init(&w->cv, NULL);
	w->ev = (struct kvxd_fd){.kind = KVXD_FD_VWORK, .ptr = w};
	rc = kvxd_epoll_add(d, w->efd, &w->ev, EPOLLIN);
	if (rc == 0)
		rc = -pthread_create(&w->thread, NULL, worker, w);
	if (rc) {
		pthread_cond_destroy(&w->cv);
		pthread_mutex_destroy(&w->mu);
		close(w->efd);
		w->efd = -1;
		return rc;
	}
	pthread_setname_np(w->thread, "kvxd-verbs");
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
	pthread_cond_signal(&w->cv);
	pthread_mutex_unlock(&w->mu);
	pthread_join(w->thread, NULL);
	/* every queued job went through run_job (stopping: no call) and is done */
	epoll_ctl(d->epfd, EPOLL_CTL_DEL, w->efd, NULL);
	close(w->efd);
	w->efd = -1;
	pthread_cond_destroy(&w->cv);
	pthread_mutex_destroy(&w->mu);
	w->started = false;
}

void
kvxd_vwork_submit(struct kvxd *d, struct kvxd_vjob *j)
{
	struct kvxd_vwork *w = &d->vwork;

	if (!w->todo_tail)
		w->todo_tail = &w->todo;
	j->next = NULL;
	j->busy = true;
	w->nbusy++;
	if (w->started)
		pthread_mutex_lock(&w->mu);
	*w->todo_tail = j;
	w->todo_tail = &j->next;
	if (w->started) {
		pthread_cond_signal(&w->cv);
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

	if (w->started || w->held)
		return;
	while (w->todo) {
		struct kvxd_vjob *j = w->todo;

		w->todo = j->next;
		if (!w->todo)
			w->todo_tail = &w->todo;
		run_job(w, j);
		push_done(w, j);
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
