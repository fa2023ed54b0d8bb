/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Node configuration (see config.h for the sections and keys).
 *
 * libinih does the INI grammar (comments, "key = value", stripping); a reader wrapper around
 * fgets() feeds it one line at a time and does what this build of inih cannot:
 *  - counts lines (inih is built without INI_HANDLER_LINENO), so every error has its line;
 *  - parses section headers itself: inih truncates section names to 49 bytes and never calls
 *    the handler for a section without keys, so "[bogus]" alone or "[peer.x]" without an
 *    address would otherwise go unnoticed;
 *  - strips leading blanks, which turns off inih's multi-line values (an indented "key = v"
 *    would otherwise be appended to the previous key's value);
 *  - refuses lines longer than inih's line buffer (inih would split them silently), and lines
 *    with a NUL byte (the line would end there silently).
 * Everything is parsed into a local struct kvx_config; the caller's copy is written last.
 */
#include "core/config.h"
#include "kvx/kvx.h"

#include "core/log.h"

#include <arpa/inet.h>
#include <assert.h>
#include <ctype.h>
#include <errno.h>
#include <inttypes.h>
#include <ini.h>
#include <sched.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdlib.h>
#include <string.h>

#define ARRAY_SIZE(a) (sizeof(a) / sizeof((a)[0]))

/* Longest line content inih can take in one piece: its buffer holds the line, "\r\n" and NUL. */
#define LINE_MAX_CHARS (INI_MAX_LINE - 3)

#define CPU_ID_MAX (CPU_SETSIZE - 1)
#define CQ_DEPTH_MAX 262144u

enum sect {
	SECT_NONE = 0, /* before the first [section] */
	SECT_NODE,
	SECT_CORES,
	SECT_RDMA,
	SECT_ENGINE,
	SECT_TIMEOUTS,
	SECT_SECURITY,
	SECT_DEBUG,
	SECT_METRICS,
	SECT_MEMBERSHIP,
	SECT_PEER, /* [peer.NAME]; may appear up to KVX_MAX_PEERS times */
	SECT_RAIL, /* [rail.N], N = 1..KVX_MAX_RAILS - 1 */
	SECT_COUNT,
};

static const char *const sect_name[SECT_COUNT] = {
	[SECT_NONE] = "",
	[SECT_NODE] = "node",
	[SECT_CORES] = "cores",
	[SECT_RDMA] = "rdma",
	[SECT_ENGINE] = "engine",
	[SECT_TIMEOUTS] = "timeouts",
	[SECT_SECURITY] = "security",
	[SECT_DEBUG] = "debug",
	[SECT_METRICS] = "metrics",
	[SECT_MEMBERSHIP] = "membership",
	[SECT_PEER] = "peer.",
	[SECT_RAIL] = "rail.",
};

struct parse;
struct key;

/* Parses value into p->cfg; returns 1, or 0 after recording the error with key_fail(). */
typedef int (*key_parse_fn)(struct parse *p, const struct key *k, const char *value);

struct key {
	enum sect sect;
	const char *name;
	bool required;
	key_parse_fn parse;
	/* for parse_uint_key: where, how wide, which range; note is appended to range errors */
	size_t off;
	size_t width;
	unsigned long long min, max;
	const char *note;
};

/* Keys of the fixed sections, by index into parse.key_line[]. */
enum {
	K_NODE_NAME,
	K_NODE_LISTEN,
	K_NODE_CONTROL_CPU,
	K_NODE_CONNECT,
	K_CORES_POLL_CPUS,
	K_CORES_IDLE_PARK_US,
	K_CORES_CPU_CLAIMS,
	K_CORES_CONNECT_WORKERS,
	K_CORES_MR_WORKERS,
	K_RDMA_DEVICE,
	K_RDMA_PORT,
	K_RDMA_GID_INDEX,
	K_RDMA_SQ_DEPTH,
	K_RDMA_RQ_DEPTH,
	K_RDMA_CQ_DEPTH,
	K_RDMA_MTU,
	K_RDMA_RETRY_CNT,
	K_RDMA_RNR_RETRY,
	K_RDMA_ACK_TIMEOUT,
	K_ENGINE_SOCKET,
	K_ENGINE_MODE,
	K_ENGINE_ADMIN_GROUP,
	K_ENGINE_RANK_USERS,
	K_ENGINE_MAX_SESSIONS_PER_UID,
	K_ENGINE_MAX_POOLS_PER_ENGINE,
	K_ENGINE_MAX_POOLS_PER_UID,
	K_ENGINE_MAX_ROOMS_PER_UID,
	K_ENGINE_MAX_ROOMS_PER_ENGINE,
	K_ENGINE_MAX_PINNED_MB_PER_UID,
	K_ENGINE_MAX_CHUNK_MB_PER_ENGINE,
	K_ENGINE_REPLY_QUEUE_KB,
	K_TIMEOUTS_HANDSHAKE_MS,
	K_TIMEOUTS_WAITING_MS,
	K_TIMEOUTS_RELEASE_MS,
	K_TIMEOUTS_HEARTBEAT_MS,
	K_TIMEOUTS_HEARTBEAT_MISSES,
	K_TIMEOUTS_IDLE_MS,
	K_SECURITY_ALLOW,
	K_SECURITY_AUTH,
	K_SECURITY_SECRET_FILE,
	K_SECURITY_SECRET_NEXT_FILE,
	K_SECURITY_PENDING_MS,
	K_SECURITY_PENDING_MAX,
	K_SECURITY_PENDING_PER_ADDR,
	K_SECURITY_MAX_ROOMS_PER_PEER,
	K_SECURITY_MAX_TOMBSTONES_PER_PEER,
	K_DEBUG_FAULTS,
	K_DEBUG_LOG_LEVEL,
	K_METRICS_LISTEN,
	K_MEMBERSHIP_ETCD,
	K_MEMBERSHIP_PREFIX,
	K_MEMBERSHIP_LEASE_S,
	K_MEMBERSHIP_ADVERTISE,
	K_COUNT,
};

struct parse {
	struct kvx_config cfg; /* the local copy; the caller's is written on success only */
	FILE *f;
	unsigned int line; /* line of the text inih is working on */
	int read_errno;	   /* fgets() failed with this */

	bool failed; /* first error recorded in msg; later ones are dropped */
	unsigned int fail_line;
	char msg[512];

	enum sect sect;				 /* current section */
	int peer;				 /* current peer when sect == SECT_PEER */
	int rail;				 /* current rail when sect == SECT_RAIL */
	unsigned int rail_line[KVX_MAX_RAILS];	 /* line of each [rail.N]; 0: none */
	unsigned int rail_key[KVX_MAX_RAILS][4]; /* device, port, gid_index, mtu; 0: not set */
	char label[INI_MAX_LINE]; /* current section name as written, e.g. "peer.b" */
	unsigned int sect_line[SECT_COUNT];
	unsigned int key_line[K_COUNT];	       /* 0: key not seen */
	unsigned int peer_line[KVX_MAX_PEERS]; /* line of each [peer.NAME] */
	unsigned int peer_addr[KVX_MAX_PEERS]; /* line of each peer's address; 0: none */
	unsigned int peer_from[KVX_MAX_PEERS]; /* line of each peer's allow_from; 0: none */
	unsigned int peer_gid[KVX_MAX_PEERS];  /* line of each peer's gid; 0: none */
	char allow[INI_MAX_LINE];	       /* [security] allow, checked once peers are known */
};

static const char *const log_level_name[] = {
	[KVX_LOG_ERROR] = "error",
	[KVX_LOG_WARN] = "warn",
	[KVX_LOG_INFO] = "info",
	[KVX_LOG_DEBUG] = "debug",
};

/* ---- errors ---- */

static int
failv(struct parse *p, unsigned int line, const char *fmt, va_list ap)
{
	if (p->failed)
		return 0;
	p->failed = true;
	p->fail_line = line;
	vsnprintf(p->msg, sizeof(p->msg), fmt, ap);
	return 0;
}

/* Record "message" for line (0: not tied to a line); returns 0 (an inih handler failure). */
static int __attribute__((format(printf, 3, 4)))
fail(struct parse *p, unsigned int line, const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	failv(p, line, fmt, ap);
	va_end(ap);
	return 0;
}

/* Record "[section] key: message" for the current line. */
static int __attribute__((format(printf, 3, 4)))
key_fail(struct parse *p, const char *key, const char *fmt, ...)
{
	char what[400];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(what, sizeof(what), fmt, ap);
	va_end(ap);
	return fail(p, p->line, "[%s] %s: %s", p->label, key, what);
}

/* ---- value helpers ---- */

