// SPDX-License-Identifier: MIT
/*
 * Following one process through its exec, to guard the new program before
 * any of its own code runs.  The procedure:
 *
 *  1. Seize the process (its only task) with PTRACE_O_TRACEEXEC and
 *     PTRACE_O_TRACESYSGOOD, interrupt it, and from its first stop on
 *     resume it with PTRACE_SYSCALL only: it stops at the entry and the
 *     exit of every system call.  Then answer "armed" (the first RESULT):
 *     `btguardctl run` lets its child exec only now.
 *  2. Until it execs (at most the request's deadline): a failed execve()
 *     (ENOENT...) is noted; if its next system call is not another exec
 *     (execvp() tries each PATH entry in turn), the process runs on in its
 *     old image, and the answer is that errno.
 *  3. At PTRACE_EVENT_EXEC the new program is mapped, none of it has run,
 *     and its credentials are final: the caller must still be allowed to
 *     act on it (a setuid or unreadable program: denied, let go untouched).
 *     A static executable (no loader, one object) is guarded here.
 *  4. Otherwise its loader runs: at the exit of every system call, find
 *     the backtrace() definitions mapped executable so far (sites.c) and
 *     guard each original one; once the C library's is mapped (libc.so.*;
 *     an LD_PRELOADed definition comes before it and is guarded on the
 *     way), the job is done.  A system call
 *     the loader never makes, or EXEC_LOADER_MS / EXEC_LOADER_CALLS
 *     without a library definition, ends it with what was found (no-site
 *     when nothing).
 *  5. Let go: PTRACE_DETACH at that system call-stop, and answer.
 *
 * Why the write needs no stop of other threads and no stack check: at a
 * stop of steps 3 and 4 the process has exactly one task (the exec killed
 * every other, and the loader starts none), no other process shares its
 * new memory, and the only code that has run since the exec is the
 * loader's.  A definition is seen at the first system call-stop after its
 * mapping became executable, so no instruction of it - or of anything it
 * could call - has run yet: nothing can be inside the bytes or return
 * into them.  The write itself is sitewrite.c's, one word (or one pwrite),
 * read back, undone on a mismatch.
 *
 * Why nothing is left behind if the daemon dies at any moment: no byte of
 * the process is changed except the verified stub; no breakpoint is ever
 * planted.  The process only stops at system calls, and the kernel
 * detaches every tracee of a dying tracer and lets it run on from there
 * (the system call proceeds as if never traced; a job-control stop stays
 * a stop).  PTRACE_O_EXITKILL is never set.
 *
 * Why the event loop stays responsive: each exec_step() handles the stops
 * that come within about EXEC_STEP_MS and returns - at once when none is
 * there; queue.c parks the job until its wake time (1 ms after the exec,
 * 2 to 16 ms before it) and serves everybody else meanwhile.  A stop costs
 * the process at most that wait.  So the loop follows a whole node's
 * tasks at once (follows.h: who may take how many slots).
 */
#include <errno.h>
#include <inttypes.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include "arch.h"
#include "exec.h"
#include "follows.h"
#include "log.h"
#include "procfs.h"
#include "ptrace.h"
#include "sites.h"
#include "sitewrite.h"
#include "timeutil.h"

#define EXEC_STEP_MS       2u     /* one step's work, at most (as ACTION_STEP_US) */
#define WAKE_BEFORE_MS     2u     /* waiting for the exec, just after a stop */
#define WAKE_IDLE_MAX_MS   16u    /* ... and the most it backs off to while quiet */
#define WAKE_LOADER_MS     1u     /* the loader is at work: come back soon */
#define MAX_AT_EXEC_OBJECTS 4     /* the executable and its loader */

enum phase {
	PHASE_SEIZED,      /* interrupted, its first stop not seen yet */
	PHASE_BEFORE,      /* armed: waiting for its exec */
	PHASE_LOADER,      /* exec'd: its loader maps the libraries */
};

