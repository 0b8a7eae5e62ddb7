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
 * A failure to guard is logged and the job runs on unguarded: the shipped
 * plugstack line marks the plugin `optional`.  Marked `required`, a plugin
 * whose init fails stops the job; task_post_fork still never fails a task
 * here, because an unguarded task is better than a lost job.
 */
#include <errno.h>
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

/* Runs btguardctl guard --at-exec PID; 0 when it says the task is armed. */
static int arm(pid_t task)
{
	char pidbuf[16], secs[16], *argv[10];
	struct timespec nap = { 0, 10 * 1000 * 1000 };
	int argc = 0, status, waited_ms = 0;
	pid_t child, r;

	snprintf(pidbuf, sizeof(pidbuf), "%d", (int)task);
	snprintf(secs, sizeof(secs), "%d", timeout_s);
	argv[argc++] = ctl;
	if (sock[0]) {
		argv[argc++] = "--socket";
		argv[argc++] = sock;
	}
	argv[argc++] = "--timeout";
	argv[argc++] = secs;
	argv[argc++] = "guard";
	argv[argc++] = "--at-exec";
	argv[argc++] = pidbuf;
	argv[argc] = NULL;
	child = fork();
	if (child < 0)
		return -errno;
	if (child == 0) {
		execv(ctl, argv);
		_exit(127);
	}
	/* btguardctl has its own --timeout; this bound is in case it is stuck. */
	for (;;) {
		r = waitpid(child, &status, WNOHANG);
		if (r == child)
			break;
		if (r < 0 && errno != EINTR)
			return -errno;
		if (waited_ms > (timeout_s + 5) * 1000) {
			kill(child, SIGKILL);
			waitpid(child, &status, 0);
			return -ETIMEDOUT;
		}
		nanosleep(&nap, NULL);
		waited_ms += 10;
	}
	if (!WIFEXITED(status))
		return -EINTR;
	return WEXITSTATUS(status) == 0 ? 0 : -WEXITSTATUS(status);
}

int slurm_spank_task_post_fork(spank_t sp, int ac, char **av)
{
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
	r = arm(task);
	if (r == 0)
		slurm_verbose("btguard: task %d armed: guarded from its first instruction", (int)task);
	else if (r == -ETIMEDOUT)
		slurm_error("btguard: %s did not answer within %d s; task %d runs unguarded", ctl,
			    timeout_s + 5, (int)task);
	else if (r == -127)
		slurm_error("btguard: cannot run %s; task %d runs unguarded", ctl, (int)task);
	else
		slurm_error("btguard: %s guard --at-exec %d failed (status %d); the task runs "
			    "unguarded", ctl, (int)task, r < 0 ? -r : r);
	return 0;   /* never fail a task over its guard */
}
