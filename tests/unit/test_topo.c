/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Host-wide CPU claims for poll_cpus = auto (verbs/topo.h): a CPU one kvxd claimed is refused to
 * another (-EBUSY) while the first holds it, and free again once its fd is closed (the kernel
 * drops a flock when its process ends, however it ends).  Two opens in one process are two
 * open files, so they contend like two processes.
 */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "verbs/topo.h"

static char dir[64];

static int
setup(void **state)
{
	(void)state;
	snprintf(dir, sizeof(dir), "/tmp/kvx-test-topo-XXXXXX");
	return mkdtemp(dir) ? 0 : -1;
}

static int
teardown(void **state)
{
	char cmd[128];

	(void)state;
	snprintf(cmd, sizeof(cmd), "rm -rf '%s'", dir);
	return system(cmd) == 0 ? 0 : -1;
}

static void
test_claim_is_exclusive_until_closed(void **state)
{
	char sub[128];
	int a, b, c;

	(void)state;
	snprintf(sub, sizeof(sub), "%s/claims", dir); /* made on first use */
	a = kvx_topo_claim_cpu(sub, 3);
	assert_true(a >= 0);
	assert_int_equal(kvx_topo_claim_cpu(sub, 3), -EBUSY);
	b = kvx_topo_claim_cpu(sub, 4); /* another CPU: free */
	assert_true(b >= 0);
	close(a);
	c = kvx_topo_claim_cpu(sub, 3); /* released */
	assert_true(c >= 0);
	close(b);
	close(c);
	assert_int_equal(kvx_topo_claim_cpu(sub, -1), -EINVAL);
}

/* A process that holds a claim and dies without closing anything: the claim goes with it. */
static void
test_claim_dies_with_its_process(void **state)
{
	int pipefd[2], st, fd;
	char ok;
	pid_t pid;

	(void)state;
	assert_int_equal(pipe(pipefd), 0);
	pid = fork();
	assert_true(pid >= 0);
	if (pid == 0) {
		int held = kvx_topo_claim_cpu(dir, 7);

		ok = held >= 0 ? 'y' : 'n';
		if (write(pipefd[1], &ok, 1) != 1)
			_exit(2);
		pause(); /* killed below, holding the claim */
		_exit(0);
	}
	assert_int_equal(read(pipefd[0], &ok, 1), 1);
	assert_int_equal(ok, 'y');
	assert_int_equal(kvx_topo_claim_cpu(dir, 7), -EBUSY); /* another process holds it */
	kill(pid, SIGKILL);
	assert_int_equal(waitpid(pid, &st, 0), pid);
	fd = kvx_topo_claim_cpu(dir, 7);
	assert_true(fd >= 0);
	close(fd);
	close(pipefd[0]);
	close(pipefd[1]);
}

/* A directory that cannot be made is an error naming why, not a claim. */
static void
test_claim_dir_errors(void **state)
{
	char file[128], under[160];
	FILE *f;

	(void)state;
	snprintf(file, sizeof(file), "%s/plain", dir);
	f = fopen(file, "w");
	assert_non_null(f);
	fclose(f);
	snprintf(under, sizeof(under), "%s/sub", file);
	assert_int_equal(kvx_topo_claim_cpu(under, 0), -ENOTDIR);
	snprintf(under, sizeof(under), "%s/no/such", dir);
	assert_int_equal(kvx_topo_claim_cpu(under, 0), -ENOENT);
}

int
main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(test_claim_is_exclusive_until_closed),
		cmocka_unit_test(test_claim_dies_with_its_process),
		cmocka_unit_test(test_claim_dir_errors),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
