/* SPDX-License-Identifier: MIT */
/*
 * aarch64: the guard stub and the landing pads it must keep, as bytes
 * (A64 instructions are 32-bit little-endian words).  Pure data with no
 * system headers, so stub.c (and its unit test) builds for this table on
 * any host.
 */
#ifndef BTGUARD_ARCH_STUB_H
#define BTGUARD_ARCH_STUB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

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
 * First instructions the stub can follow, by undoing them, where the
 * guard cannot be one instruction (arch_plan_inside(), below): the undo's
 * bytes in undo[], its length returned, the instruction's length in
 * *ret_insn_len; 0 for an instruction not in this list.  Both undo to
 * "add sp, sp, #N" (0x910003ff | N << 10), which leaves every register the
 * caller may rely on as it was at the entry:
 *  - stp Xa, Xb, [sp, #-N]! (64-bit, pre-index, base sp): a store moves
 *    only sp.  gcc's usual first instruction without branch protection.
 *  - sub sp, sp, #N (unshifted immediate): glibc's backtrace() on Debian
 *    12 (2.36-9+deb12u14), "sub sp, sp, #0x50".
 * The undo and the stub take 12 bytes, two ptrace words: sites.c writes
 * both with every thread held, verifies each and undoes both on a failure.
 * This is also the placement an older btguard chose first (stub_plans()
 * still recognises it).
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
 * change): none here.  A second instruction such as "mov x29, sp" after a
 * pre-index stp overwrites x29, which "add sp, sp, #N" does not restore:
 * keeping it would need "ldp x29, x30, [sp], #N" instead.  The
 * one-instruction guard (arch_plan_inside()) leaves no such breakpoint to
 * plan around; where it cannot be proven a breakpoint inside the change
 * is written over by guard (SECURITY.md).
 */
static inline size_t arch_next_undo(const uint8_t *code, size_t len, uint32_t *saved,
				    uint8_t *undo, size_t *ret_undo_len)
{
	(void)code, (void)len, (void)saved, (void)undo, (void)ret_undo_len;
	return 0;
}

/*
 * The guard as one instruction (stub.c's first choice, as x86-64's inside
 * the canary load).  A uprobe can go on any instruction of the file; on a
 * hit the kernel steps the *file's* instruction out of line and resumes at
 * the next, and its removal writes the file's instruction back.  Every
 * instruction is a breakpoint's unit here, so a change of several
 * instructions always has one a probe placed later replays into ours in a
 * state they were not made for (the limit the stub after the first
 * instruction had).  So the guard changes exactly one instruction, after
 * the prologue, into "b" to the function's own return-0 path:
 *  - a probe on the prologue runs it and then our branch, as a call would;
 *  - a probe on the changed instruction replays the file's instruction
 *    and resumes after it, in the file's code: calls run unguarded but
 *    correctly while it stays (torn: guard writes over it), and its
 *    removal writes the file's instruction back (original: the policy's
 *    sweep guards it again);
 *  - no other instruction changes, so a probe anywhere else is harmless;
 *  - one aligned instruction changes: one write, no instruction start of
 *    the file inside it but its own.
 * Which instruction and which path, proven from the file's bytes, not
 * assumed: the prologue is run symbolically from the entry (what each
 * register holds: its value at the entry, zero, an address, what was
 * loaded from one; what each stack slot holds; where sp is) until the
 * canary is stored, and the next instruction is the one to change.  From
 * there each "mov w0, #0" of the function is tried as the branch's
 * target: the path from it is run symbolically too, over a fixed list of
 * instructions (no store, no call, no branch but the canary check's b.ne),
 * and taken only if it reaches ret with w0 = 0, sp and every callee-saved
 * register (x18-x30) as at the entry (reloaded from the slots the
 * prologue stored them in), x30 authenticated the way the entry signed it
 * (autiasp/retaa after paciasp), the canary compared with the very value
 * the prologue stored (so its b.ne to __stack_chk_fail is never taken),
 * every load from the frame or from an address the prologue itself read,
 * and the canary left in no register.  A branch of the function into the
 * prologue (which would reach our instruction in another state) rules the
 * placement out.  Anything else: 0, and the stub follows the first
 * instruction as before.
 * Debian 12's glibc 2.36: "b +0x7c" at +0x24 over "mov x1, #0" (after
 * "str x1, [sp, #40]"), to +0xa0; Debian 13's 2.41 (paciasp first): the
 * same at +0x28, to +0xa4, whose path ends "autiasp; ret".
 */
