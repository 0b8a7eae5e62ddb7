// SPDX-License-Identifier: MIT
/*
 * The sites memo (sitememo.h).
 *
 * A status of a process that maps hundreds of objects (a torch job maps
 * ~315 executable ones) is mostly one stat() per object, to learn which
 * file each mapping is: the object cache (objcache.c) spares the parse,
 * not that.  Monitoring asks the same question of the same processes
 * every minute, and between two asks their mappings rarely change.  So
 * what sites_find() found is kept by process and by a hash of every
 * executable file mapping's range, offset, device, inode and path: a
 * mapping is one file for as long as it exists, so the same mappings hold
 * the same definitions at the same addresses.  Only their bytes can
 * change, and those are always read again (sites_read()).
 *
 * Only status uses it: a guard or unguard finds its sites afresh, so the
 * memo can make a report stale in the one case no mapping shows (an
 * object rewritten in place, the same inode), and never a write.  Even
 * then the report reads the bytes: what no longer matches the file as
 * parsed reads foreign.
 *
 * A set-associative table by PID, WAYS per set, the least recently used
 * of a full set replaced; an entry holds its sites in one allocation.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "sitememo.h"
#include "walk.h"

/*
 * 32,768 processes, the default pid_max.  A status --all goes through the
 * node in the same order each time, which evicts every entry of a set
 * that overflows: 10,000 processes hashed into 2,048 sets of 4 overflowed
 * half of them, and each status missed.  Into 4,096 sets of 8, about one
 * set in 2,000 overflows.
 */
#define SETS 4096u
#define WAYS 8u

/* A site without its object's name: the ord-th executable file mapping has it. */
struct memo_site {
	uint32_t ord;
	bool deleted, from_symtab;
	uint64_t addr;
	size_t ctx_len;
	uint8_t orig[SITE_CTX_LEN];
	struct stub_plan plan;
	bool walk_planned;           /* and where, or why not */
	struct walk_where walk_where;
	char walk_why[sizeof(((struct site_walk *)0)->why)];
};

struct entry {
	pid_t pid;                  /* 0: unused */
	uint64_t maps_hash;
	size_t nmaps_exec;
	size_t nsites;
	struct memo_site *sites;    /* nsites of them, or NULL */
	uint64_t last_used;
};

static struct entry table[SETS][WAYS];
static uint64_t tick;

static bool exec_file(const struct procfs_mapping *m)
{
	return (m->perms & PROCFS_MAP_EXEC) && m->inode;
}

static uint64_t fnv(uint64_t h, const void *p, size_t n)
{
	const unsigned char *b = p;

	for (size_t i = 0; i < n; i++) {
		h ^= b[i];
		h *= 0x100000001b3ull;
	}
	return h;
}

/* The hash of every executable file mapping, and how many there are. */
static uint64_t hash_maps(const struct procfs_mapping *maps, size_t nmaps, size_t *ret_n)
{
	uint64_t h = 0xcbf29ce484222325ull;
	size_t n = 0;

	for (size_t i = 0; i < nmaps; i++) {
		const struct procfs_mapping *m = &maps[i];
		uint64_t fields[6] = { m->start, m->end, m->offset, m->dev_major, m->dev_minor,
				       m->inode };

		if (!exec_file(m))
			continue;
		h = fnv(h, fields, sizeof(fields));
		h = fnv(h, &m->deleted, sizeof(m->deleted));
		h = fnv(h, m->path, strlen(m->path) + 1);
		n++;
	}
	*ret_n = n;
	return h;
}

static struct entry *memo_set_of(pid_t pid)
{
	return table[((uint32_t)pid * 2654435761u >> 8) % SETS];
}

/* The index in maps of the ord-th executable file mapping, or nmaps. */
static size_t nth_exec_file(const struct procfs_mapping *maps, size_t nmaps, uint32_t ord)
{
	for (size_t i = 0; i < nmaps; i++)
		if (exec_file(&maps[i]) && ord-- == 0)
			return i;
	return nmaps;
}

