// SPDX-License-Identifier: MIT
/*
 * Unit tests for process selection (select.c): globs, cgroup subtrees, the
 * /proc/PID/cgroup parser on v2, v1 and hybrid hosts, combined selectors
 * and the at-risk predicate.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "select.h"

static const char *torch_objects[] = {
	"/usr/lib/x86_64-linux-gnu/libc.so.6",
	"/usr/lib/python3/dist-packages/torch/lib/libc10.so",
	"/usr/lib/python3/dist-packages/torch/lib/libtorch_cpu.so",
	"/usr/lib/python3/dist-packages/greenlet/_greenlet.cpython-311-x86_64-linux-gnu.so",
};

static void globs_name_or_path(void **state)
{
	(void)state;
	/* Without '/': the file name. */
	assert_true(select_glob("python3*", "/usr/bin/python3.11"));
	assert_true(select_glob("*libc10.so", "/usr/lib/python3/dist-packages/torch/lib/libc10.so"));
	assert_false(select_glob("python", "/usr/bin/python3.11"));
	/* With '/': the full path, '*' crossing '/'. */
	assert_true(select_glob("/usr/*", "/usr/lib/python3/dist-packages/torch/lib/libc10.so"));
	assert_false(select_glob("/opt/*", "/usr/bin/python3"));
	assert_true(select_glob("/usr/bin/python3.1[01]", "/usr/bin/python3.11"));
}

static void cgroup_subtrees(void **state)
{
	(void)state;
	assert_true(select_in_cgroup("/system.slice/slurmstepd.scope/job_42",
				     "/system.slice/slurmstepd.scope/job_42/step_0/user/task_0"));
	assert_true(select_in_cgroup("/system.slice/slurmstepd.scope/job_42",
				     "/system.slice/slurmstepd.scope/job_42"));
	assert_false(select_in_cgroup("/system.slice/slurmstepd.scope/job_42",
				      "/system.slice/slurmstepd.scope/job_420"));
	assert_true(select_in_cgroup("/system.slice/", "/system.slice/ssh.service"));
	assert_true(select_in_cgroup("/", "/user.slice"));
	assert_false(select_in_cgroup("/user.slice", "/"));
}

static int parse(const char *text, const char **paths, size_t max, size_t *n, char *out, size_t outlen)
{
	size_t len = strlen(text);
	char *b = malloc(len ? len : 1);
	int r;

	assert_non_null(b);
	memcpy(b, text, len);   /* exact length, no NUL: a sanitizer sees any overread */
	r = select_parse_cgroup_buf(b, len, out, outlen, paths, max, n);
	free(b);
	return r;
}

static void cgroup_files(void **state)
{
	const char *paths[8];
	char out[512];
	size_t n;
	(void)state;

	/* Pure v2. */
	assert_int_equal(parse("0::/system.slice/btguardd.service\n", paths, 8, &n, out, sizeof(out)), 0);
	assert_int_equal(n, 1);
	assert_string_equal(paths[0], "/system.slice/btguardd.service");
	/* Hybrid, as on our machines: the same path once, Slurm's freezer path too. */
	assert_int_equal(parse("9:name=systemd:/system.slice/slurmd.service\n"
			       "6:freezer:/slurm_node1/uid_1000/job_7/step_0\n"
			       "4:memory:/system.slice/slurmd.service\n"
			       "1:cpu,cpuacct:/\n"
			       "0::/system.slice/slurmd.service\n", paths, 8, &n, out, sizeof(out)), 0);
	assert_int_equal(n, 3);
	assert_string_equal(paths[0], "/system.slice/slurmd.service");
	assert_string_equal(paths[1], "/slurm_node1/uid_1000/job_7/step_0");
	assert_string_equal(paths[2], "/");
	/* Malformed: no colons, a non-numeric ID, a relative path, too small a buffer. */
	assert_int_equal(parse("garbage\n", paths, 8, &n, out, sizeof(out)), -EBADMSG);
	assert_int_equal(parse("x::/a\n", paths, 8, &n, out, sizeof(out)), -EBADMSG);
	assert_int_equal(parse("0::a\n", paths, 8, &n, out, sizeof(out)), -EBADMSG);
	assert_int_equal(parse("0::\n", paths, 8, &n, out, sizeof(out)), -EBADMSG);
	assert_int_equal(parse("0::/aaaaaaaaaaaa\n", paths, 8, &n, out, 8), -ENOBUFS);
	assert_int_equal(parse("1:a:/a\n2:b:/b\n", paths, 1, &n, out, sizeof(out)), -ENOBUFS);
	/* Empty: no paths. */
	assert_int_equal(parse("", paths, 8, &n, out, sizeof(out)), 0);
	assert_int_equal(n, 0);
}

