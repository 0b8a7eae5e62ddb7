/* SPDX-License-Identifier: MIT */
/*
 * The processes held with a target (patch.c's steps 4a-4c): those sharing
 * its address space (vmshare.c), whether the caller may hold each, whether
 * any task of them all is in uninterruptible sleep, and the ones made
 * while the world was being stopped.
 */
#ifndef BTGUARD_SHARERS_H
#define BTGUARD_SHARERS_H

#include "ptrace.h"

struct attempt;

/* Step 4a: a->vs from a fresh scan, each sharer authorized: 0, -BTG_ERR_SHARED (a->why). */
int sharers_scan(struct attempt *a);

/* Steps 4b-4c before the stop: no task of any group in uninterruptible sleep (-BTG_ERR_BUSY). */
int sharers_interruptible(struct attempt *a);

/*
 * Step 4c once stopped: processes sharing the memory made since the scan
 * were made by tasks now stopped, or by sharers now stopped: list again
 * until none is new, and hold those too.  Then confirm every sharer held
 * still shares it.  On failure the world is resumed.
 */
int sharers_stop_late(struct attempt *a, struct ptrace_world *w);

#endif
