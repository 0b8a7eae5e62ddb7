// SPDX-License-Identifier: MIT
/*
 * Unit tests for stub placement with the aarch64 table (daemon/arch/
 * aarch64/arch_stub.h), built and run on any host: stub.c is pure and
 * takes the CPU features as an argument.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "../../proto/proto.h"
#include "stub.h"

#define MOV_W0_0 "\x00\x00\x80\x52"
#define RET      "\xc0\x03\x5f\xd6"
#define RETAA    "\xff\x0b\x5f\xd6"
#define RETAB    "\xff\x0f\x5f\xd6"
#define BTI_C    "\x5f\x24\x03\xd5"
#define PACIASP  "\x3f\x23\x03\xd5"
#define PACIBSP  "\x7f\x23\x03\xd5"
/* stp x29, x30, [sp, #-16]!; mov x29, sp; then filler */
#define PROLOGUE "\xfd\x7b\xbf\xa9\xfd\x03\x00\x91"

/* add sp, sp, #16 / #0x40 / #0x1f0 */
#define ADD_SP_16  "\xff\x43\x00\x91"
#define ADD_SP_64  "\xff\x03\x01\x91"
#define ADD_SP_496 "\xff\xc3\x07\x91"
/* stp x19, x20, [sp, #-64]!; sub sp, sp, #496; mov x0, x1 (no undo known) */
#define STP_X19_64 "\xf3\x53\xbc\xa9"
#define SUB_SP_496 "\xff\xc3\x07\xd1"
#define MOV_X0_X1  "\xe0\x03\x01\xaa"

static void plan_n(const char *code, size_t len, unsigned features, size_t offset,
		   const char *change, size_t change_len)
{
	struct stub_plan p;
	uint8_t out[32];

	assert_int_equal(stub_plan((const uint8_t *)code, len, features, &p), 0);
	assert_int_equal(p.offset, offset);
	assert_int_equal(p.len, change_len);
	assert_int_equal(p.nwords, (change_len + 7) / 8);
	assert_memory_equal(p.bytes, change, change_len);
	stub_apply((const uint8_t *)code, len, &p, out);
	/* The first instruction is kept; the change follows; the rest is untouched. */
	assert_memory_equal(out, code, offset);
	assert_memory_equal(out + offset, change, change_len);
	assert_memory_equal(out + offset + change_len, code + offset + change_len,
			    len - offset - change_len);
}

static void plan(const char *code, size_t len, unsigned features, size_t offset, const char *stub)
{
	plan_n(code, len, features, offset, stub, 8);
}

#define FILL "\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0"

/*
 * stp ..., [sp, #-N]! and sub sp, sp, #N stay first (a uprobe steps them
 * out of line and resumes after them), and "add sp, sp, #N" undoes them
 * before the stub: 12 bytes, two words.
 */
static void entry_undone_before_the_stub(void **state)
{
	(void)state;
	plan_n(PROLOGUE FILL, 24, 0, 4, ADD_SP_16 MOV_W0_0 RET, 12);
	plan_n(PROLOGUE FILL, 24, ARCH_FEATURE_PAUTH, 4, ADD_SP_16 MOV_W0_0 RET, 12);
	plan_n(STP_X19_64 FILL, 24, 0, 4, ADD_SP_64 MOV_W0_0 RET, 12);
	plan_n(SUB_SP_496 FILL, 24, 0, 4, ADD_SP_496 MOV_W0_0 RET, 12);
}

/* Any other first instruction: the stub covers the entry, as before. */
static void no_undo_stub_at_entry(void **state)
{
	(void)state;
	plan(MOV_X0_X1 FILL, 20, 0, 0, MOV_W0_0 RET);
	/* A post-index or positive-offset stp does not move sp down first. */
	plan("\xfd\x7b\x81\xa8" FILL, 20, 0, 0, MOV_W0_0 RET);   /* stp x29, x30, [sp], #16 */
}

