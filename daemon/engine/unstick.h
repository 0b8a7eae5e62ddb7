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

/*
 * Rings every UNSTICK_MS from now until the outermost unstick_end(); calls
 * nest.  unstick_defer() opens a phase that arms nothing itself: the first
 * unstick_begin() inside arms the timer, and the phase's end disarms it
 * (a phase that seizes nobody costs no timer).
 */
void unstick_begin(void);
void unstick_defer(void);
void unstick_end(void);

/*
 * The signal mask as it was when the timer was armed.  A jump out of the
 * handler (ptrace.c) does not restore it, since saving it at every seize
 * would cost a system call each: the jump's target calls this instead.
 */
void unstick_restore_mask(void);

#endif
