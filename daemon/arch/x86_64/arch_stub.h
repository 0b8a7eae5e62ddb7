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

/*
 * The longest change: the undo of the instructions kept, then the stub.
 * One undone first instruction and the stub fit one ptrace word; a change
 * that keeps more (arch_next_undo) may take two, written with one pwrite
 * inside a page as on aarch64 (sites.c).
 */
#define ARCH_CHANGE_MAX  16u

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

/*
 * The instructions of a prologue the stub can follow when a breakpoint
 * sits inside the bytes the first plan changes (stub.c keeps them all,
 * undoing them last first): the instruction at code, its undo in undo[]
 * (*ret_undo_len bytes, maybe none), its length returned, 0 for one not in
 * this list.  *saved holds the registers the instructions kept so far
 * pushed (bit r for register r), whose pop restores them.
 *  - push %reg and sub $imm8,%rsp, as arch_entry_undo();
 *  - mov %reg,%reg (89 /r, 48 89 /r, register operands only): no undo, if
 *    the register it writes is one the caller does not rely on (rax, rcx,
 *    rdx, rsi, rdi: scratch, and the stub sets eax anyway) or one pushed
 *    before, which its pop restores; never rsp.  Debian 12's "mov
 *    %rsp,%rbp" after "push %rbp" and "mov %esi,%ebx" after "push %rbx".
 */
#define ARCH_SCRATCH_REGS ((1u << 0) | (1u << 1) | (1u << 2) | (1u << 6) | (1u << 7))

static inline size_t arch_next_undo(const uint8_t *code, size_t len, uint32_t *saved,
				    uint8_t *undo, size_t *ret_undo_len)
{
	size_t insn_len = 0, undo_len = arch_entry_undo(code, len, undo, &insn_len);
	size_t at = len >= 1 && code[0] == 0x48;   /* REX.W: the 64-bit mov */
	unsigned dst;

	if (undo_len) {
		/* A pop (58+r; 41 58+r) restores what the push saved; add $imm8,%rsp is 4 bytes. */
		if (undo_len <= 2)
			*saved |= 1u << ((undo[undo_len - 1] & 7) | (undo_len == 2 ? 8 : 0));
		*ret_undo_len = undo_len;
		return insn_len;
	}
	if (len < at + 2 || code[at] != 0x89 || (code[at + 1] & 0xc0) != 0xc0)
		return 0;
	dst = code[at + 1] & 7;
	if (dst == 4 || !(((ARCH_SCRATCH_REGS | *saved) >> dst) & 1))
		return 0;
	*ret_undo_len = 0;
	return at + 2;
}

/* The unit PTRACE_PEEKTEXT / POKETEXT move, in bytes. */
#define ARCH_WORD_LEN    8u

#endif
