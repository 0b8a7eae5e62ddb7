// SPDX-License-Identifier: MIT
/*
 * Whose turn it is (daemon/request/queue.c), against a scripted action
 * layer: round-robin between users, then between one user's connections;
 * a busy target parked without holding anybody up; and never two guard
 * or unguard operations on one process at once, while a status neither
 * waits nor holds.  The real queue.c is linked with the fakes below in
 * place of action.c, action_expand.c and log.c (the Makefile's own rule
 * for this test), so no process is looked at: every target is a number,
 * and what the action layer answers is the script's.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cmocka.h>

#include "action.h"
#include "log.h"
#include "queue.h"
#include "timeutil.h"

/* ------------------------------------------------ the scripted layer -- */

#define MAX_EVENTS 64
#define MAX_PIDS   1024

/* What the action layer was asked to do, in order. */
struct event {
	char what;          /* 's': action_start, 'n': action_step (next attempt) */
	uid_t uid;
	pid_t caller;       /* the connection, by its client's PID */
	int32_t pid;        /* the target */
	unsigned action;
};

static struct {
	struct event ev[MAX_EVENTS];
	size_t nev;
	unsigned busy[MAX_PIDS];    /* attempts answered "busy" before the answer, per target */
	uint64_t wake_ms[MAX_PIDS]; /* when a busy target is due again (0: at once) */
} script;

struct action_expansion {
	struct action_target *t;
	size_t n;
};

struct action_job {
	int32_t pid;
	unsigned action;
	struct proto_result *res;
};

void log_msg(int priority, const char *fmt, ...)
{
	(void)priority;
	(void)fmt;
}

static void record(char what, const struct auth_caller *caller, int32_t pid, unsigned action)
{
	assert_true(script.nev < MAX_EVENTS);
	script.ev[script.nev++] = (struct event){ .what = what, .uid = caller->uid,
						  .caller = caller->pid, .pid = pid,
						  .action = action };
}

int action_expand_new(const struct auth_caller *caller, const struct proto_request *req,
		      struct action_expansion **ret)
{
	struct action_expansion *x = calloc(1, sizeof(*x));

	(void)caller;
	assert_non_null(x);
	x->t = calloc(req->npids ? req->npids : 1, sizeof(*x->t));
	assert_non_null(x->t);
	for (uint32_t i = 0; i < req->npids; i++)
		x->t[i] = (struct action_target){ .pid = req->pids[i], .ours = req->pids[i],
						  .pidfd = -1 };
	x->n = req->npids;
	*ret = x;
	return 0;
}

int action_expand_step(struct action_expansion *x)
{
	(void)x;
	return 1;   /* listed in one step */
}

