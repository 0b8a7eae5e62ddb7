// SPDX-License-Identifier: MIT
/*
 * late_loader: loads libraries long after it started, like a gunicorn
 * worker that imports torch (and with it libunwind's backtrace()) after
 * the fork.
 *
 * Usage: late_loader
 *
 * Calls backtrace() once (glibc's definition is bound), prints "ready",
 * then for each line read from stdin dlopen()s that path (RTLD_NOW |
 * RTLD_LOCAL, as Python imports an extension) and prints "loaded", or
 * "error <dlerror text>".  Each line "call" instead calls backtrace() by
 * name and prints "frames N".
 */
#include <dlfcn.h>
#include <execinfo.h>
#include <stdio.h>
#include <string.h>

int main(void)
{
	char line[4096];
	void *buf[16];

	backtrace(buf, 16);
	printf("ready\n");
	fflush(stdout);
	while (fgets(line, sizeof(line), stdin)) {
		line[strcspn(line, "\n")] = '\0';
		if (!strcmp(line, "call")) {
			printf("frames %d\n", backtrace(buf, 16));
		} else if (dlopen(line, RTLD_NOW | RTLD_LOCAL)) {
			printf("loaded\n");
		} else {
			printf("error %s\n", dlerror());
		}
		fflush(stdout);
	}
	return 0;
}
