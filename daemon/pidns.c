// SPDX-License-Identifier: MIT
/*
 * PID namespace translation through /proc/PID/status NSpid lines (every
 * number a task has, outermost namespace first, as seen from our /proc)
 * and /proc/PID/ns/pid identities.  A number is resolved by scanning our
 * /proc for the task whose NSpid at the caller's level equals it and whose
 * namespace at that level is the caller's: sibling containers reuse the
 * same numbers, so the number alone proves nothing.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <linux/nsfs.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <unistd.h>

#include "../proto/proto.h"
#include "pidns.h"
#include "procfs.h"

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

int pidns_to_daemon(const struct pidns_view *v, pid_t pid, pid_t *ret)
{
	DIR *d;
	struct dirent *e;
	int r = -BTG_ERR_NOPROC;

	if (v->same) {
		*ret = pid;
		return 0;
	}
	d = opendir("/proc");
	if (!d)
		return -errno;
	while ((e = readdir(d))) {
		struct procfs_status st;
		char *end;
		long n = strtol(e->d_name, &end, 10);

		if (*end || n <= 0)
			continue;
		if (procfs_read_status((pid_t)n, &st) < 0 || st.nspid_n <= v->level ||
		    st.nspid[v->level] != pid)
			continue;
		if (ns_ancestor_is((pid_t)n, st.nspid_n - 1 - v->level, v)) {
			*ret = (pid_t)n;
			r = 0;
			break;
		}
	}
	closedir(d);
	return r;
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
