/* SPDX-License-Identifier: MIT */
#ifndef BTGUARD_EXECMAPS_H
#define BTGUARD_EXECMAPS_H

#include <stddef.h>
#include <sys/types.h>

#include "procfs.h"

/*
 * A process's executable file mappings - all a status needs of its maps:
 * every backtrace() definition and every object the risk names has code,
 * so it lies in one.  Each entry is as procfs_read_maps() gives it (a path
 * with " (deleted)" stripped and '\n' written \012), in address order, in
 * one malloc'ed allocation with its paths.
 *
 * Linux 6.11's PROCMAP_QUERY answers them without the kernel formatting
 * every line of maps (the most expensive part of a node-wide status); an
 * older kernel is read through the maps text.  0 or -errno (-ESRCH: gone).
 */
int execmaps_read(pid_t pid, struct procfs_mapping **ret, size_t *ret_n);

/* The two ways, for a test to compare: -EOPNOTSUPP when the kernel has no query. */
int execmaps_query(pid_t pid, struct procfs_mapping **ret, size_t *ret_n);
int execmaps_from_text(pid_t pid, struct procfs_mapping **ret, size_t *ret_n);

#endif
