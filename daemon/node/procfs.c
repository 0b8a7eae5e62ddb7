// SPDX-License-Identifier: MIT
/*
 * Reading a target through /proc: maps, status, stat, task and child
 * lists.  The parsers work on a (pointer, length) pair that is NOT assumed
 * to be NUL-terminated, so a fuzzer or a unit test can hand them exactly the
 * bytes it has and the sanitizer catches any read past them.  Every
 * malformed input is -EBADMSG; nothing here stops or changes a process.
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

/* A bounded cursor over the input: every helper stops at end. */
struct cursor {
	const char *p, *end;
};

static bool cur_eof(const struct cursor *c) { return c->p >= c->end; }

static int hexval(char ch)
{
	if (ch >= '0' && ch <= '9')
		return ch - '0';
	if (ch >= 'a' && ch <= 'f')
		return ch - 'a' + 10;
	if (ch >= 'A' && ch <= 'F')
		return ch - 'A' + 10;
	return -1;
}

/* One or more hex digits; -EBADMSG on none or on a 64-bit overflow. */
static int cur_hex(struct cursor *c, uint64_t *ret)
{
	uint64_t v = 0;
	const char *start = c->p;

	while (!cur_eof(c) && hexval(*c->p) >= 0) {
		if (v >> 60)
			return -EBADMSG;
		v = (v << 4) | (uint64_t)hexval(*c->p);
		c->p++;
	}
	if (c->p == start)
		return -EBADMSG;
	*ret = v;
	return 0;
}

/* One or more decimal digits; -EBADMSG on none or on a 64-bit overflow. */
static int cur_dec(struct cursor *c, uint64_t *ret)
{
	uint64_t v = 0;
	const char *start = c->p;

	while (!cur_eof(c) && *c->p >= '0' && *c->p <= '9') {
		unsigned d = (unsigned)(*c->p - '0');

		if (v > (UINT64_MAX - d) / 10)
			return -EBADMSG;
		v = v * 10 + d;
		c->p++;
	}
	if (c->p == start)
		return -EBADMSG;
	*ret = v;
	return 0;
}

static int cur_expect(struct cursor *c, char ch)
{
	if (cur_eof(c) || *c->p != ch)
		return -EBADMSG;
	c->p++;
	return 0;
}

/* Spaces and tabs, not newlines: the line structure is meaningful. */
static size_t cur_blanks(struct cursor *c)
{
	size_t n = 0;

	while (!cur_eof(c) && (*c->p == ' ' || *c->p == '\t')) {
		c->p++;
		n++;
	}
	return n;
}

/* Where the current line ends (at '\n' or at the end of the buffer). */
static const char *line_end(const struct cursor *c)
{
	const char *nl = memchr(c->p, '\n', (size_t)(c->end - c->p));

	return nl ? nl : c->end;
}

static int parse_perms(struct cursor *c, unsigned *ret)
{
	static const char yes[4] = { 'r', 'w', 'x', 's' };
	static const char no[4] = { '-', '-', '-', 'p' };
	static const unsigned bit[4] = { PROCFS_MAP_READ, PROCFS_MAP_WRITE,
					 PROCFS_MAP_EXEC, PROCFS_MAP_SHARED };
	unsigned perms = 0;

	if (c->end - c->p < 4)
		return -EBADMSG;
	for (int i = 0; i < 4; i++) {
		if (c->p[i] == yes[i])
			perms |= bit[i];
		else if (c->p[i] != no[i])
			return -EBADMSG;
	}
	c->p += 4;
	*ret = perms;
	return 0;
}

