/* SPDX-License-Identifier: Apache-2.0 */
/* Unit tests for core/config.c: every INI file is written under a mkdtemp() directory. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>

#include <cmocka.h>

#include "core/config.h"
#include "core/log.h"

#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

static char tmpdir[64];
static int file_no;

/* The smallest valid file: the four required keys, 7 lines.  Text appended starts at line 8. */
#define MIN_INI                    \
	"[node]\n"                 \
	"name = alpha\n"           \
	"listen = 10.0.0.1:7470\n" \
	"[rdma]\n"                 \
	"device = rxe0\n"          \
	"[engine]\n"               \
	"socket = /run/kvx/engine.sock\n"
#define MIN_LINES 7u

static const char full_ini[] = "; a full configuration\n"	      /* 1 */
			       "[node]\n"			      /* 2 */
			       "name = alpha\n"			      /* 3 */
			       "listen = 192.168.1.10:7470\n"	      /* 4 */
			       "control_cpu = 0 ; the control core\n" /* 5 */
			       "\n"				      /* 6 */
			       "[cores]\n"			      /* 7 */
			       "poll_cpus = 2, 3,4\n"		      /* 8 */
			       "idle_park_us = 50\n"		      /* 9 */
			       "[rdma]\n"			      /* 10 */
			       "device = mlx5_0\n"		      /* 11 */
			       "port = 2\n"			      /* 12 */
			       "gid_index = 3\n"		      /* 13 */
			       "sq_depth = 1024\n"		      /* 14 */
			       "rq_depth = 2048\n"		      /* 15 */
			       "cq_depth = 16384\n"		      /* 16 */
			       "mtu = 4096\n"			      /* 17 */
			       "retry_cnt = 5\n"		      /* 18 */
			       "rnr_retry = 4\n"		      /* 19 */
			       "ack_timeout = 14\n"		      /* 20 */
			       "[engine]\n"			      /* 21 */
			       "socket = /run/kvx/alpha.sock\n"	      /* 22 */
			       "mode = 0600\n"			      /* 23 */
			       "[timeouts]\n"			      /* 24 */
			       "handshake_ms = 100\n"		      /* 25 */
			       "waiting_ms = 200\n"		      /* 26 */
			       "release_ms = 300\n"		      /* 27 */
			       "heartbeat_ms = 400\n"		      /* 28 */
			       "[security]\n"			      /* 29 */
			       "allow = gamma\n"		      /* 30 */
			       "secret_file = /etc/kvx/secret\n"      /* 31 */
			       "[debug]\n"			      /* 32 */
			       "faults = wire_send:3, room_alloc:1\n" /* 33 */
			       "log_level = debug\n"		      /* 34 */
			       "# peers\n"			      /* 35 */
			       "[peer.beta]\n"			      /* 36 */
			       "address = 192.168.1.11:7470\n"	      /* 37 */
			       "[peer.gamma]\n"			      /* 38 */
			       "address = 192.168.1.12:7471\n";	      /* 39 */

/* ---- helpers ---- */

static void
write_file(char *path, size_t len, const char *text)
{
	FILE *f;

	snprintf(path, len, "%s/c%03d.ini", tmpdir, file_no++);
	f = fopen(path, "w");
	assert_non_null(f);
	assert_int_equal(fputs(text, f) >= 0, 1);
	assert_int_equal(fclose(f), 0);
}

static void
load_ok(const char *text, struct kvx_config *cfg)
{
	char path[128], err[512] = "";
	int rc;

	write_file(path, sizeof(path), text);
	rc = kvx_config_load(cfg, path, err, sizeof(err));
	if (rc != 0)
		fail_msg("load of %s failed: rc %d, %s", path, rc, err);
}

/* Load text: must fail with -EINVAL, err "PATH:line: ..." containing needle, and leave the
 * caller's struct as it was. */
static void
expect_fail(const char *text, unsigned int line, const char *needle)
{
	struct kvx_config cfg, sentinel;
	char path[128], err[512] = "", prefix[160];
	int rc;

	memset(&sentinel, 0xA5, sizeof(sentinel));
	memcpy(&cfg, &sentinel, sizeof(cfg));
	write_file(path, sizeof(path), text);
	rc = kvx_config_load(&cfg, path, err, sizeof(err));
	if (rc != -EINVAL)
		fail_msg("%s: rc %d, want -EINVAL (err '%s')", path, rc, err);
	snprintf(prefix, sizeof(prefix), "%s:%u: ", path, line);
	if (strncmp(err, prefix, strlen(prefix)) != 0)
		fail_msg("err '%s' does not start with '%s'", err, prefix);
	if (strstr(err, needle) == NULL)
		fail_msg("err '%s' does not contain '%s'", err, needle);
	assert_memory_equal(&cfg, &sentinel, sizeof(cfg));
}

/* A valid file with "kv" added to section sect (the last line of that section); returns the
 * line of kv. */
static unsigned int
with_key(char *text, size_t len, const char *sect, const char *kv)
{
	static const char node[] = "[node]\nname = alpha\nlisten = 10.0.0.1:7470\n";
	static const char rdma[] = "[rdma]\ndevice = rxe0\n";
	static const char engine[] = "[engine]\nsocket = /run/kvx/engine.sock\n";

	if (strcmp(sect, "node") == 0)
		snprintf(text, len, "%s%s%s%s\n", rdma, engine, node, kv);
	else if (strcmp(sect, "rdma") == 0)
		snprintf(text, len, "%s%s%s%s\n", node, engine, rdma, kv);
	else if (strcmp(sect, "engine") == 0)
		snprintf(text, len, "%s%s%s%s\n", node, rdma, engine, kv);
	else {
		snprintf(text, len, "%s[%s]\n%s\n", MIN_INI, sect, kv);
		return MIN_LINES + 2;
	}
	return MIN_LINES + 1;
}

static void
assert_config_equal(const struct kvx_config *a, const struct kvx_config *b)
{
	int i;

	assert_string_equal(a->name, b->name);
	assert_string_equal(a->listen.host, b->listen.host);
	assert_int_equal(a->listen.port, b->listen.port);
	assert_int_equal(a->control_cpu, b->control_cpu);
	assert_int_equal(a->poll_cpus_auto, b->poll_cpus_auto);
	assert_int_equal(a->n_poll_cpus, b->n_poll_cpus);
	for (i = 0; i < a->n_poll_cpus; i++)
		assert_int_equal(a->poll_cpus[i], b->poll_cpus[i]);
	assert_int_equal(a->idle_park_us, b->idle_park_us);
	assert_string_equal(a->cpu_claims, b->cpu_claims);
	assert_int_equal(a->connect_workers, b->connect_workers);
	assert_int_equal(a->mr_workers, b->mr_workers);
	assert_string_equal(a->device, b->device);
	assert_int_equal(a->port, b->port);
	assert_int_equal(a->gid_index, b->gid_index);
	assert_int_equal(a->sq_depth, b->sq_depth);
	assert_int_equal(a->rq_depth, b->rq_depth);
	assert_int_equal(a->cq_depth, b->cq_depth);
	assert_int_equal(a->mtu, b->mtu);
	assert_int_equal(a->retry_cnt, b->retry_cnt);
	assert_int_equal(a->rnr_retry, b->rnr_retry);
	assert_int_equal(a->ack_timeout, b->ack_timeout);
	assert_string_equal(a->socket_path, b->socket_path);
	assert_int_equal(a->socket_mode, b->socket_mode);
	assert_int_equal(a->handshake_ms, b->handshake_ms);
	assert_int_equal(a->waiting_ms, b->waiting_ms);
	assert_int_equal(a->release_ms, b->release_ms);
	assert_int_equal(a->heartbeat_ms, b->heartbeat_ms);
	assert_string_equal(a->secret_file, b->secret_file);
	assert_int_equal(a->n_peers, b->n_peers);
	for (i = 0; i < a->n_peers; i++) {
		assert_string_equal(a->peers[i].name, b->peers[i].name);
		assert_string_equal(a->peers[i].addr.host, b->peers[i].addr.host);
		assert_int_equal(a->peers[i].addr.port, b->peers[i].addr.port);
		assert_int_equal(a->peers[i].allowed, b->peers[i].allowed);
	}
	assert_string_equal(a->faults, b->faults);
	assert_int_equal(a->log_level, b->log_level);
	/* and byte for byte: load zeroes the struct first, so padding and string tails match */
	assert_memory_equal(a, b, sizeof(*a));
}

