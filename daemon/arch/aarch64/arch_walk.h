/* SPDX-License-Identifier: MIT */
/*
 * aarch64: where glibc's backtrace() hands its per-frame helper to the
 * unwinder, decoded from the function's own instructions, for the segment
 * walk (engine/walk.c).  glibc 2.36 (Debian 12) and 2.41 (Debian 13, which
 * adds paciasp and autiasp around it) build __backtrace() the same way:
 *
 *   f90007e0   str  x0, [sp, #8]          arg.array = array, as the caller gave it
 *   ...        bl   __libc_unwind_link_get
 *   12800001   mov  w1, #-1
 *   29044fe1   stp  w1, w19, [sp, #32]    arg.cnt = -1 (and arg.size)
 *   ...
 *   90000003   adrp x3, <the helper's page>
 *   ...
 *   91164060   add  x0, x3, #0x590        x0 = backtrace_helper
 *   ...
 *   910023e1   add  x1, sp, #8            x1 = &arg
 *   ...
 *   d63f0040   blr  x2                    the demangled _Unwind_Backtrace
 *
 * The guard replaces that add, one aligned instruction, with `adr x0,
 * walk_frame`: the unwinder then calls our code, and the adrp's register
 * keeps the value it had (nothing after reads it before writing it again,
 * and the adr writes x0 alone).  ADR reaches +-1 MiB: beyond,
 * arch_walk_reaches() says no and walk.c falls back to the empty stub.
 * The walk's code starts with paciasp (-mbranch-protection=standard), a
 * landing pad for the unwinder's blr in a BTI page, as Debian 13's libc is.
 *
 * Every fact is proved from the bytes, not matched by pattern: the code up
 * to the blr is one straight path (no branch lands inside it, no indirect
 * jump anywhere), so the last instruction before the blr that can write
 * x0 (x1, the adrp's register) is the one that gave it its value, and the
 * stores and the argument's address count from one stack pointer, which
 * nothing in between moves, and no other store between them touches the
 * two fields.  A call in between keeps its caller's frame (AAPCS64).
 * Anything else is not derived (-ENOENT), and the guard falls back to the
 * empty stub.  A breakpoint on the add (a uprobe) makes its bytes
 * neither the file's nor ours: the walk is then foreign, never written.
 */
#ifndef BTGUARD_ARCH_WALK_H
#define BTGUARD_ARCH_WALK_H

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define ARCH_WALK           1     /* this CPU has a derivation */
#define ARCH_WALK_CALL_LEN  4u    /* bytes the guard changes in backtrace(): one instruction */
#define ARCH_WALK_ALIGN     16u   /* where the walk's code starts */

/* ADR's reach: a signed 21-bit byte offset from its own address. */
#define ARCH_WALK_ADR_REACH (1 << 20)
/* The helper's argument's fields lie this far into it at most (walk_table.h). */
#define ARCH_WALK_ARG_MAX   64
/* A longer function is not the glibc one this knows (212 and 220 bytes). */
#define ARCH_WALK_INSNS_MAX 1024u
#define ARCH_WALK_SP        31u   /* register 31: sp as a base or an add's, zr elsewhere */

struct arch_walk_facts {
	uint64_t call_off;       /* the changed instruction, from the function's entry */
	uint64_t return_off;     /* where the call to the unwinder returns, from the entry */
	uint64_t helper_off;     /* glibc's helper, from the function's entry (may be negative) */
	uint64_t array_offset;   /* fields of the helper's argument (walk_table.h) */
	uint64_t count_offset;
};

static inline uint32_t arch_walk_insn(const uint8_t *code, size_t k)
{
	const uint8_t *p = code + 4 * k;

	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}

static inline int64_t arch_walk_sext(uint32_t v, unsigned bits)
{
	return (int64_t)((uint64_t)v << (64 - bits)) >> (64 - bits);
}

static inline unsigned arch_walk_rd(uint32_t i) { return i & 31u; }
static inline unsigned arch_walk_rn(uint32_t i) { return (i >> 5) & 31u; }

