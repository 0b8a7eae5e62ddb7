// SPDX-License-Identifier: MIT
/*
 * Unit tests for the aarch64 derivation of the segment walk (daemon/arch/
 * aarch64/arch_walk.h): where glibc's backtrace() hands its helper to the
 * unwinder, decoded from the real instructions of Debian 12's and 13's
 * arm64 glibc, and every shape it must refuse.  Pure; built and run on any
 * host, as test_stub_aarch64.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "arch_walk.h"

/* __backtrace() of Debian 12's glibc 2.36 (arm64) at 0xf9670, all 212 bytes. */
static const uint32_t debian12[53] = {
	0xd10143ff, 0xd0000522, 0xf9473442, 0xa9037bfd, 0x9100c3fd, 0xf90023f3,
	0x2a0103f3, 0xf9400041, 0xf90017e1, 0xd2800001, 0xf90007e0, 0x97ffc90d,
	0xa9017fe0, 0x12800001, 0x29044fe1, 0x7100027f, 0xfa40c804, 0x540002e0,
	0xd0000521, 0xf9471821, 0x90000003, 0xf9400002, 0x91164060, 0xf9400023,
	0x910023e1, 0xca030042, 0xd63f0040, 0xb94023e0, 0x7100041f, 0x5400012d,
	0xf94007e2, 0x928000e1, 0x8b20cc21, 0xf8616841, 0xf100003f, 0x1a9f17e1,
	0x4b010000, 0x14000004, 0x3100041f, 0x54000041, 0x52800000, 0xd0000521,
	0xf9473421, 0xf94017e3, 0xf9400022, 0xeb020063, 0xd2800002, 0x540000a1,
	0xa9437bfd, 0xf94023f3, 0x910143ff, 0xd65f03c0, 0x940009a8,
};

/* __backtrace() of Debian 13's glibc 2.41 (arm64) at 0xf9108, all 220 bytes. */
static const uint32_t debian13[55] = {
	0xd503233f, 0xd10143ff, 0xd00005a2, 0xf9473c42, 0xa9037bfd, 0x9100c3fd,
	0xf90023f3, 0x2a0103f3, 0xf9400041, 0xf90017e1, 0xd2800001, 0xf90007e0,
	0x97ffd23a, 0xa9017fe0, 0x12800001, 0x29044fe1, 0xf100001f, 0x7a401a64,
	0x540002ed, 0xd00005a1, 0xf9471821, 0x90000003, 0xf9400002, 0x91008060,
	0xf9400023, 0x910023e1, 0xca030042, 0xd63f0040, 0xb94023e0, 0x7100041f,
	0x5400012d, 0xf94007e2, 0x928000e1, 0x8b204c21, 0xf8616841, 0xf100003f,
	0x1a9f17e1, 0x4b010000, 0x14000004, 0x3100041f, 0x54000041, 0x52800000,
	0xd00005a1, 0xf9473c21, 0xf94017e3, 0xf9400022, 0xeb020063, 0xd2800002,
	0x540000c1, 0xf94023f3, 0xa9437bfd, 0x910143ff, 0xd50323bf, 0xd65f03c0,
	0x940007c0,
};

/* The instructions of the Debian 12 function the refusals change, by index. */
enum {
	I_MOV_X1_0 = 9,       /* mov x1, #0, before the array's store */
	I_STR_X0 = 10,        /* str x0, [sp, #8] */
	I_BL = 11,            /* bl __libc_unwind_link_get */
	I_STP_X0 = 12,        /* stp x0, xzr, [sp, #16] */
	I_MOVN = 13,          /* mov w1, #-1 */
	I_STP_W1 = 14,        /* stp w1, w19, [sp, #32] */
	I_CMP = 15,           /* cmp w19, #0 */
	I_BEQ = 17,           /* b.eq f9710, past the call */
	I_ADRP = 20,          /* adrp x3, f9000 */
	I_LDR_X2 = 21,        /* ldr x2, [x0], between the adrp and the add */
	I_ADD_X0 = 22,        /* add x0, x3, #0x590 */
	I_LDR_X3 = 23,        /* ldr x3, [x1] */
	I_ADD_X1 = 24,        /* add x1, sp, #8 */
	I_BLR = 26,           /* blr x2 */
	I_RET = 51,           /* ret */
};

