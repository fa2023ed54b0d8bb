/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Stateful libFuzzer target: a hostile peer against kvxd's control cores.  Two nodes of
 * tests/unit/nodes_harness.h on the fake verbs -- decode "a" dials prefill "b", both with the
 * harness's shared secret -- bring their session to READY through the real handshake (HELLO,
 * HELLO_ACK, AUTH, QP_INFO, QP_READY).  Each node has an engine session (fuzz_session.h) with a
 * registered pool.  The input (fuzz_peer_ops.h) is then a sequence of:
 *  - wire frames (or any bytes) written into the connection as if the other node sent them, at
 *    frame boundaries of what that node itself sends: a hostile, authenticated peer;
 *  - engine requests: "a" opens and aborts rooms from source "b", "b" submits chunks, both
 *    close them (through control/engine.c, like libkvx);
 *  - fake verbs actions: writes held in flight, completed, or failed with an error completion;
 *  - steps of the polling cores and control loops, and jumps of the fake clock (handshake,
 *    waiting, release timeouts and fences).
 * After every step: what each engine got is well-formed and no room is RELEASED twice in a
 * generation (fuzz_session.h); no node released more rooms than it aborted; journals, live QP
 * contexts and the fake verbs' live QPs stay bounded.  At the end every room, pool and QP must
 * be gone (nodes_teardown()).  ASan and UBSan watch the control library throughout.
 * FUZZ_PEER_TRACE=1 in the environment prints each input's counters and peer states.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cmocka_shim.h"
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
#include "core/log.h"
#include "core/wire.h"
#include "fuzz_peer_ops.h"
#include "fuzz_rcu.h"
#include "fuzz_session.h"

#include "nodes_harness.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

#define A N[0]
#define B N[1]
#define MAX_RECORDS 96
#define POOL_PAGES 16
#define PAGE_SIZE 256
#define MAX_LIVE_QPS 16 /* two nodes, one core: a few sessions being replaced at most */

static struct fuzz_session sa, sb; /* the engines of a (decode) and b (prefill) */
static uint64_t last_room;	   /* the last room a opened (0: none) */

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	kvx_log_init("fuzz_peer", -1); /* silent */
	rcu_register_thread();
	fuzz_session_init_once();
	return 0;
}

static void
check_invariants(void)
{
	for (int i = 0; i < nnodes; i++) {
		struct kvxd *d = &N[i];

		assert_true(d->ctr.releases <= d->ctr.aborts);
		assert_true(d->live_qpcs >= 0 && d->live_qpcs <= MAX_LIVE_QPS);
		for (int k = 0; k < d->npeers; k++) {
			assert_true(d->peers[k].j.n >= 0 && d->peers[k].j.n <= KVXD_JOURNAL_MAX);
			assert_true(d->peers[k].state >= KVXD_PEER_IDLE &&
				    d->peers[k].state <= KVXD_PEER_CLOSING);
		}
	}
	assert_true(fake_vx_live().qp <= MAX_LIVE_QPS);
}

/* n iterations, 1 ms of fake time each. */
static void
step(int n)
{
	for (int i = 0; i < n; i++) {
		pump_once();
		fake_ms++;
		fuzz_rcu_flush();
		fuzz_session_read(&sa);
		fuzz_session_read(&sb);
		check_invariants();
	}
}

static void
engine_hello_pool(struct fuzz_session *s)
{
	struct kvx_eng_hello h = {.version = KVX_ENG_VERSION};
	struct kvx_eng_pool_reg p = {
		.geom = {.page_size = PAGE_SIZE, .npages = POOL_PAGES, .nbufs = 1}};

	fuzz_session_request(s, &h, sizeof(h), KVX_ENG_HELLO, false);
	fuzz_session_request(s, &p, sizeof(p), KVX_ENG_POOL_REG, true);
}

