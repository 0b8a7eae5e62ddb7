// SPDX-License-Identifier: MIT
/*
 * The PID allocator, seen from outside (pidalloc.h).
 *
 * Why: the search for processes sharing a target's memory (vmshare.c)
 * lists /proc before the stop and, inside it, compares only what a second
 * listing holds that the first did not.  A PID is a new task's only when
 * it was not listed before - unless the process that had it exited and
 * the PID was handed out again in between.  A sharer born under such a
 * PID would pass for the old process and go unheld.
 *
 * The kernel hands PIDs out in a circle (alloc_pid(): idr_alloc_cyclic()
 * from the namespace's cursor, up to pid_max, then on again from
 * RESERVED_PIDS), and /proc/sys/kernel/ns_last_pid reads the cursor: the
 * PID handed out last.  So every PID handed out between two readings lies
 * after the first and up to the second, counting round past pid_max -
 * unless the cursor went all the way round meanwhile.  Going round once
 * hands out every PID that was free when it started (nothing else takes
 * a free PID: see below), so it takes at least as many new tasks as there
 * were free PIDs, and /proc/stat's count of created tasks bounds those.
 * When the count does not rule a whole round out, every PID is in the
 * window: the caller compares everything, as if nothing had been listed.
 *
 * What this does not see: a PID chosen by its creator (clone3() with
 * set_tid) or a cursor moved by a write to ns_last_pid.  Both need
 * CAP_CHECKPOINT_RESTORE over the namespace: a restore tool such as CRIU,
 * not a process that happens to share memory (SECURITY.md).
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>

#include "pidalloc.h"
#include "procfs.h"

/* The kernel's RESERVED_PIDS: once round, the cursor starts again here. */
#define RESERVED_PIDS 300u
/*
 * PIDs in use by no task: a process group's or session's ID outlives its
 * leader while members remain.  Not counted anywhere we can read cheaply;
 * a node with more such groups than this is not one we know of.
 */
#define ORPHAN_ID_SLACK 4096u

static int read_number(const char *path, uint64_t *ret)
{
	const char *end;
	char *buf;
	size_t len;
	int r = procfs_read_record(path, 64, &buf, &len);

	if (r < 0)
		return r;
	/* A number, then at most a newline. */
	r = procfs_parse_u64(buf, buf + len, &end, ret);
	if (r == 0 && !(end == buf + len || (end + 1 == buf + len && *end == '\n')))
		r = -EBADMSG;
	free(buf);
	return r;
}

int pidalloc_parse_loadavg_tasks(const char *buf, size_t len, uint64_t *ret)
{
	const char *slash = memchr(buf, '/', len), *end;
	uint64_t v;

	if (!slash || procfs_parse_u64(slash + 1, buf + len, &end, &v) < 0 ||
	    end == buf + len || *end != ' ')
		return -EBADMSG;
	*ret = v;
	return 0;
}

void pidalloc_read(struct pidalloc_mark *ret)
{
	char *buf;
	size_t len;

	memset(ret, 0, sizeof(*ret));
	if (read_number("/proc/sys/kernel/ns_last_pid", &ret->last) < 0 ||
	    read_number("/proc/sys/kernel/pid_max", &ret->max) < 0 ||
	    procfs_read_record("/proc/loadavg", 256, &buf, &len) < 0)
		return;
	ret->ok = pidalloc_parse_loadavg_tasks(buf, len, &ret->tasks) == 0;
	free(buf);
}

void pidalloc_window(const struct pidalloc_mark *a, const struct pidalloc_mark *b,
		     uint64_t created, struct pidalloc_window *ret)
{
	uint64_t ring;

	*ret = (struct pidalloc_window){ .all = true };
	if (!a->ok || !b->ok || a->max != b->max || a->max <= RESERVED_PIDS ||
	    a->last >= a->max || b->last >= b->max)
		return;
	/* The smallest circle: before its first round the cursor also uses 1-299. */
	ring = a->max - RESERVED_PIDS;
	/* A whole round needs at least the free PIDs: ring minus those in use. */
	if (created >= ring || a->tasks >= ring || created + a->tasks + ORPHAN_ID_SLACK >= ring)
		return;
	*ret = (struct pidalloc_window){ .after = a->last, .upto = b->last };
}

bool pidalloc_in_window(const struct pidalloc_window *w, pid_t pid)
{
	uint64_t p = (uint64_t)pid;

	if (w->all)
		return true;
	if (w->after <= w->upto)
		return p > w->after && p <= w->upto;
	return p > w->after || p <= w->upto;   /* round past pid_max */
}
