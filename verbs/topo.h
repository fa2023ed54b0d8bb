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

/*
 * Claim a CPU for this process's polling, host-wide: an exclusive flock(2) on dir/cpuN.claim
 * (dir is made, mode 0755, if it is missing).  Several kvxd on one host (one per NIC, or a
 * test's nodes) then spread over the CPUs near their devices instead of all polling on the
 * same one.  The claim holds while the returned fd is open, and the kernel drops it when the
 * process ends, however it ends: nothing is left stale.  Returns the fd, -EBUSY when another
 * open file (another kvxd) holds the claim, or -errno.
 */
int kvx_topo_claim_cpu(const char *dir, int cpu);

#endif /* KVX_VERBS_TOPO_H */
