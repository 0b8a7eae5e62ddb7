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
#include "arch_unwind.h"
#include "stackcheck.h"

#define WALK_MAX_FRAMES  512
#define SCAN_MAX_BYTES   ((uint64_t)16 << 20)  /* larger live stacks count as unsafe */
#define SCAN_CHUNK_WORDS 8192
#define SNAPSHOT_BYTES   (64u << 10)           /* stack copied per thread for the walk */

/*
 * libunwind-ptrace's stock accessors read registers and memory one word per
 * system call and re-read /proc/PID/maps and re-map the object file for
 * every thread.  We serve registers from PTRACE_GETREGS, memory from one
 * snapshot of each thread's stack (other addresses: one process_vm_readv),
 * and unwind tables from one libunwind-ptrace handle per object file,
 * whose cache of that file's tables then stays warm across all threads.
 */
struct object_upt {
	uint64_t dev_inode;   /* (dev << 40) ^ inode: the file's identity */
	void *upt;
};

struct stackcheck {
	pid_t pid;
	unw_addr_space_t as;
	const struct procfs_mapping *maps;
	size_t nmaps;
	uint64_t *chunk;
	struct object_upt *objs;
	size_t nobjs;
	/* The thread being walked. */
	pid_t tid;
	const arch_regs_t *regs;
	uint64_t snap_lo;
	size_t snap_len;
	uint8_t *snap;
};

static const struct procfs_mapping *find_mapping(const struct stackcheck *sc, uint64_t addr);

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

/* The libunwind-ptrace handle for the object holding ip, made on first use. */
static void *object_upt_for(struct stackcheck *sc, unw_word_t ip)
{
	const struct procfs_mapping *m = find_mapping(sc, ip);
	uint64_t key;
	struct object_upt *v;

	if (!m || !m->inode)
		return NULL;
	key = ((uint64_t)m->dev_major << 52) ^ ((uint64_t)m->dev_minor << 40) ^ m->inode;
	for (size_t i = 0; i < sc->nobjs; i++)
		if (sc->objs[i].dev_inode == key)
			return sc->objs[i].upt;
	v = realloc(sc->objs, (sc->nobjs + 1) * sizeof(*v));
	if (!v)
		return NULL;
	sc->objs = v;
	v[sc->nobjs].dev_inode = key;
	v[sc->nobjs].upt = _UPT_create(sc->tid);
	if (!v[sc->nobjs].upt)
		return NULL;
	return v[sc->nobjs++].upt;
}

static int acc_find_proc_info(unw_addr_space_t as, unw_word_t ip, unw_proc_info_t *pi,
			      int need_unwind_info, void *arg)
{
	void *upt = object_upt_for(arg, ip);

	if (!upt)
		return -UNW_ENOINFO;
	return _UPT_find_proc_info(as, ip, pi, need_unwind_info, upt);
}

static void acc_put_unwind_info(unw_addr_space_t as, unw_proc_info_t *pi, void *arg)
{
	struct stackcheck *sc = arg;

	/* Any handle frees what any handle allocated: it is plain free(). */
	if (sc->nobjs)
		_UPT_put_unwind_info(as, pi, sc->objs[0].upt);
}

static int acc_get_dyn_info_list_addr(unw_addr_space_t as, unw_word_t *dilap, void *arg)
{
	(void)as;
	(void)dilap;
	(void)arg;
	return -UNW_ENOINFO;  /* JIT-registered unwind info: not needed to find return addresses */
}

static int acc_access_mem(unw_addr_space_t as, unw_word_t addr, unw_word_t *val, int write,
			  void *arg)
{
	struct stackcheck *sc = arg;
	struct iovec local = { .iov_base = val, .iov_len = sizeof(*val) };
	struct iovec remote = { .iov_base = (void *)addr, .iov_len = sizeof(*val) };

	(void)as;
	if (write)
		return -UNW_EREADONLYREG;
	if (addr >= sc->snap_lo && addr - sc->snap_lo + sizeof(*val) <= sc->snap_len) {
		memcpy(val, sc->snap + (addr - sc->snap_lo), sizeof(*val));
		return 0;
	}
	if (process_vm_readv(sc->tid, &local, 1, &remote, 1, 0) != sizeof(*val))
		return -UNW_EINVAL;
	return 0;
}

static int acc_access_reg(unw_addr_space_t as, unw_regnum_t reg, unw_word_t *val, int write,
			  void *arg)
{
	struct stackcheck *sc = arg;

	(void)as;
	if (write)
		return -UNW_EREADONLYREG;
	return arch_unw_reg(sc->regs, reg, val);
}

static int acc_access_fpreg(unw_addr_space_t as, unw_regnum_t reg, unw_fpreg_t *val, int write,
			    void *arg)
{
	(void)as;
	(void)reg;
	(void)val;
	(void)write;
	(void)arg;
	return -UNW_EBADREG;
}

