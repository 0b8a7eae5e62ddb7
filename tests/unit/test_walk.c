// SPDX-License-Identifier: MIT
/*
 * Unit tests for the segment walk's daemon side: where glibc's backtrace()
 * hands its helper to the unwinder (arch_walk.h), on the real bytes of
 * Debian 12's and 13's glibc, and what a site's walk bytes say (walk.c).
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "../../proto/proto.h"
#include "elf.h"
#include "walk.h"
#include "walk_code.h"
#include "walk_table.h"

/* x86-64's derivation; aarch64's, on its own bytes, is tests/aarch64/test_walk_aarch64.c. */
#ifdef __x86_64__
/* backtrace() of Debian 12's glibc 2.36 (x86-64), all 161 bytes. */
static const uint8_t debian12[161] = {
	0x55, 0x48, 0x89, 0xe5, 0x53, 0x89, 0xf3, 0x48, 0x83, 0xec, 0x38, 0x64,
	0x48, 0x8b, 0x04, 0x25, 0x28, 0x00, 0x00, 0x00, 0x48, 0x89, 0x45, 0xe8,
	0x31, 0xc0, 0x48, 0x89, 0x7d, 0xc0, 0xe8, 0x2d, 0x2d, 0xff, 0xff, 0x48,
	0xc7, 0x45, 0xd0, 0x00, 0x00, 0x00, 0x00, 0x48, 0x89, 0x45, 0xc8, 0xc7,
	0x45, 0xd8, 0xff, 0xff, 0xff, 0xff, 0x89, 0x5d, 0xdc, 0x85, 0xdb, 0x7e,
	0x48, 0x48, 0x85, 0xc0, 0x74, 0x43, 0x48, 0x8b, 0x00, 0x48, 0x8d, 0x75,
	0xc0, 0x48, 0x8d, 0x3d, 0x20, 0xff, 0xff, 0xff, 0x48, 0xc1, 0xc8, 0x11,
	0x64, 0x48, 0x33, 0x04, 0x25, 0x30, 0x00, 0x00, 0x00, 0xff, 0xd0, 0x8b,
	0x45, 0xd8, 0x83, 0xf8, 0x01, 0x7e, 0x19, 0x48, 0x8b, 0x55, 0xc0, 0x48,
	0x63, 0xc8, 0x48, 0x83, 0x7c, 0xca, 0xf8, 0x01, 0x83, 0xd8, 0x00, 0xeb,
	0x0e, 0x0f, 0x1f, 0x80, 0x00, 0x00, 0x00, 0x00, 0x83, 0xf8, 0xff, 0x75,
	0x02, 0x31, 0xc0, 0x48, 0x8b, 0x55, 0xe8, 0x64, 0x48, 0x2b, 0x14, 0x25,
	0x28, 0x00, 0x00, 0x00, 0x75, 0x06, 0x48, 0x8b, 0x5d, 0xf8, 0xc9, 0xc3,
	0xe8, 0x7f, 0x27, 0x00, 0x00,
};

/* backtrace() of Debian 13's glibc 2.41 (x86-64), all 161 bytes. */
static const uint8_t debian13[161] = {
	0x55, 0x48, 0x89, 0xe5, 0x53, 0x48, 0x83, 0xec, 0x38, 0x64, 0x48, 0x8b,
	0x1c, 0x25, 0x28, 0x00, 0x00, 0x00, 0x48, 0x89, 0x5d, 0xe8, 0x89, 0xf3,
	0x48, 0x89, 0x7d, 0xc0, 0xe8, 0x0f, 0x53, 0xff, 0xff, 0x48, 0xc7, 0x45,
	0xd0, 0x00, 0x00, 0x00, 0x00, 0x48, 0x89, 0x45, 0xc8, 0xc7, 0x45, 0xd8,
	0xff, 0xff, 0xff, 0xff, 0x89, 0x5d, 0xdc, 0x48, 0x85, 0xc0, 0x74, 0x49,
	0x85, 0xdb, 0x7e, 0x45, 0x48, 0x8b, 0x00, 0x48, 0x8d, 0x75, 0xc0, 0x48,
	0x8d, 0x3d, 0x22, 0xff, 0xff, 0xff, 0x48, 0xc1, 0xc8, 0x11, 0x64, 0x48,
	0x33, 0x04, 0x25, 0x30, 0x00, 0x00, 0x00, 0xff, 0xd0, 0x8b, 0x45, 0xd8,
	0x83, 0xf8, 0x01, 0x7e, 0x1b, 0x48, 0x8b, 0x55, 0xc0, 0x48, 0x63, 0xc8,
	0x48, 0x83, 0x7c, 0xca, 0xf8, 0x01, 0x83, 0xd8, 0x00, 0xeb, 0x10, 0x66,
	0x0f, 0x1f, 0x84, 0x00, 0x00, 0x00, 0x00, 0x00, 0x83, 0xf8, 0xff, 0x75,
	0x02, 0x31, 0xc0, 0x48, 0x8b, 0x55, 0xe8, 0x64, 0x48, 0x2b, 0x14, 0x25,
	0x28, 0x00, 0x00, 0x00, 0x75, 0x06, 0x48, 0x8b, 0x5d, 0xf8, 0xc9, 0xc3,
	0xe8, 0x5f, 0x1e, 0x00, 0x00,
};

