/* SPDX-License-Identifier: MIT */
/*
 * aarch64: the guard stub and the landing pads it must keep, as bytes
 * (A64 instructions are 32-bit little-endian words).  Pure data with no
 * system headers, so stub.c (and its unit test) builds for this table on
 * any host.
 */
#ifndef BTGUARD_ARCH_STUB_H
#define BTGUARD_ARCH_STUB_H

#include <stddef.h>
#include <stdint.h>

/*
 * The guard: "mov w0, #0; ret" (0x52800000, 0xd65f03c0).  backtrace()
 * returns int in w0; zero frames is a valid answer.  ret branches to x30,
 * which the caller's bl set, so the stub needs no stack and no frame.
 *
 * The two instructions travel in one ptrace word that starts at the stub,
 * so a target sees both or neither.  When the stub starts at an address
 * that is 4 mod 8 (an entry 8-aligned with a landing pad before the stub,
 * or an entry 4 mod 8 without one), that word is not 8-aligned.  We accept
 * this rather than split the stub over two aligned words, which would let
 * a failed second write leave "mov w0, #0" followed by the original code:
 *  - PTRACE_POKETEXT takes any address on arm64 (the kernel copies the
 *    bytes into the page and does the I-cache maintenance itself);
 *  - every thread is stopped while we write, so no thread can fetch a
 *    half-written pair (ARM ARM "concurrent modification and execution"
 *    only concerns running threads);
 *  - the word lies inside the one executable mapping that holds the
 *    function (sites.c bounds it by the segment), so even across a page
 *    boundary both pages belong to the same mapping, and the write is
 *    verified and undone if it does not read back (patch.c).
 * Moving the word to entry-4 to align it would carry only "mov w0, #0",
 * with "ret" in the next word: that is the split we avoid.
 *
 * After an undone first instruction (arch_entry_undo, below) the change is
 * "add sp, sp, #N; mov w0, #0; ret", 12 bytes: more than a word.  It is
 * written with one pwrite to /proc/TID/mem instead, which lands whole
 * within a page (ptrace_poke_bytes() says why); one that would cross a
 * page keeps the stub at the entry, in one word, instead.
 */
#define ARCH_PLAIN_STUB  { 0x00, 0x00, 0x80, 0x52, 0xc0, 0x03, 0x5f, 0xd6 }
#define ARCH_STUB_BYTES  ARCH_PLAIN_STUB
#define ARCH_STUB_LEN    8u

/*
 * Landing pads kept as the first instruction, the stub right after.  With
 * BTI (-mbranch-protection=bti or standard) a function reached by an
 * indirect branch, as every PLT call (br x16/x17) is, must begin with a
 * compatible landing pad or the caller takes SIGILL (tried: overwriting the
 * pad kills a target whose library is mapped PROT_BTI); so the pad stays.
 *  - bti c (and the other BTI forms): a pure landing pad, the plain stub.
 *  - paciasp / pacibsp (pac-ret; also implicit BTI c landing pads): the
 *    kept pad *runs* and signs x30 in place, inserting a PAC into its top
 *    bits.  A plain "ret" would then branch to a non-canonical address and
 *    fault (tried under qemu -cpu max: the target dies), so after these
 *    pads the stub returns with "retaa" / "retab", which authenticates x30
 *    against the same SP (unchanged: the stub touches neither SP nor x30)
 *    and strips the PAC.  Nothing else is
 *    needed for PAC: the stub never stores, reloads or re-signs x30.
 *    retaa/retab exist only with FEAT_PAuth (HWCAP_PACA); without it
 *    paciasp is a NOP hint and the plain stub is right, so these entries
 *    name the CPU feature their stub needs (arch_cpu_features()).  With
 *    the key disabled by prctl, paciasp and retaa both pass x30 through.
 * Each entry: { pad, feature its stub needs, stub with that feature }.
 */
#define ARCH_FEATURE_PAUTH 1u

#define ARCH_LANDING_PAD_LEN 4u
#define ARCH_LANDING_PADS { \
	{ { 0x5f, 0x24, 0x03, 0xd5 }, 0, ARCH_PLAIN_STUB },       /* bti c */   \
	{ { 0x1f, 0x24, 0x03, 0xd5 }, 0, ARCH_PLAIN_STUB },       /* bti */     \
	{ { 0x9f, 0x24, 0x03, 0xd5 }, 0, ARCH_PLAIN_STUB },       /* bti j */   \
	{ { 0xdf, 0x24, 0x03, 0xd5 }, 0, ARCH_PLAIN_STUB },       /* bti jc */  \
	{ { 0x3f, 0x23, 0x03, 0xd5 }, ARCH_FEATURE_PAUTH,                       \
	  { 0x00, 0x00, 0x80, 0x52, 0xff, 0x0b, 0x5f, 0xd6 } },   /* paciasp: mov w0, #0; retaa */ \
	{ { 0x7f, 0x23, 0x03, 0xd5 }, ARCH_FEATURE_PAUTH,                       \
	  { 0x00, 0x00, 0x80, 0x52, 0xff, 0x0f, 0x5f, 0xd6 } },   /* pacibsp: mov w0, #0; retab */ \
}

