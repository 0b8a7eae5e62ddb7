// SPDX-License-Identifier: MIT
/*
 * btguardctl's output formats.  The human format is one line per PID:
 *
 *   1234: guarded (1 site), wrote, paused 412 us
 *   1234: guarded (1 site), already guarded, nothing written
 *   1234: unguarded (1 site)                      (status)
 *   1235: error: busy: <detail from the daemon>
 *
 * followed, with --verbose, by one indented line per site.  The JSON format
 * is one object per PID per line with fixed keys (see --help).  Strings from
 * the daemon are untrusted: an object path is whatever the target mapped,
 * so both formats escape them (see output.h).
 */
#include <errno.h>
#include <inttypes.h>
#include <stdint.h>
#include <string.h>

#include "output.h"

/*
 * Length of the valid UTF-8 sequence at s (n bytes available), or 0 when
 * it is invalid: bad lead byte, missing continuation, overlong form,
 * surrogate, or beyond U+10FFFF.
 */
static size_t utf8_sequence(const unsigned char *s, size_t n)
{
	uint32_t cp, min;
	size_t len;

	if (s[0] < 0x80)
		return 1;
	if (s[0] >= 0xc2 && s[0] <= 0xdf) {
		len = 2; cp = s[0] & 0x1f; min = 0x80;
	} else if ((s[0] & 0xf0) == 0xe0) {
		len = 3; cp = s[0] & 0x0f; min = 0x800;
	} else if (s[0] >= 0xf0 && s[0] <= 0xf4) {
		len = 4; cp = s[0] & 0x07; min = 0x10000;
	} else {
		return 0;
	}
	if (len > n)
		return 0;
	for (size_t i = 1; i < len; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (s[i] & 0x3f);
	}
	if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	return len;
}

void output_json_string(FILE *f, const char *str)
{
	const unsigned char *s = (const unsigned char *)str;
	size_t n = strlen(str);

	for (size_t i = 0; i < n;) {
		unsigned char c = s[i];
		size_t len;

		switch (c) {
		case '"':  fputs("\\\"", f); i++; continue;
		case '\\': fputs("\\\\", f); i++; continue;
		case '\n': fputs("\\n", f); i++; continue;
		case '\r': fputs("\\r", f); i++; continue;
		case '\t': fputs("\\t", f); i++; continue;
		}
		if (c < 0x20 || c == 0x7f) {
			fprintf(f, "\\u%04x", c);
			i++;
			continue;
		}
		len = utf8_sequence(s + i, n - i);
		if (len == 0) {
			fputs("\\ufffd", f);
			i++;
			continue;
		}
		fwrite(s + i, 1, len, f);
		i += len;
	}
}

void output_text(FILE *f, const char *str)
{
	const unsigned char *s = (const unsigned char *)str;
	size_t n = strlen(str);

	for (size_t i = 0; i < n;) {
		size_t len = s[i] < 0x20 || s[i] == 0x7f ? 0 : utf8_sequence(s + i, n - i);

		if (len == 0) {
			fprintf(f, "\\x%02x", s[i]);
			i++;
			continue;
		}
		fwrite(s + i, 1, len, f);
		i += len;
	}
}

static bool changes_bytes(unsigned action)
{
	return action == PROTO_ACTION_GUARD || action == PROTO_ACTION_UNGUARD;
}

/* The detail to show: the daemon's own, else the code's standard sentence. */
static const char *detail(const struct proto_result *res)
{
	if (res->message[0] || res->error == BTG_OK)
		return res->message;
	return proto_error_text(res->error);
}

static void print_json(FILE *f, const struct proto_result *res)
{
	bool ok = res->error == BTG_OK;

	fprintf(f, "{\"pid\":%" PRId32 ",\"ok\":%s,\"action\":\"%s\",\"state\":",
		res->pid, ok ? "true" : "false", proto_action_name(res->action));
	if (res->state == PROTO_PROC_UNKNOWN)
		fputs("null", f);
	else
		fprintf(f, "\"%s\"", proto_proc_state_name(res->state));
	fprintf(f, ",\"wrote\":%s", res->flags & PROTO_RESULT_WROTE ? "true" : "false");
	if (!ok)
		fprintf(f, ",\"error\":\"%s\"", proto_error_name(res->error));
	fputs(",\"message\":\"", f);
	output_json_string(f, detail(res));
	fputs("\",\"sites\":[", f);
	for (unsigned i = 0; i < res->nsites; i++) {
		const struct proto_site *s = &res->sites[i];

		fprintf(f, "%s{\"object\":\"", i ? "," : "");
		output_json_string(f, s->object);
		fprintf(f, "\",\"address\":\"0x%" PRIx64 "\",\"state\":\"%s\"}",
			s->address, proto_site_state_name(s->state));
	}
	fputc(']', f);
	if (changes_bytes(res->action))
		fprintf(f, ",\"pause_us\":%" PRIu32 ",\"check_us\":%" PRIu32,
			res->pause_us, res->check_us);
	fputs("}\n", f);
}

static void print_human(FILE *f, const struct proto_result *res, bool verbose)
{
	fprintf(f, "%" PRId32 ": ", res->pid);
	if (res->error != BTG_OK) {
		fprintf(f, "error: %s: ", proto_error_name(res->error));
		output_text(f, detail(res));
	} else {
		/* The state the action aims for, to say "already guarded". */
		unsigned goal = res->action == PROTO_ACTION_GUARD ? PROTO_PROC_GUARDED
								  : PROTO_PROC_UNGUARDED;

		fprintf(f, "%s (%u site%s)", proto_proc_state_name(res->state),
			(unsigned)res->nsites, res->nsites == 1 ? "" : "s");
		if (changes_bytes(res->action)) {
			if (res->flags & PROTO_RESULT_WROTE)
				fprintf(f, ", wrote, paused %" PRIu32 " us", res->pause_us);
			else if (res->state == goal)
				fprintf(f, ", already %s, nothing written", proto_proc_state_name(goal));
			else
				fputs(", nothing written", f);
			if (verbose)
				fprintf(f, " (activeness check %" PRIu32 " us)", res->check_us);
		}
		if (verbose && res->message[0]) {
			fputs(": ", f);
			output_text(f, res->message);
		}
	}
	fputc('\n', f);
	if (!verbose)
		return;
	for (unsigned i = 0; i < res->nsites; i++) {
		const struct proto_site *s = &res->sites[i];

		fputs("    ", f);
		output_text(f, s->object[0] ? s->object : "(unnamed object)");
		fprintf(f, " 0x%" PRIx64 ": %s\n", s->address, proto_site_state_name(s->state));
	}
}

int output_result(const struct output *o, const struct proto_result *res)
{
	if (o->json)
		print_json(o->out, res);
	else
		print_human(o->out, res, o->verbose);
	if (fflush(o->out) != 0 || ferror(o->out))
		return -EIO;
	return 0;
}
