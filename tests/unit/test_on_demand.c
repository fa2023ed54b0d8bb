/* SPDX-License-Identifier: Apache-2.0 */
/*
 * [node] connect = on_demand between real control cores on the fake verbs: "a" and "c" are
 * decode nodes, "b" the prefill node both take rooms from.  No session (no TCP connection, no
 * QP) exists until a room needs one; either side dials (c's name sorts after b's: with
 * connect = always only b would); a session no room has used for idle_ms is closed by both
 * sides in two steps (IDLE_ASK, IDLE), quietly: nothing fails, and a room that started while
 * the close was under way carries on over the next session; crossing dials end in one session.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "control/abort.h"
#include "control/engine.h"
#include "control/kvxd.h"
#include "control/loop.h"
#include "control/peer.h"
#include "control/peer_io.h"
#include "control/rooms.h"
#include "core/fault.h"
#include "core/wire.h"

#include "nodes_harness.h"

#define A N[0]
#define B N[1]
#define C N[2]
#define PS 256
#define NP 16
#define IDLE_MS 500

static struct kvxd_pool pool[MAX_NODES];
static uint8_t *mem[MAX_NODES];

static int
setup(void **state)
{
	static const char *const names[] = {"a", "b", "c"};

	(void)state;
	nodes_setup(3, names);
	for (int i = 0; i < 3; i++) {
		node_pool_init(&N[i], &pool[i], &mem[i], PS, NP);
		N[i].cfg.on_demand = true;
		N[i].cfg.idle_ms = IDLE_MS;
		for (int k = 0; k < N[i].npeers; k++)
			N[i].peers[k].paused = false; /* nothing dials before a room needs it */
	}
	return 0;
}

static int
teardown(void **state)
{
	(void)state;
	for (int i = 0; i < 3; i++)
		nodes_remove_rooms(&N[i]);
	for (int i = 0; i < 3; i++)
		node_pool_fini(&pool[i], mem[i]);
	nodes_teardown();
	return 0;
}

static struct kvxd_peer *
peer(struct kvxd *d, const char *name)
{
	return peer_of(d, name);
}

/* A decode room of node d whose one source is node src (pages 0..n-1). */
static struct kvxd_room *
open_from(struct kvxd *d, uint64_t id, struct kvxd *src, uint32_t n)
{
	char names[1][KVX_NAME_MAX] = {{0}};
	uint32_t pages[NP];

	snprintf(names[0], sizeof(names[0]), "%s", src->cfg.name);
	for (uint32_t i = 0; i < n; i++)
		pages[i] = i;
	assert_true(kvxd_decode_room_open(d, -1, id, &pool[d - N], pages, n,
					  (const char(*)[KVX_NAME_MAX])names, 1) > 0);
	return kvxd_room_find(d, id, 0, KVX_ROOM_DECODE);
}

static struct kvxd_room *
prefill_room(struct kvxd *src, uint64_t id)
{
	return kvxd_room_find(src, id, 0, KVX_ROOM_PREFILL);
}

#define SRC 8 /* sources are pages SRC.., destinations 0..: a node can be both at once */
#define SRC_MEM(i) (mem[i] + SRC * PS)

/* src writes room id's one chunk (its pages SRC..SRC+n-1), as its engine would, once it knows
 * it */
static void
submit(struct kvxd *src, uint64_t id, uint32_t n)
{
	struct kvxd_room *r;
	struct kvxd_chunk *ch;
	struct kvxd_msg m = {.type = KVXD_MSG_CHUNK};
	int s = (int)(src - N);

	PUMP_UNTIL(prefill_room(src, id) &&
		   kvxd_room_state(prefill_room(src, id)) == KVX_ROOM_WAITING_FOR_INPUT);
	r = prefill_room(src, id);
	ch = kvxd_chunk_alloc(src, n);
	assert_non_null(ch);
	*ch = (struct kvxd_chunk){.pool = &pool[s], .npages = n, .nbufs = 1, .last = true};
	for (uint32_t i = 0; i < n; i++)
		ch->pages[i] = SRC + i;
	atomic_fetch_add(&pool[s].refs, 1);
	m.room = &r->pc;
	m.ptr = ch;
	assert_int_equal(kvx_pcore_send(&src->cores[r->pc.core], &m), 0);
}

/* Room id from src to d moves its bytes; then both sides' engines close it. */
static void
room_flows(struct kvxd *d, struct kvxd *src, uint64_t id)
{
	struct kvxd_room *r = open_from(d, id, src, 4);

	memset(SRC_MEM(src - N), (int)(id & 0xff), 4 * PS);
	submit(src, id, 4);
	PUMP_UNTIL(kvxd_room_state(r) == KVX_ROOM_SUCCESS);
	assert_memory_equal(mem[d - N], SRC_MEM(src - N), 4 * PS);
	PUMP_UNTIL(kvxd_room_removable(prefill_room(src, id)));
	kvxd_room_remove(d, r);
	kvxd_room_remove(src, prefill_room(src, id));
	pump_ms(2);
}

static uint64_t
resets(void)
{
	return A.ctr.peer_resets + B.ctr.peer_resets + C.ctr.peer_resets;
}

/* Nothing is set up before a room needs it; the room's node dials even when its name sorts
 * last; only that pair has a session (one QP on each side), the other pair none. */
