/* SPDX-License-Identifier: MIT */
/*
 * A caller's rights on one target (authorize.c): asked at arrival by
 * action_expand.c and again at the turn by action.c.
 */
#ifndef BTGUARD_AUTHORIZE_H
#define BTGUARD_AUTHORIZE_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#include "auth.h"

/* The target as a refusal names it. */
struct authorize_who {
	int32_t pid;       /* as the caller numbers it */
	pid_t ours;        /* in the daemon's PID namespace */
	bool hidden;       /* the caller's /proc hides what it may not act on */
};

/* 0 when the caller may act on the process facts describes, else the refusal it is told. */
int authorize_judge(const struct auth_caller *caller, const struct authorize_who *who,
		    const struct auth_target *facts);

/*
 * 0 when the caller may act on pid, else the answer it gets: the refusal
 * auth_check() decides, or -BTG_ERR_NOPROC when the process is gone or
 * the caller's /proc hides it (the reason in full goes to the debug log);
 * the daemon's own shortage of descriptors or memory as that.  *ret holds
 * the facts read.
 */
int authorize(const struct auth_caller *caller, const struct authorize_who *who, pid_t pid,
	      struct auth_target *ret);

#endif