struct exec_job {
	pid_t pid;
	struct auth_caller caller;
	bool slot;                     /* holds one of follows' slots for caller.uid */
	struct ptrace_follow f;
	enum phase phase;
	struct proto_result *res;
	struct timespec deadline;      /* for the exec */
	struct timespec loader_by;     /* for the loader, once exec'd */
	struct timespec exec_at;       /* the exec stop */
	uint64_t last_nr;              /* the last system call entered, UINT64_MAX: none yet */
	int exec_errno;                /* the last failed execve(), or 0 */
	unsigned loader_calls;
	uint32_t wake_before_ms;       /* the next wait for the exec: doubles while quiet */
	bool wrote;
	bool walk;                     /* guard --backtraces=segment: the walk where a site has it */
	char exe[PATH_MAX];            /* the new program, for the answer */
	char objects[MAX_AT_EXEC_OBJECTS][PATH_MAX];  /* mapped by the exec itself */
	size_t nobjects;
	struct site_list sites;
};

static const uint64_t loader_calls[] = ARCH_LOADER_SYSCALLS;

/* The node's follows, shared out between users (follows.h). */
static struct follows slots;
_Static_assert(FOLLOWS_MAX <= PTRACE_MAX_FOLLOW, "every slot needs a follower");

static bool is_exec_call(uint64_t nr)
{
	return nr == ARCH_SYS_EXECVE || nr == ARCH_SYS_EXECVEAT;
}

static bool is_loader_call(uint64_t nr)
{
	for (size_t i = 0; i < sizeof(loader_calls) / sizeof(loader_calls[0]); i++)
		if (loader_calls[i] == nr)
			return true;
	return false;
}

/*
 * The C library: the definition the follow waits for.  Another library's
 * own backtrace() (an LD_PRELOADed one) is mapped before it and guarded
 * as it appears, but does not end the follow, or glibc's would be left
 * original.  A program without glibc ends at its first own system call.
 */
static bool is_libc(const char *path)
{
	const char *slash = strrchr(path, '/');

	return !strncmp(slash ? slash + 1 : path, "libc.so", 7);
}

static bool mapped_by_exec(const struct exec_job *j, const char *path)
{
	for (size_t i = 0; i < j->nobjects; i++)
		if (!strcmp(j->objects[i], path))
			return true;
	return false;
}

/* The answer: let the process go (if it is still ours) and fill res. */
static int finish_follow(struct exec_job *j, int r)
{
	struct proto_result *res = j->res;
	struct timespec now;
	int r2 = ptrace_follow_release(&j->f, 0);

	if (r == 0 && r2 < 0) {
		snprintf(res->message, sizeof(res->message), "letting process %d go: %s", j->pid,
			 strerror(-r2));
		r = r2;
	}
	res->flags &= (uint8_t)~PROTO_RESULT_ARMED;
	if (j->wrote)
		res->flags |= PROTO_RESULT_WROTE;
	patch_fill_sites(res, &j->sites);
	if (j->walk)
		patch_say_no_walk(res, &j->sites);
	if (r < 0 && !j->wrote && j->sites.n == 0)
		res->state = PROTO_PROC_UNKNOWN;
	if (j->exec_at.tv_sec) {
		clock_gettime(CLOCK_MONOTONIC, &now);
		res->pause_us = (uint32_t)timespec_diff_us(&j->exec_at, &now);
	}
	res->error = proto_error_from_negative(r);
	return r;
}

/*
 * Steps 3 and 4: what is mapped executable now, guarded where it is
 * original.  1 once the C library's definition is mapped (and guarded):
 * done; 0 to follow on.
 */
