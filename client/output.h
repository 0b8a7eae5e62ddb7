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

struct output {
	FILE *out;
	bool  json;
	bool  verbose;
};

/* Prints one RESULT; returns 0, or -EIO if out could not be written. */
int output_result(const struct output *o, const struct proto_result *res);

/*
 * Writes s to f as the body of a JSON string (no quotes): ", \ and control
 * characters escaped, valid UTF-8 passed through, each byte of an invalid
 * sequence replaced by U+FFFD.  Exposed for the request-level error path.
 */
void output_json_string(FILE *f, const char *s);

/*
 * Writes s for a terminal: control characters, DEL and invalid UTF-8 bytes
 * as \xNN, so a hostile object path cannot send escape sequences.
 */
void output_text(FILE *f, const char *s);

#endif
