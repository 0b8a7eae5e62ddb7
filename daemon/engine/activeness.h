/* SPDX-License-Identifier: MIT */
/*
 * Step 4f of the patch procedure (patch.c), the activeness check's glue:
 * which bytes no thread may be in or return into, each thread checked as
 * it stops (ptworld.c's on_stop hook), the rest and the scan worker's
 * verdicts once all have stopped, and the why of a refusal.
 */
#ifndef BTGUARD_ACTIVENESS_H
#define BTGUARD_ACTIVENESS_H

#include "ptrace.h"

struct attempt;

/* The attempt's spans from the sites it writes; its check's figures zeroed. */
void activeness_plan(struct attempt *a);

/* The on_stop hook (ctx: the attempt): 0, or why the attempt must stop (a->why). */
int activeness_on_stop(void *ctx, const struct ptrace_task *t);

/*
 * Every stopped thread the hook did not check, then the scans handed to
 * the worker: 0, -BTG_ERR_BUSY (a thread in the bytes, a->why says
 * which), -BTG_ERR_STOP (scans the deadline cut short), -ENOMEM.
 */
int activeness_check_threads(struct attempt *a, const struct ptrace_world *w);

#endif
