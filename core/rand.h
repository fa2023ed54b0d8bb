/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Unpredictable values from the kernel's CSPRNG (getrandom): nonces, room tokens, generations,
 * hash seeds.  kvx_rand_u64 and kvx_rand_u32_nonzero serve from a per-thread buffer of kernel
 * output (one getrandom per 512 bytes; each byte handed out once, then cleared);
 * kvx_rand_bytes always asks the kernel.  Thread: any; the control core and start-up only (a
 * syscall now and then: never on a polling core's loop).  Blocks only before the kernel's pool
 * is first initialised, at boot.
 */
#ifndef KVX_CORE_RAND_H
#define KVX_CORE_RAND_H

#include <stddef.h>
#include <stdint.h>

void kvx_rand_bytes(void *buf, size_t len);
uint64_t kvx_rand_u64(void);
/* Never 0. */
uint32_t kvx_rand_u32_nonzero(void);

#endif /* KVX_CORE_RAND_H */
