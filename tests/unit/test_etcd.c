/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Membership through etcd (control/etcd.h) against a scripted gateway in this process: the
 * client's HTTP/1.1 and JSON, what a node found or lost does to the peer table, and what etcd
 * (or whoever answers on its port) must not be able to do: bad entries are refused and counted,
 * oversized or malformed answers restart the client without losing the peers it found, a
 * lease etcd forgot is registered again, a watch that ends is replaced by a full read.  The
 * peers are real control cores on the fake verbs: "a" finds "c" (which has "a" configured) and
 * both authenticate as usual.  Entries of nodes that never answer name ports 20001 to 20009:
 * below the kernel's range for port 0 (32768 and up), where no test running beside this one
 * (ctest -j2) can be listening.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
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
#include <openssl/evp.h>

#include "control/admin.h"
#include "control/etcd.h"
#include "control/kvxd.h"
#include "control/loop.h"
#include "control/members.h"
#include "control/peer.h"
#include "control/peer_io.h"
#include "core/fault.h"

#include "nodes_harness.h"
#define GW_PREFIX "/kvx/t/"
#include "etcd_gateway.h"

#define A N[0]
#define C N[1]
#define PREFIX GW_PREFIX
/* what "a" registered (its address, its one rail's GID, when, signed) */
#define OWN GW_OWN

/* ---- the nodes ----------------------------------------------------------------------------- */

static struct kvx_config_peer c_as_static; /* a's section for c, as the harness made it */

static bool
gone(struct kvxd *d, const char *name)
{
	for (int i = 0; i < d->npeers; i++)
		if (!d->peers[i].vacant && strcmp(d->peers[i].name, name) == 0)
			return false;
	return true;
}

/* "a" has no section for "c" and asks the gateway; "c" has "a" configured */
static int
setup(void **state)
{
	static const char *const names[] = {"a", "c"};
	struct kvx_config *next = calloc(1, sizeof(*next));
	char err[256];

	(void)state;
	nodes_setup(2, names);
	c_as_static = A.cfg.peers[0];
	*next = A.cfg;
	next->n_peers = 0;
	assert_int_equal(kvxd_members_apply(&A, next, err, sizeof(err)), 0);
	free(next);
	PUMP_UNTIL(A.peers[0].vacant);
	gw_start_for(&A);
	return 0;
}

static int
teardown(void **state)
{
	(void)state;
	gw_stop_for(&A);
	nodes_teardown();
	return 0;
}

static char c_addr[64];

/* A watch event at revision rev: PREFIX name put with the value val (signed as the gateway
 * signs: gw_signed). */
static void
watch_put(const char *name, const char *val, int rev)
{
	char ev[1536], key[64], k[96], v[1024], *sv;

	snprintf(key, sizeof(key), PREFIX "%s", name);
	b64(k, key);
	sv = gw_signed(key, val);
	assert_true(strlen(sv) < 700);
	b64(v, sv);
	free(sv);
	snprintf(ev, sizeof(ev),
		 "{\"result\":{\"header\":{\"revision\":\"%d\"},\"events\":[{\"kv\":{\"key\":"
		 "\"%s\",\"value\":\"%s\"}}]}}",
		 rev, k, v);
	gw_watch(ev);
}

/* a registers (lease, put with it, a full read, a watch from the revision after it) */
static void
start_found(const char *const *extra, int nextra)
{
	const char *kv[16] = {PREFIX "a", OWN, PREFIX "c", c_addr};

	/* the fake device's GID, which c publishes with its address */
	snprintf(c_addr, sizeof(c_addr), "127.0.0.1:%u ::ffff:0.0.0.0", c_as_static.addr.port);
	for (int i = 0; i < 2 * nextra; i++)
		kv[4 + i] = extra[i];
	gw_range(kv, 2 + nextra);
	assert_int_equal(kvxd_etcd_start(&A), 0);
	PUMP_UNTIL(gw.watches == 1 && node_ready(&A, "c") && node_ready(&C, "a"));
	assert_int_equal(gw.grants, 1);
	assert_int_equal(gw.puts, 1);
	assert_int_equal(A.ctr.etcd_registered, 1);
	assert_true(kvxd_peer_find(&A, "c")->discovered);
	assert_null(kvxd_peer_find(&A, "a")); /* ourselves */
}

/* Found through the gateway, a node authenticates and connects like a configured one; the
 * watch adds and removes nodes; a node gone ends its session (and c's side of it). */
