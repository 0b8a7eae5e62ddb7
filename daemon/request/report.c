// SPDX-License-Identifier: MIT
/*
 * The at-risk report for one process (report.h).  Everything here reads
 * /proc only and never fails as a function: a fact that cannot be read
 * leaves its field "unknown" or empty.
 */
#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "facts.h"
#include "nodefacts.h"
#include "procfs.h"
#include "report.h"
#include "select.h"

/* An environment larger than this is not searched for the warnings. */
#define ENVIRON_MAX (1024u * 1024u)

static const char *base_name(const char *path)
{
	const char *slash = strrchr(path, '/');

	return slash ? slash + 1 : path;
}

/* glibc's own library: libc.so.6, or libc-2.31.so in older layouts. */
static bool is_glibc(const char *path)
{
	const char *f = base_name(path);

	return !strncmp(f, "libc.so", 7) || (!strncmp(f, "libc-", 5) && strstr(f, ".so"));
}

/* Whether the file name of path is one of LD_PRELOAD's entries (by name or path). */
static bool preloaded(const char *path, const char *preload)
{
	const char *p = preload;

	while (p && *p) {
		size_t n = strcspn(p, ": ");

		if (n > 0) {
			const char *slash = memchr(p, '/', n);
			const char *cmp = slash ? path : base_name(path);

			if (strlen(cmp) == n && !memcmp(cmp, p, n))
				return true;
		}
		p += n;
		p += strspn(p, ": ");
	}
	return false;
}

int report_bound_site(const char *const *objects, int n, const char *exe, const char *preload)
{
	/*
	 * Lookup by name searches the global scope in load order: the
	 * executable, then LD_PRELOAD's objects, then the libraries loaded at
	 * start-up, libc among them; a library loaded later (dlopen, as a
	 * worker's libunwind is) comes after libc and is never found first.
	 */
	for (int i = 0; i < n; i++)
		if (exe && exe[0] && !strcmp(objects[i], exe))
			return i;
	for (int i = 0; i < n; i++)
		if (preloaded(objects[i], preload))
			return i;
	for (int i = 0; i < n; i++)
		if (is_glibc(objects[i]))
			return i;
	return n > 0 ? 0 : -1;
}

/* torch reads these as "on" unless unset, empty or "0". */
static bool env_on(const char *value)
{
	return value[0] && strcmp(value, "0") != 0;
}

unsigned report_env_warnings(const char *env, size_t len, const char **ret_preload)
{
	unsigned w = 0;

	if (ret_preload)
		*ret_preload = NULL;
	for (size_t off = 0; off < len;) {
		const char *v = env + off;
		size_t n = strnlen(v, len - off);

		if (n < len - off) {   /* a complete entry; a cut one is ignored */
			if (!strncmp(v, "TORCH_SHOW_CPP_STACKTRACES=", 27) && env_on(v + 27))
				w |= PROTO_WARN_CPP_STACKTRACES;
			else if (!strncmp(v, "TORCH_DISTRIBUTED_DEBUG=", 24) && !strcasecmp(v + 24, "DETAIL"))
				w |= PROTO_WARN_DIST_DEBUG;
			else if (!strncmp(v, "LD_PRELOAD=", 11) && ret_preload)
				*ret_preload = v + 11;
		}
		off += n + 1;
	}
	return w;
}

static void fill_risk(const struct facts *f, int bound, struct proto_result *res)
{
	const char *torch = NULL, *coroutine = NULL;
	const char *where;

	if (select_risk(f->p.objects, f->p.nobjects, &torch, &coroutine) == SELECT_RISK_NONE) {
		res->risk = PROTO_RISK_NONE;
		snprintf(res->reason, sizeof(res->reason), "%s",
			 torch ? "maps torch but no stack-switching coroutine library"
			       : "does not map torch's c10 library");
		return;
	}
	if (bound < 0) {
		res->risk = PROTO_RISK_NONE;
		snprintf(res->reason, sizeof(res->reason),
			 "maps %s and %s, but no backtrace() definition is loaded",
			 base_name(torch), base_name(coroutine));
		return;
	}
	where = base_name(res->sites[bound].object);
	if (res->sites[bound].state == PROTO_SITE_GUARDED) {
		res->risk = PROTO_RISK_COVERED;
		snprintf(res->reason, sizeof(res->reason),
			 "maps %s (torch) and %s (switches C stacks); backtrace() in %s is guarded",
			 base_name(torch), base_name(coroutine), where);
	} else {
		res->risk = PROTO_RISK_AT_RISK;
		snprintf(res->reason, sizeof(res->reason),
			 "maps %s (torch) and %s (switches C stacks); backtrace() in %s is %s",
			 base_name(torch), base_name(coroutine), where,
			 proto_site_state_name(res->sites[bound].state));
	}
}

int report_fill(pid_t via, const struct report_known *known, struct proto_result *res)
{
	const char *objects[PROTO_MAX_SITES], *preload = NULL;
	struct facts f;
	char *env = NULL;
	size_t len = 0;
	int bound, r;

	res->uid = PROTO_UID_UNKNOWN;
	res->risk = PROTO_RISK_UNKNOWN;
	r = facts_read(via, known ? FACTS_CMDLINE : FACTS_UID | FACTS_EXE | FACTS_CMDLINE | FACTS_OBJECTS,
		       &f);
	if (r < 0)
		goto out;
	if (known) {
		size_t n = strlen(known->exe);

		/* As facts_read() does: a replaced executable's path is its name. */
		if (n > 10 && !strcmp(known->exe + n - 10, " (deleted)"))
			n -= 10;
		snprintf(f.exe, sizeof(f.exe), "%.*s", (int)n, known->exe);
		f.p.uid = known->uid;
		f.p.objects = known->objects;
		f.p.nobjects = known->nobjects;
		f.objects_read = true;
	}
	/* The real uid is the process's, whichever thread we read it through. */
	res->uid = f.p.uid;
	snprintf(res->command, sizeof(res->command), "%s", f.cmdline);
	r = procfs_read_pid_record(via, "environ", ENVIRON_MAX, &env, &len);
	if (r == 0)
		res->warnings |= (uint8_t)report_env_warnings(env, len, &preload);
	else if (proto_shortage(r))
		goto out;   /* a preload we could not see may decide the risk */
	r = 0;
	if (nodefacts_other_mount_ns(via))
		res->warnings |= PROTO_WARN_MOUNT_NS;
	for (unsigned i = 0; i < res->nsites; i++)
		objects[i] = res->sites[i].object;
	bound = report_bound_site(objects, res->nsites, f.exe, preload);
	if (bound >= 0)
		res->sites[bound].flags |= PROTO_SITE_BOUND;
	if (f.objects_read)
		fill_risk(&f, bound, res);   /* else unknown: nothing can be said */
out:
	free(env);
	facts_free(&f);
	return proto_shortage(r) ? r : 0;
}
