// SPDX-License-Identifier: MIT
/*
 * Reading a target through /proc: maps, status, stat, task and child
 * lists, each file read whole and handed to its parser (procfs_parse.c,
 * pure); a file under /proc/PID that is missing means the process is
 * gone (-ESRCH).  Nothing here stops or changes a process.
 */
#include <ctype.h>
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "procfs.h"

/* Big processes (torch with thousands of shared objects) have maps files of
 * several MB; 64 MiB is far beyond any real one and still bounds memory. */
#define MAPS_MAX       (64u << 20)
#define SMALL_FILE_MAX (1u << 20)

/* "/proc/<digits>/..." : a missing file there means the process is gone. */
static bool is_pid_path(const char *path)
{
	const char *p;

	if (strncmp(path, "/proc/", 6) != 0)
		return false;
	p = path + 6;
	if (!isdigit((unsigned char)*p))
		return false;
	while (isdigit((unsigned char)*p))
		p++;
	return *p == '/';
}

/* Opens a proc file: -ESRCH for a /proc/PID path whose process is gone. */
static int open_proc_file(const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0)
		return errno == ENOENT && is_pid_path(path) ? -ESRCH : -errno;
	return fd;
}

/*
 * Reads fd to its end into a malloc'ed NUL-terminated buffer; closes fd.
 * one_record: the kernel writes the file as one record (a single_open()
 * seq file such as status or stat, or cmdline and environ, which copy
 * until the request is met or the text ends), so a read that returns less
 * than asked has reached the end and the closing empty read is skipped -
 * one system call in three of a node-wide selection.  Not maps: a seq file
 * of many records returns at most its buffer per read.
 */
static int read_fd_whole(int fd, size_t max, bool one_record, char **ret, size_t *ret_len)
{
	size_t cap = 4096, len = 0;
	char *buf;
	int r;

	buf = malloc(cap);
	if (!buf) {
		r = -ENOMEM;
		goto out_close;
	}
	/* proc files report st_size 0: read until EOF, growing as needed. */
	for (;;) {
		ssize_t k;

		if (len == cap - 1) {
			size_t ncap = cap * 2;
			char *nb;

			if (cap - 1 > max) {
				r = -EFBIG;
				goto out_free_buf;
			}
			nb = realloc(buf, ncap);
			if (!nb) {
				r = -ENOMEM;
				goto out_free_buf;
			}
			buf = nb;
			cap = ncap;
		}
		k = read(fd, buf + len, cap - 1 - len);
		if (k < 0) {
			if (errno == EINTR)
				continue;
			r = -errno;
			goto out_free_buf;
		}
		if (k == 0)
			break;
		len += (size_t)k;
		if (one_record && len < cap - 1)
			break;
	}
	if (len > max) {
		r = -EFBIG;
		goto out_free_buf;
	}
	buf[len] = '\0';
	close(fd);
	*ret = buf;
	if (ret_len)
		*ret_len = len;
	return 0;

out_free_buf:
	free(buf);
out_close:
	close(fd);
	return r;
}

/* The file at path, whole (see read_fd_whole() for one_record). */
static int read_path(const char *path, size_t max, bool one_record, char **ret, size_t *ret_len)
{
	int fd = open_proc_file(path);

	if (fd < 0)
		return fd;
	return read_fd_whole(fd, max, one_record, ret, ret_len);
}

int procfs_read_file(const char *path, size_t max, char **ret, size_t *ret_len)
{
	return read_path(path, max, false, ret, ret_len);
}

int procfs_read_record(const char *path, size_t max, char **ret, size_t *ret_len)
{
	return read_path(path, max, true, ret, ret_len);
}

int procfs_read_pid_file(pid_t pid, const char *name, size_t max, char **ret, size_t *ret_len)
{
	char path[64];

	snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, name);
	return read_path(path, max, false, ret, ret_len);
}

int procfs_read_pid_record(pid_t pid, const char *name, size_t max, char **ret, size_t *ret_len)
{
	char path[64];

	snprintf(path, sizeof(path), "/proc/%d/%s", (int)pid, name);
	return read_path(path, max, true, ret, ret_len);
}

int procfs_ns_identity(pid_t pid, const char *name, dev_t *ret_dev, ino_t *ret_ino)
{
	char path[64];
	struct stat st;

	if (pid)
		snprintf(path, sizeof(path), "/proc/%d/ns/%s", (int)pid, name);
	else
		snprintf(path, sizeof(path), "/proc/self/ns/%s", name);
	if (stat(path, &st) < 0)
		return errno == ENOENT ? -ESRCH : -errno;
	*ret_dev = st.st_dev;
	*ret_ino = st.st_ino;
	return 0;
}

