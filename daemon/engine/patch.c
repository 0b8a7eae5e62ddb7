// SPDX-License-Identifier: MIT
/*
 * The patch procedure.  Safety is the product; each step exists because
 * skipping it has crashed a process somewhere.
 *
 *  1. Find every backtrace() definition with its file bytes (sites.c) in
 *     the target's maps, which its one caller hands over with a live task
 *     to read through (request/action.c reads them once, for these sites
 *     and for its report; a status's are the executable mappings alone).
 *     All look-ups happen before anything is stopped.
 *  2. Classify each site: original, guarded or foreign.  status stops here:
 *     it never stops the target.
 *  3. Decide: nothing to write (already in the wanted state) ends here
 *     without stopping; any foreign site refuses the whole request (we never
 *     write over bytes we do not understand).
 *  4. Attempt, until the deadline; one attempt per patch_step() call, so
 *     the event loop serves other targets between two (queue.c parks this
 *     one until its back-off has passed).  Nothing is stopped between
 *     attempts, and each but the first reads the maps (itself: new threads
 *     bring new stacks) and the sites again first:
 *     a. find the processes sharing the address space (vmshare.c): they run
 *        the same bytes, so they are held and checked like threads; the
 *        caller must be allowed to act on each (one that cannot be held is
 *        refused as facts, which request/action.c puts in words);
 *     b. if a thread is in uninterruptible sleep it could not stop and could
 *        not then be released: back off instead of seizing; read every
 *        object's unwind table header while the target still runs (they
 *        sit in read-only pages), so 4f's walks only search;
 *     c. stop every thread of the target and of each sharer (ptworld.c);
 *        then list /proc again for sharers created meanwhile, stop those
 *        too, and confirm each still shares the memory;
 *     d. check the pin: the PID still names the process the request named;
 *     e. re-read the sites while stopped: they must still be what step 2
 *        saw, or somebody else is writing there;
 *     f. activeness check (stackcheck.c): no thread executes or will return
 *        into the bytes to change, and no saved PC on any of its stacks
 *        points into them; each thread is checked as it stops, the
 *        scans past a large process's first few on a second thread
 *        (scanwork.c), and every verdict is in before 4g; if one finds
 *        something, resume all, back off, retry;
 *     g. write each site's bytes that differ with one ptrace word (the
 *        byte a guard inside an instruction keeps, when a breakpoint sits
 *        on it, with a second; aarch64's fallback, undo and stub: one pwrite of
 *        /proc/TID/mem), read them back, and if any read back differs
 *        restore every site already written (sitewrite.c);
 *     h. resume every thread as it was.
 *  5. Re-read the sites for the reply.
 * Every failure after 4c resumes the world before returning.
 *
 * At an exec (exec.c: guard --at-exec, run) the same sites are found and
 * classified (1-3) and written with 4g alone, at a system call-stop of the
 * new program before any of its code ran.  4a-4f have nothing to do there:
 * the exec left one task (it killed the others, and the loader starts
 * none), its new memory is shared with nobody, and a definition is seen
 * at the first stop after its mapping became executable, so no thread can
 * be executing, or return into, bytes that could not be run before.
 *
 * The stop wait of one attempt (4c) is bounded by PATCH_STOP_WAIT_MS as
 * well as by the deadline (attempt.h says why), so a thread slow to stop
 * holds the loop for one bounded attempt, not for the whole deadline.
 */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "activeness.h"
#include "attempt.h"
#include "auth.h"
#include "fault.h"
#include "log.h"
#include "patch.h"
#include "pin.h"
#include "procfs.h"
#include "ptrace.h"
#include "sites.h"
#include "sharers.h"
#include "sitewrite.h"
#include "stackcheck.h"
#include "timeutil.h"
#include "vmshare.h"
#include "watchdog.h"

/* Between attempts on a busy target: doubling from 1 ms to 20 ms. */
#define BACKOFF_FIRST_MS 1u
#define BACKOFF_MAX_MS   20u
/* Successful writes one request makes at most: the walk's two, and one to spare. */
#define PATCH_MAX_WRITES 3u


