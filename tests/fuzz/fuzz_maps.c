// SPDX-License-Identifier: MIT
/*
 * Fuzzes the /proc text parsers of daemon/node/procfs.c: maps, status and stat.
 * The daemon reads those files of processes that belong to any user, and a
 * process controls part of their text (its comm, the paths it maps), so
 * the parsers must stay inside the bytes they were given whatever those
 * are.  The input is not NUL-terminated and sits in an exact-size buffer.
 *
 * Every input goes to all three parsers: a seed is simply a real /proc
 * file, and the fuzzer is free to grow one into another.  Properties:
 *  - maps: one mapping per line, start < end, paths without newlines; and
 *    for NUL-free input, printing the mappings back in the kernel's format
 *    and parsing that again gives the same mappings;
 *  - status: the NSpid count stays within its array;
 *  - stat: comm is NUL-terminated inside its array.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>

#include "fuzz.h"
#include "procfs.h"

/* Lines in a maps text: newlines, plus an unterminated last line. */
static size_t count_lines(const char *p, size_t len)
{
	size_t n = 0;

	for (size_t i = 0; i < len; i++)
		n += p[i] == '\n';
	return n + (len > 0 && p[len - 1] != '\n');
}

/* Prints mappings as the kernel does (fs/proc/task_mmu.c, show_map_vma). */
static char *print_maps(const struct procfs_mapping *m, size_t n, size_t *ret_len)
{
	char *text = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&text, &len);

	if (!f)
		abort();
	for (size_t i = 0; i < n; i++)
		fprintf(f, "%08" PRIx64 "-%08" PRIx64 " %c%c%c%c %08" PRIx64 " %02x:%02x %" PRIu64
			"    %s%s\n", m[i].start, m[i].end,
			m[i].perms & PROCFS_MAP_READ ? 'r' : '-',
			m[i].perms & PROCFS_MAP_WRITE ? 'w' : '-',
			m[i].perms & PROCFS_MAP_EXEC ? 'x' : '-',
			m[i].perms & PROCFS_MAP_SHARED ? 's' : 'p',
			m[i].offset, m[i].dev_major, m[i].dev_minor, m[i].inode, m[i].path,
			m[i].deleted ? " (deleted)" : "");
	if (fclose(f) != 0)
		abort();
	*ret_len = len;
	return text;
}

static bool same_mapping(const struct procfs_mapping *a, const struct procfs_mapping *b)
{
	return a->start == b->start && a->end == b->end && a->offset == b->offset &&
	       a->perms == b->perms && a->dev_major == b->dev_major &&
	       a->dev_minor == b->dev_minor && a->inode == b->inode &&
	       a->deleted == b->deleted && strcmp(a->path, b->path) == 0;
}

static void fuzz_maps(const char *p, size_t len)
{
	struct procfs_mapping *maps = NULL, *again = NULL;
	size_t n = 0, n_again = 0, text_len;
	char *text;

	if (procfs_parse_maps_buf(p, len, &maps, &n) < 0)
		return;
	FUZZ_CHECK(n == count_lines(p, len));
	for (size_t i = 0; i < n; i++) {
		FUZZ_CHECK(maps[i].start < maps[i].end);
		FUZZ_CHECK(maps[i].perms <= 0xf);
		FUZZ_CHECK(strnlen(maps[i].path, PATH_MAX) < PATH_MAX);
		FUZZ_CHECK(strchr(maps[i].path, '\n') == NULL);
	}
	/* An embedded NUL ends a path early when printed back: no round trip. */
	if (!memchr(p, '\0', len)) {
		text = print_maps(maps, n, &text_len);
		FUZZ_CHECK(procfs_parse_maps_buf(text, text_len, &again, &n_again) == 0);
		FUZZ_CHECK(n_again == n);
		for (size_t i = 0; i < n; i++)
			FUZZ_CHECK(same_mapping(&maps[i], &again[i]));
		free(again);
		free(text);
	}
	free(maps);
}

static void fuzz_status(const char *p, size_t len)
{
	struct procfs_status st;

	if (procfs_parse_status_buf(p, len, &st) < 0)
		return;
	FUZZ_CHECK(st.nspid_n >= 1 && st.nspid_n <= PROCFS_MAX_NSPID);
	FUZZ_CHECK(st.pid >= 0 && st.tgid >= 0 && st.tracer >= 0 && st.threads >= 0);
}

static void fuzz_stat(const char *p, size_t len)
{
	struct procfs_stat st;

	if (procfs_parse_stat_buf(p, len, &st) < 0)
		return;
	FUZZ_CHECK(memchr(st.comm, '\0', sizeof(st.comm)) != NULL);
	FUZZ_CHECK(st.ppid >= 0);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	char *buf = (char *)fuzz_copy(data, size);

	fuzz_maps(buf, size);
	fuzz_status(buf, size);
	fuzz_stat(buf, size);
	free(buf);
	return 0;
}
