// SPDX-License-Identifier: MIT
/*
 * Unit tests for vmindex.c: the buckets must be exactly the gaps between
 * the sorted pivots in kcmp's own order, so that two processes on one
 * address space always share a bucket; a pivot that exits must spoil the
 * index; and no pivot may outlive the call that made it.  Checked on
 * processes of the test's own that hold still (children that never exec,
 * and one that shares this process's memory), never on the rest of the
 * machine, which may exec at any moment.
 */
#include <errno.h>
#include <sched.h>
#include <setjmp.h>
#include <signal.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <linux/kcmp.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "reaped.h"
#include "vmindex.h"

#define NKIDS 40

static long order(pid_t a, pid_t b)
{
	return syscall(SYS_kcmp, a, b, KCMP_VM, 0, 0);
}

static pid_t still_child(void)
{
	pid_t c = fork();

	assert_true(c >= 0);
	if (c == 0) {
		prctl(PR_SET_PDEATHSIG, SIGKILL);   /* a failed assert must not leave it behind */
		for (;;)
			pause();
	}
	return c;
}

static int sharer_main(void *arg)
{
	(void)arg;
	prctl(PR_SET_PDEATHSIG, SIGKILL);
	for (;;)
		pause();
	return 0;
}

/* A process on this process's address space: clone(CLONE_VM) without CLONE_THREAD. */
static pid_t memory_sharer(void)
{
	static char stack[64 * 1024] __attribute__((aligned(16)));
	pid_t c = clone(sharer_main, stack + sizeof(stack), CLONE_VM | SIGCHLD, NULL);

	assert_true(c > 0);
	return c;
}

static void end_child(pid_t c)
{
	kill(c, SIGKILL);
	assert_int_equal(waitpid(c, NULL, 0), c);
}

static int cmp_pid(const void *a, const void *b)
{
	pid_t x = *(const pid_t *)a, y = *(const pid_t *)b;

	return (x > y) - (x < y);
}

static void no_children_left(void)
{
	assert_int_equal(waitpid(-1, NULL, WNOHANG), -1);
	assert_int_equal(errno, ECHILD);
}

static void pivots_are_sorted_and_reaped(void **state)
{
	struct vmindex_pivots p;

	(void)state;
	assert_int_equal(vmindex_pivots_start(&p), 0);
	assert_int_equal(p.n, VMINDEX_PIVOTS);
	for (size_t i = 0; i < p.n; i++)
		for (size_t j = i + 1; j < p.n; j++)
			assert_int_equal(order(p.pid[i], p.pid[j]), 1);
	assert_int_equal(vmindex_pivots_intact(&p), 0);
	vmindex_pivots_end(&p);
	assert_int_equal(p.n, 0);
	no_children_left();
}

/*
 * Every child's bucket is the gap its address space falls in, checked
 * against the pivots around it; the sharer sits with this process; the
 * pivots and a dead PID are skipped.
 */
static void buckets_are_the_gaps_between_pivots(void **state)
{
	struct vmindex_pivots p;
	pid_t procs[NKIDS + VMINDEX_PIVOTS + 3];
	pid_t kids[NKIDS], sharer, dead = reaped_pid();
	size_t n = 0;
	struct vmindex *ix;
	pid_t *cands;
	size_t ncands;

	(void)state;
	for (size_t i = 0; i < NKIDS; i++)
		kids[i] = procs[n++] = still_child();
	sharer = procs[n++] = memory_sharer();
	procs[n++] = getpid();
	procs[n++] = dead;
	assert_int_equal(vmindex_pivots_start(&p), 0);
	for (size_t i = 0; i < p.n; i++)
		procs[n++] = p.pid[i];
	qsort(procs, n, sizeof(*procs), cmp_pid);
	assert_int_equal(vmindex_build(&p, procs, n, &ix), 0);

	for (size_t i = 0; i < n; i++) {
		uint16_t b = vmindex_bucket(ix, i);
		bool pivot = false;

		for (size_t k = 0; k < p.n; k++)
			pivot |= procs[i] == p.pid[k];
		if (pivot || procs[i] == dead) {
			assert_int_equal(b, VMINDEX_SKIP);
			continue;
		}
		assert_true(b <= VMINDEX_PIVOTS);
		if (b > 0)
			assert_int_equal(order(p.pid[b - 1], procs[i]), 1);
		if (b < VMINDEX_PIVOTS)
			assert_int_equal(order(procs[i], p.pid[b]), 1);
	}

	/* The sharer is among this process's candidates; the process itself is not. */
	assert_int_equal(vmindex_candidates(ix, procs, n, getpid(), &cands, &ncands), 0);
	{
		bool found = false;

		for (size_t i = 0; i < ncands; i++) {
			assert_int_not_equal(cands[i], getpid());
			found |= cands[i] == sharer;
		}
		assert_true(found);
	}
	/* Thirty-two buckets: forty children cannot all fall in one with this process. */
	assert_true(ncands < n - p.n - 2);
	free(cands);
	/* A child's candidates are its own bucket, exactly. */
	assert_int_equal(vmindex_candidates(ix, procs, n, kids[0], &cands, &ncands), 0);
	{
		size_t at = 0, same = 0;

		while (procs[at] != kids[0])
			at++;
		for (size_t i = 0; i < n; i++)
			same += i != at && vmindex_bucket(ix, i) == vmindex_bucket(ix, at);
		assert_int_equal(ncands, same);
	}
	free(cands);
	assert_int_equal(vmindex_candidates(ix, procs, n, dead, &cands, &ncands), -ENOENT);
	assert_int_equal(vmindex_candidates(ix, procs, n - 1, getpid(), &cands, &ncands), -ENOENT);
	vmindex_free(ix);
	vmindex_pivots_end(&p);
	for (size_t i = 0; i < NKIDS; i++)
		end_child(kids[i]);
	end_child(sharer);
	no_children_left();
}

