// SPDX-License-Identifier: MIT
/*
 * Pins (daemon/node/pin.c): targets naming one live process share its pidfd,
 * the count follows the holders, and an exited process is told from a
 * zombie.  Uses real child processes of the test itself, killed and reaped
 * by PID.
 */
#include <errno.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmocka.h>

#include "pin.h"

#define NCHILD 64

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

static void shared_while_alive(void **state)
{
	int a = -1, b = -1, c = -1;
	unsigned base = pin_count();

	(void)state;
	assert_int_equal(pin_open(getpid(), &a), 0);
	assert_int_equal(pin_open(getpid(), &b), 0);
	assert_int_equal(a, b);
	assert_int_equal(pin_count(), base + 1);
	pin_close(&a);
	assert_int_equal(a, -1);
	assert_int_equal(pin_count(), base + 1);
	assert_int_equal(pin_state(b), PIN_ALIVE);
	pin_close(&b);
	assert_int_equal(pin_count(), base);
	/* Nothing left of the old entry: a new pin is a new descriptor, counted once. */
	assert_int_equal(pin_open(getpid(), &c), 0);
	assert_int_equal(pin_count(), base + 1);
	pin_close(&c);
	assert_int_equal(pin_count(), base);
}

static void zombie_then_reaped(void **state)
{
	pid_t p = child();
	int fd = -1, again = -1;

	(void)state;
	assert_int_equal(pin_open(p, &fd), 0);
	kill(p, SIGKILL);
	while (pin_state(fd) == PIN_ALIVE)
		usleep(1000);
	assert_int_equal(pin_state(fd), PIN_ZOMBIE);
	/* A dead process's pidfd is never shared: the PID is pinned afresh. */
	assert_int_equal(pin_open(p, &again), 0);
	assert_int_not_equal(again, fd);
	pin_close(&again);
	assert_int_equal(waitpid(p, NULL, 0), p);
	assert_int_equal(pin_state(fd), PIN_REAPED);
	pin_close(&fd);
	assert_int_equal(pin_open(p, &fd), -ESRCH);
}

/* Many PIDs in and out of the table, in an order that exercises its deletion. */
static void many_holders(void **state)
{
	pid_t kids[NCHILD];
	int fds[NCHILD][3];
	unsigned base = pin_count();

	(void)state;
	for (int i = 0; i < NCHILD; i++) {
		kids[i] = child();
		for (int k = 0; k < 3; k++)
			assert_int_equal(pin_open(kids[i], &fds[i][k]), 0);
		assert_int_equal(fds[i][0], fds[i][2]);
	}
	assert_int_equal(pin_count(), base + NCHILD);
	for (int k = 0; k < 3; k++)
		for (int i = (k * 7) % NCHILD, n = 0; n < NCHILD; n++, i = (i + 13) % NCHILD)
			pin_close(&fds[i][k]);
	assert_int_equal(pin_count(), base);
	for (int i = 0; i < NCHILD; i++) {
		int fd = -1;

		assert_int_equal(pin_open(kids[i], &fd), 0);
		pin_close(&fd);
		kill(kids[i], SIGKILL);
		assert_int_equal(waitpid(kids[i], NULL, 0), kids[i]);
	}
	assert_int_equal(pin_count(), base);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(shared_while_alive),
		cmocka_unit_test(zombie_then_reaped),
		cmocka_unit_test(many_holders),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
