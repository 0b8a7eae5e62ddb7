// SPDX-License-Identifier: MIT
/*
 * Stub placement and byte classification.  The whole stub always travels
 * in one ptrace word starting at the stub itself (both x86-64 and arm64
 * ptrace take the unaligned word; arch_stub.h says why that is safe), so
 * a target sees either all of it or none of it.
 */
#include <errno.h>
#include <string.h>

#include "../proto/proto.h"
#include "stub.h"

/* A landing pad the stub goes after, and the stub that follows it. */
struct landing_pad {
	uint8_t  pad[ARCH_LANDING_PAD_LEN];
	unsigned needs;                 /* ARCH_FEATURE_* the stub below needs, or 0 */
	uint8_t  stub[ARCH_STUB_LEN];
};

static const uint8_t stub_bytes[ARCH_STUB_LEN] = ARCH_STUB_BYTES;
static const struct landing_pad landing_pads[] = ARCH_LANDING_PADS;

int stub_plan(const uint8_t *code, size_t len, unsigned features, struct stub_plan *ret)
{
	const uint8_t *bytes = stub_bytes;
	size_t offset = 0;

	for (size_t i = 0; i < sizeof(landing_pads) / sizeof(landing_pads[0]); i++) {
		const struct landing_pad *p = &landing_pads[i];

		if (len < ARCH_LANDING_PAD_LEN || memcmp(code, p->pad, ARCH_LANDING_PAD_LEN))
			continue;
		offset = ARCH_LANDING_PAD_LEN;
		/* Without the feature the pad is a no-op hint: the plain stub is right. */
		if ((p->needs & features) == p->needs)
			bytes = p->stub;
		break;
	}
	if (len < offset + ARCH_WORD_LEN)
		return -EINVAL;
	ret->offset = offset;
	ret->len = ARCH_STUB_LEN;
	memcpy(ret->bytes, bytes, ARCH_STUB_LEN);
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