enum arch_a64_kind {
	A64_UNKNOWN,
	A64_ENTRY,        /* the register's own value at the entry */
	A64_SIGNED_LR,    /* x30 as the entry's paciasp (x 0) or pacibsp (x 1) signed it */
	A64_ZERO,
	A64_ADDR,         /* the address x (adrp, add) */
	A64_LOADED,       /* the 8 bytes at address x */
	A64_DEREF,        /* the 8 bytes at the address held by the 8 bytes at x: the canary */
};

struct arch_a64_val {
	unsigned kind;
	uint64_t x;
};

#define A64_MAX_SLOTS 16
#define A64_MAX_READS 8
#define A64_MAX_STEPS 48

struct arch_a64_state {
	struct arch_a64_val reg[31];
	int64_t sp, low;                       /* sp and its lowest, from the entry's: <= 0 */
	int64_t slot_at[A64_MAX_SLOTS];        /* 8-byte slots stored, from the entry's sp */
	struct arch_a64_val slot[A64_MAX_SLOTS];
	size_t nslots;
	struct arch_a64_val read[A64_MAX_READS];   /* what the prologue read from memory */
	size_t nreads;
	bool flags_equal;                      /* the last compare found its operands equal */
};

static inline bool arch_a64_same(struct arch_a64_val a, struct arch_a64_val b)
{
	return a.kind == b.kind && a.x == b.x;
}

static inline struct arch_a64_val arch_a64_get(const struct arch_a64_state *st, unsigned r)
{
	return r == 31 ? (struct arch_a64_val){ A64_ZERO, 0 } : st->reg[r];   /* xzr */
}

static inline void arch_a64_set(struct arch_a64_state *st, unsigned r, unsigned kind, uint64_t x)
{
	if (r != 31)
		st->reg[r] = (struct arch_a64_val){ kind, x };
}

static inline int64_t arch_a64_sext(uint64_t v, unsigned bits)
{
	return (int64_t)(v << (64 - bits)) >> (64 - bits);
}

/*
 * The 8-byte slot at sp + off inside the frame (from the entry's sp), or
 * -1.  Never below sp: with no red zone a signal handler may write there.
 */
static inline int arch_a64_slot(struct arch_a64_state *st, int64_t off, bool create)
{
	int64_t at = st->sp + off;

	if (off < 0 || at % 8 || at < st->low || at + 8 > 0)
		return -1;
	for (size_t i = 0; i < st->nslots; i++)
		if (st->slot_at[i] == at)
			return (int)i;
	if (!create || st->nslots == A64_MAX_SLOTS)
		return -1;
	st->slot_at[st->nslots] = at;
	return (int)st->nslots++;
}

static inline bool arch_a64_store(struct arch_a64_state *st, int64_t off, unsigned rt)
{
	int i = arch_a64_slot(st, off, true);

	if (i < 0)
		return false;
	st->slot[i] = arch_a64_get(st, rt);
	return true;
}

/* A load from the frame: what the slot holds, or unknown (never stored). */
static inline bool arch_a64_load(struct arch_a64_state *st, int64_t off, unsigned rt)
{
	int64_t at = st->sp + off;
	int i = arch_a64_slot(st, off, false);

	if (off < 0 || at % 8 || at < st->low || at + 8 > 0)
		return false;
	if (rt != 31)
		st->reg[rt] = i < 0 ? (struct arch_a64_val){ A64_UNKNOWN, 0 } : st->slot[i];
	return true;
}

/* A memory read through an address register: in the prologue noted, on the path only a noted one. */
static inline bool arch_a64_read(struct arch_a64_state *st, struct arch_a64_val v, bool path)
{
	for (size_t i = 0; i < st->nreads; i++)
		if (arch_a64_same(st->read[i], v))
			return true;
	if (path || st->nreads == A64_MAX_READS)
		return false;
	st->read[st->nreads++] = v;
	return true;
}

enum { A64_FAIL, A64_NEXT, A64_RET, A64_STORED_CANARY };

/*
 * One instruction at pc (run-time address; the adrp page), symbolically:
 * A64_NEXT, A64_RET (a return whose conditions the caller checks),
 * A64_STORED_CANARY (a store of the canary: the prologue ends after it),
 * A64_FAIL for anything not on the list.  path: the branch's path (loads,
 * the canary check, the epilogue), else the prologue (stores, frame).
 */
