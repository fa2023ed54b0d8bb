/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A single-producer/single-consumer ring of variable-length messages in memory shared by two
 * processes (a memfd that libkvx and kvxd both map): the engine session's submission ring
 * (engine -> kvxd) and event ring (kvxd -> engine) of DESIGN.md section 6.  It carries the
 * engine protocol's own messages (core/engine_proto.h), so what arrives through a ring is
 * checked exactly like what arrives through the socket.
 *
 * Shared layout: a header of three cache lines (the producer's tail, the consumer's head, the
 * consumer's parked flag), then `size` data bytes (a power of two).  Records are 8-byte aligned:
 * an 8-byte header (payload length, kind) and the payload; a record never wraps: a producer
 * that does not have room before the end writes a pad record up to the end and goes on at 0.
 *
 * Trust: the other process may write anything into the shared pages at any time.  Each side
 * keeps its own index privately and only publishes it; it reads the other side's index once
 * per call and checks it against its own (a consumer never reads past a tail that is more than
 * `size` ahead, a producer never trusts a head that goes backwards or passes its tail), copies a
 * record's header and payload out before it looks at them, and checks every length against the
 * ring and the caller's buffer, in 64 bits.  A violation is -EPROTO, sticky: the caller ends the
 * session.  The geometry comes from the side that created the ring through a trusted channel
 * (the HELLO reply), never from the shared header.
 *
 * Wake-ups: a consumer that is about to block announces it (park_prepare), checks the ring once
 * more, and blocks on its end of the ring's wake socket pair; a producer that published sends a
 * byte on its end only when the consumer announced it (kvx_shring_notify, once per batch).  Same
 * protocol as core/mbox.h: a wake-up is never lost, and a busy consumer costs the producer no
 * syscall.  The other way, a producer that found no room and waits for it announces it
 * (kvx_shring_starve, then looks at the head once more), and the consumer that takes a message
 * next sends a byte on its end (kvx_shring_taken): the producer watches its end and need not
 * look again and again.
 *
 * The wake-up is a socket pair (kvx_shring_wake_pair), not a shared eventfd, because each side
 * must own the file description it uses: a descriptor passed to another process shares its
 * status flags, so an engine could clear O_NONBLOCK on a shared eventfd and saturate its
 * counter, and kvxd's next write to it would block the control core or a polling core for
 * good.  Each end of a socket pair is its own description; sends and receives here are
 * MSG_DONTWAIT besides, and a full socket (a consumer that does not read) only means that a
 * wake-up is pending already.
 *
 * Threads: one producer thread and one consumer thread per ring (each in its own process or
 * not).  Never blocks, never allocates.
 */
#ifndef KVX_CORE_SHRING_H
#define KVX_CORE_SHRING_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define KVX_SHRING_MIN (4u << 10)
#define KVX_SHRING_MAX (1u << 30)
#define KVX_SHRING_REC_HDR 8u

/* One side's view of a ring.  Private to its process. */
struct kvx_shring {
	struct kvx_shring_shared *sh; /* the mapping (header, then data) */
	uint8_t *data;
	uint64_t size, mask;
	uint64_t pos;	/* producer: bytes published; consumer: bytes consumed */
	uint64_t other; /* the other side's index as last seen (checked) */
	int wake_fd;	/* this side's end of the ring's wake socket pair */
	bool producer;
	bool oneshot;	 /* producer: a wake-up takes the consumer's parked flag (see notify) */
	bool broken;	 /* -EPROTO was returned: the other side is not to be trusted */
	uint64_t peeked; /* consumer: where the message the last peek copied whole ends; 0: none */
	uint64_t wakes;	 /* wake-ups sent (a producer: for messages; a consumer: for room) */
	uint64_t full;	 /* producer: puts refused for room */
};

/* Bytes to map for a ring of `size` data bytes (0 if size is not a power of two within
 * [KVX_SHRING_MIN, KVX_SHRING_MAX]). */
size_t kvx_shring_map_bytes(uint64_t size);

/* Creator: lay out an empty ring in mem (kvx_shring_map_bytes(size) bytes, page aligned).
 * Returns 0 or -EINVAL. */
int kvx_shring_format(void *mem, uint64_t size);

/* A ring's wake-up: a connected pair of non-blocking, close-on-exec stream sockets, one end
 * for each side (the creator keeps its own and passes the other).  Returns 0 or -errno. */
int kvx_shring_wake_pair(int sv[2]);
/* Take every wake-up waiting on this end (a bounded number of non-blocking receives; what is
 * left keeps the end readable).  Returns 0, or -EPIPE when the other side closed its end. */
int kvx_shring_wake_drain(int wake_fd);

/* Attach one side to a mapping of map_len bytes holding a ring of `size` data bytes (known
 * from the creator, never read from the mapping).  wake_fd: this side's end of the ring's wake
 * pair (the consumer blocks on its end, the producer sends on its own).  Returns 0 or
 * -EINVAL. */
int kvx_shring_attach(struct kvx_shring *r, void *mem, size_t map_len, uint64_t size, int wake_fd,
		      bool producer);

/* The largest payload a ring of this size takes (a quarter of it, so that a pad never starves
 * a record). */
uint32_t kvx_shring_max_msg(const struct kvx_shring *r);

/* Producer: copy one message in and publish it.  Returns 0; -ENOBUFS when there is no room now
 * (nothing written; try again after the consumer moved on); -EMSGSIZE when len is 0 or larger
 * than kvx_shring_max_msg(); -EPROTO when the consumer's index is impossible. */
int kvx_shring_put(struct kvx_shring *r, const void *msg, uint32_t len);
/* Producer: after a batch of puts, wake the consumer if it announced that it parks.  Returns
 * true if it sent a wake-up (or found one pending: the consumer's end is full).  A oneshot
 * producer takes the announcement with the wake-up (clears the parked flag): the batches after
 * it send nothing until the consumer announces again, which it does after it drained its wake
 * end and before it looks at the ring (kvx_shring_park_prepare).  A consumer that parks only
 * ever through park_prepare / park_done (kvxd) can have a oneshot producer or not; one that
 * counts as always parked (libkvx on its event rings, with KVX_ENG_RINGS_REARM) must announce
 * again after every drain of its wake end, or it is woken once only. */
bool kvx_shring_notify(struct kvx_shring *r);
/* Producer: make r oneshot (see kvx_shring_notify) or not.  Attach makes it not. */
void kvx_shring_set_oneshot(struct kvx_shring *r, bool oneshot);
/* Producer: put returned -ENOBUFS and the caller will not try again on its own: ask the
 * consumer for a wake-up on our wake end once it takes a message (kvx_shring_taken).  Returns
 * true when it took something since we last looked: try again now (the request stands, so the
 * consumer's next take wakes us, maybe for nothing); else false: the wake-up will come, unless
 * the consumer stops reading. */
bool kvx_shring_starve(struct kvx_shring *r);
/* Producer: bytes free now (a lower bound), 0 after -EPROTO. */
uint64_t kvx_shring_room(struct kvx_shring *r);

/* Consumer: copy the next message out into buf (cap bytes).  Returns its length (> 0), 0 when
 * the ring is empty, or -EPROTO when what the producer wrote is impossible (an index more than
 * the ring ahead, a record that crosses the end or is longer than what was published, an
 * unknown kind, a message longer than cap or than kvx_shring_max_msg()). */
ssize_t kvx_shring_get(struct kvx_shring *r, void *buf, uint32_t cap);
/* Consumer: copy the first bytes (up to cap) of the next message out without taking it.
 * Returns its whole length (> 0), 0 when the ring is empty, or -EPROTO as kvx_shring_get (a
 * longer message than cap is no error here).  The producer may rewrite the record afterwards:
 * a later get copies it again, checked again; kvx_shring_take_peeked takes it as peeked. */
ssize_t kvx_shring_peek(struct kvx_shring *r, void *buf, uint32_t cap);
/* Consumer: take the message the last peek copied whole (its length was at most cap), without
 * reading it again: what the caller handles is what it looked at, whatever the producer wrote
 * since.  Returns 0, or -EINVAL when the last call was no such peek. */
int kvx_shring_take_peeked(struct kvx_shring *r);
/* Consumer: after taking messages (one or a batch), wake the producer if it asked for room
 * (kvx_shring_starve): one byte on our wake end, never waiting.  Returns true if it did. */
bool kvx_shring_taken(struct kvx_shring *r);
/* Consumer: is there nothing published that it has not read? */
bool kvx_shring_empty(struct kvx_shring *r);
/* Consumer parking (see above).  woken: the wait reported the wake end readable (drained now).
 * park_done returns 0, or -EPIPE when the producer closed its end (kvx_shring_wake_drain). */
void kvx_shring_park_prepare(struct kvx_shring *r);
int kvx_shring_park_done(struct kvx_shring *r, bool woken);

#endif /* KVX_CORE_SHRING_H */
