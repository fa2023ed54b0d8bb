/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The engine Unix socket of kvxd (control/engine.c) against hostile or broken engines: who may
 * connect and who may run operator commands (credentials captured at accept, full group list), what
 * kvxd_engine_listen does with whatever already sits at the socket path, an engine that never reads
 * its replies (the control core must not wait for it), and the per-uid and per-engine caps.  Two
 * control cores ("a" decode, "b" prefill; not connected to each other) run in this process on the
 * fake verbs with a fake clock; the engines are raw SOCK_SEQPACKET clients speaking
 * core/engine_proto.h, and every wait is a bounded number of loop steps.
 *
 * Credentials: as root, a helper thread switches its own (per-thread, raw syscall) uid, gid and
 * group list before connecting, so kvxd sees a real non-root peer.  Tests that need that are
 * skipped when the tests do not run as root.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <grp.h>
#include <linux/magic.h>
#include <poll.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/file.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <pwd.h>
#include <sys/stat.h>
#include <sys/statfs.h>
#include <sys/syscall.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include <cmocka.h>

#include "wake_bytes.h"

#include "control/kvxd.h"
#include "control/abort.h"
#include "control/admin.h"
#include "control/cred.h"
#include "control/engine.h"
#include "control/engine_io.h"
#include "control/loop.h"
#include "control/peer.h"
#include "control/peer_io.h"
#include "control/rooms.h"
#include "core/engine_proto.h"
#include "core/fault.h"
#include "control/engine.c" /* the negative controls shadow it with a mutant (tests/mutants/) */

#include "nodes_harness.h"

#define A N[0] /* decode node "a" */
#define B N[1] /* prefill node "b" */
#define NOBODY 65534
#define MAX_STEPS 200 /* loop steps a reply may take; a healthy one takes 1 or 2 */

static char tmpdir[64];

struct eng_reply {
	int32_t status;
	int64_t value;
	char text[KVX_ENG_TEXT_MAX + 1];
};

/* A raw engine: one SOCK_SEQPACKET connection, events it received in order. */
struct eng {
	int fd;
	uint64_t seq;
	bool closed; /* kvxd closed the session */
	struct kvx_event ev[64];
	int nev;
	uint32_t nstate[KVX_ROOM_STATE_COUNT]; /* events seen, by state (ev: the first 64) */
	uint64_t replies_seen, last_reply_seq;
};

static void
sock_path(struct kvxd *d, char *out, size_t len)
{
	snprintf(out, len, "%s/%s.sock", tmpdir, d->cfg.name);
}

static void
engine_cfg(struct kvxd *d)
{
	sock_path(d, d->cfg.socket_path, sizeof(d->cfg.socket_path));
	d->cfg.socket_mode = 0660;
	d->cfg.admin_group[0] = '\0';
	d->cfg.n_rank_users = 0;
	d->cfg.max_sessions_per_uid = 16;
	d->cfg.max_pools_per_engine = 16;
	d->cfg.max_pools_per_uid = 128;
	d->cfg.max_rooms_per_uid = 131072;
	d->cfg.max_rooms_per_engine = 65536;
	d->cfg.max_pinned_mb_per_uid = 65536;
	d->cfg.max_chunk_mb_per_engine = 256;
	d->cfg.reply_queue_kb = 1024;
}

/* kvxd_engine_listen as main() does it, with the listener on the node's epoll. */
static int
listen_on(struct kvxd *d)
{
	int rc = kvxd_engine_listen(d);

	if (rc)
		return rc;
	d->eng_ev = (struct kvxd_fd){.kind = KVXD_FD_ENG_LISTEN};
	assert_int_equal(kvxd_epoll_add(d, d->eng_fd, &d->eng_ev, EPOLLIN), 0);
	return 0;
}

static int
setup(void **state)
{
	static const char *const names[] = {"a", "b"};

	snprintf(tmpdir, sizeof(tmpdir), "/tmp/kvx-eng-XXXXXX");
	if (!mkdtemp(tmpdir))
		return -1;
	chmod(tmpdir, 0755); /* a non-root engine must reach the socket */
	nodes_setup(2, names);
	engine_cfg(&A);
	engine_cfg(&B);
	return 0;
}

/* The same on two rails (RDMA devices) per node: pools are registered on both. */
static int
setup_rails(void **state)
{
	int rc;

	harness_rails = 2;
	rc = setup(state);
	harness_rails = 1;
	return rc;
}

static int
teardown(void **state)
{
	DIR *dir;
	struct dirent *de;

	for (int k = 0; k < 20; k++)
		pump_once(); /* engines closed by the tests are noticed */
	for (int i = 0; i < nnodes; i++) {
		/* a test that started the verbs workers: stopped, and their done jobs applied,
		 * before its pools go (here, then), as at kvxd's shutdown */
		kvxd_vwork_stop(&N[i]);
		kvxd_loop_vwork_done(&N[i]);
		/* rooms go first (they hold pool references), then engines and pools */
		nodes_remove_rooms(&N[i]);
		kvx_rcu_barrier(); /* freed rooms drop their pool references */
		kvxd_engine_close_all(&N[i]);
		if (N[i].eng_fd >= 0)
			close(N[i].eng_fd);
		N[i].eng_fd = -1;
	}
	kvx_fault_disarm_all();
	nodes_teardown();
	dir = opendir(tmpdir);
	while (dir && (de = readdir(dir)))
		if (de->d_name[0] != '.') {
			char p[200];

			snprintf(p, sizeof(p), "%s/%s", tmpdir, de->d_name);
			unlink(p);
		}
	if (dir)
		closedir(dir);
	rmdir(tmpdir);
	umask(022);
	return 0;
}

/* ---- a raw engine -------------------------------------------------------------------------- */

static int
connect_path(const char *path)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);

	if (fd < 0)
		return -errno;
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", path);
	if (connect(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		int rc = -errno;

		close(fd);
		return rc;
	}
	return fd;
}

static void
eng_init(struct eng *e, int fd)
{
	memset(e, 0, sizeof(*e));
	e->fd = fd;
}

static void
eng_connect(struct eng *e, struct kvxd *d)
{
	char path[128];
	int fd;

	sock_path(d, path, sizeof(path));
	fd = connect_path(path);
	assert_true(fd >= 0);
	eng_init(e, fd);
}

static void
eng_close(struct eng *e)
{
	if (e->fd >= 0)
		close(e->fd);
	e->fd = -1;
}

/* Send the request of len bytes at m (its header is filled here); fd rides along when >= 0.
 * Returns its seq, or 0 when the socket would block. */
static uint64_t
eng_send(struct eng *e, uint16_t type, void *m, size_t len, int fd)
{
	struct kvx_eng_hdr *h = m;
	union {
		char buf[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} ctl;
	struct iovec iov = {.iov_base = m, .iov_len = len};
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
	ssize_t n;

	*h = (struct kvx_eng_hdr){.type = type, .len = (uint32_t)len, .seq = ++e->seq};
	if (fd >= 0) {
		struct cmsghdr *cm;

		memset(&ctl, 0, sizeof(ctl));
		mh.msg_control = ctl.buf;
		mh.msg_controllen = sizeof(ctl.buf);
		cm = CMSG_FIRSTHDR(&mh);
		cm->cmsg_level = SOL_SOCKET;
		cm->cmsg_type = SCM_RIGHTS;
		cm->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(cm), &fd, sizeof(fd));
	}
	n = sendmsg(e->fd, &mh, MSG_DONTWAIT | MSG_NOSIGNAL);
	if (n < 0 && errno == EAGAIN) {
		e->seq--;
		return 0;
	}
	assert_int_equal(n, (ssize_t)len);
	return h->seq;
}

/* Read what the socket holds now.  Events are recorded; a REPLY for `want` is copied to out
 * (when out) and ends the read with 1.  Returns 0 when nothing more is there, -ECONNRESET once
 * kvxd closed the session. */
static int
eng_read(struct eng *e, uint64_t want, struct eng_reply *out)
{
	static uint64_t buf[(KVX_ENG_MSG_MAX + 64) / 8];

	for (;;) {
		const struct kvx_eng_hdr *h = (const void *)buf;
		ssize_t n = recv(e->fd, buf, sizeof(buf), MSG_DONTWAIT);

		if (n < 0 && errno == EAGAIN)
			return 0;
		if (n <= 0) {
			e->closed = true;
			return -ECONNRESET;
		}
		assert_true((size_t)n >= sizeof(*h));
		assert_int_equal(h->len, (uint32_t)n);
		if (h->type == KVX_ENG_EVENT) {
			const struct kvx_eng_event *ev = (const void *)buf;

			assert_int_equal(n, sizeof(*ev));
			if (e->nev < 64)
				e->ev[e->nev++] = ev->ev;
			if (ev->ev.state < KVX_ROOM_STATE_COUNT)
				e->nstate[ev->ev.state]++;
			continue;
		}
		assert_int_equal(h->type, KVX_ENG_REPLY);
		/* replies come whole and in request order */
		assert_true(h->seq > e->last_reply_seq || h->seq == 0);
		if (h->seq)
			e->last_reply_seq = h->seq;
		e->replies_seen++;
		if (h->seq == want && want) {
			const struct kvx_eng_reply *r = (const void *)buf;

			assert_int_equal((size_t)n, sizeof(*r) + r->text_len);
			if (out) {
				out->status = r->status;
				out->value = r->value;
				memcpy(out->text, r + 1, r->text_len);
				out->text[r->text_len] = '\0';
			}
			return 1;
		}
	}
}

/* Step the nodes until the reply to seq arrives.  Returns the steps it took (>= 1), or
 * -ECONNRESET when kvxd closed the session first; fails the test after MAX_STEPS. */
static int
eng_wait(struct eng *e, uint64_t seq, struct eng_reply *out)
{
	for (int step = 1; step <= MAX_STEPS; step++) {
		int r;

		pump_once();
		r = eng_read(e, seq, out);
		if (r == 1)
			return step;
		if (r < 0)
			return r;
	}
	fail_msg("no reply to request %llu within %d steps", (unsigned long long)seq, MAX_STEPS);
	return -1;
}

/* One request and its reply: the reply's status (or -ECONNRESET). */
static int
eng_call(struct eng *e, uint16_t type, void *m, size_t len, int fd, struct eng_reply *out)
{
	static struct eng_reply scratch;
	uint64_t seq = eng_send(e, type, m, len, fd);
	int r;

	assert_true(seq != 0);
	if (!out)
		out = &scratch;
	r = eng_wait(e, seq, out);
	return r < 0 ? r : out->status;
}

static int
eng_hello(struct eng *e, struct eng_reply *out)
{
	struct kvx_eng_hello m = {.version = KVX_ENG_VERSION};

	return eng_call(e, KVX_ENG_HELLO, &m, sizeof(m), -1, out);
}

/* HELLO with rank `rank`: its status. */
static int
eng_hello_rank(struct eng *e, uint32_t rank)
{
	struct kvx_eng_hello m = {.version = KVX_ENG_VERSION, .rank = rank};

	return eng_call(e, KVX_ENG_HELLO, &m, sizeof(m), -1, NULL);
}

/* Send the operator command cmd; returns its seq (0: the socket would block). */
static uint64_t
eng_admin_send(struct eng *e, const char *cmd)
{
	uint64_t buf[(sizeof(struct kvx_eng_admin) + 256) / 8];
	size_t cl = strlen(cmd);

	assert_true(cl <= 256 - 8);
	memcpy((uint8_t *)buf + sizeof(struct kvx_eng_admin), cmd, cl);
	return eng_send(e, KVX_ENG_ADMIN, buf, sizeof(struct kvx_eng_admin) + cl, -1);
}

static int
eng_admin(struct eng *e, const char *cmd, struct eng_reply *out)
{
	static struct eng_reply scratch;
	uint64_t seq = eng_admin_send(e, cmd);
	int r;

	assert_true(seq != 0);
	if (!out)
		out = &scratch;
	r = eng_wait(e, seq, out);
	return r < 0 ? r : out->status;
}

/* A Prometheus counter's value from "counters" (the full series name, labels included), or -1
 * when the series is not there. */
static long long
counter(struct eng *e, const char *series)
{
	static struct eng_reply r;
	const char *p;

	assert_int_equal(eng_admin(e, "counters", &r), 0);
	p = strstr(r.text, series);
	if (!p || p[strlen(series)] != ' ')
		return -1;
	return strtoll(p + strlen(series) + 1, NULL, 10);
}

static int
memfd_sized(size_t bytes)
{
	int fd = memfd_create("test-pool", MFD_CLOEXEC);

	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, (off_t)bytes), 0);
	return fd;
}

/* Register a pool of nbufs x npages x page_size backed by a memfd of `bytes`. */
static int
eng_pool_reg(struct eng *e, uint32_t page_size, uint32_t npages, uint32_t nbufs, size_t bytes,
	     struct eng_reply *out)
{
	struct kvx_eng_pool_reg m = {.geom = {page_size, npages, nbufs}};
	int fd = memfd_sized(bytes), rc;

	rc = eng_call(e, KVX_ENG_POOL_REG, &m, sizeof(m), fd, out);
	close(fd);
	return rc;
}

static int
eng_pool_id(struct eng *e, uint32_t page_size, uint32_t npages, uint32_t nbufs)
{
	struct eng_reply r;
	int rc = eng_pool_reg(e, page_size, npages, nbufs, (size_t)page_size * npages * nbufs, &r);

	return rc < 0 ? rc : (int)r.value;
}

static int
eng_pool_unreg(struct eng *e, int id)
{
	struct kvx_eng_pool_unreg m = {.pool_id = id};

	return eng_call(e, KVX_ENG_POOL_UNREG, &m, sizeof(m), -1, NULL);
}

/* A decode ROOM_OPEN of room id on pool with pages 0..n-1, source "b", built in buf.  Returns
 * its length. */
#define ROOM_OPEN_BUF_WORDS                                                  \
	((sizeof(struct kvx_eng_room_open) + sizeof(struct kvx_eng_region) + \
	  sizeof(struct kvx_eng_source) + 64 * 4) /                          \
	 8)
static size_t
room_open_msg(uint64_t buf[ROOM_OPEN_BUF_WORDS], uint64_t id, int pool, uint32_t n)
{
	struct kvx_eng_room_open *m = (void *)buf;
	struct kvx_eng_region *rg = (void *)(m + 1);
	struct kvx_eng_source *src = (void *)(rg + 1);
	uint32_t *pages = (uint32_t *)(src + 1);

	assert_true(n <= 64);
	memset(buf, 0, ROOM_OPEN_BUF_WORDS * 8);
	m->room = id;
	m->nregions = 1;
	m->nsources = 1;
	rg->pool_id = pool;
	rg->npages = n;
	memcpy(src->name, "b", 2);
	for (uint32_t i = 0; i < n; i++)
		pages[i] = i;
	return (size_t)((uint8_t *)(pages + n) - (uint8_t *)m);
}

/* Node d listens; engine e connects, says HELLO and registers a pool of 16 pages of 256 B
 * (one buffer), whose id is returned. */
static int
eng_with_pool(struct eng *e, struct kvxd *d)
{
	int pool;

	assert_int_equal(listen_on(d), 0);
	eng_connect(e, d);
	assert_int_equal(eng_hello(e, NULL), 0);
	pool = eng_pool_id(e, 256, 16, 1);
	assert_true(pool > 0);
	return pool;
}

/* Decode: open room id on pool with pages 0..n-1, source "b". */
static int
eng_room_open(struct eng *e, uint64_t id, int pool, uint32_t n, struct eng_reply *out)
{
	uint64_t buf[ROOM_OPEN_BUF_WORDS];
	size_t len = room_open_msg(buf, id, pool, n);

	return eng_call(e, KVX_ENG_ROOM_OPEN, buf, len, -1, out);
}

static int
eng_room_req(struct eng *e, uint16_t type, uint64_t id)
{
	struct kvx_eng_room_close m = {.room = id};

	return eng_call(e, type, &m, sizeof(m), -1, NULL);
}

/* Prefill: one chunk of room id: source pages src0.. (n of them) of pool, buffers [b0, b0 + nb)
 * (nb 0: every buffer), to region's destination pages dst_offset.., for a room that feeds ndest
 * decode endpoints (0: one). */
#define CHUNK_BUF_WORDS ((sizeof(struct kvx_eng_chunk) + 64 * 4) / 8)

/* A CHUNK of room id (source pages src0..src0+n-1, n <= 64) built in buf; returns its length. */
static size_t
chunk_msg(uint64_t *buf, uint64_t id, uint32_t region, int pool, uint32_t src0, uint32_t n,
	  uint32_t dst_offset, uint32_t b0, uint32_t nb, uint32_t ndest, bool last)
{
	struct kvx_eng_chunk *m = (void *)buf;
	uint32_t *pages = (uint32_t *)(m + 1);

	assert_true(n <= 64);
	memset(buf, 0, CHUNK_BUF_WORDS * 8);
	m->room = id;
	m->pool_id = pool;
	m->npages = n;
	m->dst_offset = dst_offset;
	m->last = last;
	m->region = region;
	m->buf_first = b0;
	m->buf_count = nb;
	m->ndest = ndest;
	for (uint32_t i = 0; i < n; i++)
		pages[i] = src0 + i;
	return sizeof(*m) + 4 * n;
}

static void
eng_chunk_full(struct eng *e, uint64_t id, uint32_t region, int pool, uint32_t src0, uint32_t n,
	       uint32_t dst_offset, uint32_t b0, uint32_t nb, uint32_t ndest, bool last)
{
	uint64_t buf[CHUNK_BUF_WORDS];
	size_t len = chunk_msg(buf, id, region, pool, src0, n, dst_offset, b0, nb, ndest, last);

	assert_true(eng_send(e, KVX_ENG_CHUNK, buf, len, -1) != 0);
}

/* Prefill: one chunk of room id, source pages 0..n-1 to dst_offset, last or not. */
static void
eng_chunk_x(struct eng *e, uint64_t id, int pool, uint32_t n, uint32_t dst_offset, bool last)
{
	eng_chunk_full(e, id, 0, pool, 0, n, dst_offset, 0, 0, 0, last);
}

/* Prefill: one (last) chunk of room id, source pages 0..n-1 to dst_offset. */
static void
eng_chunk(struct eng *e, uint64_t id, int pool, uint32_t n, uint32_t dst_offset)
{
	eng_chunk_x(e, id, pool, n, dst_offset, true);
}

/* The first event about room id in state st (or NULL), after a sync round trip. */
static const struct kvx_event *
eng_event(struct eng *e, uint64_t id, int st)
{
	struct eng_reply r;

	assert_int_equal(eng_admin(e, "peers", &r), 0); /* every earlier event is in */
	for (int i = 0; i < e->nev; i++)
		if (e->ev[i].room == id && e->ev[i].state == st)
			return &e->ev[i];
	return NULL;
}

/* The same, once it came (a refused chunk's FAILED comes from its room's core). */
static const struct kvx_event *
eng_event_wait(struct eng *e, uint64_t id, int st)
{
	PUMP_UNTIL(eng_event(e, id, st));
	return eng_event(e, id, st);
}

static int
live_engines(struct kvxd *d)
{
	int n = 0;

	for (int i = 0; i < KVXD_MAX_ENGINES; i++)
		n += d->engines[i] != NULL;
	return n;
}

/* ---- connecting as another user (root only) -------------------------------------------------- */

struct as_user {
	const char *path;
	uid_t uid;
	gid_t gid;
	int ngroups;
	gid_t groups[4];
	int fd;
};

/* setgroups/setresgid/setresuid as raw syscalls change this thread's credentials only (glibc's
 * wrappers would change every thread of the process). */
static void *
as_user_thread(void *arg)
{
	struct as_user *a = arg;

	if (syscall(SYS_setgroups, (size_t)a->ngroups, a->groups) < 0 ||
	    syscall(SYS_setresgid, a->gid, a->gid, a->gid) < 0 ||
	    syscall(SYS_setresuid, a->uid, a->uid, a->uid) < 0) {
		a->fd = -errno;
		return NULL;
	}
	a->fd = connect_path(a->path);
	return NULL;
}

/* Connect to d's engine socket as uid/gid with the given supplementary groups. */
static void
eng_connect_as(struct eng *e, struct kvxd *d, uid_t uid, gid_t gid, int ngroups,
	       const gid_t *groups)
{
	char path[128];
	struct as_user a = {.path = path, .uid = uid, .gid = gid, .ngroups = ngroups};
	pthread_t t;

	sock_path(d, path, sizeof(path));
	if (ngroups)
		memcpy(a.groups, groups, sizeof(gid_t) * (size_t)ngroups);
	assert_int_equal(pthread_create(&t, NULL, as_user_thread, &a), 0);
	assert_int_equal(pthread_join(t, NULL), 0);
	assert_true(a.fd >= 0);
	eng_init(e, a.fd);
}

/* An engine of user uid on rank `rank` of node d, with one pool: its pool id. */
static int
eng_of_user(struct eng *e, struct kvxd *d, uid_t uid, uint32_t rank)
{
	int pool;

	eng_connect_as(e, d, uid, getegid(), 0, NULL);
	assert_int_equal(eng_hello_rank(e, rank), 0);
	pool = eng_pool_id(e, 256, 16, 1);
	assert_true(pool > 0);
	return pool;
}

static void
need_root(void)
{
	if (geteuid() != 0)
		skip();
}

/* A group other than root's that exists here (for admin_group). */
static const struct group *
some_group(void)
{
	static const char *const names[] = {"adm", "staff", "users", "daemon", "sys"};

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		const struct group *g = getgrnam(names[i]);

		if (g && g->gr_gid != 0)
			return g;
	}
	skip();
	return NULL;
}

/* ---- 1. the socket path ------------------------------------------------------------------------
 */

static void
write_file(const char *path, const char *text)
{
	FILE *f = fopen(path, "w");

	assert_non_null(f);
	fputs(text, f);
	fclose(f);
}

static void
expect_file(const char *path, const char *text)
{
	char buf[64] = {0};
	FILE *f = fopen(path, "r");

	assert_non_null(f);
	assert_true(fread(buf, 1, sizeof(buf) - 1, f) > 0);
	fclose(f);
	assert_string_equal(buf, text);
}

static void
test_listen_keeps_a_regular_file(void **state)
{
	write_file(A.cfg.socket_path, "precious\n");
	assert_int_equal(listen_on(&A), -EEXIST);
	assert_int_equal(A.eng_fd, -1);
	expect_file(A.cfg.socket_path, "precious\n");
}

static void
test_listen_keeps_a_symlink(void **state)
{
	char target[128];
	struct stat st;

	snprintf(target, sizeof(target), "%s/target", tmpdir);
	write_file(target, "precious\n");
	assert_int_equal(symlink(target, A.cfg.socket_path), 0);
	assert_int_equal(listen_on(&A), -EEXIST);
	assert_int_equal(lstat(A.cfg.socket_path, &st), 0);
	assert_true(S_ISLNK(st.st_mode));
	expect_file(target, "precious\n");
}

/* A socket at the path that accepts a connection: another kvxd is running there. */
static void
test_listen_does_not_steal_a_live_socket(void **state)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int other = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC | SOCK_NONBLOCK, 0), c, a, n = 0;
	struct stat before, after;

	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", A.cfg.socket_path);
	assert_int_equal(bind(other, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(listen(other, 4), 0);
	assert_int_equal(stat(A.cfg.socket_path, &before), 0);
	assert_int_equal(listen_on(&A), -EADDRINUSE);
	assert_int_equal(A.eng_fd, -1);
	/* the path is still the other server's: a new client reaches it */
	assert_int_equal(stat(A.cfg.socket_path, &after), 0);
	assert_int_equal(after.st_ino, before.st_ino);
	c = connect_path(A.cfg.socket_path);
	assert_true(c >= 0);
	while ((a = accept(other, NULL, NULL)) >= 0) {
		n++;
		close(a);
	}
	assert_true(n >= 1);
	close(c);
	close(other);
}

/* A socket nobody listens on, owned by kvxd's uid: its own leftover, replaced. */
static void
test_listen_replaces_its_own_stale_socket(void **state)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int old = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	struct eng e;
	struct stat st;

	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", A.cfg.socket_path);
	assert_int_equal(bind(old, (struct sockaddr *)&sa, sizeof(sa)), 0);
	close(old); /* the file stays: a stale socket */
	assert_int_equal(listen_on(&A), 0);
	assert_int_equal(lstat(A.cfg.socket_path, &st), 0);
	assert_true(S_ISSOCK(st.st_mode));
	assert_int_equal(st.st_mode & 0777, 0660);
	eng_connect(&e, &A);
	assert_int_equal(eng_hello(&e, NULL), 0);
	eng_close(&e);
}

/* A stale socket that another uid owns is not kvxd's to delete. */
static void
test_listen_keeps_a_foreign_stale_socket(void **state)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int old = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0);
	struct stat st;

	need_root();
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", A.cfg.socket_path);
	assert_int_equal(bind(old, (struct sockaddr *)&sa, sizeof(sa)), 0);
	close(old);
	assert_int_equal(lchown(A.cfg.socket_path, NOBODY, NOBODY), 0);
	assert_int_equal(listen_on(&A), -EPERM);
	assert_int_equal(lstat(A.cfg.socket_path, &st), 0);
	assert_true(S_ISSOCK(st.st_mode));
	assert_int_equal(st.st_uid, NOBODY);
}

/* The socket gets exactly the configured mode, whatever the umask. */
static void
test_listen_mode(void **state)
{
	struct stat st;

	umask(0);
	A.cfg.socket_mode = 0600;
	assert_int_equal(listen_on(&A), 0);
	assert_int_equal(stat(A.cfg.socket_path, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0600);
	umask(077);
	B.cfg.socket_mode = 0660;
	assert_int_equal(listen_on(&B), 0);
	assert_int_equal(stat(B.cfg.socket_path, &st), 0);
	assert_int_equal(st.st_mode & 0777, 0660);
	umask(022);
}

/* At exit kvxd removes its socket, and nothing that replaced it. */
static void
test_unlisten_removes_only_its_own_socket(void **state)
{
	struct stat st;

	assert_int_equal(listen_on(&A), 0);
	kvxd_engine_unlisten(&A);
	assert_int_equal(A.eng_fd, -1);
	assert_int_equal(lstat(A.cfg.socket_path, &st), -1);
	assert_int_equal(listen_on(&A), 0);
	assert_int_equal(unlink(A.cfg.socket_path), 0);
	write_file(A.cfg.socket_path, "precious\n");
	kvxd_engine_unlisten(&A);
	expect_file(A.cfg.socket_path, "precious\n");
}

static void
test_listen_refuses_an_unknown_admin_group(void **state)
{
	struct stat st;

	snprintf(A.cfg.admin_group, sizeof(A.cfg.admin_group), "kvx-no-such-group");
	assert_int_equal(listen_on(&A), -ENOENT);
	assert_int_equal(lstat(A.cfg.socket_path, &st), -1);
	/* a number past 32 bits is no gid (4294967296 would be cut to root's 0), nor is -1 */
	snprintf(A.cfg.admin_group, sizeof(A.cfg.admin_group), "4294967296");
	assert_int_equal(listen_on(&A), -ENOENT);
	snprintf(A.cfg.admin_group, sizeof(A.cfg.admin_group), "4294967295");
	assert_int_equal(listen_on(&A), -ENOENT);
	snprintf(A.cfg.admin_group, sizeof(A.cfg.admin_group), "4242"); /* a bare gid is one */
	assert_int_equal(listen_on(&A), 0);
	assert_true(A.has_admin_gid);
	assert_int_equal(A.admin_gid, 4242);
}

/* ---- 2. credentials ----------------------------------------------------------------------------
 */

/* The rules themselves, on made-up credentials: admin and connect rights, any group counts. */
static void
test_credential_rules(void **state)
{
	gid_t groups[] = {5, 4242, 7};
	struct kvxd d = {.self_uid = 1000, .sock_gid = 7, .admin_gid = 4242, .has_admin_gid = true};
	struct kvxd_cred root = {.uid = 0, .gid = 99};
	struct kvxd_cred self = {.uid = 1000, .gid = 99};
	struct kvxd_cred member = {.uid = 2000, .gid = 99, .groups = groups, .ngroups = 3};
	struct kvxd_cred primary = {.uid = 2000, .gid = 7};
	struct kvxd_cred outsider = {.uid = 2000, .gid = 99, .groups = groups, .ngroups = 1};

	assert_true(kvxd_cred_may_connect(&d, &root) && kvxd_cred_is_admin(&d, &root));
	assert_true(kvxd_cred_may_connect(&d, &self) && kvxd_cred_is_admin(&d, &self));
	assert_true(kvxd_cred_may_connect(&d, &member) && kvxd_cred_is_admin(&d, &member));
	assert_true(kvxd_cred_may_connect(&d, &primary));
	assert_false(kvxd_cred_is_admin(&d, &primary));
	assert_false(kvxd_cred_may_connect(&d, &outsider));
	assert_false(kvxd_cred_is_admin(&d, &outsider));
	d.has_admin_gid = false; /* no admin_group: root and kvxd's uid only */
	assert_false(kvxd_cred_is_admin(&d, &member));
	assert_true(kvxd_cred_is_admin(&d, &self));
}

/* kvxd_cred_read sees this process's uid, gid and full group list. */
static void
test_credentials_read_from_a_socket(void **state)
{
	gid_t mine[256];
	int sv[2], n = getgroups(256, mine);
	struct kvxd_cred c;

	assert_true(n >= 0);
	assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET, 0, sv), 0);
	assert_int_equal(kvxd_cred_read(sv[0], &c), 0);
	assert_int_equal(c.uid, geteuid());
	assert_int_equal(c.gid, getegid());
	assert_int_equal(c.pid, getpid());
	for (int i = 0; i < n; i++)
		assert_true(kvxd_cred_in_group(&c, mine[i]));
	kvxd_cred_fini(&c);
	close(sv[0]);
	close(sv[1]);
}

/* One KVX_ENG_ADMIN_AT request: cmd's text from offset. */
static int
eng_admin_at(struct eng *e, const char *cmd, uint64_t offset, struct eng_reply *out)
{
	uint64_t buf[(sizeof(struct kvx_eng_admin_at) + 256) / 8];
	struct kvx_eng_admin_at *m = (void *)buf;
	size_t cl = strlen(cmd);
	uint64_t seq;
	int r;

	assert_true(cl <= 256 - 16);
	m->offset = offset;
	memcpy(m + 1, cmd, cl);
	seq = eng_send(e, KVX_ENG_ADMIN_AT, m, sizeof(*m) + cl, -1);
	assert_true(seq != 0);
	r = eng_wait(e, seq, out);
	return r < 0 ? r : out->status;
}

/* An operator command longer than kvxd keeps (255 bytes) is refused whole, by both requests:
 * before, its first 255 bytes ran.  Here those are a fault list that is valid on its own
 * ("handshake.stall:0,handshake.after_rts:000..."): cut short, it armed a fault the whole
 * command never asked for (mutant admin_command_cut). */
static void
test_admin_command_too_long_is_refused(void **state)
{
	static struct eng_reply r;
	uint64_t buf[(sizeof(struct kvx_eng_admin_at) + 512) / 8];
	char cmd[301];
	struct eng e;
	uint64_t seq;
	size_t n;

	(void)state;
	n = (size_t)snprintf(cmd, sizeof(cmd), "fault handshake.stall:0,handshake.after_rts:");
	while (n < sizeof(cmd) - 2)
		cmd[n++] = '0';
	cmd[n++] = '1';
	cmd[n] = '\0';
	assert_int_equal(strlen(cmd), 300);
	assert_int_equal(listen_on(&A), 0);
	eng_connect(&e, &A);
	assert_int_equal(eng_hello(&e, NULL), 0);
	memcpy((uint8_t *)buf + sizeof(struct kvx_eng_admin), cmd, n);
	seq = eng_send(&e, KVX_ENG_ADMIN, buf, sizeof(struct kvx_eng_admin) + n, -1);
	assert_true(eng_wait(&e, seq, &r) >= 0);
	assert_int_equal(r.status, -ENAMETOOLONG);
	assert_false(kvx_fault_hit(KVX_FAULT_HS_STALL)); /* nothing armed */
	((struct kvx_eng_admin_at *)buf)->offset = 0;
	memcpy((uint8_t *)buf + sizeof(struct kvx_eng_admin_at), cmd, n);
	seq = eng_send(&e, KVX_ENG_ADMIN_AT, buf, sizeof(struct kvx_eng_admin_at) + n, -1);
	assert_true(eng_wait(&e, seq, &r) >= 0);
	assert_int_equal(r.status, -ENAMETOOLONG);
	assert_false(kvx_fault_hit(KVX_FAULT_HS_STALL));
	kvx_fault_disarm_all();
	eng_close(&e);
}

/* KVX_ENG_ADMIN_AT: offset 0 runs the command and keeps its text; each reply carries the text
 * from the offset asked (at most KVX_ENG_TEXT_MAX bytes) and the whole length; the last page
 * frees the text; an offset past it, another command or no text kept is -ESTALE; a refused
 * command's status comes with its explanation. */
static void
test_admin_pages(void **state)
{
	static struct eng_reply r;
	static char big[3 * KVX_ENG_TEXT_MAX + 123];
	struct kvxd_engine *ke = NULL;
	struct eng e;
	size_t got = 0;

	(void)state;
	assert_int_equal(listen_on(&A), 0);
	eng_connect(&e, &A);
	assert_int_equal(eng_hello(&e, NULL), 0);
	assert_int_equal(eng_admin_at(&e, "peers", 0, &r), 0);
	assert_int_equal(r.value, (int64_t)strlen(r.text)); /* one page: the whole text */
	assert_non_null(strstr(r.text, "peer b "));
	for (int i = 0; i < KVXD_MAX_ENGINES; i++)
		if (A.engines[i])
			ke = A.engines[i];
	assert_non_null(ke);
	assert_null(ke->admin_text); /* one page: nothing kept */
	assert_int_equal(eng_admin_at(&e, "peers", 5, &r), -ESTALE);

	/* a text of three pages and a bit, as kvxd keeps it after offset 0 */
	for (size_t i = 0; i < sizeof(big) - 1; i++)
		big[i] = (char)('a' + i % 26);
	ke->admin_text = strdup(big);
	ke->admin_text_len = sizeof(big) - 1;
	ke->admin_rc = 0;
	snprintf(ke->admin_cmd, sizeof(ke->admin_cmd), "counters");
	assert_int_equal(eng_admin_at(&e, "rooms", KVX_ENG_TEXT_MAX, &r), -ESTALE);
	assert_int_equal(eng_admin_at(&e, "counters", sizeof(big), &r), -ESTALE);
	assert_non_null(ke->admin_text); /* refusals keep it */
	for (got = KVX_ENG_TEXT_MAX; got < sizeof(big) - 1;) {
		assert_int_equal(eng_admin_at(&e, "counters", got, &r), 0);
		assert_int_equal(r.value, (int64_t)(sizeof(big) - 1));
		assert_memory_equal(r.text, big + got, strlen(r.text));
		assert_true(strlen(r.text) > 0 && strlen(r.text) <= KVX_ENG_TEXT_MAX);
		got += strlen(r.text);
	}
	assert_int_equal(got, sizeof(big) - 1);
	assert_null(ke->admin_text); /* the last page freed it */
	assert_int_equal(eng_admin_at(&e, "counters", KVX_ENG_TEXT_MAX, &r), -ESTALE);

	/* a real text of its own: counters, the first page from offset 0 */
	assert_int_equal(eng_admin_at(&e, "counters", 0, &r), 0);
	assert_true(r.value >= (int64_t)strlen(r.text));
	assert_non_null(strstr(r.text, "kvx_"));
	/* a refused command: its status on the page, its explanation as the text */
	assert_int_equal(eng_admin_at(&e, "nonsense", 0, &r), -EINVAL);
	assert_non_null(strstr(r.text, "commands: "));
	eng_close(&e);
}

/* nobody, in the socket's group only through a supplementary group: accepted (the old check
 * compared the primary gid only); nobody outside the group: refused and counted. */
static void
test_accept_checks_the_full_group_list(void **state)
{
	gid_t sock_gid = getegid();
	struct eng root, member, primary, outsider;

	need_root();
	assert_int_equal(listen_on(&A), 0);
	eng_connect(&root, &A);
	assert_int_equal(eng_hello(&root, NULL), 0);

	eng_connect_as(&member, &A, NOBODY, NOBODY, 1, &sock_gid);
	assert_int_equal(eng_hello(&member, NULL), 0);
	eng_connect_as(&primary, &A, NOBODY, sock_gid, 0, NULL);
	assert_int_equal(eng_hello(&primary, NULL), 0);

	/* the file's mode keeps an outsider out; widened by hand, kvxd's own check still does */
	assert_int_equal(chmod(A.cfg.socket_path, 0666), 0);
	eng_connect_as(&outsider, &A, NOBODY, NOBODY, 0, NULL);
	for (int i = 0; i < 10 && !outsider.closed; i++) {
		pump_once();
		eng_read(&outsider, 0, NULL);
	}
	assert_true(outsider.closed);
	assert_int_equal(counter(&root, "kvx_engine_refused_total{node=\"a\"}"), 1);
	assert_int_equal(live_engines(&A), 3);
	eng_close(&root);
	eng_close(&member);
	eng_close(&primary);
	eng_close(&outsider);
}

/* Engines that fill every slot they may take leave 4 for operators: the next engine is closed
 * at accept, an operator (root) still gets in. */
static void
test_operators_keep_their_slots(void **state)
{
	gid_t sock_gid = getegid();
	const int others = KVXD_MAX_ENGINES - 4;
	struct eng *e = calloc((size_t)others + 1, sizeof(*e));
	struct eng root;

	need_root();
	assert_non_null(e);
	A.cfg.max_sessions_per_uid = KVXD_MAX_ENGINES;
	assert_int_equal(listen_on(&A), 0);
	for (int i = 0; i < others; i++) {
		eng_connect_as(&e[i], &A, NOBODY, NOBODY, 1, &sock_gid);
		if (i % 8 == 7)
			pump_once();
	}
	for (int i = 0; i < 5; i++)
		pump_once();
	assert_int_equal(live_engines(&A), others);
	eng_connect_as(&e[others], &A, NOBODY, NOBODY, 1, &sock_gid);
	for (int i = 0; i < 10 && !e[others].closed; i++) {
		pump_once();
		eng_read(&e[others], 0, NULL);
	}
	assert_true(e[others].closed);
	eng_connect(&root, &A);
	assert_int_equal(eng_hello(&root, NULL), 0);
	assert_int_equal(live_engines(&A), others + 1);
	assert_int_equal(
		counter(&root, "kvx_engine_cap_refused_total{node=\"a\",cap=\"operator_slots\"}"),
		1);
	eng_close(&root);
	for (int i = 0; i <= others; i++)
		eng_close(&e[i]);
	free(e);
}

/* A second HELLO is refused and leaves the session as it was: its rooms stay keyed by the rank
 * of the first. */
static void
test_second_hello_is_refused(void **state)
{
	struct eng e;
	struct eng_reply r;

	assert_int_equal(listen_on(&A), 0);
	eng_connect(&e, &A);
	assert_int_equal(eng_call(&e, KVX_ENG_HELLO,
				  &(struct kvx_eng_hello){.version = KVX_ENG_VERSION, .rank = 3},
				  sizeof(struct kvx_eng_hello), -1, NULL),
			 0);
	assert_int_equal(eng_call(&e, KVX_ENG_HELLO,
				  &(struct kvx_eng_hello){.version = KVX_ENG_VERSION, .rank = 5},
				  sizeof(struct kvx_eng_hello), -1, &r),
			 -EALREADY);
	assert_int_equal(live_engines(&A), 1);
	assert_int_equal(A.engines[0]->rank, 3);
	assert_int_equal(eng_admin(&e, "peers", &r), 0);
	eng_close(&e);
}

