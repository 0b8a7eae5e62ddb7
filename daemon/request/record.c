// SPDX-License-Identifier: MIT
/*
 * The record of one action on one target (record.h): the line an
 * operator reads and, in the journal, the fields a script filters on.
 * base/log.c is the sink; what a record says about callers, targets and
 * results is decided here, where requests are known.  Also the processes
 * an answer found torn, which the policy's next sweep asks about again.
 */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "log.h"
#include "record.h"

/* Journal fields of one record, each "NAME=value", in one buffer. */
struct fields {
	const char *v[LOG_RECORD_FIELDS_MAX];
	size_t n, used;
	char buf[PROTO_MAX_OBJECT * 2 + 1024];
};

__attribute__((format(printf, 2, 3)))
static void journal_field(struct fields *f, const char *fmt, ...)
{
	size_t left = sizeof(f->buf) - f->used;
	va_list ap;
	int len;

	if (f->n == LOG_RECORD_FIELDS_MAX || left == 0)
		return;
	va_start(ap, fmt);
	len = vsnprintf(f->buf + f->used, left, fmt, ap);
	va_end(ap);
	if (len < 0)
		return;
	f->v[f->n++] = f->buf + f->used;
	f->used += (size_t)len < left ? (size_t)len + 1 : left;
}

/*
 * One MESSAGE_ID per kind of action record, so an operator can select
 * "every guard that took effect" or "every denial" without parsing text
 * (journalctl MESSAGE_ID=...; the recipes are in btguardd(8)).  Made once
 * with `systemd-id128 new` and fixed forever: scripts and alerts match on
 * them.  A successful status query is no event and carries none.
 */
#define MESSAGE_ID_GUARDED   "1edcf5a1d4f44a1ab89192b5ed4d9342"
#define MESSAGE_ID_UNGUARDED "316fd372c9bb4be8b98283d2a03f0a0b"
#define MESSAGE_ID_DENIED    "7fd544fc8d6847b4a99c7ed41de6f644"
#define MESSAGE_ID_FAILED    "ae9800b1a81b4e2e959890db921c5189"

/* The MESSAGE_ID of an action record, or NULL for a successful status. */
static const char *action_message_id(const struct proto_result *res)
{
	if (res->error == BTG_ERR_DENIED)
		return MESSAGE_ID_DENIED;
	if (res->error != BTG_OK)
		return MESSAGE_ID_FAILED;
	if (res->action == PROTO_ACTION_GUARD)
		return MESSAGE_ID_GUARDED;
	if (res->action == PROTO_ACTION_UNGUARD)
		return MESSAGE_ID_UNGUARDED;
	return NULL;
}

/*
 * A rule's guard that wrote nothing is no event: the policy asks again
 * about every process after a reload, and about one whose mappings
 * changed, and a node's journal must not fill with "already guarded".
 * Nor is each answer of a status --all: monitoring asks it of every
 * process every minute, and 10,000 records a minute would also trip
 * journald's rate limit and drop the records that matter.  The request
 * itself is recorded (queue.c), and so is everything that failed.
 */
static int action_priority(const struct auth_caller *caller, const struct proto_result *res,
			   bool surveyed)
{
	/*
	 * A torn site (a uprobe inside the guard's bytes, or the file's bytes
	 * its removal wrote back) may crash the process at its next call:
	 * what must never pass unseen, even in a survey.
	 */
	if (res->warnings & PROTO_WARN_TORN)
		return LOG_CRIT;
	if (res->error == BTG_OK && surveyed && res->action == PROTO_ACTION_STATUS)
		return LOG_DEBUG;
	if (res->error == BTG_OK)
		return caller->rule && !(res->flags & PROTO_RESULT_WROTE) ? LOG_DEBUG : LOG_INFO;
	if (res->error == BTG_ERR_DENIED)
		return LOG_WARNING;
	return LOG_NOTICE;
}

/* record_take_torn()'s processes, written by record_action() only. */
static pid_t torn_pids[RECORD_TORN_MAX];
static size_t ntorn;

static void remember_torn(pid_t pid)
{
	for (size_t i = 0; i < ntorn; i++)
		if (torn_pids[i] == pid)
			return;
	if (ntorn < RECORD_TORN_MAX)
		torn_pids[ntorn++] = pid;
}

