/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Membership at runtime (control/members.h): [peer.*] reloaded and applied to real control
 * cores on the fake verbs.  "a" and "c" are decode nodes, "b" the prefill node both take rooms
 * from (a-b and b-c connected; a-c never dialled).  A removed peer's session ends, its rooms
 * fail at once, it is refused from then on and its slot is freed once nothing is left of it;
 * an added peer connects like a configured one; the other sessions are not touched; a reload
 * the node cannot take (a bad file, no free slot, no room in the CQs) changes nothing.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cmocka.h>

#include "control/abort.h"
#include "control/admin.h"
#include "control/engine.h"
#include "control/kvxd.h"
#include "control/loop.h"
#include "control/members.h"
#include "control/metrics.h"
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

static struct kvxd_pool pool[MAX_NODES];
static uint8_t *mem[MAX_NODES];
static struct kvx_config saved_b; /* b's configuration as the harness made it */

static int
setup(void **state)
{
	static const char *const names[] = {"a", "b", "c"};

	(void)state;
	nodes_setup(3, names);
	for (int i = 0; i < 3; i++)
		node_pool_init(&N[i], &pool[i], &mem[i], PS, NP);
	kvxd_peer_admin(&A, "b", "resume");
	kvxd_peer_admin(&B, "c", "resume");
	PUMP_UNTIL(node_ready(&A, "b") && node_ready(&B, "a") && node_ready(&B, "c") &&
		   node_ready(&C, "b"));
	saved_b = B.cfg;
	return 0;
}

static int
teardown(void **state)
{
	(void)state;
	for (int i = 0; i < 3; i++)
		nodes_remove_rooms(&N[i]);
	for (int i = 0; i < 3; i++) {
		node_pool_fini(&pool[i], mem[i]);
	}
	nodes_teardown();
	return 0;
}

/* b's configuration without the peer named drop (NULL: all of them) plus extra peers. */
static struct kvx_config *
b_config(const char *drop, const struct kvx_config_peer *extra, int nextra)
{
	struct kvx_config *c = calloc(1, sizeof(*c));
	int n = 0;

	assert_non_null(c);
	*c = saved_b;
	for (int i = 0; i < saved_b.n_peers; i++)
		if (!drop || strcmp(saved_b.peers[i].name, drop) != 0)
			c->peers[n++] = saved_b.peers[i];
	for (int i = 0; i < nextra; i++)
		c->peers[n++] = extra[i];
	c->n_peers = n;
	return c;
}

static int
apply(const struct kvx_config *next, char *err, size_t len)
{
	int rc = kvxd_members_apply(&B, next, err, len);

	free((void *)next);
	return rc;
}

/* A peer like a, under another name and port. */
static struct kvx_config_peer
stranger(const char *name, uint16_t port)
{
	struct kvx_config_peer p = saved_b.peers[0];

	snprintf(p.name, sizeof(p.name), "%s", name);
	p.addr.port = port;
	return p;
}

/* a decode room of node d whose one source is src (pages 0..n-1) */
static struct kvxd_room *
open_from(struct kvxd *d, uint64_t id, const char *src, uint32_t n)
{
	char names[1][KVX_NAME_MAX] = {{0}};
	uint32_t pages[NP];

	snprintf(names[0], sizeof(names[0]), "%s", src);
	for (uint32_t i = 0; i < n; i++)
		pages[i] = i;
	assert_true(kvxd_decode_room_open(d, -1, id, &pool[d - N], pages, n,
					  (const char(*)[KVX_NAME_MAX])names, 1) > 0);
	return kvxd_room_find(d, id, 0, KVX_ROOM_DECODE);
}

/* b writes room id's one chunk (its pages 0..n-1), as its engine would */
static void
submit(uint64_t id, uint32_t n)
{
	struct kvxd_room *r = kvxd_room_find(&B, id, 0, KVX_ROOM_PREFILL);
	struct kvxd_chunk *ch = kvxd_chunk_alloc(&B, n);
	struct kvxd_msg m = {.type = KVXD_MSG_CHUNK, .room = &r->pc, .ptr = ch};

	assert_non_null(ch);
	*ch = (struct kvxd_chunk){.pool = &pool[1], .npages = n, .nbufs = 1, .last = true};
	for (uint32_t i = 0; i < n; i++)
		ch->pages[i] = i;
	atomic_fetch_add(&pool[1].refs, 1);
	assert_int_equal(kvx_pcore_send(&B.cores[r->pc.core], &m), 0);
}

