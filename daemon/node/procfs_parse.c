// SPDX-License-Identifier: MIT
/*
 * The /proc parsers, pure: maps, status, stat, the fork count, command
 * lines, and the small helpers on their results.  Each works on a
 * (pointer, length) pair that is NOT assumed to be NUL-terminated, so a
 * fuzzer or a unit test can hand it exactly the bytes it has and the
 * sanitizer catches any read past them.  Every malformed input is
 * -EBADMSG.  Reading the files is procfs.c's.
 */
#include <ctype.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "procfs.h"

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

bool procfs_same_object(const struct procfs_mapping *a, const struct procfs_mapping *b)
{
	if (!a->inode || !b->inode)
		return a == b;
	return a->inode == b->inode && a->dev_major == b->dev_major &&
	       a->dev_minor == b->dev_minor && !strcmp(a->path, b->path);
}
