/* SPDX-License-Identifier: Apache-2.0 */
/*
 * An engine session for the fuzz targets that run control cores: a SOCK_SEQPACKET connection
 * to the node's engine socket (kvxd_engine_listen() on a path in a private temporary directory,
 * accepted by kvxd_engine_accept() with its credential check and caps; the target runs as root
 * or as kvxd's uid, so it is an admin), which the target writes requests to and reads every
 * reply and event from, checking each:
 *  - a datagram is a REPLY or an EVENT, its hdr.len its size, its flags 0;
 *  - a REPLY's text fits it and its status is 0 or -errno;
 *  - an EVENT's reason is NUL-terminated and its error 0 or -errno (include/kvx/kvx.h);
 *  - no room is RELEASED twice in one generation.
 * Include after control/kvxd.h and cmocka_shim.h.  Thread: the target's one thread.
 */
#ifndef KVX_TESTS_FUZZ_SESSION_H
#define KVX_TESTS_FUZZ_SESSION_H

#include <stdbool.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include "core/engine_proto.h"

#define FUZZ_SESSION_RELEASED_MAX 256
#define FUZZ_SESSION_POOL_BYTES (1u << 20)

struct fuzz_session {
	struct kvxd *d;
	int cli; /* the engine's end; -1: none */
	int id;	 /* kvxd's engine id */
	uint64_t seq;
	/* (room, generation) pairs this engine saw RELEASED, since fuzz_session_reset() */
	struct {
		uint64_t room;
		uint32_t gen;
	} released[FUZZ_SESSION_RELEASED_MAX];
	int nreleased;
};

static int fuzz_pool_fd = -1; /* what a request with an fd attaches: a 1 MiB memfd */
static char fuzz_sock_dir[64];

static void
fuzz_sock_dir_remove(void)
{
	rmdir(fuzz_sock_dir); /* empty: every node's socket went with its teardown */
}

static __attribute__((unused)) void
fuzz_session_init_once(void)
{
	fuzz_pool_fd = memfd_create("fuzz.pool", MFD_CLOEXEC);
	assert_true(fuzz_pool_fd >= 0);
	assert_int_equal(ftruncate(fuzz_pool_fd, FUZZ_SESSION_POOL_BYTES), 0);
	snprintf(fuzz_sock_dir, sizeof(fuzz_sock_dir), "/tmp/kvx-fuzz-XXXXXX");
	assert_non_null(mkdtemp(fuzz_sock_dir));
	atexit(fuzz_sock_dir_remove);
}

/* The node's engine socket, as main() sets it up (the caps are the config's defaults). */
static __attribute__((unused)) void
fuzz_engine_listen(struct kvxd *d)
{
	snprintf(d->cfg.socket_path, sizeof(d->cfg.socket_path), "%s/%s.sock", fuzz_sock_dir,
		 d->cfg.name);
	d->cfg.socket_mode = 0660;
	d->cfg.max_sessions_per_uid = 16;
	d->cfg.max_pools_per_engine = 16;
	d->cfg.max_pools_per_uid = 128;
	d->cfg.max_rooms_per_uid = 131072;
	d->cfg.max_rooms_per_engine = 65536;
	d->cfg.max_pinned_mb_per_uid = 65536;
	d->cfg.reply_queue_kb = 1024;
	assert_int_equal(kvxd_engine_listen(d), 0);
	d->eng_ev = (struct kvxd_fd){.kind = KVXD_FD_ENG_LISTEN};
	assert_int_equal(kvxd_epoll_add(d, d->eng_fd, &d->eng_ev, EPOLLIN), 0);
}

static __attribute__((unused)) void
fuzz_engine_unlisten(struct kvxd *d)
{
	if (d->eng_fd >= 0)
		epoll_ctl(d->epfd, EPOLL_CTL_DEL, d->eng_fd, NULL);
	kvxd_engine_unlisten(d);
}

static __attribute__((unused)) void
fuzz_session_reset(struct fuzz_session *s, struct kvxd *d)
{
	s->d = d;
	s->cli = -1;
	s->id = -1;
	s->seq = 0;
	s->nreleased = 0;
}

/* Connect to s->d's engine socket; kvxd accepts it on its next loop iteration (as engine
 * next_engine_id + 1, or not at all when it refuses). */
