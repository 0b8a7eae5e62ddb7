/* SPDX-License-Identifier: MIT */
/*
 * The guard stub: where it goes in a function, what the guarded bytes look
 * like, and how to tell original, guarded and foreign bytes apart.  Pure
 * functions over byte arrays; the CPU facts come from arch_stub.h.
 */
#ifndef BTGUARD_STUB_H
#define BTGUARD_STUB_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "arch_stub.h"

struct stub_plan {
	size_t  offset;                 /* from the entry: the first byte of the change, or of the
					   instruction it lies in (its first byte kept: bytes[0]) */
	size_t  len;                    /* bytes from offset on: maybe a kept byte, an undo, the stub */
	size_t  keep;                   /* leading bytes equal to the file's, never changed (0 or 1) */
	size_t  nwords;                 /* ptrace words carrying them, the first at offset */
	uint8_t bytes[ARCH_CHANGE_MAX];
};

/*
 * Plans the stub for a function whose original first bytes are
 * code[0..len), on a CPU with the ARCH_FEATURE_* bits in features (the
 * daemon passes arch_cpu_features(); tests pass what they test).  First
 * choice, where the CPU and the prologue allow: the change inside one
 * instruction of the file (x86-64: keeping its first byte, after a
 * prologue it undoes), or of one instruction (aarch64, which needs the
 * whole function: stub_plan_function()), arch_plan_inside(): no
 * instruction start inside the change but its own, so no breakpoint
 * placed later can land in it.  Else stub_plan_following().  The words
 * that carry the change must fit: -EINVAL when len < offset + nwords *
 * ARCH_WORD_LEN.
 */
int stub_plan(const uint8_t *code, size_t len, unsigned features, struct stub_plan *ret);

/*
 * stub_plan() with the function's whole file bytes, code[0..len) (its
 * symbol's size), for the analysis, the function at run-time address addr
 * (aarch64's adrp works in its pages); the plan's words fit its first
 * ctx_len bytes, those compared and written (-EINVAL as stub_plan(), and
 * when ctx_len > len).
 */
int stub_plan_function(const uint8_t *code, size_t len, size_t ctx_len, uint64_t addr,
		       unsigned features, struct stub_plan *ret);

/*
 * The stub after the first instruction: a landing pad stays first and the
 * stub follows it; an instruction arch_entry_undo() knows stays first and
 * the stub follows it, undoing it first.  Any other first instruction is
 * covered (offset 0): a breakpoint placed there later would break the
 * stub (SECURITY.md).  -EINVAL as stub_plan().
 */
int stub_plan_following(const uint8_t *code, size_t len, unsigned features,
			struct stub_plan *ret);

/*
 * Where btguard put the stub before it followed first instructions: at the
 * entry, or after a landing pad.  A process guarded by such a daemon still
 * holds it; status and unguard must recognise it.  -ENOENT when it is the
 * same as stub_plan()'s, -EINVAL as stub_plan().
 */
int stub_plan_at_entry(const uint8_t *code, size_t len, unsigned features,
		       struct stub_plan *ret);

/*
 * The plan that keeps the landing pad, if any, and the nkeep instructions
 * after it (arch_next_undo() must know each), undoing them before the
 * stub: re-planned around a breakpoint inside the first plan's change, the
 * breakpoint sits on a kept instruction, whose hit replays the file's
 * instruction and resumes in the file's next, or at our first byte in the
 * state our undo expects.  -ENOENT when one is not known or the undo does
 * not fit, -EINVAL as stub_plan().
 */
int stub_plan_keeping(const uint8_t *code, size_t len, unsigned features, size_t nkeep,
		      struct stub_plan *ret);

/*
 * Every placement a site may hold, in the order to classify it: out[0]
 * first (the site's plan, stub_plan_function()'s), or stub_plan()'s when
 * first is NULL, then stub_plan_following()'s (the first choice of
 * an older btguard, which placed nothing inside an instruction), then
 * those keeping more of the prologue
 * (stub_plan_keeping(), shortest first), then an older btguard's at the
 * entry.  Their number (0 when stub_plan() fails), at most max.
 */
#define STUB_MAX_PLANS 8u
size_t stub_plans(const uint8_t *code, size_t len, unsigned features, const struct stub_plan *first,
		  struct stub_plan *out, size_t max);

/*
 * Whether no breakpoint (one that is not the file's byte) lies in the
 * words plan writes and reads back: a plan that would write over none.
 */
bool stub_plan_clear_of_breakpoints(const uint8_t *orig, const uint8_t *mem, size_t len,
				    const struct stub_plan *plan);

/* out[0..len) = orig with the stub laid over it. */
void stub_apply(const uint8_t *orig, size_t len, const struct stub_plan *plan, uint8_t *out);

/*
 * Classifies the bytes a target holds (mem) against the object file's
 * (orig): PROTO_SITE_ORIGINAL, PROTO_SITE_GUARDED, PROTO_SITE_TORN or
 * PROTO_SITE_FOREIGN.  When the original already equals the stub, the
 * site counts as guarded.  A breakpoint (ARCH_BREAKPOINTS) over a first
 * instruction the plan leaves alone is somebody else's, not a change of
 * ours or a foreign one: the rest decides.  Inside the change, each
 * instruction-sized unit may hold the stub's bytes, the file's or a
 * breakpoint: all the stub's is guarded; none of them the stub's (the
 * file's, breakpoints over it) is original; a mix is torn, what a uprobe
 * inside the change leaves while it is there and after it went; and so
 * is a change whose every unit that would tell is under a breakpoint
 * (aarch64's one instruction under a uprobe: ours may be beneath).  Outside
 * the change anything but the file's bytes is foreign.  *ret_breakpoint
 * says a breakpoint is there, on the entry or inside the change.
 */
int stub_classify(const uint8_t *orig, const uint8_t *mem, size_t len,
		  const struct stub_plan *plan, bool *ret_breakpoint);

#endif