/* Branches, exception generation and system instructions; system alone is 0xd5... */
static inline bool arch_walk_is_system(uint32_t i) { return (i & 0xffc00000u) == 0xd5000000u; }
static inline bool arch_walk_is_branch(uint32_t i)
{
	return (i & 0x1c000000u) == 0x14000000u && !arch_walk_is_system(i);
}

static inline bool arch_walk_is_blr(uint32_t i) { return (i & 0xfffffc1fu) == 0xd63f0000u; }
static inline bool arch_walk_is_ret(uint32_t i)
{
	/* ret xN, retaa, retab */
	return (i & 0xfffffc1fu) == 0xd65f0000u || i == 0xd65f0bffu || i == 0xd65f0fffu;
}

/*
 * The target of a direct branch at instruction k, in instructions from the
 * entry: b, bl, b.cond, cbz/cbnz, tbz/tbnz.  False for anything else.
 */
static inline bool arch_walk_branch_target(uint32_t i, size_t k, int64_t *ret)
{
	int64_t d;

	if ((i & 0x7c000000u) == 0x14000000u)
		d = arch_walk_sext(i & 0x3ffffffu, 26);
	else if ((i & 0xff000000u) == 0x54000000u || (i & 0x7e000000u) == 0x34000000u)
		d = arch_walk_sext((i >> 5) & 0x7ffffu, 19);
	else if ((i & 0x7e000000u) == 0x36000000u)
		d = arch_walk_sext((i >> 5) & 0x3fffu, 14);
	else
		return false;
	*ret = (int64_t)k + d;
	return true;
}

/* Loads and stores: op0 x1x0. */
static inline bool arch_walk_is_ldst(uint32_t i) { return (i & 0x0a000000u) == 0x08000000u; }

/* A load or store that does not write its base back (every other one may). */
static inline bool arch_walk_ldst_keeps_base(uint32_t i)
{
	return (i & 0x3b000000u) == 0x39000000u ||    /* unsigned offset */
	       (i & 0x3b200c00u) == 0x38000000u ||    /* unscaled (ldur/stur) */
	       (i & 0x3b200c00u) == 0x38000800u ||    /* unprivileged (ldtr/sttr) */
	       (i & 0x3b200c00u) == 0x38200800u ||    /* register offset */
	       (i & 0x3b200c00u) == 0x38200000u ||    /* atomic memory operations */
	       (i & 0x3b800000u) == 0x29000000u ||    /* pair, signed offset */
	       (i & 0x3b800000u) == 0x28000000u ||    /* pair, no allocate */
	       (i & 0x3b000000u) == 0x18000000u ||    /* literal: no base at all */
	       (i & 0x3f000000u) == 0x08000000u;      /* exclusive, acquire/release, cas */
}

enum arch_walk_ldst { ARCH_WALK_LOAD, ARCH_WALK_STORE, ARCH_WALK_OTHER };

/*
 * A load, a store of [*off, *off + *len) from base register *base, or
 * anything else a store could hide in (then the caller refuses).
 */
static inline enum arch_walk_ldst arch_walk_access(uint32_t i, unsigned *base, int64_t *off,
						   int64_t *len)
{
	unsigned size = i >> 30, opc = (i >> 22) & 3u;
	bool simd = (i >> 26) & 1;
	bool load = simd ? (opc & 1u) : opc != 0;

	*base = arch_walk_rn(i);
	if ((i & 0x3b000000u) == 0x39000000u || (i & 0x3b200c00u) == 0x38000000u) {
		*len = simd && (opc & 2u) ? 16 : 1 << size;
		*off = (i & 0x3b000000u) == 0x39000000u ? (int64_t)((i >> 10) & 0xfffu) * *len :
		       arch_walk_sext((i >> 12) & 0x1ffu, 9);
		return load ? ARCH_WALK_LOAD : ARCH_WALK_STORE;
	}
	if ((i & 0x3a000000u) == 0x28000000u) {         /* pairs, every addressing */
		int64_t elem = simd ? 4 << size : (size & 2u) ? 8 : 4;

		if ((i >> 22) & 1u)
			return ARCH_WALK_LOAD;
		if ((i & 0x3b800000u) != 0x29000000u && (i & 0x3b800000u) != 0x28000000u)
			return ARCH_WALK_OTHER;     /* pre- or post-indexed */
		*off = arch_walk_sext((i >> 15) & 0x7fu, 7) * elem;
		*len = 2 * elem;
		return ARCH_WALK_STORE;
	}
	if ((i & 0x3b000000u) == 0x18000000u ||
	    (((i & 0x3b200c00u) == 0x38200800u || (i & 0x3b200400u) == 0x38000400u) && load))
		return ARCH_WALK_LOAD;          /* literal; register offset; pre/post-indexed */
	return ARCH_WALK_OTHER;
}

