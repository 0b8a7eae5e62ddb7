// SPDX-License-Identifier: MIT
/*
 * Fuzzes the CFI decoder (daemon/node/cfi.c), whose input is any .eh_frame
 * and .eh_frame_hdr a target maps.  The input is an address space of its
 * own bytes at BASE: its first two bytes give where an FDE starts, its
 * next byte an opcode to look for (0x00-0x3f).  Every input goes to
 * cfi_find_op() (that FDE and its CIE), to cfi_program_find_op() (the
 * whole input as one program) and to cfi_fde_for() (the input as a
 * search table).  Properties:
 *  - only 0, -EINVAL, -EFAULT and -E2BIG (-ENOENT from the table);
 *  - every address found lies in the input, and its byte is the opcode;
 *  - at most max found, in increasing order within each program;
 *  - an FDE the table gives lies in the space the input's words can name.
 */
#include <errno.h>

#include "cfi.h"
#include "fuzz.h"

#define BASE 0x10000u
#define MAX  16u

struct space {
	const uint8_t *p;
	size_t len;
};

static int space_read(void *ctx, uint64_t addr, void *buf, size_t len)
{
	const struct space *s = ctx;

	if (addr < BASE || addr - BASE > s->len || len > s->len - (addr - BASE))
		return -EFAULT;
	memcpy(buf, s->p + (addr - BASE), len);
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t *in = fuzz_copy(data, size);
	struct space s = { in, size };
	uint64_t at[MAX], fde = 0;
	size_t offs[MAX], n = 0;
	uint8_t op = size > 2 ? in[2] & 0x3fu : 0x2d;
	uint64_t where = size > 1 ? BASE + (uint64_t)(in[0] | in[1] << 8) : BASE;
	int r;

	r = cfi_find_op(space_read, &s, where, op, at, MAX, &n);
	FUZZ_CHECK(r == 0 || r == -EINVAL || r == -EFAULT || r == -E2BIG);
	if (r == 0) {
		FUZZ_CHECK(n <= MAX);
		for (size_t i = 0; i < n; i++) {
			FUZZ_CHECK(at[i] >= BASE && at[i] - BASE < size);
			FUZZ_CHECK(in[at[i] - BASE] == op);
		}
	}
	r = cfi_program_find_op(in, size, size > 3 ? in[3] : 0x1b, op, offs, MAX, &n);
	FUZZ_CHECK(r == 0 || r == -EINVAL || r == -E2BIG);
	if (r == 0) {
		FUZZ_CHECK(n <= MAX);
		for (size_t i = 0; i < n; i++) {
			FUZZ_CHECK(offs[i] < size && in[offs[i]] == op);
			FUZZ_CHECK(i == 0 || offs[i] > offs[i - 1]);
		}
	}
	r = cfi_fde_for(space_read, &s, BASE, BASE, size / 8, BASE + (size > 4 ? in[4] : 0) * 64u,
			&fde);
	FUZZ_CHECK(r == 0 || r == -ENOENT || r == -EFAULT);
	if (r == 0)
		FUZZ_CHECK(fde - BASE + 0x80000000ull < 0x100000000ull);   /* BASE + an int32 */
	free(in);
	return 0;
}