#define NWORDS12 (sizeof(debian12) / sizeof(debian12[0]))

static void to_bytes(const uint32_t *w, size_t n, uint8_t *out)
{
	for (size_t k = 0; k < n; k++)
		for (unsigned b = 0; b < 4; b++)
			out[4 * k + b] = (uint8_t)(w[k] >> (8 * b));
}

static int derive(const uint32_t *w, size_t n, uint64_t addr, struct arch_walk_facts *f)
{
	uint8_t code[4 * 64];

	assert_true(n <= 64);
	to_bytes(w, n, code);
	return arch_walk_derive(code, 4 * n, addr, f);
}

static void derive_debian12(void **state)
{
	struct arch_walk_facts f;

	(void)state;
	assert_int_equal(derive(debian12, NWORDS12, 0xf9670, &f), 0);
	assert_int_equal(f.call_off, 0x58);        /* add x0, x3, #0x590 at f96c8 */
	assert_int_equal(f.return_off, 0x6c);      /* after blr x2 at f96d8 */
	assert_int_equal((int64_t)f.helper_off, -0xe0);   /* backtrace_helper at f9590 */
	assert_int_equal(f.array_offset, 0);       /* str x0, [sp, #8]; add x1, sp, #8 */
	assert_int_equal(f.count_offset, 0x18);    /* stp w1, w19, [sp, #32] */
}

static void derive_debian13(void **state)
{
	struct arch_walk_facts f;

	(void)state;
	assert_int_equal(derive(debian13, sizeof(debian13) / sizeof(debian13[0]), 0xf9108, &f), 0);
	assert_int_equal(f.call_off, 0x5c);        /* add x0, x3, #0x20 at f9164 */
	assert_int_equal(f.return_off, 0x70);      /* after blr x2 at f9174 */
	assert_int_equal((int64_t)f.helper_off, -0xe8);   /* backtrace_helper at f9020 */
	assert_int_equal(f.array_offset, 0);
	assert_int_equal(f.count_offset, 0x18);
}

/* adrp counts pages from its own address: the function's place in its page matters. */
static void helper_counts_from_the_page(void **state)
{
	struct arch_walk_facts f;

	(void)state;
	/* A page further on, the same place in it: the same helper, relative. */
	assert_int_equal(derive(debian12, NWORDS12, 0xfa670, &f), 0);
	assert_int_equal((int64_t)f.helper_off, -0xe0);
	/* 0x100 further, the adrp (at +0x50) still in page f9000: helper f9590, 0x1e0 back. */
	assert_int_equal(derive(debian12, NWORDS12, 0xf9770, &f), 0);
	assert_int_equal((int64_t)f.helper_off, -0x1e0);
	/* 0x940 further, the adrp in the next page: helper fa590. */
	assert_int_equal(derive(debian12, NWORDS12, 0xf9fb0, &f), 0);
	assert_int_equal((int64_t)f.helper_off, (int64_t)0xfa590 - 0xf9fb0);
	/* Not an instruction's address. */
	assert_int_equal(derive(debian12, NWORDS12, 0xf9672, &f), -ENOENT);
}

/* Debian 12's function with instruction k replaced by insn: refused. */
static void refused(size_t k, uint32_t insn)
{
	uint32_t w[NWORDS12];
	struct arch_walk_facts f;

	memcpy(w, debian12, sizeof(w));
	w[k] = insn;
	if (derive(w, NWORDS12, 0xf9670, &f) != -ENOENT)
		fail_msg("instruction %zu as 0x%08x: derived", k, insn);
}

