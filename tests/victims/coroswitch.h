/* SPDX-License-Identifier: MIT */
/*
 * The coroutine switch of coro_crash.c, in a header so that the victim
 * builds it in and libcoroswitch.c into a shared object of its own.
 * CORO_VISIBILITY: ".hidden" built in, ".protected" in the library.
 * x86-64 and aarch64: the same switch, the same bug in its trampoline.
 */
#ifndef BTGUARD_CORO_SWITCH_H
#define BTGUARD_CORO_SWITCH_H

#include <stdint.h>

/* Both are assembly below.  coro_switch saves the callee-saved registers
 * and the stack pointer into *save_sp, loads load_sp and returns into
 * whatever frame load_sp holds. */
void coro_switch(void **save_sp, void *load_sp);
void coro_trampoline(void);

#if defined(__x86_64__)
/* The frame coro_switch pops on a coroutine's first run. */
struct coro_first_frame {
	uint64_t r15, r14, r13, r12, rbx, rbp;   /* r12: coro_entry, rbx: the coroutine */
	uint64_t ret;                   /* coro_trampoline */
};
#define CORO_FIRST_FRAME(coro, entry, trampoline) \
	{ .rbx = (coro), .r12 = (entry), .ret = (trampoline) }
/* A slice's end: at a function's entry rsp + 8 is 16-byte aligned (SysV ABI). */
#define CORO_STOP_GAP 8
/* Where the trampoline's CFI says the caller's return address is: [stop]. */
#define CORO_CALLER_WORD(stop) ((uintptr_t)(stop))

/*
 * The entry trampoline.  Entered by coro_switch's `ret` with rsp == stop,
 * the coroutine in rbx and coro_entry in r12.  Its CFI is the default one for a called
 * function (CFA = rsp + 8, return address at [CFA - 8] == [stop]): it does
 * not say that the frame above was switched away, which a correct
 * trampoline would (`.cfi_undefined rip` ends the walk here).  That is the
 * bug this victim reproduces, as greenlet's switch frame does.
 */
__asm__(
	"	.text\n"
	"	.globl coro_trampoline\n"
	"	" CORO_VISIBILITY " coro_trampoline\n"
	"	.type coro_trampoline, @function\n"
	"coro_trampoline:\n"
	"	.cfi_startproc\n"
	"	subq $8, %rsp\n"                /* 16-byte alignment for the call */
	"	.cfi_adjust_cfa_offset 8\n"
	"	movq %rbx, %rdi\n"
	"	call *%r12\n"
	"	ud2\n"                          /* coro_entry never returns */
	"	.cfi_endproc\n"
	"	.size coro_trampoline, .-coro_trampoline\n"
	"\n"
	"	.globl coro_switch\n"
	"	" CORO_VISIBILITY " coro_switch\n"
	"	.type coro_switch, @function\n"
	"coro_switch:\n"
	/* No CFI: nothing unwinds through a switch in progress. */
	"	pushq %rbp\n"
	"	pushq %rbx\n"
	"	pushq %r12\n"
	"	pushq %r13\n"
	"	pushq %r14\n"
	"	pushq %r15\n"
	"	movq %rsp, (%rdi)\n"
	"	movq %rsi, %rsp\n"
	"	popq %r15\n"
	"	popq %r14\n"
	"	popq %r13\n"
	"	popq %r12\n"
	"	popq %rbx\n"
	"	popq %rbp\n"
	"	ret\n"
	"	.size coro_switch, .-coro_switch\n");

#elif defined(__aarch64__)
/* The frame coro_switch pops on a coroutine's first run (AAPCS64's callee-saved registers). */
struct coro_first_frame {
	uint64_t x19, x20;              /* x19: the coroutine, x20: coro_entry */
	uint64_t x21_x28[8];
	uint64_t x29, x30;              /* x30: coro_trampoline */
	uint64_t d8_d15[8];
};
#define CORO_FIRST_FRAME(coro, entry, trampoline) \
	{ .x19 = (coro), .x20 = (entry), .x30 = (trampoline) }
/* A slice's end: sp is 16-byte aligned at every call (AAPCS64). */
#define CORO_STOP_GAP 16
/* Where the trampoline's CFI says the caller's return address is: [stop + 8]. */
#define CORO_CALLER_WORD(stop) ((uintptr_t)(stop) + 8)

/*
 * The entry trampoline.  Entered by coro_switch's `ret` with sp == stop,
 * the coroutine in x19 and coro_entry in x20.  Its CFI says what an
 * ordinary function's says once it has stored its frame record (CFA = sp
 * + 16, the caller's x29 and x30 at [CFA - 16] and [CFA - 8], that is at
 * [stop] and [stop + 8]): it does not say that the frame above was
 * switched away, which a correct trampoline would (`.cfi_undefined x30`
 * ends the walk here).  That is the bug this victim reproduces, as
 * greenlet's switch frame does.  coro_switch starts with bti c (hint 34):
 * it is called through a pointer; the trampoline is entered by `ret`.
 */
__asm__(
	"	.text\n"
	"	.globl coro_trampoline\n"
	"	" CORO_VISIBILITY " coro_trampoline\n"
	"	.type coro_trampoline, %function\n"
	"coro_trampoline:\n"
	"	.cfi_startproc\n"
	"	.cfi_def_cfa sp, 16\n"
	"	.cfi_offset x29, -16\n"
	"	.cfi_offset x30, -8\n"
	"	mov x0, x19\n"
	"	blr x20\n"
	"	brk #1\n"                       /* coro_entry never returns */
	"	.cfi_endproc\n"
	"	.size coro_trampoline, .-coro_trampoline\n"
	"\n"
	"	.globl coro_switch\n"
	"	" CORO_VISIBILITY " coro_switch\n"
	"	.type coro_switch, %function\n"
	"coro_switch:\n"
	/* No CFI: nothing unwinds through a switch in progress. */
	"	hint #34\n"
	"	stp x19, x20, [sp, #-160]!\n"
	"	stp x21, x22, [sp, #16]\n"
	"	stp x23, x24, [sp, #32]\n"
	"	stp x25, x26, [sp, #48]\n"
	"	stp x27, x28, [sp, #64]\n"
	"	stp x29, x30, [sp, #80]\n"
	"	stp d8, d9, [sp, #96]\n"
	"	stp d10, d11, [sp, #112]\n"
	"	stp d12, d13, [sp, #128]\n"
	"	stp d14, d15, [sp, #144]\n"
	"	mov x2, sp\n"
	"	str x2, [x0]\n"
	"	mov sp, x1\n"
	"	ldp x21, x22, [sp, #16]\n"
	"	ldp x23, x24, [sp, #32]\n"
	"	ldp x25, x26, [sp, #48]\n"
	"	ldp x27, x28, [sp, #64]\n"
	"	ldp x29, x30, [sp, #80]\n"
	"	ldp d8, d9, [sp, #96]\n"
	"	ldp d10, d11, [sp, #112]\n"
	"	ldp d12, d13, [sp, #128]\n"
	"	ldp d14, d15, [sp, #144]\n"
	"	ldp x19, x20, [sp], #160\n"
	"	ret\n"
	"	.size coro_switch, .-coro_switch\n");
_Static_assert(sizeof(struct coro_first_frame) == 160, "coro_switch's frame");
#else
#error "coro_crash: no switch for this CPU"
#endif

#endif