static void
test_found_and_lost(void **state)
{
	uint64_t resets;

	(void)state;
	start_found(NULL, 0);
	assert_int_equal(A.ctr.members_found, 1);
	{
		static char out[4096];

		assert_int_equal(kvxd_admin(&A, "peers", false, -1, out, sizeof(out)), 0);
		assert_non_null(strstr(out, "peer c 127.0.0.1:"));
		assert_non_null(strstr(out, " discovered"));
	}
	/* x1 at 127.0.0.1:20001 */
	watch_put("x1", "127.0.0.1:20001", 11);
	PUMP_UNTIL(kvxd_peer_find(&A, "x1") != NULL);
	assert_int_equal(kvxd_peer_find(&A, "x1")->addr.port, 20001);
	/* x1 never connected (nothing listens there): gone as soon as its key goes */
	gw_watch("{\"result\":{\"header\":{\"revision\":\"12\"},\"events\":[{\"type\":\"DELETE\","
		 "\"kv\":{\"key\":\"L2t2eC90L3gx\"}}]}}"); /* /kvx/t/x1 */
	PUMP_UNTIL(gone(&A, "x1"));
	assert_int_equal(A.ctr.members_lost, 1);
	/* c's key goes while its session is READY (a lease that lapsed while etcd was slow looks
	 * the same): the session is kept until it ends, then c is removed */
	resets = kvxd_peer_find(&C, "a")->n_resets;
	gw_watch("{\"result\":{\"header\":{\"revision\":\"13\"},\"events\":[{\"type\":\"DELETE\","
		 "\"kv\":{\"key\":\"L2t2eC90L2M=\"}}]}}"); /* /kvx/t/c */
	PUMP_UNTIL(!kvxd_peer_find(&A, "c") || kvxd_peer_find(&A, "c")->unlisted);
	assert_non_null(kvxd_peer_find(&A, "c"));
	pump_ms(2000);
	assert_true(node_ready(&A, "c") && node_ready(&C, "a"));
	assert_int_equal(kvxd_peer_find(&C, "a")->n_resets, resets);
	assert_int_equal(A.ctr.members_lost, 1);
	kvxd_peer_admin(&C, "a", "pause"); /* c's side ends the session */
	PUMP_UNTIL(gone(&A, "c"));
	assert_int_equal(A.ctr.members_lost, 2);
	assert_int_equal(A.ctr.etcd_errors, 0);
}

/* Entries no node could have written are refused and counted: a name that is not a node name,
 * a key outside the prefix, an address that is not IPv4:port, the wildcard address, a key
 * that is not base64.  Nothing of them becomes a peer. */
static void
test_bad_entries_refused(void **state)
{
	static const char *const bad[] = {
		PREFIX "bad name", "127.0.0.1:20002", /* a space */
		"/other/z",	   "127.0.0.1:20003", /* outside the prefix */
		PREFIX "y1",	   "nonsense",	      /* not IPv4:port */
		PREFIX "y2",	   "0.0.0.0:20004",   /* nobody can dial that */
	};

	(void)state;
	start_found(bad, 4);
	assert_int_equal(A.ctr.members_refused, 4);
	gw_watch("{\"result\":{\"header\":{\"revision\":\"11\"},\"events\":[{\"kv\":{\"key\":"
		 "\"!!!!\",\"value\":\"MTI3LjAuMC4xOjIwMDAx\"}}]}}");
	PUMP_UNTIL(A.ctr.members_refused == 5);
	for (int i = 0; i < A.npeers; i++)
		if (!A.peers[i].vacant)
			assert_string_equal(A.peers[i].name, "c"); /* the only peer */
}

/* Answers that are not what a gateway says restart the client (counted); the peers it found
 * stay; it registers again and reads again. */