static __attribute__((unused)) void
fuzz_session_connect(struct fuzz_session *s)
{
	struct sockaddr_un sa = {.sun_family = AF_UNIX};
	int fd = socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

	assert_true(fd >= 0);
	snprintf(sa.sun_path, sizeof(sa.sun_path), "%s", s->d->cfg.socket_path);
	assert_int_equal(connect(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	s->cli = fd;
	s->id = s->d->next_engine_id + 1;
}

/* The engine closes its end; kvxd notices on its next loop iteration. */
static __attribute__((unused)) void
fuzz_session_close(struct fuzz_session *s)
{
	if (s->cli >= 0)
		close(s->cli);
	s->cli = -1;
}

static __attribute__((unused)) void
fuzz_session_released(struct fuzz_session *s, uint64_t room, uint32_t gen)
{
	for (int i = 0; i < s->nreleased; i++)
		if (s->released[i].room == room && s->released[i].gen == gen)
			fail_msg("engine %d: room %llu generation %u RELEASED twice", s->id,
				 (unsigned long long)room, gen);
	if (s->nreleased < FUZZ_SESSION_RELEASED_MAX) {
		s->released[s->nreleased].room = room;
		s->released[s->nreleased].gen = gen;
		s->nreleased++;
	}
}

/* Read and check everything kvxd sent this engine. */
static __attribute__((unused)) void
fuzz_session_read(struct fuzz_session *s)
{
	static uint8_t buf[KVX_ENG_MSG_MAX + 1];
	const struct kvx_eng_hdr *h = (const void *)buf;
	ssize_t n;

	if (s->cli < 0)
		return;
	while ((n = recv(s->cli, buf, sizeof(buf), MSG_DONTWAIT | MSG_TRUNC)) > 0) {
		assert_true((size_t)n <= KVX_ENG_MSG_MAX);
		assert_true((size_t)n >= sizeof(*h));
		assert_int_equal(h->len, n);
		assert_int_equal(h->flags, 0);
		if (h->type == KVX_ENG_REPLY) {
			const struct kvx_eng_reply *r = (const void *)buf;

			assert_true((size_t)n >= sizeof(*r));
			assert_true(r->text_len <= KVX_ENG_TEXT_MAX);
			assert_int_equal(sizeof(*r) + r->text_len, n);
			assert_true(r->status <= 0 && r->status > -4096);
		} else {
			const struct kvx_eng_event *ev = (const void *)buf;

			assert_int_equal(h->type, KVX_ENG_EVENT);
			assert_int_equal(n, sizeof(*ev));
			assert_true(memchr(ev->ev.reason, '\0', sizeof(ev->ev.reason)) != NULL);
			assert_true(ev->ev.error <= 0 && ev->ev.error > -4096);
			if (ev->ev.state == KVX_ROOM_RELEASED)
				fuzz_session_released(s, ev->ev.room, ev->ev.generation);
		}
	}
}

/* Send one datagram as the engine, with the pool memfd attached when fd is true.  A full
 * socket (kvxd stopped reading) is the engine's problem: the datagram is dropped. */
static __attribute__((unused)) void
fuzz_session_send(struct fuzz_session *s, const void *msg, size_t len, bool fd)
{
	union {
		char c[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} cbuf;
	struct iovec iov = {.iov_base = (void *)msg, .iov_len = len};
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};

	if (s->cli < 0)
		return;
	if (fd) {
		struct cmsghdr *c;

		memset(&cbuf, 0, sizeof(cbuf));
		mh.msg_control = cbuf.c;
		mh.msg_controllen = sizeof(cbuf.c);
		c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &fuzz_pool_fd, sizeof(int));
	}
	(void)sendmsg(s->cli, &mh, MSG_DONTWAIT | MSG_NOSIGNAL);
}

/* A well-formed request: the header is filled in (type, len, the next seq). */
static __attribute__((unused)) void
fuzz_session_request(struct fuzz_session *s, void *msg, size_t len, uint16_t type, bool fd)
{
	struct kvx_eng_hdr *h = msg;

	*h = (struct kvx_eng_hdr){.type = type, .len = (uint32_t)len, .seq = ++s->seq};
	fuzz_session_send(s, msg, len, fd);
}

#endif /* KVX_TESTS_FUZZ_SESSION_H */