/* A room from b to d moves its bytes (the sessions it needs work). */
static void
room_flows(struct kvxd *d, uint64_t id)
{
	struct kvxd_room *r = open_from(d, id, "b", 4);

	memset(mem[1], (int)(id & 0xff), 4 * PS);
	PUMP_UNTIL(kvxd_room_find(&B, id, 0, KVX_ROOM_PREFILL) &&
		   kvxd_room_state(kvxd_room_find(&B, id, 0, KVX_ROOM_PREFILL)) ==
			   KVX_ROOM_WAITING_FOR_INPUT);
	submit(id, 4);
	PUMP_UNTIL(kvxd_room_state(r) == KVX_ROOM_SUCCESS);
	assert_memory_equal(mem[d - N], mem[1], 4 * PS);
}

/* Removing a peer ends its session at once: the decode room waiting on it fails without
 * waiting for waiting_ms, the peer is refused from then on, its slot is freed once its last
 * room is gone, and b's other session (with c) is not touched: rooms keep flowing there. */
static void
test_reload_removes_a_peer(void **state)
{
	struct kvxd_peer *pc = kvxd_peer_find(&B, "c"), *pa = kvxd_peer_find(&B, "a");
	uint32_t epoch_c = pc->epoch;
	uint64_t resets_c = pc->n_resets, refused;
	struct kvxd_room *r;
	char err[512];

	(void)state;
	r = open_from(&A, 100, "b", 4);
	PUMP_UNTIL(kvxd_room_find(&B, 100, 0, KVX_ROOM_PREFILL));
	assert_int_equal(apply(b_config("a", NULL, 0), err, sizeof(err)), 0);
	assert_true(pa->removing);
	assert_null(kvxd_peer_find(&B, "a"));
	assert_int_equal(B.ctr.peers_removed, 1);
	/* a learns it from the closed connection: the source is lost, the room fails now */
	PUMP_UNTIL(kvxd_room_state(r) == KVX_ROOM_RELEASED);
	assert_true(fake_ms < 1000000 + 20000); /* far from waiting_ms (60 s) */
	/* a dials again and is refused by name */
	refused = B.ctr.conn_refused_name;
	PUMP_UNTIL(B.ctr.conn_refused_name > refused);
	assert_false(node_ready(&A, "b"));
	/* the slot stays while b's room of a links to it, then is free */
	pump_ms(50);
	assert_true(pa->removing);
	nodes_remove_rooms(&B);
	PUMP_UNTIL(pa->vacant);
	assert_false(pa->removing);
	/* b-c never noticed */
	assert_int_equal(pc->epoch, epoch_c);
	assert_int_equal(pc->n_resets, resets_c);
	assert_int_equal(pc->state, KVXD_PEER_READY);
	room_flows(&C, 101);
}

/* A removed peer comes back in a later reload: a new slot while the old one is still torn down,
 * the same slot once it is free; it connects like a configured peer and rooms flow.  The other
 * session is not touched. */