static void
test_hostile_answers_restart_the_client(void **state)
{
	static const char chunk_overflow[] = "HTTP/1.1 200 OK\r\nTransfer-Encoding: chunked\r\n\r\n"
					     "fffffffffffffffffff\r\n";
	static const char too_long[] = "HTTP/1.1 200 OK\r\nContent-Length: 2097152\r\n\r\n{";
	static const char not_json[] = "HTTP/1.1 200 OK\r\nContent-Length: 5\r\n\r\nhello";
	static const char error[] = "HTTP/1.1 500 Internal\r\nContent-Length: 2\r\n\r\n{}";
	static const char cut[] = "HTTP/1.1 200 OK\r\nContent-Length: 90\r\n\r\n{\"ID\"";
	static const char *const raw[] = {chunk_overflow, too_long, not_json, error, cut};
	static const size_t rlen[] = {sizeof(chunk_overflow) - 1, sizeof(too_long) - 1,
				      sizeof(not_json) - 1, sizeof(error) - 1, sizeof(cut) - 1};
	char *big;

	(void)state;
	start_found(NULL, 0);
	for (int i = 0; i < 5; i++) {
		uint64_t errs = A.ctr.etcd_errors;
		int grants = gw.grants;

		gw_watch_end(); /* the client reads the prefix again: that call gets raw[i] */
		gw.raw_next = raw[i];
		gw.raw_len = rlen[i];
		PUMP_UNTIL(A.ctr.etcd_errors > errs);
		PUMP_UNTIL(gw.grants > grants && gw.watches == i + 2); /* back, and watching */
		assert_true(node_ready(&A, "c"));
	}
	/* a watch message over 1 MiB (in chunks of 64 KiB) ends the watch, not the node */
	big = malloc(65536);
	memset(big, ' ', 65536);
	memcpy(big, "{\"result\":", 10);
	for (int i = 0; i < 20 && gw.watch_fd >= 0; i++) {
		gw_send(gw.watch_fd, "10000\r\n", 7);
		gw_send(gw.watch_fd, big, 65536);
		gw_send(gw.watch_fd, "\r\n", 2);
		memset(big, ' ', 10);
	}
	free(big);
	PUMP_UNTIL(A.ctr.etcd_watch_restarts >= 6 && gw.watches == 7);
	assert_true(node_ready(&A, "c"));
}

/* A watch that ends is replaced by a full read: a node that went meanwhile is removed then. */
static void
test_watch_end_resyncs(void **state)
{
	static const char *const x1[] = {PREFIX "x1", "127.0.0.1:20001"};
	const char *kv[] = {PREFIX "a", OWN, PREFIX "c", c_addr};

	(void)state;
	start_found(x1, 1);
	assert_non_null(kvxd_peer_find(&A, "x1"));
	gw_range(kv, 2); /* x1 left while nobody watched */
	gw_watch_end();
	PUMP_UNTIL(gw.watches == 2);
	assert_null(kvxd_peer_find(&A, "x1"));
	assert_true(node_ready(&A, "c"));
	assert_int_equal(A.ctr.etcd_watch_restarts, 1);
}

/* A lease etcd no longer knows (a keepalive answered without TTL) is registered again. */
static void
test_lost_lease_registers_again(void **state)
{
	(void)state;
	start_found(NULL, 0);
	pump_ms(1200); /* a keepalive every lease_s / 3 */
	assert_true(gw.keepalives >= 1);
	assert_int_equal(gw.grants, 1);
	gw.lease_lost = true;
	PUMP_UNTIL(gw.grants == 2 && gw.puts == 2);
	gw.lease_lost = false;
	PUMP_UNTIL(A.ctr.etcd_registered == 2);
	assert_true(node_ready(&A, "c"));
}

/* Keepalives go out every third of the lease whatever the watch does: a gateway that ends the
 * watch every 400 ms, or refuses it outright, must not make the node's lease expire (before:
 * every re-read pushed the keepalive back, and a refused watch was retried at once, without
 * end: 0 keepalives and 1500 reads in 6 s). */
static void
test_keepalives_whatever_the_watch_does(void **state)
{
	int k0, r0;

	(void)state;
	start_found(NULL, 0);
	k0 = gw.keepalives;
	for (int i = 0; i < 15; i++) {
		gw_watch_end();
		pump_ms(400);
	}
	assert_true(gw.keepalives - k0 >= 5); /* 6 s, lease 3 s: one a second */
	gw.watch_503 = true;
	k0 = gw.keepalives;
	r0 = gw.ranges;
	gw_watch_end();
	pump_ms(6000);
	assert_true(gw.keepalives - k0 >= 5);
	assert_true(gw.ranges - r0 <= 7); /* a read a second at most, not a busy loop */
	assert_true(node_ready(&A, "c"));
}

/* A [peer.*] section wins over an etcd entry of the same name: the entry neither moves nor
 * replaces the configured peer. */
