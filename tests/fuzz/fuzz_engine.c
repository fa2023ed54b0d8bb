/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target for the engine protocol (core/engine_proto.h).  core/ has no decoder for it:
 * every request is validated by control/engine.c as it handles it, so this target drives that
 * code the way an engine does, through a SOCK_SEQPACKET pair whose kvxd end is registered as an
 * engine session of node "a" (tests/unit/nodes_harness.h: nodes "a" and "b" on the fake verbs,
 * not connected until a request says "peer b resume").
 *
 * The input is a list of records, each an op byte (low 2 bits: kind, high 6 bits: arg):
 *   0 SEND    u16 length (LE) + that many bytes, sent as one datagram; arg bit 0 sets hdr.len
 *             to the datagram's length, bit 1 attaches a 1 MiB memfd (SCM_RIGHTS)
 *   1 PUMP    arg + 1 iterations of the polling cores and control loops
 *   2 CLOCK   the fake clock advances by 20 * (arg + 1)^2 ms, then one iteration
 *   3 RECONNECT  the engine closes its socket and a new session is opened
 * After every record, what kvxd sent the engine is read and checked: every datagram is a
 * well-formed REPLY or EVENT, a REPLY's status is 0 or -errno, and no room is RELEASED twice in
 * one generation.  Every input starts from fresh nodes and ends with every room, pool and QP
 * gone (nodes_teardown() checks the fake verbs' live objects).
 */
#include <errno.h>
#include <stdbool.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include "cmocka_shim.h"
#include "control/kvxd.h"
#include "core/engine_proto.h"
#include "core/fault.h"
#include "core/log.h"
#include "fuzz_rcu.h"

#include "nodes_harness.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

#define A N[0]
#define MAX_RECORDS 64
#define POOL_BYTES (1u << 20)
#define MAX_RELEASED 256

static int cli = -1;	 /* the engine's end of the session */
static int pool_fd = -1; /* what POOL_REG attaches */

/* (room, generation) pairs the engine saw RELEASED for, in this input */
static struct {
	uint64_t room;
	uint32_t gen;
} released[MAX_RELEASED];
static int nreleased;

/* control/engine.c's kvxd_engine_send_event() takes send()'s byte count for a failure: an
 * event it has just sent is queued and sent once more whenever errno still holds an EAGAIN
 * (tests/fuzz/crashes/README.md).  Until that is fixed, the copy of a RELEASED event is only
 * counted here, unless KVX_FUZZ_STRICT is set; a second release of a room is then caught by
 * the counters (every release ends one abort). */
static bool strict;
static unsigned long dup_events;

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	kvx_log_init("fuzz_engine", -1); /* silent */
	strict = getenv("KVX_FUZZ_STRICT") != NULL;
	rcu_register_thread();
	pool_fd = memfd_create("fuzz_engine.pool", MFD_CLOEXEC);
	assert_true(pool_fd >= 0);
	assert_int_equal(ftruncate(pool_fd, POOL_BYTES), 0);
	return 0;
}

static void
engine_connect(void)
{
	struct kvxd_engine *e;
	int sv[2], slot = -1;

	for (int i = 0; i < KVXD_MAX_ENGINES; i++)
		if (!A.engines[i]) {
			slot = i;
			break;
		}
	if (slot < 0)
		return;
	assert_int_equal(socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv),
			 0);
	e = calloc(1, sizeof(*e));
	assert_non_null(e);
	/* what kvxd_engine_accept() does for a connection that passed its credential check */
	e->id = ++A.next_engine_id;
	e->fd = sv[0];
	e->uid = getuid();
	e->ev = (struct kvxd_fd){.kind = KVXD_FD_ENGINE, .ptr = e};
	A.engines[slot] = e;
	assert_int_equal(kvxd_epoll_add(&A, sv[0], &e->ev, EPOLLIN), 0);
	cli = sv[1];
}

static void
check_released(uint64_t room, uint32_t gen)
{
	for (int i = 0; i < nreleased; i++) {
		if (released[i].room != room || released[i].gen != gen)
			continue;
		if (strict)
			fail_msg("room %llu generation %u RELEASED twice", (unsigned long long)room,
				 gen);
		dup_events++;
		return;
	}
	if (nreleased < MAX_RELEASED)
		released[nreleased++] = (typeof(released[0])){.room = room, .gen = gen};
}

