/* SPDX-License-Identifier: MIT */
/*
 * One site: a backtrace() definition as a target maps it, its bytes and
 * their state.  The type alone, so that sites.c, which finds them, and
 * the memos it keeps them in (objcache.c, sitememo.c) share it without
 * including one another.
 */
#ifndef BTGUARD_SITE_H
#define BTGUARD_SITE_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "stub.h"

#define SITE_SYMBOL   "backtrace"
#define SITE_CTX_LEN  ARCH_CTX_LEN   /* bytes compared from the function entry on */
/*
 * Bytes of the file read for planning: the whole function when its
 * symbol's size is at most this (glibc's backtrace() is 212 bytes on
 * arm64), for aarch64's proof of the return path its guard branches to
 * (arch_plan_inside()).  Kept only while planning, never per site.
 */
#define SITE_CODE_LEN 512u

struct site {
	char     object[PATH_MAX];     /* the object as the target's maps names it */
	bool     deleted;              /* the file is gone from its path */
	bool     from_symtab;          /* static executable: found in .symtab */
	uint64_t addr;                 /* run-time address of the function */
	size_t   ctx_len;              /* bytes compared: [addr, addr + ctx_len) */
	uint8_t  orig[SITE_CTX_LEN];   /* from the object file */
	uint8_t  mem[SITE_CTX_LEN];    /* as last read from the target */
	struct stub_plan plan;         /* where a guard puts the stub */
	struct stub_plan held;         /* the plan mem follows: plan, or an older btguard's */
	int      state;                /* enum proto_site_state, from mem */
	bool     breakpoint;           /* a uprobe's or debugger's, over the first instruction */
};

struct site_list {
	struct site *v;
	size_t n;
};

#endif