/* Unlisted: no bucket to look in. */
static void unlisted_pid_has_no_candidates(void **state)
{
	struct vmindex_pivots p;
	pid_t procs[1] = { getpid() };
	struct vmindex *ix;
	pid_t *cands;
	size_t ncands;

	(void)state;
	assert_int_equal(vmindex_pivots_start(&p), 0);
	assert_int_equal(vmindex_build(&p, procs, 1, &ix), 0);
	vmindex_pivots_end(&p);
	assert_int_equal(vmindex_candidates(ix, procs, 1, getppid(), &cands, &ncands), -ENOENT);
	assert_int_equal(vmindex_candidates(ix, procs, 1, getpid(), &cands, &ncands), 0);
	assert_int_equal(ncands, 0);
	free(cands);
	vmindex_free(ix);
}

/* A pivot that exits has moved in kcmp's order: no index may be made with it. */
static void exited_pivot_spoils_the_index(void **state)
{
	struct vmindex_pivots p;
	pid_t procs[1] = { getpid() };
	struct vmindex *ix = NULL;
	siginfo_t si;

	(void)state;
	assert_int_equal(vmindex_pivots_start(&p), 0);
	kill(p.pid[VMINDEX_PIVOTS / 2], SIGKILL);
	memset(&si, 0, sizeof(si));
	assert_int_equal(waitid(P_PID, p.pid[VMINDEX_PIVOTS / 2], &si, WEXITED | WNOWAIT), 0);
	assert_int_equal(vmindex_pivots_intact(&p), -ESRCH);
	assert_int_equal(vmindex_build(&p, procs, 1, &ix), -ESRCH);
	assert_null(ix);
	vmindex_pivots_end(&p);
	no_children_left();
}

/*
 * Where kcmp may not compare (-EPERM: here, a process of another user
 * without CAP_SYS_PTRACE), the process is a candidate for every target.
 * Run in a child that gives up root; its exit status is the verdict.
 */
static void uncomparable_process_is_everyones_candidate(void **state)
{
	pid_t root = getpid(), c;
	int status;

	(void)state;
	c = fork();
	assert_true(c >= 0);
	if (c == 0) {
		struct vmindex_pivots p;
		pid_t procs[2];
		struct vmindex *ix;
		pid_t *cands;
		size_t ncands, self_at;

		if (setresgid(65534, 65534, 65534) || setresuid(65534, 65534, 65534) ||
		    prctl(PR_SET_DUMPABLE, 1))
			_exit(10);
		procs[0] = root < getpid() ? root : getpid();
		procs[1] = root < getpid() ? getpid() : root;
		self_at = procs[0] == getpid() ? 0 : 1;
		if (vmindex_pivots_start(&p) < 0)
			_exit(11);
		if (vmindex_build(&p, procs, 2, &ix) < 0)
			_exit(12);
		vmindex_pivots_end(&p);
		if (vmindex_bucket(ix, 1 - self_at) != VMINDEX_ANY || vmindex_bucket(ix, self_at) > VMINDEX_PIVOTS)
			_exit(13);
		if (vmindex_candidates(ix, procs, 2, getpid(), &cands, &ncands) < 0 || ncands != 1 ||
		    cands[0] != root)
			_exit(14);
		if (vmindex_candidates(ix, procs, 2, root, &cands, &ncands) != -ENOENT)
			_exit(15);
		_exit(0);
	}
	assert_int_equal(waitpid(c, &status, 0), c);
	assert_true(WIFEXITED(status));
	assert_int_equal(WEXITSTATUS(status), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(pivots_are_sorted_and_reaped),
		cmocka_unit_test(buckets_are_the_gaps_between_pivots),
		cmocka_unit_test(unlisted_pid_has_no_candidates),
		cmocka_unit_test(exited_pivot_spoils_the_index),
		cmocka_unit_test(uncomparable_process_is_everyones_candidate),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
