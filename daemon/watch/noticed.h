/* SPDX-License-Identifier: MIT */
/*
 * Processes noticed at their exec (procconn.h), waiting to be looked at:
 * a small table by PID, each entry due at a time.  A new program is
 * looked at moments after its exec, once its loader has mapped the C
 * library (watchexec.c looks, and puts an entry off while there is none yet);
 * once looked at, an entry remembers what the policy saw (start time and
 * a hash of the objects), so the next sweep does not ask about the same
 * program again.  Pure: no clock, no /proc.
 */
#ifndef BTGUARD_NOTICED_H
#define BTGUARD_NOTICED_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/*
 * Entries at most.  A node that execs faster than the table empties
 * loses the excess to the sweep, which finds them within its interval.
 */
#define NOTICED_MAX 1024u

struct noticed_entry {
	pid_t pid;
	uint64_t due_ms;        /* when to look (CLOCK_MONOTONIC ms), if !asked */
	unsigned looks;         /* how often it was put off */
	bool asked;             /* the policy was asked about it; then: */
	uint64_t start_ticks;   /* its start time then (procfs_stat.start_ticks) */
	uint64_t objects;       /* and the hash of its objects */
	uint64_t asked_ms;      /* and when */
};

struct noticed {
	struct noticed_entry v[NOTICED_MAX];
	size_t n;
	uint64_t dropped;       /* exec events that found the table full, since start */
};

/*
 * pid exec'd: look at it at due_ms (again, if it was already there).  A
 * full table makes room by forgetting the entry asked about longest ago;
 * false when every entry still waits for its look.
 */
bool noticed_add(struct noticed *t, pid_t pid, uint64_t due_ms);

/* The entry due first among those not asked yet, if it is due by t_ms; else NULL. */
struct noticed_entry *noticed_due(struct noticed *t, uint64_t t_ms);

/* When the first entry not asked yet is due; UINT64_MAX when none. */
uint64_t noticed_next_ms(const struct noticed *t);

/*
 * The sweep found pid new or changed, with this start time and objects
 * hash: true when that is exactly what the policy was asked about at its
 * exec (the entry is consumed either way, once asked).
 */
bool noticed_take(struct noticed *t, pid_t pid, uint64_t start_ticks, uint64_t objects);

/*
 * The sweep asks the policy about pid itself now: an entry still waiting
 * for its look is dropped, so the program is asked about once.  True when
 * there was one.
 */
bool noticed_forget(struct noticed *t, pid_t pid);

/* Forgets entry e. */
void noticed_drop(struct noticed *t, struct noticed_entry *e);

/* Forgets what was asked before since_ms (a whole sweep has run since: they are gone). */
void noticed_prune(struct noticed *t, uint64_t since_ms);

/* Forgets everything (a new policy asks about every process again). */
void noticed_clear(struct noticed *t);

#endif
