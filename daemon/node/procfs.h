/* SPDX-License-Identifier: MIT */
/*
 * Reading a target through /proc: its memory map, status, stat and thread
 * list.  Each parser has a pure *_buf form that unit tests and fuzzers call
 * directly; the plain form reads the file and calls it.  Nothing here
 * stops or changes a process.
 */
#ifndef BTGUARD_PROCFS_H
#define BTGUARD_PROCFS_H

#include <errno.h>
#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#define PROCFS_MAX_NSPID 32

/* Mapping permission bits. */
#define PROCFS_MAP_READ    0x1u
#define PROCFS_MAP_WRITE   0x2u
#define PROCFS_MAP_EXEC    0x4u
#define PROCFS_MAP_SHARED  0x8u

struct procfs_mapping {
	uint64_t start, end;      /* [start, end) */
	uint64_t offset;          /* file offset of start */
	unsigned perms;           /* PROCFS_MAP_* */
	unsigned dev_major, dev_minor;
	uint64_t inode;           /* 0 for anonymous mappings */
	bool     deleted;         /* path ended in " (deleted)"; stripped from path */
	const char *path;         /* "" when anonymous; "[stack]" etc. as given; < PATH_MAX */
};

/*
 * Parses a whole /proc/PID/maps text.  On success *ret is a malloc'ed array
 * of *ret_n entries (caller frees it, and the paths with it: they live in
 * the same allocation, so a node-wide status does not touch a 4 KiB page
 * per mapping).  -EBADMSG on a malformed line, -ENOMEM.
 * A path with embedded newlines cannot occur in maps (the kernel escapes
 * them as \012), so a line is always one mapping.
 */
int procfs_parse_maps_buf(const char *buf, size_t len,
			  struct procfs_mapping **ret, size_t *ret_n);
int procfs_read_maps(pid_t pid, struct procfs_mapping **ret, size_t *ret_n);

struct procfs_status {
	char   state;                    /* 'R', 'S', 'D', 'T', 't', 'Z', 'X', ... */
	pid_t  tgid, pid, ppid;
	pid_t  tracer;                   /* TracerPid; 0 when not traced */
	uid_t  uid[4];                   /* real, effective, saved, fs */
	gid_t  gid[4];
	pid_t  nspid[PROCFS_MAX_NSPID];  /* NSpid: outermost first */
	int    nspid_n;
	int    threads;
	int    kthread;                  /* "Kthread:" 1 or 0; -1 where the kernel does not say */
};

/* Parses /proc/PID/status text. -EBADMSG if a required field is missing. */
int procfs_parse_status_buf(const char *buf, size_t len, struct procfs_status *ret);
int procfs_read_status(pid_t pid, struct procfs_status *ret);
/* The same, and the owner of the status file as it was opened (root while not dumpable). */
int procfs_read_status_owner(pid_t pid, struct procfs_status *ret, uid_t *ret_owner);

struct procfs_stat {
	char     state;
	pid_t    ppid;
	unsigned flags;              /* task flags (field 9): PF_KTHREAD = 0x00200000 */
	uint64_t start_ticks;        /* field 22, clock ticks after boot */
	uint64_t vsize;              /* field 23, bytes mapped: changes when the mappings do */
	char     comm[17];
};

#define PROCFS_PF_KTHREAD 0x00200000u

/* Parses /proc/PID/stat; copes with ')' and spaces inside comm. */
int procfs_parse_stat_buf(const char *buf, size_t len, struct procfs_stat *ret);
int procfs_read_stat(pid_t pid, struct procfs_stat *ret);

/*
 * procfs_read_stat with one open, one read into a stack buffer and no
 * allocation: the /proc sweep reads this for every process every interval.
 */
int procfs_sample_stat(pid_t pid, struct procfs_stat *ret);

/* /proc/PID/task/TID/stat and status: one thread's own state. */
int procfs_read_task_stat(pid_t pid, pid_t tid, struct procfs_stat *ret);
int procfs_read_task_status(pid_t pid, pid_t tid, struct procfs_status *ret);