static inline int arch_a64_step(struct arch_a64_state *st, uint32_t insn, uint64_t pc, bool path)
{
	unsigned rd = insn & 31, rn = (insn >> 5) & 31, rt2 = (insn >> 10) & 31;
	struct arch_a64_val v;

	if (insn == 0xd503201fu)                                    /* nop */
		return A64_NEXT;
	if ((insn & 0xffffffe0u) == 0x52800000u || (insn & 0xffffffe0u) == 0xd2800000u) {
		arch_a64_set(st, rd, A64_ZERO, 0);                  /* mov wd/xd, #0 */
		return A64_NEXT;
	}
	if ((insn & 0x9f000000u) == 0x90000000u) {                 /* adrp xd, page */
		int64_t imm = arch_a64_sext(((insn >> 5) & 0x7ffffu) << 2 | ((insn >> 29) & 3u), 21);

		arch_a64_set(st, rd, A64_ADDR, (pc & ~(uint64_t)0xfff) + (uint64_t)(imm * 4096));
		return A64_NEXT;
	}
	if ((insn & 0xff800000u) == 0x91000000u || (insn & 0xff800000u) == 0xd1000000u) {
		/* add / sub xd, xn|sp, #imm{, lsl #12} (not addg/subg: bit 23) */
		uint64_t imm = (uint64_t)((insn >> 10) & 0xfff) << ((insn >> 22 & 1) ? 12 : 0);
		bool sub = insn >> 30 & 1;

		if (rd == 31 && rn == 31) {                         /* sp moves */
			st->sp += sub ? -(int64_t)imm : (int64_t)imm;
			if (st->sp > 0 || st->sp < -65536)
				return A64_FAIL;
			if (st->sp < st->low) {
				if (path)
					return A64_FAIL;            /* the path allocates nothing */
				st->low = st->sp;
			}
			return A64_NEXT;
		}
		if (rd == 31)
			return A64_FAIL;                            /* sp from elsewhere */
		if (rn == 31) {
			arch_a64_set(st, rd, A64_UNKNOWN, 0);       /* a frame pointer: not the entry's */
			return A64_NEXT;
		}
		v = arch_a64_get(st, rn);
		if (v.kind == A64_ADDR && !sub)
			arch_a64_set(st, rd, A64_ADDR, v.x + imm);
		else
			arch_a64_set(st, rd, A64_UNKNOWN, 0);
		return A64_NEXT;
	}
	if ((insn & 0xffe0ffe0u) == 0xaa0003e0u) {                 /* mov xd, xm */
		v = arch_a64_get(st, (insn >> 16) & 31);
		arch_a64_set(st, rd, v.kind, v.x);
		return A64_NEXT;
	}
	if ((insn & 0xffe0ffe0u) == 0x2a0003e0u) {                 /* mov wd, wm: upper half cleared */
		arch_a64_set(st, rd, A64_UNKNOWN, 0);
		return A64_NEXT;
	}
	if ((insn & 0xffc00000u) == 0xf9400000u) {                 /* ldr xt, [xn|sp, #imm] */
		uint64_t off = (uint64_t)((insn >> 10) & 0xfff) * 8;

		if (rn == 31)
			return arch_a64_load(st, (int64_t)off, rd) ? A64_NEXT : A64_FAIL;
		v = arch_a64_get(st, rn);
		if (v.kind == A64_ADDR)
			v = (struct arch_a64_val){ A64_LOADED, v.x + off };
		else if (v.kind == A64_LOADED && off == 0)
			v = (struct arch_a64_val){ A64_DEREF, v.x };
		else
			return A64_FAIL;
		if (!arch_a64_read(st, v, path))
			return A64_FAIL;
		arch_a64_set(st, rd, v.kind, v.x);
		return A64_NEXT;
	}
	if ((insn & 0xffe00c00u) == 0xf8400400u && rn == 31 && path) {  /* ldr xt, [sp], #imm */
		if (!arch_a64_load(st, 0, rd))
			return A64_FAIL;
		st->sp += arch_a64_sext((insn >> 12) & 0x1ff, 9);
		return st->sp <= 0 ? A64_NEXT : A64_FAIL;
	}
	if (((insn & 0xffc00000u) == 0xa9400000u || (insn & 0xffc00000u) == 0xa8c00000u) && rn == 31) {
		/* ldp xt, xt2, [sp, #imm] and ldp xt, xt2, [sp], #imm */
		int64_t imm = arch_a64_sext((insn >> 15) & 0x7f, 7) * 8;
		bool post = (insn & 0xffc00000u) == 0xa8c00000u;

		if (rd == rt2 || (post && !path) || !arch_a64_load(st, post ? 0 : imm, rd) ||
		    !arch_a64_load(st, (post ? 0 : imm) + 8, rt2))
			return A64_FAIL;
		if (post)
			st->sp += imm;
		return st->sp <= 0 ? A64_NEXT : A64_FAIL;
	}
	if (!path && rn == 31) {
		int64_t off = 0, pre = 0;
		unsigned n = 0;

		if ((insn & 0xffc00000u) == 0xf9000000u) {          /* str xt, [sp, #imm] */
			off = (int64_t)((insn >> 10) & 0xfff) * 8;
			n = 1;
		} else if ((insn & 0xffe00c00u) == 0xf8000c00u) {   /* str xt, [sp, #imm]! */
			pre = arch_a64_sext((insn >> 12) & 0x1ff, 9);
			n = 1;
		} else if ((insn & 0xffc00000u) == 0xa9000000u) {   /* stp xt, xt2, [sp, #imm] */
			off = arch_a64_sext((insn >> 15) & 0x7f, 7) * 8;
			n = 2;
		} else if ((insn & 0xffc00000u) == 0xa9800000u) {   /* stp xt, xt2, [sp, #imm]! */
			pre = arch_a64_sext((insn >> 15) & 0x7f, 7) * 8;
			n = 2;
		}
		if (n) {
			bool canary = arch_a64_get(st, rd).kind == A64_DEREF ||
				      (n == 2 && arch_a64_get(st, rt2).kind == A64_DEREF);

			if (pre > 0)
				return A64_FAIL;
			st->sp += pre;
			if (st->sp < st->low)
				st->low = st->sp;
			if (!arch_a64_store(st, off, rd) || (n == 2 && !arch_a64_store(st, off + 8, rt2)))
				return A64_FAIL;
			return canary ? A64_STORED_CANARY : A64_NEXT;
		}
		return A64_FAIL;
	}
	if (!path)
		return A64_FAIL;
	if ((insn & 0xffe0fc00u) == 0xeb000000u) {                 /* subs/cmp xd, xn, xm */
		struct arch_a64_val m = arch_a64_get(st, (insn >> 16) & 31);

		v = arch_a64_get(st, rn);
		st->flags_equal = v.kind == A64_DEREF && arch_a64_same(v, m);
		arch_a64_set(st, rd, st->flags_equal ? A64_ZERO : A64_UNKNOWN, 0);
		return A64_NEXT;
	}
	if ((insn & 0xff00001fu) == 0x54000001u)                    /* b.ne: taken only on a mismatch */
		return st->flags_equal ? A64_NEXT : A64_FAIL;
	if (insn == 0xd50323bfu || insn == 0xd50323ffu) {           /* autiasp, autibsp */
		uint64_t key = insn == 0xd50323ffu;

		if (st->sp != 0 || !arch_a64_same(st->reg[30], (struct arch_a64_val){ A64_SIGNED_LR, key }))
			return A64_FAIL;
		st->reg[30] = (struct arch_a64_val){ A64_ENTRY, 30 };
		return A64_NEXT;
	}
	if (insn == 0xd65f03c0u || insn == 0xd65f0bffu || insn == 0xd65f0fffu) {   /* ret, retaa, retab */
		struct arch_a64_val lr = { A64_ENTRY, 30 };

		if (insn != 0xd65f03c0u)
			lr = (struct arch_a64_val){ A64_SIGNED_LR, insn == 0xd65f0fffu };
		if (!arch_a64_same(st->reg[30], lr))
			return A64_FAIL;
		st->reg[30] = (struct arch_a64_val){ A64_ENTRY, 30 };
		return A64_RET;
	}
	return A64_FAIL;
}

