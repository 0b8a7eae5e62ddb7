// SPDX-License-Identifier: MIT
/*
 * Unit tests for stub placement and classification (stub.c) and the pure
 * parts of the activeness check (stackcheck.c).
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "../../proto/proto.h"
#include "stackcheck.h"
#include "stub.h"

/* glibc 2.36 backtrace() begins like this on Debian 12 (no endbr64). */
static const uint8_t plain[16] = { 0x41, 0x57, 0x41, 0x56, 0x41, 0x55, 0x41, 0x54,
				   0x55, 0x53, 0x48, 0x83, 0xec, 0x48, 0x64, 0x48 };
/* The same function built with -fcf-protection: an endbr64 landing pad first. */
static const uint8_t ibt[16] = { 0xf3, 0x0f, 0x1e, 0xfa, 0x41, 0x57, 0x41, 0x56,
				 0x41, 0x55, 0x41, 0x54, 0x55, 0x53, 0x48, 0x83 };

/* Debian 12's glibc 2.36 backtrace(): "push %rbp; mov %rsp,%rbp; push %rbx". */
static const uint8_t debian[16] = { 0x55, 0x48, 0x89, 0xe5, 0x53, 0x89, 0xf3, 0x48,
				    0x83, 0xec, 0x38, 0x64, 0x48, 0x8b, 0x04, 0x25 };
/* A function whose first instruction no undo is known for: "mov %rdi,%rax". */
static const uint8_t odd[16] = { 0x48, 0x89, 0xf8, 0x48, 0x83, 0xec, 0x48, 0x64,
				 0x48, 0x8b, 0x04, 0x25, 0x28, 0x00, 0x00, 0x00 };

#define FILL16 "\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0\0"

/* stub_plan_following()'s placement (stub_plan()'s where nothing fits inside an instruction). */
static void check_plan(const uint8_t *code, size_t offset, const char *change, size_t len)
{
	struct stub_plan p;
	uint8_t out[16];

	assert_int_equal(stub_plan_following(code, 16, 0, &p), 0);
	assert_int_equal(p.offset, offset);
	assert_int_equal(p.len, len);
	assert_int_equal(p.nwords, 1);
	assert_memory_equal(p.bytes, change, len);
	stub_apply(code, 16, &p, out);
	assert_memory_equal(out, code, offset);            /* the first instruction stays */
	assert_memory_equal(out + offset, change, len);
	assert_memory_equal(out + offset + len, code + offset + len, 16 - offset - len);
}

static void plan_follows_and_undoes_the_first_instruction(void **state)
{
	(void)state;
	/* push %r15 -> pop %r15 */
	check_plan(plain, 2, "\x41\x5f\x31\xc0\xc3", 5);
	/* push %rbp -> pop %rbp */
	check_plan(debian, 1, "\x5d\x31\xc0\xc3", 4);
	/* sub $0x48,%rsp -> add $0x48,%rsp */
	static const uint8_t sub_rsp[16] = { 0x48, 0x83, 0xec, 0x48, 0x64, 0x48, 0x8b, 0x04,
					     0x25, 0x28, 0x00, 0x00, 0x00, 0x48, 0x89, 0x45 };
	check_plan(sub_rsp, 4, "\x48\x83\xc4\x48\x31\xc0\xc3", 7);
	/* push %rsp is not followed (nothing compiled starts so): at the entry. */
	static const uint8_t push_rsp[16] = { 0x54, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90,
					      0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90, 0x90 };
	check_plan(push_rsp, 0, "\x31\xc0\xc3", 3);
}

/*
 * The undo table, byte by byte: every push opcode alone and behind every
 * REX prefix (and ff /6 and push imm, which it never takes).  A push's undo
 * pops the same register; only REX.B alone (41) names r8-r15.  Any other
 * prefix is refused (0): 40 55 is push %rbp and 48 53 push %rbx, and an
 * undo that popped r13 for the first would hand the caller r13 holding
 * rbp's value (r11 for the second is not the register pushed either).
 */
