/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Engine sessions on the local Unix socket (core/engine_proto.h): pools, rooms, chunks,
 * events, operator commands.  Every request is validated here; a bad one is refused with a
 * specific errno and affects only the sending engine.  Thread: the control core.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "control/kvxd.h"
#include "core/engine_proto.h"
#include "core/fault.h"
#include "core/log.h"
#include "core/rand.h"

#define POOL_PAGE_MAX (16u << 20)    /* bytes in one page */
#define POOL_BYTES_MAX (64ull << 30) /* bytes in one pool */
#define CRED_GROUPS_MAX 65536	     /* NGROUPS_MAX on Linux */
#define REFUSED_PER_UID_MAX 4	     /* refused sessions of one uid kept to tell them why */

/* ---- credentials --------------------------------------------------------------------------- */

/* The groups of uid's account (the fallback when the kernel has no SO_PEERGROUPS).  NSS may be
 * consulted here: on the control core only on such kernels. */
static int
groups_from_db(struct kvxd_cred *c)
{
	struct passwd pw, *res = NULL;
	char buf[4096];
	int n = 64;
	gid_t *g;

	if (getpwuid_r(c->uid, &pw, buf, sizeof(buf), &res) || !res)
		return 0; /* no account: the primary gid only */
	for (;;) {
		int want = n;

		g = realloc(c->groups, sizeof(gid_t) * (size_t)n);
		if (!g)
			return -ENOMEM;
		c->groups = g;
		if (getgrouplist(pw.pw_name, c->gid, g, &want) >= 0) {
			c->ngroups = want;
			return 0;
		}
		if (want <= n || want > CRED_GROUPS_MAX)
			return -E2BIG;
		n = want;
	}
}

int
kvxd_cred_read(int fd, struct kvxd_cred *c)
{
	struct ucred uc;
	socklen_t len = sizeof(uc);

	*c = (struct kvxd_cred){0};
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &uc, &len) < 0)
		return -errno;
	c->uid = uc.uid;
	c->gid = uc.gid;
	c->pid = uc.pid;
	len = 64 * sizeof(gid_t);
	for (;;) {
		gid_t *g = realloc(c->groups, len ? len : sizeof(gid_t));

		if (!g) {
			kvxd_cred_fini(c);
			return -ENOMEM;
		}
		c->groups = g;
		if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, g, &len) == 0) {
			c->ngroups = (int)(len / sizeof(gid_t));
			return 0;
		}
		if (errno == ENOPROTOOPT) { /* Linux before 4.13 */
			int rc = groups_from_db(c);

			if (rc)
				kvxd_cred_fini(c);
			return rc;
		}
		/* ERANGE: len now says how much the list needs */
		if (errno != ERANGE || len > CRED_GROUPS_MAX * sizeof(gid_t)) {
			int rc = -errno;

			kvxd_cred_fini(c);
			return rc;
		}
	}
}

void
kvxd_cred_fini(struct kvxd_cred *c)
{
	free(c->groups);
	c->groups = NULL;
	c->ngroups = 0;
}

bool
kvxd_cred_in_group(const struct kvxd_cred *c, gid_t gid)
{
	if (c->gid == gid)
		return true;
	for (int i = 0; i < c->ngroups; i++)
		if (c->groups[i] == gid)
			return true;
	return false;
}

bool
kvxd_cred_may_connect(const struct kvxd *d, const struct kvxd_cred *c)
{
	return c->uid == 0 || c->uid == d->self_uid || kvxd_cred_in_group(c, d->sock_gid);
}

bool
kvxd_cred_is_admin(const struct kvxd *d, const struct kvxd_cred *c)
{
	return c->uid == 0 || c->uid == d->self_uid ||
	       (d->has_admin_gid && kvxd_cred_in_group(c, d->admin_gid));
}

/* [engine] admin_group: a group name (or a numeric gid) into d->admin_gid. */
static int
admin_group_resolve(struct kvxd *d)
{
	const char *name = d->cfg.admin_group;
	struct group gr, *res = NULL;
	size_t size = 4096;
	char *end;
	int rc;

	d->has_admin_gid = false;
	if (!name[0])
		return 0;
	for (;;) {
		char *buf = malloc(size);

		if (!buf)
			return -ENOMEM;
		rc = getgrnam_r(name, &gr, buf, size, &res);
		if (rc == 0 && res)
			d->admin_gid = gr.gr_gid;
		free(buf);
		if (rc != ERANGE || size >= (1u << 20))
			break;
		size *= 2;
	}
	if (rc == 0 && res) {
		d->has_admin_gid = true;
		return 0;
	}
	errno = 0;
	d->admin_gid = (gid_t)strtoul(name, &end, 10);
	if (name[0] >= '0' && name[0] <= '9' && *end == '\0' && errno == 0) {
		d->has_admin_gid = true;
		return 0;
	}
	KVX_ERR("[engine] admin_group '%s': no such group%s%s", name, rc ? ": " : "",
		rc ? strerror(rc) : "");
	return -ENOENT;
}

/* ---- the socket ---------------------------------------------------------------------------- */

/* May kvxd bind at path?  Only a missing path, or kvxd's own stale socket (removed here).
 * The probe and the unlink are not atomic: two kvxd started at the same instant on one path
 * are not told apart (a lock file would be needed for that). */
static int
path_claim(const struct kvxd *d, const char *path)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	struct stat st;
	int fd, rc;

	if (lstat(path, &st) < 0) {
		if (errno == ENOENT)
			return 0;
		rc = -errno;
		KVX_ERR("engine socket %s: %s", path, strerror(errno));
		return rc;
	}
	if (!S_ISSOCK(st.st_mode)) {
		KVX_ERR("engine socket %s: the path exists and is not a socket: refusing to "
			"replace "
			"it (remove it, or set [engine] socket to another path)",
			path);
		return -EEXIST;
	}
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	rc = connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 ? -errno : 0;
	close(fd);
	if (rc == 0 || rc == -EAGAIN || rc == -EPROTOTYPE) {
		/* accepted, a full backlog, or a live socket of another type */
		KVX_ERR("engine socket %s: a process is listening there (another kvxd?): refusing "
			"to start",
			path);
		return -EADDRINUSE;
	}
	if (rc != -ECONNREFUSED) {
		KVX_ERR("engine socket %s: cannot tell whether it is in use (%s): refusing to "
			"replace it",
			path, strerror(-rc));
		return rc;
	}
	if (st.st_uid != d->self_uid) {
		KVX_ERR("engine socket %s: a stale socket owned by uid %u, not by kvxd's uid %u: "
			"refusing to remove it",
			path, (unsigned)st.st_uid, (unsigned)d->self_uid);
		return -EPERM;
	}
	if (unlink(path) < 0 && errno != ENOENT) {
		rc = -errno;
		KVX_ERR("engine socket %s: removing the stale socket: %s", path, strerror(errno));
		return rc;
	}
	KVX_INFO("engine socket %s: removed a stale socket of an earlier kvxd", path);
	return 0;
}

