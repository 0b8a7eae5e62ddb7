// SPDX-License-Identifier: MIT
/*
 * The object cache (see objcache.h): a direct-mapped table of file
 * identities.  A collision replaces the older entry, which only costs a
 * parse later; the table never grows.  Objects without a definition, by
 * far the most common kind, take no memory beyond their slot.
 */
#include <stdlib.h>
#include <string.h>

#include "objcache.h"

#define SLOTS 1024u   /* a node's distinct objects: libc, ld.so, a torch job's ~300 */

struct slot {
	bool used;
	dev_t dev;
	ino_t ino;
	off_t size;
	struct timespec mtime, ctime;
	struct objcache_defs *defs;   /* NULL: the object defines nothing */
};

static struct slot slots[SLOTS];

static struct slot *slot_of(const struct stat *st)
{
	uint64_t h = (uint64_t)st->st_ino * 0x9e3779b97f4a7c15ull ^ (uint64_t)st->st_dev;

	return &slots[(h >> 32) % SLOTS];
}

static bool same_time(const struct timespec *a, const struct timespec *b)
{
	return a->tv_sec == b->tv_sec && a->tv_nsec == b->tv_nsec;
}

static bool same_file(const struct slot *s, const struct stat *st)
{
	return s->used && s->dev == st->st_dev && s->ino == st->st_ino && s->size == st->st_size &&
	       same_time(&s->mtime, &st->st_mtim) && same_time(&s->ctime, &st->st_ctim);
}

bool objcache_get(const struct stat *st, struct objcache_defs *ret)
{
	const struct slot *s = slot_of(st);

	if (!same_file(s, st))
		return false;
	if (s->defs)
		*ret = *s->defs;
	else
		ret->n = 0;
	return true;
}

void objcache_put(const struct stat *st, const struct objcache_defs *defs)
{
	struct slot *s = slot_of(st);
	struct objcache_defs *copy = NULL;

	if (defs->n) {
		copy = malloc(sizeof(*copy));
		if (!copy)
			return;   /* not remembered: the next request parses again */
		*copy = *defs;
	}
	free(s->defs);
	s->used = true;
	s->dev = st->st_dev;
	s->ino = st->st_ino;
	s->size = st->st_size;
	s->mtime = st->st_mtim;
	s->ctime = st->st_ctim;
	s->defs = copy;
}