/* One maps line, c positioned at its start, eol at its '\n' (or the end). */
static int parse_maps_line(struct cursor *c, const char *eol, struct procfs_mapping *m,
			   char **pool)
{
	static const char deleted[] = " (deleted)";
	const size_t deleted_len = sizeof(deleted) - 1;
	struct cursor l = { c->p, eol };
	uint64_t major, minor;
	size_t path_len;
	int r;

	memset(m, 0, sizeof(*m));
	if ((r = cur_hex(&l, &m->start)) < 0 || (r = cur_expect(&l, '-')) < 0 ||
	    (r = cur_hex(&l, &m->end)) < 0 || (r = cur_expect(&l, ' ')) < 0 ||
	    (r = parse_perms(&l, &m->perms)) < 0 || (r = cur_expect(&l, ' ')) < 0 ||
	    (r = cur_hex(&l, &m->offset)) < 0 || (r = cur_expect(&l, ' ')) < 0 ||
	    (r = cur_hex(&l, &major)) < 0 || (r = cur_expect(&l, ':')) < 0 ||
	    (r = cur_hex(&l, &minor)) < 0 || (r = cur_expect(&l, ' ')) < 0 ||
	    (r = cur_dec(&l, &m->inode)) < 0)
		return r;
	if (m->start >= m->end || major > UINT32_MAX || minor > UINT32_MAX)
		return -EBADMSG;
	m->dev_major = (unsigned)major;
	m->dev_minor = (unsigned)minor;

	/* The kernel pads the inode column with spaces before the path; a
	 * line without a path may end right after the inode. */
	if (!cur_eof(&l) && cur_blanks(&l) == 0)
		return -EBADMSG;
	path_len = (size_t)(l.end - l.p);
	if (path_len >= deleted_len &&
	    memcmp(l.p + path_len - deleted_len, deleted, deleted_len) == 0) {
		m->deleted = true;
		path_len -= deleted_len;
	}
	if (path_len > PATH_MAX - 1)
		return -EBADMSG;
	memcpy(*pool, l.p, path_len);
	(*pool)[path_len] = '\0';
	m->path = *pool;
	*pool += path_len + 1;
	c->p = eol < c->end ? eol + 1 : eol;
	return 0;
}

int procfs_parse_maps_buf(const char *buf, size_t len,
			  struct procfs_mapping **ret, size_t *ret_n)
{
	struct cursor c = { buf, buf + len };
	struct procfs_mapping *maps = NULL;
	size_t n = 0, lines = 0;
	char *pool;
	int r;

	/* One allocation: the entries, then every path (each at most its line). */
	for (const char *p = buf; p < buf + len; p++)
		lines += *p == '\n';
	lines += len > 0 && buf[len - 1] != '\n';
	maps = malloc(lines * sizeof(*maps) + len + lines + 1);
	if (!maps)
		return -ENOMEM;
	pool = (char *)(maps + lines);
	while (!cur_eof(&c)) {
		r = parse_maps_line(&c, line_end(&c), &maps[n], &pool);
		if (r < 0)
			goto out_free_maps;
		n++;
	}
	*ret = maps;
	*ret_n = n;
	return 0;

out_free_maps:
	free(maps);
	return r;
}

/* "Key:" at the start of line [p, eol)?  Then *val is what follows. */
static bool status_key(const char *p, const char *eol, const char *key, struct cursor *val)
{
	size_t kl = strlen(key);

	if ((size_t)(eol - p) <= kl || memcmp(p, key, kl) != 0 || p[kl] != ':')
		return false;
	val->p = p + kl + 1;
	val->end = eol;
	return true;
}

/* Up to max whitespace-separated decimal numbers filling the whole value;
 * -EBADMSG when there are none, more than max, or anything else. */
static int status_numbers(struct cursor *v, uint64_t *out, int max, int *ret_n)
{
	int n = 0;

	for (;;) {
		cur_blanks(v);
		if (cur_eof(v))
			break;
		if (n == max)
			return -EBADMSG;
		if (cur_dec(v, &out[n]) < 0)
			return -EBADMSG;
		n++;
	}
	if (n == 0)
		return -EBADMSG;
	*ret_n = n;
	return 0;
}

static int status_one(struct cursor *v, uint64_t limit, uint64_t *ret)
{
	int n, r;

	r = status_numbers(v, ret, 1, &n);
	if (r < 0)
		return r;
	return *ret > limit ? -EBADMSG : 0;
}

