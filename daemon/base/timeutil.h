/* SPDX-License-Identifier: MIT */
/* CLOCK_MONOTONIC arithmetic for deadlines and measured windows. */
#ifndef BTGUARD_TIMEUTIL_H
#define BTGUARD_TIMEUTIL_H

#include <stdbool.h>
#include <stdint.h>
#include <time.h>

static inline void timespec_after_ms(struct timespec *ret, uint64_t ms)
{
	clock_gettime(CLOCK_MONOTONIC, ret);
	ret->tv_sec += (time_t)(ms / 1000);
	ret->tv_nsec += (long)(ms % 1000) * 1000000L;
	if (ret->tv_nsec >= 1000000000L) {
		ret->tv_sec++;
		ret->tv_nsec -= 1000000000L;
	}
}

static inline int64_t timespec_diff_ns(const struct timespec *a, const struct timespec *b)
{
	return (int64_t)(b->tv_sec - a->tv_sec) * 1000000000LL + (b->tv_nsec - a->tv_nsec);
}

static inline uint64_t timespec_diff_us(const struct timespec *a, const struct timespec *b)
{
	int64_t ns = timespec_diff_ns(a, b);

	return ns > 0 ? (uint64_t)ns / 1000u : 0;
}

/* CLOCK_MONOTONIC in microseconds: budgets of bounded steps, watchdog periods. */
static inline uint64_t now_us(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000u + (uint64_t)ts.tv_nsec / 1000u;
}

/* CLOCK_MONOTONIC in milliseconds: the event loop's clock, wake-ups included. */
static inline uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

static inline uint64_t timespec_to_ms(const struct timespec *ts)
{
	return (uint64_t)ts->tv_sec * 1000u + (uint64_t)ts->tv_nsec / 1000000u;
}

/* Time left until deadline into *ret; false once it has passed. */
static inline bool timespec_left(const struct timespec *deadline, struct timespec *ret)
{
	struct timespec now;
	int64_t ns;

	clock_gettime(CLOCK_MONOTONIC, &now);
	ns = timespec_diff_ns(&now, deadline);
	if (ns <= 0)
		return false;
	ret->tv_sec = (time_t)(ns / 1000000000LL);
	ret->tv_nsec = (long)(ns % 1000000000LL);
	return true;
}

#endif
