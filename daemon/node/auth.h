/* SPDX-License-Identifier: MIT */
/*
 * Who may act on which process.  A pure rule over already-read facts, so
 * it can be tested without processes:
 *  - nobody acts on the daemon itself or on kernel threads;
 *  - root (uid 0) may act on any other process;
 *  - anyone else only on a process it could ptrace itself: the target's
 *    real, effective and saved uid all equal the caller's uid, its real,
 *    effective and saved gid all equal the caller's gid, and the target is
 *    dumpable.
 * status follows the same rule as guard and unguard.
 */
#ifndef BTGUARD_AUTH_H
#define BTGUARD_AUTH_H

#include <stdbool.h>
#include <sys/types.h>

#include "procfs.h"

struct auth_caller {
	pid_t pid;
	uid_t uid;
	gid_t gid;
	/*
	 * The policy rule that asked, when the caller is the daemon itself
	 * (watch.c), else NULL.  Only logged: authorization never reads it.
	 * It lives as long as the request (the request holds its policy).
	 */
	const char *rule;
};

struct auth_target {
	pid_t pid;                    /* in the daemon's PID namespace */
	bool  is_daemon;              /* the daemon's own process */
	bool  is_kthread;
	bool  dumpable;
	uint64_t start_ticks;         /* from stat, read after status; 0 when not read */
	struct procfs_status status;
};

/*
 * 0 when allowed; -BTG_ERR_SELF, -BTG_ERR_KTHREAD or -BTG_ERR_DENIED, with
 * a one-line reason written to why (never NULL-terminated past why_len).
 */
int auth_check(const struct auth_caller *caller, const struct auth_target *target,
	       char *why, size_t why_len);

/*
 * Fills *ret for PID from /proc (status, stat flags, and dumpability,
 * which the kernel exposes as the owner of /proc/PID/status: root when it is
 * not dumpable).  -BTG_ERR_NOPROC when it does not exist.
 */
int auth_read_target(pid_t pid, struct auth_target *ret);

/*
 * The same for a process a live pidfd pins, whose start time nothing
 * needs: the pidfd is the pin.  Where status says whether it is a kernel
 * thread ("Kthread:", newer kernels) stat is not read and start_ticks is 0.
 * Half the reads of a node-wide selection.
 */
int auth_read_pinned_target(pid_t pid, struct auth_target *ret);

/*
 * Whether the caller's view of processes hides those it may not ptrace:
 * the proc file system mounted at /proc in its mount namespace has
 * hidepid=invisible (2) or hidepid=ptraceable (4).  Such a caller must not
 * learn from the daemon that a hidden PID exists, so a PID it may not act
 * on answers exactly like one that does not exist.  Anything that cannot
 * be read or parsed counts as hiding: that only makes answers vaguer.
 */
bool auth_caller_hides_pids(pid_t caller);

/* The pure part: 1 when mountinfo text (as in /proc/PID/mountinfo) says so, else 0. */
int auth_mountinfo_hides_pids(const char *buf, size_t len);

#endif
