// SPDX-License-Identifier: MIT
/*
 * The segment walk, daemon side: the guard form that keeps backtraces
 * (walk_code.c runs in the guarded process and says how).  Two changes,
 * none at the entry: the walk's code, its table filled for the process,
 * goes into the room after libc's executable segment - the unused tail of
 * its last page, mapped executable, the file's zero padding - and then the
 * bytes in backtrace() that name glibc's per-frame helper to the unwinder
 * name walk_frame() instead (arch_walk.h).  Writing them, in that order,
 * is sitewrite.c's; this file says where and what.
 */
#include <stdio.h>
#include <string.h>

#include "arch.h"
#include "proto.h"
#include "select.h"
#include "walk.h"
#include "walk_code.h"
#include "walk_table.h"

_Static_assert(WALK_CODE_LEN + 8 <= WALK_CODE_MAX, "the walk's code fits its room in struct site");
_Static_assert(WALK_CODE_TABLE % 8 == 0, "the table is 8-aligned (walk_code.c)");

/* The code's length as written: whole words, the tail zero as the file's. */
#define WALK_CODE_WRITTEN ((WALK_CODE_LEN + 7u) & ~7u)

void walk_facts_read(const uint8_t *img, size_t size, const struct elf_def *def,
		     size_t page_len, struct walk_facts *ret)
{
	struct elf_def finds[ELF_MAX_DEFS];
	uint64_t len = def->size, room, room_end;
	size_t nfinds = 0;

	memset(ret, 0, sizeof(*ret));
	if (!ARCH_WALK || !len || len > def->file_avail || def->file_offset + len > size)
		return;
	if (arch_walk_derive(img + def->file_offset, (size_t)len, def->value, &ret->f) < 0)
		return;
	/* glibc's backtrace() and _dl_find_object() live in one object, libc. */
	if (elf_find_symbol(img, size, "_dl_find_object", finds, ELF_MAX_DEFS, &nfinds) < 0 ||
	    nfinds != 1)
		return;
	ret->find_object = finds[0].file_offset;
	memcpy(ret->call_orig, img + def->file_offset + ret->f.call_off, ARCH_WALK_CALL_LEN);
	/* The room: after the segment's last file byte, to its page's end, zero in the file. */
	room = def->file_offset + def->file_avail;
	room_end = (room + page_len - 1) / page_len * page_len;
	for (uint64_t i = room; i < room_end && i < size; i++)
		if (img[i])
			return;
	ret->room = room;
	ret->room_len = room_end - room;
	ret->ok = true;
}

/* file offset off of the object, at run time in m, or 0 when m does not map it. */
static uint64_t in_mapping(const struct procfs_mapping *m, uint64_t off)
{
	if (off < m->offset || off - m->offset >= m->end - m->start)
		return 0;
	return m->start + (off - m->offset);
}

static void not_planned(struct site *s, const char *why)
{
	s->walk.planned = false;
	snprintf(s->walk.why, sizeof(s->walk.why), "%s", why);
}

void walk_build(struct site *s, const struct walk_where *where)
{
	struct site_walk *w = &s->walk;
	struct arch_walk_facts f = { .call_off = where->call - s->addr };
	struct walk_table t;

	w->where = *where;
	w->call = where->call;
	w->code = where->code;
	w->code_len = WALK_CODE_WRITTEN;
	memcpy(w->call_orig, where->call_orig, ARCH_WALK_CALL_LEN);
	arch_walk_call_bytes(s->addr, &f, w->code + WALK_CODE_ENTRY, w->call_ours);
	memset(w->code_ours, 0, sizeof(w->code_ours));
	memcpy(w->code_ours, walk_code_bytes, WALK_CODE_LEN);
	memset(&t, 0, sizeof(t));
	t.helper = where->helper;
	t.find_object = where->find_object;
	t.array_offset = where->array_offset;
	t.count_offset = where->count_offset;
	_Static_assert(sizeof(SELECT_SWITCHER_DIR0) <= WALK_NAME_LEN &&
		       sizeof(SELECT_SWITCHER_DIR1) <= WALK_NAME_LEN &&
		       sizeof(SELECT_SWITCHER_PREFIX) <= WALK_NAME_LEN &&
		       sizeof(SELECT_SWITCHER_SUFFIX) <= WALK_NAME_LEN, "names fit the table");
	memcpy(t.prefix, SELECT_SWITCHER_PREFIX, sizeof(SELECT_SWITCHER_PREFIX));
	memcpy(t.suffix, SELECT_SWITCHER_SUFFIX, sizeof(SELECT_SWITCHER_SUFFIX));
	memcpy(t.dir[0], SELECT_SWITCHER_DIR0, sizeof(SELECT_SWITCHER_DIR0));
	memcpy(t.dir[1], SELECT_SWITCHER_DIR1, sizeof(SELECT_SWITCHER_DIR1));
	memcpy(w->code_ours + WALK_CODE_TABLE, &t, sizeof(t));
	w->planned = true;
	w->state = PROTO_SITE_ORIGINAL;
}

