// SPDX-License-Identifier: MIT
/*
 * ELF symbol look-up over an object's bytes in memory.  The image may come
 * from any file a target maps, so it is treated as hostile: every offset,
 * count and size read from it is checked with in_range() before the bytes
 * are touched, every struct is copied out with memcpy (a fuzzer's buffer
 * need not be aligned), every hash chain walk is bounded.  A bad image
 * gives -ENOEXEC (not ours) or -EBADMSG (broken), never a read past len.
 *
 * Look-up order mirrors what a caller of NAME would reach: the dynamic
 * symbol table through DT_GNU_HASH (else DT_HASH), then, only if that finds
 * nothing, the .symtab section of a static executable.
 */
#include <elf.h>
#include <errno.h>
#include <string.h>

#include "arch.h"
#include "elf.h"

/* [off, off + size) lies within an image of len bytes; cannot overflow. */
static bool in_range(size_t len, uint64_t off, uint64_t size)
{
	return off <= len && size <= len - off;
}

struct image {
	const uint8_t *p;
	size_t len;
	Elf64_Ehdr eh;
	const char *name;
	size_t name_len;
	uint32_t gnu_h, sysv_h;
	struct elf_def *out;
	size_t max, n;
};

/* The dynamic section's facts, as file offsets. */
struct dyn {
	bool has_symtab, has_strtab, has_gnu_hash, has_hash, has_versym;
	uint64_t symtab, strtab, strsz, gnu_hash, hash, versym;
	uint64_t nsyms;         /* symbols that fit between symtab and its segment's end */
};

uint32_t elf_gnu_hash(const char *name)
{
	uint32_t h = 5381;

	for (const unsigned char *s = (const unsigned char *)name; *s; s++)
		h = h * 33 + *s;
	return h;
}

uint32_t elf_sysv_hash(const char *name)
{
	uint32_t h = 0, g;

	for (const unsigned char *s = (const unsigned char *)name; *s; s++) {
		h = (h << 4) + *s;
		g = h & 0xf0000000u;
		if (g)
			h ^= g >> 24;
		h &= ~g;
	}
	return h;
}

static int check_header(struct image *im)
{
	const uint8_t *id = im->p;

	if (im->len < SELFMAG || memcmp(id, ELFMAG, SELFMAG) != 0)
		return -ENOEXEC;
	if (im->len < EI_NIDENT)
		return -EBADMSG;
	if (id[EI_CLASS] != ELFCLASS64 || id[EI_DATA] != ELFDATA2LSB ||
	    id[EI_VERSION] != EV_CURRENT)
		return -ENOEXEC;
	if (im->len < sizeof(Elf64_Ehdr))
		return -EBADMSG;
	memcpy(&im->eh, im->p, sizeof(im->eh));
	if (im->eh.e_machine != ARCH_ELF_MACHINE ||
	    (im->eh.e_type != ET_DYN && im->eh.e_type != ET_EXEC))
		return -ENOEXEC;
	/* PN_XNUM (extended numbering) never occurs in a loadable object. */
	if (im->eh.e_phnum == 0 || im->eh.e_phnum == PN_XNUM ||
	    im->eh.e_phentsize != sizeof(Elf64_Phdr) ||
	    !in_range(im->len, im->eh.e_phoff, (uint64_t)im->eh.e_phnum * sizeof(Elf64_Phdr)))
		return -EBADMSG;
	return 0;
}

static Elf64_Phdr phdr(const struct image *im, unsigned i)
{
	Elf64_Phdr ph;

	memcpy(&ph, im->p + im->eh.e_phoff + (uint64_t)i * sizeof(ph), sizeof(ph));
	return ph;
}

/*
 * Translates a virtual address of the object to a file offset through the
 * PT_LOAD segment whose file image holds it.  *ret_avail: bytes of that
 * file image from the offset on, clamped to the image so that
 * [off, off + avail) is always readable.  -ENOENT when no segment has file
 * bytes there (.bss, or a bogus address).
 */
