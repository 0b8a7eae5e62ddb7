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
	uint64_t period_us = 0;
	int r = sd_watchdog_enabled(0, &period_us);

	if (r <= 0 || period_us == 0)
		return;
	/* Half the interval, as sd_watchdog_enabled(3) advises: one late turn is no death. */
	interval_us = period_us / 2;
	next_due_us = now_us();
	log_msg(LOG_INFO, "watchdog: keep-alive every %llu ms",
		(unsigned long long)(interval_us / 1000));
	watchdog_kick();
}

void watchdog_kick(void)
{
	uint64_t t_us;

	if (!interval_us)
		return;
	t_us = now_us();
	if (t_us < next_due_us)
		return;
	sd_notify(0, "WATCHDOG=1");
	next_due_us = t_us + interval_us;
}

int watchdog_due_ms(void)
{
	uint64_t t_us;

	if (!interval_us)
		return -1;
	t_us = now_us();
	if (t_us >= next_due_us)
		return 0;
	/* Rounded up: waking a little late is fine, a busy loop of early wake-ups is not. */
	return (int)((next_due_us - t_us + 999) / 1000);
}

void watchdog_cap_wait(struct timespec *left)
{
	uint64_t t_us, due_us;

	if (!interval_us)
		return;
	t_us = now_us();
	due_us = next_due_us > t_us ? next_due_us - t_us : 0;
	if ((uint64_t)left->tv_sec * 1000000u + (uint64_t)left->tv_nsec / 1000u <= due_us)
		return;
	left->tv_sec = (time_t)(due_us / 1000000u);
	left->tv_nsec = (long)(due_us % 1000000u) * 1000L;
}
