// SPDX-License-Identifier: MIT
/*
 * Pins (see pin.h).  This file owns the pin budget: every pidfd a target
 * holds between its request's arrival and its turn is opened, shared and
 * closed here, so the count cannot drift.
 */
#include <errno.h>
#include <poll.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "proto.h"
#include "pin.h"
#include "procfs.h"

static unsigned pins_held;
static unsigned pins_max;
static bool pins_sized;

/*
 * Targets naming a live process share its pidfd: a pidfd names one
 * process, and while that process lives its PID names it too, so the
 * share is exact.  The budget then bounds distinct pinned processes, not
 * how often queued requests repeat them (4,096 copies of one PID in a few
 * requests would otherwise eat it whole).  refs[fd] counts the targets
 * holding fd; the table maps a PID to its newest pidfd (linear probing).
 */
struct slot {
	pid_t pid;      /* 0: empty */
	int fd;
};
static struct slot *table;
static size_t table_cap;        /* a power of two, or 0 */
static size_t table_used;
static unsigned *refs;          /* by fd */
static pid_t *pid_of;           /* by fd */
static size_t fds_cap;

static size_t slot_of(pid_t pid);

static struct slot *find_free(pid_t pid);

static size_t slot_of(pid_t pid)
{
	return ((size_t)(uint32_t)pid * 2654435761u) & (table_cap - 1);
}

static struct slot *find(pid_t pid)
{
	if (!table_cap)
		return NULL;
	for (size_t i = slot_of(pid);; i = (i + 1) & (table_cap - 1)) {
		if (table[i].pid == pid)
			return &table[i];
		if (table[i].pid == 0)
			return NULL;
	}
}

static struct slot *find_free(pid_t pid)
{
	size_t i = slot_of(pid);

	while (table[i].pid)
		i = (i + 1) & (table_cap - 1);
	return &table[i];
}

static int table_put(pid_t pid, int fd)
{
	struct slot *hit = find(pid);

	if (hit) {
		hit->fd = fd;
		return 0;
	}
	if ((table_used + 1) * 2 > table_cap) {
		size_t cap = table_cap ? table_cap * 2 : 256;
		struct slot *old = table, *t = calloc(cap, sizeof(*t));
		size_t old_cap = table_cap;

		if (!t)
			return -ENOMEM;
		table = t;
		table_cap = cap;
		for (size_t i = 0; i < old_cap; i++)
			if (old[i].pid)
				*find_free(old[i].pid) = old[i];
		free(old);
	}
	*find_free(pid) = (struct slot){ .pid = pid, .fd = fd };
	table_used++;
	return 0;
}

/* Removes pid's entry, shifting later entries of its run back (no tombstones). */
static void table_del(pid_t pid)
{
	struct slot *hit = find(pid);
	size_t i, j;

	if (!hit)
		return;
	i = (size_t)(hit - table);
	table[i].pid = 0;
	table_used--;
	for (j = (i + 1) & (table_cap - 1); table[j].pid; j = (j + 1) & (table_cap - 1)) {
		size_t home = slot_of(table[j].pid);

		/* Move j back to i unless its home lies cyclically in (i, j]. */
		if (i <= j ? (home <= i || home > j) : (home <= i && home > j)) {
			table[i] = table[j];
			table[j].pid = 0;
			i = j;
		}
	}
}

static int track_fd(int fd, pid_t pid)
{
	if ((size_t)fd >= fds_cap) {
		size_t cap = fds_cap ? fds_cap : 1024;
		unsigned *r;
		pid_t *p;

		while (cap <= (size_t)fd)
			cap *= 2;
		r = realloc(refs, cap * sizeof(*r));
		if (!r)
			return -ENOMEM;
		refs = r;
		p = realloc(pid_of, cap * sizeof(*p));
		if (!p)
			return -ENOMEM;
		pid_of = p;
		memset(refs + fds_cap, 0, (cap - fds_cap) * sizeof(*refs));
		fds_cap = cap;
	}
	refs[fd] = 1;
	pid_of[fd] = pid;
	return 0;
}

