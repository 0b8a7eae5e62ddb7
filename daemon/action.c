// SPDX-License-Identifier: MIT
/*
 * One target of a request: pin the PID, authorize the caller, run the
 * procedure, log the outcome.  This is the decider for a target, so it is
 * the one place that logs about it.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "action.h"
#include "log.h"
#include "patch.h"
#include "pidns.h"
#include "procfs.h"

static int pidfd_open_pid(pid_t pid)
{
	return (int)syscall(SYS_pidfd_open, pid, 0);
}

/*
 * Resolves the caller's PID number to ours, pins the process, and decides
 * whether the caller may act on it.  *ret_pid is the PID in our namespace.
 */
static int prepare(const struct auth_caller *caller, unsigned action,
		   const struct action_target *want, pid_t *ret_pid, struct patch_pin *pin,
		   char *exe, size_t exe_len, char *why, size_t why_len)
{
	struct auth_target target;
	struct pidns_view view;
	struct procfs_stat st;
	pid_t asked = want->pid, pid, live;
	char path[64];
	ssize_t n;
	int r;

	r = pidns_view_of(caller->pid, &view);
	if (r < 0) {
		snprintf(why, why_len, "cannot tell the PID namespace of the requesting process %d",
			 caller->pid);
		return r;
	}
	r = pidns_to_daemon(&view, asked, &pid);
	if (r < 0) {
		snprintf(why, why_len, "no process with PID %d in your PID namespace", asked);
		return r;
	}
	*ret_pid = pid;
	/*
	 * Pin first: whatever we learn below is about this very process.
	 * Without pidfd_open (kernels before 5.3, valgrind) the start time read
	 * below is the whole pin; check_pin() compares it all the same.
	 */
	pin->pidfd = pidfd_open_pid(pid);
	if (pin->pidfd < 0 && errno != ENOSYS) {
		r = errno;
		if (r == ESRCH)
			snprintf(why, why_len, "no process with PID %d", asked);
		else if (r == EINVAL)  /* pidfd_open refuses a TID that is not a process */
			snprintf(why, why_len, "%d is a thread, not a process; name its process", asked);
		else
			snprintf(why, why_len, "cannot pin process %d: %s", asked, strerror(r));
		return r == ESRCH || r == EINVAL ? -BTG_ERR_NOPROC : -r;
	}
	/* For the audit log only (never the reply): a denied attempt names its target too. */
	snprintf(path, sizeof(path), "/proc/%d/exe", pid);
	n = readlink(path, exe, exe_len - 1);
	exe[n > 0 ? n : 0] = '\0';
	r = auth_read_target(pid, &target);
	if (r < 0) {
		snprintf(why, why_len, "no process with PID %d", asked);
		return r;
	}
	r = auth_check(caller, &target, why, why_len);
	if (r < 0)
		return r;
	if (target.status.tgid != pid) {
		snprintf(why, why_len, "%d is a thread, not a process; name its process", asked);
		return -BTG_ERR_NOPROC;
	}
	/* status only reads, so it works under a debugger; guard and unguard
	 * must attach, which a tracer would make fail (or worse, disturb). */
	/* A tracer that is us is a thread still parked from an earlier deadline:
	 * patch.c waits for its release instead of calling us a debugger. */
	if (target.status.tracer > 0 && target.status.tracer != getpid() &&
	    action != PROTO_ACTION_STATUS) {
		/* Checked before seizing anything, so the tracer's session is untouched. */
		snprintf(why, why_len, "process %d is already traced by process %d (a debugger or strace?)",
			 asked, target.status.tracer);
		return -BTG_ERR_TRACED;
	}
	/* A zombie main thread with live threads is a live process (pthread_exit() in main). */
	if ((target.status.state == 'Z' || target.status.state == 'X') && procfs_live_task(pid, &live) < 0) {
		snprintf(why, why_len, "process %d has exited (zombie) and has no code to guard", asked);
		return -BTG_ERR_ZOMBIE;
	}
	r = procfs_read_stat(pid, &st);
	if (r < 0) {
		snprintf(why, why_len, "process %d exited", asked);
		return -BTG_ERR_GONE;
	}
	/* The request named the process that had this PID when it arrived. */
	if (want->arrival_start == 0) {
		snprintf(why, why_len, "no process with PID %d when the request arrived", asked);
		return -BTG_ERR_NOPROC;
	}
	if (st.starttime != want->arrival_start) {
		snprintf(why, why_len,
			 "PID %d now names another process than when the request arrived", asked);
		return -BTG_ERR_REUSED;
	}
	pin->starttime = st.starttime;
	return 0;
}