int procfs_parse_status_buf(const char *buf, size_t len, struct procfs_status *ret)
{
	enum { HAVE_STATE = 1, HAVE_PID = 2, HAVE_UID = 4, HAVE_GID = 8, HAVE_NSPID = 16,
	       HAVE_TGID = 32 };
	struct cursor c = { buf, buf + len };
	struct procfs_status st;
	unsigned have = 0;
	uint64_t nums[PROCFS_MAX_NSPID] = { 0 };
	int n, r = 0;

	memset(&st, 0, sizeof(st));
	st.kthread = -1;
	while (!cur_eof(&c)) {
		const char *eol = line_end(&c);
		struct cursor v;

		if (status_key(c.p, eol, "State", &v)) {
			cur_blanks(&v);
			if (cur_eof(&v))
				return -EBADMSG;
			st.state = *v.p;
			have |= HAVE_STATE;
		} else if (status_key(c.p, eol, "Tgid", &v)) {
			r = status_one(&v, INT32_MAX, &nums[0]);
			st.tgid = (pid_t)nums[0];
			have |= HAVE_TGID;
		} else if (status_key(c.p, eol, "Pid", &v)) {
			r = status_one(&v, INT32_MAX, &nums[0]);
			st.pid = (pid_t)nums[0];
			have |= HAVE_PID;
		} else if (status_key(c.p, eol, "PPid", &v)) {
			r = status_one(&v, INT32_MAX, &nums[0]);
			st.ppid = (pid_t)nums[0];
		} else if (status_key(c.p, eol, "TracerPid", &v)) {
			r = status_one(&v, INT32_MAX, &nums[0]);
			st.tracer = (pid_t)nums[0];
		} else if (status_key(c.p, eol, "Kthread", &v)) {
			/* Newer kernels: PF_KTHREAD, as stat's flags field says it. */
			r = status_one(&v, 1, &nums[0]);
			st.kthread = (int)nums[0];
		} else if (status_key(c.p, eol, "Threads", &v)) {
			r = status_one(&v, INT32_MAX, &nums[0]);
			st.threads = (int)nums[0];
		} else if (status_key(c.p, eol, "Uid", &v) || status_key(c.p, eol, "Gid", &v)) {
			bool is_uid = c.p[0] == 'U';

			r = status_numbers(&v, nums, 4, &n);
			if (r == 0 && n != 4)
				r = -EBADMSG;
			for (int i = 0; r == 0 && i < 4; i++) {
				if (nums[i] > UINT32_MAX)
					r = -EBADMSG;
				else if (is_uid)
					st.uid[i] = (uid_t)nums[i];
				else
					st.gid[i] = (gid_t)nums[i];
			}
			have |= is_uid ? HAVE_UID : HAVE_GID;
		} else if (status_key(c.p, eol, "NSpid", &v)) {
			r = status_numbers(&v, nums, PROCFS_MAX_NSPID, &n);
			for (int i = 0; r == 0 && i < n; i++) {
				if (nums[i] > INT32_MAX)
					r = -EBADMSG;
				st.nspid[i] = (pid_t)nums[i];
			}
			st.nspid_n = n;
			have |= HAVE_NSPID;
		}
		if (r < 0)
			return r;
		c.p = eol < c.end ? eol + 1 : eol;
	}
	if ((have & (HAVE_STATE | HAVE_PID | HAVE_UID | HAVE_GID)) !=
	    (HAVE_STATE | HAVE_PID | HAVE_UID | HAVE_GID))
		return -EBADMSG;
	/* NSpid appeared in Linux 4.1: without it the task lives in our
	 * namespace only, and its one PID is Pid. */
	if (!(have & HAVE_NSPID)) {
		st.nspid[0] = st.pid;
		st.nspid_n = 1;
	}
	if (!(have & HAVE_TGID))
		st.tgid = st.pid;
	*ret = st;
	return 0;
}

/* Skips one space-separated field of stat (which may be negative). */
static int stat_skip(struct cursor *c)
{
	const char *start;

	if (cur_expect(c, ' ') < 0)
		return -EBADMSG;
	start = c->p;
	while (!cur_eof(c) && *c->p != ' ' && *c->p != '\n')
		c->p++;
	return c->p == start ? -EBADMSG : 0;
}

static int stat_number(struct cursor *c, uint64_t *ret)
{
	if (cur_expect(c, ' ') < 0)
		return -EBADMSG;
	return cur_dec(c, ret);
}

