/* SPDX-License-Identifier: MIT */
/*
 * The coroutine switch of coro_crash.c, in a header so that the victim
 * builds it in and libcoroswitch.c into a shared object of its own.
 * CORO_VISIBILITY: ".hidden" built in, ".protected" in the library.
 */
#ifndef BTGUARD_CORO_SWITCH_H
#define BTGUARD_CORO_SWITCH_H

/* Both are assembly below.  coro_switch saves the callee-saved registers
 * and the stack pointer into *save_sp, loads load_sp and returns into
 * whatever frame load_sp holds. */
void coro_switch(void **save_sp, void *load_sp);
void coro_trampoline(void);

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

#endif
