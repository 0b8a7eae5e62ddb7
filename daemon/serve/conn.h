/* SPDX-License-Identifier: MIT */
/*
 * The client connections of the control socket (conn.c): their list, from
 * accept to close, and everything that happens on one.  server.c (the
 * loop) hands accepted sockets and epoll events in; the queue (queue.c)
 * decides when a connection's targets run.  Every field below is written
 * by conn.c alone, but struct queue_entry's inside struct conn, which are
 * queue.c's.
 */
#ifndef BTGUARD_CONN_H
#define BTGUARD_CONN_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/queue.h>
#include <time.h>

#include "proto.h"
#include "action.h"
#include "auth.h"
#include "queue.h"

struct watch;

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

struct conn_set;

struct conn {
	struct conn_set *set;
	int fd;                    /* -1 once closed (then on the graveyard) */
	uint32_t events;           /* what epoll watches for it now */
	struct auth_caller caller; /* SO_PEERCRED at accept, never re-read */
	TAILQ_ENTRY(conn) in_set;  /* in conn_set.open, or in its graveyard once closed */
	struct queue_entry work;   /* its request's targets: queue.c's */

	/* Input: the header, then exactly hdr.length payload bytes. */
	uint8_t hdr_buf[PROTO_HEADER_SIZE];
	size_t hdr_len;
	bool have_header;
	struct proto_header hdr;
	uint8_t *payload;
	size_t pay_len;
	uint64_t msg_start_ms;     /* first byte of the message being read */

	/* Output queue: out[out_off..out_len) still to send. */
	uint8_t *out;
	size_t out_off, out_len, out_cap;
	uint64_t out_progress_ms;  /* last time the client took bytes (or output began) */

	uint64_t last_activity_ms;
	bool closing;              /* send what is queued, then close */
	bool rdhup;                /* the peer shut down its sending side */
};

struct conn_set {
	int epfd;                     /* the loop's: connections register themselves */
	struct queue *queue;
	struct watch *watch;          /* server.c's, set after init: POLICY and RELOAD ask it */
	TAILQ_HEAD(, conn) open;      /* every open connection */
	unsigned nconns;
	TAILQ_HEAD(, conn) graveyard; /* closed this turn, freed at its end */
	bool stopping;                /* no new requests; replies still go out */
	bool crowded;                 /* at the last sweep only root could still connect */
	uint64_t idle_since_ms;       /* when the last connection closed */
	uint64_t requests_served;
	/* ~17 KiB: on the heap, shared, as one request is decoded at a time. */
	struct proto_request *req;
	uint8_t *msg;                 /* encode scratch, MSG_BUF_SIZE */
};

/* The queue's view of connections: replies go back through these. */
extern const struct queue_ops conn_queue_ops;

int conn_set_init(struct conn_set *s, int epfd, struct queue *q);

/* Closes every connection (queued replies are lost) and frees the set's memory. */
void conn_set_fini(struct conn_set *s);

/*
 * Takes an accepted socket: reads SO_PEERCRED once and applies the
 * connection slots (above).  Returns 0 (also when the client was refused
 * and fd closed), or -ENOMEM when there was no memory for it (fd closed;
 * the caller should pause accepting).
 */
int conn_accept(struct conn_set *s, int fd);

/* Frees the connections closed since the last call. */
void conn_bury(struct conn_set *s);

/* Handles epoll events for c: reads, writes, hang-ups. */
void conn_event(struct conn_set *s, struct conn *c, uint32_t events);

/* Applies every connection's message, idle and stalled-reader time limits. */
void conn_sweep(struct conn_set *s, uint64_t t_ms);

/*
 * At shutdown: no more requests; every connection's remaining targets are
 * answered with "shutdown" (a half-read request gets an ERROR), and each
 * closes once flushed.  Returns how many targets were answered that way.
 */
size_t conn_stop_all(struct conn_set *s);

#endif
