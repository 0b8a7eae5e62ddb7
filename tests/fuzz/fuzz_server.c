// SPDX-License-Identifier: MIT
/*
 * Fuzzes the daemon's connection state machine (daemon/serve/conn.c) and the
 * queue of turns behind it (daemon/request/queue.c) live: a real socketpair, a
 * real epoll set, and the same turn the event loop in server.c takes
 * (epoll_wait, conn_event for each ready fd, conn_bury, one queue_turn),
 * driven by a client that sends the
 * fuzzer's bytes in chunks of the fuzzer's choosing, with the clock jumped
 * forward, reading paused, the socket half-closed or closed, or the daemon
 * stopped in between.
 *
 * Only the parts that would touch other processes are replaced, further
 * down: action_expand_*() and action_start/step/cancel() answer from the
 * PID alone (some PIDs are "busy" for a few attempts, so targets park)
 * (the harness runs as root: it must never ptrace a random PID), and
 * log_msg() formats into a buffer instead of the journal.
 *
 * Input: a script of steps, each a control byte c and what it needs.
 *   c < 0xc0           send the next c + 1 input bytes (1..192)
 *   0xc0 <= c < 0xe0   send the next (c - 0xbf) * 1024 input bytes
 *   0xe0               timers run 10 s later (message and write-stall limits)
 *   0xe1               timers run 60 s later (idle limit)
 *   0xe2               the client stops / resumes reading replies
 *   0xe3               the client shuts down its sending side
 *   0xe4               SIGTERM: the daemon answers what is queued and stops
 *   0xe5               the client closes its socket
 *   0xe6 <= c          send the next c - 0xe5 input bytes (1..26)
 * At the end the client resumes reading and hangs up.
 *
 * Properties checked:
 *  - every byte the daemon sends parses as a RESULT, DONE or ERROR message
 *    whose payload the decoders accept;
 *  - RESULTs come in request order, for exactly the PIDs the request
 *    expanded to; DONE counts them; an ERROR never interrupts a request;
 *  - the loop never spins: a turn with ready events always moves bytes or
 *    runs a target within a bounded number of turns;
 *  - once the client has hung up and read everything, the connection is
 *    closed (no connection outlives its client), and nothing leaks (ASan).
 */
#include <errno.h>
#include <stdarg.h>
#include <stdbool.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#include "action.h"
#include "conn.h"
#include "fuzz.h"
#include "log.h"
#include "queue.h"
#include "watch.h"
#include "timeutil.h"

#define SPIN_LIMIT   1000u     /* turns with events but no visible progress */
#define INBUF_SIZE   (2u * MSG_BUF_SIZE)

/* Expanded targets, in the order RESULTs must arrive. */
struct expect {
	int32_t *pids;
	size_t n, cap;
	size_t run;                /* next one action_start() must be given */
	size_t next;               /* next one a RESULT must name */
};

struct harness {
	struct queue q;
	struct conn_set s;
	int cfd;                   /* client end, -1 once closed */
	bool reading, wr_shut;
	uint8_t in[INBUF_SIZE];    /* client's reassembly buffer */
	size_t in_len;
	size_t got;                /* bytes received in total */
	size_t results;            /* RESULTs since the last DONE/ERROR */
	uint64_t targets_run;
	struct expect exp;
};

static struct harness *cur;    /* for the stubs below */

/* ------------------------------------------------ stubs for the daemon -- */

void log_msg(int priority, const char *fmt, ...)
{
	char line[1024];
	va_list ap;

	(void)priority;
	va_start(ap, fmt);
	vsnprintf(line, sizeof(line), fmt, ap);
	va_end(ap);
}

static void expect_add(struct expect *e, int32_t pid)
{
	if (e->n == e->cap) {
		size_t cap = e->cap ? 2 * e->cap : 1024;
		int32_t *p = realloc(e->pids, cap * sizeof(*p));

		if (!p)
			abort();
		e->pids = p;
		e->cap = cap;
	}
	e->pids[e->n++] = pid;
}

/* PID 0x7ffffff0 first in a request: the daemon cannot list the targets. */
#define STUB_EXPAND_FAILS 0x7ffffff0

