// SPDX-License-Identifier: MIT
/*
 * Stub placement and byte classification.  The whole stub always travels
 * in one ptrace word starting at the stub itself (x86 allows the unaligned
 * word), so a target sees either all of it or none of it.
 */
#include <errno.h>
#include <string.h>

#include "../proto/proto.h"
#include "stub.h"

static const uint8_t stub_bytes[ARCH_STUB_LEN] = ARCH_STUB_BYTES;
static const uint8_t landing_pad[ARCH_LANDING_PAD_LEN] = ARCH_LANDING_PAD_BYTES;

int stub_plan(const uint8_t *code, size_t len, struct stub_plan *ret)
{
	size_t offset = 0;

	if (len >= ARCH_LANDING_PAD_LEN && !memcmp(code, landing_pad, ARCH_LANDING_PAD_LEN))
		offset = ARCH_LANDING_PAD_LEN;
	if (len < offset + ARCH_WORD_LEN)
		return -EINVAL;
	ret->offset = offset;
	ret->len = ARCH_STUB_LEN;
	memcpy(ret->bytes, stub_bytes, ARCH_STUB_LEN);
	return 0;
}

void stub_apply(const uint8_t *orig, size_t len, const struct stub_plan *plan, uint8_t *out)
{
	memcpy(out, orig, len);
	memcpy(out + plan->offset, plan->bytes, plan->len);
}

int stub_classify(const uint8_t *orig, const uint8_t *mem, size_t len,
		  const struct stub_plan *plan)
{
	uint8_t guarded[256];

	if (len > sizeof(guarded) || len < plan->offset + plan->len)
		return PROTO_SITE_FOREIGN;
	stub_apply(orig, len, plan, guarded);
	if (!memcmp(mem, guarded, len))
		return PROTO_SITE_GUARDED;
	if (!memcmp(mem, orig, len))
		return PROTO_SITE_ORIGINAL;
	return PROTO_SITE_FOREIGN;
}
