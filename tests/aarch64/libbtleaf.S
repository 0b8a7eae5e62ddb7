// SPDX-License-Identifier: MIT
/*
 * libbtleaf: a backtrace() whose first instruction calls a leaf that never
 * returns, for the aarch64 emulation test.  A thread stopped there has
 * its PC in the leaf, and its only record of where it will resume, the
 * stub's second instruction (entry + 4), is the link register x30: a leaf
 * saves nothing on the stack, so no stack scan or walk can see it.  The
 * guard must refuse with "busy" because of x30 (arch_regs_resume).
 */
	.text
	.globl	backtrace
	.type	backtrace, %function
	.p2align 3
backtrace:
	bl	btleaf_spin
	mov	w0, #0
	ret
	.size	backtrace, . - backtrace

	.type	btleaf_spin, %function
btleaf_spin:
	b	btleaf_spin
	.size	btleaf_spin, . - btleaf_spin

	.section .note.GNU-stack, "", %progbits
