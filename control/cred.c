/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Credentials of an engine socket's client (control/cred.h).  Layer 1 of control/.
 */
#include <errno.h>
#include <grp.h>
#include <pwd.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

#include "control/cred.h"
#include "core/log.h"

#define CRED_GROUPS_MAX 65536 /* NGROUPS_MAX on Linux */

/* The groups of uid's account (the fallback when the kernel has no SO_PEERGROUPS).  NSS may be
 * consulted here: on the control core only on such kernels. */
static int
groups_from_db(struct kvxd_cred *c)
{
	struct passwd pw, *res = NULL;
	char buf[4096];
	int n = 64;
	gid_t *g;

	if (getpwuid_r(c->uid, &pw, buf, sizeof(buf), &res) || !res)
		return 0; /* no account: the primary gid only */
	for (;;) {
		int want = n;

		g = realloc(c->groups, sizeof(gid_t) * (size_t)n);
		if (!g)
			return -ENOMEM;
		c->groups = g;
		if (getgrouplist(pw.pw_name, c->gid, g, &want) >= 0) {
			c->ngroups = want;
			return 0;
		}
		if (want <= n || want > CRED_GROUPS_MAX)
			return -E2BIG;
		n = want;
	}
}

int
kvxd_cred_read(int fd, struct kvxd_cred *c)
{
	struct ucred uc;
	socklen_t len = sizeof(uc);

	*c = (struct kvxd_cred){0};
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &uc, &len) < 0)
		return -errno;
	c->uid = uc.uid;
	c->gid = uc.gid;
	c->pid = uc.pid;
	len = 64 * sizeof(gid_t);
	for (;;) {
		gid_t *g = realloc(c->groups, len ? len : sizeof(gid_t));

		if (!g) {
			kvxd_cred_fini(c);
			return -ENOMEM;
		}
		c->groups = g;
		if (getsockopt(fd, SOL_SOCKET, SO_PEERGROUPS, g, &len) == 0) {
			c->ngroups = (int)(len / sizeof(gid_t));
			return 0;
		}
		if (errno == ENOPROTOOPT) { /* Linux before 4.13 */
			int rc = groups_from_db(c);

			if (rc)
				kvxd_cred_fini(c);
			return rc;
		}
		/* ERANGE: len now says how much the list needs */
		if (errno != ERANGE || len > CRED_GROUPS_MAX * sizeof(gid_t)) {
			int rc = -errno;

			kvxd_cred_fini(c);
			return rc;
		}
	}
}

void
kvxd_cred_fini(struct kvxd_cred *c)
{
	free(c->groups);
	c->groups = NULL;
	c->ngroups = 0;
}

bool
kvxd_cred_in_group(const struct kvxd_cred *c, gid_t gid)
{
	if (c->gid == gid)
		return true;
	for (int i = 0; i < c->ngroups; i++)
		if (c->groups[i] == gid)
			return true;
	return false;
}

bool
kvxd_cred_may_connect(const struct kvxd *d, const struct kvxd_cred *c)
{
	return c->uid == 0 || c->uid == d->self_uid || kvxd_cred_in_group(c, d->sock_gid);
}

bool
kvxd_cred_is_admin(const struct kvxd *d, const struct kvxd_cred *c)
{
	return c->uid == 0 || c->uid == d->self_uid ||
	       (d->has_admin_gid && kvxd_cred_in_group(c, d->admin_gid));
}