/* Unsigned integer in base (8 or 10): digits only, no sign, no blanks.  0, -EINVAL, -ERANGE. */
static int
str_to_ull(const char *s, int base, unsigned long long *out)
{
	unsigned long long v;
	char *end;

	if (s[0] < '0' || s[0] > '9')
		return -EINVAL;
	errno = 0;
	v = strtoull(s, &end, base);
	if (*end != '\0')
		return -EINVAL;
	if (errno == ERANGE)
		return -ERANGE;
	*out = v;
	return 0;
}

static bool
name_valid(const char *s)
{
	size_t n = strlen(s);

	if (n == 0 || n >= KVX_CFG_NAME_MAX)
		return false;
	return strspn(s, "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_.-") == n;
}

/* Next comma-separated item of *cur, blanks trimmed, into item.  Returns 1 (an item, maybe
 * empty), 0 at the end of the list, -ENAMETOOLONG when the item does not fit. */
static int
list_next(const char **cur, char *item, size_t itemlen)
{
	const char *s = *cur, *end;
	size_t n;

	if (s == NULL)
		return 0;
	end = strchr(s, ',');
	*cur = end ? end + 1 : NULL;
	if (end == NULL)
		end = s + strlen(s);
	while (s < end && (*s == ' ' || *s == '\t'))
		s++;
	while (end > s && (end[-1] == ' ' || end[-1] == '\t'))
		end--;
	n = (size_t)(end - s);
	if (n >= itemlen)
		return -ENAMETOOLONG;
	memcpy(item, s, n);
	item[n] = '\0';
	return 1;
}

/* "a.b.c.d:port" into *addr; returns 0, or -EINVAL with why set. */
static int
addr_parse(const char *s, struct kvx_config_addr *addr, const char **why)
{
	const char *colon = strrchr(s, ':');
	unsigned long long port;
	struct in_addr in;
	char host[sizeof(addr->host)];
	size_t n;

	*why = "want IPv4:port, e.g. 10.0.0.1:7470";
	if (colon == NULL)
		return -EINVAL;
	n = (size_t)(colon - s);
	if (n == 0 || n >= sizeof(host))
		return -EINVAL;
	memcpy(host, s, n);
	host[n] = '\0';
	if (inet_pton(AF_INET, host, &in) != 1) {
		*why = "host is not a dotted IPv4 address";
		return -EINVAL;
	}
	if (str_to_ull(colon + 1, 10, &port) != 0 || port < 1 || port > 65535) {
		*why = "port must be 1..65535";
		return -EINVAL;
	}
	if (inet_ntop(AF_INET, &in, addr->host, sizeof(addr->host)) == NULL)
		return -EINVAL;
	addr->port = (uint16_t)port;
	return 0;
}

/* ---- key parsers ---- */

static int
parse_uint_key(struct parse *p, const struct key *k, const char *value)
{
	unsigned long long v;
	void *field = (char *)&p->cfg + k->off;
	int rc = str_to_ull(value, 10, &v);

	if (rc == -EINVAL)
		return key_fail(p, k->name, "'%s' is not an unsigned decimal integer", value);
	if (rc == -ERANGE || v < k->min || v > k->max)
		return key_fail(p, k->name, "%s is out of range %llu..%llu%s%s%s", value, k->min,
				k->max, k->note ? " (" : "", k->note ? k->note : "",
				k->note ? ")" : "");
	switch (k->width) {
	case sizeof(uint8_t):
		*(uint8_t *)field = (uint8_t)v;
		break;
	case sizeof(uint32_t):
		*(uint32_t *)field = (uint32_t)v;
		break;
	default:
		assert(!"bad key width");
	}
	return 1;
}

static int
parse_name(struct parse *p, const struct key *k, const char *value)
{
	char *field = (char *)&p->cfg + k->off;

	if (!name_valid(value))
		return key_fail(p, k->name, "'%s' is not a name ([A-Za-z0-9_.-], 1..%d chars)",
				value, KVX_CFG_NAME_MAX - 1);
	snprintf(field, KVX_CFG_NAME_MAX, "%s", value);
	return 1;
}

static int
parse_listen(struct parse *p, const struct key *k, const char *value)
{
	const char *why;

	if (addr_parse(value, &p->cfg.listen, &why) != 0)
		return key_fail(p, k->name, "bad address '%s': %s", value, why);
	return 1;
}

static int
parse_metrics_listen(struct parse *p, const struct key *k, const char *value)
{
	const char *why;

	if (addr_parse(value, &p->cfg.metrics_listen, &why) != 0)
		return key_fail(p, k->name, "bad address '%s': %s", value, why);
	p->cfg.has_metrics = true;
	return 1;
}

static int
parse_etcd(struct parse *p, const struct key *k, const char *value)
{
	const char *why;

	if (addr_parse(value, &p->cfg.etcd, &why) != 0)
		return key_fail(p, k->name, "bad address '%s': %s (etcd's client port, HTTP)",
				value, why);
	p->cfg.has_etcd = true;
	return 1;
}

static int
parse_advertise(struct parse *p, const struct key *k, const char *value)
{
	const char *why;

	if (addr_parse(value, &p->cfg.advertise, &why) != 0)
		return key_fail(p, k->name, "bad address '%s': %s", value, why);
	if (strcmp(p->cfg.advertise.host, "0.0.0.0") == 0)
		return key_fail(p, k->name, "0.0.0.0 is not an address peers can dial");
	p->cfg.has_advertise = true;
	return 1;
}

/* An etcd key prefix: '/' first and last, then [A-Za-z0-9_./-], at most 100 bytes (a node's
 * key is the prefix and its name). */
static int
parse_prefix(struct parse *p, const struct key *k, const char *value)
{
	size_t n = strlen(value);

	if (n < 2 || n > 100 || value[0] != '/' || value[n - 1] != '/')
		return key_fail(p, k->name,
				"'%s': want /a/path/ (starting and ending with '/', at most 100 "
				"bytes)",
				value);
	for (size_t i = 0; i < n; i++)
		if (!isalnum((unsigned char)value[i]) && !strchr("_./-", value[i]))
			return key_fail(p, k->name, "'%s': byte %zu is not [A-Za-z0-9_./-]", value,
					i + 1);
	memcpy(p->cfg.etcd_prefix, value, n + 1);
	return 1;
}

static int
parse_cpu(const char *s, int *cpu)
{
	unsigned long long v;
	int rc = str_to_ull(s, 10, &v);

	if (rc != 0)
		return rc;
	if (v > CPU_ID_MAX)
		return -ERANGE;
	*cpu = (int)v;
	return 0;
}

static int
parse_control_cpu(struct parse *p, const struct key *k, const char *value)
{
	int rc;

	if (strcmp(value, "none") == 0) {
		p->cfg.control_cpu = -1;
		return 1;
	}
	rc = parse_cpu(value, &p->cfg.control_cpu);
	if (rc == -EINVAL)
		return key_fail(p, k->name, "'%s' is neither a cpu id nor \"none\"", value);
	if (rc != 0)
		return key_fail(p, k->name, "cpu %s is out of range 0..%d", value, CPU_ID_MAX);
	return 1;
}

/* "none", or the absolute path of the directory of this host's CPU claims (topo.h). */
static int
parse_cpu_claims(struct parse *p, const struct key *k, const char *value)
{
	size_t n = strlen(value);

	if (strcmp(value, "none") == 0) {
		p->cfg.cpu_claims[0] = '\0';
		return 1;
	}
	if (value[0] != '/')
		return key_fail(p, k->name, "'%s' is neither an absolute path nor \"none\"", value);
	if (n >= sizeof(p->cfg.cpu_claims))
		return key_fail(p, k->name, "path is %zu bytes, at most %zu allowed", n,
				sizeof(p->cfg.cpu_claims) - 1);
	snprintf(p->cfg.cpu_claims, sizeof(p->cfg.cpu_claims), "%s", value);
	return 1;
}

static int
parse_poll_cpus(struct parse *p, const struct key *k, const char *value)
{
	const char *cur = value;
	char item[32];
	int cpu, n = 0, rc, i;

	if (strcmp(value, "auto") == 0) {
		p->cfg.poll_cpus_auto = true;
		p->cfg.n_poll_cpus = 0;
		memset(p->cfg.poll_cpus, 0, sizeof(p->cfg.poll_cpus));
		return 1;
	}
	while ((rc = list_next(&cur, item, sizeof(item))) != 0) {
		if (rc < 0)
			return key_fail(p, k->name, "entry %d is not a cpu id", n + 1);
		if (item[0] == '\0')
			return key_fail(p, k->name, "empty entry %d in '%s'", n + 1, value);
		rc = parse_cpu(item, &cpu);
		if (rc == -EINVAL)
			return key_fail(p, k->name,
					"'%s' is not a cpu id (want \"auto\" or a list)", item);
		if (rc != 0)
			return key_fail(p, k->name, "cpu %s is out of range 0..%d", item,
					CPU_ID_MAX);
		for (i = 0; i < n; i++)
			if (p->cfg.poll_cpus[i] == cpu)
				return key_fail(p, k->name, "cpu %d is listed twice", cpu);
		if (n == KVX_MAX_CORES)
			return key_fail(p, k->name, "more than %d cpus", KVX_MAX_CORES);
		p->cfg.poll_cpus[n++] = cpu;
	}
	p->cfg.poll_cpus_auto = false;
	p->cfg.n_poll_cpus = n;
	return 1;
}