static int guard_mapped(struct exec_job *j)
{
	struct procfs_mapping *maps = NULL;
	struct proto_result *res = j->res;
	size_t nmaps = 0;
	bool library = false, planned = false;
	int r = procfs_read_maps(j->pid, &maps, &nmaps);

	if (r < 0) {
		snprintf(res->message, sizeof(res->message), "cannot read /proc/%d/maps: %s", j->pid,
			 strerror(-r));
		return procfs_gone(r) ? -BTG_ERR_GONE : r;
	}
	sites_free(&j->sites);
	r = sites_find(j->pid, maps, nmaps, &j->sites, res->message, sizeof(res->message));
	free(maps);
	if (r < 0)
		return r;
	for (size_t i = 0; i < j->sites.n; i++) {
		if (j->sites.v[i].state == PROTO_SITE_FOREIGN) {
			snprintf(res->message, sizeof(res->message),
				 "%s at 0x%" PRIx64 " holds bytes that are neither the original nor the guard; not touching it",
				 j->sites.v[i].object, j->sites.v[i].addr);
			return -BTG_ERR_FOREIGN;
		}
		planned = planned ||
			  site_wants_write(site_form(true, j->walk, &j->sites.v[i]), &j->sites.v[i]);
		library = library || (is_libc(j->sites.v[i].object) &&
				      !mapped_by_exec(j, j->sites.v[i].object));
	}
	/* One task, stopped at a system call, nothing of these bytes run: see the top. */
	r = sitewrite_all(j->pid, j->pid, &j->sites, true, j->walk, res->message,
			  sizeof(res->message));
	if (r < 0)
		return r;   /* this round's words are restored; an earlier round's stay */
	j->wrote = j->wrote || planned;
	return library;
}

/* Step 3: the new program is mapped; nothing of it has run. */
static int at_exec(struct exec_job *j)
{
	struct procfs_mapping *maps = NULL;
	struct proto_result *res = j->res;
	struct auth_target t;
	char why[PROTO_MAX_MESSAGE + 1], path[64];
	size_t nmaps = 0;
	ssize_t n;
	int r;

	clock_gettime(CLOCK_MONOTONIC, &j->exec_at);
	timespec_after_ms(&j->loader_by, EXEC_LOADER_MS);
	j->phase = PHASE_LOADER;
	j->exec_errno = 0;
	snprintf(path, sizeof(path), "/proc/%d/exe", j->pid);
	n = readlink(path, j->exe, sizeof(j->exe) - 1);
	j->exe[n > 0 ? n : 0] = '\0';
	/*
	 * Its credentials are the new program's now.  The kernel lets a
	 * setuid exec gain privilege under a tracer that may trace the result
	 * - the daemon - so the caller's own right must be checked again.
	 */
	r = auth_read_target(j->pid, &t);
	if (r == 0)
		r = auth_check(&j->caller, &t, why, sizeof(why));
	if (r < 0) {
		log_msg(LOG_DEBUG, "process %d after its exec of %s: %s", j->pid, j->exe, why);
		snprintf(res->message, sizeof(res->message),
			 "process %d exec'd %s, which you may not act on (setuid, setgid or unreadable); let go untouched",
			 j->pid, j->exe);
		return r == -BTG_ERR_NOPROC ? -BTG_ERR_GONE : -BTG_ERR_DENIED;
	}
	r = procfs_read_maps(j->pid, &maps, &nmaps);
	if (r < 0)
		return procfs_gone(r) ? -BTG_ERR_GONE : r;
	for (size_t i = 0; i < nmaps && j->nobjects < MAX_AT_EXEC_OBJECTS; i++) {
		if (!(maps[i].perms & PROCFS_MAP_EXEC) || !maps[i].inode ||
		    mapped_by_exec(j, maps[i].path))
			continue;
		snprintf(j->objects[j->nobjects++], PATH_MAX, "%s", maps[i].path);
	}
	free(maps);
	r = guard_mapped(j);
	if (r < 0)
		return r;
	/* No loader: a static executable has all its code mapped already. */
	if (j->nobjects == 1)
		return 1;
	return r;
}

