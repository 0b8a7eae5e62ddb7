/* SPDX-License-Identifier: MIT */
/*
 * btguardctl run: the command's process, from fork to its exit status.
 * The child waits before its exec until the daemon follows it (the
 * parent's go), so the command is guarded from its first instruction; the
 * parent forwards the signals sent to it and takes the child's status.
 */
#ifndef BTGUARD_CLIENT_RUN_H
#define BTGUARD_CLIENT_RUN_H

#include <sys/types.h>

struct run_child {
	pid_t pid;
	int   go_fd;     /* write end: one byte lets the child exec, EOF makes it exit */
	int   err_fd;    /* read end: the errno of a failed exec, or EOF once it exec'd */
};

/*
 * Forks the child for argv (execvp'd once told to go) and starts
 * forwarding SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2 and
 * SIGWINCH that other processes send btguardctl to it.  0 or -errno.
 */
int run_spawn(char *const argv[], struct run_child *ret);

/* Lets the child exec (go) or exit without exec'ing (stop). */
void run_go(struct run_child *c);
void run_stop(struct run_child *c);

/*
 * Waits for the child and returns the exit status btguardctl ends with:
 * the command's own, 128 + N when signal N killed it, 127 (not found) or
 * 126 (not executable) when it could not be exec'd, with a message.
 * A child told to stop yields -1 (the caller has said why already).
 */
int run_wait(struct run_child *c, const char *command);

#endif
