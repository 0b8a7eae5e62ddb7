/* SPDX-License-Identifier: MIT */
/*
 * Finding every loaded backtrace() definition in a target ("sites") and
 * reading their current bytes.  Works from the target's /proc/PID/maps and
 * the object files as the target maps them (/proc/PID/map_files, which
 * also reaches deleted or replaced files and other mount namespaces).
 * Never stops the target.
 */
#ifndef BTGUARD_SITES_H
#define BTGUARD_SITES_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "procfs.h"
#include "site.h"

/*
 * Finds every site and reads and classifies its bytes.  An object that
 * cannot be read or parsed is skipped unless nothing else works; then
 * -BTG_ERR_ELF with why filled.  -BTG_ERR_NOPROC / -BTG_ERR_GONE when the
 * process disappears.  0 with ret->n == 0: no definition loaded.
 */
int sites_find(pid_t pid, const struct procfs_mapping *maps, size_t nmaps,
	       struct site_list *ret, char *why, size_t why_len);

/*
 * sites_find() for a status: what the last search of this process found,
 * while its executable file mappings are exactly the same (sitememo.c),
 * its bytes read now.  Never for a guard or unguard: those search afresh.
 */
int sites_find_remembered(pid_t pid, const struct procfs_mapping *maps, size_t nmaps,
			  struct site_list *ret, char *why, size_t why_len);

/* Re-reads every site's bytes (process_vm_readv) and re-classifies. */
int sites_read(pid_t pid, struct site_list *list);

/* The process state the sites add up to (enum proto_proc_state). */
int sites_proc_state(const struct site_list *list);

/*
 * The form a write gives a site: the file's bytes, the stub (backtrace()
 * returns 0), or the segment walk (walk.c: it returns the frames up to a
 * stack switcher's).  site_form() picks it for a request: the walk only
 * where it is planned, else the stub (the fallback, which the answer says).
 */
enum site_form { SITE_FORM_ORIGINAL, SITE_FORM_STUB, SITE_FORM_WALK };
enum site_form site_form(bool guard, bool walk, const struct site *s);

/* The form s holds now: the walk when its walk is guarded and its entry original. */
bool site_walks(const struct site *s);

/*
 * True when writing form changes this site: original to guarded, or back,
 * or one guard's form to the other.  A torn site is rewritten whole either way: torn, a
 * call may crash (a uprobe inside the change) or run unguarded (one on the
 * kept byte), and every unit of it is ours, the file's or a breakpoint
 * (stub_classify), so nobody else's bytes are written over; a breakpoint
 * there is a uprobe that then no longer fires in this process
 * (SECURITY.md).  So is an original site with a breakpoint inside the
 * change, which guard writes over likewise.
 */
bool site_wants_write(enum site_form form, const struct site *s);
/* The same for the entry's bytes alone. */
bool site_entry_wants_write(enum site_form form, const struct site *s);

/*
 * What a write of s to its guarded (or original) form changes, worked out
 * from what s->mem holds now (read with the world stopped): want[] the
 * bytes from the entry as they must read afterwards, and the ranges of
 * them that differ from s->mem, inside the placement s->held: [lo, hi)
 * past its kept bytes, [kept_lo, kept_hi) among them (a breakpoint over
 * the byte a guard inside an instruction keeps, which a guard writes
 * over and an unguard leaves to its owner).  Bytes outside the
 * placement, and the file's bytes after it, stay as s->mem has them.
 * Empty ranges: nothing to write there.
 */
struct site_write {
	uint8_t want[SITE_CTX_LEN];
	size_t  lo, hi;
	size_t  kept_lo, kept_hi;
};
void site_write_plan(const struct site *s, bool guarded, struct site_write *ret);
/* The bytes a write changes: [site_change_lo(s), + s->held.len). */
uint64_t site_change_lo(const struct site *s);

void sites_free(struct site_list *list);

#endif
