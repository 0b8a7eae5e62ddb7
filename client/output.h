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
#include <stdio.h>

#include "../proto/proto.h"

enum output_format {
	OUTPUT_LINES = 0,        /* one line per PID */
	OUTPUT_JSON,             /* one JSON object per PID per line */
	OUTPUT_TABLE,            /* the at-risk report: a table and a summary line */
	OUTPUT_PROMETHEUS,       /* counts per state, node_exporter's textfile format */
};

/* What a request's results add up to, for summaries and the exit status. */
struct output_counts {
	unsigned processes;      /* results that describe a live process */
	unsigned state[PROTO_PROC_UNKNOWN + 1];
	unsigned at_risk, covered, warned;
	unsigned failed;         /* errors, but for processes that exited meanwhile */
	unsigned vanished;       /* selected, then exited before their turn */
};

struct output {
	FILE *out;
	enum output_format format;
	bool  verbose;
	bool  selecting;         /* the request selected processes rather than naming PIDs */
	struct output_counts counts;
	bool  header_done;
};

/*
 * Counts one RESULT and prints it as the format says (the table prints
 * its header before the first row); returns 0, or -EIO if out could not
 * be written.
 */
int output_result(struct output *o, const struct proto_result *res);

/*
 * One rule of the daemon's policy (btguardctl policy): a line
 * "NAME: guard MATCH, N hits (last: PID...)" or a JSON object with the
 * keys rule, kind ("guard" or "exclude"), match, hits, last_pids.
 */
int output_rule(struct output *o, const struct proto_rule *r);

/* After the last RESULT: the summary line, or the Prometheus counts. */
int output_end(struct output *o);

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