/* Print cfg, load the output, and compare. */
static void
assert_round_trip(const struct kvx_config *cfg)
{
	struct kvx_config again;
	char path[128], err[512] = "";
	FILE *f;
	int rc;

	snprintf(path, sizeof(path), "%s/print%03d.ini", tmpdir, file_no++);
	f = fopen(path, "w");
	assert_non_null(f);
	kvx_config_print(cfg, f);
	assert_int_equal(fclose(f), 0);
	memset(&again, 0x5A, sizeof(again));
	rc = kvx_config_load(&again, path, err, sizeof(err));
	if (rc != 0)
		fail_msg("reloading the printed %s failed: %s", path, err);
	assert_config_equal(cfg, &again);
}

/* ---- valid files ---- */

static void
test_full_valid(void **state)
{
	struct kvx_config cfg;
	const struct kvx_config_peer *beta, *gamma;

	load_ok(full_ini, &cfg);
	assert_string_equal(cfg.name, "alpha");
	assert_string_equal(cfg.listen.host, "192.168.1.10");
	assert_int_equal(cfg.listen.port, 7470);
	assert_int_equal(cfg.control_cpu, 0);
	assert_false(cfg.poll_cpus_auto);
	assert_int_equal(cfg.n_poll_cpus, 3);
	assert_int_equal(cfg.poll_cpus[0], 2);
	assert_int_equal(cfg.poll_cpus[1], 3);
	assert_int_equal(cfg.poll_cpus[2], 4);
	assert_int_equal(cfg.idle_park_us, 50);
	assert_string_equal(cfg.device, "mlx5_0");
	assert_int_equal(cfg.port, 2);
	assert_int_equal(cfg.gid_index, 3);
	assert_int_equal(cfg.sq_depth, 1024);
	assert_int_equal(cfg.rq_depth, 2048);
	assert_int_equal(cfg.cq_depth, 16384);
	assert_int_equal(cfg.mtu, 4096);
	assert_int_equal(cfg.retry_cnt, 5);
	assert_int_equal(cfg.rnr_retry, 4);
	assert_int_equal(cfg.ack_timeout, 14);
	assert_string_equal(cfg.socket_path, "/run/kvx/alpha.sock");
	assert_int_equal(cfg.socket_mode, 0600);
	assert_int_equal(cfg.handshake_ms, 100);
	assert_int_equal(cfg.waiting_ms, 200);
	assert_int_equal(cfg.release_ms, 300);
	assert_int_equal(cfg.heartbeat_ms, 400);
	assert_string_equal(cfg.secret_file, "/etc/kvx/secret");
	assert_string_equal(cfg.faults, "wire_send:3,room_alloc:1");
	assert_int_equal(cfg.log_level, KVX_LOG_DEBUG);
	assert_int_equal(cfg.n_peers, 2);
	beta = kvx_config_peer_find(&cfg, "beta");
	gamma = kvx_config_peer_find(&cfg, "gamma");
	assert_non_null(beta);
	assert_non_null(gamma);
	assert_string_equal(beta->addr.host, "192.168.1.11");
	assert_int_equal(beta->addr.port, 7470);
	assert_false(beta->allowed);
	assert_string_equal(gamma->addr.host, "192.168.1.12");
	assert_int_equal(gamma->addr.port, 7471);
	assert_true(gamma->allowed);
}

static void
test_defaults(void **state)
{
	struct kvx_config cfg;

	load_ok(MIN_INI "[peer.beta]\naddress = 10.0.0.2:7470\n", &cfg);
	assert_string_equal(cfg.name, "alpha");
	assert_string_equal(cfg.listen.host, "10.0.0.1");
	assert_int_equal(cfg.listen.port, 7470);
	assert_string_equal(cfg.device, "rxe0");
	assert_string_equal(cfg.socket_path, "/run/kvx/engine.sock");
	assert_int_equal(cfg.control_cpu, -1);
	assert_true(cfg.poll_cpus_auto);
	assert_int_equal(cfg.n_poll_cpus, 0);
	assert_int_equal(cfg.idle_park_us, 0);
	assert_int_equal(cfg.connect_workers, 4);
	assert_int_equal(cfg.mr_workers, 4);
	assert_int_equal(cfg.port, 1);
	assert_int_equal(cfg.gid_index, 1);
	assert_int_equal(cfg.sq_depth, 512);
	assert_int_equal(cfg.rq_depth, 512);
	assert_int_equal(cfg.cq_depth, 4096);
	assert_int_equal(cfg.mtu, 1024);
	assert_int_equal(cfg.retry_cnt, 6);
	assert_int_equal(cfg.rnr_retry, 6);
	assert_int_equal(cfg.ack_timeout, 10);
	assert_int_equal(cfg.socket_mode, 0660);
	assert_int_equal(cfg.handshake_ms, 5000);
	assert_int_equal(cfg.waiting_ms, 30000);
	assert_int_equal(cfg.release_ms, 5000);
	assert_int_equal(cfg.heartbeat_ms, 1000);
	assert_string_equal(cfg.secret_file, "");
	assert_string_equal(cfg.faults, "");
	assert_int_equal(cfg.log_level, KVX_LOG_INFO);
	/* no allow key: every peer may connect */
	assert_int_equal(cfg.n_peers, 1);
	assert_true(cfg.peers[0].allowed);
}

/* Indented keys are keys (inih's multi-line values are off), CRLF, a BOM, comments, "key:v". */
static void
test_syntax_variants(void **state)
{
	struct kvx_config cfg;

	load_ok("\xEF\xBB\xBF; comment\r\n"
		"  [node] ; trailing comment\r\n"
		"\tname = alpha\r\n"
		"    listen = 10.0.0.1:7470\r\n"
		"    control_cpu: 3\r\n"
		"[rdma]\n  device = rxe0\n  port = 2\n"
		"[engine]\nsocket = /s.sock\n",
		&cfg);
	assert_string_equal(cfg.name, "alpha");
	assert_string_equal(cfg.listen.host, "10.0.0.1");
	assert_int_equal(cfg.control_cpu, 3);
	assert_string_equal(cfg.device, "rxe0");
	assert_int_equal(cfg.port, 2);
	assert_string_equal(cfg.socket_path, "/s.sock");
}

/* An allow key may come before the peers it names; "allow =" lets nobody in. */
static void
test_allow(void **state)
{
	struct kvx_config cfg;

	load_ok(MIN_INI "[security]\nallow = gamma , beta\n"
			"[peer.beta]\naddress = 10.0.0.2:1\n"
			"[peer.gamma]\naddress = 10.0.0.3:1\n"
			"[peer.delta]\naddress = 10.0.0.4:1\n",
		&cfg);
	assert_true(kvx_config_peer_find(&cfg, "beta")->allowed);
	assert_true(kvx_config_peer_find(&cfg, "gamma")->allowed);
	assert_false(kvx_config_peer_find(&cfg, "delta")->allowed);

	load_ok(MIN_INI "[security]\nallow =\n[peer.beta]\naddress = 10.0.0.2:1\n", &cfg);
	assert_false(cfg.peers[0].allowed);
}

static void
test_limits_accepted(void **state)
{
	struct kvx_config cfg;
	char text[1024], path107[120];

	memset(path107, 'p', 107);
	path107[0] = '/';
	path107[107] = '\0';
	snprintf(text, sizeof(text),
		 "[node]\nname = %s\nlisten = 255.255.255.255:65535\ncontrol_cpu = 1023\n"
		 "[cores]\npoll_cpus = 0,1,2,3,4,5,6,1023\nidle_park_us = 4294967295\n"
		 "connect_workers = 64\nmr_workers = 1\n"
		 "[rdma]\ndevice = rxe0\nport = 255\ngid_index = 0\nsq_depth = 16\nrq_depth = "
		 "32768\ncq_depth = 262144\nmtu = 256\nretry_cnt = 0\nrnr_retry = 6\n"
		 "ack_timeout = 31\n"
		 "[engine]\nsocket = %s\nmode = 0\n"
		 "[timeouts]\nhandshake_ms = 1\nwaiting_ms = 3600000\n",
		 "A-z_0.9-abcdefghijklmnopqrstuvwxyzabcdefghijklmnopqrstuvwxyz012", path107);
	load_ok(text, &cfg);
	assert_int_equal(strlen(cfg.name), 63);
	assert_int_equal(cfg.listen.port, 65535);
	assert_int_equal(cfg.control_cpu, 1023);
	assert_int_equal(cfg.n_poll_cpus, 8);
	assert_int_equal(cfg.poll_cpus[7], 1023);
	assert_int_equal(cfg.idle_park_us, UINT32_MAX);
	assert_int_equal(cfg.connect_workers, 64);
	assert_int_equal(cfg.mr_workers, 1);
	assert_int_equal(cfg.port, 255);
	assert_int_equal(cfg.cq_depth, 262144);
	assert_int_equal(strlen(cfg.socket_path), 107);
	assert_int_equal(cfg.socket_mode, 0);
	assert_int_equal(cfg.waiting_ms, 3600000);
}

