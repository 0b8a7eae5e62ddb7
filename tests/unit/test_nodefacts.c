// SPDX-License-Identifier: MIT
/*
 * Unit tests for nodefacts.c's pure parts: which mount namespace is the
 * node's (PID 1's before kthreadd's before the one btguardd started in,
 * which under the shipped unit is its private one), when a process is in
 * another (never on a guess), and how btguardd tells the initial PID,
 * user and network namespaces from others (the kernel's fixed inode
 * numbers; NSpid with more than one entry; PID 1's network namespace).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include "nodefacts.h"

#define NSFS 4u   /* the nsfs device: one for every namespace */

static struct nodefacts_ns ns(ino_t ino)
{
	return (struct nodefacts_ns){ .known = true, .dev = NSFS, .ino = ino };
}

static const struct nodefacts_ns unknown = { .known = false };

/* Under PrivateMounts=yes: btguardd's own (at start) is private, PID 1's is the node's. */
static void pid1_is_preferred_to_the_private_one_at_start(void **state)
{
	struct nodefacts_ns node, pid1 = ns(4026531841u), kthreadd = ns(4026531841u),
				  at_start = ns(4026532300u);
	(void)state;

	assert_int_equal(nodefacts_pick_mount(&pid1, &kthreadd, &at_start, &node),
			 NODEFACTS_MOUNT_PID1);
	assert_true(node.known && node.ino == 4026531841u);
	/* A host process shares PID 1's; btguardd's own private one does not count. */
	assert_false(nodefacts_ns_differs(&node, &pid1));
	assert_true(nodefacts_ns_differs(&node, &at_start));
	assert_string_equal(nodefacts_mount_source_name(NODEFACTS_MOUNT_PID1), "PID 1's");
}

/* PID 1 protected from us: kthreadd's; neither: the one at start; nothing: unknown. */
static void the_fallbacks_in_order(void **state)
{
	struct nodefacts_ns node, kthreadd = ns(11), at_start = ns(12);
	(void)state;

	assert_int_equal(nodefacts_pick_mount(&unknown, &kthreadd, &at_start, &node),
			 NODEFACTS_MOUNT_KTHREADD);
	assert_true(node.ino == 11);
	/* In a PID namespace of its own PID 2 is no kernel thread: NULL. */
	assert_int_equal(nodefacts_pick_mount(&unknown, NULL, &at_start, &node),
			 NODEFACTS_MOUNT_AT_START);
	assert_true(node.ino == 12);
	assert_int_equal(nodefacts_pick_mount(&unknown, &unknown, &at_start, &node),
			 NODEFACTS_MOUNT_AT_START);
	assert_int_equal(nodefacts_pick_mount(&unknown, &unknown, &unknown, &node),
			 NODEFACTS_MOUNT_UNKNOWN);
	assert_false(node.known);
	assert_string_equal(nodefacts_mount_source_name(NODEFACTS_MOUNT_UNKNOWN), "none");
}

/* Same inode on another device is another namespace; anything unknown is no warning. */
static void differs_only_on_what_was_seen(void **state)
{
	struct nodefacts_ns a = ns(7), b = ns(7), c = ns(8), other_dev = ns(7);
	(void)state;

	other_dev.dev = NSFS + 1;
	assert_false(nodefacts_ns_differs(&a, &b));
	assert_true(nodefacts_ns_differs(&a, &c));
	assert_true(nodefacts_ns_differs(&a, &other_dev));
	assert_false(nodefacts_ns_differs(&a, &unknown));
	assert_false(nodefacts_ns_differs(&unknown, &a));
	assert_false(nodefacts_ns_differs(&unknown, &unknown));
}

/*
 * Inside a container PID 1 is the container's init and NSpid, read
 * through its /proc, has one entry: only the inode tells.
 */
static void initial_namespaces_by_the_kernels_inode(void **state)
{
	struct nodefacts_ns init_pid = ns(NODEFACTS_PID_INIT_INO), init_user = ns(NODEFACTS_USER_INIT_INO);
	struct nodefacts_ns container = ns(4026532500u);
	(void)state;

	assert_int_equal(nodefacts_ns_initial(&init_pid, NODEFACTS_PID_INIT_INO, 1), 1);
	assert_int_equal(nodefacts_ns_initial(&container, NODEFACTS_PID_INIT_INO, 1), 0);
	/* NSpid through an outer /proc (unshare -p without --mount-proc) says it too. */
	assert_int_equal(nodefacts_ns_initial(&init_pid, NODEFACTS_PID_INIT_INO, 2), 0);
	assert_int_equal(nodefacts_ns_initial(&unknown, NODEFACTS_PID_INIT_INO, 3), 0);
	assert_int_equal(nodefacts_ns_initial(&unknown, NODEFACTS_PID_INIT_INO, 1), -1);
	/* No NSpid (before Linux 4.1, or a user namespace): the inode alone. */
	assert_int_equal(nodefacts_ns_initial(&init_pid, NODEFACTS_PID_INIT_INO, 0), 1);
	assert_int_equal(nodefacts_ns_initial(&init_user, NODEFACTS_USER_INIT_INO, 0), 1);
	assert_int_equal(nodefacts_ns_initial(&init_pid, NODEFACTS_USER_INIT_INO, 0), 0);
	assert_int_equal(nodefacts_ns_initial(&unknown, NODEFACTS_USER_INIT_INO, 0), -1);
}

/*
 * The initial network namespace's inode is fixed only on recent kernels;
 * before, ours is the node's when it is PID 1's (or kthreadd's).
 */
static void the_network_namespace_by_inode_or_by_pid1s(void **state)
{
	struct nodefacts_ns init_net = ns(NODEFACTS_NET_INIT_INO), older_host = ns(4026531992u);
	struct nodefacts_ns own = ns(4026532600u);
	(void)state;

	assert_int_equal(nodefacts_net_initial(&init_net, &unknown), 1);
	assert_int_equal(nodefacts_net_initial(&older_host, &older_host), 1);
	assert_int_equal(nodefacts_net_initial(&own, &older_host), 0);
	assert_int_equal(nodefacts_net_initial(&own, &init_net), 0);
	assert_int_equal(nodefacts_net_initial(&own, &unknown), -1);
	assert_int_equal(nodefacts_net_initial(&unknown, &older_host), -1);
}

/* Before nodefacts_init() nothing is known, and nothing is said. */
static void nothing_known_before_init(void **state)
{
	(void)state;
	assert_int_equal(nodefacts_self()->pid_ns_initial, -1);
	assert_int_equal(nodefacts_self()->user_ns_initial, -1);
	assert_int_equal(nodefacts_self()->net_ns_initial, -1);
	assert_false(nodefacts_other_mount_ns(1));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(pid1_is_preferred_to_the_private_one_at_start),
		cmocka_unit_test(the_fallbacks_in_order),
		cmocka_unit_test(differs_only_on_what_was_seen),
		cmocka_unit_test(initial_namespaces_by_the_kernels_inode),
		cmocka_unit_test(the_network_namespace_by_inode_or_by_pid1s),
		cmocka_unit_test(nothing_known_before_init),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
