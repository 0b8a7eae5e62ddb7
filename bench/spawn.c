// SPDX-License-Identifier: MIT
/*
 * spawn: a node's worth of processes for bench/node.
 *
 * Usage: spawn NPROCS NTHREADS
 *
 * Forks NPROCS children.  Each calls backtrace() once (glibc's definition
 * bound, as in any real program), starts NTHREADS - 1 threads that sleep
 * in pause(), tells the parent it is ready and sleeps too; it dies with the
 * parent (PR_SET_PDEATHSIG).  The parent prints "ready" once all are, then
 * waits for its standard input to close and exits, taking them all along.
 */
#include <execinfo.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <unistd.h>

static void *sleeper(void *arg)
{
	(void)arg;
	for (;;)
		pause();
	return NULL;
}

static void child(int nthreads, int ready_fd)
{
	void *buf[8];
	pthread_t t;

	prctl(PR_SET_PDEATHSIG, SIGKILL);
	backtrace(buf, 8);
	for (int i = 1; i < nthreads; i++)
		if (pthread_create(&t, NULL, sleeper, NULL) != 0)
			_exit(1);
	if (write(ready_fd, "r", 1) != 1)
		_exit(1);
	close(ready_fd);
	for (;;)
		pause();
}

int main(int argc, char **argv)
{
	int nprocs, nthreads, fds[2];
	char c;

	if (argc != 3 || (nprocs = atoi(argv[1])) < 1 || (nthreads = atoi(argv[2])) < 1) {
		fprintf(stderr, "usage: spawn NPROCS NTHREADS\n");
		return 2;
	}
	if (pipe(fds) < 0)
		return 1;
	for (int i = 0; i < nprocs; i++) {
		pid_t pid = fork();

		if (pid < 0) {
			perror("fork");
			return 1;
		}
		if (pid == 0) {
			close(fds[0]);
			child(nthreads, fds[1]);
		}
	}
	close(fds[1]);
	for (int i = 0; i < nprocs; i++)
		if (read(fds[0], &c, 1) != 1)
			return 1;
	printf("ready\n");
	fflush(stdout);
	while (read(STDIN_FILENO, &c, 1) > 0)
		;
	return 0;
}