static void
test_peer_find(void **state)
{
	struct kvx_config cfg;

	load_ok(full_ini, &cfg);
	assert_ptr_equal(kvx_config_peer_find(&cfg, "beta"), &cfg.peers[0]);
	assert_ptr_equal(kvx_config_peer_find(&cfg, "gamma"), &cfg.peers[1]);
	assert_null(kvx_config_peer_find(&cfg, "alpha"));
	assert_null(kvx_config_peer_find(&cfg, "bet"));
	assert_null(kvx_config_peer_find(&cfg, ""));
	assert_null(kvx_config_peer_find(&cfg, NULL));
}

/* ---- errors: each names its file and line ---- */

static void
test_unknown_section(void **state)
{
	/* a section with no keys at all is still seen */
	expect_fail(MIN_INI "[bogus]\n", MIN_LINES + 1, "[bogus]: unknown section");
	expect_fail(MIN_INI "\n[Node2]\nname = x\n", MIN_LINES + 2, "[Node2]: unknown section");
	expect_fail(MIN_INI "[peer]\n", MIN_LINES + 1, "[peer]: unknown section");
	/* a long section name is reported whole (inih would truncate it to 49 bytes) */
	expect_fail(MIN_INI "[a123456789b123456789c123456789d123456789e123456789f]\n",
		    MIN_LINES + 1, "[a123456789b123456789c123456789d123456789e123456789f]:");
}

static void
test_unknown_key(void **state)
{
	expect_fail(MIN_INI "[cores]\nidle_park_us = 1\nfoo = 1\n", MIN_LINES + 3,
		    "[cores] foo: unknown key");
	expect_fail(MIN_INI "[peer.beta]\naddress = 10.0.0.2:1\nport = 3\n", MIN_LINES + 3,
		    "[peer.beta] port: unknown key");
	/* keys belong to their own section only */
	expect_fail(MIN_INI "[timeouts]\ndevice = rxe1\n", MIN_LINES + 2,
		    "[timeouts] device: unknown key");
	expect_fail("name = alpha\n" MIN_INI, 1, "name: key outside any [section]");
}

static void
test_syntax_error(void **state)
{
	expect_fail(MIN_INI "[cores]\nidle_park_us 5\n", MIN_LINES + 2, "syntax error");
	expect_fail(MIN_INI "[cores\n", MIN_LINES + 1, "section header without ']'");
	expect_fail(MIN_INI "[cores] x\n", MIN_LINES + 1, "text after the section header");
	/* a syntax error before a value error is the one reported */
	expect_fail(MIN_INI "[cores]\njunk\nidle_park_us = x\n", MIN_LINES + 2, "syntax error");
}

static void
test_line_too_long(void **state)
{
	char text[1024];

	snprintf(text, sizeof(text), MIN_INI "[debug]\nfaults = a:1%0*d\nlog_level = warn\n", 250,
		 0);
	expect_fail(text, MIN_LINES + 2, "line too long");
}

/* Found by tests/fuzz/fuzz_config: a NUL byte in the last line silently ended the line. */
static void
test_nul_byte(void **state)
{
	static const char last[] = MIN_INI "[debug]\nlog_level = info\0debug\n";
	static const char no_newline[] = MIN_INI "[debug]\nlog_level = info\0debug";
	static const char middle[] = MIN_INI "[debug]\nlog_level = info\0debug\nfaults =\n";
	const struct {
		const char *text;
		size_t len;
	} cases[] = {
		{last, sizeof(last) - 1},
		{no_newline, sizeof(no_newline) - 1},
		{middle, sizeof(middle) - 1},
	};
	struct kvx_config cfg;
	char path[128], err[512], want[160];
	FILE *f;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		snprintf(path, sizeof(path), "%s/c%03d.ini", tmpdir, file_no++);
		f = fopen(path, "w");
		assert_non_null(f);
		assert_int_equal(fwrite(cases[i].text, 1, cases[i].len, f), cases[i].len);
		assert_int_equal(fclose(f), 0);
		err[0] = '\0';
		assert_int_equal(kvx_config_load(&cfg, path, err, sizeof(err)), -EINVAL);
		snprintf(want, sizeof(want), "%s:%u: line has a NUL byte", path, MIN_LINES + 2);
		assert_string_equal(err, want);
	}
}

static void
test_bad_integer(void **state)
{
	static const char *const bad[] = {"12x", "x", "-1", "+1", "0x10", "1.5", "", "1 2"};
	static const struct {
		const char *sect, *kv, *msg;
	} cases[] = {
		{"node", "control_cpu = one", "[node] control_cpu: 'one' is neither a cpu id nor"},
		{"node", "control_cpu = -1", "[node] control_cpu: '-1' is neither a cpu id nor"},
		{"rdma", "port = 1O", "[rdma] port: '1O' is not an unsigned decimal integer"},
		{"engine", "mode = 0680", "[engine] mode: '0680' is not an octal mode"},
		{"engine", "mode = rw", "[engine] mode: 'rw' is not an octal mode"},
		{"debug", "log_level = verbose", "[debug] log_level: 'verbose' is not one of"},
		{"debug", "faults = a:1,b", "[debug] faults: entry 2 'b' is not name:N"},
		{"debug", "faults = a:-1", "[debug] faults: entry 1: '-1' is not a count"},
		{"debug", "faults = a b:1", "[debug] faults: entry 1: 'a b' is not a fault point"},
	};
	char text[512], kv[64], msg[128];
	unsigned int line;
	size_t i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(msg, sizeof(msg), "[cores] idle_park_us: '%s' is not an unsigned decimal",
			 bad[i]);
		snprintf(kv, sizeof(kv), "idle_park_us = %s", bad[i]);
		line = with_key(text, sizeof(text), "cores", kv);
		expect_fail(text, line, msg);
	}
	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		line = with_key(text, sizeof(text), cases[i].sect, cases[i].kv);
		expect_fail(text, line, cases[i].msg);
	}
}

static void
test_out_of_range(void **state)
{
	static const struct {
		const char *sect, *kv, *msg;
	} cases[] = {
		{"rdma", "retry_cnt = 7",
		 "[rdma] retry_cnt: 7 is out of range 0..6 (rxe treats 7 "
		 "as infinite retry)"},
		{"rdma", "rnr_retry = 7", "[rdma] rnr_retry: 7 is out of range 0..6 (rxe treats 7"},
		{"rdma", "port = 0", "[rdma] port: 0 is out of range 1..255"},
		{"rdma", "port = 256", "out of range 1..255"},
		{"rdma", "gid_index = 256", "[rdma] gid_index: 256 is out of range 0..255"},
		{"rdma", "sq_depth = 15", "[rdma] sq_depth: 15 is out of range 16..32768"},
		{"rdma", "rq_depth = 32769", "[rdma] rq_depth: 32769 is out of range 16..32768"},
		{"rdma", "cq_depth = 63", "out of range 64..262144"},
		{"rdma", "cq_depth = 262145", "out of range 64..262144"},
		{"rdma", "ack_timeout = 0", "[rdma] ack_timeout: 0 is out of range 1..31"},
		{"rdma", "ack_timeout = 32", "out of range 1..31"},
		{"rdma", "mtu = 1000", "[rdma] mtu: '1000' is not one of 256, 512"},
		{"rdma", "mtu = 8192", "is not one of"},
		{"timeouts", "handshake_ms = 0", "[timeouts] handshake_ms: 0 is out of range"},
		{"timeouts", "waiting_ms = 3600001", "out of range 1..3600000"},
		{"timeouts", "release_ms = 0",
		 "[timeouts] release_ms: 0 is out of range 1..3600000"},
		{"timeouts", "heartbeat_ms = 99999999999999999999999", "out of range 1..3600000"},
		{"cores", "idle_park_us = 4294967296", "out of range 0..4294967295"},
		{"cores", "connect_workers = 0",
		 "[cores] connect_workers: 0 is out of range 1..64"},
		{"cores", "connect_workers = 65", "out of range 1..64"},
		{"cores", "mr_workers = 0", "[cores] mr_workers: 0 is out of range 1..64"},
		{"cores", "mr_workers = 65", "out of range 1..64"},
		{"engine", "mode = 01000", "[engine] mode: 01000 is out of range 0..0777"},
		{"engine", "mode = 0666", "[engine] mode: 0666 gives every user access"},
		{"engine", "mode = 0661", "world bits set"},
		{"engine", "max_sessions_per_uid = 0", "out of range 1..1024"},
		{"engine", "reply_queue_kb = 63", "out of range 64..65536"},
		{"security", "pending_max = 0", "[security] pending_max: 0 is out of range"},
		{"security", "auth = maybe", "[security] auth: 'maybe' is not one of"},
		{"node", "control_cpu = 1024", "[node] control_cpu: cpu 1024 is out of range"},
	};
	char text[512];
	unsigned int line;
	size_t i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		line = with_key(text, sizeof(text), cases[i].sect, cases[i].kv);
		expect_fail(text, line, cases[i].msg);
	}
}