static void
test_no_session_until_a_room_needs_it(void **state)
{
	(void)state;
	pump_ms(2000);
	for (int i = 0; i < 3; i++)
		for (int k = 0; k < N[i].npeers; k++)
			assert_int_equal(N[i].peers[k].state, KVXD_PEER_IDLE);
	assert_int_equal(fake_vx_live().qp, base.qp);
	room_flows(&C, &B, 1);
	assert_true(node_ready(&C, "b") && node_ready(&B, "c"));
	assert_int_equal(peer(&A, "b")->state, KVXD_PEER_IDLE);
	assert_int_equal(peer(&B, "a")->state, KVXD_PEER_IDLE);
	assert_int_equal(fake_vx_live().qp, base.qp + 2 * harness_lanes());
	assert_int_equal(C.ctr.sessions_on_demand, 1); /* c dialled, b did not */
	assert_int_equal(B.ctr.sessions_on_demand, 0);
	assert_true(peer(&C, "b")->dialer);
	room_flows(&A, &B, 2); /* a, whose name sorts first, dials too */
	assert_int_equal(fake_vx_live().qp, base.qp + 4 * harness_lanes());
	assert_int_equal(resets(), 0);
}

/* A session no room used for idle_ms is closed by both sides, quietly (no reset counted,
 * nobody lost), its QPs destroyed; the next room sets it up again. */
static void
test_idle_session_closed_and_set_up_again(void **state)
{
	struct kvxd_peer *cb = peer(&C, "b"), *bc = peer(&B, "c");
	uint32_t epoch;

	struct kvxd_room *r;
	uint64_t left;

	(void)state;
	/* a room that keeps the session busy for most of idle_ms */
	r = open_from(&C, 1, &B, 4);
	PUMP_UNTIL(node_ready(&C, "b"));
	pump_ms(IDLE_MS * 3 / 4);
	submit(&B, 1, 4);
	PUMP_UNTIL(kvxd_room_state(r) == KVX_ROOM_SUCCESS);
	PUMP_UNTIL(kvxd_room_removable(prefill_room(&B, 1)));
	kvxd_room_remove(&C, r);
	kvxd_room_remove(&B, prefill_room(&B, 1));
	left = fake_ms; /* idle_ms counts from here */
	epoch = cb->epoch;
	pump_ms(IDLE_MS - 50);
	assert_true(node_ready(&C, "b") && node_ready(&B, "c")); /* not before idle_ms */
	PUMP_UNTIL(cb->state == KVXD_PEER_IDLE && bc->state == KVXD_PEER_IDLE && !cb->j.n &&
		   !bc->j.n);
	assert_true(fake_ms >= left + IDLE_MS);
	PUMP_UNTIL(fake_vx_live().qp == base.qp);
	assert_int_equal(B.ctr.sessions_idle_closed, 1);
	assert_int_equal(C.ctr.sessions_idle_closed, 1);
	assert_int_equal(resets(), 0);
	assert_false(cb->lost || bc->lost);
	pump_ms(3 * IDLE_MS); /* nothing dials again by itself */
	assert_int_equal(cb->state, KVXD_PEER_IDLE);
	assert_int_equal(fake_vx_live().qp, base.qp);
	room_flows(&C, &B, 2);
	assert_true(cb->epoch > epoch);
	assert_int_equal(C.ctr.sessions_on_demand, 2);
	assert_int_equal(resets(), 0);
}

/* The close under way when a room starts: c asked (IDLE_ASK in flight), then its engine opens a
 * room, whose ROOM_META follows the ask; b, with no room, agrees and closes, and the ROOM_META
 * dies with the session.  The room carries on: its ROOM_META goes again over a new session,
 * and it succeeds.  Nothing failed, nothing was counted as a reset. */
static void
test_room_during_the_close_carries_on(void **state)
{
	struct kvxd_peer *cb = peer(&C, "b"), *bc = peer(&B, "c");
	struct kvxd_room *r;

	(void)state;
	B.cfg.idle_ms = 0; /* only c asks */
	room_flows(&C, &B, 1);
	PUMP_UNTIL(cb->idle_asked_ms != 0);
	assert_true(node_ready(&C, "b") && node_ready(&B, "c")); /* the ask is in flight */
	r = open_from(&C, 2, &B, 4);
	assert_true(r->meta_sent_mask & 1); /* behind the ask, on the closing session */
	memset(SRC_MEM(1), 0x77, 4 * PS);
	PUMP_UNTIL(bc->state != KVXD_PEER_READY);
	assert_null(prefill_room(&B, 2)); /* b closed before it read the ROOM_META */
	submit(&B, 2, 4);		  /* arrives again, over the next session */
	PUMP_UNTIL(kvxd_room_state(r) == KVX_ROOM_SUCCESS);
	assert_memory_equal(mem[2], SRC_MEM(1), 4 * PS);
	assert_int_equal(B.ctr.sessions_idle_closed + C.ctr.sessions_idle_closed, 2);
	assert_int_equal(resets(), 0);
}

/* An IDLE_ASK while a room of ours still needs the session is ignored: the session stays (same
 * epoch), the room completes over it; so is one right after the last room left (a grace); one
 * after that is agreed to and both sides close quietly. */
