/* SPDX-License-Identifier: MIT */
/*
 * One request to btguardd and its whole reply: connect, send o->req,
 * print each RESULT (or RULE, NOTICE) as it arrives through output.c, and
 * turn the end of the reply, or the lack of one, into the exit status.
 */
#ifndef BTGUARD_CLIENT_EXCHANGE_H
#define BTGUARD_CLIENT_EXCHANGE_H

#include "options.h"

/*
 * Sends o->req to the daemon at o->socket_path and reads the reply until
 * DONE, all within o->timeout_s.  Returns the exit status (status.h, or
 * the Nagios state with --format=nagios); any failure is said on stderr
 * (status_fail).  Sets o->ended once a complete report is written; for
 * run, lets o->child go once the daemon answers that it follows it.
 */
int exchange_run(struct options *o);

#endif
