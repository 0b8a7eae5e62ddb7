// SPDX-License-Identifier: MIT
/*
 * Selectors and the at-risk predicate (see select.h).  Globs are libc's
 * fnmatch(3): a well-kept matcher, so there is nothing to get wrong here
 * but the rule for which string a pattern is matched against.
 */
#include <errno.h>
#include <fnmatch.h>
#include <string.h>

#include "select.h"

static const char *file_name(const char *path)
{
	const char *slash = strrchr(path, '/');

	return slash ? slash + 1 : path;
}

bool select_glob(const char *pattern, const char *path)
{
	/*
	 * A pattern with a '/' names a full path, and its '*' crosses '/'
	 * (like find -path): "/opt/" and a star match every file below /opt.  One
	 * without names a file: '*libc10.so' matches .../torch/lib/libc10.so.
	 */
	if (!strchr(pattern, '/'))
		path = file_name(path);
	return fnmatch(pattern, path, 0) == 0;
}

bool select_in_cgroup(const char *cgroup, const char *path)
{
	size_t n = strlen(cgroup);

	while (n > 1 && cgroup[n - 1] == '/')
		n--;   /* "/system.slice/" is "/system.slice" */
	if (n == 1 && cgroup[0] == '/')
		return path[0] == '/';
	return strncmp(cgroup, path, n) == 0 && (path[n] == '\0' || path[n] == '/');
}

static bool any_glob(const char *pattern, const char *const *paths, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (select_glob(pattern, paths[i]))
			return true;
	return false;
}

bool select_match(const struct select_rule *r, const struct select_proc *p)
{
	bool any = r->all;   /* "every process", narrowed by whatever else is set */

	if (r->have_uid) {
		if (p->uid != r->uid)
			return false;
		any = true;
	}
	if (r->exe) {
		if (!p->exe || !p->exe[0] || !select_glob(r->exe, p->exe))
			return false;
		any = true;
	}
	if (r->cmdline) {
		/* The whole line: '*' may cross '/' and spaces alike. */
		if (!p->cmdline || fnmatch(r->cmdline, p->cmdline, 0) != 0)
			return false;
		any = true;
	}
	if (r->cgroup) {
		bool in = false;

		for (size_t i = 0; i < p->ncgroups && !in; i++)
			in = select_in_cgroup(r->cgroup, p->cgroups[i]);
		if (!in)
			return false;
		any = true;
	}
	if (r->maps) {
		if (!any_glob(r->maps, p->objects, p->nobjects))
			return false;
		any = true;
	}
	return any;
}

int select_parse_cgroup_buf(const char *buf, size_t len, char *out, size_t out_len,
			    const char **paths, size_t max_paths, size_t *ret_n)
{
	const char *end = buf + len;
	size_t used = 0, n = 0;

	while (buf < end) {
		const char *nl = memchr(buf, '\n', (size_t)(end - buf));
		const char *line_end = nl ? nl : end;
		const char *c1 = memchr(buf, ':', (size_t)(line_end - buf));
		const char *c2 = c1 ? memchr(c1 + 1, ':', (size_t)(line_end - c1 - 1)) : NULL;
		const char *path = c2 ? c2 + 1 : NULL;
		size_t plen;
		bool dup = false;

		if (line_end == buf) {          /* an empty line: the end of the file */
			buf = line_end + 1;
			continue;
		}
		if (!c1 || c1 == buf || !c2 || path == line_end || *path != '/')
			return -EBADMSG;
		for (const char *d = buf; d < c1; d++)
			if (*d < '0' || *d > '9')
				return -EBADMSG;
		plen = (size_t)(line_end - path);
		if (memchr(path, '\0', plen))
			return -EBADMSG;
		for (size_t i = 0; i < n && !dup; i++)
			dup = strlen(paths[i]) == plen && !memcmp(paths[i], path, plen);
		if (!dup) {
			if (n == max_paths || used + plen + 1 > out_len)
				return -ENOBUFS;
			memcpy(out + used, path, plen);
			out[used + plen] = '\0';
			paths[n++] = out + used;
			used += plen + 1;
		}
		buf = nl ? nl + 1 : end;
	}
	*ret_n = n;
	return 0;
}

/*
 * torch's core library: libc10.so in every torch build (the CPU wheels,
 * Debian's python3-torch, CUDA builds); versioned names too.
 */
static bool is_torch_c10(const char *path)
{
	const char *f = file_name(path);

	return !strcmp(f, "libc10.so") || !strncmp(f, "libc10.so.", 10);
}

/*
 * Libraries that switch C stacks by copying slices in and out, which is
 * what sends libgcc's unwinder into stale bytes:
 *  - greenlet's extension, "_greenlet.cpython-311-x86_64-linux-gnu.so"
 *    and the like, under a "greenlet" directory (gevent, eventlet and
 *    nnsight all run on it);
 *  - gevent's compiled copy in older releases, "_greenlet*.so" under
 *    "gevent" (the same switching code).
 */
static bool is_stack_switcher(const char *path)
{
	const char *f = file_name(path);

	if (strncmp(f, SELECT_SWITCHER_PREFIX, strlen(SELECT_SWITCHER_PREFIX)) != 0 ||
	    !strstr(f, SELECT_SWITCHER_SUFFIX))
		return false;
	return strstr(path, SELECT_SWITCHER_DIR0) || strstr(path, SELECT_SWITCHER_DIR1);
}

enum select_risk select_risk(const char *const *objects, size_t nobjects, const char **ret_torch,
			     const char **ret_coroutine)
{
	const char *torch = NULL, *coroutine = NULL;

	for (size_t i = 0; i < nobjects; i++) {
		if (!torch && is_torch_c10(objects[i]))
			torch = objects[i];
		else if (!coroutine && is_stack_switcher(objects[i]))
			coroutine = objects[i];
	}
	if (ret_torch)
		*ret_torch = torch;
	if (ret_coroutine)
		*ret_coroutine = coroutine;
	return torch && coroutine ? SELECT_RISK_AT_RISK : SELECT_RISK_NONE;
}
