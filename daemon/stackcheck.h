/* SPDX-License-Identifier: MIT */
/*
 * The activeness check: may we change bytes under a stopped thread?  A
 * thread is in the way when its PC, or any PC it will later resume at (a
 * return address, or the PC saved in a signal frame), lies strictly inside
 * the bytes we are about to change.
 */
#ifndef BTGUARD_STACKCHECK_H
#define BTGUARD_STACKCHECK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "arch.h"
#include "procfs.h"

/* Bytes that will change; a resume PC p is unsafe when lo < p < hi. */
struct stackcheck_span {
	uint64_t lo, hi;
};

struct stackcheck_hit {
	pid_t    tid;
	uint64_t pc;
	int      frame;       /* 0: the thread's own PC; >0: a frame of the walk; -1: the scan */
	bool     by_scan;     /* a stack word: a return address or a signal frame's saved PC */
};

/* True when a thread resuming at pc would execute from inside a span. */
bool stackcheck_pc_unsafe(uint64_t pc, const struct stackcheck_span *spans, size_t n);

/* Same test over raw stack words (the conservative scan): true on a hit, *ret_pc set. */
bool stackcheck_scan_words(const uint64_t *words, size_t n_words,
			   const struct stackcheck_span *spans, size_t n, uint64_t *ret_pc);

struct stackcheck;

/*
 * Prepares checks of one process: allocations and the unwinder's address
 * space, made before the process is stopped so the stopped window holds
 * only the walks.  via is a live task of pid (procfs_live_task) to read
 * memory through.  maps are the target's mappings; they must outlive the
 * check until the next stackcheck_reset.
 */
int stackcheck_new(pid_t pid, pid_t via, const struct procfs_mapping *maps, size_t nmaps,
		   struct stackcheck **ret);

/*
 * Forgets everything read from the target (it has run since): call it
 * before each stop, with the mappings as they are now.
 */
void stackcheck_reset(struct stackcheck *sc, const struct procfs_mapping *maps, size_t nmaps);

/*
 * Reads every executable object's unwind table header now, after
 * stackcheck_reset and before the stop, so a walk inside the stop finds
 * them ready instead of reading them while the target is held.
 */
void stackcheck_preload(struct stackcheck *sc);
void stackcheck_free(struct stackcheck *sc);

/*
 * Checks one stopped thread: its PC, then every word of its live stack
 * (the rule; see stackcheck.c).  Off its home stack (a sigaltstack, a
 * coroutine stack) it also walks the frames with libunwind-ptrace, through
 * signal frames, scanning each stack the walk reaches, or the whole home
 * stack when the walk cannot finish.  0 when safe, -BTG_ERR_BUSY with *hit
 * filled when not, another negative code when it could not tell (callers
 * treat that as unsafe too).
 */
int stackcheck_thread(struct stackcheck *sc, pid_t tid, const arch_regs_t *regs,
		      const struct stackcheck_span *spans, size_t nspans,
		      struct stackcheck_hit *hit);

/* Since the last reset: threads scanned, threads that also needed a walk, bytes scanned. */
void stackcheck_stats(const struct stackcheck *sc, size_t *ret_walked, size_t *ret_scanned,
		      uint64_t *ret_scan_bytes);

#endif