static int vaddr_to_off(const struct image *im, uint64_t vaddr, uint64_t *ret_off,
			uint64_t *ret_avail)
{
	for (unsigned i = 0; i < im->eh.e_phnum; i++) {
		Elf64_Phdr ph = phdr(im, i);
		uint64_t delta, off, avail;

		if (ph.p_type != PT_LOAD || vaddr < ph.p_vaddr)
			continue;
		delta = vaddr - ph.p_vaddr;
		if (delta >= ph.p_filesz || ph.p_offset > UINT64_MAX - delta)
			continue;
		off = ph.p_offset + delta;
		if (off >= im->len)
			return -ENOENT;
		avail = ph.p_filesz - delta;
		if (avail > im->len - off)
			avail = im->len - off;
		*ret_off = off;
		if (ret_avail)
			*ret_avail = avail;
		return 0;
	}
	return -ENOENT;
}

/* Same, for a table that must lie wholly in one segment's file bytes. */
static int table_off(const struct image *im, uint64_t vaddr, uint64_t size, uint64_t *ret_off)
{
	uint64_t off, avail;

	if (vaddr_to_off(im, vaddr, &off, &avail) < 0 || avail < size)
		return -EBADMSG;
	*ret_off = off;
	return 0;
}

static int read_dynamic(const struct image *im, struct dyn *d)
{
	bool have_dynamic = false;
	Elf64_Phdr dynph = { 0 };
	uint64_t avail;

	memset(d, 0, sizeof(*d));
	for (unsigned i = 0; i < im->eh.e_phnum; i++) {
		Elf64_Phdr ph = phdr(im, i);

		if (ph.p_type == PT_DYNAMIC) {
			dynph = ph;
			have_dynamic = true;
			break;
		}
	}
	if (!have_dynamic)
		return 0;
	if (!in_range(im->len, dynph.p_offset, dynph.p_filesz))
		return -EBADMSG;

	for (uint64_t k = 0; k < dynph.p_filesz / sizeof(Elf64_Dyn); k++) {
		Elf64_Dyn dy;

		memcpy(&dy, im->p + dynph.p_offset + k * sizeof(dy), sizeof(dy));
		if (dy.d_tag == DT_NULL)
			break;
		switch (dy.d_tag) {
		case DT_SYMTAB:   d->symtab = dy.d_un.d_ptr; d->has_symtab = true; break;
		case DT_STRTAB:   d->strtab = dy.d_un.d_ptr; d->has_strtab = true; break;
		case DT_STRSZ:    d->strsz = dy.d_un.d_val; break;
		case DT_GNU_HASH: d->gnu_hash = dy.d_un.d_ptr; d->has_gnu_hash = true; break;
		case DT_HASH:     d->hash = dy.d_un.d_ptr; d->has_hash = true; break;
		case DT_VERSYM:   d->versym = dy.d_un.d_ptr; d->has_versym = true; break;
		case DT_SYMENT:
			if (dy.d_un.d_val != sizeof(Elf64_Sym))
				return -EBADMSG;
			break;
		default:
			break;
		}
	}
	if (!d->has_symtab || !d->has_strtab || (!d->has_gnu_hash && !d->has_hash)) {
		d->has_symtab = false;   /* nothing to look up through */
		return 0;
	}

	/* Translate to file offsets.  The symbol count is not recorded in
	 * .dynamic; bound every index by what fits in symtab's segment. */
	if (vaddr_to_off(im, d->symtab, &d->symtab, &avail) < 0)
		return -EBADMSG;
	d->nsyms = avail / sizeof(Elf64_Sym);
	if (d->strsz == 0) {
		if (vaddr_to_off(im, d->strtab, &d->strtab, &d->strsz) < 0)
			return -EBADMSG;
	} else if (table_off(im, d->strtab, d->strsz, &d->strtab) < 0) {
		return -EBADMSG;
	}
	if (d->has_gnu_hash && table_off(im, d->gnu_hash, 16, &d->gnu_hash) < 0)
		return -EBADMSG;
	if (d->has_hash) {
		uint32_t nchain;

		if (table_off(im, d->hash, 8, &d->hash) < 0)
			return -EBADMSG;
		/* DT_HASH's nchain is the exact symbol count: a tighter
		 * bound for GNU hash chains too. */
		memcpy(&nchain, im->p + d->hash + 4, sizeof(nchain));
		if (nchain < d->nsyms)
			d->nsyms = nchain;
	}
	if (d->has_versym && vaddr_to_off(im, d->versym, &d->versym, NULL) < 0)
		return -EBADMSG;
	return 0;
}

