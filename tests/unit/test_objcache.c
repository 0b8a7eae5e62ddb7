// SPDX-License-Identifier: MIT
/*
 * Unit tests for the object cache (objcache.c): a hit only for the very
 * same file, any change of its identity a miss, collisions harmless.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "objcache.h"

static struct stat file(ino_t ino)
{
	struct stat st;

	memset(&st, 0, sizeof(st));
	st.st_dev = 0x801;
	st.st_ino = ino;
	st.st_size = 2 << 20;
	st.st_mtim.tv_sec = 1700000000;
	st.st_ctim.tv_sec = 1700000001;
	return st;
}

static void hit_only_for_the_same_file(void **state)
{
	struct objcache_defs in, out;
	struct stat st = file(42), changed;
	(void)state;

	memset(&in, 0, sizeof(in));
	in.n = 1;
	in.defs[0].file_offset = 0x1159c0;
	in.defs[0].file_avail = 4096;
	memcpy(in.bytes[0], "\x55\x48\x89\xe5", 4);
	assert_false(objcache_get(&st, &out));
	objcache_put(&st, &in);
	assert_true(objcache_get(&st, &out));
	assert_int_equal(out.n, 1);
	assert_int_equal(out.defs[0].file_offset, 0x1159c0);
	assert_memory_equal(out.bytes[0], "\x55\x48\x89\xe5", 4);
	/* Rewritten in place: size, mtime or ctime moved; or another file. */
	changed = st;
	changed.st_size++;
	assert_false(objcache_get(&changed, &out));
	changed = st;
	changed.st_mtim.tv_nsec = 1;
	assert_false(objcache_get(&changed, &out));
	changed = st;
	changed.st_ctim.tv_sec++;
	assert_false(objcache_get(&changed, &out));
	changed = st;
	changed.st_dev++;
	assert_false(objcache_get(&changed, &out));
}

static void objects_without_definitions_are_remembered(void **state)
{
	struct objcache_defs none = { .n = 0 }, out;
	struct stat st = file(7);
	(void)state;

	objcache_put(&st, &none);
	out.n = 99;
	assert_true(objcache_get(&st, &out));
	assert_int_equal(out.n, 0);
}

static void collisions_replace_never_confuse(void **state)
{
	struct objcache_defs a = { .n = 1 }, out;
	(void)state;

	/* Far more files than slots: whatever is found must be the file's own. */
	for (ino_t i = 1000; i < 5000; i++) {
		struct stat st = file(i);

		a.defs[0].file_offset = (uint64_t)i;
		objcache_put(&st, &a);
	}
	for (ino_t i = 1000; i < 5000; i++) {
		struct stat st = file(i);

		if (objcache_get(&st, &out))
			assert_int_equal(out.defs[0].file_offset, (uint64_t)i);
	}
}

/* Inode numbers as a file system hands them out over the years: scattered. */
static ino_t scattered_ino(unsigned i)
{
	return (ino_t)((i * 2654435761u) % 40000000u + 1000u);
}

/*
 * A torch job maps ~315 executable objects: all of them stay.  With one
 * slot per hash, 34 of a real job's evicted one another, and every status
 * of that process parsed them again.
 */
static void a_jobs_objects_all_stay(void **state)
{
	struct objcache_defs none = { .n = 0 }, out;
	(void)state;

	for (unsigned i = 0; i < 400; i++) {
		struct stat st = file(scattered_ino(i));

		st.st_dev = 0x803;   /* not the other tests' files */
		objcache_put(&st, &none);
	}
	for (unsigned i = 0; i < 400; i++) {
		struct stat st = file(scattered_ino(i));

		st.st_dev = 0x803;
		assert_true(objcache_get(&st, &out));
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(hit_only_for_the_same_file),
		cmocka_unit_test(objects_without_definitions_are_remembered),
		cmocka_unit_test(collisions_replace_never_confuse),
		cmocka_unit_test(a_jobs_objects_all_stay),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
