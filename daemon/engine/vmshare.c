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
 * it, nothing enters it), and those the allocator may have handed out again
 * in between, to a task born under a PID whose process exited (pidalloc.c).
 *
 * Listing /proc walks every task on the node: a few milliseconds with
 * 10,000 of them, and inside the pause the second listing holds the whole
 * target that long.  So the scan, before the stop, takes a listing that is
 * complete now, and the one inside the pause is seldom needed:
 *  - /proc/stat's count of tasks created, read before each listing: the
 *    kernel counts a task as it attaches it, so when the count has not
 *    moved no task has appeared since the listing began.  Every process
 *    alive is then in it, under the same PID (a recycled PID is a new
 *    task), and was compared by the scan: the second listing is not
 *    needed, and an old listing is as good as a new one for the scan.
 *  - The newest listing - the previous target's, in a request for many -
 *    serves the next scan while that holds; once a task was created since,
 *    the scan lists again, before the stop, rather than leave it to the
 *    second listing inside the pause (the same listing, moved out of it).
 * A node that makes threads all the time moves the count, and the second
 * listing then runs too: what was born between the scan and the stop.
 *
 * A listing that serves many scans (a request for many targets on a quiet
 * node) is worth an index (vmindex.c): after INDEX_AFTER_USES scans on one
 * listing, the next lists again with pivots running and sorts the listing
 * into buckets, and each later scan on it compares the target only with
 * its bucket.  The index is a fact about that listing, good exactly as
 * long as the listing is complete.
 */
#include <errno.h>
#include <linux/kcmp.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "fault.h"
#include "log.h"
#include "pidalloc.h"
#include "procfs.h"
#include "vmindex.h"
#include "vmshare.h"

struct vmshare_listing {
	unsigned refs;
	uint64_t forks;        /* /proc/stat's count before it was read */
	bool have_forks;       /* false: the count was unreadable, compare nothing with it */
	struct pidalloc_mark pids;   /* the PID allocator before it was read */
	pid_t *v;              /* sorted: /proc lists in PID order */
	size_t n;
	unsigned uses;         /* scans that took it as the newest complete listing */
	struct vmindex *index; /* its processes by address space, or NULL */
};

/*
 * When an index pays: making one costs 31 forks, a listing and 5 kcmp per
 * process; each scan then saves about 15/16 of its kcmp calls.  A listing
 * that served this many scans is likely to serve many more.
 */
#define INDEX_AFTER_USES 8
#define INDEX_MIN_PROCS 256

/* The newest listing, for the next scan; held by a reference of its own. */
static struct vmshare_listing *newest;
static bool pids_unread_said;

static void listing_put(struct vmshare_listing *l)
{
	if (!l || --l->refs > 0)
		return;
	vmindex_free(l->index);
	free(l->v);
	free(l);
}

/* A new listing of /proc, one reference for the caller; it becomes the newest. */
static int listing_read(struct vmshare_listing **ret)
{
	struct vmshare_listing *l = calloc(1, sizeof(*l));
	int r;

	if (!l)
		return -ENOMEM;
	/* Before the listing: a task counted after this read may be missing from it. */
	l->have_forks = procfs_read_forks(&l->forks) == 0;
	pidalloc_read(&l->pids);
	if (!l->pids.ok && !pids_unread_said) {
		/* Said once: it costs time inside pauses, not safety. */
		log_msg(LOG_NOTICE, "cannot read /proc/sys/kernel/ns_last_pid, pid_max or /proc/loadavg: the search for processes sharing a target's memory compares every process again inside the pause when tasks were created meanwhile");
		pids_unread_said = true;
	}
	r = procfs_list_processes(&l->v, &l->n);
	if (r < 0) {
		free(l);
		return r;
	}
	l->refs = 2;
	listing_put(newest);
	newest = l;
	*ret = l;
	return 0;
}

/* True when no task has been created since l began: it holds every process alive. */
static bool listing_complete(const struct vmshare_listing *l)
{
	uint64_t forks;

	return l->have_forks && procfs_read_forks(&forks) == 0 && forks == l->forks;
}

/*
 * A new listing with an index: the pivots first, because making them
 * creates tasks and a listing older than they are would not be complete.
 * Without pivots, or when the index cannot be made, the listing alone.
 */
static int listing_read_indexed(struct vmshare_listing **ret)
{
	struct vmindex_pivots pivots;
	bool have_pivots = vmindex_pivots_start(&pivots) == 0;
	int r = listing_read(ret);

	if (r == 0 && have_pivots && vmindex_build(&pivots, (*ret)->v, (*ret)->n, &(*ret)->index) < 0)
		(*ret)->index = NULL;
	if (have_pivots)
		vmindex_pivots_end(&pivots);
	return r;
}