/* The stub's expansion: the whole list at once, handed out after a few steps. */
struct action_expansion {
	struct action_target *t;
	size_t n;
	size_t first_new;        /* a --tree relist hands back t[0..first_new) unchanged */
	unsigned steps_left;     /* turns still to take: pids[0] % 3 */
	bool fail;               /* the last step fails */
};

int action_expand_new(const struct auth_caller *caller, const struct proto_request *req,
		      struct action_expansion **ret)
{
	struct action_expansion *x;
	size_t n = 0;

	(void)caller;
	/* PIDs or a selector; the stub selects nothing. */
	FUZZ_CHECK(req->npids <= PROTO_MAX_PIDS && (req->npids >= 1) != (req->sel.fields != 0));
	x = calloc(1, sizeof(*x));
	if (!x)
		return -ENOMEM;
	x->t = malloc(PROTO_MAX_PIDS * sizeof(*x->t));
	if (!x->t) {
		free(x);
		return -ENOMEM;
	}
	x->steps_left = (uint32_t)req->pids[0] % 3u;
	x->fail = req->pids[0] == STUB_EXPAND_FAILS;
	/* --tree: PID p has p % 4 descendants, p+1 ... */
	for (uint32_t i = 0; i < req->npids && n < PROTO_MAX_PIDS; i++) {
		int32_t p = req->pids[i];

		FUZZ_CHECK(p > 0);
		x->t[n++] = (struct action_target){ .pid = p, .ours = p, .pidfd = -1 };
		if (!(req->flags & PROTO_FLAG_TREE))
			continue;
		for (int32_t k = 1; k <= p % 4 && p <= INT32_MAX - k && n < PROTO_MAX_PIDS; k++)
			x->t[n++] = (struct action_target){ .pid = p + k, .ours = p + k, .pidfd = -1 };
	}
	x->n = n;
	*ret = x;
	return 0;
}

/* A relist finds one more child of the first target run since the last round whose PID % 5 == 0. */
int action_expand_relist(const struct auth_caller *caller, struct action_target *t, size_t n,
			 size_t from, struct action_expansion **ret)
{
	struct action_expansion *x = calloc(1, sizeof(*x));
	struct action_target *more;

	(void)caller;
	FUZZ_CHECK(from < n);
	more = x ? realloc(t, (n + 1) * sizeof(*t)) : NULL;
	if (!more) {
		free(x);
		free(t);
		return -ENOMEM;
	}
	x->t = more;
	x->n = x->first_new = n;
	for (size_t i = from; i < n; i++) {
		if (more[i].pid % 5 == 0 && more[i].pid <= INT32_MAX - 1000) {
			more[x->n++] = (struct action_target){ .pid = more[i].pid + 1000,
							       .ours = more[i].pid + 1000, .pidfd = -1 };
			break;
		}
	}
	*ret = x;
	return 0;
}

int action_expand_step(struct action_expansion *x)
{
	if (x->steps_left > 0) {
		x->steps_left--;
		return 0;
	}
	if (x->fail)
		return -ENOMEM;
	return 1;
}

void action_expand_end(struct action_expansion *x, struct action_target **ret, size_t *ret_n)
{
	for (size_t i = x->first_new; i < x->n; i++)
		expect_add(&cur->exp, x->t[i].pid);
	*ret = x->t;
	*ret_n = x->n;
	free(x);
}

void action_expand_free(struct action_expansion *x)
{
	if (!x)
		return;
	free(x->t);
	free(x);
}

void action_targets_free(struct action_target *t, size_t n)
{
	(void)n;
	free(t);
}

static uint32_t stub_error(int32_t pid)
{
	static const uint32_t errs[] = { BTG_OK, BTG_OK, BTG_ERR_BUSY, ESRCH, BTG_ERR_DENIED };

	return errs[(uint32_t)pid % (sizeof(errs) / sizeof(errs[0]))];
}

/*
 * A reply that depends on the PID only.  Most are small; PIDs divisible by
 * 64 get every site and long strings, so a request of a few hundred PIDs
 * crosses the output high-water mark when the client does not read.
 */
