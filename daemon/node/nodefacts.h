/* SPDX-License-Identifier: MIT */
/*
 * What btguardd knows of the node rather than of one process (that is
 * facts.h): which mount namespace is the node's, and whether btguardd
 * itself runs in the node's, initial, PID, user and network namespaces.  Learned
 * once, first thing at start-up (nodefacts_init()), never again: PID 1
 * does not change namespaces, and btguardd never enters another one.
 *
 * Why the node's mount namespace and not btguardd's own: the shipped unit
 * runs btguardd with PrivateMounts=yes, in a mount namespace of its own,
 * so comparing a process with btguardd's namespace would call every
 * process on the node "in another mount namespace".  The warning means
 * "its paths are not the node's paths"; the reference is what the node's
 * init lives in.  systemd sets up PrivateMounts= before it execs btguardd,
 * so the namespace btguardd starts in is already the private one under
 * the unit: PID 1's is preferred, then kthreadd's (kernel threads stay in
 * the namespaces the kernel booted with, and it is readable where PID 1
 * is protected from us), and only then the one btguardd started in.  In
 * a container whose PID 1 is the container's init, PID 1's namespace is
 * the container's, which is right: its paths are the ones its operator
 * sees.
 *
 * The decisions are pure functions (nodefacts_pick_mount(),
 * nodefacts_ns_differs(), nodefacts_ns_initial(), nodefacts_net_initial())
 * for the unit tests.
 */
#ifndef BTGUARD_NODEFACTS_H
#define BTGUARD_NODEFACTS_H

#include <stdbool.h>
#include <sys/types.h>

/*
 * The inode numbers the kernel gives its initial namespaces
 * (PROC_PID_INIT_INO, PROC_USER_INIT_INO in include/linux/proc_ns.h, fixed
 * since Linux 3.8): the one way to tell the initial namespace from inside
 * another, where PID 1 is the container's init and NSpid, read through the
 * container's /proc, has one entry.
 */
#define NODEFACTS_PID_INIT_INO  0xEFFFFFFCu
#define NODEFACTS_USER_INIT_INO 0xEFFFFFFDu
/*
 * The initial network namespace has had a fixed inode only since about
 * Linux 6.18 (PROC_NET_INIT_INO); before, a number like any other, so
 * there it is recognised by comparison with PID 1's (or kthreadd's).
 */
#define NODEFACTS_NET_INIT_INO  0xEFFFFFF9u

/* One namespace's identity, as stat() of /proc/PID/ns/NAME gives it. */
struct nodefacts_ns {
	bool  known;
	dev_t dev;
	ino_t ino;
};

/* Where the node's mount namespace was learned from. */
enum nodefacts_mount_source {
	NODEFACTS_MOUNT_UNKNOWN,      /* nothing readable: no process is said to be elsewhere */
	NODEFACTS_MOUNT_PID1,
	NODEFACTS_MOUNT_KTHREADD,
	NODEFACTS_MOUNT_AT_START,     /* the one btguardd started in */
};

/* btguardd's own namespaces: 1 the initial one, 0 another, -1 unknown. */
struct nodefacts_self {
	int pid_ns_initial;
	int user_ns_initial;
	int net_ns_initial;
};

/*
 * Pure: the node's mount namespace, from PID 1's, else kthreadd's (NULL
 * when PID 2 is no kernel thread: in a PID namespace of its own), else the
 * one btguardd started in; whichever is known first goes to *ret.
 */
enum nodefacts_mount_source nodefacts_pick_mount(const struct nodefacts_ns *pid1,
						 const struct nodefacts_ns *kthreadd,
						 const struct nodefacts_ns *at_start,
						 struct nodefacts_ns *ret);

/*
 * Pure: whether theirs is another namespace than ref.  False when either
 * is unknown: a warning says what was seen, never a guess.
 */
bool nodefacts_ns_differs(const struct nodefacts_ns *ref, const struct nodefacts_ns *theirs);

/*
 * Pure: whether ns is the initial namespace whose inode is init_ino.
 * nspid_n is the number of entries in NSpid (0 for a user namespace):
 * more than one proves a nested PID namespace even when ns is unknown.
 * 1 yes, 0 no, -1 unknown.
 */
int nodefacts_ns_initial(const struct nodefacts_ns *ns, unsigned long init_ino, int nspid_n);

/*
 * Pure: whether ours is the node's network namespace: its inode is the
 * fixed one of the initial namespace, or it is nodes, the node's (PID 1's
 * or kthreadd's, read from the initial PID namespace).  1 yes, 0 no, -1
 * unknown.
 */
int nodefacts_net_initial(const struct nodefacts_ns *ours, const struct nodefacts_ns *nodes);

/* "PID 1's", "kthreadd's", "the one btguardd started in", "none". */
const char *nodefacts_mount_source_name(enum nodefacts_mount_source s);

/*
 * Learns the facts above; call it first in main(), before anything that
 * could change what it reads.  Logs at debug level what it found.
 */
void nodefacts_init(void);

/* btguardd's own namespaces (all unknown before nodefacts_init()). */
const struct nodefacts_self *nodefacts_self(void);

/*
 * Whether pid lives in another mount namespace than the node's: its paths
 * are then not the node's paths.  False when either cannot be read.
 */
bool nodefacts_other_mount_ns(pid_t pid);

#endif
