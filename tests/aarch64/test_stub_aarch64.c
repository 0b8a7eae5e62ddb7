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
 * Debian 12's glibc backtrace() begins "stp x29, x30, [sp, #-N]!; mov x29,
 * sp; stp x19, x20, ...": the change (add sp; mov w0, #0; ret) covers three
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
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