void action_run(const struct auth_caller *caller, unsigned action,
		uint32_t deadline_ms, const struct action_target *want,
		struct proto_result *res)
{
	int32_t pid = want->pid;
	struct patch_pin pin = { .pidfd = -1 };
	char exe[PATH_MAX];
	pid_t target = 0;
	int r;

	memset(res, 0, sizeof(*res));
	res->pid = pid;
	res->action = (uint8_t)action;
	res->state = PROTO_PROC_UNKNOWN;
	exe[0] = '\0';

	r = prepare(caller, action, want, &target, &pin, exe, sizeof(exe), res->message,
		    sizeof(res->message));
	if (r == 0)
		r = patch_run(caller, target, &pin, action, deadline_ms, res);
	res->error = proto_error_from_negative(r);
	if (pin.pidfd >= 0)
		close(pin.pidfd);
	log_action(caller, target ? target : pid, exe, res);
}

static bool contains(const int32_t *v, size_t n, int32_t pid)
{
	for (size_t i = 0; i < n; i++)
		if (v[i] == pid)
			return true;
	return false;
}

/*
 * Appends pid (as the caller numbers it) and, depth first, its descendants;
 * stops quietly at the limit.  A PID that cannot be read is still listed:
 * action_run will say what is wrong with it.
 */
static void add_tree(const struct pidns_view *view, int32_t *v, size_t *n, int32_t pid, int depth)
{
	pid_t ours, *kids = NULL;
	size_t nkids = 0;

	if (*n >= PROTO_MAX_PIDS || contains(v, *n, pid))
		return;
	v[(*n)++] = pid;
	if (depth > 64 || pidns_to_daemon(view, pid, &ours) < 0 ||
	    procfs_list_children(ours, &kids, &nkids) < 0)
		return;
	for (size_t i = 0; i < nkids; i++) {
		pid_t theirs;

		if (pidns_to_caller(view, kids[i], &theirs) == 0)
			add_tree(view, v, n, theirs, depth + 1);
	}
	free(kids);
}

/* The start time of the process the caller calls pid, or 0 when there is none. */
static uint64_t arrival_start(const struct pidns_view *view, bool have_view, int32_t pid)
{
	struct procfs_stat st;
	pid_t ours;

	if (!have_view || pidns_to_daemon(view, pid, &ours) < 0 || procfs_read_stat(ours, &st) < 0)
		return 0;
	return st.starttime;
}

int action_expand_targets(const struct auth_caller *caller, const struct proto_request *req,
			  struct action_target **ret, size_t *ret_n)
{
	struct pidns_view view;
	struct action_target *t;
	int32_t *v;
	size_t n = 0;
	bool have_view = pidns_view_of(caller->pid, &view) == 0;
	bool tree = (req->flags & PROTO_FLAG_TREE) && have_view;

	v = malloc(PROTO_MAX_PIDS * sizeof(*v));
	if (!v)
		return -ENOMEM;
	for (uint32_t i = 0; i < req->npids && i < PROTO_MAX_PIDS; i++) {
		if (tree)
			add_tree(&view, v, &n, req->pids[i], 0);
		else
			v[n++] = req->pids[i];
	}
	t = malloc((n ? n : 1) * sizeof(*t));
	if (!t) {
		free(v);
		return -ENOMEM;
	}
	for (size_t i = 0; i < n; i++) {
		t[i].pid = v[i];
		t[i].arrival_start = arrival_start(&view, have_view, v[i]);
	}
	free(v);
	*ret = t;
	*ret_n = n;
	return 0;
}