/*
 * b, b.cond, cbz and tbz write no register, nor does ret; bl and every
 * other instruction of their group (blr, svc, brk...) may write any but sp,
 * which a call keeps (AAPCS64) and the kernel restores.
 */
static inline bool arch_walk_branch_writes(uint32_t i)
{
	int64_t t;

	if (arch_walk_is_ret(i))
		return false;
	if ((i & 0xfc000000u) == 0x94000000u)
		return true;
	return !arch_walk_branch_target(i, 0, &t);
}

/*
 * Whether i may write general register r (0..30, or 31: sp), read
 * conservatively: a false "yes" refuses a derivation, never a false "no".
 * Branches count by arch_walk_branch_writes(): the path is proved
 * straight (arch_walk_the_call()).
 */
static inline bool arch_walk_writes(uint32_t i, unsigned r)
{
	bool s = (i >> 29) & 1;   /* flag-setting: their register 31 is zr, not sp */
	unsigned base;
	int64_t off, len;

	if (arch_walk_is_branch(i))
		return r != ARCH_WALK_SP && arch_walk_branch_writes(i);
	if (arch_walk_is_system(i)) {
		if ((i & 0xfffff01fu) == 0xd503201fu)     /* hints: pointer authentication's */
			return r == 16 || r == 17 || r == 30;
		return r != ARCH_WALK_SP && arch_walk_rd(i) == r;   /* mrs, sysl */
	}
	if (arch_walk_is_ldst(i)) {
		if (arch_walk_rn(i) == r && !arch_walk_ldst_keeps_base(i))
			return true;
		if (r == ARCH_WALK_SP || arch_walk_access(i, &base, &off, &len) == ARCH_WALK_STORE)
			return false;
		return arch_walk_rd(i) == r ||
		       ((i & 0x38000000u) == 0x28000000u && ((i >> 10) & 31u) == r) ||
		       (((i & 0x3f000000u) == 0x08000000u || (i & 0x3b200c00u) == 0x38200000u) &&
			((i >> 16) & 31u) == r);       /* a pair's second; an exclusive's status, a cas's */
	}
	if (r != ARCH_WALK_SP)
		return arch_walk_rd(i) == r;
	return arch_walk_rd(i) == ARCH_WALK_SP &&
	       (((i & 0x1f000000u) == 0x11000000u && !s) ||      /* add/sub (immediate) */
		((i & 0x1f800000u) == 0x12000000u && ((i >> 29) & 3u) != 3u) ||  /* and/orr/eor */
		((i & 0x1f200000u) == 0x0b200000u && !s));        /* add/sub (extended) */
}

/* The nearest instruction before k that may write r (-1: none). */
static inline long arch_walk_last_write(const uint8_t *code, size_t k, unsigned r)
{
	while (k-- > 0)
		if (arch_walk_writes(arch_walk_insn(code, k), r))
			return (long)k;
	return -1;
}

static inline bool arch_walk_overlap(int64_t lo, int64_t len, int64_t at, int64_t n)
{
	return lo < at + n && at < lo + len;
}

