/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Engine sessions on the local Unix socket (core/engine_proto.h): pools, rooms, chunks,
 * events, operator commands.  Every request is validated here; a bad one is refused with a
 * specific errno and affects only the sending engine.  Thread: the control core.
 */
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <limits.h>
#include <linux/magic.h>
#include <poll.h>
#include <pwd.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/un.h>
#include <unistd.h>

#include "control/abort.h"
#include "control/admin.h"
#include "control/cred.h"
#include "control/engine.h"
#include "control/engine_io.h"
#include "control/peer_io.h"
#include "control/rooms.h"
#include "control/vwork.h"
#include "core/engine_proto.h"
#include "core/fault.h"
#include "core/log.h"
#include "core/rand.h"

#define POOL_PAGE_MAX (16u << 20)    /* bytes in one page */
#define POOL_BYTES_MAX (64ull << 30) /* bytes in one pool */
#define REFUSED_PER_UID_MAX 4	     /* refused sessions of one uid kept to tell them why */
#define RING_BYTES (512u << 10)	     /* data bytes of each ring of a session (KVX_ENG_RINGS) */
#define RING_BATCH 64		     /* requests taken from one submission ring per iteration */
#define OPERATOR_SLOTS 4	     /* session slots only operators may take (kvxctl) */
#define CORE_HEADROOM 16 /* free inbox slots a core keeps for what one request sends it */
/* descriptors one datagram may bring in at most (the rest are the kernel's to drop, with
 * MSG_CTRUNC); a request carries one at most */
#define ENG_FDS_SEEN 8

/* ---- credentials --------------------------------------------------------------------------- */

/* A numeric uid or gid: digits only, below (uint32_t)-1 (which is none: "no change" to the
 * kernel), so that a number too large is never taken as another id cut to 32 bits. */
static bool
numeric_id(const char *s, uint32_t *out)
{
	unsigned long long v;
	char *end;

	if (s[0] < '0' || s[0] > '9')
		return false;
	errno = 0;
	v = strtoull(s, &end, 10);
	if (*end != '\0' || errno != 0 || v >= UINT32_MAX)
		return false;
	*out = (uint32_t)v;
	return true;
}

/* [engine] admin_group: a group name (or a numeric gid) into d->admin_gid. */
static int
admin_group_resolve(struct kvxd *d)
{
	const char *name = d->cfg.admin_group;
	struct group gr, *res = NULL;
	size_t size = 4096;
	uint32_t id;
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
	if (numeric_id(name, &id)) {
		d->admin_gid = (gid_t)id;
		d->has_admin_gid = true;
		return 0;
	}
	KVX_ERR("[engine] admin_group '%s': no such group%s%s", name, rc ? ": " : "",
		rc ? strerror(rc) : "");
	return -ENOENT;
}