static void
test_reload_adds_a_peer(void **state)
{
	struct kvxd_peer *pa = kvxd_peer_find(&B, "a"), *pc = kvxd_peer_find(&B, "c");
	uint32_t epoch_c = pc->epoch;
	int slot = pa->idx;
	char err[512];

	(void)state;
	open_from(&A, 200, "b", 4);
	PUMP_UNTIL(kvxd_room_find(&B, 200, 0, KVX_ROOM_PREFILL));
	assert_int_equal(apply(b_config("a", NULL, 0), err, sizeof(err)), 0);
	pump_ms(10);
	assert_true(pa->removing); /* its room still links to it */
	/* back while the old slot is torn down: a new slot */
	B.cfg.cq_depth = 1u << 20; /* room in the CQs for the extra slot */
	assert_int_equal(apply(b_config(NULL, NULL, 0), err, sizeof(err)), 0);
	assert_non_null(kvxd_peer_find(&B, "a"));
	assert_int_not_equal(kvxd_peer_find(&B, "a")->idx, slot);
	assert_int_equal(B.ctr.peers_added, 1);
	{
		/* two slots of one name: their per-peer series differ (a duplicate series fails
		 * the whole scrape; mutant metrics_peer_duplicate) */
		struct kvxd_metrics_buf b = {.grow = true, .max = 1 << 22};
		char want[96];
		const char *p;
		int n = 0;

		assert_int_equal(kvxd_metrics_render(&B, KVXD_METRICS_TEXT, 0, &b), 0);
		for (p = b.p; (p = strstr(p, "kvx_peer_rooms_held{node=\"b\",peer=\"a\"} ")); p++)
			n++;
		assert_int_equal(n, 1);
		snprintf(want, sizeof(want),
			 "kvx_peer_rooms_held{node=\"b\",peer=\"a\",removing_slot=\"%d\"} 1", slot);
		assert_non_null(strstr(b.p, want));
		kvxd_metrics_buf_fini(&b);
	}
	PUMP_UNTIL(node_ready(&A, "b") && node_ready(&B, "a"));
	nodes_remove_rooms(&A);
	room_flows(&A, 201);
	/* out and in again once the old slots are free: the first free slot is reused */
	assert_int_equal(apply(b_config("a", NULL, 0), err, sizeof(err)), 0);
	nodes_remove_rooms(&B);
	PUMP_UNTIL(pa->vacant);
	for (int i = 0; i < B.npeers; i++)
		if (strcmp(B.cfg.peers[i].name, "a") == 0)
			PUMP_UNTIL(B.peers[i].vacant);
	assert_int_equal(apply(b_config(NULL, NULL, 0), err, sizeof(err)), 0);
	assert_int_equal(kvxd_peer_find(&B, "a")->idx, slot);
	PUMP_UNTIL(node_ready(&A, "b") && node_ready(&B, "a"));
	nodes_remove_rooms(&A);
	room_flows(&A, 202);
	assert_int_equal(pc->epoch, epoch_c);
	assert_int_equal(pc->state, KVXD_PEER_READY);
}

/* A room that waits for a source that never connected (a's peer c: nobody dials it) fails at
 * once when that peer is removed: nothing else would ever end it before waiting_ms. */
static void
test_removed_peer_fails_rooms_waiting_for_it(void **state)
{
	struct kvx_config *next = calloc(1, sizeof(*next));
	struct kvxd_room *r;
	char err[512];
	int n = 0;

	(void)state;
	r = open_from(&A, 300, "c", 2);
	pump_ms(20);
	assert_int_equal(kvxd_room_state(r), KVX_ROOM_WAITING_FOR_INPUT);
	*next = A.cfg;
	for (int i = 0; i < A.cfg.n_peers; i++)
		if (strcmp(A.cfg.peers[i].name, "c") != 0)
			next->peers[n++] = A.cfg.peers[i];
	next->n_peers = n;
	assert_int_equal(kvxd_members_apply(&A, next, err, sizeof(err)), 0);
	free(next);
	PUMP_UNTIL(kvxd_room_state(r) == KVX_ROOM_RELEASED);
	assert_true(fake_ms < 1000000 + 20000);
	assert_true(node_ready(&A, "b"));
}

/* A reload the node cannot take changes nothing: more peers than its completion queues hold,
 * more peers than free slots, another node name. */
