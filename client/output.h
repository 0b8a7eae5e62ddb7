/* SPDX-License-Identifier: MIT */
/*
 * Presenting results: one human-readable line per PID (sites listed below
 * it with --verbose) or one JSON object per PID per line with --json.
 * Every line is flushed as it is written so a long PID list shows
 * progress.  Text that came from the daemon (messages, object paths,
 * which a target can choose) is escaped, never printed raw.
 */
#ifndef BTGUARD_CLIENT_OUTPUT_H
#define BTGUARD_CLIENT_OUTPUT_H

#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <time.h>

#include "../proto/proto.h"

enum output_format {
	OUTPUT_LINES = 0,        /* one line per PID */
	OUTPUT_JSON,             /* one JSON object per PID per line */
	OUTPUT_TABLE,            /* the at-risk report: a table and a summary line */
	OUTPUT_PROMETHEUS,       /* counts per state, node_exporter's textfile format */
	OUTPUT_NAGIOS,           /* one monitoring-plugins status line with perfdata */
};

/* The monitoring-plugins exit codes --format=nagios ends with. */
enum output_nagios_state {
	OUTPUT_NAGIOS_OK = 0,
	OUTPUT_NAGIOS_WARNING = 1,
	OUTPUT_NAGIOS_CRITICAL = 2,
	OUTPUT_NAGIOS_UNKNOWN = 3,
};

/* Sentinel for a threshold that was not set: never exceeded. */
#define OUTPUT_NO_THRESHOLD UINT32_MAX

/* What a request's results add up to, for summaries and the exit status. */
struct output_counts {
	unsigned processes;      /* results that describe a live process */
	unsigned state[PROTO_PROC_UNKNOWN + 1];
	unsigned at_risk, covered, warned;
	unsigned failed;         /* errors, but for processes that exited meanwhile */
	unsigned vanished;       /* selected, then exited before their turn */
	/* failed, by error code: the first OUTPUT_ERROR_KINDS codes seen each
	 * have their count, any further code counts in errors_other. */
	struct { uint32_t code; unsigned n; } errors[8];
	unsigned nerrors, errors_other;
	/* failed, split by cause: the daemon short of descriptors or memory
	 * (EMFILE, ENFILE, ENOMEM: it cannot tell what it did not read), or
	 * anything else (PID 1 unreadable even to root, a file gone). */
	unsigned short_of_resources, unreadable_other;
};

struct output {
	FILE *out;
	enum output_format format;
	bool  verbose;
	bool  selecting;         /* the request selected processes rather than naming PIDs */
	struct output_counts counts;
	bool  header_done;
	bool  rules_header;      /* prometheus: the rules' HELP and TYPE are written */
	/* --format=nagios: state when more than this many processes are at risk
	 * (the plugin guidelines' plain "N" range, 0..N), and the verdict
	 * output_end reached. */
	uint32_t warning, critical;
	/* The same for processes unreadable for any reason but the daemon's
	 * own shortage (--warning-unreadable, --critical-unreadable). */
	uint32_t warning_unreadable, critical_unreadable;
	/* The daemon said its policy is not what its files say (a NOTICE
	 * before the results): the text, escaped when printed. */
	bool policy_problem;
	char policy_text[PROTO_MAX_MESSAGE + 1];
	enum output_nagios_state nagios;
	time_t made_s;           /* when the report was made (CLOCK_REALTIME), for the Prometheus timestamp */
};

/*
 * Counts one RESULT and prints it as the format says (the table prints
 * its header before the first row); returns 0, or -errno of the write
 * to out that failed (-EIO when stdio kept no errno).
 */
int output_result(struct output *o, const struct proto_result *res);

/*
 * One rule of the daemon's policy (btguardctl policy): a line
 * "NAME: guard MATCH, N hits (last: PID...)" or a JSON object with the
 * keys rule, kind ("guard" or "exclude"), match, hits, last_pids; for
 * status --format=prometheus, a btguard_rule_guards_total sample.
 */
int output_rule(struct output *o, const struct proto_rule *r);

/*
 * After the last RESULT: the summary line, the Prometheus counts, or the
 * Nagios status line (its verdict in o->nagios).  Both return as
 * output_result() does.
 */
int output_end(struct output *o);

/*
 * --format=nagios when no verdict could be reached (the daemon cannot be
 * reached, or its reply was refused, cut off or malformed):
 * "BTGUARD UNKNOWN - WHY", WHY escaped as output_text does and a '|' (which
 * would start the performance data) shown as \x7c.
 */
void output_nagios_unknown(FILE *f, const char *why);

/* Whether a failed result only says the process exited before its turn. */
bool output_vanished(const struct proto_result *res);

/*
 * Writes s to f as the body of a JSON string (no quotes), escaped as
 * proto/escape.h's ESCAPE_JSON says: ", \, controls (C0, DEL, C1) and bidi
 * controls as escapes, each byte of an invalid sequence as U+FFFD.
 */
void output_json_string(FILE *f, const char *s);

/*
 * Writes s for a terminal, escaped as proto/escape.h's ESCAPE_TEXT says:
 * C0, DEL and invalid UTF-8 bytes as \xNN, C1 and bidi controls as
 * \uNNNN, a backslash doubled; so a hostile command line or object path
 * cannot send escape sequences or reorder the line.
 */
void output_text(FILE *f, const char *s);

#endif
