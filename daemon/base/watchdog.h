/* SPDX-License-Identifier: MIT */
/*
 * systemd's watchdog (WatchdogSec= in btguardd.service): a WATCHDOG=1
 * keep-alive at half the interval systemd asks for.  If the daemon hangs
 * or is stopped, the keep-alives stop, systemd kills it, and the kernel
 * detaches every process it was holding: a hung daemon holds its targets
 * for at most WatchdogSec + TimeoutAbortSec.
 *
 * The keep-alives come from the thread that does the work, never from a
 * timer thread (or scanwork.c's, which only scans stacks for an attempt),
 * so they prove that work moves: the event loop sends
 * them between turns (a busy target's attempts are turns of their own),
 * and the waits inside one attempt (ptworld.c's wait for stops) call
 * watchdog_kick() too.
 */
#ifndef BTGUARD_WATCHDOG_H
#define BTGUARD_WATCHDOG_H

#include <stdint.h>
#include <time.h>

/* Reads WATCHDOG_USEC / WATCHDOG_PID (sd_watchdog_enabled); a no-op without them. */
void watchdog_setup(void);

/* Sends WATCHDOG=1 when one is due.  Cheap: call it as often as you like. */
void watchdog_kick(void);

/* Milliseconds until the next keep-alive is due (0: now), or -1 without a watchdog. */
int watchdog_due_ms(void);

/* Shortens *left so a wait of that long returns in time for the next keep-alive. */
void watchdog_cap_wait(struct timespec *left);

#endif