/* Session ids go round at INT_MAX - 1 to 1, past the ids live sessions hold (before: a signed
 * overflow, then negative ids, which mean "no engine": the session's events were dropped). */
static void
test_session_ids_go_round(void **state)
{
	struct eng one, two;

	assert_int_equal(listen_on(&A), 0);
	eng_connect(&one, &A);
	assert_int_equal(eng_hello(&one, NULL), 0);
	assert_non_null(kvxd_engine_by_id(&A, 1));
	A.next_engine_id = INT_MAX - 2;
	eng_connect(&two, &A);
	assert_int_equal(eng_hello(&two, NULL), 0);
	assert_non_null(kvxd_engine_by_id(&A, INT_MAX - 1));
	eng_close(&two);
	eng_connect(&two, &A);
	assert_int_equal(eng_hello(&two, NULL), 0);
	assert_non_null(kvxd_engine_by_id(&A, 2)); /* 1 is the first session's */
	assert_int_equal(live_engines(&A), 2);
	eng_close(&two);
	eng_close(&one);
}

/* An operator command of a session that went before kvxd read it is not run: nobody reads its
 * answer, and a ring of them, all taken at once when the session ends, would hold the control
 * core (each "rooms" walks every room). */
static void
test_commands_of_a_gone_session_are_not_run(void **state)
{
	struct eng e;

	assert_int_equal(listen_on(&A), 0);
	eng_connect(&e, &A);
	assert_int_equal(eng_hello(&e, NULL), 0);
	kvx_fault_disarm_all();
	assert_true(eng_admin_send(&e, "fault handshake.stall:0") != 0);
	assert_true(eng_admin_send(&e, "rooms") != 0);
	eng_close(&e);
	for (int i = 0; i < 10; i++)
		pump_once();
	assert_int_equal(live_engines(&A), 0);
	assert_int_equal(A.ctr.engine_admin_gone, 2);
	assert_false(kvx_fault_hit(KVX_FAULT_HS_STALL)); /* not armed */
}

/* "rooms" lists an engine's own rooms only (another engine's ids, a claim away from its rooms,
 * are not told); an operator sees every room. */
static void
test_rooms_lists_only_the_engines_own(void **state)
{
	struct eng root, user;
	struct eng_reply r;
	int pool;

	need_root();
	pool = eng_with_pool(&root, &A);
	eng_connect_as(&user, &A, NOBODY, getegid(), 0, NULL);
	assert_int_equal(eng_hello_rank(&user, 1), 0); /* root's engine holds rank 0 */
	assert_int_equal(eng_room_open(&root, 8, pool, 4, NULL), 0);
	pool = eng_pool_id(&user, 256, 16, 1);
	assert_true(pool > 0);
	assert_int_equal(eng_room_open(&user, 7, pool, 4, NULL), 0);
	assert_int_equal(eng_admin(&user, "rooms", &r), 0);
	assert_non_null(strstr(r.text, "room 7 "));
	assert_null(strstr(r.text, "room 8 "));
	assert_non_null(strstr(r.text, "rooms 1\n"));
	assert_int_equal(eng_admin(&root, "rooms", &r), 0);
	assert_non_null(strstr(r.text, "room 7 "));
	assert_non_null(strstr(r.text, "room 8 "));
	eng_close(&user);
	eng_close(&root);
}

/* An engine that is neither root, nor kvxd's uid, nor in admin_group: operator commands are
 * refused with -EPERM and change nothing; the read-only ones work; root's work. */
static void
test_operator_commands_need_an_admin(void **state)
{
	gid_t sock_gid = getegid();
	struct eng root, user;
	struct eng_reply r;
	bool paused;

	need_root();
	assert_int_equal(listen_on(&A), 0);
	eng_connect(&root, &A);
	assert_int_equal(eng_hello(&root, NULL), 0);
	/* in the socket's group by its primary gid (the old accept check let that in) */
	eng_connect_as(&user, &A, NOBODY, sock_gid, 0, NULL);
	assert_int_equal(eng_hello(&user, NULL), 0);

	kvx_fault_disarm_all();
	assert_int_equal(eng_admin(&user, "fault handshake.stall:0", &r), -EPERM);
	assert_non_null(strstr(r.text, "admin"));
	assert_false(kvx_fault_hit(KVX_FAULT_HS_STALL)); /* not armed */
	paused = peer_of(&A, "b")->paused;
	assert_int_equal(eng_admin(&user, "peer b resume", &r), -EPERM);
	assert_int_equal(eng_admin(&user, "peer b try", &r), -EPERM);
	assert_int_equal(peer_of(&A, "b")->paused, paused);
	assert_int_equal(peer_of(&A, "b")->try_once, false);
	/* read-only commands stay open */
	assert_int_equal(eng_admin(&user, "peers", &r), 0);
	assert_non_null(strstr(r.text, "peer b "));
	assert_int_equal(eng_admin(&user, "rooms", &r), 0);
	assert_int_equal(eng_admin(&user, "counters", &r), 0);
	assert_int_equal(eng_admin(&user, "help", &r), 0);

	/* root may */
	assert_int_equal(eng_admin(&root, "fault handshake.stall:0", &r), 0);
	assert_true(kvx_fault_hit(KVX_FAULT_HS_STALL));
	/* an engine that is not an operator reads counters from one rendering per 100 ms, as
	 * GET /metrics does, so that sessions asking in a loop cannot make the control core
	 * render without pause (mutant admin_counters_uncached); an operator's are fresh */
	{
		const char *s = "kvx_frames_rx_total{node=\"a\"}";
		int64_t seen = counter(&user, s);

		A.ctr.frames_rx += 5;
		assert_int_equal(counter(&user, s), seen);
		assert_int_equal(counter(&root, s), seen + 5);
		fake_ms += KVXD_ADMIN_CACHE_MS;
		assert_int_equal(counter(&user, s), seen + 5);
		assert_int_equal(eng_admin(&user, "counters json", &r), 0);
		assert_true(r.text[0] == '{' && strstr(r.text, "frames_rx_total"));
	}
	assert_int_equal(eng_admin(&root, "peer b pause", &r), 0);
	/* a name over the bound is refused, never cut short and run: before, its first 63
	 * bytes were taken as the name and the rest as the verb */
	{
		char cmd[128];

		snprintf(cmd, sizeof(cmd), "peer %063dpause", 0);
		assert_int_equal(eng_admin(&root, cmd, &r), -EINVAL);
		assert_non_null(strstr(r.text, "usage: peer NAME"));
	}
	assert_int_equal(eng_admin(&root, "peer b  pause", &r), -EINVAL);
	assert_int_equal(eng_admin(&root, "peer b", &r), -EINVAL);
	assert_int_equal(eng_admin(&root, "peer b resume", &r), 0);
	assert_int_equal(counter(&root, "kvx_engine_admin_denied_total{node=\"a\"}"), 3);
	eng_close(&root);
	eng_close(&user);
}

/* The same without root (root is always an admin): kvxd's uid is made another one, so this
 * process is only a member of the socket's group. */
static void
test_operator_commands_need_an_admin_unprivileged(void **state)
{
	struct eng user, self;
	struct eng_reply r;

	if (geteuid() == 0)
		skip(); /* test_operator_commands_need_an_admin covers it */
	assert_int_equal(listen_on(&A), 0);
	A.self_uid = geteuid() + 1;
	eng_connect(&user, &A);
	assert_int_equal(eng_hello(&user, NULL), 0);
	kvx_fault_disarm_all();
	assert_int_equal(eng_admin(&user, "fault handshake.stall:0", &r), -EPERM);
	assert_false(kvx_fault_hit(KVX_FAULT_HS_STALL));
	assert_int_equal(eng_admin(&user, "peers", &r), 0);
	/* credentials are captured at accept: a session of kvxd's own uid may */
	A.self_uid = geteuid();
	eng_connect(&self, &A);
	assert_int_equal(eng_hello(&self, NULL), 0);
	assert_int_equal(eng_admin(&self, "fault handshake.stall:0", &r), 0);
	assert_true(kvx_fault_hit(KVX_FAULT_HS_STALL));
	assert_int_equal(eng_admin(&user, "fault handshake.stall:0", &r), -EPERM);
	eng_close(&user);
	eng_close(&self);
}

/* admin_group membership counts through a supplementary group too. */
static void
test_admin_group_member_may(void **state)
{
	const struct group *g = some_group();
	gid_t both[2] = {getegid(), g->gr_gid}, sock_gid = getegid();
	struct eng admin, user;
	struct eng_reply r;

	need_root();
	snprintf(A.cfg.admin_group, sizeof(A.cfg.admin_group), "%s", g->gr_name);
	assert_int_equal(listen_on(&A), 0);
	eng_connect_as(&admin, &A, NOBODY, NOBODY, 2, both);
	assert_int_equal(eng_hello(&admin, NULL), 0);
	eng_connect_as(&user, &A, NOBODY, NOBODY, 1, &sock_gid);
	assert_int_equal(eng_hello(&user, NULL), 0);
	kvx_fault_disarm_all();
	assert_int_equal(eng_admin(&user, "fault handshake.stall:0", &r), -EPERM);
	assert_int_equal(eng_admin(&admin, "fault handshake.stall:0", &r), 0);
	assert_true(kvx_fault_hit(KVX_FAULT_HS_STALL));
	eng_close(&admin);
	eng_close(&user);
}

/* ---- 3. an engine that never reads ------------------------------------------------------------
 */

static double
now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

/* A floods requests and never reads; its replies pile up past reply_queue_kb and it is
 * disconnected.  Meanwhile B's request is answered within a few loop steps, and no step of the
 * control loop waits on A's socket (bounded; a wait there took 100 ms per reply). */
static void
test_an_engine_that_never_reads_is_disconnected(void **state)
{
	struct eng silent, other;
	struct eng_reply r;
	uint64_t seq, sent = 0;
	double worst = 0;
	int steps;

	A.cfg.reply_queue_kb = 64;
	assert_int_equal(listen_on(&A), 0);
	eng_connect(&silent, &A);
	eng_connect(&other, &A);
	assert_int_equal(eng_hello(&silent, NULL), 0);
	assert_int_equal(eng_hello(&other, NULL), 0);
	for (int i = 0; i < 120 && eng_admin_send(&silent, "counters"); i++)
		sent++;
	assert_true(sent >= 100);
	seq = eng_admin_send(&other, "peers");
	for (steps = 1; steps <= 20; steps++) {
		double t0 = now_s(), dt;

		pump_once();
		dt = now_s() - t0;
		worst = dt > worst ? dt : worst;
		if (eng_read(&other, seq, &r) == 1)
			break;
	}
	assert_true(steps <= 4);
	assert_int_equal(r.status, 0);
	assert_true(worst < 1.0);
	/* one of its commands runs per loop pass: their replies pile up while it reads nothing */
	for (int i = 0; i < (int)sent + 20 && live_engines(&A) > 1; i++)
		pump_once();
	for (int i = 0; i < 20 && !silent.closed; i++) {
		pump_once();
		eng_read(&silent, 0, NULL); /* what got through came whole and in order */
	}
	assert_true(silent.closed);
	assert_true(silent.replies_seen > 0 && silent.replies_seen < sent);
	assert_int_equal(counter(&other, "kvx_engine_queue_overflows_total{node=\"a\"}"), 1);
	assert_int_equal(live_engines(&A), 1);
	eng_close(&silent);
	eng_close(&other);
}

/* ---- a raw engine on shared-memory rings (KVX_ENG_RINGS) ----------------------------------- */

struct reng {
	struct eng e;
	void *map;
	size_t map_len;
	struct kvx_shring sub, evt;
	struct kvx_shring cevt[KVX_ENG_CORE_RINGS_MAX]; /* core rings (KVX_ENG_RINGS_CORE) */
	int ncevt;
	int sub_wake, evt_wake;
	uint64_t got_seq[16384]; /* replies seen, in order */
	int32_t got_status[16384];
	int ngot;
	struct kvx_event ev[8192]; /* events seen, in order, and the ring each came out of */
	int ev_ring[8192];	   /* -1: the event ring; k: core ring k */
	int nev;
	bool core_unread; /* reng_read leaves the core rings alone (an engine that does not read) */
};

/* HELLO on the socket, a pool if asked (pool != NULL: 256-byte pages, 16 of them, one
 * buffer), then RINGS with flags: the reply carries a sealed memfd and two eventfds. */
static void
reng_open_with(struct reng *r, struct kvxd *d, uint32_t flags, int *pool)
{
	struct kvx_eng_rings m = {.flags = flags};
	union {
		char buf[CMSG_SPACE(3 * sizeof(int))];
		struct cmsghdr align;
	} ctl;
	struct kvx_eng_reply rep;
	struct iovec iov = {.iov_base = &rep, .iov_len = sizeof(rep)};
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};
	int fds[3] = {-1, -1, -1}, seals;
	struct stat st;
	uint64_t seq;
	size_t one;
	ssize_t n = -1;

	memset(r, 0, sizeof(*r));
	if (d->eng_fd < 0)
		assert_int_equal(listen_on(d), 0);
	eng_connect(&r->e, d);
	assert_int_equal(eng_hello(&r->e, NULL), 0);
	if (pool)
		assert_true((*pool = eng_pool_id(&r->e, 256, 16, 1)) > 0);
	/* without core rings, the header alone: an older engine's request */
	seq = eng_send(&r->e, KVX_ENG_RINGS, &m, flags ? sizeof(m) : sizeof(m.hdr), -1);
	for (int step = 0; step < MAX_STEPS && n < 0; step++) {
		pump_once();
		mh.msg_control = ctl.buf;
		mh.msg_controllen = sizeof(ctl.buf);
		n = recvmsg(r->e.fd, &mh, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
	}
	assert_int_equal(n, sizeof(rep));
	assert_int_equal(rep.hdr.type, KVX_ENG_REPLY);
	assert_int_equal(rep.hdr.seq, seq);
	assert_int_equal(rep.status, 0);
	assert_non_null(CMSG_FIRSTHDR(&mh));
	assert_int_equal(CMSG_FIRSTHDR(&mh)->cmsg_len, CMSG_LEN(3 * sizeof(int)));
	memcpy(fds, CMSG_DATA(CMSG_FIRSTHDR(&mh)), sizeof(fds));
	/* the engine cannot shrink the rings under kvxd (a SIGBUS in the daemon) */
	seals = fcntl(fds[0], F_GET_SEALS);
	assert_true((seals & (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL)) ==
		    (F_SEAL_SHRINK | F_SEAL_GROW | F_SEAL_SEAL));
	assert_int_not_equal(ftruncate(fds[0], 4096), 0);
	one = kvx_shring_map_bytes((uint64_t)rep.value);
	assert_true(one > 0);
	/* core rings: one per polling core when asked for, else none; the memfd says how many */
	assert_int_equal(fstat(fds[0], &st), 0);
	assert_int_equal(st.st_size % one, 0);
	r->ncevt = (int)(st.st_size / one) - 2;
	assert_int_equal(r->ncevt, flags & KVX_ENG_RINGS_CORE ? d->ncores : 0);
	r->map_len = (2 + (size_t)r->ncevt) * one;
	r->map = mmap(NULL, r->map_len, PROT_READ | PROT_WRITE, MAP_SHARED, fds[0], 0);
	assert_true(r->map != MAP_FAILED);
	close(fds[0]);
	r->sub_wake = fds[1];
	r->evt_wake = fds[2];
	assert_int_equal(
		kvx_shring_attach(&r->sub, r->map, one, (uint64_t)rep.value, r->sub_wake, true), 0);
	assert_int_equal(kvx_shring_attach(&r->evt, (uint8_t *)r->map + one, one,
					   (uint64_t)rep.value, r->evt_wake, false),
			 0);
	for (int k = 0; k < r->ncevt; k++)
		assert_int_equal(kvx_shring_attach(&r->cevt[k], (uint8_t *)r->map + (2 + k) * one,
						   one, (uint64_t)rep.value, r->evt_wake, false),
				 0);
}

/* HELLO on the socket, then RINGS (an old engine's request: the header alone, no core rings). */
static void
reng_open(struct reng *r, struct kvxd *d)
{
	reng_open_with(r, d, 0, NULL);
}

static void
reng_close(struct reng *r)
{
	eng_close(&r->e);
	munmap(r->map, r->map_len);
	if (r->sub_wake >= 0)
		close(r->sub_wake);
	if (r->evt_wake >= 0)
		close(r->evt_wake);
}

/* The session of kvxd d that is on rings (the one the test opened). */
static struct kvxd_engine *
rings_session(struct kvxd *d)
{
	struct kvxd_engine *e = NULL;

	for (int i = 0; i < d->engines_end; i++)
		if (d->engines[i] && d->engines[i]->rings)
			e = d->engines[i];
	assert_non_null(e);
	return e;
}

/* Put one request into the submission ring.  Returns its seq, or 0 when the ring is full. */
static uint64_t
reng_send(struct reng *r, uint16_t type, void *m, size_t len)
{
	struct kvx_eng_hdr *h = m;

	*h = (struct kvx_eng_hdr){.type = type, .len = (uint32_t)len, .seq = r->e.seq + 1};
	if (kvx_shring_put(&r->sub, m, (uint32_t)len))
		return 0;
	kvx_shring_notify(&r->sub);
	return ++r->e.seq;
}

/* One event seen (in order) and the ring it came from. */
static void
reng_event(struct reng *r, const void *buf, ssize_t n, int ring)
{
	const struct kvx_eng_event *m = buf;

	assert_int_equal(n, sizeof(*m));
	assert_true(r->nev < 8192);
	r->ev[r->nev] = m->ev;
	r->ev_ring[r->nev++] = ring;
}

/* Take what the event rings hold, core rings first (as libkvx does): replies recorded in order
 * (their seq and status), events with the ring they came out of.  A core ring carries EVENTs
 * only. */
static void
reng_read(struct reng *r)
{
	static uint64_t buf[KVX_ENG_MSG_MAX / 8];
	ssize_t n;

	for (int k = 0; k < r->ncevt && !r->core_unread; k++) {
		while ((n = kvx_shring_get(&r->cevt[k], buf, sizeof(buf))) > 0) {
			assert_int_equal(((const struct kvx_eng_hdr *)buf)->type, KVX_ENG_EVENT);
			reng_event(r, buf, n, k);
		}
		assert_int_equal(n, 0);
	}
	while ((n = kvx_shring_get(&r->evt, buf, sizeof(buf))) > 0) {
		const struct kvx_eng_reply *rep = (const void *)buf;

		assert_true((size_t)n >= sizeof(struct kvx_eng_hdr));
		assert_int_equal(rep->hdr.len, (uint32_t)n);
		if (rep->hdr.type == KVX_ENG_EVENT)
			reng_event(r, buf, n, -1);
		if (rep->hdr.type != KVX_ENG_REPLY)
			continue;
		assert_true(r->ngot < 16384);
		r->got_seq[r->ngot] = rep->hdr.seq;
		r->got_status[r->ngot++] = rep->status;
	}
	assert_int_equal(n, 0);
}

/* One request through the rings and its reply's status. */
static int
reng_call(struct reng *r, uint16_t type, void *m, size_t len)
{
	uint64_t seq = reng_send(r, type, m, len);

	assert_true(seq != 0);
	for (int step = 0; step < MAX_STEPS; step++) {
		pump_once();
		reng_read(r);
		if (r->ngot && r->got_seq[r->ngot - 1] == seq)
			return r->got_status[r->ngot - 1];
	}
	fail_msg("no reply to %llu in the event ring", (unsigned long long)seq);
	return -1;
}

/* An engine cannot make kvxd block through the wake-ups it was handed: it makes its ends
 * blocking, and kvxd's keep their own flags (they are not the same file descriptions: with a
 * shared eventfd, the engine's fcntl was kvxd's, and a write to a counter it saturated blocked
 * the control core for good; mutant wake_end_shared hands the engine kvxd's own end).  Then it
 * says it parks on the event ring and never takes a wake-up: kvxd wakes it far more often than
 * its end holds (each send fails for room, MSG_DONTWAIT) and goes on answering. */
static void
test_rings_engine_cannot_block_kvxd(void **state)
{
	static struct reng r;
	struct kvx_eng_room_close cl = {.room = 77};
	struct kvxd_engine *e;
	uint64_t wakes0;

	(void)state;
	reng_open(&r, &A);
	e = rings_session(&A);
	assert_int_equal(fcntl(r.evt_wake, F_SETFL, 0), 0);
	assert_int_equal(fcntl(r.sub_wake, F_SETFL, 0), 0);
	assert_true(fcntl(e->evt_wake, F_GETFL) & O_NONBLOCK);
	assert_true(fcntl(e->sub_wake, F_GETFL) & O_NONBLOCK);
	wakes0 = A.ctr.engine_ring_wakes;
	for (int i = 0; i < 3000; i++) {
		kvx_shring_park_prepare(&r.evt);
		assert_int_equal(reng_call(&r, KVX_ENG_ROOM_CLOSE, &cl, sizeof(cl)), -ENOENT);
	}
	assert_true(A.ctr.engine_ring_wakes - wakes0 >= 3000);
	assert_int_equal(A.ctr.engine_bad, 0);
	reng_close(&r);
}

/* An engine that asks for KVX_ENG_RINGS_REARM is woken once for all the batches kvxd puts until
 * it says it is parked again: five replies, one wake-up (mutant rings_rearm_ignored: five), and
 * its core rings' producers are oneshot too.  An engine that does not ask is woken after every
 * batch, as before (mutant rings_rearm_always: it was woken once, and never again). */
static void
test_rings_rearm_one_wake_per_drain(void **state)
{
	static struct reng r;
	struct kvx_eng_room_close cl = {.room = 77};
	struct kvxd_engine *e;
	uint64_t wakes0;

	(void)state;
	reng_open_with(&r, &A, KVX_ENG_RINGS_CORE | KVX_ENG_RINGS_REARM, NULL);
	e = rings_session(&A);
	assert_int_equal(e->nevq, A.ncores);
	for (int c = 0; c < e->nevq; c++)
		assert_true(e->evq[c]->ring.oneshot);
	wakes0 = A.ctr.engine_ring_wakes;
	for (int i = 0; i < 5; i++)
		assert_int_equal(reng_call(&r, KVX_ENG_ROOM_CLOSE, &cl, sizeof(cl)), -ENOENT);
	assert_int_equal(A.ctr.engine_ring_wakes - wakes0, 1);
	assert_int_equal(wake_bytes(r.evt_wake), 1);
	assert_int_equal(kvx_shring_wake_drain(r.evt_wake), 0);
	kvx_shring_park_prepare(&r.evt); /* drained: parked again */
	assert_int_equal(reng_call(&r, KVX_ENG_ROOM_CLOSE, &cl, sizeof(cl)), -ENOENT);
	assert_int_equal(A.ctr.engine_ring_wakes - wakes0, 2);
	assert_int_equal(wake_bytes(r.evt_wake), 1);
	assert_int_equal(A.ctr.engine_bad, 0);
	reng_close(&r);

	reng_open(&r, &A); /* an older engine's request: no flags */
	wakes0 = A.ctr.engine_ring_wakes;
	for (int i = 0; i < 5; i++)
		assert_int_equal(reng_call(&r, KVX_ENG_ROOM_CLOSE, &cl, sizeof(cl)), -ENOENT);
	assert_int_equal(A.ctr.engine_ring_wakes - wakes0, 5);
	assert_int_equal(wake_bytes(r.evt_wake), 5);
	reng_close(&r);
}

/* An engine that closes its end of the submission ring's wake pair breaks its session: kvxd ends
 * it (its own end would read end-of-file, readable for good, and wake the loop forever). */
static void
test_rings_wake_end_closed_ends_the_session(void **state)
{
	static struct reng r;
	uint64_t bad0 = A.ctr.engine_bad;
	bool gone = false;
	char b;

	(void)state;
	reng_open(&r, &A);
	close(r.sub_wake);
	r.sub_wake = -1;
	for (int step = 0; step < MAX_STEPS && !gone; step++) {
		pump_once();
		gone = recv(r.e.fd, &b, 1, MSG_DONTWAIT) == 0;
	}
	assert_true(gone);
	assert_int_equal(A.ctr.engine_bad, bad0 + 1);
	reng_close(&r);
}

/* After RINGS, requests go in the submission ring and replies come out of the event ring: the
 * socket carries nothing more; a second RINGS is refused. */
static void
test_rings_carry_requests_and_replies(void **state)
{
	static struct reng r;
	struct kvx_eng_room_close cl = {.room = 77};
	struct kvx_eng_rings again = {0};
	char b;

	(void)state;
	reng_open(&r, &A);
	assert_int_equal(A.ctr.engine_rings, 1);
	assert_int_equal(reng_call(&r, KVX_ENG_ROOM_CLOSE, &cl, sizeof(cl)), -ENOENT);
	assert_int_equal(reng_call(&r, KVX_ENG_RINGS, &again, sizeof(again)), -EALREADY);
	assert_true(recv(r.e.fd, &b, 1, MSG_DONTWAIT) < 0 && errno == EAGAIN);
	reng_close(&r);
}

/* An engine that sends operator commands back to back has one run per loop pass, through the
 * socket and through the rings alike; the rest wait in order and none is lost (before, a pass
 * took up to 64 of each, every "rooms" a walk of the room table and every "counters" a
 * rendering of the metrics, while other sessions, peers and timers waited). */
static void
test_operator_commands_take_a_pass_each(void **state)
{
	static struct reng r;
	uint64_t buf[(sizeof(struct kvx_eng_admin) + 16) / 8 + 1];
	struct kvx_eng_room_close cl = {.room = 77};
	struct eng e;

	(void)state;
	assert_int_equal(listen_on(&A), 0);
	eng_connect(&e, &A);
	assert_int_equal(eng_hello(&e, NULL), 0);
	for (int i = 0; i < 3; i++)
		assert_true(eng_admin_send(&e, "counters") != 0);
	assert_true(eng_send(&e, KVX_ENG_ROOM_CLOSE, &cl, sizeof(cl), -1) != 0);
	pump_once();
	assert_int_equal(eng_read(&e, 0, NULL), 0);
	assert_int_equal(e.replies_seen - 1, 1); /* HELLO's, then one command's */
	for (int i = 0; i < 3; i++)
		pump_once();
	assert_int_equal(eng_read(&e, 0, NULL), 0);
	assert_int_equal(e.replies_seen - 1, 4); /* every one, in order (eng_read checks) */
	eng_close(&e);

	reng_open(&r, &A);
	memcpy((uint8_t *)buf + sizeof(struct kvx_eng_admin), "counters", 8);
	for (int i = 0; i < 3; i++)
		assert_true(reng_send(&r, KVX_ENG_ADMIN, buf, sizeof(struct kvx_eng_admin) + 8));
	pump_once();
	reng_read(&r);
	assert_int_equal(r.ngot, 1);
	for (int i = 0; i < 2; i++)
		pump_once();
	reng_read(&r);
	assert_int_equal(r.ngot, 3);
	for (int i = 0; i < 3; i++)
		assert_int_equal(r.got_status[i], 0);
	reng_close(&r);
}

/* An engine that writes an impossible index into its submission ring loses its own session,
 * nothing else: another engine's rings go on. */
static void
test_corrupt_submission_ring_ends_only_its_session(void **state)
{
	static struct reng bad, good;
	struct kvx_eng_room_close cl = {.room = 5};
	uint64_t bad_before = A.ctr.engine_bad;
	char b;
	int step;

	(void)state;
	reng_open(&bad, &A);
	reng_open(&good, &A);
	atomic_store((_Atomic uint64_t *)bad.map, (uint64_t)1 << 40); /* its tail */
	for (step = 0; step < MAX_STEPS; step++) {
		pump_once();
		if (recv(bad.e.fd, &b, 1, MSG_DONTWAIT) == 0)
			break; /* kvxd closed it */
	}
	assert_true(step < MAX_STEPS);
	assert_int_equal(A.ctr.engine_bad, bad_before + 1);
	assert_int_equal(reng_call(&good, KVX_ENG_ROOM_CLOSE, &cl, sizeof(cl)), -ENOENT);
	reng_close(&bad);
	reng_close(&good);
}

/* An engine that does not read its event ring for a while: the replies that do not fit wait
 * in kvxd's queue (the full path) and arrive whole and in order once it reads; none is lost. */
static void
test_full_event_ring_loses_nothing(void **state)
{
	static struct reng r;
	struct kvx_eng_room_close cl;
	const int total = 14000; /* more replies than the event ring holds */
	bool queued = false;
	int sent = 0;

	(void)state;
	reng_open(&r, &A);
	while (sent < total) {
		cl = (struct kvx_eng_room_close){.room = (uint64_t)sent};
		if (reng_send(&r, KVX_ENG_ROOM_CLOSE, &cl, sizeof(cl)))
			sent++;
		else
			pump_once(); /* the submission ring is full: let kvxd take some */
		for (int i = 0; i < KVXD_MAX_ENGINES; i++)
			if (A.engines[i] && A.engines[i]->rings && A.engines[i]->outq_head)
				queued = true;
	}
	for (int step = 0; step < 10 * MAX_STEPS && r.ngot < total; step++) {
		pump_once();
		for (int i = 0; i < KVXD_MAX_ENGINES; i++)
			if (A.engines[i] && A.engines[i]->rings && A.engines[i]->outq_head)
				queued = true;
		if (kvx_shring_room(&r.sub) == r.sub.size)
			reng_read(&r); /* late: kvxd has taken every request */
	}
	assert_true(queued);
	assert_int_equal(r.ngot, total);
	for (int i = 0; i < total; i++) {
		assert_int_equal(r.got_seq[i], (uint64_t)i + 3); /* HELLO 1, RINGS 2 */
		assert_int_equal(r.got_status[i], -ENOENT);
	}
	reng_close(&r);
}

/* The ring's "starved" flag (core/shring.c: on the third line of the shared header, after
 * "parked"): kvxd asked for a wake-up when room comes. */
static uint32_t
ring_starved(const struct kvx_shring *r)
{
	return atomic_load((_Atomic uint32_t *)((uint8_t *)r->sh + 132));
}

/* An event ring without room: kvxd queues what does not fit and waits for the engine to take
 * something (it asks for a wake-up in the ring, kvx_shring_starve), instead of looking again
 * every millisecond while an engine may not read for long; the engine's first take wakes it,
 * and the rest goes in. */
static void
test_full_event_ring_waits_for_the_engine(void **state)
{
	static struct reng r;
	static uint64_t buf[KVX_ENG_MSG_MAX / 8];
	struct kvx_eng_room_close cl;
	struct kvxd_engine *e;
	struct pollfd p;
	int sent = 0, seen;

	(void)state;
	reng_open(&r, &A);
	e = rings_session(&A);
	p = (struct pollfd){.fd = e->evt_wake, .events = POLLIN};
	/* batches of 1000 requests, each taken whole by kvxd, until its replies no longer fit */
	while (!e->outq_head && sent < 14000) {
		for (int i = 0; i < 1000; i++) {
			cl = (struct kvx_eng_room_close){.room = (uint64_t)sent};
			assert_true(reng_send(&r, KVX_ENG_ROOM_CLOSE, &cl, sizeof(cl)) != 0);
			sent++;
		}
		for (int step = 0; step < MAX_STEPS && kvx_shring_room(&r.sub) < r.sub.size; step++)
			pump_once();
	}
	assert_non_null(e->outq_head);
	assert_false(kvxd_engine_rings_park(&A)); /* nothing for the loop to look at again */
	assert_int_equal(poll(&p, 1, 0), 0);
	assert_true(kvx_shring_get(&r.evt, buf, sizeof(buf)) > 0);
	assert_true(kvx_shring_taken(&r.evt)); /* kvxd asked */
	assert_int_equal(poll(&p, 1, 0), 1);
	pump_once(); /* kvxd's loop takes the wake-up */
	assert_int_equal(poll(&p, 1, 0), 0);
	/* the engine reads as libkvx does; every pass that leaves events queued asks again */
	for (int step = 0; step < 10 * MAX_STEPS && r.ngot < sent - 1; step++) {
		reng_read(&r);
		kvx_shring_taken(&r.evt);
		pump_once();
		assert_int_equal(poll(&p, 1, 0), 0); /* its wake-up taken */
		if (e->outq_head)
			assert_int_equal(ring_starved(&r.evt), 1);
	}
	seen = r.ngot;
	assert_int_equal(seen, sent - 1);			   /* the rest, none lost */
	assert_int_equal(r.got_seq[seen - 1], (uint64_t)sent + 2); /* HELLO 1, RINGS 2 */
	reng_close(&r);
}

/* An engine that sends its last requests and dies with replies unread: the socket first says
 * ECONNRESET, then still holds what it sent; kvxd takes those requests (a last chunk binds its
 * room to the engine, whose loss then fails it at once) before it closes the session.  Before:
 * they were dropped with the session, and such a room waited waiting_ms for an engine. */
static void
test_requests_sent_before_a_reset_are_taken(void **state)
{
	struct eng e;
	struct kvx_eng_room_close cl = {.room = 9};
	uint64_t msgs;
	int step;

	(void)state;
	assert_int_equal(listen_on(&A), 0);
	eng_connect(&e, &A);
	assert_int_equal(eng_hello(&e, NULL), 0);
	assert_true(eng_send(&e, KVX_ENG_ROOM_CLOSE, &cl, sizeof(cl), -1) != 0);
	for (step = 0; step < 5; step++)
		pump_once(); /* its reply waits unread in the engine's socket */
	msgs = A.ctr.engine_msgs;
	for (int i = 0; i < 3; i++)
		assert_true(eng_send(&e, KVX_ENG_ROOM_CLOSE, &cl, sizeof(cl), -1) != 0);
	eng_close(&e); /* with a reply unread: kvxd's next read says ECONNRESET */
	for (step = 0; step < 20; step++)
		pump_once();
	assert_int_equal(A.ctr.engine_msgs, msgs + 3);
	for (int i = 0; i < KVXD_MAX_ENGINES; i++)
		assert_null(A.engines[i]); /* and the session is gone */
}

/* The same with rings: what an engine put into its submission ring before it died is taken
 * before its session closes. */
static void
test_ring_requests_before_a_close_are_taken(void **state)
{
	static struct reng r;
	struct kvx_eng_room_close cl = {.room = 9};
	uint64_t msgs, bad;

	(void)state;
	reng_open(&r, &A);
	msgs = A.ctr.engine_msgs;
	/* more than one loop iteration takes (RING_BATCH), so the close is seen before the
	 * last of them */
	for (int i = 0; i < 3 * RING_BATCH; i++)
		assert_true(reng_send(&r, KVX_ENG_ROOM_CLOSE, &cl, sizeof(cl)) != 0);
	eng_close(&r.e); /* before kvxd took them */
	for (int step = 0; step < 20; step++)
		pump_once();
	assert_int_equal(A.ctr.engine_msgs, msgs + 3 * RING_BATCH);
	for (int i = 0; i < KVXD_MAX_ENGINES; i++)
		assert_null(A.engines[i]);
	reng_close(&r);

	/* an engine that dies closes its wake ends with its socket, the wake ends first here:
	 * kvxd, which sees them in the same wait (one before its dispatch), still takes what the
	 * ring holds, and counts no bad engine */
	reng_open(&r, &A);
	msgs = A.ctr.engine_msgs;
	bad = A.ctr.engine_bad;
	for (int i = 0; i < 3 * RING_BATCH; i++)
		assert_true(reng_send(&r, KVX_ENG_ROOM_CLOSE, &cl, sizeof(cl)) != 0);
	close(r.sub_wake);
	close(r.evt_wake);
	r.sub_wake = r.evt_wake = -1;
	eng_close(&r.e);
	for (int step = 0; step < 20; step++)
		pump_once();
	assert_int_equal(A.ctr.engine_msgs, msgs + 3 * RING_BATCH);
	assert_int_equal(A.ctr.engine_bad, bad);
	for (int i = 0; i < KVXD_MAX_ENGINES; i++)
		assert_null(A.engines[i]);
	reng_close(&r);
}

static struct kvxd_pool *pool_by_id(struct kvxd *d, int id);

/* Rooms are keyed (id, rank) on the node and peers address a rank, not a user: a rank is held
 * by the user whose engine on it registered a pool (or took a room) first.  Another user's
 * engine on that rank opens no decode room (the prefill side would write the first user's KV
 * into its pages) and makes no prefill room, not even a failed one (a chunk refused for a bad
 * pool made or failed the room by its id); a session that only connected holds nothing; any
 * session of the holder's user may, and holds the rank while the first goes; on a rank of its
 * own the other user may, and once the holder's engines are all gone the rank is free. */
static void
test_rank_rooms_are_the_first_users(void **state)
{
	struct eng obs, first, other, first2, other1, root, other2;
	const struct kvx_event *ev;
	struct eng_reply r;
	static const char names[1][KVX_NAME_MAX] = {"b"};
	uint32_t pages[4] = {0, 1, 2, 3};
	int fpool, opool, f2pool, o1pool, rpool, o2pool, first_id = -1;
	uint64_t bad;

	need_root();
	assert_int_equal(listen_on(&A), 0);
	eng_connect_as(&obs, &A, NOBODY - 2, getegid(), 0, NULL);
	assert_int_equal(eng_hello(&obs, NULL), 0); /* first, but with no pool */
	eng_connect_as(&first, &A, NOBODY, getegid(), 0, NULL);
	assert_int_equal(eng_hello(&first, NULL), 0);
	eng_connect_as(&other, &A, NOBODY - 1, getegid(), 0, NULL);
	assert_int_equal(eng_hello(&other, NULL), 0); /* it may connect */
	fpool = eng_pool_id(&first, 256, 16, 1);      /* the first engine: it holds rank 0 */
	opool = eng_pool_id(&other, 256, 16, 1);
	assert_true(fpool > 0 && opool > 0);

	assert_int_equal(eng_room_open(&other, 7, opool, 4, &r), -EPERM);
	assert_non_null(strstr(r.text, "another user's"));
	assert_null(kvxd_room_find(&A, 7, 0, KVX_ROOM_DECODE));
	eng_chunk_x(&other, 8, opool, 2, 0, true);
	ev = eng_event_wait(&other, 8, KVX_STATE_FAILED);
	assert_int_equal(ev->error, -EPERM);
	eng_chunk_x(&other, 12, 999, 2, 0, true); /* refused for itself as well: no such pool */
	ev = eng_event_wait(&other, 12, KVX_STATE_FAILED);
	assert_int_equal(ev->error, -EPERM);
	bad = A.ctr.engine_bad;
	eng_chunk_x(&other, 13, opool, 0, 0, true); /* malformed (no page): counted as such too */
	ev = eng_event_wait(&other, 13, KVX_STATE_FAILED);
	assert_int_equal(ev->error, -EPERM);
	assert_int_equal(A.ctr.engine_bad, bad + 1);
	assert_null(kvxd_room_find(&A, 8, 0, KVX_ROOM_PREFILL));
	assert_null(kvxd_room_find(&A, 12, 0, KVX_ROOM_PREFILL));
	assert_null(kvxd_room_find(&A, 13, 0, KVX_ROOM_PREFILL));
	assert_int_equal(A.ctr.engine_rank_refused, 4);

	/* the first user's engines open and make rooms of the rank, a later session as well */
	assert_int_equal(eng_room_open(&first, 7, fpool, 4, NULL), 0);
	eng_chunk_x(&first, 9, fpool, 2, 0, false);
	PUMP_UNTIL(kvxd_room_find(&A, 9, 0, KVX_ROOM_PREFILL));
	for (int i = 0; i < KVXD_MAX_ENGINES; i++)
		if (A.engines[i] && A.engines[i]->uid == NOBODY)
			first_id = A.engines[i]->id;
	assert_int_equal(kvxd_room_find(&A, 9, 0, KVX_ROOM_PREFILL)->engine_id, first_id);
	eng_connect_as(&first2, &A, NOBODY, getegid(), 0, NULL);
	assert_int_equal(eng_hello(&first2, NULL), 0);
	f2pool = eng_pool_id(&first2, 256, 16, 1);
	assert_true(f2pool > 0);
	assert_int_equal(eng_room_open(&first2, 11, f2pool, 4, NULL), 0);

	/* on a rank of its own the other user's engine may */
	eng_connect_as(&other1, &A, NOBODY - 1, getegid(), 0, NULL);
	assert_int_equal(eng_hello_rank(&other1, 1), 0);
	o1pool = eng_pool_id(&other1, 256, 16, 1);
	assert_true(o1pool > 0);
	assert_int_equal(eng_room_open(&other1, 7, o1pool, 4, NULL), 0);
	assert_non_null(kvxd_room_find(&A, 7, 1, KVX_ROOM_DECODE));

	/* an operator's (root's) engine holds its rank like any other */
	eng_connect(&root, &A);
	assert_int_equal(eng_hello_rank(&root, 2), 0);
	rpool = eng_pool_id(&root, 256, 16, 1);
	eng_connect_as(&other2, &A, NOBODY - 1, getegid(), 0, NULL);
	assert_int_equal(eng_hello_rank(&other2, 2), 0);
	o2pool = eng_pool_id(&other2, 256, 16, 1);
	assert_true(rpool > 0 && o2pool > 0);
	assert_int_equal(eng_room_open(&other2, 13, o2pool, 4, NULL), -EPERM);
	assert_int_equal(eng_room_open(&root, 13, rpool, 4, NULL), 0);

	/* the first user's engines gone, rank 0 is the other's */
	eng_close(&first);
	assert_int_equal(eng_room_open(&other, 10, opool, 4, NULL), -EPERM); /* first2 holds it */
	/* nor may it abort (or learn of) a decode room of the rank that no engine holds */
	assert_true(kvxd_decode_room_open(&A, -1, 17, pool_by_id(&A, f2pool), pages, 4, names, 1) >
		    0);
	assert_int_equal(eng_room_req(&other, KVX_ENG_ROOM_ABORT, 17), -ENOENT);
	assert_false(kvxd_room_aborting(kvxd_room_find(&A, 17, 0, KVX_ROOM_DECODE)));
	eng_close(&first2);
	PUMP_UNTIL(live_engines(&A) == 5);
	assert_int_equal(eng_room_open(&other, 10, opool, 4, NULL), 0);
	eng_close(&other);
	eng_close(&other1);
	eng_close(&other2);
	eng_close(&root);
	eng_close(&obs);
}

