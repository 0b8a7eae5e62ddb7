// SPDX-License-Identifier: MIT
/*
 * nolibc_dyn: nolibc as a dynamic PIE that needs no library
 * (VICTIM_CFLAGS_nolibc_dyn): the kernel maps glibc's loader for it, the
 * loader maps nothing more, and its first system call of its own (write)
 * comes with no backtrace() mapped anywhere.  An at-exec follow must give
 * up there (no-site) and let it run on.
 */
#include "nolibc.c"
