/* SPDX-License-Identifier: MIT */
/*
 * x86-64: the guard stub, the landing pads it must keep and the first
 * instructions it can undo, as bytes.  Pure data and one pure function with
 * no system headers, so stub.c (and its unit test) builds for any CPU's
 * table on any host.
 */
#ifndef BTGUARD_ARCH_STUB_H
#define BTGUARD_ARCH_STUB_H

#include <stddef.h>
#include <stdint.h>

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
 * ARCH_LANDING_PADS lists every pad accepted as a first instruction, each
 * as { pad, CPU feature its stub needs (none), the stub after it }.
 */
#define ARCH_LANDING_PAD_LEN 4u
#define ARCH_LANDING_PADS    { { { 0xf3, 0x0f, 0x1e, 0xfa }, 0, ARCH_STUB_BYTES } /* endbr64 */ }

/*
 * Breakpoints at the entry.  A uprobe belongs to the file, not to the
 * process: the kernel writes its breakpoint over the first byte of the
 * function in every process that maps the file, whatever that byte is now,
 * and on a hit runs the *file's* first instruction (emulated or stepped out
 * of line) and resumes right after it.  A debugger's breakpoint is the same
 * int3.  So the stub never covers the first instruction when it can help
 * it (arch_entry_undo), and an int3 there is somebody's breakpoint over
 * bytes we did not write, not foreign bytes.
 */
#define ARCH_BREAKPOINT_LEN 1u
#define ARCH_BREAKPOINTS    { { 0xcc } }   /* int3: uprobes, gdb */

/* The longest change: an undone first instruction, then the stub. */
#define ARCH_CHANGE_MAX  8u

/*
 * First instructions the stub can follow, by undoing them: the bytes of
 * the undo in undo[], its length returned, and the instruction's length in
 * *ret_insn_len; 0 for an instruction not in this list.  Each undo leaves
 * every register the caller may rely on (rsp, rbx, rbp, r12-r15) as it
 * was at the entry; the flags are the caller's to lose anyway.
 *  - push %reg (50+r; 41 50+r for r8-r15): pop the same register, which
 *    reloads the value it still holds.  push %rsp is left out: its pop
 *    would be right, but nothing compiled starts that way.
 *  - sub $imm8,%rsp (48 83 ec ib): add the same imm8 back.
 * glibc's backtrace() begins with "push %rbp" on Debian 12, with endbr64
 * (a landing pad, above) where it is built with -fcf-protection.  Longer
 * undos (sub $imm32,%rsp) would not fit one ptrace word beside the stub.
 */
static inline size_t arch_entry_undo(const uint8_t *code, size_t len, uint8_t *undo,
				     size_t *ret_insn_len)
{
	if (len >= 1 && (code[0] & 0xf8) == 0x50 && code[0] != 0x54) {
		undo[0] = (uint8_t)(0x58 | (code[0] & 0x07));
		*ret_insn_len = 1;
		return 1;
	}
	if (len >= 2 && code[0] == 0x41 && (code[1] & 0xf8) == 0x50) {
		undo[0] = 0x41;
		undo[1] = (uint8_t)(0x58 | (code[1] & 0x07));
		*ret_insn_len = 2;
		return 2;
	}
	if (len >= 4 && code[0] == 0x48 && code[1] == 0x83 && code[2] == 0xec) {
		undo[0] = 0x48;
		undo[1] = 0x83;
		undo[2] = 0xc4;
		undo[3] = code[3];
		*ret_insn_len = 4;
		return 4;
	}
	return 0;
}

/* The unit PTRACE_PEEKTEXT / POKETEXT move, in bytes. */
#define ARCH_WORD_LEN    8u

#endif