static void
test_section_wins_over_etcd(void **state)
{
	const char *kv[] = {PREFIX "c", "127.0.0.1:20009"};
	struct kvx_config *next = calloc(1, sizeof(*next));
	struct kvxd_peer *p;
	char err[256];

	(void)state;
	*next = A.cfg;
	next->peers[0] = c_as_static;
	next->n_peers = 1;
	assert_int_equal(kvxd_members_apply(&A, next, err, sizeof(err)), 0);
	free(next);
	kvxd_peer_admin(&A, "c", "resume");
	PUMP_UNTIL(node_ready(&A, "c"));
	p = kvxd_peer_find(&A, "c");
	gw_range(kv, 1);
	assert_int_equal(kvxd_etcd_start(&A), 0);
	PUMP_UNTIL(gw.watches == 1);
	assert_ptr_equal(kvxd_peer_find(&A, "c"), p);
	assert_false(p->discovered);
	assert_int_equal(p->addr.port, c_as_static.addr.port);
	assert_int_equal(p->state, KVXD_PEER_READY);
	/* nor once its session ends */
	kvxd_peer_admin(&C, "a", "pause");
	PUMP_UNTIL(!node_ready(&A, "c"));
	pump_ms(500);
	assert_ptr_equal(kvxd_peer_find(&A, "c"), p);
	assert_false(p->discovered);
	assert_int_equal(p->addr.port, c_as_static.addr.port);
	assert_int_equal(A.ctr.members_found + A.ctr.members_lost, 0);
	/* the section removed (a reload): c is taken from etcd at once, not when the watch
	 * happens to end (mutant members_section_gone_no_reread) */
	next = calloc(1, sizeof(*next));
	*next = A.cfg;
	next->n_peers = 0;
	assert_int_equal(kvxd_members_apply(&A, next, err, sizeof(err)), 0);
	free(next);
	PUMP_UNTIL((p = kvxd_peer_find(&A, "c")) && p->discovered);
	assert_int_equal(p->addr.port, 20009);
	assert_int_equal(A.ctr.members_found, 1);
}

/* a's CQs have room for one peer, c (found) holds it, and x1 is listed (a watch event): the
 * entry is refused for want of room, and a full read is due later */
static void
x1_without_room(void)
{
	A.cfg.cq_depth = 2 * (A.cfg.sq_depth + A.cfg.rq_depth); /* room for one peer */
	start_found(NULL, 0);
	watch_put("x1", "127.0.0.1:20001", 11);
}

/* A watch event at revision rev on our own key: its DELETE (raw NULL), or a PUT of raw (the
 * value as the gateway sends it: base64, or not). */
static void
watch_own(int rev, const char *raw)
{
	char k[64], ev[512];

	b64(k, PREFIX "a");
	if (raw)
		snprintf(ev, sizeof(ev),
			 "{\"result\":{\"header\":{\"revision\":\"%d\"},\"events\":[{\"kv\":{"
			 "\"key\":\"%s\",\"value\":\"%s\"}}]}}",
			 rev, k, raw);
	else
		snprintf(ev, sizeof(ev),
			 "{\"result\":{\"header\":{\"revision\":\"%d\"},\"events\":[{\"type\":"
			 "\"DELETE\",\"kv\":{\"key\":\"%s\"}}]}}",
			 rev, k);
	gw_watch(ev);
}

/* A watch event: c is listed with another GID (val, 64 bytes: what it says). */
static void
c_moves(char *val)
{
	snprintf(val, 64, "127.0.0.1:%u ::ffff:0.0.0.1", c_as_static.addr.port);
	watch_put("c", val, 11);
}

/* c's entry moves (another GID, as a node restarted elsewhere would write, or anyone with
 * write access to etcd) while its session is READY: the authenticated session is kept (before:
 * torn down at once; mutant moved_ends_session).  Once that session ends, c is removed and
 * found again where etcd lists it then (mutant moved_kept_forever). */
static void
test_moved_peer_keeps_its_session(void **state)
{
	char val[64];
	uint64_t resets;

	(void)state;
	start_found(NULL, 0);
	resets = kvxd_peer_find(&C, "a")->n_resets;
	c_moves(val);
	PUMP_UNTIL(kvxd_peer_find(&A, "c") && kvxd_peer_find(&A, "c")->moved);
	pump_ms(2000);
	assert_true(node_ready(&A, "c") && node_ready(&C, "a"));
	assert_int_equal(kvxd_peer_find(&C, "a")->n_resets, resets);
	assert_int_equal(A.ctr.members_lost, 0);
	assert_int_equal(A.cfg.peers[kvxd_peer_find(&A, "c")->idx].gid[15], 0);
	{
		const char *kv[] = {PREFIX "a", OWN, PREFIX "c", val};

		gw_range(kv, 2); /* what etcd holds now */
	}
	kvxd_peer_admin(&C, "a", "pause"); /* the session ends */
	PUMP_UNTIL(A.ctr.members_lost == 1 && A.ctr.members_found == 2);
	assert_non_null(kvxd_peer_find(&A, "c"));
	assert_false(kvxd_peer_find(&A, "c")->moved);
	assert_int_equal(A.cfg.peers[kvxd_peer_find(&A, "c")->idx].gid[15], 1);
}

