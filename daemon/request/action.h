/* SPDX-License-Identifier: MIT */
/*
 * A request's targets, from the PIDs the caller named to the replies:
 * resolve each PID in the caller's PID namespace and pin it the moment the
 * request is read (action_expand_*, action_expand.c), then, at each
 * target's turn, check the pin, authorize the caller, run the patch
 * procedure an attempt per turn (or only read, for status), and log the
 * outcome once (action_start, action_step: action.c).
 */
#ifndef BTGUARD_ACTION_H
#define BTGUARD_ACTION_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "proto.h"
#include "auth.h"
#include "authorize.h"
#include "select.h"

/*
 * A target as the request named it (the caller's PID number), pinned when
 * the request arrived: a pidfd for the very process that had the PID then.
 * A target that could not be resolved, pinned or (for a non-root caller)
 * authorized at arrival carries the answer it will get (err < 0) and no
 * pin.  Without pidfds (kernels before 5.3, valgrind) the start time is
 * the pin instead.
 */
struct action_target {
	int32_t  pid;        /* as the caller numbers it */
	pid_t    ours;       /* in the daemon's PID namespace; 0 when none */
	int      pidfd;      /* the pin, -1 when none */
	int      err;        /* 0, or the answer decided at arrival */
	uint64_t start_ticks; /* start time: the pin without pidfds, and after the target's turn */
	bool     thread;     /* err: the PID is a thread, not a process */
	bool     hidden;     /* the caller's /proc hides what it may not act on */
	/*
	 * Authorized at arrival, and the real uid read then.  Root's status
	 * takes them at the turn: what root's authorization rests on (not the
	 * daemon, not a kernel thread, a process and not a thread) cannot
	 * change while a pidfd pins the process.
	 */
	bool     authorized;
	uid_t    uid;
	bool     selected;   /* reached by a selector, not named */
};

/* t as a refusal names it (authorize.h). */
static inline struct authorize_who action_who(const struct action_target *t)
{
	return (struct authorize_who){ .pid = t->pid, .ours = t->ours, .hidden = t->hidden };
}

/* One request's targets being resolved and pinned, a bounded step at a time. */
struct action_expansion;

/*
 * Starts on a request (call it when the request is read).  With
 * PROTO_FLAG_TREE each named PID is followed by its current descendants
 * (depth first) that the caller may act on, duplicates removed, at most
 * PROTO_MAX_PIDS, all numbered as the caller sees them.
 */
int action_expand_new(const struct auth_caller *caller, const struct proto_request *req,
		      struct action_expansion **ret);

/*
 * Does about ACTION_STEP_US of the work, so the event loop is never held
 * long by one request: 1 when the targets are complete, 0 when more
 * remains, -errno when they cannot be listed.
 */
#define ACTION_STEP_US 2000u
int action_expand_step(struct action_expansion *x);

/*
 * A policy's request (watch.c): the caller is the daemon itself, and the
 * candidates are the processes its sweep found matching (pids[0..n), the
 * daemon's numbers).  Each is pinned, its facts (m->need) read again
 * while pinned and m->match asked again, then authorized like any
 * selected process: so a PID recycled since the sweep is never acted on,
 * and nothing the sweep saw is trusted.  m->ctx must outlive the
 * expansion's targets.
 */
struct action_matcher {
	unsigned need;                                            /* FACTS_* match reads */
	bool (*match)(const void *ctx, const struct select_proc *p);
	const void *ctx;
};
int action_expand_candidates(const struct auth_caller *caller, const pid_t *pids, size_t n,
			     const struct action_matcher *m, struct action_expansion **ret);

/*
 * --tree, once targets t[from..n) have run: their children are listed again
 * (a child forked while its parent was being patched may hold the old
 * bytes; one forked after inherits the new).  Takes t over: the expansion
 * that comes back lists t[0..n) first, then the new descendants, and
 * action_expand_end() hands all of them back.  A target whose process has
 * since exited, or whose PID names another process now, is not descended
 * into.  At most ACTION_TREE_RELISTS rounds per request: a fork bomb must
 * not keep a request alive for ever.
 */
#define ACTION_TREE_RELISTS 8u
int action_expand_relist(const struct auth_caller *caller, struct action_target *t, size_t n,
			 size_t from, struct action_expansion **ret);

/* Hands the finished targets over (*ret malloc'ed, may be NULL when none) and frees x. */
void action_expand_end(struct action_expansion *x, struct action_target **ret, size_t *ret_n);

/* Frees an unfinished expansion and the pins it took.  NULL is fine. */
void action_expand_free(struct action_expansion *x);

/* Releases the pins of t[0..n) still held, and frees t. */
void action_targets_free(struct action_target *t, size_t n);

/* One target being acted on across turns: between two attempts, nothing is stopped. */
struct action_job;

/* action_start()/action_step(): the target is busy, try again at *ret_wake_ms. */
#define ACTION_AGAIN 1
/* As ACTION_AGAIN, and res is an interim answer to send now (at-exec: armed). */
#define ACTION_ARMED 2

/*
 * Acts on one target: checks its pin, authorizes, prepares, makes the
 * first attempt.  Never fails as a function: every outcome, success or
 * error, ends up in *res (pid, error, state, sites, message, pause), which
 * the caller sends as one RESULT; res must live until the target is
 * answered.  Returns 0 when it is (logged, pin released), or ACTION_AGAIN
 * with *reterr_job set: call action_step(*reterr_job) again once CLOCK_MONOTONIC reaches
 * *ret_wake_ms (ms).  PROTO_ACTION_AT_EXEC follows the process through its
 * exec (exec.c) and also returns ACTION_ARMED once: send res as an extra
 * RESULT, then as ACTION_AGAIN.
 */
int action_start(const struct auth_caller *caller, unsigned action, uint32_t deadline_ms,
		 struct action_target *target, struct proto_result *res,
		 struct action_job **reterr_job, uint64_t *ret_wake_ms);

/* The next attempt: as action_start(); on 0 the job is freed. */
int action_step(struct action_job *j, uint64_t *ret_wake_ms);

/* Answers now with err and why instead of another attempt (logged, pin released), frees j. */
void action_cancel(struct action_job *j, int err, const char *why);

#endif
