// SPDX-License-Identifier: MIT
/*
 * Processes that share a target's address space without being its threads.
 *
 * Threads are not the only tasks that run the bytes we change: a process
 * made with clone(CLONE_VM) but without CLONE_THREAD, and a vfork() child
 * until it execs, share the target's memory and keep running while the
 * target is stopped.  They must be stopped and checked with it.
 *
 * Nothing in /proc says "this mm is shared", so every process is compared
 * with kcmp(KCMP_VM), which answers whether two tasks use the same mm: one
 * system call per process, no file read.  A scan lists /proc once, before
 * the target is stopped; once it and every sharer are stopped, nothing that
 * runs in the address space can create another task, and a second listing
 * needs to compare only the PIDs that were not there the first time (an
 * address space is never joined after a process is created: exec leaves
 * it, nothing enters it).
 */
#include <errno.h>
#include <linux/kcmp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "procfs.h"
#include "vmshare.h"

int vmshare_same(pid_t a, pid_t b)
{
	long r = syscall(SYS_kcmp, a, b, KCMP_VM, 0, 0);

	if (r == 0)
		return 0;
	if (r > 0)
		return 1;
	return -errno;
}

/*
 * kcmp compares mm pointers, and kernel threads, zombies and a target
 * already tearing down its memory in exit_group() all have none: "the
 * same" between two of those is no sharing.
 */
static bool has_memory(pid_t pid)
{
	struct procfs_stat st;

	return procfs_read_stat(pid, &st) == 0 && !(st.flags & PROCFS_PF_KTHREAD) &&
	       st.state != 'Z' && st.state != 'X';
}

static bool in_sorted(const pid_t *v, size_t n, pid_t pid)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (v[mid] == pid)
			return true;
		if (v[mid] < pid)
			lo = mid + 1;
		else
			hi = mid;
	}
	return false;
}

static int add(struct vmshare *vs, pid_t pid)
{
	if (vs->n == vs->cap) {
		size_t cap = vs->cap ? vs->cap * 2 : 4;
		pid_t *v = reallocarray(vs->sharers, cap, sizeof(*v));

		if (!v)
			return -ENOMEM;
		vs->sharers = v;
		vs->cap = cap;
	}
	vs->sharers[vs->n++] = pid;
	return 0;
}

/* Compares pid with every process listed that skip (sorted, may be NULL) does not hold. */
static int compare_all(struct vmshare *vs, const pid_t *procs, size_t nprocs, const pid_t *skip,
		       size_t nskip, size_t *ret_new)
{
	size_t before = vs->n;

	for (size_t i = 0; i < nprocs; i++) {
		int r;

		if (procs[i] == vs->pid || (skip && in_sorted(skip, nskip, procs[i])))
			continue;
		r = vmshare_same(vs->pid, procs[i]);
		/*
		 * -ESRCH: exited since the listing.  -EPERM: a process the kernel
		 * will not let us inspect (an LSM, an ancestor user namespace's
		 * init); we could not stop it either, and take it as not sharing.
		 */
		if (r == -ESRCH || r == -EPERM)
			continue;
		if (r < 0) {
			vs->failed_pid = procs[i];
			return r;
		}
		if (r == 0 && !has_memory(procs[i]))
			continue;
		if (r == 0 && (r = add(vs, procs[i])) < 0)
			return r;
	}
	if (ret_new)
		*ret_new = vs->n - before;
	return 0;
}

int vmshare_scan(struct vmshare *vs, pid_t pid)
{
	int r;

	memset(vs, 0, sizeof(*vs));
	vs->pid = pid;
	r = procfs_list_processes(&vs->seen, &vs->nseen);
	if (r < 0)
		return r;
	return compare_all(vs, vs->seen, vs->nseen, NULL, 0, NULL);
}

int vmshare_rescan(struct vmshare *vs, size_t *ret_new)
{
	pid_t *now;
	size_t n;
	int r = procfs_list_processes(&now, &n);

	if (r < 0)
		return r;
	r = compare_all(vs, now, n, vs->seen, vs->nseen, ret_new);
	if (r < 0) {
		free(now);
		return r;
	}
	free(vs->seen);
	vs->seen = now;
	vs->nseen = n;
	return 0;
}

void vmshare_free(struct vmshare *vs)
{
	free(vs->seen);
	free(vs->sharers);
	memset(vs, 0, sizeof(*vs));
}
