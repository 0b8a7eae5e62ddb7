// SPDX-License-Identifier: MIT
/*
 * bt_print: backtrace() on demand, every address printed.
 *
 * Usage: bt_print [NTHREADS]
 *
 * Prints "ready", then for every line read on stdin calls backtrace() from
 * a fixed depth (five calls of a noinline function) and prints
 * "frames N ADDR...", the addresses in hex: a test compares what a
 * process gets unguarded and guarded, address by address.  NTHREADS
 * threads (default 0) call backtrace() nonstop meanwhile.
 */
#include <execinfo.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define CAP 64

static int __attribute__((noinline)) walk(int depth, void **frames)
{
	int n;

	if (depth > 0)
		n = walk(depth - 1, frames);
	else
		n = backtrace(frames, CAP);
	/* Not a tail call: every level keeps its frame. */
	__asm__ volatile("" ::: "memory");
	return n;
}

static void *spin(void *arg)
{
	void *frames[CAP];

	(void)arg;
	for (;;)
		walk(3, frames);
	return NULL;
}

int main(int argc, char **argv)
{
	int nthreads = argc > 1 ? atoi(argv[1]) : 0;
	void *frames[CAP];
	char line[64];
	pthread_t t;

	for (int i = 0; i < nthreads; i++)
		if (pthread_create(&t, NULL, spin, NULL) != 0)
			return 1;
	printf("ready\n");
	fflush(stdout);
	while (fgets(line, sizeof(line), stdin)) {
		int n = walk(5, frames);

		printf("frames %d", n);
		for (int i = 0; i < n; i++)
			printf(" %p", frames[i]);
		printf("\n");
		fflush(stdout);
	}
	return 0;
}
