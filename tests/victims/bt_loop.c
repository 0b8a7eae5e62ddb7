// SPDX-License-Identifier: MIT
/*
 * bt_loop: the victim that makes guarding observable.
 *
 * Usage: bt_loop NTHREADS [--report FILE]
 *
 * Starts NTHREADS worker threads.  Each calls backtrace() in a tight loop
 * from a recursion depth that cycles 0..20 (through a noinline recursive
 * function, so the frame count really varies) and counts what the calls
 * return.  Prints "ready" once every worker has completed a first call.
 *
 * A reporter thread publishes the counters: every 50 ms it rewrites FILE
 * atomically (write FILE.tmp, rename) when --report is given, and on SIGUSR1
 * it prints the same report to stdout.  Format, one record per line:
 *
 *   seq N
 *   thread IDX TID CALLS ZERO NONZERO ZSTREAK NZSTREAK LAST MAX RECENTMAX
 *
 * CALLS/ZERO/NONZERO are cumulative; ZSTREAK (NZSTREAK) counts consecutive
 * calls that returned 0 (>0) up to now, so "every thread has a long zero
 * streak" proves every call that *started* after a guard returned 0 — a call
 * already inside backtrace() when the patch went in may legitimately still
 * return real frames.  RECENTMAX is the largest frame count since the
 * previous report.
 */
#include <errno.h>
#include <execinfo.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define MAX_THREADS 256
#define MAX_DEPTH   20
#define BT_CAP      128

/* One cache line per worker so the counters do not slow each other down. */
struct worker {
	_Alignas(64) atomic_ulong calls;
	atomic_ulong zero;
	atomic_ulong nonzero;
	atomic_ulong zstreak;
	atomic_ulong nzstreak;
	atomic_int last;
	atomic_int max;
	atomic_int recentmax;
	atomic_int tid;
	int idx;
};

static struct worker workers[MAX_THREADS];
static int nworkers;
static atomic_int started;
static const char *report_path;

static void record(struct worker *w, int n)
{
	atomic_store_explicit(&w->last, n, memory_order_relaxed);
	if (n > 0) {
		atomic_fetch_add_explicit(&w->nonzero, 1, memory_order_relaxed);
		atomic_fetch_add_explicit(&w->nzstreak, 1, memory_order_relaxed);
		atomic_store_explicit(&w->zstreak, 0, memory_order_relaxed);
	} else {
		atomic_fetch_add_explicit(&w->zero, 1, memory_order_relaxed);
		atomic_fetch_add_explicit(&w->zstreak, 1, memory_order_relaxed);
		atomic_store_explicit(&w->nzstreak, 0, memory_order_relaxed);
	}
	if (n > atomic_load_explicit(&w->max, memory_order_relaxed))
		atomic_store_explicit(&w->max, n, memory_order_relaxed);
	if (n > atomic_load_explicit(&w->recentmax, memory_order_relaxed))
		atomic_store_explicit(&w->recentmax, n, memory_order_relaxed);
	/* Counted last: a report never shows a call whose result is missing. */
	atomic_fetch_add_explicit(&w->calls, 1, memory_order_release);
}

/* noinline + the volatile sink keep every level a real frame. */
static __attribute__((noinline)) int descend(int depth)
{
	void *buf[BT_CAP];
	volatile int sink;

	if (depth > 0) {
		sink = descend(depth - 1);
		return sink;
	}
	sink = backtrace(buf, BT_CAP);
	return sink;
}

static void *worker_main(void *arg)
{
	struct worker *w = arg;
	int depth = w->idx % (MAX_DEPTH + 1);

	atomic_store(&w->tid, (int)syscall(SYS_gettid));
	record(w, descend(depth));
	atomic_fetch_add(&started, 1);
	for (;;) {
		depth = (depth + 1) % (MAX_DEPTH + 1);
		record(w, descend(depth));
	}
	return NULL;
}

/* Only the file report resets RECENTMAX, so a SIGUSR1 print does not steal it. */
static void write_report(FILE *f, unsigned long seq, int reset_recent)
{
	fprintf(f, "seq %lu\n", seq);
	for (int i = 0; i < nworkers; i++) {
		struct worker *w = &workers[i];
		unsigned long calls = atomic_load_explicit(&w->calls, memory_order_acquire);

		fprintf(f, "thread %d %d %lu %lu %lu %lu %lu %d %d %d\n", i,
			atomic_load(&w->tid), calls, atomic_load(&w->zero),
			atomic_load(&w->nonzero), atomic_load(&w->zstreak),
			atomic_load(&w->nzstreak), atomic_load(&w->last),
			atomic_load(&w->max),
			reset_recent ? atomic_exchange(&w->recentmax, 0)
				     : atomic_load(&w->recentmax));
	}
}

static void publish(unsigned long seq)
{
	char tmp[4096];
	FILE *f;

	if (snprintf(tmp, sizeof(tmp), "%s.tmp", report_path) >= (int)sizeof(tmp))
		return;
	f = fopen(tmp, "w");
	if (!f)
		return;
	write_report(f, seq, 1);
	if (fclose(f) == 0)
		rename(tmp, report_path);
}

/* SIGUSR1 is blocked everywhere; only this thread takes it, via sigtimedwait. */
static void *reporter_main(void *arg)
{
	const sigset_t *set = arg;
	const struct timespec period = { .tv_sec = 0, .tv_nsec = 50 * 1000 * 1000 };
	unsigned long seq = 0;

	for (;;) {
		int sig = sigtimedwait(set, NULL, &period);

		seq++;
		if (sig == SIGUSR1) {
			write_report(stdout, seq, 0);
			fflush(stdout);
		}
		if (report_path)
			publish(seq);
	}
	return NULL;
}

int main(int argc, char **argv)
{
	static sigset_t set;
	pthread_t t;

	if (argc < 2) {
		fprintf(stderr, "usage: %s NTHREADS [--report FILE]\n", argv[0]);
		return 2;
	}
	nworkers = atoi(argv[1]);
	if (nworkers < 1 || nworkers > MAX_THREADS) {
		fprintf(stderr, "NTHREADS must be 1..%d\n", MAX_THREADS);
		return 2;
	}
	if (argc == 4 && strcmp(argv[2], "--report") == 0)
		report_path = argv[3];
	else if (argc != 2) {
		fprintf(stderr, "usage: %s NTHREADS [--report FILE]\n", argv[0]);
		return 2;
	}

	sigemptyset(&set);
	sigaddset(&set, SIGUSR1);
	pthread_sigmask(SIG_BLOCK, &set, NULL);

	for (int i = 0; i < nworkers; i++) {
		workers[i].idx = i;
		if (pthread_create(&t, NULL, worker_main, &workers[i]) != 0) {
			perror("pthread_create");
			return 1;
		}
	}
	while (atomic_load(&started) < nworkers)
		usleep(1000);
	if (report_path)
		publish(0);
	if (pthread_create(&t, NULL, reporter_main, &set) != 0) {
		perror("pthread_create");
		return 1;
	}
	printf("ready\n");
	fflush(stdout);
	for (;;)
		pause();
}
