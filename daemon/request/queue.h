/* SPDX-License-Identifier: MIT */
/*
 * Whose turn it is.  The queue owns every request's targets from the
 * moment the request is read until its DONE: the ones still being listed,
 * the ones waiting, the one in progress - parked between two attempts
 * while it is busy - and the rule that picks the next turn.
 *
 * The rule: one turn is one bounded piece of work (a step of listing a
 * request's targets, the start of a target, or one attempt on a busy
 * one).  Turns go round-robin between users, and within one user between
 * its connections, so neither a user with many connections nor a target
 * that stays busy holds anybody else up by more than one turn.  A target
 * whose attempt said "busy" is parked until its back-off has passed.
 * Two guard or unguard operations never run on one process at once: a
 * target whose process another request is working on waits until that
 * one is answered (status only reads, and neither waits nor holds).
 *
 * The owner of a request (conn.c) embeds a struct queue_entry and learns
 * of answers through struct queue_ops; it never writes the entry's fields.
 */
#ifndef BTGUARD_QUEUE_H
#define BTGUARD_QUEUE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/queue.h>
#include <sys/types.h>

#include "proto.h"
#include "action.h"
#include "auth.h"

#define QUEUE_SHUTDOWN_TEXT "btguardd is stopping; nothing was done"

struct queue_entry;
struct queue_user;

/* The owner's side: every call happens within a queue_* call, never later. */
struct queue_ops {
	/* One target answered: send res as one RESULT.  May cancel e. */
	void (*result)(struct queue_entry *e, const struct proto_result *res);
	/* Every target answered (count of them): send DONE.  May cancel e. */
	void (*done)(struct queue_entry *e, uint32_t count);
	/* The request's targets could not be listed (or the daemon stops): send ERROR. */
	void (*failed)(struct queue_entry *e, int err);
};

/* Where an entry is: in exactly one of these places at a time. */
enum queue_where {
	QUEUE_NOWHERE,   /* no request, or held back by its owner, or in its turn */
	QUEUE_READY,     /* in its user's line, waiting for its turn */
	QUEUE_PARKED,    /* its target was busy: waiting for wake_ms */
	QUEUE_BLOCKED,   /* its next target's process is being worked on by another */
};

/* A list of entries (<sys/queue.h>): a line, the parked, the blocked, the active. */
TAILQ_HEAD(queue_list, queue_entry);

/* Written by queue.c only. */
struct queue_entry {
	const struct queue_ops *ops;  /* its owner's: conn.c's, or watch.c's */
	struct auth_caller caller;
	bool busy;                  /* a request is being answered */
	unsigned action;
	uint32_t deadline_ms;
	struct action_expansion *expanding;  /* its targets, still being listed */
	struct action_target *targets;
	size_t ntargets, next;      /* targets[next..] not started yet */
	uint32_t interims;          /* extra RESULTs sent so far (at-exec's "armed") */
	uint32_t failed;            /* RESULTs so far that carry an error */
	bool tree;                  /* guard/unguard --tree: children listed again after */
	bool walk;                  /* guard --backtraces=segment (PROTO_FLAG_WALK) */
	unsigned relists;           /* rounds of that so far */
	size_t relist_from;         /* targets[relist_from..] ran since the last round */
	struct action_job *job;     /* the target in progress, when one is */
	struct proto_result *res;   /* its answer, written across turns */
	pid_t holds;                /* the process job operates on (ours), or 0 */
	bool held_back;             /* the owner cannot take replies now */
	bool waited;                /* job has been parked at least once */
	uint64_t wake_ms;           /* QUEUE_PARKED until then (CLOCK_MONOTONIC) */
	enum queue_where where;
	struct queue_user *user;    /* QUEUE_READY: the line it is in */
	TAILQ_ENTRY(queue_entry) in_place;   /* in the list `where` says */
	TAILQ_ENTRY(queue_entry) in_active;  /* in queue.active while job is set */
};

/* A user with entries ready, in the round of users. */
struct queue_user {
	uid_t uid;
	struct queue_list ready;
	TAILQ_ENTRY(queue_user) in_round;
};

/* Written by queue.c only. */
struct queue {
	const struct queue_ops *ops;  /* for queue_submit()'s entries: the connections' */
	TAILQ_HEAD(, queue_user) round;  /* users with entries ready: the first goes next */
	struct queue_user spare;    /* shared line for users when no memory is left */
	struct queue_list parked, blocked;
	struct queue_list active;   /* entries with a target in progress */
	size_t nactive, nparked;
	uint64_t parked_due_ms;     /* no parked entry is due before (a lower bound) */
	bool warned_nomem;
};

void queue_init(struct queue *q, const struct queue_ops *ops);

/*
 * Takes a request read from caller: starts listing its targets (pins are
 * taken from now on) and does the first step at once.  Returns 0, or
 * -errno when it cannot even start (nothing is queued; e stays idle).
 */
int queue_submit(struct queue *q, struct queue_entry *e, const struct auth_caller *caller,
		 const struct proto_request *req);

/*
 * Takes a request the daemon makes itself (watch.c's policy): its targets
 * are being listed by x (action_expand_candidates), which the queue takes
 * over, and freed on failure too.  Answers go to ops, not to the queue's
 * (connections') ones; otherwise the entry is like any other: the same
 * turns, the same one-operation-per-process rule, the same action path.
 */
int queue_submit_targets(struct queue *q, struct queue_entry *e, const struct queue_ops *ops,
			 const struct auth_caller *caller, unsigned action, unsigned flags,
			 uint32_t deadline_ms, struct action_expansion *x);

/* The owner cannot take replies for now (held) or can again. */
void queue_hold_back(struct queue *q, struct queue_entry *e, bool held);

/*
 * The owner is gone: drops e's request unanswered (a target in progress
 * is answered to the log only) and frees what it held.  Idle e is fine.
 */
void queue_cancel(struct queue *q, struct queue_entry *e);

/*
 * At shutdown: answers e's targets still to run, the one in progress
 * included, with "shutdown", then DONE (a request still being listed gets
 * failed(-BTG_ERR_SHUTDOWN) instead).  Returns how many targets.
 */
size_t queue_shutdown(struct queue *q, struct queue_entry *e);

/* Runs one turn, if any entry is ready or due: see the top of this file. */
void queue_turn(struct queue *q);

/* True when a turn is waiting now (the loop must not sleep). */
bool queue_ready(const struct queue *q);

/* When the earliest parked target is due (CLOCK_MONOTONIC ms), UINT64_MAX if none. */
uint64_t queue_next_wake_ms(const struct queue *q);

#endif