static uint32_t rd32(const struct image *im, uint64_t off)
{
	uint32_t v;

	memcpy(&v, im->p + off, sizeof(v));
	return v;
}

/* Is the string at strtab[st_name] exactly the wanted name? */
static bool name_matches(const struct image *im, uint64_t strtab, uint64_t strsz,
			 uint32_t st_name)
{
	if (st_name >= strsz || strsz - st_name <= im->name_len)
		return false;
	return memcmp(im->p + strtab + st_name, im->name, im->name_len) == 0 &&
	       im->p[strtab + st_name + im->name_len] == '\0';
}

/* Records a definition if it passes the filters and has file bytes. */
static void consider(struct image *im, const Elf64_Sym *sym, bool from_symtab)
{
	unsigned type = ELF64_ST_TYPE(sym->st_info), bind = ELF64_ST_BIND(sym->st_info);
	struct elf_def def = { .value = sym->st_value, .size = sym->st_size,
			       .from_symtab = from_symtab };

	/* STT_GNU_IFUNC names a resolver, not the code a caller runs. */
	if (sym->st_shndx == SHN_UNDEF || type != STT_FUNC ||
	    (bind != STB_GLOBAL && bind != STB_WEAK))
		return;
	if (vaddr_to_off(im, sym->st_value, &def.file_offset, &def.file_avail) < 0)
		return;
	for (size_t i = 0; i < im->n; i++)
		if (im->out[i].value == def.value)
			return;
	if (im->n < im->max)
		im->out[im->n++] = def;
}

/* Examines dynamic symbol idx: name, version, filters. */
static int dyn_symbol(struct image *im, const struct dyn *d, uint64_t idx)
{
	Elf64_Sym sym;

	if (idx >= d->nsyms)
		return -EBADMSG;
	memcpy(&sym, im->p + d->symtab + idx * sizeof(sym), sizeof(sym));
	if (!name_matches(im, d->strtab, d->strsz, sym.st_name))
		return 0;
	if (d->has_versym) {
		uint16_t ver;

		if (!in_range(im->len, d->versym, (idx + 1) * sizeof(ver)))
			return -EBADMSG;
		memcpy(&ver, im->p + d->versym + idx * sizeof(ver), sizeof(ver));
		/* Hidden: only reachable by explicit version (foo@V1, not
		 * foo@@V2); index 0: local to the object. */
		if ((ver & 0x8000) || (ver & 0x7fff) == 0)
			return 0;
	}
	consider(im, &sym, false);
	return 0;
}

static int lookup_gnu_hash(struct image *im, const struct dyn *d)
{
	uint64_t t = d->gnu_hash, bloom, buckets, chain, word, mask;
	uint32_t nbuckets = rd32(im, t), symoffset = rd32(im, t + 4);
	uint32_t bloom_size = rd32(im, t + 8), bloom_shift = rd32(im, t + 12);
	uint32_t h = im->gnu_h, idx;

	/* The bloom index is taken modulo bloom_size and the second bit is
	 * h >> bloom_shift: both must be usable before anything is read. */
	if (bloom_size == 0 || bloom_shift >= 32)
		return -EBADMSG;
	bloom = t + 16;
	buckets = bloom + (uint64_t)bloom_size * 8;
	chain = buckets + (uint64_t)nbuckets * 4;
	if (!in_range(im->len, t, chain - t))
		return -EBADMSG;
	if (nbuckets == 0)
		return 0;

	memcpy(&word, im->p + bloom + ((h / 64) % bloom_size) * 8, sizeof(word));
	mask = (1ull << (h % 64)) | (1ull << ((h >> bloom_shift) % 64));
	if ((word & mask) != mask)
		return 0;
	idx = rd32(im, buckets + (uint64_t)(h % nbuckets) * 4);
	if (idx == 0)
		return 0;
	if (idx < symoffset)
		return -EBADMSG;
	/* The chain ends at an entry with its low bit set; a chain that does
	 * not end runs into the symbol table's or the image's end. */
	for (;; idx++) {
		uint64_t at = chain + (uint64_t)(idx - symoffset) * 4;
		uint32_t ch;
		int r;

		if (!in_range(im->len, at, 4) || idx >= d->nsyms)
			return -EBADMSG;
		ch = rd32(im, at);
		if ((ch | 1) == (h | 1)) {
			r = dyn_symbol(im, d, idx);
			if (r < 0)
				return r;
		}
		if (ch & 1)
			return 0;
	}
}

