/* SPDX-License-Identifier: MIT */
#ifndef BTGUARD_TEST_REAPED_H
#define BTGUARD_TEST_REAPED_H

#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

/*
 * A PID that named a process a moment ago and names none now: a child that
 * exited and was reaped.  (Until pid_max wraps round, nothing reuses it.)
 * For the unit tests of the /proc readers; cmocka's asserts must be in scope.
 */
static inline pid_t reaped_pid(void)
{
	pid_t dead = fork();

	assert_true(dead >= 0);
	if (dead == 0)
		_exit(0);
	assert_int_equal(waitpid(dead, NULL, 0), dead);
	return dead;
}

#endif
