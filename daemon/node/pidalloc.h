/* SPDX-License-Identifier: MIT */
/*
 * Where the PID allocator of btguardd's PID namespace stands, and which
 * PIDs it may have handed out between two readings: a listing of /proc
 * made before the first reading names a PID outside that window by the
 * same task at the second.  See pidalloc.c.
 */
#ifndef BTGUARD_PIDALLOC_H
#define BTGUARD_PIDALLOC_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

/* The allocator's state at one moment. */
struct pidalloc_mark {
	bool ok;          /* all three were read */
	uint64_t last;    /* /proc/sys/kernel/ns_last_pid: the PID handed out last */
	uint64_t max;     /* /proc/sys/kernel/pid_max */
	uint64_t tasks;   /* tasks on the node (/proc/loadavg): at least the PIDs in use here */
};

/* The PIDs that may have been handed out between two marks. */
struct pidalloc_window {
	bool all;         /* any PID may have been: the allocator may have gone all the way round */
	uint64_t after;   /* otherwise those after this one ... */
	uint64_t upto;    /* ... up to this one, counting round past pid_max */
};

/* Reads the allocator's state; ret->ok false when a file could not be read. */
void pidalloc_read(struct pidalloc_mark *ret);

/* The task count of a /proc/loadavg text ("0.00 0.01 0.05 1/123 4567\n": 123). */
int pidalloc_parse_loadavg_tasks(const char *buf, size_t len, uint64_t *ret);

/*
 * The window of PIDs handed out between marks a and b, given that
 * `created` tasks were created on the node meanwhile (/proc/stat's count;
 * every PID handed out here is one of them).  Pure.
 */
void pidalloc_window(const struct pidalloc_mark *a, const struct pidalloc_mark *b,
		     uint64_t created, struct pidalloc_window *ret);

/* True when pid lies in w. */
bool pidalloc_in_window(const struct pidalloc_window *w, pid_t pid);

#endif
