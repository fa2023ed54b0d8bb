/* SPDX-License-Identifier: Apache-2.0 */
/*
 * The record format of fuzz_peer.c (shared with gen_corpus.c).  A record is an op byte: the
 * low 3 bits are the kind, the high 5 bits its argument.
 */
#ifndef KVX_TESTS_FUZZ_PEER_OPS_H
#define KVX_TESTS_FUZZ_PEER_OPS_H

enum fuzz_peer_op {
	/* u16 length (LE) + that many bytes, written into the connection as if the other node
	 * sent them: arg bit 0 picks the receiver (0: decode "a", 1: prefill "b"); bit 1 sets the
	 * header's payload length to the bytes that follow it; bit 2 its magic and version;
	 * bit 3 gives a room frame the last room's id and the receiver's generation of it */
	FP_FRAME = 0,
	FP_STEP = 1,   /* arg + 1 iterations of every polling core and control loop, 1 ms each */
	FP_CLOCK = 2,  /* the fake clock jumps 20 * (arg + 1)^2 ms, then one iteration */
	FP_OPEN = 3,   /* "a"'s engine opens the next room: arg % 16 + 1 pages, source "b" */
	FP_SUBMIT = 4, /* "b"'s engine submits room (last opened - arg % 4): every page, last */
	FP_ABORT = 5,  /* "a"'s engine aborts room (last opened - arg % 4) */
	FP_CLOSE = 6,  /* both engines close room (last opened - arg % 4) where they may */
	/* fake verbs: arg bit 0 holds writes (or not); bit 1 completes the held writes of b's
	 * QP to a; bit 2 fails the next one with an error completion (bit 3: a remote access
	 * error, else retries exceeded) */
	FP_HOLD = 7,
};

#define FP_FRAME_LIVE_ROOM 8 /* FP_FRAME arg bit 3 */

#endif /* KVX_TESTS_FUZZ_PEER_OPS_H */
