// SPDX-License-Identifier: MIT
/*
 * btcost: what one backtrace() call costs, on demand.
 *
 * Usage: btcost
 *
 * Prints "ready"; for every line read on stdin, calls backtrace() CALLS
 * times from a fixed depth (twelve frames of a noinline function, about
 * what a torch error's c10::Error meets) and prints "ns N FRAMES": the
 * mean nanoseconds per call (CLOCK_MONOTONIC around the loop) and the
 * frames the last call returned.  bench/run measures it unguarded, with
 * the empty stub and with the segment walk, interleaved.
 */
#include <execinfo.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

#define CALLS 20000
#define DEPTH 12
#define CAP   64

static int __attribute__((noinline)) at_depth(int depth, void **frames)
{
	int n = depth > 0 ? at_depth(depth - 1, frames) : backtrace(frames, CAP);

	__asm__ volatile("" ::: "memory");   /* not a tail call: the frame stays */
	return n;
}

int main(void)
{
	void *frames[CAP];
	char line[16];

	at_depth(DEPTH, frames);   /* glibc loads libgcc's unwinder on the first call */
	printf("ready\n");
	fflush(stdout);
	while (fgets(line, sizeof(line), stdin)) {
		struct timespec t0, t1;
		int n = 0;

		clock_gettime(CLOCK_MONOTONIC, &t0);
		for (int i = 0; i < CALLS; i++)
			n = at_depth(DEPTH, frames);
		clock_gettime(CLOCK_MONOTONIC, &t1);
		printf("ns %.1f %d\n", ((double)(t1.tv_sec - t0.tv_sec) * 1e9 +
					(double)(t1.tv_nsec - t0.tv_nsec)) / CALLS, n);
		fflush(stdout);
	}
	return 0;
}