/* The pool kvxd registered for session s (its id), or -1. */
static int
pool_of(const struct fuzz_session *s)
{
	for (int i = 0; i < KVXD_MAX_POOLS; i++)
		if (s->d->pools[i] && s->d->pools[i]->engine_id == s->id)
			return s->d->pools[i]->id;
	return -1;
}

static bool
both_ready(void)
{
	return peer_of(&A, "b")->state == KVXD_PEER_READY &&
	       peer_of(&B, "a")->state == KVXD_PEER_READY;
}

static void
world_setup(void)
{
	static const char *const names[] = {"a", "b"};

	nodes_setup(2, names);
	fuzz_engine_listen(&A);
	fuzz_engine_listen(&B);
	fuzz_session_reset(&sa, &A);
	fuzz_session_reset(&sb, &B);
	fuzz_session_connect(&sa);
	fuzz_session_connect(&sb);
	engine_hello_pool(&sa);
	engine_hello_pool(&sb);
	kvxd_peer_admin(&A, "b", "resume");
	PUMP_UNTIL(both_ready() && pool_of(&sa) > 0 && pool_of(&sb) > 0);
	fuzz_rcu_flush();
	fuzz_session_read(&sa);
	fuzz_session_read(&sb);
	last_room = 0;
}

/* Every write completes, every room goes (they hold pool references), then every pool, then
 * the nodes: nodes_teardown() pauses the peers and checks that every fake QP is gone. */
static void
world_teardown(void)
{
	fake_vx_hold(false);
	for (int i = 0; i < nnodes; i++)
		for (int k = 0; k < N[i].npeers; k++)
			if (N[i].peers[k].qpc[0] && N[i].peers[k].qpc[0]->qp)
				fake_vx_release(N[i].peers[k].qpc[0]->qp, FUZZ_SESSION_POOL_BYTES);
	fuzz_session_close(&sa);
	fuzz_session_close(&sb);
	step(1);
	nodes_settle(step);
	nodes_remove_rooms_settled(step);
	nodes_settle(step);
	step(1);
	for (int i = 0; i < nnodes; i++) {
		kvxd_engine_close_all(&N[i]);
		for (int k = 0; k < KVXD_MAX_POOLS; k++)
			if (N[i].pools[k])
				fail_msg("node %s: pool %d still has %d references with every room "
					 "gone",
					 N[i].cfg.name, N[i].pools[k]->id,
					 atomic_load(&N[i].pools[k]->refs));
	}
	fuzz_engine_unlisten(&A);
	fuzz_engine_unlisten(&B);
	nodes_teardown();
}

static void
put_le(uint8_t *p, uint64_t v, int n)
{
	for (int i = 0; i < n; i++)
		p[i] = (uint8_t)(v >> (8 * i));
}

static uint64_t
get_le(const uint8_t *p, int n)
{
	uint64_t v = 0;

	for (int i = 0; i < n; i++)
		v |= (uint64_t)p[i] << (8 * i);
	return v;
}

/* Generations are random: a peer knows them from the frames it got, the fuzzer does not.  A
 * room frame (ROOM_META, ROOM_STATUS, ABORT, ABORT_ACK: u64 room, u32 gen first) gets the
 * last room's id and the generation its receiver holds for it now. */
