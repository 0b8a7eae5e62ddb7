// SPDX-License-Identifier: MIT
/*
 * Who may act on which process.  auth_check() is the rule, pure over facts
 * already read; auth_read_target() gathers those facts from /proc.  The
 * rule for a non-root caller is the one the kernel applies to ptrace
 * itself (same real/effective/saved uid and gid, and dumpable), so the
 * daemon never gives a user power over a process that user could not
 * already debug.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "auth.h"
#include "fault.h"
#include "proto.h"

static const char *const id_role[3] = { "real", "effective", "saved" };

static int deny(char *why, size_t why_len, int code, const char *fmt, ...)
	__attribute__((format(printf, 4, 5)));

static int deny(char *why, size_t why_len, int code, const char *fmt, ...)
{
	va_list ap;

	if (why && why_len) {
		va_start(ap, fmt);
		vsnprintf(why, why_len, fmt, ap);
		va_end(ap);
	}
	return code;
}

int auth_check(const struct auth_caller *caller, const struct auth_target *target,
	       char *why, size_t why_len)
{
	const struct procfs_status *st = &target->status;
	int pid = (int)target->pid;

	if (why && why_len)
		why[0] = '\0';
	if (target->is_daemon)
		return deny(why, why_len, -BTG_ERR_SELF, "process %d is btguardd itself", pid);
	if (target->is_kthread)
		return deny(why, why_len, -BTG_ERR_KTHREAD, "process %d is a kernel thread", pid);
	if (caller->uid == 0)
		return 0;

	for (int i = 0; i < 3; i++)
		if (st->uid[i] != caller->uid)
			return deny(why, why_len, -BTG_ERR_DENIED,
				    "process %d belongs to uid %u (%s), you are uid %u",
				    pid, (unsigned)st->uid[i], id_role[i], (unsigned)caller->uid);
	for (int i = 0; i < 3; i++)
		if (st->gid[i] != caller->gid)
			return deny(why, why_len, -BTG_ERR_DENIED,
				    "process %d runs with gid %u (%s), your gid is %u",
				    pid, (unsigned)st->gid[i], id_role[i], (unsigned)caller->gid);
	/* A process that changed credentials (setuid/setgid exec, or
	 * prctl(PR_SET_DUMPABLE, 0)) may still hold secrets of its former
	 * identity; the kernel refuses ptrace to its owner, and so do we. */
	if (!target->dumpable)
		return deny(why, why_len, -BTG_ERR_DENIED,
			    "process %d changed its credentials (setuid/setgid) and is not dumpable",
			    pid);
	return 0;
}

static int noproc_or(int r)
{
	return procfs_gone(r) ? -BTG_ERR_NOPROC : r;
}

static int read_target_facts(pid_t pid, bool need_start, struct auth_target *ret)
{
	struct auth_target t = { .pid = pid };
	struct procfs_stat pst;
	pid_t self = getpid();
	uid_t owner;
	int r;

	if (pid <= 0)
		return -BTG_ERR_NOPROC;
	r = procfs_read_status_owner(pid, &t.status, &owner);
	if (r < 0)
		return noproc_or(r);
	if (fault_no_kthread_line())
		t.status.kthread = -1;
	if (need_start || t.status.kthread < 0) {
		r = procfs_read_stat(pid, &pst);
		if (r < 0)
			return noproc_or(r);
		t.is_kthread = (pst.flags & PROCFS_PF_KTHREAD) != 0;
		t.start_ticks = pst.start_ticks;
	} else {
		t.is_kthread = t.status.kthread == 1;
	}
	/* /proc/TID of any of our threads also names the daemon. */
	t.is_daemon = pid == self || t.status.tgid == self;

	/* The kernel makes the files under /proc/PID owned by root while
	 * the task is not dumpable (task_dump_owner()).  Not the directory
	 * /proc/PID itself: that one always shows the effective uid, for
	 * old tools that stat it to learn the owner.  For a target whose
	 * euid is root this tells nothing, but only root may act on it.
	 * The owner is the status file's as it was opened, a moment before
	 * its text was read: one snapshot, like the stat() after the read it
	 * replaces, and a path walk less.  A change after it is as late as a
	 * change after the check, which the turn's re-check is there for. */
	t.dumpable = t.status.uid[1] == 0 || owner == t.status.uid[1];

	*ret = t;
	return 0;
}

int auth_read_target(pid_t pid, struct auth_target *ret)
{
	return read_target_facts(pid, true, ret);
}

int auth_read_pinned_target(pid_t pid, struct auth_target *ret)
{
	return read_target_facts(pid, false, ret);
}

/* The n-th space-separated field of [p, end), or NULL; *ret_len its length. */
static const char *field(const char *p, const char *end, int n, size_t *ret_len)
{
	for (;;) {
		const char *sp;

		while (p < end && *p == ' ')
			p++;
		if (p >= end)
			return NULL;
		sp = memchr(p, ' ', (size_t)(end - p));
		if (!sp)
			sp = end;
		if (n-- == 0) {
			*ret_len = (size_t)(sp - p);
			return p;
		}
		p = sp;
	}
}

static bool has_option(const char *opts, size_t len, const char *want)
{
	size_t wl = strlen(want);
	const char *p = opts, *end = opts + len;

	while (p < end) {
		const char *comma = memchr(p, ',', (size_t)(end - p));
		size_t l = comma ? (size_t)(comma - p) : (size_t)(end - p);

		if (l == wl && memcmp(p, want, wl) == 0)
			return true;
		p += l + 1;
	}
	return false;
}

/*
 * mountinfo: "ID PARENT MAJ:MIN ROOT MOUNTPOINT OPTS [OPTIONAL...] - FSTYPE
 * SOURCE SUPEROPTS".  The last proc mount on /proc is the one the caller
 * sees (a later mount covers an earlier one).  No proc at /proc at all:
 * the caller sees no process, so it hides everything.
 */
int auth_mountinfo_hides_pids(const char *buf, size_t len)
{
	const char *p = buf, *end = buf + len;
	int hides = 1;

	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		const char *le = nl ? nl : end, *mp, *sep, *fs, *opts;
		size_t mpl, fsl, optl;

		mp = field(p, le, 4, &mpl);
		sep = memmem(p, (size_t)(le - p), " - ", 3);
		if (mp && sep) {
			fs = field(sep + 3, le, 0, &fsl);
			opts = field(sep + 3, le, 2, &optl);
			if (fs && opts && mpl == 5 && memcmp(mp, "/proc", 5) == 0 &&
			    fsl == 4 && memcmp(fs, "proc", 4) == 0)
				hides = has_option(opts, optl, "hidepid=invisible") ||
					has_option(opts, optl, "hidepid=ptraceable") ||
					has_option(opts, optl, "hidepid=2") ||
					has_option(opts, optl, "hidepid=4");
		}
		p = le + 1;
	}
	return hides;
}

bool auth_caller_hides_pids(pid_t caller)
{
	char path[48], *buf = NULL;
	size_t len;
	int r;

	snprintf(path, sizeof(path), "/proc/%d/mountinfo", (int)caller);
	if (procfs_read_file(path, 1u << 22, &buf, &len) < 0)
		return true;
	r = auth_mountinfo_hides_pids(buf, len);
	free(buf);
	return r != 0;
}
