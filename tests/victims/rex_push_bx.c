// SPDX-License-Identifier: MIT
/*
 * rex_push_bx: backtrace() begins "48 53", push %rbx behind REX.W.  Its
 * undo is refused (not 41 50+r) and the stub covers the entry: rbx and
 * every other callee-saved register must come back as they were
 * (regsaved.h).
 */
#define ENTRY_PUSH ".byte 0x48, 0x53"   /* rex.w push %rbx */
#define ENTRY_POP  "popq %rbx"
#include "regsaved.h"