static void
test_ask_ignored_while_a_room_needs_the_session(void **state)
{
	struct kvxd_peer *cb = peer(&C, "b"), *bc = peer(&B, "c");
	struct kvx_wire_msg ask = {.type = KVX_WIRE_BYE, .u.bye_reason = KVXD_BYE_IDLE_ASK};
	struct kvxd_room *r;
	uint32_t epoch;

	(void)state;
	r = open_from(&C, 1, &B, 4);
	memset(SRC_MEM(1), 0x3c, 4 * PS);
	PUMP_UNTIL(prefill_room(&B, 1) != NULL);
	pump_ms(300); /* past the answer's grace: only the live room keeps the session now */
	epoch = cb->epoch;
	assert_int_equal(kvxd_peer_send(&B, bc, &ask), 0); /* b asks while the room is live */
	bc->idle_asked_ms = fake_ms;
	pump_ms(50);
	assert_true(node_ready(&C, "b") && node_ready(&B, "c"));
	assert_int_equal(cb->epoch, epoch);
	assert_int_equal(C.ctr.sessions_idle_closed, 0);
	submit(&B, 1, 4);
	PUMP_UNTIL(kvxd_room_state(r) == KVX_ROOM_SUCCESS);
	assert_memory_equal(mem[2], SRC_MEM(1), 4 * PS);
	/* the room just left: an ask now is still refused (a completion may be on its way on the
	 * asker's side); one after the grace is agreed to */
	PUMP_UNTIL(kvxd_room_removable(prefill_room(&B, 1)));
	kvxd_room_remove(&C, r);
	kvxd_room_remove(&B, prefill_room(&B, 1));
	assert_int_equal(kvxd_peer_send(&B, bc, &ask), 0);
	pump_ms(50);
	assert_true(node_ready(&C, "b") && node_ready(&B, "c"));
	pump_ms(300);
	assert_int_equal(kvxd_peer_send(&B, bc, &ask), 0);
	PUMP_UNTIL(cb->state == KVXD_PEER_IDLE && bc->state == KVXD_PEER_IDLE);
	assert_int_equal(C.ctr.sessions_idle_closed + B.ctr.sessions_idle_closed, 2);
	assert_int_equal(resets(), 0);
}

/* An IDLE that was never asked for is a peer that closed with rooms in flight: a loss, not a
 * quiet close (the room fails at once instead of waiting for nothing).  The lost peer is
 * dialled again although no room asks for it, and rooms flow again. */
static void
test_unasked_idle_is_a_loss(void **state)
{
	struct kvxd_peer *cb = peer(&C, "b"), *bc = peer(&B, "c");
	struct kvx_wire_msg bye = {.type = KVX_WIRE_BYE, .u.bye_reason = KVXD_BYE_IDLE};
	struct kvxd_room *r;

	(void)state;
	r = open_from(&C, 1, &B, 4);
	PUMP_UNTIL(prefill_room(&B, 1) != NULL);
	assert_int_equal(kvxd_peer_send(&B, bc, &bye), 0);
	PUMP_UNTIL(cb->state != KVXD_PEER_READY);
	assert_true(cb->lost);
	PUMP_UNTIL(kvxd_room_state(r) == KVX_ROOM_FAILED ||
		   kvxd_room_state(r) == KVX_ROOM_RELEASED);
	assert_int_equal(C.ctr.sessions_idle_closed, 0);
	/* and back: no room asks for a lost peer (they fail at once), so c dials it by itself */
	PUMP_UNTIL(node_ready(&C, "b") && node_ready(&B, "c"));
	assert_false(cb->lost);
	nodes_remove_rooms(&C);
	nodes_remove_rooms(&B);
	room_flows(&C, &B, 2);
}

/* a and b need each other at the same moment (each has a decode room from the other): both
 * dial; a's dial wins (its name sorts first), b gives its own up without failing anything; one
 * session carries both rooms. */
static void
test_crossing_dials_make_one_session(void **state)
{
	struct kvxd_peer *ab = peer(&A, "b"), *ba = peer(&B, "a");
	struct kvxd_room *ra, *rb;

	(void)state;
	ra = open_from(&A, 1, &B, 4);
	rb = open_from(&B, 2, &A, 4);
	pump_once(); /* both ticks dial in the same step */
	assert_true(ab->dialer && ba->dialer);
	assert_int_equal(ab->state, KVXD_PEER_CONNECTING);
	assert_int_equal(ba->state, KVXD_PEER_CONNECTING);
	memset(SRC_MEM(0), 0x11, 4 * PS);
	memset(SRC_MEM(1), 0x22, 4 * PS);
	PUMP_UNTIL(node_ready(&A, "b") && node_ready(&B, "a"));
	assert_true(ab->dialer);
	assert_false(ba->dialer);
	assert_true(A.ctr.dial_collisions + B.ctr.dial_collisions >= 1);
	assert_int_equal(ab->n_setup_failures + ba->n_setup_failures, 0);
	submit(&B, 1, 4);
	submit(&A, 2, 4);
	PUMP_UNTIL(kvxd_room_state(ra) == KVX_ROOM_SUCCESS &&
		   kvxd_room_state(rb) == KVX_ROOM_SUCCESS);
	assert_memory_equal(mem[0], SRC_MEM(1), 4 * PS); /* b's pages in a, a's in b */
	assert_memory_equal(mem[1], SRC_MEM(0), 4 * PS);
	assert_int_equal(resets(), 0);
	/* one session: one QP per lane each side */
	assert_int_equal(fake_vx_live().qp, base.qp + 2 * harness_lanes());
}

/* A test socket playing node as's dial to node d (to d's listener, as `as` knows it), frames
 * sent at once (TCP_NODELAY: Nagle would hold one back for an ACK): connected, its HELLO in as's
 * name (nonce 7, session 3) sent.  *hello: that HELLO. */