static void undo_pushes_only_what_it_can_name(void **state)
{
	uint8_t code[16], undo[ARCH_CHANGE_MAX];
	size_t insn_len, n;

	(void)state;
	for (unsigned op = 0x50; op <= 0x57; op++) {
		memset(code, 0x90, sizeof(code));
		code[0] = (uint8_t)op;
		insn_len = 99;
		n = arch_entry_undo(code, sizeof(code), undo, &insn_len);
		if (op == 0x54) {            /* push %rsp: not followed */
			assert_int_equal(n, 0);
			continue;
		}
		assert_int_equal(n, 1);
		assert_int_equal(insn_len, 1);
		assert_int_equal(undo[0], 0x58 + (op & 7));
	}
	for (unsigned rex = 0x40; rex <= 0x4f; rex++) {
		for (unsigned op = 0; op <= 0xff; op++) {
			memset(code, 0x90, sizeof(code));
			code[0] = (uint8_t)rex;
			code[1] = (uint8_t)op;
			insn_len = 99;
			n = arch_entry_undo(code, sizeof(code), undo, &insn_len);
			if (rex == 0x41 && op >= 0x50 && op <= 0x57) {
				/* push %r8..%r15 -> pop the same one */
				assert_int_equal(n, 2);
				assert_int_equal(insn_len, 2);
				assert_int_equal(undo[0], 0x41);
				assert_int_equal(undo[1], 0x58 + (op & 7));
			} else if (rex == 0x48 && op == 0x83) {
				continue;            /* sub $imm8,%rsp: below */
			} else {
				if (n != 0)
					fail_msg("%02x %02x taken as undoable (undo %02x %02x)",
						 rex, op, undo[0], undo[1]);
			}
		}
	}
	/* The other pushes: ff /6 (push r/m64, alone and behind REX.B), push imm. */
	for (unsigned modrm = 0xf0; modrm <= 0xf7; modrm++) {
		static const uint8_t imm[][2] = { { 0x6a, 0x01 }, { 0x68, 0x01 } };
		uint8_t alt[3] = { 0xff, (uint8_t)modrm, 0x90 };
		uint8_t alt_rex[4] = { 0x41, 0xff, (uint8_t)modrm, 0x90 };

		assert_int_equal(arch_entry_undo(alt, sizeof(alt), undo, &insn_len), 0);
		assert_int_equal(arch_entry_undo(alt_rex, sizeof(alt_rex), undo, &insn_len), 0);
		for (size_t i = 0; i < 2; i++)
			assert_int_equal(arch_entry_undo(imm[i], 2, undo, &insn_len), 0);
	}
	/* 48 83 /5 with another register than %rsp is not ours either. */
	static const uint8_t sub_rbx[4] = { 0x48, 0x83, 0xeb, 0x08 };
	assert_int_equal(arch_entry_undo(sub_rbx, 4, undo, &insn_len), 0);
	/* Cut short: nothing is taken for a whole instruction. */
	static const uint8_t push_r12[2] = { 0x41, 0x54 };
	assert_int_equal(arch_entry_undo(push_r12, 1, undo, &insn_len), 0);
	assert_int_equal(arch_entry_undo(push_r12, 2, undo, &insn_len), 2);
}

static void plan_covers_an_entry_it_cannot_undo(void **state)
{
	(void)state;
	check_plan(odd, 0, "\x31\xc0\xc3", 3);
}

static void plan_with_endbr64_keeps_landing_pad(void **state)
{
	(void)state;
	check_plan(ibt, 4, "\x31\xc0\xc3", 3);
}

static void plan_refuses_when_the_word_does_not_fit(void **state)
{
	struct stub_plan p;
	(void)state;
	assert_int_equal(stub_plan(plain, 9, 0, &p), -EINVAL);
	assert_int_equal(stub_plan(plain, 10, 0, &p), 0);
	assert_int_equal(stub_plan(ibt, 11, 0, &p), -EINVAL);
	assert_int_equal(stub_plan(ibt, 12, 0, &p), 0);
	assert_int_equal(stub_plan(odd, 7, 0, &p), -EINVAL);
	assert_int_equal(stub_plan(odd, 8, 0, &p), 0);
}

