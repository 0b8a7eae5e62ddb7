// SPDX-License-Identifier: MIT
/*
 * Stub placement and byte classification.  The stub is written with every
 * thread held and verified word by word (patch.c); on x86-64 it always
 * fits one ptrace word starting at the stub, on aarch64 an undone first
 * instruction makes it two (arch_stub.h says why both are safe).
 */
#include <errno.h>
#include <string.h>

#include "proto.h"
#include "stub.h"

/* A landing pad the stub goes after, and the stub that follows it. */
struct landing_pad {
	uint8_t  pad[ARCH_LANDING_PAD_LEN];
	unsigned needs;                 /* ARCH_FEATURE_* the stub below needs, or 0 */
	uint8_t  stub[ARCH_STUB_LEN];
};

static const uint8_t stub_bytes[ARCH_STUB_LEN] = ARCH_STUB_BYTES;
static const struct landing_pad landing_pads[] = ARCH_LANDING_PADS;
static const uint8_t breakpoints[][ARCH_BREAKPOINT_LEN] = ARCH_BREAKPOINTS;

static const struct landing_pad *find_landing_pad(const uint8_t *code, size_t len)
{
	for (size_t i = 0; i < sizeof(landing_pads) / sizeof(landing_pads[0]); i++)
		if (len >= ARCH_LANDING_PAD_LEN && !memcmp(code, landing_pads[i].pad, ARCH_LANDING_PAD_LEN))
			return &landing_pads[i];
	return NULL;
}

/* The stub to put after pad (or with no pad), on a CPU with features. */
static const uint8_t *stub_after(const struct landing_pad *pad, unsigned features)
{
	/* Without the feature the pad is a no-op hint: the plain stub is right. */
	if (pad && (pad->needs & features) == pad->needs)
		return pad->stub;
	return stub_bytes;
}

/* ret->offset, ->len and ->bytes set: checks the fit and counts the words. */
static int finish_plan(size_t code_len, struct stub_plan *ret)
{
	ret->nwords = (ret->len + ARCH_WORD_LEN - 1) / ARCH_WORD_LEN;
	if (code_len < ret->offset + ret->nwords * ARCH_WORD_LEN)
		return -EINVAL;
	return 0;
}

int stub_plan(const uint8_t *code, size_t len, unsigned features, struct stub_plan *ret)
{
	const struct landing_pad *pad = find_landing_pad(code, len);
	uint8_t undo[ARCH_CHANGE_MAX];
	size_t insn_len = 0, undo_len = 0;

	if (!pad)
		undo_len = arch_entry_undo(code, len, undo, &insn_len);
	memset(ret, 0, sizeof(*ret));
	ret->offset = pad ? ARCH_LANDING_PAD_LEN : insn_len;
	ret->len = undo_len + ARCH_STUB_LEN;
	_Static_assert(ARCH_CHANGE_MAX >= ARCH_STUB_LEN, "the stub fits a change");
	if (ret->len > ARCH_CHANGE_MAX)
		return -EINVAL;  /* cannot be: arch_stub.h sizes it */
	memcpy(ret->bytes, undo, undo_len);
	memcpy(ret->bytes + undo_len, stub_after(pad, features), ARCH_STUB_LEN);
	return finish_plan(len, ret);
}

int stub_plan_at_entry(const uint8_t *code, size_t len, unsigned features,
		       struct stub_plan *ret)
{
	const struct landing_pad *pad = find_landing_pad(code, len);
	size_t insn_len;
	uint8_t undo[ARCH_CHANGE_MAX];

	if (pad || !arch_entry_undo(code, len, undo, &insn_len))
		return -ENOENT;  /* stub_plan() puts it where it always did */
	memset(ret, 0, sizeof(*ret));
	ret->len = ARCH_STUB_LEN;
	memcpy(ret->bytes, stub_bytes, ARCH_STUB_LEN);
	(void)features;  /* no pad: the plain stub whatever the CPU */
	return finish_plan(len, ret);
}

void stub_apply(const uint8_t *orig, size_t len, const struct stub_plan *plan, uint8_t *out)
{
	memcpy(out, orig, len);
	memcpy(out + plan->offset, plan->bytes, plan->len);
}

/* Whether p begins with one of the CPU's breakpoint instructions. */
static bool is_breakpoint(const uint8_t *p)
{
	for (size_t i = 0; i < sizeof(breakpoints) / sizeof(breakpoints[0]); i++)
		if (!memcmp(p, breakpoints[i], ARCH_BREAKPOINT_LEN))
			return true;
	return false;
}

int stub_classify(const uint8_t *orig, const uint8_t *mem, size_t len,
		  const struct stub_plan *plan, bool *ret_breakpoint)
{
	uint8_t guarded[256], seen[256];

	*ret_breakpoint = false;
	if (len > sizeof(guarded) || len < plan->offset + plan->len)
		return PROTO_SITE_FOREIGN;
	memcpy(seen, mem, len);
	/*
	 * The kernel's (or a debugger's) breakpoint over a first instruction
	 * we leave alone: it will be put back as the file has it, and a hit
	 * runs the file's instruction and then our bytes, so the rest decides.
	 */
	if (plan->offset >= ARCH_BREAKPOINT_LEN && is_breakpoint(mem) &&
	    memcmp(orig, mem, ARCH_BREAKPOINT_LEN)) {
		memcpy(seen, orig, ARCH_BREAKPOINT_LEN);
		*ret_breakpoint = true;
	}
	stub_apply(orig, len, plan, guarded);
	if (!memcmp(seen, guarded, len))
		return PROTO_SITE_GUARDED;
	if (!memcmp(seen, orig, len))
		return PROTO_SITE_ORIGINAL;
	*ret_breakpoint = false;
	return PROTO_SITE_FOREIGN;
}
