// SPDX-License-Identifier: MIT
/*
 * The control socket's event loop: accepting clients (SO_PEERCRED once, at
 * accept), signals, timers, sd_notify, and whose turn it is.  Single-threaded
 * and non-blocking: the only thing that blocks is action_run() itself, and
 * between two targets the loop always polls again (timeout 0), so new
 * clients and I/O are served while a long request is in progress.  Targets
 * run one per turn, round-robin across the connections that have any.
 * What happens on one connection is conn.c's business.
 *
 * A broken invariant of the loop itself (epoll failing) is the one thing
 * that ends server_run() with an error; a client's misbehaviour never does.
 */
#include <errno.h>
#include <limits.h>
#include <signal.h>
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <systemd/sd-daemon.h>

#include "conn.h"
#include "log.h"
#include "ptrace.h"
#include "server.h"
#include "watchdog.h"

#define ACCEPT_PAUSE_MS     100u
#define ACCEPT_WARN_MS      10000u
#define SHUTDOWN_FLUSH_MS   2000u
/* Per-connection timers are checked this often; they are 10 s and more. */
#define SWEEP_MS            250u
#define STATUS_INTERVAL_MS  1000u
#define ORPHAN_POLL_MS      100u   /* how often parked tracees are checked */
#define MAX_EVENTS          64
#define ACCEPT_BATCH        64

/* ------------------------------------------------------------ accept -- */

static void pause_accepting(struct server *srv, int err)
{
	uint64_t now = now_ms();

	/*
	 * Out of descriptors (or memory): the pending connection stays in the
	 * backlog and the listen fd stays readable, so level-triggered epoll
	 * would spin.  Stop watching it briefly instead.
	 */
	if (srv->listening)
		epoll_ctl(srv->epfd, EPOLL_CTL_DEL, srv->cfg->listen_fd, NULL);
	srv->listening = false;
	srv->accept_resume = now + ACCEPT_PAUSE_MS;
	if (!srv->accept_warned || now - srv->accept_warned >= ACCEPT_WARN_MS) {
		log_msg(LOG_WARNING, "cannot accept clients: %s; pausing accept for %u ms",
			strerror(err), ACCEPT_PAUSE_MS);
		srv->accept_warned = now;
	}
}

static int resume_accepting(struct server *srv)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = &srv->listen_tag };

	srv->accept_resume = 0;
	if (srv->listening || srv->stopping)
		return 0;
	if (epoll_ctl(srv->epfd, EPOLL_CTL_ADD, srv->cfg->listen_fd, &ev) < 0)
		return -errno;
	srv->listening = true;
	return 0;
}

/* Open connections of uid (at most SERVER_MAX_CONNS to walk, once per accept). */
static unsigned conns_of(const struct server *srv, uid_t uid)
{
	unsigned n = 0;

	for (const struct conn *c = srv->conns; c; c = c->next)
		n += c->caller.uid == uid;
	return n;
}

/*
 * Slots are shared out (conn.h): the cap on one uid, then the reserve only
 * root may use, so 1,024 idle connections of one user lock nobody out.
 */