/* Keepalives have their own connection: a read that etcd answers slowly does not hold them
 * back (before: they waited for the call, and a lease of 3 s could lapse behind a read that
 * took up to its 3 s deadline). */
static void
test_keepalives_during_a_slow_read(void **state)
{
	int k0;

	(void)state;
	start_found(NULL, 0);
	k0 = gw.keepalives;
	gw.hold_ranges = true;
	gw_watch_end(); /* a full read in 1 s, which etcd holds */
	pump_ms(3500);
	assert_int_equal(gw.watches, 1); /* the read is still held */
	assert_true(gw.keepalives - k0 >= 3);
	gw.hold_ranges = false;
	PUMP_UNTIL(gw.watches == 2);
	assert_true(node_ready(&A, "c"));
}

/* A lease granted shorter than lease_s is kept alive at a third of what etcd granted. */
static void
test_keepalives_follow_the_granted_ttl(void **state)
{
	int k0;

	(void)state;
	gw.grant_ttl = 1; /* lease_s is 3 */
	start_found(NULL, 0);
	k0 = gw.keepalives;
	pump_ms(2000);
	assert_true(gw.keepalives - k0 >= 5); /* every 333 ms, not every second */
	gw.grant_ttl = 0;
}

/* ms of the fake clock in steps of 100 ms (minutes of it, quickly) */
static void
pump_coarse(uint64_t ms)
{
	for (uint64_t t = 0; t < ms; t += 100) {
		pump_once();
		fake_ms += 100;
	}
}

/* A watch that says nothing for 11 minutes is set up again with a full read (a proxy may drop it
 * without a word); one that talks (a progress notification, which etcd sends every 10 minutes
 * by default) is kept. */
static void
test_silent_watch_is_set_up_again(void **state)
{
	int r0;

	(void)state;
	start_found(NULL, 0);
	r0 = gw.ranges;
	pump_coarse(8 * 60000);
	gw_watch("{\"result\":{\"header\":{\"revision\":\"10\"}}}"); /* progress */
	pump_coarse(10 * 60000);
	assert_int_equal(gw.watches, 1);
	assert_int_equal(gw.ranges, r0);
	pump_coarse(2 * 60000);
	assert_int_equal(gw.watches, 2);
	assert_int_equal(gw.ranges, r0 + 1);
	assert_true(node_ready(&A, "c"));
}

/* A keepalive that gets no answer within a third of the TTL is tried again while the lease still
 * lives (an etcd election), without starting over; only a whole TTL without an answered one
 * starts the client over (a new lease).  Registering again closes a keepalive still open. */
static void
test_slow_keepalive_tried_again(void **state)
{
	uint64_t e0;

	(void)state;
	start_found(NULL, 0);
	PUMP_UNTIL(gw.keepalives >= 1);
	e0 = A.ctr.etcd_errors;
	gw.hold_keepalives = true;
	PUMP_UNTIL(gw_held("POST /v3/lease/keepalive ") == 1);
	pump_ms(1500); /* its deadline passes: a second try */
	assert_true(A.ctr.etcd_errors > e0);
	assert_int_equal(gw.grants, 1);
	gw.hold_keepalives = false;
	PUMP_UNTIL(gw.keepalives >= 2);
	pump_ms(500);
	assert_int_equal(gw.grants, 1);
	assert_int_equal(gw.watches, 1);
	/* held for longer than the TTL: the lease is taken for gone, registered anew */
	gw.hold_keepalives = true;
	pump_ms(4000);
	assert_int_equal(gw.grants, 2);
	gw.hold_keepalives = false;
	PUMP_UNTIL(gw.watches == 2);
	/* our key deleted while a keepalive waits: registered again, that keepalive closed */
	gw.hold_keepalives = true;
	PUMP_UNTIL(gw_held("POST /v3/lease/keepalive ") == 1);
	watch_own(11, NULL);
	PUMP_UNTIL(gw.puts == 3);
	pump_ms(50); /* well before that keepalive's own deadline */
	assert_int_equal(gw_held("POST /v3/lease/keepalive "), 0);
	gw.hold_keepalives = false;
	PUMP_UNTIL(gw.watches == 3);
	assert_true(node_ready(&A, "c"));
}

/* A found node that moves while it has no live session is replaced at once: removed, and added
 * at its new place. */
