// SPDX-License-Identifier: MIT
/*
 * The activeness check's glue for one attempt (activeness.h): stackcheck.c
 * walks and scans; this says over which bytes, when, and what a refusal
 * tells the caller.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "activeness.h"
#include "attempt.h"
#include "log.h"
#include "timeutil.h"
#include "walk.h"

/* What the scan worker gets past the deadline, once the world has stopped (collect_checks). */
#define COLLECT_GRACE_MS 10u

static void add_span(struct attempt *a, uint64_t lo, uint64_t hi, enum stackcheck_span_kind kind)
{
	if (a->nspans < STACKCHECK_MAX_SPANS)
		a->spans[a->nspans++] = (struct stackcheck_span){ .lo = lo, .hi = hi, .kind = kind };
}

/*
 * The bytes this attempt changes: what no thread may be in, or return
 * into.  Where the walk's code goes (its second write, walk.h), three
 * more, whose stack and register hits the thread's frames confirm (stale
 * words of old calls are everywhere; stackcheck_scan.h): the code from
 * its first byte on (a span's lo is excluded); backtrace()'s
 * instructions after the bytes that name it, up to the call that hands
 * it to the unwinder, where a thread may hold its address; and the
 * return from that call, for a thread inside it.
 */
void activeness_plan(struct attempt *a)
{
	a->nspans = 0;
	for (size_t i = 0; i < a->sites->n; i++) {
		const struct site *s = &a->sites->v[i];
		enum site_form form = site_form(a->guard, a->walk, s);

		if (site_entry_wants_write(form, s))
			add_span(a, site_change_lo(s), site_change_lo(s) + s->held.len,
				 STACKCHECK_SPAN_BYTES);
		if (walk_call_changes(s, form == SITE_FORM_WALK))
			add_span(a, s->walk.call, s->walk.call + ARCH_WALK_CALL_LEN,
				 STACKCHECK_SPAN_BYTES);
		if (walk_code_changes(s, form == SITE_FORM_WALK) && form != SITE_FORM_WALK) {
			uint64_t ret = s->walk.where.call_return;

			add_span(a, s->walk.code - 1, s->walk.code + s->walk.code_len,
				 STACKCHECK_SPAN_CODE);
			add_span(a, s->walk.call + ARCH_WALK_CALL_LEN - 1, ret, STACKCHECK_SPAN_WINDOW);
			add_span(a, ret - 1, ret + 1, STACKCHECK_SPAN_CALLER);
		}
	}
	a->check_us = 0;
	a->checked_early = 0;
}

/*
 * A check's verdict r, in a->why: -BTG_ERR_BUSY for anything but 0 and
 * -ENOMEM, and -BTG_ERR_STOP for scans the deadline cut short, which say
 * no more than a stop cut short (patch_step() then answers with the check
 * that refused the attempt before).
 */
static int explain_check(struct attempt *a, int r, const struct stackcheck_hit *hit)
{
	if (r == -ETIMEDOUT && !hit->tid) {
		snprintf(a->why, a->why_len, "the stack scans of process %d did not finish in time", a->pid);
		return -BTG_ERR_STOP;
	}
	if (r == -BTG_ERR_BUSY)
		snprintf(a->why, a->why_len,
			 "thread %d %s 0x%" PRIx64 ", inside the bytes to change",
			 hit->tid, hit->by_scan ? "has on its stack (a return address or a signal frame's PC)" :
			 hit->frame == 0 ? "is executing at" : "will return to", hit->pc);
	else if (r < 0)
		snprintf(a->why, a->why_len, "could not check the stack of thread %d: %s",
			 hit->tid, strerror(-r));
	return r < 0 && r != -ENOMEM ? -BTG_ERR_BUSY : r;
}

/*
 * Step 4f for one stopped thread.  A stack we could not read is treated
 * like a busy one: retry.
 */
static int check_thread(struct attempt *a, const struct ptrace_task *t)
{
	struct stackcheck_hit hit;
	struct timespec t0, t1;
	int r;

	clock_gettime(CLOCK_MONOTONIC, &t0);
	r = stackcheck_thread(a->sc, t->tid, &t->regs, a->spans, a->nspans, &hit);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	a->check_us += timespec_diff_us(&t0, &t1);
	return explain_check(a, r, &hit);
}

/* The scans check_thread() handed to the worker, finished and judged. */
static int collect_checks(struct attempt *a)
{
	struct stackcheck_hit hit;
	struct timespec t0, t1, by, least;
	int r;

	/*
	 * As long as a stop may take, within the deadline; but the world has
	 * stopped already, and an attempt the deadline started at (the last)
	 * gets a moment past it rather than being thrown away for microseconds.
	 */
	timespec_after_ms(&by, PATCH_STOP_WAIT_MS);
	if (timespec_diff_ns(&by, a->deadline) < 0)
		by = *a->deadline;
	timespec_after_ms(&least, COLLECT_GRACE_MS);
	if (timespec_diff_ns(&by, &least) > 0)
		by = least;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	r = stackcheck_collect(a->sc, &by, &hit);
	clock_gettime(CLOCK_MONOTONIC, &t1);
	a->check_us += timespec_diff_us(&t0, &t1);
	return explain_check(a, r, &hit);
}

/*
 * ptworld.c's on_stop hook: a thread is checked the moment it stops, while
 * the others are still stopping.  That is as good as checking it once all
 * are stopped: it stays stopped until the world is resumed, so its
 * registers cannot change, and its stack is changed only by itself (a
 * return address or a signal frame is written by the thread that owns it
 * or by the kernel for it; coroutine libraries switch stacks only on the
 * thread they belong to).  A hit ends the stop at once.
 */
int activeness_on_stop(void *ctx, const struct ptrace_task *t)
{
	struct attempt *a = ctx;
	int r = check_thread(a, t);

	if (r == 0)
		a->checked_early++;
	return r;
}

/* Step 4f for the threads the hook did not see (their registers were read later), and what the worker scanned. */
int activeness_check_threads(struct attempt *a, const struct ptrace_world *w)
{
	size_t walked, scanned;
	uint64_t scan_bytes;
	int r = 0;

	for (size_t i = 0; r == 0 && i < w->n; i++) {
		const struct ptrace_task *t = &w->tasks[i];

		if (t->state == PTRACE_TASK_STOPPED && !t->checked)
			r = check_thread(a, t);
	}
	if (r == 0)
		r = collect_checks(a);
	stackcheck_stats(a->sc, &walked, &scanned, &scan_bytes);
	log_msg(LOG_DEBUG, "process %d: %zu threads scanned (%" PRIu64 " stack bytes), %zu also walked, %zu of them as soon as they stopped; checks took %" PRIu64 " us",
		a->pid, scanned, scan_bytes, walked, a->checked_early, a->check_us);
	return r;
}
