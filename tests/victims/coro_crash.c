// SPDX-License-Identifier: MIT
/*
 * coro_crash: the greenlet crash, made deterministic in a page of C.
 *
 * Usage: coro_crash [--pause-file PATH] [--threads N]
 *                   [--switch-lib PATH [--load-when PATH]]
 *
 * Two coroutines share ONE stack region and, like greenlet, copy their
 * stack slice out to a heap buffer when they switch out and back in when
 * they resume.  A slice is [saved sp, stop): it ends at the coroutine's
 * entry trampoline, whose unwind info describes an ordinary call frame,
 * so an unwinder leaving the coroutine believes a caller's return address
 * sits in the word at `stop` (at `stop + 8` on aarch64) -- a word that
 * belongs to no slice and is never saved or restored.
 *
 * The sequence (every step is fixed, so the outcome is too):
 *   1. coroutine A starts with its slice ending 4 KiB below the top of
 *      the shared stack (a greenlet first run from a deeper C call path)
 *      and yields at once;
 *   2. coroutine B starts at the top of the same stack, fills a local
 *      table with pointers and yields; the table covers A's return-address
 *      word, which now holds the address of a page that was unmapped;
 *   3. A is resumed (its slice copied back; the word above it is B's) and
 *      calls backtrace().  libgcc unwinds A's frames, reaches the
 *      trampoline, reads the stale word as the caller's PC, finds no FDE
 *      for it, and its Linux fallback (MD_FALLBACK_FRAME_STATE_FOR, on
 *      x86-64 and aarch64) reads the code at that PC to look for a
 *      sigreturn trampoline: SIGSEGV inside backtrace(), every time.
 *
 * With --pause-file, A prints "paused" before step 3's backtrace() and
 * polls for PATH every 10 ms (never calling backtrace() meanwhile): the
 * process is then idle inside the coroutine, on the shared stack, which is
 * the state an operator guards.  When backtrace() returns, A prints
 * "frames N" and the program exits 0; guarded, N is 0.  --threads N adds N
 * idle threads for the daemon to stop.  --switch-lib PATH runs the switch
 * code of PATH (libcoroswitch.c, copied under greenlet's name) instead of
 * the built-in copy; guarded with the segment walk, backtrace() then ends
 * at its trampoline and A prints "first victim_body", "last
 * coro_trampoline".  --load-when FILE loads it only once FILE exists
 * (after printing "waiting"): a switcher loaded after the guard.
 */
#include <dlfcn.h>
#include <errno.h>
#include <execinfo.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <time.h>
#include <unistd.h>

#define SHARED_STACK_SIZE (256 * 1024)
/* How far below B's start A's slice ends; B's table must reach past it. */
#define A_DEPTH           4096
#define TABLE_WORDS       2048          /* 16 KiB of B's frame */
#define BT_CAP            64
#define MAX_THREADS       1024

struct coro {
	/* The word at `stop` is where the trampoline's CFI says the caller's
	 * return address is; the slice is everything below it in use. */
	char *stop;
	void *sp;                       /* saved stack pointer while out */
	unsigned char *saved;           /* the slice, while switched out */
	size_t saved_len;
	void (*body)(struct coro *);
	int done;
};

/*
 * The switch code (coroswitch.h): built in, or, with --switch-lib, the
 * copy in a shared object of its own, as greenlet's lives in its
 * extension (a stack switcher the segment walk knows by its file name).
 */
#define CORO_VISIBILITY ".hidden"
#include "coroswitch.h"

static void (*switch_fn)(void **save_sp, void *load_sp) = coro_switch;
static void (*trampoline_fn)(void) = coro_trampoline;
void coro_entry(struct coro *c) __attribute__((noreturn));

static void *main_sp;                   /* main's sp while a coroutine runs */
static struct coro *current;
static const char *pause_file;
static void *poison;                    /* an address with nothing mapped */

static void die(const char *what)
{
	fprintf(stderr, "coro_crash: %s: %s\n", what, strerror(errno));
	exit(1);
}

static void coro_yield(void)
{
	switch_fn(&current->sp, main_sp);
}

void coro_entry(struct coro *c)
{
	c->body(c);
	c->done = 1;
	for (;;)
		coro_yield();
}

static void coro_init(struct coro *c, char *stop, void (*body)(struct coro *))
{
	struct coro_first_frame f = CORO_FIRST_FRAME((uint64_t)(uintptr_t)c,
						     (uint64_t)(uintptr_t)coro_entry,
						     (uint64_t)(uintptr_t)trampoline_fn);

	/* The ABI's alignment at a function's entry (coroswitch.h). */
	if (((uintptr_t)stop + CORO_STOP_GAP) % 16 != 0)
		abort();
	c->stop = stop;
	c->sp = stop - sizeof(f);
	c->body = body;
	c->saved_len = sizeof(f);
	c->saved = malloc(sizeof(f));
	if (!c->saved)
		die("malloc");
	memcpy(c->saved, &f, sizeof(f));
}

/* Copies the slice in, runs the coroutine until it yields, copies it out.
 * The copying happens here, on main's own stack, never on the shared one. */
static void coro_resume(struct coro *c)
{
	size_t len;

	memcpy(c->sp, c->saved, c->saved_len);
	current = c;
	switch_fn(&main_sp, c->sp);
	current = NULL;
	len = (size_t)(c->stop - (char *)c->sp);
	free(c->saved);
	c->saved = malloc(len);
	if (!c->saved)
		die("malloc");
	memcpy(c->saved, c->sp, len);
	c->saved_len = len;
}

