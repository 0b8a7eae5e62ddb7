// SPDX-License-Identifier: MIT
/*
 * The proc connector (procconn.h): subscribing to exec events, and
 * reading them.
 *
 * Who may listen.  The kernel sends process events only to sockets of the
 * initial network namespace (that is where its connector socket lives: a
 * private one, as PrivateNetwork= makes, gets ECONNREFUSED), answers only
 * requesters in the initial user and PID namespaces (others are ignored:
 * no acknowledgement comes, whatever capabilities they hold), and wants
 * CAP_NET_ADMIN over the network namespace's user namespace for the bind
 * (EPERM without).  Linux 6.6 let anyone bind to the proc group; not
 * every kernel since does (6.18.44 as built for our test machine refuses
 * a process without CAP_NET_ADMIN), so the notice says what this kernel
 * did, not what a version number suggests.  In a container the
 * capability is usually missing too, but granting it would not help: the
 * namespace is the cause named (procconn_refusal()).  Since 6.6 a
 * subscriber can ask for one kind of event: exec only, so a busy node's
 * forks and exits never reach us.
 *
 * The subscription, in two messages: PROC_CN_MCAST_LISTEN in its old
 * form (the operation alone), whose acknowledgement says whether the
 * kernel took it; then the same with an event filter (struct proc_input,
 * 6.6), which older kernels ignore - they send everything, and
 * procconn_parse() keeps only the execs.  PROC_CN_MCAST_IGNORE at close:
 * before 6.6 the kernel counts listeners and only a message lowers the
 * count (later ones also lower it when the socket goes).
 */
#include <errno.h>
#include <linux/capability.h>
#include <linux/cn_proc.h>
#include <linux/connector.h>
#include <linux/netlink.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "nodefacts.h"
#include "procconn.h"

/*
 * Linux 6.6's subscription with a filter (include/uapi/linux/cn_proc.h,
 * struct proc_input), which older headers, such as Debian 12's, lack.
 */
struct procconn_input {
	uint32_t mcast_op;        /* enum proc_cn_mcast_op */
	uint32_t event_type;      /* enum proc_cn_event: the events wanted */
};

#define SEQ_LISTEN 0x62746700u    /* "btg": tells our acknowledgement from others' */

/* One netlink message carrying one connector message of len bytes. */
static int send_op(int fd, uint32_t seq, const void *data, size_t len)
{
	struct {
		struct nlmsghdr nl;
		struct cn_msg cn;
		unsigned char data[sizeof(struct procconn_input)];
	} __attribute__((packed)) m;

	memset(&m, 0, sizeof(m));
	m.nl.nlmsg_len = NLMSG_LENGTH(sizeof(struct cn_msg) + len);
	m.nl.nlmsg_type = NLMSG_DONE;
	m.nl.nlmsg_pid = 0;
	m.cn.id.idx = CN_IDX_PROC;
	m.cn.id.val = CN_VAL_PROC;
	m.cn.seq = seq;
	m.cn.ack = seq;     /* the acknowledgement carries ack + 1 back (its seq is the kernel's) */
	m.cn.len = (uint16_t)len;
	memcpy(m.data, data, len);
	if (send(fd, &m, m.nl.nlmsg_len, 0) < 0)
		return -errno;
	return 0;
}

/*
 * The kernel's answer to our LISTEN, queued before send() returned (the
 * connector runs the request in the sender's context).  Nothing queued
 * means it ignored us (-ENOTCONN, why left to the caller): another user
 * or PID namespace.
 */
static int read_ack(int fd, char *why, size_t why_len)
{
	char buf[4096] __attribute__((aligned(NLMSG_ALIGNTO)));

	for (int i = 0; i < 64; i++) {
		ssize_t n = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
		const struct nlmsghdr *nh = (const void *)buf;
		const struct cn_msg *cn;
		struct proc_event ev;

		if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK))
			return -ENOTCONN;   /* ignored: the caller explains it */
		if (n < 0) {
			snprintf(why, why_len, "reading the proc connector's answer: %s", strerror(errno));
			return -errno;
		}
		if ((size_t)n < NLMSG_LENGTH(sizeof(*cn) + sizeof(ev)) || !NLMSG_OK(nh, (size_t)n))
			continue;
		cn = NLMSG_DATA(nh);
		if (cn->len < sizeof(ev))
			continue;
		memcpy(&ev, cn->data, sizeof(ev));   /* 4-aligned in the message: see procconn_parse() */
		if (ev.what != PROC_EVENT_NONE || cn->ack != SEQ_LISTEN + 1)
			continue;   /* an event, or somebody else's acknowledgement */
		if (ev.event_data.ack.err) {
			snprintf(why, why_len, "the proc connector refused the subscription: %s",
				 strerror((int)ev.event_data.ack.err));
			return -(int)ev.event_data.ack.err;
		}
		return 0;
	}
	snprintf(why, why_len, "no answer from the proc connector among its events");
	return -EPROTO;
}

