/* SPDX-License-Identifier: Apache-2.0 */
/*
 * core/log: a message is one line whatever its text (control characters written as \xNN, so an
 * engine's command or a peer's name cannot forge a line); a reader that does not take a line at
 * once has it dropped and counted, never waited for (a stalled log collector would otherwise
 * stop the control core: heartbeats, ABORT and ABORT_ACK with it); and kvx_log_allow bounds a
 * kind of line to so many a second, summing up the rest in one line.  stderr is a pipe here.
 * Negative controls: the mutants log_raw (no escaping) and log_waits (a blocking write).
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <cmocka.h>

#include "core/log.h"

static int rd = -1, saved = -1;

static int
setup(void **state)
{
	int p[2];

	(void)state;
	assert_int_equal(pipe2(p, O_CLOEXEC), 0);
	saved = dup(STDERR_FILENO);
	assert_true(saved >= 0);
	assert_int_equal(dup2(p[1], STDERR_FILENO), STDERR_FILENO);
	close(p[1]);
	rd = p[0];
	kvx_log_init("kvx", KVX_LOG_INFO);
	return 0;
}

static int
teardown(void **state)
{
	(void)state;
	dup2(saved, STDERR_FILENO);
	close(saved);
	close(rd);
	return 0;
}

/* What the pipe holds now (NUL-terminated, static). */
static const char *
drain(void)
{
	static char buf[1 << 17];
	size_t len = 0;
	int fl = fcntl(rd, F_GETFL);

	fcntl(rd, F_SETFL, fl | O_NONBLOCK);
	for (;;) {
		ssize_t n = read(rd, buf + len, sizeof(buf) - 1 - len);

		if (n <= 0)
			break;
		len += (size_t)n;
	}
	fcntl(rd, F_SETFL, fl);
	buf[len] = '\0';
	return buf;
}

static int
lines(const char *s)
{
	int n = 0;

	for (; *s; s++)
		n += *s == '\n';
	return n;
}

static void
test_message_is_one_line(void **state)
{
	const char *got;

	(void)state;
	drain();
	KVX_WARN("command '%s' refused",
		 "fault x\n1796468638.000000 kvx ERROR peer_fail: peer b: forged\x1b[2J");
	got = drain();
	assert_int_equal(lines(got), 1);
	assert_non_null(strstr(got, "'fault x\\x0a1796468638.000000 kvx ERROR peer_fail: peer "
				    "b: forged\\x1b[2J' refused\n"));
}

static void
on_alarm(int sig)
{
	(void)sig;
	dup2(saved, STDERR_FILENO); /* where the failure can be read */
	fail_msg("kvx_log waited for a reader that does not read");
}

/* The pipe full (a collector that stopped reading): the line is dropped and counted, at once. */
static void
test_full_reader_never_waited_for(void **state)
{
	uint64_t before = kvx_log_dropped();
	int wr = STDERR_FILENO, fl = fcntl(wr, F_GETFL);
	char fill[4096];

	(void)state;
	drain();
	memset(fill, 'x', sizeof(fill));
	fcntl(wr, F_SETFL, fl | O_NONBLOCK);
	while (write(wr, fill, sizeof(fill)) > 0)
		;
	assert_true(errno == EAGAIN);
	while (write(wr, fill, 1) > 0)
		;
	fcntl(wr, F_SETFL, fl); /* a blocking pipe again, as a collector's is */
	sigaction(SIGALRM, &(struct sigaction){.sa_handler = on_alarm}, NULL); /* no restart */
	alarm(3);
	for (int i = 0; i < 10; i++)
		KVX_WARN("line %d", i);
	alarm(0);
	assert_int_equal(kvx_log_dropped() - before, 10);
	assert_null(strstr(drain(), "line "));
	KVX_WARN("after");
	assert_non_null(strstr(drain(), "after\n"));
	assert_int_equal(kvx_log_dropped() - before, 10);
}

static void
test_allow_bounds_a_kind_of_line(void **state)
{
	struct kvx_log_limit l = {0};
	int ok = 0;

	(void)state;
	drain();
	for (int i = 0; i < 25; i++)
		ok += kvx_log_allow(&l, 5000 + (uint64_t)i, 10, "refused things");
	assert_int_equal(ok, 10);
	assert_string_equal(drain(), "");
	assert_false(kvx_log_allow(&l, 5999, 10, "refused things"));
	assert_true(kvx_log_allow(&l, 6000, 10, "refused things"));
	assert_non_null(strstr(drain(), "16 more refused things not logged in the last second\n"));
	assert_true(kvx_log_allow(&l, 6001, 10, "refused things"));
	assert_string_equal(drain(), "");
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup_teardown(test_message_is_one_line, setup, teardown),
		cmocka_unit_test_setup_teardown(test_full_reader_never_waited_for, setup, teardown),
		cmocka_unit_test_setup_teardown(test_allow_bounds_a_kind_of_line, setup, teardown),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
