// SPDX-License-Identifier: MIT
/*
 * heartbeat: the benchmark victim.  It measures, from inside, how long it
 * was frozen.
 *
 * Usage: heartbeat idle|busy|deep NTHREADS SHMFILE|- [TICK_US]
 *
 * Calls backtrace() once (so libc's definition is bound, like a real job's),
 * starts NTHREADS worker threads that either sleep in pause() ("idle"),
 * sleep in pause() at the bottom of DEEP_BYTES of live stack ("deep": what
 * the activeness check's stack scan costs), or spin ("busy"), prints
 * "ready" and then turns the main thread into the
 * heartbeat: every TICK_US (default 100) microseconds it reads
 * CLOCK_MONOTONIC and keeps the largest gap between two consecutive ticks.
 * A ptrace stop freezes the heartbeat with every other thread, so the
 * largest gap over a window that contains one guard is the freeze as the
 * target felt it (plus at most one tick and one wake-up latency).
 *
 * The bench talks to it through SHMFILE, a file of at least 4096 bytes
 * that both map shared (layout below).  To start a window the bench writes
 * a new value to reset_req; the heartbeat answers on its next tick by
 * zeroing max_gap_ns and copying the value to reset_ack.  With "-" there is
 * no heartbeat at all (the fleet benchmark wants 500 quiet processes) and
 * the main thread sleeps like the workers.
 */
#include <errno.h>
#include <execinfo.h>
#include <fcntl.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

/* The shared page; offsets are part of the contract with bench/run. */
struct beat_page {
	uint64_t magic;                  /*  0: BEAT_MAGIC once the victim runs */
	_Atomic uint64_t reset_req;      /*  8: written by the bench */
	_Atomic uint64_t reset_ack;      /* 16: reset_req once honoured */
	_Atomic uint64_t max_gap_ns;     /* 24: largest tick gap since the reset */
	_Atomic uint64_t ticks;          /* 32: ticks since start */
};

#define BEAT_MAGIC 0x5441454248475442ull /* "BTGHBEAT" little-endian */
#define MAX_THREADS 4096
/* Live stack of each "deep" thread; its stack is twice that. */
#define DEEP_BYTES  (512u << 10)
#define DEEP_FRAME  1024u

static atomic_int started;
static volatile uint64_t sink;

static void *sleeper(void *arg)
{
	(void)arg;
	atomic_fetch_add(&started, 1);
	for (;;)
		pause();
	return NULL;
}

/* Each level keeps DEEP_FRAME bytes live on the stack until the bottom. */
static int descend(unsigned level)
{
	volatile uint8_t frame[DEEP_FRAME];

	frame[0] = (uint8_t)level;
	if (level * DEEP_FRAME < DEEP_BYTES)
		return descend(level + 1) + frame[0];
	atomic_fetch_add(&started, 1);
	while (pause() < 0 || level)
		;
	return 0;
}

static void *deep_sleeper(void *arg)
{
	(void)arg;
	descend(1);
	return NULL;
}

static void *spinner(void *arg)
{
	uint64_t x = 0;

	(void)arg;
	atomic_fetch_add(&started, 1);
	for (;;) {
		x++;
		/* Touch memory now and then so the loop is not optimised away. */
		if ((x & 0xffff) == 0)
			sink = x;
	}
	return NULL;
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static struct beat_page *map_page(const char *path)
{
	void *p;
	int fd = open(path, O_RDWR | O_CLOEXEC);

	if (fd < 0) {
		perror(path);
		return NULL;
	}
	p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
	close(fd);
	if (p == MAP_FAILED) {
		perror("mmap");
		return NULL;
	}
	return p;
}

static void beat(struct beat_page *pg, long tick_us)
{
	const struct timespec tick = { .tv_sec = 0, .tv_nsec = tick_us * 1000 };
	uint64_t last = now_ns(), max = 0, ack = atomic_load(&pg->reset_ack);

	for (;;) {
		uint64_t t, gap, req;

		clock_nanosleep(CLOCK_MONOTONIC, 0, &tick, NULL);
		t = now_ns();
		gap = t - last;
		last = t;
		req = atomic_load(&pg->reset_req);
		if (req != ack) {
			/* The gap that ends here started before the reset. */
			max = 0;
			atomic_store(&pg->max_gap_ns, 0);
			ack = req;
			atomic_store(&pg->reset_ack, ack);
		} else if (gap > max) {
			max = gap;
			atomic_store(&pg->max_gap_ns, max);
		}
		atomic_fetch_add(&pg->ticks, 1);
	}
}

int main(int argc, char **argv)
{
	void *buf[16];
	void *(*fn)(void *);
	struct beat_page *pg = NULL;
	long tick_us = 100;
	pthread_t t;
	int n;

	if (argc < 4 || argc > 5 || (n = atoi(argv[2])) < 0 || n > MAX_THREADS ||
	    (strcmp(argv[1], "idle") != 0 && strcmp(argv[1], "busy") != 0 &&
	     strcmp(argv[1], "deep") != 0) ||
	    (argc == 5 && ((tick_us = atol(argv[4])) < 1 || tick_us > 999999))) {
		fprintf(stderr, "usage: %s idle|busy|deep NTHREADS SHMFILE|- [TICK_US]\n", argv[0]);
		return 2;
	}
	fn = strcmp(argv[1], "busy") == 0 ? spinner : strcmp(argv[1], "deep") == 0 ? deep_sleeper : sleeper;
	if (strcmp(argv[3], "-") != 0 && !(pg = map_page(argv[3])))
		return 1;
	if (backtrace(buf, 16) <= 0) {
		fprintf(stderr, "backtrace returned nothing\n");
		return 1;
	}
	/* Small stacks: 1,024 threads x 8 MiB of reservation is pointless here. */
	pthread_attr_t attr;
	pthread_attr_init(&attr);
	pthread_attr_setstacksize(&attr, fn == deep_sleeper ? 2 * DEEP_BYTES : 64 * 1024);
	for (int i = 0; i < n; i++) {
		int r = pthread_create(&t, &attr, fn, NULL);

		if (r != 0) {
			fprintf(stderr, "pthread_create: %s\n", strerror(r));
			return 1;
		}
	}
	pthread_attr_destroy(&attr);
	while (atomic_load(&started) < n)
		usleep(1000);
	if (pg) {
		/* The default 50 us timer slack would make every tick ~150 us. */
		prctl(PR_SET_TIMERSLACK, 1UL, 0, 0, 0);
		pg->magic = BEAT_MAGIC;
	}
	printf("ready\n");
	fflush(stdout);
	if (pg)
		beat(pg, tick_us);
	for (;;)
		pause();
}
