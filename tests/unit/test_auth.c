// SPDX-License-Identifier: MIT
/*
 * Unit tests for the authorization rule (auth.c): a table of callers and
 * targets for the pure auth_check(), and auth_read_target() on real
 * processes (this one, kthreadd, a reaped child).
 */
#include <errno.h>
#include <pthread.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>
#include <cmocka.h>

#include "auth.h"
#include "proto.h"
#include "reaped.h"

enum field { NONE, UID_R, UID_E, UID_S, GID_R, GID_E, GID_S };

struct rule_case {
	const char *name;
	uid_t caller_uid;
	gid_t caller_gid;
	uid_t owner;            /* all of the target's uids, before the tweak */
	gid_t group;
	enum field mismatch;    /* this one field set to 4242 */
	bool is_daemon, is_kthread, dumpable;
	int want;
	const char *why;        /* substring expected in the reason */
};

static const struct rule_case cases[] = {
	{ "root on a user process", 0, 0, 1000, 1000, NONE, false, false, true, 0, NULL },
	{ "root on a root process", 0, 0, 0, 0, NONE, false, false, true, 0, NULL },
	{ "root on a non-dumpable process", 0, 0, 1000, 1000, NONE, false, false, false, 0, NULL },
	{ "user on own process", 1000, 1000, 1000, 1000, NONE, false, false, true, 0, NULL },
	{ "user on root's process", 1000, 1000, 0, 0, NONE, false, false, true,
	  -BTG_ERR_DENIED, "belongs to uid 0 (real), you are uid 1000" },
	{ "user on another user's", 1000, 1000, 1001, 1000, NONE, false, false, true,
	  -BTG_ERR_DENIED, "uid 1001" },
	{ "real uid differs", 1000, 1000, 1000, 1000, UID_R, false, false, true,
	  -BTG_ERR_DENIED, "uid 4242 (real)" },
	{ "effective uid differs", 1000, 1000, 1000, 1000, UID_E, false, false, true,
	  -BTG_ERR_DENIED, "uid 4242 (effective)" },
	{ "saved uid differs", 1000, 1000, 1000, 1000, UID_S, false, false, true,
	  -BTG_ERR_DENIED, "uid 4242 (saved)" },
	{ "real gid differs", 1000, 1000, 1000, 1000, GID_R, false, false, true,
	  -BTG_ERR_DENIED, "gid 4242 (real)" },
	{ "effective gid differs", 1000, 1000, 1000, 1000, GID_E, false, false, true,
	  -BTG_ERR_DENIED, "gid 4242 (effective)" },
	{ "saved gid differs", 1000, 1000, 1000, 1000, GID_S, false, false, true,
	  -BTG_ERR_DENIED, "gid 4242 (saved)" },
	{ "user on own non-dumpable", 1000, 1000, 1000, 1000, NONE, false, false, false,
	  -BTG_ERR_DENIED, "not dumpable" },
	{ "root on the daemon", 0, 0, 0, 0, NONE, true, false, true, -BTG_ERR_SELF, "btguardd itself" },
	{ "user on the daemon", 1000, 1000, 0, 0, NONE, true, false, true, -BTG_ERR_SELF, NULL },
	{ "root on a kernel thread", 0, 0, 0, 0, NONE, false, true, true, -BTG_ERR_KTHREAD,
	  "kernel thread" },
	{ "user on a kernel thread", 1000, 1000, 0, 0, NONE, false, true, false, -BTG_ERR_KTHREAD, NULL },
};

static struct auth_target make_target(const struct rule_case *c)
{
	struct auth_target t = { .pid = 123, .is_daemon = c->is_daemon,
				 .is_kthread = c->is_kthread, .dumpable = c->dumpable };

	for (int i = 0; i < 4; i++) {
		t.status.uid[i] = c->owner;
		t.status.gid[i] = c->group;
	}
	if (c->mismatch >= UID_R && c->mismatch <= UID_S)
		t.status.uid[c->mismatch - UID_R] = 4242;
	else if (c->mismatch >= GID_R)
		t.status.gid[c->mismatch - GID_R] = 4242;
	t.status.pid = t.status.tgid = 123;
	t.status.state = 'S';
	return t;
}

static void rule_table(void **state)
{
	(void)state;

	for (size_t i = 0; i < sizeof(cases) / sizeof(cases[0]); i++) {
		const struct rule_case *c = &cases[i];
		struct auth_caller caller = { .pid = 99, .uid = c->caller_uid, .gid = c->caller_gid };
		struct auth_target t = make_target(c);
		char why[160];
		int r;

		memset(why, 'x', sizeof(why));
		r = auth_check(&caller, &t, why, sizeof(why));
		if (r != c->want)
			fail_msg("%s: got %d, want %d (%s)", c->name, r, c->want, why);
		if (r == 0)
			continue;
		assert_non_null(memchr(why, '\0', sizeof(why)));
		assert_non_null(strstr(why, "process 123"));
		if (c->why && !strstr(why, c->why))
			fail_msg("%s: reason \"%s\" lacks \"%s\"", c->name, why, c->why);
	}
}

