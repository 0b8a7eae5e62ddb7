/* SPDX-License-Identifier: MIT */
/*
 * The control socket's event loop (server.c): the listening socket,
 * signals, timers and the turns of the queue (queue.c), with the
 * connections themselves in conn.c.  A bad client only loses its own
 * connection.
 */
#ifndef BTGUARD_SERVER_H
#define BTGUARD_SERVER_H

#include <stdbool.h>

struct server_config {
	int      listen_fd;        /* bound, listening, non-blocking */
	unsigned idle_exit_s;      /* 0: never; else exit after this long with no client */
	bool     notify;           /* send sd_notify READY/STATUS/STOPPING */
	/* The auto-guard policy (watch.h): server_run takes policy over. */
	struct policy *policy;     /* read at start-up, may have no rules */
	const char *config_path;   /* read again on SIGHUP and RELOAD */
	bool config_required;      /* --config: a missing file is an error */
	const char *policy_error;  /* "FILE:LINE: what" when policy is an empty stand-in */
};

/*
 * Serves until SIGTERM/SIGINT (the attempt in progress is finished, every
 * waiting target answered "shutdown") or idle exit.  Returns 0 on an orderly stop, -errno when
 * the loop itself cannot go on.
 */
int server_run(const struct server_config *cfg);

#endif
