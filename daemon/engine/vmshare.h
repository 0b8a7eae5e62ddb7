/* SPDX-License-Identifier: MIT */
/*
 * Finding the processes that share a target's address space (clone(CLONE_VM)
 * without CLONE_THREAD, vfork children before their exec).  See vmshare.c.
 */
#ifndef BTGUARD_VMSHARE_H
#define BTGUARD_VMSHARE_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

struct vmshare_listing;   /* a /proc listing, shared between scans (vmshare.c) */

struct vmshare {
	pid_t pid;             /* the target */
	pid_t *sharers;        /* other processes on its address space, in the order found */
	size_t n, cap;
	struct vmshare_listing *seen;   /* the processes compared already: a listing, sorted */
	pid_t failed_pid;      /* the process kcmp could not compare, on error */
	size_t compared;       /* processes of the listing the scan compared pid with */
};

/*
 * Compares pid with every process of a /proc listing: the newest listing
 * any scan made if no task was created since it began, else a new one.
 * A listing with an index (vmindex.c) spares the processes the index
 * proves apart from pid.
 * Processes kcmp may not compare (-EPERM) are taken as not sharing: we
 * could not stop them either.  On failure (kcmp unavailable: -ENOSYS)
 * vs->failed_pid names the process that could not be compared.  Free with
 * vmshare_free either way.
 */
int vmshare_scan(struct vmshare *vs, pid_t pid);

/* How many processes the scan's listing holds (vs->compared of them were compared: an index, vmindex.c, spares the rest). */
size_t vmshare_listed(const struct vmshare *vs);

/*
 * Lists /proc again and compares only processes the listing the scan used
 * did not hold, and those under a PID handed out again since (pidalloc.h);
 * *ret_new counts the sharers added (appended to vs->sharers).
 * No listing when no task was created since that one began: none is new.
 * forks_at_rest, when have_forks, is /proc/stat's count of created tasks
 * read while every task of the target and its sharers was stopped (the
 * world's): equal to the listing's, it says so without a read of its own.
 */
int vmshare_rescan(struct vmshare *vs, bool have_forks, uint64_t forks_at_rest, size_t *ret_new);

void vmshare_free(struct vmshare *vs);

/* Drops the listing kept for the next scan (at exit: nothing left allocated). */
void vmshare_forget_listing(void);

/* kcmp(KCMP_VM): 0 when a and b share an address space, 1 when not, <0 (-ESRCH, -EPERM, -ENOSYS) when it cannot tell. */
int vmshare_same(pid_t a, pid_t b);

#endif