static void classify_original_guarded_foreign(void **state)
{
	struct stub_plan p;
	uint8_t mem[16];
	bool bp;
	(void)state;
	assert_int_equal(stub_plan(plain, sizeof(plain), 0, &p), 0);
	assert_int_equal(stub_classify(plain, plain, sizeof(plain), &p, &bp), PROTO_SITE_ORIGINAL);
	assert_false(bp);
	stub_apply(plain, sizeof(plain), &p, mem);
	assert_int_equal(stub_classify(plain, mem, sizeof(mem), &p, &bp), PROTO_SITE_GUARDED);
	assert_false(bp);
	/* A stub with different surroundings means another file: foreign. */
	mem[10] ^= 0xff;
	assert_int_equal(stub_classify(plain, mem, sizeof(mem), &p, &bp), PROTO_SITE_FOREIGN);
	/* Someone else's byte inside the change, neither ours, the file's nor int3: foreign. */
	stub_apply(plain, sizeof(plain), &p, mem);
	mem[3] = 0x90;
	assert_int_equal(stub_classify(plain, mem, sizeof(mem), &p, &bp), PROTO_SITE_FOREIGN);
	assert_false(bp);
	/* The original with an int3 inside the change: a uprobe there, original. */
	memcpy(mem, plain, sizeof(plain));
	mem[2] = 0xcc;
	assert_int_equal(stub_classify(plain, mem, sizeof(mem), &p, &bp), PROTO_SITE_ORIGINAL);
	assert_true(bp);
	/* An int3 past the change: a uprobe on the file's code the stub never reaches. */
	memcpy(mem, plain, sizeof(plain));
	mem[12] = 0xcc;
	assert_int_equal(stub_classify(plain, mem, sizeof(mem), &p, &bp), PROTO_SITE_ORIGINAL);
	assert_true(bp);
	stub_apply(plain, sizeof(plain), &p, mem);
	mem[12] = 0xcc;
	assert_int_equal(stub_classify(plain, mem, sizeof(mem), &p, &bp), PROTO_SITE_GUARDED);
	assert_true(bp);
	mem[12] = 0x90;
	assert_int_equal(stub_classify(plain, mem, sizeof(mem), &p, &bp), PROTO_SITE_FOREIGN);
	assert_false(bp);
}

/*
 * Debian 12's backtrace(), guarded: "55 | 5d 31 c0 c3" over "55 | 48 89 e5 | 53".
 * A uprobe at +1 or +4 (instructions of the file inside the change) writes
 * int3 there; its removal writes the file's byte back.  Both are torn, at
 * every byte of the change, never foreign, never guarded or original.
 */
static void classify_torn_by_a_uprobe_inside_the_change(void **state)
{
	struct stub_plan p;
	uint8_t guarded[16], mem[16];
	bool bp;
	(void)state;
	assert_int_equal(stub_plan(debian, sizeof(debian), 0, &p), 0);
	stub_apply(debian, sizeof(debian), &p, guarded);
	for (size_t at = p.offset; at < p.offset + p.len; at++) {
		memcpy(mem, guarded, sizeof(mem));
		mem[at] = 0xcc;
		assert_int_equal(stub_classify(debian, mem, sizeof(mem), &p, &bp), PROTO_SITE_TORN);
		assert_true(bp);
		mem[at] = debian[at];
		assert_int_equal(stub_classify(debian, mem, sizeof(mem), &p, &bp), PROTO_SITE_TORN);
		assert_false(bp);
		/* With the entry's uprobe as well. */
		mem[0] = 0xcc;
		assert_int_equal(stub_classify(debian, mem, sizeof(mem), &p, &bp), PROTO_SITE_TORN);
		assert_true(bp);
	}
	/* The two the issue measured: "55 48 31 c0 c3" and "55 5d 31 c0 53". */
	assert_int_equal(stub_classify(debian, (const uint8_t *)"\x55\x48\x31\xc0\xc3\x89\xf3\x48"
				       "\x83\xec\x38\x64\x48\x8b\x04\x25", 16, &p, &bp),
			 PROTO_SITE_TORN);
	assert_int_equal(stub_classify(debian, (const uint8_t *)"\x55\x5d\x31\xc0\x53\x89\xf3\x48"
				       "\x83\xec\x38\x64\x48\x8b\x04\x25", 16, &p, &bp),
			 PROTO_SITE_TORN);
	/* Several at once: every unit of the change but one the file's, one int3. */
	memcpy(mem, debian, sizeof(mem));
	mem[1] = 0xcc;
	mem[4] = guarded[4];
	assert_int_equal(stub_classify(debian, mem, sizeof(mem), &p, &bp), PROTO_SITE_TORN);
	assert_true(bp);
	/* A byte of the file where the stub's equals it is no evidence: original. */
	memcpy(mem, debian, sizeof(mem));
	mem[1] = mem[4] = 0xcc;
	assert_int_equal(stub_classify(debian, mem, sizeof(mem), &p, &bp), PROTO_SITE_ORIGINAL);
	assert_true(bp);
	/* A torn stub with foreign bytes past the change stays foreign. */
	memcpy(mem, guarded, sizeof(mem));
	mem[1] = debian[1];
	mem[9] ^= 0xff;
	assert_int_equal(stub_classify(debian, mem, sizeof(mem), &p, &bp), PROTO_SITE_FOREIGN);
	assert_false(bp);
}