/* Whether btguardd holds CAP_NET_ADMIN now (effective): 1, 0, or -1 unknown. */
static int holds_net_admin(void)
{
	struct __user_cap_header_struct hdr = { .version = _LINUX_CAPABILITY_VERSION_3 };
	struct __user_cap_data_struct data[_LINUX_CAPABILITY_U32S_3];

	memset(data, 0, sizeof(data));
	if (syscall(SYS_capget, &hdr, data) < 0)
		return -1;
	return (data[CAP_NET_ADMIN / 32].effective >> (CAP_NET_ADMIN % 32)) & 1u;
}

static void refused(enum procconn_step step, int err, char *why, size_t why_len)
{
	const struct nodefacts_self *node = nodefacts_self();
	struct procconn_self self = {
		.pid_ns_initial = node->pid_ns_initial,
		.user_ns_initial = node->user_ns_initial,
		.net_ns_initial = node->net_ns_initial,
		.net_admin = holds_net_admin(),
	};

	procconn_refusal(step, err, &self, why, why_len);
}

void procconn_refusal(enum procconn_step step, int err, const struct procconn_self *self,
		      char *why, size_t why_len)
{
	bool pid = self->pid_ns_initial == 0, user = self->user_ns_initial == 0;
	/* Another network namespace refuses (ECONNREFUSED), never ignores. */
	bool net = self->net_ns_initial == 0 && step != PROCCONN_NO_ANSWER;

	/*
	 * The refusals another namespace explains; the kernel would serve none
	 * of them anyway, so the namespace is the cause, in this order (a
	 * container usually has all three, and the PID one is what makes it
	 * a container).
	 */
	if ((step == PROCCONN_BIND && err == EPERM) ||
	    (step == PROCCONN_SUBSCRIBE && err == ECONNREFUSED) || step == PROCCONN_NO_ANSWER) {
		if (pid && user) {
			snprintf(why, why_len, "in PID and user namespaces other than the node's: the "
				 "kernel gives exec events only to the initial ones");
			return;
		}
		if (pid || user) {
			snprintf(why, why_len, "in a %s namespace other than the node's: the kernel "
				 "gives exec events only to the initial %s namespace",
				 pid ? "PID" : "user", pid ? "PID" : "user");
			return;
		}
		if (net) {
			snprintf(why, why_len, "in a network namespace other than the node's: the kernel "
				 "sends exec events only to sockets of the initial network namespace");
			return;
		}
	}
	switch (step) {
	case PROCCONN_BIND:
		if (err != EPERM)
			snprintf(why, why_len, "binding to the proc connector: %s", strerror(err));
		else if (self->net_admin == 0)
			snprintf(why, why_len, "binding to the proc connector: the kernel refused it "
				 "(EPERM) to a process without CAP_NET_ADMIN");
		else
			snprintf(why, why_len, "binding to the proc connector: the kernel refused it "
				 "(EPERM: %s)", strerror(err));
		return;
	case PROCCONN_SUBSCRIBE:
		snprintf(why, why_len, "subscribing to the proc connector: %s%s", strerror(err),
			 err == ECONNREFUSED ? " (not in the initial network namespace)" : "");
		return;
	case PROCCONN_NO_ANSWER:
		if (self->pid_ns_initial == 1 && self->user_ns_initial == 1)
			snprintf(why, why_len, "the proc connector did not answer");
		else
			snprintf(why, why_len, "the proc connector did not answer (it answers only "
				 "the initial user and PID namespaces)");
		return;
	}
	snprintf(why, why_len, "the proc connector refused: %s", strerror(err));
}

