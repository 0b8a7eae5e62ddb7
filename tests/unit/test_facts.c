// SPDX-License-Identifier: MIT
/*
 * Unit tests for facts.c's pure parts: the objects a process maps, as the
 * selectors and the policy's change hash see them, and the look at a new
 * program that waits for its loader.  The maps are the shapes ld.so
 * leaves behind at each stage of loading (strace of /bin/true): the
 * cache mapped first, the libraries next, the cache unmapped last.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "facts.h"

#define EXE   "/usr/bin/python3.11"
#define CACHE "/etc/ld.so.cache"
#define LIBC  "/usr/lib/x86_64-linux-gnu/libc.so.6"
#define LDSO  "/usr/lib/x86_64-linux-gnu/ld-linux-x86-64.so.2"
#define C10   "/opt/venv/lib/python3.11/site-packages/torch/lib/libc10.so"

static struct procfs_mapping mapping(const char *path)
{
	return (struct procfs_mapping){ .path = path, .inode = path[0] == '/' ? 7 : 0 };
}

/* f's objects from these paths, one mapping each. */
static void objects_of(struct facts *f, const char *const *paths, size_t n)
{
	struct procfs_mapping maps[16];

	assert_true(n <= 16);
	for (size_t i = 0; i < n; i++)
		maps[i] = mapping(paths[i]);
	memset(f, 0, sizeof(*f));
	assert_int_equal(facts_objects_from_maps(f, maps, n), 0);
}

static void objects_are_the_distinct_files_in_map_order(void **state)
{
	/* A library's segments are consecutive mappings of one path. */
	static const char *const maps[] = { EXE, EXE, "", LIBC, LIBC, LIBC, "[heap]", LDSO, LDSO,
					    "[stack]", "[vdso]" };
	struct facts f;

	(void)state;
	objects_of(&f, maps, sizeof(maps) / sizeof(maps[0]));
	assert_true(f.objects_read);
	assert_int_equal(f.p.nobjects, 3);
	assert_string_equal(f.p.objects[0], EXE);
	assert_string_equal(f.p.objects[1], LIBC);
	assert_string_equal(f.p.objects[2], LDSO);
	facts_free(&f);
}

static void loader_done_only_once_the_cache_is_gone(void **state)
{
	static const struct {
		const char *what;
		const char *paths[6];
		bool done;
	} stages[] = {
		{ "the executable alone", { EXE, LDSO, "[stack]" }, false },
		{ "the cache mapped", { EXE, CACHE, LDSO, "[stack]" }, false },
		{ "libc beside the cache (c10 preloaded)", { EXE, C10, LIBC, CACHE, LDSO, "[stack]" }, false },
		{ "the cache gone", { EXE, C10, LIBC, LDSO, "[stack]" }, true },
		/* A container's paths, as the host's reader sees them. */
		{ "another root, its cache mapped", { "/var/lib/c/rootfs/usr/bin/x",
			"/var/lib/c/rootfs/lib/libc.so.6", "/var/lib/c/rootfs/etc/ld.so.cache" }, false },
		{ "another root, done", { "/var/lib/c/rootfs/usr/bin/x",
			"/var/lib/c/rootfs/lib/libc.so.6" }, true },
		/* No libc.so: never done, the look gives up waiting. */
		{ "a static program", { EXE, "[heap]", "[stack]" }, false },
	};
	struct facts f;

	(void)state;
	for (size_t i = 0; i < sizeof(stages) / sizeof(stages[0]); i++) {
		size_t n = 0;

		while (n < 6 && stages[i].paths[n])
			n++;
		objects_of(&f, stages[i].paths, n);
		if (facts_loader_done(&f) != stages[i].done)
			fail_msg("%s: loader_done should be %d", stages[i].what, stages[i].done);
		facts_free(&f);
	}
	/* No objects read at all. */
	memset(&f, 0, sizeof(f));
	assert_false(facts_loader_done(&f));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(objects_are_the_distinct_files_in_map_order),
		cmocka_unit_test(loader_done_only_once_the_cache_is_gone),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
