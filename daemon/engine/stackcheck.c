// SPDX-License-Identifier: MIT
/*
 * The activeness check: may we change bytes under a stopped thread?
 *
 * The rule is a conservative scan, not a stack walk: every word of the
 * thread's live stack (from its stack pointer, less the red zone, to the
 * end of that mapping) counts as a PC the thread may resume at, and one
 * strictly inside the bytes to change refuses the moment.  That catches
 * return addresses and, what a walk can miss, the PC saved in a signal
 * frame: a walk through a handler built without unwind tables, or through
 * code that zeroed its frame pointer, "completes" early without ever
 * reaching the frame, and a write under the interrupted PC crashes the
 * thread when the handler returns.  The scan needs no unwind info and a
 * false hit (a stale word that happens to point a byte or two into the
 * function) only costs a retry.
 *
 * When the thread is not on its home stack (a handler on a sigaltstack, a
 * coroutine stack), signal frames may also sit on the stack it came from.
 * libunwind's remote unwinder (driven here by accessors of our own, below)
 * then walks from the registers through signal frames, and every other
 * stack a frame is found on is scanned too; if the walk cannot finish, the
 * whole home stack is scanned.  Scans are bounded (SCAN_MAX_BYTES per
 * stack); a stack larger than that counts as unsafe.
 */
#include <elf.h>
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>

#include "proto.h"
#include "arch_unwind.h"
#include "cfi.h"
#include "scanwork.h"
#include "stackcheck.h"

#define WALK_MAX_FRAMES  512
#define SCAN_MAX_BYTES   ((uint64_t)16 << 20)  /* larger live stacks count as unsafe */
#define SCAN_CHUNK_WORDS 8192
#define PAGE_BYTES       4096u
#define CACHE_PAGES      256u                  /* table and code pages kept: 1 MiB */
#define STACK_PAGES      16u                   /* pages of the walked thread's stack */
#define MAX_TABLES       1024u   /* every object of a torch process (~300) and then some */
#define DEFER_AFTER_THREADS 32u  /* scanned here before the worker takes the rest */
#define DEFER_BYTES      ((uint64_t)64 << 10)  /* a stack this large goes to the worker at once */
#define HIDDEN_MAX       1024u   /* CFI instructions read as nops (arch_unwind.h)... */
#define HIDDEN_FDES_MAX  512u    /* ...found in this many FDEs */

/* DWARF pointer encodings used in .eh_frame_hdr (LSB "Linux Standard Base"). */
#define DW_EH_PE_udata4  0x03
#define DW_EH_PE_sdata4  0x0b
#define DW_EH_PE_datarel 0x30

/*
 * libunwind-ptrace's stock accessors read registers and memory one word per
 * system call, and re-read /proc/PID/maps and re-map the object file for
 * every thread: tens of milliseconds of pause for a few threads.  Instead:
 *  - registers come from the PTRACE_GETREGSET we already did;
 *  - memory is read a page at a time through two small caches: one for the
 *    walked thread's own stack (emptied for each thread: an idle thread's
 *    walk costs one or two reads), one for everything else (unwind tables,
 *    code), shared by every thread so each table page is read once;
 *  - the unwind table of an object is found from its own ELF headers in the
 *    target's memory (PT_GNU_EH_FRAME), so objects we cannot open by path
 *    (another mount namespace, deleted files, the vDSO) unwind too.
 */
/*
 * A direct-mapped cache of target pages.  The tags live apart from the
 * data so that emptying the cache touches 2 KiB, not every data page (a
 * fresh 1 MiB buffer would otherwise fault in on every request).
 */
struct page_cache {
	uint64_t *tag;        /* page address + 1; 0: empty */
	uint8_t *data;        /* n pages, uninitialised until filled */
	size_t n;
};

struct table {
	uint64_t text_start;  /* the executable mapping it covers */
	bool ok;
	unw_dyn_info_t di;
};

