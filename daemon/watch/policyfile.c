// SPDX-License-Identifier: MIT
/*
 * Reading the policy's files (policy.h's policy_load): which files are
 * read, whether they are trusted, and reading them without ever blocking.
 *
 * The daemon is root and the policy decides which processes it stops and
 * writes, so a policy file is worth what its least trusted writer is.  As
 * sshd's StrictModes (secure_filename()), sudo and cron do, a file is
 * read only if it is owned by root (or by the daemon's own uid, which is
 * root but for tests of option handling) and writable by nobody else, and
 * the same holds for every directory above it up to /, judged where the
 * file really is: a symlink by what it points to, through the path of the
 * open descriptor (/proc/self/fd), never by the name we were given.  One
 * departure from sshd: a directory owned by root with the sticky bit (as
 * /tmp) may be writable by others, since nobody else can rename or
 * replace a file in it that they do not own.
 *
 * Nothing here blocks the event loop (a reload runs on it): a FIFO, a
 * device or a socket is refused from stat() before it is opened, and the
 * open itself is O_NONBLOCK and O_NOCTTY with the type checked again on
 * the descriptor, so a file swapped for a FIFO between the two is refused
 * too, not waited on; a file under another process's lease (F_SETLEASE),
 * whose open would wait for the holder, is refused at once too.  Every
 * file is at most POLICY_MAX_FILE_SIZE bytes.
 *
 * Root owning a file and nobody else writing it does not make it a
 * configuration file: the regular files of the kernel's interfaces
 * (/proc, /sys, ...) are root's too, and reading one may take what it
 * reads (/proc/kmsg hands each message to one reader) or do something.
 * Such a file, reached through a drop-in symlink, is refused from the
 * open descriptor's file system, before a byte is read.
 *
 * Only drop-ins named NAME.conf are read (policy_dropin_name()): what a
 * package manager or an editor leaves beside them (x.conf.dpkg-old,
 * x.conf~, .x.conf.swp, README) is not policy.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/vfs.h>
#include <unistd.h>

#include <linux/magic.h>

#include "policy.h"

bool policy_dropin_name(const char *name)
{
	size_t n = strlen(name);

	return name[0] != '.' && n > 5 && !strcmp(name + n - 5, ".conf");
}

int policy_trust_check(const struct stat *st, uid_t self, char *why, size_t len)
{
	mode_t m = st->st_mode;
	bool sticky_root = S_ISDIR(m) && st->st_uid == 0 && (m & S_ISVTX);

	if (st->st_uid != 0 && st->st_uid != self) {
		snprintf(why, len, "owned by uid %u, not root", (unsigned)st->st_uid);
		return -EPERM;
	}
	if ((m & (S_IWGRP | S_IWOTH)) && !sticky_root) {
		snprintf(why, len, "writable by %s (mode %04o)",
			 !(m & S_IWOTH) ? "its group" : (m & S_IWGRP) ? "group and others" : "others",
			 (unsigned)(m & 07777));
		return -EPERM;
	}
	return 0;
}

static const char *type_name(mode_t m)
{
	if (S_ISFIFO(m))
		return "a FIFO";
	if (S_ISCHR(m))
		return "a character device";
	if (S_ISBLK(m))
		return "a block device";
	if (S_ISSOCK(m))
		return "a socket";
	if (S_ISDIR(m))
		return "a directory";
	if (S_ISREG(m))
		return "a regular file";
	return "of an unknown type";
}

/* Not in every <linux/magic.h>. */
#ifndef CONFIGFS_MAGIC
#define CONFIGFS_MAGIC 0x62656570
#endif

/* The kernel interface fd's file lives on, or NULL for a file system that stores files. */
static const char *kernel_fs_name(const struct statfs *sf)
{
	switch ((unsigned long)sf->f_type) {
	case PROC_SUPER_MAGIC:
		return "proc";
	case SYSFS_MAGIC:
		return "sysfs";
	case DEBUGFS_MAGIC:
		return "debugfs";
	case TRACEFS_MAGIC:
		return "tracefs";
	case SECURITYFS_MAGIC:
		return "securityfs";
	case CGROUP_SUPER_MAGIC:
	case CGROUP2_SUPER_MAGIC:
		return "cgroup";
	case BPF_FS_MAGIC:
		return "bpf";
	case PSTOREFS_MAGIC:
		return "pstore";
	case EFIVARFS_MAGIC:
		return "efivarfs";
	case CONFIGFS_MAGIC:
		return "configfs";
	case BINFMTFS_MAGIC:
		return "binfmt_misc";
	case SELINUX_MAGIC:
		return "selinuxfs";
	case SMACK_MAGIC:
		return "smackfs";
	}
	return NULL;
}

__attribute__((format(printf, 3, 4)))
static int refuse(struct policy_error *err, int r, const char *fmt, ...)
{
	va_list ap;

	err->line = 0;
	va_start(ap, fmt);
	vsnprintf(err->text, sizeof(err->text), fmt, ap);
	va_end(ap);
	return r;
}

