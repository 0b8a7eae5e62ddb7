// SPDX-License-Identifier: MIT
/*
 * Pins (see pin.h).  This file owns the pin budget: every pidfd a target
 * holds between its request's arrival and its turn is opened and closed
 * here, so the count cannot drift.
 */
#include <errno.h>
#include <poll.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "../proto/proto.h"
#include "pin.h"
#include "procfs.h"

static unsigned pins_held;
static unsigned pins_max;
static bool pins_sized;

/* From the descriptor limit as main() left it; looked up once, at the first pin. */
static void size_budget(void)
{
	struct rlimit rl;
	rlim_t cur = 1024;

	pins_sized = true;
	if (getrlimit(RLIMIT_NOFILE, &rl) == 0)
		cur = rl.rlim_cur;
	if (cur == RLIM_INFINITY || cur > PIN_MAX + PIN_FD_RESERVE)
		pins_max = PIN_MAX;
	else if (cur >= 2 * PIN_FD_RESERVE)
		pins_max = (unsigned)(cur - PIN_FD_RESERVE);
	else
		pins_max = (unsigned)(cur / 2);  /* a low limit: still serve, with fewer pins */
}

int pin_open(pid_t pid, int *ret_fd)
{
	int fd;

	if (!pins_sized)
		size_budget();
	if (pins_held >= pins_max)
		return -BTG_ERR_LIMIT;
	fd = (int)syscall(SYS_pidfd_open, pid, 0);
	if (fd < 0) {
		if (errno == EMFILE || errno == ENFILE || errno == ENOMEM)
			return -BTG_ERR_LIMIT;
		return -errno;
	}
	pins_held++;
	*ret_fd = fd;
	return 0;
}

void pin_close(int *fd)
{
	if (*fd < 0)
		return;
	close(*fd);
	*fd = -1;
	pins_held--;
}

enum pin_state pin_state(int fd)
{
	/*
	 * A pidfd polls readable once its process has exited.  (Signal 0 via
	 * pidfd_send_signal would say the same, but is permission-checked like
	 * kill() and so needs CAP_KILL for other users' processes.)  Its fdinfo
	 * then tells a zombie, which still holds the PID, from a reaped
	 * process: "Pid: -1" once the PID is released.
	 */
	struct pollfd p = { .fd = fd, .events = POLLIN };
	char path[64], *buf = NULL, *line;
	size_t len;
	long nr = -1;

	if (poll(&p, 1, 0) == 0)
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
