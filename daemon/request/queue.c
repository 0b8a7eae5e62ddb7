// SPDX-License-Identifier: MIT
/*
 * Whose turn it is (queue.h): the round of users, each user's line of
 * entries, the parked targets and their wake-ups, the targets waiting
 * for a process another request works on, and the turn itself.
 *
 * Every entry is in exactly one place (enum queue_where), and place() is
 * the one function that decides which, from the entry's state alone: so
 * whatever happened to an entry, calling place() again puts it right.
 * Lists are short (one entry per connection, at most 1,024), so the
 * parked and blocked ones are scanned rather than sorted; the parked ones
 * only when one may be due (parked_due_ms), since a node's worth of follows
 * waiting for their execs (exec.c) sit there between steps of a few ms,
 * and a scan per turn would cost the loop their square.
 */
#include <errno.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "log.h"
#include "patch.h"
#include "queue.h"
#include "timeutil.h"

#define GONE_TEXT "the client went away; nothing more was done"

/* ---------------------------------------------------- the round of users -- */

/* u's line emptied: it leaves the round (and is freed, unless it is the spare). */
static void user_drop(struct queue *q, struct queue_user *u)
{
	TAILQ_REMOVE(&q->round, u, in_round);
	if (u != &q->spare)
		free(u);
}

/*
 * The line of uid, joining the round at its end if it was not in it.
 * Without memory for a line, users share the spare one: less fair, but
 * every entry is still served.
 */
static struct queue_user *user_line(struct queue *q, uid_t uid)
{
	struct queue_user *u;

	TAILQ_FOREACH(u, &q->round, in_round)
		if (u != &q->spare && u->uid == uid)
			return u;
	u = calloc(1, sizeof(*u));
	if (!u) {
		if (!q->warned_nomem)
			log_msg(LOG_WARNING, "out of memory: users now share one line of turns");
		q->warned_nomem = true;
		u = &q->spare;
		if (!TAILQ_EMPTY(&u->ready))
			return u;
	} else {
		TAILQ_INIT(&u->ready);
	}
	u->uid = uid;
	TAILQ_INSERT_TAIL(&q->round, u, in_round);
	return u;
}

/* --------------------------------------------------------- placement -- */

/* True when e's next target is a guard or unguard of a live process: it must not race. */
static bool operates(const struct queue_entry *e, const struct action_target *t)
{
	return e->action != PROTO_ACTION_STATUS && t->err == 0 && t->ours > 0;
}

/*
 * Another entry works on pid.  Keyed by the daemon's own PID number of a
 * pinned process: while both pins are alive they name one process; if one
 * has exited and the number was reused, serializing the two only delays
 * the answer "gone" of the dead one.  So it never lets two through.
 */
static bool held_by_other(const struct queue *q, const struct queue_entry *e, pid_t pid)
{
	const struct queue_entry *a;

	TAILQ_FOREACH(a, &q->active, in_active)
		if (a != e && a->holds == pid)
			return true;
	return false;
}

static void unplace(struct queue *q, struct queue_entry *e)
{
	switch (e->where) {
	case QUEUE_READY:
		TAILQ_REMOVE(&e->user->ready, e, in_place);
		if (TAILQ_EMPTY(&e->user->ready))
			user_drop(q, e->user);
		e->user = NULL;
		break;
	case QUEUE_PARKED:
		TAILQ_REMOVE(&q->parked, e, in_place);
		q->nparked--;
		break;
	case QUEUE_BLOCKED:
		TAILQ_REMOVE(&q->blocked, e, in_place);
		break;
	case QUEUE_NOWHERE:
		break;
	}
	e->where = QUEUE_NOWHERE;
}

/* Puts e where its state says it belongs (see the top of this file). */
static void place(struct queue *q, struct queue_entry *e)
{
	unplace(q, e);
	if (!e->busy || e->held_back)
		return;
	if (e->job && e->wake_ms > now_ms()) {
		TAILQ_INSERT_TAIL(&q->parked, e, in_place);
		q->nparked++;
		if (e->wake_ms < q->parked_due_ms)
			q->parked_due_ms = e->wake_ms;
		e->where = QUEUE_PARKED;
		return;
	}
	if (!e->job && !e->expanding && e->next < e->ntargets &&
	    operates(e, &e->targets[e->next]) && held_by_other(q, e, e->targets[e->next].ours)) {
		TAILQ_INSERT_TAIL(&q->blocked, e, in_place);
		e->where = QUEUE_BLOCKED;
		return;
	}
	e->user = user_line(q, e->caller.uid);
	TAILQ_INSERT_TAIL(&e->user->ready, e, in_place);
	e->where = QUEUE_READY;
}