static void derive_debian12(void **state)
{
	struct arch_walk_facts f;

	(void)state;
	assert_int_equal(arch_walk_derive(debian12, sizeof(debian12), 0, &f), 0);
	/* lea -0xe0(%rip),%rdi at +0x49: its displacement at +0x4c names the helper at -0x90. */
	assert_int_equal(f.call_off, 0x4c);
	assert_int_equal(f.return_off, 0x5f);     /* after call *%rax at +0x5d */
	assert_int_equal((int64_t)f.helper_off, -0x90);
	assert_int_equal(f.array_offset, 0);
	assert_int_equal(f.count_offset, 0x18);
}

static void derive_debian13(void **state)
{
	struct arch_walk_facts f;

	(void)state;
	assert_int_equal(arch_walk_derive(debian13, sizeof(debian13), 0, &f), 0);
	assert_int_equal(f.call_off, 0x4a);
	assert_int_equal(f.return_off, 0x5d);
	assert_int_equal((int64_t)f.helper_off, -0x90);
	assert_int_equal(f.array_offset, 0);
	assert_int_equal(f.count_offset, 0x18);
}

/* The offset of the first place pat occurs in code. */
static size_t find(const uint8_t *code, size_t len, const uint8_t *pat, size_t n)
{
	for (size_t i = 0; i + n <= len; i++)
		if (!memcmp(code + i, pat, n))
			return i;
	fail_msg("pattern not found");
	return 0;
}

/* Any other shape than the known one is not derived: the guard falls back. */
static void derive_refuses_other_shapes(void **state)
{
	static const uint8_t lea_rdi[] = { 0x48, 0x8d, 0x3d }, minus1[] = { 0xc7, 0x45, 0xd8, 0xff };
	static const uint8_t call_rax[] = { 0xff, 0xd0 }, lea_rsi[] = { 0x48, 0x8d, 0x75 };
	struct arch_walk_facts f;
	uint8_t c[161];
	size_t at;

	(void)state;
	/* The count not set to -1: not glibc's argument. */
	memcpy(c, debian12, sizeof(c));
	at = find(c, sizeof(c), minus1, sizeof(minus1));
	c[at + 3] = 0;
	assert_int_equal(arch_walk_derive(c, sizeof(c), 0, &f), -ENOENT);
	/* A count that is not an aligned int inside the argument. */
	memcpy(c, debian12, sizeof(c));
	c[at + 2] = (uint8_t)(c[at + 2] + 2);
	assert_int_equal(arch_walk_derive(c, sizeof(c), 0, &f), -ENOENT);
	/* No indirect call after the two leas. */
	memcpy(c, debian12, sizeof(c));
	at = find(c, sizeof(c), call_rax, sizeof(call_rax));
	c[at + 1] = 0xd1;   /* call *%rcx */
	assert_int_equal(arch_walk_derive(c, sizeof(c), 0, &f), -ENOENT);
	/* The helper's lea not right after the argument's: the two swapped. */
	memcpy(c, debian12, sizeof(c));
	at = find(c, sizeof(c), lea_rsi, sizeof(lea_rsi));
	memcpy(c + at, debian12 + at + 4, 7);
	memcpy(c + at + 7, debian12 + at, 4);
	assert_int_equal(arch_walk_derive(c, sizeof(c), 0, &f), -ENOENT);
	/* No lea of the argument at all. */
	memcpy(c, debian12, sizeof(c));
	memcpy(c + at, (const uint8_t[]){ 0x90, 0x90, 0x90, 0x90 }, 4);
	assert_int_equal(arch_walk_derive(c, sizeof(c), 0, &f), -ENOENT);
	/* A second lea into %rdi: which one names the helper is not certain. */
	memcpy(c, debian12, sizeof(c));
	memcpy(c + 150, lea_rdi, sizeof(lea_rdi));
	assert_int_equal(arch_walk_derive(c, sizeof(c), 0, &f), -ENOENT);
	/* Cut short before the call. */
	at = find(debian12, sizeof(debian12), lea_rdi, sizeof(lea_rdi));
	assert_int_equal(arch_walk_derive(debian12, at + 7, 0, &f), -ENOENT);
}

