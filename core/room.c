/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Room state machine: the legality table, the one transition function and the name tables.
 * See core/room.h for the rules.
 */
#include "core/room.h"

#include <assert.h>
#include <errno.h>
#include <stddef.h>

#include "core/log.h"

#define BIT(s) (1u << (s))

/* Legal successors of each state, per role: a bit per target state.  The main line allows
 * forward skips; FAILED and SUCCESS end the prefill side; decode goes on from FAILED to
 * DRAINING and RELEASED. */
static const uint8_t legal_next[2][KVX_ROOM_STATE_COUNT] = {
	[KVX_ROOM_DECODE] =
		{
			[KVX_ROOM_BOOTSTRAPPING] = BIT(KVX_ROOM_WAITING_FOR_INPUT) |
						   BIT(KVX_ROOM_TRANSFERRING) |
						   BIT(KVX_ROOM_SUCCESS) | BIT(KVX_ROOM_FAILED),
			[KVX_ROOM_WAITING_FOR_INPUT] = BIT(KVX_ROOM_TRANSFERRING) |
						       BIT(KVX_ROOM_SUCCESS) | BIT(KVX_ROOM_FAILED),
			[KVX_ROOM_TRANSFERRING] = BIT(KVX_ROOM_SUCCESS) | BIT(KVX_ROOM_FAILED),
			[KVX_ROOM_SUCCESS] = 0,
			[KVX_ROOM_FAILED] = BIT(KVX_ROOM_DRAINING) | BIT(KVX_ROOM_RELEASED),
			[KVX_ROOM_DRAINING] = BIT(KVX_ROOM_RELEASED),
			[KVX_ROOM_RELEASED] = 0,
		},
	[KVX_ROOM_PREFILL] =
		{
			[KVX_ROOM_BOOTSTRAPPING] = BIT(KVX_ROOM_WAITING_FOR_INPUT) |
						   BIT(KVX_ROOM_TRANSFERRING) |
						   BIT(KVX_ROOM_SUCCESS) | BIT(KVX_ROOM_FAILED),
			[KVX_ROOM_WAITING_FOR_INPUT] = BIT(KVX_ROOM_TRANSFERRING) |
						       BIT(KVX_ROOM_SUCCESS) | BIT(KVX_ROOM_FAILED),
			[KVX_ROOM_TRANSFERRING] = BIT(KVX_ROOM_SUCCESS) | BIT(KVX_ROOM_FAILED),
			[KVX_ROOM_SUCCESS] = 0,
			[KVX_ROOM_FAILED] = 0,
			[KVX_ROOM_DRAINING] = 0,
			[KVX_ROOM_RELEASED] = 0,
		},
};

static const char *const state_names[KVX_ROOM_STATE_COUNT] = {
	[KVX_ROOM_BOOTSTRAPPING] = "BOOTSTRAPPING",
	[KVX_ROOM_WAITING_FOR_INPUT] = "WAITING_FOR_INPUT",
	[KVX_ROOM_TRANSFERRING] = "TRANSFERRING",
	[KVX_ROOM_SUCCESS] = "SUCCESS",
	[KVX_ROOM_FAILED] = "FAILED",
	[KVX_ROOM_DRAINING] = "DRAINING",
	[KVX_ROOM_RELEASED] = "RELEASED",
};

static const char *const role_names[] = {
	[KVX_ROOM_DECODE] = "DECODE",
	[KVX_ROOM_PREFILL] = "PREFILL",
};

const char *
kvx_room_state_str(int state)
{
	if (state < 0 || state >= KVX_ROOM_STATE_COUNT)
		return "?";
	return state_names[state];
}

const char *
kvx_room_role_str(int role)
{
	if (role < 0 || (size_t)role >= sizeof(role_names) / sizeof(role_names[0]))
		return "?";
	return role_names[role];
}

int
kvx_room_transition_valid(enum kvx_room_role role, enum kvx_room_state from, enum kvx_room_state to)
{
	/* Compare as unsigned: an enum may be signed, and a negative value is out of range. */
	if ((unsigned)role > KVX_ROOM_PREFILL || (unsigned)from >= KVX_ROOM_STATE_COUNT ||
	    (unsigned)to >= KVX_ROOM_STATE_COUNT)
		return 0;
	return (legal_next[role][from] >> to) & 1u;
}

/* Single-writer counter: a relaxed load and store (no atomic RMW needed); pairs with the relaxed
 * loads of whoever reads the counters (the control core). */
static inline void
counter_inc(uint64_t *ctr)
{
	__atomic_store_n(ctr, __atomic_load_n(ctr, __ATOMIC_RELAXED) + 1, __ATOMIC_RELAXED);
}

/* -EALREADY (already in the target state) is neither taken nor refused: it is not a transition,
 * and repeats are expected (e.g. every errored completion of a room asks for FAILED). */
int
kvx_room_fsm_set(struct kvx_room_fsm *f, enum kvx_room_state to, struct kvx_room_counters *c)
{
	unsigned int from = f->state;

	assert(from < KVX_ROOM_STATE_COUNT);
	assert(f->role == KVX_ROOM_DECODE || f->role == KVX_ROOM_PREFILL);

	if ((unsigned)to == from)
		return -EALREADY;
	if (!kvx_room_transition_valid(f->role, from, to)) {
		if (c)
			counter_inc(&c->refused);
		KVX_DEBUG("%s room: refused %s -> %s (%d)", kvx_room_role_str(f->role),
			  kvx_room_state_str(from), kvx_room_state_str(to), (int)to);
		return -EINVAL;
	}
	/* release: pairs with kvxd_room_state()'s acquire load on other threads */
	__atomic_store_n(&f->state, (uint8_t)to, __ATOMIC_RELEASE);
	if (c)
		counter_inc(&c->taken[from][to]);
	KVX_DEBUG("%s room: %s -> %s", kvx_room_role_str(f->role), kvx_room_state_str(from),
		  kvx_room_state_str(to));
	return 0;
}
