// SPDX-License-Identifier: MIT
/*
 * Unit tests for --slurm-job's parsers (client/slurm.c): the job ID on
 * the command line, `scontrol listpids` output, and finding the job's
 * cgroup in /proc/PID/cgroup as cgroup v1 and v2 Slurm nodes write it.
 * The texts are what Slurm 22.05 and the kernel print.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "../../client/slurm.h"

static struct slurm_job job(const char *s)
{
	struct slurm_job j;

	assert_int_equal(slurm_parse_job(s, &j), 0);
	return j;
}

static void job_ids(void **state)
{
	struct slurm_job j;
	(void)state;

	j = job("42");
	assert_int_equal(j.id, 42);
	assert_string_equal(j.step, "");
	assert_string_equal(job("42.0").step, "0");
	assert_string_equal(job("42.batch").step, "batch");
	assert_string_equal(job("42.extern").step, "extern");
	assert_string_equal(job("42.interactive").step, "interactive");
	assert_int_equal(job("4294967294").id, 4294967294u);
	/* The step's buffer holds 31 characters and its NUL: the longest step
	 * is taken whole, one more is refused (never copied; under ASan, make
	 * check's second unit run, a copy would be a report). */
	assert_int_equal(SLURM_MAX_STEP, 32);
	assert_string_equal(job("42.0000000000000000000000000000007").step,
			    "0000000000000000000000000000007");
	assert_int_equal(strlen(job("42.0000000000000000000000000000007").step), 31);
	assert_int_equal(slurm_parse_job("42.00000000000000000000000000000007", &j), -EINVAL);

	static const char *const bad[] = {
		"", "0", "-1", "+4", " 42", "42 ", "0x2a", "4294967295", "99999999999",
		"42.", ".0", "42.foo", "42.0.1", "42.-1", "42_3", "42+1", "42.batch ",
	};
	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		assert_int_equal(slurm_parse_job(bad[i], &j), -EINVAL);
}

static const char listpids[] =
	"PID      JOBID    STEPID   LOCALID GLOBALID\n"
	"12787    7        batch    0       0       \n"
	"12788    7        batch    -       -       \n"
	"12801    7        0        0       0       \n"
	"12900    8        batch    0       0       \n";

static void listpids_rows(void **state)
{
	struct slurm_job j = job("7");
	int32_t pids[8];
	char detail[64];
	(void)state;

	assert_int_equal(slurm_parse_listpids_buf(listpids, strlen(listpids), &j, pids, 8,
						  detail, sizeof(detail)), 3);
	assert_int_equal(pids[0], 12787);
	assert_int_equal(pids[1], 12788);
	assert_int_equal(pids[2], 12801);
	assert_string_equal(detail, "");   /* the header is no detail */

	j = job("7.batch");
	assert_int_equal(slurm_parse_listpids_buf(listpids, strlen(listpids), &j, pids, 8,
						  detail, sizeof(detail)), 2);
	j = job("7.0");
	assert_int_equal(slurm_parse_listpids_buf(listpids, strlen(listpids), &j, pids, 8,
						  detail, sizeof(detail)), 1);
	assert_int_equal(pids[0], 12801);

	/* More rows than room: all counted, max written. */
	j = job("7");
	pids[1] = -1;
	assert_int_equal(slurm_parse_listpids_buf(listpids, strlen(listpids), &j, pids, 1,
						  detail, sizeof(detail)), 3);
	assert_int_equal(pids[0], 12787);
	assert_int_equal(pids[1], -1);

	/* Without a final newline the last row still counts. */
	j = job("8");
	assert_int_equal(slurm_parse_listpids_buf(listpids, strlen(listpids) - 1, &j, pids, 8,
						  detail, sizeof(detail)), 1);
	assert_int_equal(pids[0], 12900);
}

