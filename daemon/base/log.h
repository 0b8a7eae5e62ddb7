/* SPDX-License-Identifier: MIT */
/*
 * The daemon's log: the journal with structured fields when running under
 * systemd (JOURNAL_STREAM names our stderr), else plain lines on stderr.
 * Library-style modules do not log; the decider (action.c, server.c,
 * main.c) logs once per event.  What a record says about a request is
 * request/record.c's: this layer knows no callers or targets.
 */
#ifndef BTGUARD_LOG_H
#define BTGUARD_LOG_H

#include <stdbool.h>
#include <stddef.h>
#include <sys/types.h>
#include <syslog.h>

/* Chooses the sink once at start-up; verbose enables LOG_DEBUG. */
void log_setup(int verbose);

__attribute__((format(printf, 2, 3)))
void log_msg(int priority, const char *fmt, ...);

/* The longest record, in bytes; longer ones are cut. */
#define LOG_LINE_MAX 2048
/* Journal fields a record may carry besides MESSAGE, PRIORITY and SYSLOG_IDENTIFIER. */
#define LOG_RECORD_FIELDS_MAX 16

/* True when a record at priority is written at this verbosity. */
bool log_wants(int priority);

/*
 * src into dst escaped for one line (proto/escape.c's ESCAPE_TEXT): what
 * came from another process can neither break a record in two nor
 * reorder it on a terminal.
 */
void log_escape(char *dst, size_t cap, const char *src);

/*
 * One record whose line the caller built from escaped parts: the line on
 * stderr, or in the journal as MESSAGE with fields ("NAME=value", values
 * escaped too), e.g. MESSAGE_ID=...
 */
void log_record(int priority, const char *line, const char *const *fields, size_t nfields);

#endif
