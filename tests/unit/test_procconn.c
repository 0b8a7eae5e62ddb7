// SPDX-License-Identifier: MIT
/*
 * Unit tests for the proc connector's parser (procconn.c) and the table
 * of processes noticed at their exec (noticed.c): exec events are found
 * and nothing else is, a malformed datagram yields nothing, the table
 * dedupes, puts off, hands over to the sweep and stays bounded; and the
 * refusal's notice names the cause that decides, never a capability
 * where a namespace is the reason.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include <cmocka.h>

#include <linux/cn_proc.h>
#include <linux/connector.h>
#include <linux/netlink.h>

#include "noticed.h"
#include "procconn.h"

/* One netlink message holding one proc_event, as the kernel sends it. */
struct datagram {
	struct nlmsghdr nl;
	struct cn_msg cn;
	struct proc_event ev;
} __attribute__((packed));

static struct datagram event(uint32_t what, pid_t pid, pid_t tgid)
{
	struct datagram d;

	memset(&d, 0, sizeof(d));
	d.nl.nlmsg_len = sizeof(d);
	d.nl.nlmsg_type = NLMSG_DONE;
	d.cn.id.idx = CN_IDX_PROC;
	d.cn.id.val = CN_VAL_PROC;
	d.cn.len = sizeof(d.ev);
	d.ev.what = what;
	if (what == PROC_EVENT_EXEC) {
		d.ev.event_data.exec.process_pid = pid;
		d.ev.event_data.exec.process_tgid = tgid;
	}
	return d;
}

static void exec_events_give_the_process(void **state)
{
	struct datagram d = event(PROC_EVENT_EXEC, 4242, 4242);
	pid_t pids[4];
	size_t n = 0;
	(void)state;

	assert_int_equal(procconn_parse(&d, sizeof(d), pids, 4, &n), 0);
	assert_int_equal(n, 1);
	assert_int_equal(pids[0], 4242);
}

static void other_messages_give_nothing(void **state)
{
	static const uint32_t others[] = { PROC_EVENT_NONE, PROC_EVENT_FORK, PROC_EVENT_EXIT,
					   PROC_EVENT_UID, PROC_EVENT_COMM };
	pid_t pids[4];
	size_t n = 0;
	(void)state;

	for (size_t i = 0; i < sizeof(others) / sizeof(others[0]); i++) {
		struct datagram d = event(others[i], 1, 1);

		assert_int_equal(procconn_parse(&d, sizeof(d), pids, 4, &n), 0);
	}
	/* Another connector's message, and an exec cut short. */
	struct datagram d = event(PROC_EVENT_EXEC, 7, 7);
	d.cn.id.idx = CN_IDX_PROC + 1;
	procconn_parse(&d, sizeof(d), pids, 4, &n);
	d = event(PROC_EVENT_EXEC, 7, 7);
	for (size_t len = 0; len < sizeof(d); len++)
		procconn_parse(&d, len, pids, 4, &n);
	d.cn.len = 4;   /* says it carries less than an event */
	procconn_parse(&d, sizeof(d), pids, 4, &n);
	d = event(PROC_EVENT_EXEC, 7, 7);
	d.nl.nlmsg_len = sizeof(d) + 64;   /* claims more than was received */
	procconn_parse(&d, sizeof(d), pids, 4, &n);
	assert_int_equal(n, 0);
}

static void a_full_array_counts_what_did_not_fit(void **state)
{
	struct datagram d = event(PROC_EVENT_EXEC, 9, 9);
	pid_t pids[1];
	size_t n = 0;
	(void)state;

	assert_int_equal(procconn_parse(&d, sizeof(d), pids, 1, &n), 0);
	assert_int_equal(procconn_parse(&d, sizeof(d), pids, 1, &n), 1);
	assert_int_equal(n, 1);
}

static void noticed_looks_in_due_order_and_dedupes(void **state)
{
	static struct noticed t;
	struct noticed_entry *e;
	(void)state;

	memset(&t, 0, sizeof(t));
	assert_true(noticed_add(&t, 10, 100));
	assert_true(noticed_add(&t, 11, 50));
	assert_true(noticed_add(&t, 10, 120));   /* exec'd again: one entry, due later */
	assert_int_equal(t.n, 2);
	assert_int_equal(noticed_next_ms(&t), 50);
	assert_null(noticed_due(&t, 49));
	e = noticed_due(&t, 200);
	assert_non_null(e);
	assert_int_equal(e->pid, 11);
	/* Looked at and asked: the sweep's finding the same is no news, once. */
	e->asked = true;
	e->asked_ms = 60;
	e->start_ticks = 5;
	e->objects = 77;
	assert_int_equal(noticed_next_ms(&t), 120);
	assert_true(noticed_take(&t, 11, 5, 77));
	assert_false(noticed_take(&t, 11, 5, 77));
	/* Not asked yet (still waiting for its loader): the sweep asks, and
	 * then the look is not made too. */
	assert_false(noticed_take(&t, 10, 1, 2));
	assert_int_equal(t.n, 1);
	assert_true(noticed_forget(&t, 10));
	assert_false(noticed_forget(&t, 10));
	assert_int_equal(t.n, 0);
	assert_null(noticed_due(&t, UINT64_MAX));
}