static void
test_duplicate_key(void **state)
{
	expect_fail(MIN_INI "[cores]\nidle_park_us = 1\n\nidle_park_us = 2\n", MIN_LINES + 4,
		    "[cores] idle_park_us: duplicate key (first at line 9)");
	/* an indented line is a duplicate, not a continuation of the previous value */
	expect_fail(MIN_INI "[debug]\nfaults = a:1\n  faults = b:2\n", MIN_LINES + 3,
		    "[debug] faults: duplicate key");
	expect_fail(MIN_INI "[peer.b]\naddress = 10.0.0.2:1\naddress = 10.0.0.2:1\n", MIN_LINES + 3,
		    "[peer.b] address: duplicate key (first at line 9)");
	expect_fail(MIN_INI "[peer.b]\naddress = 10.0.0.2:1\n[peer.c]\naddress = 10.0.0.3:1\n"
			    "[peer.b]\naddress = 10.0.0.4:1\n",
		    MIN_LINES + 5, "[peer.b]: peer repeated (first at line 8)");
	expect_fail(MIN_INI "[rdma]\nport = 2\n", MIN_LINES + 1,
		    "[rdma]: section repeated (first at line 4)");
}

static void
test_missing_required(void **state)
{
	static const struct {
		const char *drop, *msg;
	} cases[] = {
		{"name = alpha\n", "[node] name: required key missing"},
		{"listen = 10.0.0.1:7470\n", "[node] listen: required key missing"},
		{"device = rxe0\n", "[rdma] device: required key missing"},
		{"socket = /run/kvx/engine.sock\n", "[engine] socket: required key missing"},
	};
	char text[512];
	const char *at;
	size_t i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		at = strstr(MIN_INI, cases[i].drop);
		assert_non_null(at);
		snprintf(text, sizeof(text), "%.*s%s", (int)(at - MIN_INI), MIN_INI,
			 at + strlen(cases[i].drop));
		expect_fail(text, 0, cases[i].msg);
	}
	/* a whole section missing */
	expect_fail("[node]\nname = alpha\nlisten = 10.0.0.1:7470\n[engine]\nsocket = /s\n", 0,
		    "[rdma] device: required key missing");
	expect_fail("", 0, "[node] name: required key missing");
	/* a peer without its address (its section has no keys at all) */
	expect_fail(MIN_INI "[peer.b]\naddress = 10.0.0.2:1\n[peer.c]\n", 0,
		    "[peer.c] address: required key missing");
}

static void
test_bad_address(void **state)
{
	static const char *const bad[] = {
		"10.0.0.1",
		"10.0.0.256:1",
		"10.0.0.1:0",
		"10.0.0.1:65536",
		"host:1",
		"10.0.0.1:",
		":7470",
		"10.0.0.1:7x",
		"10.0.1:7470",
		"010.0.0.1:7470",
		"::1:7470",
		"10.0.0.1:-1",
		"",
		" :1",
	};
	char text[512];
	size_t i;

	for (i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(text, sizeof(text),
			 "[node]\nname = alpha\nlisten = %s\n[rdma]\ndevice = rxe0\n[engine]\n"
			 "socket = /s\n",
			 bad[i]);
		expect_fail(text, 3, "[node] listen: bad address");
		snprintf(text, sizeof(text), MIN_INI "[peer.b]\naddress = %s\n", bad[i]);
		expect_fail(text, MIN_LINES + 2, "[peer.b] address: bad address");
	}
}

static void
test_bad_poll_cpus(void **state)
{
	static const struct {
		const char *v, *msg;
	} cases[] = {
		{"1,,2", "empty entry 2"},
		{"1,2,", "empty entry 3"},
		{"", "empty entry 1"},
		{"1,2,1", "cpu 1 is listed twice"},
		{"2, 2", "cpu 2 is listed twice"},
		{"a", "'a' is not a cpu id"},
		{"auto,1", "'auto' is not a cpu id"},
		{"-1", "'-1' is not a cpu id"},
		{"1-3", "'1-3' is not a cpu id"},
		{"1024", "cpu 1024 is out of range 0..1023"},
		{"0,1,2,3,4,5,6,7,8", "more than 8 cpus"},
	};
	char text[512];
	size_t i;

	for (i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		snprintf(text, sizeof(text), MIN_INI "[cores]\npoll_cpus = %s\n", cases[i].v);
		expect_fail(text, MIN_LINES + 2, "[cores] poll_cpus: ");
		expect_fail(text, MIN_LINES + 2, cases[i].msg);
	}
}

/* [cores] cpu_claims: an absolute directory, "none" (no claims), default /run/kvx. */
static void
test_cpu_claims(void **state)
{
	struct kvx_config cfg;
	char text[512], long_path[150];

	(void)state;
	load_ok(MIN_INI, &cfg);
	assert_string_equal(cfg.cpu_claims, "/run/kvx");
	load_ok(MIN_INI "[cores]\ncpu_claims = none\n", &cfg);
	assert_string_equal(cfg.cpu_claims, "");
	load_ok(MIN_INI "[cores]\ncpu_claims = /var/run/kvx-claims\n", &cfg);
	assert_string_equal(cfg.cpu_claims, "/var/run/kvx-claims");
	expect_fail(MIN_INI "[cores]\ncpu_claims = run/kvx\n", MIN_LINES + 2,
		    "[cores] cpu_claims: 'run/kvx' is neither an absolute path nor \"none\"");
	expect_fail(MIN_INI "[cores]\ncpu_claims =\n", MIN_LINES + 2, "[cores] cpu_claims: ");
	memset(long_path, 'a', sizeof(long_path) - 1);
	long_path[0] = '/';
	long_path[sizeof(long_path) - 1] = '\0';
	snprintf(text, sizeof(text), MIN_INI "[cores]\ncpu_claims = %s\n", long_path);
	expect_fail(text, MIN_LINES + 2, "path is 149 bytes, at most 107 allowed");
}

static void
test_bad_names(void **state)
{
	char text[512];

	expect_fail("[node]\nname = al pha\n", 2, "[node] name: 'al pha' is not a name");
	expect_fail("[node]\nname = a/b\n", 2, "is not a name");
	snprintf(text, sizeof(text), "[node]\nname = %064d\n", 0);
	expect_fail(text, 2, "is not a name");
	expect_fail("[node]\nname =\n", 2, "[node] name: '' is not a name");
	expect_fail("[rdma]\ndevice = rxe 0\n", 2, "[rdma] device: 'rxe 0' is not a name");
	expect_fail(MIN_INI "[peer.]\n", MIN_LINES + 1, "[peer.]: '' is not a peer name");
	expect_fail(MIN_INI "[peer.a b]\n", MIN_LINES + 1, "'a b' is not a peer name");
}

static void
test_bad_paths(void **state)
{
	char text[1024], longpath[300];

	memset(longpath, 'p', 108);
	longpath[0] = '/';
	longpath[108] = '\0';
	snprintf(text, sizeof(text),
		 "[node]\nname = alpha\nlisten = 10.0.0.1:7470\n[rdma]\ndevice = rxe0\n[engine]\n"
		 "socket = %s\n",
		 longpath);
	expect_fail(text, 7, "[engine] socket: path is 108 bytes, at most 107 allowed");
	expect_fail("[engine]\nsocket =\n", 2, "[engine] socket: empty path");
}

