/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Node configuration: one INI file per node (libinih), validated strictly.  An unknown section
 * or key, a bad value, a duplicate key or a missing required key is an error reported as
 * "FILE:LINE: message" naming the section and key; nothing is half-loaded (the caller's struct
 * is only written on success).
 *
 * Sections and keys (R = required):
 *   [node]     name (R, [A-Za-z0-9_.-]{1,63}), listen (R, "IPv4:port"), control_cpu (int >= 0
 *              or "none"; default none)
 *   [cores]    poll_cpus ("auto" or a comma list of cpu ids, at most KVX_MAX_CORES; default auto),
 *              idle_park_us (0 = never park; default 0)
 *   [rdma]     device (R), port (1..255, default 1), gid_index (0..255, default 1),
 *              sq_depth (16..32768, default 512), rq_depth (16..32768, default 512),
 *              cq_depth (64..262144, default 4096), mtu (256|512|1024|2048|4096, default 1024),
 *              retry_cnt (0..6, default 6: rxe treats 7 as infinite), rnr_retry (0..6, default 6),
 *              ack_timeout (exponent 1..31, default 10)
 *   [engine]   socket (R, a path shorter than 108 bytes), mode (octal, default 0660)
 *   [timeouts] handshake_ms (default 5000), waiting_ms (default 30000), release_ms (default 5000),
 *              heartbeat_ms (default 1000); each 1..3600000
 *   [security] allow (comma list of peer names allowed to connect; default: every [peer.*]),
 *              secret_file (path; optional)
 *   [peer.NAME] address (R, "IPv4:port"); NAME as for node names; at most KVX_MAX_PEERS
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
#define KVX_MAX_PEERS 32
#define KVX_CFG_NAME_MAX 64
#define KVX_CFG_PATH_MAX 108

struct kvx_config_addr {
	char host[64]; /* dotted IPv4 */
	uint16_t port; /* 1..65535 */
};

struct kvx_config_peer {
	char name[KVX_CFG_NAME_MAX];
	struct kvx_config_addr addr;
	bool allowed; /* on the allow-list */
};

struct kvx_config {
	/* [node] */
	char name[KVX_CFG_NAME_MAX];
	struct kvx_config_addr listen;
	int control_cpu; /* -1: not pinned */
	/* [cores] */
	bool poll_cpus_auto;
	int poll_cpus[KVX_MAX_CORES];
	int n_poll_cpus; /* >= 1 when !poll_cpus_auto */
	uint32_t idle_park_us;
	/* [rdma] */
	char device[KVX_CFG_NAME_MAX];
	uint8_t port;
	uint8_t gid_index;
	uint32_t sq_depth, rq_depth, cq_depth;
	uint32_t mtu; /* bytes */
	uint8_t retry_cnt, rnr_retry, ack_timeout;
	/* [engine] */
	char socket_path[KVX_CFG_PATH_MAX];
	mode_t socket_mode;
	/* [timeouts] */
	uint32_t handshake_ms, waiting_ms, release_ms, heartbeat_ms;
	/* [security] */
	char secret_file[256];
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

/* The peer with that name, or NULL. */
const struct kvx_config_peer *kvx_config_peer_find(const struct kvx_config *cfg, const char *name);

#endif /* KVX_CORE_CONFIG_H */
