// SPDX-License-Identifier: MIT
/*
 * What the wire's numbers are called (proto.h): the names of actions,
 * site and process states and risks, as lines, JSON and logs print them,
 * and every error code's name and text - the project's own (BTG_ERR_*),
 * in one table indexed by code, and errno's as the C library names them.
 * Apart from the encoders and decoders (proto.c) because nothing here
 * reads a peer's bytes: a code from the wire is only ever looked up.
 */
#include <limits.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "proto.h"

const char *proto_action_name(unsigned action)
{
	switch (action) {
	case PROTO_ACTION_GUARD:   return "guard";
	case PROTO_ACTION_UNGUARD: return "unguard";
	case PROTO_ACTION_STATUS:  return "status";
	case PROTO_ACTION_AT_EXEC: return "at-exec";
	case PROTO_ACTION_POLICY:  return "policy";
	case PROTO_ACTION_RELOAD:  return "reload";
	case PROTO_ACTION_SWEPT:   return "swept";
	}
	return "unknown";
}

const char *proto_site_state_name(unsigned state)
{
	switch (state) {
	case PROTO_SITE_ORIGINAL: return "original";
	case PROTO_SITE_GUARDED:  return "guarded";
	case PROTO_SITE_FOREIGN:  return "foreign";
	case PROTO_SITE_TORN:     return "torn";
	}
	return "unknown";
}

const char *proto_proc_state_name(unsigned state)
{
	switch (state) {
	case PROTO_PROC_NONE:      return "none";
	case PROTO_PROC_UNGUARDED: return "unguarded";
	case PROTO_PROC_GUARDED:   return "guarded";
	case PROTO_PROC_PARTIAL:   return "partial";
	case PROTO_PROC_FOREIGN:   return "foreign";
	case PROTO_PROC_UNKNOWN:   return "unknown";
	}
	return "unknown";
}

const char *proto_risk_name(unsigned risk)
{
	switch (risk) {
	case PROTO_RISK_NONE:    return "none";
	case PROTO_RISK_AT_RISK: return "at-risk";
	case PROTO_RISK_COVERED: return "covered";
	}
	return "unknown";
}

/* Indexed by code - BTG_ERR_BASE; the unit test checks it covers the enum. */
static const struct {
	const char *name;
	const char *text;
} btg_errors[BTG_ERR_END - BTG_ERR_BASE] = {
	[BTG_ERR_BUSY - BTG_ERR_BASE] = { "busy",
		"a thread is executing or will return into the bytes to be changed; "
		"retry later, or with a longer deadline" },
	[BTG_ERR_FOREIGN - BTG_ERR_BASE] = { "foreign",
		"backtrace() holds bytes that are neither the original nor btguard's stub; "
		"something else patched it, so btguard will not write there" },
	[BTG_ERR_NOSITE - BTG_ERR_BASE] = { "no-site",
		"the process has no backtrace() definition loaded; there is nothing to patch" },
	[BTG_ERR_TRACED - BTG_ERR_BASE] = { "traced",
		"the process is already traced by another process (a debugger?); detach it first" },
	[BTG_ERR_DENIED - BTG_ERR_BASE] = { "denied",
		"you may not act on this process: only root, or the owner of a dumpable process "
		"with matching real, effective and saved ids, may" },
	[BTG_ERR_NOPROC - BTG_ERR_BASE] = { "no-process",
		"there is no process with this PID" },
	[BTG_ERR_ZOMBIE - BTG_ERR_BASE] = { "zombie",
		"the process has exited and waits to be reaped by its parent" },
	[BTG_ERR_KTHREAD - BTG_ERR_BASE] = { "kernel-thread",
		"the PID names a kernel thread, which has no user-space code to patch" },
	[BTG_ERR_SELF - BTG_ERR_BASE] = { "self",
		"the PID names btguardd itself, which never acts on its own process" },
	[BTG_ERR_GONE - BTG_ERR_BASE] = { "gone",
		"the process exited while the operation was in progress; nothing was left changed" },
	[BTG_ERR_EXEC - BTG_ERR_BASE] = { "exec",
		"the process executed a new program during the operation; it was left untouched" },
	[BTG_ERR_REUSED - BTG_ERR_BASE] = { "pid-reused",
		"the PID was reused by another process during the operation; it was left untouched" },
	[BTG_ERR_VERIFY - BTG_ERR_BASE] = { "verify",
		"reading the bytes back after the write did not show what was written" },
	[BTG_ERR_STOP - BTG_ERR_BASE] = { "stop-timeout",
		"a thread of the process did not stop before the deadline; nothing was changed" },
	[BTG_ERR_ELF - BTG_ERR_BASE] = { "elf",
		"an object mapped by the process could not be read or parsed" },
	[BTG_ERR_UNSUPPORTED - BTG_ERR_BASE] = { "unsupported",
		"the process runs an architecture or binary format btguard does not support" },
	[BTG_ERR_PROTO - BTG_ERR_BASE] = { "protocol",
		"a malformed protocol message was received" },
	[BTG_ERR_LIMIT - BTG_ERR_BASE] = { "limit",
		"a hard limit of the protocol or the daemon was exceeded" },
	[BTG_ERR_SHUTDOWN - BTG_ERR_BASE] = { "shutdown",
		"the daemon is shutting down and accepts no new work" },
	[BTG_ERR_INTERNAL - BTG_ERR_BASE] = { "internal",
		"an internal error in btguardd; see its log" },
	[BTG_ERR_SHARED - BTG_ERR_BASE] = { "shared-memory",
		"another process shares this address space and could not be held with it; nothing was changed" },
};

static bool is_errno_code(uint32_t code)
{
	return code >= 1 && code < BTG_ERR_BASE;
}

static bool is_btg_code(uint32_t code)
{
	return code >= BTG_ERR_BASE && code < BTG_ERR_END;
}

const char *proto_error_name(uint32_t code)
{
	if (code == BTG_OK)
		return "ok";
	if (is_btg_code(code))
		return btg_errors[code - BTG_ERR_BASE].name;
	if (is_errno_code(code)) {
		/* Per-thread, so two threads naming errors never share text. */
		static __thread char unnamed[sizeof("errno-4095")];
		const char *name = NULL;

#ifdef __GLIBC_PREREQ
#if __GLIBC_PREREQ(2, 32)
		name = strerrorname_np((int)code);
#endif
#endif
		if (name)
			return name;
		snprintf(unnamed, sizeof(unnamed), "errno-%u", (unsigned)code);
		return unnamed;
	}
	return "unknown";
}

const char *proto_error_text(uint32_t code)
{
	if (code == BTG_OK)
		return "success";
	if (is_btg_code(code))
		return btg_errors[code - BTG_ERR_BASE].text;
	if (is_errno_code(code))
		return strerror((int)code);
	return "unknown error code";
}

const char *proto_strerror(int r)
{
	return proto_error_text(proto_error_from_negative(r));
}

uint32_t proto_error_from_negative(int r)
{
	if (r >= 0)
		return BTG_OK;
	/* -INT_MIN does not exist; no real errno or BTG code is near it. */
	if (r == INT_MIN)
		return BTG_ERR_INTERNAL;
	return (uint32_t)-r;
}
