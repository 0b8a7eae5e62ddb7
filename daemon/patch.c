// SPDX-License-Identifier: MIT
/*
 * The patch procedure.  Safety is the product; each step exists because
 * skipping it has crashed a process somewhere.
 *
 *  1. Read the target's maps and find every backtrace() definition with its
 *     file bytes (sites.c).  All look-ups happen before anything is stopped.
 *  2. Classify each site: original, guarded or foreign.  status stops here:
 *     it never stops the target.
 *  3. Decide: nothing to write (already in the wanted state) ends here
 *     without stopping; any foreign site refuses the whole request (we never
 *     write over bytes we do not understand).
 *  4. Attempt, until the deadline:
 *     a. if a thread is in uninterruptible sleep it could not stop and could
 *        not then be released: back off instead of seizing;
 *     b. stop every thread (ptrace.c);
 *     c. check the pin: the PID still names the process the request named;
 *     d. re-read the sites while stopped: they must still be what step 2
 *        saw, or somebody else is writing there;
 *     e. activeness check (stackcheck.c): no thread executes or will return
 *        into the bytes to change; if one does, resume all, back off, retry;
 *     f. write each site with one ptrace word, read it back, and if any read
 *        back differs restore every word already written;
 *     g. resume every thread as it was.
 *  5. Re-read the sites for the reply.
 * Every failure after 4b resumes the world before returning.
 */
#include <dirent.h>
#include <errno.h>
#include <inttypes.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "log.h"
#include "patch.h"
#include "procfs.h"
#include "ptrace.h"
#include "sites.h"
#include "stackcheck.h"
#include "timeutil.h"
#include "watchdog.h"

#define BACKOFF_FIRST_US 500
#define BACKOFF_MAX_US   20000

struct attempt {
	pid_t pid;
	const struct patch_pin *pin;
	bool guard;                       /* writing the stub (else the original) */
	struct site_list *sites;
	struct procfs_mapping *maps;      /* as of the last attempt */
	size_t nmaps;
	struct stackcheck *sc;
	const struct timespec *deadline;
	uint64_t pause_us, check_us;
	char *why;
	size_t why_len;
};

static void fill_sites(struct proto_result *res, const struct site_list *sites)
{
	res->nsites = 0;
	for (size_t i = 0; i < sites->n && i < PROTO_MAX_SITES; i++) {
		struct proto_site *ps = &res->sites[res->nsites++];

		ps->address = sites->v[i].addr;
		ps->state = (uint8_t)sites->v[i].state;
		snprintf(ps->object, sizeof(ps->object), "%s%s", sites->v[i].object,
			 sites->v[i].deleted ? " (deleted)" : "");
	}
	res->state = (uint8_t)sites_proc_state(sites);
}

/* -BTG_ERR_BUSY naming the first thread found in uninterruptible sleep. */
static int check_no_uninterruptible(pid_t pid, char *why, size_t why_len)
{
	pid_t *tids = NULL;
	size_t n = 0;
	int r = procfs_list_tasks(pid, &tids, &n);

	if (r < 0)
		return r == -ENOENT || r == -ESRCH ? -BTG_ERR_GONE : r;
	for (size_t i = 0; i < n && r == 0; i++) {
		char path[64], *buf = NULL;
		size_t len;
		struct procfs_stat st;

		snprintf(path, sizeof(path), "/proc/%d/task/%d/stat", pid, tids[i]);
		if (procfs_read_file(path, 4096, &buf, &len) < 0)
			continue;  /* exited meanwhile */
		if (procfs_parse_stat_buf(buf, len, &st) == 0 && st.state == 'D') {
			snprintf(why, why_len,
				 "thread %d is in uninterruptible sleep (D state) and could not be stopped safely",
				 tids[i]);
			r = -BTG_ERR_BUSY;
		}
		free(buf);
	}
	free(tids);
	return r;
}

