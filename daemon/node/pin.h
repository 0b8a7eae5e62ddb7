/* SPDX-License-Identifier: MIT */
/*
 * Pins: a pidfd for each target, opened the moment its request is read, so
 * the process a request named is the process it acts on, exactly (a start
 * time counts 10 ms ticks; a PID recycled within one would pass for the
 * original).  A request may name PROTO_MAX_PIDS PIDs and many requests may
 * wait, so targets naming the same live process share one pidfd, and
 * pidfds are a counted budget sized from the descriptor limit; a target
 * beyond it is refused (-BTG_ERR_LIMIT), never left unpinned.
 */
#ifndef BTGUARD_PIN_H
#define BTGUARD_PIN_H

#include <stdbool.h>
#include <sys/types.h>

/* Pins held at once, at most; the descriptor limit may allow fewer. */
#define PIN_MAX 65536u
/* Descriptors kept for everything else: 1,024 clients and the work itself. */
#define PIN_FD_RESERVE 2048u
/* Descriptors the policy's sweep may keep open (watch.c: one per process it follows). */
#define PIN_SWEEP_FDS 4096u

enum pin_state {
	PIN_ALIVE,     /* the pinned process runs: its PID names it */
	PIN_ZOMBIE,    /* exited, not reaped: its PID still names it */
	PIN_REAPED,    /* gone: its PID may name another process by now */
};

/*
 * Pins process pid: a pidfd into *ret_fd, shared with the targets already
 * holding one for that process while it lives.  -ESRCH: no such process;
 * -EINVAL: pid is a thread, not a process; -ENOSYS: the kernel has no
 * pidfds (before 5.3, valgrind); -BTG_ERR_LIMIT: the budget is spent;
 * -EMFILE, -ENFILE, -ENOMEM: the daemon is short of descriptors or memory.
 */
int pin_open(pid_t pid, int *ret_fd);

/* Drops this target's hold on *fd (when >= 0); *fd becomes -1.  The last holder closes it. */
void pin_close(int *fd);

/*
 * Whether the process of pidfd fd has exited: one poll, nothing read
 * (patch.c asks inside the pause).  False for fd < 0.
 */
bool pin_exited(int fd);

/* What became of the pinned process.  Never blocks. */
enum pin_state pin_state(int fd);

/*
 * The sweep's share of the descriptor table: PIN_SWEEP_FDS when the limit
 * leaves room for it beside the pins' reserve, else 0 (the sweep then
 * opens and closes instead).  The pin budget is what is left after it.
 */
unsigned pin_sweep_fds(void);

/*
 * Whether descriptor fd, just opened, lies among the last PIN_FD_RESERVE
 * the descriptor limit allows now (the kernel hands out the lowest free
 * number, so a high one means the table is nearly full): a descriptor to
 * keep for long should then be closed, leaving them to requests.
 */
bool pin_fd_is_reserve(int fd);

/* Pins held now, and the most there may be (for logs and tests). */
unsigned pin_count(void);
unsigned pin_budget(void);

#endif
