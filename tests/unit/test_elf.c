// SPDX-License-Identifier: MIT
/*
 * Unit tests for the ELF symbol look-up (elf.c).  The answers are checked
 * against the dynamic linker's (dlsym, dladdr) on the real libc and on small
 * libraries built here with gcc, one per hash style; a static executable
 * exercises .symtab; and the real libc, truncated and with bytes flipped in
 * its headers and tables, must give an error and never a crash (run this
 * under ASan: `make SANITIZE=1 BUILD=build/asan build/asan/tests/test_elf`).
 */
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <execinfo.h>
#include <fcntl.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <cmocka.h>

#include "arch_stub.h"
#include "elf.h"

#define NFUNCS 300

static char dir[] = "/tmp/btguard-test-elf.XXXXXX";
static bool have_static;

static void path_of(char *out, size_t n, const char *name)
{
	snprintf(out, n, "%s/%s", dir, name);
}

static int run(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int run(const char *fmt, ...)
{
	char cmd[1024];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(cmd, sizeof(cmd), fmt, ap);
	va_end(ap);
	return system(cmd);
}

/* A whole file in a malloc'ed block of exactly its size (so ASan sees any
 * read past it). */
static uint8_t *slurp(const char *path, size_t *len)
{
	struct stat sb;
	uint8_t *b;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	assert_true(fd >= 0);
	assert_int_equal(fstat(fd, &sb), 0);
	*len = (size_t)sb.st_size;
	b = malloc(*len);
	assert_non_null(b);
	assert_int_equal(pread(fd, b, *len, 0), (ssize_t)*len);
	close(fd);
	return b;
}

static int find(const uint8_t *img, size_t len, const char *name, struct elf_def *defs,
		size_t *n)
{
	*n = 999;
	return elf_find_symbol(img, len, name, defs, ELF_MAX_DEFS, n);
}

static const char lib_src[] =
	"int weak_fn(void) __attribute__((weak));\n"
	"int weak_fn(void) { return 7; }\n"
	"int data_obj = 3;\n"
	"int vfn_old(void) { return 1; }\n"
	"int vfn_new(void) { return 2; }\n"
	"int gone_old(void) { return 3; }\n"
	"__asm__(\".symver vfn_old, vfn@V1\");\n"
	"__asm__(\".symver vfn_new, vfn@@V2\");\n"
	"__asm__(\".symver gone_old, gone@V1\");\n"
	"static int impl(void) { return 5; }\n"
	"static int (*resolve(void))(void) { return impl; }\n"
	"int ifn(void) __attribute__((ifunc(\"resolve\")));\n";

static const char lib_map[] =
	"V1 { global: vfn; gone; f*; weak_fn; data_obj; ifn; local: *; };\n"
	"V2 { global: vfn; } V1;\n";

static const char static_src[] =
	"#include <execinfo.h>\n#include <stdio.h>\n#include <stdint.h>\n"
	"int main(void) { void *b[4]; printf(\"%lx\\n\", (unsigned long)(uintptr_t)&backtrace);\n"
	"  return backtrace(b, 4) < 0; }\n";

static void write_file(const char *name, const char *text)
{
	char p[256];
	FILE *f;

	path_of(p, sizeof(p), name);
	f = fopen(p, "w");
	assert_non_null(f);
	fputs(text, f);
	for (int i = 0; !strcmp(name, "lib.c") && i < NFUNCS; i++)
		fprintf(f, "int f%d(void) { return %d; }\n", i, i);
	fclose(f);
}

static int setup(void **state)
{
	(void)state;
	if (!mkdtemp(dir))
		return -1;
	write_file("lib.c", lib_src);
	write_file("lib.map", lib_map);
	write_file("static.c", static_src);
	if (run("cd %s && gcc -O1 -shared -fPIC -Wl,--version-script=lib.map -Wl,--hash-style=gnu "
		"-o libgnu.so lib.c && gcc -O1 -shared -fPIC -Wl,--version-script=lib.map "
		"-Wl,--hash-style=sysv -o libsysv.so lib.c", dir) != 0)
		return -1;
	/* libc.a comes with libc6-dev; without it there is no static test. */
	have_static = run("cd %s && gcc -O1 -static -no-pie -o static static.c 2>/dev/null && "
			  "cp static stripped && strip stripped", dir) == 0;
	return 0;
}

static int teardown(void **state)
{
	(void)state;
	run("rm -rf '%s'", dir);
	return 0;
}

/* glibc's own backtrace(): dlsym on libc, because a sanitizer build
 * interposes its own backtrace in front of it. */
static void *libc_backtrace(Dl_info *info)
{
	void *h = dlopen("libc.so.6", RTLD_NOW | RTLD_NOLOAD);
	void *fn;

	assert_non_null(h);
	fn = dlsym(h, "backtrace");
	assert_non_null(fn);
	assert_true(dladdr(fn, info) != 0);
	dlclose(h);
	return fn;
}

/*
 * Whether live (a function as this process runs it) is file (its bytes in
 * the library) but for breakpoints somebody else put there: a uprobe on
 * the library, set by anyone anywhere on the node, makes the kernel write
 * its breakpoint into every process that maps the file, this test's too;
 * a breakpoint starts at an instruction (on aarch64 a 4-byte word).  A
 * difference is printed as unsigned bytes.
 */
static bool same_but_breakpoints(const uint8_t *file, const uint8_t *live, size_t len)
{
	static const uint8_t bps[][ARCH_BREAKPOINT_LEN] = ARCH_BREAKPOINTS;
	size_t i = 0, at;
	bool bp;

	while (i < len) {
		if (file[i] == live[i]) {
			i++;
			continue;
		}
		at = i - i % ARCH_BREAKPOINT_LEN;
		bp = false;
		for (size_t b = 0; b < sizeof(bps) / sizeof(bps[0]); b++)
			if (at + ARCH_BREAKPOINT_LEN <= len &&
			    !memcmp(live + at, bps[b], ARCH_BREAKPOINT_LEN))
				bp = true;
		if (!bp) {
			print_message("difference at offset %zu: 0x%02x in the file, 0x%02x live\n",
				      i, file[i], live[i]);
			return false;
		}
		print_message("note: a breakpoint at offset %zu (somebody's uprobe or debugger)\n",
			      at);
		i = at + ARCH_BREAKPOINT_LEN;
	}
	return true;
}

static void a_breakpoint_is_somebody_elses_not_a_difference(void **state)
{
	static const uint8_t bps[][ARCH_BREAKPOINT_LEN] = ARCH_BREAKPOINTS;
	uint8_t file[16], live[16];

	(void)state;
	for (size_t i = 0; i < sizeof(file); i++)
		file[i] = (uint8_t)(0x41 + i);
	memcpy(live, file, sizeof(live));
	assert_true(same_but_breakpoints(file, live, sizeof(file)));
	/* Each breakpoint, at the entry and at a later instruction. */
	for (size_t b = 0; b < sizeof(bps) / sizeof(bps[0]); b++) {
		memcpy(live, bps[b], ARCH_BREAKPOINT_LEN);
		assert_true(same_but_breakpoints(file, live, sizeof(file)));
		memcpy(live + 2 * ARCH_BREAKPOINT_LEN, bps[b], ARCH_BREAKPOINT_LEN);
		assert_true(same_but_breakpoints(file, live, sizeof(file)));
		memcpy(live, file, sizeof(live));
	}
	/* Any other change is one. */
	live[5] ^= 0x80;
	assert_false(same_but_breakpoints(file, live, sizeof(file)));
	memcpy(live, file, sizeof(live));
	live[sizeof(live) - 1] = 0xcc ^ 0x01;
	assert_false(same_but_breakpoints(file, live, sizeof(file)));
}

static void real_libc(void **state)
{
	struct elf_def defs[ELF_MAX_DEFS];
	Dl_info info;
	void *fn = libc_backtrace(&info);
	size_t len, n;
	uint8_t *img = slurp(info.dli_fname, &len);
	(void)state;

	assert_int_equal(find(img, len, "backtrace", defs, &n), 0);
	assert_int_equal(n, 1);
	assert_false(defs[0].from_symtab);
	assert_int_equal(defs[0].value, (uintptr_t)fn - (uintptr_t)info.dli_fbase);
	assert_true(defs[0].size >= 16);
	assert_true(defs[0].file_avail >= defs[0].size);
	assert_true(defs[0].file_offset + defs[0].file_avail <= len);
	assert_true(same_but_breakpoints(img + defs[0].file_offset, fn, 16));

	/* __backtrace is the same function under its other name. */
	assert_int_equal(find(img, len, "__backtrace", defs, &n), 0);
	assert_int_equal(n, 1);
	assert_int_equal(defs[0].value, (uintptr_t)fn - (uintptr_t)info.dli_fbase);

	/* Not there; a data object; memcpy is an IFUNC (default version)
	 * plus a hidden-version plain function: none is a definition. */
	assert_int_equal(find(img, len, "no_such_function_anywhere", defs, &n), 0);
	assert_int_equal(n, 0);
	assert_int_equal(find(img, len, "environ", defs, &n), 0);
	assert_int_equal(n, 0);
	assert_int_equal(find(img, len, "memcpy", defs, &n), 0);
	assert_int_equal(n, 0);
	assert_int_equal(find(img, len, "", defs, &n), 0);
	assert_int_equal(n, 0);

	/* Unaligned image: same answer. */
	uint8_t *odd = malloc(len + 1);
	memcpy(odd + 1, img, len);
	assert_int_equal(find(odd + 1, len, "backtrace", defs, &n), 0);
	assert_int_equal(n, 1);
	assert_int_equal(defs[0].value, (uintptr_t)fn - (uintptr_t)info.dli_fbase);
	free(odd);
	free(img);
}

/* Checks every interesting name of one built library against dlsym. */
static void check_lib(const char *name, const char *hash_tag)
{
	struct elf_def defs[ELF_MAX_DEFS];
	char p[256], sym[16];
	size_t len, n;
	uint8_t *img;
	void *h, *addr;
	Dl_info info;

	path_of(p, sizeof(p), name);
	/* Make sure the library really has only the hash table under test. */
	assert_int_equal(run("readelf -d %s | grep -q '(%s)'", p, hash_tag), 0);
	assert_int_not_equal(run("readelf -d %s | grep -q '(%s)'", p,
				 strcmp(hash_tag, "HASH") ? "HASH" : "GNU_HASH"), 0);
	img = slurp(p, &len);
	h = dlopen(p, RTLD_NOW | RTLD_LOCAL);
	assert_non_null(h);

	for (int i = 0; i < NFUNCS; i++) {
		snprintf(sym, sizeof(sym), "f%d", i);
		addr = dlsym(h, sym);
		assert_non_null(addr);
		assert_true(dladdr(addr, &info) != 0);
		assert_int_equal(find(img, len, sym, defs, &n), 0);
		if (n != 1 || defs[0].value != (uintptr_t)addr - (uintptr_t)info.dli_fbase)
			fail_msg("%s: %s: n=%zu", name, sym, n);
		assert_memory_equal(img + defs[0].file_offset, addr, 4);
	}

	/* vfn: only the default version V2; gone: only a hidden V1. */
	addr = dlsym(h, "vfn");
	assert_int_equal(find(img, len, "vfn", defs, &n), 0);
	assert_int_equal(n, 1);
	assert_int_equal(defs[0].value, (uintptr_t)addr - (uintptr_t)info.dli_fbase);
	assert_ptr_not_equal(dlvsym(h, "vfn", "V1"), addr);
	assert_non_null(dlvsym(h, "gone", "V1"));
	assert_int_equal(find(img, len, "gone", defs, &n), 0);
	assert_int_equal(n, 0);

	assert_int_equal(find(img, len, "weak_fn", defs, &n), 0);
	assert_int_equal(n, 1);
	assert_int_equal(defs[0].value, (uintptr_t)dlsym(h, "weak_fn") - (uintptr_t)info.dli_fbase);
	assert_int_equal(find(img, len, "data_obj", defs, &n), 0);
	assert_int_equal(n, 0);
	assert_int_equal(find(img, len, "ifn", defs, &n), 0);
	assert_int_equal(n, 0);
	/* Local (version script) and static functions are not exported. */
	assert_int_equal(find(img, len, "vfn_new", defs, &n), 0);
	assert_int_equal(n, 0);
	assert_int_equal(find(img, len, "f300", defs, &n), 0);
	assert_int_equal(n, 0);

	/* max limits what is stored. */
	assert_int_equal(elf_find_symbol(img, len, "f1", defs, 0, &n), 0);
	assert_int_equal(n, 0);
	dlclose(h);
	free(img);
}

static void gnu_hash_lib(void **state)
{
	(void)state;
	check_lib("libgnu.so", "GNU_HASH");
}

static void sysv_hash_lib(void **state)
{
	(void)state;
	check_lib("libsysv.so", "HASH");
}

static void static_exe(void **state)
{
	struct elf_def defs[ELF_MAX_DEFS];
	char p[256], out[64] = "";
	size_t len, n;
	uint8_t *img;
	FILE *f;
	(void)state;

	if (!have_static)
		skip();
	path_of(p, sizeof(p), "static");
	f = popen(p, "r");
	assert_non_null(f);
	assert_non_null(fgets(out, sizeof(out), f));
	assert_int_equal(pclose(f), 0);

	img = slurp(p, &len);
	assert_int_equal(find(img, len, "backtrace", defs, &n), 0);
	assert_int_equal(n, 1);
	assert_true(defs[0].from_symtab);
	assert_int_equal(defs[0].value, strtoull(out, NULL, 16));
	assert_true(defs[0].file_avail > 0);
	assert_int_equal(find(img, len, "main", defs, &n), 0);
	assert_int_equal(n, 1);
	free(img);

	path_of(p, sizeof(p), "stripped");
	img = slurp(p, &len);
	assert_int_equal(find(img, len, "backtrace", defs, &n), 0);
	assert_int_equal(n, 0);
	free(img);
}

static void hashes(void **state)
{
	(void)state;
	assert_int_equal(elf_gnu_hash(""), 5381);
	assert_int_equal(elf_gnu_hash("printf"), 0x156b2bb8);
	assert_int_equal(elf_sysv_hash(""), 0);
	assert_int_equal(elf_sysv_hash("printf"), 0x077905a6);
	/* Long names exercise the SysV high-nibble folding. */
	assert_int_equal(elf_sysv_hash("abcdefghijklmnopqrstuvwxyz"),
			 elf_sysv_hash("abcdefghijklmnopqrstuvwxyz"));
	assert_true(elf_sysv_hash("abcdefghijklmnopqrstuvwxyz") < 0x10000000u);
}

static bool valid(int r)
{
	return r == 0 || r == -ENOEXEC || r == -EBADMSG;
}

static uint8_t *libc_image(size_t *len)
{
	Dl_info info;

	libc_backtrace(&info);
	return slurp(info.dli_fname, len);
}

static void not_ours(void **state)
{
	struct elf_def defs[ELF_MAX_DEFS];
	size_t len, n;
	uint8_t *img = libc_image(&len);
	uint8_t hdr[sizeof(Elf64_Ehdr)];
	Elf64_Ehdr eh;
	(void)state;

	struct { size_t off; uint8_t val; int want; } pokes[] = {
		{ EI_MAG0, 0x7e, -ENOEXEC },
		{ EI_MAG3, 'G', -ENOEXEC },
		{ EI_CLASS, ELFCLASS32, -ENOEXEC },
		{ EI_DATA, ELFDATA2MSB, -ENOEXEC },
		{ EI_VERSION, 0, -ENOEXEC },
		{ offsetof(Elf64_Ehdr, e_machine), EM_AARCH64, -ENOEXEC },
		{ offsetof(Elf64_Ehdr, e_type), ET_REL, -ENOEXEC },
		{ offsetof(Elf64_Ehdr, e_type), ET_CORE, -ENOEXEC },
		{ offsetof(Elf64_Ehdr, e_phentsize), 55, -EBADMSG },
		{ offsetof(Elf64_Ehdr, e_phoff) + 5, 0x10, -EBADMSG },
		{ offsetof(Elf64_Ehdr, e_phnum), 0, -EBADMSG },
	};
	memcpy(hdr, img, sizeof(hdr));
	for (size_t i = 0; i < sizeof(pokes) / sizeof(pokes[0]); i++) {
		memcpy(img, hdr, sizeof(hdr));
		img[pokes[i].off] = pokes[i].val;
		if (pokes[i].off == offsetof(Elf64_Ehdr, e_phnum))
			img[pokes[i].off + 1] = 0;
		if (find(img, len, "backtrace", defs, &n) != pokes[i].want)
			fail_msg("poke %zu: want %d", i, pokes[i].want);
	}
	memcpy(img, hdr, sizeof(hdr));
	memcpy(&eh, img, sizeof(eh));
	assert_int_equal(eh.e_machine, EM_X86_64);

	/* Short images: no magic is not ELF; magic and no header is broken. */
	assert_int_equal(find(img, 0, "backtrace", defs, &n), -ENOEXEC);
	assert_int_equal(find(img, 3, "backtrace", defs, &n), -ENOEXEC);
	assert_int_equal(find(img, 4, "backtrace", defs, &n), -EBADMSG);
	assert_int_equal(find(NULL, 0, "backtrace", defs, &n), -ENOEXEC);
	assert_int_equal(n, 999);
	free(img);
}

static void truncated(void **state)
{
	struct elf_def defs[ELF_MAX_DEFS];
	size_t len, n;
	uint8_t *img = libc_image(&len);
	Elf64_Ehdr eh;
	(void)state;

	memcpy(&eh, img, sizeof(eh));
	size_t cuts[] = { 0, 1, 16, 63, 64, 100, eh.e_phoff + 1,
			  eh.e_phoff + eh.e_phnum * sizeof(Elf64_Phdr) - 1, 4096, 0x4400,
			  len / 2, len - 1 };
	for (size_t i = 0; i < sizeof(cuts) / sizeof(cuts[0]); i++) {
		uint8_t *b = malloc(cuts[i] ? cuts[i] : 1);
		int r;

		memcpy(b, img, cuts[i]);
		r = find(b, cuts[i], "backtrace", defs, &n);
		if (!valid(r) || (cuts[i] >= 64 && cuts[i] < 4096 && r != -EBADMSG))
			fail_msg("cut at %zu: %d", cuts[i], r);
		r = find(b, cuts[i], "nonexistent", defs, &n);
		assert_true(valid(r));
		free(b);
	}
	/* The dynamic tables sit well before the end: one byte short still
	 * finds it, but the section headers at the end are then cut. */
	uint8_t *b = malloc(len - 1);
	memcpy(b, img, len - 1);
	assert_int_equal(find(b, len - 1, "backtrace", defs, &n), 0);
	assert_int_equal(n, 1);
	assert_int_equal(find(b, len - 1, "nonexistent", defs, &n), -EBADMSG);
	free(b);
	free(img);
}

/* The file range of the first section of the given type (0 size if none). */
static void section(const uint8_t *img, uint32_t type, uint64_t *off, uint64_t *size)
{
	Elf64_Ehdr eh;
	Elf64_Shdr sh;

	memcpy(&eh, img, sizeof(eh));
	*off = *size = 0;
	for (unsigned i = 0; i < eh.e_shnum; i++) {
		memcpy(&sh, img + eh.e_shoff + i * sizeof(sh), sizeof(sh));
		if (sh.sh_type == type) {
			*off = sh.sh_offset;
			*size = sh.sh_size;
			return;
		}
	}
}

/* Replaces the DT_GNU_HASH tag so that the look-up falls back to DT_HASH. */
static void hide_gnu_hash(uint8_t *img)
{
	uint64_t off, size;
	Elf64_Dyn d;

	section(img, SHT_DYNAMIC, &off, &size);
	assert_true(size > 0);
	for (uint64_t k = 0; k < size / sizeof(d); k++) {
		memcpy(&d, img + off + k * sizeof(d), sizeof(d));
		if (d.d_tag == DT_GNU_HASH) {
			d.d_tag = DT_DEBUG;
			memcpy(img + off + k * sizeof(d), &d, sizeof(d));
			return;
		}
	}
	fail_msg("no DT_GNU_HASH");
}

static void endless_chains(void **state)
{
	struct elf_def defs[ELF_MAX_DEFS];
	size_t len, n;
	uint8_t *img = libc_image(&len), *orig = malloc(len);
	uint64_t off, size;
	uint32_t w;
	(void)state;

	memcpy(orig, img, len);
	/* GNU: no chain entry has the end bit: the walk must stop at the
	 * symbol table's end (here DT_HASH's nchain), as an error. */
	section(img, SHT_GNU_HASH, &off, &size);
	assert_true(size > 16);
	uint32_t hdr[4];
	memcpy(hdr, img + off, sizeof(hdr));
	for (uint64_t p = off + 16 + (uint64_t)hdr[2] * 8 + (uint64_t)hdr[0] * 4;
	     p + 4 <= off + size; p += 4) {
		memcpy(&w, img + p, 4);
		w &= ~1u;
		memcpy(img + p, &w, 4);
	}
	assert_int_equal(find(img, len, "backtrace", defs, &n), -EBADMSG);

	/* SysV on the real libc: found the same. */
	memcpy(img, orig, len);
	hide_gnu_hash(img);
	assert_int_equal(find(img, len, "backtrace", defs, &n), 0);
	assert_int_equal(n, 1);
	Dl_info info;
	assert_int_equal(defs[0].value, (uintptr_t)libc_backtrace(&info) - (uintptr_t)info.dli_fbase);

	/* SysV: every chain entry points to itself: a cycle, cut at nchain. */
	section(img, SHT_HASH, &off, &size);
	uint32_t nbucket, nchain;
	memcpy(&nbucket, img + off, 4);
	memcpy(&nchain, img + off + 4, 4);
	for (uint32_t i = 1; i < nchain; i++)
		memcpy(img + off + 8 + ((uint64_t)nbucket + i) * 4, &i, 4);
	assert_int_equal(find(img, len, "backtrace", defs, &n), -EBADMSG);
	free(orig);
	free(img);
}

/* File offset of backtrace's entry in .dynsym (found by name). */
static uint64_t backtrace_sym(const uint8_t *img)
{
	uint64_t off, size, stroff, strsize;
	Elf64_Ehdr eh;
	Elf64_Shdr sh;
	Elf64_Sym sym;

	section(img, SHT_DYNSYM, &off, &size);
	memcpy(&eh, img, sizeof(eh));
	for (unsigned i = 0; i < eh.e_shnum; i++) {
		memcpy(&sh, img + eh.e_shoff + i * sizeof(sh), sizeof(sh));
		if (sh.sh_type == SHT_DYNSYM)
			break;
	}
	memcpy(&sh, img + eh.e_shoff + sh.sh_link * sizeof(sh), sizeof(sh));
	stroff = sh.sh_offset;
	strsize = sh.sh_size;
	for (uint64_t p = off; p + sizeof(sym) <= off + size; p += sizeof(sym)) {
		memcpy(&sym, img + p, sizeof(sym));
		if (sym.st_name < strsize && !strcmp((const char *)img + stroff + sym.st_name, "backtrace"))
			return p;
	}
	fail_msg("backtrace not in .dynsym");
	return 0;
}

/* xorshift64: a fixed sequence, so a failure reproduces. */
static uint64_t rnd(uint64_t *s)
{
	*s ^= *s << 13;
	*s ^= *s >> 7;
	*s ^= *s << 17;
	return *s;
}

static void flipped_bytes(void **state)
{
	static const char *const names[] = { "backtrace", "memcpy", "printf", "nonexistent" };
	struct elf_def defs[ELF_MAX_DEFS];
	size_t len, n;
	uint8_t *img = libc_image(&len), *orig = malloc(len);
	struct { uint64_t off, size; } regions[9] = { { 0, 4096 } };
	static const uint32_t types[] = { SHT_DYNAMIC, SHT_GNU_HASH, SHT_HASH, SHT_DYNSYM,
					  SHT_GNU_versym };
	uint64_t seed = 0x9e3779b97f4a7c15ull;
	size_t nreg = 1, outcome[4] = { 0 };
	(void)state;

	memcpy(orig, img, len);
	for (size_t i = 0; i < sizeof(types) / sizeof(types[0]); i++) {
		section(img, types[i], &regions[nreg].off, &regions[nreg].size);
		if (regions[nreg].size)
			nreg++;
	}
	/* Also the GNU hash header and the backtrace bucket area alone,
	 * where a flip most often changes the walk. */
	section(img, SHT_GNU_HASH, &regions[nreg].off, &regions[nreg].size);
	regions[nreg++].size = 64;
	regions[nreg++] = (typeof(regions[0])){ backtrace_sym(img), sizeof(Elf64_Sym) };

	for (int it = 0; it < 6000; it++) {
		/* Half the runs go through DT_HASH instead. */
		if (it & 1)
			hide_gnu_hash(img);
		int flips = 1 + (int)(rnd(&seed) % 4);
		for (int f = 0; f < flips; f++) {
			size_t r = rnd(&seed) % nreg;
			uint64_t at = regions[r].off + rnd(&seed) % regions[r].size;

			img[at] ^= (uint8_t)(1u << (rnd(&seed) % 8));
			if (rnd(&seed) % 4 == 0)
				img[at] = (uint8_t)rnd(&seed);
		}
		for (size_t k = 0; k < sizeof(names) / sizeof(names[0]); k++) {
			int r = find(img, len, names[k], defs, &n);

			if (!valid(r))
				fail_msg("iteration %d: %s: %d", it, names[k], r);
			outcome[r == 0 ? (n ? 0 : 1) : r == -EBADMSG ? 2 : 3]++;
			if (r == 0)
				for (size_t d = 0; d < n; d++)
					assert_true(defs[d].file_offset + defs[d].file_avail <= len);
		}
		memcpy(img, orig, 8192);
		for (size_t r = 1; r < nreg; r++)
			memcpy(img + regions[r].off, orig + regions[r].off, regions[r].size);
	}
	assert_memory_equal(img, orig, len);
	/* The flips must reach every outcome: found, not found, broken
	 * tables, not-an-ELF header. */
	print_message("found %zu, none %zu, EBADMSG %zu, ENOEXEC %zu\n",
		      outcome[0], outcome[1], outcome[2], outcome[3]);
	for (int i = 0; i < 4; i++)
		assert_true(outcome[i] > 0);
	free(orig);
	free(img);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(a_breakpoint_is_somebody_elses_not_a_difference),
		cmocka_unit_test(real_libc),
		cmocka_unit_test(gnu_hash_lib),
		cmocka_unit_test(sysv_hash_lib),
		cmocka_unit_test(static_exe),
		cmocka_unit_test(hashes),
		cmocka_unit_test(not_ours),
		cmocka_unit_test(truncated),
		cmocka_unit_test(endless_chains),
		cmocka_unit_test(flipped_bytes),
	};

	return cmocka_run_group_tests(tests, setup, teardown);
}
