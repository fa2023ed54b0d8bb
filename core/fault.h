/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Named fault-injection points.  Inert by default: an unarmed point costs one relaxed load.
 * Armed with "name:N" (fire at the N-th time the point is reached from now on, once), from the
 * config's [debug] faults, the KVX_FAULTS environment variable, or `kvxctl fault name:N`.
 * An unknown name is an error naming the known points.
 *
 * Threads: kvx_fault_arm/disarm from the control core or start-up; kvx_fault_hit from any
 * thread (lock-free, never blocks).
 */
#ifndef KVX_CORE_FAULT_H
#define KVX_CORE_FAULT_H

#include <stdbool.h>
#include <stddef.h>

enum kvx_fault_point {
	KVX_FAULT_WR_CORRUPT_RKEY, /* wr.corrupt_rkey: the next write chain uses a wrong rkey */
	KVX_FAULT_COUNT,
};

/* Arm from a comma-separated list "name:N,name:N".  Returns 0, or -EINVAL with a message in
 * err (unknown point, bad count). */
int kvx_fault_arm_list(const char *spec, char *err, size_t errlen);
void kvx_fault_disarm_all(void);

/* Was the point reached its armed N-th time just now?  Thread: any. */
bool kvx_fault_hit(enum kvx_fault_point p);

const char *kvx_fault_name(enum kvx_fault_point p);
/* How many times each point fired since start (for counters). */
unsigned long kvx_fault_fired(enum kvx_fault_point p);

#endif /* KVX_CORE_FAULT_H */
