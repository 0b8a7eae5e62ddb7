/* SPDX-License-Identifier: MIT */
/*
 * What every fuzz harness shares: the libFuzzer entry points (declared here
 * so -Wmissing-prototypes holds), an exact-size copy of the input, and the
 * check macro that turns a broken property into a crash the fuzzer saves.
 * Each harness builds twice from the same file: linked with libFuzzer
 * (`make fuzz`), and linked with replay_main.c to replay its corpus in
 * `make check`.
 */
#ifndef BTGUARD_FUZZ_H
#define BTGUARD_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);
int LLVMFuzzerInitialize(int *argc, char ***argv);

/*
 * libFuzzer's own buffer may be larger than size, so a read one byte past
 * the input would go unseen; a malloc of exactly size bytes puts ASan's
 * redzone right behind the last byte.  Never NULL: glibc and ASan both
 * return a valid, empty allocation for size 0, so even one byte read from
 * an empty input is caught.
 */
static inline uint8_t *fuzz_copy(const uint8_t *data, size_t size)
{
	uint8_t *p = malloc(size);

	if (!p)
		abort();
	/* Unconditional, or gcc thinks an empty copy is uninitialized. */
	memcpy(p, size ? data : (const uint8_t *)"", size);
	return p;
}

/* A property that must hold for every input; abort() makes it a finding. */
#define FUZZ_CHECK(cond)                                                        \
	do {                                                                    \
		if (!(cond)) {                                                  \
			fprintf(stderr, "%s:%d: property violated: %s\n",       \
				__FILE__, __LINE__, #cond);                     \
			abort();                                                \
		}                                                               \
	} while (0)

#endif
