// SPDX-License-Identifier: MIT
/*
 * The daemon's log sink.  Under systemd, stderr is a journal stream and the
 * JOURNAL_STREAM variable names it ("<st_dev>:<st_ino>", see systemd.exec(5));
 * then every record goes to the journal natively, with structured fields an
 * operator can filter on (journalctl BTGUARD_TARGET_PID=1234).  Anywhere else
 * (a terminal, a test harness, a pipe that merely inherited JOURNAL_STREAM)
 * records are single "btguardd: <level>: message" lines on stderr.
 *
 * Paths and messages come from other processes (a target's exe link, a
 * result text that quotes a mapped object's path), so control characters,
 * bidi controls and invalid UTF-8 are escaped: one record is always exactly
 * one line.
 */
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* Every record would carry CODE_FILE=log.c; that says nothing, so leave it out. */
#define SD_JOURNAL_SUPPRESS_LOCATION 1
#include <systemd/sd-journal.h>

#include "escape.h"
#include "log.h"

/*
 * The one piece of process-wide state: where records go and how verbose we
 * are.  Chosen once in log_setup() before anything else runs.
 */
static bool log_to_journal;
static int log_max_priority = LOG_INFO;

#define LOG_LINE_MAX 2048

/*
 * True when JOURNAL_STREAM names fd 2 itself.  A child of a service whose
 * stderr was redirected elsewhere inherits the variable but not the stream;
 * comparing device and inode is how systemd says to tell them apart.
 */
static bool stderr_is_journal(void)
{
	const char *env = getenv("JOURNAL_STREAM");
	unsigned long long dev, ino;
	struct stat st;
	int end = 0;

	if (!env || !*env)
		return false;
	if (sscanf(env, "%llu:%llu%n", &dev, &ino, &end) != 2 || env[end] != '\0')
		return false;
	if (fstat(STDERR_FILENO, &st) < 0)
		return false;
	return (unsigned long long)st.st_dev == dev && (unsigned long long)st.st_ino == ino;
}

void log_setup(int verbose)
{
	log_to_journal = stderr_is_journal();
	log_max_priority = verbose ? LOG_DEBUG : LOG_INFO;
}

static const char *priority_name(int priority)
{
	static const char *const names[] = {
		[LOG_EMERG] = "emergency", [LOG_ALERT] = "alert", [LOG_CRIT] = "critical",
		[LOG_ERR] = "error",       [LOG_WARNING] = "warning", [LOG_NOTICE] = "notice",
		[LOG_INFO] = "info",       [LOG_DEBUG] = "debug",
	};

	if (priority < 0 || priority > LOG_DEBUG)
		return "log";
	return names[priority];
}

/*
 * Copies src into dst escaped as a terminal or a line-based reader needs
 * (proto/escape.c, the rule the client applies too): controls C0, DEL and
 * C1, bidi controls and invalid UTF-8 as escapes, a backslash doubled, so
 * one record is one line that reads in the order it was written.
 */
static void escape_line(char *dst, size_t cap, const char *src)
{
	escape_string(dst, cap, src, ESCAPE_TEXT);
}

static void emit(int priority, const char *line)
{
	if (log_to_journal) {
		sd_journal_send("MESSAGE=%s", line, "PRIORITY=%i", priority,
				"SYSLOG_IDENTIFIER=btguardd", NULL);
		return;
	}
	/* One fprintf per record, so concurrent writers cannot interleave mid-line. */
	fprintf(stderr, "btguardd: %s: %s\n", priority_name(priority), line);
}

void log_msg(int priority, const char *fmt, ...)
{
	char raw[LOG_LINE_MAX], line[LOG_LINE_MAX];
	va_list ap;

	if (priority > log_max_priority)
		return;
	va_start(ap, fmt);
	vsnprintf(raw, sizeof(raw), fmt, ap);
	va_end(ap);
	escape_line(line, sizeof(line), raw);
	emit(priority, line);
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
	if (res->error == BTG_OK && surveyed && res->action == PROTO_ACTION_STATUS)
		return LOG_DEBUG;
	if (res->error == BTG_OK)
		return caller->rule && !(res->flags & PROTO_RESULT_WROTE) ? LOG_DEBUG : LOG_INFO;
	if (res->error == BTG_ERR_DENIED)
		return LOG_WARNING;
	return LOG_NOTICE;
}

void log_action(const struct auth_caller *caller, pid_t target, const char *exe,
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

	if (priority > log_max_priority)
		return;
	escape_line(exe_s, sizeof(exe_s), exe && *exe ? exe : "?");
	escape_line(detail, sizeof(detail), res->message);
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

	if (!log_to_journal) {
		emit(priority, line);
		return;
	}
	sd_journal_send("MESSAGE=%s", line,
			"PRIORITY=%i", priority,
			"SYSLOG_IDENTIFIER=btguardd",
			"BTGUARD_ACTION=%s", action,
			"BTGUARD_TARGET_PID=%d", (int)target,
			"BTGUARD_TARGET_EXE=%s", exe_s,
			"BTGUARD_REQUESTER_UID=%u", (unsigned)caller->uid,
			"BTGUARD_REQUESTER_GID=%u", (unsigned)caller->gid,
			"BTGUARD_REQUESTER_PID=%d", (int)caller->pid,
			"BTGUARD_RESULT=%s", res->error == BTG_OK ? "ok" : "error",
			"BTGUARD_ERROR=%s", res->error == BTG_OK ? "" : error,
			"BTGUARD_STATE=%s", state,
			"BTGUARD_PAUSE_US=%u", res->pause_us,
			"BTGUARD_WROTE=%d", wrote ? 1 : 0,
			/* Empty for a client's request, like BTGUARD_ERROR on success. */
			"BTGUARD_RULE=%s", rule,
			/* Last on purpose: without an ID, this NULL ends the list. */
			message_id ? "MESSAGE_ID=%s" : NULL, message_id,
			NULL);
}
