/* SPDX-License-Identifier: MIT */
/*
 * What the ptrace files share: ptrace.c (the one call of ptrace(2), the
 * seize an exec cannot hold up, words, orphans), ptworld.c (stopping and
 * resuming the world) and ptfollow.c (following one process through its
 * exec).  Nobody else includes this; the rest of the daemon sees ptrace.h.
 * ptrace.h poisons the name ptrace for every file but ptrace.c, this one's
 * other users included: they go through ptrace_call().
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

/* Whether tid is parked (ptrace.c). */
bool ptrace_parked(pid_t tid);

/* A status of a task neither a world's nor a follower's: perhaps an orphan's (ptrace.c). */
void ptrace_orphan_status(pid_t tid, int status);

/*
 * Sleeps until a SIGCHLD comes to w's signalfd or the deadline passes;
 * false at the deadline (ptworld.c).
 */
bool ptrace_wait_sigchld(struct ptrace_world *w, const struct timespec *deadline,
			 bool *ret_quiet);

/*
 * Records every status that is ready, from any tracee (waitpid(-1)): w's
 * own, a follower's, an orphan's (ptworld.c).
 */
void ptrace_collect_ready(struct ptrace_world *w);

/* Keeps a status collected for a follower; false when tid is none of them (ptfollow.c). */
bool ptrace_follow_stash(pid_t tid, int status);

#endif