/* A uprobe's int3 over the first instruction, with and without our stub after it. */
static void classify_sees_through_a_breakpoint_on_the_entry(void **state)
{
	struct stub_plan p;
	uint8_t mem[16];
	bool bp;
	(void)state;
	assert_int_equal(stub_plan(debian, sizeof(debian), 0, &p), 0);
	memcpy(mem, debian, sizeof(debian));
	mem[0] = 0xcc;
	assert_int_equal(stub_classify(debian, mem, sizeof(mem), &p, &bp), PROTO_SITE_ORIGINAL);
	assert_true(bp);
	stub_apply(debian, sizeof(debian), &p, mem);
	mem[0] = 0xcc;
	assert_int_equal(stub_classify(debian, mem, sizeof(mem), &p, &bp), PROTO_SITE_GUARDED);
	assert_true(bp);
	/* Any other byte there is not a breakpoint: foreign. */
	mem[0] = 0x90;
	assert_int_equal(stub_classify(debian, mem, sizeof(mem), &p, &bp), PROTO_SITE_FOREIGN);
	assert_false(bp);
	/* Over endbr64 as well. */
	assert_int_equal(stub_plan(ibt, sizeof(ibt), 0, &p), 0);
	stub_apply(ibt, sizeof(ibt), &p, mem);
	mem[0] = 0xcc;
	assert_int_equal(stub_classify(ibt, mem, sizeof(mem), &p, &bp), PROTO_SITE_GUARDED);
	assert_true(bp);
	/* A stub that covers the entry cannot be seen through: the int3 tore it. */
	assert_int_equal(stub_plan_following(odd, sizeof(odd), 0, &p), 0);
	stub_apply(odd, sizeof(odd), &p, mem);
	mem[0] = 0xcc;
	assert_int_equal(stub_classify(odd, mem, sizeof(mem), &p, &bp), PROTO_SITE_TORN);
	assert_true(bp);
}

/* What an older btguard wrote (the stub at the entry) is recognised, for unguard. */
/* Debian 12's backtrace(), 32 bytes: the prologue the stub can keep, then "mov %fs:0x28,%rax". */
static const uint8_t debian32[32] = {
	0x55, 0x48, 0x89, 0xe5, 0x53, 0x89, 0xf3, 0x48, 0x83, 0xec, 0x38, 0x64, 0x48, 0x8b, 0x04, 0x25,
	0x28, 0x00, 0x00, 0x00, 0x48, 0x89, 0x45, 0xe8, 0x31, 0xc0, 0x48, 0x89, 0x7d, 0xc0, 0xe8, 0x2d };

static void check_keeping(const uint8_t *code, size_t len, size_t nkeep, size_t offset,
			  const char *change, size_t change_len)
{
	struct stub_plan p;

	assert_int_equal(stub_plan_keeping(code, len, 0, nkeep, &p), 0);
	assert_int_equal(p.offset, offset);
	assert_int_equal(p.len, change_len);
	assert_int_equal(p.nwords, (change_len + 7) / 8);
	assert_memory_equal(p.bytes, change, change_len);
}

/*
 * Re-planned around a breakpoint, the stub keeps more of the prologue and
 * undoes it last first: each pushed register popped, the frame pointer
 * restored by its pop, mov into a pushed register undone by the pop.
 */