static int
parse_mtu(struct parse *p, const struct key *k, const char *value)
{
	unsigned long long v;

	if (str_to_ull(value, 10, &v) != 0 ||
	    (v != 256 && v != 512 && v != 1024 && v != 2048 && v != 4096))
		return key_fail(p, k->name, "'%s' is not one of 256, 512, 1024, 2048, 4096", value);
	p->cfg.mtu = (uint32_t)v;
	return 1;
}

static int
parse_path(struct parse *p, const struct key *k, const char *value)
{
	char *field = (char *)&p->cfg + k->off;
	size_t n = strlen(value);

	if (k->required && n == 0)
		return key_fail(p, k->name, "empty path");
	if (n >= k->width)
		return key_fail(p, k->name, "path is %zu bytes, at most %zu allowed", n,
				k->width - 1);
	snprintf(field, k->width, "%s", value);
	return 1;
}

static int
parse_mode(struct parse *p, const struct key *k, const char *value)
{
	unsigned long long v;
	int rc = str_to_ull(value, 8, &v);

	if (rc == -EINVAL)
		return key_fail(p, k->name, "'%s' is not an octal mode", value);
	if (rc != 0 || v > 0777)
		return key_fail(p, k->name, "%s is out of range 0..0777", value);
	if (v & 0007)
		return key_fail(p, k->name,
				"%s gives every user access (world bits set): use 0660 or "
				"tighter, and admin_group for operators",
				value);
	p->cfg.socket_mode = (mode_t)v;
	return 1;
}

/* A group name, or empty for none. */
static int
parse_group(struct parse *p, const struct key *k, const char *value)
{
	if (value[0] == '\0') {
		p->cfg.admin_group[0] = '\0';
		return 1;
	}
	return parse_name(p, k, value);
}

/* A rank of rank_users: 0..KVX_RANK_MAX. */
static bool
rank_parse(const char *s, uint32_t *out)
{
	unsigned long long v;

	if (str_to_ull(s, 10, &v) != 0 || v > KVX_RANK_MAX)
		return false;
	*out = (uint32_t)v;
	return true;
}

/* "RANKS:USER, ...": RANKS is N or LO-HI, USER a name or a numeric uid; ranges do not meet. */
static int
parse_rank_users(struct parse *p, const struct key *k, const char *value)
{
	struct kvx_config_rank_user out[KVX_CFG_RANK_USERS_MAX];
	char item[INI_MAX_LINE];
	const char *cur = value;
	char *colon, *dash;
	int rc, n = 0;

	memset(out, 0, sizeof(out)); /* compared whole (the printed file loads back equal) */
	while ((rc = list_next(&cur, item, sizeof(item))) != 0) {
		struct kvx_config_rank_user *u = &out[n];

		assert(rc > 0); /* an item is shorter than the line */
		if (item[0] == '\0' && n == 0 && cur == NULL)
			break; /* an empty value: none */
		if (n == KVX_CFG_RANK_USERS_MAX)
			return key_fail(p, k->name, "more than %d entries", KVX_CFG_RANK_USERS_MAX);
		colon = strchr(item, ':');
		if (colon == NULL)
			return key_fail(p, k->name, "entry %d '%s' is not RANKS:USER", n + 1, item);
		*colon = '\0';
		dash = strchr(item, '-');
		if (dash)
			*dash = '\0';
		if (!rank_parse(item, &u->lo) || !rank_parse(dash ? dash + 1 : item, &u->hi) ||
		    u->hi < u->lo)
			return key_fail(p, k->name,
					"entry %d: '%s%s%s' is not a rank or a range LO-HI of "
					"0..%u",
					n + 1, item, dash ? "-" : "", dash ? dash + 1 : "",
					KVX_RANK_MAX);
		if (!name_valid(colon + 1))
			return key_fail(p, k->name, "entry %d: '%s' is not a user name or uid",
					n + 1, colon + 1);
		snprintf(u->user, sizeof(u->user), "%s", colon + 1);
		for (int i = 0; i < n; i++)
			if (u->lo <= out[i].hi && out[i].lo <= u->hi)
				return key_fail(p, k->name,
						"entry %d: ranks %u-%u meet entry %d's %u-%u",
						n + 1, u->lo, u->hi, i + 1, out[i].lo, out[i].hi);
		n++;
	}
	memcpy(p->cfg.rank_users, out, sizeof(out));
	p->cfg.n_rank_users = n;
	return 1;
}

static int
parse_connect(struct parse *p, const struct key *k, const char *value)
{
	if (strcmp(value, "always") == 0)
		p->cfg.on_demand = false;
	else if (strcmp(value, "on_demand") == 0)
		p->cfg.on_demand = true;
	else
		return key_fail(p, k->name, "'%s' is not one of always, on_demand", value);
	return 1;
}

static int
parse_auth(struct parse *p, const struct key *k, const char *value)
{
	if (strcmp(value, "hmac-sha256") == 0)
		p->cfg.auth = KVX_AUTH_HMAC_SHA256;
	else if (strcmp(value, "none") == 0)
		p->cfg.auth = KVX_AUTH_NONE;
	else
		return key_fail(p, k->name, "'%s' is not one of hmac-sha256, none", value);
	return 1;
}

/* "a.b.c.d/len" or "a.b.c.d" (a /32) into *net; 0 or -EINVAL. */
static int
net_parse(const char *s, struct kvx_config_net *net)
{
	char host[INET_ADDRSTRLEN];
	const char *slash = strchr(s, '/');
	unsigned long long len = 32;
	struct in_addr in;
	size_t n = slash ? (size_t)(slash - s) : strlen(s);

	if (n == 0 || n >= sizeof(host))
		return -EINVAL;
	memcpy(host, s, n);
	host[n] = '\0';
	if (inet_pton(AF_INET, host, &in) != 1)
		return -EINVAL;
	if (slash && (str_to_ull(slash + 1, 10, &len) != 0 || len > 32))
		return -EINVAL;
	net->mask = len == 0 ? 0 : ~0u << (32 - len);
	net->addr = ntohl(in.s_addr) & net->mask;
	return 0;
}

static int
parse_peer_allow_from(struct parse *p, const char *value)
{
	struct kvx_config_peer *peer = &p->cfg.peers[p->peer];
	const char *cur = value;
	char item[64];
	int rc, n = 0;

	while ((rc = list_next(&cur, item, sizeof(item))) != 0) {
		if (n == KVX_CFG_ALLOW_FROM_MAX)
			return key_fail(p, "allow_from", "more than %d entries",
					KVX_CFG_ALLOW_FROM_MAX);
		if (rc < 0 || net_parse(item, &peer->allow_from[n]) != 0)
			return key_fail(p, "allow_from", "entry %d '%s' is not IPv4 or IPv4/prefix",
					n + 1, rc < 0 ? "(too long)" : item);
		n++;
	}
	peer->n_allow_from = n;
	return 1;
}

/* "GID" or "GID0, GID1, ...": rail 0's, then the other rails'. */
static int
parse_peer_gid(struct parse *p, const char *value)
{
	struct kvx_config_peer *peer = &p->cfg.peers[p->peer];
	const char *cur = value;
	char item[INI_MAX_LINE];
	int n = 0, rc;

	while ((rc = list_next(&cur, item, sizeof(item))) != 0) {
		struct in6_addr a;

		if (rc < 0)
			return key_fail(p, "gid", "an entry of '%s' is too long", value);
		if (n == KVX_MAX_RAILS)
			return key_fail(p, "gid", "more than %d GIDs (one per rail)",
					KVX_MAX_RAILS);
		if (inet_pton(AF_INET6, item, &a) != 1)
			return key_fail(p, "gid", "'%s' is not a GID in IPv6 notation", item);
		memcpy(n ? peer->rail_gid[n - 1] : peer->gid, &a, 16);
		n++;
	}
	if (n == 0)
		return key_fail(p, "gid", "empty");
	peer->has_gid = true;
	peer->n_rail_gid = n - 1;
	return 1;
}

static int
parse_allow(struct parse *p, const struct key *k, const char *value)
{
	/* Peers may come later in the file: checked in check_allow(). */
	snprintf(p->allow, sizeof(p->allow), "%s", value);
	return 1;
}