static void stub_answer(int32_t pid, unsigned action, struct proto_result *res)
{
	bool big = pid % 64 == 0;
	size_t msglen = big ? PROTO_MAX_MESSAGE : (size_t)pid % 97;

	memset(res, 0, sizeof(*res));
	res->pid = pid;
	res->action = (uint8_t)action;
	res->error = stub_error(pid);
	res->state = (uint8_t)(pid % 6);
	res->flags = res->error ? 0 : PROTO_RESULT_WROTE;
	res->pause_us = (uint32_t)pid * 7u;
	memset(res->message, 'm', msglen);
	res->nsites = (uint8_t)(big ? PROTO_MAX_SITES : (unsigned)pid % 3u);
	for (unsigned i = 0; i < res->nsites; i++) {
		size_t objlen = big ? PROTO_MAX_OBJECT : (size_t)(((uint32_t)pid + i) % 40u);

		res->sites[i].address = 0x7f0000000000ull + (uint64_t)pid * 16 + i;
		res->sites[i].state = (uint8_t)(1u + ((uint32_t)pid + i) % 3u);
		memset(res->sites[i].object, '/', objlen);
	}
	cur->targets_run++;
}

/* A target in progress: PIDs with pid % 5 == 3 are busy for pid % 4 + 1 attempts. */
struct action_job {
	int32_t pid;
	unsigned action;
	unsigned busy_left;
	struct proto_result *res;
};

int action_start(const struct auth_caller *caller, unsigned action, uint32_t deadline_ms,
		 struct action_target *target, struct proto_result *res,
		 struct action_job **ret, uint64_t *ret_wake_ms)
{
	int32_t pid = target->pid;
	struct action_job *j;

	(void)caller;
	*ret = NULL;
	FUZZ_CHECK(deadline_ms >= 1 && deadline_ms <= proto_max_deadline_ms(action));
	/* Targets start in request order, each once. */
	FUZZ_CHECK(cur->exp.run < cur->exp.n && pid == cur->exp.pids[cur->exp.run]);
	FUZZ_CHECK(target->ours == pid);  /* the pin travels with its PID */
	cur->exp.run++;
	if (pid % 5 != 3) {
		stub_answer(pid, action, res);
		return 0;
	}
	j = calloc(1, sizeof(*j));
	if (!j)
		abort();
	*j = (struct action_job){ .pid = pid, .action = action,
				  .busy_left = (uint32_t)pid % 4u + 1u, .res = res };
	memset(res, 0, sizeof(*res));
	res->pid = pid;
	*ret = j;
	/* Due at once: the harness's turns do not wait for the clock. */
	*ret_wake_ms = now_ms();
	return ACTION_AGAIN;
}

int action_step(struct action_job *j, uint64_t *ret_wake_ms)
{
	if (--j->busy_left > 0) {
		*ret_wake_ms = now_ms();
		return ACTION_AGAIN;
	}
	stub_answer(j->pid, j->action, j->res);
	free(j);
	return 0;
}

void action_cancel(struct action_job *j, int err, const char *why)
{
	memset(j->res, 0, sizeof(*j->res));
	j->res->pid = j->pid;
	j->res->action = (uint8_t)j->action;
	j->res->error = proto_error_from_negative(err);
	snprintf(j->res->message, sizeof(j->res->message), "%s", why);
	free(j);
}

/* ------------------------------------------------------------- client -- */

/* One whole message from the daemon: it must be well-formed and in order. */
/* watch.c stubs: no policy here (conn.c answers POLICY, RELOAD and SWEPT from them). */
uint32_t watch_last_sweep_s(const struct watch *w)
{
	(void)w;
	return 0;
}

int watch_reload(struct watch *w, char *why, size_t why_len)
{
	(void)w;
	snprintf(why, why_len, "fuzz.conf:1: no policy in the harness");
	return -EINVAL;
}

/* The harness's daemon runs without its policy: every STATUS answer starts with a NOTICE. */
const char *watch_problem(const struct watch *w)
{
	(void)w;
	return "policy not loaded: fuzz.conf:1: no policy in the harness";
}

