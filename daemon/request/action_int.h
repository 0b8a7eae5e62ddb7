/* SPDX-License-Identifier: MIT */
/*
 * What the two halves of action (action_expand.c at arrival, action.c at
 * the turn) share.  Nobody else includes this; the rest of the daemon
 * sees action.h.
 */
#ifndef BTGUARD_ACTION_INT_H
#define BTGUARD_ACTION_INT_H

#include <sys/types.h>

#include "action.h"
#include "auth.h"

/*
 * 0 when the caller may act on pid, else the answer it gets: the refusal
 * auth_check() decides, or -BTG_ERR_NOPROC when the process is gone or
 * the caller's /proc hides it (the reason in full goes to the debug log).
 * *ret holds the facts read.
 */
int action_authorize(const struct auth_caller *caller, const struct action_target *t,
		     pid_t pid, struct auth_target *ret);

#endif