static int check_pin(pid_t pid, const struct patch_pin *pin, char *why, size_t why_len)
{
	struct procfs_stat st;

	/*
	 * A pidfd polls readable once its process has exited.  (Signal 0 via
	 * pidfd_send_signal would say the same, but is permission-checked like
	 * kill() and so needs CAP_KILL for other users' processes.)
	 */
	struct pollfd p = { .fd = pin->pidfd, .events = POLLIN };
	bool exited = poll(&p, 1, 0) != 0;
	int r = procfs_read_stat(pid, &st);

	/* A live process under the PID that is not ours says more than "exited". */
	if (r == 0 && st.starttime != pin->starttime) {
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
		if (w->tasks[i].stopped && !w->tasks[i].gone)
			return w->tasks[i].tid;
	return 0;
}

static int check_threads(struct attempt *a, const struct ptrace_world *w)
{
	struct stackcheck_span spans[PROTO_MAX_SITES];
	size_t nspans = 0;
	struct stackcheck *sc = a->sc;
	struct timespec t0, t1;
	size_t walked, scanned;
	int r = 0;

	for (size_t i = 0; i < a->sites->n && nspans < PROTO_MAX_SITES; i++) {
		const struct site *s = &a->sites->v[i];
		bool writes = a->guard ? s->state == PROTO_SITE_ORIGINAL : s->state == PROTO_SITE_GUARDED;

		if (!writes)
			continue;
		spans[nspans].lo = site_word_addr(s);
		spans[nspans].hi = site_word_addr(s) + s->plan.len;
		nspans++;
	}
	clock_gettime(CLOCK_MONOTONIC, &t0);
	for (size_t i = 0; r == 0 && i < w->n; i++) {
		const struct ptrace_task *t = &w->tasks[i];
		struct stackcheck_hit hit;

		if (!t->stopped || t->gone)
			continue;
		r = stackcheck_thread(sc, t->tid, &t->regs, spans, nspans, &hit);
		if (r == -BTG_ERR_BUSY)
			snprintf(a->why, a->why_len,
				 "thread %d %s 0x%" PRIx64 ", inside the bytes to change",
				 hit.tid, hit.by_scan ? "holds the stack word" :
				 hit.frame == 0 ? "is executing at" : "will return to", hit.pc);
		else if (r < 0)
			snprintf(a->why, a->why_len, "could not check the stack of thread %d: %s",
				 t->tid, strerror(-r));
	}
	clock_gettime(CLOCK_MONOTONIC, &t1);
	a->check_us = timespec_diff_us(&t0, &t1);
	stackcheck_stats(sc, &walked, &scanned);
	log_msg(LOG_DEBUG, "process %d: %zu threads cleared by stack walk, %zu by stack scan, check took %" PRIu64 " us",
		a->pid, walked, scanned, a->check_us);
	/* A stack we could not read is treated like a busy one: retry. */
	return r < 0 && r != -ENOMEM ? -BTG_ERR_BUSY : r;
}

/* Steps 4f: writes every planned site, verifying each; undoes all on a mismatch. */
static int write_sites(struct attempt *a, pid_t tid)
{
	int r = 0;
	size_t i;

	for (i = 0; i < a->sites->n; i++) {
		struct site *s = &a->sites->v[i];
		bool writes = a->guard ? s->state == PROTO_SITE_ORIGINAL : s->state == PROTO_SITE_GUARDED;
		uint64_t want = site_word(s, a->guard), got;

		if (!writes)
			continue;
		r = ptrace_poke_word(tid, site_word_addr(s), want);
		if (r == 0)
			r = ptrace_peek_word(tid, site_word_addr(s), &got);
		if (r == -ESRCH)  /* the thread we write through was killed while held */
			r = -BTG_ERR_GONE;
		if (r == 0 && got != want)
			r = -BTG_ERR_VERIFY;
		if (r < 0) {
			snprintf(a->why, a->why_len, "writing %s at 0x%" PRIx64 ": %s", s->object,
				 site_word_addr(s), r <= -BTG_ERR_BASE ?
				 proto_error_text((uint32_t)-r) : strerror(-r));
			break;
		}
	}
	if (r == 0) {
		/* What the sites hold now, should the target die before the re-read. */
		for (i = 0; i < a->sites->n; i++) {
			struct site *s = &a->sites->v[i];

			if (a->guard ? s->state == PROTO_SITE_ORIGINAL : s->state == PROTO_SITE_GUARDED)
				s->state = a->guard ? PROTO_SITE_GUARDED : PROTO_SITE_ORIGINAL;
		}
		return 0;
	}
	/*
	 * Undo in reverse, the failing site included (its poke may have landed
	 * before the read-back failed or differed): the process must end up
	 * fully as it was.  Writing a site's original word again is harmless.
	 */
	for (size_t j = i + 1; j-- > 0;) {
		struct site *s = &a->sites->v[j];
		bool wrote = a->guard ? s->state == PROTO_SITE_ORIGINAL : s->state == PROTO_SITE_GUARDED;

		if (wrote)
			ptrace_poke_word(tid, site_word_addr(s), site_word(s, !a->guard));
	}
	return r;
}

/* One stop-check-write-resume attempt (steps 4b-4g). */
static int attempt_once(struct attempt *a)
{
	struct ptrace_world w;
	int states[PROTO_MAX_SITES];
	int r, r2;

	for (size_t i = 0; i < a->sites->n && i < PROTO_MAX_SITES; i++)
		states[i] = a->sites->v[i].state;
	stackcheck_reset(a->sc, a->maps, a->nmaps);
	r = ptrace_stop_all(&w, a->pid, a->deadline, a->why, a->why_len);
	if (r < 0)
		return r;
	r = check_pin(a->pid, a->pin, a->why, a->why_len);
	if (r < 0)
		goto out_resume;
	r = sites_read(a->pid, a->sites);
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
	r = check_threads(a, &w);
	if (r < 0)
		goto out_resume;
	r = write_sites(a, first_stopped(&w));
out_resume:
	r2 = ptrace_resume_all(&w);
	a->pause_us = ptrace_world_pause_us(&w);
	if (r == 0 && r2 < 0) {
		snprintf(a->why, a->why_len, "detaching: %s", strerror(-r2));
		r = r2;
	}
	return r;
}

static void back_off(unsigned *us, const struct timespec *deadline)
{
	struct timespec left, nap = { 0, (long)*us * 1000L };

	if (timespec_left(deadline, &left) && timespec_diff_ns(&nap, &left) > 0)
		nanosleep(&nap, NULL);
	*us = *us * 2 > BACKOFF_MAX_US ? BACKOFF_MAX_US : *us * 2;
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
	int r = procfs_read_maps(a->pid, &maps, &n);

	if (r < 0)
		return r == -ESRCH || r == -ENOENT ? -BTG_ERR_GONE : r;
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
		if (a->guard ? s->state == PROTO_SITE_ORIGINAL : s->state == PROTO_SITE_GUARDED)
			todo++;
	}
	*ret_todo = todo;
	return 0;
}