void action_expand_end(struct action_expansion *x, struct action_target **ret, size_t *ret_n)
{
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

int action_expand_relist(const struct auth_caller *caller, struct action_target *t, size_t n,
			 size_t from, struct action_expansion **ret)
{
	(void)caller, (void)from, (void)ret;
	action_targets_free(t, n);
	fail_msg("no test asks for --tree");
	return -1;
}

void action_targets_free(struct action_target *t, size_t n)
{
	(void)n;
	free(t);
}

/* The target is answered: done, or busy for the rest of the script. */
static int answer(struct action_job *j, uint64_t *ret_wake_ms)
{
	if (script.busy[j->pid] > 0) {
		script.busy[j->pid]--;
		*ret_wake_ms = script.wake_ms[j->pid];
		return ACTION_AGAIN;
	}
	j->res->error = 0;
	snprintf(j->res->message, sizeof(j->res->message), "done");
	free(j);
	return 0;
}

int action_start(const struct auth_caller *caller, unsigned action, uint32_t deadline_ms,
		 struct action_target *want, struct proto_result *res,
		 struct action_job **reterr_job, uint64_t *ret_wake_ms)
{
	struct action_job *j = calloc(1, sizeof(*j));
	int r;

	(void)deadline_ms;
	assert_non_null(j);
	assert_true(want->pid > 0 && want->pid < MAX_PIDS);
	record('s', caller, want->pid, action);
	memset(res, 0, sizeof(*res));
	res->pid = want->pid;
	res->action = (uint8_t)action;
	*j = (struct action_job){ .pid = want->pid, .action = action, .res = res };
	r = answer(j, ret_wake_ms);
	*reterr_job = r == ACTION_AGAIN ? j : NULL;
	return r;
}

int action_step(struct action_job *j, uint64_t *ret_wake_ms)
{
	struct auth_caller who = { 0 };

	record('n', &who, j->pid, j->action);
	return answer(j, ret_wake_ms);
}

void action_cancel(struct action_job *j, int err, const char *why)
{
	j->res->error = (uint32_t)-err;
	snprintf(j->res->message, sizeof(j->res->message), "%s", why);
	free(j);
}

/* ---------------------------------------------------- the connections -- */

struct conn {
	struct queue_entry e;   /* first: the ops get it back */
	unsigned results;
	bool done;
};

static void on_result(struct queue_entry *e, const struct proto_result *res)
{
	(void)res;
	((struct conn *)e)->results++;
}

static void on_done(struct queue_entry *e, uint32_t count)
{
	(void)count;
	((struct conn *)e)->done = true;
}

static void on_failed(struct queue_entry *e, int err)
{
	(void)e, (void)err;
	fail_msg("no request fails here");
}

static const struct queue_ops ops = { .result = on_result, .done = on_done, .failed = on_failed };

static struct queue q;

static int setup(void **state)
{
	(void)state;
	memset(&script, 0, sizeof(script));
	queue_init(&q, &ops);
	return 0;
}

/* conn asks for action on pids, as client pid `client` of user uid. */
static void ask(struct conn *c, uid_t uid, pid_t client, unsigned action, const int32_t *pids,
		uint32_t n)
{
	struct auth_caller caller = { .pid = client, .uid = uid, .gid = uid };
	struct proto_request req = { .action = (uint8_t)action, .npids = n };

	memcpy(req.pids, pids, n * sizeof(*pids));
	assert_int_equal(queue_submit(&q, &c->e, &caller, &req), 0);
}

/* Turns until nothing is ready, at most `max` (a queue that never empties fails). */
static void run(unsigned max)
{
	for (unsigned i = 0; queue_ready(&q); i++) {
		assert_true(i < max);
		queue_turn(&q);
	}
}

/* The started targets' clients, in order, as a string of one letter each. */
static void starts(char *out, size_t cap, const pid_t *clients, const char *letters)
{
	size_t k = 0;

	for (size_t i = 0; i < script.nev && k + 1 < cap; i++) {
		if (script.ev[i].what != 's')
			continue;
		for (size_t c = 0; letters[c]; c++)
			if (clients[c] == script.ev[i].caller)
				out[k++] = letters[c];
	}
	out[k] = '\0';
}

/* ------------------------------------------------------------- tests -- */

/*
 * User A has two connections (a, b), user B one (c), each asking about
 * three processes: turns alternate between the users while both wait,
 * and A's turns alternate between its connections - A's two connections
 * get no more turns together than B's one.
 */
static void round_robin_between_users_then_connections(void **state)
{
	static const int32_t pa[] = { 11, 12, 13 }, pb[] = { 21, 22, 23 }, pc[] = { 31, 32, 33 };
	static const pid_t clients[] = { 100, 101, 200 };
	struct conn a = { 0 }, b = { 0 }, c = { 0 };
	char order[16];

	(void)state;
	ask(&a, 1000, 100, PROTO_ACTION_STATUS, pa, 3);
	ask(&b, 1000, 101, PROTO_ACTION_STATUS, pb, 3);
	ask(&c, 1001, 200, PROTO_ACTION_STATUS, pc, 3);
	run(100);
	starts(order, sizeof(order), clients, "abc");
	assert_string_equal(order, "acbcacbab");
	/* Each connection's own targets in the order it named them. */
	for (size_t i = 0, na = 0; i < script.nev; i++)
		if (script.ev[i].caller == 100)
			assert_int_equal(script.ev[i].pid, pa[na++]);
	assert_true(a.done && b.done && c.done);
	assert_int_equal(a.results + b.results + c.results, 9);
}

/*
 * A guard that stays busy on process 500 parks between its attempts; an
 * unguard of 500 from another user waits for it, without a start, until
 * the guard is answered; then it runs.  Meanwhile a third connection's
 * target (501) is not held up.
 */
static void one_operation_per_process(void **state)
{
	static const int32_t p500[] = { 500 }, p501[] = { 501 };
	struct conn g = { 0 }, u = { 0 }, o = { 0 };
	size_t guard_answered = 0, unguard_started = 0, other_started = 0;

	(void)state;
	script.busy[500] = 3;   /* three "busy" answers, due again at once */
	ask(&g, 1000, 100, PROTO_ACTION_GUARD, p500, 1);
	queue_turn(&q);         /* the guard starts, and is parked */
	assert_int_equal(script.nev, 1);
	ask(&u, 1001, 200, PROTO_ACTION_UNGUARD, p500, 1);
	ask(&o, 1002, 300, PROTO_ACTION_GUARD, p501, 1);
	run(100);
	for (size_t i = 0; i < script.nev; i++) {
		const struct event *ev = &script.ev[i];

		if (ev->pid == 500 && ev->action == PROTO_ACTION_GUARD)
			guard_answered = i;   /* its last attempt, the answer */
		if (ev->what == 's' && ev->action == PROTO_ACTION_UNGUARD)
			unguard_started = i;
		if (ev->what == 's' && ev->pid == 501)
			other_started = i;
	}
	/* start + 3 attempts of the guard, the unguard, the other: 6 calls. */
	assert_int_equal(script.nev, 6);
	assert_true(unguard_started > guard_answered);
	assert_true(other_started < guard_answered);
	assert_true(g.done && u.done && o.done);
}

/* A status only reads: it neither waits for a guard in progress nor holds one up. */
static void a_status_neither_waits_nor_holds(void **state)
{
	static const int32_t p500[] = { 500 };
	struct conn g = { 0 }, s = { 0 };
	size_t status_started = 0, guard_answered = 0;

	(void)state;
	script.busy[500] = 2;
	ask(&g, 1000, 100, PROTO_ACTION_GUARD, p500, 1);
	queue_turn(&q);
	ask(&s, 1001, 200, PROTO_ACTION_STATUS, p500, 1);
	run(100);
	for (size_t i = 0; i < script.nev; i++) {
		if (script.ev[i].action == PROTO_ACTION_STATUS)
			status_started = i;
		if (script.ev[i].action == PROTO_ACTION_GUARD)
			guard_answered = i;
	}
	assert_true(status_started < guard_answered);
	assert_true(g.done && s.done);
}

/*
 * A busy target parked until a later time is not retried in the meantime:
 * the other user's target runs, nothing is ready, and the queue says when
 * the parked one is due.
 */
static void a_parked_target_waits_for_its_time(void **state)
{
	static const int32_t p600[] = { 600 }, p601[] = { 601 };
	struct conn a = { 0 }, b = { 0 };
	uint64_t due_ms = now_ms() + 3600u * 1000u;

	(void)state;
	script.busy[600] = 1;
	script.wake_ms[600] = due_ms;
	ask(&a, 1000, 100, PROTO_ACTION_GUARD, p600, 1);
	ask(&b, 1001, 200, PROTO_ACTION_GUARD, p601, 1);
	run(100);
	assert_int_equal(script.nev, 2);   /* both started, nobody retried */
	assert_true(b.done);
	assert_false(a.done);
	assert_int_equal(queue_next_wake_ms(&q), due_ms);
	queue_cancel(&q, &a.e);
	assert_false(queue_ready(&q));
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test_setup(round_robin_between_users_then_connections, setup),
		cmocka_unit_test_setup(one_operation_per_process, setup),
		cmocka_unit_test_setup(a_status_neither_waits_nor_holds, setup),
		cmocka_unit_test_setup(a_parked_target_waits_for_its_time, setup),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
