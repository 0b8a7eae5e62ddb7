/* SPDX-License-Identifier: MIT */
/*
 * The scans of the activeness check, shared by stackcheck.c and the scan
 * worker (scanwork.c): pure tests of words against the bytes to change,
 * and a read of a task's memory that applies them.  Only reads.
 */
#ifndef BTGUARD_STACKCHECK_SCAN_H
#define BTGUARD_STACKCHECK_SCAN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

#include "arch.h"
#include "proto.h"

/* Spans one check takes at most: a site's entry, and its walk's changes (activeness.c). */
#define STACKCHECK_MAX_SPANS (4u * PROTO_MAX_SITES)

/*
 * What a span is.  BYTES: bytes that will change.  The others are the
 * segment walk's, taken away (activeness.c), where a word on the stack or
 * in a register other than the PC may be stale (the walk's code is
 * returned into all the time, and live frames keep old words in their
 * unwritten slots), so such a hit is judged by the thread's frames alone
 * (stackcheck.c): CODE, the code, which a frame must not be in; WINDOW,
 * the instructions between the bytes that name the code and the call
 * that hands it to the unwinder, which a thread must not be at; CALLER,
 * the return from that call: a thread inside it is in the way only when
 * the unwinder's frame holds the code's address.
 */
enum stackcheck_span_kind {
	STACKCHECK_SPAN_BYTES = 0,
	STACKCHECK_SPAN_CODE,
	STACKCHECK_SPAN_WINDOW,
	STACKCHECK_SPAN_CALLER,
};

/* A resume PC p is unsafe when lo < p < hi. */
struct stackcheck_span {
	uint64_t lo, hi;
	enum stackcheck_span_kind kind;
};

/*
 * True when a thread resuming at pc would execute from inside a span.
 * pc is a word as a register or a stack holds it: arch_code_address()
 * takes what names the address (a signed return address's PAC off).
 */
bool stackcheck_pc_unsafe(uint64_t pc, const struct stackcheck_span *spans, size_t n);

/*
 * Same test over raw stack words (the conservative scan): true on a hit,
 * *ret_pc set to the address the word names, *ret_index (unless NULL) to
 * where it lay.
 */
bool stackcheck_scan_words(const uint64_t *words, size_t n_words,
			   const struct stackcheck_span *spans, size_t n, uint64_t *ret_pc,
			   size_t *ret_index);

/*
 * The scan of tid's memory [lo, hi) (lo 8-aligned; a tail short of a word is left out), read a chunk of
 * chunk_words words at a time into chunk: 1 with *ret_pc on a hit (and
 * *ret_at, unless NULL, the word's address), 0 when
 * no word points into a span, -EFAULT when the memory cannot be read.
 * *bytes grows by what was read.  on_chunk, unless NULL, sees each chunk
 * read without a hit.  Only reads (process_vm_readv()): the scan worker
 * runs it too.
 */
typedef void stackcheck_chunk_fn(void *ctx, const uint64_t *words, size_t n);
int stackcheck_scan_memory(pid_t tid, uint64_t lo, uint64_t hi, uint64_t *chunk,
			   size_t chunk_words, const struct stackcheck_span *spans, size_t nspans,
			   stackcheck_chunk_fn *on_chunk, void *ctx, uint64_t *bytes,
			   uint64_t *ret_pc, uint64_t *ret_at);

/* Whether pc lies in a span whose hits the frames confirm (any kind but BYTES). */
bool stackcheck_in_confirm_span(uint64_t pc, const struct stackcheck_span *spans, size_t nspans);

/* The first span pc lies in, or NULL. */
const struct stackcheck_span *stackcheck_span_of(uint64_t pc,
						  const struct stackcheck_span *spans, size_t nspans);

/*
 * Whether a thread inside the unwinder's call (stackcheck.c's frames
 * found it returning to a CALLER span) holds an address in a CODE span:
 * its registers (regs, as it holds them; inner, as the unwinder's frame
 * does), or a word of its stack from its stack pointer to hi, the
 * caller's frame.  True when that is not one stretch of stack, too.
 */
bool stackcheck_holds_code(pid_t tid, const arch_regs_t *regs, const uint64_t *inner,
			   size_t ninner, uint64_t hi, const struct stackcheck_span *spans,
			   size_t nspans);

#endif
