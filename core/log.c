/* SPDX-License-Identifier: Apache-2.0 */
#include "core/log.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static char log_ident[80] = "kvx";
static int log_level = KVX_LOG_INFO;

static const char *const level_str[] = {"ERROR", "WARN", "INFO", "DEBUG"};

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

void
kvx_log(int level, const char *where, const char *fmt, ...)
{
	char line[1024];
	struct timespec ts;
	va_list ap;
	int n;

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
	va_start(ap, fmt);
	if ((size_t)n < sizeof(line))
		n += vsnprintf(line + n, sizeof(line) - n, fmt, ap);
	va_end(ap);
	if ((size_t)n >= sizeof(line) - 1)
		n = sizeof(line) - 2;
	line[n++] = '\n';
	if (write(STDERR_FILENO, line, n) < 0)
		return;
}