static void add_client(struct server *srv, int fd)
{
	struct epoll_event ev = { .events = EPOLLIN | EPOLLRDHUP };
	struct ucred cred;
	socklen_t len = sizeof(cred);
	struct conn *c;

	if (srv->nconns >= SERVER_MAX_CONNS) {
		log_msg(LOG_DEBUG, "refusing a client: already %u connections", srv->nconns);
		close(fd);
		return;
	}
	if (getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) < 0 || len != sizeof(cred)) {
		log_msg(LOG_DEBUG, "refusing a client: SO_PEERCRED: %s", strerror(errno));
		close(fd);
		return;
	}
	if (cred.uid != 0 && srv->nconns >= SERVER_MAX_CONNS - SERVER_ROOT_RESERVE) {
		log_msg(LOG_DEBUG, "refusing a client of uid %u: the last %u connections are root's",
			(unsigned)cred.uid, SERVER_ROOT_RESERVE);
		close(fd);
		return;
	}
	if (cred.uid != 0 && conns_of(srv, cred.uid) >= SERVER_MAX_CONNS_PER_UID) {
		log_msg(LOG_DEBUG, "refusing a client: uid %u already has %u connections",
			(unsigned)cred.uid, SERVER_MAX_CONNS_PER_UID);
		close(fd);
		return;
	}
	c = calloc(1, sizeof(*c));
	if (!c) {
		close(fd);
		pause_accepting(srv, ENOMEM);
		return;
	}
	c->fd = fd;
	c->caller.pid = cred.pid;
	c->caller.uid = cred.uid;
	c->caller.gid = cred.gid;
	c->events = ev.events;
	c->last_activity = now_ms();
	ev.data.ptr = c;
	if (epoll_ctl(srv->epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
		log_msg(LOG_WARNING, "cannot watch a client: %s", strerror(errno));
		close(fd);
		free(c);
		return;
	}
	c->next = srv->conns;
	if (srv->conns)
		srv->conns->prev = c;
	srv->conns = c;
	srv->nconns++;
	log_msg(LOG_DEBUG, "client connected: pid=%d uid=%u gid=%u (%u connection(s))",
		(int)cred.pid, (unsigned)cred.uid, (unsigned)cred.gid, srv->nconns);
}

static void accept_clients(struct server *srv)
{
	for (int i = 0; i < ACCEPT_BATCH; i++) {
		int fd = accept4(srv->cfg->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);

		if (fd >= 0) {
			add_client(srv, fd);
			continue;
		}
		switch (errno) {
		case EAGAIN:
#if EWOULDBLOCK != EAGAIN
		case EWOULDBLOCK:
#endif
			return;
		case EINTR:
		case ECONNABORTED:
		case EPROTO:
			continue;
		default:  /* EMFILE, ENFILE, ENOBUFS, ENOMEM, ... */
			pause_accepting(srv, errno);
			return;
		}
	}
}

/* --------------------------------------------------- signals, status -- */

static void read_signals(struct server *srv)
{
	struct signalfd_siginfo si;

	while (read(srv->sigfd, &si, sizeof(si)) == (ssize_t)sizeof(si)) {
		if (si.ssi_signo == SIGHUP) {
			log_msg(LOG_INFO, "SIGHUP ignored: there is no configuration to reload");
			continue;
		}
		if (!srv->stopping)
			log_msg(LOG_INFO, "%s from pid %u: stopping", strsignal((int)si.ssi_signo),
				si.ssi_pid);
		srv->stopping = true;
		srv->stop_signals++;
	}
}

static void notify_status(struct server *srv, uint64_t now)
{
	char text[sizeof(srv->status)];

	if (!srv->cfg->notify)
		return;
	snprintf(text, sizeof(text), "%u client%s, %llu request%s served", srv->nconns,
		 srv->nconns == 1 ? "" : "s", (unsigned long long)srv->requests_served,
		 srv->requests_served == 1 ? "" : "s");
	srv->status_pending = strcmp(text, srv->status) != 0;
	if (!srv->status_pending || now - srv->status_sent < STATUS_INTERVAL_MS)
		return;
	sd_notifyf(0, "STATUS=%s", text);
	memcpy(srv->status, text, sizeof(text));
	srv->status_sent = now;
	srv->status_pending = false;
}

static void sweep(struct server *srv, uint64_t now)
{
	struct conn *c, *next;

	/*
	 * Decided once per sweep: every connection idle past the short limit
	 * goes, not just enough of them to dip under the mark (a flood of
	 * idle clients would refill it at once).
	 */
	srv->crowded = srv->nconns >= SERVER_MAX_CONNS - SERVER_ROOT_RESERVE;
	for (c = srv->conns; c; c = next) {
		next = c->next;
		conn_check_timers(srv, c, now);
	}
	srv->next_sweep = now + SWEEP_MS;
}

