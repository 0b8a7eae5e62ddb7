// SPDX-License-Identifier: MIT
/*
 * The node's namespaces as btguardd sees them (nodefacts.h): read once at
 * start-up through procfs.c, kept here, asked by the at-risk report (is
 * this process's mount namespace the node's?) and by the exec events'
 * notice (is btguardd in the initial PID and user namespaces?).
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "nodefacts.h"
#include "procfs.h"

static struct {
	struct nodefacts_ns mount;            /* the node's mount namespace */
	enum nodefacts_mount_source source;
	struct nodefacts_self self;
} node = { .source = NODEFACTS_MOUNT_UNKNOWN,
	   .self = { .pid_ns_initial = -1, .user_ns_initial = -1, .net_ns_initial = -1 } };

enum nodefacts_mount_source nodefacts_pick_mount(const struct nodefacts_ns *pid1,
						 const struct nodefacts_ns *kthreadd,
						 const struct nodefacts_ns *at_start,
						 struct nodefacts_ns *ret)
{
	static const enum nodefacts_mount_source order[] = {
		NODEFACTS_MOUNT_PID1, NODEFACTS_MOUNT_KTHREADD, NODEFACTS_MOUNT_AT_START,
	};
	const struct nodefacts_ns *from[] = { pid1, kthreadd, at_start };

	for (size_t i = 0; i < sizeof(order) / sizeof(order[0]); i++)
		if (from[i] && from[i]->known) {
			*ret = *from[i];
			return order[i];
		}
	*ret = (struct nodefacts_ns){ .known = false };
	return NODEFACTS_MOUNT_UNKNOWN;
}

bool nodefacts_ns_differs(const struct nodefacts_ns *ref, const struct nodefacts_ns *theirs)
{
	if (!ref->known || !theirs->known)
		return false;
	return ref->ino != theirs->ino || ref->dev != theirs->dev;
}

int nodefacts_ns_initial(const struct nodefacts_ns *ns, unsigned long init_ino, int nspid_n)
{
	if (nspid_n > 1)
		return 0;   /* numbered in more than one PID namespace: a nested one */
	if (!ns->known)
		return -1;
	return ns->ino == (ino_t)init_ino ? 1 : 0;
}

int nodefacts_net_initial(const struct nodefacts_ns *ours, const struct nodefacts_ns *nodes)
{
	if (!ours->known)
		return -1;
	if (ours->ino == (ino_t)NODEFACTS_NET_INIT_INO)
		return 1;
	if (!nodes->known)
		return -1;
	return nodefacts_ns_differs(nodes, ours) ? 0 : 1;
}

const char *nodefacts_mount_source_name(enum nodefacts_mount_source s)
{
	switch (s) {
	case NODEFACTS_MOUNT_PID1:
		return "PID 1's";
	case NODEFACTS_MOUNT_KTHREADD:
		return "kthreadd's";
	case NODEFACTS_MOUNT_AT_START:
		return "the one btguardd started in";
	case NODEFACTS_MOUNT_UNKNOWN:
		break;
	}
	return "none";
}

static struct nodefacts_ns read_ns(pid_t pid, const char *name)
{
	struct nodefacts_ns ns = { .known = false };

	if (procfs_ns_identity(pid, name, &ns.dev, &ns.ino) == 0)
		ns.known = true;
	return ns;
}

/* PID 2 is kthreadd only in the initial PID namespace; elsewhere it is anybody. */
static bool pid2_is_kthreadd(void)
{
	struct procfs_stat st;

	return procfs_read_stat(2, &st) == 0 && (st.flags & PROCFS_PF_KTHREAD) && st.ppid == 0;
}

static const char *initial_name(int initial)
{
	return initial == 1 ? "the node's" : initial == 0 ? "another" : "unknown";
}

void nodefacts_init(void)
{
	struct nodefacts_ns at_start = read_ns(0, "mnt"), pid1 = read_ns(1, "mnt");
	struct nodefacts_ns kthreadd = { .known = false }, node_net = { .known = false };
	struct nodefacts_ns pid_ns = read_ns(0, "pid"), user_ns = read_ns(0, "user");
	struct nodefacts_ns net_ns = read_ns(0, "net");
	bool has_kthreadd = pid2_is_kthreadd();
	struct procfs_status st;
	int nspid_n = 0;

	if (!pid1.known && has_kthreadd)
		kthreadd = read_ns(2, "mnt");
	node.source = nodefacts_pick_mount(&pid1, &kthreadd, &at_start, &node.mount);

	if (procfs_read_status(getpid(), &st) == 0)
		nspid_n = st.nspid_n;
	node.self.pid_ns_initial = nodefacts_ns_initial(&pid_ns, NODEFACTS_PID_INIT_INO, nspid_n);
	node.self.user_ns_initial = nodefacts_ns_initial(&user_ns, NODEFACTS_USER_INIT_INO, 0);
	/* PID 1 is the node's init only seen from the initial PID namespace. */
	if (node.self.pid_ns_initial == 1) {
		node_net = read_ns(1, "net");
		if (!node_net.known && has_kthreadd)
			node_net = read_ns(2, "net");
	}
	node.self.net_ns_initial = nodefacts_net_initial(&net_ns, &node_net);

	log_msg(LOG_DEBUG, "node: mount namespace %s (%s btguardd's own); btguardd's PID "
		"namespace %s, user namespace %s, network namespace %s",
		nodefacts_mount_source_name(node.source),
		nodefacts_ns_differs(&node.mount, &at_start) ? "not" : "also",
		initial_name(node.self.pid_ns_initial), initial_name(node.self.user_ns_initial),
		initial_name(node.self.net_ns_initial));
}

const struct nodefacts_self *nodefacts_self(void)
{
	return &node.self;
}

bool nodefacts_other_mount_ns(pid_t pid)
{
	struct nodefacts_ns theirs;

	if (!node.mount.known)
		return false;
	theirs = read_ns(pid, "mnt");
	return nodefacts_ns_differs(&node.mount, &theirs);
}
