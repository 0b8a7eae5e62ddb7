// SPDX-License-Identifier: MIT
/*
 * A timer that rings while the daemon seizes (unstick.h).
 *
 * Why: an exec kills every other thread of its process, and de_thread()
 * waits until each is reaped.  A thread we have seized is reaped by nobody
 * but its tracer, us.  Meanwhile the exec holds its process's
 * cred_guard_mutex, which PTRACE_SEIZE of any other thread of that
 * process waits for.  So if the process execs after we seized one of its
 * threads and before we seized the rest, the exec waits for us and our
 * seize waits for the exec: for good.  That wait is interruptible, but the
 * kernel restarts the call after a handler returns (-ERESTARTNOINTR), and
 * the daemon blocks the signals it serves through signalfd.
 *
 * So while the daemon seizes, an interval timer raises SIGALRM every
 * UNSTICK_MS, and the handler calls ptrace.c's hook, which abandons a
 * seize in progress (ptrace.c says how it then collects the exec's victims
 * and tries again).  Only PTRACE_SEIZE waits like this: reading /proc,
 * process_vm_readv and kcmp do not take that mutex (checked on Linux 6.18).
 */
#include <errno.h>
#include <signal.h>
#include <stdbool.h>
#include <string.h>
#include <sys/time.h>

#include "log.h"
#include "unstick.h"

static void (*ring_hook)(void);
static unsigned depth;
static bool installed, armed;
static sigset_t mask_when_armed;

static void on_alarm(int sig)
{
	int saved = errno;

	(void)sig;
	if (ring_hook)
		ring_hook();
	errno = saved;
}

static void arm(long ms)
{
	struct itimerval it = {
		.it_interval = { .tv_sec = 0, .tv_usec = ms * 1000 },
		.it_value = { .tv_sec = 0, .tv_usec = ms * 1000 },
	};

	if (setitimer(ITIMER_REAL, &it, NULL) < 0)
		log_msg(LOG_ERR, "setitimer: %s; a seize could wait for an exec that waits for it",
			strerror(errno));
}

int unstick_setup(void (*on_ring)(void))
{
	struct sigaction sa;

	ring_hook = on_ring;
	memset(&sa, 0, sizeof(sa));
	sa.sa_handler = on_alarm;
	sa.sa_flags = SA_RESTART;   /* everything else in the window carries on */
	sigfillset(&sa.sa_mask);
	if (sigaction(SIGALRM, &sa, NULL) < 0)
		return -errno;
	installed = true;
	return 0;
}

void unstick_begin(void)
{
	depth++;
	/* Without a handler the timer's SIGALRM would end the process. */
	if (!armed && installed) {
		pthread_sigmask(SIG_BLOCK, NULL, &mask_when_armed);
		arm(UNSTICK_MS);
		armed = true;
	}
}

void unstick_defer(void)
{
	depth++;
}

void unstick_end(void)
{
	if (depth > 0 && --depth == 0 && armed) {
		arm(0);
		armed = false;
	}
}

void unstick_restore_mask(void)
{
	if (armed)
		pthread_sigmask(SIG_SETMASK, &mask_when_armed, NULL);
}
