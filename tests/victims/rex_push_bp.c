// SPDX-License-Identifier: MIT
/*
 * rex_push_bp: backtrace() begins "40 55", push %rbp behind an empty REX
 * prefix; an undo that took it for push %r13 would pop into r13 (regsaved.h).
 */
#define ENTRY_PUSH ".byte 0x40, 0x55"   /* rex push %rbp */
#define ENTRY_POP  "popq %rbp"
#include "regsaved.h"