static uint64_t idle_deadline(const struct server *srv)
{
	if (!srv->cfg->idle_exit_s || srv->nconns || srv->work_head)
		return UINT64_MAX;
	return srv->idle_since + (uint64_t)srv->cfg->idle_exit_s * 1000u;
}

/* epoll timeout: 0 while work is waiting, else until the next timer. */
static int loop_timeout(const struct server *srv)
{
	uint64_t deadline = idle_deadline(srv), now;

	if (srv->work_head || srv->stopping)
		return 0;
	if (srv->nconns && srv->next_sweep < deadline)
		deadline = srv->next_sweep;
	if (srv->accept_resume && srv->accept_resume < deadline)
		deadline = srv->accept_resume;
	if (srv->status_pending && srv->status_sent + STATUS_INTERVAL_MS < deadline)
		deadline = srv->status_sent + STATUS_INTERVAL_MS;
	now = now_ms();
	/* The keep-alive is due: systemd kills a daemon that goes quiet. */
	if (watchdog_due_ms() >= 0 && now + (uint64_t)watchdog_due_ms() < deadline)
		deadline = now + (uint64_t)watchdog_due_ms();
	if (deadline == UINT64_MAX && !srv->orphans)
		return -1;
	/* A task that never stopped for us must be let go the moment it does. */
	if (srv->orphans && deadline > now + ORPHAN_POLL_MS)
		deadline = now + ORPHAN_POLL_MS;
	if (deadline <= now)
		return 0;
	return deadline - now > INT_MAX ? INT_MAX : (int)(deadline - now);
}

/* ----------------------------------------------------------- the loop -- */

static void dispatch(struct server *srv, const struct epoll_event *ev)
{
	if (ev->data.ptr == &srv->listen_tag) {
		if (!srv->stopping)
			accept_clients(srv);
	} else if (ev->data.ptr == &srv->signal_tag) {
		read_signals(srv);
	} else {
		conn_event(srv, ev->data.ptr, ev->events);
	}
}

/*
 * SIGTERM/SIGINT: no new clients; every queued target is answered with
 * "shutdown" (action_run is synchronous, so the one in progress has
 * already been answered); replies get at most 2 s to drain.  A second
 * signal cuts the wait short.
 */
static int server_stop(struct server *srv)
{
	struct epoll_event evs[MAX_EVENTS];
	struct conn *c, *next;
	size_t answered = 0;
	unsigned signals = srv->stop_signals;
	uint64_t deadline;

	if (srv->cfg->notify)
		sd_notify(0, "STOPPING=1");
	if (srv->listening)
		epoll_ctl(srv->epfd, EPOLL_CTL_DEL, srv->cfg->listen_fd, NULL);
	srv->listening = false;
	for (c = srv->conns; c; c = next) {
		next = c->next;
		answered += conn_answer_shutdown(srv, c);
	}
	if (answered)
		log_msg(LOG_INFO, "answered %zu queued target(s) with \"shutdown\"", answered);
	conn_bury(srv);

	deadline = now_ms() + SHUTDOWN_FLUSH_MS;
	while (srv->conns && srv->stop_signals == signals) {
		uint64_t now = now_ms();
		int n;

		if (now >= deadline)
			break;
		watchdog_kick();
		n = epoll_wait(srv->epfd, evs, MAX_EVENTS, (int)(deadline - now));
		if (n < 0 && errno != EINTR)
			break;
		for (int i = 0; i < n; i++)
			if (evs[i].data.ptr != &srv->listen_tag)
				dispatch(srv, &evs[i]);
		conn_bury(srv);
	}
	if (srv->conns)
		log_msg(LOG_NOTICE, "stopping with %u client(s) that did not take their replies",
			srv->nconns);
	return 0;
}

