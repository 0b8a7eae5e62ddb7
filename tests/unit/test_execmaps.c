// SPDX-License-Identifier: MIT
/*
 * Unit tests for execmaps.c: the kernel's PROCMAP_QUERY answer must be,
 * entry for entry, what the maps text says of the same executable file
 * mappings - the one a status uses where the kernel has it, the other
 * everywhere else.  Compared on this process with an executable mapping of
 * a deleted file whose name holds a newline, which the text escapes.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "execmaps.h"
#include "reaped.h"

static void assert_same(const struct procfs_mapping *a, size_t na,
			const struct procfs_mapping *b, size_t nb)
{
	assert_int_equal(na, nb);
	for (size_t i = 0; i < na; i++) {
		if (a[i].start != b[i].start || a[i].end != b[i].end || a[i].offset != b[i].offset ||
		    a[i].perms != b[i].perms || a[i].dev_major != b[i].dev_major ||
		    a[i].dev_minor != b[i].dev_minor || a[i].inode != b[i].inode ||
		    a[i].deleted != b[i].deleted || strcmp(a[i].path, b[i].path))
			fail_msg("mapping %zu: query %llx-%llx off %llx perms %x dev %u:%u ino %llu "
				 "%s%s, text %llx-%llx off %llx perms %x dev %u:%u ino %llu %s%s", i,
				 (unsigned long long)a[i].start, (unsigned long long)a[i].end,
				 (unsigned long long)a[i].offset, a[i].perms, a[i].dev_major,
				 a[i].dev_minor, (unsigned long long)a[i].inode, a[i].path,
				 a[i].deleted ? " (deleted)" : "",
				 (unsigned long long)b[i].start, (unsigned long long)b[i].end,
				 (unsigned long long)b[i].offset, b[i].perms, b[i].dev_major,
				 b[i].dev_minor, (unsigned long long)b[i].inode, b[i].path,
				 b[i].deleted ? " (deleted)" : "");
	}
}

/* The query, or a skip where the kernel has none (before Linux 6.11). */
static void query_or_skip(pid_t pid, struct procfs_mapping **m, size_t *n)
{
	int r = execmaps_query(pid, m, n);

	if (r == -EOPNOTSUPP)
		skip();
	assert_int_equal(r, 0);
}

static void query_matches_text(void **state)
{
	struct procfs_mapping *q, *t;
	size_t nq, nt, hits = 0;
	int fd = memfd_create("btg\nexec", MFD_CLOEXEC);
	void *at;
	(void)state;

	/* A memfd's path is "/memfd:NAME (deleted)": a deleted file, and a newline. */
	assert_true(fd >= 0);
	assert_int_equal(ftruncate(fd, 2 * 4096), 0);
	at = mmap(NULL, 2 * 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE, fd, 4096 * 0);
	assert_true(at != MAP_FAILED);
	/* A second mapping at an offset, apart from the first. */
	void *at2 = mmap(NULL, 4096, PROT_READ | PROT_EXEC, MAP_PRIVATE, fd, 4096);
	assert_true(at2 != MAP_FAILED);

	query_or_skip(getpid(), &q, &nq);
	assert_int_equal(execmaps_from_text(getpid(), &t, &nt), 0);
	assert_same(q, nq, t, nt);
	for (size_t i = 0; i < nq; i++) {
		assert_true(q[i].perms & PROCFS_MAP_EXEC);
		assert_true(q[i].inode != 0);
		if (!strcmp(q[i].path, "/memfd:btg\\012exec")) {
			assert_true(q[i].deleted);
			hits++;
			if (q[i].start == (uintptr_t)at2)
				assert_int_equal(q[i].offset, 4096);
		}
	}
	assert_int_equal(hits, 2);
	free(q);
	free(t);
	munmap(at, 2 * 4096);
	munmap(at2, 4096);
	close(fd);
}

