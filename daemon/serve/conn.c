// SPDX-License-Identifier: MIT
/*
 * The client connections of the control socket, like OpenBSD ntpd's
 * control.c: this file accepts them (SO_PEERCRED once, the connection
 * slots), keeps their list and closes them, and nobody else links or
 * unlinks one.  On each: reading its messages (one at a time: exactly the
 * 12-byte header, then exactly the payload it announces), handing a
 * request to the queue (queue.c, which decides when its targets run),
 * queueing RESULT/DONE/ERROR replies as the queue answers, and the
 * connection's limits.  server.c owns the loop.
 *
 * A misbehaving client only ever loses its own connection: it is told why
 * (an ERROR message) when that can still reach it, logged at notice with
 * its pid and uid, and closed.
 *
 * Limits, all per connection:
 *  - input: one message at a time, at most PROTO_HEADER_SIZE +
 *    PROTO_MAX_PAYLOAD bytes; a started message must complete in 10 s;
 *  - idle: nothing pending and nothing half-read for 60 s closes it, or
 *    for 5 s while the daemon is crowded (struct conn_set's crowded);
 *  - output: capped at 8 MiB; above 1 MiB its targets wait until it
 *    drains; 10 s without the client reading anything drops it.
 */
#include <errno.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "action.h"
#include "watch.h"
#include "conn.h"
#include "log.h"
#include "queue.h"
#include "timeutil.h"

#define MESSAGE_TIMEOUT_MS  10000u
#define IDLE_TIMEOUT_MS     60000u
#define IDLE_CROWDED_MS     5000u
#define WRITE_STALL_MS      10000u
#define OUT_HARD_CAP        (8u << 20)
#define OUT_HIGH_WATER      (1u << 20)
/* An output buffer bigger than this is freed once drained, not kept. */
#define OUT_KEEP            (64u << 10)

#define SHUTDOWN_TEXT QUEUE_SHUTDOWN_TEXT


static size_t out_pending(const struct conn *c)
{
	return c->out_len - c->out_off;
}

static bool input_partial(const struct conn *c)
{
	return c->hdr_len > 0 || c->have_header;
}

static void input_reset(struct conn *c)
{
	free(c->payload);
	c->payload = NULL;
	c->pay_len = 0;
	c->hdr_len = 0;
	c->have_header = false;
}

/*
 * Above the high-water mark the connection's targets wait until it
 * drains: a client that does not read cannot make the daemon buffer more.
 */
static void conn_hold_back(struct conn *c)
{
	if (c->fd >= 0)
		queue_hold_back(c->set->queue, &c->work, out_pending(c) > OUT_HIGH_WATER);
}

/* ------------------------------------------------------ connections -- */

/* Closes c now (queued replies are lost); its memory lives until conn_bury(). */
static void conn_close(struct conn_set *s, struct conn *c)
{
	if (c->fd < 0)
		return;
	queue_cancel(s->queue, &c->work);
	epoll_ctl(s->epfd, EPOLL_CTL_DEL, c->fd, NULL);
	close(c->fd);
	c->fd = -1;
	TAILQ_REMOVE(&s->open, c, in_set);
	/* Events of this very turn may still point at c: free it at the end. */
	TAILQ_INSERT_HEAD(&s->graveyard, c, in_set);
	if (--s->nconns == 0)
		s->idle_since_ms = now_ms();
}

static void conn_free(struct conn *c)
{
	free(c->payload);
	free(c->out);
	free(c);
}

void conn_bury(struct conn_set *s)
{
	struct conn *c;

	while ((c = TAILQ_FIRST(&s->graveyard))) {
		TAILQ_REMOVE(&s->graveyard, c, in_set);
		conn_free(c);
	}
}

/* Open connections of uid (at most SERVER_MAX_CONNS to walk, once per accept). */
static unsigned conns_of(const struct conn_set *s, uid_t uid)
{
	const struct conn *c;
	unsigned n = 0;

	TAILQ_FOREACH(c, &s->open, in_set)
		n += c->caller.uid == uid;
	return n;
}

/*
 * Slots are shared out (conn.h): the cap on one uid, then the reserve only
 * root may use, so 1,024 idle connections of one user lock nobody out.
 */