/* The call bytes name a target as a rip-relative displacement from the lea's end. */
static void call_bytes_name_the_code(void **state)
{
	struct arch_walk_facts f;
	uint8_t out[ARCH_WALK_CALL_LEN];

	(void)state;
	assert_int_equal(arch_walk_derive(debian12, sizeof(debian12), 0, &f), 0);
	arch_walk_call_bytes(0x7f0000115000, &f, 0x7f0000199f10, out);
	/* 0x7f0000199f10 - (0x7f0000115000 + 0x4c + 4) = 0x84ec0 */
	assert_memory_equal(out, ((const uint8_t[]){ 0xc0, 0x4e, 0x08, 0x00 }), 4);
	/* The file's own bytes name the helper: the same encoding. */
	arch_walk_call_bytes(0x1000, &f, 0x1000 + f.helper_off, out);
	assert_memory_equal(out, debian12 + f.call_off, 4);
	assert_true(arch_walk_reaches(0x7f0000115000, &f, 0x7f0000199f10));
	assert_false(arch_walk_reaches(0x7f0000115000, &f, 0x7f0100115000));
}
#endif

/* A planned site for the classification tests, at made-up addresses. */
static void planned(struct site *s)
{
	struct walk_where w = {
		.call = 0x7f000011500c, .call_return = 0x7f000011501f,
		.code = 0x7f0000199c00, .helper = 0x7f0000114f70,
		.find_object = 0x7f0000150000, .array_offset = 0, .count_offset = 0x18,
		.call_orig = { 0x20, 0xff, 0xff, 0xff },
	};

	memset(s, 0, sizeof(*s));
	s->addr = 0x7f0000114fc0;
	walk_build(s, &w);
	memcpy(s->walk.call_mem, s->walk.call_orig, ARCH_WALK_CALL_LEN);
}

static void build_fills_the_table(void **state)
{
	struct walk_table t;
	struct site s;

	(void)state;
	planned(&s);
	assert_true(s.walk.planned);
	assert_int_equal(s.walk.code_len % 8, 0);
	assert_true(s.walk.code_len >= WALK_CODE_LEN);
	memcpy(&t, s.walk.code_ours + WALK_CODE_TABLE, sizeof(t));
	assert_int_equal(t.helper, 0x7f0000114f70);
	assert_int_equal(t.find_object, 0x7f0000150000);
	assert_int_equal(t.count_offset, 0x18);
	/* The same names the at-risk check knows a stack switcher by (select.c). */
	assert_string_equal(t.prefix, "_greenlet");
	assert_string_equal(t.suffix, ".so");
	assert_string_equal(t.dir[0], "/greenlet/");
	assert_string_equal(t.dir[1], "/gevent/");
	/* The code itself is the generated bytes, past the table. */
	assert_memory_equal(s.walk.code_ours + sizeof(t), walk_code_bytes + sizeof(t),
			    WALK_CODE_LEN - sizeof(t));
}

