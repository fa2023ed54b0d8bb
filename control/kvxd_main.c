/* SPDX-License-Identifier: Apache-2.0 */
/*
 * kvxd: the per-node sidecar.  `kvxd -c FILE` runs it; `kvxd --check-config -c FILE` validates
 * the file and prints the effective configuration.  Start-up acquires in order and unwinds in
 * reverse on failure; SIGTERM/SIGINT stop it cleanly (exit 0).  `kvxd --version` prints the
 * project version (kvx/version.h).
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <sched.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include "control/kvxd.h" /* urcu-qsbr.h first: it maps call_rcu & co to the QSBR flavour */
#include "control/admin.h"
#include "control/engine.h"
#include "control/loop.h"
#include "control/etcd.h"
#include "control/metrics_http.h"
#include "control/peer.h"
#include "control/vwork.h"
#include "core/fault.h"
#include "core/log.h"
#include "kvx/version.h"
#include "verbs/topo.h"

static void
usage(FILE *f)
{
	fprintf(f,
		"usage: kvxd -c FILE            run the node described by FILE\n"
		"       kvxd --check-config -c FILE   validate FILE, print the effective config\n"
		"       kvxd --version                print the version\n");
}

static int
tcp_listen(struct kvxd *d)
{
	struct sockaddr_in sa = {.sin_family = AF_INET, .sin_port = htons(d->cfg.listen.port)};
	int fd, one = 1;

	if (inet_pton(AF_INET, d->cfg.listen.host, &sa.sin_addr) != 1)
		return -EINVAL;
	fd = socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
	if (fd < 0)
		return -errno;
	setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0 || listen(fd, 64) < 0) {
		int rc = -errno;

		KVX_ERR("listen %s:%u: %s", d->cfg.listen.host, d->cfg.listen.port,
			strerror(errno));
		close(fd);
		return rc;
	}
	d->tcp_fd = fd;
	return 0;
}

static int
signals_block(struct kvxd *d)
{
	sigset_t set;

	sigemptyset(&set);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGHUP); /* reload the peers (control/members.h) */
	if (pthread_sigmask(SIG_BLOCK, &set, NULL))
		return -errno;
	signal(SIGPIPE, SIG_IGN);
	d->sig_fd = signalfd(-1, &set, SFD_NONBLOCK | SFD_CLOEXEC);
	return d->sig_fd < 0 ? -errno : 0;
}

/* One polling CPU near dev for poll_cpus = auto, not one of taken[0..ntaken): the first (highest)
 * that no other kvxd of this host has claimed (the claim is taken and held), else the first
 * free of ours and shared with another kvxd, with a warning.  -1: none near dev is free of
 * ours (unpinned); -errno: no CPU near dev at all. */
static int
pick_near(struct kvxd *d, const char *dev, const int *taken, int ntaken)
{
	/* every CPU near dev is a candidate, not only the first few: a node may run more kvxd
	 * than one kvxd has polling cores */
	int near[CPU_SETSIZE],
		shared = -1,
		m = kvx_topo_pick_poll_cpus(dev, d->cfg.control_cpu, near, CPU_SETSIZE);

	if (m < 0)
		return m;
	for (int i = 0; i < m; i++) {
		bool ours = false;
		int fd;

		for (int j = 0; j < ntaken; j++)
			ours = ours || taken[j] == near[i];
		if (ours)
			continue;
		if (shared < 0)
			shared = near[i];
		if (!d->cfg.cpu_claims[0])
			return near[i];
		fd = kvx_topo_claim_cpu(d->cfg.cpu_claims, near[i]);
		if (fd >= 0) {
			d->cpu_claim_fd[d->n_cpu_claims++] = fd;
			return near[i];
		}
		if (fd != -EBUSY) {
			KVX_WARN("[cores] cpu_claims %s: cannot claim cpu %d: %s; placing polling "
				 "cores without claims",
				 d->cfg.cpu_claims, near[i], strerror(-fd));
			d->cfg.cpu_claims[0] = '\0';
			return near[i];
		}
	}
	if (shared >= 0)
		KVX_WARN("every CPU near %s is claimed by another kvxd of this host (%s): polling "
			 "on cpu %d too",
			 dev, d->cfg.cpu_claims, shared);
	return shared;
}

