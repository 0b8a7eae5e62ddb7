// SPDX-License-Identifier: MIT
/*
 * The control socket's event loop: the listening socket, signals, timers,
 * sd_notify, the watchdog, and one turn of the queue at a time.
 * One thread does all of it, non-blocking (the only other thread,
 * scanwork.c's, scans target stacks for an attempt and touches nothing
 * else): the only thing that blocks is one turn
 * (at most one attempt on one target, its stop wait bounded: patch.h), and
 * between two turns the loop always polls again (timeout 0), so new
 * clients and I/O are served while a long request is in progress.  Whose
 * turn it is, and the targets parked until their next attempt, are the
 * queue's (queue.c); the epoll timeout wakes the loop for the earliest.
 * The connections, from accept to close, are conn.c's.
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
#include "queue.h"
#include "server.h"
#include "timeutil.h"
#include "vmshare.h"
#include "watch.h"
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

struct server {
	const struct server_config *cfg;
	int epfd, sigfd;
	char listen_tag, signal_tag, events_tag;  /* addresses used as epoll tags */
	unsigned events_gen;          /* watch_events_fd()'s generation registered with epoll */
	bool events_armed;            /* its EPOLLONESHOT is armed */
	bool listening;               /* listen fd registered with epoll */
	uint64_t accept_resume_ms;    /* 0, or when to accept again after EMFILE */
	uint64_t accept_warned_ms;
	bool stopping;
	unsigned stop_signals;        /* SIGTERM/SIGINT seen; a second one ends the flush */
	uint64_t next_sweep_ms;
	char status[96];              /* last STATUS= sent */
	uint64_t status_sent_ms;
	bool status_pending;
	size_t orphans;               /* tracees still to be let go (ptrace_reap_orphans) */
	struct queue queue;           /* queue.c's */
	struct conn_set conns;        /* conn.c's */
	struct watch *watch;          /* watch.c's: the policy and its sweep */
};

/* ------------------------------------------------------------ accept -- */

static void pause_accepting(struct server *srv, int err)
{
	uint64_t t_ms = now_ms();

	/*
	 * Out of descriptors (or memory): the pending connection stays in the
	 * backlog and the listen fd stays readable, so level-triggered epoll
	 * would spin.  Stop watching it briefly instead.
	 */
	if (srv->listening)
		epoll_ctl(srv->epfd, EPOLL_CTL_DEL, srv->cfg->listen_fd, NULL);
	srv->listening = false;
	srv->accept_resume_ms = t_ms + ACCEPT_PAUSE_MS;
	if (!srv->accept_warned_ms || t_ms - srv->accept_warned_ms >= ACCEPT_WARN_MS) {
		log_msg(LOG_WARNING, "cannot accept clients: %s; pausing accept for %u ms",
			strerror(err), ACCEPT_PAUSE_MS);
		srv->accept_warned_ms = t_ms;
	}
}

static int resume_accepting(struct server *srv)
{
	struct epoll_event ev = { .events = EPOLLIN, .data.ptr = &srv->listen_tag };

	srv->accept_resume_ms = 0;
	if (srv->listening || srv->stopping)
		return 0;
	if (epoll_ctl(srv->epfd, EPOLL_CTL_ADD, srv->cfg->listen_fd, &ev) < 0)
		return -errno;
	srv->listening = true;
	return 0;
}

static void accept_clients(struct server *srv)
{
	for (int i = 0; i < ACCEPT_BATCH; i++) {
		int fd = accept4(srv->cfg->listen_fd, NULL, NULL, SOCK_NONBLOCK | SOCK_CLOEXEC);

		if (fd >= 0) {
			if (conn_accept(&srv->conns, fd) == -ENOMEM)
				pause_accepting(srv, ENOMEM);
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
			char why[PROTO_MAX_MESSAGE + 1];

			log_msg(LOG_INFO, "SIGHUP from pid %u: reading the policy again", si.ssi_pid);
			watch_reload(srv->watch, why, sizeof(why));   /* logs either way */
			continue;
		}
		if (!srv->stopping)
			log_msg(LOG_INFO, "%s from pid %u: stopping", strsignal((int)si.ssi_signo),
				si.ssi_pid);
		srv->stopping = true;
		srv->stop_signals++;
	}
}

static void notify_status(struct server *srv, uint64_t t_ms)
{
	char text[sizeof(srv->status)];

	if (!srv->cfg->notify)
		return;
	const struct conn_set *cs = &srv->conns;

	/* `systemctl status` shows it: a node running without its policy is said there too. */
	snprintf(text, sizeof(text), "%s%u client%s, %llu request%s served",
		 watch_problem(srv->watch) ? "policy NOT in force (btguardctl policy); " : "",
		 cs->nconns, cs->nconns == 1 ? "" : "s", (unsigned long long)cs->requests_served,
		 cs->requests_served == 1 ? "" : "s");
	srv->status_pending = strcmp(text, srv->status) != 0;
	if (!srv->status_pending || t_ms - srv->status_sent_ms < STATUS_INTERVAL_MS)
		return;
	sd_notifyf(0, "STATUS=%s", text);
	memcpy(srv->status, text, sizeof(text));
	srv->status_sent_ms = t_ms;
	srv->status_pending = false;
}