/* Steps 3-4: runs attempts until one succeeds, fails for good, or the deadline passes. */
static int run_writes(struct attempt *a, struct proto_result *res)
{
	unsigned backoff = BACKOFF_FIRST_US;
	size_t todo;
	int r;

	r = plan_writes(a, &todo);
	if (r < 0)
		return r;
	if (todo == 0) {
		snprintf(a->why, a->why_len, "already %s, nothing written", a->guard ? "guarded" : "unguarded");
		return 0;
	}
	for (;;) {
		struct timespec left;

		watchdog_kick();  /* an operation may retry up to 60 s (watchdog.h) */
		/* A thread killed while we held it (an exec's de_thread kills
		 * every other thread) stays a zombie until its tracer, us, reaps
		 * it, and the exec waits in D state for that: reap before the D
		 * check, or the check waits out the deadline on our own zombie. */
		ptrace_reap_orphans();
		/*
		 * Every pass reads /proc and memory by PID, and a retry may come
		 * long after the pin was taken: never look at, let alone stop, a
		 * process that has taken over the PID.
		 */
		r = check_pin(a->pid, a->pin, a->why, a->why_len);
		if (r == 0)
			r = check_no_uninterruptible(a->pid, a->why, a->why_len);
		if (r == 0) {
			r = attempt_once(a);
			if (a->pause_us > res->pause_us || r == 0) {
				res->pause_us = (uint32_t)a->pause_us;
				res->check_us = (uint32_t)a->check_us;
			}
		}
		if (r == 0) {
			res->flags |= PROTO_RESULT_WROTE;
			a->why[0] = '\0';
			return 0;
		}
		if (!is_retryable(r) || !timespec_left(a->deadline, &left))
			return r == -BTG_ERR_STOP ? -BTG_ERR_BUSY : r;
		back_off(&backoff, a->deadline);
		/* The world moved while it ran: plan again from what it holds now. */
		r = check_pin(a->pid, a->pin, a->why, a->why_len);
		if (r == 0)
			r = refresh_maps(a);
		if (r == 0) {
			r = sites_read(a->pid, a->sites);
			if (r < 0)
				snprintf(a->why, a->why_len, "cannot read the sites of process %d: %s", a->pid,
					 r <= -BTG_ERR_BASE ? proto_error_text((uint32_t)-r) : strerror(-r));
		}
		if (r == 0)
			r = plan_writes(a, &todo);
		if (r < 0)
			return r;
		if (todo == 0)
			return 0;  /* somebody else finished the job meanwhile */
	}
}

