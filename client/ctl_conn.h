/* SPDX-License-Identifier: MIT */
/*
 * btguardctl's side of the socket: connecting to the daemon and moving
 * whole protocol messages in and out, every step bounded by one deadline
 * for the whole exchange.  Framing checks (proto_decode_header) happen
 * here; payloads are decoded by the caller.
 */
#ifndef BTGUARD_CLIENT_CTL_CONN_H
#define BTGUARD_CLIENT_CTL_CONN_H

#include <stddef.h>
#include <stdint.h>

#include "../proto/proto.h"

/* btguardctl's end of one connection (the daemon's is struct conn, serve/conn.h). */
struct ctl_conn {
	int      fd;
	uint64_t deadline_ns;   /* CLOCK_MONOTONIC; the whole exchange ends here */
	size_t   received;      /* bytes read from the daemon so far */
};

/* Monotonic clock in nanoseconds, for computing deadlines. */
uint64_t ctl_conn_now_ns(void);

/*
 * Connects to the Unix stream socket at path.  Returns 0, -ENAMETOOLONG
 * for a path that does not fit sockaddr_un, -ETIMEDOUT when the daemon's
 * listen queue stayed full until the deadline, or the connect errno.
 */
int ctl_conn_open(struct ctl_conn *c, const char *path, uint64_t deadline_ns);

/* Sends all of buf: 0, -ETIMEDOUT, or -errno (EPIPE: daemon hung up). */
int ctl_conn_send(struct ctl_conn *c, const uint8_t *buf, size_t len);

/*
 * Receives one message: a header checked with proto_decode_header, then
 * its payload into payload (cap must be >= PROTO_MAX_PAYLOAD).  Returns 0;
 * -ENODATA when the daemon closed the connection between messages; -EPIPE
 * when it closed in the middle of one; -ETIMEDOUT; a proto_decode_header
 * error for a bad header; or -errno from the socket.
 */
int ctl_conn_recv(struct ctl_conn *c, struct proto_header *ret_hdr, uint8_t *payload, size_t cap);

void ctl_conn_close(struct ctl_conn *c);

#endif