static void selectors_combine(void **state)
{
	const char *cgroups[] = { "/system.slice/train.service" };
	struct select_proc p = {
		.pid = 42, .uid = 1000, .exe = "/usr/bin/python3.11",
		.cmdline = "python3 train.py --epochs 3", .cgroups = cgroups, .ncgroups = 1,
		.objects = torch_objects, .nobjects = 4,
	};
	struct select_rule r;
	(void)state;

	memset(&r, 0, sizeof(r));
	assert_false(select_match(&r, &p));   /* a rule that names nothing selects nothing */
	r.all = true;
	assert_true(select_match(&r, &p));
	r.uid = 1001;                          /* --all --user: narrowed, not widened */
	r.have_uid = true;
	assert_false(select_match(&r, &p));
	memset(&r, 0, sizeof(r));
	r.have_uid = true;
	r.uid = 1000;
	r.exe = "python3*";
	r.cmdline = "*train.py*";
	r.cgroup = "/system.slice/train.service";
	r.maps = "*libc10.so";
	assert_true(select_match(&r, &p));
	r.uid = 1001;                          /* every field must match */
	assert_false(select_match(&r, &p));
	r.uid = 1000;
	r.maps = "*libcudart*";
	assert_false(select_match(&r, &p));
	r.maps = NULL;
	r.cgroup = "/system.slice/other.service";
	assert_false(select_match(&r, &p));
	r.cgroup = NULL;
	p.exe = "";                            /* exe unknown (a zombie leader): no match */
	assert_false(select_match(&r, &p));
}

static void at_risk_needs_torch_and_a_stack_switcher(void **state)
{
	const char *torch = NULL, *co = NULL;
	static const char *no_greenlet[] = {
		"/usr/lib/python3/dist-packages/torch/lib/libc10.so",
		"/usr/lib/python3/dist-packages/greenlet_tools/other.so",
	};
	static const char *gevent_copy[] = {
		"/opt/venv/lib/python3.8/site-packages/torch/lib/libc10.so",
		"/opt/venv/lib/python3.8/site-packages/gevent/_greenlet.cpython-38-x86_64-linux-gnu.so",
	};
	(void)state;

	assert_int_equal(select_risk(torch_objects, 4, &torch, &co), SELECT_RISK_AT_RISK);
	assert_string_equal(torch, torch_objects[1]);
	assert_string_equal(co, torch_objects[3]);
	assert_int_equal(select_risk(torch_objects, 3, NULL, NULL), SELECT_RISK_NONE);  /* no greenlet */
	assert_int_equal(select_risk(torch_objects + 2, 2, NULL, NULL), SELECT_RISK_NONE); /* no c10 */
	assert_int_equal(select_risk(no_greenlet, 2, NULL, NULL), SELECT_RISK_NONE);
	assert_int_equal(select_risk(gevent_copy, 2, NULL, NULL), SELECT_RISK_AT_RISK);
}

/* torch's c10 by its file name: unversioned and versioned, nothing else. */
static void at_risk_knows_c10_by_name(void **state)
{
	static const char *const greenlet =
		"/opt/venv/lib/python3.11/site-packages/greenlet/_greenlet.cpython-311-x86_64-linux-gnu.so";
	static const struct { const char *path; bool c10; } names[] = {
		{ "/opt/venv/lib/python3.11/site-packages/torch/lib/libc10.so", true },
		{ "/usr/lib/x86_64-linux-gnu/libc10.so.2.1", true },     /* Debian's python3-torch */
		{ "/usr/lib/x86_64-linux-gnu/libc10.so.2", true },
		{ "libc10.so", true },
		{ "/opt/torch/lib/libc10_cuda.so", false },              /* a sibling, not c10 */
		{ "/opt/torch/lib/libc10.so-old", false },
		{ "/opt/torch/lib/libc10.sox", false },
		{ "/opt/libc10.so/libfoo.so", false },                   /* a directory's name */
		{ "/usr/lib/x86_64-linux-gnu/libc.so.6", false },
	};
	(void)state;

	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		const char *objects[] = { names[i].path, greenlet };
		const char *torch = NULL;

		assert_int_equal(select_risk(objects, 2, &torch, NULL),
				 names[i].c10 ? SELECT_RISK_AT_RISK : SELECT_RISK_NONE);
		if (names[i].c10)
			assert_ptr_equal(torch, names[i].path);
		else
			assert_null(torch);
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(globs_name_or_path),
		cmocka_unit_test(cgroup_subtrees),
		cmocka_unit_test(cgroup_files),
		cmocka_unit_test(selectors_combine),
		cmocka_unit_test(at_risk_needs_torch_and_a_stack_switcher),
		cmocka_unit_test(at_risk_knows_c10_by_name),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
