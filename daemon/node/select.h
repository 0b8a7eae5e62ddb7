/* SPDX-License-Identifier: MIT */
/*
 * Choosing processes the way operators name them: by user, executable,
 * command line, cgroup (a systemd unit's, a Slurm job's, a pod's) and
 * mapped objects, and telling which ones are at risk of the crash.  Pure
 * functions over facts the caller has read from /proc (procfs.c), so unit
 * tests and fuzzers drive them directly; nothing here reads a file.
 */
#ifndef BTGUARD_SELECT_H
#define BTGUARD_SELECT_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/* What selection knows of one process. */
struct select_proc {
	pid_t pid;
	uid_t uid;                        /* real uid */
	const char *exe;                  /* /proc/PID/exe's target, "" when unknown */
	const char *cmdline;              /* argv joined with single spaces */
	const char *const *cgroups;       /* the paths of /proc/PID/cgroup, every hierarchy */
	size_t ncgroups;
	const char *const *objects;       /* paths of the files it maps */
	size_t nobjects;
};

/* A selector: every field set must match (a NULL pattern matches anything). */
struct select_rule {
	bool all;                         /* every process (that the other fields allow) */
	bool have_uid;
	uid_t uid;
	const char *exe;                  /* glob; without '/' it matches the file name */
	const char *cmdline;              /* glob over the whole command line */
	const char *cgroup;               /* a subtree, written as in /proc/PID/cgroup */
	const char *maps;                 /* glob; without '/' it matches file names */
};

/* True when p matches every field r sets.  A rule that sets nothing matches nothing. */
bool select_match(const struct select_rule *r, const struct select_proc *p);

/* Glob match as select_rule documents: fnmatch(3), '*' crossing '/' for full paths. */
bool select_glob(const char *pattern, const char *path);

/* path is cgroup or lies below it ("/a/b" is in "/a", "/ab" is not; "/" holds all). */
bool select_in_cgroup(const char *cgroup, const char *path);

/*
 * Splits a /proc/PID/cgroup text ("ID:controllers:path" lines: "0::/x" is
 * the unified hierarchy, "4:memory:/y" a v1 one) into its paths, written
 * as NUL-terminated strings into out (out_len bytes) and pointed to by
 * paths[0..*ret_n).  -EBADMSG on a malformed line, -ENOBUFS when it does
 * not fit.  Duplicate paths (hybrid hosts list one path per hierarchy)
 * are kept once.
 */
int select_parse_cgroup_buf(const char *buf, size_t len, char *out, size_t out_len,
			    const char **paths, size_t max_paths, size_t *ret_n);

/* Why a process is at risk, as select_risk answers it. */
/*
 * A stack switcher, as the at-risk check and the segment walk (which the
 * daemon writes into a guarded process, engine/walk.c) both know it: an
 * object whose file name starts with SELECT_SWITCHER_PREFIX and holds
 * SELECT_SWITCHER_SUFFIX, under a directory named one of
 * SELECT_SWITCHER_DIRS (greenlet's extension; gevent's older copy).
 */
#define SELECT_SWITCHER_PREFIX "_greenlet"
#define SELECT_SWITCHER_SUFFIX ".so"
#define SELECT_SWITCHER_DIR0   "/greenlet/"
#define SELECT_SWITCHER_DIR1   "/gevent/"

enum select_risk {
	SELECT_RISK_NONE = 0,             /* no torch, or no stack-switching library */
	SELECT_RISK_AT_RISK,              /* maps torch's c10 and a coroutine library */
};

/*
 * The at-risk predicate over mapped objects: torch's libc10 (whose
 * c10::Error constructor calls backtrace()) together with a library that
 * runs code on copied C stack slices (greenlet's extension, which gevent,
 * eventlet and nnsight use; gevent's own compiled greenlet).
 * *ret_torch and *ret_coroutine point at the first such object's path
 * (an entry of objects), or NULL when there is none, so a caller can say
 * which half is missing; either pointer may be NULL.
 */
enum select_risk select_risk(const char *const *objects, size_t nobjects, const char **ret_torch,
			     const char **ret_coroutine);

#endif
