/* SPDX-License-Identifier: MIT */
/*
 * The only module that calls ptrace(2).  It stops every thread of a
 * process ("the world"), reads their registers, moves words in and out
 * of their memory (and, for a change longer than a word, one write of at
 * most PTRACE_POKE_BYTES_MAX bytes inside a page), and resumes every
 * thread exactly as it was found.  Three files, one job each: ptrace.c
 * the one call of ptrace(2), words and the parked orphans; ptworld.c
 * stopping and resuming the world; ptfollow.c one process followed
 * through its exec.  What they share is in ptrace_int.h, theirs alone.
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

/*
 * Outside ptrace.c nobody calls ptrace(2), ptworld.c and ptfollow.c
 * included (they go through ptrace_call()): ptrace_* is the boundary.
 */
#ifndef BTGUARD_PTRACE_IMPL
#pragma GCC poison ptrace
#endif

/*
 * Where a task of a world is in its life with us: seized, then stopped,
 * then let go - or gone on the way.  What else is known of it (a
 * job-control stop, a signal to give back, its registers, its check) is
 * a fact of its own, beside the state.
 */
enum ptrace_task_state {
	PTRACE_TASK_NOT_HELD,  /* not ours to resume: not seized yet, or parked before it stopped */
	PTRACE_TASK_SEIZED,    /* we are its tracer, its stop not seen yet (counted in pending) */
	PTRACE_TASK_STOPPED,   /* it reported a ptrace-stop to us: ours to read and detach */
	PTRACE_TASK_GONE,      /* it exited (or lost its TID to an exec) while we held it */
};

/* A task of a world; written by ptworld.c only. */
struct ptrace_task {
	pid_t tid;
	pid_t tgid;          /* its process: the target or a process sharing its memory */
	enum ptrace_task_state state;   /* 0 (a zeroed task): PTRACE_TASK_NOT_HELD */
	bool  job_stopped;   /* it was (or became) job-control stopped */
	int   resume_sig;    /* signal caught in signal-delivery-stop, re-injected on detach */
	bool  have_regs;     /* regs below were read */
	bool  checked;       /* the world's on_stop hook passed it (see below) */
	arch_regs_t regs;
};

/*
 * Called for each task of a world as soon as it has stopped and its
 * registers are read, while the world's other tasks may still be on
 * their way to their stops: the caller's check of that task starts at
 * once instead of after the last one stopped.  0 marks the task checked;
 * a negative code ends the stop (the world is resumed and ptrace_stop_all
 * or ptrace_stop_more returns it, the hook having written why).
 */
struct ptrace_on_stop {
	int (*fn)(void *ctx, const struct ptrace_task *t);
	void *ctx;
};

/* Processes held together: the target and those sharing its address space. */
#define PTRACE_MAX_GROUPS 64

/*
 * Written by ptworld.c only (ptfollow.c lends an empty one of its own,
 * a signalfd at most, to the helpers it shares with the world).
 */
struct ptrace_world {
	pid_t pid;               /* the target */
	pid_t groups[PTRACE_MAX_GROUPS];  /* groups[0] == pid */
	size_t ngroups;
	struct ptrace_task *tasks;
	size_t n, cap;
	size_t sorted;           /* tasks[0..sorted) are in TID order */
	size_t pending;          /* tasks in PTRACE_TASK_SEIZED */
	int sigchld_fd;          /* signalfd for SIGCHLD while the world is held */
	sigset_t saved_mask;
	bool mask_saved;
	bool exec_seen;          /* a task of the target reported PTRACE_EVENT_EXEC */
	unsigned seizes_abandoned;   /* seizes an exec held up, tried again (unstick.c) */
	/*
	 * An exec raced the seizes (one was abandoned, or a TID seized a
	 * moment ago named nobody of ours): a task we trace may go by
	 * another TID than the one we hold.  The resume then looks for it.
	 */
	bool tids_unsure;
	struct ptrace_on_stop on_stop;   /* fn NULL: none */
	int on_stop_err;         /* what the hook returned, ending the stop */
	pid_t exec_sharer;       /* a process sharing the memory that exec'd (it left) */
	/* CLOCK_MONOTONIC: the first stop request, the end of the first pass
	 * of seizes, the moment every task was stopped (last), the first and
	 * the last detach. */
	struct timespec first_stop, seized, all_stopped, first_resume, last_resume;
	pid_t detach_failed_tid;  /* the first task whose detach failed (then retried), or 0 */
	int detach_failed_err;    /* and why */
	bool open;               /* stopped (or being stopped), not yet resumed */
	/*
	 * /proc/stat's count of tasks created, as it stood while every task
	 * of the world was stopped (set by each successful stop): no task of
	 * the world can have made one since.  have_forks_at_rest false: unread.
	 */
	uint64_t forks_at_rest;
	bool have_forks_at_rest;
};