/* [engine] rank_users: a rank given to a user is that user's for good.  Another user's engine
 * that comes first takes none of its rooms, nor in the window while the owner's engine restarts;
 * a rank not listed stays first come.  A name or a uid resolves; an unknown name, or a number
 * that is no uid, stops kvxd at start. */
static void
test_rank_users_hold_their_ranks(void **state)
{
	struct eng other, owner, owner2, other1, late1, third, other3;
	const struct kvx_event *ev;
	struct eng_reply r;
	int opool, wpool, w2pool, o1pool, l1pool, tpool, o3pool;
	struct stat st;

	need_root();
	A.cfg.n_rank_users = 2;
	A.cfg.rank_users[0] = (struct kvx_config_rank_user){.lo = 2, .hi = 3};
	A.cfg.rank_users[1] = (struct kvx_config_rank_user){.lo = 0, .hi = 0};
	snprintf(A.cfg.rank_users[0].user, sizeof(A.cfg.rank_users[0].user), "%u", NOBODY - 3);
	snprintf(A.cfg.rank_users[1].user, sizeof(A.cfg.rank_users[1].user), "kvx-no-such-user");
	assert_int_equal(listen_on(&A), -ENOENT);
	assert_int_equal(lstat(A.cfg.socket_path, &st), -1);
	/* a uid past 32 bits is none (4294967296 would be cut to root's 0) */
	snprintf(A.cfg.rank_users[1].user, sizeof(A.cfg.rank_users[1].user), "4294967296");
	assert_int_equal(listen_on(&A), -ENOENT);
	snprintf(A.cfg.rank_users[1].user, sizeof(A.cfg.rank_users[1].user), "%s",
		 getpwuid(NOBODY)->pw_name); /* by its name */
	assert_int_equal(listen_on(&A), 0);
	assert_int_equal(A.rank_uid[0], NOBODY - 3);
	assert_int_equal(A.rank_uid[1], NOBODY);

	/* another user's engine, first on rank 0: it may connect, and takes nothing */
	opool = eng_of_user(&other, &A, NOBODY - 1, 0);
	assert_int_equal(eng_room_open(&other, 7, opool, 4, &r), -EPERM);
	assert_non_null(strstr(r.text, "another user's"));
	eng_chunk_x(&other, 8, opool, 2, 0, true);
	ev = eng_event_wait(&other, 8, KVX_STATE_FAILED);
	assert_int_equal(ev->error, -EPERM);
	assert_null(kvxd_room_find(&A, 7, 0, KVX_ROOM_DECODE));
	assert_null(kvxd_room_find(&A, 8, 0, KVX_ROOM_PREFILL));

	/* the configured user's engine takes them, and again after a restart */
	wpool = eng_of_user(&owner, &A, NOBODY, 0);
	assert_int_equal(eng_room_open(&owner, 7, wpool, 4, NULL), 0);
	eng_close(&owner);
	PUMP_UNTIL(live_engines(&A) == 1);
	assert_int_equal(eng_room_open(&other, 9, opool, 4, NULL), -EPERM); /* the window */
	eng_chunk_x(&other, 10, opool, 2, 0, true);
	ev = eng_event_wait(&other, 10, KVX_STATE_FAILED);
	assert_int_equal(ev->error, -EPERM);
	assert_null(kvxd_room_find(&A, 10, 0, KVX_ROOM_PREFILL));
	w2pool = eng_of_user(&owner2, &A, NOBODY, 0);
	assert_int_equal(eng_room_open(&owner2, 9, w2pool, 4, NULL), 0);
	assert_int_equal(A.ctr.engine_rank_refused, 4);

	/* rank 3, of the other entry: its user only */
	tpool = eng_of_user(&third, &A, NOBODY - 3, 3);
	o3pool = eng_of_user(&other3, &A, NOBODY, 3);
	assert_int_equal(eng_room_open(&other3, 7, o3pool, 4, NULL), -EPERM);
	assert_int_equal(eng_room_open(&third, 7, tpool, 4, NULL), 0);

	/* a rank not listed: first come, and then that user's */
	o1pool = eng_of_user(&other1, &A, NOBODY - 1, 1);
	assert_int_equal(eng_room_open(&other1, 7, o1pool, 4, NULL), 0);
	l1pool = eng_of_user(&late1, &A, NOBODY - 2, 1);
	assert_int_equal(eng_room_open(&late1, 8, l1pool, 4, NULL), -EPERM);
	assert_int_equal(A.ctr.engine_rank_refused, 6);
	eng_close(&late1);
	eng_close(&other1);
	eng_close(&other3);
	eng_close(&third);
	eng_close(&owner2);
	eng_close(&other);
}

/* Sessions sit in slots; the loop scans the slots below the last one in use.  A session in a
 * higher slot than one that closed is still served, and a new session takes the freed slot. */
static void
test_sessions_above_a_closed_slot_are_served(void **state)
{
	struct eng e[4];

	(void)state;
	assert_int_equal(listen_on(&A), 0);
	for (int i = 0; i < 3; i++) {
		eng_connect(&e[i], &A);
		assert_int_equal(eng_hello(&e[i], NULL), 0);
	}
	assert_int_equal(live_engines(&A), 3);
	assert_int_equal(A.engines_end, 3);
	eng_close(&e[1]);
	for (int step = 0; step < 5; step++)
		pump_once();
	assert_null(A.engines[1]);
	assert_int_equal(counter(&e[2], "kvx_engines{node=\"a\"}"), 2);
	eng_close(&e[2]);
	for (int step = 0; step < 5; step++)
		pump_once();
	assert_int_equal(A.engines_end, 1);
	eng_connect(&e[3], &A);
	assert_int_equal(eng_hello(&e[3], NULL), 0);
	assert_non_null(A.engines[1]);
	assert_int_equal(counter(&e[0], "kvx_engines{node=\"a\"}"), 2);
	assert_int_equal(counter(&e[3], "kvx_engines{node=\"a\"}"), 2);
	eng_close(&e[0]);
	eng_close(&e[3]);
	for (int step = 0; step < 5; step++)
		pump_once();
	assert_int_equal(A.engines_end, 0);
}

/* Pools sit in slots too, scanned below the last one in use: a pool in a higher slot than one
 * unregistered is still the engine's (found, counted, unregistered), and a new pool takes the
 * freed slot. */
static void
test_pools_above_an_unregistered_slot_are_found(void **state)
{
	struct eng e;
	int p[4];

	(void)state;
	assert_int_equal(listen_on(&A), 0);
	eng_connect(&e, &A);
	assert_int_equal(eng_hello(&e, NULL), 0);
	for (int i = 0; i < 3; i++)
		assert_true((p[i] = eng_pool_id(&e, 4096, 4, 1)) > 0);
	assert_int_equal(A.pools_end, 3);
	assert_int_equal(eng_pool_unreg(&e, p[1]), 0);
	assert_null(A.pools[1]);
	assert_int_equal(counter(&e, "kvx_pools{node=\"a\"}"), 2);
	assert_int_equal(eng_pool_unreg(&e, p[2]), 0); /* found above the empty slot */
	assert_int_equal(A.pools_end, 1);
	assert_true((p[3] = eng_pool_id(&e, 4096, 4, 1)) > 0);
	assert_non_null(A.pools[1]);
	assert_int_equal(A.pools_end, 2);
	assert_int_equal(eng_pool_unreg(&e, p[0]), 0);
	assert_int_equal(eng_pool_unreg(&e, p[3]), 0);
	assert_int_equal(A.pools_end, 0);
	eng_close(&e);
}

/* An engine that reads late but reads: its replies wait in kvxd's queue (more than the socket
 * holds), go out on EPOLLOUT, whole and in order, and it keeps its session. */
static void
test_a_slow_reader_gets_everything_in_order(void **state)
{
	struct eng slow;
	struct eng_reply r;
	uint64_t sent = 0, last = 0;

	A.cfg.reply_queue_kb = 4096;
	assert_int_equal(listen_on(&A), 0);
	eng_connect(&slow, &A);
	assert_int_equal(eng_hello(&slow, NULL), 0);
	for (int i = 0; i < 120 && (last = eng_admin_send(&slow, "counters")); i++)
		sent++;
	assert_true(sent >= 100);
	for (int i = 0; i < 10; i++)
		pump_once(); /* every request handled, most replies queued */
	assert_true(live_engines(&A) == 1 && A.engines[0]->outq_bytes > 0);
	assert_int_equal(eng_wait(&slow, last, &r) > 0, 1);
	assert_int_equal(r.status, 0);
	assert_int_equal(slow.replies_seen, sent + 1); /* the HELLO's too */
	assert_false(slow.closed);
	assert_int_equal(counter(&slow, "kvx_engine_queue_overflows_total{node=\"a\"}"), 0);
	assert_int_equal(A.engines[0]->outq_bytes, 0);
	eng_close(&slow);
}

/* A burst of room ends far past reply_queue_kb (a source lost with 400 rooms in flight: their
 * FAILED, DRAINING and RELEASED in a few loop passes) while the engine reads late: it keeps its
 * session and hears every room's end (before: queue overflow, the session closed and the rest
 * of the ends lost, though the engine read). */
static void
test_a_burst_of_room_ends_keeps_the_session(void **state)
{
	enum { NROOMS = 400 };
	struct eng e;
	int pool;

	A.cfg.reply_queue_kb = 64;
	pool = eng_with_pool(&e, &A);
	for (uint64_t id = 1; id <= NROOMS; id++)
		assert_int_equal(eng_room_open(&e, id, pool, 4, NULL), 0);
	for (uint64_t id = 1; id <= NROOMS; id++) /* the source fails them all at once */
		assert_true(kvxd_decode_abort(&A, kvxd_room_find(&A, id, 0, KVX_ROOM_DECODE),
					      -EHOSTUNREACH, "test") > 0);
	for (int i = 0; i < 400 && e.nstate[KVX_ROOM_RELEASED] < NROOMS && !e.closed; i++)
		pump_once(); /* the engine reads nothing meanwhile */
	assert_false(e.closed);
	assert_non_null(A.engines[0]);
	assert_true(A.engines[0]->outq_bytes > (uint64_t)A.cfg.reply_queue_kb * 1024);
	for (int i = 0; i < 2000 && e.nstate[KVX_ROOM_RELEASED] < NROOMS && !e.closed; i++) {
		pump_once();
		eng_read(&e, 0, NULL);
	}
	assert_false(e.closed);
	assert_int_equal(e.nstate[KVX_ROOM_RELEASED], NROOMS);
	assert_int_equal(counter(&e, "kvx_engine_queue_overflows_total{node=\"a\"}"), 0);
	for (uint64_t id = 1; id <= NROOMS; id++)
		assert_int_equal(eng_room_req(&e, KVX_ENG_ROOM_CLOSE, id), 0);
	eng_close(&e);
}

/* An event that the socket took is counted sent, once, and arrives once (the old check read a
 * stale errno after a successful send, and queued the event again when it said EAGAIN). */
static void
test_an_event_is_sent_once(void **state)
{
	struct eng e;
	int pool, n30 = 0, n31 = 0;

	assert_int_equal(listen_on(&B), 0);
	eng_connect(&e, &B);
	assert_int_equal(eng_hello(&e, NULL), 0);
	pool = eng_pool_id(&e, 256, 16, 1);
	eng_chunk(&e, 30, pool + 1000, 2, 0); /* an unknown pool: one FAILED event each */
	eng_chunk(&e, 31, pool + 1000, 2, 0);
	for (int i = 0; i < 5; i++)
		pump_once();
	assert_non_null(eng_event(&e, 31, KVX_STATE_FAILED));
	for (int i = 0; i < e.nev; i++) {
		n30 += e.ev[i].room == 30;
		n31 += e.ev[i].room == 31;
	}
	assert_int_equal(n30, 1);
	assert_int_equal(n31, 1);
	assert_int_equal(counter(&e, "kvx_events_sent_total{node=\"b\"}"), 2);
	assert_int_equal(counter(&e, "kvx_events_dropped_total{node=\"b\"}"), 0);
	eng_close(&e);
}

/* ---- 4. caps -----------------------------------------------------------------------------------
 */

static void
test_cap_sessions_per_uid(void **state)
{
	struct eng e[4];
	struct eng_reply r;

	A.cfg.max_sessions_per_uid = 2;
	assert_int_equal(listen_on(&A), 0);
	for (int i = 0; i < 3; i++)
		eng_connect(&e[i], &A);
	assert_int_equal(eng_hello(&e[0], NULL), 0);
	assert_int_equal(eng_hello(&e[1], NULL), 0);
	assert_int_equal(eng_hello(&e[2], &r), -EDQUOT);
	assert_non_null(strstr(r.text, "max_sessions_per_uid"));
	for (int i = 0; i < 10 && !e[2].closed; i++) {
		pump_once();
		eng_read(&e[2], 0, NULL);
	}
	assert_true(e[2].closed);
	assert_int_equal(
		counter(&e[0],
			"kvx_engine_cap_refused_total{node=\"a\",cap=\"max_sessions_per_uid\"}"),
		1);
	/* a session that ends frees its place */
	eng_close(&e[1]);
	for (int i = 0; i < 5; i++)
		pump_once();
	eng_connect(&e[3], &A);
	assert_int_equal(eng_hello(&e[3], NULL), 0);
	eng_close(&e[0]);
	eng_close(&e[2]);
	eng_close(&e[3]);
}

static int
sessions_open(const struct kvxd *d)
{
	int n = 0;

	for (int i = 0; i < d->engines_end; i++)
		n += d->engines[i] != NULL;
	return n;
}

/* A refused session (over max_sessions_per_uid) is closed at its first request, whatever it
 * is: one too short to be a request, or one sent without reading the answers (its socket then
 * does not take the refusal).  Before, requests too short were answered and the session kept,
 * and one whose socket did not take the refusal stayed until it read it: for good, its socket
 * readable and no longer read, waking the control core on every pass. */
static void
test_refused_session_not_reading_is_closed(void **state)
{
	struct eng ok, e;
	struct kvx_eng_hello h = {.version = KVX_ENG_VERSION};
	uint32_t junk = 0;
	int open;

	(void)state;
	A.cfg.max_sessions_per_uid = 1;
	assert_int_equal(listen_on(&A), 0);
	eng_connect(&ok, &A);
	assert_int_equal(eng_hello(&ok, NULL), 0);
	for (int k = 0; k < 5; k++)
		pump_once();
	open = sessions_open(&A);
	/* a request too short to be one */
	eng_connect(&e, &A);
	PUMP_UNTIL(sessions_open(&A) == open + 1);
	assert_int_equal(send(e.fd, &junk, sizeof(junk), MSG_DONTWAIT), (ssize_t)sizeof(junk));
	PUMP_UNTIL(sessions_open(&A) == open);
	eng_close(&e);
	/* requests sent in a burst, no answer read */
	eng_connect(&e, &A);
	PUMP_UNTIL(sessions_open(&A) == open + 1);
	for (int i = 0; i < 64; i++)
		assert_true(eng_send(&e, KVX_ENG_HELLO, &h, sizeof(h), -1) != 0);
	PUMP_UNTIL(sessions_open(&A) == open);
	eng_close(&e);
	eng_close(&ok);
}

/* A listens; two sessions of one user (rank 0) and one of another user (rank 1), said HELLO. */
static void
two_users(struct eng *e1, struct eng *e2, struct eng *other)
{
	assert_int_equal(listen_on(&A), 0);
	eng_connect_as(e1, &A, NOBODY, getegid(), 0, NULL);
	eng_connect_as(e2, &A, NOBODY, getegid(), 0, NULL);
	eng_connect_as(other, &A, NOBODY - 1, getegid(), 0, NULL);
	assert_int_equal(eng_hello(e1, NULL), 0);
	assert_int_equal(eng_hello(e2, NULL), 0);
	assert_int_equal(eng_hello_rank(other, 1), 0);
}

/* two_users(), each session with a pool of 16 pages of 256 bytes: pools[] their ids. */
static void
two_users_pools(struct eng *e1, struct eng *e2, struct eng *other, int pools[3])
{
	two_users(e1, e2, other);
	pools[0] = eng_pool_id(e1, 256, 16, 1);
	pools[1] = eng_pool_id(e2, 256, 16, 1);
	pools[2] = eng_pool_id(other, 256, 16, 1);
	assert_true(pools[0] > 0 && pools[1] > 0 && pools[2] > 0);
}

/* One user's engines hold at most max_pools_per_uid pools, over all of its sessions: the node's
 * table (KVXD_MAX_POOLS) is never one user's alone; another user still registers. */
static void
test_cap_pools_per_uid(void **state)
{
	struct eng e1, e2, other;
	struct eng_reply r;
	int p;

	need_root();
	A.cfg.max_pools_per_engine = 2;
	A.cfg.max_pools_per_uid = 3;
	two_users(&e1, &e2, &other);
	assert_true(eng_pool_id(&e1, 4096, 4, 1) > 0);
	assert_true(eng_pool_id(&e1, 4096, 4, 1) > 0);
	p = eng_pool_id(&e2, 4096, 4, 1);
	assert_true(p > 0);
	assert_int_equal(eng_pool_reg(&e2, 4096, 4, 1, 4096 * 4, &r), -EDQUOT);
	assert_non_null(strstr(r.text, "max_pools_per_uid"));
	assert_int_equal(
		counter(&e1, "kvx_engine_cap_refused_total{node=\"a\",cap=\"max_pools_per_uid\"}"),
		1);
	assert_true(eng_pool_id(&other, 4096, 4, 1) > 0); /* another user's */
	assert_int_equal(eng_pool_unreg(&e2, p), 0);
	assert_true(eng_pool_id(&e2, 4096, 4, 1) > 0);
	eng_close(&e1);
	eng_close(&e2);
	eng_close(&other);
}

static void
test_cap_pools_per_engine(void **state)
{
	struct eng e;
	struct eng_reply r;
	int p1, p2;

	A.cfg.max_pools_per_engine = 2;
	assert_int_equal(listen_on(&A), 0);
	eng_connect(&e, &A);
	assert_int_equal(eng_hello(&e, NULL), 0);
	p1 = eng_pool_id(&e, 4096, 4, 1);
	p2 = eng_pool_id(&e, 4096, 4, 1);
	assert_true(p1 > 0 && p2 > 0);
	assert_int_equal(eng_pool_reg(&e, 4096, 4, 1, 4096 * 4, &r), -EDQUOT);
	assert_non_null(strstr(r.text, "max_pools_per_engine"));
	assert_int_equal(
		counter(&e,
			"kvx_engine_cap_refused_total{node=\"a\",cap=\"max_pools_per_engine\"}"),
		1);
	assert_int_equal(eng_pool_unreg(&e, p1), 0);
	assert_true(eng_pool_id(&e, 4096, 4, 1) > 0);
	eng_close(&e);
}

/* Pinned bytes are summed over every pool of every session of the uid. */
static void
test_cap_pinned_bytes_per_uid(void **state)
{
	struct eng e1, e2;
	struct eng_reply r;
	int p1;

	A.cfg.max_pinned_mb_per_uid = 1;
	assert_int_equal(listen_on(&A), 0);
	eng_connect(&e1, &A);
	eng_connect(&e2, &A);
	assert_int_equal(eng_hello(&e1, NULL), 0);
	assert_int_equal(eng_hello(&e2, NULL), 0);
	p1 = eng_pool_id(&e1, 4096, 64, 2); /* 512 KiB */
	assert_true(p1 > 0);
	assert_true(eng_pool_id(&e2, 4096, 128, 1) > 0); /* 1 MiB in all: at the cap */
	assert_int_equal(eng_pool_reg(&e2, 4096, 1, 1, 4096, &r), -EDQUOT);
	assert_non_null(strstr(r.text, "max_pinned_mb_per_uid"));
	assert_int_equal(
		counter(&e1,
			"kvx_engine_cap_refused_total{node=\"a\",cap=\"max_pinned_mb_per_uid\"}"),
		1);
	assert_int_equal(eng_pool_unreg(&e1, p1), 0);
	assert_true(eng_pool_id(&e2, 4096, 1, 1) > 0);
	eng_close(&e1);
	eng_close(&e2);
}

/* Node a with its verbs workers started, and an engine session e on it (HELLO answered). */
static void
eng_with_workers(struct eng *e)
{
	assert_int_equal(listen_on(&A), 0);
	assert_int_equal(kvxd_vwork_start(&A), 0);
	eng_connect(e, &A);
	assert_int_equal(eng_hello(e, NULL), 0);
}

/* A pool's registration runs on a verbs worker (the kernel pins every page: seconds for a GPU
 * node's pool), not on the control core: another engine is answered meanwhile, and no room takes
 * the pool before its keys exist.  A pool whose engine left during its registration is
 * unregistered once the registration returns: nothing stays pinned. */
static void
test_pool_registration_does_not_stall_the_control_core(void **state)
{
	struct kvx_eng_pool_reg m = {.geom = {256, 16, 1}};
	struct eng e, e2;
	struct eng_reply r;
	uint64_t seq;
	int fd, mrs, id;

	(void)state;
	eng_with_workers(&e);
	mrs = fake_vx_live().mr;
	fake_vx_block("mr_reg");
	fd = memfd_sized(4096);
	seq = eng_send(&e, KVX_ENG_POOL_REG, &m, sizeof(m), fd);
	close(fd);
	PUMP_UNTIL(fake_vx_blocked());
	id = A.next_pool_id; /* the id it will have */
	eng_connect(&e2, &A);
	assert_int_equal(eng_hello(&e2, NULL), 0);
	assert_int_equal(eng_room_open(&e, 40, id, 2, NULL), -ENOENT);
	assert_true(fake_vx_blocked());
	fake_vx_unblock();
	PUMP_UNTIL(!A.vwork.nbusy); /* the worker's thread may take a while to run */
	e.last_reply_seq =
		0; /* POOL_REG's reply comes after the later request's (engine_proto.h) */
	assert_true(eng_wait(&e, seq, &r) > 0);
	assert_int_equal(r.status, 0);
	assert_int_equal(r.value, id);
	assert_int_equal(fake_vx_live().mr, mrs + A.nrails);
	assert_int_equal(eng_room_open(&e, 41, id, 2, NULL), 0);

	/* the engine leaves while its next pool is being registered */
	fake_vx_block("mr_reg");
	fd = memfd_sized(4096);
	seq = eng_send(&e2, KVX_ENG_POOL_REG, &m, sizeof(m), fd);
	close(fd);
	PUMP_UNTIL(fake_vx_blocked());
	eng_close(&e2);
	pump_ms(20);
	assert_true(fake_vx_blocked());
	fake_vx_unblock();
	/* nbusy first: once it is 0 the worker is done with the fake */
	PUMP_UNTIL(!A.vwork.nbusy && fake_vx_live().mr == mrs + A.nrails);
	for (int i = 0; i < KVXD_MAX_POOLS; i++)
		assert_true(!A.pools[i] || A.pools[i]->id == id);
	eng_close(&e);
	kvxd_vwork_stop(&A);
}

/* A POOL_REG with the verbs workers started: answered once its worker is done. */
static int
pool_reg_on_worker(struct eng *e)
{
	struct kvx_eng_pool_reg m = {.geom = {256, 16, 1}};
	struct eng_reply r;
	uint64_t seq;
	int fd = memfd_sized(4096);
	bool got = false;

	seq = eng_send(e, KVX_ENG_POOL_REG, &m, sizeof(m), fd);
	close(fd);
	/* steps with pauses, so that the worker's thread runs (got: PUMP_UNTIL looks twice) */
	PUMP_UNTIL(got || (got = eng_read(e, seq, &r) == 1));
	assert_int_equal(r.status, 0);
	return (int)r.value;
}

static int
pools_in_slots(const struct kvxd *d)
{
	int n = 0;

	for (int i = 0; i < KVXD_MAX_POOLS; i++)
		n += d->pools[i] != NULL;
	return n;
}

/* Engines register side by side: a second engine's pool is registered, and answered, while the
 * first engine's registration is blocked (the kernel pins every page: seconds for a GPU's pool,
 * and a node's engines, one per GPU, start together). */
static void
test_pool_registrations_side_by_side(void **state)
{
	struct kvx_eng_pool_reg m = {.geom = {256, 16, 1}};
	struct eng e, e2;
	struct eng_reply r;
	uint64_t seq;
	int fd;

	(void)state;
	eng_with_workers(&e);
	eng_connect(&e2, &A);
	assert_int_equal(eng_hello(&e2, NULL), 0);
	fake_vx_block("mr_reg");
	fd = memfd_sized(4096);
	seq = eng_send(&e, KVX_ENG_POOL_REG, &m, sizeof(m), fd);
	close(fd);
	PUMP_UNTIL(fake_vx_blocked());
	assert_true(pool_reg_on_worker(&e2) > 0);
	assert_true(fake_vx_blocked()); /* the first is still being registered */
	fake_vx_unblock();
	PUMP_UNTIL(!A.vwork.nbusy);
	e.last_reply_seq = 0; /* its reply comes after the later request's (engine_proto.h) */
	assert_true(eng_wait(&e, seq, &r) > 0);
	assert_int_equal(r.status, 0);
	assert_true(r.value > 0);
	eng_close(&e2);
	eng_close(&e);
	kvxd_vwork_stop(&A);
}

/* A registration that fails on its second rail: the first rail's registration is undone on the
 * deregistration worker, and the POOL_REG is answered with the failure once the pool is gone, so
 * that an engine that tries again finds its slot and its pinned bytes free. */
static void
test_failed_registration_answered_once_its_pool_is_gone(void **state)
{
	struct kvx_eng_pool_reg m = {.geom = {256, 16, 1}};
	struct eng e;
	struct eng_reply r;
	bool got = false;
	uint64_t seq;
	int fd, mrs;

	(void)state;
	assert_int_equal(A.nrails, 2);
	eng_with_workers(&e);
	mrs = fake_vx_live().mr;
	fake_vx_fail_call("mr_reg", 2, -ENOMEM);
	fake_vx_block("mr_dereg");
	fd = memfd_sized(4096);
	seq = eng_send(&e, KVX_ENG_POOL_REG, &m, sizeof(m), fd);
	close(fd);
	PUMP_UNTIL(fake_vx_blocked());
	pump_ms(20);
	assert_int_equal(eng_read(&e, seq, &r), 0); /* not before the pool is gone */
	assert_int_equal(pools_in_slots(&A), 1);
	fake_vx_unblock();
	PUMP_UNTIL(got || (got = eng_read(&e, seq, &r) == 1));
	assert_int_equal(r.status, -ENOMEM);
	assert_non_null(strstr(r.text, "rail 1"));
	assert_int_equal(pools_in_slots(&A), 0);
	assert_int_equal(fake_vx_live().mr, mrs);
	assert_true(pool_reg_on_worker(&e) > 0); /* tried again */
	eng_close(&e);
	kvxd_vwork_stop(&A);
}

/* A pool's deregistration and unmap run on a verbs worker (the kernel unpins every page and
 * tears the mapping down: 5 and 34 ms for 256 MiB in the VM, seconds for a GPU's pool), not on
 * the control core: another engine is
 * answered meanwhile, the pool is gone for its engine at once and keeps its slot (it is still
 * pinned) until the worker returns, and the POOL_UNREG is answered then.  An engine that leaves
 * meanwhile leaves nothing registered; a failed deregistration is answered -EIO, and the sweep
 * tries it again. */
static void
test_pool_deregistration_does_not_stall_the_control_core(void **state)
{
	struct kvx_eng_pool_unreg u;
	struct eng e, e2;
	struct eng_reply r;
	bool got;
	uint64_t seq;
	int mrs, id;

	(void)state;
	eng_with_workers(&e);
	mrs = fake_vx_live().mr;
	id = pool_reg_on_worker(&e);
	assert_int_equal(fake_vx_live().mr, mrs + A.nrails);

	fake_vx_block("mr_dereg");
	u = (struct kvx_eng_pool_unreg){.pool_id = id};
	seq = eng_send(&e, KVX_ENG_POOL_UNREG, &u, sizeof(u), -1);
	PUMP_UNTIL(fake_vx_blocked());
	pump_ms(20);
	assert_int_equal(eng_read(&e, seq, &r), 0); /* not answered before it is done */
	eng_connect(&e2, &A);
	assert_int_equal(eng_hello(&e2, NULL), 0); /* the control core answers meanwhile */
	assert_int_equal(eng_room_open(&e, 40, id, 2, NULL), -ENOENT); /* gone for its engine */
	assert_int_equal(pools_in_slots(&A), 1);		       /* still pinned */
	assert_true(fake_vx_blocked());
	fake_vx_unblock();
	PUMP_UNTIL(!A.vwork.nbusy); /* the worker's thread may take a while to run */
	e.last_reply_seq = 0;	    /* its reply comes after the later request's (engine_proto.h) */
	assert_true(eng_wait(&e, seq, &r) > 0);
	assert_int_equal(r.status, 0);
	assert_int_equal(fake_vx_live().mr, mrs);
	assert_int_equal(pools_in_slots(&A), 0);

	/* its engine leaves while the pool is being deregistered */
	id = pool_reg_on_worker(&e2);
	fake_vx_block("mr_dereg");
	u = (struct kvx_eng_pool_unreg){.pool_id = id};
	eng_send(&e2, KVX_ENG_POOL_UNREG, &u, sizeof(u), -1);
	PUMP_UNTIL(fake_vx_blocked());
	eng_close(&e2);
	pump_ms(20);
	assert_true(fake_vx_blocked());
	fake_vx_unblock();
	PUMP_UNTIL(!A.vwork.nbusy && pools_in_slots(&A) == 0);
	assert_int_equal(fake_vx_live().mr, mrs);

	/* a failed deregistration: -EIO, the pool gone for its engine, the sweep tries again */
	id = pool_reg_on_worker(&e);
	fake_vx_fail_call("mr_dereg", 1, -EAGAIN);
	u = (struct kvx_eng_pool_unreg){.pool_id = id};
	seq = eng_send(&e, KVX_ENG_POOL_UNREG, &u, sizeof(u), -1);
	got = false;
	PUMP_UNTIL(got || (got = eng_read(&e, seq, &r) == 1));
	assert_int_equal(r.status, -EIO);
	assert_int_equal(pools_in_slots(&A), 1);
	assert_int_equal(eng_room_open(&e, 41, id, 2, NULL), -ENOENT);
	fake_ms += KVXD_POOL_DEREG_RETRY_MS;
	PUMP_UNTIL(!A.vwork.nbusy && pools_in_slots(&A) == 0);
	assert_int_equal(fake_vx_live().mr, mrs);
	eng_close(&e);
	kvxd_vwork_stop(&A);
}

/* Decode: the engine's open rooms count until they leave (RELEASED, then closed). */
static void
test_cap_rooms_per_engine_decode(void **state)
{
	struct eng e;
	struct eng_reply r;
	int pool;

	A.cfg.max_rooms_per_engine = 2;
	pool = eng_with_pool(&e, &A);
	assert_int_equal(eng_room_open(&e, 1, pool, 4, NULL), 0);
	assert_int_equal(eng_room_open(&e, 2, pool, 4, NULL), 0);
	assert_int_equal(eng_room_open(&e, 3, pool, 4, &r), -EDQUOT);
	assert_non_null(strstr(r.text, "max_rooms_per_engine"));
	assert_null(kvxd_room_find(&A, 3, 0, KVX_ROOM_DECODE));
	assert_int_equal(
		counter(&e,
			"kvx_engine_cap_refused_total{node=\"a\",cap=\"max_rooms_per_engine\"}"),
		1);
	/* room 1 leaves: aborted (no source was told, so it is released at once), closed */
	assert_int_equal(eng_room_req(&e, KVX_ENG_ROOM_ABORT, 1), 0);
	for (int i = 0; i < 10 && !eng_event(&e, 1, KVX_STATE_RELEASED); i++)
		pump_once();
	assert_non_null(eng_event(&e, 1, KVX_STATE_RELEASED));
	assert_int_equal(eng_room_req(&e, KVX_ENG_ROOM_CLOSE, 1), 0);
	assert_int_equal(eng_room_open(&e, 3, pool, 4, NULL), 0);
	eng_close(&e);
}

/* Prefill: a chunk that would make the engine's rooms exceed the cap is refused (FAILED event),
 * and its room kept failed (beyond the cap) until the engine closes it; a chunk to a room it
 * already has is not; a room that ended and was closed frees its place. */
/* One user's rooms over all of its sessions: decode opens and prefill chunks are refused at
 * max_rooms_per_uid while each engine is under its own cap; another user's engine is not. */
static void
test_cap_rooms_per_uid(void **state)
{
	const struct kvx_event *ev;
	struct eng e1, e2, other;
	struct eng_reply r;
	int pools[3], p1, p2, po;

	need_root();
	A.cfg.max_rooms_per_engine = 2;
	A.cfg.max_rooms_per_uid = 3;
	two_users_pools(&e1, &e2, &other, pools);
	p1 = pools[0], p2 = pools[1], po = pools[2];
	assert_int_equal(eng_room_open(&e1, 1, p1, 4, NULL), 0);
	assert_int_equal(eng_room_open(&e1, 2, p1, 4, NULL), 0);
	assert_int_equal(eng_room_open(&e2, 3, p2, 4, NULL), 0);
	assert_int_equal(eng_room_open(&e2, 4, p2, 4, &r), -EDQUOT); /* its own 1 of 2 */
	assert_non_null(strstr(r.text, "max_rooms_per_uid"));
	assert_null(kvxd_room_find(&A, 4, 0, KVX_ROOM_DECODE));
	/* an id an engine opens again replaces its room there: not one more for the user */
	assert_int_equal(eng_room_req(&e1, KVX_ENG_ROOM_ABORT, 1), 0);
	for (int i = 0; i < 10 && !eng_event(&e1, 1, KVX_STATE_RELEASED); i++)
		pump_once();
	assert_non_null(eng_event(&e1, 1, KVX_STATE_RELEASED));
	assert_int_equal(eng_room_open(&e1, 1, p1, 4, NULL), 0);
	eng_chunk(&e2, 5, p2, 2, 0); /* a prefill room: the same cap */
	ev = eng_event_wait(&e2, 5, KVX_STATE_FAILED);
	assert_int_equal(ev->error, -EDQUOT);
	assert_non_null(strstr(ev->reason, "max_rooms_per_uid"));
	assert_int_equal(
		counter(&e1, "kvx_engine_cap_refused_total{node=\"a\",cap=\"max_rooms_per_uid\"}"),
		2);
	assert_int_equal(eng_room_open(&other, 4, po, 4, NULL), 0); /* another user's */
	eng_close(&e1);
	eng_close(&e2);
	eng_close(&other);
}

/* e's first chunk of room id (rank 0, 2 pages of pool) makes a live room: no refusal. */
static void
chunk_taken_live(struct eng *e, uint64_t id, int pool)
{
	eng_chunk_x(e, id, pool, 2, 0, false);
	pump_once();
	assert_null(eng_event(e, id, KVX_STATE_FAILED));
	assert_int_not_equal(kvxd_room_state(kvxd_room_find(&A, id, 0, KVX_ROOM_PREFILL)),
			     KVX_ROOM_FAILED);
}

/* Rooms kept failed for refused chunks count in the user's rooms, which stop at twice
 * max_rooms_per_uid: past that a refused chunk's attempt fails without a room (its engine is
 * told), no session is closed for it, and until the engine closes the id no other session of
 * its rank makes a live room of that id, whose later chunks could end it a SUCCESS without the
 * refused one's pages.  Before, each of a user's 16 sessions could keep twice
 * max_rooms_per_engine rooms failed (about 6 GB of rooms at the defaults). */