static uint64_t idle_deadline_ms(const struct server *srv)
{
	/* A policy with rules is a promise to watch: no idle exit then. */
	if (!srv->cfg->idle_exit_s || srv->conns.nconns || watch_active(srv->watch))
		return UINT64_MAX;
	return srv->conns.idle_since_ms + (uint64_t)srv->cfg->idle_exit_s * 1000u;
}

/*
 * epoll timeout: 0 while a turn is waiting, else until the next timer:
 * the earliest parked target's next attempt among them.
 */
static int loop_timeout_ms(const struct server *srv)
{
	uint64_t deadline_ms = idle_deadline_ms(srv), t_ms, wake_ms;

	if (queue_ready(&srv->queue) || srv->stopping)
		return 0;
	wake_ms = queue_next_wake_ms(&srv->queue);
	if (wake_ms < deadline_ms)
		deadline_ms = wake_ms;
	wake_ms = watch_next_ms(srv->watch);
	if (wake_ms < deadline_ms)
		deadline_ms = wake_ms;
	if (!srv->events_armed && srv->events_gen) {
		unsigned gen;

		if (watch_events_fd(srv->watch, &gen) >= 0 &&
		    (wake_ms = watch_events_next_ms(srv->watch)) < deadline_ms)
			deadline_ms = wake_ms;
	}
	if (srv->conns.nconns && srv->next_sweep_ms < deadline_ms)
		deadline_ms = srv->next_sweep_ms;
	if (srv->accept_resume_ms && srv->accept_resume_ms < deadline_ms)
		deadline_ms = srv->accept_resume_ms;
	if (srv->status_pending && srv->status_sent_ms + STATUS_INTERVAL_MS < deadline_ms)
		deadline_ms = srv->status_sent_ms + STATUS_INTERVAL_MS;
	t_ms = now_ms();
	/* The keep-alive is due: systemd kills a daemon that goes quiet. */
	if (watchdog_due_ms() >= 0 && t_ms + (uint64_t)watchdog_due_ms() < deadline_ms)
		deadline_ms = t_ms + (uint64_t)watchdog_due_ms();
	if (deadline_ms == UINT64_MAX && !srv->orphans)
		return -1;
	/* A task that never stopped for us must be let go the moment it does. */
	if (srv->orphans && deadline_ms > t_ms + ORPHAN_POLL_MS)
		deadline_ms = t_ms + ORPHAN_POLL_MS;
	if (deadline_ms <= t_ms)
		return 0;
	return deadline_ms - t_ms > INT_MAX ? INT_MAX : (int)(deadline_ms - t_ms);
}

/*
 * The policy opens and closes its proc connector socket at start and at
 * reloads; a closed one has left the epoll set by itself, a new one is
 * added here.  One-shot: once it fired, it is armed again only when the
 * watch wants to read more (watch_events_next_ms), so a node that execs
 * a thousand times a second wakes the loop a few hundred times, not a
 * thousand; the kernel queues the events meanwhile.
 */
static void epoll_follow_exec_events(struct server *srv, uint64_t t_ms)
{
	unsigned gen;
	int fd = watch_events_fd(srv->watch, &gen);
	struct epoll_event ev = { .events = EPOLLIN | EPOLLONESHOT, .data.ptr = &srv->events_tag };

	if (gen != srv->events_gen) {
		srv->events_gen = gen;
		srv->events_armed = false;
		if (fd >= 0 && epoll_ctl(srv->epfd, EPOLL_CTL_ADD, fd, &ev) < 0) {
			log_msg(LOG_ERR, "cannot watch the proc connector: %s; the sweep alone finds new processes",
				strerror(errno));
			return;
		}
		srv->events_armed = fd >= 0;
		return;
	}
	if (fd < 0 || srv->events_armed || t_ms < watch_events_next_ms(srv->watch))
		return;
	if (epoll_ctl(srv->epfd, EPOLL_CTL_MOD, fd, &ev) < 0) {
		log_msg(LOG_ERR, "cannot watch the proc connector again: %s", strerror(errno));
		return;
	}
	srv->events_armed = true;
}

/* ----------------------------------------------------------- the loop -- */

static void dispatch(struct server *srv, const struct epoll_event *ev)
{
	if (ev->data.ptr == &srv->listen_tag) {
		if (!srv->stopping)
			accept_clients(srv);
	} else if (ev->data.ptr == &srv->signal_tag) {
		read_signals(srv);
	} else if (ev->data.ptr == &srv->events_tag) {
		srv->events_armed = false;   /* EPOLLONESHOT */
		watch_events(srv->watch, now_ms());
	} else {
		conn_event(&srv->conns, ev->data.ptr, ev->events);
	}
}

/*
 * SIGTERM/SIGINT: no new clients; every queued target is answered with
 * "shutdown", a parked one included (between attempts nothing of it is
 * stopped, so there is nothing to let go); replies get at most 2 s to
 * drain.  A second signal cuts the wait short.
 */
