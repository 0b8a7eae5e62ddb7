// SPDX-License-Identifier: MIT
/*
 * Stub placement and byte classification.  The stub is written with every
 * thread held and verified word by word (patch.c); on x86-64 the bytes a
 * plan changes fit one ptrace word (inside the canary load: 8, its first
 * byte kept), on aarch64 too (one instruction, a branch to the function's
 * own return-0 path); where those cannot be proven, an undone first
 * instruction makes them two on aarch64, and so may on x86-64 a plan that
 * keeps more of the prologue around a breakpoint (arch_stub.h says why
 * these are safe).
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

/* Whether p begins with one of the CPU's breakpoint instructions. */
static bool is_breakpoint(const uint8_t *p)
{
	for (size_t i = 0; i < sizeof(breakpoints) / sizeof(breakpoints[0]); i++)
		if (!memcmp(p, breakpoints[i], ARCH_BREAKPOINT_LEN))
			return true;
	return false;
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

/* stub_plan() and stub_plan_function(): whole says code[0..len) is all of the function. */
static int plan_first(const uint8_t *code, size_t len, bool whole, size_t ctx_len, uint64_t addr,
		      unsigned features, struct stub_plan *ret)
{
	const struct landing_pad *pad = find_landing_pad(code, ctx_len);
	size_t at = 0, n;

	memset(ret, 0, sizeof(*ret));
	n = arch_plan_inside(code, len, whole, addr, pad ? ARCH_LANDING_PAD_LEN : 0, &at, ret->bytes,
			     sizeof(ret->bytes));
	if (n) {
		ret->offset = at;
		ret->len = n;
		ret->keep = ARCH_INSIDE_KEEP;
		if (finish_plan(ctx_len, ret) == 0)
			return 0;
	}
	return stub_plan_following(code, ctx_len, features, ret);
}

int stub_plan(const uint8_t *code, size_t len, unsigned features, struct stub_plan *ret)
{
	return plan_first(code, len, false, len, 0, features, ret);
}

int stub_plan_function(const uint8_t *code, size_t len, size_t ctx_len, uint64_t addr,
		       unsigned features, struct stub_plan *ret)
{
	if (ctx_len > len)
		return -EINVAL;
	return plan_first(code, len, true, ctx_len, addr, features, ret);
}

int stub_plan_following(const uint8_t *code, size_t len, unsigned features,
			struct stub_plan *ret)
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

int stub_plan_keeping(const uint8_t *code, size_t len, unsigned features, size_t nkeep,
		      struct stub_plan *ret)
{
	const struct landing_pad *pad = find_landing_pad(code, len);
	uint8_t undo[ARCH_CHANGE_MAX], piece[ARCH_CHANGE_MAX];
	size_t off = pad ? ARCH_LANDING_PAD_LEN : 0, undo_len = 0;
	uint32_t saved = 0;

	for (size_t i = 0; i < nkeep; i++) {
		size_t piece_len = 0, n = arch_next_undo(code + off, len - off, &saved, piece, &piece_len);

		if (!n || undo_len + piece_len + ARCH_STUB_LEN > ARCH_CHANGE_MAX)
			return -ENOENT;
		/* Undone last first: each undo goes before those of the instructions before it. */
		memmove(undo + piece_len, undo, undo_len);
		memcpy(undo, piece, piece_len);
		undo_len += piece_len;
		off += n;
	}
	memset(ret, 0, sizeof(*ret));
	ret->offset = off;
	ret->len = undo_len + ARCH_STUB_LEN;
	memcpy(ret->bytes, undo, undo_len);
	memcpy(ret->bytes + undo_len, stub_after(pad, features), ARCH_STUB_LEN);
	return finish_plan(len, ret);
}

static bool same_plan(const struct stub_plan *a, const struct stub_plan *b)
{
	return a->offset == b->offset && a->len == b->len && !memcmp(a->bytes, b->bytes, a->len);
}

size_t stub_plans(const uint8_t *code, size_t len, unsigned features, const struct stub_plan *first,
		  struct stub_plan *out, size_t max)
{
	struct stub_plan following;
	size_t n = 0;

	if (max == 0)
		return 0;
	if (first)
		out[n] = *first;
	else if (stub_plan(code, len, features, &out[n]) < 0)
		return 0;
	n++;
	if (stub_plan_following(code, len, features, &following) < 0)
		return n;   /* cannot be: stub_plan() fell back on it or fits before it */
	if (n < max && !same_plan(&out[0], &following))
		out[n++] = following;
	for (size_t keep = 1; n < max; keep++) {
		if (stub_plan_keeping(code, len, features, keep, &out[n]) < 0)
			break;
		/* Past the following plan's kept instructions only: the plans the stub grows into. */
		if (out[n].offset > following.offset && !same_plan(&out[0], &out[n]))
			n++;
	}
	if (n < max && stub_plan_at_entry(code, len, features, &out[n]) == 0 &&
	    !same_plan(&out[0], &out[n]))
		n++;
	return n;
}

bool stub_plan_clear_of_breakpoints(const uint8_t *orig, const uint8_t *mem, size_t len,
				    const struct stub_plan *plan)
{
	/* One word is written whole; a longer change, its own bytes (ptrace_poke_bytes()). */
	size_t end = plan->offset + (plan->nwords == 1 ? ARCH_WORD_LEN : plan->len);

	for (size_t u = plan->offset; u + ARCH_BREAKPOINT_LEN <= end && u + ARCH_BREAKPOINT_LEN <= len;
	     u += ARCH_BREAKPOINT_LEN)
		if (is_breakpoint(mem + u) && memcmp(orig + u, mem + u, ARCH_BREAKPOINT_LEN))
			return false;
	return true;
}

void stub_apply(const uint8_t *orig, size_t len, const struct stub_plan *plan, uint8_t *out)
{
	memcpy(out, orig, len);
	memcpy(out + plan->offset, plan->bytes, plan->len);
}

/*
 * The bytes inside the change, one breakpoint-sized unit at a time (on
 * aarch64 an instruction, on x86-64 a byte: where the kernel's and a
 * debugger's breakpoints go and what a uprobe's removal writes back):
 * each must be the stub's, the file's or a breakpoint, or the site is
 * foreign.  PROTO_SITE_GUARDED when every unit is the stub's,
 * PROTO_SITE_TORN when some are and some are not (the file's unit a
 * removed uprobe wrote back, or a breakpoint over ours),
 * PROTO_SITE_ORIGINAL when none is ours (the file's, breakpoints over it).
 */
static int classify_change(const uint8_t *orig, const uint8_t *seen, const uint8_t *guarded,
			   const struct stub_plan *plan, bool *breakpoint)
{
	size_t end = plan->offset + plan->len;
	bool ours = false, others = false, told = false;

	if (plan->offset % ARCH_BREAKPOINT_LEN || plan->len % ARCH_BREAKPOINT_LEN)
		return PROTO_SITE_FOREIGN;  /* cannot be: units are instructions */
	for (size_t u = plan->offset; u < end; u += ARCH_BREAKPOINT_LEN) {
		bool file = !memcmp(seen + u, orig + u, ARCH_BREAKPOINT_LEN);

		if (!memcmp(seen + u, guarded + u, ARCH_BREAKPOINT_LEN)) {
			ours = ours || !file;
			told = told || !file;
		} else if (file) {
			others = true;
			told = true;
		} else if (is_breakpoint(seen + u)) {
			others = true;
			*breakpoint = true;
		} else {
			return PROTO_SITE_FOREIGN;
		}
	}
	/*
	 * Breakpoints over every unit that would tell (aarch64's one-instruction
	 * guard under a uprobe): ours may be beneath, and calls now run the
	 * file's instruction, unguarded.  Torn, so that status warns and guard
	 * writes over it; the probe's removal leaves the file's or ours.
	 */
	if (!ours)
		return told ? PROTO_SITE_ORIGINAL : PROTO_SITE_TORN;
	return others ? PROTO_SITE_TORN : PROTO_SITE_GUARDED;
}

int stub_classify(const uint8_t *orig, const uint8_t *mem, size_t len,
		  const struct stub_plan *plan, bool *ret_breakpoint)
{
	uint8_t guarded[256], seen[256];
	size_t end = plan->offset + plan->len;
	bool breakpoint = false;
	int state;

	*ret_breakpoint = false;
	if (len > sizeof(guarded) || len < end)
		return PROTO_SITE_FOREIGN;
	memcpy(seen, mem, len);
	/*
	 * The kernel's (or a debugger's) breakpoint over an instruction we
	 * leave alone: one before the change (the first, or every one a plan
	 * keeps) will be put back as the file has it, and a hit runs the
	 * file's instruction and resumes at the next, the file's or our first;
	 * one after it is never reached while the stub returns, and is the
	 * file's code's when it does not.  So the change decides.
	 */
	for (size_t u = 0; u + ARCH_BREAKPOINT_LEN <= len; u += ARCH_BREAKPOINT_LEN) {
		if (u >= plan->offset && u < end)
			continue;
		if (is_breakpoint(mem + u) && memcmp(orig + u, mem + u, ARCH_BREAKPOINT_LEN)) {
			memcpy(seen + u, orig + u, ARCH_BREAKPOINT_LEN);
			breakpoint = true;
		}
	}
	stub_apply(orig, len, plan, guarded);
	if (!memcmp(seen, guarded, len)) {
		*ret_breakpoint = breakpoint;
		return PROTO_SITE_GUARDED;
	}
	/* Outside the change nobody's bytes but the file's: both forms hold them there. */
	if (memcmp(seen, orig, plan->offset) || memcmp(seen + end, orig + end, len - end))
		return PROTO_SITE_FOREIGN;
	/*
	 * Inside it, a uprobe at an instruction of the file that starts there
	 * writes its breakpoint over our bytes, runs the file's instruction on
	 * a hit and resumes after it in ours, and writes the file's unit back
	 * when it goes (SECURITY.md): our bytes with some of the file's are
	 * torn, not foreign, so guard can repair them.  Nobody else writes a
	 * mix of our bytes and the file's.
	 */
	state = classify_change(orig, seen, guarded, plan, &breakpoint);
	if (state != PROTO_SITE_FOREIGN)
		*ret_breakpoint = breakpoint;
	return state;
}
