// SPDX-License-Identifier: MIT
/*
 * btguard's SPANK plugin: every task of a job is guarded from its first
 * instruction.  A thin client of btguardd, with no patching logic: in the
 * remote context (slurmstepd), task_post_fork runs after a task has forked
 * and before slurmstepd lets any task exec, so `btguardctl guard --at-exec
 * PID` arms the daemon on that task; the daemon follows it through its
 * exec, guards glibc's backtrace() before the program's code runs, and
 * lets it go.
 *
 * On by `--btguard` (srun, sbatch, salloc), or for every job with the
 * plugstack argument `all`.  Other arguments: `btguardctl=PATH` (default
 * /usr/bin/btguardctl), `socket=PATH` (default btguardctl's own),
 * `timeout=SECONDS` (default 10: how long one task's arming may take).
 *
 * A task stays followed from its arming to its exec, however long
 * slurmstepd takes to fork and arm the step's other tasks before it lets
 * any of them exec: the follow asks for the longest deadline there is
 * (FOLLOW_MS), and the daemon ends it 10 minutes after the task's fork
 * at the latest (btguardd(8), "FOLLOW SLOTS").
 *
 * A failure to guard is logged and the job runs on unguarded: the shipped
 * plugstack line marks the plugin `optional`.  Marked `required`, a plugin
 * whose init fails stops the job; task_post_fork still never fails a task
 * here, because an unguarded task is better than a lost job.
 */
#include <errno.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include <slurm/spank.h>

SPANK_PLUGIN(btguard, 1);

#define DEFAULT_CTL "/usr/bin/btguardctl"
#define DEFAULT_TIMEOUT_S 10
/*
 * The follow's deadline: PROTO_MAX_FOLLOW_MS, "until the exec".  One
 * hook at a time arms the tasks of a step, so on a big node the first
 * task waits for every other's arming before it execs.
 */
#define FOLLOW_MS 600000
/* btguardctl's whole exchange: the follow, then the loader's few seconds. */
#define CTL_TIMEOUT_S (FOLLOW_MS / 1000 + 60)

static int enabled;          /* --btguard given, or `all` in plugstack.conf */
static char ctl[4096] = DEFAULT_CTL;
static char sock[4096];
static int timeout_s = DEFAULT_TIMEOUT_S;

static int option_btguard(int val, const char *optarg, int remote)
{
	(void)val;
	(void)optarg;
	(void)remote;
	enabled = 1;
	return 0;
}

struct spank_option spank_options[] = {
	{ "btguard", NULL,
	  "Guard glibc backtrace() in every task from its first instruction (btguard): "
	  "torch errors raised inside greenlet/gevent code then stay Python exceptions "
	  "instead of crashing the task", 0, 0, option_btguard },
	SPANK_OPTIONS_TABLE_END
};

/* The plugstack.conf arguments; -1 on one that is not understood. */
static int parse_args(int ac, char **av)
{
	for (int i = 0; i < ac; i++) {
		const char *a = av[i];
		char *end;
		long v;

		if (!strcmp(a, "all")) {
			enabled = 1;
		} else if (!strncmp(a, "btguardctl=", 11) && a[11] == '/' &&
			   strlen(a + 11) < sizeof(ctl)) {
			snprintf(ctl, sizeof(ctl), "%s", a + 11);
		} else if (!strncmp(a, "socket=", 7) && a[7] == '/' && strlen(a + 7) < sizeof(sock)) {
			snprintf(sock, sizeof(sock), "%s", a + 7);
		} else if (!strncmp(a, "timeout=", 8)) {
			errno = 0;
			v = strtol(a + 8, &end, 10);
			if (errno || *end || v < 1 || v > 600) {
				slurm_error("btguard: plugstack argument '%s': want 1..600 seconds", a);
				return -1;
			}
			timeout_s = (int)v;
		} else {
			slurm_error("btguard: unknown plugstack argument '%s' (all, btguardctl=PATH, "
				    "socket=PATH, timeout=SECONDS)", a);
			return -1;
		}
	}
	return 0;
}

int slurm_spank_init(spank_t sp, int ac, char **av)
{
	if (parse_args(ac, av) < 0)
		return -1;
	/* sbatch and salloc see options only when registered here. */
	if (spank_context() == S_CTX_ALLOCATOR &&
	    spank_option_register(sp, &spank_options[0]) != ESPANK_SUCCESS)
		return -1;
	return 0;
}

