// SPDX-License-Identifier: MIT
/*
 * libbtpad: a backtrace() definition built with -mbranch-protection=standard
 * for the aarch64 emulation test (tests/aarch64/run), in three shapes:
 *  - default: not a leaf (it forwards to glibc's backtrace), so pac-ret
 *    starts it with paciasp, which is also its BTI landing pad; its entry
 *    is 16-aligned, so the stub after the pad starts 4 mod 8 and its
 *    ptrace word is unaligned (glibc's and the leaf's are aligned);
 *  - the same built with -mbranch-protection=pac-ret+b-key+bti: pacibsp;
 *  - -DBTPAD_LEAF: a leaf returning 3 frames, started with bti c.
 * LD_PRELOADed into bt_sync, it is the definition every call reaches, and
 * ld.so maps it with PROT_BTI where the kernel and CPU support BTI.
 */
#include <dlfcn.h>
#include <execinfo.h>

#ifdef BTPAD_LEAF
int backtrace(void **buffer, int size)
{
	int n = size < 3 ? size : 3;

	for (int i = 0; i < n; i++)
		buffer[i] = (void *)buffer;
	return n;
}
#else
typedef int (*backtrace_fn)(void **, int);

__attribute__((aligned(16))) int backtrace(void **buffer, int size)
{
	static backtrace_fn next;

	if (!next)
		next = (backtrace_fn)dlsym(RTLD_NEXT, "backtrace");
	return next ? next(buffer, size) : 0;
}
#endif
