/* SPDX-License-Identifier: MIT */
/*
 * A timer that rings while the daemon seizes, so that a PTRACE_SEIZE an
 * exec holds up can be abandoned.  See unstick.c.
 */
#ifndef BTGUARD_UNSTICK_H
#define BTGUARD_UNSTICK_H

/* How often the timer rings while armed. */
#define UNSTICK_MS 20

/*
 * Installs the SIGALRM handler, at start: before any seize, and before a
 * stray SIGALRM's default action could end the daemon.  on_ring runs in
 * the handler each time the timer rings (async-signal context).  0 or -errno.
 */
int unstick_setup(void (*on_ring)(void));

/* Rings every UNSTICK_MS from now until unstick_end(); calls nest. */
void unstick_begin(void);
void unstick_end(void);

#endif
