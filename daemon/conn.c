// SPDX-License-Identifier: MIT
/*
 * One client connection of the control socket: reading its messages (one at
 * a time: exactly the 12-byte header, then exactly the payload it
 * announces), turning a request into targets, running them one per turn
 * when the loop says so, queueing RESULT/DONE/ERROR replies, and the
 * connection's limits.  server.c owns the loop and decides whose turn it is.
 *
 * A misbehaving client only ever loses its own connection: it is told why
 * (an ERROR message) when that can still reach it, logged at notice with
 * its pid and uid, and closed.
 *
 * Limits, all per connection:
 *  - input: one message at a time, at most PROTO_HEADER_SIZE +
 *    PROTO_MAX_PAYLOAD bytes; a started message must complete in 10 s;
 *  - idle: nothing pending and nothing half-read for 60 s closes it, or
 *    for 5 s while the daemon is crowded (struct server's crowded);
 *  - output: capped at 8 MiB; above 1 MiB its targets wait until it
 *    drains; 10 s without the client reading anything drops it.
 */
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "action.h"
#include "conn.h"
#include "log.h"

#define MESSAGE_TIMEOUT_MS  10000u
#define IDLE_TIMEOUT_MS     60000u
#define IDLE_CROWDED_MS     5000u
#define WRITE_STALL_MS      10000u
#define OUT_HARD_CAP        (8u << 20)
#define OUT_HIGH_WATER      (1u << 20)
/* An output buffer bigger than this is freed once drained, not kept. */
#define OUT_KEEP            (64u << 10)

#define SHUTDOWN_TEXT "btguardd is stopping; nothing was done"


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

/* ---------------------------------------------------------- the queue -- */

static void work_enqueue(struct server *srv, struct conn *c)
{
	if (c->queued || c->fd < 0 || srv->stopping || !c->busy ||
	    (!c->expanding && c->next_target >= c->ntargets) || out_pending(c) > OUT_HIGH_WATER)
		return;
	c->work_next = NULL;
	if (srv->work_tail)
		srv->work_tail->work_next = c;
	else
		srv->work_head = c;
	srv->work_tail = c;
	c->queued = true;
}

static struct conn *work_pop(struct server *srv)
{
	struct conn *c = srv->work_head;

	if (!c)
		return NULL;
	srv->work_head = c->work_next;
	if (!srv->work_head)
		srv->work_tail = NULL;
	c->work_next = NULL;
	c->queued = false;
	return c;
}

static void work_remove(struct server *srv, struct conn *c)
{
	struct conn **pp, *prev = NULL;

	if (!c->queued)
		return;
	for (pp = &srv->work_head; *pp; prev = *pp, pp = &(*pp)->work_next) {
		if (*pp != c)
			continue;
		*pp = c->work_next;
		if (srv->work_tail == c)
			srv->work_tail = prev;
		break;
	}
	c->work_next = NULL;
	c->queued = false;
}

/* ------------------------------------------------------ connections -- */

void conn_close(struct server *srv, struct conn *c)
{
	if (c->fd < 0)
		return;
	work_remove(srv, c);
	epoll_ctl(srv->epfd, EPOLL_CTL_DEL, c->fd, NULL);
	close(c->fd);
	c->fd = -1;
	if (c->prev)
		c->prev->next = c->next;
	else
		srv->conns = c->next;
	if (c->next)
		c->next->prev = c->prev;
	/* Events of this very turn may still point at c: free it at the end. */
	c->prev = NULL;
	c->next = srv->graveyard;
	srv->graveyard = c;
	if (--srv->nconns == 0)
		srv->idle_since = now_ms();
}

static void conn_free(struct conn *c)
{
	free(c->payload);
	action_expand_free(c->expanding);
	action_targets_free(c->targets, c->ntargets);
	free(c->out);
	free(c);
}

void conn_bury(struct server *srv)
{
	while (srv->graveyard) {
		struct conn *c = srv->graveyard;

		srv->graveyard = c->next;
		conn_free(c);
	}
}