/* The uprobe's brk #5 over the kept first instruction is not ours, not foreign. */
static void breakpoint_on_the_entry_seen_through(void **state)
{
	struct stub_plan p;
	uint8_t mem[24];
	bool bp;
	(void)state;
	assert_int_equal(stub_plan((const uint8_t *)(PROLOGUE FILL), 24, 0, &p), 0);
	stub_apply((const uint8_t *)(PROLOGUE FILL), 24, &p, mem);
	memcpy(mem, "\xa0\x00\x20\xd4", 4);
	assert_int_equal(stub_classify((const uint8_t *)(PROLOGUE FILL), mem, 24, &p, &bp),
			 PROTO_SITE_GUARDED);
	assert_true(bp);
	memcpy(mem, "\x00\x00\x20\xd4", 4);   /* gdb's brk #0 */
	assert_int_equal(stub_classify((const uint8_t *)(PROLOGUE FILL), mem, 24, &p, &bp),
			 PROTO_SITE_GUARDED);
	assert_true(bp);
	memcpy(mem, "\x20\x00\x20\xd4", 4);   /* brk #1: nobody's we know */
	assert_int_equal(stub_classify((const uint8_t *)(PROLOGUE FILL), mem, 24, &p, &bp),
			 PROTO_SITE_FOREIGN);
}

/*
 * A definition beginning "stp x29, x30, [sp, #-N]!; mov x29, sp; stp x19,
 * x20, ..." whose return path cannot be proven (only its first bytes are
 * known here): the change (add sp; mov w0, #0; ret) covers three
 * instructions of the file, each one a place for a uprobe.  Its brk #5
 * over one of ours, or the file's instruction it writes back when it goes
 * (a whole instruction on arm64), is torn: never foreign, never guarded.
 * Only whole instructions count: half of one is foreign.
 */
#define CODE "\xfd\x7b\xbf\xa9\xfd\x03\x00\x91\xf3\x53\x01\xa9\xf3\x03\x00\xaa" FILL

static void torn_by_a_uprobe_inside_the_change(void **state)
{
	struct stub_plan p;
	uint8_t guarded[24], mem[24];
	const uint8_t *code = (const uint8_t *)CODE;
	bool bp;
	(void)state;
	assert_int_equal(stub_plan(code, 24, 0, &p), 0);
	assert_int_equal(p.offset, 4);
	assert_int_equal(p.len, 12);
	stub_apply(code, 24, &p, guarded);
	for (size_t at = 4; at < 16; at += 4) {
		memcpy(mem, guarded, 24);
		memcpy(mem + at, "\xa0\x00\x20\xd4", 4);          /* the uprobe is there */
		assert_int_equal(stub_classify(code, mem, 24, &p, &bp), PROTO_SITE_TORN);
		assert_true(bp);
		memcpy(mem + at, code + at, 4);                     /* and went */
		assert_int_equal(stub_classify(code, mem, 24, &p, &bp), PROTO_SITE_TORN);
		assert_false(bp);
		memcpy(mem + at, code + at, 2);                     /* half an instruction */
		memcpy(mem + at + 2, guarded + at + 2, 2);
		if (memcmp(mem + at, guarded + at, 4) && memcmp(mem + at, code + at, 4))
			assert_int_equal(stub_classify(code, mem, 24, &p, &bp), PROTO_SITE_FOREIGN);
	}
	/* Before the guard: the original with the uprobe inside the change. */
	memcpy(mem, code, 24);
	memcpy(mem + 8, "\xa0\x00\x20\xd4", 4);
	assert_int_equal(stub_classify(code, mem, 24, &p, &bp), PROTO_SITE_ORIGINAL);
	assert_true(bp);
}

static void bti_c_kept_plain_ret(void **state)
{
	(void)state;
	plan(BTI_C PROLOGUE "\0\0\0\0", 16, 0, 4, MOV_W0_0 RET);
	plan(BTI_C PROLOGUE "\0\0\0\0", 16, ARCH_FEATURE_PAUTH, 4, MOV_W0_0 RET);
}

