// SPDX-License-Identifier: MIT
/*
 * The executable file mappings of a process, the cheap way when the kernel
 * has one.  Formatting /proc/PID/maps is the largest single cost of a
 * node-wide status: every mapping's line, the anonymous ones included,
 * with a path walk for each file.  PROCMAP_QUERY (an ioctl on the same
 * maps file, Linux 6.11) is asked only for the file-backed executable
 * ones, one call each, with no text to write or parse.
 *
 * The answer is exactly what the text gives for those mappings: the
 * kernel's d_path() appends " (deleted)" in both, and the text escapes a
 * '\n' in a path as \012, which we do here too.  The unit test compares
 * the two on processes that have both.
 */
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <unistd.h>

#include "execmaps.h"

/* <linux/fs.h> of Linux 6.11; Debian 12's headers predate it. */
struct procmap_query {
	uint64_t size;
	uint64_t query_flags;
	uint64_t query_addr;
	uint64_t vma_start;
	uint64_t vma_end;
	uint64_t vma_flags;
	uint64_t vma_page_size;
	uint64_t vma_offset;
	uint64_t inode;
	uint32_t dev_major;
	uint32_t dev_minor;
	uint32_t vma_name_size;
	uint32_t build_id_size;
	uint64_t vma_name_addr;
	uint64_t build_id_addr;
};

#define PROCMAP_QUERY                      _IOWR('f', 17, struct procmap_query)
#define PROCMAP_QUERY_VMA_READABLE         0x01u
#define PROCMAP_QUERY_VMA_WRITABLE         0x02u
#define PROCMAP_QUERY_VMA_EXECUTABLE       0x04u
#define PROCMAP_QUERY_VMA_SHARED           0x08u
#define PROCMAP_QUERY_COVERING_OR_NEXT_VMA 0x10u
#define PROCMAP_QUERY_FILE_BACKED_VMA      0x20u

static const char deleted_suffix[] = " (deleted)";

/* What the query found so far: entries, and their paths in one pool. */
struct found {
	struct procfs_mapping *maps;
	size_t n, cap;
	char *pool;
	size_t used, pool_cap;
};

static int grow(void **p, size_t *cap, size_t need, size_t size)
{
	size_t ncap = *cap ? *cap : 16;
	void *np;

	if (need <= *cap)
		return 0;
	while (ncap < need)
		ncap *= 2;
	np = realloc(*p, ncap * size);
	if (!np)
		return -ENOMEM;
	*p = np;
	*cap = ncap;
	return 0;
}

/*
 * Appends one mapping and its path, written as maps writes it: '\n' as
 * \012, " (deleted)" stripped into m->deleted.  The path goes in as an
 * offset into the pool (which may move); execmaps_query() points it.
 */
static int add(struct found *f, const struct procmap_query *q, const char *name)
{
	size_t len = strlen(name), esc = 0, out;
	struct procfs_mapping *m;
	bool deleted = false;
	int r;

	if (len >= sizeof(deleted_suffix) - 1 &&
	    !strcmp(name + len - (sizeof(deleted_suffix) - 1), deleted_suffix)) {
		deleted = true;
		len -= sizeof(deleted_suffix) - 1;
	}
	for (size_t i = 0; i < len; i++)
		esc += name[i] == '\n';
	out = len + 3 * esc;
	if (out > PATH_MAX - 1)
		return -EBADMSG;   /* as the text's parser says of such a line */
	if ((r = grow((void **)&f->maps, &f->cap, f->n + 1, sizeof(*f->maps))) < 0 ||
	    (r = grow((void **)&f->pool, &f->pool_cap, f->used + out + 1, 1)) < 0)
		return r;
	m = &f->maps[f->n++];
	*m = (struct procfs_mapping){
		.start = q->vma_start, .end = q->vma_end, .offset = q->vma_offset,
		.perms = ((q->vma_flags & PROCMAP_QUERY_VMA_READABLE) ? PROCFS_MAP_READ : 0) |
			 ((q->vma_flags & PROCMAP_QUERY_VMA_WRITABLE) ? PROCFS_MAP_WRITE : 0) |
			 ((q->vma_flags & PROCMAP_QUERY_VMA_EXECUTABLE) ? PROCFS_MAP_EXEC : 0) |
			 ((q->vma_flags & PROCMAP_QUERY_VMA_SHARED) ? PROCFS_MAP_SHARED : 0),
		.dev_major = q->dev_major, .dev_minor = q->dev_minor, .inode = q->inode,
		.deleted = deleted,
		.path = (const char *)(uintptr_t)f->used,
	};
	for (size_t i = 0; i < len; i++) {
		if (name[i] == '\n') {
			memcpy(f->pool + f->used, "\\012", 4);
			f->used += 4;
		} else {
			f->pool[f->used++] = name[i];
		}
	}
	f->pool[f->used++] = '\0';
	return 0;
}

