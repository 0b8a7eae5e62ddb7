// SPDX-License-Identifier: MIT
/*
 * --slurm-job: from a Slurm job ID to a selector, on the node the client
 * runs on.  Three steps:
 *
 *   1. `scontrol listpids JOBID [NODE]` asks the node's slurmstepds which
 *      processes belong to the job here (NODE: the task's own node, when
 *      btguardctl runs as a Slurm task; see task_node_name()).  Always the whole job: scontrol
 *      takes only numeric steps ("42.batch" is not a step ID to it), so a
 *      step is picked from the STEPID column instead.
 *   2. /proc/PID/cgroup of one of them: the path up to and including the
 *      job_J (or job_J/step_S) component, in whichever hierarchy shows it.
 *      proctrack/cgroup with cgroup/v1 puts tasks in
 *      freezer:/slurm_<node>/uid_N/job_J/step_S; cgroup/v2 in
 *      0::/<slurmstepd's scope>/job_J/step_S/user/task_T.  The daemon
 *      matches a cgroup selector against every hierarchy, so whichever one
 *      we found it in, it selects the whole job, including processes the
 *      job starts between this look-up and the daemon's.
 *   3. No hierarchy shows the job (proctrack/linuxproc, or pgid: Slurm
 *      tracks the job without a cgroup): the PIDs Slurm listed are sent
 *      instead.  They are exactly what Slurm itself would signal for the
 *      job, so nothing outside the job is named, but a process the job
 *      starts after the listing is not in it.
 *
 * Nothing here decides who may act on what: the daemon does, per process,
 * from the caller's credentials.  A user who names someone else's job gets
 * a selector that matches none of that user's processes.
 */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "slurm.h"

/* scontrol's output is read into this much and no more: 4096 PIDs (the
 * most one request can name) take about 200 KiB of rows. */
#define LISTPIDS_MAX (1024u * 1024u)
/* /proc/PID/cgroup: one line per hierarchy, each path at most PATH_MAX. */
#define CGROUP_FILE_MAX (64u * 1024u)

static const char *const step_names[] = { "batch", "extern", "interactive" };

static int parse_u32(const char *s, size_t len, uint32_t max, uint32_t *ret)
{
	uint64_t v = 0;

	if (len == 0)
		return -EINVAL;
	for (size_t i = 0; i < len; i++) {
		if (s[i] < '0' || s[i] > '9')
			return -EINVAL;
		v = v * 10 + (uint64_t)(s[i] - '0');
		if (v > max)
			return -ERANGE;
	}
	*ret = (uint32_t)v;
	return 0;
}

static bool step_name_valid(const char *s, size_t len)
{
	uint32_t v;

	if (len == 0 || len >= SLURM_MAX_STEP)
		return false;
	if (parse_u32(s, len, UINT32_MAX, &v) == 0)
		return true;
	for (size_t i = 0; i < sizeof(step_names) / sizeof(step_names[0]); i++)
		if (strlen(step_names[i]) == len && !memcmp(step_names[i], s, len))
			return true;
	return false;
}

int slurm_parse_job(const char *s, struct slurm_job *ret)
{
	const char *dot = strchr(s, '.');
	size_t idlen = dot ? (size_t)(dot - s) : strlen(s);
	struct slurm_job j = { 0 };

	/* 0 is no job; 0xffffffff is Slurm's NO_VAL. */
	if (parse_u32(s, idlen, UINT32_MAX - 1, &j.id) < 0 || j.id == 0)
		return -EINVAL;
	if (dot) {
		if (!step_name_valid(dot + 1, strlen(dot + 1)))
			return -EINVAL;
		strcpy(j.step, dot + 1);
	}
	*ret = j;
	return 0;
}

/* The next whitespace-separated field of [*p, end), or false at the end. */
static bool next_field(const char **p, const char *end, const char **ret, size_t *ret_len)
{
	const char *s = *p;

	while (s < end && (*s == ' ' || *s == '\t'))
		s++;
	if (s == end)
		return false;
	*ret = s;
	while (s < end && *s != ' ' && *s != '\t')
		s++;
	*ret_len = (size_t)(s - *ret);
	*p = s;
	return true;
}

static bool field_is(const char *f, size_t len, const char *want)
{
	return strlen(want) == len && !memcmp(f, want, len);
}

/*
 * One line of listpids: 1 for a row of job j (its step, if named) with
 * *ret_pid, 0 for a row of another job or step, -EINVAL for anything else.
 */