/* The kept paciasp signs x30: with PAuth the stub must authenticate it. */
static void paciasp_kept_retaa_with_pauth(void **state)
{
	(void)state;
	plan(PACIASP PROLOGUE "\0\0\0\0", 16, ARCH_FEATURE_PAUTH, 4, MOV_W0_0 RETAA);
	plan(PACIBSP PROLOGUE "\0\0\0\0", 16, ARCH_FEATURE_PAUTH, 4, MOV_W0_0 RETAB);
}

/*
 * Without PAuth (cortex-a57) paciasp and pacibsp are NOP hints, x30 stays
 * unsigned, and retaa/retab would be undefined instructions.
 */
static void pac_without_pauth_plain_ret(void **state)
{
	(void)state;
	plan(PACIASP PROLOGUE "\0\0\0\0", 16, 0, 4, MOV_W0_0 RET);
	plan(PACIBSP PROLOGUE "\0\0\0\0", 16, 0, 4, MOV_W0_0 RET);
}

/*
 * The B key (-mbranch-protection=pac-ret+b-key): the kept pacibsp signs
 * x30 with key B, so the stub must authenticate with key B.  retaa there
 * would fail authentication (a fault, or with FEAT_FPAC a PAC trap); the
 * stub words differ only in retab's key bit (bit 10).
 */
static void pacibsp_never_retaa(void **state)
{
	struct stub_plan a, b;
	const char *with_a = PACIASP PROLOGUE "\0\0\0\0";
	const char *with_b = PACIBSP PROLOGUE "\0\0\0\0";
	(void)state;
	assert_int_equal(stub_plan((const uint8_t *)with_a, 16, ARCH_FEATURE_PAUTH, &a), 0);
	assert_int_equal(stub_plan((const uint8_t *)with_b, 16, ARCH_FEATURE_PAUTH, &b), 0);
	assert_memory_equal(b.bytes + 4, RETAB, 4);
	assert_memory_not_equal(a.bytes + 4, b.bytes + 4, 4);
}

/*
 * glibc's backtrace() as Debian ships it for arm64, whole (its symbol's
 * size), at its address in the file (the text's vaddr is its file offset):
 * Debian 12's 2.36-9+deb12u14 at 0xf9670 (212 bytes: "sub sp, sp, #0x50",
 * the canary stored at +0x20, "mov x1, #0" at +0x24, the return-0 path
 * "mov w0, #0" at +0xa0), Debian 13's 2.41-12+deb13u5 at 0xf9108 (220
 * bytes: paciasp first, the same 4 bytes later, "autiasp; ret").
 */
