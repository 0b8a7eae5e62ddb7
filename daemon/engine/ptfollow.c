// SPDX-License-Identifier: MIT
/*
 * Following one process through its exec (exec.c: guard --at-exec, run):
 * its single task seized across many turns of the loop, stopped at every
 * system call until the new program is guarded, then let go.  Apart from
 * stopping and resuming the world because it lives by other rules: no
 * attempt's deadline, a system call-stop between two turns (harmless if
 * the daemon dies, where a world's interrupt-stops would not be), nothing
 * counted in ptrace_worlds_open().  With the world it shares the seize an
 * exec cannot hold up and the orphans (ptrace.c), and the statuses: one
 * that a world's waitpid(-1) collects for a follower is kept here, in its
 * stash.
 */
#include <errno.h>
#include <signal.h>
#include <string.h>
#include <sys/signalfd.h>
#include <sys/wait.h>
#include <unistd.h>

#include "proto.h"
#include "ptrace_int.h"
#include "timeutil.h"

/*
 * The followers (ptrace.h): a status that waitpid(-1) of an attempt
 * collects for one of them is kept in its stash, since nothing else would
 * ever see it and the task would sit in its stop for good.
 */
static struct ptrace_follow *followers[PTRACE_MAX_FOLLOW];
static size_t n_followers;

/*
 * struct ptrace_syscall_info of <linux/ptrace.h>, which cannot be included
 * with <sys/ptrace.h>; glibc 2.36 names the request but not the struct.
 */
struct syscall_info_abi {
	uint8_t  op;          /* 1 entry, 2 exit */
	uint8_t  pad[3];
	uint32_t arch;
	uint64_t instruction_pointer, stack_pointer;
	union {
		struct { uint64_t nr, args[6]; } entry;
		struct { int64_t rval; uint8_t is_error; } exit;
		struct { uint64_t nr, args[6]; uint32_t ret_data; } seccomp;
	};
};

static void follow_forget(struct ptrace_follow *f)
{
	for (size_t i = 0; i < n_followers; i++) {
		if (followers[i] == f) {
			followers[i] = followers[--n_followers];
			break;
		}
	}
	f->seized = f->stopped = false;
}

bool ptrace_follow_stash(pid_t tid, int status)
{
	for (size_t i = 0; i < n_followers; i++) {
		struct ptrace_follow *f = followers[i];

		if (f->tid != tid)
			continue;
		/* A task has one stop, then perhaps its exit, before it is resumed. */
		if (f->nstash < PTRACE_FOLLOW_STASH)
			f->stash[f->nstash++] = status;
		return true;
	}
	return false;
}

int ptrace_follow_seize(struct ptrace_follow *f, pid_t tid)
{
	int r;

	memset(f, 0, sizeof(*f));
	f->tid = tid;
	if (n_followers == PTRACE_MAX_FOLLOW)
		return -BTG_ERR_LIMIT;
	{
		struct ptrace_world none = { .sigchld_fd = -1 };
		unsigned abandoned = 0;

		r = ptrace_seize_call(&none, tid, PTRACE_O_TRACEEXEC | PTRACE_O_TRACESYSGOOD,
				      &abandoned);
	}
	if (r == -EAGAIN)
		r = -BTG_ERR_BUSY;
	if (r == -EPERM) {
		char why[PROTO_MAX_MESSAGE + 1];

		r = ptrace_seize_refused(tid, tid, why, sizeof(why));
		return r < 0 ? r : -ESRCH;   /* 0: a zombie, on its way out */
	}
	if (r < 0)
		return r;
	f->seized = true;
	followers[n_followers++] = f;
	/* ESRCH: it is exiting, and its exit status comes to us. */
	ptrace_call(PTRACE_INTERRUPT, tid, 0, 0, NULL);
	return 0;
}

/* One status of f, if one is ready: 1, else 0. */
static int follow_collect(struct ptrace_follow *f, int *ret_status)
{
	int status;
	pid_t r;

	if (f->nstash) {
		status = f->stash[0];
		memmove(f->stash, f->stash + 1, --f->nstash * sizeof(f->stash[0]));
	} else {
		do
			r = waitpid(f->tid, &status, __WALL | WNOHANG);
		while (r < 0 && errno == EINTR);
		if (r < 0 && errno == ECHILD) {
			/* Not ours any more: it was reaped as it exited. */
			follow_forget(f);
			*ret_status = 0;
			return 1;
		}
		if (r <= 0)
			return 0;
	}
	if (WIFSTOPPED(status))
		f->stopped = true;
	else if (WIFEXITED(status) || WIFSIGNALED(status))
		follow_forget(f);
	*ret_status = status;
	return 1;
}