static void fs_ids_do_not_matter(void **state)
{
	struct auth_caller caller = { .pid = 1, .uid = 1000, .gid = 1000 };
	struct rule_case c = { .owner = 1000, .group = 1000, .dumpable = true };
	struct auth_target t = make_target(&c);
	(void)state;

	/* The fs uid/gid (index 3) are not part of the ptrace rule. */
	t.status.uid[3] = 7;
	t.status.gid[3] = 7;
	assert_int_equal(auth_check(&caller, &t, NULL, 0), 0);
}

static void reason_is_bounded(void **state)
{
	struct auth_caller caller = { .pid = 1, .uid = 1000, .gid = 1000 };
	struct rule_case c = { .owner = 0, .group = 0, .dumpable = true };
	struct auth_target t = make_target(&c);
	char why[12];
	(void)state;

	memset(why, 'x', sizeof(why));
	assert_int_equal(auth_check(&caller, &t, why, 8), -BTG_ERR_DENIED);
	assert_int_equal(why[7], '\0');
	assert_int_equal(why[8], 'x');
	assert_int_equal(auth_check(&caller, &t, NULL, 0), -BTG_ERR_DENIED);
}

static void read_self(void **state)
{
	struct auth_target t;
	struct auth_caller caller = { .pid = getpid(), .uid = getuid(), .gid = getgid() };
	char why[128];
	(void)state;

	assert_int_equal(auth_read_target(getpid(), &t), 0);
	assert_true(t.is_daemon);
	assert_false(t.is_kthread);
	assert_true(t.dumpable);
	assert_int_equal(t.pid, getpid());
	assert_int_equal(t.status.pid, getpid());
	assert_int_equal(t.status.uid[0], getuid());
	assert_int_equal(t.status.gid[1], getegid());
	assert_int_equal(auth_check(&caller, &t, why, sizeof(why)), -BTG_ERR_SELF);
}

static pid_t worker_tid;
static pthread_barrier_t worker_bar;

static void *worker(void *arg)
{
	(void)arg;
	worker_tid = gettid();
	pthread_barrier_wait(&worker_bar);
	pthread_barrier_wait(&worker_bar);
	return NULL;
}

static void read_own_thread(void **state)
{
	struct auth_target t;
	pthread_t th;
	int r;
	(void)state;

	/* /proc/TID of one of the daemon's threads names the daemon too. */
	pthread_barrier_init(&worker_bar, NULL, 2);
	assert_int_equal(pthread_create(&th, NULL, worker, NULL), 0);
	pthread_barrier_wait(&worker_bar);
	r = auth_read_target(worker_tid, &t);
	pthread_barrier_wait(&worker_bar);
	pthread_join(th, NULL);
	pthread_barrier_destroy(&worker_bar);
	assert_int_equal(r, 0);
	assert_int_not_equal(worker_tid, getpid());
	assert_true(t.is_daemon);
}

static void read_child(void **state)
{
	struct auth_target t;
	int fds[2];
	char c;
	pid_t kid;
	(void)state;

	/* A child is another process of ours: not the daemon, dumpable. */
	assert_int_equal(pipe(fds), 0);
	kid = fork();
	assert_true(kid >= 0);
	if (kid == 0) {
		close(fds[1]);
		(void)!read(fds[0], &c, 1);
		_exit(0);
	}
	close(fds[0]);
	assert_int_equal(auth_read_target(kid, &t), 0);
	close(fds[1]);
	waitpid(kid, NULL, 0);
	assert_false(t.is_daemon);
	assert_false(t.is_kthread);
	assert_true(t.dumpable);
	assert_int_equal(t.status.ppid, getpid());
}

/* Forks a child that drops to uid/gid 65534, sets its dumpable flag, and
 * waits; returns its PID once it has done so. */
static pid_t spawn_nobody(int dumpable, int *ret_fd)
{
	int up[2], down[2];
	char c;
	pid_t kid;

	assert_int_equal(pipe(up), 0);
	assert_int_equal(pipe(down), 0);
	kid = fork();
	assert_true(kid >= 0);
	if (kid == 0) {
		close(up[0]);
		close(down[1]);
		if (setresgid(65534, 65534, 65534) < 0 || setresuid(65534, 65534, 65534) < 0 ||
		    prctl(PR_SET_DUMPABLE, dumpable, 0, 0, 0) < 0)
			_exit(1);
		(void)!write(up[1], "r", 1);
		(void)!read(down[0], &c, 1);
		_exit(0);
	}
	close(up[1]);
	close(down[0]);
	assert_int_equal(read(up[0], &c, 1), 1);
	close(up[0]);
	*ret_fd = down[1];
	return kid;
}

static void read_dumpable(void **state)
{
	struct auth_caller nobody = { .pid = 1, .uid = 65534, .gid = 65534 };
	struct auth_target t;
	char why[128];
	int fd;
	(void)state;

	if (geteuid() != 0)
		skip();
	for (int dumpable = 0; dumpable <= 1; dumpable++) {
		pid_t kid = spawn_nobody(dumpable, &fd);
		int r = auth_read_target(kid, &t);

		close(fd);
		waitpid(kid, NULL, 0);
		assert_int_equal(r, 0);
		assert_int_equal(t.status.uid[1], 65534);
		assert_int_equal(t.dumpable, dumpable);
		r = auth_check(&nobody, &t, why, sizeof(why));
		assert_int_equal(r, dumpable ? 0 : -BTG_ERR_DENIED);
	}
}

