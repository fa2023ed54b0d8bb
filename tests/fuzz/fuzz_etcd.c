/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Stateful libFuzzer target: what comes from etcd's port into kvxd's membership client
 * (control/etcd.c, control/members.c).  Node "a" of tests/unit/nodes_harness.h (fake verbs) has
 * "c" configured and connected, and [membership] etcd pointing at the scripted gateway of
 * tests/unit/etcd_gateway.h.  The input is a sequence of:
 *  - raw answers: the next call the client makes gets these bytes (any status line, headers,
 *    chunking, JSON), then the connection closes;
 *  - bytes written into the open watch stream;
 *  - watch events and range answers built from the input: PUT or DELETE of a name and a value
 *    taken from the input (base64-encoded by the harness, so that the client's checks of names
 *    and addresses are what is exercised);
 *  - the end of the watch, a lease that etcd forgot, steps and clock jumps.
 * After every step: the configured peer c is still there, configured (not discovered) and READY;
 * every peer has a valid node name and a dialable address.  At the end the client stops and
 * every QP is gone (nodes_teardown()).  ASan and UBSan watch the client throughout.
 */
#include <errno.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "cmocka_shim.h"
#include "control/etcd.h"
#include "control/kvxd.h"
#include "control/loop.h"
#include "control/members.h"
#include "control/peer.h"
#include "control/peer_io.h"
#include "core/fault.h"
#include "core/log.h"
#include "fuzz_rcu.h"

#include "nodes_harness.h"
#define GW_PREFIX "/kvx/f/"
#include "etcd_gateway.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

#define A N[0]
#define C N[1]
#define MAX_RECORDS 64

enum { OP_RAW, OP_WATCH_BYTES, OP_EVENT, OP_WATCH_END, OP_STEP, OP_CLOCK, OP_LEASE, OP_RANGE };

static uint8_t raw[8192];

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	kvx_log_init("fuzz_etcd", -1); /* silent */
	rcu_register_thread();
	return 0;
}

static void
check_invariants(void)
{
	struct kvxd_peer *c = kvxd_peer_find(&A, "c");

	assert_non_null(c);
	assert_false(c->discovered);
	assert_int_equal(c->state, KVXD_PEER_READY);
	assert_true(A.npeers <= KVX_MAX_PEERS);
	for (int i = 0; i < A.npeers; i++) {
		const struct kvxd_peer *p = &A.peers[i];

		if (p->vacant)
			continue;
		assert_true(kvx_config_name_ok(p->name));
		assert_true(strcmp(p->name, "a") != 0); /* never ourselves */
		assert_true(strcmp(p->addr.host, "0.0.0.0") != 0 && p->addr.port != 0);
	}
}

static void
step(int n)
{
	for (int i = 0; i < n; i++) {
		pump_once(); /* the gateway first */
		fake_ms++;
		fuzz_rcu_flush();
		check_invariants();
	}
}

/* A name and a value from the input: [u8 len][bytes] each.  Returns bytes used, 0: too short. */
static size_t
take_pair(const uint8_t *p, size_t left, char *name, size_t ncap, char *val, size_t vcap)
{
	size_t nl, vl;

	if (left < 1 || (nl = p[0]) + 2 > left)
		return 0;
	vl = p[1 + nl];
	if (2 + nl + vl > left || nl >= ncap || vl >= vcap)
		return 0;
	memcpy(name, p + 1, nl);
	name[nl] = '\0';
	memcpy(val, p + 2 + nl, vl);
	val[vl] = '\0';
	return 2 + nl + vl;
}

static void
world_setup(void)
{
	static const char *const names[] = {"a", "c"};

	nodes_setup(2, names);
	kvxd_peer_admin(&A, "c", "resume");
	PUMP_UNTIL(peer_of(&A, "c")->state == KVXD_PEER_READY &&
		   peer_of(&C, "a")->state == KVXD_PEER_READY);
	gw_start_for(&A);
	gw.lax = true;
	gw_range(NULL, 0);
	assert_int_equal(kvxd_etcd_start(&A), 0);
	step(5);
}

static void
world_teardown(void)
{
	gw_stop_for(&A);
	nodes_teardown();
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	size_t off = 0;

	world_setup();
	for (int rec = 0; rec < MAX_RECORDS && off < size; rec++) {
		uint8_t op = data[off++];
		unsigned int arg = op >> 3;
		char name[256], val[256], k[400], v[700], ev[1536], *sv;
		size_t len;

		switch (op & 7) {
		case OP_RAW:
		case OP_WATCH_BYTES:
			if (size - off < 2) {
				off = size;
				break;
			}
			len = data[off] | (size_t)data[off + 1] << 8;
			off += 2;
			if (len > size - off)
				len = size - off;
			if (len > sizeof(raw))
				len = sizeof(raw);
			if ((op & 7) == OP_RAW) {
				memcpy(raw, data + off, len);
				gw.raw_next = (const char *)raw;
				gw.raw_len = len;
			} else if (gw.watch_fd >= 0) {
				gw_send(gw.watch_fd, (const char *)data + off, len);
			}
			off += len;
			step(3);
			break;
		case OP_EVENT:
		case OP_RANGE:
			len = take_pair(data + off, size - off, name, 64, val, 200);
			if (!len) {
				off = size;
				break;
			}
			off += len;
			snprintf(ev, sizeof(ev), GW_PREFIX "%s", name);
			b64(k, ev);
			sv = gw_signed(ev, val); /* signed as a node signs it, unless "!..." */
			b64(v, sv);
			free(sv);
			if ((op & 7) == OP_RANGE) {
				const char *kv[] = {ev, val};

				gw_range(kv, 1); /* the next full read lists it */
			} else if (gw.watch_fd >= 0) {
				snprintf(ev, sizeof(ev),
					 "{\"result\":{\"header\":{\"revision\":\"%u\"},\"events\":"
					 "[{%s"
					 "\"kv\":{\"key\":\"%s\",\"value\":\"%s\"}}]}}",
					 20 + rec, arg & 1 ? "\"type\":\"DELETE\"," : "", k, v);
				gw_watch(ev);
			}
			step(3);
			break;
		case OP_WATCH_END:
			gw_watch_end();
			step(2);
			break;
		case OP_STEP:
			step((int)arg + 1);
			break;
		case OP_CLOCK:
			fake_ms +=
				20ull * (arg + 1); /* heartbeats keep the session within a jump */
			step(2);
			break;
		case OP_LEASE:
			gw.lease_lost = arg & 1;
			step(1);
			break;
		}
	}
	step(50);
	world_teardown();
	return 0;
}