static void
test_reload_refused_changes_nothing(void **state)
{
	struct kvx_config_peer extra[KVX_MAX_PEERS];
	struct kvx_config *next;
	int npeers = B.npeers;
	char err[512];

	(void)state;
	for (int i = 0; i < KVX_MAX_PEERS; i++) {
		char name[16];

		snprintf(name, sizeof(name), "x%d", i);
		extra[i] = stranger(name, (uint16_t)(40000 + i));
	}
	/* the harness's CQs (256 entries, 2 x (32 + 32) per peer) hold a and c only */
	assert_int_equal(kvxd_peer_room(&B), 0);
	assert_int_equal(apply(b_config(NULL, extra, 1), err, sizeof(err)), -ENOBUFS);
	assert_non_null(strstr(err, "cq_depth"));
	/* removing one and adding one in the same reload: the removed one still holds its share */
	assert_int_equal(apply(b_config("a", extra, 1), err, sizeof(err)), -ENOBUFS);
	/* a file holds at most KVX_MAX_PEERS peers, and so does the node, but a removed peer keeps
	 * its slot while it is torn down: c, a (removed) and 31 new ones do not fit */
	B.cfg.cq_depth = 1u << 20;
	assert_int_equal(apply(b_config("a", extra, KVX_MAX_PEERS - 1), err, sizeof(err)), -ENOSPC);
	next = b_config(NULL, NULL, 0);
	snprintf(next->name, sizeof(next->name), "bb");
	assert_int_equal(apply(next, err, sizeof(err)), -EINVAL);
	assert_int_equal(B.npeers, npeers);
	assert_int_equal(B.ctr.peers_added + B.ctr.peers_removed, 0);
	assert_true(node_ready(&B, "a") && node_ready(&B, "c"));
	/* within the limits it is taken */
	assert_int_equal(apply(b_config(NULL, extra, 2), err, sizeof(err)), 0);
	assert_int_equal(B.ctr.peers_added, 2);
	assert_non_null(kvxd_peer_find(&B, "x1"));
}

/* b's configuration file with the peers of saved_b but drop. */
static void
write_b(const char *path, const char *drop)
{
	FILE *fp = fopen(path, "w");

	assert_non_null(fp);
	fprintf(fp, "[node]\nname = b\nlisten = 127.0.0.1:7470\n[rdma]\ndevice = fake0\n"
		    "sq_depth = 32\nrq_depth = 32\ncq_depth = 256\n"
		    "[engine]\nsocket = /tmp/kvx-members.sock\n[security]\nauth = none\n");
	for (int i = 0; i < saved_b.n_peers; i++)
		if (strcmp(saved_b.peers[i].name, drop) != 0)
			fprintf(fp, "[peer.%s]\naddress = 127.0.0.1:%u\ngid = ::ffff:0.0.0.0\n",
				saved_b.peers[i].name, saved_b.peers[i].addr.port);
	fclose(fp);
}

/* SIGHUP's path: the file is read again.  A bad file is refused with its file:line error and
 * changes nothing; the same peers change nothing; a file without a peer removes it. */
static void
test_reload_from_file(void **state)
{
	char path[] = "/tmp/kvx-members-XXXXXX", err[512], out[1024];
	FILE *fp;
	int fd;

	(void)state;
	fd = mkstemp(path);
	assert_true(fd >= 0);
	fp = fdopen(fd, "w");
	fputs("[node]\nname = b\nlisten = nonsense\n", fp);
	fclose(fp);
	B.cfg_path = path;
	assert_int_equal(kvxd_members_reload(&B, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, ":3:"));
	assert_int_equal(B.ctr.reloads_refused, 1);
	/* the operator command: the same, with the error in its reply; operators only */
	assert_int_equal(kvxd_admin(&B, "reload", false, -1, out, sizeof(out)), -EPERM);
	assert_int_equal(B.ctr.reloads_refused, 1);
	assert_int_equal(kvxd_admin(&B, "reload", true, -1, out, sizeof(out)), -EINVAL);
	assert_non_null(strstr(out, "reload refused, nothing changed: "));
	assert_non_null(strstr(out, ":3: [node] listen"));
	assert_int_equal(B.ctr.reloads_refused, 2);
	assert_true(node_ready(&B, "a") && node_ready(&B, "c"));

	write_b(path, "");
	assert_int_equal(kvxd_members_reload(&B, err, sizeof(err)), 0);
	assert_int_equal(B.ctr.reloads, 1);
	assert_int_equal(B.ctr.peers_added + B.ctr.peers_removed, 0);

	write_b(path, "c");
	assert_int_equal(kvxd_admin(&B, "reload", true, -1, out, sizeof(out)), 0);
	assert_non_null(strstr(out, "0 peers added, 1 removed"));
	assert_null(kvxd_peer_find(&B, "c"));
	assert_int_equal(B.ctr.peers_removed, 1);
	assert_true(node_ready(&B, "a"));
	unlink(path);
	B.cfg_path = NULL;
}

