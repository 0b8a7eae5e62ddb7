// SPDX-License-Identifier: MIT
/*
 * sigcount: counts the signals it receives, to check that none sent while
 * btguardd held it was lost or delivered twice.
 *
 * Usage: sigcount NTHREADS
 *
 * NTHREADS idle threads plus the main thread, which reads commands from
 * stdin.  SIGUSR2, SIGWINCH and SIGRTMIN+1 each have a handler that counts
 * it (real-time signals queue, one delivery per send; the other two
 * coalesce while pending).  "report" prints "usr2 N winch N rt N".
 */
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static atomic_ulong n_usr2, n_winch, n_rt;

static void on_signal(int sig)
{
	if (sig == SIGUSR2)
		atomic_fetch_add(&n_usr2, 1);
	else if (sig == SIGWINCH)
		atomic_fetch_add(&n_winch, 1);
	else
		atomic_fetch_add(&n_rt, 1);
}

static void *idle(void *arg)
{
	(void)arg;
	for (;;)
		pause();
	return NULL;
}

int main(int argc, char **argv)
{
	int sigs[] = { SIGUSR2, SIGWINCH, SIGRTMIN + 1 };
	int n = argc > 1 ? atoi(argv[1]) : 2;
	char line[64];
	pthread_t t;

	for (size_t i = 0; i < sizeof(sigs) / sizeof(sigs[0]); i++) {
		struct sigaction sa;

		memset(&sa, 0, sizeof(sa));
		sa.sa_handler = on_signal;
		sa.sa_flags = SA_RESTART;
		sigemptyset(&sa.sa_mask);
		if (sigaction(sigs[i], &sa, NULL) < 0)
			return 2;
	}
	for (int i = 0; i < n; i++)
		if (pthread_create(&t, NULL, idle, NULL) != 0)
			return 2;
	setvbuf(stdout, NULL, _IOLBF, 0);
	printf("ready\n");
	while (fgets(line, sizeof(line), stdin))
		if (!strcmp(line, "report\n"))
			printf("usr2 %lu winch %lu rt %lu\n", atomic_load(&n_usr2),
			       atomic_load(&n_winch), atomic_load(&n_rt));
	return 0;
}