static int
pick_cores(struct kvxd *d, int *cpus)
{
	int n = 0;

	if (!d->cfg.poll_cpus_auto) {
		memcpy(cpus, d->cfg.poll_cpus, sizeof(int) * d->cfg.n_poll_cpus);
		return d->cfg.n_poll_cpus;
	}
	/* One polling core by default: measured best on small machines (DESIGN.md 9).  With
	 * several rails, one per rail, each on a CPU near its rail's device: on rxe a post does
	 * the device's send work in the poster's thread, so one core for two rails moved 30 MB/s
	 * where two moved 40 (the VM, 64 KiB rooms).  Each on a CPU no other kvxd of this host
	 * polls on, while there is one near the device: two test nodes on one 2-vCPU VM both on
	 * cpu 1 moved 64 KiB rooms at 19 to 26 MB/s, on cpus 1 and 0 at 29 to 31 (README) */
	for (int k = 0; k < d->cfg.n_rails; k++) {
		int cpu = pick_near(d, d->cfg.rails[k].device, cpus, n);

		if (cpu < 0 && d->cfg.n_rails == 1)
			return cpu; /* no CPU near the device: refused, as before */
		if (cpu >= 0)
			cpus[n++] = cpu;
	}
	/* peers must have as many polling cores: one per rail whatever the machine, unpinned
	 * when no free CPU is near the device */
	if (n < d->cfg.n_rails)
		KVX_WARN("%d of %d polling cores unpinned: no free CPU near their rail's device",
			 d->cfg.n_rails - n, d->cfg.n_rails);
	while (n < d->cfg.n_rails)
		cpus[n++] = -1;
	return n;
}

/* Open and query every rail's device ([rdma], then [rail.N]); d->nrails counts those open.
 * A rail whose device has no GID at its gid_index cannot carry RoCE: refused. */
static int
open_rails(struct kvxd *d)
{
	static const uint8_t zero[16];

	for (d->nrails = 0; d->nrails < d->cfg.n_rails; d->nrails++) {
		const struct kvx_config_rail *cr = &d->cfg.rails[d->nrails];
		struct kvxd_rail *r = &d->rails[d->nrails];
		int rc = kvx_vx->dev_open(cr->device, cr->port, cr->gid_index, &r->dev);

		if (rc)
			return rc;
		rc = kvx_vx->dev_query(r->dev, &r->info);
		if (rc == 0 && d->cfg.n_rails > 1 && memcmp(r->info.gid, zero, 16) == 0) {
			KVX_ERR("rail %d (%s port %u): no GID at gid_index %u", d->nrails,
				cr->device, cr->port, cr->gid_index);
			rc = -ENODEV;
		}
		if (rc) {
			kvx_vx->dev_close(r->dev);
			r->dev = NULL;
			return rc;
		}
		if (d->nrails > 0)
			KVX_INFO("rail %d: device %s port %u (mtu %u)", d->nrails, cr->device,
				 cr->port, r->info.active_mtu);
	}
	return 0;
}

/* Room tables start sized for the rooms the configured limits allow (engines' and peers'),
 * up to 2^16 buckets (2^17 with both roles); past that they grow. */
static unsigned long
room_buckets(const struct kvx_config *cfg)
{
	uint64_t rooms = (uint64_t)cfg->max_rooms_per_engine * cfg->max_sessions_per_uid +
			 (uint64_t)cfg->max_rooms_per_peer * (uint64_t)cfg->n_peers;

	return rooms < (1u << 16) ? (unsigned long)rooms : 1ul << 16;
}

/* The verbs workers' CPUs: kvxd's own less the polling cores' and the control core's, since the
 * workers' calls are CPU work too (pinning and unpinning every page of a pool, unmapping it); or,
 * where that leaves none, less the polling cores' (they are never shared); else kvxd's own. */
static void
worker_cpus(struct kvxd *d)
{
	cpu_set_t set;

	if (!d->vwork.has_cpus)
		return;
	for (int pass = 0; pass < 2; pass++) {
		CPU_ZERO(&set);
		CPU_OR(&set, &set, &d->vwork.cpus);
		for (int c = 0; c < d->ncores; c++)
			if (d->cores[c].cpu >= 0 && d->cores[c].cpu < CPU_SETSIZE)
				CPU_CLR(d->cores[c].cpu, &set);
		if (pass == 0 && d->cfg.control_cpu >= 0 && d->cfg.control_cpu < CPU_SETSIZE)
			CPU_CLR(d->cfg.control_cpu, &set);
		if (CPU_COUNT(&set) > 0) {
			d->vwork.cpus = set;
			return;
		}
	}
}

