/* SPDX-License-Identifier: MIT */
/*
 * What a RESULT tells beyond the sites: whose process it is, its command
 * line, whether the crash can hit it (risk, and why in words), which
 * backtrace() definition callers reach by name, and what the guard does
 * not cover there (warnings).  Read-only; filled only for a process the
 * caller was authorized for.
 */
#ifndef BTGUARD_REPORT_H
#define BTGUARD_REPORT_H

#include <sys/types.h>

#include "proto.h"

/* What the operation read of the process already, so the report need not read it again. */
struct report_known {
	uid_t uid;                       /* the real uid, from status */
	const char *exe;                 /* /proc/PID/exe as read (" (deleted)" may follow) */
	const char *const *objects;      /* the distinct files it maps with code, in map order */
	size_t nobjects;
};

/*
 * Fills res->uid, command, risk, reason, warnings and the sites'
 * PROTO_SITE_BOUND flag, reading the process through via (a live task of
 * it), but for what known says (NULL: read everything).  res->sites must
 * already hold the process's definitions.  0, or -EMFILE, -ENFILE or
 * -ENOMEM when the daemon was too short of descriptors or memory to read
 * what it needed (the risk then stays unknown).
 */
int report_fill(pid_t via, const struct report_known *known, struct proto_result *res);

/*
 * The pure part of the bound-site rule (PROTOCOL.md, "Which definition
 * callers reach"): the index in objects[0..n) of the definition ordinary
 * symbol lookup finds first, given the executable's path and the
 * colon/space separated LD_PRELOAD list (NULL when unset).  -1 when n == 0.
 */
int report_bound_site(const char *const *objects, int n, const char *exe, const char *preload);

/* The warnings (PROTO_WARN_*) an environment block (NUL-separated) calls for. */
unsigned report_env_warnings(const char *env, size_t len, const char **ret_preload);

#endif