__attribute__((format(printf, 3, 4)))
static void conn_drop(struct server *srv, struct conn *c, const char *fmt, ...)
{
	char why[256];
	va_list ap;

	va_start(ap, fmt);
	vsnprintf(why, sizeof(why), fmt, ap);
	va_end(ap);
	log_msg(LOG_NOTICE, "dropping client pid=%d uid=%u: %s", (int)c->caller.pid,
		(unsigned)c->caller.uid, why);
	conn_close(srv, c);
}

/* The peer is gone (or unusable): whatever it still had queued is not run. */
static void conn_gone(struct server *srv, struct conn *c, const char *why)
{
	if (c->expanding)
		log_msg(LOG_DEBUG, "client pid=%d: %s; dropping a request still being read",
			(int)c->caller.pid, why);
	else if (c->busy && c->next_target < c->ntargets)
		log_msg(LOG_DEBUG, "client pid=%d: %s; dropping %zu pending target(s)",
			(int)c->caller.pid, why, c->ntargets - c->next_target);
	else
		log_msg(LOG_DEBUG, "client pid=%d: %s", (int)c->caller.pid, why);
	conn_close(srv, c);
}

static void conn_update_events(struct server *srv, struct conn *c)
{
	struct epoll_event ev = { .data.ptr = c };
	uint32_t want = 0;

	if (c->fd < 0)
		return;
	/* Level-triggered: a seen RDHUP would fire forever, so ask for it once. */
	if (!c->rdhup)
		want |= EPOLLRDHUP;
	/* One request at a time: pipelined bytes wait in the socket. */
	if (!c->busy && !c->closing && !srv->stopping)
		want |= EPOLLIN;
	if (out_pending(c))
		want |= EPOLLOUT;
	if (want == c->events)
		return;
	ev.events = want;
	if (epoll_ctl(srv->epfd, EPOLL_CTL_MOD, c->fd, &ev) < 0) {
		conn_drop(srv, c, "epoll_ctl: %s", strerror(errno));
		return;
	}
	c->events = want;
}

/* Sends what the kernel takes now; closes c on a dead peer or when done closing. */
static void conn_flush(struct server *srv, struct conn *c)
{
	while (out_pending(c)) {
		ssize_t n = send(c->fd, c->out + c->out_off, out_pending(c),
				 MSG_NOSIGNAL | MSG_DONTWAIT);

		if (n < 0) {
			if (errno == EINTR)
				continue;
			if (errno == EAGAIN || errno == EWOULDBLOCK)
				break;
			conn_gone(srv, c, strerror(errno));
			return;
		}
		c->out_off += (size_t)n;
		c->out_progress = c->last_activity = now_ms();
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
			conn_close(srv, c);
			return;
		}
	}
	/* Back under the high-water mark: its targets may run again. */
	work_enqueue(srv, c);
}