static int
dial_as(struct kvxd *d, struct kvxd *as, struct kvx_wire_msg *hello)
{
	struct sockaddr_in to = {.sin_family = AF_INET};
	uint8_t buf[KVX_WIRE_FRAME_MAX];
	int fd, n, one = 1;
	char err[160];

	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	assert_true(fd >= 0);
	assert_int_equal(setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one)), 0);
	to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	to.sin_port = htons(as->cfg.peers[peer(as, d->cfg.name)->idx].addr.port);
	assert_int_equal(connect(fd, (struct sockaddr *)&to, sizeof(to)), 0);
	*hello = (struct kvx_wire_msg){.type = KVX_WIRE_HELLO};
	hello->u.hello.version = KVX_WIRE_VERSION;
	hello->u.hello.features = as->auth.none ? KVX_AUTH_FEAT_NONE : 0;
	snprintf(hello->u.hello.name, sizeof(hello->u.hello.name), "%s", as->cfg.name);
	hello->u.hello.nonce = 7;
	hello->u.hello.session = 3;
	n = kvx_wire_encode(hello, buf, sizeof(buf), err, sizeof(err));
	assert_int_equal(send(fd, buf, n, MSG_NOSIGNAL), n);
	return fd;
}

/* Runs d's control core until a whole frame comes on fd; fails the test after 2000 rounds. */
static void
answer_on(struct kvxd *d, int fd, struct kvx_wire_msg *m)
{
	uint8_t buf[KVX_WIRE_FRAME_MAX];
	size_t got = 0;
	char err[160];
	int n = 0;

	for (int i = 0; i < 2000 && n == 0; i++) {
		ssize_t k = recv(fd, buf + got, sizeof(buf) - got, MSG_DONTWAIT);

		got += k > 0 ? (size_t)k : 0;
		n = kvx_wire_decode(buf, got, m, err, sizeof(err));
		if (n == 0)
			kvxd_loop_once(d, 0);
	}
	assert_true(n > 0);
}

/* The AUTH `as` sends next: its MAC over the handshake of its HELLO and d's HELLO_ACK. */
static void
auth_as(int fd, struct kvxd *d, struct kvxd *as, const struct kvx_wire_msg *hello,
	const struct kvx_wire_msg *ack)
{
	struct kvx_wire_msg auth = {.type = KVX_WIRE_AUTH};
	struct kvx_auth_transcript t = {.version = KVX_WIRE_VERSION,
					.features_i = hello->u.hello.features,
					.features_a = ack->u.hello.features,
					.name_i = as->cfg.name,
					.name_a = d->cfg.name,
					.nonce_i = hello->u.hello.nonce,
					.nonce_a = ack->u.hello.nonce,
					.session = hello->u.hello.session};
	uint8_t buf[KVX_WIRE_FRAME_MAX];
	char err[160];
	int n;

	assert_int_equal(ack->type, KVX_WIRE_HELLO_ACK);
	assert_int_equal(kvx_auth_mac(&as->auth, KVX_AUTH_INITIATOR, &t, auth.u.auth_mac), 0);
	n = kvx_wire_encode(&auth, buf, sizeof(buf), err, sizeof(err));
	assert_int_equal(send(fd, buf, n, MSG_NOSIGNAL), n);
}

/* A connection whose HELLO a node left unanswered (crossing dials: its own dial to that peer goes
 * on) binds no peer: an AUTH on it is refused as a bad frame and changes nothing.  Before, the
 * AUTH was checked against peers[-1] (pc->peer was never set) and, once its MAC verified, made
 * that memory a session.  Only a's control core runs, so its dial to b waits for b's answer. */
static void
test_auth_on_an_unanswered_hello_refused(void **state)
{
	struct kvxd_peer *ab = peer(&A, "b");
	struct kvx_wire_msg hello, auth = {.type = KVX_WIRE_AUTH};
	uint64_t bad = A.ctr.frames_bad, refused = A.ctr.conn_refused_auth;
	uint8_t buf[KVX_WIRE_FRAME_MAX];
	char err[160], c;
	int fd, n, i;

	(void)state;
	open_from(&A, 1, &B, 4);
	for (i = 0; i < 2000 && ab->state != KVXD_PEER_HELLO; i++)
		kvxd_loop_once(&A, 0);
	assert_int_equal(ab->state, KVXD_PEER_HELLO); /* a's HELLO sent, b does not answer */
	fd = dial_as(&A, &B, &hello);
	for (i = 0; i < 200; i++)
		kvxd_loop_once(&A, 0);
	assert_int_equal(A.ctr.dial_collisions, 1); /* left unanswered */
	assert_true(recv(fd, &c, 1, MSG_DONTWAIT) < 0 && errno == EAGAIN);
	n = kvx_wire_encode(&auth, buf, sizeof(buf), err, sizeof(err));
	assert_int_equal(send(fd, buf, n, MSG_NOSIGNAL), n);
	for (i = 0; i < 2000 && recv(fd, &c, 1, MSG_DONTWAIT) != 0; i++)
		kvxd_loop_once(&A, 0);
	assert_true(i < 2000); /* closed */
	close(fd);
	assert_int_equal(A.ctr.frames_bad, bad + 1);
	assert_int_equal(A.ctr.conn_refused_auth, refused);
	assert_int_equal(ab->state, KVXD_PEER_HELLO); /* a's own dial goes on */
	assert_true(ab->dialer);
	PUMP_UNTIL(node_ready(&A, "b") && node_ready(&B, "a"));
}

