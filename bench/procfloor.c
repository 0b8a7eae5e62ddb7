// SPDX-License-Identifier: MIT
/*
 * procfloor: the read floor the benchmark compares `status --all` with.
 *
 * Usage: procfloor
 *
 * Reads, for every process of /proc in one pass, what a report of the
 * process cannot do without, each once and the plainest way: a pidfd (so
 * the PID names one process throughout), its status (owner and state),
 * its executable link, its maps, 32 bytes of its first executable mapping
 * (where a site's bytes would be), its command line, its environment
 * (the warnings) and its mount namespace.  Nothing is parsed beyond
 * finding that mapping, nothing is sent anywhere, nothing is logged: any
 * tool that answers what btguardd's status answers spends at least this.
 * Prints the processes read and the seconds the pass took.
 */
#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

/* The whole of /proc/PID/NAME into buf (what fits); its length, or -1. */
static ssize_t slurp(int pid, const char *name)
{
	char path[64];
	ssize_t n, len = 0;
	int fd;

	snprintf(path, sizeof(path), "/proc/%d/%s", pid, name);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	while ((n = read(fd, buf + len, sizeof(buf) - 1 - (size_t)len)) > 0)
		len += n;
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

static void read_one(int pid)
{
	char path[64], link[4096];
	unsigned long at;
	struct stat sb;
	int pidfd = (int)syscall(SYS_pidfd_open, pid, 0);

	if (pidfd < 0)
		return;
	slurp(pid, "status");
	snprintf(path, sizeof(path), "/proc/%d/exe", pid);
	if (readlink(path, link, sizeof(link)) > 0 && slurp(pid, "maps") > 0 && (at = first_exec())) {
		char bytes[32];
		struct iovec local = { bytes, sizeof(bytes) }, remote = { (void *)at, sizeof(bytes) };

		process_vm_readv(pid, &local, 1, &remote, 1, 0);
		slurp(pid, "cmdline");
		slurp(pid, "environ");
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