static void
test_refused_rooms_bounded_per_uid(void **state)
{
	const struct kvx_event *ev;
	struct eng e1, e2, other, x;
	uint64_t nrooms = A.nrooms[KVX_ROOM_PREFILL];
	int pools[3], p1, p2, po, px;

	need_root();
	A.cfg.max_rooms_per_engine = 8;
	A.cfg.max_rooms_per_uid = 2;
	two_users_pools(&e1, &e2, &other, pools);
	p1 = pools[0], p2 = pools[1], po = pools[2];
	eng_chunk_x(&e1, 1, p1, 2, 0, false);
	eng_chunk_x(&e1, 2, p1, 2, 0, false);
	for (uint64_t id = 3; id <= 4; id++) { /* over the user's cap: kept failed */
		eng_chunk_x(&e1, id, p1, 2, 0, false);
		assert_non_null(eng_event_wait(&e1, id, KVX_STATE_FAILED));
		assert_non_null(kvxd_room_find(&A, id, 0, KVX_ROOM_PREFILL));
	}
	assert_int_equal(A.nrooms[KVX_ROOM_PREFILL], nrooms + 4);
	/* twice the cap: failed without a room, from either session of the user */
	eng_chunk_x(&e1, 5, p1, 2, 0, false);
	ev = eng_event_wait(&e1, 5, KVX_STATE_FAILED);
	assert_int_equal(ev->error, -EDQUOT);
	eng_chunk_x(&e2, 6, p2, 2, 0, false);
	assert_int_equal(eng_event_wait(&e2, 6, KVX_STATE_FAILED)->error, -EDQUOT);
	assert_null(kvxd_room_find(&A, 5, 0, KVX_ROOM_PREFILL));
	assert_null(kvxd_room_find(&A, 6, 0, KVX_ROOM_PREFILL));
	assert_int_equal(A.nrooms[KVX_ROOM_PREFILL], nrooms + 4);
	assert_int_equal(A.ctr.chunks_refused_roomless, 2);
	assert_int_equal(counter(&e1, "kvx_chunks_refused_roomless_total{node=\"a\"}"), 2);
	/* the attempt stays failed: its own last chunk is refused, and makes no room */
	e1.nev = 0;
	eng_chunk_x(&e1, 5, p1, 2, 2, true);
	assert_non_null(eng_event_wait(&e1, 5, KVX_STATE_FAILED));
	assert_null(kvxd_room_find(&A, 5, 0, KVX_ROOM_PREFILL));
	/* with room under the caps again, another session of the rank does not make a live room
	 * of the id e1 has not closed */
	A.cfg.max_rooms_per_uid = 8;
	eng_chunk_x(&e2, 5, p2, 2, 0, true);
	ev = eng_event_wait(&e2, 5, KVX_STATE_FAILED);
	assert_int_equal(ev->error, -EBUSY);
	PUMP_UNTIL(kvxd_room_state(kvxd_room_find(&A, 5, 0, KVX_ROOM_PREFILL)) == KVX_ROOM_FAILED);
	/* another rank's room of that id is not touched */
	eng_chunk_x(&other, 5, po, 2, 0, false);
	pump_once();
	assert_null(eng_event(&other, 5, KVX_STATE_FAILED));
	assert_non_null(kvxd_room_find(&A, 5, 1, KVX_ROOM_PREFILL));
	assert_int_not_equal(kvxd_room_state(kvxd_room_find(&A, 5, 1, KVX_ROOM_PREFILL)),
			     KVX_ROOM_FAILED);
	/* another user's session on the rank, refused for it, keeps no id from the rank's user */
	eng_connect_as(&x, &A, NOBODY - 1, getegid(), 0, NULL);
	assert_int_equal(eng_hello(&x, NULL), 0);
	px = eng_pool_id(&x, 256, 16, 1);
	assert_true(px > 0);
	eng_chunk_x(&x, 7, px, 2, 0, false);
	assert_int_equal(eng_event_wait(&x, 7, KVX_STATE_FAILED)->error, -EPERM);
	chunk_taken_live(&e1, 7, p1);
	eng_close(&x);
	assert_false(e1.closed || e2.closed);
	/* once e1 closes the id, it is free again */
	assert_int_equal(eng_room_req(&e1, KVX_ENG_ROOM_CLOSE, 5), -ENOENT);
	assert_int_equal(eng_room_req(&e2, KVX_ENG_ROOM_CLOSE, 5), 0);
	e2.nev = 0;
	chunk_taken_live(&e2, 5, p2);
	eng_close(&e1);
	eng_close(&e2);
	eng_close(&other);
}

static void
test_cap_rooms_per_engine_prefill(void **state)
{
	const struct kvx_event *ev;
	struct eng e;
	int pool;

	B.cfg.max_rooms_per_engine = 1;
	pool = eng_with_pool(&e, &B);
	eng_chunk_x(&e, 10, pool, 2, 0, false);
	eng_chunk(&e, 10, pool, 2, 2); /* the same room again: fine */
	eng_chunk(&e, 11, pool, 2, 0);
	ev = eng_event_wait(&e, 11, KVX_STATE_FAILED);
	assert_non_null(ev);
	assert_int_equal(ev->error, -EDQUOT);
	assert_non_null(strstr(ev->reason, "max_rooms_per_engine"));
	assert_null(eng_event(&e, 10, KVX_STATE_FAILED));
	assert_int_equal(kvxd_room_state(kvxd_room_find(&B, 11, 0, KVX_ROOM_PREFILL)),
			 KVX_ROOM_FAILED);
	/* room 10 never gets its metadata: the waiting timeout fails it, the engine closes it */
	fake_ms += B.cfg.waiting_ms + 200;
	for (int i = 0; i < 20 && !eng_event(&e, 10, KVX_STATE_FAILED); i++)
		pump_once();
	assert_non_null(eng_event(&e, 10, KVX_STATE_FAILED));
	assert_int_equal(eng_room_req(&e, KVX_ENG_ROOM_CLOSE, 10), 0);
	assert_int_equal(eng_room_req(&e, KVX_ENG_ROOM_CLOSE, 11), 0);
	e.nev = 0;
	eng_chunk(&e, 11, pool, 2, 0);
	assert_null(eng_event(&e, 11, KVX_STATE_FAILED));
	assert_non_null(kvxd_room_find(&B, 11, 0, KVX_ROOM_PREFILL));
	eng_close(&e);
}

/* ---- 5. sizes in 64 bits ----------------------------------------------------------------------
 */

/* 64 B x 933505088 pages x 308761441 buffers is 2^64 + 4096 bytes: in 64-bit arithmetic that
 * wraps to 4096, which a 4 KiB memfd "holds". */
static void
test_pool_geometry_overflow_refused(void **state)
{
	struct eng e;
	struct eng_reply r;

	assert_int_equal(listen_on(&A), 0);
	eng_connect(&e, &A);
	assert_int_equal(eng_hello(&e, NULL), 0);
	assert_int_equal(eng_pool_reg(&e, 64, 933505088u, 308761441u, 4096, &r), -E2BIG);
	/* a memfd smaller than the geometry */
	assert_int_equal(eng_pool_reg(&e, 4096, 4, 2, 4096 * 8 - 1, &r), -ERANGE);
	/* larger is fine (the pool uses the start) */
	assert_true(eng_pool_reg(&e, 4096, 4, 2, 4096 * 9, &r) == 0 && r.value > 0);
	eng_close(&e);
}

/* A pool's fd must be memory: a regular file of a disk filesystem (or of a FUSE one, which the
 * engine could serve itself and never answer the MR registration's page faults) is refused;
 * a memfd and a file of /dev/shm are taken. */
static void
test_pool_of_a_disk_file_refused(void **state)
{
	char path[64] = "kvx-test-pool-XXXXXX"; /* in the build directory */
	struct kvx_eng_pool_reg m = {.geom = {4096, 4, 2}};
	struct eng_reply r;
	struct statfs fs;
	struct eng e;
	int fd = mkstemp(path);

	assert_true(fd >= 0);
	unlink(path);
	assert_int_equal(fstatfs(fd, &fs), 0);
	if (fs.f_type == TMPFS_MAGIC) { /* the build is in memory: the case cannot be made */
		close(fd);
		skip();
	}
	assert_int_equal(ftruncate(fd, 4096 * 8), 0);
	assert_int_equal(listen_on(&A), 0);
	eng_connect(&e, &A);
	assert_int_equal(eng_hello(&e, NULL), 0);
	assert_int_equal(eng_call(&e, KVX_ENG_POOL_REG, &m, sizeof(m), fd, &r), -EINVAL);
	assert_non_null(strstr(r.text, "not a memfd"));
	close(fd);
	/* a file of /dev/shm is memory (where there is one) */
	strcpy(path, "/dev/shm/kvx-test-pool-XXXXXX");
	fd = mkstemp(path);
	if (fd >= 0) {
		unlink(path);
		assert_int_equal(ftruncate(fd, 4096 * 8), 0);
		assert_int_equal(eng_call(&e, KVX_ENG_POOL_REG, &m, sizeof(m), fd, &r), 0);
		assert_true(r.value > 0);
		close(fd);
	}
	assert_true(eng_pool_reg(&e, 4096, 4, 2, 4096 * 8, &r) == 0 && r.value > 0);
	eng_close(&e);
}

/* Lines of /proc/self/maps that map the memfd named name (kvxd runs in this process). */
static int
maps_of(const char *name)
{
	char line[512];
	FILE *f = fopen("/proc/self/maps", "r");
	int n = 0;

	assert_non_null(f);
	while (fgets(line, sizeof(line), f))
		n += strstr(line, name) != NULL;
	fclose(f);
	return n;
}

/* A pool on huge pages (MFD_HUGETLB) of a geometry smaller than one: kvxd maps the whole huge
 * page and unmaps it whole when the pool goes (an munmap of the geometry's 64 bytes fails on
 * hugetlbfs: the mapping, and the huge page under it, stayed for good, uncharged).  Needs root
 * to reserve one huge page for the test when none is. */
static struct {
	char saved[32]; /* nr_hugepages before the test ("": untouched) */
	int fd;
	int lock; /* held from the reservation to its end: ctest runs the mutants' copies of
		   * this test at the same time, and each must find its own huge page free */
} huge = {.fd = -1, .lock = -1};

/* The test's teardown: nr_hugepages back to what it was, whatever the test did (a failed
 * assertion leaves the test at once). */
static int
teardown_huge(void **state)
{
	int h, rc = teardown(state); /* the session's pools go first */

	if (huge.fd >= 0)
		close(huge.fd);
	huge.fd = -1;
	if (huge.saved[0] && (h = open("/proc/sys/vm/nr_hugepages", O_WRONLY | O_CLOEXEC)) >= 0) {
		(void)!write(h, huge.saved, strlen(huge.saved));
		close(h);
	}
	huge.saved[0] = '\0';
	/* the lock goes with the huge page: a kvxd that kept its mapping (the bug this test is
	 * for) holds it until this process exits, and the next copy of the test would find no
	 * free one; the lock is then let go at the exit */
	if (huge.lock >= 0 && maps_of("kvx-test-huge") == 0) {
		close(huge.lock);
		huge.lock = -1;
	}
	return rc;
}

static void
test_pool_on_huge_pages_unmapped_whole(void **state)
{
	struct kvx_eng_pool_reg m = {.geom = {64, 1, 1}};
	struct eng_reply r;
	struct statfs fs;
	struct eng e;
	char more[32];
	int fd, h, id;
	ssize_t n;

	need_root();
	huge.lock = open("/tmp/kvx-test-huge.lock", O_RDWR | O_CREAT | O_CLOEXEC, 0600);
	assert_true(huge.lock >= 0);
	assert_int_equal(flock(huge.lock, LOCK_EX), 0);
	h = open("/proc/sys/vm/nr_hugepages", O_RDWR | O_CLOEXEC);
	if (h < 0)
		skip();
	n = pread(h, huge.saved, sizeof(huge.saved) - 1, 0);
	assert_true(n > 0);
	huge.saved[n] = '\0';
	snprintf(more, sizeof(more), "%d\n", atoi(huge.saved) + 1); /* one free for us */
	(void)!pwrite(h, more, strlen(more), 0);
	close(h);
	fd = huge.fd = memfd_create("kvx-test-huge", MFD_HUGETLB | MFD_CLOEXEC);
	if (fd < 0 || fstatfs(fd, &fs) < 0 || ftruncate(fd, (off_t)fs.f_bsize) < 0)
		skip(); /* no huge page to be had */
	assert_int_equal(fs.f_type, HUGETLBFS_MAGIC);
	assert_int_equal(listen_on(&A), 0);
	eng_connect(&e, &A);
	assert_int_equal(eng_hello(&e, NULL), 0);
	assert_int_equal(eng_call(&e, KVX_ENG_POOL_REG, &m, sizeof(m), fd, &r), 0);
	id = (int)r.value;
	assert_true(id > 0);
	assert_int_equal(maps_of("kvx-test-huge"), 1);
	assert_int_equal(eng_pool_unreg(&e, id), 0);
	for (int i = 0; i < 20; i++)
		pump_once();
	assert_int_equal(maps_of("kvx-test-huge"), 0);
	eng_close(&e);
}

/* A pool whose deregistration failed on one rail after it succeeded on another is never taken
 * again (the freed key of the first rail could name a later MR); the sweep finishes it. */
static void
test_pool_half_deregistered_not_taken(void **state)
{
	const struct kvx_event *ev;
	struct eng e;
	int pool, mrs;

	assert_int_equal(B.nrails, 2);
	assert_int_equal(listen_on(&B), 0);
	eng_connect(&e, &B);
	assert_int_equal(eng_hello(&e, NULL), 0);
	mrs = fake_vx_live().mr;
	pool = eng_pool_id(&e, 256, 16, 1);
	assert_true(pool > 0);
	assert_int_equal(fake_vx_live().mr, mrs + 2); /* one MR per rail */
	fake_vx_fail_from("mr_dereg", 2, -EBUSY);     /* rail 1's, until it is stopped */
	assert_int_equal(eng_pool_unreg(&e, pool), -EIO);
	assert_int_equal(eng_pool_unreg(&e, pool), -ENOENT); /* gone for the engine */
	assert_int_equal(fake_vx_live().mr, mrs + 1);
	eng_chunk(&e, 30, pool, 2, 0);
	ev = eng_event_wait(&e, 30, KVX_STATE_FAILED);
	assert_non_null(ev);
	assert_int_equal(ev->error, -ENOENT);
	assert_int_equal(kvxd_room_state(kvxd_room_find(&B, 30, 0, KVX_ROOM_PREFILL)),
			 KVX_ROOM_FAILED); /* kept failed, see test_refused_chunk_fails_its_room */
	assert_int_equal(fake_vx_live().mr, mrs + 1); /* rail 1 still registered */
	/* nor is it the engine's any more: a new pool fits under a cap of one */
	B.cfg.max_pools_per_engine = 1;
	assert_true(eng_pool_id(&e, 256, 16, 1) > 0);
	fake_vx_fail_stop("mr_dereg");
	kvxd_pool_sweep(&B, kvxd_now_ms()); /* not yet: a failed one waits before its retry */
	assert_int_equal(fake_vx_live().mr, mrs + 3);
	kvxd_pool_sweep(&B, kvxd_now_ms() + KVXD_POOL_DEREG_RETRY_MS); /* now it goes */
	assert_int_equal(fake_vx_live().mr, mrs + 2);		       /* the new pool's */
	for (int i = 0; i < KVXD_MAX_POOLS; i++)
		assert_true(!B.pools[i] || B.pools[i]->id != pool);
	eng_close(&e);
}

/* A chunk whose destination range runs past what any room can hold is refused up front (its
 * room kept failed). */
static void
test_chunk_destination_range_checked(void **state)
{
	const struct kvx_event *ev;
	struct eng e;
	int pool;

	assert_int_equal(listen_on(&B), 0);
	eng_connect(&e, &B);
	assert_int_equal(eng_hello(&e, NULL), 0);
	pool = eng_pool_id(&e, 256, 16, 1);
	eng_chunk(&e, 20, pool, 2, UINT32_MAX);
	ev = eng_event_wait(&e, 20, KVX_STATE_FAILED);
	assert_non_null(ev);
	assert_int_equal(ev->error, -ERANGE);
	eng_chunk(&e, 21, pool, 2, KVX_MAX_ROOM_PAGES - 1);
	ev = eng_event_wait(&e, 21, KVX_STATE_FAILED);
	assert_non_null(ev);
	assert_int_equal(ev->error, -ERANGE);
	assert_int_equal(kvxd_room_state(kvxd_room_find(&B, 20, 0, KVX_ROOM_PREFILL)),
			 KVX_ROOM_FAILED);
	assert_int_equal(kvxd_room_state(kvxd_room_find(&B, 21, 0, KVX_ROOM_PREFILL)),
			 KVX_ROOM_FAILED);
	eng_chunk(&e, 22, pool, 2, KVX_MAX_ROOM_PAGES - 2); /* the last two pages: fine */
	assert_null(eng_event(&e, 22, KVX_STATE_FAILED));
	eng_close(&e);
}

/* ---- every engine is told how every room ended, and engine loss propagates --------------- */

/* a (decode) and b (prefill) connected, an engine on each with a pool. */
static void
pair_with_engines(struct eng *ea, struct eng *eb, int *pa, int *pb)
{
	assert_int_equal(listen_on(&A), 0);
	assert_int_equal(listen_on(&B), 0);
	kvxd_peer_admin(&A, "b", "resume");
	PUMP_UNTIL(A.peers[0].state == KVXD_PEER_READY && B.peers[0].state == KVXD_PEER_READY);
	eng_connect(ea, &A);
	eng_connect(eb, &B);
	assert_int_equal(eng_hello(ea, NULL), 0);
	assert_int_equal(eng_hello(eb, NULL), 0);
	*pa = eng_pool_id(ea, 256, 16, 1);
	*pb = eng_pool_id(eb, 256, 16, 1);
	assert_true(*pa > 0 && *pb > 0);
}

static int
count_events(const struct eng *e, uint64_t id, int st)
{
	int n = 0;

	for (int i = 0; i < e->nev; i++)
		n += e->ev[i].room == id && (st < 0 || e->ev[i].state == st);
	return n;
}

static struct kvxd_room *
prefill_known(uint64_t id)
{
	struct kvxd_room *r = kvxd_room_find(&B, id, 0, KVX_ROOM_PREFILL);

	return r && kvxd_room_state(r) == KVX_ROOM_WAITING_FOR_INPUT ? r : NULL;
}

/* The prefill room a decode peer's ROOM_META made, waiting for its engine: another user's
 * engine on the rank neither takes it by a chunk nor closes it; the holder's engine takes it and
 * the room succeeds. */
static void
test_rank_meta_room_not_taken_by_another_user(void **state)
{
	struct eng ea, first, other;
	const struct kvx_event *ev;
	struct kvxd_room *r;
	int pa, fpool, opool;

	need_root();
	assert_int_equal(listen_on(&A), 0);
	assert_int_equal(listen_on(&B), 0);
	kvxd_peer_admin(&A, "b", "resume");
	PUMP_UNTIL(A.peers[0].state == KVXD_PEER_READY && B.peers[0].state == KVXD_PEER_READY);
	eng_connect(&ea, &A);
	assert_int_equal(eng_hello(&ea, NULL), 0);
	pa = eng_pool_id(&ea, 256, 16, 1);
	eng_connect_as(&first, &B, NOBODY, getegid(), 0, NULL);
	assert_int_equal(eng_hello(&first, NULL), 0);
	eng_connect_as(&other, &B, NOBODY - 1, getegid(), 0, NULL);
	assert_int_equal(eng_hello(&other, NULL), 0);
	fpool = eng_pool_id(&first, 256, 16, 1);
	opool = eng_pool_id(&other, 256, 16, 1);
	assert_true(pa > 0 && fpool > 0 && opool > 0);

	assert_int_equal(eng_room_open(&ea, 30, pa, 4, NULL), 0);
	PUMP_UNTIL(prefill_known(30));
	eng_chunk_x(&other, 30, opool, 4, 0, true);
	ev = eng_event_wait(&other, 30, KVX_STATE_FAILED);
	assert_int_equal(ev->error, -EPERM);
	assert_int_equal(eng_room_req(&other, KVX_ENG_ROOM_CLOSE, 30), -ENOENT);
	r = prefill_known(30);
	assert_non_null(r); /* untouched: waiting, nobody's, not closed */
	assert_true(r->engine_id < 0 && !r->engine_closed);

	eng_chunk_x(&first, 30, fpool, 4, 0, true);
	PUMP_UNTIL(eng_event(&ea, 30, KVX_STATE_SUCCESS));

	/* a room whose decode side aborted before the holder's engine came: it waits, failed, to
	 * tell that engine; another user's close neither removes it nor marks it closed, and the
	 * holder's engine is told FAILED at its chunk (its one notice of the room's end) */
	assert_int_equal(eng_room_open(&ea, 31, pa, 4, NULL), 0);
	PUMP_UNTIL(prefill_known(31));
	assert_int_equal(eng_room_req(&ea, KVX_ENG_ROOM_ABORT, 31), 0);
	PUMP_UNTIL((r = kvxd_room_find(&B, 31, 0, KVX_ROOM_PREFILL)) &&
		   kvxd_room_state(r) == KVX_ROOM_FAILED);
	assert_int_equal(eng_room_req(&other, KVX_ENG_ROOM_CLOSE, 31), -ENOENT);
	r = kvxd_room_find(&B, 31, 0, KVX_ROOM_PREFILL);
	assert_true(r && r->engine_id < 0 && !r->engine_closed);
	eng_chunk_x(&first, 31, fpool, 4, 0, true);
	ev = eng_event_wait(&first, 31, KVX_STATE_FAILED);
	assert_non_null(ev);
	eng_close(&ea);
	eng_close(&first);
	eng_close(&other);
}

/* Decode aborts a room after its ROOM_META reached b but before b's engine submitted anything:
 * b's engine is told FAILED exactly once, whenever its chunks come.  Before: the room failed
 * with no engine attached, its chunks were skipped, and the engine never heard of it. */
static void
test_prefill_engine_told_once_after_early_abort(void **state)
{
	struct eng ea, eb;
	int pa, pb;

	pair_with_engines(&ea, &eb, &pa, &pb);
	assert_int_equal(eng_room_open(&ea, 500, pa, 4, NULL), 0);
	PUMP_UNTIL(prefill_known(500));
	assert_int_equal(eng_room_req(&ea, KVX_ENG_ROOM_ABORT, 500), 0);
	for (int i = 0; i < MAX_STEPS && !eng_event(&ea, 500, KVX_STATE_RELEASED); i++)
		pump_once();
	assert_int_equal(count_events(&ea, 500, KVX_STATE_RELEASED), 1);
	eng_chunk_x(&eb, 500, pb, 2, 0, false);
	eng_chunk_x(&eb, 500, pb, 2, 2, true);
	for (int i = 0; i < 20; i++)
		pump_once();
	assert_non_null(eng_event(&eb, 500, KVX_STATE_FAILED));
	assert_int_equal(count_events(&eb, 500, -1), 1); /* one event: the end, once */
	assert_int_equal(count_events(&ea, 500, KVX_STATE_SUCCESS), 0);
	eng_close(&ea);
	eng_close(&eb);
}

/* The prefill engine dies with a room half submitted: decode learns by a failure push and
 * releases after the drain, well before waiting_ms; its engine hears RELEASED once. */
static void
test_prefill_engine_loss_propagates(void **state)
{
	struct eng ea, eb;
	uint64_t t0;
	int pa, pb;

	pair_with_engines(&ea, &eb, &pa, &pb);
	assert_int_equal(eng_room_open(&ea, 501, pa, 4, NULL), 0);
	PUMP_UNTIL(prefill_known(501));
	eng_chunk_x(&eb, 501, pb, 2, 0, false); /* half of it */
	for (int i = 0; i < 10; i++)
		pump_once();
	t0 = fake_ms;
	eng_close(&eb);
	for (int i = 0; i < MAX_STEPS && !eng_event(&ea, 501, KVX_STATE_RELEASED); i++) {
		pump_once();
		fake_ms++;
	}
	assert_non_null(eng_event(&ea, 501, KVX_STATE_RELEASED));
	assert_true(fake_ms - t0 < 1000); /* waiting_ms is 60000 */
	assert_int_equal(count_events(&ea, 501, KVX_STATE_RELEASED), 1);
	assert_int_equal(count_events(&ea, 501, KVX_STATE_SUCCESS), 0);
	assert_int_equal(A.ctr.waiting_timeouts + B.ctr.waiting_timeouts, 0);
	assert_int_equal(B.ctr.engine_lost_rooms, 1);
	assert_int_equal(A.ctr.fences, 0);
	eng_close(&ea);
}

/* A prefill engine unregisters its pool while its room's WRITEs from it still fly: a chunk's
 * own pool reference went back when its core built the WRs, so the room holds one until it
 * leaves.  The pool stays registered (POOL_UNREG: -EBUSY) until every WR completed and the room
 * left (pool_ref_chunk_only: the pool's MR was deregistered under the flying WRs, which then
 * failed the room and the connection with it). */
static void
test_prefill_pool_kept_while_its_writes_fly(void **state)
{
	struct kvx_eng_room_close cl = {.room = 503};
	struct kvxd_peer *p;
	struct kvxd_room *r;
	struct eng ea, eb;
	int pa, pb, mrs, unreg = -EBUSY;

	pair_with_engines(&ea, &eb, &pa, &pb);
	assert_int_equal(eng_room_open(&ea, 503, pa, 4, NULL), 0);
	PUMP_UNTIL(prefill_known(503));
	fake_vx_hold(true);
	eng_chunk(&eb, 503, pb, 4, 0);
	PUMP_UNTIL((r = kvxd_room_find(&B, 503, 0, KVX_ROOM_PREFILL)) &&
		   atomic_load(&r->pc.wr_posted) > 0);
	mrs = fake_vx_live().mr;
	assert_int_equal(eng_pool_unreg(&eb, pb), -EBUSY);
	assert_int_equal(fake_vx_live().mr, mrs);
	fake_vx_hold(false);
	p = peer_of(&B, "a");
	for (int l = 0; l < B.ncores * B.nrails; l++)
		if (p->qpc[l])
			fake_vx_release(p->qpc[l]->qp, 100);
	PUMP_UNTIL(eng_event(&eb, 503, KVX_STATE_SUCCESS));
	assert_int_equal(fake_vx_live().mr, mrs);
	assert_int_equal(eng_call(&eb, KVX_ENG_ROOM_CLOSE, &cl, sizeof(cl), -1, NULL), 0);
	/* the room is freed after a grace period; the call that succeeds is the last */
	PUMP_UNTIL(unreg == 0 || (unreg = eng_pool_unreg(&eb, pb)) == 0);
	assert_int_equal(fake_vx_live().mr, mrs - 1);
	assert_non_null(eng_event(&ea, 503, KVX_STATE_SUCCESS));
	eng_close(&ea);
	eng_close(&eb);
}

/* A room whose chunks name more pools than a room may hold references to: the chunk that names
 * one too many is refused and the room fails, so that its other chunks (the last one after it)
 * cannot make it a SUCCESS without that chunk's pages (refused_chunk_alone: only the chunk is
 * refused, and decode reports SUCCESS with a page never written). */
static void
test_room_reading_too_many_pools_fails(void **state)
{
	int pools[KVXD_ROOM_SRC_POOLS + 1], pa, pb, dst;
	struct eng ea, eb;

	A.cfg.max_pools_per_engine = B.cfg.max_pools_per_engine = KVXD_ROOM_SRC_POOLS + 2;
	pair_with_engines(&ea, &eb, &pa, &pb);
	dst = eng_pool_id(&ea, 256, KVXD_ROOM_SRC_POOLS + 2, 1);
	pools[0] = pb;
	for (int i = 1; i <= KVXD_ROOM_SRC_POOLS; i++) {
		pools[i] = eng_pool_id(&eb, 256, 16, 1);
		assert_true(pools[i] > 0);
	}
	assert_true(dst > 0);
	assert_int_equal(eng_room_open(&ea, 504, dst, KVXD_ROOM_SRC_POOLS + 2, NULL), 0);
	PUMP_UNTIL(prefill_known(504));
	for (int i = 0; i <= KVXD_ROOM_SRC_POOLS; i++) /* page 0 of each pool to page i */
		eng_chunk_full(&eb, 504, 0, pools[i], 0, 1, (uint32_t)i, 0, 0, 0, false);
	/* the last chunk, from a pool the room holds */
	eng_chunk_full(&eb, 504, 0, pools[0], 1, 1, KVXD_ROOM_SRC_POOLS + 1, 0, 0, 0, true);
	PUMP_UNTIL(eng_event(&ea, 504, KVX_STATE_RELEASED) ||
		   eng_event(&ea, 504, KVX_STATE_SUCCESS));
	assert_null(eng_event(&ea, 504, KVX_STATE_SUCCESS));
	assert_null(eng_event(&eb, 504, KVX_STATE_SUCCESS));
	assert_non_null(eng_event(&eb, 504, KVX_STATE_FAILED));
	assert_int_equal(count_events(&eb, 504, KVX_STATE_FAILED), 1); /* the room's, once */
	eng_close(&ea);
	eng_close(&eb);
}

/* Room id, one of whose chunks b refused, ends FAILED for b's engine (told once, with error
 * unless 0) and RELEASED for a's, never SUCCESS on either side. */
static void
assert_refused_room_failed(struct eng *ea, struct eng *eb, uint64_t id, int error)
{
	PUMP_UNTIL(eng_event(ea, id, KVX_STATE_RELEASED) || eng_event(ea, id, KVX_STATE_SUCCESS));
	assert_null(eng_event(ea, id, KVX_STATE_SUCCESS));
	assert_null(eng_event(eb, id, KVX_STATE_SUCCESS));
	assert_int_equal(count_events(eb, id, KVX_STATE_FAILED), 1);
	if (error)
		assert_int_equal(eng_event(eb, id, KVX_STATE_FAILED)->error, error);
}

/* A chunk kvxd refuses (here: a source page beyond the pool) fails its room.  The engine
 * hears of the refusal only by an event, after it may have submitted the room's last chunk:
 * before, the room went on, the prefill engine was told FAILED and then SUCCESS, and decode's
 * engine SUCCESS with two pages never written. */
static void
test_refused_chunk_fails_its_room(void **state)
{
	struct eng ea, eb;
	int pa, pb;

	(void)state;
	pair_with_engines(&ea, &eb, &pa, &pb);
	assert_int_equal(eng_room_open(&ea, 520, pa, 6, NULL), 0);
	PUMP_UNTIL(prefill_known(520));
	eng_chunk_full(&eb, 520, 0, pb, 0, 2, 0, 0, 0, 0, false);
	eng_chunk_full(&eb, 520, 0, pb, 15, 2, 2, 0, 0, 0, false); /* pages 15 and 16 of 16 */
	eng_chunk_full(&eb, 520, 0, pb, 4, 2, 4, 0, 0, 0, true);
	assert_refused_room_failed(&ea, &eb, 520, -ERANGE);
	assert_int_equal(B.ctr.chunks_refused, 1);
	eng_close(&ea);
	eng_close(&eb);
}

/* An engine that floods refused chunks for one room sends its core one ROOM_FAIL, not one per
 * chunk: its core's inbox, which every engine's chunks on that core share, does not fill (and
 * other engines' chunks are not refused for want of room there); the room fails once (mutant
 * refusal_fails_every_time). */
static void
test_refused_chunk_flood_fails_its_room_once(void **state)
{
	struct kvxd_core *c = &B.cores[521 % B.ncores];
	struct eng ea, eb;
	uint32_t free0;
	int pa, pb;

	(void)state;
	pair_with_engines(&ea, &eb, &pa, &pb);
	assert_int_equal(eng_room_open(&ea, 521, pa, 6, NULL), 0);
	PUMP_UNTIL(prefill_known(521));
	for (int i = 0; i < 20; i++)
		pump_once();
	free0 = kvx_mbox_free_count(c->inbox);
	for (int i = 0; i < 100; i++) /* pages 15 and 16 of 16 */
		eng_chunk_full(&eb, 521, 0, pb, 15, 2, 2, 0, 0, 0, false);
	/* b's control core takes them all, its core none yet */
	for (int i = 0; i < MAX_STEPS && B.ctr.chunks_refused < 100; i++)
		kvxd_loop_once(&B, 0);
	assert_int_equal(B.ctr.chunks_refused, 100);
	assert_int_equal(B.ctr.chunks_refused_again, 99);
	assert_int_equal(free0 - kvx_mbox_free_count(c->inbox), 1);
	assert_refused_room_failed(&ea, &eb, 521, -ERANGE);
	eng_close(&ea);
	eng_close(&eb);
}

/* A chunk refused before its room is known here leaves the room failed: the engine's next
 * chunks of it, and decode's ROOM_META, find it ended.  Before, no room was made, and the
 * later chunks made one that succeeded without the refused chunk's pages. */
static void
test_refused_first_chunk_keeps_its_room_failed(void **state)
{
	struct eng ea, eb;
	int pa, pb;

	(void)state;
	pair_with_engines(&ea, &eb, &pa, &pb);
	eng_chunk_full(&eb, 521, 0, pb, 0, 2, 0, 0, 5, 0, false); /* 5 buffers of 1 */
	PUMP_UNTIL(eng_event(&eb, 521, KVX_STATE_FAILED));
	assert_int_equal(eng_room_open(&ea, 521, pa, 4, NULL), 0);
	eng_chunk_full(&eb, 521, 0, pb, 2, 2, 2, 0, 0, 0, true);
	assert_refused_room_failed(&ea, &eb, 521, -ERANGE);
	/* closed, the id is free again */
	assert_int_equal(eng_room_req(&eb, KVX_ENG_ROOM_CLOSE, 521), 0);
	assert_null(kvxd_room_find(&B, 521, 0, KVX_ROOM_PREFILL));
	eng_close(&ea);
	eng_close(&eb);
}

/* The session of the engine that talks to b over its socket (no rings). */
static struct kvxd_engine *
socket_session(void)
{
	struct kvxd_engine *s = NULL;

	for (int i = 0; i < B.engines_end; i++)
		if (B.engines[i] && !B.engines[i]->rings && B.engines[i]->hello)
			s = B.engines[i];
	assert_non_null(s);
	return s;
}

/* Send room id's chunk (not its last) on eb's socket until the socket takes no more, b's control
 * core running after each and its polling core not at all: its inbox (4096 messages) fills to
 * its headroom.  Stops early once b held the socket, when stop_at_hold.  Returns how many were
 * sent. */
static int
flood_socket_unpolled(struct eng *eb, uint64_t id, int pb, bool stop_at_hold)
{
	uint64_t buf[CHUNK_BUF_WORDS];
	size_t len = chunk_msg(buf, id, 0, pb, 0, 2, 0, 0, 0, 0, false);
	int sent = 0;

	for (int i = 0; i < 20000; i++) {
		if (stop_at_hold && B.ctr.engine_socket_holds)
			break;
		if (eng_send(eb, KVX_ENG_CHUNK, buf, len, -1) == 0)
			break; /* the socket is full */
		sent++;
		kvxd_loop_once(&B, 0);
	}
	return sent;
}

/* Chunks on a socket are never refused for a full inbox either: while b's polling core does not
 * run, its inbox fills to its headroom and b's control core stops reading the engine's socket,
 * and stops watching it (else every loop pass would wake at once for it: the hold is counted
 * once); the engine's sends wait once the socket is full.  Once the core runs, the socket is
 * read again and the room is whole.  Before, the chunk that found the inbox full was refused
 * and failed its room. */
static void
test_full_inbox_holds_the_socket(void **state)
{
	uint64_t buf[CHUNK_BUF_WORDS];
	struct eng ea, eb;
	uint64_t holds;
	int pa, pb, sent;
	size_t len;

	(void)state;
	pair_with_engines(&ea, &eb, &pa, &pb);
	assert_int_equal(eng_room_open(&ea, 522, pa, 4, NULL), 0);
	PUMP_UNTIL(prefill_known(522));
	sent = flood_socket_unpolled(&eb, 522, pb, false);
	assert_true(sent > 4096); /* more than the inbox holds: the rest waits in the socket */
	assert_int_equal(B.ctr.chunks_refused, 0);
	assert_true(socket_session()->sock_held);
	assert_int_equal(B.socks_held, 1);
	holds = B.ctr.engine_socket_holds;
	assert_true(holds > 0);
	for (int i = 0; i < 50; i++) /* not woken for the held socket: nothing more is counted */
		kvxd_loop_once(&B, 0);
	assert_int_equal(B.ctr.engine_socket_holds, holds);
	assert_int_equal(B.ctr.chunks_refused, 0);
	/* b's polling core runs again: the socket is read (behind the flood), the room completes */
	len = chunk_msg(buf, 522, 0, pb, 2, 2, 2, 0, 0, 0, true);
	for (int i = 0; i < 20000 && !eng_send(&eb, KVX_ENG_CHUNK, buf, len, -1); i++) {
		node_poll_cores(&B);
		kvxd_loop_once(&B, 0);
		assert_true(i < 19999);
	}
	PUMP_UNTIL(eng_event(&ea, 522, KVX_STATE_SUCCESS) ||
		   eng_event(&ea, 522, KVX_STATE_RELEASED));
	assert_non_null(eng_event(&ea, 522, KVX_STATE_SUCCESS));
	assert_non_null(eng_event(&eb, 522, KVX_STATE_SUCCESS));
	assert_int_equal(B.ctr.chunks_refused, 0);
	eng_close(&ea);
	eng_close(&eb);
	assert_int_equal(B.socks_held, 0);
}

/* A socket engine that goes while its socket is held has what it sent taken at once (its end
 * is reported whatever is watched), its chunks kept in order in the core's overflow list: none
 * is refused, and the room whose last chunk it sent completes after it went.  half: it only
 * shuts its sending side (shutdown SHUT_WR: EPOLLHUP is not reported, EPOLLRDHUP is). */
static void
held_socket_of_a_gone_engine(uint64_t id, bool half)
{
	struct eng ea, eb;
	int pa, pb;

	pair_with_engines(&ea, &eb, &pa, &pb);
	assert_int_equal(eng_room_open(&ea, id, pa, 4, NULL), 0);
	PUMP_UNTIL(prefill_known(id));
	assert_true(flood_socket_unpolled(&eb, id, pb, true) > 4000);
	assert_true(socket_session()->sock_held);
	eng_chunk_full(&eb, id, 0, pb, 2, 2, 2, 0, 0, 0, true); /* waits in the socket */
	if (half)
		assert_int_equal(shutdown(eb.fd, SHUT_WR), 0);
	else
		eng_close(&eb);	    /* everything sent, the engine exits */
	for (int i = 0; i < 5; i++) /* b's polling core does not run */
		kvxd_loop_once(&B, 0);
	assert_int_equal(B.socks_held, 0); /* the session closed, everything taken */
	PUMP_UNTIL(eng_event(&ea, id, KVX_STATE_SUCCESS) || eng_event(&ea, id, KVX_STATE_RELEASED));
	assert_non_null(eng_event(&ea, id, KVX_STATE_SUCCESS));
	assert_int_equal(B.ctr.chunks_refused, 0);
	eng_close(&ea);
	eng_close(&eb);
}

static void
test_held_socket_of_a_gone_engine_is_kept(void **state)
{
	(void)state;
	held_socket_of_a_gone_engine(523, false);
}

static void
test_held_socket_of_a_half_closed_engine_is_kept(void **state)
{
	(void)state;
	held_socket_of_a_gone_engine(524, true);
}

/* A chunk after its room's last is refused (the room fails, unless it ended): decode's SUCCESS
 * may follow the last chunk's WRITE_WITH_IMM at any time, and a later chunk's WRITEs would land
 * in pages decode's engine has back.  Before, the core queued it behind the last chunk and
 * posted it after the immediate. */
static void
test_chunk_after_the_last_refused(void **state)
{
	struct kvxd_pool *dp = NULL;
	struct eng ea, eb;
	int pa, pb;

	(void)state;
	pair_with_engines(&ea, &eb, &pa, &pb);
	for (int i = 0; i < KVXD_MAX_POOLS; i++)
		if (A.pools[i] && A.pools[i]->id == pa)
			dp = A.pools[i];
	assert_non_null(dp);
	memset(dp->base, 0xee, dp->len);
	assert_int_equal(eng_room_open(&ea, 523, pa, 4, NULL), 0);
	PUMP_UNTIL(prefill_known(523));
	eng_chunk_full(&eb, 523, 0, pb, 0, 2, 0, 0, 0, 0, true);
	eng_chunk_full(&eb, 523, 0, pb, 2, 2, 2, 0, 0, 0, false);
	PUMP_UNTIL(eng_event(&ea, 523, KVX_STATE_RELEASED) ||
		   eng_event(&ea, 523, KVX_STATE_SUCCESS));
	for (int i = 0; i < 200; i++)
		pump_once();
	for (size_t k = 2 * 256; k < 4 * 256; k++) /* the room's pages 2 and 3: never written */
		assert_int_equal(dp->base[k], 0xee);
	assert_int_equal(B.ctr.chunks_refused, 1);
	PUMP_UNTIL(eng_event(&eb, 523, KVX_STATE_SUCCESS) || eng_event(&eb, 523, KVX_STATE_FAILED));
	assert_int_equal(count_events(&eb, 523, KVX_STATE_SUCCESS) +
				 count_events(&eb, 523, KVX_STATE_FAILED),
			 1);
	eng_close(&ea);
	eng_close(&eb);
}