static void read_kthreadd(void **state)
{
	struct procfs_stat st;
	struct auth_target t;
	(void)state;

	if (procfs_read_stat(2, &st) < 0 || strcmp(st.comm, "kthreadd") != 0)
		skip();
	assert_int_equal(auth_read_target(2, &t), 0);
	assert_true(t.is_kthread);
	assert_false(t.is_daemon);
	assert_true(t.start_ticks == st.start_ticks);
	/* Pinned: the same verdict, from status's Kthread line or from stat. */
	assert_int_equal(auth_read_pinned_target(2, &t), 0);
	assert_true(t.is_kthread);
	assert_false(t.is_daemon);
	assert_true(t.start_ticks == 0 || t.start_ticks == st.start_ticks);
}

/* A pinned read of an ordinary process: not a kernel thread, the rest as the full read. */
static void read_pinned_self(void **state)
{
	struct auth_target full, pinned;
	(void)state;

	assert_int_equal(auth_read_target(getpid(), &full), 0);
	assert_int_equal(auth_read_pinned_target(getpid(), &pinned), 0);
	assert_false(pinned.is_kthread);
	assert_true(pinned.is_daemon);
	assert_true(pinned.dumpable);
	assert_int_equal(pinned.status.uid[0], full.status.uid[0]);
	assert_int_equal(pinned.status.tgid, full.status.tgid);
	assert_true(full.start_ticks != 0);
	/* Where status says Kthread, stat is not read. */
	if (full.status.kthread >= 0)
		assert_true(pinned.start_ticks == 0);
}

static void read_missing(void **state)
{
	struct auth_target t;
	pid_t dead = reaped_pid();
	(void)state;

	assert_int_equal(auth_read_target(dead, &t), -BTG_ERR_NOPROC);
	assert_int_equal(auth_read_target(0, &t), -BTG_ERR_NOPROC);
	assert_int_equal(auth_read_target(-5, &t), -BTG_ERR_NOPROC);
}

static int hides(const char *text)
{
	return auth_mountinfo_hides_pids(text, strlen(text));
}

/* Which proc mount a caller sees, and whether it hides other users' processes. */
static void mountinfo_hidepid(void **state)
{
	static const char root[] = "22 1 8:1 / / rw,relatime shared:1 - ext4 /dev/sda1 rw\n";
	static const char plain[] = "23 22 0:21 / /proc rw,nosuid shared:12 - proc proc rw\n";
	static const char inv[] = "40 22 0:50 / /proc rw,relatime - proc proc rw,hidepid=invisible\n";
	static const char old[] = "40 22 0:50 / /proc rw - proc proc rw,hidepid=2,gid=10\n";
	static const char ptr[] = "40 22 0:50 / /proc rw - proc proc rw,hidepid=ptraceable\n";
	static const char noacc[] = "40 22 0:50 / /proc rw - proc proc rw,hidepid=noaccess\n";
	static const char elsewhere[] = "41 22 0:51 / /mnt/proc rw - proc proc rw,hidepid=invisible\n";
	char buf[1024];

	(void)state;
	snprintf(buf, sizeof(buf), "%s%s", root, plain);
	assert_int_equal(hides(buf), 0);
	snprintf(buf, sizeof(buf), "%s%s", root, inv);
	assert_int_equal(hides(buf), 1);
	snprintf(buf, sizeof(buf), "%s%s", root, old);
	assert_int_equal(hides(buf), 1);
	snprintf(buf, sizeof(buf), "%s%s", root, ptr);
	assert_int_equal(hides(buf), 1);
	/* noaccess shows every PID directory, so existence is no secret. */
	snprintf(buf, sizeof(buf), "%s%s", root, noacc);
	assert_int_equal(hides(buf), 0);
	/* The last mount on /proc is the one seen; others do not count. */
	snprintf(buf, sizeof(buf), "%s%s%s", root, inv, plain);
	assert_int_equal(hides(buf), 0);
	snprintf(buf, sizeof(buf), "%s%s%s", root, plain, elsewhere);
	assert_int_equal(hides(buf), 0);
	/* No /proc at all, or nothing readable: hiding is the safe guess. */
	assert_int_equal(hides(root), 1);
	assert_int_equal(hides(""), 1);
	assert_int_equal(hides("garbage without fields"), 1);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(rule_table),
		cmocka_unit_test(fs_ids_do_not_matter),
		cmocka_unit_test(reason_is_bounded),
		cmocka_unit_test(read_self),
		cmocka_unit_test(read_own_thread),
		cmocka_unit_test(read_child),
		cmocka_unit_test(read_dumpable),
		cmocka_unit_test(read_kthreadd),
		cmocka_unit_test(read_pinned_self),
		cmocka_unit_test(read_missing),
		cmocka_unit_test(mountinfo_hidepid),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