static rlim_t fd_limit(void)
{
	struct rlimit rl;

	return getrlimit(RLIMIT_NOFILE, &rl) == 0 ? rl.rlim_cur : 1024;
}

unsigned pin_sweep_fds(void)
{
	rlim_t cur = fd_limit();

	return cur == RLIM_INFINITY || cur >= PIN_SWEEP_FDS + 2 * PIN_FD_RESERVE ? PIN_SWEEP_FDS : 0;
}

/* From the descriptor limit as main() left it; looked up once, at the first pin. */
static void size_budget(void)
{
	rlim_t cur = fd_limit();

	pins_sized = true;
	if (cur != RLIM_INFINITY)
		cur -= pin_sweep_fds();
	if (cur == RLIM_INFINITY || cur > PIN_MAX + PIN_FD_RESERVE)
		pins_max = PIN_MAX;
	else if (cur >= 2 * PIN_FD_RESERVE)
		pins_max = (unsigned)(cur - PIN_FD_RESERVE);
	else
		pins_max = (unsigned)(cur / 2);  /* a low limit: still serve, with fewer pins */
}

int pin_open(pid_t pid, int *ret_fd)
{
	struct slot *hit = find(pid);
	int fd;

	if (hit && pin_state(hit->fd) == PIN_ALIVE) {
		refs[hit->fd]++;
		*ret_fd = hit->fd;
		return 0;
	}
	if (!pins_sized)
		size_budget();
	if (pins_held >= pins_max)
		return -BTG_ERR_LIMIT;
	fd = (int)syscall(SYS_pidfd_open, pid, 0);
	if (fd < 0)
		return -errno;   /* EMFILE, ENFILE, ENOMEM: said as such, a fact about us */
	if (track_fd(fd, pid) < 0 || table_put(pid, fd) < 0) {
		close(fd);
		return -BTG_ERR_LIMIT;
	}
	pins_held++;
	*ret_fd = fd;
	return 0;
}

void pin_close(int *fd)
{
	struct slot *hit;
	int f = *fd;

	if (f < 0)
		return;
	*fd = -1;
	if (--refs[f] > 0)
		return;
	hit = find(pid_of[f]);
	if (hit && hit->fd == f)
		table_del(pid_of[f]);
	close(f);
	pins_held--;
}

bool pin_exited(int fd)
{
	/*
	 * A pidfd polls readable once its process has exited.  (Signal 0 via
	 * pidfd_send_signal would say the same, but is permission-checked like
	 * kill() and so needs CAP_KILL for other users' processes.)
	 */
	struct pollfd p = { .fd = fd, .events = POLLIN };

	return fd >= 0 && poll(&p, 1, 0) != 0;
}

enum pin_state pin_state(int fd)
{
	/*
	 * An exited process's fdinfo tells a zombie, which still holds the
	 * PID, from a reaped process: "Pid: -1" once the PID is released.
	 */
	char path[64], *buf = NULL, *line;
	size_t len;
	long nr = -1;

	if (!pin_exited(fd))
		return PIN_ALIVE;
	snprintf(path, sizeof(path), "/proc/self/fdinfo/%d", fd);
	if (procfs_read_file(path, 4096, &buf, &len) < 0)
		return PIN_REAPED;
	line = strstr(buf, "\nPid:");
	if (line)
		nr = strtol(line + 5, NULL, 10);
	free(buf);
	return nr > 0 ? PIN_ZOMBIE : PIN_REAPED;
}

bool pin_fd_is_reserve(int fd)
{
	rlim_t cur = fd_limit();

	return cur != RLIM_INFINITY && (rlim_t)fd + PIN_FD_RESERVE >= cur;
}

unsigned pin_count(void)
{
	return pins_held;
}

unsigned pin_budget(void)
{
	if (!pins_sized)
		size_budget();
	return pins_max;
}