/* The engine closed a FAILED prefill room (close said 0) while its WRITEs still drain, and
 * submits the same id again: it is told at once (-EBUSY), and the draining room is left alone.
 * Before, the chunk was skipped and the engine never heard of it.  The new attempt fails as a
 * whole: once the draining room is gone, its next chunk fails the room it opens (before, that
 * room went on and could succeed without the refused chunk's pages), until the engine closes
 * the id. */
static void
test_chunk_for_a_closed_draining_room_told_busy(void **state)
{
	struct kvx_eng_room_close cl = {.room = 524};
	const struct kvx_event *ev;
	struct kvxd_room *r;
	struct kvxd_peer *p;
	struct eng ea, eb;
	int pa, pb;

	(void)state;
	pair_with_engines(&ea, &eb, &pa, &pb);
	assert_int_equal(eng_room_open(&ea, 524, pa, 4, NULL), 0);
	PUMP_UNTIL(prefill_known(524));
	fake_vx_hold(true);
	eng_chunk(&eb, 524, pb, 4, 0);
	PUMP_UNTIL((r = kvxd_room_find(&B, 524, 0, KVX_ROOM_PREFILL)) &&
		   atomic_load(&r->pc.wr_posted) > 0);
	assert_int_equal(eng_room_req(&ea, KVX_ENG_ROOM_ABORT, 524), 0);
	PUMP_UNTIL(eng_event(&eb, 524, KVX_STATE_FAILED));
	assert_int_equal(eng_call(&eb, KVX_ENG_ROOM_CLOSE, &cl, sizeof(cl), -1, NULL), 0);
	assert_true(kvxd_room_find(&B, 524, 0, KVX_ROOM_PREFILL)->engine_closed);
	eb.nev = 0;
	eng_chunk(&eb, 524, pb, 4, 0);
	ev = eng_event_wait(&eb, 524, KVX_STATE_FAILED);
	assert_int_equal(ev->error, -EBUSY);
	/* and a chunk of the new attempt that is refused for itself is told as well (it was
	 * not: the closed room's end had been told, and the refusal went nowhere) */
	eb.nev = 0;
	eng_chunk(&eb, 524, 999, 4, 0); /* no such pool */
	ev = eng_event_wait(&eb, 524, KVX_STATE_FAILED);
	assert_int_equal(ev->error, -ENOENT);
	fake_vx_hold(false);
	p = peer_of(&B, "a");
	for (int l = 0; l < B.ncores * B.nrails; l++)
		if (p->qpc[l])
			fake_vx_release(p->qpc[l]->qp, 100);
	PUMP_UNTIL(eng_event(&ea, 524, KVX_STATE_RELEASED));
	/* the closed attempt is gone: the refused attempt's next chunk (its last, say) fails the
	 * room it opens, rather than make one that could succeed without the refused pages */
	PUMP_UNTIL(!kvxd_room_find(&B, 524, 0, KVX_ROOM_PREFILL));
	/* decode opens the id again first: its ROOM_META makes the prefill room (no engine's
	 * yet); the engine's close of the id finds it waiting (-EBUSY) and so does not end the
	 * refused attempt */
	assert_int_equal(eng_call(&ea, KVX_ENG_ROOM_CLOSE, &cl, sizeof(cl), -1, NULL), 0);
	assert_int_equal(eng_room_open(&ea, 524, pa, 4, NULL), 0);
	PUMP_UNTIL(prefill_known(524));
	assert_int_equal(eng_call(&eb, KVX_ENG_ROOM_CLOSE, &cl, sizeof(cl), -1, NULL), -EBUSY);
	eb.nev = 0;
	eng_chunk_x(&eb, 524, pb, 4, 4, true);
	ev = eng_event_wait(&eb, 524, KVX_STATE_FAILED);
	assert_int_equal(ev->error, -EBUSY);
	r = kvxd_room_find(&B, 524, 0, KVX_ROOM_PREFILL);
	assert_non_null(r);
	assert_true(r->refused);
	assert_int_equal(kvxd_room_state(r), KVX_ROOM_FAILED);
	/* its close ends that attempt: the next one is taken */
	assert_int_equal(eng_call(&eb, KVX_ENG_ROOM_CLOSE, &cl, sizeof(cl), -1, NULL), 0);
	PUMP_UNTIL(!kvxd_room_find(&B, 524, 0, KVX_ROOM_PREFILL));
	eb.nev = 0;
	eng_chunk(&eb, 524, pb, 4, 0);
	PUMP_UNTIL((r = kvxd_room_find(&B, 524, 0, KVX_ROOM_PREFILL)) && r->engine_id >= 0);
	pump_ms(5);
	assert_false(r->refused);
	assert_false(kvx_room_state_terminal(kvxd_room_state(r)));
	assert_null(eng_event(&eb, 524, KVX_STATE_FAILED));
	eng_close(&ea);
	eng_close(&eb);
}

/* The chunks kvxd holds for one engine are bounded (max_chunk_mb_per_engine): a room whose
 * ROOM_META never comes keeps its chunks waiting in its core, and an engine could have kvxd
 * hold any number of them.  The chunk past the bound is refused (-ENOBUFS) and fails its room,
 * which gives its chunks back; the charge goes back with them. */
static void
test_chunks_held_per_engine_bounded(void **state)
{
	uint64_t buf[CHUNK_BUF_WORDS];
	struct kvxd_engine *be = NULL;
	struct eng e;
	int pool, sent = 0;

	(void)state;
	B.cfg.max_chunk_mb_per_engine = 1;
	assert_int_equal(listen_on(&B), 0);
	eng_connect(&e, &B);
	assert_int_equal(eng_hello(&e, NULL), 0);
	pool = eng_pool_id(&e, 256, 64, 1);
	assert_true(pool > 0);
	for (int i = 0; i < B.engines_end; i++)
		if (B.engines[i])
			be = B.engines[i];
	assert_non_null(be);
	/* 64-page chunks of a room with no metadata: about 3,400 fit in 1 MiB */
	for (int i = 0; i < 200000 && sent < 4000; i++) {
		size_t len = chunk_msg(buf, 70, 0, pool, 0, 64, 0, 0, 0, 0, false);

		if (eng_send(&e, KVX_ENG_CHUNK, buf, len, -1))
			sent++;
		else
			pump_once();
		assert_true(be->chunk_bytes <= (1u << 20));
	}
	assert_int_equal(sent, 4000);
	assert_non_null(eng_event_wait(&e, 70, KVX_STATE_FAILED));
	assert_int_equal(eng_event(&e, 70, KVX_STATE_FAILED)->error, -ENOBUFS);
	assert_true(B.ctr.chunks_refused >= 1);
	PUMP_UNTIL(be->chunk_bytes == 0); /* the failed room gave its chunks back */
	eng_close(&e);
}

/* Rooms kept failed for refused chunks may pass max_rooms_per_engine by as many again; past
 * that kvxd cannot keep one more and closes the session (its rooms fail, none with a hole). */
static void
test_refusals_past_twice_the_cap_close_the_session(void **state)
{
	struct eng e;
	int pool;

	(void)state;
	B.cfg.max_rooms_per_engine = 2;
	pool = eng_with_pool(&e, &B);
	eng_chunk_x(&e, 40, pool, 2, 0, false);
	eng_chunk_x(&e, 41, pool, 2, 0, false);
	for (uint64_t id = 42; id < 44; id++) { /* over the cap: kept failed */
		eng_chunk_x(&e, id, pool, 2, 0, false);
		assert_non_null(eng_event_wait(&e, id, KVX_STATE_FAILED));
		assert_int_equal(eng_event(&e, id, KVX_STATE_FAILED)->error, -EDQUOT);
	}
	assert_false(e.closed);
	eng_chunk_x(&e, 44, pool, 2, 0, false);
	PUMP_UNTIL(recv(e.fd, (char[1]){0}, 1, MSG_DONTWAIT) == 0);
	PUMP_UNTIL(kvxd_room_state(kvxd_room_find(&B, 40, 0, KVX_ROOM_PREFILL)) == KVX_ROOM_FAILED);
	assert_null(kvxd_room_find(&B, 44, 0, KVX_ROOM_PREFILL));
	eng_close(&e);
}

static int
fds_open(void)
{
	DIR *dir = opendir("/proc/self/fd");
	int n = 0;

	assert_non_null(dir);
	while (readdir(dir))
		n++;
	closedir(dir);
	return n;
}

/* A datagram that brings kvxd more file descriptors than a request carries (one): kvxd closes
 * every one of them, and the session.  Before, only the first was closed: each such datagram
 * left kvxd one more descriptor (of the engine's memory, perhaps), until it could accept no
 * connection.  kvxd is this process here: /proc/self/fd counts its descriptors. */
static void
test_extra_descriptors_are_closed(void **state)
{
	struct kvx_eng_hdr m;
	union {
		char buf[CMSG_SPACE(3 * sizeof(int))];
		struct cmsghdr align;
	} ctl;
	struct iovec iov = {.iov_base = &m, .iov_len = sizeof(m)};
	struct msghdr mh = {.msg_iov = &iov,
			    .msg_iovlen = 1,
			    .msg_control = ctl.buf,
			    .msg_controllen = sizeof(ctl.buf)};
	struct cmsghdr *cm;
	struct eng e;
	int before, fds[3];
	uint64_t bad = A.ctr.engine_bad;

	(void)state;
	assert_int_equal(listen_on(&A), 0);
	for (int k = 0; k < 3; k++)
		pump_once();
	before = fds_open();
	eng_connect(&e, &A);
	assert_int_equal(eng_hello(&e, NULL), 0);
	for (int k = 0; k < 3; k++)
		fds[k] = memfd_create("kvx-test", MFD_CLOEXEC);
	memset(&ctl, 0, sizeof(ctl));
	cm = CMSG_FIRSTHDR(&mh);
	cm->cmsg_level = SOL_SOCKET;
	cm->cmsg_type = SCM_RIGHTS;
	cm->cmsg_len = CMSG_LEN(3 * sizeof(int));
	memcpy(CMSG_DATA(cm), fds, sizeof(fds));
	m = (struct kvx_eng_hdr){.type = KVX_ENG_POOL_REG, .len = sizeof(m), .seq = 7};
	assert_int_equal(sendmsg(e.fd, &mh, MSG_NOSIGNAL), (ssize_t)sizeof(m));
	for (int k = 0; k < 3; k++)
		close(fds[k]);
	PUMP_UNTIL(recv(e.fd, (char[1]){0}, 1, MSG_DONTWAIT) == 0); /* the session is closed */
	assert_int_equal(A.ctr.engine_bad, bad + 1);
	eng_close(&e);
	for (int k = 0; k < 20; k++)
		pump_once();
	assert_int_equal(fds_open(), before);

	/* a message of no bytes (kvxd reads it as the end of the stream) brings them too */
	eng_connect(&e, &A);
	for (int k = 0; k < 3; k++)
		fds[k] = memfd_create("kvx-test", MFD_CLOEXEC);
	memcpy(CMSG_DATA(cm), fds, sizeof(fds));
	iov.iov_len = 0;
	assert_int_equal(sendmsg(e.fd, &mh, MSG_NOSIGNAL), 0);
	for (int k = 0; k < 3; k++)
		close(fds[k]);
	PUMP_UNTIL(recv(e.fd, (char[1]){0}, 1, MSG_DONTWAIT) == 0);
	eng_close(&e);
	for (int k = 0; k < 20; k++)
		pump_once();
	assert_int_equal(fds_open(), before);
}

/* A chunk too short to name its room, or whose header length is not its message's, cannot
 * fail its room (which must not succeed without it): the session is closed instead. */
static void
test_truncated_chunk_closes_the_session(void **state)
{
	uint64_t buf[CHUNK_BUF_WORDS] = {0};
	struct kvx_eng_hdr *h = (void *)buf;
	struct eng e;
	size_t len;
	int pool;

	(void)state;
	assert_int_equal(listen_on(&B), 0);
	eng_connect(&e, &B);
	assert_int_equal(eng_hello(&e, NULL), 0);
	assert_true(eng_send(&e, KVX_ENG_CHUNK, buf, sizeof(struct kvx_eng_hdr) + 4, -1) != 0);
	PUMP_UNTIL(recv(e.fd, (char[1]){0}, 1, MSG_DONTWAIT) == 0);
	eng_close(&e);
	/* nor can a chunk whose header says another length than its message has */
	eng_connect(&e, &B);
	assert_int_equal(eng_hello(&e, NULL), 0);
	pool = eng_pool_id(&e, 256, 16, 1);
	len = chunk_msg(buf, 25, 0, pool, 0, 2, 0, 0, 0, 0, false);
	*h = (struct kvx_eng_hdr){.type = KVX_ENG_CHUNK, .len = (uint32_t)len + 4, .seq = 99};
	assert_int_equal(send(e.fd, buf, len, MSG_NOSIGNAL), (ssize_t)len);
	PUMP_UNTIL(recv(e.fd, (char[1]){0}, 1, MSG_DONTWAIT) == 0);
	eng_close(&e);
}

/* The decode engine dies with a room open: the room is aborted and released (nothing can
 * write into its pages any more) and the pool unregistered once nothing points at it. */
static void
test_decode_engine_loss_propagates(void **state)
{
	struct eng ea, eb;
	int pa, pb, mrs;

	pair_with_engines(&ea, &eb, &pa, &pb);
	assert_int_equal(eng_room_open(&ea, 502, pa, 4, NULL), 0);
	PUMP_UNTIL(prefill_known(502));
	mrs = fake_vx_live().mr;
	eng_close(&ea);
	PUMP_UNTIL(A.ctr.releases == 1);
	assert_int_equal(A.ctr.engine_lost_rooms, 1);
	assert_int_equal(A.ctr.waiting_timeouts, 0);
	PUMP_UNTIL(fake_vx_live().mr == mrs - 1); /* a's pool, once its room let go */
	/* b's engine, which never submitted: told FAILED when it does */
	eng_chunk_x(&eb, 502, pb, 2, 0, true);
	for (int i = 0; i < 20; i++)
		pump_once();
	assert_non_null(eng_event(&eb, 502, KVX_STATE_FAILED));
	assert_int_equal(count_events(&eb, 502, KVX_STATE_FAILED), 1);
	eng_close(&eb);
}

/* ---- no malloc on the chunk path (issue 9) ------------------------------------------------ */

/* ---- core rings: a decode room's SUCCESS from its polling core (KVX_ENG_RINGS_CORE) -------- */

/* a (decode) and b (prefill) connected; the engine r of node rn on rings with core rings and
 * a pool (rpool), the engine e of the other node on the socket with a pool (epool). */
static void
pair_ring_and_socket_flags(struct kvxd *rn, struct reng *r, int *rpool, struct eng *e, int *epool,
			   uint32_t flags)
{
	assert_int_equal(listen_on(&A), 0);
	assert_int_equal(listen_on(&B), 0);
	kvxd_peer_admin(&A, "b", "resume");
	PUMP_UNTIL(A.peers[0].state == KVXD_PEER_READY && B.peers[0].state == KVXD_PEER_READY);
	reng_open_with(r, rn, flags, rpool);
	assert_int_equal(r->ncevt, flags & KVX_ENG_RINGS_CORE ? rn->ncores : 0);
	eng_connect(e, rn == &A ? &B : &A);
	assert_int_equal(eng_hello(e, NULL), 0);
	*epool = eng_pool_id(e, 256, 16, 1);
	assert_true(*epool > 0);
}

static void
pair_ring_and_socket(struct kvxd *rn, struct reng *r, int *rpool, struct eng *e, int *epool)
{
	pair_ring_and_socket_flags(rn, r, rpool, e, epool, KVX_ENG_RINGS_CORE);
}

/* a's (decode) engine on rings with core rings, b's (prefill) on the socket. */
static void
pair_with_core_rings(struct reng *ra, struct eng *eb, int *pa, int *pb)
{
	pair_ring_and_socket(&A, ra, pa, eb, pb);
}

/* Decode: open room id on pool with pages 0..n-1, source "b", through the rings. */
static int
reng_room_open(struct reng *r, uint64_t id, int pool, uint32_t n)
{
	uint64_t buf[ROOM_OPEN_BUF_WORDS];
	size_t len = room_open_msg(buf, id, pool, n);

	return reng_call(r, KVX_ENG_ROOM_OPEN, buf, len);
}

/* Events about room id in state st the rings gave so far (ring: -1 the event ring, k core ring
 * k, -2 any), after the nodes stepped a while more. */
static int
reng_count(struct reng *r, uint64_t id, int st, int ring)
{
	int n = 0;

	for (int i = 0; i < 20; i++) {
		pump_once();
		reng_read(r);
	}
	for (int i = 0; i < r->nev; i++)
		n += r->ev[i].room == id && r->ev[i].state == st &&
		     (ring == -2 || r->ev_ring[i] == ring);
	return n;
}

static void
reng_pump_until_event(struct reng *r, uint64_t id, int st)
{
	for (int step = 0; step < MAX_STEPS; step++) {
		pump_once();
		reng_read(r);
		for (int i = 0; i < r->nev; i++)
			if (r->ev[i].room == id && r->ev[i].state == st)
				return;
	}
	fail_msg("no event %d for room %llu", st, (unsigned long long)id);
}

/* A decode room's SUCCESS comes out of its core's ring, put there by the polling core, and is
 * told exactly once: the control core, which still gets the EVENT for its books, tells nothing
 * more, and a later tell of the room's end (kvxd_room_tell) is refused as a duplicate.  The
 * claim is the room's told flag, won by a compare-and-swap (mutant core_tell_no_claim: the core
 * puts the event without winning it, and the later tell goes out a second time). */
static void
test_core_ring_tells_decode_success_once(void **state)
{
	static struct reng ra;
	struct kvx_event again = {.room = 700, .state = KVX_STATE_SUCCESS};
	struct kvxd_room *r;
	struct eng eb;
	int pa, pb;

	(void)state;
	pair_with_core_rings(&ra, &eb, &pa, &pb);
	assert_int_equal(reng_room_open(&ra, 700, pa, 4), 0);
	PUMP_UNTIL(prefill_known(700));
	eng_chunk(&eb, 700, pb, 4, 0);
	reng_pump_until_event(&ra, 700, KVX_STATE_SUCCESS);
	r = kvxd_room_find(&A, 700, 0, KVX_ROOM_DECODE);
	assert_non_null(r);
	assert_true(kvxd_room_tell(&A, r, &again) == false); /* told already: by its core */
	assert_int_equal(reng_count(&ra, 700, KVX_STATE_SUCCESS, (int)(700 % A.ncores)), 1);
	assert_int_equal(reng_count(&ra, 700, KVX_STATE_SUCCESS, -2), 1);
	/* the room's every event came out of its core ring, in order: WAITING_FOR_INPUT, then
	 * SUCCESS */
	assert_int_equal(ra.nev, 2);
	assert_int_equal(ra.ev[0].state, KVX_STATE_WAITING_FOR_INPUT);
	assert_int_equal(ra.ev[1].state, KVX_STATE_SUCCESS);
	for (int i = 0; i < ra.nev; i++) {
		assert_int_equal(ra.ev[i].room, 700);
		assert_int_equal(ra.ev_ring[i], (int)(700 % A.ncores));
	}
	assert_int_equal(A.ctr.events_core, 2);
	assert_int_equal(A.ctr.events_duplicate, 1);
	assert_int_equal(A.ctr.events_core_claimed, 0);
	assert_int_equal(atomic_load(&A.cores[700 % A.ncores].st.events_core), 2);
	/* the engine parks */
	assert_int_equal(atomic_load(&A.cores[700 % A.ncores].st.engine_wakes), 2);
	/* the prefill engine is told on its socket as before */
	assert_non_null(eng_event(&eb, 700, KVX_STATE_SUCCESS));
	reng_close(&ra);
	eng_close(&eb);
}

/* The core ring is full (the engine does not read it): the core still wins the room's one
 * tell, and hands the event to the control core, which sends it through the session's event
 * ring: delivered once, never dropped (mutant core_claim_dropped: the claimed event is lost). */
static void
test_full_core_ring_loses_no_success(void **state)
{
	static struct reng ra;
	struct kvx_eng_event filler = {.hdr = {.type = KVX_ENG_EVENT, .len = sizeof(filler)},
				       .ev = {.room = 1, .state = KVX_STATE_SUCCESS}};
	struct kvx_pcore_evq *q;
	struct eng eb;
	int pa, pb, nfill = 0;

	(void)state;
	pair_with_core_rings(&ra, &eb, &pa, &pb);
	assert_int_equal(reng_room_open(&ra, 701, pa, 4), 0);
	PUMP_UNTIL(prefill_known(701));
	/* fill core ring 701 % ncores from kvxd's side (its core is stepped by this thread) */
	q = A.engines[0] && A.engines[0]->nevq ? A.engines[0]->evq[701 % A.ncores] : NULL;
	assert_non_null(q);
	while (kvx_shring_put(&q->ring, &filler, sizeof(filler)) == 0)
		nfill++;
	assert_true(nfill > 100);
	ra.core_unread = true;
	eng_chunk(&eb, 701, pb, 4, 0);
	reng_pump_until_event(&ra, 701, KVX_STATE_SUCCESS);
	ra.core_unread = false;
	assert_int_equal(reng_count(&ra, 701, KVX_STATE_SUCCESS, -1), 1); /* the event ring */
	assert_int_equal(reng_count(&ra, 701, KVX_STATE_SUCCESS, -2), 1);
	assert_int_equal(A.ctr.events_core_claimed, 1);
	assert_int_equal(A.ctr.events_core, 1); /* its WAITING_FOR_INPUT, before the ring filled */
	assert_int_equal(atomic_load(&A.cores[701 % A.ncores].st.events_core_full), 1);
	assert_int_equal(A.ctr.events_dropped, 0);
	reng_close(&ra);
	eng_close(&eb);
}

/* The engine writes an impossible head into its core ring: the core's put fails, the claimed
 * event goes to the control core, which ends that session (its rings cannot be trusted) and
 * nothing else: another engine's room on the same node still succeeds through its core ring. */
static void
test_corrupt_core_ring_ends_only_its_session(void **state)
{
	static struct reng ra, rc;
	struct eng eb;
	int pa, pc, pb;

	(void)state;
	pair_with_core_rings(&ra, &eb, &pa, &pb);
	reng_open_with(&rc, &A, KVX_ENG_RINGS_CORE, &pc);
	assert_int_equal(reng_room_open(&ra, 702, pa, 4), 0);
	assert_int_equal(reng_room_open(&rc, 704, pc, 4), 0);
	PUMP_UNTIL(prefill_known(702) && prefill_known(704));
	/* ra's core ring full (kvxd reads the consumer's head again only when it needs room),
	 * then the consumer's head far past anything kvxd published */
	for (int k = 0; k < ra.ncevt; k++) {
		uint8_t *hdr = (uint8_t *)ra.map + (2 + k) * kvx_shring_map_bytes(ra.evt.size);
		struct kvx_eng_event filler = {
			.hdr = {.type = KVX_ENG_EVENT, .len = sizeof(filler)},
			.ev = {.room = 1, .state = KVX_STATE_SUCCESS}};

		while (kvx_shring_put(&A.engines[0]->evq[k]->ring, &filler, sizeof(filler)) == 0)
			;
		atomic_store((_Atomic uint64_t *)(hdr + 64), (uint64_t)1 << 40);
	}
	eng_chunk(&eb, 702, pb, 4, 0);
	eng_chunk(&eb, 704, pb, 4, 0);
	reng_pump_until_event(&rc, 704, KVX_STATE_SUCCESS);
	PUMP_UNTIL(live_engines(&A) == 1);
	assert_int_equal(A.ctr.events_core_claimed, 1);
	assert_int_equal(reng_count(&rc, 704, KVX_STATE_SUCCESS, (int)(704 % A.ncores)), 1);
	reng_close(&ra);
	reng_close(&rc);
	eng_close(&eb);
}

/* The decode engine goes away while its room's last WRITE is landing: its control core clears
 * the room's pointer to the core ring before the ring is unmapped (after a grace period), so
 * the core, which takes the immediate (SUCCESS) before the abort that the engine's loss sends
 * it, writes nowhere (mutant evq_kept_on_close: it writes into the unmapped ring). */
static void
test_core_ring_outlives_no_session(void **state)
{
	static struct reng ra;
	uint64_t ok0;
	struct eng eb;
	int pa, pb;

	(void)state;
	pair_with_core_rings(&ra, &eb, &pa, &pb);
	assert_int_equal(reng_room_open(&ra, 703, pa, 4), 0);
	PUMP_UNTIL(prefill_known(703));
	ok0 = atomic_load(&A.cores[703 % A.ncores].st.rooms_success);
	/* b takes the chunk and posts it: the fake device writes into a's pages at once and
	 * leaves the immediate in a's CQ */
	eng_chunk(&eb, 703, pb, 4, 0);
	for (int i = 0; i < 4; i++) {
		kvxd_loop_once(&B, 0);
		kvx_pcore_poll_once(&B.cores[703 % B.ncores]);
	}
	/* a's engine goes; a's control core closes its session (rings to go after a grace
	 * period), then a's core runs */
	reng_close(&ra);
	for (int i = 0; i < 4 && live_engines(&A); i++)
		kvxd_loop_once(&A, 0);
	assert_int_equal(live_engines(&A), 0);
	kvx_rcu_barrier(); /* the rings are unmapped now */
	kvx_pcore_poll_once(&A.cores[703 % A.ncores]);
	assert_int_equal(atomic_load(&A.cores[703 % A.ncores].st.rooms_success),
			 ok0 + 1); /* it landed */
	for (int i = 0; i < 20; i++)
		pump_once();
	assert_int_equal(atomic_load(&A.cores[703 % A.ncores].st.events_core),
			 1); /* WAITING_FOR_INPUT only */
	eng_close(&eb);
}

/* An aborted decode room's events all come out of its core ring, in order (the abort's FAILED
 * and DRAINING, then RELEASED once nothing can write into its pages), and its end, RELEASED, is
 * told once. */
static void
test_core_ring_keeps_an_aborted_room_in_order(void **state)
{
	static struct reng ra;
	struct kvx_eng_room_close ab = {.room = 705};
	int pa, pb, last = -1;
	struct eng eb;

	(void)state;
	pair_with_core_rings(&ra, &eb, &pa, &pb);
	assert_int_equal(reng_room_open(&ra, 705, pa, 4), 0);
	PUMP_UNTIL(prefill_known(705));
	assert_true(reng_call(&ra, KVX_ENG_ROOM_ABORT, &ab, sizeof(ab)) >= 0);
	reng_pump_until_event(&ra, 705, KVX_STATE_RELEASED);
	assert_int_equal(reng_count(&ra, 705, KVX_STATE_RELEASED, -2), 1);
	assert_true(ra.nev >= 3);
	for (int i = 0; i < ra.nev; i++) {
		assert_int_equal(ra.ev[i].room, 705);
		assert_int_equal(ra.ev_ring[i], (int)(705 % A.ncores));
		/* the states a decode room goes through, never back */
		assert_true((int)ra.ev[i].state > last);
		last = ra.ev[i].state;
	}
	assert_int_equal(last, KVX_STATE_RELEASED);
	assert_int_equal(A.ctr.events_core, (uint64_t)ra.nev);
	assert_int_equal(A.ctr.events_duplicate, 0);
	reng_close(&ra);
	eng_close(&eb);
}

/* Every polling core of both nodes steps, and b's control core; a's control core does not: it
 * stays parked, as in its epoll_wait. */
static void
step_all_but_a_control(void)
{
	for (int i = 0; i < nnodes; i++)
		for (int c = 0; c < N[i].ncores; c++)
			kvx_pcore_poll_once(&N[i].cores[c]);
	kvxd_loop_once(&B, 0);
}

/* A decode room's SUCCESS, which its engine hears from the core ring, does not wake its parked
 * control core: the EVENT waits in the outbox for the control core's next wake-up, which keeps
 * its books then, with the room's latency counted from when the core set the state (mutant
 * core_event_loud: every EVENT wakes it, one wake-up of the control core per room). */
static void
test_core_ring_success_wakes_no_control_core(void **state)
{
	static struct reng ra;
	struct kvx_hist *lat = &A.hist.room_latency[KVX_ROOM_DECODE][KVXD_OUTCOME_SUCCESS];
	struct kvxd_core *c = &A.cores[708 % A.ncores];
	uint64_t wakes, seen0;
	bool seen = false;
	struct eng eb;
	int pa, pb;

	(void)state;
	pair_with_core_rings(&ra, &eb, &pa, &pb);
	assert_int_equal(reng_room_open(&ra, 708, pa, 4), 0);
	PUMP_UNTIL(prefill_known(708));
	seen0 = lat->count;
	eng_chunk(&eb, 708, pb, 4, 0);
	kvx_mbox_park_prepare(c->outbox);
	wakes = kvx_mbox_wakes(c->outbox);
	for (int step = 0; step < MAX_STEPS && !seen; step++) {
		step_all_but_a_control();
		reng_read(&ra);
		for (int i = 0; i < ra.nev; i++)
			seen = seen ||
			       (ra.ev[i].room == 708 && ra.ev[i].state == KVX_STATE_SUCCESS);
	}
	assert_true(seen);
	assert_int_equal(kvx_mbox_wakes(c->outbox), wakes);
	assert_false(kvx_mbox_empty(c->outbox)); /* the EVENT waits there */
	assert_int_equal(lat->count, seen0);
	kvx_mbox_park_done(c->outbox, false);
	kvxd_loop_once(&A, 0); /* its next wake-up */
	assert_int_equal(lat->count, seen0 + 1);
	assert_int_equal(A.ctr.events_core, 2); /* WAITING_FOR_INPUT, SUCCESS */
	assert_int_equal(A.ctr.events_duplicate, 0);
	assert_int_equal(reng_count(&ra, 708, KVX_STATE_SUCCESS, -2), 1);
	reng_close(&ra);
	eng_close(&eb);
}

/* A decode room's FAILED wakes its parked control core at once, though its engine heard it
 * from the core ring: the abort that follows is the control core's to drive (mutant
 * core_failed_quiet). */
static void
test_core_ring_failure_wakes_the_control_core(void **state)
{
	static struct reng ra;
	struct kvx_eng_room_close ab = {.room = 709};
	struct kvxd_core *c = &A.cores[709 % A.ncores];
	struct eng eb;
	uint64_t wakes;
	int pa, pb;

	(void)state;
	pair_with_core_rings(&ra, &eb, &pa, &pb);
	assert_int_equal(reng_room_open(&ra, 709, pa, 4), 0);
	PUMP_UNTIL(prefill_known(709));
	reng_send(&ra, KVX_ENG_ROOM_ABORT, &ab, sizeof(ab));
	kvxd_loop_once(&A, 0); /* a's control core takes the abort: ROOM_ABORT to the room's core */
	kvx_mbox_park_prepare(c->outbox);
	wakes = kvx_mbox_wakes(c->outbox);
	kvx_pcore_poll_once(c); /* FAILED, then DRAINING, into the core ring */
	assert_int_equal(kvx_mbox_wakes(c->outbox), wakes + 1);
	kvx_mbox_park_done(c->outbox, true);
	reng_pump_until_event(&ra, 709, KVX_STATE_RELEASED);
	assert_int_equal(reng_count(&ra, 709, KVX_STATE_FAILED, (int)(709 % A.ncores)), 1);
	assert_int_equal(reng_count(&ra, 709, KVX_STATE_RELEASED, -2), 1);
	reng_close(&ra);
	eng_close(&eb);
}

/* With KVX_ENG_RINGS_REARM a core ring wakes its engine once, until the engine says it parks
 * again, as the event ring does (test_rings_rearm_one_wake_per_drain): three decode rooms of
 * one polling core, the engine parked on that core's ring; the first SUCCESS wakes it, the
 * second, while it has not parked again, does not; parked again, the third wakes it (mutant
 * core_ring_rearm_ignored: the core wakes it for every SUCCESS). */
static void
test_core_ring_rearm_one_wake_per_drain(void **state)
{
	static struct reng ra;
	const uint64_t id[3] = {730, 730 + (uint64_t)A.ncores, 730 + 2 * (uint64_t)A.ncores};
	const int k = (int)(id[0] % A.ncores);
	struct kvxd_core *c = &A.cores[k];
	uint64_t w0;
	struct eng eb;
	int pa, pb;

	(void)state;
	pair_ring_and_socket_flags(&A, &ra, &pa, &eb, &pb,
				   KVX_ENG_RINGS_CORE | KVX_ENG_RINGS_REARM);
	assert_true(rings_session(&A)->evq[k]->ring.oneshot);
	for (int i = 0; i < 3; i++) {
		assert_int_equal(reng_room_open(&ra, id[i], pa, 4), 0);
		PUMP_UNTIL(prefill_known(id[i]));
	}
	reng_read(&ra); /* the rooms' WAITING_FOR_INPUT */
	kvx_shring_wake_drain(ra.evt_wake);
	kvx_shring_park_prepare(&ra.cevt[k]);
	w0 = atomic_load(&c->st.engine_wakes);

	eng_chunk(&eb, id[0], pb, 4, 0);
	reng_pump_until_event(&ra, id[0], KVX_STATE_SUCCESS);
	assert_int_equal(atomic_load(&c->st.engine_wakes), w0 + 1);
	assert_int_equal(wake_bytes(ra.evt_wake), 1);

	eng_chunk(&eb, id[1], pb, 4, 0); /* the engine reads, but does not park again */
	reng_pump_until_event(&ra, id[1], KVX_STATE_SUCCESS);
	assert_int_equal(reng_count(&ra, id[1], KVX_STATE_SUCCESS, k), 1);
	assert_int_equal(atomic_load(&c->st.engine_wakes), w0 + 1);
	assert_int_equal(wake_bytes(ra.evt_wake), 1);

	assert_int_equal(kvx_shring_wake_drain(ra.evt_wake), 0);
	kvx_shring_park_prepare(&ra.cevt[k]); /* drained: parked again */
	eng_chunk(&eb, id[2], pb, 4, 0);
	reng_pump_until_event(&ra, id[2], KVX_STATE_SUCCESS);
	assert_int_equal(reng_count(&ra, id[2], KVX_STATE_SUCCESS, k), 1);
	assert_int_equal(atomic_load(&c->st.engine_wakes), w0 + 2);
	assert_int_equal(wake_bytes(ra.evt_wake), 1);
	assert_int_equal(A.ctr.engine_bad, 0);
	reng_close(&ra);
	eng_close(&eb);
}

/* Prefill side of the core rings: b's engine on rings with core rings, a's on its socket. */
static void
pair_with_prefill_core_rings(struct eng *ea, struct reng *rb, int *pa, int *pb)
{
	pair_ring_and_socket(&B, rb, pb, ea, pa);
}

/* b's engine on rings puts up to n chunks of room id (pages 0 and 1, not its last) into its
 * ring while b's control core alone runs (its polling core does not): returns how many went. */
static int
flood_unpolled(struct reng *rb, uint64_t id, int pb, int n)
{
	uint64_t buf[CHUNK_BUF_WORDS];
	size_t len = chunk_msg(buf, id, 0, pb, 0, 2, 0, 0, 0, 0, false);
	int sent = 0;

	for (int i = 0; i < n && reng_send(rb, KVX_ENG_CHUNK, buf, len); i++) {
		sent++;
		if (i % 64 == 0)
			kvxd_loop_once(&B, 0);
	}
	for (int i = 0; i < 200; i++)
		kvxd_loop_once(&B, 0);
	return sent;
}

/* Chunks through a submission ring are never refused for a full inbox: while b's polling core
 * does not run, its inbox (4096 messages) fills to its headroom and the rest of the engine's
 * chunks wait in its ring; once the core runs they go in, and the room is whole.  Before, the
 * chunk that found the inbox full was refused and failed its room, whichever engine's flood
 * had filled it. */
static void
test_full_inbox_holds_the_rings(void **state)
{
	static struct reng rb;
	uint64_t buf[CHUNK_BUF_WORDS];
	struct eng ea;
	int pa, pb, sent = 0;
	size_t len;

	(void)state;
	pair_with_prefill_core_rings(&ea, &rb, &pa, &pb);
	assert_int_equal(eng_room_open(&ea, 560, pa, 4, NULL), 0);
	PUMP_UNTIL(prefill_known(560));
	sent = flood_unpolled(&rb, 560, pb, 6000);
	assert_true(sent > 4096);
	assert_int_equal(B.ctr.chunks_refused, 0);
	assert_true(B.ctr.engine_ring_holds > 0);
	assert_false(kvx_shring_empty(&rings_session(&B)->sub)); /* the rest waits there */
	len = chunk_msg(buf, 560, 0, pb, 2, 2, 2, 0, 0, 0, true);
	assert_true(reng_send(&rb, KVX_ENG_CHUNK, buf, len) != 0);
	PUMP_UNTIL(eng_event(&ea, 560, KVX_STATE_SUCCESS));
	assert_int_equal(B.ctr.chunks_refused, 0);
	eng_close(&ea);
	reng_close(&rb);
}

/* A ring engine that goes while its ring is held (a core's inbox nearly full) has what it put
 * there taken at once, its chunks kept in order in the core's overflow list: none is refused,
 * and a room whose last chunk it submitted completes after it went. */
static void
test_held_ring_of_a_gone_engine_is_kept(void **state)
{
	static struct reng rb;
	uint64_t buf[CHUNK_BUF_WORDS];
	struct eng ea;
	int pa, pb;
	size_t len;

	(void)state;
	pair_with_prefill_core_rings(&ea, &rb, &pa, &pb);
	assert_int_equal(eng_room_open(&ea, 561, pa, 4, NULL), 0);
	PUMP_UNTIL(prefill_known(561));
	assert_int_equal(flood_unpolled(&rb, 561, pb, 4400), 4400);
	assert_true(B.ctr.engine_ring_holds > 0);
	len = chunk_msg(buf, 561, 0, pb, 2, 2, 2, 0, 0, 0, true);
	assert_true(reng_send(&rb, KVX_ENG_CHUNK, buf, len) != 0);
	reng_close(&rb); /* everything submitted, the engine exits */
	for (int i = 0; i < 5; i++)
		kvxd_loop_once(&B, 0);
	PUMP_UNTIL(eng_event(&ea, 561, KVX_STATE_SUCCESS) || eng_event(&ea, 561, KVX_STATE_FAILED));
	assert_non_null(eng_event(&ea, 561, KVX_STATE_SUCCESS));
	assert_int_equal(B.ctr.chunks_refused, 0);
	eng_close(&ea);
}

/* rb puts 4,400 of the chunk in buf into its ring, b's control core running now and then and
 * its polling core not at all: the inbox fills past its headroom, the rest waits in the ring. */
static void
ring_flood_unpolled(struct reng *rb, void *buf, size_t len)
{
	for (int i = 0; i < 4400; i++) {
		while (!reng_send(rb, KVX_ENG_CHUNK, buf, len))
			kvxd_loop_once(&B, 0);
		if (i % 64 == 0)
			kvxd_loop_once(&B, 0);
	}
	for (int i = 0; i < 20; i++)
		kvxd_loop_once(&B, 0);
	assert_true(B.ctr.engine_ring_holds > 0);
}

