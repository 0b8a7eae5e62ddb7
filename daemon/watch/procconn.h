/* SPDX-License-Identifier: MIT */
/*
 * Exec events from the kernel's proc connector (NETLINK_CONNECTOR,
 * CN_IDX_PROC): the PID of every process that execs, moments after it
 * did, so the policy looks at a new program at once instead of at the
 * next sweep.  The sweep stays the backstop: events can be lost (a full
 * socket buffer), and where the connector is refused the daemon sweeps
 * only.  See procconn.c for who may listen.
 */
#ifndef BTGUARD_PROCCONN_H
#define BTGUARD_PROCCONN_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>

/*
 * Opens a non-blocking socket subscribed to exec events: the descriptor,
 * or -errno with why filled (procconn_refusal()'s sentence where the
 * kernel refused, "opening a proc connector socket: ..." otherwise),
 * nothing left open.
 */
int procconn_open(char *why, size_t why_len);

/* Where the kernel refused the subscription. */
enum procconn_step {
	PROCCONN_BIND,          /* bind() to the CN_IDX_PROC group failed with err */
	PROCCONN_SUBSCRIBE,     /* sending PROC_CN_MCAST_LISTEN failed with err */
	PROCCONN_NO_ANSWER,     /* it was sent, and ignored (err 0) */
};

/* What the cause of a refusal depends on: 1 yes, 0 no, -1 unknown each. */
struct procconn_self {
	int pid_ns_initial;     /* btguardd is in the initial PID namespace */
	int user_ns_initial;    /* ... user namespace */
	int net_ns_initial;     /* ... network namespace */
	int net_admin;          /* it holds CAP_NET_ADMIN (effective) */
};

/*
 * Pure: why the kernel refused at step with err (a positive errno), as
 * one clause for "exec events unavailable: %s".  The cause named is the
 * one that decides: the kernel serves only the initial PID and user
 * namespaces, and sockets of the initial network namespace, whatever
 * capabilities a process holds, so there no capability is blamed; elsewhere a missing CAP_NET_ADMIN is named when
 * it is missing, and a refusal no known rule explains is said as the
 * kernel's refusal with its errno, not a guess.
 */
void procconn_refusal(enum procconn_step step, int err, const struct procconn_self *self,
		      char *why, size_t why_len);

/* Unsubscribes and closes fd (-1 is fine). */
void procconn_close(int fd);

/*
 * Reads what has arrived on fd without blocking: the exec'd processes'
 * PIDs into pids (at most max; the rest stay queued for the next call),
 * their number in *ret_n.  *ret_lost is set when the kernel dropped
 * events since the last call (ENOBUFS).  0, or -errno on a broken socket.
 */
int procconn_read(int fd, pid_t *pids, size_t max, size_t *ret_n, bool *ret_lost);

/*
 * The exec events in one datagram (buf, len bytes, as received), pure:
 * PIDs appended to pids[*n..max).  Anything else in it (an acknowledgement,
 * another event, a short or malformed message) is skipped.  Returns the
 * number of events that did not fit (0 normally).
 */
size_t procconn_parse(const void *buf, size_t len, pid_t *pids, size_t max, size_t *n);

#endif