/* Read and check everything kvxd sent the engine. */
static void
engine_read(void)
{
	static uint8_t buf[KVX_ENG_MSG_MAX + 1];
	const struct kvx_eng_hdr *h = (const void *)buf;
	ssize_t n;

	if (cli < 0)
		return;
	while ((n = recv(cli, buf, sizeof(buf), MSG_DONTWAIT | MSG_TRUNC)) > 0) {
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
			assert_true(ev->ev.error <= 0);
			if (ev->ev.state == KVX_ROOM_RELEASED)
				check_released(ev->ev.room, ev->ev.generation);
		}
	}
}

static void
engine_disconnect(void)
{
	if (cli < 0)
		return;
	close(cli);
	cli = -1;
	pump_once(); /* kvxd reads the end of the stream and closes its session */
}

static void
pump(int n)
{
	for (int i = 0; i < n; i++) {
		pump_once();
		fuzz_rcu_flush();
		engine_read();
		for (int k = 0; k < nnodes; k++)
			assert_true(N[k].ctr.releases <= N[k].ctr.aborts);
	}
}

static void
engine_send(const uint8_t *msg, size_t len, unsigned int arg)
{
	static uint8_t buf[KVX_ENG_MSG_MAX];
	union {
		char c[CMSG_SPACE(sizeof(int))];
		struct cmsghdr align;
	} cbuf;
	struct iovec iov = {.iov_base = buf, .iov_len = len};
	struct msghdr mh = {.msg_iov = &iov, .msg_iovlen = 1};

	if (cli < 0)
		return;
	memcpy(buf, msg, len);
	if ((arg & 1) && len >= sizeof(struct kvx_eng_hdr))
		((struct kvx_eng_hdr *)buf)->len = (uint32_t)len;
	if (arg & 2) {
		struct cmsghdr *c;

		memset(&cbuf, 0, sizeof(cbuf));
		mh.msg_control = cbuf.c;
		mh.msg_controllen = sizeof(cbuf.c);
		c = CMSG_FIRSTHDR(&mh);
		c->cmsg_level = SOL_SOCKET;
		c->cmsg_type = SCM_RIGHTS;
		c->cmsg_len = CMSG_LEN(sizeof(int));
		memcpy(CMSG_DATA(c), &pool_fd, sizeof(int));
	}
	/* a full socket (kvxd stopped reading) or an empty datagram is the engine's problem */
	(void)sendmsg(cli, &mh, MSG_DONTWAIT | MSG_NOSIGNAL);
	pump(2);
}

static int
first_room(struct kvx_room_table_node *n, void *arg)
{
	struct kvxd_room *r = caa_container_of(n, struct kvxd_room, by_id);

	if (r->removing)
		return 0;
	*(struct kvxd_room **)arg = r;
	return 1;
}

/* Every room goes (they hold pool references), then every pool, then the nodes. */
static void
world_teardown(void)
{
	engine_disconnect();
	for (int i = 0; i < nnodes; i++) {
		struct kvxd_room *r;

		for (int guard = 0; guard < 100000; guard++) {
			r = NULL;
			rcu_read_lock();
			kvx_room_table_for_each(N[i].by_id, first_room, &r);
			rcu_read_unlock();
			if (!r)
				break;
			kvxd_room_remove(&N[i], r);
			pump_once();
		}
		if (r)
			fail_msg("node %d: rooms are not removable (%s)", i, nodes_state());
	}
	pump(4);
	rcu_barrier(); /* rooms freed: their pool references dropped */
	for (int i = 0; i < nnodes; i++) {
		kvxd_engine_close_all(&N[i]);
		for (int k = 0; k < KVXD_MAX_POOLS; k++)
			assert_null(N[i].pools[k]);
	}
	nodes_teardown();
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *const names[] = {"a", "b"};
	size_t off = 0;

	nodes_setup(2, names);
	nreleased = 0;
	engine_connect();
	for (int rec = 0; rec < MAX_RECORDS && off < size; rec++) {
		uint8_t op = data[off++];
		unsigned int arg = op >> 2;
		size_t len;

		switch (op & 3) {
		case 0:
			if (size - off < 2) {
				off = size;
				break;
			}
			len = data[off] | (size_t)data[off + 1] << 8;
			off += 2;
			if (len > size - off)
				len = size - off;
			engine_send(data + off, len, arg);
			off += len;
			break;
		case 1:
			pump((int)arg + 1);
			break;
		case 2:
			fake_ms += 20ull * (arg + 1) * (arg + 1);
			pump(1);
			break;
		case 3:
			engine_disconnect();
			engine_connect();
			break;
		}
	}
	world_teardown();
	return 0;
}
