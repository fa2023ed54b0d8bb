/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Test harness: up to three kvxd control cores in this process (fake verbs, harness_cores
 * polling cores each, stepped by hand), talking over loopback TCP, with a fake clock.  Node i
 * is named
 * names[i]; every node has every other node as a peer; the node whose name sorts first dials.
 * Include after <cmocka.h> and control/kvxd.h (or control/peer.c).
 */
#ifndef KVX_TESTS_NODES_HARNESS_H
#define KVX_TESTS_NODES_HARNESS_H

#include <arpa/inet.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "control/abort.h"
#include "control/admin.h"
#include "control/engine.h"
#include "control/loop.h"
#include "control/peer.h"
#include "control/peer_io.h"
#include "control/vwork.h"
#include "control/rooms.h"
#include "fake_verbs.h"

#define MAX_NODES 3

static uint64_t fake_ms = 1000000;
static struct kvxd N[MAX_NODES];
static int nnodes;
static struct fake_vx_live base;
static void (*pump_hook)(void); /* run first at every step: a test's other endpoints (etcd) */

static uint64_t
fake_clock(void)
{
	return fake_ms;
}

static __attribute__((unused)) struct kvxd_peer *
peer_of(struct kvxd *d, const char *name)
{
	struct kvxd_peer *p = kvxd_peer_find(d, name);

	assert_non_null(p);
	return p;
}

static int
listen_any(struct kvxd *d)
{
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
	socklen_t len = sizeof(sa);
	int fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);

	assert_true(fd >= 0);
	assert_int_equal(bind(fd, (struct sockaddr *)&sa, sizeof(sa)), 0);
	assert_int_equal(listen(fd, 16), 0);
	assert_int_equal(getsockname(fd, (struct sockaddr *)&sa, &len), 0);
	d->tcp_fd = fd;
	d->tcp_ev = (struct kvxd_fd){.kind = KVXD_FD_TCP_LISTEN};
	assert_int_equal(kvxd_epoll_add(d, fd, &d->tcp_ev, EPOLLIN), 0);
	return ntohs(sa.sin_port);
}

/* Rails (devices) each node gets: a test that wants more sets it before nodes_setup(). */
static int harness_rails = 1;
/* Polling cores each node gets: 1, or KVX_TEST_CORES (1..KVX_MAX_CORES) from the environment
 * (ctest runs some tests again with 2: rooms then spread over both cores by id). */
static int harness_cores = 1;

/* QPs a node holds for one session with a peer: one per core and rail (a lane). */
static __attribute__((unused)) int
harness_lanes(void)
{
	return harness_cores * harness_rails;
}

