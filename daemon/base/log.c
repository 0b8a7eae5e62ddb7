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
#include <sys/uio.h>
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
void log_escape(char *dst, size_t cap, const char *src)
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

bool log_wants(int priority)
{
	return priority <= log_max_priority;
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
	log_escape(line, sizeof(line), raw);
	emit(priority, line);
}

void log_record(int priority, const char *line, const char *const *fields, size_t nfields)
{
	char prio[16], msg[sizeof("MESSAGE=") + LOG_LINE_MAX];
	struct iovec iov[3 + LOG_RECORD_FIELDS_MAX];
	int n = 0, len;

	if (!log_wants(priority))
		return;
	if (!log_to_journal) {
		emit(priority, line);
		return;
	}
	if (nfields > LOG_RECORD_FIELDS_MAX)
		nfields = LOG_RECORD_FIELDS_MAX;   /* a caller's bug; the message still goes */
	len = snprintf(msg, sizeof(msg), "MESSAGE=%s", line);
	iov[n++] = (struct iovec){ msg, len < (int)sizeof(msg) ? (size_t)len : sizeof(msg) - 1 };
	len = snprintf(prio, sizeof(prio), "PRIORITY=%d", priority);
	iov[n++] = (struct iovec){ prio, (size_t)len };
	iov[n++] = (struct iovec){ (void *)"SYSLOG_IDENTIFIER=btguardd", strlen("SYSLOG_IDENTIFIER=btguardd") };
	for (size_t i = 0; i < nfields; i++)
		iov[n++] = (struct iovec){ (void *)fields[i], strlen(fields[i]) };
	sd_journal_sendv(iov, n);
}
