/* SPDX-License-Identifier: Apache-2.0 */
/*
 * A bounded single-producer/single-consumer mailbox of fixed-size messages between two cores
 * (control -> polling core inbox, polling core -> control outbox), with an eventfd for a
 * consumer that parks.  The producer makes a syscall (eventfd write) only when the consumer
 * announced that it is parked, so a busy consumer costs the producer nothing but a store, and
 * only once per park: the put that wakes the consumer clears its announcement.
 *
 * Park protocol (consumer): kvx_mbox_park_prepare(); re-check every work source; if still idle,
 * block on kvx_mbox_fd() (readable when woken); kvx_mbox_park_done() afterwards, saying whether
 * the wait reported the fd readable: only then is it read (a wake-up that lands after the wait
 * keeps the fd readable, and the next park returns at once: never lost, and no read that finds
 * nothing).
 *
 * Threads: one producer thread and one consumer thread per mailbox, fixed for its lifetime.
 * Never blocks, never allocates (except create).  Pairing: the producer's release store of
 * tail pairs with the consumer's acquire load, and vice versa for head; the parked flag and
 * tail use seq_cst so a wake-up is never lost.
 */
#ifndef KVX_CORE_MBOX_H
#define KVX_CORE_MBOX_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

struct kvx_mbox;

/* depth: a power of two; msg_size: bytes per message.  NULL on failure (logged). */
struct kvx_mbox *kvx_mbox_create(uint32_t depth, size_t msg_size);
void kvx_mbox_destroy(struct kvx_mbox *m);

/* Producer: copy one message in.  Returns 0, or -ENOBUFS when full (nothing written). */
int kvx_mbox_put(struct kvx_mbox *m, const void *msg);
/* Producer: the same, for a message nothing waits on (a give-back): it wakes a parked consumer
 * only once the mailbox is half full, else it is taken at the consumer's next wake-up (its
 * own timers bound when: the control core wakes at least every tick). */
int kvx_mbox_put_quiet(struct kvx_mbox *m, const void *msg);
/* Producer: free slots now (a lower bound). */
uint32_t kvx_mbox_free_count(const struct kvx_mbox *m);

/* Consumer: copy up to max messages out into msgs (an array of msg_size elements); returns how
 * many (0..max). */
int kvx_mbox_get_burst(struct kvx_mbox *m, void *msgs, int max);
bool kvx_mbox_empty(const struct kvx_mbox *m);

/* Consumer parking. */
int kvx_mbox_fd(const struct kvx_mbox *m);
void kvx_mbox_park_prepare(struct kvx_mbox *m);
/* woken: the wait reported kvx_mbox_fd() readable (it is drained now); false: not touched. */
void kvx_mbox_park_done(struct kvx_mbox *m, bool woken);
/* Any thread: wake the consumer if it is parked (e.g. to stop it). */
void kvx_mbox_kick(struct kvx_mbox *m);
/* Producer: wake a parked consumer without a message (it takes what was put quietly before),
 * as a loud put would. */
void kvx_mbox_nudge(struct kvx_mbox *m);
/* Any thread: eventfd writes that woke the consumer from a put or a nudge so far (not kicks). */
uint64_t kvx_mbox_wakes(const struct kvx_mbox *m);

#endif /* KVX_CORE_MBOX_H */
