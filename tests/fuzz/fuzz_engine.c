/* SPDX-License-Identifier: Apache-2.0 */
/*
 * libFuzzer target for the engine protocol (core/engine_proto.h).  core/ has no decoder for it:
 * every request is validated by control/engine.c as it handles it, so this target drives that
 * code the way an engine does, through a session on node "a"'s engine socket (fuzz_session.h;
 * tests/unit/nodes_harness.h: nodes "a" and "b" on the fake verbs, not connected until a
 * request says "peer b resume").
 *
 * The input is a list of records, each an op byte (low 2 bits: kind, high 6 bits: arg):
 *   0 SEND    u16 length (LE) + that many bytes, sent as one datagram; arg bit 0 sets hdr.len
 *             to the datagram's length, bit 1 attaches a 1 MiB memfd (SCM_RIGHTS)
 *   1 PUMP    arg + 1 iterations of the polling cores and control loops
 *   2 CLOCK   the fake clock advances by 20 * (arg + 1)^2 ms, then one iteration
 *   3 RECONNECT  the engine closes its socket and a new session is opened
 * After every iteration, what kvxd sent the engine is read and checked (fuzz_session.h), and
 * no node has released more rooms than it aborted.  Every input starts from fresh nodes and
 * ends with every room, pool and QP gone (nodes_teardown() checks the fake verbs' objects).
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
#include "fuzz_rcu.h"
#include "fuzz_session.h"

#include "nodes_harness.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

#define A N[0]
#define MAX_RECORDS 64

static struct fuzz_session sa;

int
LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	kvx_log_init("fuzz_engine", -1); /* silent */
	rcu_register_thread();
	fuzz_session_init_once();
	return 0;
}

static void
pump(int n)
{
	for (int i = 0; i < n; i++) {
		pump_once();
		fuzz_rcu_flush();
		fuzz_session_read(&sa);
		for (int k = 0; k < nnodes; k++)
			assert_true(N[k].ctr.releases <= N[k].ctr.aborts);
	}
}

static void
engine_send(const uint8_t *msg, size_t len, unsigned int arg)
{
	static uint8_t buf[KVX_ENG_MSG_MAX];

	memcpy(buf, msg, len);
	if ((arg & 1) && len >= sizeof(struct kvx_eng_hdr))
		((struct kvx_eng_hdr *)buf)->len = (uint32_t)len;
	fuzz_session_send(&sa, buf, len, arg & 2);
	pump(2);
}

/* Every room goes (they hold pool references), then every pool, then the nodes. */
static void
world_teardown(void)
{
	fuzz_session_close(&sa);
	pump(1);
	nodes_settle(pump);
	nodes_remove_rooms_settled(pump);
	nodes_settle(pump);
	pump(1);
	for (int i = 0; i < nnodes; i++) {
		kvxd_engine_close_all(&N[i]);
		for (int k = 0; k < KVXD_MAX_POOLS; k++)
			assert_null(N[i].pools[k]);
	}
	fuzz_engine_unlisten(&A);
	nodes_teardown();
}

int
LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static const char *const names[] = {"a", "b"};
	size_t off = 0;

	nodes_setup(2, names);
	fuzz_engine_listen(&A);
	fuzz_session_reset(&sa, &A);
	fuzz_session_connect(&sa);
	pump(1); /* accepted */
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
			fuzz_session_close(&sa);
			pump(1);
			fuzz_session_connect(&sa);
			break;
		}
	}
	world_teardown();
	return 0;
}