/* A HELLO in b's name while a's dial to b has not connected yet is answered (the peer may be
 * unreachable the way a dials), but a's dial is given up only once that connection's AUTH
 * verifies: anyone at b's address can send a HELLO, and one cancelled every dial of a's that
 * had not connected (DESIGN 3: nothing about a session changes before the peer proved itself).
 * b's listener is left with a full accept queue (b's control core does not run), so a's SYN
 * goes unanswered and its dial stays CONNECTING. */
static void
test_unauthenticated_hello_leaves_our_dial(void **state)
{
	struct kvxd_peer *ab = peer(&A, "b");
	struct kvx_wire_msg hello, ack;
	struct sockaddr_in to = {.sin_family = AF_INET};
	uint64_t resets = A.ctr.peer_resets, fails = ab->n_setup_failures;
	int fill[24], fd, i;

	(void)state;
	to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	to.sin_port = htons(A.cfg.peers[ab->idx].addr.port); /* b's listener */
	for (i = 0; i < 24; i++) { /* its backlog is 16: the queue fills, later SYNs drop */
		fill[i] = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		assert_true(fill[i] >= 0);
		assert_true(connect(fill[i], (struct sockaddr *)&to, sizeof(to)) == 0 ||
			    errno == EINPROGRESS);
	}
	usleep(20000);
	open_from(&A, 1, &B, 4);
	for (i = 0; i < 2000 && ab->state != KVXD_PEER_CONNECTING; i++)
		kvxd_loop_once(&A, 0);
	for (i = 0; i < 50; i++)
		kvxd_loop_once(&A, 0);
	assert_int_equal(ab->state, KVXD_PEER_CONNECTING); /* its SYN went unanswered */
	fd = dial_as(&A, &B, &hello);
	answer_on(&A, fd, &ack);
	assert_int_equal(ack.type, KVX_WIRE_HELLO_ACK); /* answered */
	for (i = 0; i < 50; i++)
		kvxd_loop_once(&A, 0);
	assert_int_equal(ab->state, KVXD_PEER_CONNECTING); /* a's dial goes on */
	assert_true(ab->dialer);
	assert_int_equal(A.ctr.peer_resets, resets);
	assert_int_equal(ab->n_setup_failures, fails);
	close(fd); /* no AUTH: the connection is dropped, nothing else changes */
	for (i = 0; i < 2000 && A.npending; i++)
		kvxd_loop_once(&A, 0);
	assert_int_equal(A.npending, 0);
	assert_int_equal(ab->state, KVXD_PEER_CONNECTING);
	for (i = 0; i < 24; i++)
		close(fill[i]);
}

/* The other half: once that connection's AUTH verifies, a's dial that has still not connected is
 * given up quietly (nothing counts as a failure) and the peer's connection becomes the session. */
static void
test_unconnected_dial_given_up_at_auth(void **state)
{
	struct kvxd_peer *ab = peer(&A, "b");
	struct kvx_wire_msg hello, ack;
	struct sockaddr_in to = {.sin_family = AF_INET};
	uint64_t resets = A.ctr.peer_resets, coll = A.ctr.dial_collisions;
	uint32_t fails = ab->n_setup_failures;
	int fill[24], fd, i;

	(void)state;
	to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	to.sin_port = htons(A.cfg.peers[ab->idx].addr.port); /* b's listener: its queue fills */
	for (i = 0; i < 24; i++) {
		fill[i] = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
		assert_true(fill[i] >= 0);
		assert_true(connect(fill[i], (struct sockaddr *)&to, sizeof(to)) == 0 ||
			    errno == EINPROGRESS);
	}
	usleep(20000);
	open_from(&A, 1, &B, 4);
	for (i = 0; i < 2000 && ab->state != KVXD_PEER_CONNECTING; i++)
		kvxd_loop_once(&A, 0);
	assert_int_equal(ab->state, KVXD_PEER_CONNECTING);
	fd = dial_as(&A, &B, &hello);
	answer_on(&A, fd, &ack);
	assert_int_equal(ack.type, KVX_WIRE_HELLO_ACK);
	assert_int_equal(ab->state, KVXD_PEER_CONNECTING); /* not before AUTH */
	auth_as(fd, &A, &B, &hello, &ack);
	for (i = 0; i < 2000 && ab->dialer; i++)
		kvxd_loop_once(&A, 0);
	assert_false(ab->dialer); /* the peer's connection is the session being set up */
	assert_int_equal(ab->state, KVXD_PEER_QP_EXCHANGE);
	assert_int_equal(A.ctr.dial_collisions, coll + 1);
	assert_int_equal(A.ctr.peer_resets, resets); /* quietly */
	assert_int_equal(ab->n_setup_failures, fails);
	close(fd);
	for (i = 0; i < 24; i++)
		close(fill[i]);
}

/* Connections in b's name whose HELLO a answered hold a's own dial to b off for 250 ms in all,
 * while an AUTH is due: ones that never authenticate, which anyone at b's address can open one
 * after another, no longer keep a from dialling b for as long as one is open. */