int procfs_read_maps(pid_t pid, struct procfs_mapping **ret, size_t *ret_n)
{
	char *buf;
	size_t len;
	int r;

	r = procfs_read_pid_file(pid, "maps", MAPS_MAX, &buf, &len);   /* many records */
	if (r < 0)
		return r;
	r = procfs_parse_maps_buf(buf, len, ret, ret_n);
	free(buf);
	return r;
}

int procfs_read_status(pid_t pid, struct procfs_status *ret)
{
	char *buf;
	size_t len;
	int r;

	r = procfs_read_pid_record(pid, "status", SMALL_FILE_MAX, &buf, &len);
	if (r < 0)
		return r;
	r = procfs_parse_status_buf(buf, len, ret);
	free(buf);
	return r;
}

int procfs_read_status_owner(pid_t pid, struct procfs_status *ret, uid_t *ret_owner)
{
	char path[40], *buf;
	struct stat sb;
	size_t len;
	int fd, r;

	snprintf(path, sizeof(path), "/proc/%d/status", (int)pid);
	fd = open_proc_file(path);
	if (fd < 0)
		return fd;
	/* The owner the kernel gave the file as it was opened (task_dump_owner()). */
	if (fstat(fd, &sb) < 0) {
		r = -errno;
		close(fd);
		return r;
	}
	r = read_fd_whole(fd, SMALL_FILE_MAX, true, &buf, &len);
	if (r < 0)
		return r;
	r = procfs_parse_status_buf(buf, len, ret);
	free(buf);
	if (r == 0)
		*ret_owner = sb.st_uid;
	return r;
}

int procfs_read_stat(pid_t pid, struct procfs_stat *ret)
{
	char *buf;
	size_t len;
	int r;

	r = procfs_read_pid_record(pid, "stat", SMALL_FILE_MAX, &buf, &len);
	if (r < 0)
		return r;
	r = procfs_parse_stat_buf(buf, len, ret);
	free(buf);
	return r;
}

int procfs_sample_stat(pid_t pid, struct procfs_stat *ret)
{
	char path[40], buf[1024];
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/stat", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? -ESRCH : -errno;
	n = read(fd, buf, sizeof(buf));
	close(fd);
	if (n < 0)
		return errno == ESRCH ? -ESRCH : -errno;
	if ((size_t)n == sizeof(buf))
		return -EMSGSIZE;   /* a stat line is ~300 bytes; comm is at most 64 */
	return procfs_parse_stat_buf(buf, (size_t)n, ret);
}

/* A growable list of PIDs. */
struct pid_list {
	pid_t *v;
	size_t n, cap;
};

static int pid_list_add(struct pid_list *l, pid_t pid)
{
	if (l->n == l->cap) {
		size_t ncap = l->cap ? l->cap * 2 : 16;
		pid_t *nv = reallocarray(l->v, ncap, sizeof(*nv));

		if (!nv)
			return -ENOMEM;
		l->v = nv;
		l->cap = ncap;
	}
	l->v[l->n++] = pid;
	return 0;
}

static int pid_cmp(const void *a, const void *b)
{
	pid_t x = *(const pid_t *)a, y = *(const pid_t *)b;

	return (x > y) - (x < y);
}

static void pid_list_sort_unique(struct pid_list *l)
{
	size_t w = 0;

	if (l->n)
		qsort(l->v, l->n, sizeof(*l->v), pid_cmp);
	for (size_t i = 0; i < l->n; i++)
		if (w == 0 || l->v[w - 1] != l->v[i])
			l->v[w++] = l->v[i];
	l->n = w;
}

/* A decimal PID name in /proc, or -1. */
static pid_t parse_pid_name(const char *s)
{
	const char *end = s + strlen(s), *after;
	uint64_t v;

	if (procfs_parse_u64(s, end, &after, &v) < 0 || after != end || v == 0 || v > INT32_MAX)
		return -1;
	return (pid_t)v;
}

/* The numeric entries of a /proc directory, sorted; -ESRCH when it is gone. */
static int list_pid_dir(const char *path, pid_t **ret, size_t *ret_n)
{
	struct pid_list l = { 0 };
	struct dirent *de;
	DIR *d;
	int r;

	d = opendir(path);
	if (!d)
		return errno == ENOENT ? -ESRCH : -errno;
	for (;;) {
		pid_t id;

		errno = 0;
		de = readdir(d);
		if (!de) {
			if (errno) {
				r = -errno;
				goto out_free_list;
			}
			break;
		}
		id = parse_pid_name(de->d_name);
		if (id < 0)
			continue;
		r = pid_list_add(&l, id);
		if (r < 0)
			goto out_free_list;
	}
	closedir(d);
	pid_list_sort_unique(&l);
	*ret = l.v;
	*ret_n = l.n;
	return 0;

out_free_list:
	free(l.v);
	closedir(d);
	return r;
}