/* Answers the end of step 4 from what was found. */
static int loader_done(struct exec_job *j, const char *how)
{
	struct proto_result *res = j->res;

	if (j->sites.n == 0) {
		snprintf(res->message, sizeof(res->message),
			 "%s maps no backtrace() definition before its own code runs (%s); let go unguarded",
			 j->exe, how);
		return -BTG_ERR_NOSITE;
	}
	snprintf(res->message, sizeof(res->message),
		 "guarded at its exec of %s, before any of its code ran (%s)", j->exe, how);
	return 0;
}

/* A system call-stop: steps 2 and 4. */
static int at_syscall(struct exec_job *j)
{
	struct proto_result *res = j->res;
	struct ptrace_syscall_stop sc;
	char how[96];
	int r = ptrace_follow_syscall_info(&j->f, &sc);

	if (r < 0) {
		snprintf(res->message, sizeof(res->message), "PTRACE_GET_SYSCALL_INFO: %s", strerror(-r));
		return r == -ESRCH ? -BTG_ERR_GONE : r;
	}
	if (sc.entry)
		j->last_nr = sc.nr;
	if (j->phase == PHASE_BEFORE) {
		if (sc.entry && j->exec_errno && !is_exec_call(sc.nr)) {
			snprintf(res->message, sizeof(res->message),
				 "its execve() failed (%s): process %d runs on in its old program, unguarded; nothing was written",
				 strerrorname_np(j->exec_errno) ?: "?", j->pid);
			return -j->exec_errno;
		}
		if (!sc.entry && is_exec_call(j->last_nr) && sc.is_error)
			j->exec_errno = (int)-sc.rval;
		return 0;
	}
	if (sc.entry) {
		j->loader_calls++;
		if (!is_loader_call(sc.nr)) {
			snprintf(how, sizeof(how), "its first system call of its own, number %" PRIu64, sc.nr);
			return loader_done(j, how) ?: 1;
		}
		if (j->loader_calls > EXEC_LOADER_CALLS)
			return loader_done(j, "its loader made too many system calls") ?: 1;
		return 0;
	}
	r = guard_mapped(j);
	if (r == 1) {
		snprintf(how, sizeof(how), "after %u system calls of its loader", j->loader_calls);
		loader_done(j, how);
	}
	return r;
}

static bool is_job_stop(int sig)
{
	return sig == SIGSTOP || sig == SIGTSTP || sig == SIGTTIN || sig == SIGTTOU;
}

/*
 * One status of the process: 0 to follow on (resumed), 1 when done (the
 * answer is in res), EXEC_ARMED when it became followed, or an error.
 */
static int on_status(struct exec_job *j, int status)
{
	struct proto_result *res = j->res;
	int sig, r;

	switch (ptrace_follow_classify(status, &sig)) {
	case PTRACE_FOLLOW_ENDED:
		if (WIFSIGNALED(status))
			snprintf(res->message, sizeof(res->message), "process %d was killed by SIG%s %s",
				 j->pid, sigabbrev_np(WTERMSIG(status)) ?: "?",
				 j->phase == PHASE_LOADER ? "while its loader ran" : "before its exec");
		else
			snprintf(res->message, sizeof(res->message), "process %d exited %s%s%s", j->pid,
				 j->phase == PHASE_LOADER ? "while its loader ran" : "before its exec",
				 j->exec_errno ? "; its execve() failed: " : "",
				 j->exec_errno ? strerrorname_np(j->exec_errno) ?: "?" : "");
		return -BTG_ERR_GONE;
	case PTRACE_FOLLOW_EXEC:
		r = at_exec(j);
		if (r == 1 && j->nobjects == 1)
			r = loader_done(j, "a static executable, at its exec") ?: 1;
		break;
	case PTRACE_FOLLOW_GROUP:
		/* A job-control stop it must stay in (still followed), or our interrupt. */
		r = is_job_stop(sig) ? ptrace_follow_listen(&j->f) : ptrace_follow_syscall(&j->f, 0);
		if (r == 0 && j->phase == PHASE_SEIZED) {
			j->phase = PHASE_BEFORE;
			return EXEC_ARMED;
		}
		return r;
	case PTRACE_FOLLOW_SYSCALL:
		r = at_syscall(j);
		break;
	case PTRACE_FOLLOW_SIGNAL:
	default:
		/* A signal on its way to it: it gets it. */
		return ptrace_follow_syscall(&j->f, sig);
	}
	if (r == 0)
		r = ptrace_follow_syscall(&j->f, 0);
	return r;
}

