/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Logging: one line per call to stderr, "kvxd[node] LEVEL where: message".  Control core and
 * start-up only: polling cores never log on their hot path (they count, and report through
 * their outbox).  Thread: any; never waits for the log's reader: a line the reader cannot take
 * at once (a pipe or socket that is full) is dropped and counted (kvx_log_dropped).  Control
 * characters of a message (a peer's or an engine's text among them) are written as \xNN, so a
 * message is one line and cannot forge another.
 */
#ifndef KVX_CORE_LOG_H
#define KVX_CORE_LOG_H

#include <stdbool.h>
#include <stdint.h>

enum kvx_log_level {
	KVX_LOG_ERROR = 0,
	KVX_LOG_WARN = 1,
	KVX_LOG_INFO = 2,
	KVX_LOG_DEBUG = 3,
};

void kvx_log_init(const char *ident, int level);
int kvx_log_level(void);
void kvx_log(int level, const char *where, const char *fmt, ...)
	__attribute__((format(printf, 3, 4)));

/* Lines dropped so far: the log's reader did not take them at once. */
uint64_t kvx_log_dropped(void);

/* A bound on lines that a client can cause, one struct per kind of line (zeroed to start; one
 * thread): kvx_log_allow says whether the next such line goes out, at most per_s in a second of
 * now_ms; the others are counted and summed up in one line ("N more WHAT not logged") when the
 * next second's first one comes. */
struct kvx_log_limit {
	uint64_t window_ms;
	uint32_t logged, suppressed;
};
bool kvx_log_allow(struct kvx_log_limit *l, uint64_t now_ms, uint32_t per_s, const char *what);

#define KVX_ERR(...) kvx_log(KVX_LOG_ERROR, __func__, __VA_ARGS__)
#define KVX_WARN(...) kvx_log(KVX_LOG_WARN, __func__, __VA_ARGS__)
#define KVX_INFO(...) kvx_log(KVX_LOG_INFO, __func__, __VA_ARGS__)
#define KVX_DEBUG(...)                                                 \
	do {                                                           \
		if (kvx_log_level() >= KVX_LOG_DEBUG)                  \
			kvx_log(KVX_LOG_DEBUG, __func__, __VA_ARGS__); \
	} while (0)

#endif /* KVX_CORE_LOG_H */