/* Any other shape than the known one is not derived: the guard falls back. */
static void derive_refuses_other_shapes(void **state)
{
	struct arch_walk_facts f;
	uint8_t code[4 * NWORDS12];

	(void)state;
	/* The helper's add from another register than the adrp's: add x0, x4, #0x590. */
	refused(I_ADD_X0, 0x91164080);
	/* Shifted: add x0, x3, #0x590, lsl #12. */
	refused(I_ADD_X0, 0x91564060);
	/* A 32-bit add: add w0, w3, #0x590. */
	refused(I_ADD_X0, 0x11164060);
	/* No adrp before it: mov x3, #0. */
	refused(I_ADRP, 0xd2800003);
	/* x3 written between the adrp and the add: ldr x3, [x0]. */
	refused(I_LDR_X2, 0xf9400003);
	/* A call between them (it may write any register): bl to 0x40000 before. */
	refused(I_LDR_X2, 0x97ff0000);
	/* x0 written after the add: ldr x0, [x1]. */
	refused(I_LDR_X3, 0xf9400020);
	/* x0 loaded after the add by a pair's second register: ldp x3, x0, [x1]. */
	refused(I_LDR_X3, 0xa9400023);
	/* x1 not &arg: add x1, x29, #8; add x1, sp, #8, lsl #12. */
	refused(I_ADD_X1, 0x910023a1);
	refused(I_ADD_X1, 0x914023e1);
	/* The argument past the array's store: add x1, sp, #16. */
	refused(I_ADD_X1, 0x910043e1);
	/* The count not set to -1: mov w1, #0; mov w1, #-2 (movn w1, #1). */
	refused(I_MOVN, 0x52800001);
	refused(I_MOVN, 0x12800021);
	/* The count stored where the array is: stp w1, w19, [sp, #8]. */
	refused(I_STP_W1, 0x29014fe1);
	/* The count too far into the argument to be its field: str w1, [sp, #80]. */
	refused(I_STP_W1, 0xb90053e1);
	/* The array's field written again before the call: stp x0, xzr, [sp]. */
	refused(I_STP_X0, 0xa9007fe0);
	/* A store through another register, which may alias: stp x0, xzr, [x29, #-32]. */
	refused(I_STP_X0, 0xa93e7fa0);
	/* The stack pointer moved between the stores and the call: sub sp, sp, #16. */
	refused(I_CMP, 0xd10043ff);
	/* ... or by a store's writeback: stp x0, xzr, [sp, #16]!. */
	refused(I_STP_X0, 0xa9817fe0);
	/* x0 written before its store: not the caller's array. */
	refused(I_MOV_X1_0, 0xd2800000);
	/* Two stores of x0: which one is the array's is not certain. */
	refused(I_MOV_X1_0, 0xf90013e0);
	/* A branch landing between the entry and the call: b.eq to the adrp. */
	refused(I_BEQ, 0x54000060);
	/* A loop back from after the call: b to the entry's second instruction. */
	refused(I_BLR + 3, 0x17ffffe5);
	/* A second call through a register; an indirect jump. */
	refused(I_BLR + 2, 0xd63f0060);
	refused(I_RET, 0xd61f0040);
	/* The call through x0 or x1, the helper's own arguments. */
	refused(I_BLR, 0xd63f0000);
	/* No call at all. */
	refused(I_BLR, 0xd503201f);
	/* Cut short before the call; not whole instructions. */
	to_bytes(debian12, NWORDS12, code);
	assert_int_equal(arch_walk_derive(code, 4 * I_BLR, 0xf9670, &f), -ENOENT);
	assert_int_equal(arch_walk_derive(code, sizeof(code) - 1, 0xf9670, &f), -ENOENT);
	assert_int_equal(arch_walk_derive(code, 0, 0xf9670, &f), -ENOENT);
}

/* Shapes glibc does not have today but which prove the same facts: still derived. */
static void derive_keeps_what_is_proved(void **state)
{
	uint32_t w[NWORDS12];
	struct arch_walk_facts f;

	(void)state;
	/* The count by str alone: str w1, [sp, #32]. */
	memcpy(w, debian12, sizeof(w));
	w[I_STP_W1] = 0xb90023e1;
	assert_int_equal(derive(w, NWORDS12, 0xf9670, &f), 0);
	assert_int_equal(f.count_offset, 0x18);
	/* The -1 as a pair's second register: stp w19, w1, [sp, #28]. */
	w[I_STP_W1] = 0x290387f3;
	assert_int_equal(derive(w, NWORDS12, 0xf9670, &f), 0);
	assert_int_equal(f.count_offset, 0x18);
	/* The helper's page in another register: adrp x4; add x0, x4, #0x590. */
	memcpy(w, debian12, sizeof(w));
	w[I_ADRP] = 0x90000004;
	w[I_ADD_X0] = 0x91164080;
	assert_int_equal(derive(w, NWORDS12, 0xf9670, &f), 0);
	assert_int_equal((int64_t)f.helper_off, -0xe0);
	/* x0 stored elsewhere first (a store reads its register): str x0, [x29, #16]. */
	memcpy(w, debian12, sizeof(w));
	w[I_MOV_X1_0] = 0xf9000ba0;
	assert_int_equal(derive(w, NWORDS12, 0xf9670, &f), 0);
	assert_int_equal(f.array_offset, 0);
	/* The fields read back before the call: ldp x3, x4, [sp, #8]. */
	memcpy(w, debian12, sizeof(w));
	w[I_LDR_X3] = 0xa94093e3;
	assert_int_equal(derive(w, NWORDS12, 0xf9670, &f), 0);
}

