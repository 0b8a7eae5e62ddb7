/* SPDX-License-Identifier: MIT */
/*
 * The guard stub: where it goes in a function, what the guarded bytes look
 * like, and how to tell original, guarded and foreign bytes apart.  Pure
 * functions over byte arrays; the CPU facts come from arch.h.
 */
#ifndef BTGUARD_STUB_H
#define BTGUARD_STUB_H

#include <stddef.h>
#include <stdint.h>

#include "arch_stub.h"

struct stub_plan {
	size_t  offset;                 /* from the function entry: after a landing pad */
	size_t  len;                    /* ARCH_STUB_LEN */
	uint8_t bytes[ARCH_STUB_LEN];
};

/*
 * Plans the stub for a function whose original first bytes are
 * code[0..len), on a CPU with the ARCH_FEATURE_* bits in features (the
 * daemon passes arch_cpu_features(); tests pass what they test).  A known
 * landing pad stays first and the stub follows it.  The stub and the ptrace
 * word that carries it must fit: -EINVAL when len < offset + ARCH_WORD_LEN.
 */
int stub_plan(const uint8_t *code, size_t len, unsigned features, struct stub_plan *ret);

/* out[0..len) = orig with the stub laid over it. */
void stub_apply(const uint8_t *orig, size_t len, const struct stub_plan *plan, uint8_t *out);

/*
 * Classifies the bytes a target holds (mem) against the object file's
 * (orig): PROTO_SITE_ORIGINAL, PROTO_SITE_GUARDED or PROTO_SITE_FOREIGN.
 * When the original already equals the stub, the site counts as guarded.
 */
int stub_classify(const uint8_t *orig, const uint8_t *mem, size_t len,
		  const struct stub_plan *plan);

#endif
