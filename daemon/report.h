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

#include "../proto/proto.h"

/*
 * Fills res->uid, command, risk, reason, warnings and the sites'
 * PROTO_SITE_BOUND flag, reading the process through via (a live task of it).
 * res->sites must already hold the process's definitions.
 */
void report_fill(pid_t via, struct proto_result *res);

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
