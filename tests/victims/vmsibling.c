// SPDX-License-Identifier: MIT
/*
 * vmsibling: a process that shares its memory with another process.
 *
 * Usage: vmsibling [NSIBLINGS [--drop-parent UID GID | --late]]
 *
 * Creates NSIBLINGS (default 1) processes with clone(CLONE_VM) but without
 * CLONE_THREAD: each has its own PID, shares every byte of the parent's
 * memory, and calls backtrace(buf, 0) in a tight loop, so it runs the very
 * first bytes of backtrace() almost all the time (with size 0 the call
 * returns right after its prologue).  The parent itself only sleeps.  If
 * the guard were written while a sibling is stopped inside those bytes, or
 * while one is not stopped at all, the sibling would crash.
 *
 * Prints "sibling PID" for each, then "ready".  A sibling counts its calls
 * in shared memory; on SIGUSR1 the parent prints "calls N1 N2 ...".  The
 * parent exits (status 1) as soon as a sibling dies, and reaps it.
 *
 * --late: prints "ready" first and makes the siblings only on SIGUSR2, then
 * prints "born": a test decides when they are born.
 *
 * --drop-parent: once the siblings run, the parent alone takes UID and GID
 * (credentials belong to a task, memory to all of them) and makes itself
 * dumpable again, so UID may act on the parent but not on its siblings.
 */
#include <execinfo.h>
#include <grp.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#define MAX_SIBLINGS 16
#define STACK_BYTES  (256 << 10)

static atomic_ulong calls[MAX_SIBLINGS];
static volatile sig_atomic_t want_report, want_siblings;

static int sibling(void *arg)
{
	atomic_ulong *mine = arg;
	void *buf[1];

	/*
	 * It is a process of its own: make it die with its creator.  The
	 * death signal alone is not enough: with --drop-parent it comes from
	 * a parent that is no longer root, and the kernel drops it.
	 */
	pid_t parent = getppid();

	prctl(PR_SET_PDEATHSIG, SIGKILL);
	for (unsigned long n = 1;; n++) {
		backtrace(buf, 0);
		atomic_fetch_add_explicit(mine, 1, memory_order_relaxed);
		if (n % 65536 == 0 && getppid() != parent)
			_exit(1);
	}
	return 0;
}

static void on_usr1(int sig)
{
	(void)sig;
	want_report = 1;
}

static void on_usr2(int sig)
{
	(void)sig;
	want_siblings = 1;
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 1;
	void *warm[4];
	struct sigaction sa;

	if (n < 1 || n > MAX_SIBLINGS) {
		fprintf(stderr, "usage: vmsibling [1..%d]\n", MAX_SIBLINGS);
		return 2;
	}
	/* The first call loads libgcc_s; the siblings never should. */
	backtrace(warm, 4);
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_usr1;
	sigaction(SIGUSR1, &sa, NULL);
	sa.sa_handler = on_usr2;
	sigaction(SIGUSR2, &sa, NULL);
	setvbuf(stdout, NULL, _IOLBF, 0);
	bool late = argc == 3 && !strcmp(argv[2], "--late");

	if (late) {
		printf("ready\n");
		while (!want_siblings)
			usleep(1000);
	}
	for (int i = 0; i < n; i++) {
		char *stack = mmap(NULL, STACK_BYTES, PROT_READ | PROT_WRITE,
				   MAP_PRIVATE | MAP_ANONYMOUS | MAP_STACK, -1, 0);
		pid_t pid;

		if (stack == MAP_FAILED)
			return 2;
		pid = clone(sibling, stack + STACK_BYTES, CLONE_VM | SIGCHLD, &calls[i]);
		if (pid < 0) {
			perror("clone");
			return 2;
		}
		printf("sibling %d\n", (int)pid);
	}
	if (argc == 5 && !strcmp(argv[2], "--drop-parent")) {
		uid_t uid = (uid_t)atoi(argv[3]);
		gid_t gid = (gid_t)atoi(argv[4]);

		if (setgroups(0, NULL) < 0 || setresgid(gid, gid, gid) < 0 || setresuid(uid, uid, uid) < 0 ||
		    prctl(PR_SET_DUMPABLE, 1) < 0) {
			perror("--drop-parent");
			return 2;
		}
	}
	printf(late ? "born\n" : "ready\n");
	for (;;) {
		int status;
		pid_t dead = waitpid(-1, &status, WNOHANG);

		if (dead > 0) {
			printf("sibling %d died: status 0x%x\n", (int)dead, status);
			return 1;
		}
		if (want_report) {
			want_report = 0;
			printf("calls");
			for (int i = 0; i < n; i++)
				printf(" %lu", atomic_load(&calls[i]));
			printf("\n");
		}
		usleep(10000);
	}
}