int exec_step(struct exec_job *j, uint64_t *ret_wake_ms)
{
	struct timespec until, now, left;
	/*
	 * Waited for only after a resume of this step, when a stop usually
	 * follows within microseconds.  A step that finds nothing returns at
	 * once: a process waiting for its go (a task until slurmstepd lets the
	 * step exec) may sit there for seconds, and a follow that waited out
	 * each step would take a whole turn of the loop from every other.
	 */
	bool resumed = j->phase == PHASE_SEIZED, stopped = false;   /* interrupted: as resumed */
	int status, r;

	timespec_after_ms(&until, EXEC_STEP_MS);
	/* Bounded however busy the process is: the rest waits for the next step. */
	while (timespec_left(&until, &left)) {
		clock_gettime(CLOCK_MONOTONIC, &now);
		r = ptrace_follow_wait(&j->f, resumed ? &until : &now, &status);
		if (r < 0)
			return finish_follow(j, r == -ESRCH ? -BTG_ERR_GONE : r);
		if (r == 0)
			break;
		stopped = true;
		r = on_status(j, status);
		if (r == EXEC_ARMED) {
			snprintf(j->res->message, sizeof(j->res->message),
				 "armed: following process %d through its next exec", j->pid);
			j->res->flags |= PROTO_RESULT_ARMED;
			*ret_wake_ms = now_ms() + WAKE_BEFORE_MS;
			return EXEC_ARMED;
		}
		/* ESRCH from a ptrace call: killed under us (SIGKILL needs no stop). */
		if (r == -ESRCH)
			snprintf(j->res->message, sizeof(j->res->message),
				 "process %d was killed during the follow", j->pid);
		if (r != 0)
			return finish_follow(j, r == 1 ? 0 : r == -ESRCH ? -BTG_ERR_GONE : r);
		resumed = j->f.stopped == false;
	}
	if (j->phase == PHASE_LOADER && !timespec_left(&j->loader_by, &left))
		return finish_follow(j, loader_done(j, "its loader took too long"));
	if (j->phase != PHASE_LOADER && !timespec_left(&j->deadline, &left)) {
		snprintf(j->res->message, sizeof(j->res->message),
			 "process %d did not exec before the deadline; let go, nothing was written", j->pid);
		return finish_follow(j, -ETIMEDOUT);
	}
	/*
	 * Before the exec, a quiet process is looked at less and less often
	 * (2, 4 ... 16 ms): many followed tasks cost the loop little, and a
	 * stop waits at most that long; after a stop, soon again.
	 */
	if (stopped || j->phase == PHASE_LOADER)
		j->wake_before_ms = WAKE_BEFORE_MS;
	else if (j->wake_before_ms < WAKE_IDLE_MAX_MS)
		j->wake_before_ms = j->wake_before_ms ? 2 * j->wake_before_ms : WAKE_BEFORE_MS;
	*ret_wake_ms = now_ms() + (j->phase == PHASE_LOADER ? WAKE_LOADER_MS : j->wake_before_ms);
	return EXEC_AGAIN;
}

int exec_cancel(struct exec_job *j, int err, const char *why)
{
	snprintf(j->res->message, sizeof(j->res->message), "%s", why);
	return finish_follow(j, err);
}

