/* SPDX-License-Identifier: MIT */
/*
 * The processes the policy's sweep asks about again (watch.c's): one
 * whose request failed for a reason that may pass (busy, a thread that
 * did not stop, no pin left, the daemon's own shortage) is asked again at
 * the next sweeps, a bounded number of times; one that cannot be guarded
 * (no backtrace(), foreign bytes, gone) is forgotten and waits for its
 * mappings to change.  Pure: no clock, no /proc.
 */
#ifndef BTGUARD_RETRY_H
#define BTGUARD_RETRY_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

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

struct retry {
	pid_t pid;
	unsigned left;            /* attempts it still gets after the next */
	unsigned short_left;      /* of those failing for the daemon's shortage (SHORT_RETRIES) */
	bool due;                 /* ask about it at the next sweep */
};

/* Written by retry.c only (watch.c clears a retry's due when it asks). */
struct retries {
	struct retry v[MAX_RETRY];
	size_t n;
};

/* pid's retry, or NULL. */
struct retry *retry_find(struct retries *rs, pid_t pid);

/* Forgets r (one of rs's); the last one takes its place. */
void retry_drop(struct retries *rs, struct retry *r);

/*
 * pid is to be asked about again at the next sweep, with `left` more
 * attempts after it (a full table: it waits for a change of its mappings).
 */
void retry_add(struct retries *rs, pid_t pid, unsigned left);

/* The answer for pid (err: its wire error, BTG_OK): asked again later, or forgotten. */
void retry_answered(struct retries *rs, pid_t pid, uint32_t err);

#endif
