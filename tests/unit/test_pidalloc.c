// SPDX-License-Identifier: MIT
/*
 * Unit tests for pidalloc.c: the window of PIDs the allocator may have
 * handed out between two marks must hold every PID it can have handed out
 * (a sharer born under a recycled PID is compared, not taken for the old
 * process), round past pid_max too, and must widen to every PID whenever
 * the count of created tasks cannot rule out a whole round.  And the
 * reads of this machine's allocator.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "pidalloc.h"
#include "procfs.h"

static struct pidalloc_mark mark(uint64_t last, uint64_t max, uint64_t tasks)
{
	return (struct pidalloc_mark){ .ok = true, .last = last, .max = max, .tasks = tasks };
}

static void window_between_the_two_cursors(void **state)
{
	struct pidalloc_mark a = mark(1000, 32768, 300), b = mark(1010, 32768, 305);
	struct pidalloc_window w;

	(void)state;
	pidalloc_window(&a, &b, 10, &w);
	assert_false(w.all);
	assert_false(pidalloc_in_window(&w, 1000));   /* handed out before the first mark */
	assert_true(pidalloc_in_window(&w, 1001));
	assert_true(pidalloc_in_window(&w, 1010));
	assert_false(pidalloc_in_window(&w, 1011));
	assert_false(pidalloc_in_window(&w, 500));
	/* Nothing handed out: an empty window. */
	pidalloc_window(&a, &a, 3, &w);
	assert_false(w.all);
	assert_false(pidalloc_in_window(&w, 1000));
	assert_false(pidalloc_in_window(&w, 1001));
}

static void window_round_past_pid_max(void **state)
{
	struct pidalloc_mark a = mark(32700, 32768, 300), b = mark(320, 32768, 300);
	struct pidalloc_window w;

	(void)state;
	pidalloc_window(&a, &b, 100, &w);
	assert_false(w.all);
	assert_true(pidalloc_in_window(&w, 32701));
	assert_true(pidalloc_in_window(&w, 32767));
	assert_true(pidalloc_in_window(&w, 300));
	assert_true(pidalloc_in_window(&w, 320));
	assert_false(pidalloc_in_window(&w, 321));
	assert_false(pidalloc_in_window(&w, 32700));
	assert_false(pidalloc_in_window(&w, 16000));
}

static void every_pid_when_a_whole_round_is_possible(void **state)
{
	struct pidalloc_mark a = mark(1000, 32768, 300), b = mark(1010, 32768, 300);
	struct pidalloc_mark unread = { .ok = false }, other_max = mark(1010, 65536, 300);
	struct pidalloc_window w;

	(void)state;
	/* Enough tasks created to have gone round: the cursors say nothing. */
	pidalloc_window(&a, &b, 32768, &w);
	assert_true(w.all);
	assert_true(pidalloc_in_window(&w, 500));
	/* Fewer created than the ring, but the ring is nearly full of tasks. */
	a.tasks = 30000;
	pidalloc_window(&a, &b, 10, &w);
	assert_true(w.all);
	a.tasks = 300;
	/* A count so large that adding would wrap. */
	pidalloc_window(&a, &b, UINT64_MAX - 10, &w);
	assert_true(w.all);
	/* A mark that could not be read, or pid_max changed in between. */
	pidalloc_window(&unread, &b, 1, &w);
	assert_true(w.all);
	pidalloc_window(&a, &other_max, 1, &w);
	assert_true(w.all);
	/* A cursor past pid_max is no cursor we understand. */
	b.last = 40000;
	pidalloc_window(&a, &b, 1, &w);
	assert_true(w.all);
}

static void loadavg_tasks(void **state)
{
	static const char ok[] = "0.52 0.58 0.59 3/412 123456\n";
	uint64_t n = 0;

	(void)state;
	assert_int_equal(pidalloc_parse_loadavg_tasks(ok, sizeof(ok) - 1, &n), 0);
	assert_int_equal(n, 412);
	assert_int_equal(pidalloc_parse_loadavg_tasks("0.52 0.58 0.59 3/ 1\n", 20, &n), -EBADMSG);
	assert_int_equal(pidalloc_parse_loadavg_tasks("0.52 0.58 0.59 3/412", 20, &n), -EBADMSG);
	assert_int_equal(pidalloc_parse_loadavg_tasks("no slash here\n", 14, &n), -EBADMSG);
}

/* This machine's allocator: a child made between two reads lies in their window. */
static void a_fork_lands_in_the_window(void **state)
{
	struct pidalloc_mark a, b;
	struct pidalloc_window w;
	uint64_t forks_a, forks_b;
	pid_t child;

	(void)state;
	assert_int_equal(procfs_read_forks(&forks_a), 0);
	pidalloc_read(&a);
	assert_true(a.ok);
	assert_true(a.max > 300 && a.last < a.max && a.tasks > 0);
	child = fork();
	assert_true(child >= 0);
	if (child == 0)
		_exit(0);
	assert_int_equal(waitpid(child, NULL, 0), child);
	pidalloc_read(&b);
	assert_int_equal(procfs_read_forks(&forks_b), 0);
	assert_true(b.ok);
	assert_true(forks_b > forks_a);
	pidalloc_window(&a, &b, forks_b - forks_a, &w);
	assert_false(w.all);
	assert_true(pidalloc_in_window(&w, child));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(window_between_the_two_cursors),
		cmocka_unit_test(window_round_past_pid_max),
		cmocka_unit_test(every_pid_when_a_whole_round_is_possible),
		cmocka_unit_test(loadavg_tasks),
		cmocka_unit_test(a_fork_lands_in_the_window),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
