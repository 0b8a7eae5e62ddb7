// SPDX-License-Identifier: MIT
/*
 * Unit tests for the /proc readers (procfs.c): the pure *_buf parsers on
 * hand-written inputs, and the readers on this test process itself.  Every
 * parser input is copied into a malloc'ed block of exactly its length (no
 * NUL), so a sanitizer build catches any read past the end.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "procfs.h"
#include "reaped.h"

/* An exact-length, unterminated copy of s. */
static char *exact(const char *s, size_t *len)
{
	*len = strlen(s);
	char *b = malloc(*len ? *len : 1);

	assert_non_null(b);
	memcpy(b, s, *len);
	return b;
}

static int parse_maps(const char *text, struct procfs_mapping **m, size_t *n)
{
	size_t len;
	char *b = exact(text, &len);
	int r = procfs_parse_maps_buf(b, len, m, n);

	free(b);
	return r;
}

static void maps_typical_lines(void **state)
{
	static const char text[] =
		"55d0c0a00000-55d0c0a02000 r--p 00000000 fe:01 1311265                    /usr/bin/cat\n"
		"7f1c2d400000-7f1c2d428000 r-xp 00028000 08:02 2883663                    /usr/lib/x86_64-linux-gnu/libc.so.6\n"
		"7f1c2d600000-7f1c2d601000 rw-s 00000000 00:01 42                         /memfd:shm (deleted)\n"
		"7f1c2d700000-7f1c2d702000 rw-p 00000000 00:00 0 \n"
		"7f1c2d800000-7f1c2d802000 rw-p 00000000 00:00 0\n"
		"7ffd5a2e1000-7ffd5a302000 rw-p 00000000 00:00 0                          [stack]\n"
		"7ffd5a3f2000-7ffd5a3f4000 r-xp 00000000 00:00 0                          [vdso]\n"
		"ffffffffff600000-ffffffffff601000 --xp 00000000 00:00 0                  [vsyscall]\n";
	struct procfs_mapping *m;
	size_t n;
	(void)state;

	assert_int_equal(parse_maps(text, &m, &n), 0);
	assert_int_equal(n, 8);
	assert_int_equal(m[0].start, 0x55d0c0a00000ull);
	assert_int_equal(m[0].end, 0x55d0c0a02000ull);
	assert_int_equal(m[0].perms, PROCFS_MAP_READ);
	assert_int_equal(m[0].dev_major, 0xfe);
	assert_int_equal(m[0].dev_minor, 1);
	assert_int_equal(m[0].inode, 1311265);
	assert_string_equal(m[0].path, "/usr/bin/cat");
	assert_false(m[0].deleted);

	assert_int_equal(m[1].perms, PROCFS_MAP_READ | PROCFS_MAP_EXEC);
	assert_int_equal(m[1].offset, 0x28000);
	assert_string_equal(m[1].path, "/usr/lib/x86_64-linux-gnu/libc.so.6");

	assert_int_equal(m[2].perms, PROCFS_MAP_READ | PROCFS_MAP_WRITE | PROCFS_MAP_SHARED);
	assert_string_equal(m[2].path, "/memfd:shm");
	assert_true(m[2].deleted);

	assert_string_equal(m[3].path, "");
	assert_int_equal(m[3].inode, 0);
	assert_string_equal(m[4].path, "");
	assert_string_equal(m[5].path, "[stack]");
	assert_string_equal(m[6].path, "[vdso]");
	assert_int_equal(m[7].start, 0xffffffffff600000ull);
	assert_int_equal(m[7].perms, PROCFS_MAP_EXEC);
	free(m);
}

static void maps_spaces_huge_offsets_no_final_newline(void **state)
{
	static const char text[] =
		"1000-2000 r-xp ffffffffffff0000 103:05 18446744073709551615   /opt/my lib/lib  x.so (deleted)\n"
		"0000000000002000-0000000000003000 r--p 0000000000000000 00:00 0   /a (deleted) b";
	struct procfs_mapping *m;
	size_t n;
	(void)state;

	assert_int_equal(parse_maps(text, &m, &n), 0);
	assert_int_equal(n, 2);
	assert_int_equal(m[0].offset, 0xffffffffffff0000ull);
	assert_int_equal(m[0].dev_major, 0x103);
	assert_int_equal(m[0].inode, UINT64_MAX);
	assert_string_equal(m[0].path, "/opt/my lib/lib  x.so");
	assert_true(m[0].deleted);
	assert_int_equal(m[1].start, 0x2000);
	assert_string_equal(m[1].path, "/a (deleted) b");
	assert_false(m[1].deleted);
	free(m);
}