static void classify_each_state(void **state)
{
	struct site s;

	(void)state;
	/* The file's bytes: original, nothing to take away. */
	planned(&s);
	walk_classify(&s);
	assert_int_equal(s.walk.state, PROTO_SITE_ORIGINAL);
	assert_false(walk_code_changes(&s, false));
	assert_true(walk_code_changes(&s, true));
	assert_true(walk_call_changes(&s, true));
	/* Ours in both places: guarded. */
	memcpy(s.walk.call_mem, s.walk.call_ours, ARCH_WALK_CALL_LEN);
	memcpy(s.walk.code_mem, s.walk.code_ours, s.walk.code_len);
	walk_classify(&s);
	assert_int_equal(s.walk.state, PROTO_SITE_GUARDED);
	assert_false(walk_code_changes(&s, true));
	/* Taking it away: the call bytes first, the code must stay meanwhile. */
	assert_true(walk_draining(&s));
	assert_false(walk_code_changes(&s, false));
	assert_true(walk_call_changes(&s, false));
	/* Between the two writes: backtrace() is the file's, the code goes next. */
	memcpy(s.walk.call_mem, s.walk.call_orig, ARCH_WALK_CALL_LEN);
	walk_classify(&s);
	assert_int_equal(s.walk.state, PROTO_SITE_ORIGINAL);
	assert_false(walk_draining(&s));
	assert_true(walk_code_changes(&s, false));
	/* A guard cut short before the call bytes: part of the code, nothing calls it. */
	memset(s.walk.code_mem + 64, 0, 64);
	walk_classify(&s);
	assert_int_equal(s.walk.state, PROTO_SITE_ORIGINAL);
	assert_true(walk_code_changes(&s, false));
	/* The call bytes ours but the code not whole: a call would run half of it. */
	memcpy(s.walk.call_mem, s.walk.call_ours, ARCH_WALK_CALL_LEN);
	walk_classify(&s);
	assert_int_equal(s.walk.state, PROTO_SITE_TORN);
	/* Somebody else's bytes where the code goes, which our bytes name: foreign. */
	s.walk.code_mem[8] = (uint8_t)(s.walk.code_ours[8] ^ 0xff);  /* ours is 0 there */
	walk_classify(&s);
	assert_int_equal(s.walk.state, PROTO_SITE_FOREIGN);
	/* Call bytes that are neither: foreign. */
	planned(&s);
	memcpy(s.walk.call_mem, "\x01\x02\x03\x04", 4);
	walk_classify(&s);
	assert_int_equal(s.walk.state, PROTO_SITE_FOREIGN);
}

/* Somebody else's bytes in the room, nothing of ours named: not ours to use. */
static void another_tools_room_is_left_alone(void **state)
{
	struct site s;

	(void)state;
	planned(&s);
	s.walk.code_mem[100] = 0x90;
	s.walk.code_ours[100] = 0x00;
	walk_classify(&s);
	assert_false(s.walk.planned);
	assert_int_equal(s.walk.state, PROTO_SITE_ORIGINAL);
	assert_non_null(strstr(s.walk.why, "somebody else's"));
	assert_false(walk_code_changes(&s, false));
	assert_false(walk_call_changes(&s, true));
}

/* The C library this machine runs: its walk facts are found, its room zero. */
static void facts_of_the_real_libc(void **state)
{
#ifdef __x86_64__
	const char *path = "/lib/x86_64-linux-gnu/libc.so.6";
#else
	const char *path = "/lib/aarch64-linux-gnu/libc.so.6";
#endif
	struct elf_def defs[ELF_MAX_DEFS];
	struct walk_facts wf;
	size_t n = 0;
	struct stat st;
	void *img;
	int fd;

	(void)state;
	fd = open(path, O_RDONLY | O_CLOEXEC);
	assert_true(fd >= 0);
	assert_int_equal(fstat(fd, &st), 0);
	img = mmap(NULL, (size_t)st.st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	assert_true(img != MAP_FAILED);
	assert_int_equal(elf_find_symbol(img, (size_t)st.st_size, "backtrace", defs, ELF_MAX_DEFS,
					 &n), 0);
	assert_int_equal(n, 1);
	walk_facts_read(img, (size_t)st.st_size, &defs[0], (size_t)sysconf(_SC_PAGESIZE), &wf);
	assert_int_equal(wf.ok, ARCH_WALK);
	if (ARCH_WALK) {
		assert_true(wf.room_len >= WALK_CODE_LEN);
		for (uint64_t i = wf.room; i < wf.room + wf.room_len && i < (uint64_t)st.st_size; i++)
			assert_int_equal(((const uint8_t *)img)[i], 0);
		assert_memory_equal(wf.call_orig, (const uint8_t *)img + defs[0].file_offset +
				    wf.f.call_off, ARCH_WALK_CALL_LEN);
	}
	munmap(img, (size_t)st.st_size);
	close(fd);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
#ifdef __x86_64__
		cmocka_unit_test(derive_debian12),
		cmocka_unit_test(derive_debian13),
		cmocka_unit_test(derive_refuses_other_shapes),
		cmocka_unit_test(call_bytes_name_the_code),
#endif
		cmocka_unit_test(build_fills_the_table),
		cmocka_unit_test(classify_each_state),
		cmocka_unit_test(another_tools_room_is_left_alone),
		cmocka_unit_test(facts_of_the_real_libc),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
