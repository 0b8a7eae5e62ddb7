/* SPDX-License-Identifier: MIT */
/*
 * btguardctl's exit status, and how a failure is said: one line on stderr,
 * remembered so that --format=nagios can repeat it in its UNKNOWN line.
 *
 *   0  every process succeeded
 *   1  at least one process failed, the daemon refused the request, or the
 *      reply was cut off, malformed, or late (the daemon may have acted)
 *   2  usage error; nothing was sent
 *   3  the daemon could not be reached: connect or send failed, or it
 *      closed the connection without sending a byte
 *   4  status: at least one process is at risk (maps torch's c10 and a
 *      stack-switching library, and its backtrace() is not guarded)
 *
 * --format=nagios replaces these with the monitoring-plugins codes: 0 OK,
 * 1 WARNING, 2 CRITICAL, 3 UNKNOWN (no verdict, usage errors included).
 */
#ifndef BTGUARD_CLIENT_STATUS_H
#define BTGUARD_CLIENT_STATUS_H

#define PROGRAM "btguardctl"

enum exit_status {
	EXIT_OK = 0,
	EXIT_FAILED = 1,
	EXIT_USAGE = 2,
	EXIT_UNREACHABLE = 3,
	EXIT_AT_RISK = 4,
};

/*
 * The first failure of the exchange: "btguardctl: " and the message on
 * stderr (standard output flushed first, so the two stay in order),
 * remembered as the last failure.  Returns status, for `return
 * status_fail(EXIT_FAILED, ...)`.
 */
__attribute__((format(printf, 2, 3)))
int status_fail(int status, const char *fmt, ...);

/* Remembers a failure the caller has said itself (with escaped text). */
__attribute__((format(printf, 1, 2)))
void status_remember(const char *fmt, ...);

/* The last failure said, for the Nagios UNKNOWN line; "" when none was. */
const char *status_last_failure(void);

#endif
