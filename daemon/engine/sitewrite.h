/* SPDX-License-Identifier: MIT */
/*
 * Writing the sites of a process whose every task is held (sitewrite.c).
 */
#ifndef BTGUARD_SITEWRITE_H
#define BTGUARD_SITEWRITE_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

struct site_list;

/*
 * For a caller that holds every task of pid stopped and has checked that
 * none can be inside the bytes (patch.c's step 4g; exec.c at a system call
 * of a new program, before any of its code ran): writes each site that
 * guard (or unguard) changes through tid (site_wants_write(); walk: the
 * segment walk where a site has it, site_form()), reads it
 * back, and on any failure restores every site written.  0, or
 * -BTG_ERR_VERIFY, -BTG_ERR_GONE, -BTG_ERR_INTERNAL (an undo failed), ...
 * with why filled.  The sites' states say what was written.
 */
int sitewrite_all(pid_t pid, pid_t tid, struct site_list *sites, bool guard, bool walk,
		  char *why, size_t why_len);

#endif