/*
 * Worlds stopped and not yet resumed.  Between two turns of the event loop
 * this is 0: an attempt stops, checks, writes and resumes within its turn,
 * and a target waiting for its next attempt holds nothing stopped.  The
 * loop checks it after every turn (server.c).
 */
unsigned ptrace_worlds_open(void);

/*
 * At start: the handler for the timer that lets a seize an exec holds up
 * be abandoned and tried again (unstick.c).  0 or -errno.
 */
int ptrace_setup(void);

/* Returns the stopped window (first stop request to last resume) in µs. */
uint64_t ptrace_world_pause_us(const struct ptrace_world *w);

/*
 * Seizes and interrupts every thread of PID and of each of the nsharers
 * processes that share its memory, re-listing /proc/PID/task until no new
 * thread appears, and waits (until deadline, CLOCK_MONOTONIC) for each to
 * stop.  Threads that exit meanwhile are dropped, as are sharers that exit.
 * Register sets are read for every stopped thread, and on_stop (NULL:
 * none) is called for each as soon as it stopped.
 *
 * On failure the world is already resumed (nothing left stopped) and the
 * error says why: -BTG_ERR_TRACED (why names the tracer), -BTG_ERR_GONE,
 * -BTG_ERR_EXEC, -BTG_ERR_STOP (why names the thread), -BTG_ERR_BUSY (a
 * sharer exec'd, or a thread is still being released from an earlier
 * operation), -BTG_ERR_SHARED (too many sharers), -EPERM, ...
 * On success the caller must call ptrace_resume_all().
 */
int ptrace_stop_all(struct ptrace_world *w, pid_t pid, const pid_t *sharers, size_t nsharers,
		    const struct timespec *deadline, const struct ptrace_on_stop *on_stop,
		    char *why, size_t why_len);

/*
 * Adds processes sharing the memory to a stopped world and stops them too
 * (the world's on_stop hook sees their tasks as well).  On failure the
 * whole world is resumed, as ptrace_stop_all does.
 */
int ptrace_stop_more(struct ptrace_world *w, const pid_t *sharers, size_t nsharers,
		     const struct timespec *deadline, char *why, size_t why_len);

/*
 * Detaches every stopped thread, re-injecting pending signals; job-stopped
 * threads go back to their job-control stop (the kernel reinstates it).
 * A detach that fails is retried, and if it keeps failing the task is
 * parked for the orphan reaper to retry (w->detach_failed_tid names the
 * first one either way).  Keeps going after a failure; returns the first
 * error, -BTG_ERR_INTERNAL if a task could not even be parked.  Frees the
 * task list (the world's other fields stay readable).
 */
int ptrace_resume_all(struct ptrace_world *w);

/* Tasks that could not be parked since start (the table was full): a broken invariant. */
size_t ptrace_orphans_lost(void);

/* One word of target memory through a stopped task. */
int ptrace_peek_word(pid_t tid, uint64_t addr, uint64_t *ret);
int ptrace_poke_word(pid_t tid, uint64_t addr, uint64_t word);

/*
 * len bytes (at most PTRACE_POKE_BYTES_MAX, inside one 4 KiB page) written
 * through a task we hold, in one write: a change longer than a word that
 * must land whole even if the daemon is killed halfway (ptrace.c says why
 * it does).  -EINVAL for a span that crosses a page.
 */
#define PTRACE_POKE_BYTES_MAX 64u
#define PTRACE_POKE_PAGE      4096u
int ptrace_poke_bytes(pid_t tid, uint64_t addr, const uint8_t *bytes, size_t len);