int conn_accept(struct conn_set *s, int fd)
{
	struct epoll_event ev = { .events = EPOLLIN | EPOLLRDHUP };
	struct ucred cred;
	socklen_t len = sizeof(cred);
	struct conn *c;

	if (s->nconns >= SERVER_MAX_CONNS) {
		log_msg(LOG_DEBUG, "refusing a client: already %u connections", s->nconns);
		close(fd);
		return 0;
	}
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0 || len != sizeof(cred)) {
		log_msg(LOG_DEBUG, "refusing a client: SO_PEERCRED: %s", strerror(errno));
		close(fd);
		return 0;
	}
	if (cred.uid != 0 && s->nconns >= SERVER_MAX_CONNS - SERVER_ROOT_RESERVE) {
		log_msg(LOG_DEBUG, "refusing a client of uid %u: the last %u connections are root's",
			(unsigned)cred.uid, SERVER_ROOT_RESERVE);
		close(fd);
		return 0;
	}
	if (cred.uid != 0 && conns_of(s, cred.uid) >= SERVER_MAX_CONNS_PER_UID) {
		log_msg(LOG_DEBUG, "refusing a client: uid %u already has %u connections",
			(unsigned)cred.uid, SERVER_MAX_CONNS_PER_UID);
		close(fd);
		return 0;
	}
	c = calloc(1, sizeof(*c));
	if (!c) {
		close(fd);
		return -ENOMEM;
	}
	c->set = s;
	c->fd = fd;
	c->caller.pid = cred.pid;
	c->caller.uid = cred.uid;
	c->caller.gid = cred.gid;
	c->events = ev.events;
	c->last_activity_ms = now_ms();
	ev.data.ptr = c;
	if (epoll_ctl(s->epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
		log_msg(LOG_WARNING, "cannot watch a client: %s", strerror(errno));
		close(fd);
		free(c);
		return 0;
	}
	TAILQ_INSERT_HEAD(&s->open, c, in_set);
	s->nconns++;
	log_msg(LOG_DEBUG, "client connected: pid=%d uid=%u gid=%u (%u connection(s))",
		(int)cred.pid, (unsigned)cred.uid, (unsigned)cred.gid, s->nconns);
	return 0;
}

int conn_set_init(struct conn_set *s, int epfd, struct queue *q)
{
	memset(s, 0, sizeof(*s));
	s->epfd = epfd;
	s->queue = q;
	TAILQ_INIT(&s->open);
	TAILQ_INIT(&s->graveyard);
	s->idle_since_ms = now_ms();
	s->req = malloc(sizeof(*s->req));
	s->msg = malloc(MSG_BUF_SIZE);
	return s->req && s->msg ? 0 : -ENOMEM;
}

void conn_set_fini(struct conn_set *s)
{
	while (!TAILQ_EMPTY(&s->open))
		conn_close(s, TAILQ_FIRST(&s->open));
	conn_bury(s);
	free(s->req);
	free(s->msg);
	s->req = NULL;
	s->msg = NULL;
}

