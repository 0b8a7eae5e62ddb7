// SPDX-License-Identifier: MIT
/*
 * The watchdog keep-alive (see watchdog.h).  This file owns when the next
 * one is due; nobody else sends WATCHDOG=1.
 */
#include <stdbool.h>
#include <stdint.h>
#include <time.h>

#include <systemd/sd-daemon.h>

#include "log.h"
#include "watchdog.h"
#include "timeutil.h"

static uint64_t interval_us;   /* 0: no watchdog */
static uint64_t next_due_us;

void watchdog_setup(void)
{
	uint64_t usec = 0;
	int r = sd_watchdog_enabled(0, &usec);

	if (r <= 0 || usec == 0)
		return;
	/* Half the interval, as sd_watchdog_enabled(3) advises: one late turn is no death. */
	interval_us = usec / 2;
	next_due_us = now_us();
	log_msg(LOG_INFO, "watchdog: keep-alive every %llu ms",
		(unsigned long long)(interval_us / 1000));
	watchdog_kick();
}

void watchdog_kick(void)
{
	uint64_t now;

	if (!interval_us)
		return;
	now = now_us();
	if (now < next_due_us)
		return;
	sd_notify(0, "WATCHDOG=1");
	next_due_us = now + interval_us;
}

int watchdog_due_ms(void)
{
	uint64_t now;

	if (!interval_us)
		return -1;
	now = now_us();
	if (now >= next_due_us)
		return 0;
	/* Rounded up: waking a little late is fine, a busy loop of early wake-ups is not. */
	return (int)((next_due_us - now + 999) / 1000);
}

void watchdog_cap_wait(struct timespec *left)
{
	uint64_t now, due;

	if (!interval_us)
		return;
	now = now_us();
	due = next_due_us > now ? next_due_us - now : 0;
	if ((uint64_t)left->tv_sec * 1000000u + (uint64_t)left->tv_nsec / 1000u <= due)
		return;
	left->tv_sec = (time_t)(due / 1000000u);
	left->tv_nsec = (long)(due % 1000000u) * 1000L;
}
