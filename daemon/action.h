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
 * A target as the request named it (the caller's PID number), pinned by
 * the start time its process had when the request arrived (0: there was no
 * such process then).  A PID whose process has changed by the time its
 * turn comes is refused, never acted on.
 */
struct action_target {
	int32_t  pid;
	uint64_t arrival_start;
};

/*
 * Acts on one target.  Never fails as a function: every outcome, success
 * or error, is written into *res (pid, error, state, sites, message,
 * pause), which the caller sends as one RESULT message.
 */
void action_run(const struct auth_caller *caller, unsigned action,
		uint32_t deadline_ms, const struct action_target *target,
		struct proto_result *res);

/*
 * Turns a request's PID list into targets, pinned as they are now (call it
 * when the request arrives).  With PROTO_FLAG_TREE each named PID is
 * followed by its current descendants (depth first), duplicates removed,
 * at most PROTO_MAX_PIDS, all numbered as the caller sees them
 * (descendants the caller's PID namespace cannot see are left out).
 * *ret is malloc'ed.
 */
int action_expand_targets(const struct auth_caller *caller, const struct proto_request *req,
			  struct action_target **ret, size_t *ret_n);

#endif
