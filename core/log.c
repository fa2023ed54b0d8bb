/* SPDX-License-Identifier: Apache-2.0 */
#include "core/log.h"

#include <poll.h>
#include <stdarg.h>
#include <stdatomic.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static char log_ident[80] = "kvx";
static int log_level = KVX_LOG_INFO;

static const char *const level_str[] = {"ERROR", "WARN", "INFO", "DEBUG"};
static atomic_uint_fast64_t log_dropped;

void
kvx_log_init(const char *ident, int level)
{
	snprintf(log_ident, sizeof(log_ident), "%s", ident);
	log_level = level;
}

int
kvx_log_level(void)
{
	return log_level;
}

uint64_t
kvx_log_dropped(void)
{
	return atomic_load(&log_dropped);
}

bool
kvx_log_allow(struct kvx_log_limit *l, uint64_t now_ms, uint32_t per_s, const char *what)
{
	if (now_ms >= l->window_ms + 1000 || now_ms < l->window_ms) {
		if (l->suppressed)
			kvx_log(KVX_LOG_WARN, "kvx_log_allow",
				"%u more %s not logged in the last second", l->suppressed, what);
		l->window_ms = now_ms;
		l->logged = l->suppressed = 0;
	}
	if (l->logged >= per_s) {
		l->suppressed++;
		return false;
	}
	l->logged++;
	return true;
}

/* Copy src[0, n) to dst (cap bytes, at least 1), each control character as \xNN; stops where
 * the next one would not fit.  Returns the bytes written. */
static size_t
escape(char *dst, size_t cap, const char *src, size_t n)
{
	static const char hex[] = "0123456789abcdef";
	size_t k = 0;

	for (size_t i = 0; i < n; i++) {
		unsigned char c = (unsigned char)src[i];

		if (c >= 0x20 && c != 0x7f) {
			if (k + 1 > cap)
				break;
			dst[k++] = (char)c;
			continue;
		}
		if (k + 4 > cap)
			break;
		dst[k++] = '\\';
		dst[k++] = 'x';
		dst[k++] = hex[c >> 4];
		dst[k++] = hex[c & 15];
	}
	return k;
}

void
kvx_log(int level, const char *where, const char *fmt, ...)
{
	struct pollfd out = {.fd = STDERR_FILENO, .events = POLLOUT};
	char line[1024], msg[1024];
	struct timespec ts;
	va_list ap;
	int n, m;

	if (level > log_level)
		return;
	clock_gettime(CLOCK_REALTIME, &ts);
	n = snprintf(line, sizeof(line), "%ld.%06ld %s %s %s: ", (long)ts.tv_sec, ts.tv_nsec / 1000,
		     log_ident,
		     level_str[level < 0   ? 0
			       : level > 3 ? 3
					   : level],
		     where);
	if (n < 0)
		return;
	if ((size_t)n >= sizeof(line) - 1)
		n = sizeof(line) - 2;
	va_start(ap, fmt);
	m = vsnprintf(msg, sizeof(msg), fmt, ap);
	va_end(ap);
	if (m < 0)
		m = 0;
	if ((size_t)m >= sizeof(msg))
		m = sizeof(msg) - 1;
	n += (int)escape(line + n, sizeof(line) - 1 - (size_t)n, msg, (size_t)m);
	line[n++] = '\n';
	/* never wait for the reader: a full pipe or socket drops the line */
	if (poll(&out, 1, 0) != 1 || !(out.revents & POLLOUT) || write(STDERR_FILENO, line, n) != n)
		atomic_fetch_add(&log_dropped, 1);
}