size_t record_take_torn(pid_t *pids, size_t max)
{
	size_t n = ntorn < max ? ntorn : max;

	memcpy(pids, torn_pids, n * sizeof(*pids));
	memmove(torn_pids, torn_pids + n, (ntorn - n) * sizeof(*pids));
	ntorn -= n;
	return n;
}

void record_action(const struct auth_caller *caller, pid_t target, const char *exe,
		const struct proto_result *res, bool surveyed)
{
	char exe_s[PROTO_MAX_OBJECT * 2], detail[PROTO_MAX_MESSAGE * 2];
	char line[LOG_LINE_MAX], by[160];
	const char *rule = caller->rule ? caller->rule : "";
	const char *action = proto_action_name(res->action);
	const char *state = proto_proc_state_name(res->state);
	const char *error = res->error ? proto_error_name(res->error) : "";
	bool wrote = res->flags & PROTO_RESULT_WROTE;
	int priority = action_priority(caller, res, surveyed);
	const char *message_id = action_message_id(res);
	struct fields f = { .n = 0 };

	if (res->warnings & PROTO_WARN_TORN)
		remember_torn(target);
	if (!log_wants(priority))
		return;
	log_escape(exe_s, sizeof(exe_s), exe && *exe ? exe : "?");
	log_escape(detail, sizeof(detail), res->message);
	if (!detail[0] && (res->warnings & PROTO_WARN_TORN))
		snprintf(detail, sizeof(detail), "%s",
			 "a site is torn (a breakpoint inside the guard's bytes, or the file's bytes a removed uprobe wrote back): a call to backtrace() may crash, or run unguarded, until guard repairs it");
	/* Rule names are [A-Za-z0-9._-] (policy.c): nothing to escape. */
	if (caller->rule)
		snprintf(by, sizeof(by), "rule %s (uid=%u gid=%u pid=%d)", rule,
			 (unsigned)caller->uid, (unsigned)caller->gid, (int)caller->pid);
	else
		snprintf(by, sizeof(by), "uid=%u gid=%u pid=%d", (unsigned)caller->uid,
			 (unsigned)caller->gid, (int)caller->pid);

	if (res->error == BTG_OK)
		snprintf(line, sizeof(line),
			 "%s pid=%d exe=%s by %s: ok state=%s %s pause_us=%u%s%s",
			 action, (int)target, exe_s, by, state, wrote ? "wrote" : "unchanged", res->pause_us,
			 detail[0] ? ": " : "", detail);
	else
		snprintf(line, sizeof(line),
			 "%s pid=%d exe=%s by %s: error %s state=%s pause_us=%u%s%s",
			 action, (int)target, exe_s, by, error, state, res->pause_us,
			 detail[0] ? ": " : "", detail);
	/* line is built from escaped parts and numbers: it holds no control character. */
	journal_field(&f, "BTGUARD_ACTION=%s", action);
	journal_field(&f, "BTGUARD_TARGET_PID=%d", (int)target);
	journal_field(&f, "BTGUARD_TARGET_EXE=%s", exe_s);
	journal_field(&f, "BTGUARD_REQUESTER_UID=%u", (unsigned)caller->uid);
	journal_field(&f, "BTGUARD_REQUESTER_GID=%u", (unsigned)caller->gid);
	journal_field(&f, "BTGUARD_REQUESTER_PID=%d", (int)caller->pid);
	journal_field(&f, "BTGUARD_RESULT=%s", res->error == BTG_OK ? "ok" : "error");
	journal_field(&f, "BTGUARD_ERROR=%s", res->error == BTG_OK ? "" : error);
	journal_field(&f, "BTGUARD_STATE=%s", state);
	journal_field(&f, "BTGUARD_PAUSE_US=%u", res->pause_us);
	journal_field(&f, "BTGUARD_WROTE=%d", wrote ? 1 : 0);
	/* Empty for a client's request, like BTGUARD_ERROR on success. */
	journal_field(&f, "BTGUARD_RULE=%s", rule);
	if (message_id)
		journal_field(&f, "MESSAGE_ID=%s", message_id);
	log_record(priority, line, f.v, f.n);
}