/* The newest listing if it is complete, else a new one; a reference for the caller. */
static int listing_get(struct vmshare_listing **ret)
{
	if (newest && listing_complete(newest)) {
		if (!newest->index && ++newest->uses == INDEX_AFTER_USES && newest->n >= INDEX_MIN_PROCS)
			return listing_read_indexed(ret);
		newest->refs++;
		*ret = newest;
		return 0;
	}
	return listing_read(ret);
}

void vmshare_forget_listing(void)
{
	listing_put(newest);
	newest = NULL;
}

int vmshare_same(pid_t a, pid_t b)
{
	long r = fault_before_kcmp();

	if (r < 0)
		return (int)r;
	r = syscall(SYS_kcmp, a, b, KCMP_VM, 0, 0);

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

static int add_sharer(struct vmshare *vs, pid_t pid)
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

static bool is_sharer(const struct vmshare *vs, pid_t pid)
{
	for (size_t i = 0; i < vs->n; i++)
		if (vs->sharers[i] == pid)
			return true;
	return false;
}

/*
 * Compares pid with every process listed, but those skip (sorted, may be
 * NULL) holds under a PID the allocator cannot have handed out again since
 * (fresh: NULL for none).
 */
static int compare_all(struct vmshare *vs, const pid_t *procs, size_t nprocs, const pid_t *skip,
		       size_t nskip, const struct pidalloc_window *fresh, size_t *ret_new)
{
	size_t before = vs->n;

	for (size_t i = 0; i < nprocs; i++) {
		int r;

		if (procs[i] == vs->pid)
			continue;
		if (skip && procfs_listing_find(skip, nskip, procs[i], NULL) &&
		    (!fresh || !pidalloc_in_window(fresh, procs[i]) || is_sharer(vs, procs[i])))
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
		if (r == 0 && (r = add_sharer(vs, procs[i])) < 0)
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
	r = listing_get(&vs->seen);
	if (r < 0)
		return r;
	if (vs->seen->index) {
		pid_t *cands;
		size_t ncands;

		/* The others of the listing are in other buckets: they share nothing with pid. */
		if (vmindex_candidates(vs->seen->index, vs->seen->v, vs->seen->n, pid, &cands,
				       &ncands) == 0) {
			r = compare_all(vs, cands, ncands, NULL, 0, NULL, NULL);
			free(cands);
			vs->compared = ncands;
			return r;
		}
	}
	vs->compared = vs->seen->n;
	return compare_all(vs, vs->seen->v, vs->seen->n, NULL, 0, NULL, NULL);
}

size_t vmshare_listed(const struct vmshare *vs)
{
	return vs->seen ? vs->seen->n : 0;
}

int vmshare_rescan(struct vmshare *vs, bool have_forks, uint64_t forks_at_rest, size_t *ret_new)
{
	struct pidalloc_window fresh = { .all = true };
	struct vmshare_listing *now;
	bool complete;
	int r;

	/*
	 * Nobody stopped can make a task, so a count read while all were
	 * stopped that equals the listing's means no task was born in
	 * between; one that differs means a listing is due.  (A count read
	 * before the stop would not do: a sibling made after it, before its
	 * maker stopped, would be missed.)
	 */
	if (!vs->seen)
		complete = false;
	else if (have_forks)
		complete = vs->seen->have_forks && forks_at_rest == vs->seen->forks;
	else
		complete = listing_complete(vs->seen);
	if (complete) {
		*ret_new = 0;
		return 0;
	}
	r = listing_read(&now);
	if (r < 0)
		return r;
	/*
	 * A PID both listings hold names the same process, unless it was
	 * handed out again in between (pidalloc.c): those are compared too.
	 */
	if (vs->seen && vs->seen->have_forks && now->have_forks && now->forks >= vs->seen->forks)
		pidalloc_window(&vs->seen->pids, &now->pids, now->forks - vs->seen->forks, &fresh);
	r = compare_all(vs, now->v, now->n, vs->seen ? vs->seen->v : NULL,
			vs->seen ? vs->seen->n : 0, &fresh, ret_new);
	if (r < 0) {
		listing_put(now);
		return r;
	}
	listing_put(vs->seen);
	vs->seen = now;
	return 0;
}

void vmshare_free(struct vmshare *vs)
{
	listing_put(vs->seen);
	free(vs->sharers);
	memset(vs, 0, sizeof(*vs));
}