static void listpids_errors_become_the_detail(void **state)
{
	static const char none[] =
		"PID      JOBID    STEPID   LOCALID GLOBALID\n"
		"There are no steps for job 99 on node (null).\n";
	struct slurm_job j = job("99");
	int32_t pids[4];
	char detail[16];
	(void)state;

	assert_int_equal(slurm_parse_listpids_buf(none, sizeof(none) - 1, &j, pids, 4,
						  detail, sizeof(detail)), 0);
	assert_string_equal(detail, "There are no st");   /* cut to its buffer */

	/* A row of another step is no error, so no detail. */
	j = job("7.3");
	assert_int_equal(slurm_parse_listpids_buf(listpids, strlen(listpids), &j, pids, 4,
						  detail, sizeof(detail)), 0);
	assert_string_equal(detail, "");

	/* Rows with PID 0, a sign or too few fields are not rows. */
	static const char odd[] = "0 7 batch 0 0\n-5 7 batch\n12 7\n\n   \n";
	j = job("7");
	assert_int_equal(slurm_parse_listpids_buf(odd, sizeof(odd) - 1, &j, pids, 4,
						  detail, sizeof(detail)), 0);
	assert_string_equal(detail, "0 7 batch 0 0");
	assert_int_equal(slurm_parse_listpids_buf("", 0, &j, pids, 4, detail, sizeof(detail)), 0);
}

/* A hybrid host with proctrack/cgroup and CgroupPlugin=cgroup/v1. */
static const char v1_task[] =
	"9:name=systemd:/\n"
	"8:pids:/\n"
	"6:freezer:/slurm_vm/uid_1000/job_42/step_batch\n"
	"4:memory:/slurm_vm/uid_1000/job_42/step_batch/task_0\n"
	"1:cpu:/\n"
	"0::/\n";

/* cgroup v2: tasks under user/, slurmstepd under slurm/. */
static const char v2_task[] =
	"0::/system.slice/slurmstepd.scope/job_42/step_0/user/task_1\n";

static void prefix(const char *buf, const char *job_id, const char *want)
{
	struct slurm_job j = job(job_id);
	char out[256];

	assert_int_equal(slurm_cgroup_prefix_buf(buf, strlen(buf), &j, out, sizeof(out)), 0);
	assert_string_equal(out, want);
}

static void cgroup_prefixes(void **state)
{
	(void)state;

	prefix(v1_task, "42", "/slurm_vm/uid_1000/job_42");
	prefix(v1_task, "42.batch", "/slurm_vm/uid_1000/job_42/step_batch");
	prefix(v2_task, "42", "/system.slice/slurmstepd.scope/job_42");
	prefix(v2_task, "42.0", "/system.slice/slurmstepd.scope/job_42/step_0");
	/* The job's own component, not one that only starts like it. */
	prefix("0::/a/job_420/job_42/x\n", "42", "/a/job_420/job_42");
	/* A path may hold ':' after the first two. */
	prefix("0::/odd:name/job_42\n", "42", "/odd:name/job_42");
	prefix("0::/a//job_42//step_0/user\n", "42.0", "/a//job_42//step_0");
}

static void no_job_cgroup(void **state)
{
	struct slurm_job j = job("42");
	char out[256], tiny[8];
	(void)state;

	/* proctrack/linuxproc: the job's processes sit where slurmd does. */
	static const char linuxproc[] = "6:freezer:/\n4:memory:/system.slice/slurmd.service\n0::/\n";
	assert_int_equal(slurm_cgroup_prefix_buf(linuxproc, sizeof(linuxproc) - 1, &j, out,
						 sizeof(out)), -ENOENT);
	static const char other[] = "6:freezer:/slurm_vm/uid_0/job_420/step_0\n0::/job_4\n";
	assert_int_equal(slurm_cgroup_prefix_buf(other, sizeof(other) - 1, &j, out, sizeof(out)),
			 -ENOENT);
	/* The step must be right below the job. */
	j = job("42.1");
	assert_int_equal(slurm_cgroup_prefix_buf(v2_task, sizeof(v2_task) - 1, &j, out,
						 sizeof(out)), -ENOENT);
	static const char deeper[] = "0::/job_42/x/step_1\n";
	assert_int_equal(slurm_cgroup_prefix_buf(deeper, sizeof(deeper) - 1, &j, out, sizeof(out)),
			 -ENOENT);
	/* Lines without a path, or not starting with '/', are skipped. */
	static const char junk[] = "garbage\n1:cpu\n2:cpu:job_42\n";
	j = job("42");
	assert_int_equal(slurm_cgroup_prefix_buf(junk, sizeof(junk) - 1, &j, out, sizeof(out)),
			 -ENOENT);
	assert_int_equal(slurm_cgroup_prefix_buf(v1_task, sizeof(v1_task) - 1, &j, tiny,
						 sizeof(tiny)), -ENAMETOOLONG);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(job_ids),
		cmocka_unit_test(listpids_rows),
		cmocka_unit_test(listpids_errors_become_the_detail),
		cmocka_unit_test(cgroup_prefixes),
		cmocka_unit_test(no_job_cgroup),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