static void
test_unauthenticated_hello_holds_our_dial_briefly(void **state)
{
	struct kvxd_peer *ab = peer(&A, "b");
	struct kvx_wire_msg hello, ack;
	int fd[2], i, k;

	(void)state;
	for (k = 0; k < 2; k++) {
		fd[k] = dial_as(&A, &B, &hello);
		answer_on(&A, fd[k], &ack);
		assert_int_equal(ack.type, KVX_WIRE_HELLO_ACK); /* answered: its AUTH is due */
		if (k == 0) {
			open_from(&A, 1, &B, 4);
			for (i = 0; i < 100; i++)
				kvxd_loop_once(&A, 0);
			assert_int_equal(ab->state, KVXD_PEER_IDLE); /* b may be dialling us */
			fake_ms += 200; /* the next one comes before the first one's AUTH is late */
		}
	}
	for (i = 0; i < 100; i++)
		kvxd_loop_once(&A, 0);
	assert_int_equal(ab->state, KVXD_PEER_IDLE);
	fake_ms += 100; /* no AUTH in 250 ms: a dials b itself, both connections still open */
	for (i = 0; i < 2000 && ab->state == KVXD_PEER_IDLE; i++)
		kvxd_loop_once(&A, 0);
	assert_true(ab->dialer);
	assert_int_not_equal(ab->state, KVXD_PEER_IDLE);
	assert_int_equal(A.npending, 2);
	close(fd[0]);
	close(fd[1]);
	PUMP_UNTIL(node_ready(&A, "b") && node_ready(&B, "a"));
}

/* Crossing dials that each side answered: a's dial (a's name sorts first) goes on and b's
 * connection, although its AUTH verifies, is left alone (b gives its dial up when a's AUTH
 * reaches it, and closes it); what comes on it meanwhile is ignored.  Before, a gave its own
 * dial up here while b gave up its own on a's AUTH: both sessions ended.  The test plays b's
 * dial and puts a's in the state it has once b answered it. */
static void
both_dials_answered(int ours)
{
	struct kvxd_peer *ab = peer(&A, "b");
	struct kvx_wire_msg hello, ack, hb = {.type = KVX_WIRE_HEARTBEAT};
	uint64_t resets = A.ctr.peer_resets, bad = A.ctr.frames_bad, coll = A.ctr.dial_collisions;
	uint8_t buf[KVX_WIRE_FRAME_MAX];
	int fd, n, i;
	char err[160], c;

	fd = dial_as(&A, &B, &hello); /* TCP_NODELAY: the HEARTBEAT goes without the AUTH's ACK */
	answer_on(&A, fd, &ack);
	assert_int_equal(ack.type, KVX_WIRE_HELLO_ACK);
	/* a's own dial to b, answered by b meanwhile (or even READY before b's AUTH came) */
	ab->dialer = true;
	ab->state = ours;
	ab->ready_ms = ab->last_rx_ms = kvxd_now_ms();
	ab->ready_at = ++A.handshake_clock;	 /* after the HELLO_ACK */
	ab->next_hb_ms = ab->ready_ms + 1000000; /* no heartbeat: it has no socket */
	auth_as(fd, &A, &B, &hello, &ack);
	for (i = 0; i < 200; i++)
		kvxd_loop_once(&A, 0);
	n = kvx_wire_encode(&hb, buf, sizeof(buf), err, sizeof(err));
	assert_int_equal(send(fd, buf, n, MSG_NOSIGNAL), n); /* what b's dial sends next */
	for (i = 0; i < 200; i++)
		kvxd_loop_once(&A, 0);
	assert_int_equal(A.ctr.dial_collisions, coll + 1);
	assert_int_equal(ab->state, ours); /* ours goes on */
	assert_int_equal(A.ctr.peer_resets, resets);
	assert_int_equal(A.ctr.frames_bad, bad);
	assert_true(recv(fd, &c, 1, MSG_DONTWAIT) < 0 && errno == EAGAIN); /* left open */
	assert_int_equal(A.npending, 1);
	close(fd); /* b gave its dial up */
	for (i = 0; i < 2000 && A.npending; i++)
		kvxd_loop_once(&A, 0);
	assert_int_equal(A.npending, 0);
	ab->state = KVXD_PEER_IDLE;
	ab->dialer = false;
}

static void
test_both_dials_answered_ours_goes_on(void **state)
{
	(void)state;
	both_dials_answered(KVXD_PEER_QP_EXCHANGE);
}

/* The peer's AUTH came only once ours was READY (its segment was resent, say): our session,
 * READY since we answered that connection, is that dial of ours and is kept.  Before, the AUTH
 * replaced it as if the peer had restarted, and its rooms failed. */
static void
test_late_auth_of_a_crossing_dial_leaves_our_session(void **state)
{
	(void)state;
	both_dials_answered(KVXD_PEER_READY);
}

/* The other side of that rule: b restarted and dials a in the very millisecond a's session with
 * b's old process became READY.  Its AUTH verifies: it replaces that session (the peer
 * restarted), it is not a crossing dial of ours.  Before, READY and the HELLO_ACK were compared
 * by the millisecond, and a tie took the restarted peer's dial for our own and ignored it. */
static void
test_restarted_peer_in_the_ready_millisecond_replaces_the_session(void **state)
{
	struct kvxd_peer *ab = peer(&A, "b");
	struct kvx_wire_msg hello, ack;
	uint64_t coll, resets;
	int fd, i;

	(void)state;
	room_flows(&A, &B, 1);
	assert_true(ab->dialer && ab->initiator); /* a dialled b, and would win a crossing */
	fake_ms = ab->ready_ms;			  /* the millisecond a's session became READY */
	coll = A.ctr.dial_collisions;
	resets = A.ctr.peer_resets;
	fd = dial_as(&A, &B, &hello); /* b's new process */
	answer_on(&A, fd, &ack);
	auth_as(fd, &A, &B, &hello, &ack);
	for (i = 0; i < 2000 && A.ctr.peer_resets == resets; i++)
		kvxd_loop_once(&A, 0);
	assert_int_equal(A.ctr.peer_resets, resets + 1); /* superseded */
	assert_int_equal(A.ctr.dial_collisions, coll);
	assert_int_not_equal(ab->state, KVXD_PEER_READY);
	close(fd);
}

