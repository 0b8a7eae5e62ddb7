/* SPDX-License-Identifier: MIT */
/*
 * The body of the rex_push_* victims: a program whose own backtrace()
 * begins with the push ENTRY_PUSH names (and ends with ENTRY_POP), called
 * nonstop from a trampoline that loads rbx, rbp and r12-r15 with known
 * values and records them, and rsp, after each call.  A guard that undoes
 * the push into another register (the x86-64 undo table taking 40 55 for
 * push %r13) hands the caller a callee-saved register holding something
 * else, and the count of bad calls says which.
 *
 * Usage: rex_push_* --report FILE
 *
 * Every 50 ms FILE is rewritten whole (FILE.tmp, rename):
 *
 *   calls N zero Z bad B first NAME
 *
 * ZERO counts the calls that returned 0 (guarded; unguarded it returns 7),
 * BAD those after which a register differed, NAME the first register found
 * wrong ("-" while none was).  "ready" on stdout once FILE exists.
 *
 * The program's backtrace() is its own, exported (-rdynamic), so the
 * daemon finds it as a definition beside libc's and guards both.
 */
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#if !defined(__x86_64__)
#error "x86-64 only: the point is the x86-64 undo table"
#endif

/* Callee-saved registers, the order the trampoline stores them in. */
static const char *const reg_names[] = { "rbx", "rbp", "r12", "r13", "r14", "r15", "rsp" };

__asm__(
	"	.text\n"
	"	.globl	backtrace\n"
	"	.type	backtrace, @function\n"
	"backtrace:\n"
	"	" ENTRY_PUSH "\n"
	"	movl	$7, %eax\n"
	"	.byte	0x0f, 0x1f, 0x44, 0x00, 0x00\n"   /* nopl 0(%rax,%rax): room for the stub */
	"	.byte	0x0f, 0x1f, 0x44, 0x00, 0x00\n"
	"	" ENTRY_POP "\n"
	"	ret\n"
	"	.size	backtrace, . - backtrace\n"
	"\n"
	"	.globl	btg_call_checked\n"
	"	.hidden	btg_call_checked\n"
	"	.type	btg_call_checked, @function\n"
	"btg_call_checked:\n"
	"	pushq	%rbx\n"
	"	pushq	%rbp\n"
	"	pushq	%r12\n"
	"	pushq	%r13\n"
	"	pushq	%r14\n"
	"	pushq	%r15\n"
	"	subq	$8, %rsp\n"                      /* 16-byte aligned at the call */
	"	movq	%rsp, btg_rsp_before(%rip)\n"
	"	movabsq	$0x1111111111111111, %rbx\n"
	"	movabsq	$0x2222222222222222, %rbp\n"
	"	movabsq	$0x3333333333333333, %r12\n"
	"	movabsq	$0x4444444444444444, %r13\n"
	"	movabsq	$0x5555555555555555, %r14\n"
	"	movabsq	$0x6666666666666666, %r15\n"
	"	leaq	btg_frames(%rip), %rdi\n"
	"	movl	$64, %esi\n"
	"	call	backtrace@PLT\n"
	"	movq	%rbx, btg_after+0(%rip)\n"
	"	movq	%rbp, btg_after+8(%rip)\n"
	"	movq	%r12, btg_after+16(%rip)\n"
	"	movq	%r13, btg_after+24(%rip)\n"
	"	movq	%r14, btg_after+32(%rip)\n"
	"	movq	%r15, btg_after+40(%rip)\n"
	"	movq	%rsp, btg_after+48(%rip)\n"
	"	movq	btg_rsp_before(%rip), %rsp\n"    /* whatever the call did to it */
	"	addq	$8, %rsp\n"
	"	popq	%r15\n"
	"	popq	%r14\n"
	"	popq	%r13\n"
	"	popq	%r12\n"
	"	popq	%rbp\n"
	"	popq	%rbx\n"
	"	ret\n"
	"	.size	btg_call_checked, . - btg_call_checked\n"
	"\n"
	"	.bss\n"
	"	.balign	8\n"
	"	.globl	btg_after\n"
	"	.hidden	btg_after\n"
	"btg_after:	.zero	56\n"
	"	.globl	btg_rsp_before\n"
	"	.hidden	btg_rsp_before\n"
	"btg_rsp_before:	.zero	8\n"
	"btg_frames:	.zero	512\n"
	"	.text\n");

int btg_call_checked(void);
extern uint64_t btg_after[7];
extern uint64_t btg_rsp_before;

static void publish(const char *path, unsigned long calls, unsigned long zero,
		    unsigned long bad, const char *first)
{
	char tmp[4096];
	FILE *f;

	if (snprintf(tmp, sizeof(tmp), "%s.tmp", path) >= (int)sizeof(tmp))
		return;
	f = fopen(tmp, "w");
	if (!f)
		return;
	fprintf(f, "calls %lu zero %lu bad %lu first %s\n", calls, zero, bad, first);
	if (fclose(f) == 0)
		rename(tmp, path);
}

static uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000 + (uint64_t)ts.tv_nsec / 1000000;
}

int main(int argc, char **argv)
{
	static const uint64_t want[6] = { 0x1111111111111111, 0x2222222222222222,
					  0x3333333333333333, 0x4444444444444444,
					  0x5555555555555555, 0x6666666666666666 };
	unsigned long calls = 0, zero = 0, bad = 0;
	const char *first = "-";
	uint64_t next_ms = 0;

	if (argc != 3 || strcmp(argv[1], "--report")) {
		fprintf(stderr, "usage: %s --report FILE\n", argv[0]);
		return 2;
	}
	for (;;) {
		int n = btg_call_checked();
		int wrong = -1;

		for (int i = 0; i < 6 && wrong < 0; i++)
			if (btg_after[i] != want[i])
				wrong = i;
		if (wrong < 0 && btg_after[6] != btg_rsp_before)
			wrong = 6;
		calls++;
		if (n == 0)
			zero++;
		if (wrong >= 0 && bad++ == 0)
			first = reg_names[wrong];
		if ((calls & 1023) == 0 || calls == 1) {
			uint64_t t_ms = now_ms();

			if (t_ms >= next_ms) {
				publish(argv[2], calls, zero, bad, first);
				if (!next_ms) {
					puts("ready");
					fflush(stdout);
				}
				next_ms = t_ms + 50;
			}
		}
	}
}