/* The changed instruction is adr x0, target, relative to itself. */
static void call_bytes_are_an_adr(void **state)
{
	struct arch_walk_facts f;
	uint8_t out[ARCH_WALK_CALL_LEN];

	(void)state;
	assert_int_equal(derive(debian12, NWORDS12, 0xf9670, &f), 0);
	/* As the assembler encodes them (aarch64-linux-gnu-as, at .text+0x58). */
	arch_walk_call_bytes(0, &f, 0x58 + 0x92918, out);
	assert_memory_equal(out, ((const uint8_t[]){ 0xc0, 0x48, 0x49, 0x10 }), 4);
	arch_walk_call_bytes(0, &f, 0x58 - 0x100000, out);
	assert_memory_equal(out, ((const uint8_t[]){ 0x00, 0x00, 0x80, 0x10 }), 4);
	arch_walk_call_bytes(0, &f, 0x58 + 0xffffc, out);
	assert_memory_equal(out, ((const uint8_t[]){ 0xe0, 0xff, 0x7f, 0x10 }), 4);
	arch_walk_call_bytes(0, &f, 0x58 - 4, out);
	assert_memory_equal(out, ((const uint8_t[]){ 0xe0, 0xff, 0xff, 0x10 }), 4);
	/* The low two bits of the offset go apart (never used: the entry is an instruction). */
	arch_walk_call_bytes(0, &f, 0x58 + 0x92919, out);
	assert_memory_equal(out, ((const uint8_t[]){ 0xc0, 0x48, 0x49, 0x30 }), 4);
	/* Where Debian 12's libc puts the walk's code, at a run-time address. */
	arch_walk_call_bytes(0xffff800f9670, &f, 0xffff8018bf70, out);
	assert_memory_equal(out, ((const uint8_t[]){ 0x40, 0x45, 0x49, 0x10 }), 4);
}

/* ADR reaches [-1 MiB, +1 MiB) from itself, instructions only. */
static void reach_is_adrs(void **state)
{
	const uint64_t func = 0xffff800f9670, call = func + 0x58;
	struct arch_walk_facts f;

	(void)state;
	assert_int_equal(derive(debian12, NWORDS12, 0xf9670, &f), 0);
	assert_true(arch_walk_reaches(func, &f, call + 0xffffc));
	assert_false(arch_walk_reaches(func, &f, call + 0x100000));
	assert_true(arch_walk_reaches(func, &f, call - 0x100000));
	assert_false(arch_walk_reaches(func, &f, call - 0x100004));
	assert_false(arch_walk_reaches(func, &f, call + 0x102));
	assert_false(arch_walk_reaches(func, &f, call + 0x100000000));
	/* Debian 12's and 13's rooms: the code's entry is 0x928a8 and 0xa2e0c away. */
	assert_true(arch_walk_reaches(func, &f, call + 0x928a8));
	assert_true(arch_walk_reaches(func, &f, call + 0xa2e0c));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(derive_debian12),
		cmocka_unit_test(derive_debian13),
		cmocka_unit_test(helper_counts_from_the_page),
		cmocka_unit_test(derive_refuses_other_shapes),
		cmocka_unit_test(derive_keeps_what_is_proved),
		cmocka_unit_test(call_bytes_are_an_adr),
		cmocka_unit_test(reach_is_adrs),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