int
kvxd_engine_listen(struct kvxd *d)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	const char *path = d->cfg.socket_path;
	struct stat st;
	int fd, rc;

	d->self_uid = geteuid();
	rc = admin_group_resolve(d);
	if (rc)
		return rc;
	rc = path_claim(d, path);
	if (rc)
		return rc;
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	/* bind() creates the file with the socket inode's mode minus the umask: set that mode
	 * first, so the file is never looser than socket_mode, not even between bind and chmod;
	 * the chmod then gives back what the umask took (the process-wide umask is left alone). */
	if (fchmod(fd, d->cfg.socket_mode) < 0 || bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0)
		goto err_close;
	if (chmod(path, d->cfg.socket_mode) < 0 || lstat(path, &st) < 0 || listen(fd, 64) < 0)
		goto err_unlink;
	d->sock_gid = st.st_gid;
	d->eng_dev = st.st_dev;
	d->eng_ino = st.st_ino;
	d->eng_fd = fd;
	return 0;

err_unlink:
	rc = -errno;
	unlink(path);
	goto err_log;
err_close:
	rc = -errno;
err_log:
	KVX_ERR("engine socket %s: %s", path, strerror(-rc));
	close(fd);
	return rc;
}

void
kvxd_engine_unlisten(struct kvxd *d)
{
	struct stat st;

	if (d->eng_fd < 0)
		return;
	close(d->eng_fd);
	d->eng_fd = -1;
	if (lstat(d->cfg.socket_path, &st) == 0 && S_ISSOCK(st.st_mode) &&
	    st.st_dev == d->eng_dev && st.st_ino == d->eng_ino)
		unlink(d->cfg.socket_path);
}

static struct kvxd_engine *
engine_by_id(struct kvxd *d, int id)
{
	for (int i = 0; i < KVXD_MAX_ENGINES; i++)
		if (d->engines[i] && d->engines[i]->id == id)
			return d->engines[i];
	return NULL;
}

/* Sessions of uid that count against max_sessions_per_uid, and refused ones kept open. */
static void
sessions_of(const struct kvxd *d, uid_t uid, uint32_t *live, uint32_t *refused)
{
	*live = *refused = 0;
	for (int i = 0; i < KVXD_MAX_ENGINES; i++) {
		const struct kvxd_engine *e = d->engines[i];

		if (!e || e->uid != uid || e->doomed)
			continue;
		if (e->refused)
			(*refused)++;
		else
			(*live)++;
	}
}

void
kvxd_engine_accept(struct kvxd *d)
{
	for (;;) {
		int fd = accept4(d->eng_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC), slot = -1;
		uint32_t live, refused;
		struct kvxd_cred cred;
		struct kvxd_engine *e;
		int rc;

		if (fd < 0)
			return;
		/* The socket's mode lets the owner and group in; the credentials must match too:
		 * root, our uid, or a member of the socket's group by any of its groups. */
		rc = kvxd_cred_read(fd, &cred);
		if (rc || !kvxd_cred_may_connect(d, &cred)) {
			d->ctr.engine_refused++;
			if (rc)
				KVX_WARN("engine connection refused: no credentials: %s",
					 strerror(-rc));
			else
				KVX_WARN("engine connection refused: pid %d uid %u gid %u: not "
					 "root, kvxd's uid or in the socket's group %u",
					 (int)cred.pid, (unsigned)cred.uid, (unsigned)cred.gid,
					 (unsigned)d->sock_gid);
			kvxd_cred_fini(&cred);
			close(fd);
			continue;
		}
		sessions_of(d, cred.uid, &live, &refused);
		if (live >= d->cfg.max_sessions_per_uid && refused >= REFUSED_PER_UID_MAX) {
			d->ctr.cap_sessions++;
			kvxd_cred_fini(&cred);
			close(fd); /* enough of its sessions are already being told why */
			continue;
		}
		for (int i = 0; i < KVXD_MAX_ENGINES; i++)
			if (!d->engines[i]) {
				slot = i;
				break;
			}
		e = slot >= 0 ? calloc(1, sizeof(*e)) : NULL;
		if (!e) {
			KVX_WARN("engine connection refused: %d sessions already",
				 KVXD_MAX_ENGINES);
			kvxd_cred_fini(&cred);
			close(fd);
			continue;
		}
		e->id = ++d->next_engine_id;
		e->fd = fd;
		CDS_INIT_LIST_HEAD(&e->rooms);
		e->uid = cred.uid;
		e->gid = cred.gid;
		e->pid = cred.pid;
		e->admin = kvxd_cred_is_admin(d, &cred);
		kvxd_cred_fini(&cred);
		if (live >= d->cfg.max_sessions_per_uid) {
			d->ctr.cap_sessions++;
			e->refused = -EDQUOT;
			snprintf(
				e->refused_text, sizeof(e->refused_text),
				"uid %u has %u engine sessions: [engine] max_sessions_per_uid = %u",
				(unsigned)e->uid, live, d->cfg.max_sessions_per_uid);
			KVX_WARN("engine %d (pid %d): session refused: %s", e->id, (int)e->pid,
				 e->refused_text);
		}
		e->ev = (struct kvxd_fd){.kind = KVXD_FD_ENGINE, .ptr = e};
		d->engines[slot] = e;
		kvxd_epoll_add(d, fd, &e->ev, EPOLLIN);
	}
}

/* ---- replies and events: a per-engine queue, never a wait ---------------------------------- */

static void
outq_drop(struct kvxd *d, struct kvxd_engine *e)
{
	while (e->outq_head) {
		struct kvxd_outmsg *m = e->outq_head;

		e->outq_head = m->next;
		if (m->event)
			d->ctr.events_dropped++;
		free(m);
	}
	e->outq_tail = NULL;
	e->outq_bytes = 0;
}

/* Close the session at the end of this loop iteration (kvxd_engine_reap); nothing more is
 * sent to it or read from it. */
static void
engine_doom(struct kvxd *d, struct kvxd_engine *e, const char *why)
{
	if (e->doomed)
		return;
	e->doomed = true;
	outq_drop(d, e);
	KVX_INFO("engine %d (pid %d uid %u): closing its session: %s", e->id, (int)e->pid,
		 (unsigned)e->uid, why);
}

/* Send what waits, in order, as far as the socket takes it.  0, or -errno (session broken). */
static int
outq_flush(struct kvxd *d, struct kvxd_engine *e)
{
	while (e->outq_head) {
		struct kvxd_outmsg *m = e->outq_head;
		ssize_t n = send(e->fd, m->data, m->len, MSG_DONTWAIT | MSG_NOSIGNAL);

		if (n < 0) {
			if (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)
				break;
			return -errno;
		}
		if ((size_t)n != m->len)
			return -EMSGSIZE; /* SEQPACKET: whole or nothing */
		if (m->event)
			d->ctr.events_sent++;
		e->outq_bytes -= m->len;
		e->outq_head = m->next;
		if (!e->outq_head)
			e->outq_tail = NULL;
		free(m);
	}
	kvxd_epoll_mod(d, e->fd, &e->ev, EPOLLIN | (e->outq_head ? EPOLLOUT : 0));
	if (!e->outq_head && e->close_after_flush)
		engine_doom(d, e, "session refused");
	return 0;
}

/*
 * Send one whole message to the engine now if its socket takes it and nothing waits before it;
 * else queue it (sent on EPOLLOUT).  Never waits.  When the queue would pass reply_queue_kb the
 * session is doomed (an engine that does not read loses its own session, nothing else).
 * Returns 0, or -ENOTCONN, -ENOBUFS, -ENOMEM or the send error (the session is then doomed).
 */