int watch_rule(const struct watch *w, size_t i, struct proto_rule *ret)
{
	(void)w;
	if (i > 0)
		return -ENOENT;
	memset(ret, 0, sizeof(*ret));
	snprintf(ret->name, sizeof(ret->name), "fuzz");
	snprintf(ret->match, sizeof(ret->match), "at-risk");
	return 0;
}

static void client_message(struct harness *h, const struct proto_header *hdr,
			   const uint8_t *payload)
{
	static struct proto_result res;
	char msg[PROTO_MAX_MESSAGE + 1];
	uint32_t count, code;

	switch (hdr->kind) {
	case PROTO_KIND_RESULT:
		FUZZ_CHECK(proto_decode_result(payload, hdr->length, &res) == 0);
		FUZZ_CHECK(h->exp.next < h->exp.n);
		FUZZ_CHECK(res.pid == h->exp.pids[h->exp.next]);
		h->exp.next++;
		FUZZ_CHECK(res.error == stub_error(res.pid) || res.error == BTG_ERR_SHUTDOWN);
		h->results++;
		break;
	case PROTO_KIND_DONE:
		FUZZ_CHECK(proto_decode_done(payload, hdr->length, &count) == 0);
		FUZZ_CHECK(count == h->results && count <= PROTO_MAX_PIDS);
		h->results = 0;
		break;
	case PROTO_KIND_ERROR:
		FUZZ_CHECK(proto_decode_error(payload, hdr->length, &code, msg, sizeof(msg)) == 0);
		FUZZ_CHECK(h->results == 0);
		break;
	case PROTO_KIND_NOTICE:   /* before any RESULT of its answer */
		FUZZ_CHECK(proto_decode_notice(payload, hdr->length, msg, sizeof(msg)) == 0);
		FUZZ_CHECK(h->results == 0);
		break;
	default:
		FUZZ_CHECK(!"the daemon sent a REQUEST");
	}
}

/* Takes every whole message off the front of the reassembly buffer. */
static void client_parse(struct harness *h)
{
	size_t off = 0;

	while (h->in_len - off >= PROTO_HEADER_SIZE) {
		struct proto_header hdr;
		uint8_t *payload;

		FUZZ_CHECK(proto_decode_header(h->in + off, PROTO_HEADER_SIZE, &hdr, NULL) == 0);
		if (h->in_len - off - PROTO_HEADER_SIZE < hdr.length)
			break;
		payload = fuzz_copy(h->in + off + PROTO_HEADER_SIZE, hdr.length);
		client_message(h, &hdr, payload);
		free(payload);
		off += PROTO_HEADER_SIZE + hdr.length;
	}
	memmove(h->in, h->in + off, h->in_len - off);
	h->in_len -= off;
}

static void client_drain(struct harness *h)
{
	while (h->reading && h->cfd >= 0) {
		ssize_t n = recv(h->cfd, h->in + h->in_len, sizeof(h->in) - h->in_len,
				 MSG_DONTWAIT);

		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0)
			return;
		h->in_len += (size_t)n;
		h->got += (size_t)n;
		client_parse(h);
		/* A whole message always fits twice: the buffer never fills. */
		FUZZ_CHECK(h->in_len < sizeof(h->in));
	}
}

/* ------------------------------------------------------- the loop turn -- */

/* Turns of the event loop until nothing is ready and no target waits. */
static void pump(struct harness *h)
{
	unsigned quiet = 0;

	for (;;) {
		struct epoll_event evs[8];
		uint64_t got, ran = h->targets_run;
		int n;

		client_drain(h);
		got = h->got;
		n = epoll_wait(h->s.epfd, evs, 8, 0);
		FUZZ_CHECK(n >= 0 || errno == EINTR);
		for (int i = 0; i < n; i++)
			conn_event(&h->s, evs[i].data.ptr, evs[i].events);
		conn_bury(&h->s);
		if (!h->s.stopping) {
			queue_turn(&h->q);
			conn_bury(&h->s);
		}
		client_drain(h);
		if (n <= 0 && h->targets_run == ran && !queue_ready(&h->q))
			return;
		if (h->targets_run == ran && h->got == got) {
			/* Events, and yet nothing happened: a level-triggered spin? */
			FUZZ_CHECK(++quiet < SPIN_LIMIT);
		} else {
			quiet = 0;
		}
	}
}