/* A room that names a removed peer keeps its slot taken, charged to it or not: here b's engine
 * opened the room before a's ROOM_META made a its owner. */
static void
test_slot_waits_for_linked_rooms(void **state)
{
	struct kvxd_peer *pa = kvxd_peer_find(&B, "a");
	struct kvxd_room *rb = kvxd_prefill_room_new(&B, 110, 0, -1);
	char err[512];

	(void)state;
	assert_non_null(rb);
	open_from(&A, 110, "b", 4);
	PUMP_UNTIL(rb->nowners == 1);
	assert_int_equal(pa->rooms_held, 0); /* not charged: b's engine made it */
	assert_int_equal(apply(b_config("a", NULL, 0), err, sizeof(err)), 0);
	pump_ms(100);
	assert_true(pa->removing && !pa->vacant);
	nodes_remove_rooms(&B);
	PUMP_UNTIL(pa->vacant);
}

/* A tombstone a removed peer's ABORT left is charged to it: its slot stays taken until the
 * tombstone goes, so the next peer in the slot is never charged for it (before: its count went
 * below zero and every later ABORT of an unknown room from it was refused a tombstone). */
static void
test_slot_waits_for_tombstones(void **state)
{
	struct kvxd_peer *pa = kvxd_peer_find(&B, "a");
	struct kvx_wire_abort ab = {.room = 900, .gen = 5};
	struct kvxd_room *t;
	char err[512];

	(void)state;
	kvxd_on_abort(&B, pa, &ab); /* an ABORT for a room b never had: a tombstone */
	t = kvxd_room_find(&B, 900, 0, KVX_ROOM_PREFILL);
	assert_non_null(t);
	assert_int_equal(pa->tombstones_held, 1);
	assert_int_equal(apply(b_config("a", NULL, 0), err, sizeof(err)), 0);
	pump_ms(100);
	assert_true(pa->removing); /* held by its tombstone */
	assert_false(pa->vacant);
	kvxd_room_remove(&B, t); /* what the tombstone's deadline does */
	PUMP_UNTIL(pa->vacant);
	assert_int_equal(apply(b_config(NULL, NULL, 0), err, sizeof(err)), 0);
	assert_int_equal(kvxd_peer_find(&B, "a")->idx, pa->idx);
	assert_int_equal(kvxd_peer_find(&B, "a")->tombstones_held, 0);
	PUMP_UNTIL(node_ready(&A, "b") && node_ready(&B, "a"));
	ab.room = 901;
	kvxd_on_abort(&B, kvxd_peer_find(&B, "a"), &ab);
	assert_int_equal(kvxd_peer_find(&B, "a")->tombstones_held, 1);
	assert_int_equal(B.ctr.tombstones_refused, 0);
}

/* A ROOM_META parked by a removed peer never becomes an owner of the room once another peer
 * (here the same node, added back) has its slot: epochs never repeat in a slot.  Before, b wrote
 * the room into pages c had already released and freed. */