/* Whether a return here gives the caller 0 and everything it may rely on as it left it. */
static inline bool arch_a64_returns_zero(const struct arch_a64_state *st)
{
	if (st->sp != 0 || st->reg[0].kind != A64_ZERO)
		return false;
	for (unsigned r = 0; r < 31; r++) {
		if (st->reg[r].kind == A64_DEREF)
			return false;                               /* the canary left behind */
		if (r >= 18 && !arch_a64_same(st->reg[r], (struct arch_a64_val){ A64_ENTRY, r }))
			return false;
	}
	return true;
}

/* Whether a direct branch at code[at] lands in [lo, hi]. */
static inline bool arch_a64_branches_into(uint32_t insn, size_t at, size_t lo, size_t hi)
{
	int64_t d;

	if ((insn & 0x7c000000u) == 0x14000000u)                   /* b, bl */
		d = arch_a64_sext(insn & 0x3ffffff, 26);
	else if ((insn & 0xff000010u) == 0x54000000u ||             /* b.cond */
		 (insn & 0x7e000000u) == 0x34000000u)               /* cbz, cbnz */
		d = arch_a64_sext((insn >> 5) & 0x7ffff, 19);
	else if ((insn & 0x7e000000u) == 0x36000000u)               /* tbz, tbnz */
		d = arch_a64_sext((insn >> 5) & 0x3fff, 14);
	else
		return false;
	d = (int64_t)at + d * 4;
	return d >= (int64_t)lo && d <= (int64_t)hi;
}