void exec_end(struct exec_job *j)
{
	if (!j)
		return;
	/* Every answer let it go; this only guards against a broken caller. */
	if (j->f.seized)
		ptrace_follow_release(&j->f, 0);
	if (j->slot)
		follows_put(&slots, j->caller.uid);
	sites_free(&j->sites);
	free(j);
}

/*
 * How long ago the process started (its fork), from its start time in
 * clock ticks since boot (/proc/PID/stat, which counts CLOCK_BOOTTIME).
 * 0 when unknown: then the follow is bounded from now.
 */
static uint64_t process_age_ms(uint64_t start_ticks)
{
	long hz = sysconf(_SC_CLK_TCK);
	struct timespec now;
	uint64_t start_ms, now_boot_ms;

	if (!start_ticks || hz <= 0 || clock_gettime(CLOCK_BOOTTIME, &now) < 0)
		return 0;
	start_ms = start_ticks * 1000u / (uint64_t)hz;
	now_boot_ms = timespec_to_ms(&now);
	return now_boot_ms > start_ms ? now_boot_ms - start_ms : 0;
}

int exec_begin(const struct auth_caller *caller, pid_t pid, const struct patch_pin *pin,
	       bool walk, uint32_t deadline_ms, struct proto_result *res, struct exec_job **reterr_job)
{
	char why[PROTO_MAX_MESSAGE + 1];
	struct exec_job *j;
	pid_t *tids = NULL;
	size_t ntids = 0;
	uint64_t age_ms;
	uint32_t hold_ms;
	int r;

	/* The pin is only read for its age: the tracer sees the exit first,
	 * so the PID cannot be reused under us. */
	*reterr_job = NULL;
	res->state = PROTO_PROC_UNKNOWN;
	r = procfs_list_tasks(pid, &tids, &ntids);
	free(tids);
	if (r < 0) {
		snprintf(res->message, sizeof(res->message), "process %d has exited", pid);
		r = procfs_gone(r) ? -BTG_ERR_GONE : r;
		goto out_answer;
	}
	/* A thread that is not followed could exec (or map libc) unseen. */
	if (ntids != 1) {
		snprintf(res->message, sizeof(res->message),
			 "process %d has %zu threads; --at-exec follows a process with one, such as a launcher's child between fork and exec",
			 pid, ntids);
		r = -EINVAL;
		goto out_answer;
	}
	age_ms = process_age_ms(pin->start_ticks);
	hold_ms = follows_hold_ms(age_ms, deadline_ms ? deadline_ms : PROTO_DEFAULT_DEADLINE_MS);
	if (hold_ms == 0) {
		snprintf(res->message, sizeof(res->message),
			 "process %d started %" PRIu64 " s ago; a follow lasts at most %u s from a process's start (from its fork to its exec); not followed",
			 pid, age_ms / 1000, FOLLOWS_MAX_HOLD_MS / 1000);
		r = -BTG_ERR_LIMIT;
		goto out_answer;
	}
	j = calloc(1, sizeof(*j));
	if (!j) {
		r = -ENOMEM;
		goto out_answer;
	}
	r = follows_take(&slots, caller->uid, why, sizeof(why));
	if (r < 0) {
		snprintf(res->message, sizeof(res->message), "process %d not followed: %s", pid, why);
		free(j);
		goto out_answer;
	}
	j->slot = true;
	j->walk = walk;
	j->pid = pid;
	j->caller = *caller;
	j->res = res;
	j->last_nr = UINT64_MAX;
	timespec_after_ms(&j->deadline, hold_ms);
	r = ptrace_follow_seize(&j->f, pid);
	if (r < 0) {
		snprintf(res->message, sizeof(res->message), "cannot follow process %d: %s", pid,
			 proto_strerror(r));
		exec_end(j);
		r = r == -ESRCH ? -BTG_ERR_GONE : r;
		goto out_answer;
	}
	*reterr_job = j;
	return 0;

out_answer:
	res->error = proto_error_from_negative(r);
	return r;
}
