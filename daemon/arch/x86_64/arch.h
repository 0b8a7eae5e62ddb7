/* SPDX-License-Identifier: MIT */
/*
 * x86-64: the CPU-specific facts btguard needs, as data.  The build picks
 * this header by include path (-Idaemon/arch/$(ARCH)); generic code never
 * tests the CPU itself.
 */
#ifndef BTGUARD_ARCH_H
#define BTGUARD_ARCH_H

#include <elf.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/user.h>

#define ARCH_NAME        "x86_64"
#define ARCH_ELF_MACHINE EM_X86_64

#include "arch_stub.h"

/* CPU features a landing pad's stub may need (arch_stub.h): none here. */
static inline unsigned arch_cpu_features(void) { return 0; }

/*
 * Bytes below the stack pointer a leaf function may use without moving it
 * (the System V red zone); a conservative stack scan starts that far down.
 */
#define ARCH_RED_ZONE    128u

typedef struct user_regs_struct arch_regs_t;

/*
 * The register sets ptrace_stop_all reads with PTRACE_GETREGSET, as
 * { note type, offset in arch_regs_t, length }: NT_PRSTATUS is the whole
 * user_regs_struct, fs_base included.
 */
#define ARCH_REGSETS { { NT_PRSTATUS, 0, sizeof(struct user_regs_struct) } }

static inline uint64_t arch_regs_pc(const arch_regs_t *regs) { return regs->rip; }
static inline uint64_t arch_regs_sp(const arch_regs_t *regs) { return regs->rsp; }
/* The thread pointer (TLS base): glibc's thread control block. */
static inline uint64_t arch_regs_thread_pointer(const arch_regs_t *regs) { return regs->fs_base; }

/* The address a code pointer names: on x86-64 the word itself. */
static inline uint64_t arch_code_address(uint64_t word) { return word; }

/*
 * Registers holding an address the thread will execute at later, the PC
 * first: on x86-64 only the PC (a return address is always on the stack,
 * where the scan finds it).  Returns how many were written to ret.
 */
#define ARCH_MAX_RESUME_REGS 1
static inline size_t arch_regs_resume(const arch_regs_t *regs, uint64_t ret[ARCH_MAX_RESUME_REGS])
{
	ret[0] = regs->rip;
	return 1;
}

/*
 * System call numbers exec.c follows a process through its exec with (the
 * kernel reports them with PTRACE_GET_SYSCALL_INFO, the same on every CPU;
 * only the numbers differ).  ARCH_LOADER_SYSCALLS: every call glibc's
 * dynamic loader makes before it has mapped the libraries a program
 * needs; a program whose first other call comes before any backtrace()
 * appeared maps none at start (exec.c gives up there).  x86-64 keeps the
 * old open/stat/access calls a loader built for older kernels may use.
 */
#define ARCH_SYS_EXECVE    59
#define ARCH_SYS_EXECVEAT  322
#define ARCH_LOADER_SYSCALLS { \
	0 /* read */, 2 /* open */, 3 /* close */, 4 /* stat */, 5 /* fstat */, \
	6 /* lstat */, 8 /* lseek */, 9 /* mmap */, 10 /* mprotect */, 11 /* munmap */, \
	12 /* brk */, 17 /* pread64 */, 21 /* access */, 63 /* uname */, \
	89 /* readlink */, 137 /* statfs */, 158 /* arch_prctl */, \
	218 /* set_tid_address */, 257 /* openat */, 262 /* newfstatat */, \
	273 /* set_robust_list */, 302 /* prlimit64 */, 318 /* getrandom */, \
	332 /* statx */, 334 /* rseq */, 439 /* faccessat2 */, 269 /* faccessat */, \
}

#endif
