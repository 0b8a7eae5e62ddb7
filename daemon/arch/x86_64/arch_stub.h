/* SPDX-License-Identifier: MIT */
/*
 * x86-64: the guard stub, the landing pads it must keep and the first
 * instructions it can undo, as bytes.  Pure data and one pure function with
 * no system headers, so stub.c (and its unit test) builds for any CPU's
 * table on any host.
 */
#ifndef BTGUARD_ARCH_STUB_H
#define BTGUARD_ARCH_STUB_H

#include <stdbool.h>
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

/*
 * The guard inside one instruction (stub.c's first choice).  A uprobe or a
 * debugger's breakpoint can go on any instruction start of the file, and
 * the kernel's replay of a probed instruction resumes after the *file's*
 * instruction; its removal writes back the file's first byte.  Every
 * placement that changes the byte at an instruction start, or spans two,
 * has one start where a probe placed later replays the file's instruction
 * into our bytes, in a state they were not made for, and whose removal
 * leaves our bytes with the file's first byte (SECURITY.md).  So the
 * change lies inside one instruction of the file and keeps its first byte:
 *  - the prologue before it runs unchanged, probes on it included;
 *  - a probe on the instruction itself replays the file's instruction and
 *    resumes after it, in the file's code: that call runs unguarded but
 *    correctly (status says torn, guard writes over the probe), and the
 *    removal writes back the first byte we kept: the guard is whole again;
 *  - no instruction of the file starts inside the other bytes.
 * The instruction: the stack protector's load of the canary, "mov
 * %fs:0x28,%reg" (64 [REX] 8b modrm sib disp32, 8 or 9 bytes), which
 * gcc puts right after the prologue of every function that keeps an array
 * on its stack, backtrace() among them.  Its first byte, the %fs prefix,
 * stays and prefixes our first instruction, "xor %eax,%eax", which has no
 * memory operand: a segment prefix on it is ignored (SDM vol. 2, 2.1.1).
 * Then the prologue is undone: with a frame ("push %rbp; mov %rsp,%rbp"
 * first), each callee-saved register pushed and then written is reloaded
 * from its slot ("mov -N(%rbp),%reg") and "leave; ret" returns; without
 * one, "add $N,%rsp" and the pops in reverse, then "ret".  Debian 12's
 * glibc 2.36: "64 31 c0 48 8b 5d f8 c9 c3" at +11 (its prologue moves
 * %esi into %ebx before the load); Debian 13's 2.41: "64 31 c0 c9 c3" at
 * +9 (rbx is written only after it).
 */
static inline size_t arch_fs_load_len(const uint8_t *c, size_t len)
{
	size_t at = 1;

	if (len < 1 || (c[0] != 0x64 && c[0] != 0x65))
		return 0;
	if (len > at && (c[at] & 0xf0) == 0x40)
		at++;                                   /* REX */
	/* mov r64, seg:disp32: modrm mod 00 rm 100, SIB with no base or index */
	if (len < at + 7 || c[at] != 0x8b || (c[at + 1] & 0xc7) != 0x04 || c[at + 2] != 0x25)
		return 0;
	return at + 7;
}

#define ARCH_CALLEE_SAVED ((1u << 3) | (1u << 5) | (1u << 12) | (1u << 13) | (1u << 14) | (1u << 15))

/* One step of a prologue: push (reg >= 0) or stack adjustment (sub > 0). */
struct arch_prologue_step {
	int      reg;
	uint32_t sub;
	uint32_t depth;    /* bytes below %rbp after it, with a frame */
};

/*
 * code[0..len): the function's first bytes (all of it when whole: the
 * prologue is all this needs), at run-time address addr (no x86-64
 * instruction here depends on it); its landing pad, if any, before start.
 */