static void
test_moved_idle_peer_replaced_at_once(void **state)
{
	char val[64];

	(void)state;
	start_found(NULL, 0);
	kvxd_peer_admin(&A, "c", "pause");
	PUMP_UNTIL(!node_ready(&A, "c"));
	c_moves(val);
	PUMP_UNTIL(A.ctr.members_found == 2);
	assert_int_equal(A.ctr.members_lost, 1);
	assert_int_equal(A.cfg.peers[kvxd_peer_find(&A, "c")->idx].gid[15], 1);
	assert_false(kvxd_peer_find(&A, "c")->moved);
}

/* Our own name listed with another value (another node configured with our name) is said and
 * counted once, not on every read; nothing else changes. */
static void
test_own_name_elsewhere_is_said_once(void **state)
{
	const char *kv[] = {PREFIX "a", "127.0.0.1:9999", PREFIX "c", c_addr};

	(void)state;
	start_found(NULL, 0);
	assert_int_equal(A.ctr.members_refused, 0);
	gw.t = UINT64_MAX / 2; /* a node that registered after a, signed with the cluster's key */
	gw_range(kv, 2);
	gw.t = 0;
	gw_watch_end();
	PUMP_UNTIL(gw.watches == 2);
	assert_int_equal(A.ctr.members_refused, 1);
	gw_watch_end();
	PUMP_UNTIL(gw.watches == 3);
	assert_int_equal(A.ctr.members_refused, 1);
	assert_null(kvxd_peer_find(&A, "a"));
	assert_true(node_ready(&A, "c"));
	assert_int_equal(gw.puts, 1); /* not written again: it is not forged */
}

/* A read at the largest revision is refused (the watch would start past it: a signed
 * overflow), counted, and the client starts over. */
static void
test_revision_at_the_end_refused(void **state)
{
	const char *kv[] = {PREFIX "a", OWN, PREFIX "c", c_addr};

	(void)state;
	start_found(NULL, 0);
	gw.range_rev = "9223372036854775807";
	gw_range(kv, 2);
	gw_watch_end();
	PUMP_UNTIL(A.ctr.etcd_errors == 1);
	gw.range_rev = NULL;
	gw_range(kv, 2);
	PUMP_UNTIL(gw.watches == 2);
	assert_true(node_ready(&A, "c"));
}

/* A node listed while the CQs have room for no more peer is refused then, and taken by a later
 * full read once there is room (before: never, until the watch happened to end). */
static void
test_refused_entry_taken_later(void **state)
{
	const char *kv[] = {PREFIX "a", OWN, PREFIX "x1", "127.0.0.1:20001"};

	(void)state;
	x1_without_room();
	PUMP_UNTIL(A.ctr.members_refused == 1);
	assert_null(kvxd_peer_find(&A, "x1"));
	gw_range(kv, 2);		   /* c left (its lease expired) */
	kvxd_peer_admin(&A, "c", "pause"); /* and its session ended */
	PUMP_UNTIL(kvxd_peer_find(&A, "x1") != NULL);
	assert_null(kvxd_peer_find(&A, "c"));
	assert_int_equal(A.ctr.members_found, 2);
	assert_int_equal(A.ctr.members_lost, 1);
}

/* An entry refused for want of room asks for a full read later (resync); when that time comes
 * while no watch is open (a full read is on its way anyway), the resync is taken all the same:
 * before, it stayed due, and the loop's timeout was 0 until the watch was back (a busy loop;
 * mutant etcd_resync_spins). */
static void
test_resync_due_without_a_watch_is_taken(void **state)
{
	uint64_t t0;

	(void)state;
	x1_without_room();
	PUMP_UNTIL(A.ctr.members_refused == 1); /* the resync is due 2 s from now */
	t0 = fake_ms;
	pump_ms(1500);
	gw_watch_end(); /* the next full read comes 1 s after the watch ended: after the resync */
	pump_ms(600);
	assert_true(kvxd_etcd_next_due(&A) > fake_ms);
	assert_true(fake_ms >= t0 + 2100);
}

/* A node with several rails registers a GID per rail: each is the exact GID that rail's QPs
 * must carry; more GIDs than rails kvxd has are refused. */
