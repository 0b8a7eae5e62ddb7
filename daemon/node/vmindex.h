/* SPDX-License-Identifier: MIT */
/*
 * An index of a /proc listing by address space, so that finding a
 * target's sharers compares it with a few processes, not all.  See
 * vmindex.c.
 */
#ifndef BTGUARD_VMINDEX_H
#define BTGUARD_VMINDEX_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* How many pivots an index sorts by: 32 buckets, 5 kcmp per process. */
#define VMINDEX_PIVOTS 31

/* Processes of the daemon's own, each with an address space nobody else uses. */
struct vmindex_pivots {
	pid_t pid[VMINDEX_PIVOTS];   /* sorted by kcmp's order of their address spaces */
	size_t n;                    /* how many are running (all, or none) */
};

struct vmindex;

/*
 * Starts the pivots (forked children that only wait to be killed) and
 * sorts them.  They must exist before the listing the index covers: making
 * them moves /proc/stat's count of created tasks.  End them with
 * vmindex_pivots_end() whatever happens.
 */
int vmindex_pivots_start(struct vmindex_pivots *p);

/* Kills and reaps the pivots: btguardd has no children once it returns. */
void vmindex_pivots_end(struct vmindex_pivots *p);

/*
 * 0 while every pivot still has its address space, -ESRCH once one has
 * begun to exit (its address space gone, so kcmp's answers about it
 * changed).
 */
int vmindex_pivots_intact(const struct vmindex_pivots *p);

/*
 * Sorts the n processes of procs (a listing made after the pivots
 * started) into buckets: the processes between two neighbouring pivots in
 * kcmp's order.  Fails (and no index is made) if a pivot began to exit
 * meanwhile or kcmp gave an answer it should not.
 */
int vmindex_build(const struct vmindex_pivots *p, const pid_t *procs, size_t n,
		  struct vmindex **ret);

/*
 * The processes of the listing that may share pid's address space: those
 * of its bucket and those kcmp would not sort (-EPERM), pid excluded; a
 * new array.  -ENOENT when pid is not listed or was not sorted into a
 * bucket (then compare it with every process).
 */
int vmindex_candidates(const struct vmindex *ix, const pid_t *procs, size_t n, pid_t pid,
		       pid_t **ret, size_t *ret_n);

void vmindex_free(struct vmindex *ix);

/* The bucket of listing entry i, for tests: < VMINDEX_PIVOTS + 1, or one of these. */
#define VMINDEX_SKIP 0xfffe   /* a pivot, or gone since the listing */
#define VMINDEX_ANY  0xffff   /* kcmp may not compare it (-EPERM): a candidate for every target */
uint16_t vmindex_bucket(const struct vmindex *ix, size_t i);

#endif
