/* SPDX-License-Identifier: MIT */
/*
 * Auto-guard: the policy in force and the /proc sweep that applies it.
 *
 * A process that execs is looked at moments later, when the kernel's
 * proc connector tells us (procconn.h, where the daemon may listen):
 * once its loader has mapped its libraries, the policy is asked about it,
 * as below.  The sweep is the backstop, and what sees late loads:
 *
 * Every interval (the policy's [watch] interval, 1 s by default) the
 * sweep lists /proc and, for each process, reads its stat line: start
 * time and vsize.  A process seen before with both unchanged costs that
 * one read.  Otherwise (new, or its mappings changed: vsize moves with
 * every mmap and munmap) its facts are read - the mapped objects among
 * them - and only if the set of objects differs from last time (a hash
 * of their paths) is the policy asked again.  So a process that maps
 * torch and greenlet after it started, or a guarded one that loads a
 * second backtrace() definition, is taken at the next sweep after the
 * load, and a training job whose heap grows is not re-read every second.
 *
 * What matches goes to the queue as a request whose caller is the daemon
 * itself (root, named by its rule): one request per rule per sweep,
 * through action_expand_candidates(), which pins each process and asks
 * the policy again from facts read while pinned.  Nothing here stops,
 * reads or writes a target.
 *
 * watch.c owns the policy in force, the per-rule counts, the sweep's
 * table and its requests; server.c drives it, conn.c asks it for POLICY
 * and RELOAD.
 */
#ifndef BTGUARD_WATCH_H
#define BTGUARD_WATCH_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "proto.h"
#include "policy.h"
#include "queue.h"

struct watch;

/*
 * Takes over p (may have no rules) read from path (reloads read it
 * again; `required`: a missing file is an error then too).  load_error:
 * NULL, or "FILE:LINE: what" when the files were wrong at start-up and p
 * is an empty stand-in: the daemon serves, and says so (watch_problem()).
 */
int watch_new(struct queue *q, const char *path, bool required, struct policy *p,
	      const char *load_error, struct watch **ret);

/*
 * Why the policy in force is not what the files say, for STATUS and
 * POLICY answers (a NOTICE): "not loaded: FILE:LINE: what; no policy
 * rules are in force" or "the last reload failed: ...; the policy in
 * force stays".  NULL while the files are in force.
 */
const char *watch_problem(const struct watch *w);
void watch_free(struct watch *w);

/* True while the policy has a guard rule: the daemon must not exit when idle. */
bool watch_active(const struct watch *w);

/*
 * Reads the policy again.  On success it is in force from the next sweep
 * (counts of rules with the same name are kept) and the number of rules
 * is returned; otherwise -errno, the old policy stays, and why says
 * "FILE:LINE: what" (logged here too).
 */
int watch_reload(struct watch *w, char *why, size_t why_len);

/*
 * When the last complete sweep of the policy ended, in Unix seconds, as
 * SWEPT answers it: 0 before the first, and without guard rules (nothing
 * is swept then).  For monitoring: a stale time means a stuck daemon.
 */
uint32_t watch_last_sweep_s(const struct watch *w);

/* Rule i of the policy in force, as POLICY answers it: 0, or -ENOENT past the last. */
int watch_rule(const struct watch *w, size_t i, struct proto_rule *ret);

/*
 * The proc connector's descriptor while exec events are listened to
 * (the policy has guard rules and does not say exec-events = no, and the
 * kernel lets us), else -1; *ret_gen changes whenever the descriptor
 * does, so the caller knows to watch the new one.
 */
int watch_events_fd(const struct watch *w, unsigned *ret_gen);

/* The descriptor is readable: notes the processes that exec'd, to be looked at soon. */
void watch_events(struct watch *w, uint64_t t_ms);

/* When the descriptor should be read again (after watch_events(), a few ms later). */
uint64_t watch_events_next_ms(const struct watch *w);

/* When the next sweep step or look is due (CLOCK_MONOTONIC ms); UINT64_MAX when none. */
uint64_t watch_next_ms(const struct watch *w);

/* Does about WATCH_STEP_US of a due sweep (the event loop's turn for it). */
#define WATCH_STEP_US 2000u
void watch_step(struct watch *w, uint64_t t_ms);

/* At shutdown: answers the requests it has queued ("shutdown"). */
void watch_stop(struct watch *w);

#endif
