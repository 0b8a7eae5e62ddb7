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

#include "arch_walk.h"
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

/* Room kept for the segment walk's code, its table included (walk_code.c). */
#define WALK_CODE_MAX 1024u

/*
 * What an object file says of the segment walk at one definition, file
 * offsets (walk.c's walk_facts_read()); objcache.c keeps it with the
 * definition.  ok false: no walk here, a guard asked for one falls back.
 */
struct walk_facts {
	bool     ok;
	struct arch_walk_facts f;        /* in the function (arch_walk.h) */
	uint8_t  call_orig[ARCH_WALK_CALL_LEN];  /* the file's bytes at f.call_off */
	uint64_t find_object;            /* _dl_find_object() in the same object, a file offset */
	uint64_t room;                   /* the executable segment's file bytes end here */
	uint64_t room_len;               /* bytes after it, to its page's end, all zero in the file */
};

/*
 * The segment walk at one site (walk.c): two changes, none at the entry.
 * The code, its table filled for this process, goes into the room after
 * libc's executable segment; then the bytes in backtrace() that name
 * glibc's per-frame helper to the unwinder name it instead.
 */
struct walk_where {
	uint64_t call;                   /* run-time address of the changed bytes in backtrace() */
	uint64_t call_return;            /* where the unwinder's call, which takes them, returns */
	uint64_t code;                   /* run-time address of the code */
	uint64_t helper, find_object;    /* the table's (walk_table.h) */
	uint64_t array_offset, count_offset;
	uint8_t  call_orig[ARCH_WALK_CALL_LEN];
};

struct site_walk {
	bool     planned;                /* both fit (else a guard asked for it uses the stub) */
	struct walk_where where;         /* what the rest is built from (walk_build()) */
	char     why[96];                /* why not, when not planned */
	uint64_t call;                   /* run-time address of the changed bytes in backtrace() */
	uint8_t  call_orig[ARCH_WALK_CALL_LEN], call_ours[ARCH_WALK_CALL_LEN];
	uint8_t  call_mem[ARCH_WALK_CALL_LEN];
	uint64_t code;                   /* run-time address of the code */
	size_t   code_len;
	uint8_t  code_ours[WALK_CODE_MAX];
	uint8_t  code_mem[WALK_CODE_MAX];  /* as last read; the file's are zero */
	int      state;                  /* enum proto_site_state of the two together */
};

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
	int      entry_state;          /* enum proto_site_state of the entry's bytes alone */
	struct site_walk walk;         /* state: the site's, entry and walk together */
};

struct site_list {
	struct site *v;
	size_t n;
};

#endif