struct stackcheck {
	pid_t pid;
	pid_t via;                 /* a live task of pid, to read its memory through */
	unw_addr_space_t as;
	const struct procfs_mapping *maps;
	size_t nmaps;
	uint64_t *chunk;
	struct page_cache pages;   /* CACHE_PAGES, shared */
	struct page_cache stack;   /* STACK_PAGES, of the thread being walked */
	uint64_t stack_lo, stack_hi;
	struct table tables[MAX_TABLES];
	size_t ntables;
	size_t walked, scanned;    /* threads that needed a walk / threads scanned */
	uint64_t scan_bytes;       /* stack bytes scanned since the last reset */
	const arch_regs_t *regs;   /* of the thread being walked */
	uint64_t hidden[HIDDEN_MAX];          /* where a CFI instruction reads as DW_CFA_nop */
	size_t nhidden;
	uint64_t hidden_fdes[HIDDEN_FDES_MAX];  /* the FDEs looked through for them */
	size_t nhidden_fdes;
	/* Between stackcheck_defer_begin() and _end(): */
	bool defer;                    /* scans may go to the worker */
	bool batch_refused;            /* it is busy or not running: scan here */
	size_t inline_left;            /* threads still scanned here first */
	struct stackcheck_span defer_spans[STACKCHECK_MAX_SPANS];
	size_t defer_nspans;
	struct scanwork_batch *batch;  /* scans handed to the worker, or NULL */
};

static const struct procfs_mapping *find_mapping(const struct stackcheck *sc, uint64_t addr);

static int cache_init(struct page_cache *c, size_t n)
{
	c->tag = calloc(n, sizeof(*c->tag));
	c->data = malloc(n * PAGE_BYTES);
	c->n = n;
	return c->tag && c->data ? 0 : -ENOMEM;
}

static void cache_empty(struct page_cache *c)
{
	memset(c->tag, 0, c->n * sizeof(*c->tag));
}

static void cache_free(struct page_cache *c)
{
	free(c->tag);
	free(c->data);
}

static const uint8_t *cached_page(struct stackcheck *sc, uint64_t page)
{
	bool on_stack = page >= sc->stack_lo && page < sc->stack_hi;
	struct page_cache *c = on_stack ? &sc->stack : &sc->pages;
	size_t slot = (size_t)(page / PAGE_BYTES) % c->n;
	uint8_t *data = c->data + slot * PAGE_BYTES;
	struct iovec local = { .iov_base = data, .iov_len = PAGE_BYTES };
	struct iovec remote = { .iov_base = (void *)page, .iov_len = PAGE_BYTES };

	if (c->tag[slot] == page + 1)
		return data;
	c->tag[slot] = 0;
	if (process_vm_readv(sc->via, &local, 1, &remote, 1, 0) != PAGE_BYTES)
		return NULL;
	c->tag[slot] = page + 1;
	return data;
}

/* Reads target memory through the page cache, hidden CFI instructions as nops. */
static int mem_read(struct stackcheck *sc, uint64_t addr, void *buf, size_t len)
{
	uint8_t *out = buf;
	uint64_t start = addr;
	size_t want = len;

	while (len > 0) {
		uint64_t page = addr & ~(uint64_t)(PAGE_BYTES - 1);
		size_t off = (size_t)(addr - page), n = PAGE_BYTES - off;
		const uint8_t *data = cached_page(sc, page);

		if (!data)
			return -EFAULT;
		if (n > len)
			n = len;
		memcpy(out, data + off, n);
		out += n;
		addr += n;
		len -= n;
	}
	for (size_t i = 0; i < sc->nhidden; i++)
		if (sc->hidden[i] - start < want)
			((uint8_t *)buf)[sc->hidden[i] - start] = 0;   /* DW_CFA_nop */
	return 0;
}

/*
 * Finds the binary-search table of .eh_frame_hdr for the object whose
 * executable mapping is m, from the ELF and program headers at the start
 * of the object's first mapping.  Only the encodings every GNU toolchain
 * emits are accepted; anything else means "no info", and the caller falls
 * back to the conservative scan.
 */
