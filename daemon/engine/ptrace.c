// SPDX-License-Identifier: MIT
/*
 * Stopping and resuming a whole process with PTRACE_SEIZE + PTRACE_INTERRUPT.
 *
 * Why SEIZE and not ATTACH: ATTACH sends a real SIGSTOP, which a job-control
 * aware target can observe and which races with its own SIGSTOP/SIGCONT.
 * SEIZE + INTERRUPT stops a task without a signal, reports job-control stops
 * as PTRACE_EVENT_STOP, and lets a detach put a job-stopped task back into
 * its stop.
 *
 * Waiting: the kernel signals the tracer with SIGCHLD whenever a tracee
 * stops or exits, so we block SIGCHLD and poll a signalfd with the time
 * left, then collect with waitpid(-1, __WALL | WNOHANG).  btguardd has no
 * children of its own between calls (vmindex.c's pivots are reaped by the
 * call that made them), so every status it collects belongs to a tracee.
 *
 * A tracee that never stops (uninterruptible sleep past every deadline)
 * cannot be detached: PTRACE_DETACH needs a stopped tracee.  Such tasks are
 * parked as orphans and detached as soon as they stop; this list is the one
 * piece of process-wide state here, because being a tracer is process-wide
 * (strictly, per tracer thread) kernel state too.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <sys/signalfd.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "proto.h"
#include "fault.h"
#include "log.h"
#include "procfs.h"
#define BTGUARD_PTRACE_IMPL
#include "ptrace_int.h"
#include "timeutil.h"
#include "unstick.h"
#include "watchdog.h"

/*
 * Set while a PTRACE_SEIZE that ptrace_seize_call() may abandon is in the kernel;
 * seize_gen counts those calls, ring_gen is the one the timer last saw.
 */
static volatile sig_atomic_t in_seize, seize_escape_ready, seize_gen, ring_gen;
static sigjmp_buf seize_escape;

/*
 * The one call of ptrace(2) in btguard: 0 or -errno, and for PEEKTEXT the
 * word in *ret_word.  (PEEKTEXT returns the word itself, so -1 is only an
 * error when errno says so.)  The test build's fault injection hooks in
 * here and nowhere else.
 */
int ptrace_call(enum __ptrace_request request, pid_t tid, uint64_t addr, uint64_t data,
		uint64_t *ret_word)
{
	long v;
	int r = fault_before_ptrace((int)request);

	if (r < 0)
		return r;
	errno = 0;
	if (request == PTRACE_SEIZE && seize_escape_ready) {
		seize_gen = (seize_gen + 1) & 0x3fffffff;   /* sig_atomic_t is a signed int */
		in_seize = 1;
	}
	v = ptrace(request, tid, (void *)addr, (void *)data);
	in_seize = 0;
	if (v == -1 && errno)
		return -errno;
	if (ret_word) {
		*ret_word = (uint64_t)v;
		fault_after_peek(ret_word);
	}
	return 0;
}
/* Everything below goes through ptrace_call(); ptrace.h poisons it for everybody else. */
#pragma GCC poison ptrace

/*
 * Extra time a seized task gets to stop after the attempt's stop bound
 * before we park it.  Short: the rest of the world stays stopped and the
 * event loop waits meanwhile, while a parked task costs nothing but a
 * check every ORPHAN_POLL_MS (server.c) until it stops and is let go.
 */
#define ORPHAN_GRACE_MS 50
#define MAX_ORPHANS 4096

/* How often resume_all tries a detach that fails before it parks the task. */
#define DETACH_TRIES 3

struct orphan {
	pid_t tid;
	bool stopped;   /* in a ptrace-stop already, its detach failed: retry that */
	int sig;        /* for a stopped one: the signal its detach re-injects */
};

static struct orphan orphans[MAX_ORPHANS];
static size_t n_orphans;
static size_t orphans_lost;   /* parked nowhere: the table was full (a broken invariant) */
static unsigned worlds_open;  /* see ptrace_worlds_open() */

unsigned ptrace_worlds_open(void)
{
	return worlds_open;
}

/*
 * Parks a task we cannot let go yet; false (and counted) when the table is
 * full.  One not stopped is interrupted (again, for most): only a stopped
 * tracee can be detached, and a task that goes by a TID we never
 * interrupted - an exec gave it the leader's - would otherwise never stop.
 */
bool ptrace_park(pid_t tid, bool stopped, int sig)
{
	if (!stopped)
		ptrace_call(PTRACE_INTERRUPT, tid, 0, 0, NULL);
	if (n_orphans == MAX_ORPHANS) {
		orphans_lost++;
		return false;
	}
	orphans[n_orphans++] = (struct orphan){ .tid = tid, .stopped = stopped, .sig = sig };
	return true;
}