static const uint8_t deb12[212] = {
	0xff, 0x43, 0x01, 0xd1, 0x22, 0x05, 0x00, 0xd0, 0x42, 0x34, 0x47, 0xf9, 0xfd, 0x7b, 0x03, 0xa9,
	0xfd, 0xc3, 0x00, 0x91, 0xf3, 0x23, 0x00, 0xf9, 0xf3, 0x03, 0x01, 0x2a, 0x41, 0x00, 0x40, 0xf9,
	0xe1, 0x17, 0x00, 0xf9, 0x01, 0x00, 0x80, 0xd2, 0xe0, 0x07, 0x00, 0xf9, 0x0d, 0xc9, 0xff, 0x97,
	0xe0, 0x7f, 0x01, 0xa9, 0x01, 0x00, 0x80, 0x12, 0xe1, 0x4f, 0x04, 0x29, 0x7f, 0x02, 0x00, 0x71,
	0x04, 0xc8, 0x40, 0xfa, 0xe0, 0x02, 0x00, 0x54, 0x21, 0x05, 0x00, 0xd0, 0x21, 0x18, 0x47, 0xf9,
	0x03, 0x00, 0x00, 0x90, 0x02, 0x00, 0x40, 0xf9, 0x60, 0x40, 0x16, 0x91, 0x23, 0x00, 0x40, 0xf9,
	0xe1, 0x23, 0x00, 0x91, 0x42, 0x00, 0x03, 0xca, 0x40, 0x00, 0x3f, 0xd6, 0xe0, 0x23, 0x40, 0xb9,
	0x1f, 0x04, 0x00, 0x71, 0x2d, 0x01, 0x00, 0x54, 0xe2, 0x07, 0x40, 0xf9, 0xe1, 0x00, 0x80, 0x92,
	0x21, 0xcc, 0x20, 0x8b, 0x41, 0x68, 0x61, 0xf8, 0x3f, 0x00, 0x00, 0xf1, 0xe1, 0x17, 0x9f, 0x1a,
	0x00, 0x00, 0x01, 0x4b, 0x04, 0x00, 0x00, 0x14, 0x1f, 0x04, 0x00, 0x31, 0x41, 0x00, 0x00, 0x54,
	0x00, 0x00, 0x80, 0x52, 0x21, 0x05, 0x00, 0xd0, 0x21, 0x34, 0x47, 0xf9, 0xe3, 0x17, 0x40, 0xf9,
	0x22, 0x00, 0x40, 0xf9, 0x63, 0x00, 0x02, 0xeb, 0x02, 0x00, 0x80, 0xd2, 0xa1, 0x00, 0x00, 0x54,
	0xfd, 0x7b, 0x43, 0xa9, 0xf3, 0x23, 0x40, 0xf9, 0xff, 0x43, 0x01, 0x91, 0xc0, 0x03, 0x5f, 0xd6,
	0xa8, 0x09, 0x00, 0x94,
};
static const uint8_t deb13[220] = {
	0x3f, 0x23, 0x03, 0xd5, 0xff, 0x43, 0x01, 0xd1, 0xa2, 0x05, 0x00, 0xd0, 0x42, 0x3c, 0x47, 0xf9,
	0xfd, 0x7b, 0x03, 0xa9, 0xfd, 0xc3, 0x00, 0x91, 0xf3, 0x23, 0x00, 0xf9, 0xf3, 0x03, 0x01, 0x2a,
	0x41, 0x00, 0x40, 0xf9, 0xe1, 0x17, 0x00, 0xf9, 0x01, 0x00, 0x80, 0xd2, 0xe0, 0x07, 0x00, 0xf9,
	0x3a, 0xd2, 0xff, 0x97, 0xe0, 0x7f, 0x01, 0xa9, 0x01, 0x00, 0x80, 0x12, 0xe1, 0x4f, 0x04, 0x29,
	0x1f, 0x00, 0x00, 0xf1, 0x64, 0x1a, 0x40, 0x7a, 0xed, 0x02, 0x00, 0x54, 0xa1, 0x05, 0x00, 0xd0,
	0x21, 0x18, 0x47, 0xf9, 0x03, 0x00, 0x00, 0x90, 0x02, 0x00, 0x40, 0xf9, 0x60, 0x80, 0x00, 0x91,
	0x23, 0x00, 0x40, 0xf9, 0xe1, 0x23, 0x00, 0x91, 0x42, 0x00, 0x03, 0xca, 0x40, 0x00, 0x3f, 0xd6,
	0xe0, 0x23, 0x40, 0xb9, 0x1f, 0x04, 0x00, 0x71, 0x2d, 0x01, 0x00, 0x54, 0xe2, 0x07, 0x40, 0xf9,
	0xe1, 0x00, 0x80, 0x92, 0x21, 0x4c, 0x20, 0x8b, 0x41, 0x68, 0x61, 0xf8, 0x3f, 0x00, 0x00, 0xf1,
	0xe1, 0x17, 0x9f, 0x1a, 0x00, 0x00, 0x01, 0x4b, 0x04, 0x00, 0x00, 0x14, 0x1f, 0x04, 0x00, 0x31,
	0x41, 0x00, 0x00, 0x54, 0x00, 0x00, 0x80, 0x52, 0xa1, 0x05, 0x00, 0xd0, 0x21, 0x3c, 0x47, 0xf9,
	0xe3, 0x17, 0x40, 0xf9, 0x22, 0x00, 0x40, 0xf9, 0x63, 0x00, 0x02, 0xeb, 0x02, 0x00, 0x80, 0xd2,
	0xc1, 0x00, 0x00, 0x54, 0xf3, 0x23, 0x40, 0xf9, 0xfd, 0x7b, 0x43, 0xa9, 0xff, 0x43, 0x01, 0x91,
	0xbf, 0x23, 0x03, 0xd5, 0xc0, 0x03, 0x5f, 0xd6, 0xc0, 0x07, 0x00, 0x94,
};
#define DEB12_ADDR 0xf9670u
#define DEB13_ADDR 0xf9108u
#define CTX 64u
#define B_PLUS_0x7C "\x1f\x00\x00\x14"   /* b .+0x7c */
#define BRK_5 "\xa0\x00\x20\xd4"