static int load_table(struct stackcheck *sc, const struct procfs_mapping *m, unw_dyn_info_t *di)
{
	const struct procfs_mapping *base = m;
	Elf64_Ehdr eh;
	uint64_t bias = 0, hdr = 0;
	bool have_bias = false;
	uint8_t enc[4];
	uint32_t fde_count;

	while (base > sc->maps && procfs_same_object(base - 1, m))
		base--;
	if (base->offset != 0 || mem_read(sc, base->start, &eh, sizeof(eh)) < 0 ||
	    memcmp(eh.e_ident, ELFMAG, SELFMAG) || eh.e_phentsize != sizeof(Elf64_Phdr) ||
	    eh.e_phnum > 512)
		return -UNW_ENOINFO;
	for (unsigned i = 0; i < eh.e_phnum; i++) {
		Elf64_Phdr ph;

		if (mem_read(sc, base->start + eh.e_phoff + i * sizeof(ph), &ph, sizeof(ph)) < 0)
			return -UNW_ENOINFO;
		if (ph.p_type == PT_LOAD && ph.p_offset == 0 && !have_bias) {
			bias = base->start - (ph.p_vaddr & ~(uint64_t)(PAGE_BYTES - 1));
			have_bias = true;
		} else if (ph.p_type == PT_GNU_EH_FRAME) {
			hdr = ph.p_vaddr;
		}
	}
	if (!have_bias || !hdr)
		return -UNW_ENOINFO;
	hdr += bias;
	if (mem_read(sc, hdr, enc, sizeof(enc)) < 0 || mem_read(sc, hdr + 8, &fde_count, 4) < 0)
		return -UNW_ENOINFO;
	/* version 1; eh_frame_ptr 4 bytes; fde_count udata4; table datarel|sdata4 */
	if (enc[0] != 1 || ((enc[1] & 0x0f) != DW_EH_PE_udata4 && (enc[1] & 0x0f) != DW_EH_PE_sdata4) ||
	    enc[2] != DW_EH_PE_udata4 || enc[3] != (DW_EH_PE_datarel | DW_EH_PE_sdata4))
		return -UNW_ENOINFO;
	memset(di, 0, sizeof(*di));
	di->start_ip = m->start;
	di->end_ip = m->end;
	di->format = UNW_INFO_FORMAT_REMOTE_TABLE;
	di->u.rti.segbase = hdr;
	di->u.rti.table_data = hdr + 12;
	di->u.rti.table_len = (uint64_t)fde_count * 8 / sizeof(unw_word_t);
	return 0;
}

static unw_dyn_info_t *table_for(struct stackcheck *sc, unw_word_t ip)
{
	const struct procfs_mapping *m = find_mapping(sc, ip);
	struct table *t;

	if (!m || !(m->perms & PROCFS_MAP_EXEC))
		return NULL;
	for (size_t i = 0; i < sc->ntables; i++)
		if (sc->tables[i].text_start == m->start)
			return sc->tables[i].ok ? &sc->tables[i].di : NULL;
	if (sc->ntables == MAX_TABLES)
		return NULL;
	t = &sc->tables[sc->ntables++];
	t->text_start = m->start;
	t->ok = load_table(sc, m, &t->di) == 0;
	return t->ok ? &t->di : NULL;
}

#ifdef ARCH_UNW_HIDDEN_CFA_OP
static int cfi_read(void *ctx, uint64_t addr, void *buf, size_t len)
{
	return mem_read(ctx, addr, buf, len);
}

/*
 * Hides the CFI instructions libunwind cannot parse (arch_unwind.h) in the
 * FDE the table gives for ip and in its CIE, once per FDE.  On failure the
 * step has no unwind info; a walk that then ends early is no verdict
 * (confirm_by_frames()).
 */