/* The entries and their paths packed into one allocation, as the text's parser gives them. */
static int pack(struct found *f, struct procfs_mapping **ret, size_t *ret_n)
{
	struct procfs_mapping *maps = malloc(f->n * sizeof(*maps) + f->used + 1);
	char *pool;

	if (!maps)
		return -ENOMEM;
	pool = (char *)(maps + f->n);
	if (f->used)
		memcpy(pool, f->pool, f->used);
	for (size_t i = 0; i < f->n; i++) {
		maps[i] = f->maps[i];
		maps[i].path = pool + (uintptr_t)f->maps[i].path;
	}
	*ret = maps;
	*ret_n = f->n;
	return 0;
}

int execmaps_query(pid_t pid, struct procfs_mapping **ret, size_t *ret_n)
{
	struct found f = { 0 };
	/*
	 * Zeroed once: the kernel writes each name NUL-terminated, but a tool
	 * that does not know this ioctl (valgrind) cannot tell it wrote them.
	 */
	char path[64], name[PATH_MAX] = "";
	uint64_t addr = 0;
	int fd, r;

	snprintf(path, sizeof(path), "/proc/%d/maps", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? -ESRCH : -errno;
	for (;;) {
		struct procmap_query q = {
			.size = sizeof(q),
			.query_flags = PROCMAP_QUERY_COVERING_OR_NEXT_VMA | PROCMAP_QUERY_FILE_BACKED_VMA |
				       PROCMAP_QUERY_VMA_EXECUTABLE,
			.query_addr = addr,
			.vma_name_addr = (uint64_t)(uintptr_t)name,
			.vma_name_size = sizeof(name),
		};

		if (ioctl(fd, PROCMAP_QUERY, &q) < 0) {
			r = -errno;
			if (r == -ENOENT)
				break;   /* no mapping at or above addr: all found */
			/* No memory (exited, or a zombie main thread): maps reads empty. */
			if (r == -ESRCH) {
				f.n = f.used = 0;
				break;
			}
			/*
			 * Before 6.11 the maps file knows no ioctl; a seccomp
			 * filter that forbids ioctl() says EPERM or ENOSYS (the
			 * open succeeded, so it is not the kernel's access check).
			 */
			if (r == -ENOTTY ||
			    (addr == 0 && (r == -EINVAL || r == -EPERM || r == -ENOSYS)))
				r = -EOPNOTSUPP;
			else if (r == -ENAMETOOLONG)
				r = -EBADMSG;   /* as the text's parser says of such a line */
			goto out;
		}
		if (q.vma_end <= addr || q.vma_start >= q.vma_end) {
			r = -EBADMSG;   /* the kernel must move on, or we would loop */
			goto out;
		}
		addr = q.vma_end;
		if (!q.inode)
			continue;   /* the text's callers skip these too (no file to name) */
		name[PATH_MAX - 1] = '\0';
		if ((r = add(&f, &q, name)) < 0)
			goto out;
	}
	r = pack(&f, ret, ret_n);
out:
	free(f.maps);
	free(f.pool);
	close(fd);
	return r;
}

int execmaps_from_text(pid_t pid, struct procfs_mapping **ret, size_t *ret_n)
{
	struct procfs_mapping *maps;
	size_t n, kept = 0;
	int r = procfs_read_maps(pid, &maps, &n);

	if (r < 0)
		return r;
	/* The paths stay where they are, in the same allocation. */
	for (size_t i = 0; i < n; i++)
		if ((maps[i].perms & PROCFS_MAP_EXEC) && maps[i].inode)
			maps[kept++] = maps[i];
	*ret = maps;
	*ret_n = kept;
	return 0;
}

int execmaps_read(pid_t pid, struct procfs_mapping **ret, size_t *ret_n)
{
	static bool no_query;   /* the kernel does not change under us */
	int r;

	if (!no_query) {
		r = execmaps_query(pid, ret, ret_n);
		if (r != -EOPNOTSUPP)
			return r;
		no_query = true;
	}
	return execmaps_from_text(pid, ret, ret_n);
}
