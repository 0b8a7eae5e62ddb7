/* SPDX-License-Identifier: MIT */
/*
 * The watch's state, read by the two files that own its parts: watch.c
 * writes struct watch (the policy in force, the sweep, the requests the
 * daemon makes), watchexec.c its struct watch_events alone (the proc
 * connector's socket) and the noticed entries it looks at.  The calls go
 * one way: watch.c calls watchexec.c's functions below, never the other
 * way round.  Nobody else includes this; the rest of the daemon sees
 * watch.h.
 */
#ifndef BTGUARD_WATCH_INT_H
#define BTGUARD_WATCH_INT_H

#include <limits.h>
#include <stdbool.h>
#include <stdint.h>
#include <sys/queue.h>
#include <sys/types.h>

#include "facts.h"
#include "noticed.h"
#include "policy.h"
#include "queue.h"
#include "retry.h"
#include "watch.h"

#define MAX_REQUESTS  16u     /* queued at once; more candidates wait for the next sweep */

struct proc {
	pid_t pid;
	int statm;                /* /proc/PID/statm kept open, or -1 */
	bool ignored;             /* a kernel thread: never asked about */
	uint64_t start_ticks, vsize;
	uint64_t objects;         /* hash of the mapped objects the policy was asked about, 0: not yet */
};

struct rule_stats {
	char name[POLICY_NAME_MAX + 1];
	uint32_t hits;
	uint8_t nlast;
	int32_t last[PROTO_MAX_RULE_PIDS];   /* latest first */
};

/* A request the daemon made for one rule: a queue entry with our ops. */
struct request {
	struct queue_entry e;     /* queue.c's */
	struct watch *w;
	struct policy *policy;    /* held: the rule and the caller's name point into it */
	const struct policy_rule *rule;
	TAILQ_ENTRY(request) in_watch;  /* in watch.reqs until it ends */
};

/* Exec events: the proc connector while the policy wants it.  watchexec.c's alone. */
struct watch_events {
	int fd;                     /* the connector's socket, or -1 */
	unsigned gen;               /* changes with fd: server.c registers it again */
	char why[160];              /* why the connector was refused, logged once per reason */
	uint64_t lost_logged_ms;
	uint64_t next_ms;           /* read the socket again from then on */
};

struct watch {
	struct queue *q;
	char path[PATH_MAX];
	bool required;
	struct policy *policy;
	bool loaded;                /* policy was read from the files (else: none, they were wrong) */
	char problem[PROTO_MAX_MESSAGE + 1];   /* why the files are not in force; "" when they are */
	struct rule_stats *stats;   /* one per rule of policy */
	unsigned need;              /* FACTS_* the policy reads, objects always */
	struct facts *facts;        /* scratch, ~16 KiB */

	struct proc *table;         /* the last complete sweep, by PID; owns the statm fds */
	size_t ntable;
	unsigned nfds, max_fds;     /* statm descriptors open, and the budget (pin.h) */
	long page_size;

	/* The sweep in progress (sweeping), else nothing. */
	bool sweeping;
	uint64_t sweep_started_ms;
	pid_t *pids;
	size_t npids, next_pid, old;
	struct proc *fresh;
	size_t nfresh, cap_fresh;
	pid_t **cand;               /* per rule: the processes to guard */
	size_t *ncand, *cap_cand;

	uint64_t next_sweep_ms;
	uint32_t last_sweep_end_s;  /* CLOCK_REALTIME seconds, for SWEPT; 0: none yet */
	struct retries retries;     /* retry.c's */
	TAILQ_HEAD(, request) reqs;  /* requests made and not yet answered */
	unsigned nreqs;

	struct watch_events events; /* written by watchexec.c only */
	struct noticed *noticed;    /* ~56 KiB, allocated with the watch */
};

/* What watch.c calls in watchexec.c: */

/* Exec events, not listening yet. */
void watch_events_init(struct watch_events *ev);

/*
 * Listens when want (the policy has guard rules and wants exec events),
 * else not; interval_ms is the sweep's, for the log line.
 */
void watch_events_sync(struct watch_events *ev, bool want, unsigned interval_ms);

/* Closes the proc connector's socket, if open. */
void watch_events_close(struct watch_events *ev);

/*
 * Looks at e, a program of table t noticed at its exec and due at t_ms:
 * true when its loader is done (or it was put off for the last time),
 * with its facts (need) in f and e asked about now, with its start time
 * and objects hash, so the caller asks the policy; false when it is gone
 * (e dropped) or put off until its loader is done.  f is to be freed
 * (facts_free) either way.
 */
bool watch_events_look(struct noticed *t, struct noticed_entry *e, unsigned need, struct facts *f,
		       uint64_t t_ms);

#endif
