/* SPDX-License-Identifier: MIT */
/*
 * The watch's state, read by the two files that own its parts: watch.c
 * writes struct watch (the policy in force, the sweep, the requests the
 * daemon makes), watchexec.c its struct watch_events alone (the proc
 * connector's socket).  Nobody else includes this; the rest of the daemon
 * sees watch.h.
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
#include "watch.h"

#define MAX_REQUESTS  16u     /* queued at once; more candidates wait for the next sweep */
#define MAX_RETRY     1024u   /* processes remembered for another attempt */
#define RETRIES       3u
/*
 * Attempts that failed because the daemon itself ran short of descriptors
 * or memory do not count against RETRIES: a process that arrived during a
 * shortage would otherwise stay unguarded once it passed.  They have a
 * budget of their own, about a minute of sweeps at the default interval,
 * so a daemon short for good does not log a failure per sweep forever
 * (monitoring says UNKNOWN meanwhile).
 */
#define SHORT_RETRIES 60u

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

struct retry {
	pid_t pid;
	unsigned left;            /* attempts it still gets after the next */
	unsigned short_left;      /* of those failing for the daemon's shortage (SHORT_RETRIES) */
	bool due;                 /* ask about it at the next sweep */
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
	struct retry retry[MAX_RETRY];
	size_t nretry;
	TAILQ_HEAD(, request) reqs;  /* requests made and not yet answered */
	unsigned nreqs;

	struct watch_events events; /* written by watchexec.c only */
	struct noticed *noticed;    /* ~56 KiB, allocated with the watch */
};

/* FNV-1a over the object paths (and the executable): what the policy saw; never 0. */
uint64_t watch_objects_hash(const struct facts *f);

/* One request for rule i's candidates (pids, n of them), as root, named by the rule (watch.c). */
void watch_submit(struct watch *w, size_t i, const pid_t *pids, size_t n);

/*
 * Whether the sweep asked the policy about this very program already
 * (pid with this start time and objects hash, in the sweep under way or
 * the last one): a look at its exec would ask twice (watch.c).
 */
bool watch_sweep_asked(const struct watch *w, pid_t pid, uint64_t start_ticks, uint64_t objects);

/* A watch's exec events, not listening yet (watchexec.c). */
void watch_events_init(struct watch_events *ev);

/* Listens while the policy has guard rules and wants exec events; else not (watchexec.c). */
void watch_events_sync(struct watch *w);

/* Closes the proc connector's socket, if open (watchexec.c). */
void watch_events_close(struct watch *w);

/* Looks at the noticed processes that are due, until until_us (watchexec.c). */
void watch_look_due(struct watch *w, uint64_t t_ms, uint64_t until_us);

#endif
