/* SPDX-License-Identifier: MIT */
/*
 * What each object file holds of backtrace(), remembered by file identity,
 * so that the same libc (or libtorch, or any of a job's hundreds of
 * objects) is parsed once per daemon, not once per process and request.
 * The key is the file's device, inode, size, modification and change
 * times as fstat() of the very file the target maps reports them: a file
 * replaced or rewritten in place gets a new key (its ctime moves, which no
 * user can set back).
 */
#ifndef BTGUARD_OBJCACHE_H
#define BTGUARD_OBJCACHE_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/stat.h>

#include "elf.h"
#include "site.h"

/* The definitions an object holds, with the file's first bytes of each. */
struct objcache_defs {
	size_t n;
	struct elf_def defs[ELF_MAX_DEFS];
	uint8_t bytes[ELF_MAX_DEFS][SITE_CODE_LEN];  /* up to defs[i].file_avail of them */
	struct walk_facts walk[ELF_MAX_DEFS];         /* what the segment walk may do there */
};

/* True and *ret filled when the object st describes was seen before. */
bool objcache_get(const struct stat *st, struct objcache_defs *ret);

/* Remembers what the object holds (an object with no definition too). */
void objcache_put(const struct stat *st, const struct objcache_defs *defs);

#endif