int patch_run(pid_t pid, const struct patch_pin *pin, unsigned action,
	      uint32_t deadline_ms, struct proto_result *res)
{
	struct procfs_mapping *maps = NULL;
	struct site_list sites = { 0 };
	struct timespec deadline;
	size_t nmaps = 0;
	int r;

	timespec_after_ms(&deadline, deadline_ms ? deadline_ms : PROTO_DEFAULT_DEADLINE_MS);
	res->state = PROTO_PROC_UNKNOWN;
	r = procfs_read_maps(pid, &maps, &nmaps);
	if (r < 0) {
		snprintf(res->message, sizeof(res->message), "cannot read /proc/%d/maps: %s", pid,
			 strerror(-r));
		r = r == -ESRCH || r == -ENOENT ? -BTG_ERR_GONE : r;
		goto out;
	}
	r = sites_find(pid, maps, nmaps, &sites, res->message, sizeof(res->message));
	if (r < 0)
		goto out;
	fill_sites(res, &sites);
	if (action == PROTO_ACTION_STATUS) {
		if (sites.n == 0)
			snprintf(res->message, sizeof(res->message),
				 "no backtrace() definition is loaded in this process");
		goto out;
	}
	if (sites.n == 0) {
		snprintf(res->message, sizeof(res->message),
			 "no backtrace() definition is loaded in this process; nothing to %s",
			 proto_action_name(action));
		r = -BTG_ERR_NOSITE;
		goto out;
	}

	struct attempt a = {
		.pid = pid, .pin = pin, .guard = action == PROTO_ACTION_GUARD,
		.sites = &sites, .maps = maps, .nmaps = nmaps, .deadline = &deadline,
		.why = res->message, .why_len = sizeof(res->message),
	};
	r = stackcheck_new(pid, maps, nmaps, &a.sc);
	if (r == 0)
		r = run_writes(&a, res);
	stackcheck_free(a.sc);
	maps = a.maps;  /* refreshed by retries */
	/*
	 * Report what the target holds now, whatever happened - if it is still
	 * the target.  If it cannot be read any more, the states are what we
	 * last saw or wrote.
	 */
	char scratch[PROTO_MAX_MESSAGE + 1];
	if (check_pin(pid, pin, scratch, sizeof(scratch)) == 0)
		sites_read(pid, &sites);
	fill_sites(res, &sites);
out:
	res->error = proto_error_from_negative(r);
	sites_free(&sites);
	free(maps);
	return r;
}
