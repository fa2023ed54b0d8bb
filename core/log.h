/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Logging: one line per call to stderr, "kvxd[node] LEVEL where: message".  Control core and
 * start-up only: polling cores never log on their hot path (they count, and report through
 * their outbox).  Thread: any; never blocks for long (one write(2) per line).
 */
#ifndef KVX_CORE_LOG_H
#define KVX_CORE_LOG_H

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

#define KVX_ERR(...) kvx_log(KVX_LOG_ERROR, __func__, __VA_ARGS__)
#define KVX_WARN(...) kvx_log(KVX_LOG_WARN, __func__, __VA_ARGS__)
#define KVX_INFO(...) kvx_log(KVX_LOG_INFO, __func__, __VA_ARGS__)
#define KVX_DEBUG(...)                                                 \
	do {                                                           \
		if (kvx_log_level() >= KVX_LOG_DEBUG)                  \
			kvx_log(KVX_LOG_DEBUG, __func__, __VA_ARGS__); \
	} while (0)

#endif /* KVX_CORE_LOG_H */