__attribute__((format(printf, 3, 4)))
static void conn_drop(struct conn_set *s, struct conn *c, const char *fmt, ...)
{
	char why[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	log_msg(LOG_NOTICE, "dropping client pid=%d uid=%u: %s", (int)c->caller.pid,
		(unsigned)c->caller.uid, why);
	conn_close(s, c);
}

/* The peer is gone (or unusable): whatever it still had queued is not run. */
static void conn_gone(struct conn_set *s, struct conn *c, const char *why)
{
	const struct queue_entry *w = &c->work;

	if (w->expanding)
		log_msg(LOG_DEBUG, "client pid=%d: %s; dropping a request still being read",
			(int)c->caller.pid, why);
	else if (w->busy && (w->job || w->next < w->ntargets))
		log_msg(LOG_DEBUG, "client pid=%d: %s; dropping %zu pending target(s)",
			(int)c->caller.pid, why, w->ntargets - w->next + (w->job != NULL));
	else
		log_msg(LOG_DEBUG, "client pid=%d: %s", (int)c->caller.pid, why);
	conn_close(s, c);
}

static void conn_update_events(struct conn_set *s, struct conn *c)
{
	struct epoll_event ev = { .data.ptr = c };
	uint32_t want = 0;

	if (c->fd < 0)
		return;
	/* Level-triggered: a seen RDHUP would fire forever, so ask for it once. */
	if (!c->rdhup)
		want |= EPOLLRDHUP;
	/* One request at a time: pipelined bytes wait in the socket. */
	if (!c->work.busy && !c->closing && !s->stopping)
		want |= EPOLLIN;
	if (out_pending(c))
		want |= EPOLLOUT;
	if (want == c->events)
		return;
	ev.events = want;
	if (epoll_ctl(s->epfd, EPOLL_CTL_MOD, c->fd, &ev) < 0) {
		conn_drop(s, c, "epoll_ctl: %s", strerror(errno));
		return;
	}
	c->events = want;
}

/* Sends what the kernel takes now; closes c on a dead peer or when done closing. */
static void conn_flush(struct conn_set *s, struct conn *c)
{
	while (out_pending(c)) {
		ssize_t n = send(c->fd, c->out + c->out_off, out_pending(c),
				 MSG_NOSIGNAL | MSG_DONTWAIT);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				break;
			conn_gone(s, c, strerror(errno));
			return;
		}
		c->out_off += (size_t)n;
		c->out_progress_ms = c->last_activity_ms = now_ms();
	}
	if (!out_pending(c)) {
		c->out_off = c->out_len = 0;
		if (c->out_cap > OUT_KEEP) {
			free(c->out);
			c->out = NULL;
			c->out_cap = 0;
		}
		if (c->closing) {
			log_msg(LOG_DEBUG, "client pid=%d: closed after its last reply",
				(int)c->caller.pid);
			conn_close(s, c);
			return;
		}
	}
	/* Back under the high-water mark: its targets may run again. */
	conn_hold_back(c);
}

/* Appends one encoded message to c's output queue; -ENOBUFS above the cap. */
static int conn_queue(struct conn *c, const uint8_t *data, size_t n)
{
	size_t pending = out_pending(c);

	if (pending + n > OUT_HARD_CAP)
		return -ENOBUFS;
	if (pending == 0) {
		c->out_off = c->out_len = 0;
		c->out_progress_ms = now_ms();
	} else if (c->out_off > 0 && c->out_len + n > c->out_cap) {
		memmove(c->out, c->out + c->out_off, pending);
		c->out_off = 0;
		c->out_len = pending;
	}
	if (c->out_len + n > c->out_cap) {
		size_t cap = c->out_cap ? c->out_cap : 4096;
		uint8_t *p;

		while (cap < c->out_len + n)
			cap *= 2;
		p = realloc(c->out, cap);
		if (!p)
			return -ENOMEM;
		c->out = p;
		c->out_cap = cap;
	}
	memcpy(c->out + c->out_len, data, n);
	c->out_len += n;
	return 0;
}

/* Queues a message already encoded in s->msg (length r, or -errno). */
static void conn_send_encoded(struct conn_set *s, struct conn *c, int r, const char *what)
{
	if (r < 0) {
		log_msg(LOG_ERR, "cannot encode %s for client pid=%d: %s", what,
			(int)c->caller.pid, strerror(-r));
		conn_close(s, c);
		return;
	}
	r = conn_queue(c, s->msg, (size_t)r);
	if (r < 0) {
		conn_drop(s, c, "more than %u bytes of replies queued and not read", OUT_HARD_CAP);
		return;
	}
	conn_flush(s, c);
}

/*
 * Tells a misbehaving client why, then closes once that is sent.  Whatever
 * it sent after the bad bytes is never read.
 */
__attribute__((format(printf, 4, 5)))
static void conn_reject(struct conn_set *s, struct conn *c, uint32_t code, const char *fmt, ...)
{
	char why[PROTO_MAX_MESSAGE + 1];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	log_msg(LOG_NOTICE, "dropping client pid=%d uid=%u: %s (%s)", (int)c->caller.pid,
		(unsigned)c->caller.uid, why, proto_error_name(code));
	input_reset(c);
	c->closing = true;
	conn_send_encoded(s, c, proto_encode_error(code, why, s->msg, MSG_BUF_SIZE), "ERROR");
	conn_update_events(s, c);
}

