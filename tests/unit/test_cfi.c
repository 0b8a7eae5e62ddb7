// SPDX-License-Identifier: MIT
/*
 * Unit tests for node/cfi.c: finding one CFI instruction in .eh_frame's
 * records, on the real first CIE and FDE of Debian 13's arm64 glibc (a
 * pac-ret function: two DW_CFA_AARCH64_negate_ra_state), and on programs
 * where that opcode's value is an operand byte, never an instruction.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "cfi.h"

#define NEGATE_RA_STATE 0x2d
#define BASE            0x1701c8u   /* where the bytes lie in the file: .eh_frame */

/* .eh_frame of Debian 13's libc.so.6 (2.41-12, arm64), its first 72 bytes: a CIE "zR", an FDE. */
static const uint8_t trixie_libc[72] = {
	0x10, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x00, 0x01, 0x7a, 0x52, 0x00,
	0x04, 0x78, 0x1e, 0x01, 0x1b, 0x0c, 0x1f, 0x00, 0x30, 0x00, 0x00, 0x00,
	0x18, 0x00, 0x00, 0x00, 0xdc, 0x1e, 0xeb, 0xff, 0xc8, 0x00, 0x00, 0x00,
	0x00, 0x41, 0x2d, 0x41, 0x0e, 0xb0, 0x01, 0x9d, 0x16, 0x9e, 0x15, 0x42,
	0x93, 0x14, 0x94, 0x13, 0x48, 0x0a, 0xde, 0xdd, 0xd3, 0xd4, 0x0e, 0x00,
	0x41, 0x2d, 0x41, 0x0b, 0x47, 0x95, 0x12, 0x58, 0x0a, 0xd5, 0x41, 0x0b
};

struct image {
	const uint8_t *p;
	size_t len;
	uint64_t base;
	unsigned reads;
};

static int image_read(void *ctx, uint64_t addr, void *buf, size_t len)
{
	struct image *im = ctx;

	im->reads++;
	if (addr < im->base || addr - im->base > im->len || len > im->len - (addr - im->base))
		return -EFAULT;
	memcpy(buf, im->p + (addr - im->base), len);
	return 0;
}

static void finds_both_in_debian13s_fde(void **state)
{
	struct image im = { trixie_libc, sizeof(trixie_libc), BASE, 0 };
	uint64_t at[8];
	size_t n = 99;

	(void)state;
	assert_int_equal(cfi_find_op(image_read, &im, BASE + 0x14, NEGATE_RA_STATE, at, 8, &n), 0);
	/* readelf --debug-dump=frames: after the first advance_loc, and after the epilogue's. */
	assert_int_equal(n, 2);
	assert_int_equal(at[0], BASE + 0x26);
	assert_int_equal(at[1], BASE + 0x3d);
	assert_int_equal(trixie_libc[at[0] - BASE], NEGATE_RA_STATE);
	assert_int_equal(trixie_libc[at[1] - BASE], NEGATE_RA_STATE);
	/* Room for one only: said, not cut short. */
	assert_int_equal(cfi_find_op(image_read, &im, BASE + 0x14, NEGATE_RA_STATE, at, 1, &n),
			 -E2BIG);
}

static void refuses_broken_records(void **state)
{
	static const struct {
		const char *what;
		size_t at;
		uint8_t value;
		int want;
	} broken[] = {
		{ "an FDE whose CIE pointer leads outside the image", 24, 0x40, -EFAULT },
		{ "a length past the image", 20, 0x60, -EFAULT },
		{ "a CIE augmentation it does not know (\"zX\")", 10, 'X', -EINVAL },
		{ "a CIE version it does not know", 8, 2, -EINVAL },
		{ "an opcode it does not know in the FDE's program", 0x2b, 0x3f, -EINVAL },
	};
	uint8_t bad[sizeof(trixie_libc)];
	struct image im = { bad, sizeof(bad), BASE, 0 };
	uint64_t at[8];
	size_t n;

	(void)state;
	for (size_t i = 0; i < sizeof(broken) / sizeof(broken[0]); i++) {
		memcpy(bad, trixie_libc, sizeof(bad));
		bad[broken[i].at] = broken[i].value;
		if (cfi_find_op(image_read, &im, BASE + 0x14, NEGATE_RA_STATE, at, 8, &n) !=
		    broken[i].want)
			fail_msg("%s: not refused as %d", broken[i].what, broken[i].want);
	}
	/* The record that ends the section (length 0) is no FDE. */
	memset(bad, 0, sizeof(bad));
	assert_int_equal(cfi_find_op(image_read, &im, BASE, NEGATE_RA_STATE, at, 8, &n), -EINVAL);
}