int
main(int argc, char **argv)
{
	static struct kvxd dd;
	struct kvxd *d = &dd;
	const char *path = NULL, *env;
	bool check = false;
	char err[512];
	int cpus[KVX_MAX_CORES], rc, c = 0, ncores;
	struct kvx_vx_dev *devs[KVX_MAX_RAILS];

	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "-c") == 0 && i + 1 < argc)
			path = argv[++i];
		else if (strcmp(argv[i], "--check-config") == 0)
			check = true;
		else if (strcmp(argv[i], "-h") == 0 || strcmp(argv[i], "--help") == 0) {
			usage(stdout);
			return 0;
		} else if (strcmp(argv[i], "--version") == 0) {
			printf("kvxd %s\n", KVX_VERSION_STRING);
			return 0;
		} else {
			usage(stderr);
			return 2;
		}
	}
	if (!path) {
		usage(stderr);
		return 2;
	}
	rc = kvx_config_load(&d->cfg, path, err, sizeof(err));
	if (rc) {
		fprintf(stderr, "%s\n", err);
		return 2;
	}
	if (d->cfg.faults[0] && kvx_fault_arm_list(d->cfg.faults, err, sizeof(err))) {
		fprintf(stderr, "%s: [debug] faults: %s\n", path, err);
		return 2;
	}
	env = getenv("KVX_FAULTS");
	if (env && *env && kvx_fault_arm_list(env, err, sizeof(err))) {
		fprintf(stderr, "KVX_FAULTS: %s\n", err);
		return 2;
	}
	rc = kvx_auth_keys_load(&d->auth, &d->cfg, err, sizeof(err));
	if (rc) {
		fprintf(stderr, "%s: %s\n", path, err);
		return 2;
	}
	if (d->auth.none)
		fprintf(stderr,
			"%s: WARNING: [security] auth = none: this node runs UNAUTHENTICATED; any "
			"host that can reach its port as a configured peer's address can take "
			"part in its sessions\n",
			path);
	if (check) {
		kvx_config_print(&d->cfg, stdout);
		kvx_auth_keys_clear(&d->auth);
		return 0;
	}

	snprintf(err, sizeof(err), "kvxd[%s]", d->cfg.name);
	kvx_log_init(err, d->cfg.log_level);
	d->cfg_path = path;
	d->tcp_fd = d->eng_fd = d->sig_fd = d->epfd = -1;
	d->start_ms = kvxd_now_ms();
	/* the CPUs kvxd may run on, before the control core is pinned: the verbs workers' */
	d->vwork.has_cpus = sched_getaffinity(0, sizeof(d->vwork.cpus), &d->vwork.cpus) == 0;
	if (d->cfg.control_cpu >= 0) {
		cpu_set_t set;

		CPU_ZERO(&set);
		CPU_SET(d->cfg.control_cpu, &set);
		if (sched_setaffinity(0, sizeof(set), &set))
			KVX_WARN("cannot pin the control core to cpu %d: %s", d->cfg.control_cpu,
				 strerror(errno));
	}
	rc = kvxd_chunk_cache_init(d);
	if (rc)
		goto err;
	rc = signals_block(d);
	if (rc)
		goto err_fini_chunks;
	/* the engine socket first: refuse to start (another kvxd, a file that is not ours at the
	 * path, an unknown admin_group) before touching the device; engines that connect this
	 * early wait in the backlog */
	rc = kvxd_engine_listen(d);
	if (rc)
		goto err_fini_chunks;
	rcu_register_thread();
	/* URCU_CALL_RCU_RT: call_rcu() never wakes the worker; it looks every 10 ms and frees
	 * all that came meanwhile after one grace period.  Without it, freeing a room woke the
	 * worker (a futex) and ran a grace period of its own, whose end the polling cores'
	 * quiescent states woke it for again: about one thread switch per room per node. */
	set_thread_call_rcu_data(create_call_rcu_data(URCU_CALL_RCU_RT, d->cfg.control_cpu));

	rc = open_rails(d);
	if (rc)
		goto err_close_dev; /* closes the rails it opened */
	rc = kvxd_peer_fit_cq(d);
	if (rc)
		goto err_close_dev;
	d->by_id = kvx_room_table_create(room_buckets(&d->cfg));
	d->by_token = kvx_room_table_create(room_buckets(&d->cfg));
	if (!d->by_id || !d->by_token) {
		rc = -ENOMEM;
		goto err_destroy_tables;
	}
	ncores = pick_cores(d, cpus);
	if (ncores < 0) {
		rc = ncores;
		goto err_destroy_tables;
	}
	for (int k = 0; k < d->nrails; k++)
		devs[k] = d->rails[k].dev;
	for (c = 0; c < ncores; c++) {
		rc = kvx_pcore_init(&d->cores[c], c, cpus[c], devs, d->nrails, &d->cfg, d->by_id,
				    d->by_token);
		if (rc)
			goto err_fini_cores;
		d->cores[c].clock_us = kvxd_now_us;
	}
	d->ncores = ncores;
	kvxd_peer_init_all(d);
	d->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (d->epfd < 0) {
		rc = -errno;
		goto err_fini_cores;
	}
	worker_cpus(d);
	rc = kvxd_vwork_start(d); /* connects and pool registrations, off the control core */
	if (rc)
		goto err_close_epoll;
	rc = tcp_listen(d);
	if (rc)
		goto err_close_epoll;
	rc = kvxd_metrics_http_start(d); /* [metrics] listen, if set */
	if (rc)
		goto err_close_tcp;
	rc = kvxd_etcd_start(d); /* [membership] etcd, if set: registers from the loop */
	if (rc)
		goto err_stop_http;
	d->tcp_ev = (struct kvxd_fd){.kind = KVXD_FD_TCP_LISTEN};
	d->eng_ev = (struct kvxd_fd){.kind = KVXD_FD_ENG_LISTEN};
	d->sig_ev = (struct kvxd_fd){.kind = KVXD_FD_SIGNAL};
	kvxd_epoll_add(d, d->tcp_fd, &d->tcp_ev, EPOLLIN);
	kvxd_epoll_add(d, d->eng_fd, &d->eng_ev, EPOLLIN);
	kvxd_epoll_add(d, d->sig_fd, &d->sig_ev, EPOLLIN);
	for (int i = 0; i < ncores; i++) {
		d->outbox_ev[i] = (struct kvxd_fd){.kind = KVXD_FD_OUTBOX, .ptr = &d->cores[i]};
		kvxd_epoll_add(d, kvx_mbox_fd(d->cores[i].outbox), &d->outbox_ev[i], EPOLLIN);
	}
	for (int i = 0; i < ncores; i++) {
		rc = kvx_pcore_start(&d->cores[i]);
		if (rc)
			goto err_stop_cores;
	}
	KVX_INFO("node %s up: device %s (mtu %u)%s, %d polling core%s (cpu %d%s), control cpu "
		 "%d, listening %s:%u, engine socket %s",
		 d->cfg.name, d->cfg.device, d->rails[0].info.active_mtu,
		 d->nrails > 1 ? " and more rails" : "", ncores, ncores > 1 ? "s" : "", cpus[0],
		 ncores > 1 ? ", ..." : "", d->cfg.control_cpu, d->cfg.listen.host,
		 d->cfg.listen.port, d->cfg.socket_path);

	rc = kvxd_run(d);

	/* reverse order: cores, the QPs they still hold, rooms, engines and pools (memory
	 * registrations), CQs, tables, device, the chunk cache */