static void noticed_sees_a_different_program(void **state)
{
	static struct noticed t;
	struct noticed_entry *e;
	(void)state;

	memset(&t, 0, sizeof(t));
	noticed_add(&t, 20, 0);
	e = noticed_due(&t, 0);
	*e = (struct noticed_entry){ .pid = 20, .asked = true, .asked_ms = 10, .start_ticks = 3, .objects = 4 };
	assert_false(noticed_take(&t, 20, 3, 5));   /* it loaded something since */
	assert_int_equal(t.n, 0);
	noticed_add(&t, 21, 0);
	e = noticed_due(&t, 0);
	*e = (struct noticed_entry){ .pid = 21, .asked = true, .asked_ms = 10, .start_ticks = 3, .objects = 4 };
	assert_false(noticed_take(&t, 21, 9, 4));   /* its PID names another process */
}

static void noticed_is_bounded_and_pruned(void **state)
{
	static struct noticed t;
	(void)state;

	memset(&t, 0, sizeof(t));
	for (pid_t p = 1; p <= (pid_t)NOTICED_MAX; p++)
		assert_true(noticed_add(&t, p, 0));
	assert_false(noticed_add(&t, 999999, 0));
	assert_int_equal(t.dropped, 1);
	/* Asked entries make room, the one asked longest ago first. */
	t.v[7] = (struct noticed_entry){ .pid = t.v[7].pid, .asked = true, .asked_ms = 9 };
	t.v[3] = (struct noticed_entry){ .pid = t.v[3].pid, .asked = true, .asked_ms = 4 };
	assert_true(noticed_add(&t, 999999, 0));
	assert_int_equal(t.v[3].pid, 999999);
	assert_false(t.v[3].asked);
	assert_int_equal(t.n, NOTICED_MAX);
	t.v[3] = (struct noticed_entry){ .pid = 4 };   /* as it was, for what follows */
	t.v[7] = (struct noticed_entry){ .pid = 8 };
	for (size_t i = 0; i < t.n; i++)
		if (t.v[i].pid % 2)
			t.v[i] = (struct noticed_entry){ .pid = t.v[i].pid, .asked = true, .asked_ms = 5 };
	noticed_prune(&t, 6);    /* asked before the sweep began, not consumed: gone */
	assert_int_equal(t.n, NOTICED_MAX / 2);
	for (size_t i = 0; i < t.n; i++)
		assert_int_equal(t.v[i].pid % 2, 0);
	noticed_clear(&t);
	assert_int_equal(t.n, 0);
	assert_int_equal(noticed_next_ms(&t), UINT64_MAX);
}

/* The notice for a refusal at step with err, btguardd's namespaces and capability as given. */
static const char *refusal_in(enum procconn_step step, int err, int pid_init, int user_init,
			      int net_init, int net_admin)
{
	static char why[256];
	struct procconn_self self = { .pid_ns_initial = pid_init, .user_ns_initial = user_init,
				      .net_ns_initial = net_init, .net_admin = net_admin };

	procconn_refusal(step, err, &self, why, sizeof(why));
	return why;
}

/* The same in the node's network namespace. */
static const char *refusal(enum procconn_step step, int err, int pid_init, int user_init,
			   int net_admin)
{
	return refusal_in(step, err, pid_init, user_init, 1, net_admin);
}

#define PIDNS "in a PID namespace other than the node's: the kernel gives exec events only to " \
	      "the initial PID namespace"
#define USERNS "in a user namespace other than the node's: the kernel gives exec events only " \
	       "to the initial user namespace"
#define NETNS "in a network namespace other than the node's: the kernel sends exec events only " \
	      "to sockets of the initial network namespace"