static void
patch_room(uint8_t *frame, size_t len, struct kvxd *from)
{
	uint16_t type = (uint16_t)(frame[6] | frame[7] << 8);
	struct kvxd_room *r;
	uint32_t gen;

	if (type < KVX_WIRE_ROOM_META || type > KVX_WIRE_ABORT_ACK || last_room == 0)
		return;
	if (from == &B) { /* to decode "a" */
		r = kvxd_room_find(&A, last_room, 0, KVX_ROOM_DECODE);
		gen = r ? (kvxd_room_aborting(r) ? r->abort_gen : r->pc.gen) : 0;
	} else { /* to prefill "b" */
		r = kvxd_room_find(&B, last_room, 0, KVX_ROOM_PREFILL);
		gen = r ? r->pc.gen : 0;
	}
	put_le(frame + KVX_WIRE_HDR_LEN, last_room, 8);
	put_le(frame + KVX_WIRE_HDR_LEN + 8, gen, 4);
	if (type == KVX_WIRE_ABORT && from == &A) {
		/* open_gen, past the endpoint string and both ranks: the generation decode's
		 * ROOM_META carried (a's room's own) */
		size_t off = KVX_WIRE_HDR_LEN + 12, end = KVX_WIRE_HDR_LEN + get_le(frame + 8, 4);
		struct kvxd_room *d = kvxd_room_find(&A, last_room, 0, KVX_ROOM_DECODE);

		if (end > len || off + 2 > end)
			return;
		off += 2 + (size_t)get_le(frame + off, 2) + 8;
		if (d && off + 4 <= end)
			put_le(frame + off, d->open_gen, 4);
	}
}

/* Bytes into the connection as if `from` sent them to the other node.  Only between frames:
 * what `from` itself queued must have gone out first. */
static void
inject(struct kvxd *from, const char *to_name, const uint8_t *bytes, size_t len, unsigned int arg)
{
	static uint8_t buf[KVX_WIRE_FRAME_MAX];
	struct kvxd_peer *p = peer_of(from, to_name);
	size_t off = 0;

	for (int i = 0; i < 8 && p->s.fd >= 0 && p->s.tx_off < p->s.tx_len; i++)
		step(1);
	if (p->s.fd < 0 || p->s.tx_off < p->s.tx_len || p->state == KVXD_PEER_CONNECTING)
		return;
	memcpy(buf, bytes, len);
	if ((arg & 4) && len >= 6) { /* magic and version */
		buf[0] = 'K', buf[1] = 'V', buf[2] = 'X', buf[3] = '1';
		buf[4] = KVX_WIRE_VERSION, buf[5] = 0;
	}
	if ((arg & FP_FRAME_LIVE_ROOM) &&
	    len >= KVX_WIRE_HDR_LEN + 12) /* a live room and its generation */
		patch_room(buf, len, from);
	if ((arg & 2) && len >= KVX_WIRE_HDR_LEN) { /* payload length */
		uint32_t plen = (uint32_t)(len - KVX_WIRE_HDR_LEN);

		for (int i = 0; i < 4; i++)
			buf[8 + i] = (uint8_t)(plen >> (8 * i));
	}
	while (off < len) {
		ssize_t n = send(p->s.fd, buf + off, len - off, MSG_NOSIGNAL | MSG_DONTWAIT);

		if (n <= 0) {
			if (n < 0 && errno == EAGAIN) {
				step(1);
				continue;
			}
			return; /* the connection broke: nothing more to inject */
		}
		off += (size_t)n;
	}
	step(1);
}

static uint64_t
room_arg(unsigned int arg)
{
	uint64_t back = arg % 4;

	return last_room > back ? last_room - back : 1;
}

static void
open_room(unsigned int arg)
{
	struct {
		struct kvx_eng_room_open m;
		struct kvx_eng_region reg;
		struct kvx_eng_source src[1];
		uint32_t pages[POOL_PAGES];
	} r = {.m = {.room = ++last_room, .nregions = 1, .nsources = 1},
	       .reg = {.pool_id = pool_of(&sa), .npages = arg % POOL_PAGES + 1}};

	snprintf(r.src[0].name, sizeof(r.src[0].name), "%s", "b");
	for (uint32_t i = 0; i < r.reg.npages; i++)
		r.pages[i] = i;
	fuzz_session_request(&sa, &r,
			     sizeof(r.m) + sizeof(r.reg) + sizeof(r.src) + 4 * r.reg.npages,
			     KVX_ENG_ROOM_OPEN, false);
}