static void
node_init(struct kvxd *d, const char *name)
{
	struct kvx_vx_dev *devs[KVX_MAX_RAILS];

	memset(d, 0, sizeof(*d));
	snprintf(d->cfg.name, sizeof(d->cfg.name), "%s", name);
	d->cfg.sq_depth = d->cfg.rq_depth = 32;
	d->cfg.cq_depth = 256;
	d->cfg.mtu = 1024;
	d->cfg.retry_cnt = 6;
	d->cfg.ack_timeout = 14;
	d->cfg.handshake_ms = 3000;
	d->cfg.waiting_ms = 60000;
	d->cfg.release_ms = 5000;
	d->cfg.heartbeat_ms = 1000;
	d->cfg.heartbeat_misses = 3;
	d->cfg.pending_ms = 2000;
	d->cfg.pending_max = 64;
	d->cfg.pending_per_addr = 8;
	d->cfg.max_rooms_per_peer = 65536;
	d->cfg.max_tombstones_per_peer = 4096;
	/* every node shares one secret (tests may change a node's) */
	d->auth.n = 1;
	d->auth.len[0] = 32;
	memset(d->auth.key[0], 0x5a, 32);
	d->tcp_fd = d->eng_fd = d->sig_fd = -1;
	assert_int_equal(kvxd_chunk_cache_init(d), 0);
	d->cfg.n_rails = d->nrails = harness_rails;
	for (int k = 0; k < d->nrails; k++) {
		snprintf(d->cfg.rails[k].device, sizeof(d->cfg.rails[k].device), "%s.r%d", name, k);
		d->cfg.rails[k].port = 1;
		d->cfg.rails[k].gid_index = 1;
		d->cfg.rails[k].mtu = 1024;
		assert_int_equal(kvx_vx->dev_open(d->cfg.rails[k].device, 1, 1, &d->rails[k].dev),
				 0);
		assert_int_equal(kvx_vx->dev_query(d->rails[k].dev, &d->rails[k].info), 0);
		devs[k] = d->rails[k].dev;
	}
	snprintf(d->cfg.device, sizeof(d->cfg.device), "%s", d->cfg.rails[0].device);
	d->by_id = kvx_room_table_create(16);
	d->by_token = kvx_room_table_create(16);
	for (int c = 0; c < harness_cores; c++) {
		assert_int_equal(kvx_pcore_init(&d->cores[c], c, -1, devs, d->nrails, &d->cfg,
						d->by_id, d->by_token),
				 0);
		d->cores[c].clock_us = kvxd_now_us;
	}
	d->ncores = harness_cores;
	d->epfd = epoll_create1(EPOLL_CLOEXEC);
	assert_true(d->epfd >= 0);
}

/* Set up n nodes; nobody dials until a test resumes it (every dialing side starts paused). */
static void
nodes_setup(int n, const char *const *names)
{
	int port[MAX_NODES];

	const char *cores = getenv("KVX_TEST_CORES");

	if (cores && *cores) {
		harness_cores = atoi(cores);
		assert_true(harness_cores >= 1 && harness_cores <= KVX_MAX_CORES);
	}
	fake_vx_install();
	kvx_fault_disarm_all();
	kvxd_clock_ms = fake_clock;
	nnodes = n;
	for (int i = 0; i < n; i++) {
		node_init(&N[i], names[i]);
		port[i] = listen_any(&N[i]);
	}
	for (int i = 0; i < n; i++) {
		struct kvx_config *c = &N[i].cfg;

		for (int k = 0; k < n; k++) {
			struct kvx_config_peer *cp = &c->peers[c->n_peers];

			if (k == i)
				continue;
			snprintf(cp->name, sizeof(cp->name), "%s", names[k]);
			snprintf(cp->addr.host, sizeof(cp->addr.host), "127.0.0.1");
			cp->addr.port = (uint16_t)port[k];
			cp->allowed = true;
			cp->has_gid = true; /* the fake device's GID: ::ffff:0.0.0.0 */
			cp->gid[10] = cp->gid[11] = 0xff;
			if (harness_rails > 1) /* the other rails' GIDs: the same, allowed */
				cp->allow_from[cp->n_allow_from++] =
					(struct kvx_config_net){.addr = 0, .mask = 0xffffffffu};
			c->n_peers++;
		}
		kvxd_peer_init_all(&N[i]);
		for (int k = 0; k < N[i].npeers; k++)
			N[i].peers[k].paused =
				N[i].peers[k].initiator; /* tests resume the dialers */
	}
	base = fake_vx_live();
}

/* One iteration of each of d's polling cores. */
static __attribute__((unused)) void
node_poll_cores(struct kvxd *d)
{
	for (int c = 0; c < d->ncores; c++)
		kvx_pcore_poll_once(&d->cores[c]);
}

static void
pump_once(void)
{
	if (pump_hook)
		pump_hook();
	for (int i = 0; i < nnodes; i++)
		for (int c = 0; c < N[i].ncores; c++)
			kvx_pcore_poll_once(&N[i].cores[c]);
	for (int i = 0; i < nnodes; i++)
		kvxd_loop_once(&N[i], 0);
}