/* While the rings are held, the room the core frees goes to each session in turn: a second
 * engine's chunks are taken while the first one's flood still waits, not after all of it. */
static void
test_held_rings_take_turns(void **state)
{
	static struct reng rb, rb2;
	uint64_t buf[CHUNK_BUF_WORDS], b2[CHUNK_BUF_WORDS];
	struct kvxd_engine *e1 = NULL, *e2 = NULL;
	struct eng ea;
	int pa, pb, pb2;
	size_t len, len2;

	(void)state;
	pair_with_prefill_core_rings(&ea, &rb, &pa, &pb);
	reng_open_with(&rb2, &B, KVX_ENG_RINGS_CORE, &pb2);
	for (int i = 0; i < B.engines_end; i++)
		if (B.engines[i] && B.engines[i]->rings) {
			e1 = e2 ? e2 : B.engines[i];
			e2 = B.engines[i]; /* the last one: rb2's */
		}
	assert_ptr_not_equal(e1, e2);
	assert_int_equal(eng_room_open(&ea, 562, pa, 4, NULL), 0);
	assert_int_equal(eng_room_open(&ea, 563, pa, 4, NULL), 0);
	PUMP_UNTIL(prefill_known(562) && prefill_known(563));
	len = chunk_msg(buf, 562, 0, pb, 0, 2, 0, 0, 0, 0, false);
	len2 = chunk_msg(b2, 563, 0, pb2, 0, 2, 0, 0, 0, 0, false);
	ring_flood_unpolled(&rb, buf, len); /* the first engine's */
	for (int i = 0; i < 100; i++)
		assert_true(reng_send(&rb2, KVX_ENG_CHUNK, b2, len2) != 0);
	assert_true(kvx_shring_empty(&e2->sub) == false);
	/* b's core runs again: the second engine's 100 are taken while the first engine's
	 * backlog still waits, not after it */
	for (int it = 0; it < 3000 && !kvx_shring_empty(&e2->sub); it++) {
		node_poll_cores(&B);
		kvxd_loop_once(&B, 0);
	}
	assert_true(kvx_shring_empty(&e2->sub));
	assert_false(kvx_shring_empty(&e1->sub));
	assert_int_equal(B.ctr.chunks_refused, 0);
	/* both rooms end whole before the engines go */
	len = chunk_msg(buf, 562, 0, pb, 2, 2, 2, 0, 0, 0, true);
	len2 = chunk_msg(b2, 563, 0, pb2, 2, 2, 2, 0, 0, 0, true);
	while (!reng_send(&rb, KVX_ENG_CHUNK, buf, len))
		pump_once();
	assert_true(reng_send(&rb2, KVX_ENG_CHUNK, b2, len2) != 0);
	PUMP_UNTIL(eng_event(&ea, 562, KVX_STATE_SUCCESS) &&
		   eng_event(&ea, 563, KVX_STATE_SUCCESS));
	eng_close(&ea);
	reng_close(&rb);
	reng_close(&rb2);
}

/* Whether the session's socket holds a message kvxd has not read (peeked on kvxd's end). */
static bool
socket_unread(const struct kvxd_engine *s)
{
	char c;

	return recv(s->fd, &c, 1, MSG_PEEK | MSG_DONTWAIT) >= 0;
}

/* The turn tests' engines on b: rb on rings (pool *pb) and eb2 on its socket (pool *pb2), ea on
 * a's socket (pool *pa) with decode rooms id (rb's) and id2 (eb2's) open. */
static void
turn_engines(struct eng *ea, struct reng *rb, struct eng *eb2, int p[3], uint64_t id, uint64_t id2)
{
	pair_with_prefill_core_rings(ea, rb, &p[0], &p[1]);
	eng_connect(eb2, &B);
	assert_int_equal(eng_hello(eb2, NULL), 0);
	p[2] = eng_pool_id(eb2, 256, 16, 1);
	assert_true(p[2] > 0);
	assert_int_equal(eng_room_open(ea, id, p[0], 4, NULL), 0);
	assert_int_equal(eng_room_open(ea, id2, p[0], 4, NULL), 0);
	PUMP_UNTIL(prefill_known(id) && prefill_known(id2));
}

/* Both rooms end whole (their last chunks, waiting for room in the ring or the socket), none of
 * b's chunks was refused, and the engines go. */
static void
turn_engines_done(struct eng *ea, struct reng *rb, struct eng *eb2, const int p[3], uint64_t id,
		  uint64_t id2)
{
	uint64_t buf[CHUNK_BUF_WORDS], b2[CHUNK_BUF_WORDS];
	size_t len = chunk_msg(buf, id, 0, p[1], 2, 2, 2, 0, 0, 0, true);
	size_t len2 = chunk_msg(b2, id2, 0, p[2], 2, 2, 2, 0, 0, 0, true);

	while (!reng_send(rb, KVX_ENG_CHUNK, buf, len))
		pump_once();
	for (int i = 0; i < 20000 && !eng_send(eb2, KVX_ENG_CHUNK, b2, len2, -1); i++) {
		pump_once();
		assert_true(i < 19999);
	}
	PUMP_UNTIL(eng_event(ea, id, KVX_STATE_SUCCESS) && eng_event(ea, id2, KVX_STATE_SUCCESS));
	assert_int_equal(B.ctr.chunks_refused, 0);
	eng_close(ea);
	eng_close(eb2);
	reng_close(rb);
}

/* A held socket and held rings take turns at the room the cores free: a socket engine's chunks
 * are read while a ring engine's flood still waits, not after all of it.  Before, the rings took
 * that room at the start of each loop pass, before the held sockets were looked at, and a
 * socket waited as long as any ring's flood lasted (its engine's sends until its own timeout). */
static void
test_held_socket_takes_turns_with_rings(void **state)
{
	static struct reng rb;
	uint64_t buf[CHUNK_BUF_WORDS], b2[CHUNK_BUF_WORDS];
	struct kvxd_engine *ring, *sock;
	struct eng ea, eb2;
	int p[3];
	size_t len, len2;

	(void)state;
	turn_engines(&ea, &rb, &eb2, p, 564, 565);
	ring = rings_session(&B);
	sock = socket_session();
	len = chunk_msg(buf, 564, 0, p[1], 0, 2, 0, 0, 0, 0, false);
	len2 = chunk_msg(b2, 565, 0, p[2], 0, 2, 0, 0, 0, 0, false);
	ring_flood_unpolled(&rb, buf, len);
	for (int i = 0; i < 100; i++)
		assert_true(eng_send(&eb2, KVX_ENG_CHUNK, b2, len2, -1) != 0);
	for (int i = 0; i < 5; i++)
		kvxd_loop_once(&B, 0);
	assert_true(sock->sock_held);
	assert_true(socket_unread(sock));
	/* b's core runs again: the socket's 100 are read while the ring's backlog still waits */
	for (int it = 0; it < 3000 && socket_unread(sock); it++) {
		node_poll_cores(&B);
		kvxd_loop_once(&B, 0);
	}
	assert_false(socket_unread(sock));
	assert_false(kvx_shring_empty(&ring->sub));
	assert_int_equal(B.ctr.chunks_refused, 0);
	turn_engines_done(&ea, &rb, &eb2, p, 564, 565);
}

/* The other way: a socket engine's flood, held, does not keep the room the cores free from a
 * ring engine: the ring's chunks are taken while the socket still holds unread ones. */
static void
test_rings_take_turns_with_a_held_socket(void **state)
{
	static struct reng rb;
	uint64_t buf[CHUNK_BUF_WORDS];
	struct kvxd_engine *ring, *sock;
	struct eng ea, eb2;
	int p[3];
	size_t len;

	(void)state;
	turn_engines(&ea, &rb, &eb2, p, 566, 567);
	ring = rings_session(&B);
	sock = socket_session();
	/* more than the inbox holds: the rest waits in the socket */
	assert_true(flood_socket_unpolled(&eb2, 567, p[2], false) > 4096);
	assert_true(sock->sock_held);
	len = chunk_msg(buf, 566, 0, p[1], 0, 2, 0, 0, 0, 0, false);
	for (int i = 0; i < 100; i++)
		assert_true(reng_send(&rb, KVX_ENG_CHUNK, buf, len) != 0);
	for (int i = 0; i < 5; i++)
		kvxd_loop_once(&B, 0);
	assert_false(kvx_shring_empty(&ring->sub));
	/* b's core runs again: the ring's 100 are taken while the socket's backlog still waits */
	for (int it = 0; it < 3000 && !kvx_shring_empty(&ring->sub); it++) {
		node_poll_cores(&B);
		kvxd_loop_once(&B, 0);
	}
	assert_true(kvx_shring_empty(&ring->sub));
	assert_true(socket_unread(sock));
	assert_int_equal(B.ctr.chunks_refused, 0);
	turn_engines_done(&ea, &rb, &eb2, p, 566, 567);
}

/* The reply to request seq comes within 20 passes of b's control core alone (its polling core
 * does not run), and says 0. */
static void
reply_from_b_alone(struct eng *e, uint64_t seq, struct eng_reply *rep)
{
	int got = 0;

	for (int i = 0; i < 20 && got == 0; i++) {
		kvxd_loop_once(&B, 0);
		got = eng_read(e, seq, rep);
	}
	assert_int_equal(got, 1);
	assert_int_equal(rep->status, 0);
}

/* Requests that send the polling cores nothing do not wait for them: while b's core does not
 * run and a ring engine's flood holds its inbox at the headroom, a new engine's HELLO, an
 * operator command and a pool registration (its memfd intact) on a socket are answered, and so
 * is an operator command through another engine's ring.  Chunks still wait (the flood's rest
 * stays in its ring, the new engine's chunk in its socket), and so does what an engine sent
 * after one of them: its operator command is answered only once the cores caught up.  Before,
 * every request waited: on a kvxd whose polling core is stuck, kvxctl could not even connect. */
static void
test_requests_for_no_core_do_not_wait_for_the_cores(void **state)
{
	static struct reng rb, rb2;
	static struct eng_reply rep;
	uint64_t buf[(sizeof(struct kvx_eng_admin) + 64) / 8], cbuf[CHUNK_BUF_WORDS], seq, behind;
	struct kvx_eng_hello hello = {.version = KVX_ENG_VERSION};
	struct kvx_eng_pool_reg reg = {.geom = {256, 16, 1}};
	struct kvxd_engine *ring;
	struct eng ea, ec;
	int pa, pb, pb2, pc, got, fd;
	size_t len;

	(void)state;
	pair_with_prefill_core_rings(&ea, &rb, &pa, &pb);
	ring = rings_session(&B); /* rb's */
	reng_open_with(&rb2, &B, KVX_ENG_RINGS_CORE, &pb2);
	assert_int_equal(eng_room_open(&ea, 568, pa, 4, NULL), 0);
	assert_int_equal(eng_room_open(&ea, 569, pa, 4, NULL), 0);
	PUMP_UNTIL(prefill_known(568) && prefill_known(569));
	assert_int_equal(flood_unpolled(&rb, 568, pb, 4400), 4400);
	assert_true(B.ctr.engine_ring_holds > 0);
	assert_false(kvx_shring_empty(&ring->sub));
	/* a new engine on the socket: HELLO, then an operator command, b's core still stopped */
	eng_connect(&ec, &B);
	seq = eng_send(&ec, KVX_ENG_HELLO, &hello, sizeof(hello), -1);
	assert_true(seq != 0);
	reply_from_b_alone(&ec, seq, &rep);
	seq = eng_admin_send(&ec, "counters");
	assert_true(seq != 0);
	reply_from_b_alone(&ec, seq, &rep);
	assert_non_null(strstr(rep.text, "kvx_engine_ring_holds_total"));
	/* a pool: its memfd survives the look at the request and reaches the registration */
	fd = memfd_sized(256 * 16);
	seq = eng_send(&ec, KVX_ENG_POOL_REG, &reg, sizeof(reg), fd);
	close(fd);
	assert_true(seq != 0);
	reply_from_b_alone(&ec, seq, &rep);
	pc = (int)rep.value;
	assert_true(pc > 0);
	/* in order: an operator command behind the engine's chunk waits with it */
	len = chunk_msg(cbuf, 569, 0, pc, 0, 4, 0, 0, 0, 0, true);
	assert_true(eng_send(&ec, KVX_ENG_CHUNK, cbuf, len, -1) != 0);
	behind = eng_admin_send(&ec, "counters");
	assert_true(behind != 0);
	for (int i = 0; i < 20; i++) {
		kvxd_loop_once(&B, 0);
		assert_int_equal(eng_read(&ec, behind, &rep), 0);
	}
	assert_true(socket_session()->sock_held);
	/* an operator command through the other engine's ring */
	memcpy((uint8_t *)buf + sizeof(struct kvx_eng_admin), "counters", 8);
	seq = reng_send(&rb2, KVX_ENG_ADMIN, buf, sizeof(struct kvx_eng_admin) + 8);
	assert_true(seq != 0);
	got = 0;
	for (int i = 0; i < 20 && !got; i++) {
		kvxd_loop_once(&B, 0);
		reng_read(&rb2);
		for (int k = 0; k < rb2.ngot; k++)
			got |= rb2.got_seq[k] == seq && rb2.got_status[k] == 0;
	}
	assert_true(got);
	assert_false(kvx_shring_empty(&ring->sub)); /* the chunks still wait */
	assert_int_equal(B.ctr.chunks_refused, 0);
	len = chunk_msg(cbuf, 568, 0, pb, 2, 2, 2, 0, 0, 0, true);
	while (!reng_send(&rb, KVX_ENG_CHUNK, cbuf, len))
		pump_once();
	PUMP_UNTIL(eng_event(&ea, 568, KVX_STATE_SUCCESS) || eng_event(&ea, 568, KVX_STATE_FAILED));
	assert_non_null(eng_event(&ea, 568, KVX_STATE_SUCCESS));
	/* the cores caught up: the command is answered, after the chunk (its room is whole) */
	got = 0;
	for (int i = 0; i < MAX_STEPS && got == 0; i++) {
		pump_once();
		got = eng_read(&ec, behind, &rep);
	}
	assert_int_equal(got, 1);
	PUMP_UNTIL(eng_event(&ea, 569, KVX_STATE_SUCCESS) || eng_event(&ea, 569, KVX_STATE_FAILED));
	assert_non_null(eng_event(&ea, 569, KVX_STATE_SUCCESS));
	assert_int_equal(B.ctr.chunks_refused, 0);
	eng_close(&ec);
	eng_close(&ea);
	reng_close(&rb);
	reng_close(&rb2);
}

/* Prefill: one (last) chunk of room id, source pages 0..n-1, through the submission ring. */
static void
reng_chunk(struct reng *r, uint64_t id, int pool, uint32_t n)
{
	uint64_t buf[CHUNK_BUF_WORDS];
	size_t len = chunk_msg(buf, id, 0, pool, 0, n, 0, 0, 0, 0, true);

	assert_true(reng_send(r, KVX_ENG_CHUNK, buf, len) != 0);
}

/* The room's events in the order the engine read them: no state after its end, none twice,
 * states in the order of the room's state machine. */
static void
assert_events_in_order(const struct reng *r, uint64_t id, int end)
{
	int last = -1, seen_end = 0;

	for (int i = 0; i < r->nev; i++) {
		if (r->ev[i].room != id)
			continue;
		assert_false(seen_end);
		assert_true((int)r->ev[i].state > last);
		last = r->ev[i].state;
		seen_end = last == end;
	}
	assert_true(seen_end);
}

/* The room's SUCCESS came out of core ring k once, after the room's other states in order, and
 * nothing the engine sent was refused as malformed. */
static void
assert_success_told_in_order(struct reng *r, uint64_t id, int k)
{
	assert_int_equal(reng_count(r, id, KVX_STATE_SUCCESS, k), 1);
	assert_events_in_order(r, id, KVX_STATE_SUCCESS);
	assert_int_equal(A.ctr.engine_bad, 0);
}

/* KVX_ENG_RINGS_WAKE_ENDS: a decode room's WAITING_FOR_INPUT goes into the engine's core ring
 * without waking it, its SUCCESS wakes it once, and the engine reads both, in order (mutant
 * core_wake_ends_ignored: the polling core woke it for the state on the way too).  The flag is
 * taken with the others (KVX_ENG_RINGS_REARM off here: one byte per wake-up). */
static void
test_core_ring_wake_ends(void **state)
{
	static struct reng ra;
	const uint64_t id = 760;
	const int k = (int)(id % A.ncores);
	struct kvxd_core *c = &A.cores[k];
	uint64_t w0 = atomic_load(&c->st.engine_wakes);
	struct eng eb;
	int pa, pb;

	(void)state;
	pair_ring_and_socket_flags(&A, &ra, &pa, &eb, &pb,
				   KVX_ENG_RINGS_CORE | KVX_ENG_RINGS_WAKE_ENDS);
	assert_true(rings_session(&A)->wake_ends);
	assert_true(rings_session(&A)->evq[k]->wake_ends);
	assert_int_equal(reng_room_open(&ra, id, pa, 4), 0);
	PUMP_UNTIL(prefill_known(id));
	assert_int_equal(reng_count(&ra, id, KVX_STATE_WAITING_FOR_INPUT, k), 1);
	assert_int_equal(atomic_load(&c->st.engine_wakes), w0); /* in the ring, nobody woken */
	kvx_shring_wake_drain(ra.evt_wake);			/* the open's reply */

	eng_chunk(&eb, id, pb, 4, 0);
	reng_pump_until_event(&ra, id, KVX_STATE_SUCCESS);
	assert_int_equal(atomic_load(&c->st.engine_wakes), w0 + 1);
	assert_int_equal(wake_bytes(ra.evt_wake), 1);
	assert_success_told_in_order(&ra, id, k);
	reng_close(&ra);
	eng_close(&eb);
}

/* The same through the control core's event ring (a session without core rings): the open's
 * reply wakes the engine, the room's WAITING_FOR_INPUT, put in a later iteration, does not, its
 * SUCCESS does (mutant ctl_wake_ends_ignored: every EVENT woke it). */
static void
test_event_ring_wake_ends(void **state)
{
	static struct reng ra;
	const uint64_t id = 761;
	uint64_t w0, w1;
	struct eng eb;
	int pa, pb;

	(void)state;
	pair_ring_and_socket_flags(&A, &ra, &pa, &eb, &pb, KVX_ENG_RINGS_WAKE_ENDS);
	w0 = A.ctr.engine_ring_wakes;
	assert_int_equal(reng_room_open(&ra, id, pa, 4), 0);
	w1 = A.ctr.engine_ring_wakes;
	assert_int_equal(w1 - w0, 1); /* the reply */
	PUMP_UNTIL(prefill_known(id));
	assert_int_equal(reng_count(&ra, id, KVX_STATE_WAITING_FOR_INPUT, -1), 1);
	assert_int_equal(A.ctr.engine_ring_wakes, w1);
	kvx_shring_wake_drain(ra.evt_wake);

	eng_chunk(&eb, id, pb, 4, 0);
	reng_pump_until_event(&ra, id, KVX_STATE_SUCCESS);
	assert_int_equal(A.ctr.engine_ring_wakes, w1 + 1);
	assert_int_equal(wake_bytes(ra.evt_wake), 1);
	assert_events_in_order(&ra, id, KVX_STATE_SUCCESS);
	reng_close(&ra);
	eng_close(&eb);
}

/* Every polling core of both nodes steps except a's core k (parked, as in its poll), and both
 * control cores. */
static void
step_all_but_a_core(int k)
{
	for (int i = 0; i < nnodes; i++)
		for (int c = 0; c < N[i].ncores; c++)
			if (&N[i] != &A || c != k)
				kvx_pcore_poll_once(&N[i].cores[c]);
	for (int i = 0; i < nnodes; i++)
		kvxd_loop_once(&N[i], 0);
}

/* A decode room opened by an engine woken only for its rooms' ends (KVX_ENG_RINGS_WAKE_ENDS)
 * does not wake its parked polling core: the open waits in the core's inbox for the core's next
 * wake-up (mutant open_loud: it woke the core, one wake-up more per room).  Here that wake-up
 * is the room's delivery, which the core takes before its inbox: the room's WAITING_FOR_INPUT
 * still comes before its SUCCESS, as the engine would have read them (mutant
 * imm_skips_waiting: SUCCESS alone). */
static void
test_wake_ends_open_wakes_no_polling_core(void **state)
{
	static struct reng ra;
	const uint64_t id = 762;
	const int k = (int)(id % A.ncores);
	struct kvxd_core *c = &A.cores[k];
	uint64_t buf[ROOM_OPEN_BUF_WORDS], seq, wakes, imm0;
	struct kvxd_room *pr = NULL;
	struct eng eb;
	int pa, pb;

	(void)state;
	pair_ring_and_socket_flags(&A, &ra, &pa, &eb, &pb,
				   KVX_ENG_RINGS_CORE | KVX_ENG_RINGS_WAKE_ENDS);
	kvx_mbox_park_prepare(c->inbox); /* the polling core parks */
	wakes = kvx_mbox_wakes(c->inbox);
	imm0 = atomic_load(&c->st.recv_imm);
	seq = reng_send(&ra, KVX_ENG_ROOM_OPEN, buf, room_open_msg(buf, id, pa, 4));
	assert_true(seq != 0);
	eng_chunk(&eb, id, pb, 4, 0);
	/* the room's whole transfer, a's core k never stepping: prefill's WRITE completed */
	for (int step = 0; step < MAX_STEPS; step++) {
		step_all_but_a_core(k);
		pr = kvxd_room_find(&B, id, 0, KVX_ROOM_PREFILL);
		if (pr && kvxd_room_state(pr) == KVX_ROOM_SUCCESS)
			break;
	}
	assert_non_null(pr);
	assert_int_equal(kvxd_room_state(pr), KVX_ROOM_SUCCESS);
	assert_int_equal(kvx_mbox_wakes(c->inbox), wakes); /* the open did not wake it */
	assert_false(kvx_mbox_empty(c->inbox));		   /* it waits there */
	assert_int_equal(atomic_load(&c->st.recv_imm), imm0);
	kvx_mbox_park_done(c->inbox, false);
	kvx_pcore_poll_once(c); /* its wake-up: the delivery's completion, then the inbox */
	assert_int_equal(atomic_load(&c->st.recv_imm), imm0 + 1);
	reng_pump_until_event(&ra, id, KVX_STATE_SUCCESS);
	assert_int_equal(reng_count(&ra, id, KVX_STATE_WAITING_FOR_INPUT, k), 1);
	assert_success_told_in_order(&ra, id, k);
	reng_close(&ra);
	eng_close(&eb);
}

/* An engine woken for every state still has its decode room's open wake the room's parked
 * polling core, which puts the room's WAITING_FOR_INPUT at once (mutant open_quiet_all: every
 * open is put quietly, and that state waits for the core's next wake-up). */
static void
test_open_wakes_the_polling_core(void **state)
{
	static struct reng ra;
	const uint64_t id = 763;
	const int k = (int)(id % A.ncores);
	struct kvxd_core *c = &A.cores[k];
	uint64_t buf[ROOM_OPEN_BUF_WORDS], wakes;
	struct eng eb;
	int pa, pb;

	(void)state;
	pair_ring_and_socket_flags(&A, &ra, &pa, &eb, &pb, KVX_ENG_RINGS_CORE);
	kvx_mbox_park_prepare(c->inbox);
	wakes = kvx_mbox_wakes(c->inbox);
	assert_true(reng_send(&ra, KVX_ENG_ROOM_OPEN, buf, room_open_msg(buf, id, pa, 4)) != 0);
	for (int step = 0; step < MAX_STEPS && kvx_mbox_empty(c->inbox); step++)
		step_all_but_a_core(k);
	assert_false(kvx_mbox_empty(c->inbox));
	assert_int_equal(kvx_mbox_wakes(c->inbox), wakes + 1);
	kvx_mbox_park_done(c->inbox, true);
	reng_pump_until_event(&ra, id, KVX_STATE_WAITING_FOR_INPUT);
	reng_close(&ra);
	eng_close(&eb);
}

/* A prefill room whose engine claimed it (its first chunk) before its ROOM_META came: its events
 * come out of its core's ring too, in order, and its SUCCESS is told once (mutant
 * prefill_core_ring_off: a prefill room's events all go through the control core, as before).
 * That an event its engine heard from the core ring does not wake the control core is the same
 * code for both roles (test_core_ring_success_wakes_no_control_core). */
static void
test_core_ring_tells_prefill_events(void **state)
{
	static struct reng rb;
	struct kvxd_room *r;
	struct eng ea;
	int pa, pb;

	(void)state;
	pair_with_prefill_core_rings(&ea, &rb, &pa, &pb);
	reng_chunk(&rb, 730, pb, 4);
	PUMP_UNTIL((r = kvxd_room_find(&B, 730, 0, KVX_ROOM_PREFILL)) && r->engine_id >= 0);
	assert_int_equal(eng_room_open(&ea, 730, pa, 4, NULL), 0);
	reng_pump_until_event(&rb, 730, KVX_STATE_SUCCESS);
	for (int i = 0; i < 20; i++)
		pump_once();
	reng_read(&rb);
	assert_int_equal(reng_count(&rb, 730, KVX_STATE_SUCCESS, (int)(730 % B.ncores)), 1);
	for (int i = 0; i < rb.nev; i++) /* nothing through the event ring */
		assert_false(rb.ev[i].room == 730 && rb.ev_ring[i] == -1);
	assert_int_equal(reng_count(&rb, 730, KVX_STATE_SUCCESS, -2), 1);
	assert_events_in_order(&rb, 730, KVX_STATE_SUCCESS);
	assert_true(B.ctr.events_core >= 2); /* WAITING_FOR_INPUT, TRANSFERRING, SUCCESS */
	assert_int_equal(B.ctr.events_duplicate, 0);
	reng_close(&rb);
	eng_close(&ea);
}

/* Drive the transfer of prefill room r (on B, fed by A's decode room) to SUCCESS: b's core
 * posts, a's core sees the write land, b's core its completion. */
static void
transfer_to_success(struct kvxd_room *r)
{
	for (int step = 0; step < MAX_STEPS && kvxd_room_state(r) != KVX_ROOM_SUCCESS; step++) {
		for (int i = 0; i < nnodes; i++)
			for (int k = 0; k < N[i].ncores; k++)
				kvx_pcore_poll_once(&N[i].cores[k]);
		kvxd_loop_once(&A, 0);
	}
	assert_int_equal(kvxd_room_state(r), KVX_ROOM_SUCCESS);
}

/* Prefill room id, fed by A's decode room, whose ROOM_META comes before its engine's chunk: b's
 * core puts WAITING_FOR_INPUT for nobody, and the engine's chunk claims the room before
 * (claim_first) or after b's control core took that event.  Either way the room's later events
 * take the engine's core ring, and the engine reads SUCCESS once, from it, and no
 * WAITING_FOR_INPUT (which, taken after the claim, could only come behind them: counted in
 * events_before_claim). */
static void
prefill_meta_first(uint64_t id, bool claim_first)
{
	static struct reng rb;
	struct kvxd_core *c = &B.cores[id % B.ncores];
	uint64_t before = B.ctr.events_before_claim;
	struct kvxd_room *r;
	struct eng ea;
	int pa, pb;

	pair_with_prefill_core_rings(&ea, &rb, &pa, &pb);
	assert_int_equal(eng_room_open(&ea, id, pa, 4, NULL), 0);
	if (claim_first) {
		/* the ROOM_META to b's core, which puts WAITING_FOR_INPUT into its outbox: b's
		 * control core does not take it yet */
		PUMP_UNTIL((r = kvxd_room_find(&B, id, 0, KVX_ROOM_PREFILL)) &&
			   !kvx_mbox_empty(c->inbox));
		kvx_pcore_poll_once(c);
		assert_int_equal(kvxd_room_state(r), KVX_ROOM_WAITING_FOR_INPUT);
		assert_false(kvx_mbox_empty(c->outbox));
	} else {
		PUMP_UNTIL((r = kvxd_room_find(&B, id, 0, KVX_ROOM_PREFILL)) &&
			   kvxd_room_state(r) == KVX_ROOM_WAITING_FOR_INPUT);
		for (int i = 0; i < 20; i++) /* the control core takes it: nobody's */
			pump_once();
	}
	assert_true(r->engine_id < 0);
	/* the engine's chunk attaches the room */
	reng_chunk(&rb, id, pb, 4);
	kvxd_engine_rings_poll(&B);
	assert_true(r->engine_id >= 0);
	if (claim_first) {
		/* b's control core takes that state now, after the claim and before the room's
		 * end */
		kvxd_loop_once(&B, 0);
		assert_true(kvx_mbox_empty(c->outbox));
	}
	transfer_to_success(r);
	reng_read(&rb); /* what the core rings hold comes first */
	reng_pump_until_event(&rb, id, KVX_STATE_SUCCESS);
	assert_int_equal(reng_count(&rb, id, KVX_STATE_WAITING_FOR_INPUT, -2), 0);
	assert_int_equal(reng_count(&rb, id, KVX_STATE_SUCCESS, -2), 1);
	assert_int_equal(reng_count(&rb, id, KVX_STATE_SUCCESS, -1), 0); /* a core ring's */
	assert_int_equal(B.ctr.events_before_claim - before, claim_first ? 1 : 0);
	assert_events_in_order(&rb, id, KVX_STATE_SUCCESS);
	reng_close(&rb);
	eng_close(&ea);
}

/* The engine claims the room before its control core took the state its core put for nobody
 * (mutant nobody_state_told_late: the control core hands that WAITING_FOR_INPUT to the engine,
 * through the event ring, which the engine reads after its core rings: behind any later state
 * there). */
static void
test_core_ring_prefill_meta_first_keeps_order(void **state)
{
	(void)state;
	prefill_meta_first(731, true);
}

/* The common order in serving: decode's ROOM_META reaches prefill, and the control core takes its
 * room's first state (nobody to tell), before prefill's engine submits the room's chunk (mutant
 * prefill_meta_first_spills: after an event put while the room had no ring, every later one went
 * through the control core, which the core woke for each). */
static void
test_core_ring_prefill_meta_first_takes_the_core_ring(void **state)
{
	(void)state;
	prefill_meta_first(733, false);
}

/* The same, when the room also failed before its engine's chunk came (its waiting timed out):
 * the engine's chunk is told the end (FAILED) at once, and the WAITING_FOR_INPUT its core put
 * before, which the control core takes only after that, is not handed to the engine after
 * the end; b's engine on rings with flags (core rings or not: without them, the control core
 * hands every state to the engine, and only the room's end keeps this one back).  Nor is it
 * counted in events_before_claim: the end held it back, not the claim (mutant
 * before_claim_counts_told). */
static void
prefill_state_before_the_end(uint64_t id, uint32_t flags)
{
	static struct reng rb;
	struct kvxd_core *c = &B.cores[id % B.ncores];
	uint64_t before = B.ctr.events_before_claim;
	struct kvxd_msg fail = {.type = KVXD_MSG_ROOM_FAIL, .error = -ETIMEDOUT};
	struct kvxd_room *r;
	struct eng ea;
	int pa, pb;

	pair_ring_and_socket_flags(&B, &rb, &pb, &ea, &pa, flags);
	assert_int_equal(eng_room_open(&ea, id, pa, 4, NULL), 0);
	PUMP_UNTIL((r = kvxd_room_find(&B, id, 0, KVX_ROOM_PREFILL)) && !kvx_mbox_empty(c->inbox));
	kvx_pcore_poll_once(c); /* WAITING_FOR_INPUT into the outbox */
	fail.room = &r->pc;
	snprintf(fail.reason, sizeof(fail.reason), "waited too long");
	assert_int_equal(kvx_pcore_send(c, &fail), 0);
	kvx_pcore_poll_once(c); /* FAILED into the outbox */
	assert_int_equal(kvxd_room_state(r), KVX_ROOM_FAILED);
	reng_chunk(&rb, id, pb, 4);
	kvxd_engine_rings_poll(&B); /* the chunk: the engine is told FAILED now */
	for (int i = 0; i < 20; i++)
		pump_once();
	reng_read(&rb);
	assert_int_equal(reng_count(&rb, id, KVX_STATE_FAILED, -2), 1);
	assert_events_in_order(&rb, id, KVX_STATE_FAILED);
	assert_int_equal(B.ctr.events_before_claim, before);
	reng_close(&rb);
	eng_close(&ea);
}

/* With core rings. */
static void
test_prefill_state_from_before_the_end_is_not_told_after_it(void **state)
{
	(void)state;
	prefill_state_before_the_end(732, KVX_ENG_RINGS_CORE);
}

/* Without core rings: the state is not told after the end (mutant stale_state_after_end: the
 * engine reads FAILED, then WAITING_FOR_INPUT). */
static void
test_prefill_state_from_before_the_end_without_core_rings(void **state)
{
	(void)state;
	prefill_state_before_the_end(734, 0);
}

/* A state on the way that its core spilled (the engine's core ring was full) and the control
 * core has not taken yet, when the room ended and the engine was told the end by another path
 * (its next chunk, kvxd_room_tell): the spilled state is never handed to the engine after the
 * end (mutant spill_after_end: the engine reads FAILED, then TRANSFERRING). */
static void
test_spilled_state_is_not_told_after_the_end(void **state)
{
	static struct reng rb;
	struct kvx_eng_event filler = {.hdr = {.type = KVX_ENG_EVENT, .len = sizeof(filler)},
				       .ev = {.room = 1, .state = KVX_STATE_SUCCESS}};
	struct kvxd_core *c = &B.cores[733 % B.ncores];
	struct kvxd_msg fail = {.type = KVXD_MSG_ROOM_FAIL, .error = -ETIMEDOUT};
	struct kvx_pcore_evq *q;
	struct kvxd_room *r;
	struct eng ea;
	int pa, pb;

	(void)state;
	pair_with_prefill_core_rings(&ea, &rb, &pa, &pb);
	/* the engine's core ring on the room's core is full, and the engine does not read it */
	q = rings_session(&B)->evq[733 % B.ncores];
	assert_non_null(q);
	while (kvx_shring_put(&q->ring, &filler, sizeof(filler)) == 0)
		;
	rb.core_unread = true;
	/* its chunk claims the room before the ROOM_META comes */
	reng_chunk(&rb, 733, pb, 4);
	kvxd_engine_rings_poll(&B);
	assert_non_null(r = kvxd_room_find(&B, 733, 0, KVX_ROOM_PREFILL));
	assert_true(r->engine_id >= 0);
	kvx_pcore_poll_once(c);
	assert_int_equal(eng_room_open(&ea, 733, pa, 4, NULL), 0);
	PUMP_UNTIL(!kvx_mbox_empty(c->inbox) && !r->pc.fsm.state);
	/* the ROOM_META (a state on the way, spilled), then the room fails: both wait in the
	 * outbox */
	fail.room = &r->pc;
	snprintf(fail.reason, sizeof(fail.reason), "waited too long");
	assert_int_equal(kvx_pcore_send(c, &fail), 0);
	kvx_pcore_poll_once(c);
	assert_int_equal(kvxd_room_state(r), KVX_ROOM_FAILED);
	assert_true(atomic_load(&c->st.events_core_full) >= 1);
	/* another chunk: the engine is told FAILED now, before the outbox is drained */
	reng_chunk(&rb, 733, pb, 4);
	kvxd_engine_rings_poll(&B);
	for (int i = 0; i < 20; i++)
		pump_once();
	rb.core_unread = false;
	reng_read(&rb);
	assert_int_equal(reng_count(&rb, 733, KVX_STATE_FAILED, -2), 1);
	assert_events_in_order(&rb, 733, KVX_STATE_FAILED);
	reng_close(&rb);
	eng_close(&ea);
}

#define BURST 24 /* chunks of 1..16 pages: every size class up to 16 pages, several of each */

static uint64_t
chunk_allocs(const struct kvxd *d)
{
	return d->chunks.st.hits + d->chunks.st.misses + d->chunks.st.big;
}

/* b's engine submits BURST chunks to room id (the last one ends the room when last); the
 * nodes step until b took all of them and every one came back from its core. */
static void
chunk_burst(struct eng *eb, uint64_t id, int pool, bool last)
{
	uint64_t want = chunk_allocs(&B) + BURST;

	for (uint32_t i = 0; i < BURST; i++)
		eng_chunk_x(eb, id, pool, 1 + i % 16, 0, last && i == BURST - 1);
	for (int i = 0; i < MAX_STEPS && (chunk_allocs(&B) != want || B.chunks.st.live); i++)
		pump_once();
	assert_int_equal(chunk_allocs(&B), want);
	assert_int_equal(B.chunks.st.live, 0);
}

/* Once the chunk cache is warm, submitting chunks calls no malloc: N more chunks are N hits
 * and not one miss (nor a big chunk, nor a cached chunk given back to free()), as the counters
 * command shows too; and they did move (the room succeeds, nothing skipped). */
static void
test_chunks_warm_cache_no_malloc(void **state)
{
	struct eng ea, eb;
	struct kvx_slab_stats warm;
	int pa, pb;

	pair_with_engines(&ea, &eb, &pa, &pb);
	assert_int_equal(eng_room_open(&ea, 600, pa, 16, NULL), 0);
	PUMP_UNTIL(prefill_known(600));
	chunk_burst(&eb, 600, pb, false); /* warm-up */
	chunk_burst(&eb, 600, pb, false);
	warm = B.chunks.st;
	assert_true(warm.misses > 0);
	assert_int_equal(counter(&eb, "kvx_chunk_cache_misses_total{node=\"b\"}"),
			 (long long)warm.misses);
	for (int k = 0; k < 10; k++)
		chunk_burst(&eb, 600, pb, k == 9);
	assert_int_equal(B.chunks.st.misses, warm.misses); /* no malloc */
	assert_int_equal(B.chunks.st.big, warm.big);
	assert_int_equal(B.chunks.st.released, warm.released); /* no free() either */
	assert_int_equal(B.chunks.st.failed, 0);
	assert_int_equal(B.chunks.st.hits, warm.hits + 10 * BURST);
	assert_int_equal(B.chunks.st.cached_bytes, warm.cached_bytes);
	assert_int_equal(counter(&eb, "kvx_chunk_cache_misses_total{node=\"b\"}"),
			 (long long)warm.misses);
	assert_int_equal(counter(&eb, "kvx_chunk_cache_hits_total{node=\"b\"}"),
			 (long long)(warm.hits + 10 * BURST));
	assert_int_equal(counter(&eb, "kvx_chunks_live{node=\"b\"}"), 0);
	assert_true(counter(&eb, "kvx_chunk_cache_bytes{node=\"b\"}") > 0);
	for (int i = 0; i < MAX_STEPS && !eng_event(&ea, 600, KVX_STATE_SUCCESS); i++)
		pump_once();
	assert_non_null(eng_event(&ea, 600, KVX_STATE_SUCCESS));
	assert_int_equal(atomic_load(&B.cores[600 % B.ncores].st.chunks_skipped), 0);
	eng_close(&ea);
	eng_close(&eb);
}

/* kvxd stops (SIGTERM) while an engine still has rooms: the rooms are freed first
 * (kvxd_shutdown_release), then the engines closed; an engine's room list must not point at a
 * freed room (ASan reports the use after free). */