/* "name:N,name:N"; stored with the blanks around items removed. */
static int
parse_faults(struct parse *p, const struct key *k, const char *value)
{
	char out[sizeof(p->cfg.faults)], item[INI_MAX_LINE];
	const char *cur = value;
	unsigned long long n;
	size_t len = 0;
	char *colon;
	int rc, i = 0;

	memset(out, 0, sizeof(out));
	if (value[0] == '\0')
		goto done;
	while ((rc = list_next(&cur, item, sizeof(item))) != 0) {
		i++;
		assert(rc > 0); /* an item is shorter than the line */
		colon = strchr(item, ':');
		if (colon == NULL)
			return key_fail(p, k->name, "entry %d '%s' is not name:N", i, item);
		*colon = '\0';
		if (!name_valid(item))
			return key_fail(p, k->name, "entry %d: '%s' is not a fault point name", i,
					item);
		if (str_to_ull(colon + 1, 10, &n) != 0 || n > UINT32_MAX)
			return key_fail(p, k->name, "entry %d: '%s' is not a count 0..%u", i,
					colon + 1, UINT32_MAX);
		len += (size_t)snprintf(out + len, sizeof(out) - len, "%s%s:%llu", i > 1 ? "," : "",
					item, n);
		assert(len < sizeof(out)); /* the line is shorter than faults[] */
	}
done:
	memcpy(p->cfg.faults, out, sizeof(out));
	return 1;
}

static int
parse_log_level(struct parse *p, const struct key *k, const char *value)
{
	size_t i;

	for (i = 0; i < ARRAY_SIZE(log_level_name); i++) {
		if (strcmp(value, log_level_name[i]) == 0) {
			p->cfg.log_level = (int)i;
			return 1;
		}
	}
	return key_fail(p, k->name, "'%s' is not one of error, warn, info, debug", value);
}

#define U(s, n, field, lo, hi, nt)                                                          \
	{                                                                                   \
		.sect = (s), .name = (n), .parse = parse_uint_key,                          \
		.off = offsetof(struct kvx_config, field),                                  \
		.width = sizeof(((struct kvx_config *)0)->field), .min = (lo), .max = (hi), \
		.note = (nt),                                                               \
	}
#define F(s, n, req, fn, field)                                             \
	{                                                                   \
		.sect = (s), .name = (n), .required = (req), .parse = (fn), \
		.off = offsetof(struct kvx_config, field),                  \
		.width = sizeof(((struct kvx_config *)0)->field),           \
	}

#define RETRY_NOTE "rxe treats 7 as infinite retry"

static const struct key keys[K_COUNT] = {
	[K_NODE_NAME] = F(SECT_NODE, "name", true, parse_name, name),
	[K_NODE_LISTEN] = F(SECT_NODE, "listen", true, parse_listen, listen),
	[K_NODE_CONTROL_CPU] = F(SECT_NODE, "control_cpu", false, parse_control_cpu, control_cpu),
	[K_NODE_CONNECT] = F(SECT_NODE, "connect", false, parse_connect, on_demand),
	[K_CORES_POLL_CPUS] = F(SECT_CORES, "poll_cpus", false, parse_poll_cpus, poll_cpus),
	[K_CORES_IDLE_PARK_US] = U(SECT_CORES, "idle_park_us", idle_park_us, 0, UINT32_MAX, NULL),
	[K_CORES_CPU_CLAIMS] = F(SECT_CORES, "cpu_claims", false, parse_cpu_claims, cpu_claims),
	[K_CORES_CONNECT_WORKERS] =
		U(SECT_CORES, "connect_workers", connect_workers, 1, KVX_CFG_WORKERS_MAX, NULL),
	[K_CORES_MR_WORKERS] =
		U(SECT_CORES, "mr_workers", mr_workers, 1, KVX_CFG_WORKERS_MAX, NULL),
	[K_RDMA_DEVICE] = F(SECT_RDMA, "device", true, parse_name, device),
	[K_RDMA_PORT] = U(SECT_RDMA, "port", port, 1, 255, NULL),
	[K_RDMA_GID_INDEX] = U(SECT_RDMA, "gid_index", gid_index, 0, 255, NULL),
	[K_RDMA_SQ_DEPTH] = U(SECT_RDMA, "sq_depth", sq_depth, 16, 32768, NULL),
	[K_RDMA_RQ_DEPTH] = U(SECT_RDMA, "rq_depth", rq_depth, 16, 32768, NULL),
	[K_RDMA_CQ_DEPTH] = U(SECT_RDMA, "cq_depth", cq_depth, 64, CQ_DEPTH_MAX, NULL),
	[K_RDMA_MTU] = F(SECT_RDMA, "mtu", false, parse_mtu, mtu),
	[K_RDMA_RETRY_CNT] = U(SECT_RDMA, "retry_cnt", retry_cnt, 0, 6, RETRY_NOTE),
	[K_RDMA_RNR_RETRY] = U(SECT_RDMA, "rnr_retry", rnr_retry, 0, 6, RETRY_NOTE),
	[K_RDMA_ACK_TIMEOUT] = U(SECT_RDMA, "ack_timeout", ack_timeout, 1, 31, NULL),
	[K_ENGINE_SOCKET] = F(SECT_ENGINE, "socket", true, parse_path, socket_path),
	[K_ENGINE_MODE] = F(SECT_ENGINE, "mode", false, parse_mode, socket_mode),
	[K_ENGINE_ADMIN_GROUP] = F(SECT_ENGINE, "admin_group", false, parse_group, admin_group),
	[K_ENGINE_RANK_USERS] = F(SECT_ENGINE, "rank_users", false, parse_rank_users, rank_users),
	[K_ENGINE_MAX_SESSIONS_PER_UID] =
		U(SECT_ENGINE, "max_sessions_per_uid", max_sessions_per_uid, 1, 1024, NULL),
	[K_ENGINE_MAX_POOLS_PER_ENGINE] =
		U(SECT_ENGINE, "max_pools_per_engine", max_pools_per_engine, 1, 256, NULL),
	[K_ENGINE_MAX_POOLS_PER_UID] =
		U(SECT_ENGINE, "max_pools_per_uid", max_pools_per_uid, 1, 256, NULL),
	[K_ENGINE_MAX_ROOMS_PER_ENGINE] =
		U(SECT_ENGINE, "max_rooms_per_engine", max_rooms_per_engine, 1, 1048576, NULL),
	[K_ENGINE_MAX_ROOMS_PER_UID] =
		U(SECT_ENGINE, "max_rooms_per_uid", max_rooms_per_uid, 1, 1048576, NULL),
	[K_ENGINE_MAX_PINNED_MB_PER_UID] =
		U(SECT_ENGINE, "max_pinned_mb_per_uid", max_pinned_mb_per_uid, 1, 16777216, NULL),
	[K_ENGINE_MAX_CHUNK_MB_PER_ENGINE] =
		U(SECT_ENGINE, "max_chunk_mb_per_engine", max_chunk_mb_per_engine, 1, 65536, NULL),
	[K_ENGINE_REPLY_QUEUE_KB] =
		U(SECT_ENGINE, "reply_queue_kb", reply_queue_kb, 64, 65536, NULL),
	[K_TIMEOUTS_HANDSHAKE_MS] =
		U(SECT_TIMEOUTS, "handshake_ms", handshake_ms, 1, 3600000, NULL),
	[K_TIMEOUTS_WAITING_MS] = U(SECT_TIMEOUTS, "waiting_ms", waiting_ms, 1, 3600000, NULL),
	[K_TIMEOUTS_RELEASE_MS] = U(SECT_TIMEOUTS, "release_ms", release_ms, 1, 3600000, NULL),
	[K_TIMEOUTS_HEARTBEAT_MS] =
		U(SECT_TIMEOUTS, "heartbeat_ms", heartbeat_ms, 1, 3600000, NULL),
	[K_TIMEOUTS_HEARTBEAT_MISSES] =
		U(SECT_TIMEOUTS, "heartbeat_misses", heartbeat_misses, 1, 1000, NULL),
	[K_TIMEOUTS_IDLE_MS] = U(SECT_TIMEOUTS, "idle_ms", idle_ms, 0, 86400000, NULL),
	[K_SECURITY_ALLOW] = {.sect = SECT_SECURITY, .name = "allow", .parse = parse_allow},
	[K_SECURITY_AUTH] = F(SECT_SECURITY, "auth", false, parse_auth, auth),
	[K_SECURITY_SECRET_FILE] = F(SECT_SECURITY, "secret_file", false, parse_path, secret_file),
	[K_SECURITY_SECRET_NEXT_FILE] =
		F(SECT_SECURITY, "secret_next_file", false, parse_path, secret_next_file),
	[K_SECURITY_PENDING_MS] = U(SECT_SECURITY, "pending_ms", pending_ms, 1, 3600000, NULL),
	[K_SECURITY_PENDING_MAX] = U(SECT_SECURITY, "pending_max", pending_max, 1, 4096, NULL),
	[K_SECURITY_PENDING_PER_ADDR] =
		U(SECT_SECURITY, "pending_per_addr", pending_per_addr, 1, 4096, NULL),
	[K_SECURITY_MAX_ROOMS_PER_PEER] =
		U(SECT_SECURITY, "max_rooms_per_peer", max_rooms_per_peer, 1, 1048576, NULL),
	[K_SECURITY_MAX_TOMBSTONES_PER_PEER] = U(SECT_SECURITY, "max_tombstones_per_peer",
						 max_tombstones_per_peer, 1, 1048576, NULL),
	[K_DEBUG_FAULTS] = F(SECT_DEBUG, "faults", false, parse_faults, faults),
	[K_DEBUG_LOG_LEVEL] = F(SECT_DEBUG, "log_level", false, parse_log_level, log_level),
	[K_METRICS_LISTEN] = F(SECT_METRICS, "listen", false, parse_metrics_listen, metrics_listen),
	[K_MEMBERSHIP_ETCD] = F(SECT_MEMBERSHIP, "etcd", false, parse_etcd, etcd),
	[K_MEMBERSHIP_PREFIX] = F(SECT_MEMBERSHIP, "prefix", false, parse_prefix, etcd_prefix),
	[K_MEMBERSHIP_LEASE_S] = U(SECT_MEMBERSHIP, "lease_s", lease_s, 2, 3600, NULL),
	[K_MEMBERSHIP_ADVERTISE] =
		F(SECT_MEMBERSHIP, "advertise", false, parse_advertise, advertise),
};

