// SPDX-License-Identifier: MIT
/*
 * ptfloor: the plain-ptrace floor the benchmark compares btguardd with.
 *
 * Usage: ptfloor [--phases] PID...
 *
 * Stops every thread of PID the plainest correct way (PTRACE_SEIZE +
 * PTRACE_INTERRUPT per thread, then waitpid for each stop) and lets them
 * all go again with PTRACE_DETACH, doing nothing in between.  The thread
 * list is read before the first stop and not re-read, so this is a lower
 * bound: btguardd must also re-list the threads (one may have been born in
 * the meantime), read registers, check stacks and write.  Prints the
 * microseconds from the first PTRACE_SEIZE to the last PTRACE_DETACH.
 * The benchmark measures the same window from inside the target too.
 * Several PIDs are done one after the other, a line each, in one process:
 * a fleet's floor without the cost of starting a program per process.
 * --phases adds three figures to each line, in microseconds: seizing (the
 * SEIZE + INTERRUPT loop), stopping (the waits) and detaching, to set
 * beside the phases btguardd logs at debug level (bench/ab).
 */
#include <dirent.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <time.h>

#define MAX_TIDS 8192

static double now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec * 1e6 + ts.tv_nsec / 1e3;
}

static int list_tids(int pid, int *tids, int cap)
{
	char path[64];
	struct dirent *de;
	DIR *d;
	int n = 0;

	snprintf(path, sizeof(path), "/proc/%d/task", pid);
	d = opendir(path);
	if (!d)
		return -errno;
	while ((de = readdir(d)) && n < cap)
		if (de->d_name[0] != '.')
			tids[n++] = atoi(de->d_name);
	closedir(d);
	return n;
}

/*
 * Stops and releases every thread of pid: the microseconds it took, or -1;
 * phase[0..2] the seizing, the stopping and the detaching.
 */
static double stop_and_release(int pid, double phase[3])
{
	static int tids[MAX_TIDS];
	int n, seized = 0, rc = 0;
	double t0, t1, ta, tb;

	n = list_tids(pid, tids, MAX_TIDS);
	if (n <= 0) {
		fprintf(stderr, "ptfloor: cannot list threads of %d: %s\n", pid, strerror(-n));
		return -1;
	}
	t0 = now_us();
	for (; seized < n; seized++) {
		if (ptrace(PTRACE_SEIZE, tids[seized], 0, 0) < 0 ||
		    ptrace(PTRACE_INTERRUPT, tids[seized], 0, 0) < 0) {
			fprintf(stderr, "ptfloor: seize %d: %s\n", tids[seized], strerror(errno));
			rc = -1;
			break;
		}
	}
	ta = now_us();
	for (int i = 0; i < seized; i++) {
		int st;

		if (waitpid(tids[i], &st, __WALL) < 0) {
			fprintf(stderr, "ptfloor: waitpid %d: %s\n", tids[i], strerror(errno));
			rc = -1;
		}
	}
	tb = now_us();
	for (int i = 0; i < seized; i++)
		if (ptrace(PTRACE_DETACH, tids[i], 0, 0) < 0)
			rc = -1;
	t1 = now_us();
	phase[0] = ta - t0;
	phase[1] = tb - ta;
	phase[2] = t1 - tb;
	return rc < 0 ? -1 : t1 - t0;
}

static int usage(const char *argv0)
{
	fprintf(stderr, "usage: %s [--phases] PID...\n", argv0);
	return 2;
}

int main(int argc, char **argv)
{
	int rc = 0, first = 1, phases = 0;

	if (argc > 1 && strcmp(argv[1], "--phases") == 0)
		phases = first = 2;
	if (argc <= first)
		return usage(argv[0]);
	for (int i = first; i < argc; i++) {
		int pid = atoi(argv[i]);
		double us, phase[3];

		if (pid <= 0)
			return usage(argv[0]);
		us = stop_and_release(pid, phase);
		if (us < 0)
			rc = 1;
		else if (phases)
			printf("%.0f %.0f %.0f %.0f\n", us, phase[0], phase[1], phase[2]);
		else
			printf("%.0f\n", us);
	}
	return rc;
}
