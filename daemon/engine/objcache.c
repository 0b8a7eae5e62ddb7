// SPDX-License-Identifier: MIT
/*
 * The object cache (see objcache.h): a set-associative table of file
 * identities, WAYS slots per set, the least recently used of a full set
 * replaced, which only costs a parse later; the table never grows.
 * Objects without a definition, by far the most common kind, take no
 * memory beyond their slot.
 *
 * Why sets: with one slot per hash, a torch job's ~390 objects in 1,024
 * slots collided some 70 times, and each status of such a process parsed
 * those 70 objects again.
 */
#include <stdlib.h>
#include <string.h>

#include "objcache.h"

#define SETS 1024u    /* a node's distinct objects: libc, ld.so, a torch job's ~390, ... */
#define WAYS 4u

struct slot {
	bool used;
	dev_t dev;
	ino_t ino;
	off_t size;
	struct timespec mtime, ctime;
	struct objcache_defs *defs;   /* NULL: the object defines nothing */
	uint64_t last_used;           /* tick of the latest get or put */
};

static struct slot slots[SETS][WAYS];
static uint64_t tick;

static struct slot *set_of(const struct stat *st)
{
	uint64_t h = (uint64_t)st->st_ino * 0x9e3779b97f4a7c15ull ^ (uint64_t)st->st_dev;

	return slots[(h >> 32) % SETS];
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
	struct slot *set = set_of(st);

	for (unsigned w = 0; w < WAYS; w++) {
		struct slot *s = &set[w];

		if (!same_file(s, st))
			continue;
		s->last_used = ++tick;
		if (s->defs)
			*ret = *s->defs;
		else
			ret->n = 0;
		return true;
	}
	return false;
}

/* The slot for st: its own if present, else a free one, else the least recently used. */
static struct slot *slot_for(const struct stat *st)
{
	struct slot *set = set_of(st), *victim = &set[0];

	for (unsigned w = 0; w < WAYS; w++) {
		if (same_file(&set[w], st) || !set[w].used)
			return &set[w];
		if (set[w].last_used < victim->last_used)
			victim = &set[w];
	}
	return victim;
}

void objcache_put(const struct stat *st, const struct objcache_defs *defs)
{
	struct slot *s = slot_for(st);
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
	s->last_used = ++tick;
}
