/* SPDX-License-Identifier: MIT */
/*
 * aarch64: libunwind's register numbers mapped onto the registers we saved
 * with PTRACE_GETREGSET, so a stack walk needs no further ptrace calls.
 */
#ifndef BTGUARD_ARCH_UNWIND_H
#define BTGUARD_ARCH_UNWIND_H

#include <libunwind.h>

#include "arch.h"

/* libunwind's numbers of the general registers: 0 to ARCH_UNW_GPRS - 1 (x0 to x30). */
#define ARCH_UNW_GPRS 31u

/*
 * Pointer authentication, which Debian 12's libunwind (1.6) predates: a
 * pac-ret function's CFI says where x30 is signed with
 * DW_CFA_AARCH64_negate_ra_state, which that libunwind cannot parse: it
 * fails the step and guesses the caller from x30, ending the walk early
 * and silently.  So the activeness check reads that instruction as
 * DW_CFA_nop (node/cfi.c finds it), and gives libunwind the return
 * addresses already stripped: x30 here, and (ARCH_UNW_SIGNED_WORDS) every
 * word of a stack, a saved x30 or a signal frame's, through
 * arch_code_address().
 */
#define ARCH_UNW_HIDDEN_CFA_OP 0x2d
#define ARCH_UNW_SIGNED_WORDS  1

static inline int arch_unw_reg(const arch_regs_t *r, int regnum, unw_word_t *ret)
{
	/* UNW_AARCH64_X0..X30 are 0..30, in the order of user_regs_struct.regs. */
	if (regnum == UNW_AARCH64_X30)
		*ret = arch_code_address(r->gp.regs[30]);
	else if (regnum >= UNW_AARCH64_X0 && regnum < UNW_AARCH64_X30)
		*ret = r->gp.regs[regnum - UNW_AARCH64_X0];
	else if (regnum == UNW_AARCH64_SP)
		*ret = r->gp.sp;
	else if (regnum == UNW_AARCH64_PC)
		*ret = r->gp.pc;
	else if (regnum == UNW_AARCH64_PSTATE)
		*ret = r->gp.pstate;
	else
		return -UNW_EBADREG;
	return 0;
}

/*
 * libunwind's DWARF table search, exported by libunwind-aarch64 (it is how
 * libunwind-ptrace itself finds unwind info) but not declared in its
 * public headers.  It reads the table through the address space's
 * accessors with our argument, so it works from our memory cache.
 */
extern int _Uaarch64_dwarf_search_unwind_table(unw_addr_space_t as, unw_word_t ip,
					       unw_dyn_info_t *di, unw_proc_info_t *pi,
					       int need_unwind_info, void *arg);
#define arch_unw_search_unwind_table _Uaarch64_dwarf_search_unwind_table

#endif
