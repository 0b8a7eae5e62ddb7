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

/* The window between marks a and b, created tasks apart: not every PID, and these in it or not. */
static void assert_window(struct pidalloc_mark a, struct pidalloc_mark b, uint64_t created,
			  const pid_t *in, size_t nin, const pid_t *out, size_t nout)
{
	struct pidalloc_window w;

	pidalloc_window(&a, &b, created, &w);
	assert_false(w.all);
	for (size_t i = 0; i < nin; i++)
		if (!pidalloc_in_window(&w, in[i]))
			fail_msg("PID %d should be in the window", (int)in[i]);
	for (size_t i = 0; i < nout; i++)
		if (pidalloc_in_window(&w, out[i]))
			fail_msg("PID %d should not be in the window", (int)out[i]);
}

#define N(v) (sizeof(v) / sizeof((v)[0]))

static void window_between_the_two_cursors(void **state)
{
	/* 1000 was handed out before the first mark. */
	static const pid_t in[] = { 1001, 1010 }, out[] = { 1000, 1011, 500 };
	/* Nothing handed out: an empty window. */
	static const pid_t none[] = { 1000, 1001 };

	(void)state;
	assert_window(mark(1000, 32768, 300), mark(1010, 32768, 305), 10, in, N(in), out, N(out));
	assert_window(mark(1000, 32768, 300), mark(1000, 32768, 300), 3, NULL, 0, none, N(none));
}

static void window_round_past_pid_max(void **state)
{
	static const pid_t in[] = { 32701, 32767, 300, 320 }, out[] = { 321, 32700, 16000 };

	(void)state;
	assert_window(mark(32700, 32768, 300), mark(320, 32768, 300), 100, in, N(in), out, N(out));
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