/*
 * Tasks we seized but could not detach because they never reached a stop
 * (e.g. stuck in uninterruptible sleep past every deadline) are parked
 * here; ptrace_reap_orphans() detaches them once they stop.  The server
 * loop calls it between requests.  Returns how many are still parked.
 */
size_t ptrace_reap_orphans(void);

/*
 * One process followed through an exec (exec.c), seized across many turns
 * of the loop instead of within one: its single task is traced with
 * PTRACE_O_TRACEEXEC | PTRACE_O_TRACESYSGOOD (never PTRACE_O_EXITKILL: if
 * the daemon dies the kernel detaches it and it runs on) and stops at
 * every system call.  Statuses another wait collects for it (an attempt's
 * waitpid(-1)) are kept here for it, never lost.  Written by ptfollow.c only.
 * Between two turns a follower may sit in a system call-stop until its
 * next step (a millisecond or two); it is no world, and
 * ptrace_worlds_open() does not count it: a dying daemon leaves such a
 * stop harmless, where a world's interrupt-stops would be too.
 */
#define PTRACE_FOLLOW_STASH 4

struct ptrace_follow {
	pid_t tid;
	bool  seized;        /* we are its tracer */
	bool  stopped;       /* in a ptrace-stop: ours to resume or detach */
	int   stash[PTRACE_FOLLOW_STASH];  /* statuses collected by others, oldest first */
	size_t nstash;
};

/* A syscall-stop as PTRACE_GET_SYSCALL_INFO describes it. */
struct ptrace_syscall_stop {
	bool     entry;      /* else the exit */
	uint64_t nr;         /* the system call (arch.h's numbers) */
	int64_t  rval;       /* at the exit: its return value, -errno on failure */
	bool     is_error;
};

/*
 * Followers at most at once (each is one request's target, so one
 * connection's): every task of a large step on a big node.  Who may take
 * how many is exec.c's business (follows.h).
 */
#define PTRACE_MAX_FOLLOW 1024

/*
 * Seizes tid (a process's only task) and interrupts it; its first stop
 * follows as a status.  -BTG_ERR_TRACED, -BTG_ERR_LIMIT, -EPERM, -ESRCH...
 */
int ptrace_follow_seize(struct ptrace_follow *f, pid_t tid);

/*
 * The next status of f, waiting until `until` (CLOCK_MONOTONIC) at most:
 * 1 with *ret_status, 0 when none came by then.  A stop leaves f stopped;
 * an exit ends the following (f->seized false, nothing to release).
 */
int ptrace_follow_wait(struct ptrace_follow *f, const struct timespec *until, int *ret_status);

/* Resumes a stopped f to its next system call, delivering sig (0: none). */
int ptrace_follow_syscall(struct ptrace_follow *f, int sig);

/* What one status of a follower says (ptrace_follow_classify). */
enum ptrace_follow_stop {
	PTRACE_FOLLOW_ENDED,     /* exited or killed: no longer ours */
	PTRACE_FOLLOW_EXEC,      /* PTRACE_EVENT_EXEC: the new program is mapped */
	PTRACE_FOLLOW_GROUP,     /* a group-stop or our interrupt (sig: the stop signal) */
	PTRACE_FOLLOW_SYSCALL,   /* a system call's entry or exit */
	PTRACE_FOLLOW_SIGNAL,    /* a signal on its way to it (sig) */
};

enum ptrace_follow_stop ptrace_follow_classify(int status, int *ret_sig);

/* Lets a stopped f sit in its job-control stop, still traced (PTRACE_LISTEN). */
int ptrace_follow_listen(struct ptrace_follow *f);

/* What f, stopped at a system call, is doing.  -EINVAL when not a syscall-stop. */
int ptrace_follow_syscall_info(struct ptrace_follow *f, struct ptrace_syscall_stop *ret);

/*
 * Lets f go, delivering sig: detached at once when stopped, else
 * interrupted first (waiting at most PTRACE_FOLLOW_RELEASE_MS); one that
 * never stops is parked for the orphan reaper.  Fine on an f that exited.
 */
#define PTRACE_FOLLOW_RELEASE_MS 250
int ptrace_follow_release(struct ptrace_follow *f, int sig);

#endif
