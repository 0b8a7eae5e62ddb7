// SPDX-License-Identifier: MIT
/*
 * first_line: calls backtrace() on the first line of main and prints how
 * many frames it returned, then exits 0 (or the status given).
 *
 * Usage: first_line [STATUS [wait]]
 *
 * With "wait" it then reads standard input until EOF before exiting, so a
 * test can look at the running process (stopped? traced?) first.
 * Unguarded it prints a count above 0; started guarded (`btguardctl run`,
 * or `guard --at-exec` of the process before it execs this) it prints 0:
 * the guard was in place before any of the program's code ran.  Built
 * twice: dynamically, and as first_line_static (-static), where
 * backtrace() lives in the executable itself.
 */
#include <execinfo.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int main(int argc, char **argv)
{
	void *frames[64];
	int n = backtrace(frames, 64);

	printf("%d\n", n);
	fflush(stdout);
	if (argc > 2 && !strcmp(argv[2], "wait")) {
		char buf[64];

		while (read(0, buf, sizeof(buf)) > 0)
			;
	}
	return argc > 1 ? atoi(argv[1]) : 0;
}
