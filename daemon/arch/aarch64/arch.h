/* SPDX-License-Identifier: MIT */
/*
 * aarch64: the CPU-specific facts btguard needs, as data.  The build picks
 * this header by include path (-iquote daemon/arch/$(ARCH)); generic code
 * never tests the CPU itself.
 */
#ifndef BTGUARD_ARCH_H
#define BTGUARD_ARCH_H

#include <asm/hwcap.h>
#include <elf.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/auxv.h>
#include <sys/user.h>

#define ARCH_NAME        "aarch64"
#define ARCH_ELF_MACHINE EM_AARCH64

#include "arch_stub.h"

/*
 * FEAT_PAuth decides the stub after paciasp/pacibsp (arch_stub.h).  The
 * kernel reports HWCAP_PACA only when every CPU has it, and the target
 * runs on the same CPUs as we do.
 */
static inline unsigned arch_cpu_features(void)
{
	return (getauxval(AT_HWCAP) & HWCAP_PACA) ? ARCH_FEATURE_PAUTH : 0;
}

/*
 * AAPCS64 has no red zone: nothing below SP is live, and a signal handler
 * may overwrite it at any time.
 */
#define ARCH_RED_ZONE    0u

/*
 * There is no PTRACE_GETREGS on arm64.  NT_PRSTATUS gives x0..x30, sp, pc
 * and pstate (glibc's user_regs_struct is the kernel's user_pt_regs); the
 * thread pointer, TPIDR_EL0, is a register set of its own, NT_ARM_TLS
 * (newer kernels append TPIDR2_EL0 to it; GETREGSET truncates to our 8).
 */
typedef struct {
	struct user_regs_struct gp;
	uint64_t tpidr_el0;
} arch_regs_t;

/* { note type, offset in arch_regs_t, length } for each PTRACE_GETREGSET. */
#define ARCH_REGSETS { \
	{ NT_PRSTATUS, offsetof(arch_regs_t, gp), sizeof(struct user_regs_struct) }, \
	{ NT_ARM_TLS, offsetof(arch_regs_t, tpidr_el0), sizeof(uint64_t) }, \
}

static inline uint64_t arch_regs_pc(const arch_regs_t *regs) { return regs->gp.pc; }
static inline uint64_t arch_regs_sp(const arch_regs_t *regs) { return regs->gp.sp; }
/* The thread pointer (TLS base): glibc's thread control block. */
static inline uint64_t arch_regs_thread_pointer(const arch_regs_t *regs) { return regs->tpidr_el0; }

/*
 * The address a code pointer names.  A return address a pac-ret function
 * saved (paciasp signs x30 in place) carries a pointer authentication
 * code in its top bits, and so may a tagged pointer: user addresses are
 * 48 bits wide on Debian's arm64 kernels, and the bits above are PAC or
 * tag, never address.  Every comparison with the bytes a guard changes
 * strips them, or a signed return address would go unseen.
 */
static inline uint64_t arch_code_address(uint64_t word)
{
	return word & ((UINT64_C(1) << 48) - 1);
}

/*
 * Registers holding an address the thread will execute at later, the PC
 * first.  A leaf function never spills its return address: it lives in
 * the link register x30 only, where no stack scan or walk would see it.
 * So a thread stopped in a leaf called from inside the bytes we change
 * (or in a function that has not yet saved x30) is caught here.  x30 may
 * hold a PAC in its top bits (pac-ret); strip them so the comparison sees
 * the address (a stale x30 in a non-leaf only makes us more careful).
 */
#define ARCH_MAX_RESUME_REGS 2
static inline size_t arch_regs_resume(const arch_regs_t *regs, uint64_t ret[ARCH_MAX_RESUME_REGS])
{
	ret[0] = regs->gp.pc;
	ret[1] = arch_code_address(regs->gp.regs[30]);
	return 2;
}

/*
 * System call numbers exec.c follows a process through its exec with (the
 * kernel reports them with PTRACE_GET_SYSCALL_INFO, the same on every CPU;
 * only the numbers differ: arm64 uses the generic table, which has no
 * open, stat or access).  ARCH_LOADER_SYSCALLS: every call glibc's
 * dynamic loader makes before it has mapped the libraries a program
 * needs; a program whose first other call comes before any backtrace()
 * appeared maps none at start (exec.c gives up there).
 */
#define ARCH_SYS_EXECVE    221
#define ARCH_SYS_EXECVEAT  281
#define ARCH_LOADER_SYSCALLS { \
	48 /* faccessat */, 439 /* faccessat2 */, 56 /* openat */, 57 /* close */, \
	62 /* lseek */, 63 /* read */, 67 /* pread64 */, 78 /* readlinkat */, \
	79 /* newfstatat */, 80 /* fstat */, 43 /* statfs */, 160 /* uname */, \
	96 /* set_tid_address */, 99 /* set_robust_list */, 214 /* brk */, \
	215 /* munmap */, 222 /* mmap */, 226 /* mprotect */, 261 /* prlimit64 */, \
	278 /* getrandom */, 291 /* statx */, 293 /* rseq */, \
}

#endif