/* Where the open descriptor fd really is: an absolute path without symlinks. */
static int fd_path(int fd, const char *shown, char *buf, size_t len)
{
	char link[64];
	ssize_t n;

	snprintf(link, sizeof(link), "/proc/self/fd/%d", fd);
	n = readlink(link, buf, len - 1);
	if (n > 0 && (size_t)n < len - 1) {
		buf[n] = '\0';
		/* "/x (deleted)", "pipe:[...]": not a path we can judge the directories of. */
		if (buf[0] == '/' && access(buf, F_OK) == 0)
			return 0;
		return -ENOENT;
	}
	/* No /proc (a chroot that checks a config): the name, resolved now. */
	if (len < PATH_MAX)
		return -ENAMETOOLONG;
	return realpath(shown, buf) ? 0 : -errno;
}

/* Each directory above the absolute, resolved path `real`, up to /, must be trusted. */
static int check_parents(const char *real, uid_t self, struct policy_error *err)
{
	char dir[PATH_MAX], why[128];
	struct stat st;
	char *slash;

	snprintf(dir, sizeof(dir), "%s", real);
	for (;;) {
		slash = strrchr(dir, '/');
		if (!slash)
			return 0;
		if (slash == dir)
			slash[1] = '\0';   /* the root itself, then stop */
		else
			*slash = '\0';
		if (stat(dir, &st) < 0) {
			int r = -errno;

			return refuse(err, r, "cannot check directory %s: %s", dir, strerror(-r));
		}
		if (!S_ISDIR(st.st_mode))
			return refuse(err, -ENOTDIR, "%s is not a directory", dir);
		if (policy_trust_check(&st, self, why, sizeof(why)) < 0)
			return refuse(err, -EPERM, "refused: directory %s is %s", dir, why);
		if (!strcmp(dir, "/"))
			return 0;
	}
}

/*
 * Opens name (relative to dirfd) as a trusted regular file, or as a
 * trusted directory when want_dir.  The descriptor, or -errno with err
 * filled (but -ENOENT when the name is missing, err filled too: the
 * caller decides whether that is an error).
 */
static int open_trusted(int dirfd, const char *name, bool want_dir, struct stat *ret_st,
			struct policy_error *err)
{
	uid_t self = geteuid();
	char real[PATH_MAX], why[128];
	struct statfs sf;
	struct stat st;
	const char *fs;
	int fd, r;

	/* Before opening: a FIFO would block the open, a device may act on it. */
	if (fstatat(dirfd, name, &st, 0) < 0) {
		r = -errno;
		return refuse(err, r, "cannot open: %s", strerror(-r));
	}
	if (want_dir ? !S_ISDIR(st.st_mode) : !S_ISREG(st.st_mode))
		return refuse(err, -EINVAL, "refused: %s, not %s", type_name(st.st_mode),
			      want_dir ? "a directory" : "a regular file");
	fd = openat(dirfd, name, O_RDONLY | O_NONBLOCK | O_NOCTTY | O_CLOEXEC |
		    (want_dir ? O_DIRECTORY : 0));
	if (fd < 0) {
		r = -errno;
		if (r == -EWOULDBLOCK)
			return refuse(err, r, "refused: another process holds a lease on it "
				      "(opening it would wait for that process)");
		return refuse(err, r, "cannot open: %s", strerror(-r));
	}
	/* Again on what was opened: it may have been replaced since. */
	if (fstat(fd, &st) < 0) {
		r = -errno;
		refuse(err, r, "cannot stat: %s", strerror(-r));
		goto out_close;
	}
	r = -EINVAL;
	if (want_dir ? !S_ISDIR(st.st_mode) : !S_ISREG(st.st_mode)) {
		refuse(err, r, "refused: %s, not %s", type_name(st.st_mode),
		       want_dir ? "a directory" : "a regular file");
		goto out_close;
	}
	r = policy_trust_check(&st, self, why, sizeof(why));
	if (r < 0) {
		refuse(err, r, "refused: %s", why);
		goto out_close;
	}
	if (!want_dir) {
		if (fstatfs(fd, &sf) < 0) {
			r = -errno;
			refuse(err, r, "cannot tell its file system: %s", strerror(-r));
			goto out_close;
		}
		fs = kernel_fs_name(&sf);
		if (fs) {
			r = -EINVAL;
			refuse(err, r, "refused: a file of the kernel's %s interface, not a "
			       "configuration file", fs);
			goto out_close;
		}
	}
	r = fd_path(fd, name, real, sizeof(real));
	if (r < 0) {
		refuse(err, r, "cannot tell which directory it is in: %s", strerror(-r));
		goto out_close;
	}
	r = check_parents(real, self, err);
	if (r < 0)
		goto out_close;
	*ret_st = st;
	return fd;

out_close:
	close(fd);
	return r;
}

static int user_by_name(const char *name, uid_t *ret)
{
	struct passwd pw, *res = NULL;
	char buf[4096];

	if (getpwnam_r(name, &pw, buf, sizeof(buf), &res) != 0 || !res)
		return -ENOENT;
	*ret = res->pw_uid;
	return 0;
}