static void maps_empty_and_many(void **state)
{
	struct procfs_mapping *m = NULL;
	size_t n = 99, len = 0, cap = 1000 * 64;
	char *text = malloc(cap);
	(void)state;

	assert_int_equal(procfs_parse_maps_buf("", 0, &m, &n), 0);
	assert_int_equal(n, 0);
	free(m);

	/* Enough lines to make the array grow several times. */
	assert_non_null(text);
	for (unsigned i = 0; i < 1000; i++)
		len += (size_t)snprintf(text + len, cap - len, "%x-%x rw-p 0 0:0 0\n",
					(i + 1) * 0x1000, (i + 2) * 0x1000);
	assert_int_equal(procfs_parse_maps_buf(text, len, &m, &n), 0);
	assert_int_equal(n, 1000);
	assert_int_equal(m[999].start, 1000 * 0x1000);
	free(m);
	free(text);
}

static void maps_malformed(void **state)
{
	static const char *const bad[] = {
		"1000-2000 r-xp 00000000 00:00\n",                  /* no inode */
		"1000-2000 r-xp 00000000 00:00 0 /x\n\n",           /* empty line */
		"1000 r-xp 00000000 00:00 0\n",                     /* no end */
		"1000-2000\n",
		"1000-",
		"10g0-2000 r-xp 00000000 00:00 0\n",                /* bad hex */
		"1000-2000 r-xq 00000000 00:00 0\n",                /* bad perms */
		"1000-2000 rxp 00000000 00:00 0\n",
		"1000-2000 r-xp 0000z000 00:00 0\n",
		"1000-2000 r-xp 00000000 0000 0\n",                 /* no ':' */
		"1000-2000 r-xp 00000000 00:00 x /a\n",             /* bad inode */
		"1000-2000 r-xp 00000000 00:00 0/a\n",              /* no blank before path */
		"2000-1000 r-xp 00000000 00:00 0\n",                /* start > end */
		"10000000000000000-10000000000000001 r-xp 0 0:0 0\n", /* > 64 bits */
		"1000-2000 r-xp 0 0:0 99999999999999999999\n",
		"-2000 r-xp 0 0:0 0\n",
		"1000-2000 r-xp 0 0:0 0 /ok\ngarbage\n",
	};
	(void)state;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		struct procfs_mapping *m = (void *)0x1;
		size_t n = 77;

		if (parse_maps(bad[i], &m, &n) != -EBADMSG)
			fail_msg("accepted malformed maps line %zu: %s", i, bad[i]);
		/* Outputs are untouched on failure. */
		assert_ptr_equal(m, (void *)0x1);
		assert_int_equal(n, 77);
	}
}

static void maps_path_too_long(void **state)
{
	size_t cap = PATH_MAX + 64, len;
	char *text = malloc(cap);
	struct procfs_mapping *m;
	size_t n;
	(void)state;

	assert_non_null(text);
	len = (size_t)snprintf(text, cap, "1000-2000 r--p 0 0:0 1 /");
	memset(text + len, 'a', PATH_MAX - 2);   /* path of PATH_MAX - 1 chars fits */
	len += PATH_MAX - 2;
	assert_int_equal(procfs_parse_maps_buf(text, len, &m, &n), 0);
	assert_int_equal(strlen(m[0].path), PATH_MAX - 1);
	free(m);
	text[len++] = 'a';                       /* one more does not */
	assert_int_equal(procfs_parse_maps_buf(text, len, &m, &n), -EBADMSG);
	free(text);
}

static void maps_every_truncation(void **state)
{
	static const char line[] = "7f1c2d400000-7f1c2d428000 r-xp 00028000 08:02 2883663 /lib/x.so\n";
	(void)state;

	/* Any prefix either parses or is rejected; never a read past it. */
	for (size_t cut = 0; cut <= sizeof(line) - 1; cut++) {
		char *b = malloc(cut ? cut : 1);
		struct procfs_mapping *m;
		size_t n;
		int r;

		memcpy(b, line, cut);
		r = procfs_parse_maps_buf(b, cut, &m, &n);
		assert_true(r == 0 || r == -EBADMSG);
		if (r == 0)
			free(m);
		/* Everything up to the inode is required. */
		if (cut < strlen("7f1c2d400000-7f1c2d428000 r-xp 00028000 08:02 2"))
			assert_true(cut == 0 ? r == 0 : r == -EBADMSG);
		free(b);
	}
}

