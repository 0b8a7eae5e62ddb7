// SPDX-License-Identifier: MIT
/*
 * Site discovery.  For every file the target maps executable, open it
 * through /proc/PID/map_files/START-END (the very inode the target mapped,
 * even if deleted, replaced, or in another mount namespace), fall back to
 * /proc/PID/root/PATH when map_files is not available to us, check the
 * inode matches, mmap it read-only and look up the symbol.  A definition's
 * run-time address comes from the executable mapping that holds its file
 * offset, so no load base or relocation arithmetic is needed.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/sysmacros.h>
#include <sys/uio.h>
#include <unistd.h>

#include "proto.h"
#include "arch.h"
#include "elf.h"
#include "procfs.h"
#include "objcache.h"
#include "ptrace.h"
#include "sitememo.h"
#include "sites.h"
#include "walk.h"

/* Larger files are not objects we could have loaded; refuse to map them. */
#define MAX_OBJECT_SIZE ((uint64_t)4 << 30)

static bool file_seen_before(const struct procfs_mapping *maps, size_t i)
{
	for (size_t j = 0; j < i; j++)
		if ((maps[j].perms & PROCFS_MAP_EXEC) && procfs_same_object(&maps[j], &maps[i]))
			return true;
	return false;
}

/*
 * Opens path with O_PATH, which never runs a device's or FIFO's open
 * method, so a target that maps something strange cannot make a root
 * daemon touch it; only a regular file is kept, its fstat() in *st.  With
 * check_inode, the file must also be the very inode the target mapped.
 */
static int open_regular(const char *path, const struct procfs_mapping *m, bool check_inode,
			struct stat *st)
{
	int pfd = open(path, O_PATH | O_CLOEXEC);

	if (pfd < 0)
		return -errno;
	if (fstat(pfd, st) < 0 || !S_ISREG(st->st_mode) ||
	    (check_inode && (st->st_ino != m->inode || major(st->st_dev) != m->dev_major ||
			     minor(st->st_dev) != m->dev_minor))) {
		close(pfd);
		return -ESTALE;
	}
	return pfd;
}

/* The regular file an O_PATH descriptor names, opened for reading. */
static int reopen_for_reading(int pfd)
{
	char self[64];
	int fd;

	snprintf(self, sizeof(self), "/proc/self/fd/%d", pfd);
	fd = open(self, O_RDONLY | O_CLOEXEC);
	return fd < 0 ? -errno : fd;
}

/*
 * stat() of the object behind mapping m, through the same two paths as
 * open_object() below: nothing is opened, so a cache hit costs one path
 * walk.  0, or -errno (-ESTALE: not a regular file, or not the inode the
 * target mapped).
 */
static int stat_object(pid_t pid, int map_files, const struct procfs_mapping *m, struct stat *st)
{
	char path[PATH_MAX + 64];
	int r;

	/* Through the directory opened once per process: a path walk of one component, not four. */
	if (map_files >= 0) {
		snprintf(path, sizeof(path), "%llx-%llx", (unsigned long long)m->start,
			 (unsigned long long)m->end);
		r = fstatat(map_files, path, st, 0);
	} else {
		snprintf(path, sizeof(path), "/proc/%d/map_files/%llx-%llx", pid,
			 (unsigned long long)m->start, (unsigned long long)m->end);
		r = stat(path, st);
	}
	if (r == 0)
		return S_ISREG(st->st_mode) ? 0 : -ESTALE;
	if (errno == ESTALE || m->deleted || m->path[0] != '/')
		return -errno;
	snprintf(path, sizeof(path), "/proc/%d/root%s", pid, m->path);
	if (stat(path, st) < 0)
		return -errno;
	if (!S_ISREG(st->st_mode) || st->st_ino != m->inode || major(st->st_dev) != m->dev_major ||
	    minor(st->st_dev) != m->dev_minor)
		return -ESTALE;
	return 0;
}