void patch_fill_sites(struct proto_result *res, const struct site_list *sites)
{
	res->nsites = 0;
	res->warnings &= (uint8_t)~PROTO_WARN_TORN;   /* as the sites are now */
	for (size_t i = 0; i < sites->n && i < PROTO_MAX_SITES; i++) {
		struct proto_site *ps = &res->sites[res->nsites++];

		ps->address = sites->v[i].addr;
		ps->state = (uint8_t)sites->v[i].state;
		ps->flags = sites->v[i].breakpoint ? PROTO_SITE_BREAKPOINT : 0;
		if (site_walks(&sites->v[i]))
			ps->flags |= PROTO_SITE_WALKS;
		if (sites->v[i].state == PROTO_SITE_TORN)
			res->warnings |= PROTO_WARN_TORN;
		snprintf(ps->object, sizeof(ps->object), "%s%s", sites->v[i].object,
			 sites->v[i].deleted ? " (deleted)" : "");
	}
	res->state = (uint8_t)sites_proc_state(sites);
}

static int check_pin(pid_t pid, const struct patch_pin *pin, char *why, size_t why_len)
{
	struct procfs_stat st;
	bool exited = pin_exited(pin->pidfd);
	int r;

	/*
	 * A live pidfd's process keeps its PID: nothing more to read (this
	 * runs inside the pause).  Without one, the start time says it.
	 */
	if (pin->pidfd >= 0 && !exited)
		return 0;
	r = procfs_read_stat(pid, &st);

	/*
	 * A live process under the PID that is not ours says more than
	 * "exited": another start time, or - recycled within the 10 ms tick
	 * start times count - the same one while our pidfd says ours is gone.
	 */
	bool other = r == 0 && ((pin->start_ticks && st.start_ticks != pin->start_ticks) ||
				(exited && pin->pidfd >= 0 && st.state != 'Z' && st.state != 'X'));

	if (other) {
		snprintf(why, why_len, "PID %d now names another process", pid);
		return -BTG_ERR_REUSED;
	}
	if (exited || r < 0) {
		snprintf(why, why_len, "process %d exited during the operation", pid);
		return -BTG_ERR_GONE;
	}
	return 0;
}

static pid_t first_stopped(const struct ptrace_world *w)
{
	for (size_t i = 0; i < w->n; i++)
		if (w->tasks[i].state == PTRACE_TASK_STOPPED)
			return w->tasks[i].tid;
	return 0;
}

/* One stop-check-write-resume attempt (steps 4c-4h). */
static int attempt_once(struct attempt *a)
{
	struct ptrace_world w;
	int states[PROTO_MAX_SITES];
	int r, r2;

	for (size_t i = 0; i < a->sites->n && i < PROTO_MAX_SITES; i++)
		states[i] = a->sites->v[i].state;
	struct ptrace_on_stop hook = { .fn = activeness_on_stop, .ctx = a };

	stackcheck_reset(a->sc, a->maps, a->nmaps);
	stackcheck_preload(a->sc);   /* step 4b: the unwind headers, outside the pause */
	activeness_plan(a);
	/* Stacks may be scanned on the worker while the others stop (collected in 4f). */
	stackcheck_defer_begin(a->sc, a->spans, a->nspans);
	r = ptrace_stop_all(&w, a->pid, a->vs.sharers, a->vs.n, &a->stop_by, &hook, a->why,
			    a->why_len);
	if (r < 0) {
		stackcheck_defer_end(a->sc);
		return r;
	}
	r = sharers_stop_late(a, &w);
	if (r < 0) {
		stackcheck_defer_end(a->sc);
		a->pause_us = ptrace_world_pause_us(&w);
		return r;
	}
	fault_hold_world();
	r = check_pin(a->pid, a->pin, a->why, a->why_len);
	if (r < 0)
		goto out_resume;
	r = sites_read(a->via, a->sites);
	if (r < 0) {
		snprintf(a->why, a->why_len, "cannot read the sites of process %d while stopped", a->pid);
		goto out_resume;
	}
	for (size_t i = 0; i < a->sites->n && i < PROTO_MAX_SITES; i++) {
		if (a->sites->v[i].state != states[i]) {
			snprintf(a->why, a->why_len, "%s at 0x%" PRIx64 " changed under us",
				 a->sites->v[i].object, a->sites->v[i].addr);
			r = -BTG_ERR_FOREIGN;
			goto out_resume;
		}
	}
	r = activeness_check_threads(a, &w);
	if (r < 0)
		goto out_resume;
	r = sitewrite_all(a->pid, first_stopped(&w), a->sites, a->guard, a->walk, a->why, a->why_len);
out_resume:
	r2 = ptrace_resume_all(&w);
	stackcheck_defer_end(a->sc);
	a->pause_us = ptrace_world_pause_us(&w);
	if (w.all_stopped.tv_sec) {
		log_msg(LOG_DEBUG, "process %d: every task stopped from %lld.%09ld to %lld.%09ld (CLOCK_MONOTONIC)",
			a->pid, (long long)w.all_stopped.tv_sec, w.all_stopped.tv_nsec,
			(long long)w.first_resume.tv_sec, w.first_resume.tv_nsec);
		/* Where the pause went (bench/ab reads it): the figures to compare with ptfloor's. */
		log_msg(LOG_DEBUG, "process %d: paused %" PRIu64 " us: seizing %" PRIu64 ", stopping and checking %" PRIu64 ", held %" PRIu64 ", detaching %" PRIu64,
			a->pid, a->pause_us, timespec_diff_us(&w.first_stop, &w.seized),
			timespec_diff_us(&w.seized, &w.all_stopped),
			timespec_diff_us(&w.all_stopped, &w.first_resume),
			timespec_diff_us(&w.first_resume, &w.last_resume));
	}
	if (w.detach_failed_tid)
		log_msg(LOG_NOTICE, "process %d: detaching thread %d failed (%s); retried%s", a->pid,
			w.detach_failed_tid, strerror(-w.detach_failed_err),
			r2 < 0 ? ", and left to the orphan reaper" : ", and it went");
	if (r == 0 && r2 < 0) {
		snprintf(a->why, a->why_len, "detaching: %s", strerror(-r2));
		r = r2;
	}
	return r;
}

