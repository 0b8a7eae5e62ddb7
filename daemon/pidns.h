/* SPDX-License-Identifier: MIT */
/*
 * PID numbers as the requester sees them.  A caller in a container names
 * processes by the numbers of its own PID namespace; the daemon translates
 * them, and only ever resolves a number inside the caller's namespace (or
 * namespaces nested in it), so a container cannot reach a process outside.
 */
#ifndef BTGUARD_PIDNS_H
#define BTGUARD_PIDNS_H

#include <stdbool.h>
#include <sys/types.h>

struct pidns_view {
	bool  same;      /* the caller shares the daemon's PID namespace */
	int   level;     /* index of the caller's namespace in NSpid lists we read */
	ino_t ns_ino;    /* the caller's PID namespace */
	dev_t ns_dev;
};

/* Learns the caller's namespace from its PID (as SO_PEERCRED gave it to us). */
int pidns_view_of(pid_t caller, struct pidns_view *ret);

/* Caller's number → daemon's number; -BTG_ERR_NOPROC when it is not visible to the caller. */
int pidns_to_daemon(const struct pidns_view *v, pid_t pid, pid_t *ret);

/* Daemon's number → caller's number; -BTG_ERR_NOPROC when the caller cannot see it. */
int pidns_to_caller(const struct pidns_view *v, pid_t pid, pid_t *ret);

#endif