size_t ptrace_orphans_lost(void)
{
	return orphans_lost;
}

uint64_t ptrace_world_pause_us(const struct ptrace_world *w)
{
	return timespec_diff_us(&w->first_stop, &w->last_resume);
}

/* Among the tasks sorted by TID (see sort_tasks): a binary search. */
static struct ptrace_task *task_find_sorted(struct ptrace_world *w, pid_t tid)
{
	size_t lo = 0, hi = w->sorted;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (w->tasks[mid].tid == tid)
			return &w->tasks[mid];
		if (w->tasks[mid].tid < tid)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

/* Any task of w; those added since the last sort are looked through one by one. */
static struct ptrace_task *task_find(struct ptrace_world *w, pid_t tid)
{
	struct ptrace_task *t = task_find_sorted(w, tid);

	if (t)
		return t;
	for (size_t i = w->sorted; i < w->n; i++)  /* added since the last sort */
		if (w->tasks[i].tid == tid)
			return &w->tasks[i];
	return NULL;
}

static int cmp_task(const void *a, const void *b)
{
	pid_t x = ((const struct ptrace_task *)a)->tid, y = ((const struct ptrace_task *)b)->tid;

	return (x > y) - (x < y);
}

static void sort_tasks(struct ptrace_world *w)
{
	/* No task seized yet (every listed one a zombie) leaves tasks NULL,
	 * and qsort(NULL, 0) is undefined behaviour (UBSan aborts on it). */
	if (w->n > 1)
		qsort(w->tasks, w->n, sizeof(w->tasks[0]), cmp_task);
	w->sorted = w->n;
}

static struct ptrace_task *task_add(struct ptrace_world *w, pid_t tid)
{
	if (w->n == w->cap) {
		size_t cap = w->cap ? w->cap * 2 : 64;
		struct ptrace_task *t = realloc(w->tasks, cap * sizeof(*t));

		if (!t)
			return NULL;
		w->tasks = t;
		w->cap = cap;
	}
	memset(&w->tasks[w->n], 0, sizeof(w->tasks[0]));
	w->tasks[w->n].tid = tid;
	return &w->tasks[w->n++];
}

static bool is_job_stop_signal(int sig)
{
	return sig == SIGSTOP || sig == SIGTSTP || sig == SIGTTIN || sig == SIGTTOU;
}

/* Detaches a stopped orphan; returns true when it no longer needs us. */
static bool orphan_settle(pid_t tid, int status)
{
	if (WIFEXITED(status) || WIFSIGNALED(status))
		return true;
	if (WIFSTOPPED(status)) {
		int sig = (status >> 16) == 0 ? WSTOPSIG(status) : 0;

		ptrace_call(PTRACE_DETACH, tid, 0, (uint64_t)sig, NULL);
		return true;
	}
	return false;
}

static void orphan_remove(size_t i)
{
	orphans[i] = orphans[--n_orphans];
}

static void orphan_status(pid_t tid, int status)
{
	for (size_t i = 0; i < n_orphans; i++) {
		if (orphans[i].tid == tid) {
			if (orphan_settle(tid, status))
				orphan_remove(i);
			return;
		}
	}
}

size_t ptrace_reap_orphans(void)
{
	for (size_t i = 0; i < n_orphans;) {
		int status, d;
		pid_t r;

		if (orphans[i].stopped) {
			d = ptrace_call(PTRACE_DETACH, orphans[i].tid, 0, (uint64_t)orphans[i].sig, NULL);
			if (d == 0 || d == -ESRCH)
				orphan_remove(i);
			else
				i++;
			continue;
		}
		r = waitpid(orphans[i].tid, &status, __WALL | WNOHANG);
		if ((r < 0 && errno == ECHILD) || (r > 0 && orphan_settle(orphans[i].tid, status)))
			orphan_remove(i);
		else
			i++;
	}
	return n_orphans;
}

/* Records one wait status of a task of w. */
static void task_record(struct ptrace_world *w, struct ptrace_task *t, int status)
{
	int event = status >> 16;

	if (WIFEXITED(status) || WIFSIGNALED(status)) {
		if (t->seized && !t->stopped && !t->gone)
			w->pending--;
		t->gone = true;
		t->stopped = false;
		return;
	}
	if (!WIFSTOPPED(status))
		return;
	if (t->seized && !t->stopped && !t->gone)
		w->pending--;
	t->stopped = true;
	if (event == PTRACE_EVENT_STOP) {
		if (is_job_stop_signal(WSTOPSIG(status)))
			t->job_stopped = true;
	} else if (event == PTRACE_EVENT_EXEC) {
		/* A sharer's exec (a vfork child's, typically) only takes it out
		 * of the address space; the target's own exec ends the attempt. */
		if (t->tgid == w->pid)
			w->exec_seen = true;
		else
			w->exec_sharer = t->tgid;
	} else if (event == 0) {
		/* Signal-delivery-stop: the signal is ours to re-inject on detach. */
		t->resume_sig = WSTOPSIG(status);
	}
}

static void task_stopped_hook(struct ptrace_world *w, struct ptrace_task *t);

/* Records one wait status; statuses of tasks not in w go to a follower or the orphans. */
static void task_status(struct ptrace_world *w, pid_t tid, int status)
{
	struct ptrace_task *t = task_find(w, tid);

	if (t) {
		task_record(w, t, status);
		task_stopped_hook(w, t);
	} else if (!ptrace_follow_stash(tid, status)) {
		orphan_status(tid, status);
	}
}

static size_t count_pending(const struct ptrace_world *w)
{
	return w->pending;
}

static void drain_signalfd(int fd)
{
	struct signalfd_siginfo si[16];

	while (read(fd, si, sizeof(si)) > 0)
		;
}

/*
 * Sleeps until a SIGCHLD arrives or the deadline passes; false at the
 * deadline.  *ret_quiet (if given) says whether the sleep ended without one.
 */
bool ptrace_wait_sigchld(struct ptrace_world *w, const struct timespec *deadline,
			 bool *ret_quiet)
{
	struct timespec left;
	struct pollfd p = { .fd = w->sigchld_fd, .events = POLLIN };
	bool came;

	if (!timespec_left(deadline, &left))
		return false;
	watchdog_cap_wait(&left);  /* an attempt bounds it (patch.h), a caller might not */
	came = ppoll(&p, 1, &left, NULL) > 0;
	if (came)
		drain_signalfd(w->sigchld_fd);
	watchdog_kick();
	if (ret_quiet)
		*ret_quiet = !came;
	return true;
}

/* Records every status that is ready, from any tracee (waitpid(-1)). */
static void collect_ready(struct ptrace_world *w)
{
	for (;;) {
		int status;
		pid_t r = waitpid(-1, &status, __WALL | WNOHANG);

		if (r > 0)
			task_status(w, r, status);
		else if (!(r < 0 && errno == EINTR))
			return;
	}
}

static int read_regs(pid_t tid, arch_regs_t *regs);

/* ------------------------------------------- a seize an exec holds up -- */

/*
 * How often ptrace_seize_call() tries before it gives up: with unstick.c's
 * timer, about a second, far more than an exec needs once its victims are
 * reaped.
 */
#define SEIZE_TRIES 50

/*
 * unstick.c's timer rang: leave a seize that was waiting already when it
 * last rang (a whole period, where a seize takes microseconds).  One the
 * ring merely happens upon is left alone.
 */
static void on_ring(void)
{
	if (in_seize && ring_gen == seize_gen) {
		in_seize = 0;
		siglongjmp(seize_escape, 1);
	}
	ring_gen = seize_gen;
}

int ptrace_setup(void)
{
	return unstick_setup(on_ring);
}

/*
 * PTRACE_SEIZE that an exec cannot hold up for good (unstick.c says
 * why it could).  When the timer rings while the call waits, the call is
 * abandoned (the escape restores the signal mask), every status that is
 * ready is collected - the exec's victims, the threads we held that it
 * killed, among them, which lets it go on - and the seize is tried
 * again.  w may be an empty world: statuses then go to the followers and
 * orphans, as any other collection's would.  *ret_abandoned counts the
 * abandoned calls.
 */
int ptrace_seize_call(struct ptrace_world *w, pid_t tid, uint64_t options,
		      unsigned *ret_abandoned)
{
	volatile unsigned tries = 0;
	int r;

	unstick_begin();
	/* No mask saved here (a system call per seize): the escape restores unstick's. */
	if (sigsetjmp(seize_escape, 0) != 0) {
		unstick_restore_mask();
		(*ret_abandoned)++;
		w->tids_unsure = true;
		/* Abandoned, perhaps just after it took effect: then tid is ours already. */
		seize_escape_ready = 0;
		if (ptrace_call(PTRACE_INTERRUPT, tid, 0, 0, NULL) == 0) {
			unstick_end();
			return 0;
		}
		collect_ready(w);
		if (++tries >= SEIZE_TRIES) {
			unstick_end();
			return -EAGAIN;
		}
	}
	seize_escape_ready = 1;
	r = ptrace_call(PTRACE_SEIZE, tid, 0, options, NULL);
	seize_escape_ready = 0;
	unstick_end();
	return r;
}

/*
 * The world's hook, for a task that has just stopped: its registers now,
 * then the caller's check.  Nothing for an attempt that is ending anyway
 * (an exec, a hook that refused already); a task whose registers cannot
 * be read is left to read_all_regs(), which knows what that means.
 */
static void task_stopped_hook(struct ptrace_world *w, struct ptrace_task *t)
{
	int r;

	if (!w->on_stop.fn || !t->stopped || t->gone || t->have_regs || w->on_stop_err ||
	    w->exec_seen || w->exec_sharer)
		return;
	if (read_regs(t->tid, &t->regs) < 0)
		return;
	t->have_regs = true;
	r = w->on_stop.fn(w->on_stop.ctx, t);
	if (r < 0)
		w->on_stop_err = r;
	else
		t->checked = true;
}

static bool task_waited_for(const struct ptrace_world *w, const struct ptrace_task *t)
{
	return t->seized && !t->stopped && !t->gone && !w->exec_seen;
}

/*
 * One look at t's status, by its TID: 1 when it came (recorded, and the
 * hook run on a stop), 0 when there is none yet, or -errno.
 */
static int poll_task(struct ptrace_world *w, struct ptrace_task *t)
{
	int status;
	pid_t r = waitpid(t->tid, &status, __WALL | WNOHANG);

	if (r > 0) {
		task_record(w, t, status);
		task_stopped_hook(w, t);
		return 1;
	}
	if (r == 0)
		return 0;
	if (errno == ECHILD) {
		/* Reaped already, or its TID changed in an exec. */
		w->pending--;
		t->gone = true;
		return 1;
	}
	return -errno;
}

/* Every status ready among the tasks after the i-th, by TID. */
static void sweep_after(struct ptrace_world *w, size_t i)
{
	for (size_t j = i + 1; j < w->n && !w->exec_seen; j++)
		if (task_waited_for(w, &w->tasks[j]))
			poll_task(w, &w->tasks[j]);   /* an error is met again in its turn */
}

/*
 * Collects wait statuses until no seized task is pending or the deadline
 * passes.  Each task is waited for by its own TID, in order: waitpid(-1)
 * makes the kernel walk the list of all our tracees on every call
 * (wait_consider_task), quadratic in the thread count, which was most of
 * the stopped window at 1,024 threads - and again, until this order, at
 * 256 threads whose stops came in another order than ours (all of them on
 * one CPU, its scheduler's order): a millisecond of collecting whatever
 * else was ready each time the task in hand was not.
 *
 * While the task in hand is not stopped yet we sleep until the next
 * SIGCHLD, and on the 1st, 2nd, 4th, 8th... such wake-up look at every
 * later task by TID: their checks then run while we wait, at a cost that
 * grows with the log of the wake-ups, not with their number.  After a
 * quiet millisecond (no SIGCHLD: nothing is stopping any more) we look at
 * all of them, and collect whatever else is ready by waitpid(-1) - as we
 * also do once the task in hand has stayed unstopped through many
 * wake-ups.  That is for an exec, which waits (in D state, never
 * stopping) until the threads it killed are reaped: those may die
 * between two looks, and must not wait for the deadline.  A last pass
 * collects what no TID of ours names any more: an exec reported under
 * the leader's TID after we had collected the leader's stop, and orphans.
 */
#define QUIET_MS 1
#define COLLECT_ALL_AFTER 32   /* wake-ups without the task in hand stopping */

static void wait_for_stops(struct ptrace_world *w, const struct timespec *deadline)
{
	for (size_t i = 0; i < w->n && count_pending(w) > 0 && !w->exec_seen; i++) {
		struct ptrace_task *t = &w->tasks[i];
		unsigned misses = 0;
		bool quiet = false;

		while (task_waited_for(w, t)) {
			struct timespec nap, left;
			int r = poll_task(w, t);

			if (r == -EINTR || r > 0)
				continue;
			if (r < 0)
				break;
			misses++;
			if (quiet || (misses & (misses - 1)) == 0)
				sweep_after(w, i);
			if (quiet || misses >= COLLECT_ALL_AFTER)
				collect_ready(w);
			if (!task_waited_for(w, t))
				continue;
			timespec_after_ms(&nap, QUIET_MS);
			if (timespec_diff_ns(deadline, &nap) > 0)
				nap = *deadline;
			if (!ptrace_wait_sigchld(w, &nap, &quiet))
				quiet = true;   /* the nap was over before it began */
			if (!timespec_left(deadline, &left))
				goto out_collect;
		}
	}
out_collect:
	collect_ready(w);
}

/*
 * Explains why SEIZE was refused.  Returns 0 when the task is merely on
 * its way out (a zombie thread cannot be traced, and needs no stopping).
 */
int ptrace_seize_refused(pid_t pid, pid_t tid, char *why, size_t why_len)
{
	struct procfs_status st;

	if (procfs_read_task_status(pid, tid, &st) < 0)
		return 0;
	if (st.state == 'Z' || st.state == 'X')
		return 0;
	if (st.tracer > 0 && st.tracer == getpid()) {
		/* Ours: parked after an earlier deadline, not stopped yet. */
		snprintf(why, why_len, "thread %d is still being released from an earlier operation", tid);
		return -BTG_ERR_BUSY;
	}
	if (st.tracer > 0) {
		snprintf(why, why_len, "thread %d is already traced by process %d", tid, st.tracer);
		return -BTG_ERR_TRACED;
	}
	snprintf(why, why_len, "the kernel refused to trace thread %d (EPERM)", tid);
	return -EPERM;
}

static int seize_one(struct ptrace_world *w, pid_t tgid, pid_t tid, char *why, size_t why_len)
{
	struct ptrace_task *t;

	int r = ptrace_seize_call(w, tid, PTRACE_O_TRACEEXEC, &w->seizes_abandoned);

	if (r < 0) {
		if (r == -ESRCH)
			return 0;
		if (r == -EPERM)
			return ptrace_seize_refused(tgid, tid, why, why_len);
		if (r == -EAGAIN) {
			snprintf(why, why_len, "thread %d could not be seized: its process is in the middle of an exec",
				 tid);
			return -BTG_ERR_BUSY;
		}
		snprintf(why, why_len, "PTRACE_SEIZE of thread %d: %s", tid, strerror(-r));
		return r;
	}
	t = task_add(w, tid);
	if (!t) {
		/* Cannot track it: let it go at once (it is not stopped yet, so
		 * it may take an interrupt-free detach only after stopping). */
		ptrace_call(PTRACE_INTERRUPT, tid, 0, 0, NULL);
		ptrace_park(tid, false, 0);
		return -ENOMEM;
	}
	t->seized = true;
	t->tgid = tgid;
	w->pending++;
	/*
	 * ESRCH here means it is exiting, and its exit status still comes to
	 * us - or an exec gave the task we just seized the leader's TID.
	 */
	if (ptrace_call(PTRACE_INTERRUPT, tid, 0, 0, NULL) == -ESRCH)
		w->tids_unsure = true;
	return 0;
}

/* Seizes the threads of one process not yet known. */
static int seize_group(struct ptrace_world *w, pid_t tgid, char *why, size_t why_len)
{
	pid_t *tids = NULL;
	size_t n = 0;
	int r = procfs_list_tasks(tgid, &tids, &n);

	if (r < 0) {
		if (tgid != w->pid && procfs_gone(r))
			return 0;   /* a sharer that exited: nothing left to hold */
		if (procfs_gone(r)) {
			snprintf(why, why_len, "process %d disappeared", tgid);
			return -BTG_ERR_GONE;
		}
		snprintf(why, why_len, "cannot list the threads of process %d: %s", tgid,
			 proto_strerror(r));
		return r;
	}
	/*
	 * procfs_list_tasks() names each TID once, so only the tasks known before it
	 * need looking through: sorted now, a binary search each.  (Looking
	 * through the ones this loop adds, unsorted, was quadratic: a
	 * millisecond of the pause at 1,024 threads.)
	 */
	sort_tasks(w);
	for (size_t i = 0; i < n; i++) {
		if (task_find_sorted(w, tids[i]))
			continue;
		if (!w->first_stop.tv_sec && !w->first_stop.tv_nsec)
			clock_gettime(CLOCK_MONOTONIC, &w->first_stop);
		r = seize_one(w, tgid, tids[i], why, why_len);
		if (r < 0)
			break;
	}
	free(tids);
	return r;
}

/*
 * Seizes every listed thread not yet known; *ret_new counts the ones now
 * held.  A listed thread that could not be seized (exiting, or a zombie
 * still listed) is not new: counting it would make the caller re-list a
 * dying process without end, stalling the whole daemon.
 */
static int seize_new_threads(struct ptrace_world *w, size_t *ret_new, char *why, size_t why_len)
{
	size_t before = w->n;
	unsigned abandoned = w->seizes_abandoned;
	int r = 0;

	/*
	 * One timer for the whole phase, armed by the first ptrace_seize_call() (a
	 * pass that finds no new thread seizes nothing and arms nothing).
	 */
	unstick_defer();
	for (size_t g = 0; g < w->ngroups && r == 0; g++)
		r = seize_group(w, w->groups[g], why, why_len);
	unstick_end();
	if (w->seizes_abandoned != abandoned)
		log_msg(LOG_DEBUG, "process %d: %u seize(s) abandoned and tried again (an exec waited for the threads it killed)",
			w->pid, w->seizes_abandoned - abandoned);
	sort_tasks(w);
	*ret_new = w->n - before;
	return r;
}

/*
 * For a tracee killed while we held it (another thread crashed, or
 * SIGKILL).  A dying tracee waits for its tracer to reap it, and until then
 * its whole process cannot finish exiting: reap it now, or park it to be
 * reaped.
 */
void ptrace_reap_or_park(pid_t tid)
{
	int status;

	if (waitpid(tid, &status, __WALL | WNOHANG) <= 0)
		ptrace_park(tid, false, 0);
}

/*
 * The register sets arch.h lists, read with PTRACE_GETREGSET: the one
 * request every Linux CPU has (arm64 has no PTRACE_GETREGS).  A set the
 * kernel returns shorter than asked would leave registers unread, and a
 * stack check on made-up registers is no check: -EIO.
 */
struct regset {
	int note;       /* NT_PRSTATUS, ... */
	size_t offset;  /* into arch_regs_t */
	size_t len;
};

static const struct regset regsets[] = ARCH_REGSETS;

static int read_regs(pid_t tid, arch_regs_t *regs)
{
	for (size_t i = 0; i < sizeof(regsets) / sizeof(regsets[0]); i++) {
		struct iovec iov = { .iov_base = (char *)regs + regsets[i].offset,
				     .iov_len = regsets[i].len };
		int r = ptrace_call(PTRACE_GETREGSET, tid, (uint64_t)regsets[i].note,
				    (uint64_t)(uintptr_t)&iov, NULL);

		if (r < 0)
			return r;
		if (iov.iov_len != regsets[i].len)
			return -EIO;
	}
	return 0;
}

static int read_all_regs(struct ptrace_world *w)
{
	size_t alive = 0;

	for (size_t i = 0; i < w->n; i++) {
		struct ptrace_task *t = &w->tasks[i];

		if (!t->stopped || t->gone)
			continue;
		if (t->have_regs) {
			alive++;
			continue;
		}
		int r = read_regs(t->tid, &t->regs);

		if (r < 0) {
			if (r != -ESRCH)
				return r;
			/* Killed while stopped: resume_all skips gone tasks, so
			 * collect (or park) its exit status here. */
			ptrace_reap_or_park(t->tid);
			t->gone = true;
			continue;
		}
		t->have_regs = true;
		alive++;
	}
	return alive ? 0 : -BTG_ERR_GONE;
}

/* Parks tasks that are seized but never stopped; they must not be forgotten. */
static void park_stragglers(struct ptrace_world *w)
{
	struct timespec grace;

	timespec_after_ms(&grace, ORPHAN_GRACE_MS);
	wait_for_stops(w, &grace);
	for (size_t i = 0; i < w->n; i++) {
		struct ptrace_task *t = &w->tasks[i];

		if (t->seized && !t->stopped && !t->gone) {
			ptrace_park(t->tid, false, 0);
			t->seized = false;
			w->pending--;
		}
	}
}

static int add_groups(struct ptrace_world *w, const pid_t *pids, size_t n, char *why, size_t why_len)
{
	for (size_t i = 0; i < n; i++) {
		bool known = false;

		for (size_t g = 0; g < w->ngroups; g++)
			known = known || w->groups[g] == pids[i];
		if (known)
			continue;
		if (w->ngroups == PTRACE_MAX_GROUPS) {
			snprintf(why, why_len, "more than %d processes share the memory of process %d",
				 PTRACE_MAX_GROUPS - 1, w->pid);
			return -BTG_ERR_SHARED;
		}
		w->groups[w->ngroups++] = pids[i];
	}
	return 0;
}

/*
 * Stops every thread of every group, then reads the registers of those
 * newly stopped.  On failure resumes the whole world.
 */
static int stop_groups(struct ptrace_world *w, const struct timespec *deadline, char *why,
		       size_t why_len)
{
	uint64_t mark, now;
	bool have_mark;
	size_t added;
	int r;

	/*
	 * A thread running clone() when we interrupt it finishes the call
	 * first, so its child appears in /proc/PID/task before the parent
	 * stops: re-list until a pass finds nobody new - or until no task was
	 * created on the node since the pass's listing began (/proc/stat's
	 * count, read before it: vmshare.c says why that is exact), when the
	 * listing held every thread and another would find nobody.
	 */
	w->have_forks_at_rest = false;
	do {
		have_mark = procfs_read_forks(&mark) == 0;
		r = seize_new_threads(w, &added, why, why_len);
		if (r < 0)
			goto out_resume;
		if (!w->seized.tv_sec && !w->seized.tv_nsec)
			clock_gettime(CLOCK_MONOTONIC, &w->seized);
		wait_for_stops(w, deadline);
		if (w->exec_seen) {
			snprintf(why, why_len, "process %d called execve() while being stopped", w->pid);
			r = -BTG_ERR_EXEC;
			goto out_resume;
		}
		if (w->on_stop_err) {
			r = w->on_stop_err;   /* why is the hook's */
			goto out_resume;
		}
		if (w->exec_sharer) {
			/* It left the address space: the next attempt will not see it. */
			snprintf(why, why_len, "process %d, which shared the memory, called execve() while being stopped",
				 w->exec_sharer);
			r = -BTG_ERR_BUSY;
			goto out_resume;
		}
		if (count_pending(w) > 0) {
			for (size_t i = 0; i < w->n; i++) {
				struct ptrace_task *t = &w->tasks[i];

				if (t->seized && !t->stopped && !t->gone) {
					snprintf(why, why_len, "thread %d did not stop before the deadline", t->tid);
					break;
				}
			}
			r = -BTG_ERR_STOP;
			goto out_resume;
		}
		if (added > 0 && have_mark && procfs_read_forks(&now) == 0 && now == mark)
			break;
	} while (added > 0);
	/*
	 * Either way the last mark is the count while all were stopped: it
	 * had not moved when they were (the break), or this pass began with
	 * all stopped and found nobody new.  vmshare.c's rescan takes it.
	 */
	w->forks_at_rest = mark;
	w->have_forks_at_rest = have_mark;

	r = read_all_regs(w);
	if (r < 0) {
		if (r == -BTG_ERR_GONE)
			snprintf(why, why_len, "process %d exited while being stopped", w->pid);
		else
			snprintf(why, why_len, "PTRACE_GETREGSET: %s", strerror(-r));
		goto out_resume;
	}
	clock_gettime(CLOCK_MONOTONIC, &w->all_stopped);
	return 0;

out_resume:
	park_stragglers(w);
	ptrace_resume_all(w);
	return r;
}

int ptrace_stop_all(struct ptrace_world *w, pid_t pid, const pid_t *sharers, size_t nsharers,
		    const struct timespec *deadline, const struct ptrace_on_stop *on_stop,
		    char *why, size_t why_len)
{
	sigset_t chld;
	int r;

	memset(w, 0, sizeof(*w));
	w->pid = pid;
	if (on_stop)
		w->on_stop = *on_stop;
	w->groups[w->ngroups++] = pid;
	w->sigchld_fd = -1;
	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	if (pthread_sigmask(SIG_BLOCK, &chld, &w->saved_mask) != 0)
		return -EINVAL;
	w->mask_saved = true;
	/* From here every path ends in ptrace_resume_all(), which closes it. */
	w->open = true;
	worlds_open++;
	w->sigchld_fd = signalfd(-1, &chld, SFD_NONBLOCK | SFD_CLOEXEC);
	if (w->sigchld_fd < 0) {
		r = -errno;
		goto out_resume;
	}
	r = add_groups(w, sharers, nsharers, why, why_len);
	if (r < 0)
		goto out_resume;
	return stop_groups(w, deadline, why, why_len);

out_resume:
	ptrace_resume_all(w);
	return r;
}

int ptrace_stop_more(struct ptrace_world *w, const pid_t *sharers, size_t nsharers,
		     const struct timespec *deadline, char *why, size_t why_len)
{
	int r = add_groups(w, sharers, nsharers, why, why_len);

	if (r < 0) {
		ptrace_resume_all(w);
		return r;
	}
	return stop_groups(w, deadline, why, why_len);
}

static bool parked(pid_t tid)
{
	for (size_t i = 0; i < n_orphans; i++)
		if (orphans[i].tid == tid)
			return true;
	return false;
}

/*
 * After an exec raced the seizes: every task of w's processes that is
 * still traced by us, whatever TID it goes by now, is interrupted and
 * parked, to be let go once it stops.  Never left traced.
 */
static void park_leftovers(struct ptrace_world *w)
{
	for (size_t g = 0; g < w->ngroups; g++) {
		pid_t *tids = NULL;
		size_t n = 0;

		if (procfs_list_tasks(w->groups[g], &tids, &n) < 0)
			continue;
		for (size_t i = 0; i < n; i++) {
			struct procfs_status st;

			if (procfs_read_task_status(w->groups[g], tids[i], &st) < 0 ||
			    st.tracer != getpid() || parked(tids[i]))
				continue;
			log_msg(LOG_INFO, "process %d: thread %d still traced after an exec raced the stop; let go once it stops",
				w->groups[g], tids[i]);
			ptrace_park(tids[i], false, 0);
		}
		free(tids);
	}
}

int ptrace_resume_all(struct ptrace_world *w)
{
	size_t lost_before = orphans_lost;
	int first = 0;

	clock_gettime(CLOCK_MONOTONIC, &w->first_resume);
	for (size_t i = 0; i < w->n; i++) {
		struct ptrace_task *t = &w->tasks[i];
		int r = -EINVAL;

		if (!t->seized || t->gone)
			continue;
		if (!t->stopped) {
			/* Only reachable through an internal error: never strand it. */
			ptrace_park(t->tid, false, 0);
			continue;
		}
		for (int tries = 0; tries < DETACH_TRIES; tries++) {
			r = ptrace_call(PTRACE_DETACH, t->tid, 0, (uint64_t)t->resume_sig, NULL);
			if (r == 0 || r == -ESRCH)
				break;
			/* Retried, and said: a detach that failed is never let pass quietly. */
			if (!w->detach_failed_tid) {
				w->detach_failed_tid = t->tid;
				w->detach_failed_err = r;
			}
		}
		if (r == 0)
			continue;
		if (r == -ESRCH) {
			ptrace_reap_or_park(t->tid);
			continue;
		}
		/* Still stopped and ours: the orphan reaper keeps trying. */
		ptrace_park(t->tid, true, t->resume_sig);
		if (!first)
			first = r;
	}
	clock_gettime(CLOCK_MONOTONIC, &w->last_resume);
	if (w->tids_unsure)
		park_leftovers(w);
	if (orphans_lost != lost_before && !first)
		first = -BTG_ERR_INTERNAL;
	if (w->sigchld_fd >= 0) {
		drain_signalfd(w->sigchld_fd);
		close(w->sigchld_fd);
	}
	if (w->mask_saved)
		pthread_sigmask(SIG_SETMASK, &w->saved_mask, NULL);
	free(w->tasks);
	w->tasks = NULL;
	w->n = w->cap = w->sorted = w->pending = 0;
	w->sigchld_fd = -1;
	w->mask_saved = false;
	if (w->open)
		worlds_open--;
	w->open = false;
	return first;
}

int ptrace_peek_word(pid_t tid, uint64_t addr, uint64_t *ret)
{
	return ptrace_call(PTRACE_PEEKTEXT, tid, addr, 0, ret);
}

int ptrace_poke_word(pid_t tid, uint64_t addr, uint64_t word)
{
	return ptrace_call(PTRACE_POKETEXT, tid, addr, word, NULL);
}

/*
 * Two PTRACE_POKETEXTs are two system calls, and a daemon killed between
 * them would leave half a change in a process that then runs on.  One
 * pwrite() to /proc/TID/mem is one access_remote_vm() under the target's
 * mmap lock, and within one page it takes no fault that a fatal signal
 * could cut short (__get_user_pages() checks for one between pages): the
 * bytes land whole or not at all.  It writes read-only text the way
 * POKETEXT does (FOLL_FORCE), which the kernel grants to the task's tracer
 * whatever proc_mem.force_override says.  The poke fault counts it.
 */
int ptrace_poke_bytes(pid_t tid, uint64_t addr, const uint8_t *bytes, size_t len)
{
	char path[64];
	ssize_t n;
	int fd, r;

	if (len == 0 || len > PTRACE_POKE_BYTES_MAX ||
	    addr / PTRACE_POKE_PAGE != (addr + len - 1) / PTRACE_POKE_PAGE)
		return -EINVAL;
	r = fault_before_ptrace(PTRACE_POKETEXT);
	if (r < 0)
		return r;
	snprintf(path, sizeof(path), "/proc/%d/mem", (int)tid);
	fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? -ESRCH : -errno;
	n = pwrite(fd, bytes, len, (off_t)addr);
	r = n == (ssize_t)len ? 0 : n < 0 ? -errno : -EIO;
	close(fd);
	return r;
}