static inline size_t arch_plan_inside(const uint8_t *code, size_t len, bool whole, uint64_t addr,
				      size_t start, size_t *ret_at, uint8_t *out, size_t out_max)
{
	struct arch_prologue_step steps[16];
	size_t nsteps = 0, off = start, n = 0, insn;
	uint32_t written = 0, depth = 0;
	bool frame = false;

	(void)whole, (void)addr;

	if (len >= start + 4 && code[start] == 0x55 && code[start + 1] == 0x48 &&
	    code[start + 2] == 0x89 && code[start + 3] == 0xe5) {
		frame = true;                           /* push %rbp; mov %rsp,%rbp */
		off += 4;
	}
	for (;;) {
		const uint8_t *c = code + off;
		size_t left = len - off;

		/* A prologue is short and its frame small; anything else is not ours to undo. */
		if (off >= len || nsteps == sizeof(steps) / sizeof(steps[0]) || depth > 4096)
			return 0;
		insn = arch_fs_load_len(c, left);
		if (insn)
			break;
		if ((c[0] & 0xf8) == 0x50 || (left >= 2 && c[0] == 0x41 && (c[1] & 0xf8) == 0x50)) {
			int reg = c[0] == 0x41 ? 8 + (c[1] & 7) : c[0] & 7;

			/* push %rsp is not undone by a pop; a pushed %rax would undo our xor */
			if (reg == 4 || reg == 0)
				return 0;
			depth += 8;
			steps[nsteps++] = (struct arch_prologue_step){ reg, 0, depth };
			off += c[0] == 0x41 ? 2 : 1;
		} else if (left >= 4 && c[0] == 0x48 && c[1] == 0x83 && c[2] == 0xec && c[3] < 0x80) {
			depth += c[3];
			steps[nsteps++] = (struct arch_prologue_step){ -1, c[3], depth };
			off += 4;
		} else if (left >= 7 && c[0] == 0x48 && c[1] == 0x81 && c[2] == 0xec && c[6] < 0x80) {
			uint32_t imm = (uint32_t)c[3] | (uint32_t)c[4] << 8 | (uint32_t)c[5] << 16 |
				       (uint32_t)c[6] << 24;

			depth += imm;
			steps[nsteps++] = (struct arch_prologue_step){ -1, imm, depth };
			off += 7;
		} else {
			/* mov %reg,%reg (89 /r, REX optional): what it writes must be ours to lose */
			size_t at = (c[0] & 0xf0) == 0x40;
			unsigned dst;
			uint32_t pushed = 0;

			if (left < at + 2 || c[at] != 0x89 || (c[at + 1] & 0xc0) != 0xc0)
				return 0;
			dst = (c[at + 1] & 7) | (at && (c[0] & 1) ? 8u : 0u);
			for (size_t i = 0; i < nsteps; i++)
				if (steps[i].reg >= 0)
					pushed |= 1u << steps[i].reg;
			if (dst == 4 || (dst == 5 && frame) ||
			    ((ARCH_CALLEE_SAVED >> dst) & 1 && !((pushed >> dst) & 1)))
				return 0;
			written |= 1u << dst;
			off += at + 2;
		}
	}
	/* The kept first byte prefixes "xor %eax,%eax". */
	if (out_max < 3)
		return 0;
	out[n++] = code[off];
	out[n++] = 0x31;
	out[n++] = 0xc0;
	if (frame) {
		for (size_t i = 0; i < nsteps; i++) {
			int reg = steps[i].reg;

			/* Reloaded only if written since its push; a scratch one need not be. */
			if (reg < 0 || !((ARCH_CALLEE_SAVED & written) >> reg & 1))
				continue;
			if (steps[i].depth > 128 || n + 4 > out_max)
				return 0;
			out[n++] = reg >= 8 ? 0x4c : 0x48;            /* REX.W, REX.R for r8-r15 */
			out[n++] = 0x8b;
			out[n++] = (uint8_t)(0x45 | (reg & 7) << 3);  /* disp8(%rbp) */
			out[n++] = (uint8_t)(0x100 - steps[i].depth);
		}
		if (n + 2 > out_max)
			return 0;
		out[n++] = 0xc9;                                      /* leave */
	} else {
		for (size_t i = nsteps; i-- > 0;) {
			if (steps[i].reg < 0) {
				if (n + 7 > out_max)
					return 0;
				out[n++] = 0x48;
				if (steps[i].sub < 0x80) {
					out[n++] = 0x83;      /* add $imm8,%rsp */
					out[n++] = 0xc4;
					out[n++] = (uint8_t)steps[i].sub;
				} else {
					out[n++] = 0x81;      /* add $imm32,%rsp */
					out[n++] = 0xc4;
					for (int b = 0; b < 4; b++)
						out[n++] = (uint8_t)(steps[i].sub >> (8 * b));
				}
			} else {
				if (n + 3 > out_max)
					return 0;
				if (steps[i].reg >= 8)
					out[n++] = 0x41;
				out[n++] = (uint8_t)(0x58 | (steps[i].reg & 7));
			}
		}
		if (n + 1 > out_max)
			return 0;
	}
	out[n++] = 0xc3;                                              /* ret */
	if (n > insn)
		return 0;   /* does not fit inside the instruction */
	*ret_at = off;
	return n;
}

/* The inside plan keeps the first byte of the instruction it lies in (the %fs prefix). */
#define ARCH_INSIDE_KEEP 1u

/*
 * Bytes compared from the entry on (site.h): the guard lies in the first
 * 20 or so (glibc's canary load ends at +20 on Debian 12).
 */
#define ARCH_CTX_LEN     32u

/* The unit PTRACE_PEEKTEXT / POKETEXT move, in bytes. */
#define ARCH_WORD_LEN    8u

#endif
