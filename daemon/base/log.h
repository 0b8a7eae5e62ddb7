/* SPDX-License-Identifier: MIT */
/*
 * The daemon's log: the journal with structured fields when running under
 * systemd (JOURNAL_STREAM names our stderr), else plain lines on stderr.
 * Library-style modules do not log; the decider (action.c, server.c,
 * main.c) logs once per event.
 */
#ifndef BTGUARD_LOG_H
#define BTGUARD_LOG_H

#include <stdbool.h>
#include <sys/types.h>
#include <syslog.h>

#include "proto.h"
#include "auth.h"

/* Chooses the sink once at start-up; verbose enables LOG_DEBUG. */
void log_setup(int verbose);

__attribute__((format(printf, 2, 3)))
void log_msg(int priority, const char *fmt, ...);

/*
 * One line per action: requester uid/gid/pid, target pid and executable,
 * action, result, error code and pause.  Success logs at LOG_INFO, failures
 * at LOG_NOTICE, denials at LOG_WARNING.  A successful status of a process
 * a selector reached (surveyed) logs at LOG_DEBUG: the request's one record
 * is queue.c's.
 */
void log_action(const struct auth_caller *caller, pid_t target, const char *exe,
		const struct proto_result *res, bool surveyed);

#endif
