// SPDX-License-Identifier: MIT
/*
 * libbtpre: a second definition of backtrace(), for LD_PRELOAD.
 *
 * Usage: LD_PRELOAD=build/victims/libbtpre idle 2
 *
 * Built as a shared object (VICTIM_CFLAGS_libbtpre in the Makefile; the
 * file keeps the victims' naming, without ".so").  It exports its own
 * backtrace() that forwards to the next definition (glibc's), so a target
 * has two sites and the tests can produce the "partial" state.
 */
#include <dlfcn.h>
#include <execinfo.h>

typedef int (*backtrace_fn)(void **, int);

int backtrace(void **buffer, int size)
{
	static backtrace_fn next;

	if (!next)
		next = (backtrace_fn)dlsym(RTLD_NEXT, "backtrace");
	return next ? next(buffer, size) : 0;
}