static void
test_gid_per_rail(void **state)
{
	const struct kvx_config_peer *cp;
	struct kvxd_peer *p;

	(void)state;
	start_found(NULL, 0);
	watch_put("d", "127.0.0.1:9 ::ffff:10.77.0.2 ::ffff:10.78.0.2", 11);
	PUMP_UNTIL(kvxd_peer_find(&A, "d") != NULL);
	p = kvxd_peer_find(&A, "d");
	cp = &A.cfg.peers[p->idx];
	assert_true(cp->has_gid);
	assert_int_equal(cp->gid[12], 10);
	assert_int_equal(cp->gid[13], 77);
	assert_int_equal(cp->n_rail_gid, 1);
	assert_int_equal(cp->rail_gid[0][13], 78);
	assert_int_equal(cp->rail_gid[0][15], 2);

	watch_put("e", "127.0.0.1:9 ::1 ::2 ::3 ::4 ::5", 12);
	PUMP_UNTIL(A.ctr.members_refused == 1);
	assert_null(kvxd_peer_find(&A, "e"));
}

/* The prefix is read a page at a time, and a page too large is read again with fewer entries:
 * keys under the prefix, however many and however large (two values of 1.5 MiB, as large as
 * etcd takes by default, and 70 more entries), cannot keep a node from reading the others.
 * Before, the read of everything had to fit 1 MiB: one such key stopped membership on every
 * node, which read, failed, and registered again for ever (mutant etcd_range_unpaged). */
static void
large_entries_read(void)
{
	const char *kv[2 * 74];
	char names[70][32], *big = malloc(3 << 19);
	uint64_t errs;

	assert_non_null(big);
	memset(big, '9', 3 << 19);
	big[0] = '!'; /* as it is: too large to sign (refused all the same) */
	big[(3 << 19) - 1] = '\0';
	for (int i = 0; i < 70; i++) {
		snprintf(names[i], sizeof(names[i]), PREFIX "b%03d", i);
		kv[2 * i] = names[i];
		kv[2 * i + 1] = "not an address";
	}
	kv[140] = PREFIX "b5big";
	kv[141] = big;
	kv[142] = PREFIX "b6big";
	kv[143] = big;
	kv[144] = PREFIX "a";
	kv[145] = OWN;
	kv[146] = PREFIX "c";
	snprintf(c_addr, sizeof(c_addr), "127.0.0.1:%u ::ffff:0.0.0.0", c_as_static.addr.port);
	kv[147] = c_addr;
	gw_range(kv, 74);
	errs = A.ctr.etcd_errors;
	assert_int_equal(kvxd_etcd_start(&A), 0);
	PUMP_UNTIL(gw.watches == 1 && node_ready(&A, "c"));
	assert_int_equal(A.ctr.etcd_errors, errs);
	assert_int_equal(gw.grants, 1);
	assert_true(gw.range_pages >= 3);
	assert_true(A.ctr.etcd_pages_shrunk >= 1);
	assert_int_equal(A.ctr.members_refused, 72); /* the 70 and the two large ones */
	free(big);
}

/* etcd's gateway sends a large answer as one chunk of its whole size (no Content-Length): a
 * chunk over the page's bound reads the page again with fewer entries too (before, it failed
 * the read as malformed, every time: mutant etcd_chunk_too_large_fails) */
static void
test_large_entries_do_not_stop_the_read(void **state)
{
	(void)state;
	large_entries_read();
}

/* the same with answers that say their length */
static void
test_large_entries_with_a_content_length(void **state)
{
	(void)state;
	gw.range_clen = true;
	large_entries_read();
}

/* Entries are signed with the cluster's key (over the key, the value and when the node
 * registered): one not signed, signed with another key, or older than the one taken (a replay
 * of a node's earlier entry) is refused and counted, and changes nothing; before, anyone who
 * could write under the prefix listed a node at an address of its choosing (mutants
 * etcd_entry_unsigned, etcd_entry_replayed).  Our own key holding such an entry is written
 * again, once per second at most (mutant etcd_own_forged_kept). */
