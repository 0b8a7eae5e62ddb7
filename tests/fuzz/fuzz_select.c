// SPDX-License-Identifier: MIT
/*
 * Fuzzes process selection (daemon/node/select.c): the /proc/PID/cgroup
 * parser, whose input a process shapes through the cgroup names it is
 * placed in, and the matchers on the paths it yields.  The input is split
 * at the first NUL byte: before it a cgroup file, after it a selector
 * pattern.  Properties:
 *  - the parser stays inside its input and its output buffer, every path
 *    it returns starts with '/', holds no newline, and appears once;
 *  - a path is always in its own cgroup and in "/";
 *  - a pattern matches a path or not without reading past either.
 */
#include <errno.h>

#include "fuzz.h"
#include "select.h"

#define MAX_PATHS 16

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t *in = fuzz_copy(data, size);
	const uint8_t *nul = memchr(in, '\0', size);
	size_t flen = nul ? (size_t)(nul - in) : size;
	char out[4096], pattern[256];
	const char *paths[MAX_PATHS];
	size_t n = 0, plen = 0;
	int r = select_parse_cgroup_buf((const char *)in, flen, out, sizeof(out), paths, MAX_PATHS, &n);

	if (nul) {
		plen = size - flen - 1;
		if (plen > sizeof(pattern) - 1)
			plen = sizeof(pattern) - 1;
		memcpy(pattern, nul + 1, plen);
	}
	pattern[plen] = '\0';
	FUZZ_CHECK(r == 0 || r == -EBADMSG || r == -ENOBUFS);
	if (r == 0) {
		FUZZ_CHECK(n <= MAX_PATHS);
		for (size_t i = 0; i < n; i++) {
			FUZZ_CHECK(paths[i] >= out && paths[i] < out + sizeof(out));
			FUZZ_CHECK(paths[i][0] == '/' && !strchr(paths[i], '\n'));
			for (size_t j = 0; j < i; j++)
				FUZZ_CHECK(strcmp(paths[i], paths[j]) != 0);
			FUZZ_CHECK(select_in_cgroup(paths[i], paths[i]));
			FUZZ_CHECK(select_in_cgroup("/", paths[i]));
			if (pattern[0] == '/') {
				(void)select_in_cgroup(pattern, paths[i]);
			}
			(void)select_glob(pattern, paths[i]);
		}
	}
	free(in);
	return 0;
}