/*
 * Breakpoints at the entry.  A uprobe belongs to the file, not to the
 * process: the kernel writes its BRK over the first instruction of the
 * function in every process that maps the file, whatever is there now,
 * and on a hit steps the *file's* first instruction out of line and
 * resumes right after it.  So the stub never covers the first instruction
 * when it can help it (arch_entry_undo), and a BRK there is somebody's
 * breakpoint over bytes we did not write, not foreign bytes.
 */
#define ARCH_BREAKPOINT_LEN 4u
#define ARCH_BREAKPOINTS { \
	{ 0xa0, 0x00, 0x20, 0xd4 },   /* brk #0x5: the kernel's uprobes */ \
	{ 0x00, 0x00, 0x20, 0xd4 },   /* brk #0: gdb */                    \
}

/* The longest change: an undone first instruction, then the stub. */
#define ARCH_CHANGE_MAX  12u

static inline uint32_t arch_insn_at(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

/*
 * First instructions the stub can follow, by undoing them: the undo's
 * bytes in undo[], its length returned, the instruction's length in
 * *ret_insn_len; 0 for an instruction not in this list.  Both undo to
 * "add sp, sp, #N" (0x910003ff | N << 10), which leaves every register the
 * caller may rely on as it was at the entry:
 *  - stp Xa, Xb, [sp, #-N]! (64-bit, pre-index, base sp): a store moves
 *    only sp.  This is how glibc's backtrace() begins where it is built
 *    without branch protection (Debian 12's).
 *  - sub sp, sp, #N (unshifted immediate).
 * The undo and the stub take 12 bytes, two ptrace words: sites.c writes
 * both with every thread held, verifies each and undoes both on a failure.
 */
static inline size_t arch_entry_undo(const uint8_t *code, size_t len, uint8_t *undo,
				     size_t *ret_insn_len)
{
	uint32_t insn, n = 0, add;

	if (len < 4)
		return 0;
	insn = arch_insn_at(code);
	if ((insn & 0xffc003e0u) == 0xa98003e0u) {          /* stp Xa, Xb, [sp, #imm]! */
		int32_t imm7 = (int32_t)((insn >> 15) & 0x7fu);

		if (imm7 & 0x40)
			imm7 -= 0x80;
		if (imm7 < 0)
			n = (uint32_t)(-imm7) * 8u;
	} else if ((insn & 0xffc003ffu) == 0xd10003ffu) {   /* sub sp, sp, #imm12 */
		n = (insn >> 10) & 0xfffu;
	}
	if (n == 0)
		return 0;
	add = 0x910003ffu | n << 10;
	undo[0] = (uint8_t)add;
	undo[1] = (uint8_t)(add >> 8);
	undo[2] = (uint8_t)(add >> 16);
	undo[3] = (uint8_t)(add >> 24);
	*ret_insn_len = 4;
	return 4;
}

/*
 * Later instructions the stub could follow (x86-64's arch_next_undo keeps
 * more of the prologue when a breakpoint sits inside the first plan's
 * change): none here yet.  Debian 12's second instruction, "mov x29, sp",
 * overwrites x29, which "add sp, sp, #N" does not restore: keeping it
 * needs the kept stp undone by "ldp x29, x30, [sp], #N" instead.  Until
 * then a breakpoint inside the change is written over by guard
 * (SECURITY.md).
 */
static inline size_t arch_next_undo(const uint8_t *code, size_t len, uint32_t *saved,
				    uint8_t *undo, size_t *ret_undo_len)
{
	(void)code, (void)len, (void)saved, (void)undo, (void)ret_undo_len;
	return 0;
}

/*
 * The guard inside one instruction, as x86-64 places it: not on aarch64.
 * Every instruction here is a breakpoint's unit: a uprobe's removal writes
 * back the file's whole instruction, so no change can keep part of one,
 * and a one-instruction guard (a branch to a stub elsewhere) needs room
 * outside the function.  Until then the stub follows the first
 * instruction, and a probe placed later inside the change is the limit
 * SECURITY.md states.
 */
static inline size_t arch_plan_inside(const uint8_t *code, size_t len, size_t start,
				      size_t *ret_at, uint8_t *out, size_t out_max)
{
	(void)code, (void)len, (void)start, (void)ret_at, (void)out, (void)out_max;
	return 0;
}

/* The unit PTRACE_PEEKTEXT / POKETEXT move, in bytes. */
#define ARCH_WORD_LEN    8u

#endif