static int lookup_sysv_hash(struct image *im, const struct dyn *d)
{
	uint64_t t = d->hash;
	uint32_t nbucket = rd32(im, t), nchain = rd32(im, t + 4), idx;
	uint64_t buckets = t + 8, chains = buckets + (uint64_t)nbucket * 4;

	if (!in_range(im->len, t, 8 + ((uint64_t)nbucket + nchain) * 4))
		return -EBADMSG;
	if (nbucket == 0)
		return 0;
	idx = rd32(im, buckets + (uint64_t)(im->sysv_h % nbucket) * 4);
	/* nchain is the number of symbols: a longer walk is a cycle. */
	for (uint64_t steps = 0; idx != STN_UNDEF; steps++) {
		int r;

		if (idx >= nchain || steps >= nchain)
			return -EBADMSG;
		r = dyn_symbol(im, d, idx);
		if (r < 0)
			return r;
		idx = rd32(im, chains + (uint64_t)idx * 4);
	}
	return 0;
}

static Elf64_Shdr shdr(const struct image *im, uint64_t i)
{
	Elf64_Shdr sh;

	memcpy(&sh, im->p + im->eh.e_shoff + i * sizeof(sh), sizeof(sh));
	return sh;
}

/* Linear scan of every SHT_SYMTAB section (static executables). */
static int lookup_symtab(struct image *im)
{
	uint64_t shnum = im->eh.e_shnum;

	/* No section headers (or stripped of them): simply no .symtab. */
	if (im->eh.e_shoff == 0)
		return 0;
	if (im->eh.e_shentsize != sizeof(Elf64_Shdr) ||
	    !in_range(im->len, im->eh.e_shoff, sizeof(Elf64_Shdr)))
		return -EBADMSG;
	/* Extended numbering: with 0xff00 or more sections the count lives
	 * in section 0's sh_size. */
	if (shnum == 0)
		shnum = shdr(im, 0).sh_size;
	if (shnum > im->len / sizeof(Elf64_Shdr) ||
	    !in_range(im->len, im->eh.e_shoff, shnum * sizeof(Elf64_Shdr)))
		return -EBADMSG;

	for (uint64_t i = 0; i < shnum; i++) {
		Elf64_Shdr sh = shdr(im, i), str;

		if (sh.sh_type != SHT_SYMTAB)
			continue;
		if (sh.sh_entsize != sizeof(Elf64_Sym) || sh.sh_link >= shnum ||
		    !in_range(im->len, sh.sh_offset, sh.sh_size))
			return -EBADMSG;
		str = shdr(im, sh.sh_link);
		if (str.sh_type != SHT_STRTAB || !in_range(im->len, str.sh_offset, str.sh_size))
			return -EBADMSG;
		for (uint64_t k = 0; k < sh.sh_size / sizeof(Elf64_Sym); k++) {
			Elf64_Sym sym;

			memcpy(&sym, im->p + sh.sh_offset + k * sizeof(sym), sizeof(sym));
			if (name_matches(im, str.sh_offset, str.sh_size, sym.st_name))
				consider(im, &sym, true);
		}
	}
	return 0;
}

int elf_find_symbol(const uint8_t *img, size_t len, const char *name,
		    struct elf_def *ret, size_t max, size_t *ret_n)
{
	struct image im = { .p = img, .len = len, .name = name, .name_len = strlen(name),
			    .gnu_h = elf_gnu_hash(name), .sysv_h = elf_sysv_hash(name),
			    .out = ret, .max = max };
	struct dyn d;
	int r;

	if (!img)
		return -ENOEXEC;
	r = check_header(&im);
	if (r < 0)
		return r;
	r = read_dynamic(&im, &d);
	if (r < 0)
		return r;
	if (d.has_symtab) {
		r = d.has_gnu_hash ? lookup_gnu_hash(&im, &d) : lookup_sysv_hash(&im, &d);
		if (r < 0)
			return r;
	}
	if (im.n == 0) {
		r = lookup_symtab(&im);
		if (r < 0)
			return r;
	}
	*ret_n = im.n;
	return 0;
}