/* The next entry whose turn it is: the first of the first user's line; that user goes last. */
static struct queue_entry *pop_ready(struct queue *q)
{
	struct queue_user *u = TAILQ_FIRST(&q->round);
	struct queue_entry *e;

	if (!u)
		return NULL;
	e = TAILQ_FIRST(&u->ready);
	TAILQ_REMOVE(&u->ready, e, in_place);
	e->where = QUEUE_NOWHERE;
	e->user = NULL;
	if (TAILQ_EMPTY(&u->ready)) {
		user_drop(q, u);
	} else {
		TAILQ_REMOVE(&q->round, u, in_round);
		TAILQ_INSERT_TAIL(&q->round, u, in_round);
	}
	return e;
}

/* The parked entries due by now go to their lines; parked_due_ms becomes exact. */
static void wake_due(struct queue *q, uint64_t t_ms)
{
	struct queue_entry *e, *next;
	uint64_t due_ms = UINT64_MAX;

	if (t_ms < q->parked_due_ms)
		return;
	for (e = TAILQ_FIRST(&q->parked); e; e = next) {
		next = TAILQ_NEXT(e, in_place);
		if (e->wake_ms <= t_ms)
			place(q, e);
		else if (e->wake_ms < due_ms)
			due_ms = e->wake_ms;
	}
	q->parked_due_ms = due_ms;
}

/* pid is free again: whoever waited for it may go (each takes its turn). */
static void unblock(struct queue *q, pid_t pid)
{
	struct queue_entry *e, *next;

	for (e = TAILQ_FIRST(&q->blocked); e; e = next) {
		next = TAILQ_NEXT(e, in_place);
		if (e->targets[e->next].ours == pid)
			place(q, e);
	}
}

static void activate(struct queue *q, struct queue_entry *e, pid_t pid)
{
	e->holds = pid;
	TAILQ_INSERT_HEAD(&q->active, e, in_active);
	q->nactive++;
}

/* e's target is answered: it no longer holds its process. */
static void deactivate(struct queue *q, struct queue_entry *e)
{
	pid_t pid = e->holds;

	e->job = NULL;
	TAILQ_REMOVE(&q->active, e, in_active);
	e->holds = 0;
	e->waited = false;
	q->nactive--;
	if (pid)
		unblock(q, pid);
}

/* ------------------------------------------------------------ turns -- */

static void end_request(struct queue_entry *e)
{
	action_expand_free(e->expanding);
	e->expanding = NULL;
	action_targets_free(e->targets, e->ntargets);
	e->targets = NULL;
	e->ntargets = e->next = 0;
	e->interims = 0;
	e->failed = 0;
	free(e->res);
	e->res = NULL;
	e->busy = false;
}

/*
 * A status that selectors reached logs its answers at debug (log.c says
 * why): the request is this one record, and each failure has its own.
 */
static void log_survey(const struct queue_entry *e)
{
	size_t n = 0;

	if (e->action != PROTO_ACTION_STATUS)
		return;
	for (size_t i = 0; i < e->next; i++)
		n += e->targets[i].selected;
	if (n == 0)
		return;
	log_msg(LOG_INFO, "status of %zu selected process%s by uid=%u gid=%u pid=%d: %zu answered, "
		"%u failed", n, n == 1 ? "" : "es", (unsigned)e->caller.uid, (unsigned)e->caller.gid,
		(int)e->caller.pid, e->next - e->failed, e->failed);
}

static void finish_request(struct queue *q, struct queue_entry *e)
{
	/* Every target up to here was answered, some twice (at-exec's "armed"). */
	uint32_t count = (uint32_t)e->next + e->interims;

	log_survey(e);
	unplace(q, e);
	end_request(e);
	e->ops->done(e, count);
}

static void fail_request(struct queue *q, struct queue_entry *e, int err)
{
	unplace(q, e);
	end_request(e);
	e->ops->failed(e, err);
}

/*
 * --tree after guard or unguard: every target has run, so list the
 * children of those that ran since the last round again, as a new
 * expansion that keeps the targets so far.  True when one was started.
 */
static bool relist(struct queue_entry *e)
{
	size_t from = e->relist_from;
	int r;

	if (!e->tree || e->relists >= ACTION_TREE_RELISTS || from >= e->ntargets)
		return false;
	r = action_expand_relist(&e->caller, e->targets, e->ntargets, from, &e->expanding);
	e->targets = NULL;   /* the expansion holds them now, or freed them */
	e->relists++;
	e->relist_from = e->ntargets;
	if (r < 0) {
		log_msg(LOG_ERR, "cannot list children again: %s", strerror(-r));
		e->ntargets = 0;
		e->expanding = NULL;
		return false;
	}
	return true;
}