static void
test_entries_are_signed(void **state)
{
	static const struct kvx_auth_keys other = {.n = 1, .len = {32}, .key = {{1, 2, 3}}};
	const struct kvx_auth_keys *ours = gw.sign;
	struct kvxd_peer *c;
	uint64_t refused;
	int puts;

	(void)state;
	start_found(NULL, 0);
	c = kvxd_peer_find(&A, "c");
	assert_non_null(c);
	assert_int_equal(c->etcd_epoch, 1);
	refused = A.ctr.members_refused;
	/* x1, unsigned; x2, signed with another key; c elsewhere, unsigned */
	watch_put("x1", "!127.0.0.1:20001", 11);
	gw.sign = &other;
	watch_put("x2", "127.0.0.1:20002", 12);
	gw.sign = ours;
	watch_put("c", "!127.0.0.1:20009", 13);
	PUMP_UNTIL(A.ctr.members_refused == refused + 3);
	/* c elsewhere, signed, but older than the entry taken */
	gw.t = 0;
	c->etcd_epoch = 5;
	watch_put("c", "127.0.0.1:20009", 14);
	PUMP_UNTIL(A.ctr.members_refused == refused + 4);
	assert_null(kvxd_peer_find(&A, "x1"));
	assert_null(kvxd_peer_find(&A, "x2"));
	assert_ptr_equal(kvxd_peer_find(&A, "c"), c);
	assert_false(c->moved);
	assert_true(node_ready(&A, "c"));
	/* a newer one of c is taken */
	gw.t = 7;
	watch_put("x3", "127.0.0.1:20003", 15);
	PUMP_UNTIL(kvxd_peer_find(&A, "x3") != NULL);
	assert_int_equal(kvxd_peer_find(&A, "x3")->etcd_epoch, 7);
	gw.t = 0;
	/* our own key: forged, then an older entry of ours, each written again */
	puts = gw.puts;
	watch_put("a", "!127.0.0.1:9999", 16);
	PUMP_UNTIL(gw.puts == puts + 1 && gw.watches >= 2);
	assert_int_equal(A.ctr.etcd_reasserted, 1);
	PUMP_UNTIL(gw.watch_fd >= 0);
	watch_put("a", "127.0.0.1:9999", 17); /* t=1: before a registered */
	PUMP_UNTIL(gw.puts == puts + 2);
	assert_int_equal(A.ctr.etcd_reasserted, 2);
	/* not base64 at all: written again too (before: taken as any bad entry, and our key
	 * left so; mutant etcd_own_junk_kept) */
	PUMP_UNTIL(gw.watch_fd >= 0);
	watch_own(18, "!!!!");
	PUMP_UNTIL(gw.puts == puts + 3);
	assert_int_equal(A.ctr.etcd_reasserted, 3);
	/* written again each time, but further apart (1, 2, 4 s...): two nodes of one name with
	 * different secrets do not write their keys in a loop (mutant etcd_reassert_no_backoff) */
	PUMP_UNTIL(gw.watch_fd >= 0);
	watch_put("a", "!127.0.0.1:9999", 19);
	{
		uint64_t t0 = fake_ms;

		PUMP_UNTIL(gw.puts == puts + 4);
		assert_int_equal(gw.puts, puts + 4);
		assert_true(fake_ms - t0 >= 3000);
	}
	assert_true(node_ready(&A, "c"));
}

/* Our own key deleted (by an operator, or a bad actor with etcd access): registered again. */
static void
test_own_key_deleted_registers_again(void **state)
{
	(void)state;
	start_found(NULL, 0);
	watch_own(11, NULL);
	PUMP_UNTIL(gw.puts == 2 && gw.watches == 2);
	assert_int_equal(A.ctr.etcd_registered, 2);
	assert_true(node_ready(&A, "c"));
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_found_and_lost, setup, teardown),
		cmocka_unit_test_setup_teardown(test_entries_are_signed, setup, teardown),
		cmocka_unit_test_setup_teardown(test_large_entries_do_not_stop_the_read, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_large_entries_with_a_content_length, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_bad_entries_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(test_hostile_answers_restart_the_client, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_watch_end_resyncs, setup, teardown),
		cmocka_unit_test_setup_teardown(test_resync_due_without_a_watch_is_taken, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_lost_lease_registers_again, setup, teardown),
		cmocka_unit_test_setup_teardown(test_keepalives_whatever_the_watch_does, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_section_wins_over_etcd, setup, teardown),
		cmocka_unit_test_setup_teardown(test_refused_entry_taken_later, setup, teardown),
		cmocka_unit_test_setup_teardown(test_moved_peer_keeps_its_session, setup, teardown),
		cmocka_unit_test_setup_teardown(test_keepalives_during_a_slow_read, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_keepalives_follow_the_granted_ttl, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_silent_watch_is_set_up_again, setup, teardown),
		cmocka_unit_test_setup_teardown(test_slow_keepalive_tried_again, setup, teardown),
		cmocka_unit_test_setup_teardown(test_moved_idle_peer_replaced_at_once, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_own_name_elsewhere_is_said_once, setup,
						teardown),
		cmocka_unit_test_setup_teardown(test_revision_at_the_end_refused, setup, teardown),
		cmocka_unit_test_setup_teardown(test_gid_per_rail, setup, teardown),
		cmocka_unit_test_setup_teardown(test_own_key_deleted_registers_again, setup,
						teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