static bool is_retryable(int r)
{
	return r == -BTG_ERR_BUSY || r == -BTG_ERR_STOP;
}

/* New threads bring new stacks: the next check needs the maps as they are now. */
static int refresh_maps(struct attempt *a)
{
	struct procfs_mapping *maps;
	size_t n;
	int r = procfs_read_maps(a->via, &maps, &n);

	if (r < 0)
		return procfs_gone(r) ? -BTG_ERR_GONE : r;
	free(a->maps);
	a->maps = maps;
	a->nmaps = n;
	return 0;
}

/* Step 3: refuses foreign sites; *ret_todo counts the sites to write. */
static int plan_writes(struct attempt *a, size_t *ret_todo)
{
	size_t todo = 0;

	for (size_t i = 0; i < a->sites->n; i++) {
		const struct site *s = &a->sites->v[i];

		if (s->state == PROTO_SITE_FOREIGN) {
			snprintf(a->why, a->why_len,
				 "%s at 0x%" PRIx64 " holds bytes that are neither the original nor the guard; not touching it",
				 s->object, s->addr);
			return -BTG_ERR_FOREIGN;
		}
		if (site_wants_write(site_form(a->guard, a->walk, s), s))
			todo++;
	}
	*ret_todo = todo;
	return 0;
}

struct patch_job {
	struct attempt a;
	struct auth_caller caller;
	struct patch_pin pin;
	struct site_list sites;
	struct timespec deadline;
	struct proto_result *res;
	unsigned backoff_ms;
	unsigned attempts;
	unsigned writes;            /* attempts that wrote */
	bool answer_fresh;          /* finish() found the pin holding and read through a.via */
	char busy_why[PROTO_MAX_MESSAGE + 1];
};

/*
 * Before each attempt but the first: the world moved while the target
 * waited, so plan again from what it holds now.  This is the attempt's
 * one look at the pin before the stop.  It comes after the maps are read,
 * so they (or the failure to read them) are about the pinned process and
 * nobody else - a broken pin's answer replaces what that read said - and
 * before the sites are, which the answer shows: a recycled PID's bytes
 * never replace what was last seen of the pinned process.
 */
static int replan(struct patch_job *j, size_t *ret_todo)
{
	struct attempt *a = &j->a;
	int r = refresh_maps(a), r2;

	r2 = check_pin(a->pid, a->pin, a->why, a->why_len);
	if (r2 < 0)
		return r2;
	if (r == 0) {
		r = sites_read(a->via, a->sites);
		if (r < 0)
			snprintf(a->why, a->why_len, "cannot read the sites of process %d: %s", a->pid,
				 proto_strerror(r));
	}
	if (r == 0)
		r = plan_writes(a, ret_todo);
	return r;
}

/*
 * A guard asked for the segment walk: a site with none got the stub (the
 * fallback, which never leaves a process unguarded), and the answer says
 * where and why.
 */
