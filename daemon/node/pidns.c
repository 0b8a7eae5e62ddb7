// SPDX-License-Identifier: MIT
/*
 * PID namespace translation through /proc/PID/status NSpid lines (every
 * number a task has, outermost namespace first, as seen from our /proc)
 * and /proc/PID/ns/pid identities.  A caller's number is resolved by
 * scanning our /proc for the task whose NSpid at the caller's level equals
 * it and whose namespace at that level is the caller's: sibling containers
 * reuse the same numbers, so the number alone proves nothing.  The scan
 * costs a few system calls per process on the node, so it is done once per
 * request, in bounded steps (pidns_scan_*), never once per PID.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/nsfs.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "proto.h"
#include "pidns.h"
#include "procfs.h"
#include "timeutil.h"

static int ns_identity(const char *path, ino_t *ino, dev_t *dev)
{
	struct stat st;

	if (stat(path, &st) < 0)
		return -errno;
	*ino = st.st_ino;
	*dev = st.st_dev;
	return 0;
}

int pidns_view_of(pid_t caller, struct pidns_view *ret)
{
	struct procfs_status st;
	char path[64];
	ino_t ino = 0;
	dev_t dev = 0;
	int r;

	r = ns_identity("/proc/self/ns/pid", &ino, &dev);
	if (r < 0)
		return r;
	snprintf(path, sizeof(path), "/proc/%d/ns/pid", caller);
	r = ns_identity(path, &ret->ns_ino, &ret->ns_dev);
	if (r < 0)
		return -BTG_ERR_DENIED;
	ret->same = ret->ns_ino == ino && ret->ns_dev == dev;
	r = procfs_read_status(caller, &st);
	/* Out of descriptors or memory says nothing about the caller: say that. */
	if (proto_shortage(r))
		return r;
	if (r < 0)
		return -BTG_ERR_DENIED;
	ret->level = st.nspid_n - 1;
	return 0;
}

/* True when the namespace `up` levels above PID's own is the caller's. */
static bool ns_ancestor_is(pid_t pid, int up, const struct pidns_view *v)
{
	char path[64];
	struct stat st;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/ns/pid", pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return false;
	while (up-- > 0) {
		int parent = ioctl(fd, NS_GET_PARENT);

		close(fd);
		if (parent < 0)
			return false;
		fd = parent;
	}
	bool same = fstat(fd, &st) == 0 && st.st_ino == v->ns_ino && st.st_dev == v->ns_dev;
	close(fd);
	return same;
}

struct pidns_pair {
	pid_t theirs, ours;
};

struct pidns_scan {
	struct pidns_view view;
	DIR *dir;                  /* NULL once the scan is complete */
	struct pidns_pair *v;      /* sorted by .theirs once complete */
	size_t n, cap;
};

int pidns_scan_new(const struct pidns_view *v, struct pidns_scan **ret)
{
	struct pidns_scan *s = calloc(1, sizeof(*s));
	int r;

	if (!s)
		return -ENOMEM;
	s->view = *v;
	s->dir = opendir("/proc");
	if (!s->dir) {
		r = -errno;
		free(s);
		return r;
	}
	*ret = s;
	return 0;
}

static int pair_cmp(const void *a, const void *b)
{
	const struct pidns_pair *x = a, *y = b;

	return (x->theirs > y->theirs) - (x->theirs < y->theirs);
}

/* Adds our process n when it has a number in the caller's namespace. */
static int scan_one(struct pidns_scan *s, pid_t n)
{
	const struct pidns_view *v = &s->view;
	struct procfs_status st;

	if (procfs_read_status(n, &st) < 0 || st.nspid_n <= v->level ||
	    !ns_ancestor_is(n, st.nspid_n - 1 - v->level, v))
		return 0;
	if (s->n == s->cap) {
		size_t cap = s->cap ? s->cap * 2 : 256;
		struct pidns_pair *p = realloc(s->v, cap * sizeof(*p));

		if (!p)
			return -ENOMEM;
		s->v = p;
		s->cap = cap;
	}
	s->v[s->n++] = (struct pidns_pair){ .theirs = st.nspid[v->level], .ours = n };
	return 0;
}

int pidns_scan_step(struct pidns_scan *s, uint64_t budget_us)
{
	uint64_t until_us = now_us() + budget_us;
	struct dirent *e;

	if (!s->dir)
		return 1;
	while ((e = readdir(s->dir))) {
		char *end;
		long n = strtol(e->d_name, &end, 10);
		int r;

		if (*end || n <= 0)
			continue;
		r = scan_one(s, (pid_t)n);
		if (r < 0)
			return r;
		if (now_us() >= until_us)
			return 0;
	}
	closedir(s->dir);
	s->dir = NULL;
	qsort(s->v, s->n, sizeof(*s->v), pair_cmp);
	return 1;
}

int pidns_scan_lookup(const struct pidns_scan *s, pid_t theirs, pid_t *ret)
{
	struct pidns_pair key = { .theirs = theirs };
	const struct pidns_pair *hit;

	if (s->dir)
		return -EAGAIN;   /* not complete: a broken invariant of the caller */
	hit = bsearch(&key, s->v, s->n, sizeof(*s->v), pair_cmp);
	if (!hit)
		return -BTG_ERR_NOPROC;
	*ret = hit->ours;
	return 0;
}

void pidns_scan_free(struct pidns_scan *s)
{
	if (!s)
		return;
	if (s->dir)
		closedir(s->dir);
	free(s->v);
	free(s);
}

int pidns_to_caller(const struct pidns_view *v, pid_t pid, pid_t *ret)
{
	struct procfs_status st;

	if (v->same) {
		*ret = pid;
		return 0;
	}
	if (procfs_read_status(pid, &st) < 0 || st.nspid_n <= v->level ||
	    !ns_ancestor_is(pid, st.nspid_n - 1 - v->level, v))
		return -BTG_ERR_NOPROC;
	*ret = st.nspid[v->level];
	return 0;
}