static void
test_too_many_peers(void **state)
{
	static char text[64 * 1024];
	char msg[64];
	size_t len;
	int i;

	len = (size_t)snprintf(text, sizeof(text), "%s", MIN_INI);
	for (i = 0; i <= KVX_MAX_PEERS; i++)
		len += (size_t)snprintf(text + len, sizeof(text) - len,
					"[peer.p%d]\naddress = 10.0.%d.%d:7470\n", i, 1 + i / 200,
					1 + i % 200);
	assert_true(len < sizeof(text));
	/* peer i's header is at line MIN_LINES + 2i + 1: the one past the last is refused */
	snprintf(msg, sizeof(msg), "[peer.p%d]: too many peers (at most %d)", KVX_MAX_PEERS,
		 KVX_MAX_PEERS);
	expect_fail(text, MIN_LINES + 2 * KVX_MAX_PEERS + 1, msg);
}

static void
test_self_as_peer(void **state)
{
	expect_fail(MIN_INI "[peer.beta]\naddress = 10.0.0.2:1\n\n[peer.alpha]\n"
			    "address = 10.0.0.1:7470\n",
		    MIN_LINES + 4, "[peer.alpha]: this is the node's own name");
	/* also when [node] comes after the peers */
	expect_fail("[peer.alpha]\naddress = 10.0.0.1:7470\n" MIN_INI, 1,
		    "[peer.alpha]: this is the node's own name");
}

static void
test_allow_unknown_peer(void **state)
{
	expect_fail(MIN_INI "[peer.beta]\naddress = 10.0.0.2:1\n[security]\nallow = beta, zz\n",
		    MIN_LINES + 4, "[security] allow: 'zz' is not a configured [peer.*]");
	expect_fail(MIN_INI "[security]\nallow = alpha\n", MIN_LINES + 2,
		    "'alpha' is not a configured [peer.*]");
	expect_fail(MIN_INI "[security]\nallow = beta,beta\n[peer.beta]\naddress = 10.0.0.2:1\n",
		    MIN_LINES + 2, "[security] allow: 'beta' is listed twice");
	expect_fail(MIN_INI "[security]\nallow = beta,\n[peer.beta]\naddress = 10.0.0.2:1\n",
		    MIN_LINES + 2, "[security] allow: empty entry");
}

/* Only the first error is reported, and the struct is untouched even when most of the file
 * was parsed before it (the sentinel check in expect_fail covers every error test). */
/* The peer's network identity: allow_from ranges and an exact GID; the security cross-checks. */
static void
test_peer_identity(void **state)
{
	struct kvx_config cfg;
	char text[1024];

	(void)state;
	load_ok(MIN_INI "[peer.b]\naddress = 10.0.0.2:7470\nallow_from = 10.1.0.0/16, 10.2.3.4\n"
			"gid = ::ffff:10.0.0.2\n",
		&cfg);
	assert_int_equal(cfg.peers[0].n_allow_from, 2);
	assert_true(kvx_config_peer_addr_ok(&cfg.peers[0], 0x0a000002));  /* its address */
	assert_true(kvx_config_peer_addr_ok(&cfg.peers[0], 0x0a01fffe));  /* in 10.1/16 */
	assert_true(kvx_config_peer_addr_ok(&cfg.peers[0], 0x0a020304));  /* the /32 */
	assert_false(kvx_config_peer_addr_ok(&cfg.peers[0], 0x0a020305)); /* next to it */
	assert_false(kvx_config_peer_addr_ok(&cfg.peers[0], 0x0a000003));
	assert_true(cfg.peers[0].has_gid);
	assert_int_equal(cfg.peers[0].gid[10], 0xff);
	assert_int_equal(cfg.peers[0].gid[15], 2);
	assert_int_equal(cfg.auth, KVX_AUTH_HMAC_SHA256); /* the default */

	expect_fail(MIN_INI "[peer.b]\naddress = 10.0.0.2:7470\nallow_from = 10.1.0.0/33\n",
		    MIN_LINES + 3, "[peer.b] allow_from: entry 1");
	expect_fail(MIN_INI "[peer.b]\naddress = 10.0.0.2:7470\nallow_from = 1.1.1.1,,\n",
		    MIN_LINES + 3, "entry 2");
	expect_fail(MIN_INI "[peer.b]\naddress = 10.0.0.2:7470\n"
			    "allow_from = 1.0.0.1,1.0.0.2,1.0.0.3,1.0.0.4,1.0.0.5,1.0.0.6,1.0.0.7,"
			    "1.0.0.8,1.0.0.9\n",
		    MIN_LINES + 3, "more than 8 entries");
	expect_fail(MIN_INI "[peer.b]\naddress = 10.0.0.2:7470\ngid = fe80::zz\n", MIN_LINES + 3,
		    "[peer.b] gid: 'fe80::zz' is not a GID");
	expect_fail(MIN_INI "[peer.b]\naddress = 10.0.0.2:7470\ngid = ::1\ngid = ::2\n",
		    MIN_LINES + 4, "duplicate key (first at line 10)");
	snprintf(text, sizeof(text), "%s[security]\nauth = none\nsecret_file = /x\n", MIN_INI);
	expect_fail(text, MIN_LINES + 2, "\"none\" with a secret file set");
	snprintf(text, sizeof(text), "%s[security]\nsecret_next_file = /x\n", MIN_INI);
	expect_fail(text, MIN_LINES + 2, "secret_next_file: set without secret_file");
	snprintf(text, sizeof(text), "%s[security]\npending_max = 4\npending_per_addr = 5\n",
		 MIN_INI);
	expect_fail(text, MIN_LINES + 3, "pending_per_addr: 5 is over pending_max (4)");
}

/* The CQ holds what its QPs can produce: 2 sessions x peers x (sq + rq). */
static void
test_cq_depth_sized_from_qps(void **state)
{
	struct kvx_config cfg;

	(void)state;
	load_ok(MIN_INI "[peer.b]\naddress = 10.0.0.2:7470\n", &cfg);
	assert_int_equal(cfg.cq_depth, 4096); /* 2 x 1 x 1024 is less than the floor */
	load_ok("[node]\nname = a\nlisten = 10.0.0.1:1\n[rdma]\ndevice = d\nsq_depth = 4096\n"
		"rq_depth = 1024\n[engine]\nsocket = /s\n[peer.b]\naddress = 10.0.0.2:1\n"
		"[peer.c]\naddress = 10.0.0.3:1\n",
		&cfg);
	assert_int_equal(cfg.cq_depth, 2 * 2 * (4096 + 1024));
	expect_fail("[node]\nname = a\nlisten = 10.0.0.1:1\n[rdma]\ndevice = d\ncq_depth = 4095\n"
		    "[engine]\nsocket = /s\n[peer.b]\naddress = 10.0.0.2:1\n[peer.c]\n"
		    "address = 10.0.0.3:1\n[peer.d]\naddress = 10.0.0.4:1\n",
		    6, "[rdma] cq_depth: 4095 is less than the 6144 completions");
	expect_fail("[node]\nname = a\nlisten = 10.0.0.1:1\n[rdma]\ndevice = d\nsq_depth = 32768\n"
		    "rq_depth = 32768\n[engine]\nsocket = /s\n[peer.b]\naddress = 10.0.0.2:1\n"
		    "[peer.c]\naddress = 10.0.0.3:1\n[peer.d]\naddress = 10.0.0.4:1\n",
		    0, "need 393216 CQ entries, more than 262144");
}

static void
test_untouched_on_error(void **state)
{
	struct kvx_config cfg, before;
	char path[128], err[512] = "";
	char text[2048];

	load_ok(full_ini, &before);
	memcpy(&cfg, &before, sizeof(cfg));
	snprintf(text, sizeof(text), "%s[cores2]\n", full_ini);
	write_file(path, sizeof(path), text);
	assert_int_equal(kvx_config_load(&cfg, path, err, sizeof(err)), -EINVAL);
	assert_non_null(strstr(err, ":40: [cores2]: unknown section"));
	assert_memory_equal(&cfg, &before, sizeof(cfg));

	/* a NULL or short err buffer is allowed */
	assert_int_equal(kvx_config_load(&cfg, path, NULL, 0), -EINVAL);
	assert_int_equal(kvx_config_load(&cfg, path, err, 8), -EINVAL);
	assert_int_equal(strlen(err), 7);
	assert_memory_equal(&cfg, &before, sizeof(cfg));
}

