// SPDX-License-Identifier: MIT
/*
 * Reading a process's selection facts (facts.h).  Paths under /proc are
 * procfs.c's; this file only decides which facts to read and shapes them
 * for select.c.
 */
#include <errno.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "facts.h"
#include "procfs.h"
#include "proto.h"

/* A command line or a cgroup file is small; an environment may not be. */
#define SMALL_MAX (64u * 1024u)

unsigned facts_needed(const struct select_rule *r, bool at_risk)
{
	unsigned need = FACTS_UID;   /* always: zombies and kernel threads are skipped on it */

	if (r->exe)
		need |= FACTS_EXE;
	if (r->cmdline)
		need |= FACTS_CMDLINE;
	if (r->cgroup)
		need |= FACTS_CGROUP;
	if (r->maps || at_risk)
		need |= FACTS_OBJECTS;
	return need;
}

static int read_cmdline(pid_t pid, struct facts *f)
{
	char *buf;
	size_t len;
	int r = procfs_read_pid_record(pid, "cmdline", SMALL_MAX, &buf, &len);

	if (r == -ESRCH || proto_shortage(r))
		return r;   /* gone, or we are short: that says nothing of the process */
	if (r < 0)
		return 0;   /* too long or unreadable: matches no pattern */
	procfs_cmdline_to_line(buf, len, f->cmdline, sizeof(f->cmdline));
	free(buf);
	return 0;
}

static int read_cgroups(pid_t pid, struct facts *f)
{
	size_t len, n = 0;
	char *buf;
	int r = procfs_read_pid_record(pid, "cgroup", SMALL_MAX, &buf, &len);

	if (r < 0)
		return r == -ESRCH || proto_shortage(r) ? r : 0;
	r = select_parse_cgroup_buf(buf, len, f->cgroup_buf, sizeof(f->cgroup_buf), f->cgroups,
				    FACTS_MAX_CGROUPS, &n);
	free(buf);
	f->p.cgroups = f->cgroups;
	f->p.ncgroups = r == 0 ? n : 0;
	return 0;
}

int facts_objects_from_maps(struct facts *f, const struct procfs_mapping *maps, size_t nmaps)
{
	size_t n = 0, used = 0, total = 0;

	facts_free(f);
	f->objects_read = false;
	for (size_t i = 0; i < nmaps; i++)
		total += strlen(maps[i].path) + 1;
	f->objects_buf = malloc(total ? total : 1);
	f->objects = malloc((nmaps ? nmaps : 1) * sizeof(*f->objects));
	if (!f->objects_buf || !f->objects)
		return -ENOMEM;
	for (size_t i = 0; i < nmaps; i++) {
		const char *path = maps[i].path;
		size_t len = strlen(path);

		if (path[0] != '/' || (n > 0 && !strcmp(f->objects[n - 1], path)))
			continue;
		memcpy(f->objects_buf + used, path, len + 1);
		f->objects[n++] = f->objects_buf + used;
		used += len + 1;
	}
	f->p.objects = f->objects;
	f->p.nobjects = n;
	f->objects_read = true;
	return 0;
}

/*
 * Has the loader finished?  The C library is mapped, and the loader's
 * cache is not any more: ld.so maps /etc/ld.so.cache before the first
 * library it looks up there and unmaps it only once every dependency is
 * mapped (glibc's dl_main, _dl_unload_cache).  A look in between would
 * take a list of objects the program is still growing, so the next sweep
 * would find it changed and ask about the program again.  A program whose
 * libraries are all found without the cache never maps it.
 */
bool facts_loader_done(const struct facts *f)
{
	bool libc = false;

	for (size_t i = 0; i < f->p.nobjects; i++) {
		const char *base = strrchr(f->p.objects[i], '/');

		base = base ? base + 1 : f->p.objects[i];
		if (!strcmp(base, "ld.so.cache"))
			return false;
		if (!strncmp(base, "libc.so", 7))
			libc = true;
	}
	return libc;
}

/* The distinct files the process maps, in map order. */
static int read_objects(pid_t pid, struct facts *f)
{
	struct procfs_mapping *maps = NULL;
	size_t nmaps = 0;
	int r = procfs_read_maps(pid, &maps, &nmaps);

	if (r < 0)
		return procfs_gone(r) ? -ESRCH : proto_shortage(r) ? r : 0;
	r = facts_objects_from_maps(f, maps, nmaps);
	free(maps);
	return r;
}

int facts_read(pid_t pid, unsigned need, struct facts *f)
{
	struct procfs_status st;
	char path[64];
	ssize_t n;
	int r;

	memset(f, 0, offsetof(struct facts, exe));
	f->exe[0] = f->cmdline[0] = '\0';
	f->objects_buf = NULL;
	f->objects = NULL;
	f->p.pid = pid;
	f->p.exe = f->exe;
	f->p.cmdline = f->cmdline;
	if (need & FACTS_UID) {
		r = procfs_read_status(pid, &st);
		if (r < 0)
			return procfs_gone(r) ? -ESRCH : r;
		f->p.uid = st.uid[0];
		f->state = st.state;
	}
	if (need & FACTS_EXE) {
		snprintf(path, sizeof(path), "/proc/%d/exe", (int)pid);
		n = readlink(path, f->exe, sizeof(f->exe) - 1);
		f->exe[n > 0 ? n : 0] = '\0';
		/* A replaced executable reads "/usr/bin/x (deleted)": match its path. */
		if (n > 10 && !strcmp(f->exe + n - 10, " (deleted)"))
			f->exe[n - 10] = '\0';
	}
	if ((need & FACTS_CMDLINE) && (r = read_cmdline(pid, f)) < 0)
		return r;
	if ((need & FACTS_CGROUP) && (r = read_cgroups(pid, f)) < 0)
		return r;
	if ((need & FACTS_OBJECTS) && (r = read_objects(pid, f)) < 0)
		return r;
	return 0;
}

int facts_read_through_live(pid_t pid, unsigned need, struct facts *f)
{
	pid_t live;
	int r = procfs_live_task(pid, &live);

	if (r < 0)
		return proto_shortage(r) ? r : -ESRCH;
	facts_free(f);
	r = facts_read(live, need, f);
	f->p.pid = pid;
	return r;
}

void facts_free(struct facts *f)
{
	free(f->objects_buf);
	free(f->objects);
	f->objects_buf = NULL;
	f->objects = NULL;
}

uint64_t facts_objects_hash(const struct facts *f)
{
	uint64_t h = 1469598103934665603ull;

	for (size_t i = 0; i < f->p.nobjects; i++)
		for (const unsigned char *c = (const unsigned char *)f->p.objects[i]; ; c++) {
			h = (h ^ *c) * 1099511628211ull;
			if (!*c)
				break;
		}
	return h ? h : 1;   /* 0 means "not asked yet" */
}
