/* SPDX-License-Identifier: MIT */
/*
 * --slurm-job: turning a Slurm job (or one of its steps) into what the
 * daemon can select.  Slurm is asked which of the job's processes run on
 * this node (`scontrol listpids`); the job's cgroup is read from one of
 * them (/proc/PID/cgroup, up to and including the job_J or step_S
 * component, in whichever hierarchy shows it) and sent as a cgroup
 * selector.  Without a job cgroup (proctrack/linuxproc) the PIDs Slurm
 * listed are sent instead.  The parsers are pure functions over
 * (pointer, length) so the unit tests call them directly.
 */
#ifndef BTGUARD_CLIENT_SLURM_H
#define BTGUARD_CLIENT_SLURM_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define SLURM_MAX_STEP 32       /* "batch", "extern", "interactive", or a number */

/* JOBID or JOBID.STEP from the command line. */
struct slurm_job {
	uint32_t id;
	char     step[SLURM_MAX_STEP];   /* "" for the whole job */
};

/*
 * Parses "JOBID" or "JOBID.STEP": JOBID decimal from 1 to 4294967294,
 * STEP decimal or one of batch, extern, interactive (the names
 * `scontrol listpids` prints and Slurm's cgroups use).  Returns 0 or
 * -EINVAL.
 */
int slurm_parse_job(const char *s, struct slurm_job *ret);

/*
 * The PIDs of job j (its step, if one is named) in `scontrol listpids
 * JOBID` output: rows "PID JOBID STEPID LOCALID GLOBALID".  Rows of
 * other jobs or steps, the header and lines that are no row (an error
 * scontrol printed) are skipped; the first line that is neither a row nor
 * the header is copied to detail (NUL-terminated, at most detail_len
 * bytes with the NUL) so a failure can say what scontrol said.  Writes at
 * most max PIDs; returns how many rows matched (which may exceed max).
 */
size_t slurm_parse_listpids_buf(const char *buf, size_t len, const struct slurm_job *j,
				int32_t *pids, size_t max, char *detail, size_t detail_len);

/*
 * The job's cgroup in /proc/PID/cgroup text: the first hierarchy whose
 * path has the component job_J (followed by step_S when a step is named)
 * gives the path up to and including it, written to out.  Returns 0,
 * -ENOENT when no hierarchy has it (no job cgroup: proctrack/linuxproc),
 * or -ENAMETOOLONG when the prefix does not fit out.
 */
int slurm_cgroup_prefix_buf(const char *buf, size_t len, const struct slurm_job *j,
			    char *out, size_t out_len);

/* What a job resolves to: a cgroup, or (no job cgroup) the listed PIDs. */
struct slurm_target {
	char    *cgroup;        /* caller's buffer of cgroup_len bytes; "" when PIDs */
	size_t   cgroup_len;
	int32_t *pids;          /* caller's array of max_pids */
	size_t   max_pids;
	size_t   npids;         /* PIDs written when there is no job cgroup */
	size_t   listed;        /* processes scontrol listed for the job here */
	char     detail[256];   /* on failure: scontrol's own words, if any */
};

/*
 * Asks scontrol for the job's processes on this node and resolves them
 * into t.  Returns 0; -ENOENT when scontrol cannot be run (not
 * installed); -ETIMEDOUT when it had not answered by deadline_ns
 * (CLOCK_MONOTONIC); -ESRCH when the job (step) has no process on this
 * node (t->detail: what scontrol said, if anything); -E2BIG when,
 * without a job cgroup, it has more than max_pids; -ENAMETOOLONG when
 * the cgroup does not fit t->cgroup; or another -errno from pipe/fork.
 */
int slurm_resolve(const struct slurm_job *j, struct slurm_target *t, uint64_t deadline_ns);

#endif
