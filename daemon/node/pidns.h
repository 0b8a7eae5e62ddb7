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
#include <stdint.h>
#include <sys/types.h>

struct pidns_view {
	bool  same;      /* the caller shares the daemon's PID namespace */
	int   level;     /* index of the caller's namespace in NSpid lists we read */
	ino_t ns_ino;    /* the caller's PID namespace */
	dev_t ns_dev;
};

/* Learns the caller's namespace from its PID (as SO_PEERCRED gave it to us). */
int pidns_view_of(pid_t caller, struct pidns_view *ret);

/*
 * Caller's numbers → daemon's numbers, for a caller in another PID
 * namespace.  Only a scan of all of /proc can tell which of our processes
 * has a given number in the caller's namespace, so a request does one
 * scan, however many PIDs it names, and the scan runs in steps the event
 * loop schedules: pidns_scan_step() returns after about budget_us of work
 * (1 once the scan is complete, 0 while entries remain, or -errno).  Then
 * pidns_scan_lookup() answers each number from the table the scan built.
 */
struct pidns_scan;

int pidns_scan_new(const struct pidns_view *v, struct pidns_scan **ret);
int pidns_scan_step(struct pidns_scan *s, uint64_t budget_us);
/* -BTG_ERR_NOPROC when no process had that number in the caller's namespace. */
int pidns_scan_lookup(const struct pidns_scan *s, pid_t theirs, pid_t *ret);
void pidns_scan_free(struct pidns_scan *s);

/* Daemon's number → caller's number; -BTG_ERR_NOPROC when the caller cannot see it. */
int pidns_to_caller(const struct pidns_view *v, pid_t pid, pid_t *ret);

#endif
