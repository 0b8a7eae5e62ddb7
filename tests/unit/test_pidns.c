// SPDX-License-Identifier: MIT
/*
 * PID numbers as a caller's namespace sees them (daemon/node/pidns.c): the
 * table one scan of /proc builds, searched for each number a request names,
 * and the rule that a caller in a PID namespace of its own reaches only the
 * processes of that namespace.  The scan reads the real /proc (the table
 * cannot be built without it), so the tests use child processes of their
 * own, killed and reaped by PID; the namespace test skips where this
 * process may not make a PID namespace.
 */
#include <errno.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "pidns.h"
#include "proto.h"

#define NCHILD 16

static pid_t child(void)
{
	pid_t p = fork();

	if (p == 0) {
		for (;;)
			pause();
	}
	assert_true(p > 0);
	return p;
}

static void stop(pid_t p)
{
	kill(p, SIGKILL);
	assert_int_equal(waitpid(p, NULL, 0), p);
}

/* Runs a scan to its end in steps of no budget at all: one entry each. */
static struct pidns_scan *scan(const struct pidns_view *v, int *steps)
{
	struct pidns_scan *s = NULL;
	int r;

	assert_int_equal(pidns_scan_new(v, &s), 0);
	*steps = 0;
	while ((r = pidns_scan_step(s, 0)) == 0)
		++*steps;
	assert_int_equal(r, 1);
	return s;
}

/* Children of a test, killed at its teardown even when an assertion ended it. */
static pid_t kids[NCHILD];

static int stop_kids(void **state)
{
	(void)state;
	for (int i = 0; i < NCHILD; i++)
		if (kids[i] > 0)
			stop(kids[i]);
	memset(kids, 0, sizeof(kids));
	return 0;
}

static void every_number_is_found_in_one_table(void **state)
{
	struct pidns_view v;
	struct pidns_scan *s = NULL;
	pid_t got;
	int steps;

	(void)state;
	for (int i = 0; i < NCHILD; i++)
		kids[i] = child();
	assert_int_equal(pidns_view_of(getpid(), &v), 0);
	assert_true(v.same);

	/* Asked before the scan is complete: a broken invariant, never a guess. */
	assert_int_equal(pidns_scan_new(&v, &s), 0);
	assert_int_equal(pidns_scan_lookup(s, getpid(), &got), -EAGAIN);
	pidns_scan_free(s);

	s = scan(&v, &steps);
	assert_true(steps > NCHILD);  /* a step with no budget left ends after one entry */
	/* Listed in /proc's order, searched by number: every one is found. */
	for (int i = NCHILD - 1; i >= 0; i--) {
		got = 0;
		assert_int_equal(pidns_scan_lookup(s, kids[i], &got), 0);
		assert_int_equal(got, kids[i]);
	}
	assert_int_equal(pidns_scan_lookup(s, getpid(), &got), 0);
	assert_int_equal(got, getpid());
	/* A number nobody has: no process, and the out-parameter untouched. */
	got = 12345;
	assert_int_equal(pidns_scan_lookup(s, -1, &got), -BTG_ERR_NOPROC);
	assert_int_equal(pidns_scan_lookup(s, 0x7fffffff, &got), -BTG_ERR_NOPROC);
	assert_int_equal(got, 12345);
	/* A step after the end changes nothing. */
	assert_int_equal(pidns_scan_step(s, 0), 1);
	pidns_scan_free(s);
}

/* The first child of pid, once it has one; 0 if none came. */
static pid_t first_child(pid_t pid)
{
	pid_t c = 0;

	for (int tries = 0; tries < 2000 && c <= 0; tries++) {
		char path[64];
		FILE *f;

		snprintf(path, sizeof(path), "/proc/%d/task/%d/children", pid, pid);
		f = fopen(path, "r");
		if (f) {
			if (fscanf(f, "%d", &c) != 1)
				c = 0;
			fclose(f);
		}
		if (c <= 0)
			usleep(1000);
	}
	return c;
}

/*
 * A caller in a PID namespace of its own: `init` is PID 1 of a new one,
 * `inner` its child, and `deeper` the child of `inner` in a namespace below
 * (PID 3 in the caller's).  Their numbers there translate to ours, and
 * nothing outside (this process) has a number for them.
 */
static void a_nested_caller_reaches_its_namespace_only(void **state)
{
	int ready[2];
	pid_t outer, init = 0, inner, deeper, got;
	struct pidns_view v;
	struct pidns_scan *s;
	int steps;

	(void)state;
	assert_int_equal(pipe(ready), 0);
	outer = fork();
	assert_true(outer >= 0);
	kids[0] = outer;   /* its end ends the namespace's init, and so `inner` */
	if (outer == 0) {
		/* Makes the namespace, starts its init, which starts `inner`. */
		if (unshare(CLONE_NEWPID) < 0)
			_exit(77);
		pid_t p = fork();

		if (p == 0) {
			prctl(PR_SET_PDEATHSIG, SIGKILL);   /* ends with `outer` */
			pid_t c = fork();

			if (c == 0) {
				/* `inner` makes a namespace below: its child is `deeper` */
				if (unshare(CLONE_NEWPID) == 0 && fork() == 0)
					for (;;)
						pause();
				for (;;)
					pause();
			}
			for (;;)
				pause();   /* PID 1 there: dying takes `inner` along */
		}
		if (write(ready[1], &p, sizeof(p)) != sizeof(p))
			_exit(1);
		for (;;)
			pause();
	}
	close(ready[1]);
	if (read(ready[0], &init, sizeof(init)) != sizeof(init)) {
		int status;

		close(ready[0]);
		assert_int_equal(waitpid(outer, &status, 0), outer);
		kids[0] = 0;
		if (WIFEXITED(status) && WEXITSTATUS(status) == 77)
			skip();   /* no CAP_SYS_ADMIN, or a sandbox without PID namespaces */
		fail_msg("the namespace's init never started");
	}
	close(ready[0]);
	inner = first_child(init);
	assert_true(inner > 0);
	deeper = first_child(inner);
	assert_true(deeper > 0);

	assert_int_equal(pidns_view_of(init, &v), 0);
	assert_false(v.same);
	s = scan(&v, &steps);
	got = 0;
	assert_int_equal(pidns_scan_lookup(s, 1, &got), 0);
	assert_int_equal(got, init);
	got = 0;
	assert_int_equal(pidns_scan_lookup(s, 2, &got), 0);
	assert_int_equal(got, inner);
	got = 0;
	assert_int_equal(pidns_scan_lookup(s, 3, &got), 0);
	assert_int_equal(got, deeper);
	assert_int_equal(pidns_scan_lookup(s, 4, &got), -BTG_ERR_NOPROC);
	pidns_scan_free(s);

	/* And back: its own processes by their numbers there, ours by none. */
	assert_int_equal(pidns_to_caller(&v, inner, &got), 0);
	assert_int_equal(got, 2);
	assert_int_equal(pidns_to_caller(&v, deeper, &got), 0);
	assert_int_equal(got, 3);
	assert_int_equal(pidns_to_caller(&v, getpid(), &got), -BTG_ERR_NOPROC);
	assert_int_equal(pidns_to_caller(&v, outer, &got), -BTG_ERR_NOPROC);

}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_teardown(every_number_is_found_in_one_table, stop_kids),
		cmocka_unit_test_teardown(a_nested_caller_reaches_its_namespace_only, stop_kids),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
