/* SPDX-License-Identifier: MIT */
/*
 * x86-64: where glibc's backtrace() hands its per-frame helper to the
 * unwinder, read from the function's own bytes, for the segment walk
 * (engine/walk.c).  glibc 2.36 (Debian 12) and 2.41 (Debian 13) build
 * __backtrace() the same way:
 *
 *   48 89 7d c0             mov  %rdi,-0x40(%rbp)        arg.array = array
 *   c7 45 d8 ff ff ff ff    movl $-1,-0x28(%rbp)         arg.cnt = -1
 *   48 8d 75 c0             lea  -0x40(%rbp),%rsi        &arg
 *   48 8d 3d XX XX XX XX    lea  backtrace_helper(%rip),%rdi
 *   ...                     (the demangled _Unwind_Backtrace)
 *   ff d0                   call *%rax
 *
 * The guard changes the lea's 32-bit displacement, one word, so that the
 * unwinder calls our code; the instruction, its start and its length stay
 * (a breakpoint on it replays the file's lea: that call walks as glibc
 * does, alive).  Anything else than this exact shape is not derived, and
 * the guard falls back to the empty stub.
 */
#ifndef BTGUARD_ARCH_WALK_H
#define BTGUARD_ARCH_WALK_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#define ARCH_WALK           1     /* this CPU has a derivation */
#define ARCH_WALK_CALL_LEN  4u    /* bytes the guard changes in backtrace() */
#define ARCH_WALK_ALIGN     16u   /* where the walk's code starts */

struct arch_walk_facts {
	uint64_t call_off;       /* the changed bytes, from the function's entry */
	uint64_t return_off;     /* where the call to the unwinder returns, from the entry */
	uint64_t helper_off;     /* glibc's helper, from the function's entry (may be negative) */
	uint64_t array_offset;   /* fields of the helper's argument (walk_table.h) */
	uint64_t count_offset;
};

/* The one place in code[0, len) where pat[0, n) starts (-1: none; -2: more than one). */
static inline long arch_walk_unique(const uint8_t *code, size_t len, const uint8_t *pat, size_t n,
				    size_t tail)
{
	long at = -1;

	for (size_t i = 0; i + n + tail <= len; i++) {
		if (memcmp(code + i, pat, n) != 0)
			continue;
		if (at >= 0)
			return -2;
		at = (long)i;
	}
	return at;
}

static inline int32_t arch_walk_le32(const uint8_t *p)
{
	return (int32_t)((uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
			 (uint32_t)p[3] << 24);
}

/*
 * 0 and *ret from the function's file bytes code[0, len), or -ENOENT.
 * addr, the function's address in the object, does not matter here: the
 * lea names the helper relative to itself.
 */
static inline int arch_walk_derive(const uint8_t *code, size_t len, uint64_t addr,
				   struct arch_walk_facts *ret)
{
	static const uint8_t leas[] = { 0x48, 0x8d, 0x75 }, lea_rdi[] = { 0x48, 0x8d, 0x3d };
	static const uint8_t store[] = { 0x48, 0x89, 0x7d }, minus1[] = { 0xff, 0xff, 0xff, 0xff };
	static const uint8_t call_rax[] = { 0xff, 0xd0 };
	long arg_at = arch_walk_unique(code, len, leas, sizeof(leas), 1 + 7);
	long store_at = arch_walk_unique(code, len, store, sizeof(store), 1);
	long rdi_at = arch_walk_unique(code, len, lea_rdi, sizeof(lea_rdi), 4);
	long count_at = -1, call_at;
	int8_t arg, array, count;

	(void)addr;
	if (arg_at < 0 || store_at < 0 || rdi_at != arg_at + 4)
		return -ENOENT;
	/* movl $-1, disp8(%rbp): c7 45 disp8 ff ff ff ff, once. */
	for (size_t i = 0; i + 7 <= len; i++) {
		if (code[i] != 0xc7 || code[i + 1] != 0x45 || memcmp(code + i + 3, minus1, 4))
			continue;
		if (count_at >= 0)
			return -ENOENT;
		count_at = (long)i;
	}
	/* The indirect call that takes the two leas' registers, soon after them. */
	call_at = arch_walk_unique(code + rdi_at + 7, len - (size_t)rdi_at - 7 < 24 ?
				   len - (size_t)rdi_at - 7 : 24, call_rax, sizeof(call_rax), 0);
	if (count_at < 0 || call_at < 0)
		return -ENOENT;
	arg = (int8_t)code[arg_at + 3];
	array = (int8_t)code[store_at + 3];
	count = (int8_t)code[count_at + 2];
	/* The fields lie inside the argument, the count an aligned int. */
	if (array < arg || count <= arg || (count - arg) % 4 || count - arg > 64 ||
	    (array - arg) % 8 || array - arg > 64)
		return -ENOENT;
	ret->call_off = (uint64_t)rdi_at + 3;
	ret->return_off = (uint64_t)(rdi_at + 7 + call_at + 2);
	ret->helper_off = (uint64_t)(rdi_at + 7 + arch_walk_le32(code + rdi_at + 3));
	ret->array_offset = (uint64_t)(array - arg);
	ret->count_offset = (uint64_t)(count - arg);
	return 0;
}

/* The changed bytes that name target instead, for the function at func. */
static inline void arch_walk_call_bytes(uint64_t func, const struct arch_walk_facts *f,
					uint64_t target, uint8_t out[ARCH_WALK_CALL_LEN])
{
	uint32_t rel = (uint32_t)(target - (func + f->call_off + 4));

	for (unsigned i = 0; i < 4; i++)
		out[i] = (uint8_t)(rel >> (8 * i));
}

/* Whether target is in reach of those bytes from func. */
static inline int arch_walk_reaches(uint64_t func, const struct arch_walk_facts *f, uint64_t target)
{
	int64_t d = (int64_t)(target - (func + f->call_off + 4));

	return d >= INT32_MIN && d <= INT32_MAX;
}

#endif
