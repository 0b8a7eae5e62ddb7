/* SPDX-License-Identifier: MIT */
/*
 * x86-64: libunwind's register numbers mapped onto the registers we saved
 * with PTRACE_GETREGSET, so a stack walk needs no PTRACE_PEEKUSER calls.
 */
#ifndef BTGUARD_ARCH_UNWIND_H
#define BTGUARD_ARCH_UNWIND_H

#include <libunwind.h>

#include "arch.h"

/* libunwind's numbers of the general registers: 0 to ARCH_UNW_GPRS - 1 (rax to r15). */
#define ARCH_UNW_GPRS 16u

/* A word libunwind reads from a stack is as it is: no pointer authentication here. */
#define ARCH_UNW_SIGNED_WORDS 0

static inline int arch_unw_reg(const arch_regs_t *r, int regnum, unw_word_t *ret)
{
	switch (regnum) {
	case UNW_X86_64_RAX: *ret = r->rax; break;
	case UNW_X86_64_RDX: *ret = r->rdx; break;
	case UNW_X86_64_RCX: *ret = r->rcx; break;
	case UNW_X86_64_RBX: *ret = r->rbx; break;
	case UNW_X86_64_RSI: *ret = r->rsi; break;
	case UNW_X86_64_RDI: *ret = r->rdi; break;
	case UNW_X86_64_RBP: *ret = r->rbp; break;
	case UNW_X86_64_RSP: *ret = r->rsp; break;
	case UNW_X86_64_R8:  *ret = r->r8;  break;
	case UNW_X86_64_R9:  *ret = r->r9;  break;
	case UNW_X86_64_R10: *ret = r->r10; break;
	case UNW_X86_64_R11: *ret = r->r11; break;
	case UNW_X86_64_R12: *ret = r->r12; break;
	case UNW_X86_64_R13: *ret = r->r13; break;
	case UNW_X86_64_R14: *ret = r->r14; break;
	case UNW_X86_64_R15: *ret = r->r15; break;
	case UNW_X86_64_RIP: *ret = r->rip; break;
	default: return -UNW_EBADREG;
	}
	return 0;
}

/*
 * libunwind's DWARF table search, exported by libunwind-x86_64 (it is how
 * libunwind-ptrace itself finds unwind info) but not declared in its
 * public headers.  It reads the table through the address space's
 * accessors with our argument, so it works from our memory cache.
 */
extern int _Ux86_64_dwarf_search_unwind_table(unw_addr_space_t as, unw_word_t ip,
					      unw_dyn_info_t *di, unw_proc_info_t *pi,
					      int need_unwind_info, void *arg);
#define arch_unw_search_unwind_table _Ux86_64_dwarf_search_unwind_table

#endif
