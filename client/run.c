// SPDX-License-Identifier: MIT
/*
 * btguardctl run (run.h).  The child blocks on a pipe before its exec:
 * the daemon seizes it there and answers "armed", and only then does the
 * parent write the byte that lets it execvp() the command, so the exec is
 * followed and the program guarded before its own code runs.  If the
 * daemon cannot follow it, the parent closes the pipe instead and the
 * child exits without running anything: `run` never runs a command
 * unguarded while saying it is guarded.
 *
 * A failed execvp() reaches the parent through a second, close-on-exec
 * pipe (the errno; EOF means the exec happened), the way posix_spawn
 * reports it, so "not found" is told apart from a command that exits 127.
 *
 * Signals: like env(1) or timeout(1), btguardctl stands in for the
 * command, so a SIGTERM sent to it (by a batch system, by kill) is passed
 * on.  A signal the terminal generated (Ctrl-C: si_code SI_KERNEL) reached
 * the child already, being in the same process group, and is not sent
 * twice.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "run.h"

#define PROGRAM "btguardctl"

static volatile sig_atomic_t child_pid;

#define NFORWARDED 7
static const int forwarded[NFORWARDED] = { SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2,
					   SIGWINCH };
/* What they were when btguardctl started: an ignored one is not forwarded. */
static struct sigaction inherited[NFORWARDED];

static void forward(int sig, siginfo_t *si, void *ctx)
{
	int saved = errno;

	(void)ctx;
	if (child_pid > 0 && si->si_code != SI_KERNEL)
		kill((pid_t)child_pid, sig);
	errno = saved;
}

static void forward_signals(pid_t pid)
{
	struct sigaction sa;

	memset(&sa, 0, sizeof(sa));
	sa.sa_sigaction = forward;
	sa.sa_flags = SA_SIGINFO | SA_RESTART;
	sigemptyset(&sa.sa_mask);
	child_pid = pid;
	for (size_t i = 0; i < NFORWARDED; i++) {
		/* An ignored signal (nohup, a background job) stays ignored: the
		 * command ignores it too, so there is nothing to pass on. */
		if (inherited[i].sa_handler == SIG_IGN)
			continue;
		sigaction(forwarded[i], &sa, NULL);
	}
}

/* The child: wait for go, then become the command.  Never returns. */
static void child(char *const argv[], int go_fd, int err_fd)
{
	char byte;
	ssize_t n;
	int e;

	/* Forked before the parent's handlers go in: the command inherits what
	 * btguardctl did, an ignored SIGINT included (as under nohup). */
	do
		n = read(go_fd, &byte, 1);
	while (n < 0 && errno == EINTR);
	if (n != 1)
		_exit(127);   /* told to stop: the parent says why */
	close(go_fd);
	execvp(argv[0], argv);
	e = errno;
	if (write(err_fd, &e, sizeof(e)) < 0)
		_exit(127);
	_exit(e == ENOENT ? 127 : 126);
}

int run_spawn(char *const argv[], struct run_child *ret)
{
	int go[2], err[2];
	pid_t pid;
	int r;

	for (size_t i = 0; i < NFORWARDED; i++)
		sigaction(forwarded[i], NULL, &inherited[i]);   /* only read here */
	if (pipe2(go, O_CLOEXEC) < 0)
		return -errno;
	if (pipe2(err, O_CLOEXEC) < 0) {
		r = -errno;
		goto out_close_go;
	}
	fflush(NULL);
	pid = fork();
	if (pid < 0) {
		r = -errno;
		goto out_close_err;
	}
	if (pid == 0) {
		close(go[1]);
		close(err[0]);
		child(argv, go[0], err[1]);
	}
	close(go[0]);
	close(err[1]);
	*ret = (struct run_child){ .pid = pid, .go_fd = go[1], .err_fd = err[0] };
	forward_signals(pid);
	return 0;

out_close_err:
	close(err[0]);
	close(err[1]);
out_close_go:
	close(go[0]);
	close(go[1]);
	return r;
}

void run_go(struct run_child *c)
{
	ssize_t n;

	if (c->go_fd < 0)
		return;
	do
		n = write(c->go_fd, "g", 1);
	while (n < 0 && errno == EINTR);
	close(c->go_fd);
	c->go_fd = -1;
}

void run_stop(struct run_child *c)
{
	if (c->go_fd >= 0)
		close(c->go_fd);
	c->go_fd = -1;
}

int run_wait(struct run_child *c, const char *command)
{
	bool stopped = c->go_fd >= 0;   /* never told to go */
	int status, e = 0;
	ssize_t n;

	run_stop(c);   /* a child still waiting for go gets EOF */
	do
		n = read(c->err_fd, &e, sizeof(e));
	while (n < 0 && errno == EINTR);
	close(c->err_fd);
	while (waitpid(c->pid, &status, 0) < 0) {
		if (errno != EINTR)
			return 1;
	}
	child_pid = 0;
	if (n == (ssize_t)sizeof(e)) {
		fprintf(stderr, PROGRAM ": cannot run %s: %s\n", command, strerror(e));
		return e == ENOENT ? 127 : 126;
	}
	if (stopped)
		return -1;
	if (WIFSIGNALED(status))
		return 128 + WTERMSIG(status);
	return WEXITSTATUS(status);
}