static void plan_keeping_more_of_the_prologue(void **state)
{
	struct stub_plan p, plans[STUB_MAX_PLANS];
	(void)state;
	check_keeping(debian32, 32, 1, 1, "\x5d\x31\xc0\xc3", 4);
	check_keeping(debian32, 32, 2, 4, "\x5d\x31\xc0\xc3", 4);            /* mov %rsp,%rbp */
	check_keeping(debian32, 32, 3, 5, "\x5b\x5d\x31\xc0\xc3", 5);        /* push %rbx */
	check_keeping(debian32, 32, 4, 7, "\x5b\x5d\x31\xc0\xc3", 5);        /* mov %esi,%ebx */
	check_keeping(debian32, 32, 5, 11, "\x48\x83\xc4\x38\x5b\x5d\x31\xc0\xc3", 9);
	assert_int_equal(stub_plan_keeping(debian32, 32, 0, 6, &p), -ENOENT);   /* mov %fs:... */
	/* The plan's (inside the canary load), the one following the first
	 * instruction, four that keep more, the old one at the entry. */
	assert_int_equal(stub_plans(debian32, 32, 0, NULL, plans, STUB_MAX_PLANS), 7);
	assert_int_equal(plans[0].offset, 11);
	assert_int_equal(plans[0].bytes[0], 0x64);
	assert_int_equal(plans[1].offset, 1);
	assert_int_equal(plans[5].offset, 11);
	assert_int_equal(plans[5].bytes[0], 0x48);
	assert_int_equal(plans[6].offset, 0);
	assert_int_equal(stub_plans(debian32, 32, 0, NULL, plans, 3), 3);
	/* Never a write into a register the caller relies on that no pop restores. */
	assert_int_equal(stub_plan_keeping((const uint8_t *)"\x53\x89\xc5" FILL16, 19, 0, 2, &p),
			 -ENOENT);                                               /* mov %eax,%ebp */
	assert_int_equal(stub_plan_keeping((const uint8_t *)"\x55\x48\x89\xec" FILL16, 20, 0, 2, &p),
			 -ENOENT);                                               /* mov %rbp,%rsp */
	assert_int_equal(stub_plan_keeping((const uint8_t *)"\x55\x41\x89\xc4" FILL16, 20, 0, 2, &p),
			 -ENOENT);                                               /* mov %eax,%r12d */
	check_keeping((const uint8_t *)"\x55\x89\xc7" FILL16, 19, 2, 3, "\x5d\x31\xc0\xc3", 4);
	check_keeping((const uint8_t *)"\x41\x54\x4c\x89" FILL16, 20, 1, 2, "\x41\x5c\x31\xc0\xc3", 5);
	assert_int_equal(stub_plan_keeping((const uint8_t *)"\x41\x54\x4c\x89" FILL16, 20, 0, 2, &p),
			 -ENOENT);                                               /* REX.R mov: not known */
	/* After endbr64: the pad, then the instructions. */
	check_keeping(ibt, 16, 0, 4, "\x31\xc0\xc3", 3);
	check_keeping(ibt, 16, 1, 6, "\x41\x5f\x31\xc0\xc3", 5);
}

/*
 * A uprobe at +1 of the original: the plan that keeps "mov %rsp,%rbp" is
 * the first clear of it; guarded so, the breakpoint on the kept
 * instruction is seen through, and the plan's own classification finds
 * the bytes foreign (sites.c tries every plan).
 */
static void classify_a_guard_planned_around_a_breakpoint(void **state)
{
	struct stub_plan plans[STUB_MAX_PLANS];
	uint8_t mem[32];
	bool bp;
	(void)state;
	assert_int_equal(stub_plans(debian32, 32, 0, NULL, plans, STUB_MAX_PLANS), 7);
	memcpy(mem, debian32, 32);
	mem[1] = 0xcc;
	assert_int_equal(stub_classify(debian32, mem, 32, &plans[1], &bp), PROTO_SITE_ORIGINAL);
	assert_true(bp);
	assert_false(stub_plan_clear_of_breakpoints(debian32, mem, 32, &plans[1]));
	assert_true(stub_plan_clear_of_breakpoints(debian32, mem, 32, &plans[2]));
	/* The plan's own change, inside the canary load, is clear of it. */
	assert_true(stub_plan_clear_of_breakpoints(debian32, mem, 32, &plans[0]));
	stub_apply(debian32, 32, &plans[2], mem);
	mem[1] = 0xcc;
	assert_int_equal(stub_classify(debian32, mem, 32, &plans[2], &bp), PROTO_SITE_GUARDED);
	assert_true(bp);
	assert_int_equal(stub_classify(debian32, mem, 32, &plans[1], &bp), PROTO_SITE_FOREIGN);
	mem[1] = debian32[1];   /* the probe went */
	assert_int_equal(stub_classify(debian32, mem, 32, &plans[2], &bp), PROTO_SITE_GUARDED);
	assert_false(bp);
	/* At +4: the first clear of it keeps "push %rbx" too, the words included. */
	memcpy(mem, debian32, 32);
	mem[4] = 0xcc;
	assert_false(stub_plan_clear_of_breakpoints(debian32, mem, 32, &plans[2]));
	assert_true(stub_plan_clear_of_breakpoints(debian32, mem, 32, &plans[3]));
	/* A breakpoint in a later word of a one-word write: not clear either. */
	memcpy(mem, debian32, 32);
	mem[8] = 0xcc;
	assert_false(stub_plan_clear_of_breakpoints(debian32, mem, 32, &plans[1]));
	/* Past a longer change, in its last word: the write leaves it alone. */
	memcpy(mem, debian32, 32);
	mem[20] = 0xcc;
	assert_true(stub_plan_clear_of_breakpoints(debian32, mem, 32, &plans[0]));
	mem[11] = 0xcc;
	assert_false(stub_plan_clear_of_breakpoints(debian32, mem, 32, &plans[0]));
}

