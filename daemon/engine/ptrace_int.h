/* SPDX-License-Identifier: MIT */
/*
 * What the ptrace files share: ptrace.c (the one call of ptrace(2),
 * stopping and resuming the world, words, orphans) and ptfollow.c
 * (following one process through its exec).  Nobody else includes this;
 * the rest of the daemon sees ptrace.h.  ptrace.h poisons the name ptrace
 * for every file but ptrace.c, this one's other users included: they go
 * through ptrace_call().
 */
#ifndef BTGUARD_PTRACE_INT_H
#define BTGUARD_PTRACE_INT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/ptrace.h>   /* first: it declares ptrace(), which ptrace.h poisons */
#include <sys/types.h>
#include <time.h>

#include "ptrace.h"

/*
 * The one call of ptrace(2) in btguard: 0 or -errno, and for PEEKTEXT the
 * word in *ret_word (ptrace.c).
 */
int ptrace_call(enum __ptrace_request request, pid_t tid, uint64_t addr, uint64_t data,
		uint64_t *ret_word);

/*
 * PTRACE_SEIZE that an exec cannot hold up for good; statuses it collects
 * meanwhile go to w, or from an empty w to the followers and orphans.
 * *ret_abandoned counts the calls abandoned (ptrace.c).
 */
int ptrace_seize_call(struct ptrace_world *w, pid_t tid, uint64_t options,
		      unsigned *ret_abandoned);

/* Why a SEIZE got EPERM, in why; 0 for a task merely on its way out (ptrace.c). */
int ptrace_seize_refused(pid_t pid, pid_t tid, char *why, size_t why_len);

/* Parks a task we cannot let go yet; false (and counted) when the table is full (ptrace.c). */
bool ptrace_park(pid_t tid, bool stopped, int sig);

/* A tracee killed while we held it: reaped now, or parked to be reaped (ptrace.c). */
void ptrace_reap_or_park(pid_t tid);

/*
 * Sleeps until a SIGCHLD comes to w's signalfd or the deadline passes;
 * false at the deadline (ptrace.c).
 */
bool ptrace_wait_sigchld(struct ptrace_world *w, const struct timespec *deadline,
			 bool *ret_quiet);

/* Keeps a status collected for a follower; false when tid is none of them (ptfollow.c). */
bool ptrace_follow_stash(pid_t tid, int status);

#endif