/* Appends one encoded message to c's output queue; -ENOBUFS above the cap. */
static int conn_queue(struct conn *c, const uint8_t *data, size_t n)
{
	size_t pending = out_pending(c);

	if (pending + n > OUT_HARD_CAP)
		return -ENOBUFS;
	if (pending == 0) {
		c->out_off = c->out_len = 0;
		c->out_progress = now_ms();
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

/* Queues a message already encoded in srv->msg (length r, or -errno). */
static void conn_send_encoded(struct server *srv, struct conn *c, int r, const char *what)
{
	if (r < 0) {
		log_msg(LOG_ERR, "cannot encode %s for client pid=%d: %s", what,
			(int)c->caller.pid, strerror(-r));
		conn_close(srv, c);
		return;
	}
	r = conn_queue(c, srv->msg, (size_t)r);
	if (r < 0) {
		conn_drop(srv, c, "more than %u bytes of replies queued and not read", OUT_HARD_CAP);
		return;
	}
	conn_flush(srv, c);
}

/*
 * Tells a misbehaving client why, then closes once that is sent.  Whatever
 * it sent after the bad bytes is never read.
 */
__attribute__((format(printf, 4, 5)))
static void conn_reject(struct server *srv, struct conn *c, uint32_t code, const char *fmt, ...)
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
	conn_send_encoded(srv, c, proto_encode_error(code, why, srv->msg, MSG_BUF_SIZE), "ERROR");
	conn_update_events(srv, c);
}

/* ------------------------------------------------------------- input -- */

static void finish_request(struct server *srv, struct conn *c)
{
	uint32_t count = (uint32_t)c->next_target;   /* every target up to here was answered */

	action_targets_free(c->targets, c->ntargets);
	c->targets = NULL;
	c->ntargets = c->next_target = 0;
	c->busy = false;
	c->last_activity = now_ms();
	srv->requests_served++;
	conn_send_encoded(srv, c, proto_encode_done(count, srv->msg, MSG_BUF_SIZE), "DONE");
	conn_update_events(srv, c);
}

/* Our failure, not the client's: tell it and keep the connection. */
static void expand_failed(struct server *srv, struct conn *c, int r)
{
	log_msg(LOG_ERR, "cannot list the targets of a request: %s",
		r <= -BTG_ERR_BASE ? proto_error_text((uint32_t)-r) : strerror(-r));
	action_expand_free(c->expanding);
	c->expanding = NULL;
	if (c->next_target > 0) {
		/* A --tree relist: the results sent stand; DONE ends them. */
		finish_request(srv, c);
		return;
	}
	c->busy = false;
	c->last_activity = now_ms();
	conn_send_encoded(srv, c,
			  proto_encode_error(proto_error_from_negative(r),
					     "the daemon could not list the request's targets",
					     srv->msg, MSG_BUF_SIZE), "ERROR");
	if (c->fd >= 0)
		conn_update_events(srv, c);
}

/*
 * One bounded step of resolving and pinning c's targets (ACTION_STEP_US):
 * a request naming thousands of PIDs, or coming from another PID
 * namespace, takes its turns like any other instead of holding the loop.
 */
static void expand_step(struct server *srv, struct conn *c)
{
	int r = action_expand_step(c->expanding);

	if (r < 0) {
		expand_failed(srv, c, r);
		return;
	}
	if (r > 0) {
		action_expand_end(c->expanding, &c->targets, &c->ntargets);
		c->expanding = NULL;
		log_msg(LOG_DEBUG, "client pid=%d: %zu target(s)", (int)c->caller.pid, c->ntargets);
		if (c->next_target >= c->ntargets) {   /* none, or a relist found no new child */
			finish_request(srv, c);
			return;
		}
	}
	work_enqueue(srv, c);
	conn_update_events(srv, c);
}

static void take_request(struct server *srv, struct conn *c)
{
	struct proto_verdict why;
	int r = proto_decode_request(c->payload, c->hdr.length, srv->req, &why);

	if (r < 0) {
		conn_reject(srv, c, why.code, "%s", why.text);
		return;
	}
	input_reset(c);
	/* Pins its targets from now on; the rest of the work is done in turns. */
	r = action_expand_new(&c->caller, srv->req, &c->expanding);
	if (r < 0) {
		expand_failed(srv, c, r);
		return;
	}
	c->busy = true;
	c->tree = (srv->req->flags & PROTO_FLAG_TREE) && srv->req->action != PROTO_ACTION_STATUS;
	c->relists = 0;
	c->relist_from = 0;
	c->action = srv->req->action;
	c->deadline_ms = srv->req->deadline_ms ? srv->req->deadline_ms : PROTO_DEFAULT_DEADLINE_MS;
	c->next_target = c->ntargets = 0;
	log_msg(LOG_DEBUG, "client pid=%d uid=%u: %s request, %u PID(s)", (int)c->caller.pid,
		(unsigned)c->caller.uid, proto_action_name(c->action), srv->req->npids);
	/* A first step at once: most requests are done with it. */
	expand_step(srv, c);
}

static bool take_header(struct server *srv, struct conn *c)
{
	struct proto_verdict why;
	int r = proto_decode_header(c->hdr_buf, PROTO_HEADER_SIZE, &c->hdr, &why);

	if (r < 0) {
		conn_reject(srv, c, why.code, "%s", why.text);
		return false;
	}
	if (c->hdr.kind != PROTO_KIND_REQUEST) {
		conn_reject(srv, c, BTG_ERR_PROTO,
			    "clients may send only REQUEST messages (kind %u), not kind %u",
			    PROTO_KIND_REQUEST, (unsigned)c->hdr.kind);
		return false;
	}
	c->have_header = true;
	if (c->hdr.length) {
		c->payload = malloc(c->hdr.length);
		if (!c->payload) {
			conn_drop(srv, c, "no memory for a %u-byte payload", c->hdr.length);
			return false;
		}
	}
	return true;
}

static void conn_eof(struct server *srv, struct conn *c)
{
	if (input_partial(c))
		log_msg(LOG_DEBUG, "client pid=%d: closed in the middle of a message",
			(int)c->caller.pid);
	else
		log_msg(LOG_DEBUG, "client pid=%d: closed", (int)c->caller.pid);
	input_reset(c);
	c->rdhup = true;
	c->closing = true;
	conn_flush(srv, c);    /* closes at once when nothing is queued */
	conn_update_events(srv, c);
}

/*
 * Reads at most one message: exactly the header's 12 bytes, then exactly
 * the payload, never a byte of the next message.
 */
static void conn_read(struct server *srv, struct conn *c)
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
				conn_gone(srv, c, strerror(errno));
			return;
		}
		if (n == 0) {
			conn_eof(srv, c);
			return;
		}
		c->last_activity = now_ms();
		if (!input_partial(c))
			c->msg_start = c->last_activity;
		if (!c->have_header) {
			c->hdr_len += (size_t)n;
			if (c->hdr_len < PROTO_HEADER_SIZE)
				continue;
			if (!take_header(srv, c))
				return;
		} else {
			c->pay_len += (size_t)n;
		}
		if (c->pay_len == c->hdr.length) {
			take_request(srv, c);
			return;
		}
	}
}

