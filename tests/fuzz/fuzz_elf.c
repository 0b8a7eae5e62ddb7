// SPDX-License-Identifier: MIT
/*
 * Fuzzes the ELF symbol look-up of daemon/node/elf.c on arbitrary "ELF images".
 * The daemon runs it, as root, over every object any user's process maps,
 * so a hostile file must give an error and never a read past the image:
 * the input is an exact-size heap buffer with ASan's redzone right behind.
 *
 * Two names are looked up: "backtrace" (what the daemon asks for) with room
 * for every definition, and "backtrace_symbols_fd" with room for one (the
 * cap path).  Properties of every answer:
 *  - errors are -ENOEXEC or -EBADMSG, and leave *ret_n alone;
 *  - at most max definitions, with distinct addresses;
 *  - each definition's [file_offset, file_offset + file_avail) is a
 *    non-empty range inside the image (the caller compares those bytes);
 *  - the same input gives the same answer (no hidden state).
 */
#include <errno.h>
#include <stdbool.h>

#include "elf.h"
#include "fuzz.h"

#define UNTOUCHED ((size_t)0x5a5a5a5a)

static void check_answer(const uint8_t *img, size_t len, const char *name, size_t max)
{
	struct elf_def defs[ELF_MAX_DEFS], again[ELF_MAX_DEFS];
	size_t n = UNTOUCHED, n_again = UNTOUCHED;
	int r, r_again;

	r = elf_find_symbol(img, len, name, defs, max, &n);
	if (r < 0) {
		FUZZ_CHECK(r == -ENOEXEC || r == -EBADMSG);
		FUZZ_CHECK(n == UNTOUCHED);
	} else {
		FUZZ_CHECK(r == 0 && n <= max);
		for (size_t i = 0; i < n; i++) {
			FUZZ_CHECK(defs[i].file_offset < len);
			FUZZ_CHECK(defs[i].file_avail >= 1);
			FUZZ_CHECK(defs[i].file_avail <= len - defs[i].file_offset);
			for (size_t j = 0; j < i; j++)
				FUZZ_CHECK(defs[i].value != defs[j].value);
		}
	}

	r_again = elf_find_symbol(img, len, name, again, max, &n_again);
	FUZZ_CHECK(r_again == r);
	if (r == 0) {
		FUZZ_CHECK(n_again == n);
		for (size_t i = 0; i < n; i++)
			FUZZ_CHECK(again[i].value == defs[i].value &&
				   again[i].size == defs[i].size &&
				   again[i].file_offset == defs[i].file_offset &&
				   again[i].file_avail == defs[i].file_avail &&
				   again[i].from_symtab == defs[i].from_symtab);
	}
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t *img = fuzz_copy(data, size);

	check_answer(img, size, "backtrace", ELF_MAX_DEFS);
	check_answer(img, size, "backtrace_symbols_fd", 1);
	free(img);
	return 0;
}