/* Reads one file, name relative to dirfd, shown as path, into p. */
static int load_file(struct policy *p, int dirfd, const char *name, const char *path,
		     bool required, struct policy_error *err)
{
	struct stat st;
	size_t off = 0;
	char *buf = NULL;
	ssize_t n;
	int fd, r;

	memset(err, 0, sizeof(*err));
	snprintf(err->file, sizeof(err->file), "%s", path);
	fd = open_trusted(dirfd, name, false, &st, err);
	if (fd == -ENOENT && !required)
		return 0;
	if (fd < 0)
		return fd;
	r = -EFBIG;
	if (st.st_size > POLICY_MAX_FILE_SIZE) {
		refuse(err, r, "refused: larger than %u bytes", POLICY_MAX_FILE_SIZE);
		goto out_close;
	}
	r = -ENOMEM;
	buf = malloc((size_t)st.st_size + 1);
	if (!buf)
		goto out_close;
	/* One byte more than its size: a file that grew is refused, not cut. */
	while (off <= (size_t)st.st_size) {
		n = read(fd, buf + off, (size_t)st.st_size + 1 - off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			r = -errno;
			refuse(err, r, "cannot read: %s", strerror(-r));
			goto out_free;
		}
		if (n == 0)
			break;
		off += (size_t)n;
	}
	if (off > (size_t)st.st_size) {
		r = refuse(err, -EINVAL, "cannot read: it grew while being read");
		goto out_free;
	}
	r = policy_parse_buf(p, path, buf, off, user_by_name, err);
out_free:
	free(buf);
out_close:
	close(fd);
	return r;
}

static int name_order(const void *a, const void *b)
{
	return strcmp(*(char *const *)a, *(char *const *)b);
}

/*
 * The drop-in names of the open directory dfd, sorted: at most
 * POLICY_MAX_FILES + 1 of them (one more says there are too many).
 */
static int list_dropins(int dfd, char ***ret, size_t *ret_n)
{
	char **names = NULL;
	struct dirent *d;
	size_t n = 0;
	DIR *dir;
	int r = 0;

	dir = fdopendir(dfd);
	if (!dir)
		return -errno;
	names = calloc(POLICY_MAX_FILES + 1, sizeof(*names));
	if (!names) {
		r = -ENOMEM;
		goto out_close;
	}
	errno = 0;
	while (n <= POLICY_MAX_FILES && (d = readdir(dir))) {
		if (!policy_dropin_name(d->d_name))
			continue;
		names[n] = strdup(d->d_name);
		if (!names[n]) {
			r = -ENOMEM;
			break;
		}
		n++;
		errno = 0;
	}
	if (r == 0 && errno)
		r = -errno;
	if (r < 0) {
		while (n)
			free(names[--n]);
		free(names);
		goto out_close;
	}
	qsort(names, n, sizeof(*names), name_order);
	*ret = names;
	*ret_n = n;
out_close:
	closedir(dir);   /* and dfd with it */
	return r;
}

/* The drop-ins of path.d/ into p; a missing directory is none. */
static int load_dropins(struct policy *p, const char *path, struct policy_error *err)
{
	char dir[PATH_MAX], file[PATH_MAX + NAME_MAX + 2];
	char **names = NULL;
	size_t n = 0, i;
	struct stat st;
	int dfd, r;

	snprintf(dir, sizeof(dir), "%s.d", path);
	memset(err, 0, sizeof(*err));
	snprintf(err->file, sizeof(err->file), "%s", dir);
	dfd = open_trusted(AT_FDCWD, dir, true, &st, err);
	if (dfd == -ENOENT || dfd == -ENOTDIR)
		return 0;   /* ENOTDIR: a component of it is not a directory, so no .d */
	if (dfd < 0)
		return dfd;
	r = list_dropins(dfd, &names, &n);
	if (r < 0)
		return refuse(err, r, "cannot list: %s", strerror(-r));
	if (n > POLICY_MAX_FILES)
		r = refuse(err, -EINVAL, "more than %u drop-ins", POLICY_MAX_FILES);
	/* By name again, not through dfd (closed): each one's own directories are checked. */
	for (i = 0; r == 0 && i < n; i++) {
		snprintf(file, sizeof(file), "%s/%s", dir, names[i]);
		r = load_file(p, AT_FDCWD, file, file, true, err);
	}
	for (i = 0; i < n; i++)
		free(names[i]);
	free(names);
	return r;
}

int policy_load(const char *path, bool required, struct policy **ret, struct policy_error *err)
{
	struct policy *p = policy_new();
	int r;

	memset(err, 0, sizeof(*err));
	if (!p)
		return -ENOMEM;
	r = load_file(p, AT_FDCWD, path, path, required, err);
	if (r == 0)
		r = load_dropins(p, path, err);
	if (r < 0) {
		policy_unref(p);
		return r;
	}
	*ret = p;
	return 0;
}
