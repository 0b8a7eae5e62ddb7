// SPDX-License-Identifier: MIT
/*
 * late_loader: loads libraries long after it started, like a gunicorn
 * worker that imports torch (and with it libunwind's backtrace()) after
 * the fork.
 *
 * Usage: late_loader
 *
 * Calls backtrace() once (glibc's definition is bound), prints "ready",
 * then for each line read from stdin dlopen()s that path (RTLD_NOW |
 * RTLD_LOCAL, as Python imports an extension) and prints "loaded", or
 * "error <dlerror text>".  Each line "call" instead calls backtrace() by
 * name and prints "frames N".  A line "fork PATH" forks a worker, as a
 * pre-fork server does, that dlopen()s PATH after the fork and sleeps
 * (it dies with its parent); the parent prints "worker PID loaded" once
 * the worker has.  Arguments are ignored (tests put a token there).
 */
#include <dlfcn.h>
#include <execinfo.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/prctl.h>
#include <unistd.h>

/* A worker that loads path after the fork; returns its PID once it has. */
static int fork_loader(const char *path)
{
	int fds[2];
	pid_t child;
	char c = 0;

	if (pipe(fds) < 0)
		return -1;
	child = fork();
	if (child < 0)
		return -1;
	if (child == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() == 1)
			_exit(0);
		c = dlopen(path, RTLD_NOW | RTLD_LOCAL) ? 'y' : 'n';
		if (write(fds[1], &c, 1) != 1)
			_exit(1);
		for (;;)
			pause();
	}
	close(fds[1]);
	if (read(fds[0], &c, 1) != 1)
		c = 'n';
	close(fds[0]);
	return c == 'y' ? child : -1;
}

int main(void)
{
	char line[4096];
	void *buf[16];

	backtrace(buf, 16);
	printf("ready\n");
	fflush(stdout);
	while (fgets(line, sizeof(line), stdin)) {
		line[strcspn(line, "\n")] = '\0';
		if (!strcmp(line, "call")) {
			printf("frames %d\n", backtrace(buf, 16));
		} else if (!strncmp(line, "fork ", 5)) {
			int pid = fork_loader(line + 5);

			if (pid > 0)
				printf("worker %d loaded\n", pid);
			else
				printf("error fork\n");
		} else if (dlopen(line, RTLD_NOW | RTLD_LOCAL)) {
			printf("loaded\n");
		} else {
			printf("error %s\n", dlerror());
		}
		fflush(stdout);
	}
	return 0;
}