/* execmaps_read() is one of the two, and the maps it leaves out are not executable files. */
static void read_keeps_only_executable_files(void **state)
{
	struct procfs_mapping *r, *all;
	size_t nr, nall, exec_files = 0;
	(void)state;

	assert_int_equal(execmaps_read(getpid(), &r, &nr), 0);
	assert_int_equal(procfs_read_maps(getpid(), &all, &nall), 0);
	for (size_t i = 0; i < nall; i++)
		exec_files += (all[i].perms & PROCFS_MAP_EXEC) && all[i].inode;
	assert_true(nr > 0);
	assert_int_equal(nr, exec_files);
	assert_true(nall > nr);   /* a process has data and anonymous mappings too */
	free(r);
	free(all);
}

/*
 * A kernel without PROCMAP_QUERY answers ENOTTY, a sandbox that forbids
 * ioctl() EPERM: made so here with a seccomp filter, in a child.
 * execmaps_read() must then give what the text gives, and keep doing so.
 */
static void ioctl_answers(int err)
{
	struct sock_filter insns[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_ioctl, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ERRNO | (unsigned)err),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = { .len = sizeof(insns) / sizeof(insns[0]), .filter = insns };
	int status;
	pid_t child = fork();

	assert_true(child >= 0);
	if (child == 0) {
		struct procfs_mapping *r, *t;
		size_t nr, nt;

		if (prctl(PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) < 0 ||
		    prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog) < 0)
			_exit(2);
		if (execmaps_query(getpid(), &r, &nr) != -EOPNOTSUPP)
			_exit(3);
		for (int round = 0; round < 2; round++) {
			if (execmaps_read(getpid(), &r, &nr) < 0 || nr == 0 ||
			    execmaps_from_text(getpid(), &t, &nt) < 0 || nr != nt)
				_exit(4);
			for (size_t i = 0; i < nr; i++)
				if (r[i].start != t[i].start || strcmp(r[i].path, t[i].path))
					_exit(5);
			free(r);
			free(t);
		}
		_exit(0);
	}
	assert_int_equal(waitpid(child, &status, 0), child);
	assert_true(WIFEXITED(status));
	if (WEXITSTATUS(status))
		fail_msg("with ioctl() answering %s: child step %d failed", strerror(err),
			 WEXITSTATUS(status));
}

static void old_kernel_reads_the_text(void **state)
{
	(void)state;
	ioctl_answers(ENOTTY);
}

static void sandbox_without_ioctl_reads_the_text(void **state)
{
	(void)state;
	ioctl_answers(EPERM);
}

static void gone_process(void **state)
{
	struct procfs_mapping *m = NULL;
	size_t n;
	pid_t dead = reaped_pid();
	(void)state;

	assert_int_equal(execmaps_from_text(dead, &m, &n), -ESRCH);
	assert_int_equal(execmaps_read(dead, &m, &n), -ESRCH);
	if (execmaps_query(dead, &m, &n) != -EOPNOTSUPP)
		assert_int_equal(execmaps_query(dead, &m, &n), -ESRCH);
}

/* A zombie has no memory: both ways read it as no mappings, as the text is empty. */
static void zombie_reads_empty(void **state)
{
	struct procfs_mapping *m;
	size_t n = 99;
	pid_t z = fork();
	int r;
	(void)state;

	assert_true(z >= 0);
	if (z == 0)
		_exit(0);
	/* Not reaped: wait until it is a zombie without reaping it. */
	for (int i = 0; i < 1000; i++) {
		siginfo_t si = { 0 };

		if (waitid(P_PID, (id_t)z, &si, WEXITED | WNOHANG | WNOWAIT) == 0 && si.si_pid == z)
			break;
		usleep(1000);
	}
	assert_int_equal(execmaps_from_text(z, &m, &n), 0);
	assert_int_equal(n, 0);
	free(m);
	n = 99;
	r = execmaps_query(z, &m, &n);
	if (r != -EOPNOTSUPP) {
		assert_int_equal(r, 0);
		assert_int_equal(n, 0);
		free(m);
	}
	assert_int_equal(waitpid(z, NULL, 0), z);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(query_matches_text),
		cmocka_unit_test(read_keeps_only_executable_files),
		cmocka_unit_test(old_kernel_reads_the_text),
		cmocka_unit_test(sandbox_without_ioctl_reads_the_text),
		cmocka_unit_test(gone_process),
		cmocka_unit_test(zombie_reads_empty),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