static void
test_shutdown_with_an_engine_holding_rooms(void **state)
{
	struct eng ea;
	int pa;

	assert_int_equal(listen_on(&A), 0);
	eng_connect(&ea, &A);
	assert_int_equal(eng_hello(&ea, NULL), 0);
	pa = eng_pool_id(&ea, 256, 16, 1);
	assert_int_equal(eng_room_open(&ea, 503, pa, 4, NULL), 0);
	assert_int_equal(eng_room_open(&ea, 504, pa, 4, NULL), 0);
	for (int i = 0; i < 10; i++)
		pump_once(); /* its core has seen the rooms: kvxd stops its cores first */
	kvxd_shutdown_release(&A);
	kvxd_engine_close_all(&A);
	assert_int_equal(live_engines(&A), 0);
	eng_close(&ea);
}

/* ---- room shapes (issue 10): ranks, regions, head slices, layer-wise chunks ---------------- */

/* Decode: the open of room id of nreg regions (pool[g], pages[g][0..npages[g])) from nsrc
 * sources, in buf; its length. */
static size_t
open_shape_msg(uint64_t buf[KVX_ENG_MSG_MAX / 8], uint64_t id, uint32_t nreg, const int *pool,
	       const uint32_t *npages, const uint32_t *const *pages, uint32_t nsrc,
	       const struct kvx_source *src)
{
	struct kvx_eng_room_open *m = (void *)buf;
	struct kvx_eng_region *rg = (void *)(m + 1);
	struct kvx_eng_source *es = (void *)(rg + nreg);
	uint32_t *pg = (uint32_t *)(es + nsrc);

	memset(buf, 0, KVX_ENG_MSG_MAX);
	m->room = id;
	m->nregions = nreg;
	m->nsources = nsrc;
	for (uint32_t g = 0; g < nreg; g++) {
		rg[g].pool_id = pool[g];
		rg[g].npages = npages[g];
		memcpy(pg, pages[g], 4 * (size_t)npages[g]);
		pg += npages[g];
	}
	for (uint32_t i = 0; i < nsrc; i++) {
		snprintf(es[i].name, sizeof(es[i].name), "%s", src[i].node);
		es[i].rank = src[i].rank;
		memcpy(es[i].slice, src[i].slice, sizeof(es[i].slice));
	}
	return (size_t)((uint8_t *)pg - (uint8_t *)m);
}

/* Decode: open room id of nreg regions (pool[g]'s pages[g][0 .. npages[g] - 1]) fed by nsrc
 * sources; the reply's status. */
static int
eng_open_shape(struct eng *e, uint64_t id, uint32_t nreg, const int *pool, const uint32_t *npages,
	       const uint32_t *const *pages, uint32_t nsrc, const struct kvx_source *src,
	       struct eng_reply *out)
{
	static uint64_t buf[KVX_ENG_MSG_MAX / 8];
	size_t len = open_shape_msg(buf, id, nreg, pool, npages, pages, nsrc, src);

	return eng_call(e, KVX_ENG_ROOM_OPEN, buf, len, -1, out);
}

/* Prefill: one chunk: source pages src0.. of pool, buffers [b0, b0 + nb), to region's
 * destination pages dst_offset.. */
static void
eng_chunk_shape(struct eng *e, uint64_t id, uint32_t region, int pool, uint32_t src0, uint32_t n,
		uint32_t dst_offset, uint32_t b0, uint32_t nb, bool last)
{
	eng_chunk_full(e, id, region, pool, src0, n, dst_offset, b0, nb, 0, last);
}

static struct kvxd_pool *
pool_by_id(struct kvxd *d, int id)
{
	for (int i = 0; i < KVXD_MAX_POOLS; i++)
		if (d->pools[i] && d->pools[i]->id == id)
			return d->pools[i];
	fail_msg("no pool %d", id);
	return NULL;
}

/* Byte i of page p of buffer b of a pool, as the tests fill it: distinct per pool tag. */
static uint8_t
pattern(uint8_t tag, uint32_t b, uint32_t p, uint32_t i)
{
	return (uint8_t)(tag * 31 + b * 7 + p * 13 + i);
}

static void
fill_pool(struct kvxd_pool *pool, uint8_t tag)
{
	for (uint32_t b = 0; b < pool->nbufs; b++)
		for (uint32_t p = 0; p < pool->npages; p++)
			for (uint32_t i = 0; i < pool->page_size; i++)
				pool->base[((uint64_t)b * pool->npages + p) * pool->page_size + i] =
					pattern(tag, b, p, i);
}

static uint8_t *
page_at(struct kvxd_pool *pool, uint32_t b, uint32_t p)
{
	return pool->base + ((uint64_t)b * pool->npages + p) * pool->page_size;
}

/* The last event about room id in state st (or NULL). */
static const struct kvx_event *
last_event(const struct eng *e, uint64_t id, int st)
{
	for (int i = e->nev - 1; i >= 0; i--)
		if (e->ev[i].room == id && e->ev[i].state == st)
			return &e->ev[i];
	return NULL;
}

/* Decode (ea) opens room id (pages 0..3 of pool pa), b's engine (eb) sends it whole from pool pb:
 * the room is a SUCCESS and its pages are the source's. */
static void
open_whole(struct eng *ea, struct eng *eb, int pa, int pb, uint64_t id)
{
	struct kvxd_pool *dp = pool_by_id(&A, pa), *sp = pool_by_id(&B, pb);

	assert_int_equal(eng_room_open(ea, id, pa, 4, NULL), 0);
	PUMP_UNTIL(prefill_known(id));
	eng_chunk_x(eb, id, pb, 4, 0, true);
	PUMP_UNTIL(eng_event(ea, id, KVX_STATE_SUCCESS));
	for (uint32_t p = 0; p < 4; p++)
		assert_memory_equal(page_at(dp, 0, p), page_at(sp, 0, p), 256);
}

/* Decode aborts a room whose prefill engine sent its first chunk, and opens the id again at
 * once.  While b's engine has not closed the earlier attempt, b refuses the new generation
 * (decode is told FAILED, -EBUSY, at once): the engine's late chunks of that attempt would
 * otherwise be written into the new room's pages, the last one completing it, with the pages
 * the first chunk wrote to the earlier attempt's pages never written (a SUCCESS with holes).
 * Once b's engine closed the id, it is opened again and the room is whole; after that room's
 * SUCCESS the same: the id waits for b's engine's close. */
static void
test_own_reuse_waits_for_the_prefill_engines_close(void **state)
{
	struct kvxd_pool *dp, *sp;
	const struct kvx_event *ev;
	struct eng ea, eb;
	int pa, pb, failed;

	(void)state;
	pair_with_engines(&ea, &eb, &pa, &pb);
	dp = pool_by_id(&A, pa);
	sp = pool_by_id(&B, pb);
	fill_pool(sp, 1);
	memset(dp->base, 0, dp->len);
	assert_int_equal(eng_room_open(&ea, 540, pa, 4, NULL), 0);
	PUMP_UNTIL(prefill_known(540));
	eng_chunk_x(&eb, 540, pb, 2, 0, false); /* the earlier attempt's pages 0 and 1 */
	PUMP_UNTIL(memcmp(page_at(dp, 0, 1), page_at(sp, 0, 1), 256) == 0);
	assert_int_equal(eng_room_req(&ea, KVX_ENG_ROOM_ABORT, 540), 0);
	PUMP_UNTIL(eng_event(&ea, 540, KVX_STATE_RELEASED));
	assert_int_equal(eng_room_req(&ea, KVX_ENG_ROOM_CLOSE, 540), 0);
	memset(dp->base, 0, dp->len); /* decode's engine has its pages back */
	failed = count_events(&ea, 540, KVX_STATE_FAILED);

	assert_int_equal(eng_room_open(&ea, 540, pa, 4, NULL), 0); /* the new attempt */
	PUMP_UNTIL(eng_event(&ea, 540, KVX_STATE_FAILED) &&
		   count_events(&ea, 540, KVX_STATE_FAILED) > failed);
	ev = last_event(&ea, 540, KVX_STATE_FAILED);
	assert_int_equal(ev->error, -EBUSY);
	assert_non_null(strstr(ev->reason, "has not closed"));
	eng_chunk_full(&eb, 540, 0, pb, 2, 2, 2, 0, 0, 0, true); /* the earlier one's late last */
	for (int i = 0; i < 200; i++)
		pump_once();
	for (size_t k = 0; k < 4 * 256; k++)
		assert_int_equal(dp->base[k], 0); /* nothing written into the new room's pages */
	assert_null(eng_event(&ea, 540, KVX_STATE_SUCCESS));
	assert_int_equal(eng_room_req(&ea, KVX_ENG_ROOM_CLOSE, 540), 0);

	/* b's engine closes the id: decode's next attempt is taken, and whole */
	assert_int_equal(eng_room_req(&eb, KVX_ENG_ROOM_CLOSE, 540), 0);
	open_whole(&ea, &eb, pa, pb, 540);

	/* after a SUCCESS too, the id waits for b's engine's close (which names only the id: it
	 * would find the new room), and is opened again once that came */
	assert_int_equal(eng_room_req(&ea, KVX_ENG_ROOM_CLOSE, 540), 0);
	memset(dp->base, 0, dp->len);
	fill_pool(sp, 2);
	ea.nev = 0;
	assert_int_equal(eng_room_open(&ea, 540, pa, 4, NULL), 0);
	PUMP_UNTIL(eng_event(&ea, 540, KVX_STATE_FAILED));
	assert_int_equal(eng_event(&ea, 540, KVX_STATE_FAILED)->error, -EBUSY);
	PUMP_UNTIL(eng_event(&ea, 540, KVX_STATE_RELEASED));
	assert_int_equal(eng_room_req(&ea, KVX_ENG_ROOM_CLOSE, 540), 0);
	PUMP_UNTIL(eng_event(&eb, 540, KVX_STATE_SUCCESS));
	assert_int_equal(eng_room_req(&eb, KVX_ENG_ROOM_CLOSE, 540), 0);
	ea.nev = 0;
	open_whole(&ea, &eb, pa, pb, 540);
	eng_close(&ea);
	eng_close(&eb);
}

static void
pump_until_event(struct eng *e, uint64_t id, int st)
{
	for (int i = 0; i < MAX_STEPS && !eng_event(e, id, st); i++)
		pump_once();
	if (!eng_event(e, id, st))
		fail_msg("room %llu: no event of state %d", (unsigned long long)id, st);
}

/* Every TP rank of an engine opens the same room id (rooms are keyed by id and rank): two
 * decode ranks open room 700, each fed by the prefill rank of its own number, and each gets its
 * own rank's bytes.  Before: the second open of the id was refused (-EEXIST). */
static void
test_ranks_share_a_room_id(void **state)
{
	struct eng ea[2], eb[2];
	int pa[2], pb[2];
	static const uint32_t dst[4] = {3, 4, 5, 6};
	const uint32_t *pages[1] = {dst}, np[1] = {4};

	assert_int_equal(listen_on(&A), 0);
	assert_int_equal(listen_on(&B), 0);
	kvxd_peer_admin(&A, "b", "resume");
	PUMP_UNTIL(A.peers[0].state == KVXD_PEER_READY && B.peers[0].state == KVXD_PEER_READY);
	for (uint32_t k = 0; k < 2; k++) {
		eng_connect(&ea[k], &A);
		eng_connect(&eb[k], &B);
		assert_int_equal(eng_hello_rank(&ea[k], k), 0);
		assert_int_equal(eng_hello_rank(&eb[k], k), 0);
		pa[k] = eng_pool_id(&ea[k], 256, 16, 2);
		pb[k] = eng_pool_id(&eb[k], 256, 16, 2);
		fill_pool(pool_by_id(&B, pb[k]), (uint8_t)(10 + k));
		memset(pool_by_id(&A, pa[k])->base, 0, 256 * 16 * 2);
	}
	for (uint32_t k = 0; k < 2; k++) {
		struct kvx_source src = {.node = "b", .rank = k};

		assert_int_equal(eng_open_shape(&ea[k], 700, 1, &pa[k], np, pages, 1, &src, NULL),
				 0);
	}
	PUMP_UNTIL(kvxd_room_find(&B, 700, 0, KVX_ROOM_PREFILL) &&
		   kvxd_room_find(&B, 700, 1, KVX_ROOM_PREFILL));
	for (uint32_t k = 0; k < 2; k++)
		eng_chunk_shape(&eb[k], 700, 0, pb[k], 0, 4, 0, 0, 0, true);
	for (uint32_t k = 0; k < 2; k++) {
		pump_until_event(&ea[k], 700, KVX_STATE_SUCCESS);
		pump_until_event(&eb[k], 700, KVX_STATE_SUCCESS);
	}
	for (uint32_t k = 0; k < 2; k++)
		for (uint32_t b = 0; b < 2; b++)
			for (uint32_t i = 0; i < 4; i++)
				assert_memory_equal(page_at(pool_by_id(&A, pa[k]), b, dst[i]),
						    page_at(pool_by_id(&B, pb[k]), b, i), 256);
	/* a second open of a live id by the same rank is still refused */
	{
		struct kvx_source src = {.node = "b", .rank = 0};
		struct eng e2;

		eng_connect(&e2, &A);
		assert_int_equal(eng_hello_rank(&e2, 0), 0);
		assert_int_equal(eng_open_shape(&e2, 700, 1, &pa[0], np, pages, 1, &src, NULL),
				 -ENOENT); /* not its pool */
		eng_close(&e2);
	}
	for (uint32_t k = 0; k < 2; k++) {
		eng_close(&ea[k]);
		eng_close(&eb[k]);
	}
}

/*
 * Different TP on the two sides, an auxiliary region, layer by layer.  Decode (one rank, pages
 * of 256 B, 2 buffers = layers) takes from prefill ranks 0 and 1 (TP 2: pages of 128 B, their
 * halves of the heads) each rank's whole page into its half of the decode page (head slices),
 * one chunk per layer; rank 0 also sends an auxiliary region (a pool of 64-byte items, one
 * buffer).  Every destination byte is the right source byte: rank 0's heads in bytes 0..127,
 * rank 1's in 128..255 of every page of every layer, and rank 0's aux items.
 */
static void
test_head_slices_aux_region_layer_by_layer(void **state)
{
	struct eng ea, eb[2];
	int pa[2], pb[2], pbx;
	static const uint32_t kv[3] = {9, 2, 14}, aux[1] = {5};
	const uint32_t *pages[2] = {kv, aux}, np[2] = {3, 1};
	struct kvx_source src[2] = {
		{.node = "b", .rank = 0, .slice = {{.dst_offset = 0, .length = 128}}},
		{.node = "b", .rank = 1, .slice = {{.dst_offset = 128, .length = 128}}},
	};
	struct kvxd_pool *d, *s[2], *dx, *sx;

	assert_int_equal(listen_on(&A), 0);
	assert_int_equal(listen_on(&B), 0);
	kvxd_peer_admin(&A, "b", "resume");
	PUMP_UNTIL(A.peers[0].state == KVXD_PEER_READY && B.peers[0].state == KVXD_PEER_READY);
	eng_connect(&ea, &A);
	assert_int_equal(eng_hello_rank(&ea, 0), 0);
	pa[0] = eng_pool_id(&ea, 256, 16, 2);
	pa[1] = eng_pool_id(&ea, 64, 8, 1);
	for (uint32_t k = 0; k < 2; k++) {
		eng_connect(&eb[k], &B);
		assert_int_equal(eng_hello_rank(&eb[k], k), 0);
		pb[k] = eng_pool_id(&eb[k], 128, 16, 2);
		s[k] = pool_by_id(&B, pb[k]);
		fill_pool(s[k], (uint8_t)(20 + k));
	}
	pbx = eng_pool_id(&eb[0], 64, 8, 1);
	sx = pool_by_id(&B, pbx);
	fill_pool(sx, 30);
	d = pool_by_id(&A, pa[0]);
	dx = pool_by_id(&A, pa[1]);
	memset(d->base, 0xee, 256 * 16 * 2);
	memset(dx->base, 0xee, 64 * 8);

	/* the aux region (1) is whole pages: its slice is all zero */
	assert_int_equal(eng_open_shape(&ea, 710, 2, pa, np, pages, 2, src, NULL), 0);
	PUMP_UNTIL(kvxd_room_find(&B, 710, 0, KVX_ROOM_PREFILL) &&
		   kvxd_room_find(&B, 710, 1, KVX_ROOM_PREFILL));
	/* layer 0 from both ranks, then layer 1, then rank 0's aux item as its last chunk */
	for (uint32_t b = 0; b < 2; b++)
		for (uint32_t k = 0; k < 2; k++)
			eng_chunk_shape(&eb[k], 710, 0, pb[k], 4, 3, 0, b, 1, b == 1 && k == 1);
	eng_chunk_shape(&eb[0], 710, 1, pbx, 6, 1, 0, 0, 0, true);
	pump_until_event(&ea, 710, KVX_STATE_SUCCESS);
	pump_until_event(&eb[0], 710, KVX_STATE_SUCCESS);
	pump_until_event(&eb[1], 710, KVX_STATE_SUCCESS);
	for (uint32_t b = 0; b < 2; b++)
		for (uint32_t i = 0; i < 3; i++)
			for (uint32_t k = 0; k < 2; k++)
				assert_memory_equal(page_at(d, b, kv[i]) + 128 * k,
						    page_at(s[k], b, 4 + i), 128);
	assert_memory_equal(page_at(dx, 0, aux[0]), page_at(sx, 0, 6), 64);
	/* nothing else of the destination pools changed */
	for (uint32_t b = 0; b < 2; b++)
		for (uint32_t p = 0; p < 16; p++)
			if (p != 9 && p != 2 && p != 14)
				for (uint32_t i = 0; i < 256; i++)
					assert_int_equal(page_at(d, b, p)[i], 0xee);
	for (uint32_t p = 0; p < 8; p++)
		if (p != 5)
			for (uint32_t i = 0; i < 64; i++)
				assert_int_equal(page_at(dx, 0, p)[i], 0xee);
	eng_close(&ea);
	eng_close(&eb[0]);
	eng_close(&eb[1]);
}

/* Shapes that cannot work are refused with a clear error, and a chunk that does not fit its
 * room's shape fails only that room. */
static void
test_bad_shapes_refused(void **state)
{
	struct eng ea, eb;
	struct eng_reply r;
	int pa, pb;
	static const uint32_t kv[2] = {1, 2}, beyond[1] = {16};
	const uint32_t *pages[1] = {kv}, np[1] = {2}, *bad[1] = {beyond}, nb1[1] = {1};
	struct kvx_source src = {.node = "b", .slice = {{.dst_offset = 200, .length = 57}}};

	pair_with_engines(&ea, &eb, &pa, &pb);
	/* a slice beyond the destination page */
	assert_int_equal(eng_open_shape(&ea, 720, 1, &pa, np, pages, 1, &src, &r), -ERANGE);
	assert_non_null(strstr(r.text, "slice 200+57 does not fit a 256-byte page"));
	/* offsets on a whole-page slice */
	src.slice[0] = (struct kvx_slice){.src_offset = 4};
	assert_int_equal(eng_open_shape(&ea, 720, 1, &pa, np, pages, 1, &src, &r), -ERANGE);
	/* a slice for a region the room does not have */
	src.slice[0] = (struct kvx_slice){0};
	src.slice[1] = (struct kvx_slice){.length = 8};
	assert_int_equal(eng_open_shape(&ea, 720, 1, &pa, np, pages, 1, &src, &r), -EINVAL);
	src.slice[1] = (struct kvx_slice){0};
	/* a page beyond its region's pool */
	assert_int_equal(eng_open_shape(&ea, 720, 1, &pa, nb1, bad, 1, &src, &r), -ERANGE);
	assert_non_null(strstr(r.text, "region 0: destination page 16"));
	/* the same source (node and rank) twice */
	{
		struct kvx_source two[2] = {{.node = "b", .rank = 3}, {.node = "b", .rank = 3}};

		assert_int_equal(eng_open_shape(&ea, 720, 1, &pa, np, pages, 2, two, &r), -EINVAL);
	}
	/* a good room; then a chunk naming a region it does not have, and one whose buffers
	 * go beyond the pool: each fails (the second one is refused by kvxd at once) */
	assert_int_equal(eng_open_shape(&ea, 721, 1, &pa, np, pages, 1, &src, NULL), 0);
	PUMP_UNTIL(kvxd_room_find(&B, 721, 0, KVX_ROOM_PREFILL));
	eng_chunk_shape(&eb, 722, 0, pb, 0, 1, 0, 1, 1, true); /* pool has 1 buffer: 1+1 */
	for (int i = 0; i < 10; i++)
		pump_once();
	assert_non_null(eng_event(&eb, 722, KVX_STATE_FAILED));
	eng_chunk_shape(&eb, 721, 1, pb, 0, 2, 0, 0, 0, true);
	pump_until_event(&eb, 721, KVX_STATE_FAILED);
	pump_until_event(&ea, 721, KVX_STATE_RELEASED);
	eng_close(&ea);
	eng_close(&eb);
}

/* A decode room whose two sources are two ranks of one prefill node, aborted before either
 * submitted: each rank's prefill room acknowledges, each ACK names its rank, and the room is
 * released on the two ACKs (no release timeout, no fence).  An ACK is credited to the source
 * of its rank only (ack_rank_ignored: both ACKs credit one source, the room waits for the
 * release timeout). */
static void
test_abort_acks_are_per_source_rank(void **state)
{
	struct eng ea, eb[2];
	int pa;
	static const uint32_t kv[2] = {1, 2};
	const uint32_t *pages[1] = {kv}, np[1] = {2};
	struct kvx_source src[2] = {{.node = "b", .rank = 0}, {.node = "b", .rank = 1}};

	assert_int_equal(listen_on(&A), 0);
	assert_int_equal(listen_on(&B), 0);
	kvxd_peer_admin(&A, "b", "resume");
	PUMP_UNTIL(A.peers[0].state == KVXD_PEER_READY && B.peers[0].state == KVXD_PEER_READY);
	eng_connect(&ea, &A);
	assert_int_equal(eng_hello_rank(&ea, 0), 0);
	pa = eng_pool_id(&ea, 256, 16, 1);
	for (uint32_t k = 0; k < 2; k++) {
		eng_connect(&eb[k], &B);
		assert_int_equal(eng_hello_rank(&eb[k], k), 0);
	}
	assert_int_equal(eng_open_shape(&ea, 740, 1, &pa, np, pages, 2, src, NULL), 0);
	PUMP_UNTIL(kvxd_room_find(&B, 740, 0, KVX_ROOM_PREFILL) &&
		   kvxd_room_find(&B, 740, 1, KVX_ROOM_PREFILL));
	assert_int_equal(eng_room_req(&ea, KVX_ENG_ROOM_ABORT, 740), 0);
	pump_until_event(&ea, 740, KVX_STATE_RELEASED);
	assert_int_equal(A.ctr.fences, 0);
	assert_int_equal(A.ctr.acks_received, 2);
	eng_close(&ea);
	eng_close(&eb[0]);
	eng_close(&eb[1]);
}

/* A decode engine with TP 2 (ranks 0 and 1, pages of 128 B: half the heads each) fed by a
 * prefill engine with TP 1 (pages of 256 B) on two decode nodes' worth of endpoints: one
 * prefill room, two destinations, each its own half of every page (source slices).  The second
 * endpoint's metadata waits until the engine's first chunk says ndest = 2. */
/* The fan-out rooms' destination pages (of both decode ranks) and source (rank 0 of "b"). */
static const uint32_t fan_kv[3] = {9, 2, 14};

/* Decode rank k's open of a fan-out room: pages fan_kv of pool, bytes [128 k, 128 k + 128) of
 * each 256-byte source page. */
static size_t
fan_open_msg(uint64_t buf[KVX_ENG_MSG_MAX / 8], uint64_t id, int pool, uint32_t k)
{
	const uint32_t *pages[1] = {fan_kv}, np[1] = {3};
	struct kvx_source src = {
		.node = "b", .rank = 0, .slice = {{.src_offset = 128 * k, .length = 128}}};

	return open_shape_msg(buf, id, 1, &pool, np, pages, 1, &src);
}

/* Two decode ranks on "a" (pools of 128-byte pages) and one prefill rank on "b" (256-byte
 * pages), each with a pool of 16 pages in 2 buffers. */
static void
fan_out_engines(struct eng *ea, struct eng *eb, int *pa, int *pb)
{
	assert_int_equal(listen_on(&A), 0);
	assert_int_equal(listen_on(&B), 0);
	kvxd_peer_admin(&A, "b", "resume");
	PUMP_UNTIL(A.peers[0].state == KVXD_PEER_READY && B.peers[0].state == KVXD_PEER_READY);
	eng_connect(eb, &B);
	assert_int_equal(eng_hello_rank(eb, 0), 0);
	*pb = eng_pool_id(eb, 256, 16, 2);
	for (uint32_t k = 0; k < 2; k++) {
		eng_connect(&ea[k], &A);
		assert_int_equal(eng_hello_rank(&ea[k], k), 0);
		pa[k] = eng_pool_id(&ea[k], 128, 16, 2);
	}
}

static void
fan_out_setup(struct eng *ea, struct eng *eb, int *pa, int *pb, uint64_t id)
{
	static uint64_t buf[KVX_ENG_MSG_MAX / 8];

	fan_out_engines(ea, eb, pa, pb);
	fill_pool(pool_by_id(&B, *pb), 40);
	for (uint32_t k = 0; k < 2; k++) {
		memset(pool_by_id(&A, pa[k])->base, 0xee, 128 * 16 * 2);
		assert_int_equal(eng_call(&ea[k], KVX_ENG_ROOM_OPEN, buf,
					  fan_open_msg(buf, id, pa[k], k), -1, NULL),
				 0);
	}
	PUMP_UNTIL(B.ctr.meta_parked == 1); /* the second endpoint waits for the engine */
}

static void
eng_chunk_fan(struct eng *e, uint64_t id, int pool, uint32_t src0, uint32_t n, uint32_t b0,
	      uint32_t ndest, bool last)
{
	eng_chunk_full(e, id, 0, pool, src0, n, 0, b0, 1, ndest, last);
}

/* Decode rank k's pool (pa[k]) holds its half of source pages 4..6 of prefill's pool pb in
 * pages fan_kv, in both buffers. */
static void
fan_assert_delivered(const int *pa, int pb, uint32_t k)
{
	for (uint32_t b = 0; b < 2; b++)
		for (uint32_t i = 0; i < 3; i++)
			assert_memory_equal(page_at(pool_by_id(&A, pa[k]), b, fan_kv[i]),
					    page_at(pool_by_id(&B, pb), b, 4 + i) + 128 * k, 128);
}

/* Nothing was written to decode rank k's pool (fan_out_setup filled it with 0xee). */
static void
fan_assert_untouched(const int *pa, uint32_t k)
{
	for (uint32_t i = 0; i < 128 * 16 * 2; i++)
		assert_int_equal(pool_by_id(&A, pa[k])->base[i], 0xee);
}

/* e was told RELEASED of room id once, and nothing after it. */
static void
assert_released_last(const struct eng *e, uint64_t id)
{
	assert_int_equal(count_events(e, id, KVX_STATE_RELEASED), 1);
	assert_int_equal(e->ev[e->nev - 1].state, KVX_STATE_RELEASED);
}

static void
test_fan_out_to_two_decode_ranks(void **state)
{
	struct eng ea[2], eb;
	int pa[2], pb;
	const uint32_t *kv = fan_kv;
	struct kvxd_room *r;

	fan_out_setup(ea, &eb, pa, &pb, 730);
	eng_chunk_fan(&eb, 730, pb, 4, 3, 0, 2, false); /* layer 0, to both destinations */
	for (int i = 0; i < 20; i++)
		pump_once();
	/* a third endpoint of that room is refused at once now that the engine said two */
	{
		struct eng e3;
		int p3;
		struct kvx_source src = {.node = "b", .rank = 0};
		const uint32_t *pages[1] = {kv}, np[1] = {3};
		uint64_t before = B.ctr.meta_refused_owner;

		eng_connect(&e3, &A);
		assert_int_equal(eng_hello_rank(&e3, 2), 0);
		p3 = eng_pool_id(&e3, 256, 16, 2);
		memset(pool_by_id(&A, p3)->base, 0xee, 256 * 16 * 2);
		assert_int_equal(eng_open_shape(&e3, 730, 1, &p3, np, pages, 1, &src, NULL), 0);
		PUMP_UNTIL(B.ctr.meta_refused_owner == before + 1);
		pump_until_event(&e3, 730, KVX_STATE_RELEASED);
		for (uint32_t i = 0; i < 256 * 16 * 2; i++) /* nothing was written to it */
			assert_int_equal(pool_by_id(&A, p3)->base[i], 0xee);
		eng_close(&e3);
	}
	eng_chunk_fan(&eb, 730, pb, 4, 3, 1, 2, true); /* layer 1, the last */
	for (uint32_t k = 0; k < 2; k++)
		pump_until_event(&ea[k], 730, KVX_STATE_SUCCESS);
	pump_until_event(&eb, 730, KVX_STATE_SUCCESS);
	assert_int_equal(count_events(&eb, 730, KVX_STATE_SUCCESS), 1);
	assert_int_equal(count_events(&eb, 730, KVX_STATE_FAILED), 0);
	r = kvxd_room_find(&B, 730, 0, KVX_ROOM_PREFILL);
	assert_non_null(r);
	assert_int_equal(r->nowners, 2);
	for (uint32_t k = 0; k < 2; k++)
		fan_assert_delivered(pa, pb, k);
	eng_close(&ea[0]);
	eng_close(&ea[1]);
	eng_close(&eb);
}

/* The second destination's metadata waits (parked) when the first one aborts the room before
 * the prefill engine's first chunk: the waiting endpoint is told at once (a failure push), its
 * room is released without any timeout, and the engine's late chunk hears FAILED once.
 * (refuse_parked_never: the waiting endpoint is left to its waiting timeout.) */
static void
test_fan_out_parked_endpoint_told_when_the_room_fails(void **state)
{
	struct eng ea[2], eb;
	int pa[2], pb;
	uint64_t refused = B.ctr.meta_refused_owner;

	fan_out_setup(ea, &eb, pa, &pb, 732);
	assert_int_equal(eng_room_req(&ea[0], KVX_ENG_ROOM_ABORT, 732), 0);
	pump_until_event(&ea[0], 732, KVX_STATE_RELEASED);
	pump_until_event(&ea[1], 732, KVX_STATE_RELEASED);
	assert_int_equal(B.ctr.meta_refused_owner, refused + 1);
	assert_int_equal(A.ctr.waiting_timeouts, 0);
	assert_int_equal(A.ctr.fences, 0);
	eng_chunk_fan(&eb, 732, pb, 4, 3, 0, 2, true);
	pump_until_event(&eb, 732, KVX_STATE_FAILED);
	assert_int_equal(count_events(&eb, 732, KVX_STATE_FAILED), 1);
	for (uint32_t k = 0; k < 2; k++) /* nothing was written to either */
		fan_assert_untouched(pa, k);
	eng_close(&ea[0]);
	eng_close(&ea[1]);
	eng_close(&eb);
}

/* The second destination aborts while its metadata waits (parked) for the engine's first chunk:
 * its ABORT is acknowledged at once (nothing was written to it).  When that chunk says the room
 * feeds two endpoints, the aborted one is one of its destinations, and the room fails for both,
 * as an abort from a destination that was not parked does (test_fan_out_abort_from_one_fails_all):
 * the first destination is told at once by a failure push, not left to its waiting timeout, the
 * engine hears FAILED once, and nothing is written to either.  Before, the aborted endpoint's
 * metadata was dropped, and the room waited for a second destination until waiting_ms (60 s here)
 * on both nodes.  (parked_abort_dropped) */
static void
test_fan_out_parked_endpoint_abort_fails_all(void **state)
{
	struct eng ea[2], eb;
	int pa[2], pb;
	uint64_t acks, waiting = A.ctr.waiting_timeouts + B.ctr.waiting_timeouts;
	const struct kvx_event *ev;

	fan_out_setup(ea, &eb, pa, &pb, 733); /* rank 0's metadata came first: rank 1 waits */
	acks = B.ctr.acks_sent;
	assert_int_equal(eng_room_req(&ea[1], KVX_ENG_ROOM_ABORT, 733), 0);
	pump_until_event(&ea[1], 733, KVX_STATE_RELEASED);
	assert_int_equal(B.ctr.acks_sent - acks, 1);
	for (int i = 0; i < 20; i++)
		pump_once();
	/* rank 0's room is still live */
	assert_int_equal(count_events(&ea[0], 733, KVX_STATE_FAILED), 0);
	assert_int_equal(count_events(&ea[0], 733, KVX_STATE_RELEASED), 0);
	eng_chunk_fan(&eb, 733, pb, 4, 3, 0, 2, false);
	ev = eng_event_wait(&eb, 733, KVX_STATE_FAILED);
	assert_non_null(strstr(ev->reason, "while its ROOM_META waited"));
	pump_until_event(&ea[0], 733, KVX_STATE_RELEASED);
	assert_int_equal(count_events(&ea[0], 733, KVX_STATE_SUCCESS), 0);
	eng_chunk_fan(&eb, 733, pb, 4, 3, 1, 2, true); /* the last: skipped */
	for (int i = 0; i < 20; i++)
		pump_once();
	assert_int_equal(count_events(&eb, 733, KVX_STATE_FAILED), 1);
	assert_int_equal(count_events(&eb, 733, KVX_STATE_SUCCESS), 0);
	assert_released_last(&ea[1], 733);
	assert_int_equal(A.ctr.waiting_timeouts + B.ctr.waiting_timeouts, waiting);
	assert_int_equal(A.ctr.fences + B.ctr.fences, 0);
	assert_int_equal(peer_of(&B, "a")->parked_held, 0); /* its charge given back */
	for (uint32_t k = 0; k < 2; k++)		    /* nothing was written to either */
		fan_assert_untouched(pa, k);
	eng_close(&ea[0]);
	eng_close(&ea[1]);
	eng_close(&eb);
}

/* The same abort of a parked endpoint when the engine's first chunk says the room feeds one
 * endpoint: the aborted one was never to be a destination, its metadata goes without a word, and
 * the room succeeds at the first. */
static void
test_fan_out_parked_endpoint_abort_beyond_ndest(void **state)
{
	struct eng ea[2], eb;
	int pa[2], pb;
	uint64_t refused;

	fan_out_setup(ea, &eb, pa, &pb, 734);
	assert_int_equal(eng_room_req(&ea[1], KVX_ENG_ROOM_ABORT, 734), 0);
	pump_until_event(&ea[1], 734, KVX_STATE_RELEASED);
	refused = B.ctr.meta_refused_owner;
	eng_chunk_fan(&eb, 734, pb, 4, 3, 0, 1, false);
	eng_chunk_fan(&eb, 734, pb, 4, 3, 1, 1, true);
	pump_until_event(&ea[0], 734, KVX_STATE_SUCCESS);
	pump_until_event(&eb, 734, KVX_STATE_SUCCESS);
	assert_int_equal(count_events(&eb, 734, KVX_STATE_FAILED), 0);
	assert_int_equal(B.ctr.meta_refused_owner, refused); /* not refused: it went quietly */
	assert_released_last(&ea[1], 734);
	assert_int_equal(B.ctr.meta_parked, 1);
	assert_int_equal(peer_of(&B, "a")->parked_held, 0); /* its charge given back */
	fan_assert_delivered(pa, pb, 0);
	fan_assert_untouched(pa, 1);
	eng_close(&ea[0]);
	eng_close(&ea[1]);
	eng_close(&eb);
}

/* An ABORT from the parked endpoint that names another generation than its parked metadata's
 * (a stale or forged one: the trust rules) is acknowledged and changes nothing: the metadata is
 * taken when the engine's first chunk says two destinations, and the room succeeds at both. */
static void
test_fan_out_parked_endpoint_stale_abort_ignored(void **state)
{
	struct eng ea[2], eb;
	int pa[2], pb;
	struct kvxd_room *dr;
	struct kvx_wire_abort ab = {.room = 735, .gen = 3, .endpoint = "a", .dst_rank = 1};

	fan_out_setup(ea, &eb, pa, &pb, 735);
	dr = kvxd_room_find(&A, 735, 1, KVX_ROOM_DECODE);
	assert_non_null(dr);
	ab.open_gen = dr->open_gen + 1;
	kvxd_on_abort(&B, peer_of(&B, "a"), &ab);
	eng_chunk_fan(&eb, 735, pb, 4, 3, 0, 2, false);
	eng_chunk_fan(&eb, 735, pb, 4, 3, 1, 2, true);
	for (uint32_t k = 0; k < 2; k++)
		pump_until_event(&ea[k], 735, KVX_STATE_SUCCESS);
	pump_until_event(&eb, 735, KVX_STATE_SUCCESS);
	for (uint32_t k = 0; k < 2; k++)
		fan_assert_delivered(pa, pb, k);
	eng_close(&ea[0]);
	eng_close(&ea[1]);
	eng_close(&eb);
}

/* One of the two destinations aborts: the room fails for both (the other is told at once by a
 * failure push, not a timeout), both decode rooms are released after the drain (each endpoint
 * acknowledged), and the prefill engine hears FAILED once. */
static void
test_fan_out_abort_from_one_fails_all(void **state)
{
	struct eng ea[2], eb;
	int pa[2], pb;
	uint64_t acks;

	fan_out_setup(ea, &eb, pa, &pb, 731);
	eng_chunk_fan(&eb, 731, pb, 4, 3, 0, 2, false); /* layer 0 */
	for (int i = 0; i < 20; i++)
		pump_once();
	acks = B.ctr.acks_sent;
	/* the first destination aborts (the push to the second is what tells it) */
	assert_int_equal(eng_room_req(&ea[0], KVX_ENG_ROOM_ABORT, 731), 0);
	pump_until_event(&ea[0], 731, KVX_STATE_RELEASED);
	pump_until_event(&ea[1], 731, KVX_STATE_RELEASED);
	assert_int_equal(count_events(&ea[1], 731, KVX_STATE_SUCCESS), 0);
	assert_int_equal(B.ctr.acks_sent - acks, 2); /* one per endpoint */
	assert_int_equal(A.ctr.fences, 0);
	assert_int_equal(A.ctr.waiting_timeouts, 0);
	eng_chunk_fan(&eb, 731, pb, 4, 3, 1, 2, true); /* layer 1: skipped */
	pump_until_event(&eb, 731, KVX_STATE_FAILED);
	assert_int_equal(count_events(&eb, 731, KVX_STATE_FAILED), 1);
	assert_int_equal(count_events(&eb, 731, KVX_STATE_SUCCESS), 0);
	eng_close(&ea[0]);
	eng_close(&ea[1]);
	eng_close(&eb);
}

/* ---- every order of a room's requests ------------------------------------------------------ */

/* How an order test sends a room's steps. */
enum order_mode {
	ORDER_BETWEEN,	  /* the nodes step until each is answered before the next goes */
	ORDER_AT_ONCE,	  /* all at once */
	ORDER_LATE_FLUSH, /* as ORDER_BETWEEN, but the held writes run only after the time ran */
};

static int order_cases; /* orders that ran (not skipped) */

/* One run of an order test: one room id, decode engines dec[0 .. ndec) on "a" (each with its
 * pool dp[k], which the room's open names), prefill engines pre[0 .. npre) on "b". */
struct order_run {
	uint64_t id;
	char what[160]; /* the order and its mode: the run's name in failures and traces */
	int ndec, npre;
	struct eng *dec[2], *pre[2];
	struct kvxd_pool *dp[2];
	uint64_t open_seq[2];	    /* decode engine k's open, until its reply is read */
	struct eng_reply open_r[2]; /* ... that reply */
	bool released[2];	    /* decode engine k was told RELEASED: its pool holds a canary */
	bool closed_mid[2];	    /* prefill engine k closed the room between its chunks */
	int dec_end[2], pre_end[2]; /* the end each engine was told (-1: none) */
	uint64_t timeouts;	    /* order_timeouts() when the run began */
	int abort_op, flush_op;	    /* the steps every order test has (order_steps) */
	bool aborted;		    /* decode 0 aborted the room after its open went */
	bool late;     /* failed and flushed writes land: at decode's RELEASED, at the end */
	bool qp_fails; /* a QP fails: sessions replaced are its doing, not a timeout's */
	uint64_t session_fences; /* both nodes' session_fences when the run began */
};

