// SPDX-License-Identifier: MIT
/*
 * Unit tests for the sites memo (sitememo.c): what was found comes back
 * for the same process with the same executable file mappings, named
 * after today's mappings; any change of those, or another process, is a
 * miss; what is not executable does not matter.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "sitememo.h"
#include "sites.h"

/* A process: its executable, a heap, libc's text (with backtrace), libc's data. */
static void process(struct procfs_mapping m[4])
{
	memset(m, 0, 4 * sizeof(*m));
	m[0] = (struct procfs_mapping){ .start = 0x555500001000, .end = 0x555500002000,
					.perms = PROCFS_MAP_EXEC, .dev_major = 8, .dev_minor = 1,
					.inode = 11, .path = "/usr/bin/app" };
	m[1] = (struct procfs_mapping){ .start = 0x555500100000, .end = 0x555500200000,
					.path = "[heap]" };
	m[2] = (struct procfs_mapping){ .start = 0x7f0000028000, .end = 0x7f000017d000,
					.offset = 0x28000, .perms = PROCFS_MAP_EXEC, .dev_major = 8,
					.dev_minor = 1, .inode = 42,
					.path = "/usr/lib/x86_64-linux-gnu/libc.so.6" };
	m[3] = (struct procfs_mapping){ .start = 0x7f00001d2000, .end = 0x7f00001d6000,
					.offset = 0x1d1000, .dev_major = 8, .dev_minor = 1,
					.inode = 42, .path = "/usr/lib/x86_64-linux-gnu/libc.so.6" };
}

static struct site_list one_site(void)
{
	struct site_list l = { .v = calloc(1, sizeof(struct site)), .n = 1 };

	assert_non_null(l.v);
	snprintf(l.v[0].object, sizeof(l.v[0].object), "%s", "/usr/lib/x86_64-linux-gnu/libc.so.6");
	l.v[0].addr = 0x7f00001359c0;
	l.v[0].ctx_len = SITE_CTX_LEN;
	memcpy(l.v[0].orig, "\xf3\x0f\x1e\xfa\x41\x57", 6);
	l.v[0].plan.offset = 4;
	l.v[0].plan.len = 3;
	return l;
}

static void same_mappings_give_the_sites_back(void **state)
{
	struct procfs_mapping m[4];
	struct site_list in = one_site(), out;
	(void)state;

	process(m);
	assert_false(sitememo_get(1001, m, 4, &out));
	sitememo_put(1001, m, 4, &in);
	/* The heap grew and a data mapping moved: nothing executable changed. */
	m[1].end += 0x100000;
	m[3].start += 0x1000;
	assert_true(sitememo_get(1001, m, 4, &out));
	assert_int_equal(out.n, 1);
	assert_int_equal(out.v[0].addr, 0x7f00001359c0);
	assert_int_equal(out.v[0].ctx_len, SITE_CTX_LEN);
	assert_memory_equal(out.v[0].orig, "\xf3\x0f\x1e\xfa\x41\x57", 6);
	assert_int_equal(out.v[0].plan.offset, 4);
	assert_string_equal(out.v[0].object, "/usr/lib/x86_64-linux-gnu/libc.so.6");
	sites_free(&out);
	sites_free(&in);
}

static void any_executable_change_is_a_miss(void **state)
{
	struct procfs_mapping m[4], c[4];
	struct site_list in = one_site(), out, none = { 0 };
	(void)state;

	process(m);
	sitememo_put(1002, m, 4, &in);
	assert_false(sitememo_get(1003, m, 4, &out));   /* another process */
	memcpy(c, m, sizeof(c));
	c[2].start += 0x1000;                           /* libc elsewhere */
	assert_false(sitememo_get(1002, c, 4, &out));
	memcpy(c, m, sizeof(c));
	c[2].inode = 43;                                /* another file */
	assert_false(sitememo_get(1002, c, 4, &out));
	memcpy(c, m, sizeof(c));
	c[2].deleted = true;                            /* replaced on disk */
	assert_false(sitememo_get(1002, c, 4, &out));
	memcpy(c, m, sizeof(c));
	c[2].path = "/opt/other/libc.so.6";
	assert_false(sitememo_get(1002, c, 4, &out));
	memcpy(c, m, sizeof(c));
	c[1].perms = PROCFS_MAP_EXEC;                   /* something new made executable: */
	c[1].inode = 77;                                /* a file mapped where the heap was */
	c[1].path = "/tmp/libbt.so";
	assert_false(sitememo_get(1002, c, 4, &out));
	/* And a process found with no site at all is remembered as such. */
	sitememo_put(1004, m, 4, &none);
	assert_true(sitememo_get(1004, m, 4, &out));
	assert_int_equal(out.n, 0);
	sites_free(&in);
}

static void a_full_set_forgets_the_least_recently_used(void **state)
{
	struct procfs_mapping m[4];
	struct site_list in = one_site(), out;
	(void)state;

	process(m);
	/* Far more processes than the table holds: whatever comes back is right. */
	for (pid_t pid = 2000; pid < 40000; pid++) {
		in.v[0].addr = 0x7f0000100000 + (uint64_t)pid;
		sitememo_put(pid, m, 4, &in);
	}
	for (pid_t pid = 2000; pid < 40000; pid++) {
		if (!sitememo_get(pid, m, 4, &out))
			continue;
		assert_int_equal(out.v[0].addr, 0x7f0000100000 + (uint64_t)pid);
		sites_free(&out);
	}
	/* The latest ones are all there. */
	for (pid_t pid = 39000; pid < 40000; pid++) {
		assert_true(sitememo_get(pid, m, 4, &out));
		sites_free(&out);
	}
	sites_free(&in);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(same_mappings_give_the_sites_back),
		cmocka_unit_test(any_executable_change_is_a_miss),
		cmocka_unit_test(a_full_set_forgets_the_least_recently_used),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