void walk_plan(struct site *s, const struct procfs_mapping *m, const struct walk_facts *wf)
{
	struct site_walk *w = &s->walk;
	uint64_t func_off = s->addr - m->start + m->offset;
	uint64_t room_lo, room_hi;
	struct walk_where where;

	memset(w, 0, sizeof(*w));
	w->state = PROTO_SITE_ORIGINAL;
	if (!wf->ok) {
		not_planned(s, ARCH_WALK ? "backtrace() here is not glibc's as btguard knows it" :
			    "no segment walk on " ARCH_NAME " yet");
		return;
	}
	room_lo = in_mapping(m, wf->room);
	room_hi = room_lo + wf->room_len;
	if (!room_lo || room_hi > m->end) {
		not_planned(s, "the room after libc's code is not mapped with it");
		return;
	}
	memset(&where, 0, sizeof(where));
	where.code = (room_hi - WALK_CODE_WRITTEN) & ~(uint64_t)(ARCH_WALK_ALIGN - 1);
	where.helper = in_mapping(m, func_off + wf->f.helper_off);
	where.find_object = in_mapping(m, wf->find_object);
	if (room_hi - room_lo < WALK_CODE_WRITTEN || where.code < room_lo) {
		not_planned(s, "no room for the walk after libc's code");
		return;
	}
	if (!where.helper || !where.find_object ||
	    !arch_walk_reaches(s->addr, &wf->f, where.code + WALK_CODE_ENTRY)) {
		not_planned(s, "libc's helper or _dl_find_object() is out of reach");
		return;
	}
	where.call = s->addr + wf->f.call_off;
	where.call_return = s->addr + wf->f.return_off;
	where.array_offset = wf->f.array_offset;
	where.count_offset = wf->f.count_offset;
	memcpy(where.call_orig, wf->call_orig, ARCH_WALK_CALL_LEN);
	walk_build(s, &where);
}

/* The room's bytes: all the file's (zero), all ours, a mix of the two, or neither. */
enum room_state { ROOM_FILE, ROOM_OURS, ROOM_MIXED, ROOM_OTHER };

static enum room_state room_state(const struct site_walk *w)
{
	bool file = true, ours = true;

	for (size_t i = 0; i < w->code_len; i++) {
		bool f = w->code_mem[i] == 0, o = w->code_mem[i] == w->code_ours[i];

		if (!f && !o)
			return ROOM_OTHER;
		file = file && f;
		ours = ours && o;
	}
	return file ? ROOM_FILE : ours ? ROOM_OURS : ROOM_MIXED;
}

/*
 * Whether the call bytes are a breakpoint instruction.  Where they are a
 * whole instruction (aarch64's add, which the guard makes an adr), a
 * uprobe or a debugger puts its own there; a uprobe's hit replays the
 * file's instruction (it belongs to the file), and its removal writes the
 * file's back unless it finds its breakpoint gone; a debugger replays and
 * writes back what lay beneath when it came.
 */
static bool call_breakpoint(const struct site_walk *w)
{
	static const uint8_t breakpoints[][ARCH_BREAKPOINT_LEN] = ARCH_BREAKPOINTS;

	if (ARCH_BREAKPOINT_LEN != ARCH_WALK_CALL_LEN)
		return false;      /* x86-64: a displacement, inside the lea */
	for (size_t i = 0; i < sizeof(breakpoints) / sizeof(breakpoints[0]); i++)
		if (!memcmp(w->call_mem, breakpoints[i], ARCH_BREAKPOINT_LEN))
			return true;
	return false;
}

/*
 * Whether the call bytes are the file's, or a breakpoint over the file's:
 * our bytes there are written only once the code is whole, and go before
 * any of it does, so beneath a breakpoint with the room not all ours lie
 * the file's.  Then nothing can reach the code through them, and a form
 * without the walk leaves the breakpoint alone.
 */
static bool call_is_files(const struct site_walk *w)
{
	if (!memcmp(w->call_mem, w->call_orig, ARCH_WALK_CALL_LEN))
		return true;
	return call_breakpoint(w) && room_state(w) != ROOM_OURS;
}

void walk_classify(struct site *s)
{
	struct site_walk *w = &s->walk;
	bool call_file, call_ours;
	enum room_state room;

	if (!w->planned) {
		w->state = PROTO_SITE_ORIGINAL;
		return;
	}
	call_file = call_is_files(w);
	call_ours = !memcmp(w->call_mem, w->call_ours, ARCH_WALK_CALL_LEN);
	room = room_state(w);
	if (call_file && room == ROOM_OTHER) {
		/* Somebody else's bytes, which backtrace() does not reach: not ours to use. */
		not_planned(s, "the room after libc's code holds somebody else's bytes");
		w->state = PROTO_SITE_ORIGINAL;
	} else if (call_file) {
		/*
		 * Code that nothing calls: between the two writes that take the
		 * walk away, or left by a guard cut short.  backtrace() is the
		 * file's; unguard (and guard) still write the room.
		 */
		w->state = PROTO_SITE_ORIGINAL;
	} else if (call_ours) {
		w->state = room == ROOM_OURS ? PROTO_SITE_GUARDED :
			   room == ROOM_OTHER ? PROTO_SITE_FOREIGN : PROTO_SITE_TORN;
	} else if (call_breakpoint(w)) {
		/*
		 * Over our code, ours may be beneath, and a uprobe's hits run
		 * the file's add: backtrace() is glibc's, unwalked.  Torn, so
		 * that status warns and guard (or unguard) writes over it.
		 */
		w->state = PROTO_SITE_TORN;
	} else {
		w->state = PROTO_SITE_FOREIGN;
	}
}

bool walk_code_changes(const struct site *s, bool ours)
{
	const struct site_walk *w = &s->walk;

	if (!w->planned)
		return false;
	/* The code goes only once nothing names it (walk_draining()). */
	if (!ours && walk_draining(s))
		return false;
	for (size_t i = 0; i < w->code_len; i++)
		if (w->code_mem[i] != (ours ? w->code_ours[i] : 0))
			return true;
	return false;
}

bool walk_draining(const struct site *s)
{
	return s->walk.planned && !call_is_files(&s->walk);
}

bool walk_call_changes(const struct site *s, bool ours)
{
	const struct site_walk *w = &s->walk;

	if (!w->planned)
		return false;
	return ours ? memcmp(w->call_mem, w->call_ours, ARCH_WALK_CALL_LEN) != 0 : !call_is_files(w);
}
