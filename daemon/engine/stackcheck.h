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
#include <time.h>

#include "arch.h"
#include "proto.h"
#include "procfs.h"
#include "stackcheck_scan.h"

struct stackcheck_hit {
	pid_t    tid;
	uint64_t pc;
	int      frame;       /* 0: the thread's own PC; >0: a frame of the walk; -1: the scan */
	bool     by_scan;     /* a stack word: a return address or a signal frame's saved PC */
	uint64_t at;          /* where that word lay on the stack; 0 for a register's */
};

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

/*
 * Hands the scans of threads on their home stacks to the worker thread
 * (scanwork.h) from now until stackcheck_defer_end(): stackcheck_thread()
 * then answers 0 for those at once, and stackcheck_collect() gives their
 * verdict.  spans must be those every stackcheck_thread() call passes.
 * Without the worker (busy, or not running) nothing changes: each scan is
 * done in stackcheck_thread().  stackcheck_reset() and stackcheck_free()
 * end it too.
 */
void stackcheck_defer_begin(struct stackcheck *sc, const struct stackcheck_span *spans,
			    size_t nspans);
/*
 * Waits (until deadline, CLOCK_MONOTONIC) for the scans handed over, then
 * answers as stackcheck_thread() would for the first that found something:
 * 0, -BTG_ERR_BUSY with *hit (tid, the word, by_scan), or a negative errno
 * with hit->tid naming the thread; -ETIMEDOUT with hit->tid 0 when the
 * worker did not finish in time.
 */
int stackcheck_collect(struct stackcheck *sc, const struct timespec *deadline,
		       struct stackcheck_hit *hit);
void stackcheck_defer_end(struct stackcheck *sc);

/* Since the last reset: threads scanned, threads that also needed a walk, bytes scanned. */
void stackcheck_stats(const struct stackcheck *sc, size_t *ret_walked, size_t *ret_scanned,
		      uint64_t *ret_scan_bytes);

#endif
