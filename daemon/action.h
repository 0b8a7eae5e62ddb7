/* SPDX-License-Identifier: MIT */
/*
 * One target of a request, from the PID the caller named to the reply:
 * resolve the PID, pin it, authorize the caller, run the patch procedure
 * (or only read, for status), and log the outcome once.
 */
#ifndef BTGUARD_ACTION_H
#define BTGUARD_ACTION_H

#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "../proto/proto.h"
#include "auth.h"

/*
 * Acts on one PID.  Never fails as a function: every outcome, success or
 * error, is written into *res (pid, error, state, sites, message, pause),
 * which the caller sends as one RESULT message.
 */
void action_run(const struct auth_caller *caller, unsigned action,
		uint32_t deadline_ms, int32_t pid, struct proto_result *res);

/*
 * Expands a request's PID list for PROTO_FLAG_TREE: each named PID followed
 * by its current descendants (depth first), duplicates removed, at most
 * PROTO_MAX_PIDS, all numbered as the caller sees them (descendants the
 * caller's PID namespace cannot see are left out).  Without the flag the
 * list is copied.  *ret is malloc'ed.
 */
int action_expand_targets(const struct auth_caller *caller, const struct proto_request *req,
			  int32_t **ret, size_t *ret_n);

#endif