/* Debian 13's glibc 2.41: rbx is written only after the canary load. */
static const uint8_t trixie32[32] = {
	0x55, 0x48, 0x89, 0xe5, 0x53, 0x48, 0x83, 0xec, 0x38, 0x64, 0x48, 0x8b, 0x1c, 0x25, 0x28, 0x00,
	0x00, 0x00, 0x48, 0x89, 0x5d, 0xe8, 0x89, 0xf3, 0x48, 0x89, 0x7d, 0xc0, 0xe8, 0x0f, 0x53, 0xff };

static void check_inside(const uint8_t *code, size_t len, size_t offset, const char *change,
			 size_t change_len)
{
	struct stub_plan p;
	uint8_t out[64];

	assert_int_equal(stub_plan(code, len, 0, &p), 0);
	assert_int_equal(p.offset, offset);
	assert_int_equal(p.len, change_len);
	assert_int_equal(p.nwords, (change_len + 7) / 8);
	assert_memory_equal(p.bytes, change, change_len);
	/* The instruction's first byte stays the file's. */
	assert_int_equal(p.bytes[0], code[offset]);
	stub_apply(code, len, &p, out);
	assert_memory_equal(out, code, offset);
	assert_memory_equal(out + offset + change_len, code + offset + change_len,
			    len - offset - change_len);
}

/*
 * The plan's first choice: inside the canary load, its %fs prefix kept,
 * the prologue before it undone - with a frame, the callee-saved registers
 * written since their push reloaded and "leave"; without one, the stack
 * adjustment and the pushes undone in reverse.  What it cannot undo, or
 * what does not fit the instruction, keeps the stub after the first one.
 */
