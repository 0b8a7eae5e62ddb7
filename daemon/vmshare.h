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

struct vmshare {
	pid_t pid;             /* the target */
	pid_t *sharers;        /* other processes on its address space, in the order found */
	size_t n, cap;
	pid_t *seen;           /* every process of the last listing, sorted */
	size_t nseen;
	pid_t failed_pid;      /* the process kcmp could not compare, on error */
};

/*
 * Lists /proc and compares every process with pid.  Processes kcmp may
 * not compare (-EPERM) are taken as not sharing: we could not stop them
 * either.  On failure (kcmp unavailable: -ENOSYS) vs->failed_pid names
 * the process that could not be compared.  Free with vmshare_free either way.
 */
int vmshare_scan(struct vmshare *vs, pid_t pid);

/*
 * Lists /proc again and compares only processes the last listing did not
 * hold; *ret_new counts the sharers added (appended to vs->sharers).
 */
int vmshare_rescan(struct vmshare *vs, size_t *ret_new);

void vmshare_free(struct vmshare *vs);

/* kcmp(KCMP_VM): 0 when a and b share an address space, 1 when not, <0 (-ESRCH, -EPERM, -ENOSYS) when it cannot tell. */
int vmshare_same(pid_t a, pid_t b);

#endif
