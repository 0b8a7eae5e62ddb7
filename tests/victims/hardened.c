// SPDX-License-Identifier: MIT
/*
 * hardened: bt_loop in a process that can no longer make code writable.
 *
 * Usage: hardened mdwe|seccomp NTHREADS [--report FILE]
 *
 * mdwe:    prctl(PR_SET_MDWE, PR_MDWE_REFUSE_EXEC_GAIN), what systemd's
 *          MemoryDenyWriteExecute= asks of the kernel on 6.3 and later.
 * seccomp: a seccomp filter that kills the process on any mprotect() that
 *          asks for PROT_EXEC, as a hardened job's sandbox would.
 * Either way an in-process patcher (mprotect, write, mprotect back) fails,
 * and the restriction is proved in place before "ready": the victim exits
 * with status 1 if the prctl fails, if mprotect(PROT_EXEC) still succeeds
 * under MDWE, or if a forked child is not killed by SIGSYS under seccomp.
 * Then it runs bt_loop's main with the remaining arguments (same report).
 */
#define main bt_loop_main
#include "bt_loop.c"
#undef main

#include <linux/audit.h>
#include <linux/filter.h>
#include <linux/seccomp.h>
#include <stddef.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/wait.h>

/* Kernel 6.3 ABI; older headers lack the names. */
#ifndef PR_SET_MDWE
#define PR_SET_MDWE 65
#endif
#ifndef PR_MDWE_REFUSE_EXEC_GAIN
#define PR_MDWE_REFUSE_EXEC_GAIN 1
#endif

/* 1 when mprotect() may turn a fresh writable page executable. */
static int exec_gain_allowed(void)
{
	void *p = mmap(NULL, 4096, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	int r;

	if (p == MAP_FAILED)
		return -1;
	r = mprotect(p, 4096, PROT_READ | PROT_EXEC) == 0;
	munmap(p, 4096);
	return r;
}

static int apply_mdwe(void)
{
	if (prctl(PR_SET_MDWE, PR_MDWE_REFUSE_EXEC_GAIN, 0L, 0L, 0L) != 0) {
		perror("prctl(PR_SET_MDWE)");
		return -1;
	}
	if (exec_gain_allowed() != 0) {
		fprintf(stderr, "MDWE did not refuse mprotect(PROT_EXEC)\n");
		return -1;
	}
	return 0;
}

/* The low half of args[2] is mprotect's prot (x86-64 is little-endian). */
#define PROT_ARG offsetof(struct seccomp_data, args[2])

static int apply_seccomp(void)
{
	struct sock_filter insns[] = {
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, arch)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, AUDIT_ARCH_X86_64, 1, 0),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, offsetof(struct seccomp_data, nr)),
		BPF_JUMP(BPF_JMP | BPF_JEQ | BPF_K, SYS_mprotect, 0, 3),
		BPF_STMT(BPF_LD | BPF_W | BPF_ABS, PROT_ARG),
		BPF_JUMP(BPF_JMP | BPF_JSET | BPF_K, PROT_EXEC, 0, 1),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_KILL_PROCESS),
		BPF_STMT(BPF_RET | BPF_K, SECCOMP_RET_ALLOW),
	};
	struct sock_fprog prog = { .len = sizeof(insns) / sizeof(insns[0]), .filter = insns };
	int status;
	pid_t child;

	if (prctl(PR_SET_NO_NEW_PRIVS, 1L, 0L, 0L, 0L) != 0 ||
	    prctl(PR_SET_SECCOMP, SECCOMP_MODE_FILTER, &prog, 0L, 0L) != 0) {
		perror("prctl(PR_SET_SECCOMP)");
		return -1;
	}
	/* The filter is inherited: a child that tries must die of SIGSYS. */
	child = fork();
	if (child < 0)
		return -1;
	if (child == 0) {
		exec_gain_allowed();
		_exit(0);
	}
	if (waitpid(child, &status, 0) != child || !WIFSIGNALED(status) ||
	    WTERMSIG(status) != SIGSYS) {
		fprintf(stderr, "seccomp filter did not kill mprotect(PROT_EXEC)\n");
		return -1;
	}
	return 0;
}

int main(int argc, char **argv)
{
	void *buf[16];
	int r;

	if (argc < 3 || (strcmp(argv[1], "mdwe") != 0 && strcmp(argv[1], "seccomp") != 0)) {
		fprintf(stderr, "usage: %s mdwe|seccomp NTHREADS [--report FILE]\n", argv[0]);
		return 2;
	}
	/* Bind backtrace() (it loads libgcc_s on first use) before the lock-down. */
	if (backtrace(buf, 16) <= 0) {
		fprintf(stderr, "backtrace returned nothing\n");
		return 1;
	}
	r = strcmp(argv[1], "mdwe") == 0 ? apply_mdwe() : apply_seccomp();
	if (r < 0)
		return 1;
	return bt_loop_main(argc - 1, argv + 1);
}