bool sitememo_get(pid_t pid, const struct procfs_mapping *maps, size_t nmaps,
		  struct site_list *ret)
{
	struct entry *set = memo_set_of(pid), *e = NULL;
	struct site_list list = { 0 };
	size_t nexec;
	uint64_t h = hash_maps(maps, nmaps, &nexec);

	for (unsigned w = 0; w < WAYS && !e; w++)
		if (set[w].pid == pid && set[w].maps_hash == h && set[w].nmaps_exec == nexec)
			e = &set[w];
	if (!e)
		return false;
	if (e->nsites) {
		list.v = calloc(e->nsites, sizeof(*list.v));
		if (!list.v)
			return false;
	}
	for (size_t i = 0; i < e->nsites; i++) {
		const struct memo_site *m = &e->sites[i];
		size_t k = nth_exec_file(maps, nmaps, m->ord);
		struct site *s = &list.v[i];

		if (k == nmaps) {   /* cannot be, with the same hash: be safe, find afresh */
			free(list.v);
			return false;
		}
		snprintf(s->object, sizeof(s->object), "%s", maps[k].path);
		s->deleted = m->deleted;
		s->from_symtab = m->from_symtab;
		s->addr = m->addr;
		s->ctx_len = m->ctx_len;
		memcpy(s->orig, m->orig, sizeof(s->orig));
		s->plan = m->plan;
		s->held = m->plan;
		if (m->walk_planned)
			walk_build(s, &m->walk_where);
		else
			snprintf(s->walk.why, sizeof(s->walk.why), "%s", m->walk_why);
	}
	list.n = e->nsites;
	e->last_used = ++tick;
	*ret = list;
	return true;
}

/* The ordinal, among the executable file mappings, of the one that holds addr. */
static bool ord_of(const struct procfs_mapping *maps, size_t nmaps, uint64_t addr, uint32_t *ret)
{
	uint32_t ord = 0;

	for (size_t i = 0; i < nmaps; i++) {
		if (!exec_file(&maps[i]))
			continue;
		if (addr >= maps[i].start && addr < maps[i].end) {
			*ret = ord;
			return true;
		}
		ord++;
	}
	return false;
}

void sitememo_put(pid_t pid, const struct procfs_mapping *maps, size_t nmaps,
		  const struct site_list *list)
{
	struct entry *set = memo_set_of(pid), *e = &set[0];
	struct memo_site *sites = NULL;
	size_t nexec;
	uint64_t h = hash_maps(maps, nmaps, &nexec);

	if (list->n) {
		sites = calloc(list->n, sizeof(*sites));
		if (!sites)
			return;   /* not remembered: the next status finds them afresh */
	}
	for (size_t i = 0; i < list->n; i++) {
		const struct site *s = &list->v[i];

		if (!ord_of(maps, nmaps, s->addr, &sites[i].ord)) {
			free(sites);
			return;
		}
		sites[i].deleted = s->deleted;
		sites[i].from_symtab = s->from_symtab;
		sites[i].addr = s->addr;
		sites[i].ctx_len = s->ctx_len;
		memcpy(sites[i].orig, s->orig, sizeof(sites[i].orig));
		sites[i].plan = s->plan;
		sites[i].walk_planned = s->walk.planned;
		sites[i].walk_where = s->walk.where;
		snprintf(sites[i].walk_why, sizeof(sites[i].walk_why), "%s", s->walk.why);
	}
	/* Its own entry, else a free one, else the least recently used. */
	for (unsigned w = 0; w < WAYS; w++) {
		if (set[w].pid == pid || set[w].pid == 0) {
			e = &set[w];
			break;
		}
		if (set[w].last_used < e->last_used)
			e = &set[w];
	}
	free(e->sites);
	*e = (struct entry){ .pid = pid, .maps_hash = h, .nmaps_exec = nexec, .nsites = list->n,
			     .sites = sites, .last_used = ++tick };
}