/* One step of both nodes; what the engines' sockets hold is read.  Once a decode engine is told
 * RELEASED, its pool is its own again: it gets a canary that no write may change after. */
static void
order_step(struct order_run *o)
{
	pump_once();
	for (int k = 0; k < o->ndec; k++) {
		if (o->open_seq[k] && eng_read(o->dec[k], o->open_seq[k], &o->open_r[k]) == 1)
			o->open_seq[k] = 0;
		eng_read(o->dec[k], 0, NULL);
	}
	for (int k = 0; k < o->npre; k++)
		eng_read(o->pre[k], 0, NULL);
	for (int k = 0; k < o->ndec; k++)
		if (!o->released[k] && count_events(o->dec[k], o->id, KVX_STATE_RELEASED)) {
			o->released[k] = true;
			memset(o->dp[k]->base, 0xee, o->dp[k]->len);
			if (o->late) /* the worst time for them to land */
				fake_vx_deliver_late();
		}
}

/* Prefill's writes to "a" that hold mode kept: run now, and not held from here on. */
static void
order_flush(void)
{
	struct kvxd_peer *p = peer_of(&B, "a");

	fake_vx_hold(false);
	for (int l = 0; l < B.ncores * B.nrails; l++)
		if (p->qpc[l])
			fake_vx_release(p->qpc[l]->qp, 1000);
}

/* Whether engine e was told an end of room id: SUCCESS, or other_end. */
static bool
order_ended(const struct eng *e, uint64_t id, int other_end)
{
	return count_events(e, id, KVX_STATE_SUCCESS) || count_events(e, id, other_end);
}

/* Rooms either node ended by a timeout, and sessions it fenced, so far: a failure that is told
 * at once (a failure push, an ABORT_ACK) leaves them as they were. */
static uint64_t
order_timeouts(void)
{
	return A.ctr.waiting_timeouts + B.ctr.waiting_timeouts + A.ctr.fences + B.ctr.fences +
	       A.ctr.session_fences + B.ctr.session_fences;
}

/* The ends (SUCCESS, or RELEASED at decode, FAILED at prefill) engine e was told of room id;
 * fails when it heard of the room again after the first, unless again. */
static int
order_ends(const struct eng *e, uint64_t id, int other_end, bool again, const char *who,
	   const char *what, int *end)
{
	int n = 0;

	for (int i = 0; i < e->nev; i++) {
		if (e->ev[i].room != id)
			continue;
		if (n && !again)
			fail_msg("%s: %s's engine heard state %u after the room's end", what, who,
				 (unsigned)e->ev[i].state);
		if (e->ev[i].state == KVX_STATE_SUCCESS || e->ev[i].state == other_end) {
			n++;
			*end = e->ev[i].state;
		}
	}
	return n;
}

/* Whether order ord of nops steps (named names) runs in mode: step first (an engine's first
 * chunk) comes before step last (its last chunk: an engine's chunks come in its order), and with
 * ORDER_LATE_FLUSH step o->flush_op is last (its place does not matter then: once per order of
 * the others).  Its name goes to o->what; KVX_TEST_ORDER_CASE runs only the order of that name. */
static bool
order_take(struct order_run *o, const int *ord, int nops, const char *const *names, int first,
	   int last, enum order_mode mode)
{
	static const char *const mode_name[] = {" (one at a time)", " (at once)",
						" (one at a time, writes held past the timeouts)"};
	const char *only = getenv("KVX_TEST_ORDER_CASE");
	size_t off = 0;

	for (int i = 0; i < nops; i++)
		if (ord[i] == last)
			return false;
		else if (ord[i] == first)
			break;
	if (mode == ORDER_LATE_FLUSH && ord[nops - 1] != o->flush_op)
		return false;
	order_cases++;
	for (int i = 0; i < nops; i++)
		off += (size_t)snprintf(o->what + off, sizeof(o->what) - off, "%s%s", i ? "," : "",
					names[ord[i]]);
	snprintf(o->what + off, sizeof(o->what) - off, "%s", mode_name[mode]);
	return !only || !strcmp(only, o->what);
}

/* Before the steps: both sessions are ready (a fence in the run before replaced them), decode's
 * pools are zeroed, the engines' events forgotten, and prefill's writes held in flight. */
static void
order_begin(struct order_run *o)
{
	PUMP_UNTIL(A.peers[0].state == KVXD_PEER_READY && B.peers[0].state == KVXD_PEER_READY);
	for (int k = 0; k < o->ndec; k++) {
		memset(o->dp[k]->base, 0, o->dp[k]->len);
		o->dec[k]->nev = 0;
		o->open_r[k].status = 1;
		o->dec_end[k] = -1;
	}
	for (int k = 0; k < o->npre; k++) {
		o->pre[k]->nev = 0;
		o->pre_end[k] = -1;
	}
	o->timeouts = order_timeouts();
	o->session_fences = A.ctr.session_fences + B.ctr.session_fences;
	fake_vx_hold(true);
}

/* Whether every engine was told the room's end (a prefill engine that closed the room between
 * its chunks excepted). */
static bool
order_all_ended(const struct order_run *o)
{
	for (int k = 0; k < o->ndec; k++)
		if (!order_ended(o->dec[k], o->id, KVX_STATE_RELEASED))
			return false;
	for (int k = 0; k < o->npre; k++)
		if (!o->closed_mid[k] && !order_ended(o->pre[k], o->id, KVX_STATE_FAILED))
			return false;
	return true;
}

static void
order_trace(const struct order_run *o)
{
	fprintf(stderr, "%s:", o->what);
	for (int k = 0; k < o->ndec; k++)
		for (int i = 0; i < o->dec[k]->nev; i++)
			if (o->dec[k]->ev[i].room == o->id)
				fprintf(stderr, " d%d:%u", k, (unsigned)o->dec[k]->ev[i].state);
	for (int k = 0; k < o->npre; k++)
		for (int i = 0; i < o->pre[k]->nev; i++)
			if (o->pre[k]->ev[i].room == o->id)
				fprintf(stderr, " p%d:%u(%s)", k, (unsigned)o->pre[k]->ev[i].state,
					o->pre[k]->ev[i].reason);
	fprintf(stderr, "\n");
}

/* After the steps.  Time runs past waiting_ms (60 s) and the release timeout, until every
 * engine heard the room's end, and 10 s more; with ORDER_LATE_FLUSH, the held writes run then.
 * A round trip to each engine brings every earlier event in, and what every order must give is
 * checked:
 *  - each decode engine's open was taken, and it is told its end exactly once (SUCCESS or
 *    RELEASED), nothing about the room after it;
 *  - once it was told RELEASED, no write changes its pool;
 *  - each prefill engine is told exactly one end (SUCCESS or FAILED), nothing after it, unless
 *    it closed the room between its chunks (its later chunks are a new attempt, told on its
 *    own).
 * The ends are left in o->dec_end and o->pre_end for the test's own checks. */
static void
order_end(struct order_run *o, enum order_mode mode)
{
	struct eng_reply sync;
	char who[32];
	int n;

	for (int s = 0, after = 0; s < 200 && after < 10; s++) {
		order_step(o);
		if (s < 40)
			continue;
		fake_ms += 1000;
		if (after || order_all_ended(o))
			after++;
	}
	if (mode == ORDER_LATE_FLUSH) {
		order_flush();
		for (int s = 0; s < 20; s++) {
			order_step(o);
			fake_ms += 1000;
		}
	}
	if (o->late) /* their packets were still in the network: they land now, where they can */
		fake_vx_deliver_late();
	for (int k = 0; k < o->ndec; k++)
		assert_int_equal(eng_admin(o->dec[k], "peers", &sync), 0);
	for (int k = 0; k < o->npre; k++)
		assert_int_equal(eng_admin(o->pre[k], "peers", &sync), 0);
	order_step(o);
	if (getenv("KVX_TEST_ORDER_TRACE"))
		order_trace(o);
	for (int k = 0; k < o->ndec; k++) {
		snprintf(who, sizeof(who), "decode %d", k);
		if (o->open_seq[k] != 0 || o->open_r[k].status != 0)
			fail_msg("%s: %s's open was not taken (%d: %s)", o->what, who,
				 o->open_r[k].status, o->open_r[k].text);
		n = order_ends(o->dec[k], o->id, KVX_STATE_RELEASED, false, who, o->what,
			       &o->dec_end[k]);
		if (n != 1)
			fail_msg("%s: %s's engine heard %d ends", o->what, who, n);
		for (size_t b = 0; o->released[k] && b < o->dp[k]->len; b++)
			if (o->dp[k]->base[b] != 0xee)
				fail_msg("%s: byte %zu of %s's pool written after RELEASED",
					 o->what, b, who);
	}
	for (int k = 0; k < o->npre; k++) {
		snprintf(who, sizeof(who), "prefill %d", k);
		n = order_ends(o->pre[k], o->id, KVX_STATE_FAILED, o->closed_mid[k], who, o->what,
			       &o->pre_end[k]);
		if (!o->closed_mid[k] && n != 1)
			fail_msg("%s: %s's engine heard %d ends", o->what, who, n);
	}
}

/* With the writes run in time (not ORDER_LATE_FLUSH), no end of run o was left to a timeout.
 * Where a QP fails (o->qp_fails), a room's source counted fenced when its failed session's QPs
 * were destroyed is that failure's doing (session_fences), not a timeout's. */
static void
order_check_told_at_once(const struct order_run *o, enum order_mode mode)
{
	uint64_t after = order_timeouts();

	if (o->qp_fails)
		after -= A.ctr.session_fences + B.ctr.session_fences - o->session_fences;
	if (mode != ORDER_LATE_FLUSH && after != o->timeouts)
		fail_msg(
			"%s: an end was left to a timeout (now: waiting %llu and %llu, fences %llu "
			"and %llu, sessions fenced %llu and %llu; %llu more than before)",
			o->what, (unsigned long long)A.ctr.waiting_timeouts,
			(unsigned long long)B.ctr.waiting_timeouts,
			(unsigned long long)A.ctr.fences, (unsigned long long)B.ctr.fences,
			(unsigned long long)A.ctr.session_fences,
			(unsigned long long)B.ctr.session_fences,
			(unsigned long long)(after - o->timeouts));
}

/* The liveness every order must also give when nothing delays it: with the writes run in time
 * (not ORDER_LATE_FLUSH) and no abort of an open room, the room succeeds at every engine; and
 * with the writes run in time, no end is left to a timeout (a failure is told at once: a
 * failure push, a refused ROOM_META, an ABORT_ACK). */
static void
order_check_live(const struct order_run *o, enum order_mode mode)
{
	bool aborted = o->aborted;

	if (mode == ORDER_LATE_FLUSH)
		return;
	for (int k = 0; !aborted && k < o->ndec; k++)
		if (o->dec_end[k] != KVX_STATE_SUCCESS)
			fail_msg("%s: no abort, and decode %d's room ended %d", o->what, k,
				 o->dec_end[k]);
	for (int k = 0; !aborted && k < o->npre; k++)
		if (o->pre_end[k] != KVX_STATE_SUCCESS)
			fail_msg("%s: no abort, and prefill %d's room ended %d", o->what, k,
				 o->pre_end[k]);
	order_check_told_at_once(o, mode);
}

/* The steps of run o in the order ord, then order_end.  The two every order test has are
 * taken here: o->abort_op, decode 0's abort (an abort of a room whose open went counts in
 * o->aborted; before it, it is refused and changes nothing), and o->flush_op, the held writes
 * run (at once; with ORDER_LATE_FLUSH, after the time ran).  step(o, op, arg) sends any other
 * and returns its request's seq (0: the socket was full).  With ORDER_BETWEEN, the nodes step
 * until each is answered before the next goes. */
static void
order_steps(struct order_run *o, const int *ord, int nops, enum order_mode mode,
	    uint64_t (*step)(struct order_run *o, int op, void *arg), void *arg)
{
	struct kvx_eng_room_close m = {.room = o->id};

	for (int i = 0; i < nops; i++) {
		uint64_t seq = 1;

		if (ord[i] == o->abort_op) {
			seq = eng_send(o->dec[0], KVX_ENG_ROOM_ABORT, &m, sizeof(m), -1);
			o->aborted = o->open_seq[0] != 0 || o->open_r[0].status == 0;
		} else if (ord[i] == o->flush_op) {
			if (mode != ORDER_LATE_FLUSH)
				order_flush();
		} else {
			seq = step(o, ord[i], arg);
		}
		assert_true(seq != 0);
		for (int s = 0; mode != ORDER_AT_ONCE && s < 20; s++)
			order_step(o);
	}
	order_end(o, mode);
}

/* Every engine lets the room's id go before the next run. */
static void
order_close(struct order_run *o)
{
	struct kvx_eng_room_close m = {.room = o->id};

	for (int k = 0; k < o->ndec; k++)
		eng_send(o->dec[k], KVX_ENG_ROOM_CLOSE, &m, sizeof(m), -1);
	for (int k = 0; k < o->npre; k++)
		eng_send(o->pre[k], KVX_ENG_ROOM_CLOSE, &m, sizeof(m), -1);
	for (int s = 0; s < 20; s++) {
		order_step(o);
		fake_ms += 1000;
	}
}

/* run(arg, ord, mode, id) for every order ord of nops steps (Heap's algorithm) and every mode,
 * each with a room id of its own from id0 on; expect: the runs order_take lets go. */
static void
order_every(int nops, void (*run)(void *arg, const int *ord, enum order_mode mode, uint64_t id),
	    void *arg, uint64_t id0, int expect)
{
	int ord[8], c[8] = {0}, i = 0, perms = 1;
	uint64_t id = id0;

	assert_true(nops <= 8);
	order_cases = 0;
	for (int k = 0; k < nops; k++) {
		ord[k] = k;
		perms *= k + 1;
	}
	for (int mode = 0; mode <= ORDER_LATE_FLUSH; mode++)
		run(arg, ord, mode, id++);
	while (i < nops) {
		if (c[i] < i) {
			int j = i % 2 ? c[i] : 0, t = ord[j];

			ord[j] = ord[i];
			ord[i] = t;
			for (int mode = 0; mode <= ORDER_LATE_FLUSH; mode++)
				run(arg, ord, mode, id++);
			c[i]++;
			i = 0;
		} else {
			c[i++] = 0;
		}
	}
	assert_int_equal(id - id0, 3 * (uint64_t)perms);
	assert_int_equal(order_cases, expect);
	fake_vx_hold(false);
}

/* The engines and pools of an order test. */
struct order_set {
	struct eng *ea, *eb;
	int pa[2], pb[2];
	bool first_sent, last_sent; /* order_case: prefill's first and last chunks went */
	bool qp_fails; /* order_case: its fifth step fails prefill's QP instead of closing */
};

enum order_op { OP_OPEN, OP_CHUNK0, OP_CHUNK1, OP_ABORT, OP_PCLOSE, OP_FLUSH, OP_COUNT };
#define OP_FAIL OP_PCLOSE /* with qp_fails */

static const char *const order_fail_op_name[OP_COUNT] = {"open",  "chunk0", "chunk1(last)",
							 "abort", "fail",   "flush"};

static const char *const order_op_name[OP_COUNT] = {"open",  "chunk0",	      "chunk1(last)",
						    "abort", "prefill-close", "flush"};

/* OP_FAIL: prefill's QP to "a" fails (transport retries ran out) on the write it holds in flight,
 * or else on the next one. */
static uint64_t
order_fail_qp(void)
{
	struct kvxd_peer *p = peer_of(&B, "a");

	for (int l = 0; l < B.ncores * B.nrails; l++)
		if (p->qpc[l] && fake_vx_held(p->qpc[l]->qp))
			return fake_vx_fail_next(p->qpc[l]->qp, KVX_VX_WC_RETRY_EXC_ERR) == 0;
	fake_vx_fail_next_write(KVX_VX_WC_RETRY_EXC_ERR);
	return 1;
}

/* One room through six steps in the order ord: decode's engine opens it (4 pages from "b") and
 * aborts it; prefill's engine submits it as two chunks (pages 0-1, then 2-3, the last) and
 * closes it; and prefill's writes, held in flight from the start, run (flush; in
 * ORDER_LATE_FLUSH, only after the time ran).  Besides order_end's rules: SUCCESS at decode
 * means every destination page holds its source page (no holes), and SUCCESS at prefill means
 * decode did not fail it for missing data (it is SUCCESS there too, or decode aborted it).  With
 * set->qp_fails, prefill's QP fails (OP_FAIL) where it would close the room, the failed and
 * flushed writes land late, and no end may be left to a timeout. */
/* The steps of order_case other than the abort and the flush. */
static uint64_t
order_case_step(struct order_run *o, int op, void *arg)
{
	struct order_set *set = arg;
	struct kvx_eng_room_close m = {.room = o->id};
	uint64_t buf[ROOM_OPEN_BUF_WORDS];

	switch (op) {
	case OP_OPEN:
		return o->open_seq[0] = eng_send(o->dec[0], KVX_ENG_ROOM_OPEN, buf,
						 room_open_msg(buf, o->id, set->pa[0], 4), -1);
	case OP_CHUNK0:
		eng_chunk_x(o->pre[0], o->id, set->pb[0], 2, 0, false);
		set->first_sent = true;
		return 1;
	case OP_CHUNK1:
		eng_chunk_full(o->pre[0], o->id, 0, set->pb[0], 0, 2, 2, 0, 0, 0, true);
		set->last_sent = true;
		return 1;
	default:
		if (set->qp_fails) /* OP_FAIL */
			return order_fail_qp();
		/* OP_PCLOSE */
		o->closed_mid[0] = set->first_sent && !set->last_sent;
		return eng_send(o->pre[0], KVX_ENG_ROOM_CLOSE, &m, sizeof(m), -1);
	}
}

static void
order_case(void *arg, const int *ord, enum order_mode mode, uint64_t id)
{
	struct order_set *set = arg;
	struct order_run o = {.id = id,
			      .ndec = 1,
			      .npre = 1,
			      .dec = {set->ea},
			      .pre = {set->eb},
			      .abort_op = OP_ABORT,
			      .flush_op = OP_FLUSH,
			      .late = set->qp_fails,
			      .qp_fails = set->qp_fails};
	struct kvxd_pool *sp = pool_by_id(&B, set->pb[0]);

	if (!order_take(&o, ord, OP_COUNT, set->qp_fails ? order_fail_op_name : order_op_name,
			OP_CHUNK0, OP_CHUNK1, mode))
		return;
	o.dp[0] = pool_by_id(&A, set->pa[0]);
	fill_pool(sp, (uint8_t)id);
	set->first_sent = set->last_sent = false;
	fake_vx_keep_late(o.late);
	order_begin(&o);
	order_steps(&o, ord, OP_COUNT, mode, order_case_step, set);
	fake_vx_fail_next_write(0); /* a failure no write took (the room ended before its chunk) */
	fake_vx_keep_late(false);
	if (set->qp_fails)
		order_check_told_at_once(&o, mode);
	if (o.dec_end[0] == KVX_STATE_SUCCESS)
		for (uint32_t p = 0; p < 4; p++)
			if (memcmp(page_at(o.dp[0], 0, p), page_at(sp, 0, p % 2),
				   o.dp[0]->page_size))
				fail_msg("%s: SUCCESS with destination page %u not written", o.what,
					 p);
	if (o.pre_end[0] == KVX_STATE_SUCCESS && o.dec_end[0] != KVX_STATE_SUCCESS && !o.aborted)
		fail_msg("%s: SUCCESS at prefill, %d at decode, which did not abort", o.what,
			 o.dec_end[0]);
	order_close(&o);
}

/* DESIGN.md section 6: every engine is told how every room it touched ended, exactly once, in
 * every order of metadata, aborts and chunks; and section 5: no write lands in pages decode
 * released.  Every order of one room's six steps (decode's open and abort, prefill's two chunks
 * and close, its held writes run) that keeps prefill's chunks in its order, each with the nodes
 * stepped between requests and with the requests sent at once, and with the writes held past
 * every timeout (order_case). */
static void
test_every_order_of_a_rooms_requests(void **state)
{
	struct eng ea, eb;
	struct order_set set = {.ea = &ea, .eb = &eb};

	pair_with_engines(&ea, &eb, &set.pa[0], &set.pb[0]);
	/* prefill's chunks in its order: half of the 720; with the flush last, a sixth of those */
	order_every(OP_COUNT, order_case, &set, 9000, 2 * 360 + 60);
	eng_close(&ea);
	eng_close(&eb);
}

/* ---- every order of a fan-out room's requests ------------------------------------------- */

enum fan_op { FOP_OPEN0, FOP_OPEN1, FOP_CHUNK0, FOP_CHUNK1, FOP_ABORT0, FOP_FLUSH, FOP_COUNT };

static const char *const fan_op_name[FOP_COUNT] = {"open0",	   "open1",  "chunk0",
						   "chunk1(last)", "abort0", "flush"};

/* Whether decode rank k's destination pages hold what the fan-out room delivers there: bytes
 * [128 k, 128 k + 128) of source pages 4..6, in both buffers. */
static bool
fan_delivered(const struct order_run *o, const struct kvxd_pool *sp, uint32_t k)
{
	for (uint32_t b = 0; b < 2; b++)
		for (uint32_t i = 0; i < 3; i++)
			if (memcmp(page_at((struct kvxd_pool *)o->dp[k], b, fan_kv[i]),
				   page_at((struct kvxd_pool *)sp, b, 4 + i) + 128 * k, 128))
				return false;
	return true;
}

/* One fan-out room (one prefill rank feeding two decode ranks, each a half of every page)
 * through six steps in the order ord: decode's ranks open it, rank 0 aborts it, prefill's
 * engine submits it as two chunks (buffer 0, then buffer 1: the last, each to both
 * destinations), and prefill's writes, held in flight from the start, run.  Besides order_end's
 * rules and order_check_live's (an abort from one destination fails the room for both): SUCCESS
 * at a decode rank means its pages hold their halves of the source pages, and SUCCESS at
 * prefill means both ranks' SUCCESS, unless rank 0 aborted. */
/* The steps of fan_case other than the abort and the flush. */
static uint64_t
fan_case_step(struct order_run *o, int op, void *arg)
{
	struct order_set *set = arg;
	static uint64_t buf[KVX_ENG_MSG_MAX / 8];
	int k = op == FOP_OPEN1;

	switch (op) {
	case FOP_OPEN0:
	case FOP_OPEN1:
		return o->open_seq[k] =
			       eng_send(o->dec[k], KVX_ENG_ROOM_OPEN, buf,
					fan_open_msg(buf, o->id, set->pa[k], (uint32_t)k), -1);
	case FOP_CHUNK0:
		eng_chunk_fan(o->pre[0], o->id, set->pb[0], 4, 3, 0, 2, false);
		return 1;
	default: /* FOP_CHUNK1 */
		eng_chunk_fan(o->pre[0], o->id, set->pb[0], 4, 3, 1, 2, true);
		return 1;
	}
}

static void
fan_case(void *arg, const int *ord, enum order_mode mode, uint64_t id)
{
	struct order_set *set = arg;
	struct order_run o = {.id = id,
			      .ndec = 2,
			      .npre = 1,
			      .dec = {&set->ea[0], &set->ea[1]},
			      .pre = {set->eb},
			      .abort_op = FOP_ABORT0,
			      .flush_op = FOP_FLUSH};
	struct kvxd_pool *sp = pool_by_id(&B, set->pb[0]);

	if (!order_take(&o, ord, FOP_COUNT, fan_op_name, FOP_CHUNK0, FOP_CHUNK1, mode))
		return;
	fill_pool(sp, (uint8_t)id);
	for (int k = 0; k < 2; k++)
		o.dp[k] = pool_by_id(&A, set->pa[k]);
	order_begin(&o);
	order_steps(&o, ord, FOP_COUNT, mode, fan_case_step, set);
	for (uint32_t k = 0; k < 2; k++)
		if (o.dec_end[k] == KVX_STATE_SUCCESS && !fan_delivered(&o, sp, k))
			fail_msg("%s: SUCCESS at decode %u without its pages", o.what, k);
	if (o.pre_end[0] == KVX_STATE_SUCCESS && !o.aborted &&
	    (o.dec_end[0] != KVX_STATE_SUCCESS || o.dec_end[1] != KVX_STATE_SUCCESS))
		fail_msg("%s: SUCCESS at prefill, %d and %d at decode, which did not abort", o.what,
			 o.dec_end[0], o.dec_end[1]);
	order_check_live(&o, mode);
	order_close(&o);
}

/* DESIGN.md section 5 when the wire fails: the rules of test_every_order_of_a_rooms_requests
 * (each engine told the end once, no SUCCESS with holes, nothing told by a timeout) in every
 * order of decode's open and abort, prefill's two chunks, its held writes run, and a failure of
 * prefill's QP (its write in flight fails, or the next one it posts: transport retries run out;
 * the session is replaced).  The failed and flushed writes' packets are still in the network and
 * land after every end was told, where a QP still takes them: no byte of decode's pool changes
 * after RELEASED. */
static void
test_every_order_of_a_rooms_requests_its_write_failing(void **state)
{
	struct eng ea, eb;
	struct order_set set = {.ea = &ea, .eb = &eb, .qp_fails = true};

	pair_with_engines(&ea, &eb, &set.pa[0], &set.pb[0]);
	order_every(OP_COUNT, order_case, &set, 39000, 2 * 360 + 60);
	eng_close(&ea);
	eng_close(&eb);
}

/* The same rules as test_every_order_of_a_rooms_requests for a room that one prefill rank
 * feeds to two decode ranks (TP fan-out), where the second rank's metadata waits (parked) until
 * the engine's first chunk says how many destinations the room has: every order of both opens,
 * one rank's abort, prefill's two chunks (in order) and its held writes run, one at a time, at
 * once, and with the writes held past every timeout; and order_check_live's. */
static void
test_every_order_of_a_fan_out_rooms_requests(void **state)
{
	struct eng ea[2], eb;
	struct order_set set = {.ea = ea, .eb = &eb};

	fan_out_engines(ea, &eb, set.pa, &set.pb[0]);
	order_every(FOP_COUNT, fan_case, &set, 19000, 2 * 360 + 60);
	eng_close(&ea[0]);
	eng_close(&ea[1]);
	eng_close(&eb);
}

/* ---- every order of a fan-in room's requests -------------------------------------------- */

enum fin_op { IOP_OPEN, IOP_R0, IOP_R1_0, IOP_R1_1, IOP_ABORT, IOP_FLUSH, IOP_COUNT };

static const char *const fin_op_name[IOP_COUNT] = {
	"open", "r0(last)", "r1-chunk0", "r1-chunk1(last)", "abort", "flush"};

static const uint32_t fin_kv[3] = {9, 2, 14};

/* Decode's open of a fan-in room: pages fin_kv of pool (256-byte pages), fed by ranks 0 and 1
 * of "b", each its 128-byte pages into its half of every page. */
static size_t
fin_open_msg(uint64_t buf[KVX_ENG_MSG_MAX / 8], uint64_t id, int pool)
{
	const uint32_t *pages[1] = {fin_kv}, np[1] = {3};
	struct kvx_source src[2] = {
		{.node = "b", .rank = 0, .slice = {{.dst_offset = 0, .length = 128}}},
		{.node = "b", .rank = 1, .slice = {{.dst_offset = 128, .length = 128}}},
	};

	return open_shape_msg(buf, id, 1, &pool, np, pages, 2, src);
}

/* One fan-in room (prefill ranks 0 and 1 feeding one decode rank, each half of every page: TP
 * fan-in) through six steps in the order ord: decode opens it and aborts it, rank 0 submits its
 * part as one chunk (both buffers, its last), rank 1 as two (buffer 0, then buffer 1: its last),
 * and prefill's writes, held in flight from the start, run.  Besides order_end's rules and
 * order_check_live's: SUCCESS at decode means both halves of every page of both buffers hold
 * their ranks' source pages, and SUCCESS at a prefill rank without decode's abort means SUCCESS at
 * decode. */
/* The steps of fin_case other than the abort and the flush. */
static uint64_t
fin_case_step(struct order_run *o, int op, void *arg)
{
	struct order_set *set = arg;
	static uint64_t buf[KVX_ENG_MSG_MAX / 8];

	switch (op) {
	case IOP_OPEN:
		return o->open_seq[0] = eng_send(o->dec[0], KVX_ENG_ROOM_OPEN, buf,
						 fin_open_msg(buf, o->id, set->pa[0]), -1);
	case IOP_R0:
		eng_chunk_shape(o->pre[0], o->id, 0, set->pb[0], 4, 3, 0, 0, 2, true);
		return 1;
	case IOP_R1_0:
		eng_chunk_shape(o->pre[1], o->id, 0, set->pb[1], 4, 3, 0, 0, 1, false);
		return 1;
	default: /* IOP_R1_1 */
		eng_chunk_shape(o->pre[1], o->id, 0, set->pb[1], 4, 3, 0, 1, 1, true);
		return 1;
	}
}

static void
fin_case(void *arg, const int *ord, enum order_mode mode, uint64_t id)
{
	struct order_set *set = arg;
	struct order_run o = {.id = id,
			      .ndec = 1,
			      .npre = 2,
			      .dec = {set->ea},
			      .pre = {&set->eb[0], &set->eb[1]},
			      .abort_op = IOP_ABORT,
			      .flush_op = IOP_FLUSH};
	struct kvxd_pool *sp[2];

	if (!order_take(&o, ord, IOP_COUNT, fin_op_name, IOP_R1_0, IOP_R1_1, mode))
		return;
	for (int k = 0; k < 2; k++) {
		sp[k] = pool_by_id(&B, set->pb[k]);
		fill_pool(sp[k], (uint8_t)(id + (uint64_t)k));
	}
	o.dp[0] = pool_by_id(&A, set->pa[0]);
	order_begin(&o);
	order_steps(&o, ord, IOP_COUNT, mode, fin_case_step, set);
	if (o.dec_end[0] == KVX_STATE_SUCCESS)
		for (uint32_t b = 0; b < 2; b++)
			for (uint32_t i = 0; i < 3; i++)
				for (uint32_t k = 0; k < 2; k++)
					if (memcmp(page_at(o.dp[0], b, fin_kv[i]) + 128 * k,
						   page_at(sp[k], b, 4 + i), 128))
						fail_msg("%s: SUCCESS with page %u of buffer %u "
							 "missing rank %u's half",
							 o.what, fin_kv[i], b, k);
	for (int k = 0; k < 2; k++)
		if (o.pre_end[k] == KVX_STATE_SUCCESS && o.dec_end[0] != KVX_STATE_SUCCESS &&
		    !o.aborted)
			fail_msg("%s: SUCCESS at prefill %d, %d at decode, which did not abort",
				 o.what, k, o.dec_end[0]);
	order_check_live(&o, mode);
	order_close(&o);
}

/* The same rules for a room that two prefill ranks feed into one decode rank (TP fan-in: a
 * room succeeds at decode only when every source delivered; an abort is acknowledged by each
 * source after its drain): every order of decode's open and abort, rank 0's chunk, rank 1's two
 * chunks (in order) and the held writes run, one at a time, at once, and with the writes held
 * past every timeout. */
static void
test_every_order_of_a_fan_in_rooms_requests(void **state)
{
	struct eng ea, eb[2];
	struct order_set set = {.ea = &ea, .eb = eb};

	assert_int_equal(listen_on(&A), 0);
	assert_int_equal(listen_on(&B), 0);
	kvxd_peer_admin(&A, "b", "resume");
	PUMP_UNTIL(A.peers[0].state == KVXD_PEER_READY && B.peers[0].state == KVXD_PEER_READY);
	eng_connect(&ea, &A);
	assert_int_equal(eng_hello_rank(&ea, 0), 0);
	set.pa[0] = eng_pool_id(&ea, 256, 16, 2);
	for (uint32_t k = 0; k < 2; k++) {
		eng_connect(&eb[k], &B);
		assert_int_equal(eng_hello_rank(&eb[k], k), 0);
		set.pb[k] = eng_pool_id(&eb[k], 128, 16, 2);
	}
	order_every(IOP_COUNT, fin_case, &set, 29000, 2 * 360 + 60);
	eng_close(&ea);
	eng_close(&eb[0]);
	eng_close(&eb[1]);
}

int
main(void)
{
#define T(f) cmocka_unit_test_setup_teardown(f, setup, teardown)
	const struct CMUnitTest tests[] = {
		T(test_pool_registration_does_not_stall_the_control_core),
		T(test_pool_deregistration_does_not_stall_the_control_core),
		T(test_pool_registrations_side_by_side),
		cmocka_unit_test_setup_teardown(
			test_failed_registration_answered_once_its_pool_is_gone, setup_rails,
			teardown),
		cmocka_unit_test_setup_teardown(test_prefill_engine_told_once_after_early_abort,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_prefill_engine_loss_propagates, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_prefill_pool_kept_while_its_writes_fly, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_refused_chunk_fails_its_room, setup, teardown),
		cmocka_unit_test_setup_teardown(test_refused_chunk_flood_fails_its_room_once, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_refused_first_chunk_keeps_its_room_failed,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_full_inbox_holds_the_rings, setup, teardown),
		cmocka_unit_test_setup_teardown(test_held_ring_of_a_gone_engine_is_kept, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_held_rings_take_turns, setup, teardown),
		cmocka_unit_test_setup_teardown(test_full_inbox_holds_the_socket, setup, teardown),
		cmocka_unit_test_setup_teardown(test_held_socket_of_a_gone_engine_is_kept, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_held_socket_of_a_half_closed_engine_is_kept,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_held_socket_takes_turns_with_rings, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_rings_take_turns_with_a_held_socket, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_requests_for_no_core_do_not_wait_for_the_cores,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_chunk_after_the_last_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(test_chunk_for_a_closed_draining_room_told_busy,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_chunks_held_per_engine_bounded, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_refusals_past_twice_the_cap_close_the_session,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_extra_descriptors_are_closed, setup, teardown),
		cmocka_unit_test_setup_teardown(test_refused_session_not_reading_is_closed, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_own_reuse_waits_for_the_prefill_engines_close,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_truncated_chunk_closes_the_session, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_room_reading_too_many_pools_fails, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_decode_engine_loss_propagates, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_shutdown_with_an_engine_holding_rooms, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_chunks_warm_cache_no_malloc, setup, teardown),
		T(test_admin_pages),
		T(test_admin_command_too_long_is_refused),
		T(test_listen_keeps_a_regular_file),
		T(test_listen_keeps_a_symlink),
		T(test_listen_does_not_steal_a_live_socket),
		T(test_listen_replaces_its_own_stale_socket),
		T(test_listen_keeps_a_foreign_stale_socket),
		T(test_listen_mode),
		T(test_unlisten_removes_only_its_own_socket),
		T(test_listen_refuses_an_unknown_admin_group),
		cmocka_unit_test(test_credential_rules),
		cmocka_unit_test(test_credentials_read_from_a_socket),
		T(test_accept_checks_the_full_group_list),
		T(test_operators_keep_their_slots),
		T(test_second_hello_is_refused),
		T(test_operator_commands_need_an_admin),
		T(test_operator_commands_need_an_admin_unprivileged),
		T(test_admin_group_member_may),
		T(test_an_engine_that_never_reads_is_disconnected),
		T(test_a_slow_reader_gets_everything_in_order),
		T(test_a_burst_of_room_ends_keeps_the_session),
		T(test_rooms_lists_only_the_engines_own),
		T(test_rank_rooms_are_the_first_users),
		T(test_rank_users_hold_their_ranks),
		T(test_rank_meta_room_not_taken_by_another_user),
		T(test_commands_of_a_gone_session_are_not_run),
		T(test_session_ids_go_round),
		T(test_sessions_above_a_closed_slot_are_served),
		T(test_pools_above_an_unregistered_slot_are_found),
		T(test_rings_carry_requests_and_replies),
		T(test_operator_commands_take_a_pass_each),
		T(test_rings_engine_cannot_block_kvxd),
		T(test_rings_rearm_one_wake_per_drain),
		T(test_spilled_state_is_not_told_after_the_end),
		T(test_core_ring_prefill_meta_first_takes_the_core_ring),
		T(test_rings_wake_end_closed_ends_the_session),
		T(test_core_ring_tells_decode_success_once),
		T(test_full_core_ring_loses_no_success),
		T(test_corrupt_core_ring_ends_only_its_session),
		T(test_core_ring_outlives_no_session),
		T(test_core_ring_keeps_an_aborted_room_in_order),
		T(test_core_ring_success_wakes_no_control_core),
		T(test_core_ring_failure_wakes_the_control_core),
		T(test_core_ring_rearm_one_wake_per_drain),
		T(test_core_ring_wake_ends),
		T(test_wake_ends_open_wakes_no_polling_core),
		T(test_open_wakes_the_polling_core),
		T(test_event_ring_wake_ends),
		T(test_core_ring_tells_prefill_events),
		T(test_core_ring_prefill_meta_first_keeps_order),
		T(test_prefill_state_from_before_the_end_is_not_told_after_it),
		T(test_prefill_state_from_before_the_end_without_core_rings),
		T(test_corrupt_submission_ring_ends_only_its_session),
		T(test_full_event_ring_loses_nothing),
		T(test_full_event_ring_waits_for_the_engine),
		T(test_requests_sent_before_a_reset_are_taken),
		T(test_ring_requests_before_a_close_are_taken),
		T(test_an_event_is_sent_once),
		T(test_cap_sessions_per_uid),
		T(test_cap_pools_per_engine),
		T(test_cap_pools_per_uid),
		T(test_cap_pinned_bytes_per_uid),
		T(test_cap_rooms_per_engine_decode),
		T(test_cap_rooms_per_engine_prefill),
		T(test_cap_rooms_per_uid),
		T(test_refused_rooms_bounded_per_uid),
		T(test_pool_geometry_overflow_refused),
		T(test_pool_of_a_disk_file_refused),
		cmocka_unit_test_setup_teardown(test_pool_on_huge_pages_unmapped_whole, setup,
						teardown_huge),
		T(test_chunk_destination_range_checked),
		cmocka_unit_test_setup_teardown(test_pool_half_deregistered_not_taken, setup_rails,
						teardown),
		T(test_ranks_share_a_room_id),
		T(test_head_slices_aux_region_layer_by_layer),
		T(test_bad_shapes_refused),
		T(test_abort_acks_are_per_source_rank),
		T(test_fan_out_to_two_decode_ranks),
		T(test_fan_out_abort_from_one_fails_all),
		T(test_fan_out_parked_endpoint_told_when_the_room_fails),
		T(test_fan_out_parked_endpoint_abort_fails_all),
		T(test_fan_out_parked_endpoint_abort_beyond_ndest),
		T(test_fan_out_parked_endpoint_stale_abort_ignored),
		T(test_every_order_of_a_rooms_requests),
		T(test_every_order_of_a_fan_out_rooms_requests),
		T(test_every_order_of_a_fan_in_rooms_requests),
		T(test_every_order_of_a_rooms_requests_its_write_failing),
	};
#undef T

	/* KVX_TEST_ONLY=NAME runs the tests whose names match (cmocka's filter: * and ?) */
	if (getenv("KVX_TEST_ONLY"))
		cmocka_set_test_filter(getenv("KVX_TEST_ONLY"));
	return cmocka_run_group_tests(tests, NULL, NULL);
}