err_stop_cores:
	kvxd_vwork_stop(d);	 /* their last calls return */
	kvxd_loop_vwork_done(d); /* rollbacks that waited go on; pools registered are kept */
	for (int i = 0; i < ncores; i++)
		kvx_pcore_stop(&d->cores[i]);
	kvxd_shutdown_release(d);
	kvxd_engine_close_all(d);
	kvxd_etcd_stop(d);
err_stop_http:
	kvxd_metrics_http_stop(d);
err_close_tcp:
	close(d->tcp_fd);
err_close_epoll:
	kvxd_vwork_stop(d);
	close(d->epfd);
err_fini_cores:
	kvx_rcu_barrier();
	while (c-- > 0)
		kvx_pcore_fini(&d->cores[c]);
err_destroy_tables:
	while (d->n_cpu_claims > 0) /* the cores are gone: another kvxd may poll there now */
		close(d->cpu_claim_fd[--d->n_cpu_claims]);
	if (d->by_token)
		kvx_room_table_destroy(d->by_token);
	if (d->by_id)
		kvx_room_table_destroy(d->by_id);
err_close_dev:
	while (d->nrails > 0) {
		d->nrails--;
		kvx_vx->dev_close(d->rails[d->nrails].dev);
		d->rails[d->nrails].dev = NULL;
	}
	rcu_unregister_thread();
	kvxd_engine_unlisten(d);
err_fini_chunks:
	kvxd_chunk_cache_fini(d); /* every chunk came back: kvxd_shutdown_release() */
	kvxd_admin_fini(d);
err:
	if (rc) {
		KVX_ERR("kvxd stopped: %s", strerror(-rc));
		return 1;
	}
	KVX_INFO("stopped");
	return 0;
}