/* A target is answered (e->res): tell the owner, then on to the next. */
static void answered(struct queue *q, struct queue_entry *e)
{
	if (e->res->error)
		e->failed++;
	e->ops->result(e, e->res);
	if (!e->busy)
		return;  /* the owner went away meanwhile */
	if (e->next == e->ntargets && !relist(e))
		finish_request(q, e);
	else
		place(q, e);
}

/* A bounded step of listing e's targets (ACTION_STEP_US). */
static void expand_step(struct queue *q, struct queue_entry *e)
{
	int r = action_expand_step(e->expanding);

	if (r < 0 && e->next > 0) {
		/* A --tree relist: the results sent stand; DONE ends them. */
		action_expand_free(e->expanding);
		e->expanding = NULL;
		finish_request(q, e);
		return;
	}
	if (r < 0) {
		fail_request(q, e, r);
		return;
	}
	if (r > 0) {
		action_expand_end(e->expanding, &e->targets, &e->ntargets);
		e->expanding = NULL;
		log_msg(LOG_DEBUG, "client pid=%d: %zu target(s)", (int)e->caller.pid, e->ntargets);
		if (e->next >= e->ntargets) {   /* none, or a relist found no new child */
			finish_request(q, e);
			return;
		}
	}
	place(q, e);
}

/* e's job was refused as busy: it waits for wake_ms, and says so once. */
static void park(struct queue *q, struct queue_entry *e)
{
	if (!e->waited && e->action == PROTO_ACTION_AT_EXEC)
		log_msg(LOG_DEBUG, "client pid=%d: PID %d followed (%s); other targets meanwhile",
			(int)e->caller.pid, e->res->pid, e->res->message);
	else if (!e->waited)
		log_msg(LOG_DEBUG, "client pid=%d: PID %d busy (%s); next attempt in %lld ms, other targets meanwhile",
			(int)e->caller.pid, e->res->pid, e->res->message,
			(long long)e->wake_ms - (long long)now_ms());
	e->waited = true;
	place(q, e);
}

/*
 * An at-exec target is followed: its first RESULT ("armed") goes out now,
 * then it waits for its wake-up like a parked one.  False when the owner
 * went away meanwhile (e was cancelled).
 */
static bool interim(struct queue_entry *e)
{
	e->interims++;
	e->ops->result(e, e->res);
	return e->busy;
}

static void start_target(struct queue *q, struct queue_entry *e)
{
	struct action_target *t = &e->targets[e->next++];
	int r;

	log_msg(LOG_DEBUG, "client pid=%d: %s of PID %d starts", (int)e->caller.pid,
		proto_action_name(e->action), t->pid);
	r = action_start(&e->caller, e->action | (e->walk ? PATCH_WALK : 0), e->deadline_ms, t, e->res,
			 &e->job, &e->wake_ms);
	if (r == ACTION_AGAIN || r == ACTION_ARMED) {
		activate(q, e, operates(e, t) ? t->ours : 0);
		if (r == ACTION_ARMED && !interim(e))
			return;
		park(q, e);
		return;
	}
	answered(q, e);
}

static void next_attempt(struct queue *q, struct queue_entry *e)
{
	int r = action_step(e->job, &e->wake_ms);

	if (r == ACTION_ARMED && !interim(e))
		return;
	if (r == ACTION_AGAIN || r == ACTION_ARMED) {
		park(q, e);
		return;
	}
	deactivate(q, e);
	answered(q, e);
}

void queue_turn(struct queue *q)
{
	struct queue_entry *e;

	wake_due(q, now_ms());
	while ((e = pop_ready(q))) {
		struct action_target *t;

		if (e->expanding) {
			expand_step(q, e);
			return;
		}
		if (e->job) {
			next_attempt(q, e);
			return;
		}
		t = &e->targets[e->next];
		if (operates(e, t) && held_by_other(q, e, t->ours)) {
			/* Not a turn: nothing was done.  The next entry gets it. */
			log_msg(LOG_DEBUG, "client pid=%d: PID %d waits for another request's operation on it",
				(int)e->caller.pid, t->pid);
			place(q, e);
			continue;
		}
		start_target(q, e);
		return;
	}
}

/* ----------------------------------------------------------- owners -- */

void queue_init(struct queue *q, const struct queue_ops *ops)
{
	memset(q, 0, sizeof(*q));
	q->ops = ops;
	q->parked_due_ms = UINT64_MAX;
	TAILQ_INIT(&q->round);
	TAILQ_INIT(&q->spare.ready);
	TAILQ_INIT(&q->parked);
	TAILQ_INIT(&q->blocked);
	TAILQ_INIT(&q->active);
}