static void plan_inside_the_canary_load(void **state)
{
	uint8_t code[32];
	struct stub_plan p;
	(void)state;
	check_inside(debian32, 32, 11, "\x64\x31\xc0\x48\x8b\x5d\xf8\xc9\xc3", 9);
	check_inside(trixie32, 32, 9, "\x64\x31\xc0\xc9\xc3", 5);
	/* After endbr64. */
	memcpy(code, "\xf3\x0f\x1e\xfa", 4);
	memcpy(code + 4, debian32, 28);
	check_inside(code, 32, 15, "\x64\x31\xc0\x48\x8b\x5d\xf8\xc9\xc3", 9);
	/* No frame: push %rbx; sub $0x10,%rsp; the load with %gs and no REX (8 bytes). */
	memset(code, 0x90, sizeof(code));
	memcpy(code, "\x53\x48\x83\xec\x10\x65\x8b\x04\x25\x28\x00\x00\x00", 13);
	assert_int_equal(stub_plan(code, 32, 0, &p), 0);
	assert_int_equal(p.offset, 1);      /* 9 bytes of undo do not fit 8: after the push */
	memcpy(code, "\x53\x48\x83\xec\x10\x64\x48\x8b\x04\x25\x28\x00\x00\x00", 14);
	check_inside(code, 32, 5, "\x64\x31\xc0\x48\x83\xc4\x10\x5b\xc3", 9);
	/* r12 pushed and written, with a frame: REX.R in its reload. */
	memcpy(code, "\x55\x48\x89\xe5\x41\x54\x41\x89\xfc\x64\x48\x8b\x04\x25\x28\x00\x00\x00", 18);
	check_inside(code, 32, 9, "\x64\x31\xc0\x4c\x8b\x65\xf8\xc9\xc3", 9);
	/* A callee-saved register written but never pushed: not undone, so not inside. */
	memcpy(code, "\x55\x48\x89\xe5\x89\xf3\x64\x48\x8b\x04\x25\x28\x00\x00\x00", 15);
	assert_int_equal(stub_plan(code, 32, 0, &p), 0);
	assert_int_equal(p.offset, 1);
	/* Two reloads do not fit the 9 bytes. */
	memcpy(code, "\x55\x48\x89\xe5\x53\x41\x54\x89\xf3\x41\x89\xfc\x64\x48\x8b\x04\x25\x28\x00\x00\x00", 21);
	assert_int_equal(stub_plan(code, 32, 0, &p), 0);
	assert_int_equal(p.offset, 1);
	/* push %rax would undo the xor; push %rsp is never undone by a pop. */
	memcpy(code, "\x50\x64\x48\x8b\x04\x25\x28\x00\x00\x00", 10);
	assert_int_equal(stub_plan(code, 32, 0, &p), 0);
	assert_int_equal(p.offset, 1);
	assert_int_equal(p.bytes[0], 0x58);   /* after it, popping it */
	/* Too close to the end for its two words: the plan after the first instruction. */
	assert_int_equal(stub_plan(debian32, 26, 0, &p), 0);
	assert_int_equal(p.offset, 1);
	assert_int_equal(stub_plan(debian32, 27, 0, &p), 0);
	assert_int_equal(p.offset, 11);
}

/*
 * A breakpoint on the instruction the change lies in (its first byte, the
 * one kept): a hit replays the file's instruction and resumes past the
 * change, so the call runs unguarded: torn, never guarded.  Its removal
 * writes back the kept byte: guarded again.  A breakpoint before it (the
 * prologue's) or past it is seen through.
 */
static void classify_a_breakpoint_on_the_kept_byte(void **state)
{
	struct stub_plan p;
	uint8_t mem[32];
	bool bp;
	(void)state;
	assert_int_equal(stub_plan(debian32, 32, 0, &p), 0);
	stub_apply(debian32, 32, &p, mem);
	assert_int_equal(stub_classify(debian32, mem, 32, &p, &bp), PROTO_SITE_GUARDED);
	assert_false(bp);
	mem[11] = 0xcc;
	assert_int_equal(stub_classify(debian32, mem, 32, &p, &bp), PROTO_SITE_TORN);
	assert_true(bp);
	mem[11] = debian32[11];
	assert_int_equal(stub_classify(debian32, mem, 32, &p, &bp), PROTO_SITE_GUARDED);
	assert_false(bp);
	for (size_t at = 0; at < 32; at++) {
		if (at == 11)
			continue;
		stub_apply(debian32, 32, &p, mem);
		mem[at] = 0xcc;
		if (at > 11 && at < 20) {   /* inside the load: not an instruction start */
			assert_int_equal(stub_classify(debian32, mem, 32, &p, &bp), PROTO_SITE_TORN);
			continue;
		}
		assert_int_equal(stub_classify(debian32, mem, 32, &p, &bp), PROTO_SITE_GUARDED);
		assert_true(bp);
	}
	/* The file's bytes with a breakpoint on the load: original, and not clear to write. */
	memcpy(mem, debian32, 32);
	mem[11] = 0xcc;
	assert_int_equal(stub_classify(debian32, mem, 32, &p, &bp), PROTO_SITE_ORIGINAL);
	assert_true(bp);
	assert_false(stub_plan_clear_of_breakpoints(debian32, mem, 32, &p));
}

