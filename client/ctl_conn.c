// SPDX-License-Identifier: MIT
/*
 * The client's socket exchange.  The socket is non-blocking and every read,
 * write and connect retry waits in poll() for at most what is left of the
 * one deadline the user gave with --timeout, so a daemon that accepts and
 * then says nothing, or stops reading, cannot hang btguardctl.  A header is
 * validated before its payload is read, so a garbage length never sizes a
 * read.
 */
#include <errno.h>
#include <poll.h>
#include <string.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <time.h>
#include <unistd.h>

#include "ctl_conn.h"

/* How long to wait before retrying a connect refused with EAGAIN. */
#define CONNECT_RETRY_MS 10

uint64_t ctl_conn_now_ns(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Milliseconds left until the deadline, rounded up; 0 when it has passed. */
static int remaining_ms(uint64_t deadline_ns)
{
	uint64_t t_ns = ctl_conn_now_ns(), left_ms;

	if (t_ns >= deadline_ns)
		return 0;
	left_ms = (deadline_ns - t_ns + 999999u) / 1000000u;
	return left_ms > 0x7fffffff ? 0x7fffffff : (int)left_ms;
}

static int wait_for(int fd, short events, uint64_t deadline_ns)
{
	for (;;) {
		struct pollfd p = { .fd = fd, .events = events };
		int ms = remaining_ms(deadline_ns), r;

		if (ms == 0)
			return -ETIMEDOUT;
		r = poll(&p, 1, ms);
		if (r < 0 && errno == EINTR)
			continue;
		if (r < 0)
			return -errno;
		if (r > 0)
			return 0;   /* ready, or an error/hangup the next call reports */
	}
}

int ctl_conn_open(struct ctl_conn *c, const char *path, uint64_t deadline_ns)
{
	struct sockaddr_un addr = { .sun_family = AF_UNIX };
	int fd;

	c->fd = -1;
	c->deadline_ns = deadline_ns;
	c->received = 0;
	if (strlen(path) >= sizeof(addr.sun_path))
		return -ENAMETOOLONG;
	memcpy(addr.sun_path, path, strlen(path) + 1);

	fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
	if (fd < 0)
		return -errno;
	/*
	 * A non-blocking connect on a Unix socket either completes at once or
	 * fails with EAGAIN when the listener's backlog is full (there is no
	 * EINPROGRESS for AF_UNIX).  A busy daemon drains its backlog, so keep
	 * trying until the deadline rather than calling it unreachable.
	 */
	while (connect(fd, (struct sockaddr *)&addr, sizeof(addr)) < 0) {
		int err = errno;

		if (err == EINTR)
			continue;
		if (err != EAGAIN) {
			close(fd);
			return -err;
		}
		if (remaining_ms(deadline_ns) == 0) {
			close(fd);
			return -ETIMEDOUT;
		}
		poll(NULL, 0, CONNECT_RETRY_MS);
	}
	c->fd = fd;
	return 0;
}

int ctl_conn_send(struct ctl_conn *c, const uint8_t *buf, size_t len)
{
	size_t off = 0;

	while (off < len) {
		/* MSG_NOSIGNAL: a daemon that hung up is an error, not SIGPIPE. */
		ssize_t n = send(c->fd, buf + off, len - off, MSG_NOSIGNAL);
		int r;

		if (n >= 0) {
			off += (size_t)n;
			continue;
		}
		if (errno == EINTR)
			continue;
		if (errno != EAGAIN)
			return -errno;
		r = wait_for(c->fd, POLLOUT, c->deadline_ns);
		if (r < 0)
			return r;
	}
	return 0;
}

/* Reads exactly len bytes; *got says how many arrived before a failure. */
static int read_exact(struct ctl_conn *c, uint8_t *buf, size_t len, size_t *got)
{
	*got = 0;
	while (*got < len) {
		ssize_t n = read(c->fd, buf + *got, len - *got);
		int r;

		if (n > 0) {
			*got += (size_t)n;
			c->received += (size_t)n;
			continue;
		}
		/* ECONNRESET: the daemon closed with our bytes unread; to us
		 * that is the same hang-up as an orderly EOF. */
		if (n == 0 || errno == ECONNRESET)
			return -EPIPE;
		if (errno == EINTR)
			continue;
		if (errno != EAGAIN)
			return -errno;
		r = wait_for(c->fd, POLLIN, c->deadline_ns);
		if (r < 0)
			return r;
	}
	return 0;
}

int ctl_conn_recv(struct ctl_conn *c, struct proto_header *ret_hdr, uint8_t *payload, size_t cap)
{
	uint8_t head[PROTO_HEADER_SIZE];
	struct proto_header h;
	size_t got;
	int r;

	r = read_exact(c, head, sizeof(head), &got);
	if (r == -EPIPE && got == 0)
		return -ENODATA;
	if (r < 0)
		return r;
	r = proto_decode_header(head, sizeof(head), &h, NULL);
	if (r < 0)
		return r;
	if (h.length > cap)
		return -EMSGSIZE;
	r = read_exact(c, payload, h.length, &got);
	if (r < 0)
		return r;
	*ret_hdr = h;
	return 0;
}

void ctl_conn_close(struct ctl_conn *c)
{
	if (c->fd >= 0)
		close(c->fd);
	c->fd = -1;
}
