// SPDX-License-Identifier: MIT
/*
 * The processes held with a target (sharers.h).  A sharer that cannot be
 * held is refused as facts (a->refused: which process, and why), never in
 * words: whether the caller may learn its PID is request/action.c's to
 * decide, as everything a refused caller learns is.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "attempt.h"
#include "log.h"
#include "sharers.h"

/* -BTG_ERR_BUSY naming the first thread of pid found in uninterruptible sleep. */
static int check_no_uninterruptible(pid_t pid, bool sharer, char *why, size_t why_len)
{
	pid_t *tids = NULL;
	size_t n = 0;
	int r = procfs_list_tasks(pid, &tids, &n);

	if (r < 0 && sharer && procfs_gone(r))
		return 0;  /* a sharer that exited holds nothing up */
	if (r < 0)
		return procfs_gone(r) ? -BTG_ERR_GONE : r;
	for (size_t i = 0; i < n && r == 0; i++) {
		struct procfs_stat st;

		/* (One that exited meanwhile reads as an error, and is no trouble.) */
		if (procfs_read_task_stat(pid, tids[i], &st) == 0 && st.state == 'D') {
			snprintf(why, why_len,
				 "thread %d is in uninterruptible sleep (D state) and could not be stopped safely",
				 tids[i]);
			r = -BTG_ERR_BUSY;
		}
	}
	free(tids);
	return r;
}

/* -BTG_ERR_SHARED for sharer pid, with the facts in a->refused (sharer_refusal.h). */
static int refuse_sharer(struct attempt *a, enum sharer_why why, pid_t pid, int err)
{
	a->refused.why = why;
	a->refused.pid = pid;
	a->refused.err = err;
	return -BTG_ERR_SHARED;
}

/* The caller must be allowed to act on every process it would stop. */
static int authorize_sharers(struct attempt *a, size_t from)
{
	for (size_t i = from; i < a->vs.n; i++) {
		struct auth_target t;
		pid_t p = a->vs.sharers[i];
		int r = auth_read_target(p, &t);

		if (r == -BTG_ERR_NOPROC)
			continue;  /* exited: nothing to hold */
		if (r < 0)
			snprintf(a->refused.detail, sizeof(a->refused.detail), "%s", proto_strerror(r));
		else
			r = auth_check(a->caller, &t, a->refused.detail, sizeof(a->refused.detail));
		if (r < 0)
			return refuse_sharer(a, SHARER_DENIED, p, r);
	}
	return 0;
}

int sharers_scan(struct attempt *a)
{
	int r;

	vmshare_free(&a->vs);
	a->refused.why = SHARER_NONE;
	r = vmshare_scan(&a->vs, a->via);
	if (r < 0)
		return refuse_sharer(a, SHARER_UNCOMPARED, a->vs.failed_pid, r);
	if (a->vs.compared < vmshare_listed(&a->vs))
		log_msg(LOG_DEBUG, "process %d: compared with %zu of %zu processes for sharers (the listing's index): %zu share its memory",
			a->via, a->vs.compared, vmshare_listed(&a->vs), a->vs.n);
	return authorize_sharers(a, 0);
}

/* Steps 4b-4c before the stop: no task of any group in uninterruptible sleep. */
int sharers_interruptible(struct attempt *a)
{
	int r = check_no_uninterruptible(a->pid, false, a->why, a->why_len);

	for (size_t i = 0; r == 0 && i < a->vs.n; i++)
		r = check_no_uninterruptible(a->vs.sharers[i], true, a->why, a->why_len);
	return r;
}

/*
 * Step 4c once stopped: processes sharing the memory made since the scan
 * were made by tasks now stopped, or by sharers now stopped: list again
 * until none is new.  Then confirm every sharer held still shares it (its
 * PID was not recycled between the scan and the seize).  On failure the
 * world is resumed.
 */
int sharers_stop_late(struct attempt *a, struct ptrace_world *w)
{
	size_t added;
	int r;

	for (;;) {
		r = vmshare_rescan(&a->vs, w->have_forks_at_rest, w->forks_at_rest, &added);
		if (r < 0) {
			snprintf(a->why, a->why_len, "cannot list the processes sharing process %d's memory: %s",
				 a->pid, strerror(-r));
			ptrace_resume_all(w);
			return -BTG_ERR_SHARED;
		}
		if (added == 0)
			break;
		log_msg(LOG_DEBUG, "process %d: %zu process(es) sharing its memory found once it was stopped",
			a->pid, added);
		r = authorize_sharers(a, a->vs.n - added);
		if (r < 0) {
			ptrace_resume_all(w);
			return r;
		}
		r = ptrace_stop_more(w, a->vs.sharers + a->vs.n - added, added, &a->stop_by, a->why,
				     a->why_len);
		if (r < 0)
			return r;
	}
	for (size_t g = 1; g < w->ngroups; g++) {
		/* -ESRCH: it exited, which is fine; 1: its PID names another process now. */
		if (vmshare_same(a->via, w->groups[g]) == 1) {
			snprintf(a->why, a->why_len, "process %d stopped sharing this address space during the operation",
				 w->groups[g]);
			ptrace_resume_all(w);
			return -BTG_ERR_BUSY;
		}
	}
	return 0;
}