int procfs_list_tasks(pid_t pid, pid_t **ret, size_t *ret_n)
{
	char path[64];
	int r;

	snprintf(path, sizeof(path), "/proc/%d/task", (int)pid);
	r = list_pid_dir(path, ret, ret_n);
	/* A live process always has a task; none means it exited while we
	 * read the directory. */
	if (r == 0 && *ret_n == 0) {
		free(*ret);
		return -ESRCH;
	}
	return r;
}

int procfs_list_processes(pid_t **ret, size_t *ret_n)
{
	return list_pid_dir("/proc", ret, ret_n);
}

int procfs_read_forks(uint64_t *ret)
{
	char *buf;
	size_t len;
	/* A line per CPU and one with every interrupt's count: large on big machines. */
	int r = read_path("/proc/stat", 16u << 20, true, &buf, &len);   /* single_open(): one record */

	if (r < 0)
		return r;
	r = procfs_parse_forks_buf(buf, len, ret);
	free(buf);
	return r;
}

int procfs_read_task_stat(pid_t pid, pid_t tid, struct procfs_stat *ret)
{
	char path[64], *buf = NULL;
	size_t len;
	int r;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/stat", (int)pid, (int)tid);
	r = read_path(path, 4096, true, &buf, &len);
	if (r < 0)
		return r;
	r = procfs_parse_stat_buf(buf, len, ret);
	free(buf);
	return r;
}

int procfs_read_task_status(pid_t pid, pid_t tid, struct procfs_status *ret)
{
	char path[64], *buf = NULL;
	size_t len;
	int r;

	snprintf(path, sizeof(path), "/proc/%d/task/%d/status", (int)pid, (int)tid);
	r = read_path(path, SMALL_FILE_MAX, true, &buf, &len);
	if (r < 0)
		return r;
	r = procfs_parse_status_buf(buf, len, ret);
	free(buf);
	return r;
}

static bool task_is_live(pid_t pid, pid_t tid)
{
	struct procfs_stat st;

	return procfs_read_task_stat(pid, tid, &st) == 0 && st.state != 'Z' && st.state != 'X';
}

int procfs_live_task(pid_t pid, pid_t *ret)
{
	pid_t *tids;
	size_t n;
	int r;

	if (task_is_live(pid, pid)) {
		*ret = pid;
		return 0;
	}
	r = procfs_list_tasks(pid, &tids, &n);
	if (r < 0)
		return r;
	r = -ESRCH;
	for (size_t i = 0; i < n; i++) {
		if (tids[i] != pid && task_is_live(pid, tids[i])) {
			*ret = tids[i];
			r = 0;
			break;
		}
	}
	free(tids);
	return r;
}

/* Appends the space-separated PIDs of one children file. */
static int add_children(struct pid_list *l, const char *buf, size_t len)
{
	const char *p = buf, *end = buf + len;
	uint64_t v;
	int r;

	for (;;) {
		while (p < end && isspace((unsigned char)*p))
			p++;
		if (p == end)
			return 0;
		if (procfs_parse_u64(p, end, &p, &v) < 0 || v == 0 || v > INT32_MAX)
			return -EBADMSG;
		r = pid_list_add(l, (pid_t)v);
		if (r < 0)
			return r;
	}
}

int procfs_list_children(pid_t pid, pid_t **ret, size_t *ret_n)
{
	struct pid_list l = { 0 };
	pid_t *tids;
	size_t ntids;
	int r;

	r = procfs_list_tasks(pid, &tids, &ntids);
	if (r < 0)
		return r;
	for (size_t i = 0; i < ntids; i++) {
		char path[96], *buf;
		size_t len;

		snprintf(path, sizeof(path), "/proc/%d/task/%d/children", (int)pid, (int)tids[i]);
		r = procfs_read_file(path, SMALL_FILE_MAX, &buf, &len);
		if (procfs_gone(r))
			continue;       /* the thread exited meanwhile */
		if (r < 0)
			goto out_free_list;
		r = add_children(&l, buf, len);
		free(buf);
		if (r < 0)
			goto out_free_list;
	}
	free(tids);
	pid_list_sort_unique(&l);
	*ret = l.v;
	*ret_n = l.n;
	return 0;

out_free_list:
	free(l.v);
	free(tids);
	return r;
}
