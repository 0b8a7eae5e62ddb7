// SPDX-License-Identifier: MIT
/*
 * idle: a quiet victim.
 *
 * Usage: idle NTHREADS [--nondumpable | --nondumpable-on-usr1 | --word-on-stack |
 *                       --thread-on-usr1 | --may-start-guarded]
 *
 * Calls backtrace() once (so libc's definition is bound and in use), starts
 * NTHREADS threads that sleep in pause(), prints "ready" and sleeps too.
 * No thread ever runs near backtrace() again, so a guard never meets a busy
 * site and the tests can poke the site's bytes without racing a caller.
 * --nondumpable clears the dumpable flag, which must make the daemon deny
 * the owner (the kernel would deny the owner's own ptrace too);
 * --nondumpable-on-usr1 clears it only when SIGUSR1 comes, to change the
 * owner's rights while a request is under way.
 * --word-on-stack: the last thread started (named "word-holder") keeps
 * on its stack words pointing just inside backtrace()'s first bytes, as a
 * return address into them would, until SIGUSR1 comes; then it clears
 * them and sleeps like the others.  The last thread's stack is among the
 * last the daemon checks, which with enough threads is on its scan worker.
 * --thread-on-usr1: the last thread started waits for SIGUSR1, then starts
 * one more sleeper and prints "born": a thread born while the daemon is
 * seizing the others (the last one is seized last).
 * --may-start-guarded: a backtrace() that returns nothing is no error (a
 * daemon that looks at every exec may guard the process before main()
 * calls it).
 */
#include <execinfo.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

static atomic_int started;
static volatile sig_atomic_t usr1;

static void on_usr1(int sig)
{
	(void)sig;
	usr1 = 1;
}

/*
 * The words a return address into the guarded bytes would be, whatever
 * their offset: every byte of the first 32 (the daemon's SITE_CTX_LEN)
 * but the entry.
 */
#define HELD_WORDS 31

static void *holder(void *arg)
{
	volatile uintptr_t words[HELD_WORDS];

	(void)arg;
	pthread_setname_np(pthread_self(), "word-holder");
	for (int i = 0; i < HELD_WORDS; i++)
		words[i] = (uintptr_t)&backtrace + 1 + (uintptr_t)i;
	atomic_fetch_add(&started, 1);
	while (!usr1)
		usleep(10000);
	for (int i = 0; i < HELD_WORDS; i++)
		words[i] = 0;
	for (int i = 0; i < HELD_WORDS; i++)
		if (words[i])
			abort();   /* (a read, so the compiler keeps the words) */
	for (;;)
		pause();
	return NULL;
}

static void *sleeper(void *arg);

static void *spawner(void *arg)
{
	sigset_t usr1_only;
	pthread_t t;
	int sig;

	(void)arg;
	sigemptyset(&usr1_only);
	sigaddset(&usr1_only, SIGUSR1);
	atomic_fetch_add(&started, 1);
	if (sigwait(&usr1_only, &sig) != 0 || pthread_create(&t, NULL, sleeper, NULL) != 0)
		abort();
	printf("born\n");
	fflush(stdout);
	for (;;)
		pause();
	return NULL;
}

static void *sleeper(void *arg)
{
	(void)arg;
	atomic_fetch_add(&started, 1);
	for (;;)
		pause();
	return NULL;
}

int main(int argc, char **argv)
{
	void *buf[16];
	int n;
	pthread_t t;
	sigset_t usr1_only;
	bool later = argc == 3 && !strcmp(argv[2], "--nondumpable-on-usr1");
	bool word = argc == 3 && !strcmp(argv[2], "--word-on-stack");
	bool spawn = argc == 3 && !strcmp(argv[2], "--thread-on-usr1");
	bool may_be_guarded = argc == 3 && !strcmp(argv[2], "--may-start-guarded");

	if (argc < 2 || argc > 3 || (n = atoi(argv[1])) < 0 || n > 1024 ||
	    ((word || spawn) && n < 1) ||
	    (argc == 3 && strcmp(argv[2], "--nondumpable") != 0 && !later && !word && !spawn &&
	     !may_be_guarded)) {
		fprintf(stderr, "usage: %s NTHREADS [--nondumpable | --nondumpable-on-usr1 | --word-on-stack | --thread-on-usr1 | --may-start-guarded]\n",
			argv[0]);
		return 2;
	}
	/* Blocked in every thread but while main waits for it. */
	sigemptyset(&usr1_only);
	sigaddset(&usr1_only, SIGUSR1);
	if (spawn)
		pthread_sigmask(SIG_BLOCK, &usr1_only, NULL);   /* for the spawner's sigwait() */
	if (later || word) {
		signal(SIGUSR1, on_usr1);
		pthread_sigmask(SIG_BLOCK, &usr1_only, NULL);
	}
	if (argc == 3 && !later && !word && !spawn && !may_be_guarded && prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0) {
		perror("prctl");
		return 1;
	}
	if (backtrace(buf, 16) <= 0 && !may_be_guarded) {
		fprintf(stderr, "backtrace returned nothing\n");
		return 1;
	}
	for (int i = 0; i < n; i++) {
		void *(*fn)(void *) = i < n - 1 ? sleeper : word ? holder : spawn ? spawner : sleeper;

		if (pthread_create(&t, NULL, fn, NULL) != 0) {
			perror("pthread_create");
			return 1;
		}
	}
	while (atomic_load(&started) < n)
		usleep(1000);
	printf("ready\n");
	fflush(stdout);
	if (word) {
		/* The holder polls usr1; main takes the signal. */
		pthread_sigmask(SIG_UNBLOCK, &usr1_only, NULL);
	}
	if (later) {
		pthread_sigmask(SIG_UNBLOCK, &usr1_only, NULL);
		while (!usr1)
			pause();
		if (prctl(PR_SET_DUMPABLE, 0, 0, 0, 0) != 0) {
			perror("prctl");
			return 1;
		}
	}
	for (;;)
		pause();
}