static void put_insn(uint8_t *code, size_t at, uint32_t insn)
{
	code[at] = (uint8_t)insn;
	code[at + 1] = (uint8_t)(insn >> 8);
	code[at + 2] = (uint8_t)(insn >> 16);
	code[at + 3] = (uint8_t)(insn >> 24);
}

/*
 * The guard is one instruction: the one after the canary's store becomes
 * a branch to the function's own "mov w0, #0" and epilogue, with or
 * without PAuth (the path authenticates x30 itself after paciasp).
 */
static void plan_one_branch_to_the_return_zero_path(void **state)
{
	struct stub_plan p;
	(void)state;
	for (unsigned f = 0; f <= ARCH_FEATURE_PAUTH; f += ARCH_FEATURE_PAUTH) {
		assert_int_equal(stub_plan_function(deb12, sizeof(deb12), CTX, DEB12_ADDR, f, &p), 0);
		assert_int_equal(p.offset, 0x24);
		assert_int_equal(p.len, 4);
		assert_int_equal(p.keep, 0);
		assert_int_equal(p.nwords, 1);
		assert_memory_equal(p.bytes, B_PLUS_0x7C, 4);
		assert_int_equal(stub_plan_function(deb13, sizeof(deb13), CTX, DEB13_ADDR, f, &p), 0);
		assert_int_equal(p.offset, 0x28);
		assert_int_equal(p.len, 4);
		assert_memory_equal(p.bytes, B_PLUS_0x7C, 4);
	}
	/* The same code loaded 4 KiB further: the same pages, the same plan. */
	assert_int_equal(stub_plan_function(deb12, sizeof(deb12), CTX, DEB12_ADDR + 0x7000, 0, &p), 0);
	assert_int_equal(p.offset, 0x24);
	/* Only its first bytes known: no proof, the stub after the first instruction. */
	assert_int_equal(stub_plan(deb12, CTX, 0, &p), 0);
	assert_int_equal(p.offset, 4);
	assert_int_equal(p.len, 12);
}

/* The plan an analysis that does not match exactly falls back to: today's. */
static void falls_back(const uint8_t *code, size_t len, uint64_t addr, unsigned features)
{
	struct stub_plan p;

	assert_int_equal(stub_plan_function(code, len, CTX, addr, features, &p), 0);
	assert_int_equal(p.offset, 4);
	/* After a landing pad (hint space, 0xd503....) the stub alone, else undo and stub. */
	assert_int_equal(p.len, code[3] == 0xd5 ? 8 : 12);
}

/*
 * Each fact the branch relies on, broken one at a time in the real bytes:
 * the analysis must refuse, never branch.
 */