static const char status_text[] =
	"Name:\tUid: fake\n"
	"Umask:\t0022\n"
	"State:\tS (sleeping)\n"
	"Tgid:\t4321\n"
	"Ngid:\t0\n"
	"Pid:\t4322\n"
	"PPid:\t1\n"
	"TracerPid:\t77\n"
	"Uid:\t1000\t1001\t1002\t1003\n"
	"Gid:\t2000\t2001\t2002\t2003\n"
	"FDSize:\t64\n"
	"NStgid:\t4321\t12\t1\n"
	"NSpid:\t4322\t13\t2\n"
	"Kthread:\t0\n"
	"Threads:\t5\n"
	"SigQ:\t0/63413";

static int parse_status(const char *text, struct procfs_status *st)
{
	size_t len;
	char *b = exact(text, &len);
	int r = procfs_parse_status_buf(b, len, st);

	free(b);
	return r;
}

static void status_full(void **state)
{
	struct procfs_status st;
	(void)state;

	assert_int_equal(parse_status(status_text, &st), 0);
	assert_int_equal(st.state, 'S');
	assert_int_equal(st.tgid, 4321);
	assert_int_equal(st.pid, 4322);
	assert_int_equal(st.ppid, 1);
	assert_int_equal(st.tracer, 77);
	for (int i = 0; i < 4; i++) {
		assert_int_equal(st.uid[i], 1000 + i);
		assert_int_equal(st.gid[i], 2000 + i);
	}
	assert_int_equal(st.nspid_n, 3);
	assert_int_equal(st.nspid[0], 4322);
	assert_int_equal(st.nspid[1], 13);
	assert_int_equal(st.nspid[2], 2);
	assert_int_equal(st.threads, 5);
	assert_int_equal(st.kthread, 0);
}

/* status_text without the line that starts with key. */
static char *without(const char *key)
{
	char *s = strdup(status_text), *p = s, *nl;

	assert_non_null(s);
	while (strncmp(p, key, strlen(key)) != 0) {
		p = strchr(p, '\n');
		assert_non_null(p);
		p++;
	}
	nl = strchr(p, '\n');
	memmove(p, nl + 1, strlen(nl + 1) + 1);
	return s;
}

static void status_missing_fields(void **state)
{
	static const char *const required[] = { "State:", "Pid:", "Uid:", "Gid:" };
	struct procfs_status st;
	char *s;
	(void)state;

	/* Kernels before 4.1 have no NSpid: the one PID is Pid. */
	s = without("NSpid:");
	assert_int_equal(parse_status(s, &st), 0);
	assert_int_equal(st.nspid_n, 1);
	assert_int_equal(st.nspid[0], 4322);
	free(s);

	/* Older kernels have no Kthread: it is unknown, not "no". */
	s = without("Kthread:");
	assert_int_equal(parse_status(s, &st), 0);
	assert_int_equal(st.kthread, -1);
	free(s);

	for (size_t i = 0; i < 4; i++) {
		s = without(required[i]);
		assert_int_equal(parse_status(s, &st), -EBADMSG);
		free(s);
	}
}

static void status_malformed(void **state)
{
	static const char *const bad[] = {
		"State:\tS\nPid:\t1\nUid:\t0\t0\t0\nGid:\t0\t0\t0\t0\n",       /* 3 uids */
		"State:\tS\nPid:\t1\nUid:\t0\t0\t0\t0\t0\nGid:\t0\t0\t0\t0\n", /* 5 uids */
		"State:\tS\nPid:\tx\nUid:\t0\t0\t0\t0\nGid:\t0\t0\t0\t0\n",
		"State:\tS\nPid:\t1\nUid:\t0\t0\t0\t4294967296\nGid:\t0\t0\t0\t0\n",
		"State:\t\nPid:\t1\nUid:\t0\t0\t0\t0\nGid:\t0\t0\t0\t0\n",
		"State:\tS\nPid:\t1\nUid:\t0\t0\t0\t0\nGid:\t0\t0\t0\t0\nNSpid:\t\n",
		"State:\tS\nPid:\t1\nUid:\t0\t0\t0\t0\nGid:\t0\t0\t0\t0\nNSpid:\t"
		"1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16 17 18 19 20 21 22 23 24 25 26 27 28 29 30 31 32 33\n",
	};
	struct procfs_status st;
	(void)state;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++)
		if (parse_status(bad[i], &st) != -EBADMSG)
			fail_msg("accepted malformed status %zu", i);
	/* The minimal valid status, unterminated. */
	assert_int_equal(parse_status("State:\tZ (zombie)\nPid:\t9\nUid:\t0 0 0 0\nGid:\t0 0 0 0", &st), 0);
	assert_int_equal(st.state, 'Z');
	assert_int_equal(st.tgid, 9);
}

