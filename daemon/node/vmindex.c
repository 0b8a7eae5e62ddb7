// SPDX-License-Identifier: MIT
/*
 * An index of a /proc listing by address space.
 *
 * Finding a target's sharers compares it with every process (vmshare.c):
 * guarding 1,000 processes on a node of 1,000 is a million kcmp calls, most
 * of the daemon's time.  kcmp(KCMP_VM) also says which of two address
 * spaces comes first in an order of the kernel's own (their obfuscated
 * addresses), so the processes could be sorted once and each target looked
 * up.  But a process that execs while it is being sorted changes its place
 * in that order halfway, and a sort does not survive elements that move:
 * two processes that share one address space can end up far apart.
 *
 * So nothing that can move is sorted against anything else.  The order is
 * cut by pivots: processes of the daemon's own, forked for the purpose,
 * that never exec.  Each listed process is placed among the pivots by a
 * binary search against them alone, and its bucket is the gap it falls in.
 * A task's address space changes only at exec (or exit), to a new one
 * that only tasks born later can join.  So two tasks that share an address space when a
 * target is checked each had that one from the moment it was placed, and
 * met the pivots with it.  The pivots held still too, if none of them had
 * begun to exit once all were placed (exit is the only way a pivot's
 * address space changes).  Then both tasks took the same gap: a target's
 * sharers are all in its own bucket.  A process that exec'd while it was
 * placed may sit anywhere; it shares nothing old any more.  (A later scan
 * uses the listing only while no task has been created since it was made;
 * a task born after the placing is the pause's second listing's to find,
 * as it is without an index.)
 *
 * With 31 pivots a process costs 5 kcmp to place and a target is compared
 * with about 1/16 of the node (gaps between random points are uneven).
 * The pivots live only while one listing is placed, and are then killed
 * and reaped: btguardd's ptrace code takes every child status it collects
 * for a tracee's (ptworld.c), so no pivot outlives the call that made it.
 */
#include <errno.h>
#include <linux/kcmp.h>
#include <signal.h>
#include <stdbool.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>

#include "procfs.h"
#include "vmindex.h"

struct vmindex {
	size_t n;
	uint16_t *bucket;   /* per listing entry: a gap 0..VMINDEX_PIVOTS, VMINDEX_SKIP or VMINDEX_ANY */
};

/* kcmp(KCMP_VM) with its order: 0 the same, 1 a's first, 2 b's first; or -errno. */
static int kcmp_vm_order(pid_t a, pid_t b)
{
	long r = syscall(SYS_kcmp, a, b, KCMP_VM, 0, 0);

	if (r < 0)
		return -errno;
	/* 3 ("differ, no order") is not an answer KCMP_VM gives; take it as a fault. */
	return r <= 2 ? (int)r : -EPROTO;
}

/*
 * A pivot's whole life: no signal can reach it but SIGKILL, it holds no
 * file of the daemon's (a client would not see its connection close), and
 * it dies with the daemon.  Only async-signal-safe calls: the daemon has
 * other threads, and the child has a copy of their locks.
 */
static void __attribute__((noreturn)) pivot_wait(pid_t parent)
{
	sigset_t all;

	sigfillset(&all);
	sigprocmask(SIG_SETMASK, &all, NULL);
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	if (getppid() != parent)
		_exit(0);
	syscall(SYS_close_range, 0, ~0U, 0);
	for (;;)
		pause();
}

void vmindex_pivots_end(struct vmindex_pivots *p)
{
	for (size_t i = 0; i < p->n; i++) {
		int status;

		kill(p->pid[i], SIGKILL);
		while (waitpid(p->pid[i], &status, 0) < 0 && errno == EINTR)
			;
	}
	p->n = 0;
}