int procfs_parse_stat_buf(const char *buf, size_t len, struct procfs_stat *ret)
{
	const char *open = memchr(buf, '(', len), *close = NULL;
	struct procfs_stat st;
	struct cursor c;
	uint64_t v;
	size_t comm_len;

	/* comm may hold anything, ')' and spaces included, so it ends at
	 * the LAST ')' of the line. */
	if (!open)
		return -EBADMSG;
	for (const char *p = buf + len; p > open + 1; p--)
		if (p[-1] == ')') {
			close = p - 1;
			break;
		}
	if (!close)
		return -EBADMSG;

	memset(&st, 0, sizeof(st));
	/* Kernel threads' comm can be longer than TASK_COMM_LEN here
	 * (workqueue workers get their queue appended): keep what fits. */
	comm_len = (size_t)(close - open - 1);
	if (comm_len > sizeof(st.comm) - 1)
		comm_len = sizeof(st.comm) - 1;
	memcpy(st.comm, open + 1, comm_len);

	c.p = close + 1;
	c.end = buf + len;
	/* Field 3: state. */
	if (cur_expect(&c, ' ') < 0 || cur_eof(&c))
		return -EBADMSG;
	st.state = *c.p++;
	/* Field 4: ppid. */
	if (stat_number(&c, &v) < 0 || v > INT32_MAX)
		return -EBADMSG;
	st.ppid = (pid_t)v;
	/* Fields 5-8: pgrp, session, tty_nr, tpgid (may be -1). */
	for (int f = 5; f <= 8; f++)
		if (stat_skip(&c) < 0)
			return -EBADMSG;
	/* Field 9: flags. */
	if (stat_number(&c, &v) < 0 || v > UINT32_MAX)
		return -EBADMSG;
	st.flags = (unsigned)v;
	/* Fields 10-21: fault counts, times, priority, nice, threads, itrealvalue. */
	for (int f = 10; f <= 21; f++)
		if (stat_skip(&c) < 0)
			return -EBADMSG;
	/* Field 22: starttime. */
	if (stat_number(&c, &st.start_ticks) < 0)
		return -EBADMSG;
	/* Field 23: vsize.  Every kernel writes it, but it is only the sweep's
	 * hint that mappings changed (watch.c): a text without it reads 0. */
	if (stat_number(&c, &st.vsize) < 0)
		st.vsize = 0;
	*ret = st;
	return 0;
}

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
	struct cursor c = { s, s + strlen(s) };
	uint64_t v;

	if (cur_dec(&c, &v) < 0 || !cur_eof(&c) || v == 0 || v > INT32_MAX)
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

void procfs_cmdline_to_line(const char *buf, size_t len, char *out, size_t out_len)
{
	size_t n = 0;

	while (len > 0 && buf[len - 1] == '\0')
		len--;   /* the last argument's terminator, and a process's padding */
	for (size_t i = 0; i < len && n + 1 < out_len; i++) {
		unsigned char c = (unsigned char)buf[i];

		out[n++] = c == '\0' ? ' ' : c < 0x20 || c == 0x7f ? '?' : (char)c;
	}
	out[n] = '\0';
}

bool procfs_listing_find(const pid_t *v, size_t n, pid_t pid, size_t *ret_at)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (v[mid] == pid) {
			if (ret_at)
				*ret_at = mid;
			return true;
		}
		if (v[mid] < pid)
			lo = mid + 1;
		else
			hi = mid;
	}
	return false;
}

int procfs_list_processes(pid_t **ret, size_t *ret_n)
{
	return list_pid_dir("/proc", ret, ret_n);
}

int procfs_parse_u64(const char *p, const char *end, const char **ret_end, uint64_t *ret)
{
	const char *start = p;
	uint64_t v = 0;

	for (; p < end && *p >= '0' && *p <= '9'; p++) {
		if (v > (UINT64_MAX - 9) / 10)
			return -EBADMSG;
		v = v * 10 + (uint64_t)(*p - '0');
	}
	if (p == start)
		return -EBADMSG;
	*ret_end = p;
	*ret = v;
	return 0;
}

int procfs_parse_forks_buf(const char *buf, size_t len, uint64_t *ret)
{
	static const char key[] = "processes ";
	const char *end = buf + len;

	for (const char *line = buf; line < end;) {
		const char *nl = memchr(line, '\n', (size_t)(end - line));
		const char *eol = nl ? nl : end;

		if ((size_t)(eol - line) > sizeof(key) - 1 && !memcmp(line, key, sizeof(key) - 1)) {
			const char *p;

			if (procfs_parse_u64(line + sizeof(key) - 1, eol, &p, ret) < 0 || p != eol)
				return -EBADMSG;
			return 0;
		}
		line = eol + 1;
	}
	return -EBADMSG;
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

bool procfs_same_object(const struct procfs_mapping *a, const struct procfs_mapping *b)
{
	if (!a->inode || !b->inode)
		return a == b;
	return a->inode == b->inode && a->dev_major == b->dev_major &&
	       a->dev_minor == b->dev_minor && !strcmp(a->path, b->path);
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
	struct cursor c = { buf, buf + len };
	uint64_t v;
	int r;

	for (;;) {
		while (!cur_eof(&c) && isspace((unsigned char)*c.p))
			c.p++;
		if (cur_eof(&c))
			return 0;
		if (cur_dec(&c, &v) < 0 || v == 0 || v > INT32_MAX)
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
