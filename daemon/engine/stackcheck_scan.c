// SPDX-License-Identifier: MIT
/*
 * The scan primitives of the activeness check (stackcheck.c's rule: every
 * word of a stack counts as a PC the thread may resume at): is a PC inside
 * the bytes to change, do any of these words point there, does any word of
 * this memory.  Apart from stackcheck.c so that the scan worker
 * (scanwork.c), which runs them on its own thread, needs nothing else of
 * the check, and stackcheck.c uses the worker without a cycle.
 */
#include <errno.h>
#include <string.h>
#include <sys/uio.h>

#include "stackcheck_scan.h"

bool stackcheck_pc_unsafe(uint64_t pc, const struct stackcheck_span *spans, size_t n)
{
	pc = arch_code_address(pc);
	for (size_t i = 0; i < n; i++)
		if (pc > spans[i].lo && pc < spans[i].hi)
			return true;
	return false;
}

bool stackcheck_scan_words(const uint64_t *words, size_t n_words,
			   const struct stackcheck_span *spans, size_t n, uint64_t *ret_pc,
			   size_t *ret_index)
{
	for (size_t i = 0; i < n_words; i++) {
		if (stackcheck_pc_unsafe(words[i], spans, n)) {
			*ret_pc = arch_code_address(words[i]);
			if (ret_index)
				*ret_index = i;
			return true;
		}
	}
	return false;
}

int stackcheck_scan_memory(pid_t tid, uint64_t lo, uint64_t hi, uint64_t *chunk,
			   size_t chunk_words, const struct stackcheck_span *spans, size_t nspans,
			   stackcheck_chunk_fn *on_chunk, void *ctx, uint64_t *bytes,
			   uint64_t *ret_pc, uint64_t *ret_at)
{
	/*
	 * Whole words only: a tail of a few bytes holds no address, and
	 * reading it would advance lo by nothing, for ever.
	 */
	if (hi > lo)
		hi -= (hi - lo) & 7;
	while (lo < hi) {
		size_t want = (size_t)(hi - lo);
		struct iovec local, remote;
		size_t at;
		ssize_t n;

		if (want > chunk_words * sizeof(uint64_t))
			want = chunk_words * sizeof(uint64_t);
		local.iov_base = chunk;
		local.iov_len = want;
		remote.iov_base = (void *)(uintptr_t)lo;
		remote.iov_len = want;
		n = process_vm_readv(tid, &local, 1, &remote, 1, 0);
		if (n < (ssize_t)sizeof(uint64_t))
			return -EFAULT;
		*bytes += (uint64_t)n;
		if (stackcheck_scan_words(chunk, (size_t)n / sizeof(uint64_t), spans, nspans, ret_pc,
					  &at)) {
			if (ret_at)
				*ret_at = lo + at * sizeof(uint64_t);
			return 1;
		}
		if (on_chunk)
			on_chunk(ctx, chunk, (size_t)n / sizeof(uint64_t));
		lo += (uint64_t)n & ~(uint64_t)7;
	}
	return 0;
}

/* Whether pc lies in a span whose hits the frames confirm. */
bool stackcheck_in_confirm_span(uint64_t pc, const struct stackcheck_span *spans, size_t nspans)
{
	for (size_t i = 0; i < nspans; i++)
		if (spans[i].kind != STACKCHECK_SPAN_BYTES && stackcheck_pc_unsafe(pc, &spans[i], 1))
			return true;
	return false;
}

/* The span pc lies in (the first), or NULL. */
const struct stackcheck_span *stackcheck_span_of(uint64_t pc,
						  const struct stackcheck_span *spans, size_t nspans)
{
	for (size_t i = 0; i < nspans; i++)
		if (stackcheck_pc_unsafe(pc, &spans[i], 1))
			return &spans[i];
	return NULL;
}

/* The inner frames of a call scanned at most: the unwinder's are a few KiB. */
#define CALLEE_SCAN_MAX (256u * 1024)

/*
 * Whether a thread inside the unwinder's call holds an address in a CODE
 * span: then the call was handed the walk's code, which it will call.
 * Where the unwinder keeps it (libgcc: a callee-saved register) is the
 * thread's registers, or a save slot on the stack between its stack
 * pointer and the caller's frame, a signal frame's saved registers
 * included: lo (the thread's stack pointer) to hi (the caller's).  So
 * all of them are looked at, the registers as the thread holds them
 * (regs) and as the unwinder's frame does (inner); a word left there by
 * an older call makes it busy too, which only costs a retry.  A range
 * that is not one stretch of stack (an alternate signal stack) holds it,
 * as far as we can tell.
 */
bool stackcheck_holds_code(pid_t tid, const arch_regs_t *regs, const uint64_t *inner,
			   size_t ninner, uint64_t hi, const struct stackcheck_span *spans,
			   size_t nspans)
{
	struct stackcheck_span code[STACKCHECK_MAX_SPANS];
	uint64_t chunk[256], bytes = 0, pc, word, lo = arch_regs_sp(regs);
	size_t n = 0;

	for (size_t i = 0; i < nspans; i++)
		if (spans[i].kind == STACKCHECK_SPAN_CODE)
			code[n++] = spans[i];
	for (size_t off = 0; off + sizeof(word) <= sizeof(*regs); off += sizeof(word)) {
		memcpy(&word, (const uint8_t *)regs + off, sizeof(word));
		if (stackcheck_pc_unsafe(word, code, n))
			return true;
	}
	for (size_t i = 0; i < ninner; i++)
		if (stackcheck_pc_unsafe(inner[i], code, n))
			return true;
	/* The red zone below: a leaf may keep it there (x86-64's 128 bytes; none on aarch64). */
	lo = lo > (uint64_t)ARCH_RED_ZONE ? lo - (uint64_t)ARCH_RED_ZONE : 0;
	if (hi < lo || hi - lo > CALLEE_SCAN_MAX)
		return true;
	return stackcheck_scan_memory(tid, lo & ~(uint64_t)7, hi, chunk, 256, code, n, NULL, NULL,
				      &bytes, &pc, NULL) != 0;
}