static void
test_print_round_trip(void **state)
{
	struct kvx_config cfg;
	static char text[64 * 1024];
	size_t len;
	int i;

	load_ok(full_ini, &cfg);
	assert_round_trip(&cfg);

	load_ok(MIN_INI, &cfg);
	assert_round_trip(&cfg);

	/* every peer allowed by default, "allow =" (nobody), some peers */
	load_ok(MIN_INI "[peer.b]\naddress = 10.0.0.2:1\n[peer.c]\naddress = 10.0.0.3:2\n", &cfg);
	assert_round_trip(&cfg);
	load_ok(MIN_INI "[security]\nallow=\n[peer.b]\naddress = 10.0.0.2:1\n", &cfg);
	assert_round_trip(&cfg);

	/* KVX_MAX_PEERS peers with long names, all allowed: too long for one allow line, still the
	 * same */
	/* (queue depths that let every peer's QPs fit the CQs at once) */
	len = (size_t)snprintf(
		text, sizeof(text), "%s",
		"[node]\nname = alpha\nlisten = 10.0.0.1:7470\n[rdma]\ndevice = rxe0\n"
		"sq_depth = 64\nrq_depth = 64\n[engine]\nsocket = /run/kvx/engine.sock\n");
	for (i = 0; i < KVX_MAX_PEERS; i++)
		len += (size_t)snprintf(text + len, sizeof(text) - len,
					"[peer.node-rack1-host%03d]\naddress = 10.0.%d.%d:7470\n",
					i, 1 + i / 200, 1 + i % 200);
	load_ok(text, &cfg);
	assert_int_equal(cfg.n_peers, KVX_MAX_PEERS);
	assert_round_trip(&cfg);
}

/* Found by tests/fuzz/fuzz_config: values that "key = value" would not load back. */
static void
test_print_round_trip_edges(void **state)
{
	struct kvx_config cfg;
	char text[1024], path[200];

	/* a value starting with ';' right after '=' is a value; after a blank, a comment */
	load_ok(MIN_INI "[security]\nsecret_file =;not-a-comment\n", &cfg);
	assert_string_equal(cfg.secret_file, ";not-a-comment");
	assert_round_trip(&cfg);

	/* a line that fits without the blanks around '=' but not with them */
	memset(path, 'p', 185);
	path[0] = '/';
	path[185] = '\0';
	snprintf(text, sizeof(text), "%s[security]\nsecret_file=%s\n", MIN_INI, path);
	load_ok(text, &cfg);
	assert_string_equal(cfg.secret_file, path);
	assert_round_trip(&cfg);
}

/* The printed text itself: every key, defaults included. */
static void
test_print_every_key(void **state)
{
	static const char *const keys[] = {
		"[node]\n",
		"name = alpha\n",
		"listen = 10.0.0.1:7470\n",
		"control_cpu = none\n",
		"connect = always\n",
		"[cores]\n",
		"poll_cpus = auto\n",
		"idle_park_us = 0\n",
		"[rdma]\n",
		"device = rxe0\n",
		"port = 1\n",
		"gid_index = 1\n",
		"sq_depth = 512\n",
		"rq_depth = 512\n",
		"cq_depth = 4096\n",
		"mtu = 1024\n",
		"retry_cnt = 6\n",
		"rnr_retry = 6\n",
		"ack_timeout = 10\n",
		"[engine]\n",
		"socket = /run/kvx/engine.sock\n",
		"mode = 0660\n",
		"admin_group =\n",
		"rank_users =\n",
		"max_sessions_per_uid = 16\n",
		"max_pools_per_engine = 16\n",
		"max_pools_per_uid = 128\n",
		"max_rooms_per_engine = 65536\n",
		"max_rooms_per_uid = 131072\n",
		"max_pinned_mb_per_uid = 65536\n",
		"max_chunk_mb_per_engine = 256\n",
		"reply_queue_kb = 1024\n",
		"[timeouts]\n",
		"handshake_ms = 5000\n",
		"waiting_ms = 30000\n",
		"release_ms = 5000\n",
		"heartbeat_ms = 1000\n",
		"heartbeat_misses = 3\n",
		"idle_ms = 60000\n",
		"[security]\n",
		"allow = b\n",
		"auth = hmac-sha256\n",
		"secret_file =\n",
		"secret_next_file =\n",
		"pending_ms = 2000\n",
		"pending_max = 64\n",
		"pending_per_addr = 8\n",
		"max_rooms_per_peer = 65536\n",
		"max_tombstones_per_peer = 4096\n",
		"[debug]\n",
		"faults =\n",
		"log_level = info\n",
		"[metrics]\n",
		"[peer.b]\naddress = 10.0.0.2:1\n",
	};
	struct kvx_config cfg;
	char buf[4096];
	size_t i, n;
	FILE *f;

	load_ok(MIN_INI "[peer.b]\naddress = 10.0.0.2:1\n", &cfg);
	f = fmemopen(buf, sizeof(buf), "w");
	assert_non_null(f);
	kvx_config_print(&cfg, f);
	n = (size_t)ftell(f);
	fclose(f);
	buf[n < sizeof(buf) ? n : sizeof(buf) - 1] = '\0';
	for (i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
		if (strstr(buf, keys[i]) == NULL)
			fail_msg("printed config lacks '%s':\n%s", keys[i], buf);
}

/* [engine] rank_users: RANKS:USER entries, RANKS one rank or LO-HI; ranges never meet; the
 * printed form loads back. */
static void
test_rank_users(void **state)
{
	static const struct {
		const char *v, *msg;
	} bad[] = {
		{"0", "entry 1 '0' is not RANKS:USER"},
		{"0:alice, 1", "entry 2 '1' is not RANKS:USER"},
		{"x:alice", "entry 1: 'x' is not a rank or a range LO-HI of 0..65535"},
		{"65536:alice", "'65536' is not a rank"},
		{"3-1:alice", "'3-1' is not a rank"},
		{"1-:alice", "'1-' is not a rank"},
		{"-1:alice", "'-1' is not a rank"},
		{"0:", "entry 1: '' is not a user name or uid"},
		{"0:al ice", "'al ice' is not a user name or uid"},
		{"0-7:alice, 7:bob", "entry 2: ranks 7-7 meet entry 1's 0-7"},
		{"4:bob, 0-9:alice", "entry 2: ranks 0-9 meet entry 1's 4-4"},
		{"0:a,1:a,2:a,3:a,4:a,5:a,6:a,7:a,8:a,9:a,10:a,11:a,12:a,13:a,14:a,15:a,16:a",
		 "more than 16 entries"},
	};
	struct kvx_config cfg;
	char text[512];
	unsigned int line;

	(void)state;
	load_ok(MIN_INI, &cfg);
	assert_int_equal(cfg.n_rank_users, 0);
	load_ok(MIN_INI "rank_users =\n", &cfg);
	assert_int_equal(cfg.n_rank_users, 0);
	load_ok(MIN_INI "rank_users = 0-7:alice, 8:1001 ,65535:b.c-d_e\n", &cfg);
	assert_int_equal(cfg.n_rank_users, 3);
	assert_int_equal(cfg.rank_users[0].lo, 0);
	assert_int_equal(cfg.rank_users[0].hi, 7);
	assert_string_equal(cfg.rank_users[0].user, "alice");
	assert_int_equal(cfg.rank_users[1].lo, 8);
	assert_int_equal(cfg.rank_users[1].hi, 8);
	assert_string_equal(cfg.rank_users[1].user, "1001");
	assert_int_equal(cfg.rank_users[2].lo, 65535);
	assert_int_equal(cfg.rank_users[2].hi, 65535);
	assert_string_equal(cfg.rank_users[2].user, "b.c-d_e");
	assert_round_trip(&cfg);
	load_ok(MIN_INI "rank_users=0:a,1:a,2:a,3:a,4:a,5:a,6:a,7:a,8:a,9:a,10:a,11:a,12:a,13:a,"
			"14:a,15:a\n",
		&cfg);
	assert_int_equal(cfg.n_rank_users, KVX_CFG_RANK_USERS_MAX);
	assert_round_trip(&cfg);
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		line = with_key(text, sizeof(text), "engine", "");
		snprintf(text + strlen(text) - 1, sizeof(text) - strlen(text) + 1,
			 "rank_users = %s\n", bad[i].v);
		expect_fail(text, line, "[engine] rank_users: ");
		expect_fail(text, line, bad[i].msg);
	}
}