static void every_broken_fact_falls_back(void **state)
{
	uint8_t c[sizeof(deb13)];
	(void)state;

	/* x19 not reloaded on the path (ldr x19, [sp, #64] -> nop). */
	memcpy(c, deb12, sizeof(deb12));
	put_insn(c, 0xc4, 0xd503201fu);
	falls_back(c, sizeof(deb12), DEB12_ADDR, 0);
	/* The frame not freed whole (add sp, sp, #0x40). */
	memcpy(c, deb12, sizeof(deb12));
	put_insn(c, 0xc8, 0x910103ffu);
	falls_back(c, sizeof(deb12), DEB12_ADDR, 0);
	/* The canary compared with another slot (ldr x3, [sp, #32]): its b.ne could fire. */
	memcpy(c, deb12, sizeof(deb12));
	put_insn(c, 0xac, 0xf94013e3u);
	falls_back(c, sizeof(deb12), DEB12_ADDR, 0);
	/* The guard's address read from another GOT entry (ldr x1, [x1, #3632]). */
	memcpy(c, deb12, sizeof(deb12));
	put_insn(c, 0xa8, 0xf9471821u);
	falls_back(c, sizeof(deb12), DEB12_ADDR, 0);
	/* No "mov w0, #0" before the epilogue (-> mov w0, #1). */
	memcpy(c, deb12, sizeof(deb12));
	put_insn(c, 0xa0, 0x52800020u);
	falls_back(c, sizeof(deb12), DEB12_ADDR, 0);
	/* A branch of the function back to the instruction we change (b.eq -> +0x24). */
	memcpy(c, deb12, sizeof(deb12));
	put_insn(c, 0x44, 0x54000000u | (((uint32_t)(0x24 - 0x44) / 4) & 0x7ffff) << 5);
	falls_back(c, sizeof(deb12), DEB12_ADDR, 0);
	/* A store on the path (mov x2, #0 -> str x2, [sp, #8]; x2 then keeps the canary too). */
	memcpy(c, deb12, sizeof(deb12));
	put_insn(c, 0xb8, 0xf90007e2u);
	falls_back(c, sizeof(deb12), DEB12_ADDR, 0);
	/* The canary left in a register at the return (mov x2, #0 -> nop). */
	memcpy(c, deb12, sizeof(deb12));
	put_insn(c, 0xb8, 0xd503201fu);
	falls_back(c, sizeof(deb12), DEB12_ADDR, 0);
	/*
	 * The code where the two adrp of the canary's address fall in
	 * different pages (the function 0xf60 into one): the same bytes then
	 * name two addresses, and the path's check would call __stack_chk_fail.
	 */
	falls_back(deb12, sizeof(deb12), 0xf9f60u, 0);
	/* x30 signed by paciasp, never authenticated (autiasp -> nop). */
	memcpy(c, deb13, sizeof(deb13));
	put_insn(c, 0xd0, 0xd503201fu);
	falls_back(c, sizeof(deb13), DEB13_ADDR, ARCH_FEATURE_PAUTH);
	/* Signed with key B at the entry, authenticated with key A on the path. */
	memcpy(c, deb13, sizeof(deb13));
	put_insn(c, 0, 0xd503237fu);
	falls_back(c, sizeof(deb13), DEB13_ADDR, ARCH_FEATURE_PAUTH);
	/* The prologue's canary store gone (str x1, [sp, #40] -> nop): nothing to place after. */
	memcpy(c, deb12, sizeof(deb12));
	put_insn(c, 0x20, 0xd503201fu);
	falls_back(c, sizeof(deb12), DEB12_ADDR, 0);
}

/*
 * A uprobe on the branch (attached after the guard): the kernel's brk
 * over all of our change.  Calls replay the file's "mov x1, #0" and run
 * the file's code, unguarded: torn (status warns, guard writes over it).
 * Its removal writes the file's instruction back: original.  A probe on
 * any other instruction leaves the guard whole.  Before the guard, the
 * same brk cannot tell whose instruction is beneath: torn too.
 */