static __attribute__((unused)) const char *
nodes_state(void)
{
	static char buf[512];
	size_t off = 0;

	for (int i = 0; i < nnodes; i++)
		for (int k = 0; k < N[i].npeers; k++)
			off += snprintf(buf + off, sizeof(buf) - off, "%s->%s %s j%d; ",
					N[i].cfg.name, N[i].peers[k].name,
					kvxd_peer_state_str(N[i].peers[k].state),
					N[i].peers[k].j.n);
	return buf;
}

/* Step every node (advancing the fake clock by 1 ms a step) until cond holds. */
#define PUMP_UNTIL(cond)                                                                 \
	do {                                                                             \
		int i_;                                                                  \
		for (i_ = 0; i_ < 20000 && !(cond); i_++) {                              \
			pump_once();                                                     \
			fake_ms++;                                                       \
			if (i_ % 64 == 63)                                               \
				usleep(100);                                             \
		}                                                                        \
		if (!(cond))                                                             \
			fail_msg("timed out waiting for %s (%s)", #cond, nodes_state()); \
	} while (0)

static __attribute__((unused)) void
pump_ms(int ms)
{
	for (int i = 0; i < ms; i++) {
		pump_once();
		fake_ms++;
	}
}

/* d's session with peer is READY (false when d has no such peer). */
static __attribute__((unused)) bool
node_ready(struct kvxd *d, const char *peer)
{
	struct kvxd_peer *p = kvxd_peer_find(d, peer);

	return p && p->state == KVXD_PEER_READY;
}

/* A pool of np pages of ps bytes, one buffer, registered on each of d's rails (zeroed memory
 * in *mem). */
static __attribute__((unused)) void
node_pool_init(struct kvxd *d, struct kvxd_pool *pool, uint8_t **mem, uint32_t ps, uint32_t np)
{
	*mem = calloc(np, ps);
	assert_non_null(*mem);
	*pool = (struct kvxd_pool){.id = 1,
				   .engine_id = -1,
				   .base = *mem,
				   .len = (size_t)np * ps,
				   .page_size = ps,
				   .npages = np,
				   .nbufs = 1};
	for (int k = 0; k < d->nrails; k++) {
		assert_int_equal(
			kvx_vx->mr_reg(d->rails[k].dev, *mem, (size_t)np * ps, &pool->mr[k]), 0);
		pool->lkey[k] = kvx_vx->mr_lkey(pool->mr[k]);
		pool->rkey[k] = kvx_vx->mr_rkey(pool->mr[k]);
	}
}

static __attribute__((unused)) void
node_pool_fini(struct kvxd_pool *pool, uint8_t *mem)
{
	for (int k = 0; k < KVX_MAX_RAILS; k++)
		if (pool->mr[k])
			assert_int_equal(kvx_vx->mr_dereg(pool->mr[k]), 0);
	free(mem);
}

static bool
all_idle(void)
{
	for (int i = 0; i < nnodes; i++) {
		if (N[i].live_qpcs)
			return false;
		for (int k = 0; k < N[i].npeers; k++)
			if (N[i].peers[k].state != KVXD_PEER_IDLE || N[i].peers[k].j.n)
				return false;
	}
	return true;
}

static void
assert_live_at_base(void)
{
	struct fake_vx_live now = fake_vx_live();

	assert_int_equal(now.qp, base.qp);
	assert_int_equal(now.mr, base.mr);
	assert_int_equal(now.cq, base.cq);
	assert_int_equal(now.dev, base.dev);
}

static void
nodes_teardown(void)
{
	for (int i = 0; i < nnodes; i++) /* a test that started the verbs workers */
		kvxd_vwork_stop(&N[i]);
	for (int i = 0; i < nnodes; i++)
		for (int k = 0; k < N[i].npeers; k++)
			kvxd_peer_admin(&N[i], N[i].peers[k].name, "pause");
	for (int i = 0; i < 5000 && !all_idle(); i++) {
		pump_once();
		fake_ms++;
	}
	assert_live_at_base(); /* every QP every test created is gone */
	for (int i = 0; i < nnodes; i++) {
		struct kvxd *d = &N[i];

		kvx_rcu_barrier();
		for (int c = 0; c < d->ncores; c++)
			kvx_pcore_fini(&d->cores[c]);
		kvx_room_table_destroy(d->by_id);
		kvx_room_table_destroy(d->by_token);
		kvxd_timer_heap_fini(&d->room_timers);
		for (int k = 0; k < d->nrails; k++)
			kvx_vx->dev_close(d->rails[k].dev);
		close(d->tcp_fd);
		kvxd_pending_close_all(d);
		close(d->epfd);
		for (int k = 0; k < d->npeers; k++)
			free(d->peers[k].pend_status);
		kvxd_chunk_cache_fini(d);
		kvxd_admin_fini(d);
	}
}

static int
first_live_room(struct kvx_room_table_node *n, void *arg)
{
	struct kvxd_room *r = caa_container_of(n, struct kvxd_room, pc.by_id);

	if (r->removing)
		return 0;
	*(struct kvxd_room **)arg = r;
	return 1;
}

/* A room of node d not being removed yet, or NULL. */
static struct kvxd_room *
nodes_live_room(struct kvxd *d)
{
	struct kvxd_room *r = NULL;

	rcu_read_lock();
	kvx_room_table_for_each(d->by_id, first_live_room, &r);
	rcu_read_unlock();
	return r;
}

/* Take every room of node d out (rooms hold pool references: before the pools go). */
static __attribute__((unused)) void
nodes_remove_rooms(struct kvxd *d)
{
	struct kvxd_room *r;

	do {
		r = nodes_live_room(d);
		if (r)
			kvxd_room_remove(d, r);
		for (int k = 0; k < 4; k++)
			pump_once();
	} while (r);
}

/* Call step(1) until no polling core has messages left either way (a core takes 8 per
 * iteration: a backlog takes a while), bounded. */
static __attribute__((unused)) void
nodes_settle(void (*step)(int))
{
	for (int guard = 0; guard < 100000; guard++) {
		bool idle = true;

		for (int i = 0; i < nnodes; i++)
			for (int c = 0; c < N[i].ncores; c++)
				idle = idle && kvx_mbox_empty(N[i].cores[c].inbox) &&
				       kvx_mbox_empty(N[i].cores[c].outbox);
		if (idle)
			return;
		step(1);
	}
	fail_msg("the polling cores never run out of messages (%s)", nodes_state());
}

/* Every room of every node goes, the cores settled after each; a room that cannot go fails
 * the test. */
static __attribute__((unused)) void
nodes_remove_rooms_settled(void (*step)(int))
{
	for (int i = 0; i < nnodes; i++) {
		struct kvxd_room *r = NULL;

		for (int guard = 0; guard < 100000; guard++) {
			r = nodes_live_room(&N[i]);
			if (!r)
				break;
			kvxd_room_remove(&N[i], r);
			nodes_settle(step);
		}
		if (r)
			fail_msg("node %d: rooms are not removable (%s)", i, nodes_state());
	}
}

/* A decode room of rank 0 with one region of whole pages, straight into the tables (no checks,
 * not on its core): kvxd_decode_room_new for the common shape. */
static __attribute__((unused)) struct kvxd_room *
decode_room_new1(struct kvxd *d, uint64_t id, int engine_id, struct kvxd_pool *pool,
		 const uint32_t *pages, uint32_t npages, const char (*names)[KVX_NAME_MAX],
		 const int *src_peer, uint32_t nsrc)
{
	struct kvxd_room_shape sh = {.nreg = 1, .nsrc = nsrc};

	sh.reg[0].pool = pool;
	sh.reg[0].npages = npages;
	sh.reg[0].pages = pages;
	for (uint32_t i = 0; i < nsrc; i++)
		memcpy(sh.names[i], names[i], KVX_NAME_MAX);
	return kvxd_decode_room_new(d, id, 0, engine_id, &sh, src_peer);
}

#endif /* KVX_TESTS_NODES_HARNESS_H */