static void wait_quietly(const char *path)
{
	const struct timespec tick = { 0, 10 * 1000 * 1000 };

	while (access(path, F_OK) != 0)
		nanosleep(&tick, NULL);
}

static void wait_for_file(const char *path)
{
	printf("paused\n");
	fflush(stdout);
	wait_quietly(path);
}

static const char *name_of(void *pc)
{
	Dl_info info;

	return dladdr(pc, &info) && info.dli_sname ? info.dli_sname : "?";
}

/* Coroutine A: parks once, then (resumed from elsewhere) walks its stack. */
void victim_body(struct coro *c);
void victim_body(struct coro *c)
{
	void *frames[BT_CAP];
	int n;

	(void)c;
	coro_yield();
	if (pause_file)
		wait_for_file(pause_file);
	n = backtrace(frames, BT_CAP);
	printf("frames %d\n", n);
	/* Where the walk began and ended, by the nearest exported name (-rdynamic). */
	if (n > 0)
		printf("first %s\nlast %s\n", name_of(frames[0]), name_of(frames[n - 1]));
	fflush(stdout);
}

static struct coro coro_a, coro_b;

/* Coroutine B: a frame full of pointers, as any real coroutine leaves
 * behind; here they all name the unmapped page so the result is fixed. */
static void scribbler_body(struct coro *c)
{
	void *volatile table[TABLE_WORDS];
	uintptr_t lo = (uintptr_t)&table[0], hi = (uintptr_t)&table[TABLE_WORDS];
	uintptr_t slot = CORO_CALLER_WORD(coro_a.stop);

	(void)c;
	if (slot < lo || slot + 8 > hi) {
		fprintf(stderr, "coro_crash: B's table [%#lx, %#lx) misses A's "
			"return-address word %#lx\n", (unsigned long)lo,
			(unsigned long)hi, (unsigned long)slot);
		exit(1);
	}
	for (int i = 0; i < TABLE_WORDS; i++)
		table[i] = poison;
	coro_yield();
}

/* The switch code of lib, loaded once the file load_when exists (at once without). */
static int load_switch(const char *lib, const char *load_when)
{
	void *h;

	if (load_when) {
		printf("waiting\n");
		fflush(stdout);
		wait_quietly(load_when);
	}
	h = dlopen(lib, RTLD_NOW);
	if (!h || !(switch_fn = (void (*)(void **, void *))dlsym(h, "coro_switch")) ||
	    !(trampoline_fn = (void (*)(void))dlsym(h, "coro_trampoline"))) {
		fprintf(stderr, "coro_crash: %s\n", dlerror());
		return -1;
	}
	return 0;
}

static void *idle_thread(void *arg)
{
	(void)arg;
	for (;;)
		pause();
	return NULL;
}

int main(int argc, char **argv)
{
	void *frames[BT_CAP];
	char *stack, *top;
	const char *switch_lib = NULL, *load_when = NULL;
	int nthreads = 0;
	pthread_t t;

	for (int i = 1; i < argc; i++) {
		if (strcmp(argv[i], "--pause-file") == 0 && i + 1 < argc) {
			pause_file = argv[++i];
		} else if (strcmp(argv[i], "--switch-lib") == 0 && i + 1 < argc) {
			switch_lib = argv[++i];
		} else if (strcmp(argv[i], "--load-when") == 0 && i + 1 < argc) {
			load_when = argv[++i];
		} else if (strcmp(argv[i], "--threads") == 0 && i + 1 < argc) {
			nthreads = atoi(argv[++i]);
			if (nthreads < 0 || nthreads > MAX_THREADS)
				goto usage;
		} else {
			goto usage;
		}
	}
	if (switch_lib && load_switch(switch_lib, load_when) < 0)
		return 2;
	for (int i = 0; i < nthreads; i++) {
		errno = pthread_create(&t, NULL, idle_thread, NULL);
		if (errno)
			die("pthread_create");
	}
	/* glibc loads libgcc_s on the first backtrace(); do it now, on the
	 * normal stack, so no later mmap can land on the poison page. */
	if (backtrace(frames, BT_CAP) <= 0) {
		fprintf(stderr, "coro_crash: backtrace() found no frames\n");
		return 1;
	}
	stack = mmap(NULL, SHARED_STACK_SIZE, PROT_READ | PROT_WRITE,
		     MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
	if (stack == MAP_FAILED)
		die("mmap stack");
	poison = mmap(NULL, 4096, PROT_READ, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (poison == MAP_FAILED)
		die("mmap poison");
	if (munmap(poison, 4096) != 0)
		die("munmap poison");

	top = stack + SHARED_STACK_SIZE;
	coro_init(&coro_a, top - A_DEPTH - CORO_STOP_GAP, victim_body);
	coro_init(&coro_b, top - CORO_STOP_GAP, scribbler_body);
	coro_resume(&coro_a);           /* step 1: A parks */
	coro_resume(&coro_b);           /* step 2: B overwrites A's caller word */
	coro_resume(&coro_a);           /* step 3: A pauses, then backtrace() */
	if (!coro_a.done) {
		fprintf(stderr, "coro_crash: coroutine A did not finish\n");
		return 1;
	}
	return 0;

usage:
	fprintf(stderr, "usage: %s [--pause-file PATH] [--threads N] [--switch-lib PATH "
		"[--load-when PATH]]\n", argv[0]);
	return 2;
}
