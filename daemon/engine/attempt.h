/* SPDX-License-Identifier: MIT */
/*
 * One attempt of the patch procedure (patch.c's step 4): what its rooms
 * share.  patch.c writes it; sharers.c writes vs (who shares the memory)
 * and activeness.c the spans and the check's figures, each as the field
 * says.  Included by those three alone.
 */
#ifndef BTGUARD_ATTEMPT_H
#define BTGUARD_ATTEMPT_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "auth.h"
#include "procfs.h"
#include "proto.h"
#include "sharer_refusal.h"
#include "sites.h"
#include "stackcheck.h"
#include "vmshare.h"

/*
 * One attempt's wait for every thread to stop (step 4c), at most: a thread
 * that is runnable stops the next time it is scheduled, which on a loaded
 * machine can take a few scheduler periods - the bench's 1,024 idle
 * threads stop in ~20 ms, 16 spinning threads on 2 CPUs in up to ~30 ms.
 * 250 ms is ten times that, and what every other client waits at most for
 * one attempt of a target slow to stop (plus a 50 ms grace, ptworld.c).
 * A shorter deadline still wins.
 */
#define PATCH_STOP_WAIT_MS 250u

struct patch_pin;

struct attempt {
	/* patch.c's, set for each attempt: */
	pid_t pid;
	pid_t via;                        /* a live task of pid: reads go through it */
	const struct patch_pin *pin;
	const struct auth_caller *caller;
	struct vmshare vs;                /* processes sharing the memory, this attempt (sharers.c) */
	struct sharer_refusal refused;    /* one of them not held, as facts (sharers.c) */
	bool guard;                       /* writing a guard (else the original) */
	bool walk;                        /* the guard: the segment walk where a site has it */
	struct site_list *sites;
	struct procfs_mapping *maps;      /* as of the last attempt */
	size_t nmaps;
	struct stackcheck *sc;
	const struct timespec *deadline;  /* the request's */
	struct timespec stop_by;          /* this attempt's stop wait ends here */
	uint64_t pause_us;
	uint64_t check_us;                /* activeness.c's */
	/* This attempt's bytes to change, for every thread's check (activeness.c's). */
	struct stackcheck_span spans[STACKCHECK_MAX_SPANS];
	size_t nspans;
	size_t checked_early;             /* threads checked while others were stopping */
	char *why;
	size_t why_len;
};

#endif
