/* SPDX-License-Identifier: MIT */
/*
 * ELF symbol look-up on an object file's bytes held in memory (mmap'ed from
 * /proc/PID/map_files, or a fuzzer's buffer).  Every offset and size read
 * from the image is checked against the image length before use: a
 * truncated or hostile file gives an error, never a read past the end.
 */
#ifndef BTGUARD_ELF_H
#define BTGUARD_ELF_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define ELF_MAX_DEFS 8

struct elf_def {
	uint64_t value;         /* st_value: the symbol's virtual address in the object */
	uint64_t size;          /* st_size (may be 0) */
	uint64_t file_offset;   /* where its first byte lies in the file */
	uint64_t file_avail;    /* bytes of the containing PT_LOAD from file_offset on */
	bool     from_symtab;   /* found in .symtab (static executable), not the dynamic table */
};

/*
 * Finds the definitions of NAME that a dynamic link or a call inside the
 * object would reach: the dynamic symbol table through DT_GNU_HASH (else
 * DT_HASH), keeping only defined STT_FUNC symbols of global or weak
 * binding whose version is not hidden (the default version, or none); if
 * that yields nothing, the .symtab section (static executables).
 * Definitions are deduplicated by address, at most max are stored.
 *
 * Only objects of this build's architecture are accepted (64-bit,
 * little-endian, ARCH_ELF_MACHINE).
 *
 * Returns 0 and *ret_n >= 0 (0: not defined here); -ENOEXEC when the
 * image is not an ELF object of this architecture; -EBADMSG when its
 * headers or tables are truncated or inconsistent.
 */
int elf_find_symbol(const uint8_t *img, size_t len, const char *name,
		    struct elf_def *ret, size_t max, size_t *ret_n);

/* GNU and SysV ELF hash functions (exposed for unit tests). */
uint32_t elf_gnu_hash(const char *name);
uint32_t elf_sysv_hash(const char *name);

#endif
