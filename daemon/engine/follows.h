/* SPDX-License-Identifier: MIT */
/*
 * Who may hold a follow slot, and for how long.  A follow (exec.c: guard
 * --at-exec, btguardctl run, the Slurm plugin's arming of each task) keeps
 * a process traced from its fork to its exec, in a table of the node's
 * followed processes.  The table is shared by every user, so it is shared
 * out: root may use all of it (the Slurm plugin arms every task of a step
 * as root), every other uid at most FOLLOWS_PER_UID slots, and all
 * non-root uids together leave FOLLOWS_ROOT_RESERVE for root.  And no
 * follow outlives FOLLOWS_MAX_HOLD_MS after its process started, however
 * often it is asked for again: a slot is for a launcher's child between
 * its fork and its exec, not a way to pin one for good.
 *
 * Pure bookkeeping and arithmetic: no /proc, no clock, no ptrace.
 */
#ifndef BTGUARD_FOLLOWS_H
#define BTGUARD_FOLLOWS_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "proto.h"

/*
 * The node's table: one follow per connection at most (each is one
 * request's one target), so the daemon's connection limit (1,024) bounds
 * it anyway; big enough for every task a node runs in one step.
 */
#define FOLLOWS_MAX          1024u
#define FOLLOWS_ROOT_RESERVE 128u    /* only root may take these */
#define FOLLOWS_PER_UID      32u     /* any one non-root uid, at most */
/* From a process's start (its fork) to the end of any follow of it. */
#define FOLLOWS_MAX_HOLD_MS  PROTO_MAX_FOLLOW_MS

struct follows_uid {
	uid_t uid;
	uint32_t n;
};

/* The slots in use: n in all, by[] per uid (those with at least one). */
struct follows {
	uint32_t n;
	size_t nuids;
	struct follows_uid by[FOLLOWS_MAX];
};

/*
 * Takes a slot for uid: 0, or -BTG_ERR_LIMIT with why saying which limit
 * (the uid's share, the node's table, or only root's reserve left).
 */
int follows_take(struct follows *t, uid_t uid, char *why, size_t why_len);

/* Gives back a slot uid took. */
void follows_put(struct follows *t, uid_t uid);

/* Slots uid holds now. */
uint32_t follows_of(const struct follows *t, uid_t uid);

/*
 * How long a follow of a process that started age_ms ago may last, asked
 * for deadline_ms: the smaller of the two and what is left of
 * FOLLOWS_MAX_HOLD_MS; 0 when nothing is left.
 */
uint32_t follows_hold_ms(uint64_t age_ms, uint32_t deadline_ms);

#endif