static void a_uprobe_on_the_branch_tears_it(void **state)
{
	struct stub_plan p;
	uint8_t guarded[CTX], mem[CTX];
	bool bp;
	(void)state;
	assert_int_equal(stub_plan_function(deb12, sizeof(deb12), CTX, DEB12_ADDR, 0, &p), 0);
	stub_apply(deb12, CTX, &p, guarded);
	assert_memory_equal(guarded + 0x24, B_PLUS_0x7C, 4);
	assert_int_equal(stub_classify(deb12, guarded, CTX, &p, &bp), PROTO_SITE_GUARDED);
	assert_false(bp);
	memcpy(mem, guarded, CTX);
	memcpy(mem + 0x24, BRK_5, 4);
	assert_int_equal(stub_classify(deb12, mem, CTX, &p, &bp), PROTO_SITE_TORN);
	assert_true(bp);
	memcpy(mem + 0x24, deb12 + 0x24, 4);
	assert_int_equal(stub_classify(deb12, mem, CTX, &p, &bp), PROTO_SITE_ORIGINAL);
	assert_false(bp);
	for (size_t at = 0; at < CTX; at += 4) {
		if (at == 0x24)
			continue;
		memcpy(mem, guarded, CTX);
		memcpy(mem + at, BRK_5, 4);
		assert_int_equal(stub_classify(deb12, mem, CTX, &p, &bp), PROTO_SITE_GUARDED);
		assert_true(bp);
		memcpy(mem, deb12, CTX);
		memcpy(mem + at, BRK_5, 4);
		assert_int_equal(stub_classify(deb12, mem, CTX, &p, &bp), PROTO_SITE_ORIGINAL);
		assert_true(bp);
	}
	memcpy(mem, deb12, CTX);
	memcpy(mem + 0x24, BRK_5, 4);
	assert_int_equal(stub_classify(deb12, mem, CTX, &p, &bp), PROTO_SITE_TORN);
	assert_true(bp);
	/* Half our branch, half the file's: nobody writes that. */
	memcpy(mem, guarded, CTX);
	memcpy(mem + 0x24, deb12 + 0x24, 2);
	assert_int_equal(stub_classify(deb12, mem, CTX, &p, &bp), PROTO_SITE_FOREIGN);
}

/*
 * A process an older btguard guarded (the stub after the first
 * instruction, 12 bytes) is still recognised, after the new plan: status
 * says guarded, unguard finds what to undo.
 */
static void the_older_placement_still_recognised(void **state)
{
	struct stub_plan first, plans[STUB_MAX_PLANS], old;
	uint8_t mem[CTX];
	bool bp;
	size_t n;
	(void)state;
	assert_int_equal(stub_plan_function(deb12, sizeof(deb12), CTX, DEB12_ADDR, 0, &first), 0);
	n = stub_plans(deb12, CTX, 0, &first, plans, STUB_MAX_PLANS);
	assert_true(n >= 2);
	assert_int_equal(plans[0].offset, 0x24);
	assert_int_equal(stub_plan_following(deb12, CTX, 0, &old), 0);
	assert_int_equal(plans[1].offset, old.offset);
	assert_int_equal(plans[1].len, 12);
	stub_apply(deb12, CTX, &old, mem);
	assert_int_equal(stub_classify(deb12, mem, CTX, &plans[0], &bp), PROTO_SITE_FOREIGN);
	assert_int_equal(stub_classify(deb12, mem, CTX, &plans[1], &bp), PROTO_SITE_GUARDED);
}

static void word_must_fit(void **state)
{
	struct stub_plan p;
	(void)state;
	assert_int_equal(stub_plan((const uint8_t *)(PROLOGUE FILL), 19, 0, &p), -EINVAL);
	assert_int_equal(stub_plan((const uint8_t *)(PROLOGUE FILL), 20, 0, &p), 0);
	assert_int_equal(stub_plan((const uint8_t *)(MOV_X0_X1 FILL), 7, 0, &p), -EINVAL);
	assert_int_equal(stub_plan((const uint8_t *)(BTI_C PROLOGUE), 11, 0, &p), -EINVAL);
	assert_int_equal(stub_plan((const uint8_t *)(BTI_C PROLOGUE), 12, 0, &p), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(entry_undone_before_the_stub),
		cmocka_unit_test(no_undo_stub_at_entry),
		cmocka_unit_test(breakpoint_on_the_entry_seen_through),
		cmocka_unit_test(torn_by_a_uprobe_inside_the_change),
		cmocka_unit_test(bti_c_kept_plain_ret),
		cmocka_unit_test(paciasp_kept_retaa_with_pauth),
		cmocka_unit_test(pac_without_pauth_plain_ret),
		cmocka_unit_test(pacibsp_never_retaa),
		cmocka_unit_test(word_must_fit),
		cmocka_unit_test(plan_one_branch_to_the_return_zero_path),
		cmocka_unit_test(every_broken_fact_falls_back),
		cmocka_unit_test(a_uprobe_on_the_branch_tears_it),
		cmocka_unit_test(the_older_placement_still_recognised),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