/* b's CQ holds one session at a time: a's room gets it; c's dial is answered BYE BUSY (c gives up
 * quietly and dials again), and b asks its idle session with a to close once a's room is done;
 * then c's room gets its session.  b never holds two sessions' QPs, and nothing fails.  (b
 * answers c's HELLO and refuses at c's AUTH: c has created its QPs by then, and rolls them back.)
 */
static void
test_sessions_wait_for_cq_room(void **state)
{
	struct kvxd_room *ra, *rc;
	int most = 0;

	(void)state;
	B.cfg.cq_depth = B.cfg.sq_depth + B.cfg.rq_depth; /* one session */
	B.cfg.idle_ms = 0;				  /* b closes only to make room */
	A.cfg.idle_ms = C.cfg.idle_ms = 0;
	ra = open_from(&A, 1, &B, 4);
	memset(SRC_MEM(1), 0x5e, 4 * PS);
	PUMP_UNTIL(node_ready(&A, "b"));
	rc = open_from(&C, 2, &B, 4);
	PUMP_UNTIL(B.ctr.sessions_refused_busy >= 1);
	PUMP_UNTIL(peer(&C, "b")->state == KVXD_PEER_IDLE);   /* its QPs rolled back */
	assert_int_equal(peer(&C, "b")->n_setup_failures, 0); /* gave up quietly */
	assert_int_equal(kvxd_room_state(rc), KVX_ROOM_WAITING_FOR_INPUT);
	pump_ms(3000); /* c keeps dialling, b keeps refusing: a's room still needs the session */
	assert_int_equal(kvxd_room_state(rc), KVX_ROOM_WAITING_FOR_INPUT); /* c's room waits */
	assert_true(node_ready(&A, "b"));
	assert_false(node_ready(&C, "b"));
	assert_true(B.ctr.sessions_refused_busy >= 2);
	submit(&B, 1, 4);
	PUMP_UNTIL(kvxd_room_state(ra) == KVX_ROOM_SUCCESS);
	PUMP_UNTIL(kvxd_room_removable(prefill_room(&B, 1)));
	kvxd_room_remove(&A, ra);
	kvxd_room_remove(&B, prefill_room(&B, 1));
	for (int i = 0; i < 20000 && !node_ready(&C, "b"); i++) {
		pump_once();
		fake_ms++;
		most = B.live_qpcs > most ? B.live_qpcs : most;
	}
	assert_true(node_ready(&C, "b"));
	assert_false(node_ready(&A, "b"));
	submit(&B, 2, 4);
	PUMP_UNTIL(kvxd_room_state(rc) == KVX_ROOM_SUCCESS);
	assert_memory_equal(mem[2], SRC_MEM(1), 4 * PS);
	assert_int_equal(most, harness_lanes()); /* never two sessions' QPs on b's CQs */
	assert_int_equal(resets(), 0);
	assert_int_equal(peer(&C, "b")->n_setup_failures, 0);
	assert_true(B.ctr.sessions_idle_closed >= 1);
}

/* Connections that never authenticate take no CQ room.  b's CQ holds one session: a connection
 * in c's name whose HELLO b answered does not keep b from dialling a; its AUTH, once it
 * verifies, is what is answered BYE BUSY while the session with a is up (b then reads that
 * connection until c closes it); and a HELLO that comes while b's session with a is idle does not
 * make b ask a to close it.  Before, an answered HELLO counted as a session until it expired
 * (pending_ms) and a HELLO at a full CQ asked the idle session to close: anyone at a peer's address
 * could hold off b's dials and close its idle sessions without ever authenticating. */