static void
test_unreadable(void **state)
{
	struct kvx_config cfg, sentinel;
	char path[128], err[512] = "";

	memset(&sentinel, 0xA5, sizeof(sentinel));
	memcpy(&cfg, &sentinel, sizeof(cfg));
	snprintf(path, sizeof(path), "%s/does-not-exist.ini", tmpdir);
	assert_int_equal(kvx_config_load(&cfg, path, err, sizeof(err)), -ENOENT);
	assert_non_null(strstr(err, path));
	assert_memory_equal(&cfg, &sentinel, sizeof(cfg));

	/* a directory opens but cannot be read */
	assert_int_equal(kvx_config_load(&cfg, tmpdir, err, sizeof(err)), -EISDIR);
	assert_memory_equal(&cfg, &sentinel, sizeof(cfg));

	if (geteuid() != 0) { /* root reads a mode-000 file anyway */
		write_file(path, sizeof(path), MIN_INI);
		assert_int_equal(chmod(path, 0), 0);
		assert_int_equal(kvx_config_load(&cfg, path, err, sizeof(err)), -EACCES);
		assert_memory_equal(&cfg, &sentinel, sizeof(cfg));
	}
}

/* The shipped example loads. */
static void
test_example_loads(void **state)
{
	const char *src = getenv("KVX_TEST_SRCDIR");
	struct kvx_config cfg;
	char path[512], err[512] = "";
	int rc;

	if (src == NULL)
		skip();
	snprintf(path, sizeof(path), "%s/configs/example.ini", src);
	rc = kvx_config_load(&cfg, path, err, sizeof(err));
	if (rc != 0)
		fail_msg("%s", err);
	assert_round_trip(&cfg);
}

/* [metrics] listen: the Prometheus endpoint's address, optional, with file:line errors. */
static void
test_metrics_listen(void **state)
{
	static const char *const bad[] = {"9100", "10.0.0.1:0", "localhost:9100", "10.0.0.1:", ""};
	struct kvx_config cfg;
	char text[512];

	load_ok(MIN_INI, &cfg);
	assert_false(cfg.has_metrics); /* absent: no endpoint */
	load_ok(MIN_INI "[metrics]\nlisten = 127.0.0.1:9470\n", &cfg);
	assert_true(cfg.has_metrics);
	assert_string_equal(cfg.metrics_listen.host, "127.0.0.1");
	assert_int_equal(cfg.metrics_listen.port, 9470);
	assert_round_trip(&cfg);
	/* the node's own port on another address is fine */
	load_ok(MIN_INI "[metrics]\nlisten = 127.0.0.1:7470\n", &cfg);
	assert_true(cfg.has_metrics);
	/* a section without the key: no endpoint */
	load_ok(MIN_INI "[metrics]\n; nothing\n", &cfg);
	assert_false(cfg.has_metrics);

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		snprintf(text, sizeof(text), MIN_INI "[metrics]\nlisten = %s\n", bad[i]);
		expect_fail(text, MIN_LINES + 2, "[metrics] listen: bad address");
	}
	expect_fail(MIN_INI "[metrics]\nlisten = 127.0.0.1:9470\nlisten = 127.0.0.1:9471\n",
		    MIN_LINES + 3, "[metrics] listen: duplicate key (first at line 9)");
	expect_fail(MIN_INI "[metrics]\nport = 9470\n", MIN_LINES + 2,
		    "[metrics] port: unknown key");
	expect_fail(MIN_INI "[metrics]\nlisten = 127.0.0.1:9470\n[metrics]\n", MIN_LINES + 3,
		    "[metrics]: section repeated (first at line 8)");
	/* the [node] listen address itself, or the same port on a wildcard address */
	expect_fail(MIN_INI "[metrics]\nlisten = 10.0.0.1:7470\n", MIN_LINES + 2,
		    "[metrics] listen: 10.0.0.1:7470 is the [node] listen address (line 3)");
	expect_fail(MIN_INI "[metrics]\nlisten = 0.0.0.0:7470\n", MIN_LINES + 2,
		    "[metrics] listen: 0.0.0.0:7470 is the [node] listen address");
}

/* [membership]: etcd, prefix, lease_s, advertise, with file:line errors. */
/* [node] connect and [timeouts] idle_ms: sessions on demand, closed when idle. */
#define CONNECT_INI(connect)                                                            \
	"[node]\nname = alpha\nlisten = 10.0.0.1:7470\nconnect = " connect "\n[rdma]\n" \
	"device = rxe0\n[engine]\nsocket = /run/kvx/engine.sock\n"

#define DEPTHS_INI(connect, depth, more)                                                \
	"[node]\nname = alpha\nlisten = 10.0.0.1:7470\nconnect = " connect "\n[rdma]\n" \
	"device = rxe0\nsq_depth = " depth "\nrq_depth = " depth "\n" more "[engine]\n" \
	"socket = /run/kvx/engine.sock\n"
#define PEERS_3                                                                            \
	"[peer.b]\naddress = 10.0.0.2:7470\n[peer.c]\naddress = 10.0.0.3:7470\n[peer.d]\n" \
	"address = 10.0.0.4:7470\n"

static void
test_connect_on_demand(void **state)
{
	struct kvx_config cfg;

	(void)state;
	load_ok(MIN_INI, &cfg);
	assert_false(cfg.on_demand); /* absent: every session set up at start and kept */
	assert_int_equal(cfg.idle_ms, 60000);
	load_ok(CONNECT_INI("on_demand") "[timeouts]\nidle_ms = 0\n", &cfg);
	assert_true(cfg.on_demand);
	assert_int_equal(cfg.idle_ms, 0);
	assert_round_trip(&cfg);
	load_ok(CONNECT_INI("always") "[timeouts]\nidle_ms = 86400000\n", &cfg);
	assert_false(cfg.on_demand);
	assert_int_equal(cfg.idle_ms, 86400000);
	assert_round_trip(&cfg);
	expect_fail(CONNECT_INI("lazy"), 4,
		    "[node] connect: 'lazy' is not one of always, on_demand");
	expect_fail(MIN_INI "[timeouts]\nidle_ms = 86400001\n", MIN_LINES + 2,
		    "[timeouts] idle_ms: ");
	/* on_demand: the CQs bound the sessions up at once, not the peers: no refusal for queue
	 * depths whose every peer at once would not fit; at least one session and its replacement
	 */
	load_ok(DEPTHS_INI("on_demand", "32768", "") PEERS_3, &cfg);
	assert_int_equal(cfg.cq_depth, 262144);
	expect_fail(DEPTHS_INI("always", "32768", "") PEERS_3, 0,
		    "[rdma] cq_depth: 3 peers x (sq_depth 32768 + rq_depth 32768) x 2 need");
	expect_fail(DEPTHS_INI("on_demand", "64", "cq_depth = 255\n"), 9,
		    "[rdma] cq_depth: 255 is less than the 256 completions one session and its "
		    "replacement can produce");
}