static void
submit(unsigned int arg)
{
	struct {
		struct kvx_eng_chunk m;
		uint32_t pages[POOL_PAGES];
	} c = {.m = {.room = room_arg(arg), .pool_id = pool_of(&sb), .last = 1}};
	struct kvxd_room *d = kvxd_room_find(&A, c.m.room, 0, KVX_ROOM_DECODE);

	/* as many pages as the decode room has (a wrong count is refused, which is fine too) */
	c.m.npages = d ? d->reg[0].npages : POOL_PAGES;
	for (uint32_t i = 0; i < c.m.npages; i++)
		c.pages[i] = i;
	fuzz_session_request(&sb, &c, sizeof(c.m) + 4 * c.m.npages, KVX_ENG_CHUNK, false);
}

static void
room_request(struct fuzz_session *s, uint16_t type, unsigned int arg)
{
	struct kvx_eng_room_close m = {.room = room_arg(arg)};

	fuzz_session_request(s, &m, sizeof(m), type, false);
}

/* fake verbs on b's QP to a (the one that carries the writes) */
static void
verbs(unsigned int arg)
{
	struct kvxd_peer *p = peer_of(&B, "a");
	struct kvx_vx_qp *qp = p->qpc[0] ? p->qpc[0]->qp : NULL;

	fake_vx_hold(arg & 1);
	if (qp && (arg & 2))
		fake_vx_release(qp, 64);
	if (qp && (arg & 4))
		fake_vx_fail_next(qp, arg & 8 ? KVX_VX_WC_REM_ACCESS_ERR : KVX_VX_WC_RETRY_EXC_ERR);
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	size_t off = 0;

	world_setup();
	for (int rec = 0; rec < MAX_RECORDS && off < size; rec++) {
		uint8_t op = data[off++];
		unsigned int arg = op >> 3;
		size_t len;

		switch (op & 7) {
		case FP_FRAME:
			if (size - off < 2) {
				off = size;
				break;
			}
			len = data[off] | (size_t)data[off + 1] << 8;
			off += 2;
			if (len > size - off)
				len = size - off;
			if (len > KVX_WIRE_FRAME_MAX)
				len = KVX_WIRE_FRAME_MAX;
			if (arg & 1)
				inject(&A, "b", data + off, len, arg); /* "a" -> prefill "b" */
			else
				inject(&B, "a", data + off, len, arg); /* "b" -> decode "a" */
			off += len;
			break;
		case FP_STEP:
			step((int)arg + 1);
			break;
		case FP_CLOCK:
			fake_ms += 20ull * (arg + 1) * (arg + 1);
			step(1);
			break;
		case FP_OPEN:
			open_room(arg);
			step(2);
			break;
		case FP_SUBMIT:
			submit(arg);
			step(2);
			break;
		case FP_ABORT:
			room_request(&sa, KVX_ENG_ROOM_ABORT, arg);
			step(2);
			break;
		case FP_CLOSE:
			room_request(&sa, KVX_ENG_ROOM_CLOSE, arg);
			room_request(&sb, KVX_ENG_ROOM_CLOSE, arg);
			step(2);
			break;
		case FP_HOLD:
			verbs(arg);
			step(1);
			break;
		}
	}
	if (getenv("FUZZ_PEER_TRACE"))
		fprintf(stderr,
			"a: opened %llu aborts %llu releases %llu frames_bad %llu resets %llu; "
			"b: tombstones %llu acks_sent %llu wr_posted %llu; %s\n",
			(unsigned long long)A.ctr.rooms_opened, (unsigned long long)A.ctr.aborts,
			(unsigned long long)A.ctr.releases, (unsigned long long)A.ctr.frames_bad,
			(unsigned long long)A.ctr.peer_resets, (unsigned long long)B.ctr.tombstones,
			(unsigned long long)B.ctr.acks_sent,
			(unsigned long long)atomic_load(&B.cores[0].st.wr_posted), nodes_state());
	world_teardown();
	return 0;
}