/* An O_PATH descriptor for the object behind mapping m, and its fstat(). */
static int open_object(pid_t pid, const struct procfs_mapping *m, struct stat *st)
{
	char path[PATH_MAX + 64];
	int fd;

	/* The kernel resolves map_files to the mapped file itself: deleted,
	 * replaced, or in another mount namespace, it is the right inode. */
	snprintf(path, sizeof(path), "/proc/%d/map_files/%llx-%llx", pid,
		 (unsigned long long)m->start, (unsigned long long)m->end);
	fd = open_regular(path, m, false, st);
	if (fd >= 0 || fd == -ESTALE)
		return fd;
	if (m->deleted || m->path[0] != '/')
		return fd;
	/* map_files needs CAP_SYS_ADMIN or CAP_CHECKPOINT_RESTORE; the path
	 * through the target's root is next best if it still names our inode. */
	snprintf(path, sizeof(path), "/proc/%d/root%s", pid, m->path);
	return open_regular(path, m, true, st);
}

static int read_target(pid_t pid, uint64_t addr, void *buf, size_t len)
{
	struct iovec local = { .iov_base = buf, .iov_len = len };
	struct iovec remote = { .iov_base = (void *)addr, .iov_len = len };
	ssize_t n = process_vm_readv(pid, &local, 1, &remote, 1, 0);

	if (n == (ssize_t)len)
		return 0;
	if (n < 0 && errno == ESRCH)
		return -BTG_ERR_GONE;
	/*
	 * The process lives but the site, read from its maps moments ago, is
	 * no longer mapped: it exec'd meanwhile (an object with backtrace()
	 * being unloaded is the rare other cause).  Say so, not "EIO".
	 */
	if (n < 0 && errno == EFAULT)
		return -BTG_ERR_EXEC;
	/* Some kernels or LSMs refuse process_vm_readv; /proc/PID/mem is equivalent. */
	char path[64];
	snprintf(path, sizeof(path), "/proc/%d/mem", pid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? -BTG_ERR_GONE : -errno;
	n = pread(fd, buf, len, (off_t)addr);
	int e = errno;
	close(fd);
	if (n == (ssize_t)len)
		return 0;
	return n < 0 ? -e : -EIO;
}

/* Whether a change of several words lands whole: inside one page (ptrace_poke_bytes()). */
static bool change_fits_a_page(uint64_t addr, const struct stub_plan *p)
{
	return p->nwords == 1 || (addr + p->offset) / PTRACE_POKE_PAGE ==
				 (addr + p->offset + p->len - 1) / PTRACE_POKE_PAGE;
}

/*
 * The plan for s, from the file's bytes at it, code_len of them: with the
 * whole function when its size is known and they hold it (aarch64's guard
 * needs its return path), else from the compared bytes alone.
 */
static int plan_site(struct site *s, const struct elf_def *def, const uint8_t *bytes,
		     size_t code_len)
{
	if (def->size >= s->ctx_len && def->size <= code_len)
		return stub_plan_function(bytes, (size_t)def->size, s->ctx_len, s->addr,
					  arch_cpu_features(), &s->plan);
	return stub_plan(s->orig, s->ctx_len, arch_cpu_features(), &s->plan);
}

/*
 * bytes: the file's bytes at def, def->file_avail of them (at most
 * SITE_CODE_LEN needed); wf: what the segment walk may do there.
 */
static int add_site(struct site_list *list, const struct procfs_mapping *m,
		    const struct elf_def *def, const uint8_t *bytes, const struct walk_facts *wf)
{
	uint64_t addr = m->start + (def->file_offset - m->offset);
	size_t ctx = SITE_CTX_LEN, code_len = SITE_CODE_LEN;
	struct site *s, *v;

	for (size_t i = 0; i < list->n; i++)
		if (list->v[i].addr == addr)
			return 0;
	/* Every site is checked and reported; more than the reply can carry is refused. */
	if (list->n == PROTO_MAX_SITES)
		return -BTG_ERR_LIMIT;
	if (def->file_avail < code_len)
		code_len = (size_t)def->file_avail;
	if (m->end - addr < code_len)
		code_len = (size_t)(m->end - addr);
	if (code_len < ctx)
		ctx = code_len;
	v = realloc(list->v, (list->n + 1) * sizeof(*v));
	if (!v)
		return -ENOMEM;
	list->v = v;
	s = &v[list->n];
	memset(s, 0, sizeof(*s));
	snprintf(s->object, sizeof(s->object), "%s", m->path);
	s->deleted = m->deleted;
	s->from_symtab = def->from_symtab;
	s->addr = addr;
	s->ctx_len = ctx;
	memcpy(s->orig, bytes, ctx);
	if (plan_site(s, def, bytes, code_len) < 0)
		return -BTG_ERR_ELF;  /* too close to the end of its segment to patch */
	/*
	 * A change of several words lands whole only inside one page
	 * (ptrace_poke_bytes()); across a page boundary the stub follows the
	 * first instruction, and if that crosses one too it goes at the
	 * entry, in one word, as it did before it followed first instructions.
	 */
	if (!change_fits_a_page(addr, &s->plan) &&
	    (stub_plan_following(s->orig, ctx, arch_cpu_features(), &s->plan) < 0 ||
	     !change_fits_a_page(addr, &s->plan)) &&
	    stub_plan_at_entry(s->orig, ctx, arch_cpu_features(), &s->plan) < 0)
		return -BTG_ERR_ELF;
	s->held = s->plan;
	walk_plan(s, m, wf);
	list->n++;
	return 0;
}

/*
 * Parses one object file for definitions, keeping each with the file's
 * first bytes of it.  0 with out->n == 0 when it defines none (or is not
 * an ELF object of ours).
 */
static int parse_object(int fd, const struct stat *st, struct objcache_defs *out)
{
	struct elf_def defs[ELF_MAX_DEFS];
	size_t ndefs = 0;
	uint8_t magic[4];
	void *img;
	int r;

	out->n = 0;
	if ((uint64_t)st->st_size > MAX_OBJECT_SIZE ||
	    pread(fd, magic, sizeof(magic), 0) != sizeof(magic) || memcmp(magic, "\177ELF", 4))
		return 0;  /* not an ELF object: a data file mapped executable, say */
	img = mmap(NULL, (size_t)st->st_size, PROT_READ, MAP_PRIVATE, fd, 0);
	if (img == MAP_FAILED)
		return -errno;
	r = elf_find_symbol(img, (size_t)st->st_size, SITE_SYMBOL, defs, ELF_MAX_DEFS, &ndefs);
	if (r == -ENOEXEC)
		r = 0;  /* another architecture's or class's file: cannot hold our code */
	for (size_t d = 0; r == 0 && d < ndefs; d++) {
		struct elf_def *def = &out->defs[out->n];

		if (defs[d].file_offset >= (uint64_t)st->st_size)
			continue;
		*def = defs[d];
		if (def->file_avail > (uint64_t)st->st_size - def->file_offset)
			def->file_avail = (uint64_t)st->st_size - def->file_offset;
		memcpy(out->bytes[out->n], (const uint8_t *)img + def->file_offset,
		       def->file_avail < SITE_CODE_LEN ? (size_t)def->file_avail : SITE_CODE_LEN);
		walk_facts_read(img, (size_t)st->st_size, def, (size_t)sysconf(_SC_PAGESIZE),
				&out->walk[out->n]);
		out->n++;
	}
	munmap(img, (size_t)st->st_size);
	return r;
}

/* Looks up the symbol in one object and adds a site per executable mapping that holds it. */
static int scan_object(pid_t pid, int map_files, const struct procfs_mapping *maps, size_t nmaps,
		       size_t first, struct site_list *list)
{
	struct objcache_defs defs;
	struct stat st;
	int pfd, fd, r = 0;

	/*
	 * The cache is keyed by what stat() of the mapped inode says: a file
	 * seen before costs that alone.  Only one not seen before is opened
	 * (O_PATH first, see open_regular()), stat'ed again through the
	 * descriptor - what is parsed is what the key describes - and parsed.
	 */
	r = stat_object(pid, map_files, &maps[first], &st);
	if (r < 0 && r != -ESTALE)
		return r;
	if (r < 0 || !objcache_get(&st, &defs)) {
		pfd = open_object(pid, &maps[first], &st);
		if (pfd < 0)
			return pfd;
		r = 0;
		if (!objcache_get(&st, &defs)) {
			fd = reopen_for_reading(pfd);
			r = fd < 0 ? fd : parse_object(fd, &st, &defs);
			if (r == 0)
				objcache_put(&st, &defs);
			if (fd >= 0)
				close(fd);
		}
		close(pfd);
	}
	for (size_t d = 0; r == 0 && d < defs.n; d++) {
		for (size_t i = first; r == 0 && i < nmaps; i++) {
			const struct procfs_mapping *m = &maps[i];

			if (!(m->perms & PROCFS_MAP_EXEC) || !procfs_same_object(m, &maps[first]))
				continue;
			if (defs.defs[d].file_offset < m->offset ||
			    defs.defs[d].file_offset - m->offset >= m->end - m->start)
				continue;
			r = add_site(list, m, &defs.defs[d], defs.bytes[d], &defs.walk[d]);
		}
	}
	return r;
}

/* sites_read(), and why it failed. */
static int read_sites(pid_t pid, struct site_list *list, char *why, size_t why_len)
{
	int r = sites_read(pid, list);

	if (r < 0)
		snprintf(why, why_len, "cannot read the memory of process %d: %s", pid,
			 proto_strerror(r));
	return r;
}

int sites_find_remembered(pid_t pid, const struct procfs_mapping *maps, size_t nmaps,
			  struct site_list *ret, char *why, size_t why_len)
{
	struct site_list list;
	int r;

	if (!sitememo_get(pid, maps, nmaps, &list))
		return sites_find(pid, maps, nmaps, ret, why, why_len);
	r = read_sites(pid, &list, why, why_len);
	if (r < 0) {
		sites_free(&list);
		return r;
	}
	*ret = list;
	return 0;
}

int sites_find(pid_t pid, const struct procfs_mapping *maps, size_t nmaps,
	       struct site_list *ret, char *why, size_t why_len)
{
	struct site_list list = { 0 };
	size_t failed = 0;
	char path[48];
	int r, first_err = 0, map_files;

	/* -1 when it cannot be opened: stat_object() then walks the whole path, as open_object() does. */
	snprintf(path, sizeof(path), "/proc/%d/map_files", (int)pid);
	map_files = open(path, O_PATH | O_DIRECTORY | O_CLOEXEC);
	for (size_t i = 0; i < nmaps; i++) {
		if (!(maps[i].perms & PROCFS_MAP_EXEC) || !maps[i].inode || file_seen_before(maps, i))
			continue;
		r = scan_object(pid, map_files, maps, nmaps, i, &list);
		if (r == -ENOMEM || r == -BTG_ERR_LIMIT) {
			if (r == -BTG_ERR_LIMIT)
				snprintf(why, why_len, "more than %u backtrace() definitions are loaded",
					 PROTO_MAX_SITES);
			goto out_free;
		}
		if (r < 0) {
			if (!failed++) {
				first_err = r;
				snprintf(why, why_len, "cannot read %s%s: %s", maps[i].path,
					 maps[i].deleted ? " (deleted)" : "",
					 r == -ESTALE ? "not the regular file the process mapped" :
					 proto_strerror(r));
			}
		}
	}
	/*
	 * An object we could not read might define backtrace; claiming "none"
	 * or "guarded" would then be a lie, so that is an error.
	 */
	if (failed) {
		/* A process killed meanwhile makes its /proc files ENOENT or ESRCH, by timing. */
		r = first_err == -BTG_ERR_GONE || first_err == -ENOENT || first_err == -ESRCH ?
			-BTG_ERR_GONE : -BTG_ERR_ELF;
		/* Short of descriptors or memory ourselves: that, not the file's fault. */
		if (proto_shortage(first_err))
			r = first_err;
		goto out_free;
	}
	r = read_sites(pid, &list, why, why_len);
	if (r < 0)
		goto out_free;
	sitememo_put(pid, maps, nmaps, &list);
	*ret = list;
	list.v = NULL;
	r = 0;
out_free:
	if (map_files >= 0)
		close(map_files);
	sites_free(&list);
	return r;
}

/*
 * s->state, ->held and ->breakpoint from s->mem, against every placement
 * the site may hold (stub_plans()): the plan's, those that keep more of
 * the prologue (a guard re-planned around a breakpoint), an older
 * btguard's at the entry (before it stepped over first instructions).
 * The first that finds the site guarded holds it; else the plan's answer
 * stands (original, torn or foreign), or a torn one of another's.
 *
 * An original site with a breakpoint in the words the plan writes (a
 * uprobe at an instruction of the file there, say) is held by the first
 * placement clear of every breakpoint: the guard then keeps the probed
 * instruction, a hit on it replays the file's instruction and resumes in
 * the file's code or at our first byte, in the state our undo expects, and
 * the probe's removal writes back a byte we left as the file has it.  A
 * thread the kernel stopped right after such a replay is at our first
 * byte, where it runs the new bytes cleanly, not inside them.  With no
 * such placement the plan's stands: guard writes over the breakpoint.
 */
static void classify_entry(struct site *s)
{
	struct stub_plan plans[STUB_MAX_PLANS];
	size_t n = stub_plans(s->orig, s->ctx_len, arch_cpu_features(), &s->plan, plans,
			      STUB_MAX_PLANS);
	int state;

	s->held = s->plan;
	s->state = stub_classify(s->orig, s->mem, s->ctx_len, &s->plan, &s->breakpoint);
	if (s->state == PROTO_SITE_GUARDED)
		return;
	for (size_t i = 1; i < n; i++) {
		bool breakpoint;

		if (!change_fits_a_page(s->addr, &plans[i]))
			continue;
		state = stub_classify(s->orig, s->mem, s->ctx_len, &plans[i], &breakpoint);
		if (state == PROTO_SITE_GUARDED ||
		    (state == PROTO_SITE_TORN && s->state == PROTO_SITE_FOREIGN)) {
			s->held = plans[i];
			s->state = state;
			s->breakpoint = breakpoint;
			if (state == PROTO_SITE_GUARDED)
				return;
		}
	}
	if (s->state != PROTO_SITE_ORIGINAL || !s->breakpoint ||
	    stub_plan_clear_of_breakpoints(s->orig, s->mem, s->ctx_len, &s->plan))
		return;
	for (size_t i = 1; i < n; i++) {
		if (plans[i].offset > s->plan.offset && change_fits_a_page(s->addr, &plans[i]) &&
		    stub_plan_clear_of_breakpoints(s->orig, s->mem, s->ctx_len, &plans[i])) {
			s->held = plans[i];
			return;
		}
	}
}

/*
 * The site's state from its entry's and its walk's: foreign if either is,
 * then torn if either is, then guarded if either is (both at once, left
 * by a daemon stopped between writing one form and removing the other,
 * is guarded twice over: the stub answers first).
 */
static void classify(struct site *s)
{
	int e, w;

	classify_entry(s);
	s->entry_state = s->state;
	walk_classify(s);
	e = s->entry_state;
	w = s->walk.state;
	if (e == PROTO_SITE_FOREIGN || w == PROTO_SITE_FOREIGN)
		s->state = PROTO_SITE_FOREIGN;
	else if (e == PROTO_SITE_TORN || w == PROTO_SITE_TORN)
		s->state = PROTO_SITE_TORN;
	else if (e == PROTO_SITE_GUARDED || w == PROTO_SITE_GUARDED)
		s->state = PROTO_SITE_GUARDED;
	else
		s->state = PROTO_SITE_ORIGINAL;
}

int sites_read(pid_t pid, struct site_list *list)
{
	for (size_t i = 0; i < list->n; i++) {
		struct site *s = &list->v[i];
		int r = read_target(pid, s->addr, s->mem, s->ctx_len);

		if (r == 0 && s->walk.planned)
			r = read_target(pid, s->walk.call, s->walk.call_mem, ARCH_WALK_CALL_LEN);
		if (r == 0 && s->walk.planned)
			r = read_target(pid, s->walk.code, s->walk.code_mem, s->walk.code_len);
		if (r < 0)
			return r;
		classify(s);
	}
	return 0;
}

int sites_proc_state(const struct site_list *list)
{
	size_t guarded = 0, original = 0, torn = 0;

	if (list->n == 0)
		return PROTO_PROC_NONE;
	for (size_t i = 0; i < list->n; i++) {
		if (list->v[i].state == PROTO_SITE_FOREIGN)
			return PROTO_PROC_FOREIGN;
		if (list->v[i].state == PROTO_SITE_GUARDED)
			guarded++;
		else if (list->v[i].state == PROTO_SITE_TORN)
			torn++;
		else
			original++;
	}
	/* A torn site is part ours, part not: never "guarded", nor "unguarded" (nothing to undo). */
	if (torn || (guarded && original))
		return PROTO_PROC_PARTIAL;
	return guarded ? PROTO_PROC_GUARDED : PROTO_PROC_UNGUARDED;
}

enum site_form site_form(bool guard, bool walk, const struct site *s)
{
	if (!guard)
		return SITE_FORM_ORIGINAL;
	return walk && s->walk.planned ? SITE_FORM_WALK : SITE_FORM_STUB;
}

bool site_walks(const struct site *s)
{
	return s->walk.state == PROTO_SITE_GUARDED && s->entry_state == PROTO_SITE_ORIGINAL;
}

bool site_entry_wants_write(enum site_form form, const struct site *s)
{
	if (s->entry_state == PROTO_SITE_TORN)
		return true;
	return form == SITE_FORM_STUB ? s->entry_state == PROTO_SITE_ORIGINAL :
					s->entry_state == PROTO_SITE_GUARDED;
}

bool site_wants_write(enum site_form form, const struct site *s)
{
	return site_entry_wants_write(form, s) || walk_code_changes(s, form == SITE_FORM_WALK) ||
	       walk_call_changes(s, form == SITE_FORM_WALK);
}

/* [*lo, *hi): the bytes of [from, to) where a and b differ; *lo == *hi when none do. */
static void differing(const uint8_t *a, const uint8_t *b, size_t from, size_t to, size_t *lo,
		      size_t *hi)
{
	*lo = *hi = from;
	for (size_t i = from; i < to; i++) {
		if (a[i] == b[i])
			continue;
		if (*lo == *hi)
			*lo = i;
		*hi = i + 1;
	}
}

void site_write_plan(const struct site *s, bool guarded, struct site_write *ret)
{
	const struct stub_plan *p = &s->held;
	size_t kept_end = p->offset + p->keep, end = p->offset + p->len;
	uint8_t form[SITE_CTX_LEN];

	if (guarded)
		stub_apply(s->orig, s->ctx_len, p, form);
	else
		memcpy(form, s->orig, s->ctx_len);
	memcpy(ret->want, s->mem, s->ctx_len);
	/* The placement's bytes take the form's; a kept byte an unguard finds a breakpoint over stays. */
	for (size_t i = p->offset; i < end; i++)
		if (guarded || i >= kept_end || s->mem[i] == s->orig[i])
			ret->want[i] = form[i];
	differing(s->mem, ret->want, kept_end, end, &ret->lo, &ret->hi);
	differing(s->mem, ret->want, p->offset, kept_end, &ret->kept_lo, &ret->kept_hi);
}

uint64_t site_change_lo(const struct site *s)
{
	return s->addr + s->held.offset;
}

void sites_free(struct site_list *list)
{
	free(list->v);
	list->v = NULL;
	list->n = 0;
}