static int listpids_row(const char *line, const char *end, const struct slurm_job *j,
			int32_t *ret_pid)
{
	const char *f;
	size_t len;
	uint32_t pid, job;

	if (!next_field(&line, end, &f, &len) || parse_u32(f, len, INT32_MAX, &pid) < 0 ||
	    pid == 0)
		return -EINVAL;
	if (!next_field(&line, end, &f, &len) || parse_u32(f, len, UINT32_MAX, &job) < 0)
		return -EINVAL;
	if (!next_field(&line, end, &f, &len))
		return -EINVAL;
	if (job != j->id || (j->step[0] && !field_is(f, len, j->step)))
		return 0;
	*ret_pid = (int32_t)pid;
	return 1;
}

size_t slurm_parse_listpids_buf(const char *buf, size_t len, const struct slurm_job *j,
				int32_t *pids, size_t max, char *detail, size_t detail_len)
{
	const char *p = buf, *end = buf + len;
	size_t n = 0;

	if (detail_len)
		detail[0] = '\0';
	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		const char *eol = nl ? nl : end;
		const char *f;
		size_t flen;
		int32_t pid;
		int r = listpids_row(p, eol, j, &pid);

		if (r > 0) {
			if (n < max)
				pids[n] = pid;
			n++;
		} else if (r < 0 && detail_len && !detail[0]) {
			const char *q = p;

			/* The header starts with "PID"; blank lines say nothing. */
			if (next_field(&q, eol, &f, &flen) && !field_is(f, flen, "PID")) {
				size_t l = (size_t)(eol - p);

				if (l >= detail_len)
					l = detail_len - 1;
				memcpy(detail, p, l);
				detail[l] = '\0';
			}
		}
		p = eol + (nl != NULL);
	}
	return n;
}

/*
 * In one cgroup path [path, end): the length of the prefix that ends with
 * the component job_J (and step_S right after it), or 0.
 */
static size_t job_prefix(const char *path, const char *end, const struct slurm_job *j)
{
	char job[24], step[SLURM_MAX_STEP + 8];
	const char *c = path;

	snprintf(job, sizeof(job), "job_%" PRIu32, j->id);
	snprintf(step, sizeof(step), "step_%s", j->step);
	while (c < end) {
		const char *slash, *next;
		size_t clen;

		while (c < end && *c == '/')
			c++;
		slash = memchr(c, '/', (size_t)(end - c));
		next = slash ? slash : end;
		clen = (size_t)(next - c);
		if (field_is(c, clen, job)) {
			const char *s, *send;

			if (!j->step[0])
				return (size_t)(next - path);
			/* The step is the component right below the job. */
			s = next;
			while (s < end && *s == '/')
				s++;
			send = memchr(s, '/', (size_t)(end - s));
			if (!send)
				send = end;
			return field_is(s, (size_t)(send - s), step) ? (size_t)(send - path) : 0;
		}
		c = next;
	}
	return 0;
}

int slurm_cgroup_prefix_buf(const char *buf, size_t len, const struct slurm_job *j,
			    char *out, size_t out_len)
{
	const char *p = buf, *end = buf + len;

	while (p < end) {
		const char *nl = memchr(p, '\n', (size_t)(end - p));
		const char *eol = nl ? nl : end;
		const char *c1, *c2;
		size_t n;

		/* "ID:CONTROLLERS:PATH"; the path itself may hold ':'. */
		c1 = memchr(p, ':', (size_t)(eol - p));
		c2 = c1 ? memchr(c1 + 1, ':', (size_t)(eol - c1 - 1)) : NULL;
		if (c2 && c2 + 1 < eol && c2[1] == '/' && (n = job_prefix(c2 + 1, eol, j)) > 0) {
			if (n >= out_len)
				return -ENAMETOOLONG;
			memcpy(out, c2 + 1, n);
			out[n] = '\0';
			return 0;
		}
		p = eol + (nl != NULL);
	}
	return -ENOENT;
}

static uint64_t now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Milliseconds left until deadline_ns for poll(), at least 0. */
static int ms_left(uint64_t deadline_ns)
{
	uint64_t t_ns = now_ns();

	if (t_ns >= deadline_ns)
		return 0;
	return (deadline_ns - t_ns) / 1000000u > INT32_MAX ? INT32_MAX :
	       (int)((deadline_ns - t_ns + 999999u) / 1000000u);
}

/*
 * Runs `scontrol listpids JOBID`, its stdout and stderr into buf (so an
 * error it prints becomes the detail of ours).  Returns the bytes read,
 * -ENOENT when scontrol could not be run, -ETIMEDOUT when it had not
 * finished by deadline_ns (it is killed: a slurmstepd that does not
 * answer must not hang us), or -errno.  More than len bytes are drained
 * and dropped, and *truncated says so.
 */
/*
 * The node to ask scontrol about: SLURMD_NODENAME, which slurmstepd sets
 * for every task, when it looks like a node name.  Without it scontrol
 * takes the first node whose NodeHostname is this host's name: the right
 * one on a cluster of one slurmd per host, but where one host runs several
 * slurmds (multiple-slurmd), every task would be shown the first node's
 * processes and the README's `srun --ntasks-per-node=1 ... --slurm-job`
 * would guard one node's tasks however many nodes it ran on.  A value
 * scontrol could take for an option, or no name at all, is not passed.
 */