/* [rail.N]: more RDMA devices, numbered in order; rail 0 is [rdma]'s. */
static void
test_rails_sections(void **state)
{
	struct kvx_config cfg;

	(void)state;
	load_ok(MIN_INI, &cfg);
	assert_int_equal(cfg.n_rails, 1);
	assert_string_equal(cfg.rails[0].device, "rxe0");
	load_ok(MIN_INI "[rail.1]\ndevice = rxe2\n[rail.2]\ndevice = mlx5_3\nport = 2\n"
			"gid_index = 3\nmtu = 4096\n",
		&cfg);
	assert_int_equal(cfg.n_rails, 3);
	assert_string_equal(cfg.rails[0].device, "rxe0");
	assert_string_equal(cfg.rails[1].device, "rxe2");
	assert_int_equal(cfg.rails[1].port, 1);
	assert_int_equal(cfg.rails[1].gid_index, 1);
	assert_int_equal(cfg.rails[1].mtu, 1024); /* [rdma]'s */
	assert_string_equal(cfg.rails[2].device, "mlx5_3");
	assert_int_equal(cfg.rails[2].port, 2);
	assert_int_equal(cfg.rails[2].gid_index, 3);
	assert_int_equal(cfg.rails[2].mtu, 4096);
	assert_round_trip(&cfg);
	expect_fail(MIN_INI "[rail.2]\ndevice = rxe2\n", MIN_LINES + 1,
		    "[rail.2]: comes before [rail.1]");
	expect_fail(MIN_INI "[rail.0]\ndevice = rxe2\n", MIN_LINES + 1,
		    "[rail.0]: the rail number must be 1..3");
	expect_fail(MIN_INI "[rail.4]\ndevice = rxe2\n", MIN_LINES + 1,
		    "[rail.4]: the rail number must be 1..3");
	expect_fail(MIN_INI "[rail.1]\ndevice = rxe2\n[rail.1]\ndevice = rxe3\n", MIN_LINES + 3,
		    "[rail.1]: section repeated (first at line 8)");
	expect_fail(MIN_INI "[rail.1]\nport = 2\n", MIN_LINES + 1,
		    "[rail.1] device: required key missing");
	expect_fail(MIN_INI "[rail.1]\ndevice = rxe0\n", MIN_LINES + 2,
		    "[rail.1] device: rxe0 port 1 is already rail 0");
	expect_fail(MIN_INI "[rail.1]\ndevice = rxe2\nmtu = 1500\n", MIN_LINES + 3,
		    "[rail.1] mtu: '1500' is not one of");
	expect_fail(MIN_INI "[rail.1]\ndevice = rxe2\nport = 0\n", MIN_LINES + 3,
		    "[rail.1] port: '0' is not an integer 1..255");
	expect_fail(MIN_INI "[rail.1]\ndevice = rxe2\nspeed = 400\n", MIN_LINES + 3,
		    "[rail.1] speed: unknown key");
	expect_fail(MIN_INI "[rail.1]\ndevice = rxe2\ndevice = rxe3\n", MIN_LINES + 3,
		    "[rail.1] device: duplicate key (first at line 9)");
	/* a peer's exact GIDs, one per rail */
	load_ok(MIN_INI
		"[peer.beta]\naddress = 10.0.0.2:7470\ngid = ::ffff:10.0.0.2, ::ffff:10.1.0.2\n",
		&cfg);
	assert_true(cfg.peers[0].has_gid);
	assert_int_equal(cfg.peers[0].n_rail_gid, 1);
	assert_int_equal(cfg.peers[0].rail_gid[0][13], 1);
	assert_round_trip(&cfg);
	expect_fail(MIN_INI "[peer.beta]\naddress = 10.0.0.2:7470\ngid = ::1, ::2, ::3, ::4, ::5\n",
		    MIN_LINES + 3, "[peer.beta] gid: more than 4 GIDs (one per rail)");
	expect_fail(MIN_INI "[peer.beta]\naddress = 10.0.0.2:7470\ngid = ::1, nope\n",
		    MIN_LINES + 3, "[peer.beta] gid: 'nope' is not a GID in IPv6 notation");
	/* the same device on another port is another rail */
	load_ok(MIN_INI "[rail.1]\ndevice = rxe0\nport = 2\n", &cfg);
	assert_int_equal(cfg.n_rails, 2);
}

static void
test_membership_section(void **state)
{
	static const char *const bad_prefix[] = {"kvx/", "/kvx", "/", "/a b/", "/k\"v/"};
	struct kvx_config cfg;
	char text[512];

	(void)state;
	load_ok(MIN_INI, &cfg);
	assert_false(cfg.has_etcd); /* absent: the [peer.*] sections only */
	load_ok(MIN_INI "[membership]\netcd = 10.0.0.9:2379\n", &cfg);
	assert_true(cfg.has_etcd);
	assert_string_equal(cfg.etcd.host, "10.0.0.9");
	assert_int_equal(cfg.etcd.port, 2379);
	assert_string_equal(cfg.etcd_prefix, "/kvx/nodes/");
	assert_int_equal(cfg.lease_s, 5);
	assert_false(cfg.has_advertise);
	assert_round_trip(&cfg);
	load_ok(MIN_INI "[membership]\netcd = 10.0.0.9:2379\nprefix = /c1/kvx-nodes_2.a/\n"
			"lease_s = 2\nadvertise = 10.0.0.1:7470\n",
		&cfg);
	assert_string_equal(cfg.etcd_prefix, "/c1/kvx-nodes_2.a/");
	assert_int_equal(cfg.lease_s, 2);
	assert_true(cfg.has_advertise);
	assert_round_trip(&cfg);
	for (size_t i = 0; i < sizeof(bad_prefix) / sizeof(bad_prefix[0]); i++) {
		snprintf(text, sizeof(text),
			 MIN_INI "[membership]\netcd = 10.0.0.9:2379\nprefix = %s\n",
			 bad_prefix[i]);
		expect_fail(text, MIN_LINES + 3, "[membership] prefix: ");
	}
	expect_fail(MIN_INI "[membership]\netcd = localhost:2379\n", MIN_LINES + 2,
		    "[membership] etcd: bad address");
	expect_fail(MIN_INI "[membership]\netcd = 10.0.0.9:2379\nlease_s = 1\n", MIN_LINES + 3,
		    "[membership] lease_s: ");
	expect_fail(MIN_INI "[membership]\netcd = 10.0.0.9:2379\nadvertise = 0.0.0.0:7470\n",
		    MIN_LINES + 3,
		    "[membership] advertise: 0.0.0.0 is not an address peers can dial");
	expect_fail(MIN_INI "[membership]\nprefix = /kvx/\n", MIN_LINES + 2,
		    "[membership]: set without etcd");
	/* a wildcard listen address: peers need another one to dial */
	expect_fail("[node]\nname = alpha\nlisten = 0.0.0.0:7470\n[rdma]\ndevice = rxe0\n"
		    "[engine]\nsocket = /run/kvx/engine.sock\n[membership]\netcd = 10.0.0.9:2379\n",
		    MIN_LINES + 2, "[membership] etcd: [node] listen is 0.0.0.0 (line 3)");
	load_ok("[node]\nname = alpha\nlisten = 0.0.0.0:7470\n[rdma]\ndevice = rxe0\n"
		"[engine]\nsocket = /run/kvx/engine.sock\n[membership]\netcd = 10.0.0.9:2379\n"
		"advertise = 10.0.0.1:7470\n",
		&cfg);
}

/* ---- fixture ---- */

static int
group_setup(void **state)
{
	snprintf(tmpdir, sizeof(tmpdir), "/tmp/kvx-test-config-XXXXXX");
	return mkdtemp(tmpdir) == NULL ? -1 : 0;
}

static int
group_teardown(void **state)
{
	char path[512];
	struct dirent *e;
	DIR *d = opendir(tmpdir);

	if (d == NULL)
		return -1;
	while ((e = readdir(d)) != NULL) {
		if (strcmp(e->d_name, ".") == 0 || strcmp(e->d_name, "..") == 0)
			continue;
		snprintf(path, sizeof(path), "%s/%s", tmpdir, e->d_name);
		unlink(path);
	}
	closedir(d);
	return rmdir(tmpdir);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_full_valid),
		cmocka_unit_test(test_defaults),
		cmocka_unit_test(test_cpu_claims),
		cmocka_unit_test(test_syntax_variants),
		cmocka_unit_test(test_allow),
		cmocka_unit_test(test_limits_accepted),
		cmocka_unit_test(test_peer_find),
		cmocka_unit_test(test_unknown_section),
		cmocka_unit_test(test_unknown_key),
		cmocka_unit_test(test_syntax_error),
		cmocka_unit_test(test_line_too_long),
		cmocka_unit_test(test_nul_byte),
		cmocka_unit_test(test_bad_integer),
		cmocka_unit_test(test_out_of_range),
		cmocka_unit_test(test_duplicate_key),
		cmocka_unit_test(test_missing_required),
		cmocka_unit_test(test_bad_address),
		cmocka_unit_test(test_bad_poll_cpus),
		cmocka_unit_test(test_bad_names),
		cmocka_unit_test(test_bad_paths),
		cmocka_unit_test(test_too_many_peers),
		cmocka_unit_test(test_self_as_peer),
		cmocka_unit_test(test_allow_unknown_peer),
		cmocka_unit_test(test_peer_identity),
		cmocka_unit_test(test_cq_depth_sized_from_qps),
		cmocka_unit_test(test_untouched_on_error),
		cmocka_unit_test(test_print_round_trip),
		cmocka_unit_test(test_print_round_trip_edges),
		cmocka_unit_test(test_print_every_key),
		cmocka_unit_test(test_rank_users),
		cmocka_unit_test(test_unreadable),
		cmocka_unit_test(test_example_loads),
		cmocka_unit_test(test_metrics_listen),
		cmocka_unit_test(test_connect_on_demand),
		cmocka_unit_test(test_rails_sections),
		cmocka_unit_test(test_membership_section),
	};

	return cmocka_run_group_tests_name("config", tests, group_setup, group_teardown);
}
