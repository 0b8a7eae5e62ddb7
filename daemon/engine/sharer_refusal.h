/* SPDX-License-Identifier: MIT */
/*
 * A process sharing the target's memory that an attempt could not hold:
 * the facts behind a -BTG_ERR_SHARED, which the engine does not put in
 * words - whether it may be named depends on who asks (request/action.c,
 * SECURITY.md "What a refused caller learns").  sharers.c writes it;
 * patch_sharer_refused() hands it up.  A header alone, so that attempt.h
 * and patch.h can both hold it without including each other.
 */
#ifndef BTGUARD_SHARER_REFUSAL_H
#define BTGUARD_SHARER_REFUSAL_H

#include <sys/types.h>

#include "proto.h"

enum sharer_why {
	SHARER_NONE,        /* no such refusal */
	SHARER_DENIED,      /* the caller may not act on it: detail says why */
	SHARER_UNCOMPARED,  /* kcmp could not compare it with the target: err */
};

struct sharer_refusal {
	enum sharer_why why;
	pid_t pid;                          /* the process, as the daemon numbers it */
	int err;                            /* UNCOMPARED: kcmp's -errno */
	char detail[PROTO_MAX_MESSAGE + 1]; /* DENIED: auth_check()'s reason in full */
};

#endif
