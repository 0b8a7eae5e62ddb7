/* SPDX-License-Identifier: MIT */
/*
 * The segment walk (walk.c): the guard form that keeps backtraces.  What
 * an object file allows, where it goes in one process, what its bytes
 * there say, and which to write.
 */
#ifndef BTGUARD_WALK_H
#define BTGUARD_WALK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "elf.h"
#include "procfs.h"
#include "site.h"

/*
 * What the object file img[0, size) allows at the definition def, in
 * *ret (ret->ok false when it allows nothing, which is no error).
 * page_len: the kernel's page size, which bounds the room.
 */
void walk_facts_read(const uint8_t *img, size_t size, const struct elf_def *def,
		     size_t page_len, struct walk_facts *ret);

/*
 * s->walk for the site s, at run time in the executable mapping m of its
 * object: where the code goes, its table filled, and the bytes that name
 * it.  s->walk.planned false, with why, when it does not fit.
 */
void walk_plan(struct site *s, const struct procfs_mapping *m, const struct walk_facts *wf);

/* s->walk from where alone (what sitememo.c keeps of a planned walk). */
void walk_build(struct site *s, const struct walk_where *where);

/*
 * s->walk.state from s->walk.call_mem and code_mem, as last read.  Bytes
 * in the room that are neither the file's nor ours, behind bytes in
 * backtrace() that are the file's, are somebody else's: then the walk is
 * not planned (and the site holds no walk).
 */
void walk_classify(struct site *s);

/*
 * Whether the walk's code bytes must change to reach the form (ours or
 * the file's).  Taking the walk away is two writes, in two stops of the
 * world: first the bytes in backtrace() name glibc's helper again, which
 * is safe whenever (the code stays for the calls that took its address);
 * then, once no thread is in a call that did (stackcheck.c confirms it
 * by the frames), the code goes.  Between the two, walk_draining(): the
 * call bytes not surely the file's (ours, or a breakpoint that may cover
 * ours), the code must stay.
 */
bool walk_draining(const struct site *s);
bool walk_code_changes(const struct site *s, bool ours);
bool walk_call_changes(const struct site *s, bool ours);

#endif
