/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Who is at the other end of an engine socket (layer 1 of control/, control/README.md).
 */
#ifndef KVX_CONTROL_CRED_H
#define KVX_CONTROL_CRED_H

#include <stdbool.h>
#include <sys/types.h>

#include "control/kvxd.h"

/* A connecting process's credentials (kvxd_cred_read; kvxd_cred_fini frees groups). */
struct kvxd_cred {
	uid_t uid;
	gid_t gid; /* primary */
	pid_t pid;
	gid_t *groups; /* supplementary groups */
	int ngroups;
};

/* Credentials of the process at the other end of a Unix socket: SO_PEERCRED, and the full
 * group list from SO_PEERGROUPS (getgrouplist() for the uid where the kernel lacks it; that
 * may consult NSS).  0 or -errno.  Thread: any. */
int kvxd_cred_read(int fd, struct kvxd_cred *c);
void kvxd_cred_fini(struct kvxd_cred *c);
/* Is gid c's primary group or one of its supplementary groups? */
bool kvxd_cred_in_group(const struct kvxd_cred *c, gid_t gid);
/* May c use the engine socket: root, kvxd's uid, or a member of the socket file's group. */
bool kvxd_cred_may_connect(const struct kvxd *d, const struct kvxd_cred *c);
/* May c run operator commands: root, kvxd's uid, or a member of [engine] admin_group. */
bool kvxd_cred_is_admin(const struct kvxd *d, const struct kvxd_cred *c);

#endif /* KVX_CONTROL_CRED_H */