static const char *task_node_name(void)
{
	const char *n = getenv("SLURMD_NODENAME");
	size_t len;

	if (!n || !*n || *n == '-')
		return NULL;
	len = strspn(n, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789._-");
	return n[len] == '\0' && len < 256 ? n : NULL;
}

static ssize_t run_listpids(uint32_t job, char *buf, size_t len, bool *truncated,
			    uint64_t deadline_ns)
{
	char id[16];
	/* argv[3]: the node, when this runs as a Slurm task (task_node_name). */
	char *argv[] = { "scontrol", "listpids", id, NULL, NULL };
	char sink[4096];
	size_t got = 0;
	int fds[2], status = 0, r = 0;
	pid_t pid;
	ssize_t n;

	snprintf(id, sizeof(id), "%" PRIu32, job);
	argv[3] = (char *)task_node_name();
	*truncated = false;
	if (pipe2(fds, O_CLOEXEC) < 0)
		return -errno;
	fflush(NULL);
	pid = fork();
	if (pid < 0) {
		r = -errno;
		close(fds[0]);
		close(fds[1]);
		return r;
	}
	if (pid == 0) {
		dup2(fds[1], STDOUT_FILENO);
		dup2(fds[1], STDERR_FILENO);
		execvp(argv[0], argv);
		_exit(127);
	}
	close(fds[1]);
	for (;;) {
		struct pollfd pfd = { .fd = fds[0], .events = POLLIN };
		bool full = got == len;
		int p = poll(&pfd, 1, ms_left(deadline_ns));

		if (p < 0 && errno == EINTR)
			continue;
		if (p == 0) {
			r = -ETIMEDOUT;
			break;
		}
		if (p < 0) {
			r = -errno;
			break;
		}
		n = read(fds[0], full ? sink : buf + got, full ? sizeof(sink) : len - got);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			break;
		if (full)
			*truncated = true;
		else
			got += (size_t)n;
	}
	close(fds[0]);
	if (r < 0)
		kill(pid, SIGKILL);     /* our own child, still unreaped */
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	if (r < 0)
		return r;
	/* Only an exec failure: scontrol exits 1 for "no steps here" too,
	 * which the rows (none) already say. */
	if (WIFEXITED(status) && WEXITSTATUS(status) == 127)
		return -ENOENT;
	return (ssize_t)got;
}

/* /proc/PID/cgroup into buf; returns its length or -errno (-ENOENT: gone). */
static ssize_t read_cgroup_file(int32_t pid, char *buf, size_t len)
{
	char path[32];
	size_t got = 0;
	ssize_t n;
	int fd;

	snprintf(path, sizeof(path), "/proc/%" PRId32 "/cgroup", pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -errno;
	while (got < len && (n = read(fd, buf + got, len - got)) != 0) {
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0) {
			n = -errno;
			close(fd);
			return n;
		}
		got += (size_t)n;
	}
	close(fd);
	return (ssize_t)got;
}

int slurm_resolve(const struct slurm_job *j, struct slurm_target *t, uint64_t deadline_ns)
{
	static char out[LISTPIDS_MAX];
	static char cg[CGROUP_FILE_MAX];
	static int32_t listed[LISTPIDS_MAX / 8];   /* a row is at least 8 bytes */
	bool truncated, seen = false;
	ssize_t n;
	size_t count;

	t->cgroup[0] = '\0';
	t->npids = 0;
	n = run_listpids(j->id, out, sizeof(out), &truncated, deadline_ns);
	if (n < 0)
		return (int)n;
	count = slurm_parse_listpids_buf(out, (size_t)n, j, listed,
					 sizeof(listed) / sizeof(listed[0]),
					 t->detail, sizeof(t->detail));
	t->listed = count;
	if (count == 0)
		return -ESRCH;

	for (size_t i = 0; i < count && i < sizeof(listed) / sizeof(listed[0]); i++) {
		ssize_t len = read_cgroup_file(listed[i], cg, sizeof(cg));
		int r;

		if (len < 0)
			continue;       /* exited since scontrol listed it */
		seen = true;
		r = slurm_cgroup_prefix_buf(cg, (size_t)len, j, t->cgroup, t->cgroup_len);
		if (r == 0)
			return 0;
		if (r != -ENOENT)
			return r;
	}
	if (!seen)
		return -ESRCH;      /* every listed process has exited */

	/* No job cgroup: the PIDs themselves. */
	if (truncated || count > t->max_pids)
		return -E2BIG;
	memcpy(t->pids, listed, count * sizeof(listed[0]));
	t->npids = count;
	return 0;
}