static int parse_stat(const char *text, struct procfs_stat *st)
{
	size_t len;
	char *b = exact(text, &len);
	int r = procfs_parse_stat_buf(b, len, st);

	free(b);
	return r;
}

static void stat_tricky_comm(void **state)
{
	static const char text[] =
		"1234 (a) b (c) S 1 1234 1234 34816 -1 4194560 129 0 0 0 1 2 0 0 20 0 1 0 987654 "
		"10000 200 18446744073709551615 0 0 0 0 0 0 0 0 0 0 0 0 17 3 0 0 0 0 0\n";
	struct procfs_stat st;
	(void)state;

	assert_int_equal(parse_stat(text, &st), 0);
	assert_string_equal(st.comm, "a) b (c");
	assert_int_equal(st.state, 'S');
	assert_int_equal(st.ppid, 1);
	assert_int_equal(st.flags, 4194560);
	assert_int_equal(st.start_ticks, 987654);

	/* Kernel thread: PF_KTHREAD set; long workqueue names are truncated. */
	assert_int_equal(parse_stat("9 (kworker/u8:2-events_unbound) I 2 0 0 0 -1 69238880 0 0 0 0 0 0 "
				    "0 0 20 0 1 0 55", &st), 0);
	assert_true(st.flags & PROCFS_PF_KTHREAD);
	assert_string_equal(st.comm, "kworker/u8:2-eve");
	assert_int_equal(st.start_ticks, 55);
}

static void stat_truncated(void **state)
{
	static const char text[] = "1 (x) S 0 1 1 0 -1 4194560 0 0 0 0 0 0 0 0 20 0 1 0 42 ";
	struct procfs_stat st;
	(void)state;

	/* Every prefix that ends before starttime is rejected. */
	for (size_t cut = 0; cut < strlen(text) - 3; cut++) {
		char *b = malloc(cut ? cut : 1);

		memcpy(b, text, cut);
		if (procfs_parse_stat_buf(b, cut, &st) != -EBADMSG)
			fail_msg("accepted stat cut at %zu", cut);
		free(b);
	}
	assert_int_equal(parse_stat(text, &st), 0);
	assert_int_equal(st.start_ticks, 42);
	assert_int_equal(parse_stat("1 x) S 0", &st), -EBADMSG);
	assert_int_equal(parse_stat("1 (x S 0", &st), -EBADMSG);
}

static pthread_barrier_t barrier;

static void *park(void *arg)
{
	(void)arg;
	pthread_barrier_wait(&barrier);   /* all started */
	pthread_barrier_wait(&barrier);   /* test done */
	return NULL;
}

static void tasks_of_self(void **state)
{
	pthread_t th[3];
	pid_t *tids;
	size_t n;
	(void)state;

	pthread_barrier_init(&barrier, NULL, 4);
	for (int i = 0; i < 3; i++)
		assert_int_equal(pthread_create(&th[i], NULL, park, NULL), 0);
	pthread_barrier_wait(&barrier);

	assert_int_equal(procfs_list_tasks(getpid(), &tids, &n), 0);
	assert_true(n >= 4);
	for (size_t i = 1; i < n; i++)
		assert_true(tids[i - 1] < tids[i]);
	bool found_self = false;
	for (size_t i = 0; i < n; i++)
		found_self |= tids[i] == getpid();
	assert_true(found_self);
	free(tids);

	pthread_barrier_wait(&barrier);
	for (int i = 0; i < 3; i++)
		pthread_join(th[i], NULL);
	pthread_barrier_destroy(&barrier);
}

static void children_of_self(void **state)
{
	pid_t kids[2], *list;
	size_t n;
	(void)state;

	for (int i = 0; i < 2; i++) {
		kids[i] = fork();
		assert_true(kids[i] >= 0);
		if (kids[i] == 0) {
			pause();
			_exit(0);
		}
	}
	assert_int_equal(procfs_list_children(getpid(), &list, &n), 0);
	size_t hits = 0;
	for (size_t i = 0; i < n; i++)
		hits += list[i] == kids[0] || list[i] == kids[1];
	for (size_t i = 1; i < n; i++)
		assert_true(list[i - 1] < list[i]);
	free(list);
	for (int i = 0; i < 2; i++) {
		kill(kids[i], SIGKILL);
		waitpid(kids[i], NULL, 0);
	}
	assert_int_equal(hits, 2);
}