/* ------------------------------------------------------------- input -- */

/* The queue could not list the request's targets (our failure, not the client's), or stops. */
static struct conn *conn_of(struct queue_entry *w)
{
	return (struct conn *)((char *)w - offsetof(struct conn, work));
}

static void conn_request_failed(struct queue_entry *w, int r)
{
	struct conn *c = conn_of(w);
	struct conn_set *s = c->set;
	bool stop = r == -BTG_ERR_SHUTDOWN;

	if (!stop)
		log_msg(LOG_ERR, "cannot list the targets of a request: %s",
			r <= -BTG_ERR_BASE ? proto_error_text((uint32_t)-r) : strerror(-r));
	c->last_activity_ms = now_ms();
	conn_send_encoded(s, c,
			  proto_encode_error(proto_error_from_negative(r),
					     stop ? SHUTDOWN_TEXT : "the daemon could not list the request's targets",
					     s->msg, MSG_BUF_SIZE), "ERROR");
	if (c->fd >= 0)
		conn_update_events(s, c);
}

static void conn_result(struct queue_entry *w, const struct proto_result *res)
{
	struct conn *c = conn_of(w);
	struct conn_set *s = c->set;

	conn_send_encoded(s, c, proto_encode_result(res, s->msg, MSG_BUF_SIZE), "RESULT");
	if (c->fd >= 0)
		conn_update_events(s, c);
}

static void conn_done(struct queue_entry *w, uint32_t count)
{
	struct conn *c = conn_of(w);
	struct conn_set *s = c->set;

	c->last_activity_ms = now_ms();
	s->requests_served++;
	conn_send_encoded(s, c, proto_encode_done(count, s->msg, MSG_BUF_SIZE), "DONE");
	if (c->fd >= 0)
		conn_update_events(s, c);
}

const struct queue_ops conn_queue_ops = {
	.result = conn_result,
	.done = conn_done,
	.failed = conn_request_failed,
};

/*
 * A policy that is not in force (watch_problem()) is said before a STATUS
 * or POLICY answer, as a NOTICE: an operator looking at either learns that
 * the node runs without the rules written for it.  Only root is told the
 * file, line and reason (they can name rules, users and commands, as
 * POLICY does); anyone else that there is something for root to see.
 */
static void conn_send_policy_notice(struct conn_set *s, struct conn *c)
{
	const char *problem = watch_problem(s->watch);

	if (!problem || c->fd < 0)
		return;
	if (c->caller.uid != 0)
		problem = "the daemon's policy is not what its files say (root sees why: "
			  "btguardctl policy)";
	conn_send_encoded(s, c, proto_encode_notice(problem, s->msg, MSG_BUF_SIZE), "NOTICE");
}

/*
 * POLICY and RELOAD: about the daemon, answered at once, never queued.
 * Root's only (PROTOCOL.md): the rules name users and their commands, and
 * a reload changes what the daemon does to every process.
 */
static void take_daemon_request(struct conn_set *s, struct conn *c, unsigned action)
{
	char why[PROTO_MAX_MESSAGE + 1];
	struct proto_rule rule;
	uint32_t n = 0;
	int r;

	c->last_activity_ms = now_ms();
	if (c->caller.uid != 0) {
		log_msg(LOG_NOTICE, "%s by uid=%u pid=%d refused: root only", proto_action_name(action),
			(unsigned)c->caller.uid, (int)c->caller.pid);
		conn_send_encoded(s, c, proto_encode_error(BTG_ERR_DENIED, "only root may see or reload "
							   "the policy", s->msg, MSG_BUF_SIZE),
				  "ERROR");
		goto out;
	}
	if (action == PROTO_ACTION_SWEPT) {
		conn_send_encoded(s, c, proto_encode_done(watch_last_sweep_s(s->watch), s->msg,
							  MSG_BUF_SIZE), "DONE");
		goto out;
	}
	if (action == PROTO_ACTION_RELOAD) {
		log_msg(LOG_INFO, "reload asked by pid=%d", (int)c->caller.pid);
		r = watch_reload(s->watch, why, sizeof(why));
		if (r < 0)
			conn_send_encoded(s, c, proto_encode_error(proto_error_from_negative(r), why,
								   s->msg, MSG_BUF_SIZE), "ERROR");
		else
			conn_send_encoded(s, c, proto_encode_done((uint32_t)r, s->msg, MSG_BUF_SIZE),
					  "DONE");
		goto out;
	}
	conn_send_policy_notice(s, c);
	while (c->fd >= 0 && watch_rule(s->watch, n, &rule) == 0) {
		conn_send_encoded(s, c, proto_encode_rule(&rule, s->msg, MSG_BUF_SIZE), "RULE");
		n++;
	}
	if (c->fd >= 0)
		conn_send_encoded(s, c, proto_encode_done(n, s->msg, MSG_BUF_SIZE), "DONE");
out:
	s->requests_served++;
	if (c->fd >= 0)
		conn_update_events(s, c);
}

