/* SPDX-License-Identifier: MIT */
/*
 * The call frame information of .eh_frame, as GNU tools emit it: which FDE
 * .eh_frame_hdr's table gives for an address, and where in that FDE's and
 * its CIE's instruction programs an instruction of one opcode lies.
 *
 * The activeness check needs this because Debian 12's libunwind (1.6)
 * fails a step through any function compiled with pac-ret: it does not
 * know DW_CFA_AARCH64_negate_ra_state, and its fallback then guesses the
 * caller from x30 and ends the walk early, silently.  The check reads
 * that instruction as DW_CFA_nop instead (arch_unwind.h says which
 * opcode); finding it exactly, never an operand byte of the same value,
 * takes the decoding below.
 *
 * Every record is read through the caller's function, bounded, and every
 * length checked before use: a record it does not understand is an error
 * (-EINVAL), never a guess.
 */
#ifndef BTGUARD_CFI_H
#define BTGUARD_CFI_H

#include <stddef.h>
#include <stdint.h>

/* A CIE's or an FDE's record is read whole; a longer one is refused. */
#define CFI_RECORD_MAX 4096u

/* Reads len bytes at addr of the target: 0, or a negative errno. */
typedef int cfi_read_fn(void *ctx, uint64_t addr, void *buf, size_t len);

/*
 * The address of the FDE that .eh_frame_hdr's search table (the version 1
 * layout GNU ld writes: pairs of datarel sdata4, sorted) gives for ip:
 * the last entry whose start is not above ip.  table is the first pair,
 * count the pairs, hdr the header's own address (what datarel counts
 * from).  -ENOENT when ip is below every entry.
 */
int cfi_fde_for(cfi_read_fn *read, void *ctx, uint64_t hdr, uint64_t table, uint64_t count,
		uint64_t ip, uint64_t *ret_fde);

/*
 * Where the instructions of opcode op (one of the operand-less ones of
 * DWARF's extended range, 0x00-0x3f) lie in the FDE at fde and its CIE:
 * up to max addresses in out, their number in *ret_n.  -E2BIG when there
 * are more than max; -EINVAL for a record it cannot decode.
 */
int cfi_find_op(cfi_read_fn *read, void *ctx, uint64_t fde, uint8_t op, uint64_t *out,
		size_t max, size_t *ret_n);

/*
 * The same over one instruction program in memory, prog[0, len): the
 * offsets of op's instructions.  fde_enc is the DW_EH_PE_* encoding of
 * the FDE's addresses (DW_CFA_set_loc's operand).  Pure: the unit tests
 * and the fuzzer call it directly.
 */
int cfi_program_find_op(const uint8_t *prog, size_t len, uint8_t fde_enc, uint8_t op,
			size_t *out, size_t max, size_t *ret_n);

#endif
