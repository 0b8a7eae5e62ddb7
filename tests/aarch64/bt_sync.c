// SPDX-License-Identifier: MIT
/*
 * bt_sync: a backtrace() hammer that answers, when asked, what the calls
 * made since the question returned.  The aarch64 test checks each of its
 * hundreds of guard/unguard cycles with it: bt_loop's report needs two of
 * its 50 ms periods and the shell's polling, about 0.2 s a check under
 * TCG, longer than the guard itself.
 *
 * Usage: bt_sync NTHREADS
 *
 * NTHREADS workers call glibc's backtrace() nonstop, from a recursion
 * depth that cycles 0..20 as in bt_loop.  Every line read from stdin
 * starts a new generation.  A call belongs to the generation current when
 * it *started*, so a call already inside backtrace() when the line came
 * (which may rightly still return real frames after a guard) counts for
 * nothing.  Once every worker has completed MIN_CALLS calls of the new
 * generation, one line goes to stdout:
 *
 *   gen G zero Z real R traced T stopped S
 *   gen G stuck thread I tid T
 *
 * Z and R count the calls of generation G, all workers; T and S the
 * threads whose /proc/self/task/TID/status then shows a tracer or a stop
 * (t or T): after a request returned, both must be 0.  Reading them here
 * spares the test a process per check (an exec costs about 30 ms under
 * TCG).  "stuck": worker I completed no call in STUCK_MS, so it is stopped
 * (or the process is starved); EOF on stdin ends the program.
 */
#include <dirent.h>
#include <execinfo.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define MAX_THREADS 64
#define MAX_DEPTH   20
#define BT_CAP      128
#define MIN_CALLS   1
/* TCG on a loaded host is slow, but not a minute per call. */
#define STUCK_MS    60000

/*
 * Each worker owns its fields; the asker only reads them.  gen is stored
 * (release) after zero and real are reset, so an asker that sees gen == G
 * (acquire) sees counts of generation G only.
 */
struct worker {
	_Alignas(64) atomic_uint gen;
	atomic_ulong zero;
	atomic_ulong real;
	int tid;
	int idx;
};

static struct worker workers[MAX_THREADS];
static atomic_uint current_gen;
static atomic_int started;

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
	unsigned mine = 0;
	int depth = w->idx % (MAX_DEPTH + 1);

	w->tid = (int)syscall(SYS_gettid);
	atomic_fetch_add(&started, 1);
	for (;;) {
		/* Read before the call starts: the call belongs to this generation. */
		unsigned g = atomic_load_explicit(&current_gen, memory_order_acquire);
		int n = descend(depth);

		if (g != mine) {
			mine = g;
			atomic_store_explicit(&w->zero, 0, memory_order_relaxed);
			atomic_store_explicit(&w->real, 0, memory_order_relaxed);
			atomic_store_explicit(&w->gen, g, memory_order_release);
		}
		atomic_fetch_add_explicit(n > 0 ? &w->real : &w->zero, 1, memory_order_relaxed);
		depth = (depth + 1) % (MAX_DEPTH + 1);
	}
	return NULL;
}

static long elapsed_ms(const struct timespec *t0)
{
	struct timespec t;

	clock_gettime(CLOCK_MONOTONIC, &t);
	return (t.tv_sec - t0->tv_sec) * 1000 + (t.tv_nsec - t0->tv_nsec) / 1000000;
}

/* Counts our threads with a tracer (*traced) and in a stop (*stopped). */
static void scan_tasks(unsigned *traced, unsigned *stopped)
{
	struct dirent *d;
	DIR *dir = opendir("/proc/self/task");

	*traced = *stopped = 0;
	if (!dir) {
		*traced = *stopped = 9999;   /* cannot tell: never "0" */
		return;
	}
	while ((d = readdir(dir))) {
		char path[sizeof(d->d_name) + 32], line[128];
		FILE *f;

		if (d->d_name[0] == '.')
			continue;
		snprintf(path, sizeof(path), "/proc/self/task/%s/status", d->d_name);
		f = fopen(path, "r");
		if (!f) {
			(*traced)++;
			continue;
		}
		while (fgets(line, sizeof(line), f)) {
			char state;
			int tracer;

			if (sscanf(line, "State: %c", &state) == 1 && (state == 't' || state == 'T'))
				(*stopped)++;
			if (sscanf(line, "TracerPid: %d", &tracer) == 1) {
				if (tracer != 0)
					(*traced)++;
				break;   /* it comes after State */
			}
		}
		fclose(f);
	}
	closedir(dir);
}

/* Waits for MIN_CALLS calls of generation g from every worker, then answers. */
static void answer(int nworkers, unsigned g)
{
	const struct timespec tick = { 0, 1000 * 1000 };
	unsigned long zero = 0, real = 0;
	unsigned traced, stopped;
	struct timespec t0;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (int i = 0; i < nworkers; i++) {
		struct worker *w = &workers[i];
		unsigned long z, r;

		for (;;) {
			if (atomic_load_explicit(&w->gen, memory_order_acquire) == g) {
				z = atomic_load_explicit(&w->zero, memory_order_relaxed);
				r = atomic_load_explicit(&w->real, memory_order_relaxed);
				if (z + r >= MIN_CALLS)
					break;
			}
			if (elapsed_ms(&t0) > STUCK_MS) {
				printf("gen %u stuck thread %d tid %d\n", g, i, w->tid);
				fflush(stdout);
				return;
			}
			nanosleep(&tick, NULL);
		}
		zero += z;
		real += r;
	}
	scan_tasks(&traced, &stopped);
	printf("gen %u zero %lu real %lu traced %u stopped %u\n", g, zero, real, traced, stopped);
	fflush(stdout);
}

int main(int argc, char **argv)
{
	char line[64];
	pthread_t t;
	int nworkers;

	nworkers = argc == 2 ? atoi(argv[1]) : 0;
	if (nworkers < 1 || nworkers > MAX_THREADS) {
		fprintf(stderr, "usage: %s NTHREADS (1..%d)\n", argv[0], MAX_THREADS);
		return 2;
	}
	for (int i = 0; i < nworkers; i++) {
		workers[i].idx = i;
		if (pthread_create(&t, NULL, worker_main, &workers[i]) != 0) {
			perror("pthread_create");
			return 1;
		}
	}
	while (atomic_load(&started) < nworkers)
		usleep(1000);
	printf("ready\n");
	fflush(stdout);
	while (fgets(line, sizeof(line), stdin))
		answer(nworkers, atomic_fetch_add_explicit(&current_gen, 1, memory_order_release) + 1);
	return 0;
}
