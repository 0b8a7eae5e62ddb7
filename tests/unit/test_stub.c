// SPDX-License-Identifier: MIT
/*
 * Unit tests for stub placement and classification (stub.c) and the pure
 * parts of the activeness check (stackcheck.c).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "../../proto/proto.h"
#include "stackcheck.h"
#include "stub.h"

/* glibc 2.36 backtrace() begins like this on Debian 12 (no endbr64). */
static const uint8_t plain[16] = { 0x41, 0x57, 0x41, 0x56, 0x41, 0x55, 0x41, 0x54,
				   0x55, 0x53, 0x48, 0x83, 0xec, 0x48, 0x64, 0x48 };
/* The same function built with -fcf-protection: an endbr64 landing pad first. */
static const uint8_t ibt[16] = { 0xf3, 0x0f, 0x1e, 0xfa, 0x41, 0x57, 0x41, 0x56,
				 0x41, 0x55, 0x41, 0x54, 0x55, 0x53, 0x48, 0x83 };

static void plan_without_endbr64_starts_at_entry(void **state)
{
	struct stub_plan p;
	(void)state;
	assert_int_equal(stub_plan(plain, sizeof(plain), 0, &p), 0);
	assert_int_equal(p.offset, 0);
	assert_int_equal(p.len, 3);
	assert_memory_equal(p.bytes, "\x31\xc0\xc3", 3);
}

static void plan_with_endbr64_keeps_landing_pad(void **state)
{
	struct stub_plan p;
	uint8_t out[16];
	(void)state;
	assert_int_equal(stub_plan(ibt, sizeof(ibt), 0, &p), 0);
	assert_int_equal(p.offset, 4);
	stub_apply(ibt, sizeof(ibt), &p, out);
	assert_memory_equal(out, "\xf3\x0f\x1e\xfa\x31\xc0\xc3", 7);
	assert_memory_equal(out + 7, ibt + 7, sizeof(ibt) - 7);
}

static void plan_refuses_when_the_word_does_not_fit(void **state)
{
	struct stub_plan p;
	(void)state;
	assert_int_equal(stub_plan(plain, 7, 0, &p), -EINVAL);
	assert_int_equal(stub_plan(plain, 8, 0, &p), 0);
	assert_int_equal(stub_plan(ibt, 11, 0, &p), -EINVAL);
	assert_int_equal(stub_plan(ibt, 12, 0, &p), 0);
}

static void classify_original_guarded_foreign(void **state)
{
	struct stub_plan p;
	uint8_t mem[16];
	(void)state;
	assert_int_equal(stub_plan(plain, sizeof(plain), 0, &p), 0);
	assert_int_equal(stub_classify(plain, plain, sizeof(plain), &p), PROTO_SITE_ORIGINAL);
	stub_apply(plain, sizeof(plain), &p, mem);
	assert_int_equal(stub_classify(plain, mem, sizeof(mem), &p), PROTO_SITE_GUARDED);
	/* A stub with different surroundings means another file: foreign. */
	mem[10] ^= 0xff;
	assert_int_equal(stub_classify(plain, mem, sizeof(mem), &p), PROTO_SITE_FOREIGN);
	/* Someone else's patch (gdb's int3, say) is foreign too. */
	memcpy(mem, plain, sizeof(plain));
	mem[0] = 0xcc;
	assert_int_equal(stub_classify(plain, mem, sizeof(mem), &p), PROTO_SITE_FOREIGN);
}

static void classify_endbr64_stub_placement_matters(void **state)
{
	struct stub_plan p;
	uint8_t mem[16];
	(void)state;
	assert_int_equal(stub_plan(ibt, sizeof(ibt), 0, &p), 0);
	/* A stub written over the landing pad is not ours. */
	memcpy(mem, ibt, sizeof(ibt));
	memcpy(mem, "\x31\xc0\xc3", 3);
	assert_int_equal(stub_classify(ibt, mem, sizeof(mem), &p), PROTO_SITE_FOREIGN);
	stub_apply(ibt, sizeof(ibt), &p, mem);
	assert_int_equal(stub_classify(ibt, mem, sizeof(mem), &p), PROTO_SITE_GUARDED);
}

static void pc_unsafe_only_strictly_inside(void **state)
{
	struct stackcheck_span s[2] = { { 0x1000, 0x1003 }, { 0x2004, 0x2007 } };
	(void)state;
	/* At the first byte a thread starts the new instructions cleanly. */
	assert_false(stackcheck_pc_unsafe(0x1000, s, 2));
	assert_true(stackcheck_pc_unsafe(0x1001, s, 2));
	assert_true(stackcheck_pc_unsafe(0x1002, s, 2));
	/* Past the changed bytes the original code continues unchanged. */
	assert_false(stackcheck_pc_unsafe(0x1003, s, 2));
	assert_false(stackcheck_pc_unsafe(0x0fff, s, 2));
	assert_true(stackcheck_pc_unsafe(0x2005, s, 2));
	assert_false(stackcheck_pc_unsafe(0x2004, s, 2));
	assert_false(stackcheck_pc_unsafe(0x1001, s, 0));
}

static void scan_words_finds_return_address(void **state)
{
	struct stackcheck_span s = { 0x7f0000001000, 0x7f0000001003 };
	uint64_t words[6] = { 0, 0x7f0000001000, 0x7f0000001003, 42, 0x7f0000001002, 7 };
	uint64_t pc = 0;
	(void)state;
	assert_true(stackcheck_scan_words(words, 6, &s, 1, &pc));
	assert_int_equal(pc, 0x7f0000001002);
	assert_false(stackcheck_scan_words(words, 4, &s, 1, &pc));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(plan_without_endbr64_starts_at_entry),
		cmocka_unit_test(plan_with_endbr64_keeps_landing_pad),
		cmocka_unit_test(plan_refuses_when_the_word_does_not_fit),
		cmocka_unit_test(classify_original_guarded_foreign),
		cmocka_unit_test(classify_endbr64_stub_placement_matters),
		cmocka_unit_test(pc_unsafe_only_strictly_inside),
		cmocka_unit_test(scan_words_finds_return_address),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