#undef U
#undef F

/* ---- reader and handler ---- */

/* "[rail.N]": N is 1..KVX_MAX_RAILS - 1, each once, after [rail.N-1]. */
static bool
rail_begin(struct parse *p, const char *n)
{
	int i = n[0] >= '1' && n[0] <= '9' && n[1] == '\0' ? n[0] - '0' : 0;

	if (i < 1 || i >= KVX_MAX_RAILS)
		return fail(p, p->line, "[%s]: the rail number must be 1..%d", p->label,
			    KVX_MAX_RAILS - 1);
	if (p->rail_line[i])
		return fail(p, p->line, "[%s]: section repeated (first at line %u)", p->label,
			    p->rail_line[i]);
	if (i > 1 && !p->rail_line[i - 1])
		return fail(p, p->line,
			    "[%s]: comes before [rail.%d] (rails are numbered in order)", p->label,
			    i - 1);
	p->rail_line[i] = p->line;
	p->cfg.rails[i].port = 1;
	p->cfg.rails[i].gid_index = 1;
	if (p->cfg.n_rails < i + 1)
		p->cfg.n_rails = i + 1;
	p->sect = SECT_RAIL;
	p->rail = i;
	return true;
}

/* A key of [rail.N]. */
static int
rail_key(struct parse *p, const char *name, const char *value)
{
	static const char *const names[4] = {"device", "port", "gid_index", "mtu"};
	struct kvx_config_rail *r = &p->cfg.rails[p->rail];
	unsigned long long v;
	int k;

	for (k = 0; k < 4 && strcmp(name, names[k]) != 0; k++)
		;
	if (k == 4)
		return key_fail(p, name, "unknown key");
	if (p->rail_key[p->rail][k])
		return key_fail(p, name, "duplicate key (first at line %u)",
				p->rail_key[p->rail][k]);
	p->rail_key[p->rail][k] = p->line;
	if (k == 0) {
		if (!name_valid(value))
			return key_fail(p, name, "'%s' is not a name ([A-Za-z0-9_.-], 1..%d chars)",
					value, KVX_CFG_NAME_MAX - 1);
		snprintf(r->device, sizeof(r->device), "%s", value);
		return 1;
	}
	if (k == 3) {
		if (str_to_ull(value, 10, &v) != 0 ||
		    (v != 256 && v != 512 && v != 1024 && v != 2048 && v != 4096))
			return key_fail(p, name, "'%s' is not one of 256, 512, 1024, 2048, 4096",
					value);
		r->mtu = (uint32_t)v;
		return 1;
	}
	if (str_to_ull(value, 10, &v) != 0 || v < (k == 1 ? 1u : 0u) || v > 255)
		return key_fail(p, name, "'%s' is not an integer %u..255", value, k == 1 ? 1u : 0u);
	if (k == 1)
		r->port = (uint8_t)v;
	else
		r->gid_index = (uint8_t)v;
	return 1;
}

/* Rail 0 is [rdma]'s; every [rail.N] needs a device no other rail has. */
static int
check_rails(struct parse *p)
{
	struct kvx_config_rail *r = p->cfg.rails;

	snprintf(r[0].device, sizeof(r[0].device), "%s", p->cfg.device);
	r[0].port = p->cfg.port;
	r[0].gid_index = p->cfg.gid_index;
	r[0].mtu = p->cfg.mtu;
	if (p->cfg.n_rails < 1)
		p->cfg.n_rails = 1;
	for (int i = 1; i < p->cfg.n_rails; i++) {
		if (!p->rail_key[i][0])
			return fail(p, p->rail_line[i], "[rail.%d] device: required key missing",
				    i);
		if (!p->rail_key[i][3])
			r[i].mtu = p->cfg.mtu;
		for (int j = 0; j < i; j++)
			if (strcmp(r[i].device, r[j].device) == 0 && r[i].port == r[j].port)
				return fail(p, p->rail_key[i][0],
					    "[rail.%d] device: %s port %u is already rail %d", i,
					    r[i].device, r[i].port, j);
	}
	return 1;
}

/* A line starting with '[' (blanks already stripped): switch to that section.  Returns false
 * after recording an error. */
static bool
section_begin(struct parse *p, const char *line)
{
	const char *close = strchr(line, ']'), *rest, *name;
	enum sect s;
	size_t n;
	int i;

	if (close == NULL)
		return fail(p, p->line, "section header without ']'");
	rest = close + 1 + strspn(close + 1, " \t\r\n");
	if (*rest != '\0' && *rest != ';' && *rest != '#')
		return fail(p, p->line, "text after the section header: '%.*s'",
			    (int)strcspn(rest, "\r\n"), rest);
	n = (size_t)(close - line - 1);
	snprintf(p->label, sizeof(p->label), "%.*s", (int)n, line + 1);
	name = p->label;

	for (s = SECT_NODE; s < SECT_PEER; s++)
		if (strcmp(name, sect_name[s]) == 0)
			break;
	if (s == SECT_PEER && strncmp(name, "rail.", 5) == 0)
		return rail_begin(p, name + 5);
	if (s == SECT_PEER && strncmp(name, "peer.", 5) != 0)
		return fail(p, p->line, "[%s]: unknown section", name);
	if (s != SECT_PEER) {
		if (p->sect_line[s] != 0)
			return fail(p, p->line, "[%s]: section repeated (first at line %u)", name,
				    p->sect_line[s]);
		p->sect_line[s] = p->line;
		p->sect = s;
		return true;
	}

	name += 5;
	if (!name_valid(name))
		return fail(p, p->line,
			    "[%s]: '%s' is not a peer name ([A-Za-z0-9_.-], 1..%d chars)", p->label,
			    name, KVX_CFG_NAME_MAX - 1);
	for (i = 0; i < p->cfg.n_peers; i++)
		if (strcmp(p->cfg.peers[i].name, name) == 0)
			return fail(p, p->line, "[%s]: peer repeated (first at line %u)", p->label,
				    p->peer_line[i]);
	if (p->cfg.n_peers == KVX_MAX_PEERS)
		return fail(p, p->line, "[%s]: too many peers (at most %d)", p->label,
			    KVX_MAX_PEERS);
	i = p->cfg.n_peers++;
	memcpy(p->cfg.peers[i].name, name, strlen(name) + 1); /* name_valid(): it fits */
	p->peer_line[i] = p->line;
	p->sect = SECT_PEER;
	p->peer = i;
	return true;
}