void patch_say_no_walk(struct proto_result *res, const struct site_list *sites)
{
	for (size_t i = 0; i < sites->n; i++) {
		const struct site *s = &sites->v[i];

		if (s->walk.planned)
			continue;
		res->warnings |= PROTO_WARN_NO_WALK;
		if (!res->message[0])
			snprintf(res->message, sizeof(res->message),
				 "%s: backtraces emptied, not walked: %s", s->object, s->walk.why);
	}
}

/*
 * Step 5, and the answer: what the target holds now, if it is still the
 * target.  This is the look after the write; patch_answer_fresh() shares
 * it with the report, which reads on through the same task.
 */
static int finish(struct patch_job *j, int r)
{
	char scratch[PROTO_MAX_MESSAGE + 1];

	/* If it cannot be read any more, the states are what we last saw or wrote. */
	j->answer_fresh = check_pin(j->a.pid, &j->pin, scratch, sizeof(scratch)) == 0 &&
			  sites_read(j->a.via, &j->sites) == 0;
	patch_fill_sites(j->res, &j->sites);
	if (j->a.guard && j->a.walk)
		patch_say_no_walk(j->res, &j->sites);
	j->res->error = proto_error_from_negative(r);
	return r;
}

/*
 * Step 4, one attempt: all of it within one call, so nothing is stopped
 * or traced when it returns.  A retryable refusal parks the target until
 * its back-off has passed (PATCH_AGAIN); the event loop serves everybody
 * else meanwhile.
 */
int patch_step(struct patch_job *j, uint64_t *ret_wake_ms)
{
	struct attempt *a = &j->a;
	struct proto_result *res = j->res;
	struct timespec left;
	uint64_t t_ms, until_ms;
	size_t todo;
	int r;

	watchdog_kick();
	if (j->attempts++ > 0) {
		r = replan(j, &todo);
		if (r < 0)
			return finish(j, r);
		if (todo == 0) {
			/* Somebody else finished the job meanwhile. */
			if (!j->writes)
				snprintf(a->why, a->why_len, "already %s, nothing written",
					 a->guard ? "guarded" : "unguarded");
			return finish(j, 0);
		}
	}
	/* A thread killed while we held it (an exec's de_thread kills
	 * every other thread) stays a zombie until its tracer, us, reaps
	 * it, and the exec waits in D state for that: reap before the D
	 * check, or the check waits out the deadline on our own zombie. */
	ptrace_reap_orphans();
	/*
	 * Every attempt reads /proc and memory by PID, and a retry may come
	 * long after the pin was taken: never stop a process that has taken
	 * over the PID.  One look at the pin per attempt before the stop,
	 * after what the attempt read: replan()'s at a retry; at the first,
	 * here, after what patch_begin() read.
	 */
	r = j->attempts == 1 ? check_pin(a->pid, a->pin, a->why, a->why_len) : 0;
	if (r == 0)
		r = sharers_scan(a);
	if (r == 0)
		r = sharers_interruptible(a);
	if (r == 0) {
		/* The stop wait ends at the bound or the deadline, whichever is first. */
		timespec_after_ms(&a->stop_by, PATCH_STOP_WAIT_MS);
		if (timespec_diff_ns(&a->stop_by, a->deadline) < 0)
			a->stop_by = *a->deadline;
		r = attempt_once(a);
		if (a->pause_us > res->pause_us || r == 0) {
			res->pause_us = (uint32_t)a->pause_us;
			res->check_us = (uint32_t)a->check_us;
		}
	}
	if (r == 0) {
		res->flags |= PROTO_RESULT_WROTE;
		a->why[0] = '\0';
		/*
		 * Taking the segment walk away is two writes (walk.h): the
		 * second comes in another stop, as soon as the calls that
		 * took the code's address are done; a few attempts bound it.
		 */
		if (++j->writes < PATCH_MAX_WRITES && plan_writes(a, &todo) == 0 && todo > 0 &&
		    timespec_left(a->deadline, &left)) {
			*ret_wake_ms = now_ms() + 1;
			j->backoff_ms = BACKOFF_FIRST_MS;
			return PATCH_AGAIN;
		}
		return finish(j, 0);
	}
	/*
	 * An attempt the deadline cut short while stopping says less than
	 * the check that refused the one before it: answer with that.
	 */
	if (r == -BTG_ERR_BUSY)
		snprintf(j->busy_why, sizeof(j->busy_why), "%s", a->why);
	else if (r == -BTG_ERR_STOP && j->busy_why[0] && !timespec_left(a->deadline, &left))
		snprintf(a->why, a->why_len, "%s", j->busy_why);
	if (!is_retryable(r) || !timespec_left(a->deadline, &left))
		return finish(j, r == -BTG_ERR_STOP ? -BTG_ERR_BUSY : r);
	/* Back off, but never past the deadline: the last attempt comes at it. */
	t_ms = now_ms();
	until_ms = timespec_to_ms(a->deadline);
	*ret_wake_ms = t_ms + j->backoff_ms < until_ms ? t_ms + j->backoff_ms : until_ms;
	j->backoff_ms = j->backoff_ms * 2 > BACKOFF_MAX_MS ? BACKOFF_MAX_MS : j->backoff_ms * 2;
	return PATCH_AGAIN;
}

