// SPDX-License-Identifier: MIT
/*
 * forker: a parent with worker children, and children forked on demand.
 *
 * Usage: forker NCHILDREN
 *
 * Calls backtrace() once, forks NCHILDREN workers (DataLoader-style), then
 * prints "ready".  Each line "fork" read from stdin forks one more child.
 * Every child calls backtrace() once, prints "child PID N" (N: the frames
 * backtrace() returned, so 0 in a child of a guarded parent) and sleeps in
 * pause(); it dies with its parent (PR_SET_PDEATHSIG).  The parent prints a
 * child's line only after the child did, so "ready" follows the workers.
 */
#include <execinfo.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

/* Forks one child; returns once it has printed its line. */
static int spawn(void)
{
	int fds[2];
	char c;
	pid_t child;

	if (pipe(fds) < 0)
		return -1;
	child = fork();
	if (child < 0)
		return -1;
	if (child == 0) {
		void *buf[64];
		char line[64];
		int n;

		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() == 1)
			_exit(1);
		n = backtrace(buf, 64);
		snprintf(line, sizeof(line), "child %d %d\n", (int)getpid(), n);
		if (write(1, line, strlen(line)) < 0 || write(fds[1], "x", 1) < 0)
			_exit(1);
		for (;;)
			pause();
	}
	close(fds[1]);
	if (read(fds[0], &c, 1) != 1)
		c = 0;
	close(fds[0]);
	return c == 'x' ? 0 : -1;
}

int main(int argc, char **argv)
{
	char cmd[64];
	void *buf[16];
	int n;

	if (argc != 2 || (n = atoi(argv[1])) < 0 || n > 64) {
		fprintf(stderr, "usage: %s NCHILDREN\n", argv[0]);
		return 2;
	}
	if (backtrace(buf, 16) <= 0)
		return 1;
	/* Unbuffered: a child must not inherit and re-print buffered output. */
	setvbuf(stdout, NULL, _IONBF, 0);
	for (int i = 0; i < n; i++)
		if (spawn() < 0)
			return 1;
	printf("ready\n");
	while (fgets(cmd, sizeof(cmd), stdin))
		if (strcmp(cmd, "fork\n") == 0 && spawn() < 0)
			return 1;
	for (;;)
		pause();
}