/* inih's reader: fgets() plus line counting, blank stripping and section headers. */
static char *
read_line(char *str, int num, void *stream)
{
	struct parse *p = stream;
	long start = ftell(p->f), end; /* -1 on a pipe: then the last line is not checked */
	size_t len, lead;
	int c;

	if (p->failed)
		return NULL; /* stop at the first error */
	if (fgets(str, num, p->f) == NULL) {
		if (ferror(p->f))
			p->read_errno = errno ? errno : EIO;
		return NULL;
	}
	p->line++;
	len = strlen(str);
	end = ftell(p->f);
	if (start >= 0 && end >= 0 && (size_t)(end - start) != len) {
		/* fgets() read past a NUL byte: the last line, or one that fitted */
		fail(p, p->line, "line has a NUL byte");
		return NULL;
	}
	if (len == 0 || str[len - 1] != '\n') {
		c = getc(p->f);
		if (c != EOF) {
			fail(p, p->line, "line too long (at most %d characters) or has a NUL byte",
			     num - 3);
			return NULL;
		}
	}
	if (p->line == 1 && len >= 3 && memcmp(str, "\xEF\xBB\xBF", 3) == 0) {
		memmove(str, str + 3, len - 3 + 1); /* a UTF-8 byte order mark */
		len -= 3;
	}
	lead = strspn(str, " \t");
	if (lead > 0)
		memmove(str, str + lead, len - lead + 1);
	if (str[0] == '[' && !section_begin(p, str))
		return NULL;
	return str;
}

static int
on_key(void *user, const char *section, const char *name, const char *value)
{
	struct parse *p = user;
	const char *why;
	size_t i;

	(void)section; /* inih's copy may be truncated: p->label is the section */
	if (name[0] == '\0')
		return fail(p, p->line, "line without a key name");
	if (p->sect == SECT_NONE)
		return fail(p, p->line, "%s: key outside any [section]", name);
	if (p->sect == SECT_RAIL)
		return rail_key(p, name, value);
	if (p->sect == SECT_PEER) {
		unsigned int *seen = strcmp(name, "allow_from") == 0 ? &p->peer_from[p->peer]
				     : strcmp(name, "gid") == 0	     ? &p->peer_gid[p->peer]
								     : NULL;

		if (seen) {
			if (*seen != 0)
				return key_fail(p, name, "duplicate key (first at line %u)", *seen);
			*seen = p->line;
			return seen == &p->peer_gid[p->peer] ? parse_peer_gid(p, value)
							     : parse_peer_allow_from(p, value);
		}
		if (strcmp(name, "address") != 0)
			return key_fail(p, name, "unknown key");
		if (p->peer_addr[p->peer] != 0)
			return key_fail(p, name, "duplicate key (first at line %u)",
					p->peer_addr[p->peer]);
		p->peer_addr[p->peer] = p->line;
		if (addr_parse(value, &p->cfg.peers[p->peer].addr, &why) != 0)
			return key_fail(p, name, "bad address '%s': %s", value, why);
		return 1;
	}
	for (i = 0; i < K_COUNT; i++) {
		if (keys[i].sect != p->sect || strcmp(keys[i].name, name) != 0)
			continue;
		if (p->key_line[i] != 0)
			return key_fail(p, name, "duplicate key (first at line %u)",
					p->key_line[i]);
		p->key_line[i] = p->line;
		return keys[i].parse(p, &keys[i], value);
	}
	return key_fail(p, name, "unknown key");
}

/* ---- whole-file checks ---- */

static void
defaults(struct kvx_config *cfg)
{
	memset(cfg, 0, sizeof(*cfg));
	cfg->control_cpu = -1;
	cfg->poll_cpus_auto = true;
	snprintf(cfg->cpu_claims, sizeof(cfg->cpu_claims), "%s", KVX_CFG_CPU_CLAIMS_DEFAULT);
	cfg->connect_workers = KVX_CFG_WORKERS_DEFAULT;
	cfg->mr_workers = KVX_CFG_WORKERS_DEFAULT;
	cfg->port = 1;
	cfg->gid_index = 1;
	cfg->sq_depth = 512;
	cfg->rq_depth = 512;
	cfg->cq_depth = 0; /* auto: check_cq_depth() */
	cfg->mtu = 1024;
	cfg->retry_cnt = 6;
	cfg->rnr_retry = 6;
	cfg->ack_timeout = 10;
	cfg->socket_mode = 0660;
	cfg->handshake_ms = 5000;
	cfg->waiting_ms = 30000;
	cfg->release_ms = 5000;
	cfg->heartbeat_ms = 1000;
	cfg->heartbeat_misses = 3;
	cfg->idle_ms = 60000;
	cfg->max_sessions_per_uid = 16;
	cfg->max_pools_per_engine = 16;
	cfg->max_pools_per_uid = 128;
	cfg->max_rooms_per_engine = 65536;
	cfg->max_rooms_per_uid = 131072;
	cfg->max_pinned_mb_per_uid = 65536;
	cfg->max_chunk_mb_per_engine = 256;
	cfg->reply_queue_kb = 1024;
	cfg->auth = KVX_AUTH_HMAC_SHA256;
	cfg->pending_ms = 2000;
	cfg->pending_max = 64;
	cfg->pending_per_addr = 8;
	cfg->max_rooms_per_peer = 65536;
	cfg->max_tombstones_per_peer = 4096;
	cfg->log_level = KVX_LOG_INFO;
	snprintf(cfg->etcd_prefix, sizeof(cfg->etcd_prefix), "/kvx/nodes/");
	cfg->lease_s = 5;
}

static int
check_allow(struct parse *p)
{
	unsigned int line = p->key_line[K_SECURITY_ALLOW];
	const char *cur = p->allow;
	char item[INI_MAX_LINE];
	struct kvx_config_peer *peer;
	int i, rc;

	if (line == 0) {
		for (i = 0; i < p->cfg.n_peers; i++)
			p->cfg.peers[i].allowed = true;
		return 1;
	}
	if (p->allow[0] == '\0')
		return 1; /* "allow =": no peer may connect */
	while ((rc = list_next(&cur, item, sizeof(item))) != 0) {
		assert(rc > 0);
		if (item[0] == '\0')
			return fail(p, line, "[security] allow: empty entry in '%s'", p->allow);
		for (i = 0, peer = NULL; i < p->cfg.n_peers && peer == NULL; i++)
			if (strcmp(p->cfg.peers[i].name, item) == 0)
				peer = &p->cfg.peers[i];
		if (peer == NULL)
			return fail(p, line, "[security] allow: '%s' is not a configured [peer.*]",
				    item);
		if (peer->allowed)
			return fail(p, line, "[security] allow: '%s' is listed twice", item);
		peer->allowed = true;
	}
	return 1;
}

/* Each polling core's CQ takes the completions of one QP per peer, each up to sq_depth sends
 * and rq_depth receives, and while a connection is replaced the old QPs (flushing) and the new
 * ones share it: 2 x peers x (sq + rq).  A CQ smaller than that can overrun in a flush storm
 * (the CQ goes to error, and with it every QP on it).  Unset: that, at least 4096. */
static int
check_cq_depth(struct parse *p)
{
	uint64_t need =
		2ull * (uint64_t)p->cfg.n_peers * ((uint64_t)p->cfg.sq_depth + p->cfg.rq_depth);
	uint64_t one = 2ull * ((uint64_t)p->cfg.sq_depth + p->cfg.rq_depth);

	if (p->cfg.on_demand) {
		/* sessions wait for CQ room (control/peer.c): one, and its replacement, must fit */
		if (p->key_line[K_RDMA_CQ_DEPTH] == 0) {
			need = need < 4096 ? 4096 : need;
			need = need < one ? one : need;
			p->cfg.cq_depth = need > CQ_DEPTH_MAX ? CQ_DEPTH_MAX : (uint32_t)need;
			if (p->cfg.cq_depth >= one)
				return 1;
		} else if (p->cfg.cq_depth >= one) {
			return 1;
		}
		return fail(p, p->key_line[K_RDMA_CQ_DEPTH],
			    "[rdma] cq_depth: %u is less than the %llu completions one session and "
			    "its replacement can produce (2 x (sq_depth %u + rq_depth %u))",
			    p->cfg.cq_depth, (unsigned long long)one, p->cfg.sq_depth,
			    p->cfg.rq_depth);
	}
	if (p->key_line[K_RDMA_CQ_DEPTH] == 0) {
		if (need > CQ_DEPTH_MAX)
			return fail(p, 0,
				    "[rdma] cq_depth: %d peers x (sq_depth %u + rq_depth %u) x 2 "
				    "need %llu CQ entries, more than %u: lower the queue depths",
				    p->cfg.n_peers, p->cfg.sq_depth, p->cfg.rq_depth,
				    (unsigned long long)need, CQ_DEPTH_MAX);
		p->cfg.cq_depth = need > 4096 ? (uint32_t)need : 4096;
		return 1;
	}
	if (p->cfg.cq_depth < need)
		return fail(
			p, p->key_line[K_RDMA_CQ_DEPTH],
			"[rdma] cq_depth: %u is less than the %llu completions its QPs can "
			"produce (2 sessions x %d peers x (sq_depth %u + rq_depth %u)); leave it "
			"unset to size it",
			p->cfg.cq_depth, (unsigned long long)need, p->cfg.n_peers, p->cfg.sq_depth,
			p->cfg.rq_depth);
	return 1;
}

