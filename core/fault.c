/* SPDX-License-Identifier: Apache-2.0 */
#include "core/fault.h"

#include <errno.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static const char *const fault_names[KVX_FAULT_COUNT] = {
	[KVX_FAULT_WR_CORRUPT_RKEY] = "wr.corrupt_rkey",
	[KVX_FAULT_WR_REFUSED] = "wr.refused",
	[KVX_FAULT_HS_AFTER_SOCKET] = "handshake.after_socket",
	[KVX_FAULT_HS_AFTER_SLOT] = "handshake.after_slot",
	[KVX_FAULT_HS_AFTER_QPC] = "handshake.after_qpc_alloc",
	[KVX_FAULT_HS_AFTER_QP_CREATE] = "handshake.after_qp_create",
	[KVX_FAULT_HS_AFTER_QP_INIT] = "handshake.after_qp_init",
	[KVX_FAULT_HS_AFTER_RECV_POST] = "handshake.after_recv_post",
	[KVX_FAULT_HS_AFTER_RTR] = "handshake.after_rtr",
	[KVX_FAULT_HS_AFTER_RTS] = "handshake.after_rts",
	[KVX_FAULT_HS_BEFORE_PUBLISH] = "handshake.before_publish",
	[KVX_FAULT_HS_STALL] = "handshake.stall",
	[KVX_FAULT_RB_QP_TO_ERR] = "rollback.qp_to_err",
	[KVX_FAULT_RB_DESTROY_QP] = "rollback.destroy_qp",
	[KVX_FAULT_RB_RELEASE_SLOT] = "rollback.release_slot",
	[KVX_FAULT_RB_CLOSE_SOCKET] = "rollback.close_socket",
};

/* countdown: 0 = inert; n > 0 = fire when it drops to 0 */
static _Atomic long fault_countdown[KVX_FAULT_COUNT];
static _Atomic unsigned long fault_fired_count[KVX_FAULT_COUNT];

const char *
kvx_fault_name(enum kvx_fault_point p)
{
	return p < KVX_FAULT_COUNT ? fault_names[p] : "?";
}

unsigned long
kvx_fault_fired(enum kvx_fault_point p)
{
	return p < KVX_FAULT_COUNT
		       ? atomic_load_explicit(&fault_fired_count[p], memory_order_relaxed)
		       : 0;
}

bool
kvx_fault_hit(enum kvx_fault_point p)
{
	long v = atomic_load_explicit(&fault_countdown[p], memory_order_relaxed);

	if (v <= 0)
		return false;
	v = atomic_fetch_sub_explicit(&fault_countdown[p], 1, memory_order_acq_rel);
	if (v != 1) {
		if (v <= 0) /* raced with another hitter past zero: undo */
			atomic_fetch_add_explicit(&fault_countdown[p], 1, memory_order_relaxed);
		return false;
	}
	atomic_fetch_add_explicit(&fault_fired_count[p], 1, memory_order_relaxed);
	return true;
}

void
kvx_fault_disarm_all(void)
{
	for (int i = 0; i < KVX_FAULT_COUNT; i++)
		atomic_store(&fault_countdown[i], 0);
}

static int
arm_one(const char *item, char *err, size_t errlen)
{
	const char *colon = strchr(item, ':');
	size_t nlen = colon ? (size_t)(colon - item) : strlen(item);
	char *end;
	long n;

	if (!colon || colon[1] == '\0') {
		snprintf(err, errlen, "fault '%s': expected NAME:N", item);
		return -EINVAL;
	}
	errno = 0;
	n = strtol(colon + 1, &end, 10);
	if (errno || *end || n < 0 || n > 1000000) {
		snprintf(err, errlen, "fault '%s': N (hits to let pass) must be 0..1000000", item);
		return -EINVAL;
	}
	for (int i = 0; i < KVX_FAULT_COUNT; i++) {
		if (strlen(fault_names[i]) == nlen && memcmp(fault_names[i], item, nlen) == 0) {
			atomic_store(&fault_countdown[i], n + 1);
			return 0;
		}
	}
	size_t off = snprintf(err, errlen, "unknown fault point '%.*s' (known:", (int)nlen, item);
	for (int i = 0; i < KVX_FAULT_COUNT && off < errlen; i++)
		off += snprintf(err + off, errlen - off, " %s", fault_names[i]);
	if (off < errlen)
		snprintf(err + off, errlen - off, ")");
	return -EINVAL;
}

int
kvx_fault_arm_list(const char *spec, char *err, size_t errlen)
{
	char buf[512], *save = NULL, *tok;
	int rc;

	if (snprintf(buf, sizeof(buf), "%s", spec) >= (int)sizeof(buf)) {
		snprintf(err, errlen, "fault list too long");
		return -EINVAL;
	}
	/* validate all before arming any */
	for (int pass = 0; pass < 2; pass++) {
		snprintf(buf, sizeof(buf), "%s", spec);
		for (tok = strtok_r(buf, ", ", &save); tok; tok = strtok_r(NULL, ", ", &save)) {
			long saved[KVX_FAULT_COUNT];

			for (int i = 0; i < KVX_FAULT_COUNT; i++)
				saved[i] = atomic_load(&fault_countdown[i]);
			rc = arm_one(tok, err, errlen);
			if (pass == 0)
				for (int i = 0; i < KVX_FAULT_COUNT; i++)
					atomic_store(&fault_countdown[i], saved[i]);
			if (rc)
				return rc;
		}
	}
	return 0;
}
