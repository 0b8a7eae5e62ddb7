// SPDX-License-Identifier: MIT
/*
 * nolibc: a process with no backtrace() anywhere.
 *
 * Usage: nolibc
 *
 * Static, no C library (built with -static -nostdlib -ffreestanding, see
 * VICTIM_CFLAGS_nolibc in the Makefile): only raw system calls.  Prints
 * "ready" and sleeps in pause() forever.  `btguardctl status` must say
 * state "none" and `guard` must fail with "no-site".
 */
#include <stddef.h>

#define SYS_WRITE 1
#define SYS_PAUSE 34

static long raw_syscall3(long nr, long a, long b, long c)
{
	long ret;

	__asm__ volatile("syscall"
			 : "=a"(ret)
			 : "a"(nr), "D"(a), "S"(b), "d"(c)
			 : "rcx", "r11", "memory");
	return ret;
}

void _start(void);

void _start(void)
{
	static const char ready[] = "ready\n";

	raw_syscall3(SYS_WRITE, 1, (long)ready, sizeof(ready) - 1);
	for (;;)
		raw_syscall3(SYS_PAUSE, 0, 0, 0);
}
