// SPDX-License-Identifier: MIT
/*
 * --unit and --slurm-job: asking systemctl and scontrol, on this node,
 * which cgroup (or which PIDs) a unit or a Slurm job is, so the request
 * names what the daemon can select.  Both run before the daemon is
 * contacted; a failure here sends nothing.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ctl_conn.h"
#include "status.h"
#include "target.h"

/*
 * The cgroup of a systemd unit, as systemd's manager knows it:
 * `systemctl show --property=ControlGroup --value -- UNIT`.  The path is
 * what /proc/PID/cgroup shows for the unit's processes, on a pure v2 host
 * and on a hybrid one alike.  Returns the exit status to fail with, or 0.
 */
static int unit_cgroup(const char *unit, char *out, size_t out_len)
{
	char *argv[] = { "systemctl", "show", "--property=ControlGroup", "--value", "--",
			 (char *)unit, NULL };
	size_t len = 0;
	int fds[2], status;
	pid_t pid;
	ssize_t n;

	if (pipe2(fds, O_CLOEXEC) < 0)
		return status_fail(EXIT_FAILED, "cannot run systemctl: %s", strerror(errno));
	fflush(NULL);
	pid = fork();
	if (pid < 0) {
		close(fds[0]);
		close(fds[1]);
		return status_fail(EXIT_FAILED, "cannot run systemctl: %s", strerror(errno));
	}
	if (pid == 0) {
		dup2(fds[1], STDOUT_FILENO);
		execvp(argv[0], argv);
		fprintf(stderr, PROGRAM ": cannot run systemctl: %s\n", strerror(errno));
		_exit(127);
	}
	close(fds[1]);
	while (len < out_len - 1 && (n = read(fds[0], out + len, out_len - 1 - len)) != 0) {
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			break;
		len += (size_t)n;
	}
	close(fds[0]);
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	out[len] = '\0';
	out[strcspn(out, "\n")] = '\0';
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		return status_fail(EXIT_FAILED, "cannot ask systemd for the cgroup of unit '%s' "
				   "(systemctl failed; is systemd running here?)", unit);
	if (out[0] != '/')
		return status_fail(EXIT_FAILED, "unit '%s' has no control group: is it loaded and "
				   "running?", unit);
	return 0;
}

/*
 * --slurm-job: the job's cgroup into the selector, or, when the job has no
 * cgroup on this node (proctrack/linuxproc), the PIDs Slurm listed for it
 * (slurm.c says why that is safe).  Returns the exit status to fail with,
 * or 0.
 */
static int slurm_job_target(struct options *o)
{
	struct slurm_target t = {
		.cgroup = o->req.sel.cgroup, .cgroup_len = sizeof(o->req.sel.cgroup),
		.pids = o->req.pids, .max_pids = PROTO_MAX_PIDS,
	};
	int r = slurm_resolve(&o->slurm_job, &t,
			      ctl_conn_now_ns() + (uint64_t)(o->timeout_s * 1e9));

	switch (r) {
	case 0:
		break;
	case -ENOENT:
		return status_fail(EXIT_FAILED,
				   "cannot run scontrol to find job %s: is Slurm installed "
				   "on this node?",
				   o->slurm_arg);
	case -ETIMEDOUT:
		return status_fail(EXIT_FAILED,
				   "scontrol listpids did not answer within %g s; nothing "
				   "was sent",
				   o->timeout_s);
	case -ESRCH:
		return status_fail(EXIT_FAILED,
				   "Slurm job %s has no processes on this node%s%s%s; "
				   "nothing was sent",
				   o->slurm_arg, t.detail[0] ? " (scontrol: " : "", t.detail,
				   t.detail[0] ? ")" : "");
	case -E2BIG:
		return status_fail(EXIT_FAILED,
				   "Slurm job %s has no cgroup on this node and more than "
				   "%u processes, more than one request may name",
				   o->slurm_arg, PROTO_MAX_PIDS);
	case -ENAMETOOLONG:
		return status_fail(EXIT_FAILED,
				   "the cgroup of Slurm job %s is longer than %u bytes",
				   o->slurm_arg, PROTO_MAX_PATTERN);
	default:
		return status_fail(EXIT_FAILED, "cannot find Slurm job %s: %s", o->slurm_arg,
				   strerror(-r));
	}
	if (t.npids) {
		/* A request names PIDs or selects, never both. */
		if (o->req.sel.fields)
			return status_fail(
				EXIT_FAILED,
				"Slurm job %s has no cgroup on this node, so it "
				"is its PIDs, which other selectors cannot narrow; nothing "
				"was sent",
				o->slurm_arg);
		o->req.npids = (uint32_t)t.npids;
		if (o->out.verbose)
			fprintf(stderr, PROGRAM ": Slurm job %s has no cgroup on this node "
				"(proctrack/linuxproc?): acting on the %zu processes scontrol "
				"listed\n", o->slurm_arg, t.npids);
	} else {
		o->req.sel.fields |= PROTO_SEL_CGROUP;
	}
	return 0;
}

int target_resolve(struct options *o)
{
	int status;

	if (o->unit) {
		status = unit_cgroup(o->unit, o->req.sel.cgroup, sizeof(o->req.sel.cgroup));
		if (status)
			return status;
		o->req.sel.fields |= PROTO_SEL_CGROUP;
	}
	if (o->slurm_arg) {
		status = slurm_job_target(o);
		if (status)
			return status;
	}
	return 0;
}
