// SPDX-License-Identifier: MIT
/*
 * vforker: bt_loop plus one thread stuck in uninterruptible sleep.
 *
 * Usage: vforker GATEFILE NTHREADS [--report FILE]
 *
 * Runs bt_loop's main (same arguments after GATEFILE, same report) and,
 * from one extra thread, calls vfork().  The vfork child waits until
 * GATEFILE exists (at most 60 s) and then _exits; until then the parent
 * thread sleeps in the kernel's vfork wait, which is killable but
 * uninterruptible ("D" in /proc): ptrace cannot stop it.  That thread's TID
 * is written to stdout as "vfork TID" before it calls vfork(), and "ready"
 * follows from bt_loop.  The child touches only its stack and raw syscalls.
 */
#define main bt_loop_main
#include "bt_loop.c"
#undef main

#include <sys/stat.h>
#include <sys/wait.h>

static const char *gate;

static void *vfork_thread(void *arg)
{
	char line[64];
	pid_t child;

	(void)arg;
	snprintf(line, sizeof(line), "vfork %ld\n", (long)syscall(SYS_gettid));
	if (write(1, line, strlen(line)) < 0)
		return NULL;
	child = vfork();
	if (child == 0) {
		struct timespec ts = { .tv_sec = 0, .tv_nsec = 10 * 1000 * 1000 };
		struct stat st;

		for (int i = 0; i < 6000 && syscall(SYS_stat, gate, &st) != 0; i++)
			syscall(SYS_nanosleep, &ts, NULL);
		_exit(0);
	}
	if (child > 0)
		waitpid(child, NULL, 0);
	for (;;)
		pause();
	return NULL;
}

int main(int argc, char **argv)
{
	pthread_t t;

	if (argc < 3) {
		fprintf(stderr, "usage: %s GATEFILE NTHREADS [--report FILE]\n", argv[0]);
		return 2;
	}
	gate = argv[1];
	if (pthread_create(&t, NULL, vfork_thread, NULL) != 0) {
		perror("pthread_create");
		return 1;
	}
	return bt_loop_main(argc - 1, argv + 1);
}
