// SPDX-License-Identifier: MIT
/*
 * idle: a quiet victim.
 *
 * Usage: idle NTHREADS [--nondumpable]
 *
 * Calls backtrace() once (so libc's definition is bound and in use), starts
 * NTHREADS threads that sleep in pause(), prints "ready" and sleeps too.
 * No thread ever runs near backtrace() again, so a guard never meets a busy
 * site and the tests can poke the site's bytes without racing a caller.
 * --nondumpable clears the dumpable flag, which must make the daemon deny
 * the owner (the kernel would deny the owner's own ptrace too).
 */
#include <execinfo.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

static atomic_int started;

static void *sleeper(void *arg)
{
	(void)arg;
	atomic_fetch_add(&started, 1);
	for (;;)
		pause();
	return NULL;
}

int main(int argc, char **argv)
{
	void *buf[16];
	int n;
	pthread_t t;

	if (argc < 2 || argc > 3 || (n = atoi(argv[1])) < 0 || n > 1024 ||
	    (argc == 3 && strcmp(argv[2], "--nondumpable") != 0)) {
		fprintf(stderr, "usage: %s NTHREADS [--nondumpable]\n", argv[0]);
		return 2;
	}
	if (argc == 3 && prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0) {
		perror("prctl");
		return 1;
	}
	if (backtrace(buf, 16) <= 0) {
		fprintf(stderr, "backtrace returned nothing\n");
		return 1;
	}
	for (int i = 0; i < n; i++) {
		if (pthread_create(&t, NULL, sleeper, NULL) != 0) {
			perror("pthread_create");
			return 1;
		}
	}
	while (atomic_load(&started) < n)
		usleep(1000);
	printf("ready\n");
	fflush(stdout);
	for (;;)
		pause();
}
