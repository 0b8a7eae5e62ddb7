/* SPDX-License-Identifier: MIT */
/*
 * The sites found in a process, remembered for the next status of it
 * while its executable file mappings stay exactly the same.  See
 * sitememo.c.
 */
#ifndef BTGUARD_SITEMEMO_H
#define BTGUARD_SITEMEMO_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

#include "procfs.h"
#include "site.h"

/*
 * The sites of pid as they were last found with these very mappings
 * (their bytes not read yet: sites_read() does that), in *ret; false
 * when not remembered.
 */
bool sitememo_get(pid_t pid, const struct procfs_mapping *maps, size_t nmaps,
		  struct site_list *ret);

/* Remembers what sites_find() found in pid with these mappings. */
void sitememo_put(pid_t pid, const struct procfs_mapping *maps, size_t nmaps,
		  const struct site_list *list);

#endif
