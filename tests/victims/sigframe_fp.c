// SPDX-License-Identifier: MIT
/* sigframe built with -fno-omit-frame-pointer (as Fedora and Ubuntu 24.04 build their
 * distributions): libunwind's frame-pointer fallback then skips the signal frame. */
#include "sigframe.c"
