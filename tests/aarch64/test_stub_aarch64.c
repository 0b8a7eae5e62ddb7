// SPDX-License-Identifier: MIT
/*
 * Unit tests for stub placement with the aarch64 table (daemon/arch/
 * aarch64/arch_stub.h), built and run on any host: stub.c is pure and
 * takes the CPU features as an argument.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

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

static void plan(const char *code, size_t len, unsigned features, size_t offset, const char *stub)
{
	struct stub_plan p;
	uint8_t out[16];

	assert_int_equal(stub_plan((const uint8_t *)code, len, features, &p), 0);
	assert_int_equal(p.offset, offset);
	assert_int_equal(p.len, 8);
	assert_memory_equal(p.bytes, stub, 8);
	stub_apply((const uint8_t *)code, len, &p, out);
	/* The pad, if any, is kept; the stub follows; the rest is untouched. */
	assert_memory_equal(out, code, offset);
	assert_memory_equal(out + offset, stub, 8);
	assert_memory_equal(out + offset + 8, code + offset + 8, len - offset - 8);
}

static void no_pad_stub_at_entry(void **state)
{
	(void)state;
	plan(PROLOGUE "\0\0\0\0\0\0\0\0", 16, 0, 0, MOV_W0_0 RET);
	plan(PROLOGUE "\0\0\0\0\0\0\0\0", 16, ARCH_FEATURE_PAUTH, 0, MOV_W0_0 RET);
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
	assert_int_equal(stub_plan((const uint8_t *)PROLOGUE, 7, 0, &p), -EINVAL);
	assert_int_equal(stub_plan((const uint8_t *)(BTI_C PROLOGUE), 11, 0, &p), -EINVAL);
	assert_int_equal(stub_plan((const uint8_t *)(BTI_C PROLOGUE), 12, 0, &p), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(no_pad_stub_at_entry),
		cmocka_unit_test(bti_c_kept_plain_ret),
		cmocka_unit_test(paciasp_kept_retaa_with_pauth),
		cmocka_unit_test(pac_without_pauth_plain_ret),
		cmocka_unit_test(pacibsp_never_retaa),
		cmocka_unit_test(word_must_fit),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