int ptrace_follow_wait(struct ptrace_follow *f, const struct timespec *until, int *ret_status)
{
	struct ptrace_world w = { .sigchld_fd = -1 };
	sigset_t chld;
	int r;

	if (!f->seized && !f->nstash)
		return -ESRCH;
	r = follow_collect(f, ret_status);
	if (r != 0)
		return r;
	/* As ptrace_stop_all waits: SIGCHLD through a signalfd, bounded. */
	sigemptyset(&chld);
	sigaddset(&chld, SIGCHLD);
	w.sigchld_fd = signalfd(-1, &chld, SFD_NONBLOCK | SFD_CLOEXEC);
	if (w.sigchld_fd < 0)
		return -errno;
	while ((r = follow_collect(f, ret_status)) == 0 && ptrace_wait_sigchld(&w, until, NULL))
		;
	close(w.sigchld_fd);
	return r;
}

enum ptrace_follow_stop ptrace_follow_classify(int status, int *ret_sig)
{
	*ret_sig = 0;
	if (!WIFSTOPPED(status))
		return PTRACE_FOLLOW_ENDED;
	*ret_sig = WSTOPSIG(status);
	switch (status >> 16) {
	case PTRACE_EVENT_EXEC:
		return PTRACE_FOLLOW_EXEC;
	case PTRACE_EVENT_STOP:
		return PTRACE_FOLLOW_GROUP;
	}
	/* PTRACE_O_TRACESYSGOOD marks syscall-stops apart from a real SIGTRAP. */
	return *ret_sig == (SIGTRAP | 0x80) ? PTRACE_FOLLOW_SYSCALL : PTRACE_FOLLOW_SIGNAL;
}

int ptrace_follow_syscall(struct ptrace_follow *f, int sig)
{
	int r = ptrace_call(PTRACE_SYSCALL, f->tid, 0, (uint64_t)sig, NULL);

	if (r == 0)
		f->stopped = false;
	return r;
}

int ptrace_follow_listen(struct ptrace_follow *f)
{
	int r = ptrace_call(PTRACE_LISTEN, f->tid, 0, 0, NULL);

	if (r == 0)
		f->stopped = false;
	return r;
}

int ptrace_follow_syscall_info(struct ptrace_follow *f, struct ptrace_syscall_stop *ret)
{
	struct syscall_info_abi info;
	int r;

	memset(&info, 0, sizeof(info));
	r = ptrace_call(PTRACE_GET_SYSCALL_INFO, f->tid, sizeof(info), (uint64_t)(uintptr_t)&info,
			NULL);
	if (r < 0)
		return r;
	if (info.op != 1 && info.op != 2)
		return -EINVAL;
	*ret = (struct ptrace_syscall_stop){
		.entry = info.op == 1,
		.nr = info.op == 1 ? info.entry.nr : 0,
		.rval = info.op == 2 ? info.exit.rval : 0,
		.is_error = info.op == 2 && info.exit.is_error,
	};
	return 0;
}

int ptrace_follow_release(struct ptrace_follow *f, int sig)
{
	struct timespec until;
	int status, r;

	if (!f->seized)
		return 0;
	if (!f->stopped) {
		/* Running to its next system call: stop it where it is. */
		r = ptrace_call(PTRACE_INTERRUPT, f->tid, 0, 0, NULL);
		timespec_after_ms(&until, PTRACE_FOLLOW_RELEASE_MS);
		while (r == 0 && f->seized && !f->stopped) {
			int stop_sig;

			r = ptrace_follow_wait(f, &until, &status);
			if (r == 1 && ptrace_follow_classify(status, &stop_sig) == PTRACE_FOLLOW_SIGNAL)
				sig = stop_sig;   /* a signal on its way: it still gets it */
			r = r == 1 ? 0 : -ETIMEDOUT;
		}
		if (!f->seized)
			return 0;   /* it exited meanwhile */
		if (!f->stopped) {
			follow_forget(f);
			ptrace_park(f->tid, false, 0);
			return 0;
		}
	}
	r = ptrace_call(PTRACE_DETACH, f->tid, 0, (uint64_t)sig, NULL);
	follow_forget(f);
	if (r == -ESRCH) {
		/* Killed while stopped: it waits for us to reap it before its parent can. */
		ptrace_reap_or_park(f->tid);
		r = 0;
	} else if (r < 0) {
		ptrace_park(f->tid, true, sig);
	}
	return r;
}
