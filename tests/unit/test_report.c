// SPDX-License-Identifier: MIT
/*
 * The report's pure rules (daemon/request/report.c): which backtrace()
 * definition ordinary symbol lookup reaches first (PROTOCOL.md, "Which
 * definition callers reach"), and which warnings a process's environment
 * block calls for.  The rest of the report reads /proc: the integration
 * tests' test_select.py holds it.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>

#include <cmocka.h>

#include "proto.h"
#include "report.h"

#define N(a) ((int)(sizeof(a) / sizeof((a)[0])))

static const char *const LIBC = "/usr/lib/x86_64-linux-gnu/libc.so.6";
static const char *const PRE = "/opt/lib/libbtpre.so";
static const char *const EXE = "/usr/bin/app";
static const char *const LATE = "/usr/lib/libunwind.so.8";

static void the_executable_comes_first(void **state)
{
	const char *const objects[] = { LIBC, PRE, EXE };

	(void)state;
	assert_int_equal(report_bound_site(objects, N(objects), EXE, PRE), 2);
	/* The executable's path unknown (empty): LD_PRELOAD's first. */
	assert_int_equal(report_bound_site(objects, N(objects), "", PRE), 1);
}

static void then_ld_preload_by_name_or_path(void **state)
{
	const char *const objects[] = { LIBC, PRE };

	(void)state;
	assert_int_equal(report_bound_site(objects, N(objects), EXE, PRE), 1);
	assert_int_equal(report_bound_site(objects, N(objects), EXE, "libbtpre.so"), 1);
	/* Entries are separated by colons and spaces, several in a row too. */
	assert_int_equal(report_bound_site(objects, N(objects), EXE, " libx.so::  libbtpre.so "), 1);
	/* A path entry is matched whole, never by its file name. */
	assert_int_equal(report_bound_site(objects, N(objects), EXE, "/elsewhere/libbtpre.so"), 0);
	/* Nor a name by a prefix of it. */
	assert_int_equal(report_bound_site(objects, N(objects), EXE, "libbtpre"), 0);
}

static void then_glibc_before_a_library_loaded_later(void **state)
{
	const char *const objects[] = { LATE, LIBC };
	const char *const old_layout[] = { LATE, "/lib/x86_64-linux-gnu/libc-2.31.so" };

	(void)state;
	assert_int_equal(report_bound_site(objects, N(objects), EXE, NULL), 1);
	assert_int_equal(report_bound_site(old_layout, N(old_layout), EXE, NULL), 1);
	/* Neither the executable, a preload nor glibc: the first one found. */
	assert_int_equal(report_bound_site(&LATE, 1, EXE, NULL), 0);
	assert_int_equal(report_bound_site(NULL, 0, EXE, NULL), -1);
}

static void environment_warnings(void **state)
{
	static const char env[] = "PATH=/bin\0TORCH_SHOW_CPP_STACKTRACES=1\0"
				  "TORCH_DISTRIBUTED_DEBUG=detail\0LD_PRELOAD=libbtpre.so";
	const char *preload = "stale";

	(void)state;
	assert_int_equal(report_env_warnings(env, sizeof(env), &preload),
			 PROTO_WARN_CPP_STACKTRACES | PROTO_WARN_DIST_DEBUG);
	assert_non_null(preload);
	assert_string_equal(preload, "libbtpre.so");
	/* Without the out-parameter the warnings are the same. */
	assert_int_equal(report_env_warnings(env, sizeof(env), NULL),
			 PROTO_WARN_CPP_STACKTRACES | PROTO_WARN_DIST_DEBUG);
}

static void torch_reads_empty_and_zero_as_off(void **state)
{
	static const char off[] = "TORCH_SHOW_CPP_STACKTRACES=\0TORCH_DISTRIBUTED_DEBUG=INFO";
	static const char zero[] = "TORCH_SHOW_CPP_STACKTRACES=0";
	static const char on[] = "TORCH_SHOW_CPP_STACKTRACES=yes";
	const char *preload = "stale";

	(void)state;
	assert_int_equal(report_env_warnings(off, sizeof(off), &preload), 0);
	/* No LD_PRELOAD in the block: the out-parameter says so. */
	assert_null(preload);
	assert_int_equal(report_env_warnings(zero, sizeof(zero), NULL), 0);
	assert_int_equal(report_env_warnings(on, sizeof(on), NULL), PROTO_WARN_CPP_STACKTRACES);
}

static void an_entry_cut_at_the_end_is_ignored(void **state)
{
	/* /proc/PID/environ read up to a limit may end inside an entry. */
	static const char env[] = "LD_PRELOAD=libbtpre.so\0TORCH_SHOW_CPP_STACKTRACES=1";
	const char *preload = NULL;

	(void)state;
	assert_int_equal(report_env_warnings(env, sizeof(env) - 1, &preload), 0);
	assert_string_equal(preload, "libbtpre.so");
	assert_int_equal(report_env_warnings(env, 0, &preload), 0);
	assert_null(preload);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(the_executable_comes_first),
		cmocka_unit_test(then_ld_preload_by_name_or_path),
		cmocka_unit_test(then_glibc_before_a_library_loaded_later),
		cmocka_unit_test(environment_warnings),
		cmocka_unit_test(torch_reads_empty_and_zero_as_off),
		cmocka_unit_test(an_entry_cut_at_the_end_is_ignored),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
