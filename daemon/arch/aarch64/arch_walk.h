/* SPDX-License-Identifier: MIT */
/*
 * aarch64: no derivation yet of where glibc's backtrace() hands its helper
 * to the unwinder (engine/walk.c): every guard asked to walk the segment
 * falls back to the empty stub, and says so.
 */
#ifndef BTGUARD_ARCH_WALK_H
#define BTGUARD_ARCH_WALK_H

#include <errno.h>
#include <stddef.h>
#include <stdint.h>

#define ARCH_WALK           0
#define ARCH_WALK_CALL_LEN  4u
#define ARCH_WALK_ALIGN     16u

struct arch_walk_facts {
	uint64_t call_off, return_off, helper_off, array_offset, count_offset;
};

static inline int arch_walk_derive(const uint8_t *code, size_t len, struct arch_walk_facts *ret)
{
	(void)code, (void)len, (void)ret;
	return -ENOENT;
}

static inline void arch_walk_call_bytes(uint64_t func, const struct arch_walk_facts *f,
					uint64_t target, uint8_t out[ARCH_WALK_CALL_LEN])
{
	(void)func, (void)f, (void)target, (void)out;
}

static inline int arch_walk_reaches(uint64_t func, const struct arch_walk_facts *f, uint64_t target)
{
	(void)func, (void)f, (void)target;
	return 0;
}

#endif
