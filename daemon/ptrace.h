/* SPDX-License-Identifier: MIT */
/*
 * The only module that calls ptrace(2).  It stops every thread of a
 * process ("the world"), reads their registers, moves single words in and
 * out of their memory, and resumes every thread exactly as it was found.
 *
 * Invariant: every path that stops a task leaves it as it found it.  A task
 * that was in a job-control stop is still stopped after ptrace_resume_all;
 * a signal that arrived while we held a task is delivered after we let go.
 */
#ifndef BTGUARD_PTRACE_H
#define BTGUARD_PTRACE_H

#include <signal.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "arch.h"

struct ptrace_task {
	pid_t tid;
	bool  seized;        /* we are its tracer */
	bool  stopped;       /* it reported a ptrace-stop to us */
	bool  gone;          /* it exited while we held it */
	bool  job_stopped;   /* it was (or became) job-control stopped */
	int   resume_sig;    /* signal caught in signal-delivery-stop, re-injected on detach */
	arch_regs_t regs;    /* valid once stopped */
};

struct ptrace_world {
	pid_t pid;
	struct ptrace_task *tasks;
	size_t n, cap;
	size_t sorted;           /* tasks[0..sorted) are in TID order */
	size_t pending;          /* seized, not yet stopped, not gone */
	int sigchld_fd;          /* signalfd for SIGCHLD while the world is held */
	sigset_t saved_mask;
	bool mask_saved;
	bool exec_seen;          /* a task reported PTRACE_EVENT_EXEC */
	struct timespec first_stop, last_resume;  /* CLOCK_MONOTONIC */
};

/* Returns the stopped window (first stop request to last resume) in µs. */
uint64_t ptrace_world_pause_us(const struct ptrace_world *w);

/*
 * Seizes and interrupts every thread of PID, re-listing /proc/PID/task
 * until no new thread appears, and waits (until deadline, CLOCK_MONOTONIC)
 * for each to stop.  Threads that exit meanwhile are dropped.  Register sets
 * are read for every stopped thread.
 *
 * On failure the world is already resumed (nothing left stopped) and the
 * error says why: -BTG_ERR_TRACED (why names the tracer), -BTG_ERR_GONE,
 * -BTG_ERR_EXEC, -BTG_ERR_STOP (why names the thread), -EPERM, ...
 * On success the caller must call ptrace_resume_all().
 */
int ptrace_stop_all(struct ptrace_world *w, pid_t pid, const struct timespec *deadline,
		    char *why, size_t why_len);

/*
 * Detaches every stopped thread, re-injecting pending signals; job-stopped
 * threads go back to their job-control stop (the kernel reinstates it).
 * Keeps going after a failure; returns the first error.  Frees the world.
 */
int ptrace_resume_all(struct ptrace_world *w);

/* One word of target memory through a stopped task. */
int ptrace_peek_word(pid_t tid, uint64_t addr, uint64_t *ret);
int ptrace_poke_word(pid_t tid, uint64_t addr, uint64_t word);

/*
 * Tasks we seized but could not detach because they never reached a stop
 * (e.g. stuck in uninterruptible sleep past every deadline) are parked
 * here; ptrace_reap_orphans() detaches them once they stop.  The server
 * loop calls it between requests.  Returns how many are still parked.
 */
size_t ptrace_reap_orphans(void);

#endif
