// SPDX-License-Identifier: MIT
/*
 * exec_when_seized: execs the moment a tracer holds one of its threads.
 *
 * Usage: exec_when_seized NTHREADS
 *
 * Starts NTHREADS (at least 2) idle threads and prints "ready".  Its last
 * thread then watches the first one's TracerPid, and as soon as a tracer
 * has seized that thread (and maybe not yet the others), it execs this
 * program again, which prints "exec'd PID" and sleeps.  The exec's
 * de_thread() kills the seized thread and waits until its tracer reaps it;
 * a tracer that meanwhile waits to seize the next thread waits for the
 * exec's cred_guard_mutex: without care each waits for the other for good.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#define MAX_THREADS 64

static atomic_int tids[MAX_THREADS];

static int tracer_of(int tid)
{
	char path[64], line[256];
	int tracer = 0;
	FILE *f;

	snprintf(path, sizeof(path), "/proc/self/task/%d/status", tid);
	f = fopen(path, "r");
	if (!f)
		return 0;
	while (fgets(line, sizeof(line), f))
		if (sscanf(line, "TracerPid: %d", &tracer) == 1)
			break;
	fclose(f);
	return tracer;
}

static void *idle(void *arg)
{
	atomic_store(&tids[(long)arg], (int)syscall(SYS_gettid));
	for (;;)
		pause();
	return NULL;
}

static void *watcher(void *arg)
{
	(void)arg;
	while (!tracer_of(atomic_load(&tids[0])))
		usleep(200);
	execl("/proc/self/exe", "exec_when_seized", "--exec'd", (char *)NULL);
	perror("execl");
	_exit(2);
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 0;
	pthread_t t;

	setvbuf(stdout, NULL, _IOLBF, 0);
	if (argc > 1 && !strcmp(argv[1], "--exec'd")) {
		printf("exec'd %d\n", (int)getpid());
		for (;;)
			pause();
	}
	if (n < 2 || n > MAX_THREADS) {
		fprintf(stderr, "usage: exec_when_seized NTHREADS (2..%d)\n", MAX_THREADS);
		return 2;
	}
	for (long i = 0; i < n - 1; i++)
		if (pthread_create(&t, NULL, idle, (void *)i) != 0)
			return 2;
	for (int i = 0; i < n - 1; i++)
		while (!atomic_load(&tids[i]))
			usleep(1000);
	if (pthread_create(&t, NULL, watcher, NULL) != 0)
		return 2;
	printf("ready\n");
	for (;;)
		pause();
}