static int hide_cfa_ops(struct stackcheck *sc, const unw_dyn_info_t *di, unw_word_t ip)
{
	uint64_t fde;
	size_t n;
	int r;

	r = cfi_fde_for(cfi_read, sc, di->u.rti.segbase, di->u.rti.table_data,
			di->u.rti.table_len * sizeof(unw_word_t) / 8, ip, &fde);
	for (size_t i = 0; r == 0 && i < sc->nhidden_fdes; i++)
		if (sc->hidden_fdes[i] == fde)
			return 0;
	if (r == 0 && sc->nhidden_fdes == HIDDEN_FDES_MAX)
		r = -E2BIG;
	if (r == 0)
		r = cfi_find_op(cfi_read, sc, fde, ARCH_UNW_HIDDEN_CFA_OP, sc->hidden + sc->nhidden,
				HIDDEN_MAX - sc->nhidden, &n);
	if (r < 0)
		return r;
	sc->nhidden += n;
	sc->hidden_fdes[sc->nhidden_fdes++] = fde;
	return 0;
}
#endif

static int acc_find_proc_info(unw_addr_space_t as, unw_word_t ip, unw_proc_info_t *pi,
			      int need_unwind_info, void *arg)
{
	unw_dyn_info_t *di = table_for(arg, ip);

	if (!di)
		return -UNW_ENOINFO;
#ifdef ARCH_UNW_HIDDEN_CFA_OP
	if (hide_cfa_ops(arg, di, ip) < 0)
		return -UNW_ENOINFO;
#endif
	return arch_unw_search_unwind_table(as, ip, di, pi, need_unwind_info, arg);
}