/* 1: code begins with paciasp, 2: pacibsp, 0: neither. */
static inline unsigned arch_a64_pac_pad(const uint8_t *code, size_t start)
{
	if (start < 4)
		return 0;
	if (arch_insn_at(code) == 0xd503233fu)
		return 1;
	return arch_insn_at(code) == 0xd503237fu ? 2 : 0;
}

/*
 * code[0..len): the function's whole file bytes (whole false: only its
 * first bytes, too few to prove a path: 0), the function at run-time
 * address addr (adrp works in 4 KiB pages of it), its landing pad, if
 * any, before start.  The change: *ret_at, the branch in out[0..4).
 */
static inline size_t arch_plan_inside(const uint8_t *code, size_t len, bool whole, uint64_t addr,
				      size_t start, size_t *ret_at, uint8_t *out, size_t out_max)
{
	struct arch_a64_state entry, st;
	unsigned pac = arch_a64_pac_pad(code, start);
	size_t at = start, target;
	int r = A64_NEXT;

	if (!whole || out_max < 4 || len % 4 || len > (size_t)1 << 20)
		return 0;
	memset(&entry, 0, sizeof(entry));
	for (unsigned i = 0; i < 31; i++)
		entry.reg[i] = (struct arch_a64_val){ A64_ENTRY, i };
	if (pac)
		entry.reg[30] = (struct arch_a64_val){ A64_SIGNED_LR, pac - 1 };
	for (unsigned n = 0; r != A64_STORED_CANARY; n++, at += 4) {
		if (at + 4 > len || n == A64_MAX_STEPS)
			return 0;
		r = arch_a64_step(&entry, arch_insn_at(code + at), addr + at, false);
		if (r == A64_FAIL)
			return 0;
	}
	/* at: the instruction after the canary's store, the one to change. */
	if (at + 4 > len)
		return 0;
	for (size_t b = 0; b + 4 <= len; b += 4)
		if (arch_a64_branches_into(arch_insn_at(code + b), b, 0, at))
			return 0;
	for (target = at + 4; target + 4 <= len; target += 4) {
		size_t pc = target;

		if (arch_insn_at(code + target) != 0x52800000u)   /* mov w0, #0 */
			continue;
		st = entry;
		st.flags_equal = false;
		for (unsigned n = 0; pc + 4 <= len && n < A64_MAX_STEPS; n++, pc += 4) {
			r = arch_a64_step(&st, arch_insn_at(code + pc), addr + pc, true);
			if (r != A64_NEXT)
				break;
		}
		if (r == A64_RET && arch_a64_returns_zero(&st))
			break;
	}
	if (target + 4 > len)
		return 0;
	{
		uint32_t b = 0x14000000u | (uint32_t)((target - at) / 4);

		out[0] = (uint8_t)b;
		out[1] = (uint8_t)(b >> 8);
		out[2] = (uint8_t)(b >> 16);
		out[3] = (uint8_t)(b >> 24);
	}
	*ret_at = at;
	return 4;
}

/* The inside plan keeps no byte of the instruction it changes: a breakpoint's unit is all of it. */
#define ARCH_INSIDE_KEEP 0u

/*
 * Bytes compared from the entry on (site.h): the one-instruction guard
 * follows the canary's store, +0x24 on Debian 12's glibc, +0x28 after
 * Debian 13's paciasp, and the ptrace word that carries it must fit too;
 * 64 leaves room for a longer prologue.
 */
#define ARCH_CTX_LEN     64u

/* The unit PTRACE_PEEKTEXT / POKETEXT move, in bytes. */
#define ARCH_WORD_LEN    8u

#endif