/* Takes e's request, its targets being listed by x (taken over, freed on failure too). */
static int submit(struct queue *q, struct queue_entry *e, const struct queue_ops *ops,
		  const struct auth_caller *caller, unsigned action, uint8_t flags,
		  uint32_t deadline_ms, struct action_expansion *x)
{
	if (e->busy) {
		action_expand_free(x);
		return -EBUSY;
	}
	e->res = malloc(sizeof(*e->res));
	if (!e->res) {
		action_expand_free(x);
		return -ENOMEM;
	}
	e->expanding = x;
	e->ops = ops;
	e->caller = *caller;
	e->busy = true;
	e->action = action;
	e->deadline_ms = deadline_ms ? deadline_ms : PROTO_DEFAULT_DEADLINE_MS;
	e->next = e->ntargets = 0;
	e->interims = 0;
	e->failed = 0;
	e->tree = (flags & PROTO_FLAG_TREE) && action != PROTO_ACTION_STATUS;
	e->walk = (flags & PROTO_FLAG_WALK) &&
		  (action == PROTO_ACTION_GUARD || action == PROTO_ACTION_AT_EXEC);
	e->relists = 0;
	e->relist_from = 0;
	/* A first step at once: most requests are done with it. */
	expand_step(q, e);
	return 0;
}

int queue_submit(struct queue *q, struct queue_entry *e, const struct auth_caller *caller,
		 const struct proto_request *req)
{
	struct action_expansion *x;
	int r;

	if (e->busy)
		return -EBUSY;
	r = action_expand_new(caller, req, &x);
	if (r < 0)
		return r;
	log_msg(LOG_DEBUG, "client pid=%d uid=%u: %s request, %u PID(s)", (int)caller->pid,
		(unsigned)caller->uid, proto_action_name(req->action), req->npids);
	return submit(q, e, q->ops, caller, req->action, req->flags, req->deadline_ms, x);
}

int queue_submit_targets(struct queue *q, struct queue_entry *e, const struct queue_ops *ops,
			 const struct auth_caller *caller, unsigned action, unsigned flags,
			 uint32_t deadline_ms, struct action_expansion *x)
{
	return submit(q, e, ops, caller, action, flags, deadline_ms, x);
}

void queue_hold_back(struct queue *q, struct queue_entry *e, bool held)
{
	e->held_back = held;
	/* In its own turn (where nowhere) the turn places it when done. */
	if (e->where != QUEUE_NOWHERE || !held)
		place(q, e);
}

void queue_cancel(struct queue *q, struct queue_entry *e)
{
	unplace(q, e);
	if (!e->busy)
		return;
	if (e->job) {
		if (e->expanding == NULL && e->next > 0)
			log_msg(LOG_DEBUG, "client pid=%d: gone while PID %d waited for its next attempt",
				(int)e->caller.pid, e->targets[e->next - 1].pid);
		action_cancel(e->job, -ECONNRESET, GONE_TEXT);
		deactivate(q, e);
	}
	end_request(e);
}

size_t queue_shutdown(struct queue *q, struct queue_entry *e)
{
	size_t n = 0;

	unplace(q, e);
	if (!e->busy)
		return 0;
	if (e->expanding && e->next > 0) {
		/* A --tree relist: what ran was answered; the rest is not started. */
		finish_request(q, e);
		return 0;
	}
	if (e->expanding) {
		/* Not one target listed yet: the request as a whole is refused. */
		fail_request(q, e, -BTG_ERR_SHUTDOWN);
		return 0;
	}
	if (e->job) {
		/* Parked between attempts: nothing of it is stopped, just answer. */
		action_cancel(e->job, -BTG_ERR_SHUTDOWN, QUEUE_SHUTDOWN_TEXT);
		deactivate(q, e);
		n++;
		e->ops->result(e, e->res);
	}
	while (e->busy && e->next < e->ntargets) {
		struct proto_result *res = e->res;

		memset(res, 0, sizeof(*res));
		res->pid = e->targets[e->next++].pid;
		res->error = BTG_ERR_SHUTDOWN;
		res->action = (uint8_t)e->action;
		res->state = PROTO_PROC_UNKNOWN;
		snprintf(res->message, sizeof(res->message), "%s", QUEUE_SHUTDOWN_TEXT);
		n++;
		e->ops->result(e, res);
	}
	if (e->busy)
		finish_request(q, e);
	return n;
}

/*
 * A lower bound: an entry that left the parked list early (cancelled,
 * answered) may still set it, and the loop then wakes once for nothing,
 * when wake_due() makes it exact again.
 */
uint64_t queue_next_wake_ms(const struct queue *q)
{
	return q->nparked ? q->parked_due_ms : UINT64_MAX;
}

bool queue_ready(const struct queue *q)
{
	return !TAILQ_EMPTY(&q->round) || (q->nparked && q->parked_due_ms <= now_ms());
}
