// SPDX-License-Identifier: MIT
/*
 * Stack walks for the activeness check.
 *
 * libunwind-ptrace walks a stopped thread's frames from its registers using
 * the target's unwind tables, and steps through signal frames, so a
 * handler running on an alternate signal stack still leads back to the PC
 * it interrupted.  A walk can fail (no unwind info, a stack switched by a
 * coroutine library, objects unreadable from our mount namespace); then we
 * fall back to treating every word of the thread's live stack as a possible
 * return address.  That may refuse a safe moment, never accept an unsafe
 * one: a refusal only costs a retry.
 */
#include <errno.h>
#include <libunwind-ptrace.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#include "../proto/proto.h"
#include "stackcheck.h"

#define WALK_MAX_FRAMES  512
#define SCAN_MAX_BYTES   ((uint64_t)16 << 20)  /* larger live stacks count as unsafe */
#define SCAN_CHUNK_WORDS 8192

struct stackcheck {
	pid_t pid;
	unw_addr_space_t as;
	const struct procfs_mapping *maps;
	size_t nmaps;
	uint64_t *chunk;
};

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

int stackcheck_new(pid_t pid, const struct procfs_mapping *maps, size_t nmaps,
		   struct stackcheck **ret)
{
	struct stackcheck *sc = calloc(1, sizeof(*sc));

	if (!sc)
		return -ENOMEM;
	sc->chunk = malloc(SCAN_CHUNK_WORDS * sizeof(uint64_t));
	sc->as = unw_create_addr_space(&_UPT_accessors, 0);
	if (!sc->chunk || !sc->as) {
		stackcheck_free(sc);
		return -ENOMEM;
	}
	unw_set_caching_policy(sc->as, UNW_CACHE_GLOBAL);
	sc->pid = pid;
	sc->maps = maps;
	sc->nmaps = nmaps;
	*ret = sc;
	return 0;
}

void stackcheck_free(struct stackcheck *sc)
{
	if (!sc)
		return;
	if (sc->as)
		unw_destroy_addr_space(sc->as);
	free(sc->chunk);
	free(sc);
}

/* 0: complete walk, nothing found; 1: hit; <0: the walk could not finish. */
static int walk(struct stackcheck *sc, pid_t tid, const struct stackcheck_span *spans,
		size_t nspans, struct stackcheck_hit *hit)
{
	unw_cursor_t cursor;
	void *upt = _UPT_create(tid);
	int r, frame = 0;

	if (!upt)
		return -ENOMEM;
	r = unw_init_remote(&cursor, sc->as, upt);
	if (r < 0) {
		r = -EFAULT;
		goto out_destroy;
	}
	for (;;) {
		unw_word_t ip;

		if (unw_get_reg(&cursor, UNW_REG_IP, &ip) < 0) {
			r = -EFAULT;
			break;
		}
		if (stackcheck_pc_unsafe(ip, spans, nspans)) {
			hit->pc = ip;
			hit->frame = frame;
			r = 1;
			break;
		}
		if (++frame >= WALK_MAX_FRAMES) {
			r = -ELOOP;
			break;
		}
		r = unw_step(&cursor);
		if (r == 0)
			break;      /* reached the outermost frame */
		if (r < 0) {
			r = -EFAULT;
			break;
		}
	}
out_destroy:
	_UPT_destroy(upt);
	return r;
}

static const struct procfs_mapping *find_mapping(const struct stackcheck *sc, uint64_t addr)
{
	for (size_t i = 0; i < sc->nmaps; i++)
		if (addr >= sc->maps[i].start && addr < sc->maps[i].end)
			return &sc->maps[i];
	return NULL;
}

/* 0: nothing found; 1: hit; <0: could not scan (unsafe). */
static int scan(struct stackcheck *sc, pid_t tid, uint64_t sp, const struct stackcheck_span *spans,
		size_t nspans, struct stackcheck_hit *hit)
{
	const struct procfs_mapping *m = find_mapping(sc, sp);
	uint64_t lo, hi;

	if (!m)
		return -EFAULT;
	lo = sp >= m->start + ARCH_RED_ZONE ? sp - ARCH_RED_ZONE : m->start;
	lo &= ~(uint64_t)7;
	hi = m->end;
	if (hi - lo > SCAN_MAX_BYTES)
		return -E2BIG;
	while (lo < hi) {
		size_t want = (size_t)(hi - lo);
		struct iovec local, remote;
		ssize_t n;
		uint64_t pc;

		if (want > SCAN_CHUNK_WORDS * sizeof(uint64_t))
			want = SCAN_CHUNK_WORDS * sizeof(uint64_t);
		local.iov_base = sc->chunk;
		local.iov_len = want;
		remote.iov_base = (void *)lo;
		remote.iov_len = want;
		n = process_vm_readv(tid, &local, 1, &remote, 1, 0);
		if (n <= 0)
			return -EFAULT;
		if (stackcheck_scan_words(sc->chunk, (size_t)n / sizeof(uint64_t), spans, nspans, &pc)) {
			hit->pc = pc;
			hit->frame = -1;
			hit->by_scan = true;
			return 1;
		}
		lo += (uint64_t)n & ~(uint64_t)7;
	}
	return 0;
}

int stackcheck_thread(struct stackcheck *sc, pid_t tid, const arch_regs_t *regs,
		      const struct stackcheck_span *spans, size_t nspans,
		      struct stackcheck_hit *hit)
{
	int r;

	memset(hit, 0, sizeof(*hit));
	hit->tid = tid;
	/* The thread's own PC first: no walk is needed to refuse. */
	if (stackcheck_pc_unsafe(arch_regs_pc(regs), spans, nspans)) {
		hit->pc = arch_regs_pc(regs);
		return -BTG_ERR_BUSY;
	}
	r = walk(sc, tid, spans, nspans, hit);
	if (r == 0)
		return 0;
	if (r == 1)
		return -BTG_ERR_BUSY;
	r = scan(sc, tid, arch_regs_sp(regs), spans, nspans, hit);
	if (r == 1)
		return -BTG_ERR_BUSY;
	return r;
}