static int acc_resume(unw_addr_space_t as, unw_cursor_t *c, void *arg)
{
	(void)as;
	(void)c;
	(void)arg;
	return -UNW_EINVAL;
}

static int acc_get_proc_name(unw_addr_space_t as, unw_word_t addr, char *buf, size_t len,
			     unw_word_t *off, void *arg)
{
	(void)as;
	(void)addr;
	(void)buf;
	(void)len;
	(void)off;
	(void)arg;
	return -UNW_ENOINFO;
}

static unw_accessors_t accessors = {
	.find_proc_info = acc_find_proc_info,
	.put_unwind_info = acc_put_unwind_info,
	.get_dyn_info_list_addr = acc_get_dyn_info_list_addr,
	.access_mem = acc_access_mem,
	.access_reg = acc_access_reg,
	.access_fpreg = acc_access_fpreg,
	.resume = acc_resume,
	.get_proc_name = acc_get_proc_name,
};

int stackcheck_new(pid_t pid, const struct procfs_mapping *maps, size_t nmaps,
		   struct stackcheck **ret)
{
	struct stackcheck *sc = calloc(1, sizeof(*sc));

	if (!sc)
		return -ENOMEM;
	sc->chunk = malloc(SCAN_CHUNK_WORDS * sizeof(uint64_t));
	sc->snap = malloc(SNAPSHOT_BYTES);
	sc->as = unw_create_addr_space(&accessors, 0);
	if (!sc->chunk || !sc->snap || !sc->as) {
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
	for (size_t i = 0; i < sc->nobjs; i++)
		_UPT_destroy(sc->objs[i].upt);
	free(sc->objs);
	free(sc->chunk);
	free(sc->snap);
	free(sc);
}

/* Copies the top of the thread's stack, so the walk reads it from memory. */
static void take_snapshot(struct stackcheck *sc, uint64_t sp)
{
	const struct procfs_mapping *m = find_mapping(sc, sp);
	uint64_t lo = sp >= ARCH_RED_ZONE ? sp - ARCH_RED_ZONE : 0;
	uint64_t hi = lo + SNAPSHOT_BYTES;
	struct iovec local, remote;
	ssize_t n;

	sc->snap_lo = lo;
	sc->snap_len = 0;
	if (!m)
		return;
	if (lo < m->start)
		lo = sc->snap_lo = m->start;
	if (hi > m->end)
		hi = m->end;
	if (hi <= lo)
		return;
	local.iov_base = sc->snap;
	local.iov_len = (size_t)(hi - lo);
	remote.iov_base = (void *)lo;
	remote.iov_len = (size_t)(hi - lo);
	n = process_vm_readv(sc->tid, &local, 1, &remote, 1, 0);
	sc->snap_len = n > 0 ? (size_t)n : 0;
}

/* 0: complete walk, nothing found; 1: hit; <0: the walk could not finish. */
static int walk(struct stackcheck *sc, pid_t tid, const arch_regs_t *regs,
		const struct stackcheck_span *spans, size_t nspans, struct stackcheck_hit *hit)
{
	unw_cursor_t cursor;
	int r, frame = 0;

	sc->tid = tid;
	sc->regs = regs;
	take_snapshot(sc, arch_regs_sp(regs));
	r = unw_init_remote(&cursor, sc->as, sc);
	if (r < 0)
		return -EFAULT;
	for (;;) {
		unw_word_t ip;

		if (unw_get_reg(&cursor, UNW_REG_IP, &ip) < 0)
			return -EFAULT;
		if (stackcheck_pc_unsafe(ip, spans, nspans)) {
			hit->pc = ip;
			hit->frame = frame;
			return 1;
		}
		if (++frame >= WALK_MAX_FRAMES)
			return -ELOOP;
		r = unw_step(&cursor);
		if (r == 0)
			return 0;   /* reached the outermost frame */
		if (r < 0)
			return -EFAULT;
	}
}

/* /proc/PID/maps lists mappings in address order, so a binary search finds one. */
static const struct procfs_mapping *find_mapping(const struct stackcheck *sc, uint64_t addr)
{
	size_t lo = 0, hi = sc->nmaps;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (addr < sc->maps[mid].start)
			hi = mid;
		else if (addr >= sc->maps[mid].end)
			lo = mid + 1;
		else
			return &sc->maps[mid];
	}
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
	r = walk(sc, tid, regs, spans, nspans, hit);
	if (r == 0)
		return 0;
	if (r == 1)
		return -BTG_ERR_BUSY;
	r = scan(sc, tid, arch_regs_sp(regs), spans, nspans, hit);
	if (r == 1)
		return -BTG_ERR_BUSY;
	return r;
}