static int
engine_out(struct kvxd *d, struct kvxd_engine *e, const void *buf, uint32_t len, bool event)
{
	uint64_t limit = (uint64_t)d->cfg.reply_queue_kb * 1024;
	struct kvxd_outmsg *m;

	if (e->doomed)
		return -ENOTCONN;
	if (!e->outq_head) {
		ssize_t n = send(e->fd, buf, len, MSG_DONTWAIT | MSG_NOSIGNAL);

		if (n == (ssize_t)len) {
			if (event)
				d->ctr.events_sent++;
			return 0;
		}
		if (n >= 0 || (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
			int rc = n >= 0 ? -EMSGSIZE : -errno;

			engine_doom(d, e, strerror(-rc));
			return rc;
		}
	}
	if (e->outq_bytes + len > limit) {
		char why[160];

		d->ctr.engine_queue_overflows++;
		snprintf(why, sizeof(why),
			 "%llu bytes of replies and events unread: [engine] reply_queue_kb = %u",
			 (unsigned long long)(e->outq_bytes + len), d->cfg.reply_queue_kb);
		KVX_WARN("engine %d (pid %d uid %u) does not read: %s", e->id, (int)e->pid,
			 (unsigned)e->uid, why);
		engine_doom(d, e, why);
		return -ENOBUFS;
	}
	m = malloc(sizeof(*m) + len);
	if (!m) {
		engine_doom(d, e, "out of memory for its replies");
		return -ENOMEM;
	}
	m->next = NULL;
	m->len = len;
	m->event = event;
	memcpy(m->data, buf, len);
	if (e->outq_tail)
		e->outq_tail->next = m;
	else
		e->outq_head = m;
	e->outq_tail = m;
	e->outq_bytes += len;
	if (m == e->outq_head)
		kvxd_epoll_mod(d, e->fd, &e->ev, EPOLLIN | EPOLLOUT);
	return 0;
}

static int
reply(struct kvxd *d, struct kvxd_engine *e, uint64_t seq, int status, int64_t value,
      const char *text)
{
	size_t tlen = text ? strnlen(text, KVX_ENG_TEXT_MAX) : 0;
	union {
		struct kvx_eng_reply r;
		uint8_t b[sizeof(struct kvx_eng_reply) + KVX_ENG_TEXT_MAX];
	} buf;

	buf.r = (struct kvx_eng_reply){
		.hdr = {.type = KVX_ENG_REPLY, .len = sizeof(buf.r) + tlen, .seq = seq},
		.status = status,
		.text_len = tlen,
		.value = value,
	};
	if (tlen)
		memcpy(buf.b + sizeof(buf.r), text, tlen);
	return engine_out(d, e, &buf, buf.r.hdr.len, false);
}

static void engine_close(struct kvxd *d, struct kvxd_engine *e);

int
kvxd_engine_send_event(struct kvxd *d, int engine_id, const struct kvx_event *ev)
{
	struct kvxd_engine *e = engine_id >= 0 ? engine_by_id(d, engine_id) : NULL;
	struct kvx_eng_event m = {.hdr = {.type = KVX_ENG_EVENT, .len = sizeof(m)}, .ev = *ev};
	int rc;

	if (!e || e->doomed) {
		d->ctr.events_dropped++;
		return -ENOTCONN;
	}
	rc = engine_out(d, e, &m, sizeof(m), true);
	if (rc)
		d->ctr.events_dropped++;
	return rc;
}

void
kvxd_engine_reap(struct kvxd *d)
{
	for (int i = 0; i < KVXD_MAX_ENGINES; i++)
		if (d->engines[i] && d->engines[i]->doomed)
			engine_close(d, d->engines[i]);
}

void
kvxd_engine_room_left(struct kvxd *d, struct kvxd_room *r)
{
	struct kvxd_engine *e = r->engine_id >= 0 ? engine_by_id(d, r->engine_id) : NULL;

	if (r->on_eng_list) {
		cds_list_del(&r->eng_link);
		r->on_eng_list = false;
		if (e && e->nrooms)
			e->nrooms--;
	}
}

/* r becomes e's room (counted against max_rooms_per_engine, on e's list). */
static void
room_attach(struct kvxd_engine *e, struct kvxd_room *r)
{
	r->engine_id = e->id;
	cds_list_add_tail(&r->eng_link, &e->rooms);
	r->on_eng_list = true;
	e->nrooms++;
}

bool
kvxd_room_terminal_for_engine(const struct kvxd_room *r, int state)
{
	if (r->role == KVX_ROOM_PREFILL)
		return state == KVX_ROOM_SUCCESS || state == KVX_ROOM_FAILED;
	return state == KVX_ROOM_SUCCESS || state == KVX_ROOM_RELEASED;
}

bool
kvxd_engine_tell(struct kvxd *d, struct kvxd_room *r, const struct kvx_event *ev)
{
	if (r->engine_told) {
		d->ctr.events_duplicate++;
		return false;
	}
	if (r->engine_id < 0 || kvxd_engine_send_event(d, r->engine_id, ev))
		return false;
	r->engine_told = true;
	return true;
}

/* The engine went away: a decode room is aborted (released after the drain, not after
 * waiting_ms); a prefill room whose last chunk never came fails, and its core pushes the
 * failure to the decode endpoint at once (or, without metadata yet, the endpoint's ROOM_META
 * is answered with it). */
static void
engine_lost_room(struct kvxd *d, struct kvxd_room *r)
{
	int st = kvxd_room_state(r);

	r->engine_gone = true;
	r->engine_closed = true;
	r->engine_id = -1;
	r->gone_ms = kvxd_now_ms();
	if (r->removing)
		return;
	if (r->role == KVX_ROOM_DECODE) {
		if (!kvx_room_state_terminal(st) && !r->aborting) {
			d->ctr.engine_lost_rooms++;
			kvxd_decode_abort(d, r, -ECONNRESET, "the decode engine disconnected");
		}
		return;
	}
	if (st != KVX_ROOM_SUCCESS && st != KVX_ROOM_FAILED && !r->last_submitted) {
		struct kvxd_msg m = {.type = KVXD_MSG_ROOM_FAIL, .error = -ECONNRESET, .room = r};

		d->ctr.engine_lost_rooms++;
		snprintf(m.reason, sizeof(m.reason), "the prefill engine disconnected");
		kvx_pcore_send(&d->cores[r->core], &m);
	}
}

void
kvxd_pool_put(struct kvxd_pool *p)
{
	if (p)
		atomic_fetch_sub(&p->refs, 1);
}

static struct kvxd_pool *
pool_get(struct kvxd *d, struct kvxd_engine *e, int id)
{
	for (int i = 0; i < KVXD_MAX_POOLS; i++) {
		struct kvxd_pool *p = d->pools[i];

		if (p && p->id == id && p->engine_id == e->id)
			return p;
	}
	return NULL;
}

/* Pinned bytes of every pool registered by uid (orphans too: still registered). */
static uint64_t
pinned_of_uid(const struct kvxd *d, uid_t uid)
{
	uint64_t sum = 0;

	for (int i = 0; i < KVXD_MAX_POOLS; i++)
		if (d->pools[i] && d->pools[i]->uid == uid)
			sum += d->pools[i]->len;
	return sum;
}

static uint32_t
pools_of_engine(const struct kvxd *d, const struct kvxd_engine *e)
{
	uint32_t n = 0;

	for (int i = 0; i < KVXD_MAX_POOLS; i++)
		n += d->pools[i] && d->pools[i]->engine_id == e->id;
	return n;
}

/*
 * Register the engine's memfd as a pool: nbufs x npages x page_size bytes, computed in 64 bits
 * with overflow checks against POOL_BYTES_MAX; the memfd must hold them (it may be larger: the
 * pool is its start).  Then the caps: pools per engine and pinned bytes per uid (-EDQUOT), free
 * pool slots on the node (-ENOSPC).  Returns the pool id or -errno, with why set on refusals.
 */
static int
pool_register(struct kvxd *d, struct kvxd_engine *e, const struct kvx_eng_pool_reg *m, int fd,
	      char *why, size_t wlen)
{
	const struct kvx_pool_geometry *g = &m->geom;
	uint64_t len, pinned, cap = (uint64_t)d->cfg.max_pinned_mb_per_uid << 20;
	struct kvxd_pool *p;
	struct stat st;
	int slot = -1, rc;

	if (fd < 0)
		return -EBADF;
	if (!g->page_size || g->page_size % 64 || g->page_size > POOL_PAGE_MAX || !g->npages ||
	    !g->nbufs) {
		snprintf(why, wlen,
			 "page_size must be a multiple of 64 up to %u, npages and nbufs >= 1",
			 POOL_PAGE_MAX);
		return -EINVAL;
	}
	if (__builtin_mul_overflow((uint64_t)g->page_size, (uint64_t)g->npages, &len) ||
	    __builtin_mul_overflow(len, (uint64_t)g->nbufs, &len) || len > POOL_BYTES_MAX) {
		snprintf(why, wlen, "%u x %u pages x %u B is more than %llu GiB", g->nbufs,
			 g->npages, g->page_size, POOL_BYTES_MAX >> 30);
		return -E2BIG;
	}
	if (fstat(fd, &st) < 0)
		return -errno;
	if (!S_ISREG(st.st_mode)) {
		snprintf(why, wlen, "the pool's fd is not a memfd or regular file");
		return -EINVAL;
	}
	if (st.st_size < 0 || (uint64_t)st.st_size < len) {
		snprintf(why, wlen, "the memfd holds %lld bytes, the geometry needs %llu",
			 (long long)st.st_size, (unsigned long long)len);
		return -ERANGE;
	}
	if (pools_of_engine(d, e) >= d->cfg.max_pools_per_engine) {
		d->ctr.cap_pools++;
		snprintf(why, wlen, "the engine has %u pools: [engine] max_pools_per_engine = %u",
			 pools_of_engine(d, e), d->cfg.max_pools_per_engine);
		return -EDQUOT;
	}
	pinned = pinned_of_uid(d, e->uid);
	if (len > cap || pinned > cap - len) {
		d->ctr.cap_pinned++;
		snprintf(why, wlen,
			 "uid %u has %llu KiB pinned, %llu KiB more would pass [engine] "
			 "max_pinned_mb_per_uid = %u",
			 (unsigned)e->uid, (unsigned long long)(pinned >> 10),
			 (unsigned long long)(len >> 10), d->cfg.max_pinned_mb_per_uid);
		return -EDQUOT;
	}
	for (int i = 0; i < KVXD_MAX_POOLS; i++)
		if (!d->pools[i]) {
			slot = i;
			break;
		}
	if (slot < 0) {
		snprintf(why, wlen, "the node has %d pools registered", KVXD_MAX_POOLS);
		return -ENOSPC;
	}
	p = calloc(1, sizeof(*p));
	if (!p)
		return -ENOMEM;
	p->base = mmap(NULL, len, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p->base == MAP_FAILED) {
		rc = -errno;
		goto err_free;
	}
	p->len = len;
	rc = kvx_vx->mr_reg(d->dev, p->base, len, &p->mr);
	if (rc)
		goto err_unmap;
	p->id = ++d->next_pool_id;
	p->engine_id = e->id;
	p->uid = e->uid;
	p->page_size = g->page_size;
	p->npages = g->npages;
	p->nbufs = g->nbufs;
	p->lkey = kvx_vx->mr_lkey(p->mr);
	p->rkey = kvx_vx->mr_rkey(p->mr);
	d->pools[slot] = p;
	KVX_INFO("engine %d: pool %d registered: %u x %u pages x %u B (rkey 0x%x)", e->id, p->id,
		 p->nbufs, p->npages, p->page_size, p->rkey);
	return p->id;

err_unmap:
	munmap(p->base, len);
err_free:
	free(p);
	return rc;
}

static int
pool_unregister(struct kvxd *d, struct kvxd_pool *p)
{
	int rc;

	if (atomic_load(&p->refs) > 0)
		return -EBUSY;
	rc = kvx_vx->mr_dereg(p->mr);
	if (rc)
		return rc;
	munmap(p->base, p->len);
	for (int i = 0; i < KVXD_MAX_POOLS; i++)
		if (d->pools[i] == p)
			d->pools[i] = NULL;
	free(p);
	return 0;
}

static bool
name_ok(const char *s, size_t max)
{
	size_t n = strnlen(s, max);

	if (n == 0 || n == max)
		return false;
	for (size_t i = 0; i < n; i++)
		if (!(s[i] == '-' || s[i] == '_' || s[i] == '.' || (s[i] >= '0' && s[i] <= '9') ||
		      (s[i] >= 'a' && s[i] <= 'z') || (s[i] >= 'A' && s[i] <= 'Z')))
			return false;
	return true;
}

/* A random immediate-data token base (the low KVXD_TOKEN_SHIFT bits carry the source index):
 * unpredictable, though never the only check (a completion counts only from its source's QP). */
static uint32_t
token_alloc(void)
{
	uint32_t t;

	do
		t = kvx_rand_u32_nonzero() & ~((1u << KVXD_TOKEN_SHIFT) - 1);
	while (t == 0);
	return t;
}

static int64_t
room_open(struct kvxd *d, struct kvxd_engine *e, const struct kvx_eng_room_open *m, size_t len,
	  char *why, size_t wlen)
{
	const char(*names)[KVX_NAME_MAX] = (const void *)(m + 1);
	const uint32_t *pages;
	struct kvxd_pool *pool;
	int64_t rc;

	if (m->nsources == 0 || m->nsources > KVX_MAX_SOURCES || m->npages == 0 ||
	    m->npages > KVX_MAX_ROOM_PAGES || m->room > KVX_ROOM_ID_MAX)
		return -EINVAL;
	if ((uint64_t)len != sizeof(*m) + (uint64_t)m->nsources * KVX_NAME_MAX +
				     (uint64_t)m->npages * sizeof(uint32_t))
		return -EBADMSG;
	pages = (const uint32_t *)((const uint8_t *)(m + 1) + (size_t)m->nsources * KVX_NAME_MAX);
	pool = pool_get(d, e, m->pool_id);
	if (!pool)
		return -ENOENT;
	rc = kvxd_decode_room_open(d, e->id, m->room, pool, pages, m->npages, names, m->nsources);
	if (rc == -EDQUOT)
		snprintf(why, wlen, "the engine has %u rooms: [engine] max_rooms_per_engine = %u",
			 e->nrooms, d->cfg.max_rooms_per_engine);
	else if (rc == -ERANGE)
		snprintf(why, wlen, "a destination page is beyond the pool's %u pages",
			 pool->npages);
	return rc;
}

int64_t
kvxd_decode_room_open(struct kvxd *d, int engine_id, uint64_t room, struct kvxd_pool *pool,
		      const uint32_t *pages, uint32_t npages, const char (*names)[KVX_NAME_MAX],
		      uint32_t nsources)
{
	struct kvx_eng_room_open mm = {.room = room, .npages = npages, .nsources = nsources};
	const struct kvx_eng_room_open *m = &mm;
	struct kvxd_engine *e = engine_id >= 0 ? engine_by_id(d, engine_id) : NULL;
	struct kvxd_msg msg = {.type = KVXD_MSG_ROOM_OPEN};
	int src_peer[KVX_MAX_SOURCES];
	struct kvxd_room *r, *old;

	if (nsources == 0 || nsources > KVX_MAX_SOURCES || npages == 0 ||
	    npages > KVX_MAX_ROOM_PAGES || room > KVX_ROOM_ID_MAX)
		return -EINVAL;
	for (uint32_t i = 0; i < m->npages; i++)
		if (pages[i] >= pool->npages)
			return -ERANGE;
	for (uint32_t i = 0; i < m->nsources; i++) {
		struct kvxd_peer *p;

		if (!name_ok(names[i], KVX_NAME_MAX))
			return -EINVAL;
		p = kvxd_peer_find(d, names[i]);
		if (!p)
			return -EHOSTUNREACH;
		src_peer[i] = p->idx;
		for (uint32_t k = 0; k < i; k++)
			if (src_peer[k] == p->idx)
				return -EINVAL; /* the same source twice */
	}
	old = kvxd_room_find(d, m->room, KVX_ROOM_DECODE);
	if (old) {
		if (old->engine_id != engine_id && old->engine_id >= 0)
			return -EEXIST;
		if (!kvxd_room_removable(old))
			return -EBUSY; /* still running, or draining: wait for RELEASED */
	}
	/* the cap counts this engine's rooms; a room this open replaces is one of them */
	if (e && e->nrooms - (old && old->engine_id == engine_id) >= d->cfg.max_rooms_per_engine) {
		d->ctr.cap_rooms++;
		return -EDQUOT;
	}
	if (old)
		kvxd_room_remove(d, old);
	r = calloc(1, sizeof(*r));
	if (!r)
		return -ENOMEM;
	r->pages = malloc(sizeof(uint32_t) * m->npages);
	r->src_names = calloc(m->nsources, sizeof(*r->src_names));
	if (!r->pages || !r->src_names) {
		free(r->pages);
		free(r->src_names);
		free(r);
		return -ENOMEM;
	}
	memcpy(r->pages, pages, sizeof(uint32_t) * m->npages);
	for (uint32_t i = 0; i < m->nsources; i++) {
		snprintf(r->src_names[i], sizeof(r->src_names[i]), "%s", names[i]);
		r->src_peer[i] = src_peer[i];
	}
	r->id = m->room;
	r->role = KVX_ROOM_DECODE;
	r->fsm.role = KVX_ROOM_DECODE;
	r->gen = kvx_rand_u32_nonzero(); /* unguessable; compared for equality only */
	r->engine_id = engine_id;
	r->core = (int)(m->room % (uint64_t)d->ncores);
	r->pool = pool;
	r->npages = m->npages;
	r->nsrc = (uint16_t)m->nsources;
	r->opened_ms = kvxd_now_ms();
	atomic_fetch_add(&pool->refs, 1);
	rcu_read_lock();
	kvx_room_table_add(d->by_id, &r->by_id, kvxd_room_key(r->id, r->role));
	do
		r->token = token_alloc();
	while (kvx_room_table_add(d->by_token, &r->by_token, r->token));
	rcu_read_unlock();
	if (e)
		room_attach(e, r); /* until the room leaves: kvxd_engine_room_left */
	d->ctr.rooms_opened++;
	msg.room = r;
	kvx_pcore_send(&d->cores[r->core], &msg);
	for (uint32_t i = 0; i < m->nsources; i++) {
		struct kvxd_peer *p = &d->peers[src_peer[i]];

		if (p->lost) { /* a dead source: fail now rather than after the waiting timeout */
			char reason[KVXD_REASON_MAX];

			snprintf(reason, sizeof(reason), "source %s is down: %s", p->name,
				 p->last_error);
			kvxd_decode_abort(d, r, -EHOSTUNREACH, reason);
			break;
		}
		kvxd_send_room_meta(d, r, (int)i);
	}
	return r->gen;
}

static void
chunk_refuse(struct kvxd *d, struct kvxd_engine *e, uint64_t room, int error, const char *why)
{
	struct kvx_event ev = {.room = room, .state = KVX_ROOM_FAILED, .error = error};

	snprintf(ev.reason, sizeof(ev.reason), "chunk refused: %s", why);
	kvxd_engine_send_event(d, e->id, &ev);
}

static void
chunk_submit(struct kvxd *d, struct kvxd_engine *e, const struct kvx_eng_chunk *m, size_t len)
{
	const uint32_t *pages = (const uint32_t *)(m + 1);
	struct kvxd_msg msg = {.type = KVXD_MSG_CHUNK};
	struct kvxd_chunk *ch;
	struct kvxd_pool *pool;
	struct kvxd_room *r;
	char why[80];

	if (m->room > KVX_ROOM_ID_MAX || m->npages == 0 || m->npages > KVX_MAX_ROOM_PAGES ||
	    (uint64_t)len != sizeof(*m) + (uint64_t)m->npages * sizeof(uint32_t)) {
		d->ctr.engine_bad++;
		chunk_refuse(d, e, m->room, -EINVAL, "malformed");
		return;
	}
	/* no room has more destination pages (the room's own count is checked by its core,
	 * which owns the metadata) */
	if ((uint64_t)m->dst_offset + m->npages > KVX_MAX_ROOM_PAGES) {
		snprintf(why, sizeof(why), "destination pages %u+%u beyond the %u a room may have",
			 m->dst_offset, m->npages, KVX_MAX_ROOM_PAGES);
		chunk_refuse(d, e, m->room, -ERANGE, why);
		return;
	}
	pool = pool_get(d, e, m->pool_id);
	if (!pool) {
		chunk_refuse(d, e, m->room, -ENOENT, "unknown pool");
		return;
	}
	for (uint32_t i = 0; i < m->npages; i++)
		if (pages[i] >= pool->npages) {
			chunk_refuse(d, e, m->room, -ERANGE, "source page beyond the pool");
			return;
		}
	r = kvxd_room_find(d, m->room, KVX_ROOM_PREFILL);
	if (r && r->engine_id >= 0 && r->engine_id != e->id) {
		chunk_refuse(d, e, m->room, -EPERM, "room belongs to another engine");
		return;
	}
	if ((!r || r->engine_id != e->id) && e->nrooms >= d->cfg.max_rooms_per_engine) {
		d->ctr.cap_rooms++;
		snprintf(why, sizeof(why), "the engine has %u rooms: max_rooms_per_engine = %u",
			 e->nrooms, d->cfg.max_rooms_per_engine);
		chunk_refuse(d, e, m->room, -EDQUOT, why);
		return;
	}
	if (!r)
		r = kvxd_prefill_room_new(d, m->room, -1);
	if (!r) {
		chunk_refuse(d, e, m->room, -ENOMEM, "out of memory");
		return;
	}
	/* A room a decode endpoint aborted before its metadata came (a tombstone) is this
	 * engine's room now: it waits for its owner's ROOM_META (the aborting endpoint's, of the
	 * aborted generation, is refused) or times out like any room. */
	if (r->tombstone) {
		kvxd_room_charge(d, r, -1, false);
		r->tombstone = r->drained = false;
	}
	if (r->engine_id != e->id) {
		r->engine_gone = false;
		room_attach(e, r); /* until the room leaves: kvxd_engine_room_left */
	}
	if (m->last)
		r->last_submitted = true;
	{
		/* a room that already ended (decode aborted it before this chunk, or it failed
		 * before any engine was there to hear it): its engine is told now, once; the
		 * chunk itself is skipped by its core */
		int st = kvxd_room_state(r);

		if (kvxd_room_terminal_for_engine(r, st)) {
			struct kvx_event ev = {.room = r->id,
					       .generation = r->gen,
					       .state = (uint8_t)st,
					       .error = st == KVX_ROOM_FAILED ? r->error : 0};

			snprintf(ev.reason, sizeof(ev.reason), "%s", r->reason);
			kvxd_engine_tell(d, r, &ev);
		}
	}
	ch = malloc(sizeof(*ch) + sizeof(uint32_t) * m->npages);
	if (!ch) {
		chunk_refuse(d, e, m->room, -ENOMEM, "out of memory");
		return;
	}
	*ch = (struct kvxd_chunk){.pool = pool,
				  .index = m->chunk_index,
				  .npages = m->npages,
				  .dst_offset = m->dst_offset,
				  .last = m->last != 0};
	memcpy(ch->pages, pages, sizeof(uint32_t) * m->npages);
	atomic_fetch_add(&pool->refs, 1);
	msg.room = r;
	msg.ptr = ch;
	if (kvx_pcore_try_send(&d->cores[r->core], &msg)) { /* back-pressure */
		kvxd_pool_put(pool);
		free(ch);
		chunk_refuse(d, e, m->room, -EAGAIN, "polling core inbox full");
	}
}

static int
room_close(struct kvxd *d, struct kvxd_engine *e, uint64_t id)
{
	int found = 0;

	for (int role = KVX_ROOM_DECODE; role <= KVX_ROOM_PREFILL; role++) {
		struct kvxd_room *r = kvxd_room_find(d, id, role);
		int st;

		if (!r || r->removing || r->tombstone ||
		    (r->engine_id != e->id && r->engine_id >= 0))
			continue;
		st = kvxd_room_state(r);
		if (role == KVX_ROOM_DECODE && !kvxd_room_removable(r))
			return -EBUSY; /* its pages are not the engine's yet */
		if (role == KVX_ROOM_PREFILL && st != KVX_ROOM_SUCCESS && st != KVX_ROOM_FAILED)
			return -EBUSY;
		found = 1;
		d->ctr.rooms_closed++;
		if (kvxd_room_removable(r))
			kvxd_room_remove(d, r);
		else
			r->engine_closed = true; /* ACK targets outlive the engine's interest */
	}
	return found ? 0 : -ENOENT;
}

static int64_t
room_abort(struct kvxd *d, struct kvxd_engine *e, uint64_t id)
{
	struct kvxd_room *r = kvxd_room_find(d, id, KVX_ROOM_DECODE);

	if (!r || r->removing || (r->engine_id != e->id && r->engine_id >= 0))
		return -ENOENT;
	return kvxd_decode_abort(d, r, -ECANCELED, "aborted by the engine");
}

/* Close the session now.  Only from kvxd_engine_reap() and shutdown: elsewhere doom it. */
static void
engine_close(struct kvxd *d, struct kvxd_engine *e)
{
	for (int i = 0; i < KVXD_MAX_ENGINES; i++)
		if (d->engines[i] == e)
			d->engines[i] = NULL;
	epoll_ctl(d->epfd, EPOLL_CTL_DEL, e->fd, NULL);
	close(e->fd);
	/* Its pools go now, or when no room or chunk points at them any more (the sweep). */
	for (int i = 0; i < KVXD_MAX_POOLS; i++) {
		struct kvxd_pool *p = d->pools[i];

		if (p && p->engine_id == e->id) {
			p->orphan = true;
			if (atomic_load(&p->refs) == 0)
				pool_unregister(d, p);
		}
	}
	{
		struct kvxd_room *r, *tmp;

		cds_list_for_each_entry_safe(r, tmp, &e->rooms, eng_link)
		{
			cds_list_del(&r->eng_link);
			r->on_eng_list = false;
			engine_lost_room(d, r);
		}
	}
	KVX_INFO("engine %d disconnected", e->id);
	outq_drop(d, e);
	free(e);
}

void
kvxd_pool_sweep(struct kvxd *d)
{
	for (int i = 0; i < KVXD_MAX_POOLS; i++) {
		struct kvxd_pool *p = d->pools[i];

		if (p && p->orphan && atomic_load(&p->refs) == 0)
			pool_unregister(d, p);
	}
}

void
kvxd_engine_close_all(struct kvxd *d)
{
	for (int i = 0; i < KVXD_MAX_ENGINES; i++)
		if (d->engines[i])
			engine_close(d, d->engines[i]);
	for (int i = 0; i < KVXD_MAX_POOLS; i++)
		if (d->pools[i])
			pool_unregister(d, d->pools[i]);
}

static void
handle(struct kvxd *d, struct kvxd_engine *e, const uint8_t *buf, size_t len, int fd)
{
	const struct kvx_eng_hdr *h = (const void *)buf;
	char text[KVX_ENG_TEXT_MAX];
	int64_t v;

	d->ctr.engine_msgs++;
	text[0] = '\0';
	if (len < sizeof(*h) || h->len != len) {
		d->ctr.engine_bad++;
		reply(d, e, len >= sizeof(*h) ? h->seq : 0, -EBADMSG, 0, "bad message length");
		goto out;
	}
	if (e->refused) {
		/* over max_sessions_per_uid: say why, once, then close */
		reply(d, e, h->seq, e->refused, 0, e->refused_text);
		e->close_after_flush = true;
		if (!e->outq_head)
			engine_doom(d, e, "session refused");
		goto out;
	}
	if (!e->hello && h->type != KVX_ENG_HELLO) {
		reply(d, e, h->seq, -EPROTO, 0, "HELLO first");
		goto out;
	}
	switch (h->type) {
	case KVX_ENG_HELLO:
		if (len != sizeof(struct kvx_eng_hello) ||
		    ((const struct kvx_eng_hello *)buf)->version != KVX_ENG_VERSION) {
			reply(d, e, h->seq, -EPROTONOSUPPORT, 0,
			      "engine protocol version mismatch");
			break;
		}
		e->hello = true;
		reply(d, e, h->seq, 0, e->id, d->cfg.name);
		break;
	case KVX_ENG_POOL_REG:
		v = len == sizeof(struct kvx_eng_pool_reg)
			    ? pool_register(d, e, (const void *)buf, fd, text, sizeof(text))
			    : -EBADMSG;
		reply(d, e, h->seq, v < 0 ? (int)v : 0, v, text);
		break;
	case KVX_ENG_POOL_UNREG: {
		struct kvxd_pool *p =
			len == sizeof(struct kvx_eng_pool_unreg)
				? pool_get(d, e, ((const struct kvx_eng_pool_unreg *)buf)->pool_id)
				: NULL;

		reply(d, e, h->seq, p ? pool_unregister(d, p) : -ENOENT, 0, NULL);
		break;
	}
	case KVX_ENG_ROOM_OPEN:
		v = len >= sizeof(struct kvx_eng_room_open)
			    ? room_open(d, e, (const void *)buf, len, text, sizeof(text))
			    : -EBADMSG;
		reply(d, e, h->seq, v < 0 ? (int)v : 0, v, text);
		break;
	case KVX_ENG_CHUNK:
		if (len < sizeof(struct kvx_eng_chunk)) {
			d->ctr.engine_bad++;
			break;
		}
		chunk_submit(d, e, (const void *)buf, len);
		break;
	case KVX_ENG_ROOM_CLOSE:
		reply(d, e, h->seq,
		      len == sizeof(struct kvx_eng_room_close)
			      ? room_close(d, e, ((const struct kvx_eng_room_close *)buf)->room)
			      : -EBADMSG,
		      0, NULL);
		break;
	case KVX_ENG_ROOM_ABORT:
		v = len == sizeof(struct kvx_eng_room_abort)
			    ? room_abort(d, e, ((const struct kvx_eng_room_abort *)buf)->room)
			    : -EBADMSG;
		reply(d, e, h->seq, v < 0 ? (int)v : 0, v, NULL);
		break;
	case KVX_ENG_ADMIN: {
		char cmd[256];
		size_t n = len - sizeof(struct kvx_eng_admin);
		int rc;

		snprintf(cmd, sizeof(cmd), "%.*s", (int)(n < 255 ? n : 255),
			 (const char *)buf + sizeof(struct kvx_eng_admin));
		rc = kvxd_admin(d, cmd, e->admin, text, sizeof(text));
		if (rc == -EPERM && !e->admin)
			KVX_WARN("engine %d (pid %d uid %u): operator command '%s' refused: not an "
				 "admin",
				 e->id, (int)e->pid, (unsigned)e->uid, cmd);
		reply(d, e, h->seq, rc, 0, text);
		break;
	}
	default:
		d->ctr.engine_bad++;
		reply(d, e, h->seq, -EOPNOTSUPP, 0, "unknown request type");
	}
out:
	if (fd >= 0)
		close(fd);
}

/* The engine's socket is readable or writable.  Reads at most 64 requests (the next wake-up
 * takes the rest); never waits.  A session that ends or breaks is doomed, closed by
 * kvxd_engine_reap() at the end of the loop iteration. */
void
kvxd_engine_on_event(struct kvxd *d, struct kvxd_engine *e, uint32_t events)
{
	static uint8_t buf[KVX_ENG_MSG_MAX + 1];
	int rc;

	if (e->doomed)
		return;
	if ((events & EPOLLOUT) && (rc = outq_flush(d, e))) {
		engine_doom(d, e, strerror(-rc));
		return;
	}
	if (!(events & (EPOLLIN | EPOLLHUP | EPOLLERR)))
		return;
	for (int i = 0; i < 64 && !e->doomed && !e->close_after_flush; i++) {
		union {
			char c[CMSG_SPACE(sizeof(int))];
			struct cmsghdr align;
		} cbuf;
		struct iovec iov = {.iov_base = buf, .iov_len = sizeof(buf)};
		struct msghdr mh = {.msg_iov = &iov,
				    .msg_iovlen = 1,
				    .msg_control = cbuf.c,
				    .msg_controllen = sizeof(cbuf.c)};
		ssize_t n = recvmsg(e->fd, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
		int fd = -1;

		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
			return;
		if (n <= 0) {
			engine_doom(d, e, n == 0 ? "disconnected" : strerror(errno));
			return;
		}
		for (struct cmsghdr *c = CMSG_FIRSTHDR(&mh); c; c = CMSG_NXTHDR(&mh, c))
			if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS)
				memcpy(&fd, CMSG_DATA(c), sizeof(int));
		if (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) {
			d->ctr.engine_bad++;
			reply(d, e, 0, -EMSGSIZE, 0, "message too large");
			if (fd >= 0)
				close(fd);
			continue;
		}
		handle(d, e, buf, (size_t)n, fd);
	}
}

/* ---- operator commands --------------------------------------------------------------------- */

struct rooms_walk {
	char *out;
	size_t len, off;
	int n;
};

static int
room_line(struct kvx_room_table_node *n, void *arg)
{
	struct rooms_walk *w = arg;
	struct kvxd_room *r = caa_container_of(n, struct kvxd_room, by_id);

	w->n++;
	if (w->off + 200 < w->len)
		w->off += snprintf(
			w->out + w->off, w->len - w->off,
			"room %llu %s gen %u state %s outstanding %llu%s%s\n",
			(unsigned long long)r->id, kvx_room_role_str(r->role), r->gen,
			kvx_room_state_str(kvxd_room_state(r)),
			(unsigned long long)(atomic_load(&r->wr_posted) - atomic_load(&r->wr_done)),
			r->reason[0] ? " reason: " : "", r->reason);
	return 0;
}

#define ADMIN_HELP                                                                                \
	"commands: peers | rooms | counters | help (every engine); fault NAME:N[,NAME:N] | peer " \
	"NAME pause|resume|try (operators)\n"

int
kvxd_admin(struct kvxd *d, const char *cmd, bool admin, char *out, size_t len)
{
	size_t off = 0;

	out[0] = '\0';
#define P(...)                                                              \
	do {                                                                \
		if (off < len)                                              \
			off += snprintf(out + off, len - off, __VA_ARGS__); \
	} while (0)
	if (strcmp(cmd, "peers") == 0) {
		for (int i = 0; i < d->npeers; i++) {
			struct kvxd_peer *p = &d->peers[i];

			P("peer %s %s:%u state %s epoch %u handshakes %llu setup_failures %llu "
			  "resets %llu journal_pending %d%s%s\n",
			  p->name, p->addr.host, p->addr.port, kvxd_peer_state_str(p->state),
			  p->epoch, (unsigned long long)p->n_handshakes,
			  (unsigned long long)p->n_setup_failures, (unsigned long long)p->n_resets,
			  p->state == KVXD_PEER_READY ? 0 : p->j.n,
			  p->last_error[0] ? " last_error: " : "", p->last_error);
		}
		return 0;
	}
	if (strcmp(cmd, "rooms") == 0) {
		struct rooms_walk w = {.out = out, .len = len};

		rcu_read_lock();
		kvx_room_table_for_each(d->by_id, room_line, &w);
		rcu_read_unlock();
		off = w.off;
		P("rooms %d\n", w.n);
		return 0;
	}
	if (strcmp(cmd, "counters") == 0 || strcmp(cmd, "metrics") == 0) {
		const struct kvxd_counters *c = &d->ctr;

#define C(metric, v) P("kvx_" metric "{node=\"%s\"} %llu\n", d->cfg.name, (unsigned long long)(v))
		C("frames_rx_total", c->frames_rx);
		C("frames_tx_total", c->frames_tx);
		C("frames_bad_total", c->frames_bad);
		C("peer_resets_total", c->peer_resets);
		C("engine_msgs_total", c->engine_msgs);
		C("engine_bad_total", c->engine_bad);
		C("events_sent_total", c->events_sent);
		C("events_dropped_total", c->events_dropped);
		C("status_pushed_total", c->status_pushed);
		C("status_queued_total", c->status_queued);
		C("status_dropped_total", c->status_dropped);
		C("status_received_total", c->status_received);
		C("rooms_opened_total", c->rooms_opened);
		C("rooms_closed_total", c->rooms_closed);
		C("waiting_timeouts_total", c->waiting_timeouts);
		C("qp_replaced_total", c->qp_replaced); /* recycled QPs: replaced, never reused */
		C("journal_pending_entries", kvxd_journal_pending(d));
		C("aborts_total", c->aborts);
		C("releases_total", c->releases);
		C("abort_release_ms_sum", c->abort_release_ms_sum);
		C("aborts_received_total", c->aborts_received);
		C("abort_acks_sent_total", c->acks_sent);
		C("abort_acks_unsent_total", c->acks_unsent);
		C("abort_acks_received_total", c->acks_received);
		C("abort_acks_stale_total", c->acks_stale);
		C("abort_acks_unknown_total", c->acks_unknown);
		C("tombstones_total", c->tombstones);
		C("fences_total", c->fences);
		C("source_lost_fences_total", c->session_fences);
		/* hostile or broken peers: every refusal, by reason */
		C("auth_disabled", d->auth.none ? 1 : 0);
		C("heartbeats_sent_total", c->heartbeats_sent);
		C("peers_silent_total", c->peers_silent);
		C("events_duplicate_suppressed_total", c->events_duplicate);
		for (int f = 0; f < KVXD_PEER_STATE_COUNT; f++)
			for (int t = 0; t < KVXD_PEER_STATE_COUNT; t++)
				if (c->peer_transitions[f][t])
					P("kvx_peer_transitions_total{node=\"%s\",from=\"%s\",to="
					  "\"%s\"} "
					  "%llu\n",
					  d->cfg.name, kvxd_peer_state_str(f),
					  kvxd_peer_state_str(t),
					  (unsigned long long)c->peer_transitions[f][t]);
		C("engine_lost_rooms_total", c->engine_lost_rooms);
		C("room_meta_refused_engine_gone_total", c->meta_refused_engine_gone);
		C("peer_conn_refused_address_total", c->conn_refused_addr);
		C("peer_conn_refused_name_total", c->conn_refused_name);
		C("peer_conn_refused_version_total", c->conn_refused_version);
		C("peer_conn_refused_auth_total", c->conn_refused_auth);
		C("peer_conn_refused_busy_total", c->conn_refused_busy);
		C("peer_pending_expired_total", c->pending_expired);
		C("peer_pending_evicted_total", c->pending_evicted);
		C("peer_pending", d->npending);
		C("peer_gid_mismatch_total", c->gid_mismatch);
		C("room_meta_refused_owner_total", c->meta_refused_owner);
		C("room_meta_refused_aborted_total", c->meta_refused_aborted);
		C("room_meta_refused_cap_total", c->meta_refused_cap);
		C("room_status_refused_owner_total", c->status_refused_owner);
		C("aborts_not_owner_total", c->aborts_not_owner);
		C("tombstones_refused_total", c->tombstones_refused);
		C("engine_refused_total", c->engine_refused);
		C("engine_admin_denied_total", c->admin_denied);
		C("engine_queue_overflows_total", c->engine_queue_overflows);
#define CAP(key, v)                                                                        \
	P("kvx_engine_cap_refused_total{node=\"%s\",cap=\"" key "\"} %llu\n", d->cfg.name, \
	  (unsigned long long)(v))
		CAP("max_sessions_per_uid", c->cap_sessions);
		CAP("max_pools_per_engine", c->cap_pools);
		CAP("max_pinned_mb_per_uid", c->cap_pinned);
		CAP("max_rooms_per_engine", c->cap_rooms);
#undef CAP
		C("fault_wr_corrupt_rkey_fired_total", kvx_fault_fired(KVX_FAULT_WR_CORRUPT_RKEY));
		for (int f = 0; f < KVX_FAULT_COUNT; f++)
			P("kvx_fault_fired_total{node=\"%s\",point=\"%s\"} %lu\n", d->cfg.name,
			  kvx_fault_name(f), kvx_fault_fired(f));
		for (int i = 0; i < d->ncores; i++) {
			struct kvxd_core_stats *s = &d->cores[i].st;

#define S(metric, f)                                                             \
	P("kvx_core_" metric "{node=\"%s\",core=\"%d\"} %llu\n", d->cfg.name, i, \
	  (unsigned long long)atomic_load_explicit(&s->f, memory_order_relaxed))
			S("iterations_total", iterations);
			S("parks_total", parks);
			S("wr_posted_total", wr_posted);
			S("wc_ok_total", wc_ok);
			S("wc_error_total", wc_err);
			S("wc_flush_total", wc_flush);
			S("recv_imm_total", recv_imm);
			S("bad_imm_total", bad_imm);
			S("bytes_posted_total", bytes_posted);
			S("rooms_success_total", rooms_success);
			S("rooms_failed_total", rooms_failed);
			S("outbox_full_total", outbox_full);
			S("chunks_skipped_total", chunks_skipped);
			S("recv_error_total", recv_err);
			S("imm_not_owner_total", imm_not_owner);
			S("chunks_too_big_total", chunks_too_big);
			P("kvx_core_inbox_overflow_total{node=\"%s\",core=\"%d\"} %llu\n",
			  d->cfg.name, i, (unsigned long long)d->cores[i].ovf_queued);
			P("kvx_core_inbox_overflow_max{node=\"%s\",core=\"%d\"} %llu\n",
			  d->cfg.name, i, (unsigned long long)d->cores[i].ovf_max);
			/* WRs posted whose completion has not been reaped yet (errored groups
			 * included: they stay counted until their QP flushed) */
			P("kvx_core_wr_unresolved{node=\"%s\",core=\"%d\"} %llu\n", d->cfg.name, i,
			  (unsigned long long)(atomic_load_explicit(&s->wr_posted,
								    memory_order_relaxed) -
					       atomic_load_explicit(&s->wc_ok,
								    memory_order_relaxed) -
					       atomic_load_explicit(&s->wc_err,
								    memory_order_relaxed) -
					       atomic_load_explicit(&s->wc_flush,
								    memory_order_relaxed)));
#undef S
		}
#undef C
		return 0;
	}
	if (strcmp(cmd, "help") == 0) {
		P(ADMIN_HELP);
		return 0;
	}
	/* Everything below changes state: operators only (default deny, so a command added
	 * here later is covered too). */
	if (!admin) {
		d->ctr.admin_denied++;
		P("'%s' is an operator command: it needs root, kvxd's uid (%u) or membership in "
		  "[engine] admin_group%s%s%s\n" ADMIN_HELP,
		  cmd, (unsigned)d->self_uid, d->cfg.admin_group[0] ? " (" : " (none configured",
		  d->cfg.admin_group, ")");
		return -EPERM;
	}
	if (strncmp(cmd, "peer ", 5) == 0) {
		char name[KVX_CFG_NAME_MAX], verb[16];
		int rc;

		if (sscanf(cmd + 5, "%63s %15s", name, verb) != 2) {
			P("usage: peer NAME pause|resume|try\n");
			return -EINVAL;
		}
		rc = kvxd_peer_admin(d, name, verb);
		P(rc == 0 ? "peer %s: %s\n" : "peer %s: cannot %s\n", name, verb);
		return rc;
	}
	if (strncmp(cmd, "fault ", 6) == 0) {
		int rc = kvx_fault_arm_list(cmd + 6, out, len);

		if (rc == 0)
			P("armed %s\n", cmd + 6);
		return rc;
	}
	P(ADMIN_HELP);
	return -EINVAL;
#undef P
}