/* A container: refused at bind (no CAP_NET_ADMIN there), or ignored; the PID namespace decides. */
static void a_pid_namespace_is_named_not_the_capability(void **state)
{
	(void)state;
	assert_string_equal(refusal(PROCCONN_BIND, EPERM, 0, 1, 0), PIDNS);
	assert_string_equal(refusal(PROCCONN_BIND, EPERM, 0, 1, 1), PIDNS);
	assert_string_equal(refusal(PROCCONN_NO_ANSWER, 0, 0, 1, 1), PIDNS);
	assert_string_equal(refusal(PROCCONN_SUBSCRIBE, ECONNREFUSED, 0, 1, -1), PIDNS);
	/* A user namespace: its CAP_NET_ADMIN is its own, not the node's. */
	assert_string_equal(refusal(PROCCONN_BIND, EPERM, 1, 0, 1), USERNS);
	assert_string_equal(refusal(PROCCONN_BIND, EPERM, 0, 0, 1),
			    "in PID and user namespaces other than the node's: the kernel gives "
			    "exec events only to the initial ones");
	/* A container has all three: the PID namespace is named. */
	assert_string_equal(refusal_in(PROCCONN_BIND, EPERM, 0, 1, 0, 0), PIDNS);
	/* The node agent's container (the host's PIDs, no network): the network namespace. */
	assert_string_equal(refusal_in(PROCCONN_BIND, EPERM, 1, 1, 0, 0), NETNS);
	assert_string_equal(refusal_in(PROCCONN_SUBSCRIBE, ECONNREFUSED, 1, 1, 0, 1), NETNS);
	/* It refuses, it never ignores: no answer is not its doing. */
	assert_string_equal(refusal_in(PROCCONN_NO_ANSWER, 0, 1, 1, 0, 1),
			    "the proc connector did not answer");
	/* Nothing a namespace explains: said as it is. */
	assert_string_equal(refusal(PROCCONN_BIND, ENOMEM, 0, 1, 1),
			    "binding to the proc connector: Cannot allocate memory");
	assert_string_equal(refusal(PROCCONN_SUBSCRIBE, EAGAIN, 0, 0, 1),
			    "subscribing to the proc connector: Resource temporarily unavailable");
}

/* The node's own namespaces: the capability when it is missing, else the kernel's word. */
static void in_the_initial_namespaces_the_refusal_is_said_as_it_is(void **state)
{
	(void)state;
	assert_string_equal(refusal(PROCCONN_BIND, EPERM, 1, 1, 0),
			    "binding to the proc connector: the kernel refused it (EPERM) to a "
			    "process without CAP_NET_ADMIN");
	assert_string_equal(refusal(PROCCONN_BIND, EPERM, 1, 1, 1),
			    "binding to the proc connector: the kernel refused it (EPERM: "
			    "Operation not permitted)");
	/* Capabilities unknown: no guess either. */
	assert_string_equal(refusal(PROCCONN_BIND, EPERM, 1, 1, -1),
			    "binding to the proc connector: the kernel refused it (EPERM: "
			    "Operation not permitted)");
	/* The network namespace unknown: ECONNREFUSED itself says it. */
	assert_string_equal(refusal_in(PROCCONN_SUBSCRIBE, ECONNREFUSED, 1, 1, -1, 1),
			    "subscribing to the proc connector: Connection refused (not in the "
			    "initial network namespace)");
	assert_string_equal(refusal(PROCCONN_NO_ANSWER, 0, 1, 1, 1),
			    "the proc connector did not answer");
	/* Namespaces unknown: what the kernel is known to ignore, as a rule, not a verdict. */
	assert_string_equal(refusal(PROCCONN_NO_ANSWER, 0, -1, -1, 1),
			    "the proc connector did not answer (it answers only the initial user "
			    "and PID namespaces)");
	assert_string_equal(refusal(PROCCONN_BIND, EPERM, -1, 1, 0),
			    "binding to the proc connector: the kernel refused it (EPERM) to a "
			    "process without CAP_NET_ADMIN");
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(exec_events_give_the_process),
		cmocka_unit_test(other_messages_give_nothing),
		cmocka_unit_test(a_full_array_counts_what_did_not_fit),
		cmocka_unit_test(noticed_looks_in_due_order_and_dedupes),
		cmocka_unit_test(noticed_sees_a_different_program),
		cmocka_unit_test(noticed_is_bounded_and_pruned),
		cmocka_unit_test(a_pid_namespace_is_named_not_the_capability),
		cmocka_unit_test(in_the_initial_namespaces_the_refusal_is_said_as_it_is),
	};

	return cmocka_run_group_tests(tests, NULL, NULL);
}
