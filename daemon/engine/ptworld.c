// SPDX-License-Identifier: MIT
/*
 * Stopping and resuming a whole process with PTRACE_SEIZE + PTRACE_INTERRUPT:
 * every thread of the target and of the processes sharing its memory ("the
 * world"), their registers, and every thread let go as it was found.  The
 * ptrace requests go through ptrace_call() (ptrace.c, the only caller of
 * ptrace(2)); a task that cannot be let go yet is parked there.
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
 * call that made them), so every status it collects belongs to a tracee:
 * one of the world's, a follower's (ptfollow.c) or an orphan's.
 */
#include <errno.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/uio.h>
#include <sys/wait.h>
#include <unistd.h>

#include "proto.h"
#include "log.h"
#include "procfs.h"
#include "ptrace_int.h"
#include "timeutil.h"
#include "unstick.h"
#include "watchdog.h"

/*
 * Extra time a seized task gets to stop after the attempt's stop bound
 * before we park it.  Short: the rest of the world stays stopped and the
 * event loop waits meanwhile, while a parked task costs nothing but a
 * check every ORPHAN_POLL_MS (server.c) until it stops and is let go.
 */
#define ORPHAN_GRACE_MS 50

/* How often resume_all tries a detach that fails before it parks the task. */
#define DETACH_TRIES 3

static unsigned worlds_open;  /* see ptrace_worlds_open() */

unsigned ptrace_worlds_open(void)
{
	return worlds_open;
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

/* Records one wait status of a task of w. */
static void task_record(struct ptrace_world *w, struct ptrace_task *t, int status)
{
	int event = status >> 16;

	if (WIFEXITED(status) || WIFSIGNALED(status)) {
		if (t->state == PTRACE_TASK_SEIZED)
			w->pending--;
		t->state = PTRACE_TASK_GONE;
		return;
	}
	if (!WIFSTOPPED(status))
		return;
	/* A task gone stays gone: a stop under its TID is the thread an exec gave the TID to. */
	if (t->state == PTRACE_TASK_SEIZED) {
		w->pending--;
		t->state = PTRACE_TASK_STOPPED;
	}
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
		ptrace_orphan_status(tid, status);
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
void ptrace_collect_ready(struct ptrace_world *w)
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

/*
 * The world's hook, for a task that has just stopped: its registers now,
 * then the caller's check.  Nothing for an attempt that is ending anyway
 * (an exec, a hook that refused already); a task whose registers cannot
 * be read is left to read_all_regs(), which knows what that means.
 */
static void task_stopped_hook(struct ptrace_world *w, struct ptrace_task *t)
{
	int r;

	if (!w->on_stop.fn || t->state != PTRACE_TASK_STOPPED || t->have_regs || w->on_stop_err ||
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
	return t->state == PTRACE_TASK_SEIZED && !w->exec_seen;
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
		t->state = PTRACE_TASK_GONE;
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
				ptrace_collect_ready(w);
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
	ptrace_collect_ready(w);
}

static int seize_one(struct ptrace_world *w, pid_t tgid, pid_t tid, char *why, size_t why_len)
{
	struct ptrace_task *t;
	unsigned abandoned = 0;

	int r = ptrace_seize_call(w, tid, PTRACE_O_TRACEEXEC, &abandoned);

	if (abandoned) {
		/* An exec raced the seize: a task we trace may go by another TID. */
		w->seizes_abandoned += abandoned;
		w->tids_unsure = true;
	}
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
	t->state = PTRACE_TASK_SEIZED;
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

		if (t->state != PTRACE_TASK_STOPPED)
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
			t->state = PTRACE_TASK_GONE;
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

		if (t->state == PTRACE_TASK_SEIZED) {
			ptrace_park(t->tid, false, 0);
			t->state = PTRACE_TASK_NOT_HELD;
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

				if (t->state == PTRACE_TASK_SEIZED) {
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
			    st.tracer != getpid() || ptrace_parked(tids[i]))
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
	size_t lost_before = ptrace_orphans_lost();
	int first = 0;

	clock_gettime(CLOCK_MONOTONIC, &w->first_resume);
	for (size_t i = 0; i < w->n; i++) {
		struct ptrace_task *t = &w->tasks[i];
		int r = -EINVAL;

		if (t->state == PTRACE_TASK_NOT_HELD || t->state == PTRACE_TASK_GONE)
			continue;
		if (t->state == PTRACE_TASK_SEIZED) {
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
	if (ptrace_orphans_lost() != lost_before && !first)
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
