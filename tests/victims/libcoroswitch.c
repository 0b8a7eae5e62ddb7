// SPDX-License-Identifier: MIT
/*
 * libcoroswitch: coro_crash's switch code in a shared object of its own,
 * as greenlet's switch lives in its extension.  Tests copy it under
 * greenlet's name (greenlet/_greenlet.*.so), which is how the at-risk
 * check and the segment walk know a stack switcher.
 */
#define CORO_VISIBILITY ".protected"
#include "coroswitch.h"