static void
test_parked_meta_dies_with_its_peer(void **state)
{
	struct kvxd_peer *pc = kvxd_peer_find(&B, "c");
	int slot = pc->idx;
	uint32_t epoch = pc->epoch;
	struct kvxd_room *rb, *rc;
	struct kvxd_chunk *ch;
	struct kvxd_msg m = {.type = KVXD_MSG_CHUNK};
	char err[512];

	(void)state;
	open_from(&A, 700, "b", 4);
	PUMP_UNTIL((rb = kvxd_room_find(&B, 700, 0, KVX_ROOM_PREFILL)) && rb->nowners == 1);
	rc = open_from(&C, 700, "b", 4);
	PUMP_UNTIL(B.ctr.meta_parked == 1); /* c's ROOM_META waits for the engine's ndest */
	assert_int_equal(apply(b_config("c", NULL, 0), err, sizeof(err)), 0);
	PUMP_UNTIL(kvxd_room_state(rc) == KVX_ROOM_RELEASED);
	PUMP_UNTIL(pc->vacant);
	B.cfg.cq_depth = 1u << 20;
	assert_int_equal(apply(b_config(NULL, NULL, 0), err, sizeof(err)), 0);
	assert_int_equal(kvxd_peer_find(&B, "c")->idx, slot);
	PUMP_UNTIL(node_ready(&C, "b") && node_ready(&B, "c"));
	assert_true(kvxd_peer_find(&B, "c")->epoch > epoch + 1);
	nodes_remove_rooms(&C); /* c's pages are free now */
	memset(mem[2], 0, 4 * PS);
	rb->ndest = 2; /* what the engine's first chunk says */
	kvxd_room_meta_unpark(&B, rb);
	assert_true(kvxd_room_owner(rb, slot, 0) < 0);
	memset(mem[1], 0x5a, 4 * PS);
	ch = kvxd_chunk_alloc(&B, 4);
	assert_non_null(ch);
	*ch = (struct kvxd_chunk){
		.pool = &pool[1], .npages = 4, .nbufs = 1, .ndest = 2, .last = true};
	for (uint32_t i = 0; i < 4; i++)
		ch->pages[i] = i;
	atomic_fetch_add(&pool[1].refs, 1);
	m.room = &rb->pc;
	m.ptr = ch;
	assert_int_equal(kvx_pcore_send(&B.cores[rb->pc.core], &m), 0);
	pump_ms(200);
	for (int i = 0; i < 4 * PS; i++)
		assert_int_equal(mem[2][i], 0); /* nothing written into c */
}

/* Room id at b fed by a, with c's ROOM_META parked on it; then c is removed and added back in
 * the same slot, the parked metadata now its earlier peer's.  Returns b's room. */
static struct kvxd_room *
stale_parked_meta(uint64_t id)
{
	struct kvxd_peer *pc = kvxd_peer_find(&B, "c");
	int slot = pc->idx;
	struct kvxd_room *rb, *rc;
	char err[512];

	open_from(&A, id, "b", 4);
	PUMP_UNTIL((rb = kvxd_room_find(&B, id, 0, KVX_ROOM_PREFILL)) && rb->nowners == 1);
	rc = open_from(&C, id, "b", 4);
	PUMP_UNTIL(B.ctr.meta_parked == 1);
	assert_int_equal(apply(b_config("c", NULL, 0), err, sizeof(err)), 0);
	PUMP_UNTIL(kvxd_room_state(rc) == KVX_ROOM_RELEASED);
	PUMP_UNTIL(pc->vacant);
	B.cfg.cq_depth = 1u << 20;
	assert_int_equal(apply(b_config(NULL, NULL, 0), err, sizeof(err)), 0);
	pc = kvxd_peer_find(&B, "c");
	assert_int_equal(pc->idx, slot);
	PUMP_UNTIL(node_ready(&C, "b") && node_ready(&B, "c"));
	assert_int_equal(pc->parked_held, 0);
	assert_int_equal(rb->nparked, 1);
	nodes_remove_rooms(&C);
	return rb;
}

/* The same endpoint's ROOM_META again, from the node that has the slot now, takes the place of
 * the one the slot's earlier peer parked, and is charged to its peer (before: the earlier one
 * counted as its own, charged to nobody, and it went past max_rooms_per_peer uncharged). */
static void
test_parked_meta_of_a_slots_new_peer_is_charged(void **state)
{
	struct kvxd_room *rb = stale_parked_meta(701);
	struct kvxd_peer *pc = kvxd_peer_find(&B, "c");

	(void)state;
	open_from(&C, 701, "b", 4); /* c opens the room again */
	PUMP_UNTIL(B.ctr.meta_parked == 2);
	assert_int_equal(rb->nparked, 1);
	assert_int_equal(pc->parked_held, 1);
	kvxd_room_meta_refuse_parked(&B, rb);
	assert_int_equal(pc->parked_held, 0);
}

