/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Core placement with hwloc: the CPUs nearest an RDMA device, for poll_cpus = auto.
 * Thread: start-up only.
 */
#ifndef KVX_VERBS_TOPO_H
#define KVX_VERBS_TOPO_H

/* Pick up to max polling CPUs local to the device (avoiding control_cpu while others exist),
 * highest-numbered first.  Returns how many (>= 1) or -errno. */
int kvx_topo_pick_poll_cpus(const char *devname, int control_cpu, int *out, int max);

#endif /* KVX_VERBS_TOPO_H */