static void read_self(void **state)
{
	struct procfs_mapping *m;
	struct procfs_status st;
	struct procfs_stat pst;
	size_t n;
	bool libc = false;
	(void)state;

	assert_int_equal(procfs_read_maps(getpid(), &m, &n), 0);
	for (size_t i = 0; i < n; i++)
		if (strstr(m[i].path, "/libc.so.6") && (m[i].perms & PROCFS_MAP_EXEC))
			libc = true;
	free(m);
	assert_true(libc);

	assert_int_equal(procfs_read_status(getpid(), &st), 0);
	assert_int_equal(st.pid, getpid());
	assert_int_equal(st.uid[0], getuid());
	assert_int_equal(st.nspid[0], getpid());
	assert_int_equal(procfs_read_stat(getpid(), &pst), 0);
	assert_int_equal(pst.ppid, getppid());
	assert_int_equal(pst.state, 'R');
}

static void read_missing(void **state)
{
	struct procfs_status st;
	pid_t *tids;
	size_t n, len;
	char *buf;
	pid_t dead = reaped_pid();
	(void)state;

	/* A reaped PID (not reused this quickly) is gone: -ESRCH. */
	assert_int_equal(procfs_read_status(dead, &st), -ESRCH);
	assert_int_equal(procfs_list_tasks(dead, &tids, &n), -ESRCH);
	assert_int_equal(procfs_read_file("/proc/self/no-such-file", 100, &buf, &len), -ENOENT);
	assert_int_equal(procfs_read_file("/nonexistent/x", 100, &buf, &len), -ENOENT);
	/* Size cap: maps of a process with a few mappings exceeds 100 bytes. */
	assert_int_equal(procfs_read_file("/proc/self/maps", 100, &buf, &len), -EFBIG);
	assert_int_equal(procfs_read_file("/proc/self/maps", 1 << 20, &buf, &len), 0);
	assert_int_equal(strlen(buf), len);
	free(buf);
}

/* A command line as selectors and reports see it. */
static void cmdline_as_one_line(void **state)
{
	char out[32];
	(void)state;

	procfs_cmdline_to_line("python3\0train.py\0--epochs\0" "3\0", 27, out, sizeof(out));
	assert_string_equal(out, "python3 train.py --epochs 3");
	procfs_cmdline_to_line("a\nb\0\033c\0", 7, out, sizeof(out));   /* no control characters */
	assert_string_equal(out, "a?b ?c");
	procfs_cmdline_to_line("", 0, out, sizeof(out));                  /* a kernel thread's */
	assert_string_equal(out, "");
	procfs_cmdline_to_line("0123456789", 10, out, 5);                 /* cut, terminated */
	assert_string_equal(out, "0123");
}

/*
 * A one-record read stops at a short read: what it returns must still be
 * the whole file when the file is longer than one buffer (a 20 KB command
 * line, an environment likewise), or shorter than one (status).
 */
static void records_read_whole(void **state)
{
	static const char *const names[] = { "cmdline", "environ", "status", "stat" };
	char *big = malloc(20001), *whole, *rec;
	size_t wlen, rlen;
	int pipefd[2], hold[2];
	pid_t child;
	char ready;
	(void)state;

	assert_non_null(big);
	memset(big, 'x', 20000);
	big[20000] = '\0';
	assert_int_equal(pipe(pipefd), 0);
	assert_int_equal(pipe(hold), 0);
	child = fork();
	assert_true(child >= 0);
	if (child == 0) {
		char env[20010];
		/* The shell stays itself (its argv) until hold's write end closes. */
		char *const argv[] = { "/bin/sh", "-c", "echo >&3; read x <&4", big, NULL };

		snprintf(env, sizeof(env), "BIG=%s", big);
		char *const envp[] = { env, NULL };
		close(pipefd[0]);
		close(hold[1]);
		dup2(pipefd[1], 3);
		dup2(hold[0], 4);
		execve(argv[0], argv, envp);
		_exit(127);
	}
	close(pipefd[1]);
	close(hold[0]);
	assert_int_equal(read(pipefd[0], &ready, 1), 1);   /* the shell runs its own argv */
	for (size_t i = 0; i < sizeof(names) / sizeof(names[0]); i++) {
		assert_int_equal(procfs_read_pid_file(child, names[i], 1u << 20, &whole, &wlen), 0);
		assert_int_equal(procfs_read_pid_record(child, names[i], 1u << 20, &rec, &rlen), 0);
		if (i < 2)
			assert_true(rlen > 20000);
		/* stat and status move (times, sleep state): compare only what is fixed. */
		if (i < 2) {
			assert_int_equal(rlen, wlen);
			assert_memory_equal(rec, whole, rlen);
		} else {
			assert_true(rlen > 0 && rec[rlen - 1] == '\n');
		}
		free(whole);
		free(rec);
	}
	close(hold[1]);   /* the shell's read ends, and so does it */
	assert_int_equal(waitpid(child, NULL, 0), child);
	close(pipefd[0]);
	free(big);
}

