/* SPDX-License-Identifier: Apache-2.0 */
#include "verbs/topo.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <unistd.h>

#include <hwloc.h>
#include <hwloc/openfabrics-verbs.h>
#include <infiniband/verbs.h>

#include "core/log.h"

int
kvx_topo_pick_poll_cpus(const char *devname, int control_cpu, int *out, int max)
{
	hwloc_topology_t topo;
	hwloc_cpuset_t set;
	struct ibv_device **list;
	int n = 0, ndev = 0, cpu, rc = 0;

	if (hwloc_topology_init(&topo) < 0 || hwloc_topology_load(topo) < 0) {
		KVX_ERR("hwloc: cannot load the topology");
		return -EIO;
	}
	set = hwloc_bitmap_alloc();
	if (!set) {
		rc = -ENOMEM;
		goto out_topo;
	}
	hwloc_bitmap_copy(set, hwloc_topology_get_allowed_cpuset(topo));
	list = ibv_get_device_list(&ndev);
	for (int i = 0; list && i < ndev; i++) {
		if (strcmp(ibv_get_device_name(list[i]), devname) == 0) {
			/* a software device (rxe) has no PCI locality: the whole machine */
			if (hwloc_ibv_get_device_cpuset(topo, list[i], set) < 0 ||
			    hwloc_bitmap_iszero(set))
				hwloc_bitmap_copy(set, hwloc_topology_get_allowed_cpuset(topo));
			hwloc_bitmap_and(set, set, hwloc_topology_get_allowed_cpuset(topo));
			break;
		}
	}
	if (list)
		ibv_free_device_list(list);
	if (hwloc_bitmap_weight(set) > 1 && control_cpu >= 0)
		hwloc_bitmap_clr(set, (unsigned)control_cpu);
	for (cpu = hwloc_bitmap_last(set); cpu >= 0 && n < max;) {
		out[n++] = cpu;
		/* walk down */
		int prev = -1;

		for (int c = hwloc_bitmap_first(set); c >= 0 && c < cpu;
		     c = hwloc_bitmap_next(set, c))
			prev = c;
		cpu = prev;
	}
	rc = n > 0 ? n : -ENODEV;
	hwloc_bitmap_free(set);
out_topo:
	hwloc_topology_destroy(topo);
	return rc;
}

int
kvx_topo_claim_cpu(const char *dir, int cpu)
{
	char path[4096];
	int fd, n;

	if (cpu < 0)
		return -EINVAL;
	n = snprintf(path, sizeof(path), "%s/cpu%d.claim", dir, cpu);
	if (n < 0 || (size_t)n >= sizeof(path))
		return -ENAMETOOLONG;
	if (mkdir(dir, 0755) < 0 && errno != EEXIST)
		return -errno;
	fd = open(path, O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
	if (fd < 0)
		return -errno;
	if (flock(fd, LOCK_EX | LOCK_NB) < 0) {
		int e = errno == EWOULDBLOCK ? EBUSY : errno;

		close(fd);
		return -e;
	}
	return fd;
}
