/* SPDX-License-Identifier: MIT */
/*
 * x86-64: the CPU-specific facts btguard needs, as data.  The build picks
 * this header by include path (-Idaemon/arch/$(ARCH)); generic code never
 * tests the CPU itself.
 */
#ifndef BTGUARD_ARCH_H
#define BTGUARD_ARCH_H

#include <elf.h>
#include <stdint.h>
#include <sys/user.h>

#define ARCH_NAME        "x86_64"
#define ARCH_ELF_MACHINE EM_X86_64

/*
 * The guard: "xor eax,eax; ret".  backtrace() returns int in eax; zero
 * frames is a valid answer that every caller (torch's c10::get_backtrace
 * among them) handles.  Three bytes fit in one ptrace word anywhere.
 */
#define ARCH_STUB_BYTES  { 0x31, 0xc0, 0xc3 }
#define ARCH_STUB_LEN    3u

/*
 * With IBT (-fcf-protection), an indirect call must land on endbr64; keep
 * it and put the stub right after it so the function stays a valid target.
 */
#define ARCH_LANDING_PAD_BYTES { 0xf3, 0x0f, 0x1e, 0xfa }
#define ARCH_LANDING_PAD_LEN   4u

/* The unit PTRACE_PEEKTEXT / POKETEXT move, in bytes. */
#define ARCH_WORD_LEN    8u

/*
 * Bytes below the stack pointer a leaf function may use without moving it
 * (the System V red zone); a conservative stack scan starts that far down.
 */
#define ARCH_RED_ZONE    128u

typedef struct user_regs_struct arch_regs_t;

static inline uint64_t arch_regs_pc(const arch_regs_t *regs) { return regs->rip; }
static inline uint64_t arch_regs_sp(const arch_regs_t *regs) { return regs->rsp; }
/* The thread pointer (TLS base): glibc's thread control block. */
static inline uint64_t arch_regs_thread_pointer(const arch_regs_t *regs) { return regs->fs_base; }

#endif