/* An error from reading /proc that means the process or thread is gone. */
static inline bool procfs_gone(int r)
{
	return r == -ESRCH || r == -ENOENT;
}

/*
 * Two mappings of the same file: same inode, device and path.  Anonymous
 * mappings (inode 0) are the same object only as the same mapping.
 */
bool procfs_same_object(const struct procfs_mapping *a, const struct procfs_mapping *b);

/*
 * Lists /proc/PID/task.  *ret is a malloc'ed array of *ret_n TIDs, sorted
 * ascending.  -ESRCH when the process is gone.
 */
int procfs_list_tasks(pid_t pid, pid_t **ret, size_t *ret_n);

/*
 * A task of PID that has not exited: PID itself, or, when its main thread
 * has left with pthread_exit() (a zombie leader of a live process), another
 * of its threads.  /proc/TID/{maps,mem,root,map_files} of that task reach
 * the process's memory and files; the zombie leader's own read empty.
 * -ESRCH when every task has exited.
 */
int procfs_live_task(pid_t pid, pid_t *ret);

/*
 * /proc/PID/cmdline as one line: the NUL-separated arguments joined with
 * single spaces, control characters as '?', a trailing NUL dropped; cut
 * to out_len - 1 bytes.  Always NUL-terminates out (out_len > 0).
 */
void procfs_cmdline_to_line(const char *buf, size_t len, char *out, size_t out_len);

/* Lists every process (thread group) in /proc, sorted ascending. */
int procfs_list_processes(pid_t **ret, size_t *ret_n);

/* True when such a listing holds pid; *ret_at (may be NULL) is then its index. */
bool procfs_listing_find(const pid_t *v, size_t n, pid_t pid, size_t *ret_at);

/*
 * The "processes" line of /proc/stat: tasks created since boot, threads
 * too.  The kernel counts a task as it attaches it (under the lock that
 * makes it visible in /proc), so an unchanged count means no task has
 * appeared since.  The parser is pure, for the unit tests.
 */
int procfs_read_forks(uint64_t *ret);

/*
 * A decimal number at p (before end), *ret_end just after it: -EBADMSG
 * when there is no digit or it overflows.  Pure.
 */
int procfs_parse_u64(const char *p, const char *end, const char **ret_end, uint64_t *ret);
int procfs_parse_forks_buf(const char *buf, size_t len, uint64_t *ret);

/*
 * Lists the children of every thread of PID (from
 * /proc/PID/task/TID/children), malloc'ed, sorted, without duplicates.
 */
int procfs_list_children(pid_t pid, pid_t **ret, size_t *ret_n);

/*
 * Reads a whole (small) proc file into a malloc'ed NUL-terminated buffer.
 * -ENOENT / -ESRCH when it is gone, -EFBIG past max bytes.
 */
int procfs_read_file(const char *path, size_t max, char **ret, size_t *ret_len);

/* The same for a file the kernel writes as one record (a sysctl, /proc/loadavg): one read() when it fits. */
int procfs_read_record(const char *path, size_t max, char **ret, size_t *ret_len);

/* The same for /proc/PID/NAME ("cmdline", "environ", "cgroup"). */
int procfs_read_pid_file(pid_t pid, const char *name, size_t max, char **ret, size_t *ret_len);

/*
 * The same for a file the kernel writes as one record ("status", "stat",
 * "cmdline", "environ", "cgroup"; never "maps"): a short read is its end,
 * so there is no closing empty read.
 */
int procfs_read_pid_record(pid_t pid, const char *name, size_t max, char **ret, size_t *ret_len);

/*
 * The identity of a namespace of PID (0: btguardd itself) from
 * /proc/PID/ns/NAME ("mnt", "pid", "user"): the nsfs device and inode,
 * which name one namespace node-wide whatever /proc it is read through.
 * -ESRCH when the process is gone, -EACCES / -EPERM when not allowed
 * (reading it is a ptrace access check).
 */
int procfs_ns_identity(pid_t pid, const char *name, dev_t *ret_dev, ino_t *ret_ino);

#endif