/* Same file: inode, device and path; anonymous mappings only as themselves. */
static void same_object_rule(void **state)
{
	struct procfs_mapping m[4];
	(void)state;

	memset(m, 0, sizeof(m));
	for (int i = 0; i < 2; i++) {
		m[i].inode = 42;
		m[i].dev_major = 8;
		m[i].dev_minor = 1;
		m[i].path = "/usr/lib/libc.so.6";
	}
	m[2].path = m[3].path = "";
	assert_true(procfs_same_object(&m[0], &m[1]));
	m[1].dev_minor = 2;
	assert_false(procfs_same_object(&m[0], &m[1]));
	m[1].dev_minor = 1;
	m[1].path = "/other/libc.so.6";   /* a bind mount, another name: not the same */
	assert_false(procfs_same_object(&m[0], &m[1]));
	assert_false(procfs_same_object(&m[2], &m[3]));   /* two anonymous mappings */
	assert_true(procfs_same_object(&m[2], &m[2]));
}

/* /proc/stat's "processes" line, wherever it is; nothing else taken for it. */
static void forks_line(void **state)
{
	static const char stat[] = "cpu  1 2 3\ncpu0 1 2 3\nintr 99 1 2\nctxt 12345\n"
				   "btime 1700000000\nprocesses 987654\nprocs_running 2\n";
	uint64_t v = 0, before, after;
	pid_t kid;
	(void)state;

	assert_int_equal(procfs_parse_forks_buf(stat, sizeof(stat) - 1, &v), 0);
	assert_int_equal(v, 987654);
	assert_int_equal(procfs_parse_forks_buf("processes 7", 11, &v), 0);   /* no final newline */
	assert_int_equal(v, 7);
	/* procs_running is not it, nor a line that only starts alike. */
	assert_int_equal(procfs_parse_forks_buf("procs_running 3\n", 16, &v), -EBADMSG);
	assert_int_equal(procfs_parse_forks_buf("processesx 3\n", 13, &v), -EBADMSG);
	assert_int_equal(procfs_parse_forks_buf("processes \n", 11, &v), -EBADMSG);
	assert_int_equal(procfs_parse_forks_buf("processes 12a\n", 14, &v), -EBADMSG);
	assert_int_equal(procfs_parse_forks_buf("processes 99999999999999999999\n", 31, &v),
			 -EBADMSG);
	assert_int_equal(procfs_parse_forks_buf("", 0, &v), -EBADMSG);
	/* The running kernel's: there, and it grows with a fork. */
	assert_int_equal(procfs_read_forks(&before), 0);
	kid = fork();
	assert_true(kid >= 0);
	if (kid == 0)
		_exit(0);
	waitpid(kid, NULL, 0);
	assert_int_equal(procfs_read_forks(&after), 0);
	assert_true(after > before);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(maps_typical_lines),
		cmocka_unit_test(maps_spaces_huge_offsets_no_final_newline),
		cmocka_unit_test(maps_empty_and_many),
		cmocka_unit_test(maps_malformed),
		cmocka_unit_test(maps_path_too_long),
		cmocka_unit_test(maps_every_truncation),
		cmocka_unit_test(status_full),
		cmocka_unit_test(status_missing_fields),
		cmocka_unit_test(status_malformed),
		cmocka_unit_test(stat_tricky_comm),
		cmocka_unit_test(stat_truncated),
		cmocka_unit_test(tasks_of_self),
		cmocka_unit_test(same_object_rule),
		cmocka_unit_test(cmdline_as_one_line),
		cmocka_unit_test(children_of_self),
		cmocka_unit_test(read_self),
		cmocka_unit_test(records_read_whole),
		cmocka_unit_test(read_missing),
		cmocka_unit_test(forks_line),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
