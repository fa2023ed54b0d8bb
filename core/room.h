/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Room state machine (DESIGN.md section 1).  Both sides keep a room's state monotonic; FAILED
 * is sticky; DRAINING and RELEASED exist on the decode side only (after an abort or failure).
 *
 *   BOOTSTRAPPING -> WAITING_FOR_INPUT -> TRANSFERRING -> SUCCESS | FAILED
 *   decode: FAILED -> DRAINING -> RELEASED, FAILED -> RELEASED
 *
 * Forward skips along the main line are legal (e.g. WAITING_FOR_INPUT -> SUCCESS when the only
 * source delivers in one chunk); everything else is refused and leaves the state unchanged.
 */
#ifndef KVX_CORE_ROOM_H
#define KVX_CORE_ROOM_H

#include <stdint.h>

enum kvx_room_state {
	KVX_ROOM_BOOTSTRAPPING = 0,	/* created, peers/metadata not yet in place */
	KVX_ROOM_WAITING_FOR_INPUT = 1, /* metadata exchanged, no data moving yet */
	KVX_ROOM_TRANSFERRING = 2,	/* writes posted (prefill) / first source done (decode) */
	KVX_ROOM_SUCCESS = 3,		/* every source delivered, every WR completed */
	KVX_ROOM_FAILED = 4,		/* sticky: an error, abort or peer failure */
	KVX_ROOM_DRAINING = 5,		/* decode: pages held until no source can still write */
	KVX_ROOM_RELEASED = 6,		/* decode: pages handed back to the engine */
	KVX_ROOM_STATE_COUNT = 7,
};

enum kvx_room_role {
	KVX_ROOM_DECODE = 0,  /* pages are written into this node */
	KVX_ROOM_PREFILL = 1, /* this node writes (a source) */
};

struct kvx_room_fsm {
	uint8_t state; /* enum kvx_room_state */
	uint8_t role;  /* enum kvx_room_role */
};

/* Transitions taken, indexed [from][to]; one instance per writing thread (single writer). */
struct kvx_room_counters {
	uint64_t taken[KVX_ROOM_STATE_COUNT][KVX_ROOM_STATE_COUNT];
	uint64_t refused;
};

const char *kvx_room_state_str(int state);
const char *kvx_room_role_str(int role);

/* Is from -> to legal for role?  Pure. */
int kvx_room_transition_valid(enum kvx_room_role role, enum kvx_room_state from,
			      enum kvx_room_state to);

/* The one transition function.  Returns 0 (moved), -EALREADY (already there) or -EINVAL
 * (illegal: backwards, out of FAILED/SUCCESS, decode-only state on prefill); the state is
 * unchanged unless 0.  Counts into c (may be NULL) and traces at debug level.
 * Thread: the room's owner only. */
int kvx_room_fsm_set(struct kvx_room_fsm *f, enum kvx_room_state to, struct kvx_room_counters *c);

static inline int
kvx_room_state_terminal(int state)
{
	return state == KVX_ROOM_SUCCESS || state == KVX_ROOM_FAILED || state == KVX_ROOM_RELEASED;
}

#endif /* KVX_CORE_ROOM_H */