static int server_stop(struct server *srv)
{
	struct epoll_event evs[MAX_EVENTS];
	size_t answered;
	unsigned signals = srv->stop_signals;
	uint64_t deadline_ms;

	if (srv->cfg->notify)
		sd_notify(0, "STOPPING=1");
	if (srv->listening)
		epoll_ctl(srv->epfd, EPOLL_CTL_DEL, srv->cfg->listen_fd, NULL);
	srv->listening = false;
	watch_stop(srv->watch);
	answered = conn_stop_all(&srv->conns);
	if (answered)
		log_msg(LOG_INFO, "answered %zu queued target(s) with \"shutdown\"", answered);
	conn_bury(&srv->conns);

	deadline_ms = now_ms() + SHUTDOWN_FLUSH_MS;
	while (srv->conns.nconns && srv->stop_signals == signals) {
		uint64_t t_ms = now_ms();
		int n;

		if (t_ms >= deadline_ms)
			break;
		watchdog_kick();
		n = epoll_wait(srv->epfd, evs, MAX_EVENTS, (int)(deadline_ms - t_ms));
		if (n < 0 && errno != EINTR)
			break;
		for (int i = 0; i < n; i++)
			if (evs[i].data.ptr != &srv->listen_tag)
				dispatch(srv, &evs[i]);
		conn_bury(&srv->conns);
	}
	if (srv->conns.nconns)
		log_msg(LOG_NOTICE, "stopping with %u client(s) that did not take their replies",
			srv->conns.nconns);
	return 0;
}

static int server_init(struct server *srv, const struct server_config *cfg)
{
	struct epoll_event ev = { .events = EPOLLIN };
	sigset_t mask;

	int r;

	srv->cfg = cfg;
	srv->epfd = srv->sigfd = -1;
	queue_init(&srv->queue, &conn_queue_ops);
	srv->epfd = epoll_create1(EPOLL_CLOEXEC);
	if (srv->epfd < 0)
		return -errno;
	r = conn_set_init(&srv->conns, srv->epfd, &srv->queue);
	if (r < 0)
		return r;
	r = watch_new(&srv->queue, cfg->config_path, cfg->config_required, cfg->policy,
		      cfg->policy_error, &srv->watch);
	if (r < 0)
		return r;
	srv->conns.watch = srv->watch;
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
	epoll_follow_exec_events(srv, now_ms());
	/* What a fresh daemon would report: so "serving" stays until something happens. */
	snprintf(srv->status, sizeof(srv->status), "0 clients, 0 requests served");
	return 0;
}

static void server_fini(struct server *srv)
{
	watch_free(srv->watch);
	vmshare_forget_listing();
	conn_set_fini(&srv->conns);
	if (srv->listening)
		epoll_ctl(srv->epfd, EPOLL_CTL_DEL, srv->cfg->listen_fd, NULL);
	if (srv->sigfd >= 0)
		close(srv->sigfd);
	if (srv->epfd >= 0)
		close(srv->epfd);
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
		uint64_t t_ms;
		int n = epoll_wait(srv.epfd, evs, MAX_EVENTS, loop_timeout_ms(&srv));

		if (n < 0) {
			if (errno == EINTR)
				continue;
			r = -errno;
			log_msg(LOG_ERR, "epoll_wait: %s", strerror(-r));
			break;
		}
		for (int i = 0; i < n; i++)
			dispatch(&srv, &evs[i]);
		conn_bury(&srv.conns);
		if (srv.stopping) {
			r = server_stop(&srv);
			break;
		}
		watchdog_kick();
		/* One turn, then poll again: see the top of this file. */
		queue_turn(&srv.queue);
		conn_bury(&srv.conns);
		/*
		 * A broken promise of the turn itself: it returned with a world
		 * still stopped.  Fatal, as the kernel then lets every tracee go.
		 */
		if (ptrace_worlds_open() != 0) {
			log_msg(LOG_CRIT, "a turn ended with %u process(es) still stopped: exiting",
				ptrace_worlds_open());
			r = -ENOTRECOVERABLE;
			break;
		}
		srv.orphans = ptrace_reap_orphans();

		t_ms = now_ms();
		if (srv.accept_resume_ms && t_ms >= srv.accept_resume_ms) {
			r = resume_accepting(&srv);
			if (r < 0) {
				log_msg(LOG_ERR, "cannot watch the listening socket again: %s",
					strerror(-r));
				break;
			}
		}
		if (srv.conns.nconns && t_ms >= srv.next_sweep_ms) {
			conn_sweep(&srv.conns, t_ms);
			srv.next_sweep_ms = t_ms + SWEEP_MS;
			conn_bury(&srv.conns);
		}
		/* The policy's sweep: a bounded step when one is due. */
		epoll_follow_exec_events(&srv, t_ms);   /* a reload in this turn may have changed it */
		watch_step(srv.watch, t_ms);
		notify_status(&srv, t_ms);
		if (t_ms >= idle_deadline_ms(&srv)) {
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