/* The one blr, after no indirect jump anywhere and no branch landing in (0, blr]. */
static inline long arch_walk_the_call(const uint8_t *code, size_t n)
{
	long blr = -1;

	for (size_t k = 0; k < n; k++) {
		uint32_t i = arch_walk_insn(code, k);

		if (arch_walk_is_blr(i)) {
			if (blr >= 0)
				return -1;
			blr = (long)k;
		} else if ((i & 0xfe000000u) == 0xd6000000u && !arch_walk_is_ret(i)) {
			return -1;     /* br, braa, blraa, eret...: where they go is unknown */
		}
	}
	for (size_t k = 0; blr >= 0 && k < n; k++) {
		int64_t t;

		if (arch_walk_branch_target(arch_walk_insn(code, k), k, &t) && t > 0 && t <= blr)
			return -1;
	}
	return blr;
}

/*
 * The store of the register the mov #-1 at k set (w or x) to [sp + *ret],
 * a 32-bit str or stp: its instruction, or -1 (-2: more than one).
 */
static inline long arch_walk_minus1_store(const uint8_t *code, size_t k, size_t end, int64_t *ret)
{
	unsigned r = arch_walk_rd(arch_walk_insn(code, k));
	long at = -1;

	for (size_t j = k + 1; j < end; j++) {
		uint32_t i = arch_walk_insn(code, j);
		int64_t off = -1, imm7 = arch_walk_sext((i >> 15) & 0x7fu, 7) * 4;

		if ((i & 0xffc003e0u) == 0xb90003e0u && arch_walk_rd(i) == r)
			off = (int64_t)((i >> 10) & 0xfffu) * 4;        /* str wR, [sp, #imm] */
		else if ((i & 0xffc003e0u) == 0x290003e0u && arch_walk_rd(i) == r)
			off = imm7;                                      /* stp wR, wX, [sp, #imm] */
		else if ((i & 0xffc003e0u) == 0x290003e0u && ((i >> 10) & 31u) == r)
			off = imm7 + 4;                                  /* stp wX, wR, [sp, #imm] */
		if (off >= 0) {
			if (at >= 0)
				return -2;
			at = (long)j;
			*ret = off;
		}
		if (arch_walk_writes(i, r))
			break;
	}
	return at;
}

/*
 * 0 and *ret from the function's file bytes code[0, len), its first byte at
 * addr in the object (st_value: adrp counts pages from it, and the load
 * keeps an address's place in its page), or -ENOENT.
 */
static inline int arch_walk_derive(const uint8_t *code, size_t len, uint64_t addr,
				   struct arch_walk_facts *ret)
{
	size_t n = len / 4;
	long blr, add0, adrp, add1, array = -1, count = -1, first;
	int64_t array_at = 0, count_at = 0, arg;
	uint32_t i;
	uint64_t page, helper;