void conn_event(struct server *srv, struct conn *c, uint32_t events)
{
	if (c->fd < 0)
		return;
	if (events & (EPOLLHUP | EPOLLERR)) {
		/* Gone for good: nothing we send can arrive, so do no more for it. */
		conn_gone(srv, c, "disconnected");
		return;
	}
	if (events & EPOLLRDHUP)
		c->rdhup = true;
	if (events & EPOLLOUT) {
		conn_flush(srv, c);
		if (c->fd < 0)
			return;
	}
	if ((events & EPOLLIN) && !c->busy && !c->closing && !srv->stopping) {
		conn_read(srv, c);
		if (c->fd < 0)
			return;
	}
	conn_update_events(srv, c);
}

/* ------------------------------------------------------------- turns -- */

/* ------------------------------------------------------------- work -- */

/*
 * --tree after guard or unguard: every target has run, so list the
 * children of those that ran since the last round again, as a new
 * expansion that keeps the targets so far.  True when one was started.
 */
static bool relist(struct conn *c)
{
	size_t from = c->relist_from;
	int r;

	if (!c->tree || c->relists >= ACTION_TREE_RELISTS || from >= c->ntargets)
		return false;
	r = action_expand_relist(&c->caller, c->targets, c->ntargets, from, &c->expanding);
	c->targets = NULL;   /* the expansion holds them now, or freed them */
	c->relists++;
	c->relist_from = c->ntargets;
	if (r < 0) {
		c->ntargets = 0;
		c->expanding = NULL;
		log_msg(LOG_ERR, "cannot list children again: %s", strerror(-r));
		return false;
	}
	return true;
}

