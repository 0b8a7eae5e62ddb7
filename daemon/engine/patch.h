/* SPDX-License-Identifier: MIT */
/*
 * The guard / unguard / status procedure for one process.  See the step
 * list at the top of patch.c.
 */
#ifndef BTGUARD_PATCH_H
#define BTGUARD_PATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "proto.h"
#include "auth.h"
#include "sharer_refusal.h"

/*
 * What pins the target: a pidfd and its start time, taken when the request
 * arrived.  start_ticks 0: not read (a selector's status, which the live
 * pidfd pins alone).
 */
struct patch_pin {
	int      pidfd;
	uint64_t start_ticks;
};

/* The work on one target between two attempts: everything read once, nothing stopped. */
struct patch_job;

/* patch_step(): the target was busy; call again at *ret_wake_ms. */
#define PATCH_AGAIN 1

/* With PROTO_ACTION_GUARD in patch_begin()'s action: the segment walk where a site has it. */
#define PATCH_WALK 0x100u

/*
 * Starts action (PROTO_ACTION_*) on pid for caller (already authorized for
 * pid itself; processes sharing its memory are authorized at each
 * attempt): steps 1-3, before anything is stopped.  via is a live task of
 * pid, maps its /proc/PID/maps as read through it (the executable file
 * mappings alone will do for a status): all the engine is given, read
 * once by its caller, which also reports from them.  The job takes them
 * over (freed with it, or at once on failure); later attempts read the
 * maps themselves.  res is written until
 * the job ends and must live as long.  Returns 0 with *reterr_job set when
 * attempts are to be made (call patch_step()), or with *reterr_job NULL when res
 * is already the whole answer (status, nothing to write), or the negative
 * code also stored in res->error.
 */
int patch_begin(const struct auth_caller *caller, pid_t pid, pid_t via,
		struct procfs_mapping *maps, size_t nmaps, const struct patch_pin *pin,
		unsigned action, uint32_t deadline_ms, struct proto_result *res,
		struct patch_job **reterr_job);

/*
 * Makes one attempt (step 4) and returns with nothing stopped: PATCH_AGAIN
 * with *ret_wake_ms (CLOCK_MONOTONIC ms, never past the deadline) when the
 * target was busy and the deadline allows another; else the answer is in
 * res (error, state, sites, flags, pause_us, check_us, message) and the
 * return value is 0 or the negative code also stored in res->error.
 */
int patch_step(struct patch_job *j, uint64_t *ret_wake_ms);

/*
 * After patch_step() answered -BTG_ERR_SHARED: the sharer that could not be
 * held, or NULL when the refusal was about no one process (res->message
 * then says it).  Lives as long as j.
 */
const struct sharer_refusal *patch_sharer_refused(const struct patch_job *j);

/*
 * True when the answer's sites were just read back (at the end of the
 * last patch_step() or patch_cancel(), in this turn) with the pin holding,
 * through *ret_via, a live task of the target: the caller's report may
 * read on through it without another look at the pin first.  False for
 * NULL, an answer patch_begin() gave at once, and a read that failed.
 */
bool patch_answer_fresh(const struct patch_job *j, pid_t *ret_via);

/* Answers without another attempt (err, why), with the sites as they are now. */
int patch_cancel(struct patch_job *j, int err, const char *why);

/* res's sites and process state from sites (at most PROTO_MAX_SITES). */
struct site_list;
void patch_fill_sites(struct proto_result *res, const struct site_list *sites);

/*
 * After patch_fill_sites(), for a guard asked for the segment walk: a
 * site with none got the stub (the fallback, which never leaves a
 * process unguarded), and res says where and why (PROTO_WARN_NO_WALK).
 */
void patch_say_no_walk(struct proto_result *res, const struct site_list *sites);

/* Frees j (NULL is fine). */
void patch_end(struct patch_job *j);

#endif