/*
 * Starts btguardctl --json guard --at-exec PID and waits, at most the
 * timeout, for its first line: the daemon has seized the task and will
 * follow it through its exec.  btguardctl must stay connected until the
 * task has exec'd and been guarded (a client gone while armed lets the
 * task go unguarded), which happens only after this hook returns and
 * slurmstepd lets the tasks exec: so it runs on, detached (a grandchild,
 * never slurmstepd's to reap), its output going into a pipe nobody reads
 * after the first line (two short lines: far below a pipe's buffer).
 * Returns 0 when armed, -ETIMEDOUT, -EIO when btguardctl said otherwise.
 */
static int arm(pid_t task, char *why, size_t why_len)
{
	char pidbuf[16], secs[16], follow[16], line[1024], *argv[13];
	int argc = 0, fds[2], status, r;
	size_t len = 0;
	pid_t mid;

	snprintf(pidbuf, sizeof(pidbuf), "%d", (int)task);
	snprintf(secs, sizeof(secs), "%d", CTL_TIMEOUT_S + timeout_s);
	snprintf(follow, sizeof(follow), "%d", FOLLOW_MS);
	argv[argc++] = ctl;
	if (sock[0]) {
		argv[argc++] = "--socket";
		argv[argc++] = sock;
	}
	argv[argc++] = "--json";
	argv[argc++] = "--timeout";
	argv[argc++] = secs;
	argv[argc++] = "--deadline";
	argv[argc++] = follow;
	argv[argc++] = "guard";
	argv[argc++] = "--at-exec";
	argv[argc++] = pidbuf;
	argv[argc] = NULL;
	/* O_CLOEXEC: the tasks slurmstepd execs must not inherit it. */
	if (pipe2(fds, O_CLOEXEC) < 0)
		return -errno;
	mid = fork();
	if (mid < 0) {
		r = -errno;
		close(fds[0]);
		close(fds[1]);
		return r;
	}
	if (mid == 0) {
		/* The middle child only forks btguardctl and leaves: init reaps it. */
		if (fork() == 0) {
			setsid();
			dup2(fds[1], STDOUT_FILENO);
			execv(ctl, argv);
			_exit(127);
		}
		_exit(0);
	}
	close(fds[1]);
	while (waitpid(mid, &status, 0) < 0 && errno == EINTR)
		;
	r = -ETIMEDOUT;
	for (;;) {
		struct pollfd p = { .fd = fds[0], .events = POLLIN };
		ssize_t n;

		if (poll(&p, 1, timeout_s * 1000) <= 0)
			break;
		n = read(fds[0], line + len, sizeof(line) - 1 - len);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			r = -EIO;   /* btguardctl ended without a line: it could not even ask */
			break;
		}
		len += (size_t)n;
		line[len] = '\0';
		if (strchr(line, '\n') || len == sizeof(line) - 1) {
			r = strstr(line, "\"armed\":true") ? 0 : -EIO;
			break;
		}
	}
	line[strcspn(line, "\n")] = '\0';
	snprintf(why, why_len, "%s", len ? line : "no answer");
	/* Kept open (close-on-exec) until slurmstepd ends: closing it now
	 * would end btguardctl with SIGPIPE on its second line. */
	(void)fds[0];
	return r;
}

int slurm_spank_task_post_fork(spank_t sp, int ac, char **av)
{
	char why[1024];
	pid_t task;
	int r;

	(void)ac;
	(void)av;
	if (!enabled || !spank_remote(sp))
		return 0;
	if (spank_get_item(sp, S_TASK_PID, &task) != ESPANK_SUCCESS) {
		slurm_error("btguard: cannot learn the task's PID; the task runs unguarded");
		return 0;
	}
	r = arm(task, why, sizeof(why));
	if (r == 0)
		slurm_verbose("btguard: task %d armed: guarded from its first instruction", (int)task);
	else if (r == -ETIMEDOUT)
		slurm_error("btguard: %s did not answer within %d s; task %d runs unguarded", ctl,
			    timeout_s, (int)task);
	else
		slurm_error("btguard: %s guard --at-exec %d: %s; the task runs unguarded", ctl,
			    (int)task, why);
	return 0;   /* never fail a task over its guard */
}