static void plan_at_entry_is_the_old_placement(void **state)
{
	struct stub_plan p, old;
	uint8_t mem[16];
	bool bp;
	(void)state;
	assert_int_equal(stub_plan(debian, sizeof(debian), 0, &p), 0);
	assert_int_equal(stub_plan_at_entry(debian, sizeof(debian), 0, &old), 0);
	assert_int_equal(old.offset, 0);
	assert_int_equal(old.nwords, 1);
	stub_apply(debian, sizeof(debian), &old, mem);
	assert_memory_equal(mem, "\x31\xc0\xc3", 3);
	assert_int_equal(stub_classify(debian, mem, sizeof(mem), &p, &bp), PROTO_SITE_FOREIGN);
	assert_int_equal(stub_classify(debian, mem, sizeof(mem), &old, &bp), PROTO_SITE_GUARDED);
	/* Where nothing moved there is no older placement to try. */
	assert_int_equal(stub_plan_at_entry(ibt, sizeof(ibt), 0, &old), -ENOENT);
	assert_int_equal(stub_plan_at_entry(odd, sizeof(odd), 0, &old), -ENOENT);
}

static void classify_endbr64_stub_placement_matters(void **state)
{
	struct stub_plan p;
	uint8_t mem[16];
	bool bp;
	(void)state;
	assert_int_equal(stub_plan(ibt, sizeof(ibt), 0, &p), 0);
	/* A stub written over the landing pad is not ours. */
	memcpy(mem, ibt, sizeof(ibt));
	memcpy(mem, "\x31\xc0\xc3", 3);
	assert_int_equal(stub_classify(ibt, mem, sizeof(mem), &p, &bp), PROTO_SITE_FOREIGN);
	stub_apply(ibt, sizeof(ibt), &p, mem);
	assert_int_equal(stub_classify(ibt, mem, sizeof(mem), &p, &bp), PROTO_SITE_GUARDED);
}

static void pc_unsafe_only_strictly_inside(void **state)
{
	struct stackcheck_span s[2] = { { 0x1000, 0x1003, STACKCHECK_SPAN_BYTES },
					{ 0x2004, 0x2007, STACKCHECK_SPAN_BYTES } };
	(void)state;
	/* At the first byte a thread starts the new instructions cleanly. */
	assert_false(stackcheck_pc_unsafe(0x1000, s, 2));
	assert_true(stackcheck_pc_unsafe(0x1001, s, 2));
	assert_true(stackcheck_pc_unsafe(0x1002, s, 2));
	/* Past the changed bytes the original code continues unchanged. */
	assert_false(stackcheck_pc_unsafe(0x1003, s, 2));
	assert_false(stackcheck_pc_unsafe(0x0fff, s, 2));
	assert_true(stackcheck_pc_unsafe(0x2005, s, 2));
	assert_false(stackcheck_pc_unsafe(0x2004, s, 2));
	assert_false(stackcheck_pc_unsafe(0x1001, s, 0));
}

static void scan_words_finds_return_address(void **state)
{
	struct stackcheck_span s = { 0x7f0000001000, 0x7f0000001003, STACKCHECK_SPAN_BYTES };
	uint64_t words[6] = { 0, 0x7f0000001000, 0x7f0000001003, 42, 0x7f0000001002, 7 };
	uint64_t pc = 0;
	size_t at = 0;
	(void)state;
	assert_true(stackcheck_scan_words(words, 6, &s, 1, &pc, &at));
	assert_int_equal(pc, 0x7f0000001002);
	assert_int_equal(at, 4);
	assert_false(stackcheck_scan_words(words, 4, &s, 1, &pc, NULL));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(plan_follows_and_undoes_the_first_instruction),
		cmocka_unit_test(undo_pushes_only_what_it_can_name),
		cmocka_unit_test(plan_covers_an_entry_it_cannot_undo),
		cmocka_unit_test(plan_with_endbr64_keeps_landing_pad),
		cmocka_unit_test(classify_sees_through_a_breakpoint_on_the_entry),
		cmocka_unit_test(plan_at_entry_is_the_old_placement),
		cmocka_unit_test(plan_keeping_more_of_the_prologue),
		cmocka_unit_test(classify_a_guard_planned_around_a_breakpoint),
		cmocka_unit_test(plan_inside_the_canary_load),
		cmocka_unit_test(classify_a_breakpoint_on_the_kept_byte),
		cmocka_unit_test(plan_refuses_when_the_word_does_not_fit),
		cmocka_unit_test(classify_original_guarded_foreign),
		cmocka_unit_test(classify_torn_by_a_uprobe_inside_the_change),
		cmocka_unit_test(classify_endbr64_stub_placement_matters),
		cmocka_unit_test(pc_unsafe_only_strictly_inside),
		cmocka_unit_test(scan_words_finds_return_address),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