bool patch_answer_fresh(const struct patch_job *j, pid_t *ret_via)
{
	if (!j || !j->answer_fresh)
		return false;
	*ret_via = j->a.via;
	return true;
}

const struct sharer_refusal *patch_sharer_refused(const struct patch_job *j)
{
	return j->a.refused.why != SHARER_NONE ? &j->a.refused : NULL;
}

int patch_cancel(struct patch_job *j, int err, const char *why)
{
	snprintf(j->a.why, j->a.why_len, "%s", why);
	return finish(j, err);
}

void patch_end(struct patch_job *j)
{
	if (!j)
		return;
	stackcheck_free(j->a.sc);
	vmshare_free(&j->a.vs);
	sites_free(&j->sites);
	free(j->a.maps);
	free(j);
}

/* Steps 1-3: everything before the first attempt, done once. */
int patch_begin(const struct auth_caller *caller, pid_t pid, pid_t via,
		struct procfs_mapping *maps, size_t nmaps, const struct patch_pin *pin,
		unsigned action, uint32_t deadline_ms, struct proto_result *res,
		struct patch_job **reterr_job)
{
	struct patch_job *j;
	size_t todo;
	int r;

	*reterr_job = NULL;
	res->state = PROTO_PROC_UNKNOWN;
	j = calloc(1, sizeof(*j));
	if (!j) {
		free(maps);
		snprintf(res->message, sizeof(res->message), "out of memory");
		r = -ENOMEM;
		goto out_answer;
	}
	j->caller = *caller;
	j->pin = *pin;
	j->res = res;
	j->backoff_ms = BACKOFF_FIRST_MS;
	timespec_after_ms(&j->deadline, deadline_ms ? deadline_ms : PROTO_DEFAULT_DEADLINE_MS);
	j->a = (struct attempt){
		.pid = pid, .via = via, .pin = &j->pin, .caller = &j->caller,
		.guard = (action & ~PATCH_WALK) == PROTO_ACTION_GUARD, .walk = (action & PATCH_WALK) != 0,
		.sites = &j->sites,
		.deadline = &j->deadline, .why = res->message, .why_len = sizeof(res->message),
		.maps = maps, .nmaps = nmaps,
	};
	/* A status may take what the last search of this process found; a write never does. */
	if (action == PROTO_ACTION_STATUS)
		r = sites_find_remembered(via, j->a.maps, j->a.nmaps, &j->sites, res->message,
					  sizeof(res->message));
	else
		r = sites_find(via, j->a.maps, j->a.nmaps, &j->sites, res->message,
			       sizeof(res->message));
	if (r < 0)
		goto out_answer;
	patch_fill_sites(res, &j->sites);
	if (action == PROTO_ACTION_STATUS) {
		if (j->sites.n == 0)
			snprintf(res->message, sizeof(res->message),
				 "no backtrace() definition is loaded in this process");
		goto out_answer;
	}
	if (j->sites.n == 0) {
		snprintf(res->message, sizeof(res->message),
			 "no backtrace() definition is loaded in this process; nothing to %s",
			 proto_action_name(action & ~PATCH_WALK));
		r = -BTG_ERR_NOSITE;
		goto out_answer;
	}
	r = plan_writes(&j->a, &todo);
	if (r == 0 && todo == 0) {
		snprintf(res->message, sizeof(res->message), "already %s, nothing written",
			 j->a.guard ? "guarded" : "unguarded");
		r = finish(j, 0);
		goto out_end;
	}
	if (r == 0)
		r = stackcheck_new(pid, via, j->a.maps, j->a.nmaps, &j->a.sc);
	if (r < 0) {
		r = finish(j, r);
		goto out_end;
	}
	*reterr_job = j;
	return 0;

out_answer:
	res->error = proto_error_from_negative(r);
out_end:
	patch_end(j);
	return r;
}