void conn_run_one_target(struct server *srv)
{
	struct conn *c = work_pop(srv);

	if (!c)
		return;
	if (c->expanding) {
		expand_step(srv, c);
		return;
	}
	action_run(&c->caller, c->action, c->deadline_ms, &c->targets[c->next_target++], srv->res);
	conn_send_encoded(srv, c, proto_encode_result(srv->res, srv->msg, MSG_BUF_SIZE), "RESULT");
	if (c->fd < 0)
		return;
	if (c->next_target == c->ntargets && !relist(c))
		finish_request(srv, c);
	else if (c->fd >= 0)
		work_enqueue(srv, c);
	if (c->fd >= 0)
		conn_update_events(srv, c);
}

size_t conn_answer_shutdown(struct server *srv, struct conn *c)
{
	size_t n = 0;

	work_remove(srv, c);
	if (c->expanding && c->next_target > 0) {
		/* A --tree relist: what ran was answered; the rest is not started. */
		action_expand_free(c->expanding);
		c->expanding = NULL;
		finish_request(srv, c);
	} else if (c->expanding) {
		/* Not one target listed yet: the request as a whole is refused. */
		action_expand_free(c->expanding);
		c->expanding = NULL;
		c->busy = false;
		conn_send_encoded(srv, c, proto_encode_error(BTG_ERR_SHUTDOWN, SHUTDOWN_TEXT, srv->msg,
							     MSG_BUF_SIZE), "ERROR");
	} else if (c->busy) {
		while (c->fd >= 0 && c->next_target < c->ntargets) {
			struct proto_result *res = srv->res;

			memset(res, 0, sizeof(*res));
			res->pid = c->targets[c->next_target++].pid;
			res->error = BTG_ERR_SHUTDOWN;
			res->action = (uint8_t)c->action;
			res->state = PROTO_PROC_UNKNOWN;
			snprintf(res->message, sizeof(res->message), "%s", SHUTDOWN_TEXT);
			conn_send_encoded(srv, c, proto_encode_result(res, srv->msg, MSG_BUF_SIZE),
					  "RESULT");
			n++;
		}
		if (c->fd >= 0)
			finish_request(srv, c);
	} else if (input_partial(c)) {
		input_reset(c);
		conn_send_encoded(srv, c, proto_encode_error(BTG_ERR_SHUTDOWN, SHUTDOWN_TEXT, srv->msg,
							     MSG_BUF_SIZE), "ERROR");
	}
	if (c->fd < 0)
		return n;
	c->closing = true;
	conn_flush(srv, c);
	conn_update_events(srv, c);
	return n;
}

void conn_check_timers(struct server *srv, struct conn *c, uint64_t now)
{
	unsigned idle_limit = srv->crowded ? IDLE_CROWDED_MS : IDLE_TIMEOUT_MS;

	if (out_pending(c) && now - c->out_progress >= WRITE_STALL_MS)
		conn_drop(srv, c, "read nothing for %u s while replies were waiting",
			  WRITE_STALL_MS / 1000);
	else if (input_partial(c) && !c->closing && now - c->msg_start >= MESSAGE_TIMEOUT_MS)
		conn_reject(srv, c, BTG_ERR_LIMIT,
			    "message not completed within %u s (%zu of %zu bytes received)",
			    MESSAGE_TIMEOUT_MS / 1000,
			    c->hdr_len + c->pay_len,
			    PROTO_HEADER_SIZE + (c->have_header ? (size_t)c->hdr.length : 0));
	else if (!c->busy && !c->closing && !input_partial(c) && !out_pending(c) &&
		 now - c->last_activity >= idle_limit) {
		log_msg(LOG_DEBUG, "client pid=%d: idle for %u s%s; closing", (int)c->caller.pid,
			idle_limit / 1000, idle_limit < IDLE_TIMEOUT_MS ? " while crowded" : "");
		conn_close(srv, c);
	}
}
