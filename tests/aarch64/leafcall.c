// SPDX-License-Identifier: MIT
/*
 * leafcall: calls backtrace() once from its main thread; with
 * LD_PRELOAD=libbtleaf that call never returns (see libbtleaf.S).
 */
#include <execinfo.h>
#include <stdio.h>

int main(void)
{
	void *frames[4];

	fputs("calling\n", stdout);
	fflush(stdout);
	return backtrace(frames, 4);
}
