/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Node configuration: one INI file per node (libinih), validated strictly.  An unknown section
 * or key, a bad value, a duplicate key or a missing required key is an error reported as
 * "FILE:LINE: message" naming the section and key; nothing is half-loaded (the caller's struct
 * is only written on success).
 *
 * Sections and keys (R = required):
 *   [node]     name (R, [A-Za-z0-9_.-]{1,63}), listen (R, "IPv4:port"), control_cpu (int >= 0
 *              or "none"; default none), connect (always | on_demand, default always: with
 *              on_demand a peer's session is set up when a room needs it, by either side, and
 *              closed after [timeouts] idle_ms without rooms)
 *   [cores]    poll_cpus ("auto" or a comma list of cpu ids, at most KVX_MAX_CORES; default auto),
 *              idle_park_us (0 = never park; default 0), cpu_claims (an absolute directory or
 *              "none"; default /run/kvx: with poll_cpus = auto, the CPUs other kvxd of this
 *              host poll on are claimed there and avoided, verbs/topo.h),
 *              connect_workers (1..KVX_CFG_WORKERS_MAX, default 4: peer sessions whose QPs
 *              move to RTR and RTS side by side), mr_workers (1..KVX_CFG_WORKERS_MAX, default
 *              4: pool registrations side by side)
 *   [rdma]     device (R), port (1..255, default 1), gid_index (0..255, default 1),
 *              sq_depth (16..32768, default 512), rq_depth (16..32768, default 512),
 *              cq_depth (64..262144; default 2 x peers x (sq_depth + rq_depth), at least 4096;
 *              a smaller value is refused), mtu (256|512|1024|2048|4096, default 1024),
 *              retry_cnt (0..6, default 6: rxe treats 7 as infinite), rnr_retry (0..6, default 6),
 *              ack_timeout (exponent 1..31, default 10)
 *   [rail.N]   N = 1..3, each after the one before: another RDMA device (rail) every peer
 *              session also gets QPs on, and a room's WRs are striped across: device (R, not a
 *              device another rail has), port (1..255, default 1), gid_index (0..255, default
 *              1), mtu (as [rdma], default [rdma]'s).  Every peer must have as many rails.
 *   [engine]   socket (R, a path shorter than 108 bytes), mode (octal, no world bits, default
 *              0660), admin_group (a group whose members may run operator commands; default
 *              none: root and kvxd's own uid only), rank_users (comma list of RANKS:USER,
 *              RANKS one rank or LO-HI of 0..65535, USER a user name or a numeric uid, the
 *              ranges apart, at most KVX_CFG_RANK_USERS_MAX: only USER's engines hold those
 *              ranks; default empty: a rank is held by the first user whose engine takes it),
 *              max_sessions_per_uid (1..1024, default 16),
 *              max_pools_per_engine (1..256, default 16), max_pools_per_uid (1..256: all of
 *              one user's engines' pools, of the node's 256; default 128),
 *              max_rooms_per_engine (1..1048576, default 65536), max_rooms_per_uid
 *              (1..1048576: all of one user's engines' rooms; default 131072),
 *              max_pinned_mb_per_uid (1..16777216 MiB, default 65536),
 *              max_chunk_mb_per_engine (1..65536 MiB: an engine's chunks kvxd holds, waiting or
 *              posting; default 256),
 *              reply_queue_kb (64..65536: what an engine that does not read may have queued
 *              before it is disconnected; default 1024)
 *   [timeouts] handshake_ms (default 5000), waiting_ms (default 30000), release_ms (default 5000),
 *              heartbeat_ms (default 1000); each 1..3600000; heartbeat_misses (1..1000,
 *              default 3: a peer silent that many intervals is lost), idle_ms (0..86400000,
 *              default 60000: with connect = on_demand, a session no room has used for this
 *              long is closed; 0: never)
 *   [security] allow (comma list of peer names allowed to connect; default: every [peer.*]),
 *              auth (hmac-sha256 | none; default hmac-sha256), secret_file (R unless auth =
 *              none), secret_next_file (optional: the secret peers move to, also accepted),
 *              pending_ms (1..3600000, default 2000: an accepted connection's deadline to
 *              authenticate), pending_max (1..4096, default 64), pending_per_addr (1..4096,
 *              default 8), max_rooms_per_peer (1..1048576, default 65536),
 *              max_tombstones_per_peer (1..1048576, default 4096)
 *   [peer.NAME] address (R, "IPv4:port"); allow_from (comma list of IPv4/prefix the peer may
 *              connect from besides its address, at most KVX_CFG_ALLOW_FROM_MAX); gid (the
 *              exact GID its QP_INFO must carry, or a comma list: rail 0's, rail 1's, ...;
 *              default: the IPv4-mapped GID of an address it may connect from); NAME as for
 *              node names; at most KVX_MAX_PEERS
 *   [metrics]  listen ("IPv4:port" of the Prometheus endpoint, GET /metrics; default none: no
 *              endpoint; not the [node] listen port on the same or a wildcard address)
 *   [membership] etcd ("IPv4:port" of etcd's client port: its v3 JSON gateway over HTTP; default
 *              none: the [peer.*] sections only), prefix (the key prefix, "/.../" of
 *              [A-Za-z0-9_./-], at most 100 bytes, default /kvx/nodes/), lease_s (2..3600, default
 *              5: a node that stops renewing is dropped this long after), advertise ("IPv4:port"
 *              peers dial; default [node] listen, required when that is 0.0.0.0)
 *   [debug]    faults (comma list of fault-injection points "name:N", checked later by the
 *              daemon against its registry), log_level (error|warn|info|debug, default info)
 */
#ifndef KVX_CORE_CONFIG_H
#define KVX_CORE_CONFIG_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <sys/types.h>

#define KVX_MAX_CORES 8
#define KVX_MAX_PEERS 256
#define KVX_CFG_NAME_MAX 64
#define KVX_CFG_PATH_MAX 108
#define KVX_CFG_CPU_CLAIMS_DEFAULT "/run/kvx"
#define KVX_CFG_ALLOW_FROM_MAX 8
#define KVX_CFG_RANK_USERS_MAX 16
#define KVX_CFG_WORKERS_MAX 64 /* connect_workers, mr_workers */
#define KVX_CFG_WORKERS_DEFAULT 4
#define KVX_MAX_RAILS 4 /* RDMA devices per node: [rdma] and up to three [rail.N] */

enum kvx_config_auth {
	KVX_AUTH_HMAC_SHA256 = 0, /* mutual HMAC-SHA256 challenge and response (the default) */
	KVX_AUTH_NONE,		  /* explicitly unauthenticated: a loud warning and a metric */
};

/* An IPv4 network, host byte order. */
struct kvx_config_net {
	uint32_t addr, mask;
};

struct kvx_config_addr {
	char host[64]; /* dotted IPv4 */
	uint16_t port; /* 1..65535 */
};

/* One RDMA device (a rail).  Rail 0 is [rdma]'s device, port, gid_index and mtu; rail N is
 * [rail.N]. */
struct kvx_config_rail {
	char device[KVX_CFG_NAME_MAX];
	uint8_t port;
	uint8_t gid_index;
	uint32_t mtu; /* bytes */
};

struct kvx_config_peer {
	char name[KVX_CFG_NAME_MAX];
	struct kvx_config_addr addr;
	bool allowed; /* on the allow-list */
	struct kvx_config_net allow_from[KVX_CFG_ALLOW_FROM_MAX];
	int n_allow_from;
	bool has_gid;
	uint8_t gid[16];			 /* rail 0's */
	uint8_t rail_gid[KVX_MAX_RAILS - 1][16]; /* rails 1..n_rail_gid: exact GIDs too */
	int n_rail_gid;
};

struct kvx_config {
	/* [node] */
	char name[KVX_CFG_NAME_MAX];
	struct kvx_config_addr listen;
	int control_cpu; /* -1: not pinned */
	bool on_demand;	 /* connect = on_demand: a peer's session only while rooms need it */
	/* [cores] */
	bool poll_cpus_auto;
	int poll_cpus[KVX_MAX_CORES];
	int n_poll_cpus; /* >= 1 when !poll_cpus_auto */
	uint32_t idle_park_us;
	char cpu_claims[KVX_CFG_PATH_MAX];    /* empty: none */
	uint32_t connect_workers, mr_workers; /* the verbs workers' threads (control/vwork.h) */
	/* [rdma] */
	char device[KVX_CFG_NAME_MAX];
	uint8_t port;
	uint8_t gid_index;
	uint32_t sq_depth, rq_depth, cq_depth;
	uint32_t mtu; /* bytes */
	uint8_t retry_cnt, rnr_retry, ack_timeout;
	/* every rail: [0] repeats device, port, gid_index and mtu above; [1..] are [rail.N] */
	struct kvx_config_rail rails[KVX_MAX_RAILS];
	int n_rails; /* 1..KVX_MAX_RAILS */
	/* [engine] */
	char socket_path[KVX_CFG_PATH_MAX];
	mode_t socket_mode;
	char admin_group[KVX_CFG_NAME_MAX]; /* empty: none */
	/* rank_users: the ranks lo..hi are held by user (a name, or a numeric uid) only */
	struct kvx_config_rank_user {
		uint32_t lo, hi;
		char user[KVX_CFG_NAME_MAX];
	} rank_users[KVX_CFG_RANK_USERS_MAX];
	int n_rank_users;
	uint32_t max_sessions_per_uid, max_pools_per_engine, max_pools_per_uid,
		max_rooms_per_engine, max_rooms_per_uid;
	uint32_t max_chunk_mb_per_engine;
	uint32_t max_pinned_mb_per_uid, reply_queue_kb;
	/* [timeouts] */
	uint32_t handshake_ms, waiting_ms, release_ms, heartbeat_ms, heartbeat_misses;
	uint32_t idle_ms; /* on_demand: a session with no room for this long is closed; 0: never */
	/* [security] */
	uint8_t auth; /* enum kvx_config_auth */
	char secret_file[256];
	char secret_next_file[256];
	uint32_t pending_ms, pending_max, pending_per_addr;
	uint32_t max_rooms_per_peer, max_tombstones_per_peer;
	/* [metrics] */
	bool has_metrics; /* listen was set */
	struct kvx_config_addr metrics_listen;
	/* [membership] */
	bool has_etcd; /* etcd was set: membership through etcd */
	struct kvx_config_addr etcd;
	char etcd_prefix[104];
	uint32_t lease_s;
	bool has_advertise;
	struct kvx_config_addr advertise;
	/* [peer.*] */
	struct kvx_config_peer peers[KVX_MAX_PEERS];
	int n_peers;
	/* [debug] */
	char faults[512];
	int log_level; /* enum kvx_log_level */
};

/* Load and validate path into *cfg.  Returns 0, or -EINVAL with "path:line: message" in err
 * (line 0 when the error is not tied to a line, e.g. a missing required key: then the message
 * names the section and key), or -errno when the file cannot be read.  Thread: any; no RCU. */
int kvx_config_load(struct kvx_config *cfg, const char *path, char *err, size_t errlen);

/* Print the effective configuration (every key, defaults included) as INI to f. */
void kvx_config_print(const struct kvx_config *cfg, FILE *f);

/* True when the IPv4 address (host byte order) is the peer's address or in its allow_from. */
bool kvx_config_peer_addr_ok(const struct kvx_config_peer *peer, uint32_t addr);

/* The peer with that name, or NULL. */
const struct kvx_config_peer *kvx_config_peer_find(const struct kvx_config *cfg, const char *name);

/* A node name: [A-Za-z0-9_.-]{1,63}. */
bool kvx_config_name_ok(const char *s);

/* Parse "IPv4:port".  0 or -EINVAL. */
int kvx_config_addr_parse(const char *s, struct kvx_config_addr *addr);

/* True when two peer sections say the same (name, address, allow_from, gid, allow-list). */
bool kvx_config_peer_same(const struct kvx_config_peer *a, const struct kvx_config_peer *b);

#endif /* KVX_CORE_CONFIG_H */