int vmindex_pivots_start(struct vmindex_pivots *p)
{
	pid_t self = getpid();
	int r = 0;

	p->n = 0;
	for (size_t i = 0; i < VMINDEX_PIVOTS; i++) {
		pid_t c = fork();

		if (c == 0)
			pivot_wait(self);
		if (c < 0) {
			r = -errno;
			goto out_end;
		}
		p->pid[p->n++] = c;
	}
	/* Insertion sort: the pivots are the only things here that hold still. */
	for (size_t i = 1; i < p->n; i++) {
		for (size_t j = i; j > 0; j--) {
			r = kcmp_vm_order(p->pid[j], p->pid[j - 1]);
			if (r < 0)
				goto out_end;
			if (r == 0) {   /* two forks, one address space: impossible */
				r = -EPROTO;
				goto out_end;
			}
			if (r == 2)
				break;
			pid_t t = p->pid[j];

			p->pid[j] = p->pid[j - 1];
			p->pid[j - 1] = t;
		}
	}
	return 0;

out_end:
	vmindex_pivots_end(p);
	return r;
}

/*
 * statm's size is the address space's, read through the task: 0 once
 * exit has dropped it.  A pivot never execs, so while it has one it has
 * the one it was sorted with.
 */
int vmindex_pivots_intact(const struct vmindex_pivots *p)
{
	for (size_t i = 0; i < p->n; i++) {
		char *buf;
		size_t len;
		unsigned long size;
		int r = procfs_read_pid_record(p->pid[i], "statm", 256, &buf, &len);

		if (r < 0)
			return -ESRCH;
		size = strtoul(buf, NULL, 10);
		free(buf);
		if (size == 0)
			return -ESRCH;
	}
	return p->n ? 0 : -ESRCH;
}

/* The gap pid falls in among the sorted pivots, VMINDEX_SKIP or VMINDEX_ANY; or -errno. */
static int place_entry(const struct vmindex_pivots *p, pid_t pid)
{
	size_t lo = 0, hi = p->n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int r = kcmp_vm_order(pid, p->pid[mid]);

		if (r == -ESRCH)     /* gone: a PID taken again would be a new task */
			return VMINDEX_SKIP;
		if (r == -EPERM)
			return VMINDEX_ANY;
		if (r < 0)
			return r;
		if (r == 0)          /* the pivot itself */
			return VMINDEX_SKIP;
		if (r == 1)
			hi = mid;
		else
			lo = mid + 1;
	}
	return (int)lo;
}

int vmindex_build(const struct vmindex_pivots *p, const pid_t *procs, size_t n,
		  struct vmindex **ret)
{
	struct vmindex *ix;
	int r;

	if (p->n == 0)
		return -EINVAL;
	ix = calloc(1, sizeof(*ix));
	if (!ix)
		return -ENOMEM;
	ix->bucket = calloc(n ? n : 1, sizeof(*ix->bucket));
	if (!ix->bucket) {
		r = -ENOMEM;
		goto out_free;
	}
	ix->n = n;
	for (size_t i = 0; i < n; i++) {
		r = place_entry(p, procs[i]);
		if (r < 0)
			goto out_free;
		ix->bucket[i] = (uint16_t)r;
	}
	/* After every placing: a pivot that moved before the last one moved under it. */
	r = vmindex_pivots_intact(p);
	if (r < 0)
		goto out_free;
	*ret = ix;
	return 0;

out_free:
	vmindex_free(ix);
	return r;
}

static bool may_share(uint16_t bucket, uint16_t want)
{
	return bucket == want || bucket == VMINDEX_ANY;
}

int vmindex_candidates(const struct vmindex *ix, const pid_t *procs, size_t n, pid_t pid,
		       pid_t **ret, size_t *ret_n)
{
	size_t at, k = 0;
	uint16_t want;
	pid_t *v;

	if (n != ix->n || !procfs_listing_find(procs, n, pid, &at))
		return -ENOENT;
	want = ix->bucket[at];
	if (want == VMINDEX_SKIP || want == VMINDEX_ANY)
		return -ENOENT;
	for (size_t i = 0; i < n; i++)
		k += i != at && may_share(ix->bucket[i], want);
	v = malloc((k ? k : 1) * sizeof(*v));
	if (!v)
		return -ENOMEM;
	k = 0;
	for (size_t i = 0; i < n; i++)
		if (i != at && may_share(ix->bucket[i], want))
			v[k++] = procs[i];
	*ret = v;
	*ret_n = k;
	return 0;
}

uint16_t vmindex_bucket(const struct vmindex *ix, size_t i)
{
	return ix->bucket[i];
}

void vmindex_free(struct vmindex *ix)
{
	if (!ix)
		return;
	free(ix->bucket);
	free(ix);
}
