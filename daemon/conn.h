/* SPDX-License-Identifier: MIT */
/*
 * Private to the daemon's socket code: the state server.c (the event loop)
 * and conn.c (one client connection) share.  server.c owns struct server
 * and the loop; conn.c owns everything that happens on one connection.
 */
#ifndef BTGUARD_CONN_H
#define BTGUARD_CONN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <time.h>

#include "../proto/proto.h"
#include "action.h"
#include "auth.h"
#include "server.h"

/*
 * Connection slots.  Any one non-root uid may hold SERVER_MAX_CONNS_PER_UID,
 * all non-root uids together all but SERVER_ROOT_RESERVE, so no user can
 * lock another, or root, out.  Once the shared slots are all taken, idle
 * connections are dropped after 5 s instead of the usual 60 s (conn.c).
 */
#define SERVER_MAX_CONNS          1024u
#define SERVER_ROOT_RESERVE       64u
#define SERVER_MAX_CONNS_PER_UID  64u

/* Encode scratch: the largest message there is. */
#define MSG_BUF_SIZE (PROTO_HEADER_SIZE + PROTO_MAX_PAYLOAD)

struct conn {
	int fd;                    /* -1 once closed (then on the graveyard) */
	uint32_t events;           /* what epoll watches for it now */
	struct auth_caller caller; /* SO_PEERCRED at accept, never re-read */
	struct conn *prev, *next;  /* every open connection */
	struct conn *work_next;    /* runnable queue, when queued */
	bool queued;

	/* Input: the header, then exactly hdr.length payload bytes. */
	uint8_t hdr_buf[PROTO_HEADER_SIZE];
	size_t hdr_len;
	bool have_header;
	struct proto_header hdr;
	uint8_t *payload;
	size_t pay_len;
	uint64_t msg_start;        /* first byte of the message being read */

	/*
	 * The request being answered: first its targets are resolved and
	 * pinned, a step per turn (expanding), then targets[next_target..]
	 * still to run, one per turn.
	 */
	bool busy;
	bool tree;                 /* --tree: children are listed again after their turn */
	unsigned relists;          /* rounds of that so far */
	size_t relist_from;        /* targets[relist_from..] ran since the last round */
	unsigned action;
	uint32_t deadline_ms;
	struct action_expansion *expanding;
	struct action_target *targets;
	size_t ntargets, next_target;

	/* Output queue: out[out_off..out_len) still to send. */
	uint8_t *out;
	size_t out_off, out_len, out_cap;
	uint64_t out_progress;     /* last time the client took bytes (or output began) */

	uint64_t last_activity;
	bool closing;              /* send what is queued, then close */
	bool rdhup;                /* the peer shut down its sending side */
};

struct server {
	const struct server_config *cfg;
	int epfd, sigfd;
	char listen_tag, signal_tag;  /* addresses used as epoll tags */
	bool listening;               /* listen fd registered with epoll */
	uint64_t accept_resume;       /* 0, or when to accept again after EMFILE */
	uint64_t accept_warned;
	struct conn *conns;
	unsigned nconns;
	struct conn *work_head, *work_tail;
	struct conn *graveyard;       /* closed this turn, freed at its end */
	bool stopping;
	unsigned stop_signals;        /* SIGTERM/SIGINT seen; a second one ends the flush */
	uint64_t idle_since;
	uint64_t next_sweep;
	bool crowded;                 /* at the last sweep only root could still connect */
	uint64_t requests_served;
	char status[96];              /* last STATUS= sent */
	uint64_t status_sent;
	bool status_pending;
	size_t orphans;            /* tracees still to be let go (ptrace_reap_orphans) */
	/* ~17 KiB each: on the heap, shared, as only one target runs at a time. */
	struct proto_request *req;
	struct proto_result *res;
	uint8_t *msg;                 /* encode scratch, MSG_BUF_SIZE */
};

static inline uint64_t now_ms(void)
{
	struct timespec ts;

	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000u + (uint64_t)ts.tv_nsec / 1000000u;
}

/* Closes c now (queued replies are lost); its memory lives until conn_bury(). */
void conn_close(struct server *srv, struct conn *c);

/* Frees the connections closed since the last call. */
void conn_bury(struct server *srv);

/* Handles epoll events for c: reads, writes, hang-ups. */
void conn_event(struct server *srv, struct conn *c, uint32_t events);

/*
 * Runs one turn of the connection at the head of the work queue: a step of
 * resolving its request's targets, or its next target.
 */
void conn_run_one_target(struct server *srv);

/*
 * At shutdown: answers c's remaining targets with "shutdown" (a half-read
 * request gets an ERROR), then marks it to close once flushed.  Returns how
 * many targets were answered that way.
 */
size_t conn_answer_shutdown(struct server *srv, struct conn *c);

/* Applies c's message, idle and stalled-reader time limits. */
void conn_check_timers(struct server *srv, struct conn *c, uint64_t now);

#endif