static void acc_put_unwind_info(unw_addr_space_t as, unw_proc_info_t *pi, void *arg)
{
	(void)as;
	(void)arg;
	free(pi->unwind_info);  /* the table search allocates it with malloc */
	pi->unwind_info = NULL;
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
	const struct procfs_mapping *m;

	(void)as;
	if (write)
		return -UNW_EREADONLYREG;
	if (mem_read(arg, addr, val, sizeof(*val)) < 0)
		return -UNW_EINVAL;
	/*
	 * A stack's word (a writable mapping's; tables and code are
	 * read-only) may be signed.  Looked up only where words may be: this
	 * runs inside the stop, for every word a walk reads.
	 */
	if (ARCH_UNW_SIGNED_WORDS) {
		m = find_mapping(arg, addr);
		if (m && (m->perms & PROCFS_MAP_WRITE))
			*val = arch_code_address(*val);
	}
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

int stackcheck_new(pid_t pid, pid_t via, const struct procfs_mapping *maps, size_t nmaps,
		   struct stackcheck **ret)
{
	struct stackcheck *sc = calloc(1, sizeof(*sc));

	if (!sc)
		return -ENOMEM;
	sc->chunk = malloc(SCAN_CHUNK_WORDS * sizeof(uint64_t));
	sc->as = unw_create_addr_space(&accessors, 0);
	if (!sc->chunk || !sc->as || cache_init(&sc->pages, CACHE_PAGES) < 0 ||
	    cache_init(&sc->stack, STACK_PAGES) < 0) {
		stackcheck_free(sc);
		return -ENOMEM;
	}
	unw_set_caching_policy(sc->as, UNW_CACHE_GLOBAL);
	sc->pid = pid;
	sc->via = via;
	sc->maps = maps;
	sc->nmaps = nmaps;
	*ret = sc;
	return 0;
}

void stackcheck_reset(struct stackcheck *sc, const struct procfs_mapping *maps, size_t nmaps)
{
	stackcheck_defer_end(sc);
	cache_empty(&sc->pages);
	sc->ntables = 0;
	sc->nhidden = sc->nhidden_fdes = 0;
	sc->walked = sc->scanned = 0;
	sc->scan_bytes = 0;
	sc->maps = maps;
	sc->nmaps = nmaps;
	/* Cached unwind rules are keyed by address; a remapped object would reuse them. */
	unw_flush_cache(sc->as, 0, 0);
}

void stackcheck_preload(struct stackcheck *sc)
{
	/*
	 * Only headers are read (the ELF and program headers at an object's
	 * start, then .eh_frame_hdr's first words), all in read-only pages,
	 * so reading them while the target runs gives what a read inside
	 * the stop would.  The tables themselves are searched during a walk.
	 */
	for (size_t i = 0; i < sc->nmaps && sc->ntables < MAX_TABLES; i++) {
		const struct procfs_mapping *m = &sc->maps[i];

		if ((m->perms & PROCFS_MAP_EXEC) && m->path[0] == '/')
			(void)table_for(sc, m->start);
	}
}

void stackcheck_free(struct stackcheck *sc)
{
	if (!sc)
		return;
	stackcheck_defer_end(sc);
	if (sc->as)
		unw_destroy_addr_space(sc->as);
	cache_free(&sc->pages);
	cache_free(&sc->stack);
	free(sc->chunk);
	free(sc);
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

/*
 * What one thread's check has scanned: each stack from the lowest stack
 * pointer seen on it.  A thread is on at most a few (home, sigaltstack,
 * coroutine); more than MAX_STACKS counts as unsafe.  Off its home stack,
 * the scans also note the lowest word that points into the home stack:
 * the stack pointer saved where the thread left home (a signal frame, a
 * coroutine context) is one of those words, so home is live from there up.
 */
#define MAX_STACKS 8

struct scanned {
	const struct procfs_mapping *m[MAX_STACKS];
	size_t n;
	const struct procfs_mapping *home;  /* NULL: on home, nothing to note */
	uint64_t min_home;                  /* UINT64_MAX: no word points there */
};

static bool already_scanned(const struct scanned *done, const struct procfs_mapping *m)
{
	for (size_t i = 0; i < done->n; i++)
		if (done->m[i] == m)
			return true;
	return false;
}

static void note_home_pointers(void *ctx, const uint64_t *words, size_t n)
{
	struct scanned *done = ctx;

	for (size_t i = 0; i < n; i++)
		if (words[i] >= done->home->start && words[i] < done->home->end &&
		    words[i] < done->min_home)
			done->min_home = words[i];
}

/*
 * Scans the words of m from lo to its end.  0: nothing found; 1: hit;
 * <0: could not scan (unsafe).
 */
static int scan_range(struct stackcheck *sc, pid_t tid, const struct procfs_mapping *m, uint64_t lo,
		      struct scanned *done, const struct stackcheck_span *spans, size_t nspans,
		      struct stackcheck_hit *hit)
{
	bool off_home = done->home && m != done->home;
	uint64_t pc, at;
	int r;

	lo &= ~(uint64_t)7;
	if (m->end - lo > SCAN_MAX_BYTES)
		return -E2BIG;
	r = stackcheck_scan_memory(tid, lo, m->end, sc->chunk, SCAN_CHUNK_WORDS, spans, nspans,
				   off_home ? note_home_pointers : NULL, done, &sc->scan_bytes, &pc,
				   &at);
	if (r == 1) {
		hit->pc = pc;
		hit->at = at;
		hit->frame = -1;
		hit->by_scan = true;
	}
	return r;
}

/* Scans the stack sp lies on, from sp less the red zone, unless done already. */
static int scan_stack(struct stackcheck *sc, pid_t tid, uint64_t sp, struct scanned *done,
		      const struct stackcheck_span *spans, size_t nspans, struct stackcheck_hit *hit)
{
	const struct procfs_mapping *m = find_mapping(sc, sp);
	uint64_t lo;

	if (!m)
		return -EFAULT;  /* a stack mapped after we read the maps: retry */
	if (already_scanned(done, m))
		return 0;
	if (done->n == MAX_STACKS)
		return -E2BIG;
	done->m[done->n++] = m;
	lo = sp >= m->start + ARCH_RED_ZONE ? sp - ARCH_RED_ZONE : m->start;
	return scan_range(sc, tid, m, lo, done, spans, nspans, hit);
}

/*
 * The stack a thread runs on when no handler or coroutine has moved it:
 * the main thread's is "[stack]"; another thread's is the mapping holding
 * its thread pointer, since glibc puts the thread control block at the top
 * of the stack it allocates.  NULL when neither applies (a thread made with
 * a raw clone()).
 */
static const struct procfs_mapping *home_stack(const struct stackcheck *sc, pid_t tid,
						const arch_regs_t *regs)
{
	if (tid == sc->pid) {
		for (size_t i = 0; i < sc->nmaps; i++)
			if (!strcmp(sc->maps[i].path, "[stack]"))
				return &sc->maps[i];
		return NULL;
	}
	return find_mapping(sc, arch_regs_thread_pointer(regs));
}

/*
 * Walks the thread's frames, through signal frames, and scans each stack a
 * frame's stack pointer lies on.  0: complete walk, nothing found; 1: hit;
 * <0: the walk could not finish.
 */
static int walk(struct stackcheck *sc, pid_t tid, const arch_regs_t *regs, struct scanned *done,
		const struct stackcheck_span *spans, size_t nspans, struct stackcheck_hit *hit)
{
	const struct procfs_mapping *m = find_mapping(sc, arch_regs_sp(regs));
	unw_cursor_t cursor;
	int r, frame = 0;

	sc->regs = regs;
	sc->stack_lo = m ? m->start : 0;
	sc->stack_hi = m ? m->end : 0;
	cache_empty(&sc->stack);
	r = unw_init_remote(&cursor, sc->as, sc);
	if (r < 0)
		return -EFAULT;
	for (;;) {
		unw_word_t ip, sp;

		if (unw_get_reg(&cursor, UNW_REG_IP, &ip) < 0 ||
		    unw_get_reg(&cursor, UNW_REG_SP, &sp) < 0)
			return -EFAULT;
		if (stackcheck_pc_unsafe(ip, spans, nspans)) {
			hit->pc = ip;
			hit->frame = frame;
			return 1;
		}
		r = scan_stack(sc, tid, sp, done, spans, nspans, hit);
		if (r != 0)
			return r;
		if (++frame >= WALK_MAX_FRAMES)
			return -ELOOP;
		r = unw_step(&cursor);
		if (r == 0)
			return 0;   /* reached the outermost frame */
		if (r < 0)
			return -EFAULT;
	}
}

/*
 * Queues for the worker the scan scan_stack() would do from sp: true if
 * queued.  What the worker cannot take (no mapping, a stack too large, a
 * full batch) is scanned here as before, with the same verdicts.
 */
static bool defer_scan(struct stackcheck *sc, pid_t tid, uint64_t sp)
{
	const struct procfs_mapping *m = find_mapping(sc, sp);
	uint64_t lo;

	/*
	 * A few threads are scanned here first: waking the worker costs more
	 * than a small process's scans, and a process that has only a few
	 * never waits for it.
	 */
	if (!sc->defer || !m || sc->batch_refused)
		return false;
	lo = (sp >= m->start + ARCH_RED_ZONE ? sp - ARCH_RED_ZONE : m->start) & ~(uint64_t)7;
	if (m->end - lo > SCAN_MAX_BYTES)
		return false;
	/* A large stack is worth handing over at once (the two threads share the scans). */
	if (sc->inline_left > 0 && m->end - lo < DEFER_BYTES) {
		sc->inline_left--;
		return false;
	}
	if (!sc->batch && scanwork_begin(sc->defer_spans, sc->defer_nspans, &sc->batch) < 0) {
		sc->batch = NULL;
		sc->batch_refused = true;
		return false;
	}
	return scanwork_submit(sc->batch, tid, lo, m->end);
}

void stackcheck_defer_begin(struct stackcheck *sc, const struct stackcheck_span *spans,
			    size_t nspans)
{
	stackcheck_defer_end(sc);
	if (nspans == 0 || nspans > STACKCHECK_MAX_SPANS)
		return;
	/* A hit the frames must confirm is judged here, where the thread's registers are. */
	for (size_t i = 0; i < nspans; i++)
		if (spans[i].kind != STACKCHECK_SPAN_BYTES)
			return;
	memcpy(sc->defer_spans, spans, nspans * sizeof(*spans));
	sc->defer_nspans = nspans;
	sc->inline_left = DEFER_AFTER_THREADS;
	sc->defer = true;
}

int stackcheck_collect(struct stackcheck *sc, const struct timespec *deadline,
		       struct stackcheck_hit *hit)
{
	size_t n;

	memset(hit, 0, sizeof(*hit));
	if (!sc->batch)
		return 0;
	if (scanwork_wait(sc->batch, deadline) < 0)
		return -ETIMEDOUT;
	n = scanwork_count(sc->batch);
	for (size_t i = 0; i < n; i++)
		sc->scan_bytes += scanwork_job(sc->batch, i)->bytes;
	for (size_t i = 0; i < n; i++) {
		const struct scanwork_job *j = scanwork_job(sc->batch, i);

		hit->tid = j->tid;
		if (j->r == 1) {
			hit->pc = j->pc;
			hit->frame = -1;
			hit->by_scan = true;
			return -BTG_ERR_BUSY;
		}
		if (j->r < 0)
			return j->r;
	}
	hit->tid = 0;
	return 0;
}

void stackcheck_defer_end(struct stackcheck *sc)
{
	scanwork_end(sc->batch);
	sc->batch = NULL;
	sc->defer = sc->batch_refused = false;
}

/*
 * A word of a confirm span found in a register or on the stack, judged by
 * the thread's frames alone (libunwind-ptrace, through signal frames):
 * -BTG_ERR_BUSY when a frame's PC lies in a CODE or WINDOW span (or any
 * BYTES span), or returns to a CALLER span from an unwinder's frame that
 * holds the code's address (hit filled); 0 when the walk reached the
 * outermost frame without one (the word was stale); another negative
 * code when the walk could not finish (the caller treats that as unsafe
 * too).  A walk that ends below the stack word it is to judge ended
 * early, whatever libunwind says (a step it could not take, then a guess
 * from the link register): it has not seen the frame that word lies in
 * returned from, so it is busy still.
 */
static int confirm_by_frames(struct stackcheck *sc, pid_t tid, const arch_regs_t *regs,
			     const struct stackcheck_span *spans, size_t nspans,
			     struct stackcheck_hit *hit)
{
	const struct procfs_mapping *m = find_mapping(sc, arch_regs_sp(regs));
	const struct procfs_mapping *word_on = hit->at ? find_mapping(sc, hit->at) : NULL;
	bool passed = !hit->at;    /* a frame above the word was reached */
	uint64_t inner[ARCH_UNW_GPRS];
	unw_cursor_t cursor;
	int r, frame = 0;

	sc->walked++;
	sc->regs = regs;
	sc->stack_lo = m ? m->start : 0;
	sc->stack_hi = m ? m->end : 0;
	cache_empty(&sc->stack);
	if (unw_init_remote(&cursor, sc->as, sc) < 0)
		return -EFAULT;
	for (;;) {
		const struct stackcheck_span *in;
		unw_word_t ip, sp, v;

		if (unw_get_reg(&cursor, UNW_REG_IP, &ip) < 0 ||
		    unw_get_reg(&cursor, UNW_REG_SP, &sp) < 0)
			return -EFAULT;
		in = stackcheck_span_of(ip, spans, nspans);
		if (!passed && sp > hit->at && word_on && find_mapping(sc, sp) == word_on)
			passed = true;
		/* At the return itself (frame 0) the thread is back from the call. */
		if (in && (in->kind != STACKCHECK_SPAN_CALLER ||
			   (frame > 0 && stackcheck_holds_code(tid, regs, inner, ARCH_UNW_GPRS, sp,
							      spans, nspans)))) {
			hit->tid = tid;
			hit->pc = arch_code_address(ip);
			hit->frame = frame;
			hit->by_scan = false;
			return -BTG_ERR_BUSY;
		}
		for (int i = 0; i < (int)ARCH_UNW_GPRS; i++)
			inner[i] = unw_get_reg(&cursor, i, &v) < 0 ? 0 : v;
		if (++frame >= WALK_MAX_FRAMES)
			return -ELOOP;
		r = unw_step(&cursor);
		if (r == 0)
			return passed ? 0 : -BTG_ERR_BUSY;
		if (r < 0)
			return -EFAULT;
	}
}

static int check_thread_words(struct stackcheck *sc, pid_t tid, const arch_regs_t *regs,
			      const struct stackcheck_span *spans, size_t nspans,
			      struct stackcheck_hit *hit);

int stackcheck_thread(struct stackcheck *sc, pid_t tid, const arch_regs_t *regs,
		      const struct stackcheck_span *spans, size_t nspans,
		      struct stackcheck_hit *hit)
{
	int r = check_thread_words(sc, tid, regs, spans, nspans, hit);

	if (r == -BTG_ERR_BUSY && hit->frame != 0 && stackcheck_in_confirm_span(hit->pc, spans, nspans))
		return confirm_by_frames(sc, tid, regs, spans, nspans, hit);
	return r;
}

static int check_thread_words(struct stackcheck *sc, pid_t tid, const arch_regs_t *regs,
		      const struct stackcheck_span *spans, size_t nspans,
		      struct stackcheck_hit *hit)
{
	struct scanned done = { .n = 0, .min_home = UINT64_MAX };
	const struct procfs_mapping *home, *here;
	uint64_t lo;
	int r;

	memset(hit, 0, sizeof(*hit));
	hit->tid = tid;
	/*
	 * The addresses its registers hold first (its PC; on some CPUs the
	 * link register, where a leaf keeps its return address and no stack
	 * scan can see it): nothing needs reading to refuse.
	 */
	uint64_t resume[ARCH_MAX_RESUME_REGS];
	size_t nresume = arch_regs_resume(regs, resume);

	for (size_t i = 0; i < nresume; i++) {
		if (stackcheck_pc_unsafe(resume[i], spans, nspans)) {
			hit->pc = resume[i];
			hit->frame = i == 0 ? 0 : 1;  /* the PC executes now, the others later */
			return -BTG_ERR_BUSY;
		}
	}
	/*
	 * Then every other register, as the stack's words are: one may hold
	 * the address of code a guard wrote and will call it (libgcc's
	 * unwinder keeps the segment walk's callback in one).
	 */
	uint64_t word;

	for (size_t off = 0; off + sizeof(word) <= sizeof(*regs); off += sizeof(word)) {
		memcpy(&word, (const uint8_t *)regs + off, sizeof(word));
		if (stackcheck_pc_unsafe(word, spans, nspans)) {
			hit->pc = arch_code_address(word);
			hit->frame = 1;
			return -BTG_ERR_BUSY;
		}
	}
	sc->scanned++;
	here = find_mapping(sc, arch_regs_sp(regs));
	home = home_stack(sc, tid, regs);
	if (here && home && here != home)
		done.home = home;
	/* On its home stack one scan is the whole check, and the worker may do it. */
	if (!done.home && defer_scan(sc, tid, arch_regs_sp(regs)))
		return 0;
	r = scan_stack(sc, tid, arch_regs_sp(regs), &done, spans, nspans, hit);
	if (r == 1)
		return -BTG_ERR_BUSY;
	if (r < 0 || !done.home)
		return r;
	/*
	 * Off its home stack: signal frames may wait on the stacks it came
	 * from.  The walk finds those it can (a failed walk is no verdict: the
	 * scans are); then home is scanned from the lowest word pointing into
	 * it, or whole when none does.
	 */
	sc->walked++;
	r = walk(sc, tid, regs, &done, spans, nspans, hit);
	if (r == 1)
		return -BTG_ERR_BUSY;
	if (r == -E2BIG)
		return r;
	if (already_scanned(&done, home))
		return 0;
	lo = home->start;
	if (done.min_home != UINT64_MAX)
		lo = done.min_home >= home->start + ARCH_RED_ZONE ? done.min_home - ARCH_RED_ZONE
								 : home->start;
	r = scan_range(sc, tid, home, lo, &done, spans, nspans, hit);
	if (r == 1)
		return -BTG_ERR_BUSY;
	return r;
}

void stackcheck_stats(const struct stackcheck *sc, size_t *ret_walked, size_t *ret_scanned,
		      uint64_t *ret_scan_bytes)
{
	*ret_walked = sc->walked;
	*ret_scanned = sc->scanned;
	*ret_scan_bytes = sc->scan_bytes;
}