/* Required keys, then the checks that need the whole file.  Returns 1, or 0 on error. */
static int
check_all(struct parse *p)
{
	size_t i;
	int j;

	for (i = 0; i < K_COUNT; i++)
		if (keys[i].required && p->key_line[i] == 0)
			return fail(p, 0, "[%s] %s: required key missing", sect_name[keys[i].sect],
				    keys[i].name);
	for (j = 0; j < p->cfg.n_peers; j++)
		if (p->peer_addr[j] == 0)
			return fail(p, 0, "[peer.%s] address: required key missing",
				    p->cfg.peers[j].name);
	for (j = 0; j < p->cfg.n_peers; j++)
		if (strcmp(p->cfg.peers[j].name, p->cfg.name) == 0)
			return fail(p, p->peer_line[j],
				    "[peer.%s]: this is the node's own name ([node] name)",
				    p->cfg.name);
	if (p->cfg.auth == KVX_AUTH_NONE &&
	    (p->cfg.secret_file[0] != '\0' || p->cfg.secret_next_file[0] != '\0'))
		return fail(p, p->key_line[K_SECURITY_AUTH],
			    "[security] auth: \"none\" with a secret file set: choose one");
	if (p->cfg.secret_next_file[0] != '\0' && p->cfg.secret_file[0] == '\0')
		return fail(p, p->key_line[K_SECURITY_SECRET_NEXT_FILE],
			    "[security] secret_next_file: set without secret_file");
	if (!check_cq_depth(p) || !check_rails(p))
		return 0;
	if (p->cfg.has_metrics && p->cfg.metrics_listen.port == p->cfg.listen.port &&
	    (strcmp(p->cfg.metrics_listen.host, p->cfg.listen.host) == 0 ||
	     strcmp(p->cfg.metrics_listen.host, "0.0.0.0") == 0 ||
	     strcmp(p->cfg.listen.host, "0.0.0.0") == 0))
		return fail(p, p->key_line[K_METRICS_LISTEN],
			    "[metrics] listen: %s:%u is the [node] listen address (line %u)",
			    p->cfg.metrics_listen.host, p->cfg.metrics_listen.port,
			    p->key_line[K_NODE_LISTEN]);
	if (p->cfg.has_etcd && !p->cfg.has_advertise && strcmp(p->cfg.listen.host, "0.0.0.0") == 0)
		return fail(
			p, p->key_line[K_MEMBERSHIP_ETCD],
			"[membership] etcd: [node] listen is 0.0.0.0 (line %u): set advertise to "
			"the address peers dial",
			p->key_line[K_NODE_LISTEN]);
	if (!p->cfg.has_etcd &&
	    (p->key_line[K_MEMBERSHIP_PREFIX] || p->key_line[K_MEMBERSHIP_LEASE_S] ||
	     p->key_line[K_MEMBERSHIP_ADVERTISE]))
		return fail(p,
			    p->key_line[K_MEMBERSHIP_PREFIX] ? p->key_line[K_MEMBERSHIP_PREFIX]
			    : p->key_line[K_MEMBERSHIP_LEASE_S]
				    ? p->key_line[K_MEMBERSHIP_LEASE_S]
				    : p->key_line[K_MEMBERSHIP_ADVERTISE],
			    "[membership]: set without etcd");
	if (p->cfg.pending_per_addr > p->cfg.pending_max)
		return fail(p, p->key_line[K_SECURITY_PENDING_PER_ADDR],
			    "[security] pending_per_addr: %u is over pending_max (%u)",
			    p->cfg.pending_per_addr, p->cfg.pending_max);
	return check_allow(p);
}

/* ---- public ---- */

int
kvx_config_load(struct kvx_config *cfg, const char *path, char *err, size_t errlen)
{
	struct parse *p;
	int rc, ret = 0;

	if (err != NULL && errlen > 0)
		err[0] = '\0';
	p = calloc(1, sizeof(*p));
	if (p == NULL) {
		if (err != NULL && errlen > 0)
			snprintf(err, errlen, "%s: out of memory", path);
		return -ENOMEM;
	}
	defaults(&p->cfg);
	p->f = fopen(path, "r");
	if (p->f == NULL) {
		ret = -errno;
		if (err != NULL && errlen > 0)
			snprintf(err, errlen, "%s: %s", path, strerror(-ret));
		goto err_free;
	}

	rc = ini_parse_stream(read_line, p, on_key, p);
	if (p->read_errno != 0) {
		ret = -p->read_errno;
		if (err != NULL && errlen > 0)
			snprintf(err, errlen, "%s: %s", path, strerror(-ret));
		goto err_close;
	}
	if (rc < 0) {
		ret = -ENOMEM;
		if (err != NULL && errlen > 0)
			snprintf(err, errlen, "%s: out of memory", path);
		goto err_close;
	}
	/* inih reports the first line it could not parse (or whose handler failed); ours may be
	 * a later one, or one inih never saw (a bad section header, an overlong line). */
	if (rc > 0 && (!p->failed || (unsigned int)rc < p->fail_line)) {
		p->failed = false;
		fail(p, (unsigned int)rc,
		     "syntax error: want '[section]', 'key = value' or a comment");
	}
	if (!p->failed)
		check_all(p);
	if (p->failed) {
		ret = -EINVAL;
		if (err != NULL && errlen > 0)
			snprintf(err, errlen, "%s:%u: %s", path, p->fail_line, p->msg);
		goto err_close;
	}

	memcpy(cfg, &p->cfg, sizeof(*cfg)); /* padding too: a reload compares equal */
err_close:
	fclose(p->f);
err_free:
	free(p);
	return ret;
}

/* "key = value", which must load again to the same value: without the blanks when the value
 * starts with ';' (after a blank inih takes it for a comment) or when they would make the line
 * longer than inih takes (the value came from a line that fitted without them). */
static void
print_kv(FILE *f, const char *key, const char *value)
{
	if (value[0] == '\0')
		fprintf(f, "%s =\n", key);
	else if (value[0] == ';' || strlen(key) + strlen(" = ") + strlen(value) > LINE_MAX_CHARS)
		fprintf(f, "%s=%s\n", key, value);
	else
		fprintf(f, "%s = %s\n", key, value);
}