static void take_request(struct conn_set *s, struct conn *c)
{
	struct proto_verdict why;
	int r = proto_decode_request(c->payload, c->hdr.length, s->req, &why);

	if (r < 0) {
		conn_reject(s, c, why.code, "%s", why.text);
		return;
	}
	input_reset(c);
	if (s->req->action == PROTO_ACTION_POLICY || s->req->action == PROTO_ACTION_RELOAD ||
	    s->req->action == PROTO_ACTION_SWEPT) {
		take_daemon_request(s, c, s->req->action);
		return;
	}
	if (s->req->action == PROTO_ACTION_STATUS) {
		conn_send_policy_notice(s, c);
		if (c->fd < 0)
			return;   /* closed (freed at the end of the turn): nothing to submit for */
	}
	/* Pins its targets from now on; the rest of the work is done in turns. */
	r = queue_submit(s->queue, &c->work, &c->caller, s->req);
	if (r < 0) {
		conn_request_failed(&c->work, r);
		return;
	}
	if (c->fd >= 0)
		conn_update_events(s, c);
}

static bool take_header(struct conn_set *s, struct conn *c)
{
	struct proto_verdict why;
	int r = proto_decode_header(c->hdr_buf, PROTO_HEADER_SIZE, &c->hdr, &why);

	if (r < 0) {
		conn_reject(s, c, why.code, "%s", why.text);
		return false;
	}
	if (c->hdr.kind != PROTO_KIND_REQUEST) {
		conn_reject(s, c, BTG_ERR_PROTO,
			    "clients may send only REQUEST messages (kind %u), not kind %u",
			    PROTO_KIND_REQUEST, (unsigned)c->hdr.kind);
		return false;
	}
	c->have_header = true;
	if (c->hdr.length) {
		c->payload = malloc(c->hdr.length);
		if (!c->payload) {
			conn_drop(s, c, "no memory for a %u-byte payload", c->hdr.length);
			return false;
		}
	}
	return true;
}

static void conn_eof(struct conn_set *s, struct conn *c)
{
	if (input_partial(c))
		log_msg(LOG_DEBUG, "client pid=%d: closed in the middle of a message",
			(int)c->caller.pid);
	else
		log_msg(LOG_DEBUG, "client pid=%d: closed", (int)c->caller.pid);
	input_reset(c);
	c->rdhup = true;
	c->closing = true;
	conn_flush(s, c);    /* closes at once when nothing is queued */
	conn_update_events(s, c);
}

/*
 * Reads at most one message: exactly the header's 12 bytes, then exactly
 * the payload, never a byte of the next message.
 */
static void conn_read(struct conn_set *s, struct conn *c)
{
	for (;;) {
		uint8_t *dst;
		size_t want;
		ssize_t n;

		if (!c->have_header) {
			dst = c->hdr_buf + c->hdr_len;
			want = PROTO_HEADER_SIZE - c->hdr_len;
		} else {
			dst = c->payload + c->pay_len;
			want = c->hdr.length - c->pay_len;
		}
		n = recv(c->fd, dst, want, MSG_DONTWAIT);
		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno != EAGAIN && errno != EWOULDBLOCK)
				conn_gone(s, c, strerror(errno));
			return;
		}
		if (n == 0) {
			conn_eof(s, c);
			return;
		}
		c->last_activity_ms = now_ms();
		if (!input_partial(c))
			c->msg_start_ms = c->last_activity_ms;
		if (!c->have_header) {
			c->hdr_len += (size_t)n;
			if (c->hdr_len < PROTO_HEADER_SIZE)
				continue;
			if (!take_header(s, c))
				return;
		} else {
			c->pay_len += (size_t)n;
		}
		if (c->pay_len == c->hdr.length) {
			take_request(s, c);
			return;
		}
	}
}

