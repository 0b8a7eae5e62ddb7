// SPDX-License-Identifier: MIT
/*
 * A main() that turns any fuzz harness into a plain program: it calls
 * LLVMFuzzerTestOneInput once for every file named on the command line and
 * every regular file in every directory named there, in name order, so a
 * corpus (crash inputs included) replays in `make check` without libFuzzer.
 * Built with ASan and UBSan, a read past an input or a broken property
 * still aborts the run.  Exits 1 when nothing was replayed, so an empty or
 * misspelt corpus directory cannot pass unnoticed.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <sys/stat.h>
#include <unistd.h>

#if defined(__SANITIZE_ADDRESS__)
#define HAVE_DEATH_CALLBACK 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define HAVE_DEATH_CALLBACK 1
#endif
#endif
#ifdef HAVE_DEATH_CALLBACK
#include <sanitizer/common_interface_defs.h>
#endif

#include "fuzz.h"

/* Defined by a harness that needs one-time set-up (libFuzzer's rule too). */
__attribute__((weak)) int LLVMFuzzerInitialize(int *argc, char ***argv);

/* The input being replayed, named when it kills the program. */
static const char *current;

static void name_current(void)
{
	if (!current)
		return;
	/* Async-signal-safe: called from a SIGABRT handler too. */
	(void)!write(2, "while replaying ", 16);
	(void)!write(2, current, strlen(current));
	(void)!write(2, "\n", 1);
	current = NULL;   /* once: a sanitizer's death may end in abort() */
}

static void on_abort(int sig)
{
	name_current();
	signal(sig, SIG_DFL);
	raise(sig);
}

static int replay_file(const char *path)
{
	struct stat st;
	uint8_t *buf;
	size_t off = 0;
	int fd = open(path, O_RDONLY | O_CLOEXEC);

	if (fd < 0 || fstat(fd, &st) < 0) {
		fprintf(stderr, "%s: %s\n", path, strerror(errno));
		goto out_close;
	}
	/* Exact size, like fuzz_copy(): the harness gets no slack either. */
	buf = malloc((size_t)st.st_size);
	if (!buf)
		goto out_close;
	while (off < (size_t)st.st_size) {
		ssize_t n = read(fd, buf + off, (size_t)st.st_size - off);

		if (n <= 0) {
			fprintf(stderr, "%s: short read\n", path);
			free(buf);
			goto out_close;
		}
		off += (size_t)n;
	}
	close(fd);
	current = path;
	LLVMFuzzerTestOneInput(buf, off);
	current = NULL;
	free(buf);
	return 0;

out_close:
	if (fd >= 0)
		close(fd);
	return -1;
}

static int by_name(const struct dirent **a, const struct dirent **b)
{
	return strcmp((*a)->d_name, (*b)->d_name);
}

static int replay_dir(const char *dir, size_t *count)
{
	struct dirent **names;
	int n = scandir(dir, &names, NULL, by_name), r = 0;

	if (n < 0) {
		fprintf(stderr, "%s: %s\n", dir, strerror(errno));
		return -1;
	}
	for (int i = 0; i < n; i++) {
		char path[4096];
		struct stat st;

		snprintf(path, sizeof(path), "%s/%s", dir, names[i]->d_name);
		if (names[i]->d_name[0] != '.' && stat(path, &st) == 0 && S_ISREG(st.st_mode)) {
			if (replay_file(path) < 0)
				r = -1;
			else
				(*count)++;
		}
		free(names[i]);
	}
	free(names);
	return r;
}

int main(int argc, char **argv)
{
	size_t count = 0;
	int failed = 0;

	signal(SIGABRT, on_abort);     /* FUZZ_CHECK, abort_on_error=1 */
#ifdef HAVE_DEATH_CALLBACK
	__sanitizer_set_death_callback(name_current);
#endif
	if (LLVMFuzzerInitialize)
		LLVMFuzzerInitialize(&argc, &argv);
	for (int i = 1; i < argc; i++) {
		struct stat st;

		if (stat(argv[i], &st) < 0) {
			fprintf(stderr, "%s: %s\n", argv[i], strerror(errno));
			failed = 1;
		} else if (S_ISDIR(st.st_mode)) {
			failed |= replay_dir(argv[i], &count) < 0;
		} else if (replay_file(argv[i]) == 0) {
			count++;
		} else {
			failed = 1;
		}
	}
	printf("%s: replayed %zu input(s)\n", argv[0], count);
	return failed || count == 0;
}
