// SPDX-License-Identifier: MIT
/*
 * procfloor: the read floor the benchmark compares `status --all` with.
 *
 * Usage: procfloor
 *
 * Reads, for every process of /proc in one pass, what a report of the
 * process cannot do without, each once and the cheapest way the kernel
 * offers: a pidfd (so the PID names one process throughout), its status
 * (owner and state), its executable link, its executable file mappings
 * (PROCMAP_QUERY where the kernel has it, Linux 6.11, else the maps text),
 * 32 bytes of the first (where a site's bytes would be), its command line,
 * its environment (the warnings) and its mount namespace.  A file the
 * kernel writes as one record is read with one read().  Nothing is parsed
 * beyond finding that mapping, nothing is sent anywhere, nothing is
 * logged: any tool that answers what btguardd's status answers spends at
 * least this.
 * Prints the processes read and the seconds the pass took.
 */
#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

static char buf[1 << 16];

static double now_s(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

/* /proc/PID/NAME into buf (what fits); its length, or -1.  many: read to the end. */
static ssize_t slurp(int pid, const char *name, int many)
{
	char path[64];
	ssize_t n, len = 0;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/%s", pid, name);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	while ((n = read(fd, buf + len, sizeof(buf) - 1 - (size_t)len)) > 0) {
		len += n;
		if (!many)
			break;   /* one record: the kernel gave all of it */
	}
	close(fd);
	buf[len] = '\0';
	return len;
}

/* The start of the first executable file mapping in buf's maps text, or 0. */
static unsigned long first_exec(void)
{
	char *line = buf;

	for (;;) {
		char *nl = strchr(line, '\n'), *sp = strchr(line, ' ');

		if (!nl || !sp || sp > nl)
			return 0;
		/* "lo-hi rwxp offset dev inode path": x is the perms' third. */
		if (sp[3] == 'x' && memchr(sp, '/', (size_t)(nl - sp)))
			return strtoul(line, NULL, 16);
		line = nl + 1;
	}
}

/* <linux/fs.h> of Linux 6.11 (Debian 12's headers predate it). */
struct procmap_query {
	uint64_t size, query_flags, query_addr, vma_start, vma_end, vma_flags, vma_page_size;
	uint64_t vma_offset, inode;
	uint32_t dev_major, dev_minor, vma_name_size, build_id_size;
	uint64_t vma_name_addr, build_id_addr;
};
#define PROCMAP_QUERY _IOWR('f', 17, struct procmap_query)
#define QUERY_EXEC_FILES (0x04 | 0x10 | 0x20)   /* executable, covering or next, file-backed */

static int no_query;

/*
 * Every executable file mapping through PROCMAP_QUERY, with its name:
 * the start of the first, 0 when there is none, -1 when the kernel has no
 * query (then the maps text is read instead).
 */
static long query_exec(int pid)
{
	char path[64], name[4096];
	unsigned long first = 0, addr = 0;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/maps", pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 0;
	for (;;) {
		struct procmap_query q = {
			.size = sizeof(q), .query_flags = QUERY_EXEC_FILES, .query_addr = addr,
			.vma_name_addr = (uintptr_t)name, .vma_name_size = sizeof(name),
		};

		if (ioctl(fd, PROCMAP_QUERY, &q) < 0) {
			if (errno == ENOTTY || errno == EINVAL) {
				close(fd);
				return -1;
			}
			break;
		}
		if (!first)
			first = q.vma_start;
		addr = q.vma_end;
	}
	close(fd);
	return (long)first;
}

static unsigned long exec_mappings(int pid)
{
	long at = no_query ? -1 : query_exec(pid);

	if (at >= 0)
		return (unsigned long)at;
	no_query = 1;
	return slurp(pid, "maps", 1) > 0 ? first_exec() : 0;
}

static void read_one(int pid)
{
	char path[64], link[4096];
	unsigned long at;
	struct stat sb;
	int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);

	if (pidfd < 0)
		return;
	slurp(pid, "status", 0);
	snprintf(path, sizeof(path), "/proc/%d/exe", pid);
	if (readlink(path, link, sizeof(link)) > 0 && (at = exec_mappings(pid))) {
		char bytes[32];
		struct iovec local = { bytes, sizeof(bytes) }, remote = { (void *)at, sizeof(bytes) };

		process_vm_readv(pid, &local, 1, &remote, 1, 0);
		slurp(pid, "cmdline", 0);
		slurp(pid, "environ", 0);
		snprintf(path, sizeof(path), "/proc/%d/ns/mnt", pid);
		stat(path, &sb);
	}
	close(pidfd);
}

int main(void)
{
	struct dirent *de;
	double t0 = now_s();
	DIR *d = opendir("/proc");
	int n = 0;

	if (!d) {
		perror("procfloor: /proc");
		return 1;
	}
	while ((de = readdir(d))) {
		if (de->d_name[0] < '1' || de->d_name[0] > '9')
			continue;
		read_one(atoi(de->d_name));
		n++;
	}
	closedir(d);
	printf("%d %.6f\n", n, now_s() - t0);
	return 0;
}
