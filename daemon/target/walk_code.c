// SPDX-License-Identifier: MIT
/*
 * The segment walk: code that runs INSIDE a guarded process, never in the
 * daemon.  Built freestanding (Makefile WALK_CFLAGS) into position-
 * independent bytes with no relocation (gen-walk-code checks), which the
 * daemon copies, its table filled, into the unused tail of the last page
 * of libc's executable segment (engine/walk.c).
 *
 * glibc's backtrace() asks libgcc's unwinder to call a helper of its own
 * once per frame; the guard makes it call walk_frame() instead, which runs
 * that helper (the frame is stored exactly as glibc stores it) and then
 * ends the walk when the frame just stored lies in a stack switcher's code
 * (greenlet's extension): the unwinder's next step would read the caller
 * of a switched stack slice, stale bytes of another coroutine, which is
 * what crashes it.  A thread outside any switched stack never meets such a
 * frame and gets exactly what glibc gives.
 *
 * Each call looks the objects up again (_dl_find_object(), lock-free, as
 * libgcc's unwinder itself does on glibc 2.35 and later), so a switcher
 * loaded or unloaded after the guard counts at the next frame.  Only the
 * calling thread's stack is written; no lock, no allocation, no system
 * call: it runs where backtrace() runs, signal handlers included.
 */
#include <stddef.h>
#include <stdint.h>

#include "walk_table.h"

/* The table comes first, 8-aligned; a local symbol, so no relocation. */
__asm__(".text\n"
	".p2align 3\n"
	"walk_table_bytes:\n"
	".zero 96\n");
extern const volatile struct walk_table walk_table_bytes __attribute__((visibility("hidden")));
_Static_assert(sizeof(struct walk_table) == 96, "the table's room above");

/* <dlfcn.h>'s, spelled out: this file sees no libc header. */
struct dl_find_object {
	unsigned long long flags;
	void *map_start, *map_end;
	const struct link_map_head *link_map;
	void *eh_frame;
	unsigned long long rest[12];       /* reserved and arch fields, 64 bytes spare */
};
struct link_map_head {                     /* <link.h>'s first fields */
	uintptr_t l_addr;
	const char *l_name;
};

#define URC_NO_REASON    0
#define URC_END_OF_STACK 5

typedef int trace_fn(void *ctx, void *arg);
typedef int find_fn(void *pc, struct dl_find_object *ret);

int walk_frame(void *ctx, void *arg);

static int has_prefix(const char *s, const volatile char *p)
{
	for (size_t i = 0; i < WALK_NAME_LEN && p[i]; i++)
		if (s[i] != p[i])
			return 0;
	return 1;
}

static int contains(const char *s, const volatile char *p)
{
	if (!p[0])
		return 0;
	for (; *s; s++)
		if (has_prefix(s, p))
			return 1;
	return 0;
}

/* select.c's is_stack_switcher(), over the table's names. */
static int names_a_switcher(const char *path)
{
	const char *file = path;

	for (const char *c = path; *c; c++)
		if (*c == '/')
			file = c + 1;
	if (!has_prefix(file, walk_table_bytes.prefix) || !contains(file, walk_table_bytes.suffix))
		return 0;
	return contains(path, walk_table_bytes.dir[0]) || contains(path, walk_table_bytes.dir[1]);
}

static int in_stack_switcher(uintptr_t pc)
{
	find_fn *find = (find_fn *)(uintptr_t)walk_table_bytes.find_object;
	struct dl_find_object o;

	if (find((void *)pc, &o) != 0 || !o.link_map || !o.link_map->l_name)
		return 0;
	return names_a_switcher(o.link_map->l_name);
}

int walk_frame(void *ctx, void *arg)
{
	trace_fn *helper = (trace_fn *)(uintptr_t)walk_table_bytes.helper;
	const char *a = arg;
	int r = helper(ctx, arg), count;
	void *const *frames;
	uintptr_t pc;

	if (r != URC_NO_REASON)
		return r;
	count = *(const int *)(a + walk_table_bytes.count_offset);
	if (count <= 0)
		return r;
	frames = *(void *const *const *)(a + walk_table_bytes.array_offset);
	pc = (uintptr_t)frames[count - 1];
	/* A return address names the instruction after the call: the call's own byte too. */
	if (in_stack_switcher(pc) || in_stack_switcher(pc - 1))
		return URC_END_OF_STACK;
	return r;
}
