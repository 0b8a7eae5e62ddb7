// SPDX-License-Identifier: MIT
/*
 * uprobe_hold PID ADDR MS: attaches the kernel's own uprobe (perf_event_open,
 * the uprobe PMU, no BPF) at the run-time address ADDR of process PID, one
 * event per thread so each counts its hits, holds it MS milliseconds, and
 * detaches.  Prints "hits N" and exits 0 when the breakpoint was hit, 1 when
 * it was never hit, 2 when it could not be attached; "attached N" (N
 * threads) goes out first, once the probe is in.  For the aarch64 guest
 * test: a uprobe put on, and taken off, a guarded backtrace(), at its
 * entry and at each instruction in and around the guard.
 */
#include <errno.h>
#include <inttypes.h>
#include <linux/perf_event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <dirent.h>
#include <time.h>
#include <unistd.h>

#define MAX_TASKS 64

/* The mapping holding addr: its file and addr's offset in it. */
static int file_offset(int pid, uint64_t addr, char *path, size_t path_len, uint64_t *ret)
{
	char maps[64], line[4096];
	FILE *f;
	int r = -ENOENT;

	snprintf(maps, sizeof(maps), "/proc/%d/maps", pid);
	f = fopen(maps, "r");
	if (!f)
		return -errno;
	while (r < 0 && fgets(line, sizeof(line), f)) {
		uint64_t lo, hi, off;
		int n = 0;

		if (sscanf(line, "%" SCNx64 "-%" SCNx64 " %*s %" SCNx64 " %*s %*s %n",
			   &lo, &hi, &off, &n) < 3 || n == 0 || addr < lo || addr >= hi)
			continue;
		line[strcspn(line, "\n")] = '\0';
		snprintf(path, path_len, "/proc/%d/root%s", pid, line + n);
		*ret = addr - lo + off;
		r = 0;
	}
	fclose(f);
	return r;
}

int main(int argc, char **argv)
{
	struct perf_event_attr attr;
	char path[4200], taskdir[64];
	int fds[MAX_TASKS], nfds = 0, pid;
	uint64_t addr, offset = 0, hits = 0;
	struct timespec nap;
	struct dirent *d;
	DIR *dir;
	long ms;

	if (argc != 4) {
		fprintf(stderr, "usage: uprobe_hold PID ADDR MS\n");
		return 2;
	}
	pid = atoi(argv[1]);
	addr = strtoull(argv[2], NULL, 0);
	ms = atol(argv[3]);
	if (file_offset(pid, addr, path, sizeof(path), &offset) < 0) {
		fprintf(stderr, "uprobe_hold: 0x%" PRIx64 " not mapped in %d\n", addr, pid);
		return 2;
	}
	memset(&attr, 0, sizeof(attr));
	{
		FILE *t = fopen("/sys/bus/event_source/devices/uprobe/type", "r");

		if (!t || fscanf(t, "%u", &attr.type) != 1) {
			fprintf(stderr, "uprobe_hold: no uprobe PMU in this kernel\n");
			return 2;
		}
		fclose(t);
	}
	attr.size = sizeof(attr);
	attr.sample_period = 1;
	attr.config1 = (uint64_t)(uintptr_t)path;   /* uprobe_path */
	attr.config2 = offset;                      /* probe_offset */
	snprintf(taskdir, sizeof(taskdir), "/proc/%d/task", pid);
	dir = opendir(taskdir);
	if (!dir)
		return 2;
	while ((d = readdir(dir)) && nfds < MAX_TASKS) {
		int tid = atoi(d->d_name), fd;

		if (tid <= 0)
			continue;
		fd = (int)syscall(SYS_perf_event_open, &attr, tid, -1, -1, PERF_FLAG_FD_CLOEXEC);
		if (fd < 0) {
			fprintf(stderr, "uprobe_hold: perf_event_open(%s+0x%" PRIx64 ", %d): %s\n",
				path, offset, tid, strerror(errno));
			return 2;
		}
		fds[nfds++] = fd;
	}
	closedir(dir);
	/* The test waits for this line before it looks at the bytes under the probe. */
	printf("attached %d\n", nfds);
	fflush(stdout);
	nap.tv_sec = ms / 1000;
	nap.tv_nsec = (ms % 1000) * 1000000L;
	nanosleep(&nap, NULL);
	for (int i = 0; i < nfds; i++) {
		uint64_t n = 0;

		if (read(fds[i], &n, sizeof(n)) == (ssize_t)sizeof(n))
			hits += n;
		close(fds[i]);
	}
	printf("hits %" PRIu64 "\n", hits);
	return hits ? 0 : 1;
}
