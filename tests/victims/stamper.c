// SPDX-License-Identifier: MIT
/*
 * stamper: proves every task was stopped while btguardd held the process.
 *
 * Usage: stamper NTHREADS [--sibling]
 *
 * The main thread, NTHREADS threads and, with --sibling, a process sharing
 * the memory (clone(CLONE_VM) without CLONE_THREAD) each read
 * CLOCK_MONOTONIC in a tight loop, never calling backtrace(), and record
 * every gap of more than 20 us between two readings: a time it did not
 * run.  While the daemon holds the process, every task must be in such a
 * gap; a task it failed to stop keeps stamping.
 *
 * On SIGUSR1 the main thread prints, for each task, "gaps IDX TID LAST
 * S1:E1 S2:E2 ..." (nanoseconds: its latest reading, then the last GAPS
 * gaps), then "end".
 */
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define MAX_TASKS 64
#define GAPS      512
#define GAP_NS    20000u

struct task {
	_Alignas(64) atomic_int tid;
	atomic_ulong n;                 /* gaps recorded, ever */
	_Atomic uint64_t last;          /* the latest reading: a gap may be under way since */
	uint64_t start[GAPS], end[GAPS];
};

static struct task tasks[MAX_TASKS];
static int ntasks;
static volatile sig_atomic_t want_report;

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void report(void)
{
	for (int i = 0; i < ntasks; i++) {
		struct task *t = &tasks[i];
		unsigned long n = atomic_load(&t->n);

		printf("gaps %d %d %llu", i, atomic_load(&t->tid),
		       (unsigned long long)atomic_load_explicit(&t->last, memory_order_relaxed));
		for (unsigned long k = n > GAPS ? n - GAPS : 0; k < n; k++)
			printf(" %llu:%llu", (unsigned long long)t->start[k % GAPS],
			       (unsigned long long)t->end[k % GAPS]);
		printf("\n");
	}
	printf("end\n");
	fflush(stdout);
}

/* Stamps forever; the main thread (main) also answers report requests. */
static void stamp(struct task *t, int main)
{
	uint64_t prev = now_ns();

	atomic_store(&t->tid, (int)syscall(SYS_gettid));
	for (;;) {
		uint64_t now = now_ns();

		if (now - prev > GAP_NS) {
			unsigned long n = atomic_load_explicit(&t->n, memory_order_relaxed);

			t->start[n % GAPS] = prev;
			t->end[n % GAPS] = now;
			atomic_store_explicit(&t->n, n + 1, memory_order_release);
		}
		prev = now;
		atomic_store_explicit(&t->last, now, memory_order_relaxed);
		if (main && want_report) {
			want_report = 0;
			report();
			prev = now_ns();
		}
	}
}

static void *thread_main(void *arg)
{
	stamp(arg, 0);
	return NULL;
}

static int sibling_main(void *arg)
{
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	stamp(arg, 0);
	return 0;
}

static void on_usr1(int sig)
{
	(void)sig;
	want_report = 1;
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 4;
	int sibling = argc > 2 && !strcmp(argv[2], "--sibling");
	struct sigaction sa;
	pthread_t t;

	if (n < 0 || n + 2 > MAX_TASKS) {
		fprintf(stderr, "usage: stamper NTHREADS [--sibling]\n");
		return 2;
	}
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_usr1;
	sigaction(SIGUSR1, &sa, NULL);
	ntasks = n + 1 + sibling;
	for (int i = 1; i <= n; i++)
		if (pthread_create(&t, NULL, thread_main, &tasks[i]) != 0)
			return 2;
	if (sibling) {
		size_t size = 256 << 10;
		char *stack = mmap(NULL, size, PROT_READ | PROT_WRITE,
				   MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);

		if (stack == MAP_FAILED ||
		    clone(sibling_main, stack + size, CLONE_VM | SIGCHLD, &tasks[n + 1]) < 0)
			return 2;
	}
	for (int i = 1; i < ntasks; i++)
		while (!atomic_load(&tasks[i].tid))
			usleep(1000);
	printf("ready\n");
	fflush(stdout);
	stamp(&tasks[0], 1);
}
