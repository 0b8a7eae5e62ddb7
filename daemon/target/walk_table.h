/* SPDX-License-Identifier: MIT */
/*
 * The table at the head of the segment walk's code (walk_code.c): what the
 * code needs to know of the one process it runs in.  The daemon fills it
 * for each guard (engine/walk.c); the code reads it and nothing else.
 * Fixed-width fields only: the two sides are built by the same compiler
 * for the same CPU, but one is freestanding.
 */
#ifndef BTGUARD_WALK_TABLE_H
#define BTGUARD_WALK_TABLE_H

#include <stdint.h>

/* A name the walk compares with is this long at most, its NUL included. */
#define WALK_NAME_LEN 16u

struct walk_table {
	uint64_t helper;         /* glibc's per-frame callback of backtrace(), which we wrap */
	uint64_t find_object;    /* _dl_find_object() */
	uint64_t array_offset;   /* of the frame array's pointer in the callback's argument */
	uint64_t count_offset;   /* of the frames-stored count (int) in the same */
	/*
	 * A stack switcher is an object whose file name starts with prefix
	 * and holds suffix, under a directory named dir[0] or dir[1]
	 * (select.c's is_stack_switcher(), which the at-risk check applies).
	 */
	char prefix[WALK_NAME_LEN];
	char suffix[WALK_NAME_LEN];
	char dir[2][WALK_NAME_LEN];
};

#endif