void
kvx_config_print(const struct kvx_config *cfg, FILE *f)
{
	char buf[KVX_MAX_PEERS * KVX_CFG_NAME_MAX + 16];
	size_t len;
	int i, n_allowed = 0;

	fprintf(f, "; kvx effective configuration\n\n[node]\n");
	print_kv(f, "name", cfg->name);
	fprintf(f, "listen = %s:%u\n", cfg->listen.host, cfg->listen.port);
	if (cfg->control_cpu < 0)
		fprintf(f, "control_cpu = none\n");
	else
		fprintf(f, "control_cpu = %d\n", cfg->control_cpu);
	fprintf(f, "connect = %s\n", cfg->on_demand ? "on_demand" : "always");

	fprintf(f, "\n[cores]\n");
	if (cfg->poll_cpus_auto) {
		fprintf(f, "poll_cpus = auto\n");
	} else {
		fprintf(f, "poll_cpus = ");
		for (i = 0; i < cfg->n_poll_cpus; i++)
			fprintf(f, "%s%d", i > 0 ? "," : "", cfg->poll_cpus[i]);
		fprintf(f, "\n");
	}
	fprintf(f, "idle_park_us = %" PRIu32 "\n", cfg->idle_park_us);
	print_kv(f, "cpu_claims", cfg->cpu_claims[0] ? cfg->cpu_claims : "none");
	fprintf(f, "connect_workers = %" PRIu32 "\nmr_workers = %" PRIu32 "\n",
		cfg->connect_workers, cfg->mr_workers);

	fprintf(f, "\n[rdma]\n");
	print_kv(f, "device", cfg->device);
	fprintf(f, "port = %u\ngid_index = %u\n", cfg->port, cfg->gid_index);
	fprintf(f, "sq_depth = %" PRIu32 "\nrq_depth = %" PRIu32 "\ncq_depth = %" PRIu32 "\n",
		cfg->sq_depth, cfg->rq_depth, cfg->cq_depth);
	fprintf(f, "mtu = %" PRIu32 "\n", cfg->mtu);
	fprintf(f, "retry_cnt = %u\nrnr_retry = %u\nack_timeout = %u\n", cfg->retry_cnt,
		cfg->rnr_retry, cfg->ack_timeout);
	for (i = 1; i < cfg->n_rails; i++) {
		fprintf(f, "\n[rail.%d]\n", i);
		print_kv(f, "device", cfg->rails[i].device);
		fprintf(f, "port = %u\ngid_index = %u\nmtu = %" PRIu32 "\n", cfg->rails[i].port,
			cfg->rails[i].gid_index, cfg->rails[i].mtu);
	}

	fprintf(f, "\n[engine]\n");
	print_kv(f, "socket", cfg->socket_path);
	fprintf(f, "mode = %04o\n", (unsigned int)cfg->socket_mode);
	print_kv(f, "admin_group", cfg->admin_group);
	buf[0] = '\0';
	len = 0;
	for (i = 0; i < cfg->n_rank_users; i++) { /* never longer than the line it was read from */
		const struct kvx_config_rank_user *u = &cfg->rank_users[i];

		if (u->lo == u->hi)
			len += (size_t)snprintf(buf + len, sizeof(buf) - len, "%s%" PRIu32 ":%s",
						i ? "," : "", u->lo, u->user);
		else
			len += (size_t)snprintf(buf + len, sizeof(buf) - len,
						"%s%" PRIu32 "-%" PRIu32 ":%s", i ? "," : "", u->lo,
						u->hi, u->user);
	}
	print_kv(f, "rank_users", buf);
	fprintf(f, "max_sessions_per_uid = %" PRIu32 "\nmax_pools_per_engine = %" PRIu32 "\n",
		cfg->max_sessions_per_uid, cfg->max_pools_per_engine);
	fprintf(f, "max_pools_per_uid = %" PRIu32 "\n", cfg->max_pools_per_uid);
	fprintf(f, "max_rooms_per_engine = %" PRIu32 "\nmax_rooms_per_uid = %" PRIu32 "\n",
		cfg->max_rooms_per_engine, cfg->max_rooms_per_uid);
	fprintf(f, "max_pinned_mb_per_uid = %" PRIu32 "\n", cfg->max_pinned_mb_per_uid);
	fprintf(f, "max_chunk_mb_per_engine = %" PRIu32 "\n", cfg->max_chunk_mb_per_engine);
	fprintf(f, "reply_queue_kb = %" PRIu32 "\n", cfg->reply_queue_kb);

	fprintf(f, "\n[timeouts]\n");
	fprintf(f, "handshake_ms = %" PRIu32 "\nwaiting_ms = %" PRIu32 "\n", cfg->handshake_ms,
		cfg->waiting_ms);
	fprintf(f, "release_ms = %" PRIu32 "\nheartbeat_ms = %" PRIu32 "\n", cfg->release_ms,
		cfg->heartbeat_ms);
	fprintf(f, "heartbeat_misses = %" PRIu32 "\nidle_ms = %" PRIu32 "\n", cfg->heartbeat_misses,
		cfg->idle_ms);

	fprintf(f, "\n[security]\n");
	buf[0] = '\0';
	len = 0;
	for (i = 0; i < cfg->n_peers; i++) {
		if (!cfg->peers[i].allowed)
			continue;
		n_allowed++;
		len += (size_t)snprintf(buf + len, sizeof(buf) - len, "%s%s", len > 0 ? "," : "",
					cfg->peers[i].name);
		if (len >= sizeof(buf))
			len = sizeof(buf) - 1;
	}
	if (n_allowed > 0 && n_allowed == cfg->n_peers && len + strlen("allow = ") > LINE_MAX_CHARS)
		fprintf(f, "; allow: not set, every [peer.*] may connect (too many to list)\n");
	else
		print_kv(f, "allow", buf);
	print_kv(f, "auth", cfg->auth == KVX_AUTH_NONE ? "none" : "hmac-sha256");
	print_kv(f, "secret_file", cfg->secret_file);
	print_kv(f, "secret_next_file", cfg->secret_next_file);
	fprintf(f, "pending_ms = %" PRIu32 "\npending_max = %" PRIu32 "\n", cfg->pending_ms,
		cfg->pending_max);
	fprintf(f, "pending_per_addr = %" PRIu32 "\n", cfg->pending_per_addr);
	fprintf(f, "max_rooms_per_peer = %" PRIu32 "\nmax_tombstones_per_peer = %" PRIu32 "\n",
		cfg->max_rooms_per_peer, cfg->max_tombstones_per_peer);

	fprintf(f, "\n[debug]\n");
	print_kv(f, "faults", cfg->faults);
	if (cfg->log_level >= 0 && (size_t)cfg->log_level < ARRAY_SIZE(log_level_name))
		fprintf(f, "log_level = %s\n", log_level_name[cfg->log_level]);
	else
		fprintf(f, "; log_level = %d (not a known level)\n", cfg->log_level);

	fprintf(f, "\n[metrics]\n");
	if (cfg->has_metrics)
		fprintf(f, "listen = %s:%u\n", cfg->metrics_listen.host, cfg->metrics_listen.port);
	else
		fprintf(f, "; listen: not set, no metrics endpoint\n");

	fprintf(f, "\n[membership]\n");
	if (cfg->has_etcd) {
		fprintf(f, "etcd = %s:%u\n", cfg->etcd.host, cfg->etcd.port);
		print_kv(f, "prefix", cfg->etcd_prefix);
		fprintf(f, "lease_s = %" PRIu32 "\n", cfg->lease_s);
		if (cfg->has_advertise)
			fprintf(f, "advertise = %s:%u\n", cfg->advertise.host, cfg->advertise.port);
	} else {
		fprintf(f, "; etcd: not set, the [peer.*] sections only\n");
	}

	for (i = 0; i < cfg->n_peers; i++) {
		const struct kvx_config_peer *peer = &cfg->peers[i];

		fprintf(f, "\n[peer.%s]\naddress = %s:%u\n", peer->name, peer->addr.host,
			peer->addr.port);
		if (peer->n_allow_from > 0) {
			fprintf(f, "allow_from = ");
			for (int j = 0; j < peer->n_allow_from; j++) {
				struct in_addr in = {.s_addr = htonl(peer->allow_from[j].addr)};
				char host[INET_ADDRSTRLEN];
				int plen = 0;

				for (uint32_t m = peer->allow_from[j].mask; m; m <<= 1)
					plen++;
				inet_ntop(AF_INET, &in, host, sizeof(host));
				fprintf(f, "%s%s/%d", j ? "," : "", host, plen);
			}
			fprintf(f, "\n");
		}
		if (peer->has_gid) {
			char gid[INET6_ADDRSTRLEN];

			inet_ntop(AF_INET6, peer->gid, gid, sizeof(gid));
			fprintf(f, "gid = %s", gid);
			for (int k = 0; k < peer->n_rail_gid; k++) {
				inet_ntop(AF_INET6, peer->rail_gid[k], gid, sizeof(gid));
				fprintf(f, ",%s", gid);
			}
			fprintf(f, "\n");
		}
	}
}

bool
kvx_config_peer_addr_ok(const struct kvx_config_peer *peer, uint32_t addr)
{
	struct in_addr in;

	if (inet_pton(AF_INET, peer->addr.host, &in) == 1 && ntohl(in.s_addr) == addr)
		return true;
	for (int i = 0; i < peer->n_allow_from; i++)
		if ((addr & peer->allow_from[i].mask) == peer->allow_from[i].addr)
			return true;
	return false;
}

const struct kvx_config_peer *
kvx_config_peer_find(const struct kvx_config *cfg, const char *name)
{
	int i;

	if (cfg == NULL || name == NULL)
		return NULL;
	for (i = 0; i < cfg->n_peers; i++)
		if (strcmp(cfg->peers[i].name, name) == 0)
			return &cfg->peers[i];
	return NULL;
}

bool
kvx_config_name_ok(const char *s)
{
	return s && name_valid(s);
}

int
kvx_config_addr_parse(const char *s, struct kvx_config_addr *addr)
{
	const char *why;

	return addr_parse(s, addr, &why) == 0 ? 0 : -EINVAL;
}

bool
kvx_config_peer_same(const struct kvx_config_peer *a, const struct kvx_config_peer *b)
{
	int i;

	if (strcmp(a->name, b->name) != 0 || strcmp(a->addr.host, b->addr.host) != 0 ||
	    a->addr.port != b->addr.port || a->allowed != b->allowed ||
	    a->n_allow_from != b->n_allow_from || a->has_gid != b->has_gid ||
	    (a->has_gid && memcmp(a->gid, b->gid, sizeof(a->gid)) != 0) ||
	    a->n_rail_gid != b->n_rail_gid ||
	    memcmp(a->rail_gid, b->rail_gid, 16 * (size_t)a->n_rail_gid) != 0)
		return false;
	for (i = 0; i < a->n_allow_from; i++)
		if (a->allow_from[i].addr != b->allow_from[i].addr ||
		    a->allow_from[i].mask != b->allow_from[i].mask)
			return false;
	return true;
}