/* ... and a peer at max_rooms_per_peer does not park it: the earlier peer's entry is not its own
 * (before: "already parked", the cap was not checked). */
static void
test_parked_meta_of_a_slots_earlier_peer_is_not_its_own(void **state)
{
	struct kvxd_room *rb = stale_parked_meta(703);
	struct kvxd_peer *pc = kvxd_peer_find(&B, "c");

	(void)state;
	B.cfg.max_rooms_per_peer = 1;
	open_from(&C, 704, "b", 4); /* c's one room at b */
	PUMP_UNTIL(kvxd_room_find(&B, 704, 0, KVX_ROOM_PREFILL) != NULL);
	assert_int_equal(pc->rooms_held, 1);
	open_from(&C, 703, "b", 4);
	PUMP_UNTIL(B.ctr.meta_refused_cap == 1);
	assert_int_equal(B.ctr.meta_parked, 1);
	assert_int_equal(pc->parked_held, 0);
	assert_int_equal(rb->nparked, 1); /* the earlier peer's, charged to nobody */
}

/* A peer removed while a connection of it waits to authenticate: the connection is dropped, and
 * an event for it still in the loop's batch finds it dropped, not freed (before: the removal
 * freed it, and the batch's next event used it: glibc's "double free or corruption" in a
 * 24-node etcd run, ASan's heap-use-after-free here). */
static void
test_pending_connection_of_a_removed_peer(void **state)
{
	struct sockaddr_in to = {.sin_family = AF_INET};
	struct kvx_wire_msg m = {.type = KVX_WIRE_HELLO};
	uint8_t buf[KVX_WIRE_FRAME_MAX];
	struct kvxd_pending *pc = NULL;
	char err[512];
	int fd, n;

	(void)state;
	fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	to.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	to.sin_port = htons(A.cfg.peers[0].addr.port); /* b's listener */
	assert_int_equal(connect(fd, (struct sockaddr *)&to, sizeof(to)), 0);
	m.u.hello.version = KVX_WIRE_VERSION;
	snprintf(m.u.hello.name, sizeof(m.u.hello.name), "a");
	m.u.hello.nonce = 7;
	m.u.hello.session = 9;
	n = kvx_wire_encode(&m, buf, sizeof(buf), err, sizeof(err));
	assert_true(n > 0);
	assert_int_equal(send(fd, buf, (size_t)n, MSG_NOSIGNAL), n);
	PUMP_UNTIL(!cds_list_empty(&B.pending) &&
		   cds_list_first_entry(&B.pending, struct kvxd_pending, link)->peer >= 0);
	pc = cds_list_first_entry(&B.pending, struct kvxd_pending, link);
	assert_int_equal(apply(b_config("a", NULL, 0), err, sizeof(err)), 0);
	assert_true(cds_list_empty(&B.pending));
	assert_true(pc->dead);
	kvxd_pending_on_event(&B, pc, EPOLLIN); /* a stale event of the same batch */
	pump_ms(2);				/* the iteration's end frees it */
	assert_true(cds_list_empty(&B.pending_dead));
	close(fd);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_reload_removes_a_peer, setup, teardown),
		cmocka_unit_test_setup_teardown(test_reload_adds_a_peer, setup, teardown),
		cmocka_unit_test_setup_teardown(test_removed_peer_fails_rooms_waiting_for_it, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_reload_refused_changes_nothing, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_reload_from_file, setup, teardown),
		cmocka_unit_test_setup_teardown(test_slot_waits_for_linked_rooms, setup, teardown),
		cmocka_unit_test_setup_teardown(test_slot_waits_for_tombstones, setup, teardown),
		cmocka_unit_test_setup_teardown(test_parked_meta_dies_with_its_peer, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_parked_meta_of_a_slots_new_peer_is_charged,
						setup, teardown),
		cmocka_unit_test_setup_teardown(
			test_parked_meta_of_a_slots_earlier_peer_is_not_its_own, setup, teardown),
		cmocka_unit_test_setup_teardown(test_pending_connection_of_a_removed_peer, setup,
						teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
