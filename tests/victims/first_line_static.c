// SPDX-License-Identifier: MIT
/*
 * first_line_static: first_line linked statically
 * (VICTIM_CFLAGS_first_line_static := -static): backtrace() is in the
 * executable, which has no loader, so an at-exec guard must happen at the
 * exec itself.
 */
#include "first_line.c"