int procconn_open(char *why, size_t why_len)
{
	struct sockaddr_nl sa = { .nl_family = AF_NETLINK, .nl_groups = CN_IDX_PROC };
	uint32_t listen_op = PROC_CN_MCAST_LISTEN;
	struct procconn_input filter = { .mcast_op = PROC_CN_MCAST_LISTEN,
					 .event_type = PROC_EVENT_EXEC };
	int fd, r;

	fd = socket(AF_NETLINK, SOCK_DGRAM | SOCK_CLOEXEC | SOCK_NONBLOCK, NETLINK_CONNECTOR);
	if (fd < 0) {
		r = -errno;
		snprintf(why, why_len, "opening a proc connector socket: %s", strerror(-r));
		return r;
	}
	if (bind(fd, (struct sockaddr *)&sa, sizeof(sa)) < 0) {
		r = -errno;
		refused(PROCCONN_BIND, -r, why, why_len);
		goto out_close;
	}
	r = send_op(fd, SEQ_LISTEN, &listen_op, sizeof(listen_op));
	if (r < 0) {
		refused(PROCCONN_SUBSCRIBE, -r, why, why_len);
		goto out_close;
	}
	r = read_ack(fd, why, why_len);
	if (r == -ENOTCONN)
		refused(PROCCONN_NO_ANSWER, 0, why, why_len);
	if (r < 0)
		goto out_close;
	/* Exec events only, where the kernel can filter (6.6); ignored before. */
	r = send_op(fd, SEQ_LISTEN + 1, &filter, sizeof(filter));
	if (r < 0) {
		snprintf(why, why_len, "asking the proc connector for exec events only: %s",
			 strerror(-r));
		procconn_close(fd);
		return r;
	}
	return fd;

out_close:
	close(fd);
	return r;
}

void procconn_close(int fd)
{
	uint32_t ignore_op = PROC_CN_MCAST_IGNORE;

	if (fd < 0)
		return;
	(void)send_op(fd, SEQ_LISTEN + 2, &ignore_op, sizeof(ignore_op));
	close(fd);
}

size_t procconn_parse(const void *buf, size_t len, pid_t *pids, size_t max, size_t *n)
{
	size_t left = len, dropped = 0;
	const struct nlmsghdr *nh = buf;

	/* NLMSG_OK checks the header and that nlmsg_len fits what is left. */
	for (; NLMSG_OK(nh, left); nh = NLMSG_NEXT(nh, left)) {
		const struct cn_msg *cn;
		struct proc_event ev;

		if (nh->nlmsg_type == NLMSG_ERROR || nh->nlmsg_type == NLMSG_NOOP)
			continue;
		if (nh->nlmsg_len < NLMSG_LENGTH(sizeof(*cn)))
			continue;
		cn = NLMSG_DATA(nh);
		if (cn->id.idx != CN_IDX_PROC || cn->id.val != CN_VAL_PROC ||
		    cn->len < sizeof(ev) ||
		    nh->nlmsg_len < NLMSG_LENGTH(sizeof(*cn) + sizeof(ev)))
			continue;
		/*
		 * The event follows the 20-byte cn_msg, so it is only 4-aligned
		 * in the datagram, and struct proc_event wants 8 (its time
		 * stamp): copied out, not read in place.
		 */
		memcpy(&ev, cn->data, sizeof(ev));
		if (ev.what != PROC_EVENT_EXEC)
			continue;
		if (*n < max)
			pids[(*n)++] = ev.event_data.exec.process_tgid;
		else
			dropped++;
		if (nh->nlmsg_type == NLMSG_DONE)
			break;
	}
	return dropped;
}

int procconn_read(int fd, pid_t *pids, size_t max, size_t *ret_n, bool *ret_lost)
{
	char buf[4096] __attribute__((aligned(NLMSG_ALIGNTO)));
	size_t n = 0;
	bool lost = false;

	while (n < max) {
		ssize_t got = recv(fd, buf, sizeof(buf), MSG_DONTWAIT);

		if (got < 0) {
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				break;
			if (errno == EINTR)
				continue;
			if (errno == ENOBUFS) {   /* the kernel dropped some: the sweep has them */
				lost = true;
				continue;
			}
			return -errno;
		}
		if (procconn_parse(buf, (size_t)got, pids, max, &n))
			lost = true;
	}
	*ret_n = n;
	*ret_lost = lost;
	return 0;
}
