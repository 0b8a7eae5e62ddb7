// SPDX-License-Identifier: MIT
/*
 * bt_static: bt_loop linked statically (VICTIM_CFLAGS_bt_static := -static).
 *
 * Usage: bt_static NTHREADS [--report FILE]
 *
 * Same behaviour and report as bt_loop, but glibc's backtrace() lives in the
 * executable itself and is named only in its .symtab (a static executable
 * has no dynamic symbol table), so the daemon must find it there.  A
 * stripped copy (the tests make one with `strip`) has no backtrace() symbol
 * left at all and must report state "none".
 */
#include "bt_loop.c"