	if (len % 4 || addr % 4 || n > ARCH_WALK_INSNS_MAX)
		return -ENOENT;
	blr = arch_walk_the_call(code, n);
	if (blr < 0 || arch_walk_rn(arch_walk_insn(code, (size_t)blr)) <= 1)
		return -ENOENT;
	/* x0 = helper: add x0, xM, #imm (64-bit, unshifted), xM from adrp xM. */
	add0 = arch_walk_last_write(code, (size_t)blr, 0);
	i = add0 < 0 ? 0 : arch_walk_insn(code, (size_t)add0);
	if (add0 < 0 || (i & 0xffc0001fu) != 0x91000000u || arch_walk_rn(i) == ARCH_WALK_SP)
		return -ENOENT;
	adrp = arch_walk_last_write(code, (size_t)add0, arch_walk_rn(i));
	if (adrp < 0 || (arch_walk_insn(code, (size_t)adrp) & 0x9f00001fu) !=
			(0x90000000u | arch_walk_rn(i)))
		return -ENOENT;
	page = ((addr + 4 * (uint64_t)adrp) & ~(uint64_t)0xfff) +
	       (uint64_t)(arch_walk_sext((arch_walk_insn(code, (size_t)adrp) >> 3 & 0x1ffffcu) |
					 (arch_walk_insn(code, (size_t)adrp) >> 29 & 3u), 21) * 4096);
	helper = page + ((i >> 10) & 0xfffu);
	/* x1 = &arg: add x1, sp, #A. */
	add1 = arch_walk_last_write(code, (size_t)blr, 1);
	i = add1 < 0 ? 0 : arch_walk_insn(code, (size_t)add1);
	if (add1 < 0 || (i & 0xffc003ffu) != 0x910003e1u)
		return -ENOENT;
	arg = (int64_t)((i >> 10) & 0xfffu);
	/* arg.array: str x0, [sp, #S], x0 still the caller's array (nothing wrote it yet). */
	for (size_t k = 0; k < (size_t)blr; k++) {
		i = arch_walk_insn(code, k);
		if ((i & 0xffc003ffu) == 0xf90003e0u) {
			if (array >= 0)
				return -ENOENT;
			array = (long)k;
			array_at = (int64_t)((i >> 10) & 0xfffu) * 8;
		}
		if (arch_walk_writes(i, 0))
			break;
	}
	/* arg.cnt = -1: mov wR, #-1 (movn, w or x), then its one store to the stack. */
	for (size_t k = 0; k < (size_t)blr; k++) {
		int64_t off = 0;
		long at;

		if ((arch_walk_insn(code, k) & 0x7fffffe0u) != 0x12800000u)
			continue;
		at = arch_walk_minus1_store(code, k, (size_t)blr, &off);
		if (at == -2 || (at >= 0 && count >= 0))
			return -ENOENT;
		if (at >= 0) {
			count = at;
			count_at = off;
		}
	}
	if (array < 0 || count < 0)
		return -ENOENT;
	/* One sp from the first of the three to the call; no other store touches the fields. */
	first = array < count ? array : count;
	first = add1 < first ? add1 : first;
	for (size_t k = (size_t)first; k < (size_t)blr; k++) {
		unsigned base;
		int64_t off, n_bytes;
		enum arch_walk_ldst a;

		i = arch_walk_insn(code, k);
		if (arch_walk_writes(i, ARCH_WALK_SP))
			return -ENOENT;
		if (!arch_walk_is_ldst(i) || (long)k < (array < count ? array : count))
			continue;
		a = arch_walk_access(i, &base, &off, &n_bytes);
		if (a == ARCH_WALK_LOAD)
			continue;
		if (a != ARCH_WALK_STORE || base != ARCH_WALK_SP ||
		    ((long)k != array && arch_walk_overlap(off, n_bytes, array_at, 8)) ||
		    ((long)k != count && arch_walk_overlap(off, n_bytes, count_at, 4)))
			return -ENOENT;
	}
	/* The fields lie inside the argument: the array an aligned pointer, the count an int. */
	if (array_at < arg || count_at < arg || (array_at - arg) % 8 || (count_at - arg) % 4 ||
	    array_at - arg > ARCH_WALK_ARG_MAX || count_at - arg > ARCH_WALK_ARG_MAX ||
	    arch_walk_overlap(array_at, 8, count_at, 4))
		return -ENOENT;
	ret->call_off = 4 * (uint64_t)add0;
	ret->return_off = 4 * (uint64_t)blr + 4;
	ret->helper_off = helper - addr;
	ret->array_offset = (uint64_t)(array_at - arg);
	ret->count_offset = (uint64_t)(count_at - arg);
	return 0;
}

/* adr x0, target, for the function at func: the instruction that replaces the add. */
static inline void arch_walk_call_bytes(uint64_t func, const struct arch_walk_facts *f,
					uint64_t target, uint8_t out[ARCH_WALK_CALL_LEN])
{
	uint32_t d = (uint32_t)(target - (func + f->call_off));
	uint32_t adr = 0x10000000u | (d & 3u) << 29 | ((d >> 2) & 0x7ffffu) << 5;

	for (unsigned i = 0; i < 4; i++)
		out[i] = (uint8_t)(adr >> (8 * i));
}

/* Whether target, an instruction's address, is in ADR's reach from the changed instruction. */
static inline int arch_walk_reaches(uint64_t func, const struct arch_walk_facts *f, uint64_t target)
{
	int64_t d = (int64_t)(target - (func + f->call_off));

	return d >= -ARCH_WALK_ADR_REACH && d < ARCH_WALK_ADR_REACH && d % 4 == 0;
}

#endif