static void
test_unauthenticated_dials_take_no_cq_room(void **state)
{
	struct kvx_wire_msg hello, ack, bye, hb = {.type = KVX_WIRE_HEARTBEAT};
	uint64_t waits = B.ctr.sessions_cq_waits, busy = B.ctr.sessions_refused_busy;
	uint64_t closed = B.ctr.sessions_idle_closed;
	uint8_t buf[KVX_WIRE_FRAME_MAX];
	struct kvxd_pending *pc;
	struct kvxd_room *r;
	char err[160], ch;
	int fd, n, i;

	(void)state;
	B.cfg.cq_depth = B.cfg.sq_depth + B.cfg.rq_depth; /* one session */
	A.cfg.idle_ms = B.cfg.idle_ms = C.cfg.idle_ms = 0;
	fd = dial_as(&B, &C, &hello);
	answer_on(&B, fd, &ack);
	assert_int_equal(ack.type, KVX_WIRE_HELLO_ACK);
	r = open_from(&B, 5, &A, 4); /* b needs a session with a: it dials at once */
	memset(SRC_MEM(0), 0x3c, 4 * PS);
	PUMP_UNTIL(node_ready(&B, "a"));
	assert_int_equal(B.ctr.sessions_cq_waits, waits);
	assert_int_equal(B.npending, 1);   /* c's connection, still waiting for its AUTH */
	auth_as(fd, &B, &C, &hello, &ack); /* it authenticates: now it would be a second session */
	answer_on(&B, fd, &bye);
	assert_int_equal(bye.type, KVX_WIRE_BYE);
	assert_int_equal(bye.u.bye_reason, KVXD_BYE_BUSY);
	assert_int_equal(B.ctr.sessions_refused_busy, busy + 1);
	assert_int_equal(peer(&B, "c")->state, KVXD_PEER_IDLE);
	assert_int_equal(B.npending, 1); /* kept open */
	pc = cds_list_first_entry(&B.pending, struct kvxd_pending, link);
	assert_true(pc->settled);
	/* pending_ms from its AUTH on, not from its accept: time to read the BYE and close */
	assert_true(pc->deadline_ms >= kvxd_now_ms() + B.cfg.pending_ms);
	/* what c sent after its AUTH (its QP_INFO) is read and dropped: b keeps the connection
	 * open until c closes it, since closing it with that unread would reset it, and the reset
	 * can overtake the BYE */
	n = kvx_wire_encode(&hb, buf, sizeof(buf), err, sizeof(err));
	assert_int_equal(send(fd, buf, n, MSG_NOSIGNAL), n);
	for (i = 0; i < 200; i++)
		kvxd_loop_once(&B, 0);
	assert_true(recv(fd, &ch, 1, MSG_DONTWAIT) < 0 && errno == EAGAIN);
	assert_int_equal(B.npending, 1);
	close(fd);
	for (i = 0; i < 2000 && B.npending; i++)
		kvxd_loop_once(&B, 0);
	assert_int_equal(B.npending, 0);
	submit(&A, 5, 4);
	PUMP_UNTIL(kvxd_room_state(r) == KVX_ROOM_SUCCESS);
	assert_memory_equal(mem[1], SRC_MEM(0), 4 * PS);
	PUMP_UNTIL(kvxd_room_removable(prefill_room(&A, 5)));
	kvxd_room_remove(&B, r);
	kvxd_room_remove(&A, prefill_room(&A, 5));
	fd = dial_as(&B, &C, &hello); /* b's session with a is idle now, its CQ full */
	answer_on(&B, fd, &ack);
	assert_int_equal(ack.type, KVX_WIRE_HELLO_ACK);
	assert_int_equal(peer(&B, "a")->idle_asked_ms, 0);
	pump_ms(100);
	assert_true(node_ready(&B, "a") && node_ready(&A, "b"));
	assert_int_equal(B.ctr.sessions_idle_closed, closed);
	close(fd);
	assert_int_equal(resets(), 0);
}

/* The CQ depth against the device's limit: with on_demand lowered to it (fewer sessions at once),
 * with connect = always refused (every peer's QPs must fit); a limit below one session and its
 * replacement is refused either way; an unknown limit (0) changes nothing. */
static void
test_cq_depth_fitted_to_the_device(void **state)
{
	struct kvx_config saved = A.cfg;
	uint32_t saved_max = A.rails[0].info.max_cqe;

	(void)state;
	A.cfg.sq_depth = A.cfg.rq_depth = 32; /* one session and its replacement: 128 */
	A.rails[0].info.max_cqe = 1000;
	A.cfg.cq_depth = 256;
	assert_int_equal(kvxd_peer_fit_cq(&A), 0);
	assert_int_equal(A.cfg.cq_depth, 256);
	A.cfg.cq_depth = 4096;
	assert_int_equal(kvxd_peer_fit_cq(&A), 0);
	assert_int_equal(A.cfg.cq_depth, 1000);
	A.cfg.on_demand = false;
	A.cfg.cq_depth = 4096;
	assert_int_equal(kvxd_peer_fit_cq(&A), -EINVAL);
	assert_int_equal(A.cfg.cq_depth, 4096);
	A.cfg.on_demand = true;
	A.rails[0].info.max_cqe = 100;
	assert_int_equal(kvxd_peer_fit_cq(&A), -EINVAL);
	A.rails[0].info.max_cqe = 0;
	assert_int_equal(kvxd_peer_fit_cq(&A), 0);
	assert_int_equal(A.cfg.cq_depth, 4096);
	A.cfg = saved;
	A.rails[0].info.max_cqe = saved_max;
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_no_session_until_a_room_needs_it, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_idle_session_closed_and_set_up_again, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_room_during_the_close_carries_on, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_ask_ignored_while_a_room_needs_the_session,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_unasked_idle_is_a_loss, setup, teardown),
		cmocka_unit_test_setup_teardown(test_auth_on_an_unanswered_hello_refused, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_unauthenticated_hello_leaves_our_dial, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_unconnected_dial_given_up_at_auth, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_unauthenticated_hello_holds_our_dial_briefly,
						setup, teardown),
		cmocka_unit_test_setup_teardown(test_both_dials_answered_ours_goes_on, setup,
						teardown),
		cmocka_unit_test_setup_teardown(
			test_late_auth_of_a_crossing_dial_leaves_our_session, setup, teardown),
		cmocka_unit_test_setup_teardown(test_crossing_dials_make_one_session, setup,
						teardown),
		cmocka_unit_test_setup_teardown(
			test_restarted_peer_in_the_ready_millisecond_replaces_the_session, setup,
			teardown),
		cmocka_unit_test_setup_teardown(test_sessions_wait_for_cq_room, setup, teardown),
		cmocka_unit_test_setup_teardown(test_unauthenticated_dials_take_no_cq_room, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_cq_depth_fitted_to_the_device, setup,
						teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