void conn_event(struct conn_set *s, struct conn *c, uint32_t events)
{
	if (c->fd < 0)
		return;
	if (events & (EPOLLHUP | EPOLLERR)) {
		/* Gone for good: nothing we send can arrive, so do no more for it. */
		conn_gone(s, c, "disconnected");
		return;
	}
	if (events & EPOLLRDHUP)
		c->rdhup = true;
	if (events & EPOLLOUT) {
		conn_flush(s, c);
		if (c->fd < 0)
			return;
	}
	if ((events & EPOLLIN) && !c->work.busy && !c->closing && !s->stopping) {
		conn_read(s, c);
		if (c->fd < 0)
			return;
	}
	conn_update_events(s, c);
}

/* ------------------------------------------------------------- stop -- */

/* At shutdown: c's remaining targets answered "shutdown", then it closes once flushed. */
static size_t conn_answer_shutdown(struct conn_set *s, struct conn *c)
{
	size_t n = 0;

	if (c->work.busy) {
		n = queue_shutdown(s->queue, &c->work);
	} else if (input_partial(c)) {
		input_reset(c);
		conn_send_encoded(s, c, proto_encode_error(BTG_ERR_SHUTDOWN, SHUTDOWN_TEXT, s->msg,
							    MSG_BUF_SIZE), "ERROR");
	}
	if (c->fd < 0)
		return n;
	c->closing = true;
	conn_flush(s, c);
	if (c->fd >= 0)
		conn_update_events(s, c);
	return n;
}

size_t conn_stop_all(struct conn_set *s)
{
	struct conn *c, *next;
	size_t n = 0;

	s->stopping = true;
	for (c = TAILQ_FIRST(&s->open); c; c = next) {
		next = TAILQ_NEXT(c, in_set);
		n += conn_answer_shutdown(s, c);
	}
	return n;
}

/* ------------------------------------------------------------ timers -- */

static void conn_check_timers(struct conn_set *s, struct conn *c, uint64_t t_ms)
{
	unsigned idle_limit_ms = s->crowded ? IDLE_CROWDED_MS : IDLE_TIMEOUT_MS;

	if (out_pending(c) && t_ms - c->out_progress_ms >= WRITE_STALL_MS)
		conn_drop(s, c, "read nothing for %u s while replies were waiting",
			  WRITE_STALL_MS / 1000);
	else if (input_partial(c) && !c->closing && t_ms - c->msg_start_ms >= MESSAGE_TIMEOUT_MS)
		conn_reject(s, c, BTG_ERR_LIMIT,
			    "message not completed within %u s (%zu of %zu bytes received)",
			    MESSAGE_TIMEOUT_MS / 1000,
			    c->hdr_len + c->pay_len,
			    PROTO_HEADER_SIZE + (c->have_header ? (size_t)c->hdr.length : 0));
	else if (!c->work.busy && !c->closing && !input_partial(c) && !out_pending(c) &&
		 t_ms - c->last_activity_ms >= idle_limit_ms) {
		log_msg(LOG_DEBUG, "client pid=%d: idle for %u s%s; closing", (int)c->caller.pid,
			idle_limit_ms / 1000, idle_limit_ms < IDLE_TIMEOUT_MS ? " while crowded" : "");
		conn_close(s, c);
	}
}

void conn_sweep(struct conn_set *s, uint64_t t_ms)
{
	struct conn *c, *next;

	/*
	 * Decided once per sweep: every connection idle past the short limit
	 * goes, not just enough of them to dip under the mark (a flood of
	 * idle clients would refill it at once).
	 */
	s->crowded = s->nconns >= SERVER_MAX_CONNS - SERVER_ROOT_RESERVE;
	for (c = TAILQ_FIRST(&s->open); c; c = next) {
		next = TAILQ_NEXT(c, in_set);
		conn_check_timers(s, c, t_ms);
	}
}
