/* SPDX-License-Identifier: MIT */
/*
 * Stack scans on a second thread, beside the stopping (see scanwork.c).
 *
 * The thread that holds the world stopped does the ptrace work; a scan
 * only reads the target's memory, which any thread of ours may do.  So
 * while the world's other threads are still being stopped, each stopped
 * thread's stack is scanned by the worker, and the attempt collects the
 * verdicts before it writes.  One batch at a time: an attempt that finds
 * the worker still busy with an abandoned batch scans on its own.
 */
#ifndef BTGUARD_SCANWORK_H
#define BTGUARD_SCANWORK_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>

#include "stackcheck_scan.h"

/* One scan: the words of [lo, hi) of the memory tid runs in. */
struct scanwork_job {
	pid_t tid;
	uint64_t lo, hi;
	/* Written by the worker once done: 0 nothing found, 1 hit, <0 -errno. */
	int r;
	uint64_t pc;      /* the word found, for a hit */
	uint64_t bytes;   /* read */
};

struct scanwork_batch;

/* The byte ranges a batch compares words with (one per backtrace definition). */
#define SCANWORK_MAX_SPANS 16

/*
 * A batch of scans against spans (copied).  -EAGAIN when the worker is
 * still on an earlier batch (or could not be started): scan on your own.
 * -ENOMEM.
 */
int scanwork_begin(const struct stackcheck_span *spans, size_t nspans, struct scanwork_batch **ret);

/*
 * Queues a scan; false when out of memory or the batch is full (16,384
 * scans): scan it yourself.  Takes no lock: the worker never holds it up.
 */
bool scanwork_submit(struct scanwork_batch *b, pid_t tid, uint64_t lo, uint64_t hi);

/*
 * Waits until every queued scan is done, or the deadline: 0 or -ETIMEDOUT.
 * Until the deadline the caller scans too, taking the jobs the worker has
 * not started.  Then scanwork_job() gives the verdicts, by the order
 * submitted (0 to scanwork_count() - 1).
 */
int scanwork_wait(struct scanwork_batch *b, const struct timespec *deadline);
size_t scanwork_count(const struct scanwork_batch *b);
const struct scanwork_job *scanwork_job(const struct scanwork_batch *b, size_t i);

/* The caller is done with b (it may not be: the worker frees it then). */
void scanwork_end(struct scanwork_batch *b);

#endif
