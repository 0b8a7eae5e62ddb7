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
#include <sys/uio.h>

#include "stackcheck_scan.h"

bool stackcheck_pc_unsafe(uint64_t pc, const struct stackcheck_span *spans, size_t n)
{
	for (size_t i = 0; i < n; i++)
		if (pc > spans[i].lo && pc < spans[i].hi)
			return true;
	return false;
}

bool stackcheck_scan_words(const uint64_t *words, size_t n_words,
			   const struct stackcheck_span *spans, size_t n, uint64_t *ret_pc)
{
	for (size_t i = 0; i < n_words; i++) {
		if (stackcheck_pc_unsafe(words[i], spans, n)) {
			*ret_pc = words[i];
			return true;
		}
	}
	return false;
}

int stackcheck_scan_memory(pid_t tid, uint64_t lo, uint64_t hi, uint64_t *chunk,
			   size_t chunk_words, const struct stackcheck_span *spans, size_t nspans,
			   stackcheck_chunk_fn *on_chunk, void *ctx, uint64_t *bytes,
			   uint64_t *ret_pc)
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
		if (stackcheck_scan_words(chunk, (size_t)n / sizeof(uint64_t), spans, nspans, ret_pc))
			return 1;
		if (on_chunk)
			on_chunk(ctx, chunk, (size_t)n / sizeof(uint64_t));
		lo += (uint64_t)n & ~(uint64_t)7;
	}
	return 0;
}