static int server_init(struct server *srv, const struct server_config *cfg)
{
	struct epoll_event ev = { .events = EPOLLIN };
	sigset_t mask;

	srv->cfg = cfg;
	srv->epfd = srv->sigfd = -1;
	srv->req = malloc(sizeof(*srv->req));
	srv->res = malloc(sizeof(*srv->res));
	srv->msg = malloc(MSG_BUF_SIZE);
	if (!srv->req || !srv->res || !srv->msg)
		return -ENOMEM;

	srv->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (srv->epfd < 0)
		return -errno;
	/* main() blocked these; SIGCHLD belongs to the ptrace code's own signalfd. */
	sigemptyset(&mask);
	sigaddset(&mask, SIGTERM);
	sigaddset(&mask, SIGINT);
	sigaddset(&mask, SIGHUP);
	srv->sigfd = signalfd(-1, &mask, SFD_NONBLOCK | SFD_CLOEXEC);
	if (srv->sigfd < 0)
		return -errno;
	ev.data.ptr = &srv->signal_tag;
	if (epoll_ctl(srv->epfd, EPOLL_CTL_ADD, srv->sigfd, &ev) < 0)
		return -errno;
	ev.data.ptr = &srv->listen_tag;
	if (epoll_ctl(srv->epfd, EPOLL_CTL_ADD, cfg->listen_fd, &ev) < 0)
		return -errno;
	srv->listening = true;
	srv->idle_since = now_ms();
	/* What a fresh daemon would report: so "serving" stays until something happens. */
	snprintf(srv->status, sizeof(srv->status), "0 clients, 0 requests served");
	return 0;
}

static void server_fini(struct server *srv)
{
	while (srv->conns)
		conn_close(srv, srv->conns);
	conn_bury(srv);
	if (srv->listening)
		epoll_ctl(srv->epfd, EPOLL_CTL_DEL, srv->cfg->listen_fd, NULL);
	if (srv->sigfd >= 0)
		close(srv->sigfd);
	if (srv->epfd >= 0)
		close(srv->epfd);
	free(srv->req);
	free(srv->res);
	free(srv->msg);
}

int server_run(const struct server_config *cfg)
{
	struct epoll_event evs[MAX_EVENTS];
	struct server srv = { 0 };
	int r;

	r = server_init(&srv, cfg);
	if (r < 0) {
		log_msg(LOG_ERR, "cannot set up the event loop: %s", strerror(-r));
		goto out_fini;
	}
	if (cfg->notify)
		sd_notify(0, "READY=1\nSTATUS=serving");
	watchdog_setup();

	for (;;) {
		uint64_t now;
		int n = epoll_wait(srv.epfd, evs, MAX_EVENTS, loop_timeout(&srv));

		if (n < 0) {
			if (errno == EINTR)
				continue;
			r = -errno;
			log_msg(LOG_ERR, "epoll_wait: %s", strerror(-r));
			break;
		}
		for (int i = 0; i < n; i++)
			dispatch(&srv, &evs[i]);
		conn_bury(&srv);
		if (srv.stopping) {
			r = server_stop(&srv);
			break;
		}
		watchdog_kick();
		/* One target, then poll again: see the top of this file. */
		conn_run_one_target(&srv);
		conn_bury(&srv);
		srv.orphans = ptrace_reap_orphans();

		now = now_ms();
		if (srv.accept_resume && now >= srv.accept_resume) {
			r = resume_accepting(&srv);
			if (r < 0) {
				log_msg(LOG_ERR, "cannot watch the listening socket again: %s",
					strerror(-r));
				break;
			}
		}
		if (srv.nconns && now >= srv.next_sweep) {
			sweep(&srv, now);
			conn_bury(&srv);
		}
		notify_status(&srv, now);
		if (now >= idle_deadline(&srv)) {
			log_msg(LOG_INFO, "no client for %u s: exiting", cfg->idle_exit_s);
			if (cfg->notify)
				sd_notify(0, "STOPPING=1");
			r = 0;
			break;
		}
	}

out_fini:
	server_fini(&srv);
	return r;
}
