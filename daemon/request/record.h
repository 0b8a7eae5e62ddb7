/* SPDX-License-Identifier: MIT */
/*
 * One record per action on a target, written by the request layer
 * (action.c) through base/log.c: who asked (uid, gid, pid, or the rule),
 * which process, what came of it, and its journal fields and MESSAGE_ID.
 */
#ifndef BTGUARD_RECORD_H
#define BTGUARD_RECORD_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "proto.h"
#include "auth.h"

/*
 * One line per action: requester uid/gid/pid, target pid and executable,
 * action, result, error code and pause.  Success logs at LOG_INFO, failures
 * at LOG_NOTICE, denials at LOG_WARNING.  A successful status of a process
 * a selector reached (surveyed) logs at LOG_DEBUG: the request's one record
 * is queue.c's.
 */
void record_action(const struct auth_caller *caller, pid_t target, const char *exe,
		   const struct proto_result *res, bool surveyed);

/*
 * The processes (as the daemon numbers them) whose answer found a torn
 * site (PROTO_WARN_TORN) since the last call, whoever asked: at most max
 * into pids, each once.  The policy's sweep asks about each again
 * (watch.c), so a rule that guards one repairs it.  At most
 * RECORD_TORN_MAX are kept between two calls; more wait for another
 * answer that finds them.
 */
#define RECORD_TORN_MAX 64u
size_t record_take_torn(pid_t *pids, size_t max);

#endif
