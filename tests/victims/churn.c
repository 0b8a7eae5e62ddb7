// SPDX-License-Identifier: MIT
/*
 * churn: targets that change under the daemon's hands.
 *
 * Usage: churn storm [--report FILE]
 *        churn exit MS NTHREADS
 *        churn exec MS NTHREADS GENERATION
 *
 * storm: a spawner thread starts a new thread every millisecond (hundreds
 *        per second, a few alive at any time); each calls backtrace() once,
 *        counts what it returned and exits.  With --report, FILE is
 *        rewritten atomically every 50 ms with one line:
 *            created N zero Z nonzero NZ
 *        (threads created, and backtrace() calls that returned 0 / >0).
 * exit:  NTHREADS threads call backtrace() in a loop; MS milliseconds after
 *        "ready" the process exits with status 0 (exit_group mid-work).
 * exec:  the same threads; every MS milliseconds the process execs itself
 *        with GENERATION + 1 (visible in /proc/PID/cmdline).  Only the
 *        first generation (0) prints "ready".
 */
#include <execinfo.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static atomic_ulong created, zero, nonzero;
static const char *report_path;

static void sleep_ms(long ms)
{
	struct timespec ts = { .tv_sec = ms / 1000, .tv_nsec = (ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) != 0)
		;
}

static void count_backtrace(void)
{
	void *buf[64];

	if (backtrace(buf, 64) > 0)
		atomic_fetch_add(&nonzero, 1);
	else
		atomic_fetch_add(&zero, 1);
}

static void *short_lived(void *arg)
{
	(void)arg;
	count_backtrace();
	return NULL;
}

static void *spawner(void *arg)
{
	pthread_attr_t attr;
	pthread_t t;

	(void)arg;
	pthread_attr_init(&attr);
	pthread_attr_setdetachstate(&attr, PTHREAD_CREATE_DETACHED);
	for (;;) {
		if (pthread_create(&t, &attr, short_lived, NULL) == 0)
			atomic_fetch_add(&created, 1);
		sleep_ms(1);
	}
	return NULL;
}

static void publish(void)
{
	char tmp[4096];
	FILE *f;

	if (snprintf(tmp, sizeof(tmp), "%s.tmp", report_path) >= (int)sizeof(tmp))
		return;
	f = fopen(tmp, "w");
	if (!f)
		return;
	fprintf(f, "created %lu zero %lu nonzero %lu\n", atomic_load(&created),
		atomic_load(&zero), atomic_load(&nonzero));
	if (fclose(f) == 0)
		rename(tmp, report_path);
}

static void *looper(void *arg)
{
	(void)arg;
	for (;;)
		count_backtrace();
	return NULL;
}

static int start_loopers(int n)
{
	pthread_t t;

	for (int i = 0; i < n; i++)
		if (pthread_create(&t, NULL, looper, NULL) != 0)
			return -1;
	return 0;
}

static void ready(void)
{
	printf("ready\n");
	fflush(stdout);
}

static int storm(void)
{
	pthread_t t;

	count_backtrace();
	if (pthread_create(&t, NULL, spawner, NULL) != 0)
		return 1;
	while (atomic_load(&created) < 10)
		sleep_ms(1);
	ready();
	for (;;) {
		if (report_path)
			publish();
		sleep_ms(50);
	}
}

int main(int argc, char **argv)
{
	if (argc >= 2 && strcmp(argv[1], "storm") == 0 &&
	    (argc == 2 || (argc == 4 && strcmp(argv[2], "--report") == 0))) {
		report_path = argc == 4 ? argv[3] : NULL;
		return storm();
	}
	if (argc == 4 && strcmp(argv[1], "exit") == 0) {
		if (start_loopers(atoi(argv[3])) < 0)
			return 1;
		ready();
		sleep_ms(atol(argv[2]));
		exit(0);
	}
	if (argc == 5 && strcmp(argv[1], "exec") == 0) {
		char next[32];
		int gen = atoi(argv[4]);

		if (start_loopers(atoi(argv[3])) < 0)
			return 1;
		if (gen == 0)
			ready();
		sleep_ms(atol(argv[2]));
		snprintf(next, sizeof(next), "%d", gen + 1);
		execl("/proc/self/exe", argv[0], "exec", argv[2], argv[3], next, (char *)NULL);
		perror("execl");
		return 1;
	}
	fprintf(stderr, "usage: %s storm [--report FILE] | exit MS NTHREADS | "
		"exec MS NTHREADS GENERATION\n", argv[0]);
	return 2;
}