/* [engine] rank_users: each user name (or numeric uid) into d->rank_uid. */
static int
rank_users_resolve(struct kvxd *d)
{
	for (int i = 0; i < d->cfg.n_rank_users; i++) {
		const char *name = d->cfg.rank_users[i].user;
		struct passwd pw, *res = NULL;
		size_t size = 4096;
		uint32_t id;
		int rc;

		for (;;) {
			char *buf = malloc(size);

			if (!buf)
				return -ENOMEM;
			rc = getpwnam_r(name, &pw, buf, size, &res);
			if (rc == 0 && res)
				d->rank_uid[i] = pw.pw_uid;
			free(buf);
			if (rc != ERANGE || size >= (1u << 20))
				break;
			size *= 2;
		}
		if (rc == 0 && res)
			continue;
		if (numeric_id(name, &id)) {
			d->rank_uid[i] = (uid_t)id;
			continue;
		}
		KVX_ERR("[engine] rank_users: '%s': no such user%s%s", name, rc ? ": " : "",
			rc ? strerror(rc) : "");
		return -ENOENT;
	}
	return 0;
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
	if (!rc)
		rc = rank_users_resolve(d);
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

/* Sessions of uid that count against max_sessions_per_uid, and refused ones kept open. */
static void
sessions_of(const struct kvxd *d, uid_t uid, uint32_t *live, uint32_t *refused)
{
	*live = *refused = 0;
	for (int i = 0; i < d->engines_end; i++) {
		const struct kvxd_engine *e = d->engines[i];

		if (!e || e->uid != uid || e->doomed)
			continue;
		if (e->refused)
			(*refused)++;
		else
			(*live)++;
	}
}

/* Sessions that are not an operator's: they may take all slots but OPERATOR_SLOTS. */
static int
others_of(const struct kvxd *d)
{
	int n = 0;

	for (int i = 0; i < d->engines_end; i++)
		n += d->engines[i] && !d->engines[i]->admin;
	return n;
}

void
kvxd_engine_accept(struct kvxd *d)
{
	for (;;) {
		int fd = accept4(d->eng_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC), slot = -1;
		uint32_t live, refused;
		bool admin;
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
		for (int i = 0; i < KVXD_MAX_ENGINES; i++) /* a free slot: past the end too */
			if (!d->engines[i]) {
				slot = i;
				break;
			}
		admin = kvxd_cred_is_admin(d, &cred);
		if (slot >= 0 && !admin && others_of(d) >= KVXD_MAX_ENGINES - OPERATOR_SLOTS) {
			/* the last slots stay for an operator, who must be able to look and abort
			 * however many engines are connected */
			d->ctr.cap_operator_slots++;
			slot = -1;
		}
		e = slot >= 0 ? calloc(1, sizeof(*e)) : NULL;
		if (!e) {
			KVX_WARN("engine connection refused (pid %d uid %u): %s", (int)cred.pid,
				 (unsigned)cred.uid,
				 slot >= 0 ? "out of memory"
				 : admin   ? "every session slot is taken"
					   : "every session slot but the operators' is taken");
			kvxd_cred_fini(&cred);
			close(fd);
			continue;
		}
		/* ids go round within 1..INT_MAX - 1 (a negative one means "no engine"), never
		 * one a live session has */
		do
			d->next_engine_id =
				d->next_engine_id >= INT_MAX - 1 ? 1 : d->next_engine_id + 1;
		while (kvxd_engine_by_id(d, d->next_engine_id));
		e->id = d->next_engine_id;
		e->fd = fd;
		e->sub_wake = e->evt_wake = -1;
		CDS_INIT_LIST_HEAD(&e->rooms);
		e->uid = cred.uid;
		e->gid = cred.gid;
		e->pid = cred.pid;
		e->admin = admin;
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
		kvxd_engine_slot_set(d, slot, e);
		kvxd_epoll_add(d, fd, &e->ev, EPOLLIN);
	}
}

/* ---- replies and events: a per-engine queue, never a wait ---------------------------------- */

static void engine_close(struct kvxd *d, struct kvxd_engine *e);

void
kvxd_engine_reap(struct kvxd *d)
{
	for (int i = 0; i < d->engines_end; i++)
		if (d->engines[i] && d->engines[i]->doomed)
			engine_close(d, d->engines[i]);
}

static struct kvxd_pool *
pool_get(struct kvxd *d, struct kvxd_engine *e, int id)
{
	for (int i = 0; i < d->pools_end; i++) {
		struct kvxd_pool *p = d->pools[i];

		/* an orphan is being deregistered: none of its rails' keys may be used again */
		if (p && p->id == id && p->engine_id == e->id && !p->orphan && !p->registering)
			return p;
	}
	return NULL;
}

/* Pinned bytes of every pool registered by uid (orphans too: still registered). */
static uint64_t
pinned_of_uid(const struct kvxd *d, uid_t uid)
{
	uint64_t sum = 0;

	for (int i = 0; i < d->pools_end; i++)
		if (d->pools[i] && d->pools[i]->uid == uid)
			sum += d->pools[i]->map_len;
	return sum;
}

/* A user's rooms, over all of its sessions. */
static uint64_t
rooms_of_uid(const struct kvxd *d, uid_t uid)
{
	uint64_t n = 0;

	for (int i = 0; i < d->engines_end; i++)
		if (d->engines[i] && d->engines[i]->uid == uid)
			n += d->engines[i]->nrooms;
	return n;
}

/* A user's pools, orphans too (they hold a slot of the node's table until they go). */
static uint32_t
pools_of_uid(const struct kvxd *d, uid_t uid)
{
	uint32_t n = 0;

	for (int i = 0; i < d->pools_end; i++)
		n += d->pools[i] && d->pools[i]->uid == uid;
	return n;
}

static uint32_t
pools_of_engine(const struct kvxd *d, const struct kvxd_engine *e)
{
	uint32_t n = 0;

	/* an orphan is no longer the engine's (its pinned bytes still count for its uid) */
	for (int i = 0; i < d->pools_end; i++)
		n += d->pools[i] && d->pools[i]->engine_id == e->id && !d->pools[i]->orphan;
	return n;
}

/*
 * A rank's rooms and the users of its engines.  Rooms are keyed (id, rank) on the node, and a
 * peer addresses a node's rank, never a user: an engine of another user on the same rank could
 * otherwise take, by its id, a room that the first one's decode peer opened and write its own
 * pages into that peer's KV cache, or open a decode room under an id the prefill side will write
 * the first one's KV into.  So a rank is held by one user at a time: the user of the first
 * engine session on it that registered a pool or took a room while no other user held it
 * (e->holds), for as long as one of that user's sessions that hold it is there.  Any session of
 * the holder's user may take the rank's rooms (and holds it with them); an operator (admin) may
 * take any, and holds the rank like anyone when nobody else does; another user's engine on the
 * rank may connect but takes no room.  [engine] rank_users gives ranks to one user for good:
 * no other user's engine holds them, even while that user has none there (its restarting
 * engine finds its ranks still its own).
 */
static bool
rank_held_by_another(const struct kvxd *d, const struct kvxd_engine *e)
{
	for (int i = 0; i < d->cfg.n_rank_users; i++)
		if (e->rank >= d->cfg.rank_users[i].lo && e->rank <= d->cfg.rank_users[i].hi)
			return e->uid != d->rank_uid[i]; /* the configured user's, always */
	for (int i = 0; i < d->engines_end; i++) {
		const struct kvxd_engine *f = d->engines[i];

		if (f && f != e && f->holds && !f->doomed && f->rank == e->rank && f->uid != e->uid)
			return true;
	}
	return false;
}

/* Whether the session may take a room of its rank that no session has (a prefill room that a
 * decode endpoint's ROOM_META made, or a new room); if it may, it holds the rank. */
static bool
rank_take(struct kvxd *d, struct kvxd_engine *e)
{
	if (rank_held_by_another(d, e))
		return e->admin; /* an operator may all the same, and holds nothing */
	e->holds = true;
	return true;
}

/* Whether fd is a file of memory: a memfd (tmpfs, or hugetlbfs with MFD_HUGETLB), or a file of
 * tmpfs (/dev/shm) or hugetlbfs.  *granule: what a mapping of it is made of (a huge page on
 * hugetlbfs, which maps and unmaps only whole ones; else 1). */
static bool
pool_fd_is_memory(int fd, uint64_t *granule)
{
	struct statfs fs;

	if (fstatfs(fd, &fs) < 0)
		return false;
	*granule = fs.f_type == HUGETLBFS_MAGIC && fs.f_bsize > 0 ? (uint64_t)fs.f_bsize : 1;
	return fs.f_type == TMPFS_MAGIC || fs.f_type == HUGETLBFS_MAGIC;
}

/*
 * Register the engine's memfd as a pool: nbufs x npages x page_size bytes, computed in 64 bits
 * with overflow checks against POOL_BYTES_MAX; the memfd must hold them (it may be larger: the
 * pool is its start), and it must be memory (shmem or hugetlbfs), never a file of a filesystem:
 * registering the MR faults its pages in, and a file on a filesystem the engine serves itself
 * (FUSE) would hold the registration's worker for as long as the engine likes.  Then the caps:
 * pools per engine and pinned bytes per uid (-EDQUOT), free pool slots on the node (-ENOSPC).
 * The registration itself runs on a verbs worker (control/vwork.h: the kernel pins every page,
 * 0.29 s for 256 MiB in the VM, seconds for a GPU node's pool, which on the control core stalled
 * every request, heartbeat and abort of the node): -EINPROGRESS, and kvxd_engine_pool_done()
 * answers request seq.  Until then the pool holds its slot and counts against the caps, and no
 * room or chunk takes it.  Other returns: -errno, with why set on refusals.
 */
static int
pool_register(struct kvxd *d, struct kvxd_engine *e, const struct kvx_eng_pool_reg *m, int fd,
	      uint64_t seq, char *why, size_t wlen)
{
	const struct kvx_pool_geometry *g = &m->geom;
	uint64_t len, map, granule = 1, pinned, cap = (uint64_t)d->cfg.max_pinned_mb_per_uid << 20;
	struct kvxd_pool *p;
	struct kvxd_vjob *j;
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
	if (!S_ISREG(st.st_mode) || !pool_fd_is_memory(fd, &granule)) {
		snprintf(why, wlen,
			 "the pool's fd is not a memfd (nor a file of tmpfs or hugetlbfs)");
		return -EINVAL;
	}
	if (granule > (1ull << 30)) {
		snprintf(why, wlen,
			 "the pool's huge pages are %llu MiB, at most 1024 MiB are taken",
			 (unsigned long long)(granule >> 20));
		return -EINVAL;
	}
	if (st.st_size < 0 || (uint64_t)st.st_size < len) {
		snprintf(why, wlen, "the memfd holds %lld bytes, the geometry needs %llu",
			 (long long)st.st_size, (unsigned long long)len);
		return -ERANGE;
	}
	map = (len + granule - 1) / granule * granule; /* <= 64 GiB + 1 GiB */
	if (pools_of_engine(d, e) >= d->cfg.max_pools_per_engine) {
		d->ctr.cap_pools++;
		snprintf(why, wlen, "the engine has %u pools: [engine] max_pools_per_engine = %u",
			 pools_of_engine(d, e), d->cfg.max_pools_per_engine);
		return -EDQUOT;
	}
	if (pools_of_uid(d, e->uid) >= d->cfg.max_pools_per_uid) {
		/* the node has KVXD_MAX_POOLS: one user's engines do not take them all */
		d->ctr.cap_pools_uid++;
		snprintf(why, wlen, "uid %u has %u pools: [engine] max_pools_per_uid = %u",
			 (unsigned)e->uid, pools_of_uid(d, e->uid), d->cfg.max_pools_per_uid);
		return -EDQUOT;
	}
	pinned = pinned_of_uid(d, e->uid);
	if (map > cap || pinned > cap - map) {
		d->ctr.cap_pinned++;
		snprintf(why, wlen,
			 "uid %u has %llu KiB pinned, %llu KiB more would pass [engine] "
			 "max_pinned_mb_per_uid = %u",
			 (unsigned)e->uid, (unsigned long long)(pinned >> 10),
			 (unsigned long long)(map >> 10), d->cfg.max_pinned_mb_per_uid);
		return -EDQUOT;
	}
	for (int i = 0; i < KVXD_MAX_POOLS; i++) /* a free slot: past the end too */
		if (!d->pools[i]) {
			slot = i;
			break;
		}
	if (slot < 0) {
		snprintf(why, wlen, "the node has %d pools registered", KVXD_MAX_POOLS);
		return -ENOSPC;
	}
	p = calloc(1, sizeof(*p));
	j = calloc(1, sizeof(*j));
	if (!p || !j) {
		rc = -ENOMEM;
		goto err_free;
	}
	p->base = mmap(NULL, map, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	if (p->base == MAP_FAILED) {
		rc = -errno;
		goto err_free;
	}
	p->len = len;
	p->map_len = map;
	p->id = ++d->next_pool_id;
	p->engine_id = e->id;
	p->uid = e->uid;
	p->page_size = g->page_size;
	p->npages = g->npages;
	p->nbufs = g->nbufs;
	p->registering = true;
	atomic_store(&p->refs, 1); /* the registration's: nothing unregisters it meanwhile */
	kvxd_pool_slot_set(d, slot, p);
	*j = (struct kvxd_vjob){.kind = KVXD_VJOB_MR_REG,
				.pool = p,
				.engine_id = e->id,
				.seq = seq,
				.nrails = d->nrails}; /* on every rail: a room's WRs go over all */
	for (int k = 0; k < d->nrails; k++)
		j->dev[k] = d->rails[k].dev;
	kvxd_vwork_submit(d, j);
	return -EINPROGRESS;

err_free:
	free(j);
	free(p);
	return rc;
}

static int pool_unregister(struct kvxd *d, struct kvxd_pool *p, struct kvxd_engine *e, uint64_t seq,
			   int answer, const char *why);

void
kvxd_engine_pool_done(struct kvxd *d, struct kvxd_vjob *j)
{
	struct kvxd_pool *p = j->pool;
	struct kvxd_engine *e = kvxd_engine_by_id(d, j->engine_id);
	char why[160] = "";

	p->registering = false;
	atomic_fetch_sub(&p->refs, 1);
	if (j->mr_rc)
		snprintf(why, sizeof(why), "registering the pool's memory on rail %d (%s): %s",
			 j->mr_rail, d->cfg.rails[j->mr_rail].device, strerror(-j->mr_rc));
	if (j->mr_rc || !e || p->orphan) {
		int rc = j->mr_rc ? j->mr_rc : -ECANCELED;

		/* the rails it registered go with it, now or once no room holds it (the sweep);
		 * on the deregistration worker, its engine is answered once the pool is gone */
		p->orphan = true;
		if (atomic_load(&p->refs) == 0 &&
		    pool_unregister(d, p, e, j->seq, rc, why) == -EINPROGRESS)
			e = NULL;
		if (e)
			kvxd_engine_reply(d, e, j->seq, rc, 0, why);
		free(j);
		return;
	}
	for (int k = 0; k < j->nrails; k++) {
		p->lkey[k] = kvx_vx->mr_lkey(p->mr[k]);
		p->rkey[k] = kvx_vx->mr_rkey(p->mr[k]);
	}
	if (!rank_held_by_another(d, e))
		e->holds = true; /* an engine's pools come before its rooms */
	KVX_INFO("engine %d: pool %d registered: %u x %u pages x %u B on %d rail%s (rkey 0x%x)",
		 e->id, p->id, p->nbufs, p->npages, p->page_size, j->nrails,
		 j->nrails > 1 ? "s" : "", p->rkey[0]);
	kvxd_engine_reply(d, e, j->seq, 0, p->id, NULL);
	free(j);
}

/* A rail's deregistration failed: the pool stays an orphan (gone for its engine: no room or chunk
 * takes it half registered, as a freed key can name a later MR), and kvxd_pool_sweep tries the
 * rails still registered again later. */
static void
pool_dereg_failed(struct kvxd_pool *p, int rail, int rc)
{
	if (!p->dereg_warned)
		KVX_WARN("pool %d: rail %d: cannot deregister (%s): retried until it can", p->id,
			 rail, strerror(-rc));
	p->dereg_warned = true;
	p->dereg_retry_ms = kvxd_now_ms() + KVXD_POOL_DEREG_RETRY_MS;
}

/* Its memory is neither registered nor mapped any more: the slot and the pool go. */
static void
pool_free(struct kvxd *d, struct kvxd_pool *p)
{
	for (int i = 0; i < d->pools_end; i++)
		if (d->pools[i] == p)
			kvxd_pool_slot_set(d, i, NULL);
	free(p);
}

/* Unregister p once nothing points at it.  From here the pool is gone for its engine.  With the
 * verbs workers started, the deregistration (the kernel unpins every page) and the unmap run on
 * the deregistration worker, and e's request (seq) is answered when they are done
 * (kvxd_engine_pool_dereg_done): a POOL_UNREG (answer 0) with their outcome, the POOL_REG of a
 * pool whose registration failed with answer and why.  Until then the pool keeps its slot and
 * counts as pinned.  Without the workers (the unit tests' nodes, kvxd's shutdown), or without
 * memory for the job, here, and the caller answers.  Returns 0 (done), -EINPROGRESS (on the
 * worker), -EBUSY (a room or chunk holds it), or -EIO (a rail's deregistration failed: the pool
 * is gone for its engine all the same). */
static int
pool_unregister(struct kvxd *d, struct kvxd_pool *p, struct kvxd_engine *e, uint64_t seq,
		int answer, const char *why)
{
	struct kvxd_vjob *j;
	int rc;

	if (atomic_load(&p->refs) > 0)
		return -EBUSY;
	if (p->deregistering)
		return -EINPROGRESS; /* its job answers for it */
	p->orphan = true;
	if (d->vwork.started && (j = calloc(1, sizeof(*j)))) {
		*j = (struct kvxd_vjob){.kind = KVXD_VJOB_MR_DEREG,
					.pool = p,
					.engine_id = e ? e->id : -1,
					.seq = seq,
					.answer = answer};
		snprintf(j->why, sizeof(j->why), "%s", why ? why : "");
		p->deregistering = true;
		kvxd_vwork_submit(d, j);
		return -EINPROGRESS;
	}
	for (int k = 0; k < KVX_MAX_RAILS; k++) {
		if (!p->mr[k])
			continue;
		rc = kvx_vx->mr_dereg(p->mr[k]);
		if (rc) {
			pool_dereg_failed(p, k, rc);
			return -EIO;
		}
		p->mr[k] = NULL;
	}
	munmap(p->base, p->map_len);
	pool_free(d, p);
	return 0;
}

void
kvxd_engine_pool_dereg_done(struct kvxd *d, struct kvxd_vjob *j)
{
	struct kvxd_pool *p = j->pool;
	struct kvxd_engine *e = j->engine_id >= 0 ? kvxd_engine_by_id(d, j->engine_id) : NULL;
	int rc = 0;

	p->deregistering = false;
	if (j->mr_rc) {
		pool_dereg_failed(p, j->mr_rail, j->mr_rc);
		rc = -EIO;
	} else if (j->unmapped) {
		pool_free(d, p);
	} else {
		rc = -ECANCELED; /* kvxd stops: what is left goes at its shutdown (close_all) */
	}
	if (e && j->answer)
		kvxd_engine_reply(d, e, j->seq, j->answer, 0, j->why);
	else if (e)
		kvxd_engine_reply(d, e, j->seq, rc, 0, NULL);
	free(j);
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

static int64_t
room_open(struct kvxd *d, struct kvxd_engine *e, const struct kvx_eng_room_open *m, size_t len,
	  char *why, size_t wlen)
{
	const struct kvx_eng_region *er = (const void *)(m + 1);
	const struct kvx_eng_source *es;
	struct kvxd_room_shape sh = {0};
	const uint32_t *pages;
	uint64_t total = 0;

	if (m->nregions == 0 || m->nregions > KVX_MAX_REGIONS || m->nsources == 0 ||
	    m->nsources > KVX_MAX_SOURCES || m->room > KVX_ROOM_ID_MAX)
		return -EINVAL;
	if ((uint64_t)len <
	    sizeof(*m) + (uint64_t)m->nregions * sizeof(*er) + (uint64_t)m->nsources * sizeof(*es))
		return -EBADMSG;
	for (uint32_t i = 0; i < m->nregions; i++)
		total += er[i].npages; /* at most 4 x (2^32 - 1): 64 bits */
	if ((uint64_t)len != sizeof(*m) + (uint64_t)m->nregions * sizeof(*er) +
				     (uint64_t)m->nsources * sizeof(*es) + total * sizeof(uint32_t))
		return -EBADMSG;
	es = (const void *)(er + m->nregions);
	pages = (const void *)(es + m->nsources);
	sh.nreg = m->nregions;
	sh.nsrc = m->nsources;
	for (uint32_t i = 0; i < m->nregions; i++) {
		sh.reg[i].pool = pool_get(d, e, er[i].pool_id);
		if (!sh.reg[i].pool) {
			snprintf(why, wlen, "region %u: pool %d is not this engine's", i,
				 er[i].pool_id);
			return -ENOENT;
		}
		sh.reg[i].npages = er[i].npages;
		sh.reg[i].pages = pages;
		pages += er[i].npages;
	}
	for (uint32_t i = 0; i < m->nsources; i++) {
		memcpy(sh.names[i], es[i].name, KVX_NAME_MAX);
		sh.names[i][KVX_NAME_MAX - 1] = es[i].name[KVX_NAME_MAX - 1] ? '\x01' : '\0';
		sh.src_rank[i] = es[i].rank;
		memcpy(sh.slice[i], es[i].slice, sizeof(sh.slice[i]));
	}
	if (!rank_take(d, e)) {
		d->ctr.engine_rank_refused++;
		snprintf(why, wlen, "rank %u's rooms are another user's engine's", e->rank);
		return -EPERM;
	}
	return kvxd_decode_room_open_shape(d, e->id, m->room, e->rank, &sh, why, wlen);
}

int64_t
kvxd_decode_room_open(struct kvxd *d, int engine_id, uint64_t room, struct kvxd_pool *pool,
		      const uint32_t *pages, uint32_t npages, const char (*names)[KVX_NAME_MAX],
		      uint32_t nsources)
{
	struct kvxd_room_shape sh = {.nreg = 1, .nsrc = nsources};
	char why[KVXD_REASON_MAX];

	if (nsources == 0 || nsources > KVX_MAX_SOURCES)
		return -EINVAL;
	sh.reg[0].pool = pool;
	sh.reg[0].npages = npages;
	sh.reg[0].pages = pages;
	for (uint32_t i = 0; i < nsources; i++)
		memcpy(sh.names[i], names[i], KVX_NAME_MAX);
	return kvxd_decode_room_open_shape(d, engine_id, room, 0, &sh, why, sizeof(why));
}

/* A decode shape's regions and slices: -EINVAL or -ERANGE with why, or 0. */
static int
shape_check(const struct kvxd_room_shape *sh, char *why, size_t wlen)
{
	uint64_t total = 0;

	for (uint32_t g = 0; g < sh->nreg; g++) {
		const struct kvxd_pool *pool = sh->reg[g].pool;

		if (sh->reg[g].npages == 0) {
			snprintf(why, wlen, "region %u has no pages", g);
			return -EINVAL;
		}
		total += sh->reg[g].npages;
		if (total > KVX_MAX_ROOM_PAGES) {
			snprintf(why, wlen, "the regions hold more than %u pages",
				 KVX_MAX_ROOM_PAGES);
			return -EINVAL;
		}
		for (uint32_t i = 0; i < sh->reg[g].npages; i++)
			if (sh->reg[g].pages[i] >= pool->npages) {
				snprintf(why, wlen,
					 "region %u: destination page %u is beyond the pool's %u "
					 "pages",
					 g, sh->reg[g].pages[i], pool->npages);
				return -ERANGE;
			}
		for (uint32_t s = 0; s < sh->nsrc; s++) {
			const struct kvx_slice *sl = &sh->slice[s][g];

			if (sl->length == 0
				    ? sl->src_offset || sl->dst_offset
				    : (uint64_t)sl->dst_offset + sl->length > pool->page_size ||
					      (uint64_t)sl->src_offset + sl->length > UINT32_MAX) {
				snprintf(why, wlen,
					 "source %u, region %u: slice %u+%u does not fit a %u-byte "
					 "page",
					 s, g, sl->dst_offset, sl->length, pool->page_size);
				return -ERANGE;
			}
		}
	}
	for (uint32_t s = 0; s < sh->nsrc; s++)
		for (uint32_t g = sh->nreg; g < KVX_MAX_REGIONS; g++)
			if (sh->slice[s][g].length || sh->slice[s][g].src_offset ||
			    sh->slice[s][g].dst_offset) {
				snprintf(why, wlen,
					 "source %u: a slice for region %u, which the "
					 "room does not have",
					 s, g);
				return -EINVAL;
			}
	return 0;
}

int64_t
kvxd_decode_room_open_shape(struct kvxd *d, int engine_id, uint64_t room, uint32_t rank,
			    const struct kvxd_room_shape *sh, char *why, size_t wlen)
{
	struct kvxd_engine *e = engine_id >= 0 ? kvxd_engine_by_id(d, engine_id) : NULL;
	struct kvxd_msg msg = {.type = KVXD_MSG_ROOM_OPEN};
	int src_peer[KVX_MAX_SOURCES];
	struct kvxd_room *r, *old;
	int rc;

	if (sh->nsrc == 0 || sh->nsrc > KVX_MAX_SOURCES || sh->nreg == 0 ||
	    sh->nreg > KVX_MAX_REGIONS || room > KVX_ROOM_ID_MAX || rank > KVX_RANK_MAX)
		return -EINVAL;
	rc = shape_check(sh, why, wlen);
	if (rc)
		return rc;
	for (uint32_t i = 0; i < sh->nsrc; i++) {
		struct kvxd_peer *p;

		if (!name_ok(sh->names[i], KVX_NAME_MAX) || sh->src_rank[i] > KVX_RANK_MAX) {
			snprintf(why, wlen, "source %u: a bad node name or rank", i);
			return -EINVAL;
		}
		p = kvxd_peer_find(d, sh->names[i]);
		if (!p) {
			snprintf(why, wlen, "source %u: no peer %s", i, sh->names[i]);
			return -EHOSTUNREACH;
		}
		src_peer[i] = p->idx;
		for (uint32_t k = 0; k < i; k++)
			if (src_peer[k] == p->idx && sh->src_rank[k] == sh->src_rank[i]) {
				snprintf(why, wlen, "source %s rank %u is listed twice",
					 sh->names[i], sh->src_rank[i]);
				return -EINVAL; /* the same source twice */
			}
	}
	old = kvxd_room_find(d, room, rank, KVX_ROOM_DECODE);
	if (old) {
		if (old->engine_id != engine_id && old->engine_id >= 0)
			return -EEXIST;
		if (!kvxd_room_removable(old))
			return -EBUSY; /* still running, or draining: wait for RELEASED */
	}
	/* the caps count this engine's rooms, and its user's; a room this open replaces is one
	 * of them */
	if (e && e->nrooms - (old && old->engine_id == engine_id) >= d->cfg.max_rooms_per_engine) {
		d->ctr.cap_rooms++;
		snprintf(why, wlen, "the engine has %u rooms: [engine] max_rooms_per_engine = %u",
			 e->nrooms, d->cfg.max_rooms_per_engine);
		return -EDQUOT;
	}
	if (e && rooms_of_uid(d, e->uid) - (old && old->engine_id == engine_id) >=
			 d->cfg.max_rooms_per_uid) {
		d->ctr.cap_rooms_uid++;
		snprintf(why, wlen, "uid %u has %llu rooms: [engine] max_rooms_per_uid = %u",
			 (unsigned)e->uid, (unsigned long long)rooms_of_uid(d, e->uid),
			 d->cfg.max_rooms_per_uid);
		return -EDQUOT;
	}
	if (old)
		kvxd_room_remove(d, old);
	r = kvxd_decode_room_new(d, room, rank, engine_id, sh, src_peer);
	if (!r)
		return -ENOMEM;
	d->ctr.rooms_opened++;
	msg.room = &r->pc;
	if (e && e->wake_ends)
		/* its core need not wake for it: the room's WAITING_FOR_INPUT wakes nobody (the
		 * engine reads it before the room's end), and its first delivery sets it anyway
		 * (on_recv_wc): one wake-up of a parked polling core less per room */
		kvx_pcore_send_quiet(&d->cores[r->pc.core], &msg);
	else
		kvx_pcore_send(&d->cores[r->pc.core], &msg);
	for (uint32_t i = 0; i < sh->nsrc; i++) {
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
	return r->open_gen;
}

static void
chunk_refuse(struct kvxd *d, struct kvxd_engine *e, uint64_t room, int error, const char *why)
{
	struct kvx_event ev = {.room = room, .state = KVX_ROOM_FAILED, .error = error};

	snprintf(ev.reason, sizeof(ev.reason), "chunk refused: %s", why);
	kvxd_engine_send_event(d, e->id, &ev);
}

/* The ids of attempts a chunk of which was refused against the engine's own ended room
 * (struct kvxd_engine.busy_ids): linear, short (it empties as the engine closes them). */
static bool
busy_has(const struct kvxd_engine *e, uint64_t id)
{
	for (uint32_t i = 0; i < e->nbusy; i++)
		if (e->busy_ids[i] == id)
			return true;
	return false;
}

/* Returns false when the engine has KVXD_BUSY_IDS_MAX of them already (then its session is
 * doomed: it neither closes the rooms it is told failed nor lets them go). */
static bool
busy_add(struct kvxd *d, struct kvxd_engine *e, uint64_t id)
{
	if (busy_has(e, id))
		return true;
	if (e->nbusy == KVXD_BUSY_IDS_MAX) {
		kvxd_engine_doom(
			d, e,
			"256 rooms had chunks refused against a closed attempt of theirs and "
			"were not closed: the engine goes on without closing failed rooms");
		return false;
	}
	e->busy_ids[e->nbusy++] = id;
	return true;
}

/* Whether another session of the engine's user and rank has the id among its busy_ids: its
 * attempt failed, without a room perhaps (chunk_refuse_room), and a room this session made or
 * took for the id could end a SUCCESS without that attempt's pages.  Another user's sessions
 * do not count: theirs are refusals of a rank they do not hold, and would otherwise let them
 * keep the holder's ids from it. */
static bool
busy_elsewhere(const struct kvxd *d, const struct kvxd_engine *e, uint64_t id)
{
	for (int i = 0; i < d->engines_end; i++) {
		const struct kvxd_engine *s = d->engines[i];

		if (s && s != e && s->nbusy && s->uid == e->uid && s->rank == e->rank &&
		    busy_has(s, id))
			return true;
	}
	return false;
}

static void
busy_del(struct kvxd_engine *e, uint64_t id)
{
	for (uint32_t i = 0; i < e->nbusy; i++)
		if (e->busy_ids[i] == id) {
			e->busy_ids[i] = e->busy_ids[--e->nbusy];
			return;
		}
}

/* A prefill room becomes this engine's, until it leaves (kvxd_room_engine_left).  A tombstone (a
 * decode endpoint aborted the room before its metadata came) is an ordinary room again: it
 * waits for its owner's ROOM_META (the aborting endpoint's, of the aborted generation, is
 * refused) or times out like any room. */
static void
room_take(struct kvxd *d, struct kvxd_engine *e, struct kvxd_room *r)
{
	if (r->tombstone) {
		kvxd_room_charge(d, r, -1, false);
		r->tombstone = r->drained = false;
	}
	if (r->engine_id != e->id) {
		r->engine_gone = false;
		kvxd_room_attach_engine(e, r);
	}
}

/* A prefill room that already ended (decode aborted it before its engine's first chunk, or it
 * failed before any engine was there to hear it) is told to its engine now, once.  Returns
 * whether it had ended. */
static bool
room_tell_if_ended(struct kvxd *d, struct kvxd_room *r)
{
	int st = kvxd_room_state(r);
	struct kvx_event ev = {.room = r->pc.id,
			       .generation = r->pc.gen,
			       .state = (uint8_t)st,
			       .error = st == KVX_ROOM_FAILED ? r->pc.error : 0};

	if (!kvxd_room_terminal_for_engine(r, st))
		return false;
	snprintf(ev.reason, sizeof(ev.reason), "%s", r->pc.reason);
	kvxd_room_tell(d, r, &ev);
	return true;
}

/* A refused chunk fails its room.  The engine hears of the refusal only as an event, after
 * it may have submitted the room's other chunks, its last one among them: had the room gone
 * on, it could end a SUCCESS (on decode too) without this chunk's pages.  So the room fails
 * through its core and its engine is told once, as the room's FAILED: a room of this engine,
 * or of none yet (a room a ROOM_META made, a tombstone), which the engine takes here; a room
 * not there yet is made, failed, so that the engine's later chunks of it find it ended (and
 * decode's ROOM_META is answered FAILED).  Such rooms count against max_rooms_per_engine and
 * may pass it by as many again; past that, or out of memory, kvxd cannot keep the room failed
 * and closes the session instead: all its rooms fail, none with a hole.  Another engine's
 * room, a room whose end its engine was told (it closed the room, or an earlier session of its
 * rank had it: this chunk is of a new attempt), or an id no room can have, is left alone: the
 * engine is told by an event. */
static void
chunk_refuse_room(struct kvxd *d, struct kvxd_engine *e, uint64_t room, int error, const char *why)
{
	struct kvxd_msg f = {.type = KVXD_MSG_ROOM_FAIL, .error = error};
	struct kvxd_room *r;
	bool again;

	d->ctr.chunks_refused++;
	if (room > KVX_ROOM_ID_MAX) {
		chunk_refuse(d, e, room, error, why);
		return;
	}
	r = kvxd_room_find(d, room, e->rank, KVX_ROOM_PREFILL);
	if (r && ((r->engine_id >= 0 && r->engine_id != e->id) || r->engine_closed ||
		  atomic_load(&r->pc.told))) {
		/* another engine's room, or one whose end its engine was told (the engine closed
		 * it, or went away, and this chunk is of a new attempt with the same id): that
		 * room is left alone, and this engine is told of the refusal by an event.  The
		 * new attempt fails: its next chunk, once that room is gone, fails the room it
		 * opens (busy_ids) */
		if (!busy_add(d, e, room))
			return;
		chunk_refuse(d, e, room, error, why);
		return;
	}
	if (!r && rooms_of_uid(d, e->uid) >= 2 * (uint64_t)d->cfg.max_rooms_per_uid) {
		/* the user's rooms, failed ones among them, are twice max_rooms_per_uid: the
		 * attempt fails without a room.  Its engine is told, and it stays failed as the
		 * ids above do: until the engine closes the id, its next chunks are refused and
		 * no other session of the rank makes or takes a room of that id (busy_elsewhere).
		 * Nor is the session closed: its user's rooms may be other sessions' doing */
		d->ctr.chunks_refused_roomless++;
		if (busy_add(d, e, room))
			chunk_refuse(d, e, room, error, why);
		return;
	}
	/* the engine's own count alone: its user's may be another session's doing, and the
	 * session closed here would lose its live rooms for it */
	if ((!r || r->engine_id != e->id) &&
	    e->nrooms >= 2 * (uint64_t)d->cfg.max_rooms_per_engine) {
		kvxd_engine_doom(d, e,
				 "a chunk was refused and the engine holds too many rooms to keep "
				 "its room failed");
		return;
	}
	if (!r)
		r = kvxd_prefill_room_new(d, room, e->rank, -1);
	if (!r) {
		kvxd_engine_doom(
			d, e, "a chunk was refused and there is no memory to keep its room failed");
		return;
	}
	room_take(d, e, r);
	again = r->refused;
	r->refused = true;
	KVX_INFO("engine %d: room %llu: chunk refused (%s): the room fails", e->id,
		 (unsigned long long)room, why);
	if (atomic_load(&r->pc.told) || room_tell_if_ended(d, r))
		return; /* it ended already: its engine hears (heard) that end, once */
	if (again) {
		/* its ROOM_FAIL went with the first refused chunk: one per room, so that an
		 * engine that floods refused chunks cannot fill its core's inbox (and have other
		 * engines' chunks refused for want of room there) */
		d->ctr.chunks_refused_again++;
		return;
	}
	f.room = &r->pc;
	snprintf(f.reason, sizeof(f.reason), "chunk refused: %s", why);
	if (kvx_pcore_send(&d->cores[r->pc.core], &f))
		kvxd_engine_doom(d, e,
				 "a chunk was refused and there is no memory to fail its room");
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
	bool malformed = m->room > KVX_ROOM_ID_MAX || m->npages == 0 ||
			 m->npages > KVX_MAX_ROOM_PAGES ||
			 (uint64_t)len != sizeof(*m) + (uint64_t)m->npages * sizeof(uint32_t);
	uint32_t nbufs;

	/* first: every refusal below makes or fails the room (r is used below: nothing before
	 * its use changes the table) */
	r = kvxd_room_find(d, m->room, e->rank, KVX_ROOM_PREFILL);
	if ((!r || r->engine_id < 0) && !rank_take(d, e)) {
		/* the room is left alone; the attempt fails as a whole, should the rank be ours
		 * later (busy_ids) */
		d->ctr.engine_rank_refused++;
		if (malformed)
			d->ctr.engine_bad++; /* counted as such all the same */
		if (busy_add(d, e, m->room))
			chunk_refuse(d, e, m->room, -EPERM,
				     "this rank's rooms are another user's engine's");
		return;
	}
	if (malformed) {
		d->ctr.engine_bad++;
		chunk_refuse_room(d, e, m->room, -EINVAL, "malformed");
		return;
	}
	if (m->ndest > KVX_MAX_DESTS) {
		snprintf(why, sizeof(why), "%u decode endpoints: a room feeds at most %u", m->ndest,
			 KVX_MAX_DESTS);
		chunk_refuse_room(d, e, m->room, -EINVAL, why);
		return;
	}
	if (m->region >= KVX_MAX_REGIONS) {
		snprintf(why, sizeof(why), "region %u: a room has at most %u", m->region,
			 KVX_MAX_REGIONS);
		chunk_refuse_room(d, e, m->room, -EINVAL, why);
		return;
	}
	/* no room has more destination pages (the room's own count is checked by its core,
	 * which owns the metadata) */
	if ((uint64_t)m->dst_offset + m->npages > KVX_MAX_ROOM_PAGES) {
		snprintf(why, sizeof(why), "destination pages %u+%u beyond the %u a room may have",
			 m->dst_offset, m->npages, KVX_MAX_ROOM_PAGES);
		chunk_refuse_room(d, e, m->room, -ERANGE, why);
		return;
	}
	pool = pool_get(d, e, m->pool_id);
	if (!pool) {
		chunk_refuse_room(d, e, m->room, -ENOENT, "unknown pool");
		return;
	}
	for (uint32_t i = 0; i < m->npages; i++)
		if (pages[i] >= pool->npages) {
			chunk_refuse_room(d, e, m->room, -ERANGE, "source page beyond the pool");
			return;
		}
	/* buffers [buf_first, buf_first + nbufs) of the pool; 0: to its last buffer */
	nbufs = m->buf_count ? m->buf_count
			     : (m->buf_first < pool->nbufs ? pool->nbufs - m->buf_first : 0);
	if (nbufs == 0 || (uint64_t)m->buf_first + nbufs > pool->nbufs) {
		snprintf(why, sizeof(why), "buffers %u+%u beyond the pool's %u", m->buf_first,
			 m->buf_count, pool->nbufs);
		chunk_refuse_room(d, e, m->room, -ERANGE, why);
		return;
	}
	if (r && r->engine_id >= 0 && r->engine_id != e->id) {
		/* its attempt fails as a whole once that engine lets the room go (busy_ids) */
		if (busy_add(d, e, m->room))
			chunk_refuse(d, e, m->room, -EPERM, "room belongs to another engine");
		return;
	}
	if (r && (r->engine_id == e->id || r->engine_id < 0) && r->engine_closed) {
		/* the engine closed it (kvx_room_close said 0), or an earlier session of its
		 * rank went away with it, and uses the id again while that room still drains:
		 * the room is left alone, and the engine told at once (its end was told or is
		 * not this session's: no other event comes).  The new attempt
		 * fails as a whole: its next chunk once that room is gone fails the room it
		 * opens, until the engine closes the id (a later chunk alone could otherwise
		 * make a room that succeeds without this one's pages) */
		if (busy_add(d, e, m->room))
			chunk_refuse(d, e, m->room, -EBUSY,
				     "the room's closed attempt still drains: close the room and "
				     "submit it again");
		return;
	}
	if (e->nbusy && (!r || r->engine_id != e->id) && busy_has(e, m->room)) {
		chunk_refuse_room(d, e, m->room, -EBUSY,
				  "an earlier chunk of this attempt was refused (the room's closed "
				  "attempt still drained): close the room and submit it again");
		return;
	}
	if ((!r || r->engine_id != e->id) && busy_elsewhere(d, e, m->room)) {
		chunk_refuse_room(d, e, m->room, -EBUSY,
				  "another session of this rank has a failed attempt of this id "
				  "that it has not closed");
		return;
	}
	if ((!r || r->engine_id != e->id) && e->nrooms >= d->cfg.max_rooms_per_engine) {
		d->ctr.cap_rooms++;
		snprintf(why, sizeof(why), "the engine has %u rooms: max_rooms_per_engine = %u",
			 e->nrooms, d->cfg.max_rooms_per_engine);
		chunk_refuse_room(d, e, m->room, -EDQUOT, why);
		return;
	}
	if ((!r || r->engine_id != e->id) && rooms_of_uid(d, e->uid) >= d->cfg.max_rooms_per_uid) {
		d->ctr.cap_rooms_uid++;
		snprintf(why, sizeof(why), "uid %u has %llu rooms: max_rooms_per_uid = %u",
			 (unsigned)e->uid, (unsigned long long)rooms_of_uid(d, e->uid),
			 d->cfg.max_rooms_per_uid);
		chunk_refuse_room(d, e, m->room, -EDQUOT, why);
		return;
	}
	if (!r)
		r = kvxd_prefill_room_new(d, m->room, e->rank, -1);
	if (!r) {
		chunk_refuse_room(d, e, m->room, -ENOMEM, "out of memory");
		return;
	}
	/* the room keeps the pool registered until it leaves: the chunk's own reference goes back
	 * once its WRs are built, and an engine that unregisters the pool or goes away meanwhile
	 * would pull it from under WRITEs still reading it */
	if (kvxd_room_hold_pool(r, pool)) {
		snprintf(why, sizeof(why), "a room's chunks read at most %d pools",
			 KVXD_ROOM_SRC_POOLS);
		chunk_refuse_room(d, e, m->room, -E2BIG, why);
		return;
	}
	room_take(d, e, r);
	if (r->last_submitted) {
		/* after the room's last chunk, which decode's SUCCESS may follow at any time: its
		 * WRITEs could land in pages decode's engine has back */
		chunk_refuse_room(d, e, m->room, -EALREADY, "a chunk after the room's last");
		return;
	}
	if (m->last)
		r->last_submitted = true;
	if (!r->ndest) {
		/* the engine says how many decode endpoints the room feeds: endpoints that waited
		 * are taken (or refused beyond it) */
		r->ndest = (uint8_t)(m->ndest ? m->ndest : 1);
		kvxd_room_meta_unpark(d, r);
	}
	room_tell_if_ended(d, r); /* the chunk itself is skipped by its core */
	if (e->chunk_bytes + kvxd_chunk_bytes(m->npages) >
	    ((uint64_t)d->cfg.max_chunk_mb_per_engine << 20)) {
		/* its chunks wait in kvxd (for their room's metadata, a full send queue): held
		 * without bound, they would be kvxd's memory */
		snprintf(why, sizeof(why),
			 "the engine's chunks in kvxd hold %u MiB: max_chunk_mb_per_engine",
			 d->cfg.max_chunk_mb_per_engine);
		chunk_refuse_room(d, e, m->room, -ENOBUFS, why);
		return;
	}
	ch = kvxd_chunk_alloc(d, m->npages); /* no malloc once the cache is warm */
	if (!ch) {
		chunk_refuse_room(d, e, m->room, -ENOMEM, "out of memory");
		return;
	}
	*ch = (struct kvxd_chunk){.pool = pool,
				  .index = m->chunk_index,
				  .npages = m->npages,
				  .dst_offset = m->dst_offset,
				  .region = m->region,
				  .buf_first = m->buf_first,
				  .nbufs = nbufs,
				  .ndest = m->ndest ? m->ndest : 1,
				  .last = m->last != 0,
				  .engine_id = e->id};
	e->chunk_bytes += kvxd_chunk_bytes(m->npages); /* back in kvxd_chunk_free */
	memcpy(ch->pages, pages, sizeof(uint32_t) * m->npages);
	atomic_fetch_add(&pool->refs, 1);
	msg.room = &r->pc;
	msg.ptr = ch;
	/* back-pressure: requests wait in their ring or socket while an inbox is nearly full
	 * (cores_take), so a full inbox refuses a chunk only past that headroom; a session that
	 * went has all its requests taken at once, its chunks kept in order (the core's overflow
	 * list, bounded by what its ring or socket held) */
	if (e->gone ? kvx_pcore_send(&d->cores[r->pc.core], &msg)
		    : kvx_pcore_try_send(&d->cores[r->pc.core], &msg)) {
		/* the chunk, and its pool reference */
		kvxd_chunk_free(d, ch);
		chunk_refuse_room(d, e, m->room, -EAGAIN, "polling core inbox full");
		return;
	}
	r->bytes += (uint64_t)m->npages * pool->page_size * nbufs; /* the bytes histogram */
}

static int
room_close_rooms(struct kvxd *d, struct kvxd_engine *e, uint64_t id)
{
	int found = 0;

	for (int role = KVX_ROOM_DECODE; role <= KVX_ROOM_PREFILL; role++) {
		struct kvxd_room *r = kvxd_room_find(d, id, e->rank, role);
		int st;

		if (!r || r->removing || r->tombstone ||
		    (r->engine_id != e->id && r->engine_id >= 0) ||
		    (r->engine_id < 0 && !rank_take(d, e)))
			continue; /* another engine's, or of a rank another user holds */
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

/* kvx_room_close: -EBUSY leaves the attempt as it was; 0 or -ENOENT ends it (busy_ids). */
static int
room_close(struct kvxd *d, struct kvxd_engine *e, uint64_t id)
{
	int rc = room_close_rooms(d, e, id);

	if (rc != -EBUSY)
		busy_del(e, id); /* the attempt a refusal failed ends with its close */
	return rc;
}

static int64_t
room_abort(struct kvxd *d, struct kvxd_engine *e, uint64_t id)
{
	struct kvxd_room *r = kvxd_room_find(d, id, e->rank, KVX_ROOM_DECODE);

	if (!r || r->removing || (r->engine_id != e->id && r->engine_id >= 0) ||
	    (r->engine_id < 0 && !rank_take(d, e)))
		return -ENOENT; /* another engine's, or of a rank another user holds */
	return kvxd_decode_abort(d, r, -ECANCELED, "aborted by the engine");
}

static void rings_close(struct kvxd *d, struct kvxd_engine *e);

/* Close the session now.  Only from kvxd_engine_reap() and shutdown: elsewhere doom it. */
static void
engine_close(struct kvxd *d, struct kvxd_engine *e)
{
	for (int i = 0; i < d->engines_end; i++)
		if (d->engines[i] == e)
			kvxd_engine_slot_set(d, i, NULL);
	if (e->sock_held) { /* socket_unhold's count, without its epoll update */
		e->sock_held = false;
		if (--d->socks_held == 0)
			d->socks_turn = false;
	}
	epoll_ctl(d->epfd, EPOLL_CTL_DEL, e->fd, NULL);
	close(e->fd);
	free(e->admin_text);
	/* Its pools go now, or when no room or chunk points at them any more (the sweep). */
	for (int i = 0; i < d->pools_end; i++) {
		struct kvxd_pool *p = d->pools[i];

		if (p && p->engine_id == e->id) {
			p->orphan = true;
			if (atomic_load(&p->refs) == 0)
				pool_unregister(d, p, NULL, 0, 0, NULL);
		}
	}
	{
		struct kvxd_room *r, *tmp;

		cds_list_for_each_entry_safe(r, tmp, &e->rooms, eng_link)
		{
			cds_list_del(&r->eng_link);
			r->on_eng_list = false;
			atomic_store_explicit(&r->pc.evq, NULL, memory_order_release);
			kvxd_abort_engine_lost(d, r);
		}
	}
	/* no room points at its core rings any more */
	if (e->rings)
		rings_close(d, e);
	if (e->sub_wake >= 0)
		close(e->sub_wake);
	if (e->evt_wake >= 0)
		close(e->evt_wake);
	KVX_INFO("engine %d disconnected", e->id);
	kvxd_engine_outq_drop(d, e);
	free(e);
}

void
kvxd_pool_sweep(struct kvxd *d, uint64_t now)
{
	for (int i = 0; i < d->pools_end; i++) {
		struct kvxd_pool *p = d->pools[i];

		if (p && p->orphan && atomic_load(&p->refs) == 0 && now >= p->dereg_retry_ms)
			pool_unregister(d, p, NULL, 0, 0, NULL);
	}
}

void
kvxd_engine_close_all(struct kvxd *d)
{
	for (int i = 0; i < d->engines_end; i++)
		if (d->engines[i])
			engine_close(d, d->engines[i]);
	for (int i = 0; i < d->pools_end; i++)
		if (d->pools[i])
			pool_unregister(d, d->pools[i], NULL, 0, 0, NULL);
}

/* ---- shared-memory rings (KVX_ENG_RINGS, core/engine_proto.h) ------------------------------ */

/* The REPLY to KVX_ENG_RINGS, with its three fds, straight onto the socket (nothing waits in
 * the queue before it: checked by the caller). */
static int
rings_reply(struct kvxd_engine *e, uint64_t seq, const int fds[3])
{
	struct kvx_eng_reply r = {.hdr = {.type = KVX_ENG_REPLY, .len = sizeof(r), .seq = seq},
				  .value = RING_BYTES};
	union {
		char buf[CMSG_SPACE(3 * sizeof(int))];
		struct cmsghdr align;
	} ctl;
	struct iovec iov = {.iov_base = &r, .iov_len = sizeof(r)};
	struct msghdr mh = {.msg_iov = &iov,
			    .msg_iovlen = 1,
			    .msg_control = ctl.buf,
			    .msg_controllen = sizeof(ctl.buf)};
	struct cmsghdr *cm;

	memset(&ctl, 0, sizeof(ctl));
	cm = CMSG_FIRSTHDR(&mh);
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(3 * sizeof(int));
	memcpy(CMSG_DATA(cm), fds, 3 * sizeof(int));
	if (sendmsg(e->fd, &mh, MSG_DONTWAIT | MSG_NOSIGNAL) != (ssize_t)sizeof(r))
		return errno ? -errno : -EMSGSIZE;
	return 0;
}

/* What a session's rings leave behind when it closes: the mapping, our end of the event ring's
 * wake pair and the core rings' producer sides, which a polling core may still be using in its
 * current iteration.  They go after an RCU grace period. */
struct rings_gc {
	struct rcu_head rcu;
	void *map;
	size_t map_len;
	int evt_wake;
	int nevq;
	struct kvx_pcore_evq *evq[KVX_MAX_CORES];
};

static void
rings_gc_rcu(struct rcu_head *head)
{
	struct rings_gc *g = caa_container_of(head, struct rings_gc, rcu);

	kvx_rcu_reclaim_begin();
	munmap(g->map, g->map_len);
	if (g->evt_wake >= 0)
		close(g->evt_wake);
	for (int i = 0; i < g->nevq; i++)
		free(g->evq[i]);
	free(g);
	kvx_rcu_reclaim_end();
}

/* Close: the socket side now; the mapping, our end of the event ring's wake pair and the core
 * rings once no polling core can be in them (every room's evq was cleared before). */
static void
rings_close(struct kvxd *d, struct kvxd_engine *e)
{
	struct rings_gc *g = e->ring_gc;

	epoll_ctl(d->epfd, EPOLL_CTL_DEL, e->sub_wake, NULL);
	epoll_ctl(d->epfd, EPOLL_CTL_DEL, e->evt_wake, NULL); /* closed after a grace period */
	g->map = e->ring_map;
	g->map_len = e->ring_map_len;
	g->evt_wake = e->evt_wake;
	g->nevq = e->nevq;
	memcpy(g->evq, e->evq, sizeof(g->evq));
	e->ring_gc = NULL;
	e->evt_wake = -1; /* the callback closes it */
	e->nevq = 0;
	call_rcu(&g->rcu, rings_gc_rcu);
}

/* KVX_ENG_RINGS: make the session's rings (a sealed memfd, two wake socket pairs), map them,
 * hand them to the engine: the submission and event rings, and with KVX_ENG_RINGS_CORE one
 * event ring per polling core.  The engine gets its ends of the wake pairs; ours are our own
 * file descriptions, whose flags the engine cannot touch (core/shring.h).  On any failure the
 * session stays on the socket. */
static void
rings_setup(struct kvxd *d, struct kvxd_engine *e, uint64_t seq, const uint8_t *buf, size_t len)
{
	size_t one = kvx_shring_map_bytes(RING_BYTES), total;
	struct kvx_eng_rings m = {0};
	int fds[3] = {-1, -1, -1}, sub[2] = {-1, -1}, evt[2] = {-1, -1}, rc, ncore = 0;
	struct kvx_pcore_evq *evq[KVX_MAX_CORES] = {NULL};
	struct rings_gc *gc = NULL;
	void *map = MAP_FAILED;

	if (len != sizeof(struct kvx_eng_hdr) && len != sizeof(m)) {
		kvxd_engine_reply(d, e, seq, -EBADMSG, 0, "bad RINGS length");
		return;
	}
	memcpy(&m, buf, len);
	if (m.flags & ~(KVX_ENG_RINGS_CORE | KVX_ENG_RINGS_REARM | KVX_ENG_RINGS_WAKE_ENDS)) {
		kvxd_engine_reply(d, e, seq, -EINVAL, 0, "unknown RINGS flags");
		return;
	}
	if (e->rings) {
		kvxd_engine_reply(d, e, seq, -EALREADY, 0, "the session has rings");
		return;
	}
	if (e->outq_head) {
		kvxd_engine_reply(d, e, seq, -EBUSY, 0, "replies wait for the socket");
		return;
	}
	if (m.flags & KVX_ENG_RINGS_CORE)
		ncore = d->ncores;
	total = (2 + (size_t)ncore) * one;
	if (!(gc = calloc(1, sizeof(*gc)))) { /* its close cannot fail for want of memory */
		rc = -ENOMEM;
		goto fail;
	}
	for (int c = 0; c < ncore; c++)
		if (!(evq[c] = calloc(1, sizeof(*evq[c])))) {
			rc = -ENOMEM;
			goto fail;
		}
	/* the engine's ends: fds[1] it sends its submission wake-ups on, fds[2] it waits on */
	if ((rc = kvx_shring_wake_pair(sub)) || (rc = kvx_shring_wake_pair(evt)))
		goto fail;
	fds[0] = memfd_create("kvx-rings", MFD_CLOEXEC | MFD_ALLOW_SEALING);
	fds[1] = sub[1];
	fds[2] = evt[1];
	sub[1] = evt[1] = -1;
	if (fds[0] < 0 || ftruncate(fds[0], (off_t)total) ||
	    fcntl(fds[0], F_ADD_SEALS, F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL) ||
	    (map = mmap(NULL, total, PROT_READ | PROT_WRITE, MAP_SHARED, fds[0], 0)) ==
		    MAP_FAILED) {
		rc = -errno;
		goto fail;
	}
	for (int i = 0; i < 2 + ncore; i++)
		kvx_shring_format((uint8_t *)map + (size_t)i * one, RING_BYTES);
	kvx_shring_attach(&e->sub, map, one, RING_BYTES, sub[0], false);
	kvx_shring_attach(&e->evt, (uint8_t *)map + one, one, RING_BYTES, evt[0], true);
	/* the engine starts parked (it reads a ring only after its wake end said so); one that
	 * re-arms is woken once until it drained its wake end (KVX_ENG_RINGS_REARM) */
	kvx_shring_park_prepare(&e->evt);
	kvx_shring_set_oneshot(&e->evt, m.flags & KVX_ENG_RINGS_REARM);
	e->wake_ends = m.flags & KVX_ENG_RINGS_WAKE_ENDS;
	for (int c = 0; c < ncore; c++) {
		kvx_shring_attach(&evq[c]->ring, (uint8_t *)map + (size_t)(2 + c) * one, one,
				  RING_BYTES, evt[0], true);
		kvx_shring_park_prepare(&evq[c]->ring);
		kvx_shring_set_oneshot(&evq[c]->ring, m.flags & KVX_ENG_RINGS_REARM);
		evq[c]->wake_ends = m.flags & KVX_ENG_RINGS_WAKE_ENDS;
	}
	rc = rings_reply(e, seq, fds); /* the memfd's size says how many core rings */
	if (rc)
		goto fail;
	for (int i = 0; i < 3; i++) /* the engine has them now; the mapping stays */
		close(fds[i]);
	e->ring_map = map;
	e->ring_map_len = total;
	e->sub_wake = sub[0];
	e->evt_wake = evt[0];
	e->rings = true;
	memcpy(e->evq, evq, sizeof(evq)); /* published to the cores with each room (evq) */
	e->nevq = ncore;
	e->ring_gc = gc;
	e->ring_ev = (struct kvxd_fd){.kind = KVXD_FD_ENGINE_RING, .ptr = e};
	e->room_ev = (struct kvxd_fd){.kind = KVXD_FD_ENGINE_ROOM, .ptr = e};
	if (kvxd_epoll_add(d, e->sub_wake, &e->ring_ev, EPOLLIN)) /* its requests would wait */
		kvxd_engine_doom(d, e, "cannot watch its submission ring's wake-ups");
	else if (kvxd_epoll_add(d, e->evt_wake, &e->room_ev, EPOLLIN)) /* its events would */
		kvxd_engine_doom(d, e, "cannot watch its event ring's wake-ups");
	d->ctr.engine_rings++;
	return;
fail:
	if (map != MAP_FAILED)
		munmap(map, total);
	for (int i = 0; i < 3; i++)
		if (fds[i] >= 0)
			close(fds[i]);
	for (int i = 0; i < 2; i++) {
		if (sub[i] >= 0)
			close(sub[i]);
		if (evt[i] >= 0)
			close(evt[i]);
	}
	for (int c = 0; c < ncore; c++)
		free(evq[c]);
	free(gc);
	KVX_WARN("engine %d (pid %d): no rings: %s", e->id, (int)e->pid, strerror(-rc));
	kvxd_engine_reply(d, e, seq, rc, 0, "cannot set up the rings");
}

static void handle(struct kvxd *d, struct kvxd_engine *e, const uint8_t *buf, size_t len, int fd);

/* Whether more of the session's requests are taken now: not once it is closing, nor after an
 * operator command ran for it in this loop pass (the rest wait for the next pass, in order:
 * an engine that sends commands in a loop gets one walk of a table per pass, never a pass of
 * them while other sessions, peers and timers wait).  A session that went has what it sent
 * taken at once: its commands are not run. */
static bool
taking(const struct kvxd *d, const struct kvxd_engine *e)
{
	return !e->doomed && (e->gone || e->admin_pass != d->loop_pass);
}

/* Whether every polling core's inbox can take what one more request sends it.  While one
 * cannot (its core fell behind), the requests wait in the engines' submission rings, every
 * engine's in turn, and in the sockets of the engines without rings (socket_hold): a chunk is
 * never refused for a full inbox that another engine's flood filled (a refused chunk fails its
 * room). */
static bool
cores_take(const struct kvxd *d)
{
	for (int c = 0; c < d->ncores; c++)
		if (d->cores[c].ovf_len || kvx_mbox_free_count(d->cores[c].inbox) < CORE_HEADROOM)
			return false;
	return true;
}

/* Whether a request of this type may send a polling core what it must take (a chunk, or a
 * room's open, close or abort): only these wait for the cores' headroom, in order behind
 * everything the session sent before them.  The others (HELLO, RINGS, pools, operator
 * commands, anything malformed) are taken while the cores are behind: a new session's HELLO,
 * or an operator's "counters" on a kvxd whose polling core is stuck, does not wait for that
 * core.  They send the cores nothing an engine can repeat at will: an operator command that
 * does (a peer paused, a reload) sends it losslessly, one command per session and loop pass. */
static bool
needs_cores(const void *buf, size_t len)
{
	uint16_t type;

	if (len < sizeof(type))
		return false;
	memcpy(&type, buf, sizeof(type)); /* struct kvx_eng_hdr's first field */
	return type == KVX_ENG_CHUNK || type == KVX_ENG_ROOM_OPEN || type == KVX_ENG_ROOM_CLOSE ||
	       type == KVX_ENG_ROOM_ABORT;
}

/* The cores cannot take what the session's next request may send them: its socket is not
 * read (nor watched for EPOLLIN: it would wake the loop at once, again and again) until they
 * caught up (kvxd_engine_socks_release), taking turns with the rings
 * (kvxd_engine_rings_poll).  What it sends waits in the socket, and once that is full in the
 * engine (libkvx waits for room, bounded by its request timeout).  An engine that goes, or
 * shuts its sending side, still has everything taken at once (EPOLLHUP is reported whatever
 * is watched, EPOLLRDHUP is watched while held). */
static void
socket_hold(struct kvxd *d, struct kvxd_engine *e)
{
	d->ctr.engine_socket_holds++;
	if (e->sock_held)
		return;
	e->sock_held = true;
	d->socks_held++;
	kvxd_engine_epoll_update(d, e);
}

static void
socket_unhold(struct kvxd *d, struct kvxd_engine *e)
{
	if (!e->sock_held)
		return;
	e->sock_held = false;
	if (--d->socks_held == 0)
		d->socks_turn = false; /* the sockets' turn ends once they are all let go */
	if (!e->doomed)
		kvxd_engine_epoll_update(d, e);
}

bool
kvxd_engine_socks_release(struct kvxd *d)
{
	if (!d->socks_held)
		return false;
	if (!cores_take(d))
		return true;
	for (int i = 0; i < d->engines_end && d->socks_held; i++)
		if (d->engines[i])
			socket_unhold(d, d->engines[i]);
	return false;
}

/* Take up to max requests from the session's submission ring; cores: whether it is the
 * rings' turn at the cores' room (kvxd_engine_rings_poll), *to_cores counting the requests
 * taken that needed it (NULL: not counted).  Returns how many. */
static int
ring_take(struct kvxd *d, struct kvxd_engine *e, uint64_t max, bool cores, int *to_cores)
{
	static uint64_t buf[KVX_ENG_MSG_MAX / sizeof(uint64_t)];
	int work = 0;

	for (uint64_t k = 0; e->rings && k < max && taking(d, e); k++) {
		ssize_t n;

		if (!e->gone && (!cores || !cores_take(d))) {
			/* the cores are behind (or it is the sockets' turn): the next request is
			 * looked at, and taken as looked at, only if it sends them nothing */
			n = kvx_shring_peek(&e->sub, buf, sizeof(buf));
			if (n == 0)
				break;
			if (n > 0 && (size_t)n <= sizeof(buf) && needs_cores(buf, (size_t)n)) {
				/* left in the ring, taken once the cores caught up (the loop looks
				 * again within a millisecond); a session that went has all of it
				 * taken now */
				d->rings_held = true;
				d->ctr.engine_ring_holds++;
				break;
			}
			if (n > 0 && kvx_shring_take_peeked(&e->sub))
				n = -EPROTO; /* longer than a request may be */
		} else {
			n = kvx_shring_get(&e->sub, buf, sizeof(buf));
		}
		if (n == 0)
			break;
		if (n < 0) {
			d->ctr.engine_bad++;
			kvxd_engine_doom(d, e, "its submission ring is corrupt");
			break;
		}
		if (to_cores && needs_cores(buf, (size_t)n))
			(*to_cores)++;
		handle(d, e, (const uint8_t *)buf, (size_t)n, -1);
		work++;
	}
	return work;
}

/* Take up to RING_BATCH requests from each session's submission ring.  Returns how many. */
int
kvxd_engine_rings_poll(struct kvxd *d)
{
	/* held sockets and the rings take turns at the room the cores free: the rings' turn
	 * ends once they took some of it while a socket waited, the sockets' once they were let
	 * go (kvxd_engine_socks_release, at the start of a pass: they are read before the rings'
	 * next take, at its end).  Else a ring's flood, taken at the start of every pass, would
	 * leave none for a held socket, whose engine would wait as long as the flood lasts.
	 * Requests that send the cores nothing are taken in either turn (needs_cores) */
	bool cores = !(d->socks_held && d->socks_turn);
	int work = 0, took = 0, n = d->engines_end;

	/* from the next session each pass: while the cores' inboxes hold the rings back, the
	 * room they free goes to each session in turn, never to the first one's flood alone */
	d->rings_held = false;
	for (int k = 0; k < n; k++) {
		struct kvxd_engine *e = d->engines[(d->rings_next + k) % n];

		if (e)
			work += ring_take(d, e, RING_BATCH, cores, &took);
	}
	d->rings_next = n ? (d->rings_next + 1) % n : 0;
	if (took && d->socks_held)
		d->socks_turn = true;
	return work;
}

/* Before the loop blocks: announce it on every submission ring.  Returns true when a
 * submission ring has requests (do not block).  Events that wait for room in an event ring
 * need no retry here: the engine wakes us when it takes something (kvxd_engine_ring_room). */
bool
kvxd_engine_rings_park(struct kvxd *d)
{
	bool busy = false;

	for (int i = 0; i < d->engines_end; i++) {
		struct kvxd_engine *e = d->engines[i];

		if (!e || !e->rings || e->doomed)
			continue;
		kvx_shring_park_prepare(&e->sub);
		if (!kvx_shring_empty(&e->sub))
			busy = true;
	}
	return busy;
}

/* The engine closed its end of one of its rings' wake pairs (ours would stay readable).  An
 * engine that died closed its socket with it: the socket's end of stream closes the session
 * (kvxd_engine_on_event, in this loop pass: epoll reports it too), after it took what the engine
 * sent before it went, its ring included (its last chunks bind their rooms to it).  One that
 * closed the wake end alone broke its session: what its ring holds is taken all the same. */
static void
wake_end_closed(struct kvxd *d, struct kvxd_engine *e, const char *why)
{
	struct pollfd p = {.fd = e->fd, .events = POLLIN | POLLRDHUP};

	if (e->doomed || (poll(&p, 1, 0) == 1 && (p.revents & (POLLHUP | POLLRDHUP | POLLERR))))
		return;
	e->gone = true; /* its operator commands are not run */
	ring_take(d, e, RING_BYTES / KVX_SHRING_REC_HDR, true, NULL);
	d->ctr.engine_bad++;
	kvxd_engine_doom(d, e, why);
}

/* After the loop woke: woken says whether epoll reported the session's submission wake end. */
void
kvxd_engine_ring_unpark(struct kvxd *d, struct kvxd_engine *e, bool woken)
{
	if (e->rings && kvx_shring_park_done(&e->sub, woken) == -EPIPE)
		wake_end_closed(d, e, "it closed its submission ring's wake-up socket");
}

/* The session's event-ring wake end is readable: the engine took something from a ring we wait
 * to put into (kvx_shring_starve), and what waits goes in at the next iteration. */
void
kvxd_engine_ring_room(struct kvxd *d, struct kvxd_engine *e)
{
	if (!e->doomed && e->rings && kvx_shring_wake_drain(e->evt_wake) == -EPIPE)
		wake_end_closed(d, e, "it closed its event ring's wake-up socket");
}

/* End of an iteration: flush event queues into their rings, and wake the engines that wait
 * for what went in (one wake-up per session and batch, only to a parked engine). */
void
kvxd_engine_rings_notify(struct kvxd *d)
{
	for (int i = 0; i < d->engines_end; i++) {
		struct kvxd_engine *e = d->engines[i];
		int rc;

		if (!e || !e->rings || e->doomed)
			continue;
		if (e->outq_head && (rc = kvxd_engine_outq_flush(d, e)))
			kvxd_engine_doom(
				d, e, rc == -EPROTO ? "its event ring is corrupt" : strerror(-rc));
		if (e->evt_dirty) {
			e->evt_dirty = false;
			if (kvx_shring_notify(&e->evt))
				d->ctr.engine_ring_wakes++;
		}
	}
}

/* KVX_ENG_ADMIN_AT (core/engine_proto.h): offset 0 runs the command and keeps its whole text;
 * every reply carries the text from the offset asked, and its whole length in value. */
static void
admin_at(struct kvxd *d, struct kvxd_engine *e, uint64_t seq, const struct kvx_eng_admin_at *m,
	 size_t n)
{
	char cmd[sizeof(e->admin_cmd)];
	int rc = 0;

	n = strnlen((const char *)(m + 1), n);
	if (n >= sizeof(cmd)) { /* never cut short and run */
		kvxd_engine_reply(d, e, seq, -ENAMETOOLONG, 0,
				  "operator command longer than 255 bytes");
		return;
	}
	snprintf(cmd, sizeof(cmd), "%.*s", (int)n, (const char *)(m + 1));
	if (m->offset == 0) {
		struct kvxd_metrics_buf b;

		free(e->admin_text);
		e->admin_text = NULL;
		e->admin_pass = d->loop_pass;
		rc = kvxd_admin_text(d, cmd, e->admin, e->id, &b);
		if (rc == -EPERM && !e->admin)
			KVX_WARN("engine %d (pid %d uid %u): operator command '%s' refused: not an "
				 "admin",
				 e->id, (int)e->pid, (unsigned)e->uid, cmd);
		if (!b.p) {
			kvxd_engine_reply(d, e, seq, rc ? rc : -ENOMEM, 0, "out of memory");
			return;
		}
		e->admin_text = b.p; /* ours now */
		e->admin_text_len = b.len;
		e->admin_rc = rc;
		memcpy(e->admin_cmd, cmd, sizeof(cmd));
	} else if (!e->admin_text || strcmp(cmd, e->admin_cmd) != 0 ||
		   m->offset > e->admin_text_len) {
		kvxd_engine_reply(d, e, seq, -ESTALE, 0,
				  "no such page of that command: ask from offset 0");
		return;
	}
	kvxd_engine_reply(d, e, seq, e->admin_rc, (int64_t)e->admin_text_len,
			  e->admin_text + m->offset);
	if (e->admin_text_len - m->offset <= KVX_ENG_TEXT_MAX) { /* the last page went */
		free(e->admin_text);
		e->admin_text = NULL;
	}
}

/* A session that went: its operator commands are not run.  Their answers would go nowhere,
 * and each could walk every room (its ring may hold 65,536 of them, all taken at once). */
static bool
admin_gone(struct kvxd *d, struct kvxd_engine *e)
{
	if (e->gone)
		d->ctr.engine_admin_gone++;
	return e->gone;
}

/* KVX_ENG_ADMIN: the command (n bytes at at, NUL-terminated or not) and its text in one reply. */
static void
admin_now(struct kvxd *d, struct kvxd_engine *e, uint64_t seq, const char *at, size_t n)
{
	char cmd[sizeof(e->admin_cmd)], text[KVX_ENG_TEXT_MAX];
	int rc;

	n = strnlen(at, n);
	if (n >= sizeof(cmd)) { /* never cut short and run: "fault a:1,b:2" is not "fault a:1" */
		kvxd_engine_reply(d, e, seq, -ENAMETOOLONG, 0,
				  "operator command longer than 255 bytes");
		return;
	}
	snprintf(cmd, sizeof(cmd), "%.*s", (int)n, at);
	e->admin_pass = d->loop_pass;
	rc = kvxd_admin(d, cmd, e->admin, e->id, text, sizeof(text));
	if (rc == -EPERM && !e->admin &&
	    kvx_log_allow(&d->admin_refused_log, kvxd_now_ms(), 10, "refused operator commands"))
		KVX_WARN("engine %d (pid %d uid %u): operator command '%s' refused: not an admin",
			 e->id, (int)e->pid, (unsigned)e->uid, cmd);
	kvxd_engine_reply(d, e, seq, rc, 0, text);
}

static void
handle(struct kvxd *d, struct kvxd_engine *e, const uint8_t *buf, size_t len, int fd)
{
	const struct kvx_eng_hdr *h = (const void *)buf;
	char text[KVX_ENG_TEXT_MAX];
	int64_t v;

	d->ctr.engine_msgs++;
	text[0] = '\0';
	if (e->refused) {
		/* over max_sessions_per_uid: its first request, whatever it is, is answered why,
		 * and the session closes.  Not waited for: an engine whose socket does not take
		 * the answer now (it left earlier answers unread), or that sends only requests
		 * too short to be one, would keep its session for good */
		kvxd_engine_reply(d, e, len >= sizeof(*h) ? h->seq : 0, e->refused, 0,
				  e->refused_text);
		kvxd_engine_doom(d, e,
				 e->outq_head ? "session refused (its answer left unread)"
					      : "session refused");
		goto out;
	}
	if (len < sizeof(*h) || h->len != len) {
		d->ctr.engine_bad++;
		if (len >= sizeof(*h) && h->type == KVX_ENG_CHUNK) /* its room must not succeed */
			kvxd_engine_doom(d, e, "a chunk whose length is not its message's");
		else
			kvxd_engine_reply(d, e, len >= sizeof(*h) ? h->seq : 0, -EBADMSG, 0,
					  "bad message length");
		goto out;
	}
	if (!e->hello && h->type != KVX_ENG_HELLO) {
		kvxd_engine_reply(d, e, h->seq, -EPROTO, 0, "HELLO first");
		goto out;
	}
	switch (h->type) {
	case KVX_ENG_HELLO:
		if (len != sizeof(struct kvx_eng_hello) ||
		    ((const struct kvx_eng_hello *)buf)->version != KVX_ENG_VERSION) {
			kvxd_engine_reply(d, e, h->seq, -EPROTONOSUPPORT, 0,
					  "engine protocol version mismatch");
			break;
		}
		if (((const struct kvx_eng_hello *)buf)->rank > KVX_RANK_MAX) {
			kvxd_engine_reply(d, e, h->seq, -EINVAL, 0, "rank beyond KVX_RANK_MAX");
			break;
		}
		if (e->hello) {
			/* its rooms are keyed by the rank it said: another would strand them */
			d->ctr.engine_bad++;
			kvxd_engine_reply(d, e, h->seq, -EALREADY, 0,
					  "HELLO comes once per session");
			break;
		}
		e->rank = ((const struct kvx_eng_hello *)buf)->rank;
		e->hello = true;
		kvxd_engine_reply(d, e, h->seq, 0, e->id, d->cfg.name);
		break;
	case KVX_ENG_RINGS:
		rings_setup(d, e, h->seq, buf, len);
		break;
	case KVX_ENG_POOL_REG:
		v = len == sizeof(struct kvx_eng_pool_reg)
			    ? pool_register(d, e, (const void *)buf, fd, h->seq, text, sizeof(text))
			    : -EBADMSG;
		if (v != -EINPROGRESS) /* else answered once registered */
			kvxd_engine_reply(d, e, h->seq, v < 0 ? (int)v : 0, v, text);
		break;
	case KVX_ENG_POOL_UNREG: {
		struct kvxd_pool *p =
			len == sizeof(struct kvx_eng_pool_unreg)
				? pool_get(d, e, ((const struct kvx_eng_pool_unreg *)buf)->pool_id)
				: NULL;

		v = p ? pool_unregister(d, p, e, h->seq, 0, NULL) : -ENOENT;
		if (v != -EINPROGRESS) /* else answered once deregistered */
			kvxd_engine_reply(d, e, h->seq, (int)v, 0, NULL);
		break;
	}
	case KVX_ENG_ROOM_OPEN:
		v = len >= sizeof(struct kvx_eng_room_open)
			    ? room_open(d, e, (const void *)buf, len, text, sizeof(text))
			    : -EBADMSG;
		kvxd_engine_reply(d, e, h->seq, v < 0 ? (int)v : 0, v, text);
		break;
	case KVX_ENG_CHUNK:
		if (len < sizeof(struct kvx_eng_chunk)) {
			/* it cannot name its room, which must not succeed without it */
			d->ctr.engine_bad++;
			kvxd_engine_doom(d, e, "a chunk too short to name its room");
			break;
		}
		chunk_submit(d, e, (const void *)buf, len);
		break;
	case KVX_ENG_ROOM_CLOSE:
		kvxd_engine_reply(
			d, e, h->seq,
			len == sizeof(struct kvx_eng_room_close)
				? room_close(d, e, ((const struct kvx_eng_room_close *)buf)->room)
				: -EBADMSG,
			0, NULL);
		break;
	case KVX_ENG_ROOM_ABORT:
		v = len == sizeof(struct kvx_eng_room_abort)
			    ? room_abort(d, e, ((const struct kvx_eng_room_abort *)buf)->room)
			    : -EBADMSG;
		kvxd_engine_reply(d, e, h->seq, v < 0 ? (int)v : 0, v, NULL);
		break;
	case KVX_ENG_ADMIN:
		if (admin_gone(d, e))
			break;
		admin_now(d, e, h->seq, (const char *)buf + sizeof(struct kvx_eng_admin),
			  len - sizeof(struct kvx_eng_admin));
		break;
	case KVX_ENG_ADMIN_AT:
		if (admin_gone(d, e))
			break;
		if (len < sizeof(struct kvx_eng_admin_at)) {
			d->ctr.engine_bad++;
			kvxd_engine_reply(d, e, h->seq, -EBADMSG, 0, "ADMIN_AT: too short");
			break;
		}
		admin_at(d, e, h->seq, (const struct kvx_eng_admin_at *)buf,
			 len - sizeof(struct kvx_eng_admin_at));
		break;
	default:
		d->ctr.engine_bad++;
		kvxd_engine_reply(d, e, h->seq, -EOPNOTSUPP, 0, "unknown request type");
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
	if ((events & EPOLLOUT) && (rc = kvxd_engine_outq_flush(d, e))) {
		kvxd_engine_doom(d, e, strerror(-rc));
		return;
	}
	if (!(events & (EPOLLIN | EPOLLHUP | EPOLLERR | EPOLLRDHUP)))
		return;
	if (events & (EPOLLHUP | EPOLLERR | EPOLLRDHUP))
		e->gone = true; /* (EPOLLRDHUP: watched while held) it sends nothing more */
	for (int i = 0; i < 64 && taking(d, e); i++) {
		/* room for more descriptors than a request carries (one, POOL_REG's): every one
		 * the kernel put into kvxd is closed here but the one a request may carry */
		union {
			char c[CMSG_SPACE(ENG_FDS_SEEN * sizeof(int))];
			struct cmsghdr align;
		} cbuf;
		int nfds = 0;
		struct iovec iov = {.iov_base = buf, .iov_len = sizeof(buf)};
		struct msghdr mh = {.msg_iov = &iov,
				    .msg_iovlen = 1,
				    .msg_control = cbuf.c,
				    .msg_controllen = sizeof(cbuf.c)};
		ssize_t n;
		int fd = -1;

		if (!e->gone && !cores_take(d)) {
			/* the cores are behind: the next request is looked at (no descriptor is
			 * received), and read only if it sends them nothing; only kvxd reads the
			 * socket, so the read gets that request */
			struct kvx_eng_hdr h;
			ssize_t k = recv(e->fd, &h, sizeof(h), MSG_PEEK | MSG_DONTWAIT);

			if (k < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
				return; /* nothing yet: what comes wakes the loop (EPOLLIN) */
			if (k < 0 && errno == ECONNRESET && !e->reset_seen) {
				/* the peek took the socket's one report of it (see below) */
				e->reset_seen = e->gone = true;
				continue;
			}
			if (k > 0 && needs_cores(&h, (size_t)k)) {
				socket_hold(d, e); /* left in the socket, in order */
				return;
			}
		}
		n = recvmsg(e->fd, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR))
			return;
		/* first, whatever came: a message of no bytes (which reads as the end) brings
		 * descriptors all the same */
		for (struct cmsghdr *c = n >= 0 ? CMSG_FIRSTHDR(&mh) : NULL; c;
		     c = CMSG_NXTHDR(&mh, c)) {
			size_t k;

			if (c->cmsg_level != SOL_SOCKET || c->cmsg_type != SCM_RIGHTS ||
			    c->cmsg_len < CMSG_LEN(0))
				continue;
			k = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
			for (size_t j = 0; j < k; j++) {
				int x;

				memcpy(&x, CMSG_DATA(c) + j * sizeof(int), sizeof(int));
				if (nfds++ == 0 && n > 0)
					fd = x;
				else
					close(x);
			}
		}
		if (n < 0 && errno == ECONNRESET && !e->reset_seen) {
			/* the engine closed with replies unread: the socket says so once, then
			 * still hands out what the engine sent before it went (its last chunks:
			 * they bind their rooms to it, so its loss fails them at once), then the
			 * end of the stream */
			e->reset_seen = e->gone = true;
			continue;
		}
		if (n <= 0) {
			int err = errno;

			/* what it put into its submission ring before it went is taken first,
			 * like the datagrams it sent (its last chunks bind their rooms to it);
			 * bounded: the ring holds at most RING_BYTES / 8 records */
			e->gone = true;
			if (e->rings)
				ring_take(d, e, RING_BYTES / KVX_SHRING_REC_HDR, true, NULL);
			kvxd_engine_doom(d, e, n == 0 ? "disconnected" : strerror(err));
			return;
		}
		if (nfds > 1) {
			/* no request carries two: closed, all of them, and so is the session */
			d->ctr.engine_bad++;
			close(fd);
			kvxd_engine_doom(d, e, "a request carried more than one file descriptor");
			return;
		}
		if (mh.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) {
			d->ctr.engine_bad++;
			if (fd >= 0)
				close(fd);
			if ((size_t)n >= sizeof(struct kvx_eng_hdr) &&
			    ((const struct kvx_eng_hdr *)buf)->type == KVX_ENG_CHUNK) {
				/* a chunk cut short: its room must not succeed without it */
				kvxd_engine_doom(d, e, "a chunk larger than a message may be");
				return;
			}
			kvxd_engine_reply(d, e, 0, -EMSGSIZE, 0, "message too large");
			continue;
		}
		handle(d, e, buf, (size_t)n, fd);
	}
}