static void an_operand_of_that_value_is_no_instruction(void **state)
{
	static const uint8_t prog[] = {
		0x05, 0x2d, 0x2d,            /* offset_extended r45, 45 */
		0x0e, 0x2d,                  /* def_cfa_offset 45 */
		0x02, 0x2d,                  /* advance_loc1 45 */
		0x03, 0x2d, 0x2d,            /* advance_loc2 */
		0x04, 0x2d, 0x2d, 0x2d, 0x2d,  /* advance_loc4 */
		0xad, 0x2d,                  /* offset r45, 45 (0x80 | 45) */
		0x0f, 0x02, 0x2d, 0x2d,      /* def_cfa_expression, a 2-byte block of 0x2d */
		0x10, 0x2d, 0x01, 0x2d,      /* expression r45, a 1-byte block */
		0x12, 0xad, 0x2d, 0x2d,      /* def_cfa_sf: a two-byte LEB128, then one */
		0x01, 0x2d, 0x2d, 0x2d, 0x2d,  /* set_loc, sdata4 */
		0x2d,                        /* the instruction itself: offset 34 */
		0x2e, 0x2d,                  /* GNU_args_size 45 */
		0x2d,                        /* and again: offset 37 */
	};
	size_t at[4], n = 0;

	(void)state;
	assert_int_equal(cfi_program_find_op(prog, sizeof(prog), 0x1b, NEGATE_RA_STATE, at, 4, &n), 0);
	assert_int_equal(n, 2);
	assert_int_equal(at[0], 34);
	assert_int_equal(at[1], 37);
	/* An operand cut off by the end: refused, not read past. */
	assert_int_equal(cfi_program_find_op(prog, 3 + 1, 0x1b, NEGATE_RA_STATE, at, 4, &n), -EINVAL);
	assert_int_equal(cfi_program_find_op(prog, 20, 0x1b, NEGATE_RA_STATE, at, 4, &n), -EINVAL);
	/* A block longer than the program. */
	assert_int_equal(cfi_program_find_op((const uint8_t[]){ 0x0f, 0x7f, 0x00 }, 3, 0x1b,
					     NEGATE_RA_STATE, at, 4, &n), -EINVAL);
	/* A LEB128 that never ends. */
	assert_int_equal(cfi_program_find_op((const uint8_t[]){ 0x0e, 0x80, 0x80, 0x80 }, 4, 0x1b,
					     NEGATE_RA_STATE, at, 4, &n), -EINVAL);
}

/* .eh_frame_hdr's table: pairs of (start, FDE), datarel from the header. */
static void the_table_gives_the_covering_fde(void **state)
{
	static const int32_t table[][2] = { { 0x100, 0x1000 }, { 0x200, 0x1040 }, { 0x300, 0x1080 } };
	struct image im = { (const uint8_t *)table, sizeof(table), 0x5000, 0 };
	uint64_t fde = 0;

	(void)state;
	/* hdr 0x4000: starts 0x4100, 0x4200, 0x4300. */
	assert_int_equal(cfi_fde_for(image_read, &im, 0x4000, 0x5000, 3, 0x4100, &fde), 0);
	assert_int_equal(fde, 0x5000);
	assert_int_equal(cfi_fde_for(image_read, &im, 0x4000, 0x5000, 3, 0x42ff, &fde), 0);
	assert_int_equal(fde, 0x5040);
	assert_int_equal(cfi_fde_for(image_read, &im, 0x4000, 0x5000, 3, 0x9000, &fde), 0);
	assert_int_equal(fde, 0x5080);
	assert_int_equal(cfi_fde_for(image_read, &im, 0x4000, 0x5000, 3, 0x40ff, &fde), -ENOENT);
	assert_int_equal(cfi_fde_for(image_read, &im, 0x4000, 0x5000, 0, 0x4200, &fde), -ENOENT);
	/* A table that cannot be read. */
	assert_int_equal(cfi_fde_for(image_read, &im, 0x4000, 0x6000, 3, 0x4200, &fde), -EFAULT);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(finds_both_in_debian13s_fde),
		cmocka_unit_test(refuses_broken_records),
		cmocka_unit_test(an_operand_of_that_value_is_no_instruction),
		cmocka_unit_test(the_table_gives_the_covering_fde),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
