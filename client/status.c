// SPDX-License-Identifier: MIT
/*
 * btguardctl's failures: said once on stderr, and the last one kept for
 * --format=nagios, whose UNKNOWN line must say why there is no verdict.
 */
#include <stdarg.h>
#include <stdio.h>

#include "status.h"

/* The last failure status_fail() reported, for the Nagios UNKNOWN line. */
static char last_failure[512];

int status_fail(int status, const char *fmt, ...)
{
	va_list ap;

	fflush(stdout);
	fputs(PROGRAM ": ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	va_start(ap, fmt);
	vsnprintf(last_failure, sizeof(last_failure), fmt, ap);
	va_end(ap);
	return status;
}

void status_remember(const char *fmt, ...)
{
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(last_failure, sizeof(last_failure), fmt, ap);
	va_end(ap);
}

const char *status_last_failure(void)
{
	return last_failure;
}