static void client_send(struct harness *h, const uint8_t *p, size_t len)
{
	size_t off = 0;
	int stuck = 0;

	while (off < len && h->cfd >= 0 && !h->wr_shut) {
		ssize_t n = send(h->cfd, p + off, len - off, MSG_NOSIGNAL | MSG_DONTWAIT);

		if (n > 0) {
			off += (size_t)n;
			stuck = 0;
			pump(h);
		} else if (n < 0 && errno == EINTR) {
			continue;
		} else if (n < 0 && errno == EAGAIN && stuck++ < 2) {
			pump(h);   /* the daemon may read once it is not busy */
		} else {
			return;    /* it does not read now, or closed: drop the rest */
		}
	}
}

static void client_close(struct harness *h)
{
	if (h->cfd >= 0)
		close(h->cfd);
	h->cfd = -1;
}

/* What server.c does for an accepted socket. */
static int harness_open(struct harness *h)
{
	int sv[2], epfd;

	memset(h, 0, sizeof(*h));
	h->cfd = -1;
	h->reading = true;
	queue_init(&h->q, &conn_queue_ops);
	epfd = epoll_create1(EPOLL_CLOEXEC);
	if (epfd < 0 || conn_set_init(&h->s, epfd, &h->q) < 0 ||
	    socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, sv) < 0)
		abort();
	h->cfd = sv[0];
	if (conn_accept(&h->s, sv[1]) < 0 || h->s.nconns != 1)
		abort();
	return 0;
}

static void harness_close(struct harness *h)
{
	int epfd = h->s.epfd;

	conn_set_fini(&h->s);
	FUZZ_CHECK(TAILQ_EMPTY(&h->q.round) && h->q.nactive == 0 && h->q.nparked == 0);
	client_close(h);
	close(epfd);
	free(h->exp.pids);
}

/* Runs the timers as the loop's sweep would, `later_ms` from now. */
static void run_timers(struct harness *h, uint64_t later_ms)
{
	conn_sweep(&h->s, now_ms() + later_ms);
	conn_bury(&h->s);
	pump(h);
}

/* What server_stop() does on SIGTERM, minus the 2 s flush deadline. */
static void stop_daemon(struct harness *h)
{
	conn_stop_all(&h->s);
	conn_bury(&h->s);
	pump(h);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	static struct harness h;
	size_t i = 0;

	harness_open(&h);
	cur = &h;
	while (i < size && !h.s.stopping && h.cfd >= 0) {
		uint8_t op = data[i++];
		size_t len = 0;

		if (op < 0xc0)
			len = (size_t)op + 1;
		else if (op < 0xe0)
			len = (size_t)(op - 0xbf) * 1024;
		else if (op >= 0xe6)
			len = (size_t)(op - 0xe5);

		switch (len ? 0 : op) {
		case 0:
			if (len > size - i)
				len = size - i;
			client_send(&h, data + i, len);
			i += len;
			break;
		case 0xe0: run_timers(&h, 10000 + 1); break;
		case 0xe1: run_timers(&h, 60000 + 1); break;
		case 0xe2:
			h.reading = !h.reading;
			pump(&h);
			break;
		case 0xe3:
			if (!h.wr_shut)
				shutdown(h.cfd, SHUT_WR);
			h.wr_shut = true;
			pump(&h);
			break;
		case 0xe4: stop_daemon(&h); break;
		case 0xe5:
			client_close(&h);
			pump(&h);
			break;
		}
	}

	/* The client reads the rest and hangs up: the daemon must let go. */
	h.reading = true;
	if (h.cfd >= 0 && !h.wr_shut)
		shutdown(h.cfd, SHUT_WR);
	pump(&h);
	FUZZ_CHECK(TAILQ_EMPTY(&h.s.open));
	FUZZ_CHECK(h.exp.next <= h.exp.n);
	harness_close(&h);
	cur = NULL;
	return 0;
}
