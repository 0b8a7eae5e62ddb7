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
 * a command line whatever its user typed, so every format escapes them
 * (proto/escape.h says what).
 */
#include <errno.h>
#include <inttypes.h>
#include <pwd.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/types.h>

#include "output.h"
#include "escape.h"

/* Both formats escape through proto/escape.c: one rule for client and daemon. */
static void write_escaped(FILE *f, const char *s, enum escape_style style)
{
	size_t n = strlen(s);

	for (size_t i = 0; i < n;) {
		char one[ESCAPE_MAX + 1];

		i += escape_next(s + i, n - i, style, one);
		fputs(one, f);
	}
}

void output_json_string(FILE *f, const char *s)
{
	write_escaped(f, s, ESCAPE_JSON);
}

void output_text(FILE *f, const char *s)
{
	write_escaped(f, s, ESCAPE_TEXT);
}

static bool changes_bytes(unsigned action)
{
	return action == PROTO_ACTION_GUARD || action == PROTO_ACTION_UNGUARD ||
	       action == PROTO_ACTION_AT_EXEC;
}

/* at-exec's first RESULT: the process is followed, nothing done yet. */
static bool is_armed(const struct proto_result *res)
{
	return res->error == BTG_OK && (res->flags & PROTO_RESULT_ARMED);
}

/* The detail to show: the daemon's own, else the code's standard sentence. */
static const char *detail(const struct proto_result *res)
{
	if (res->message[0] || res->error == BTG_OK)
		return res->message;
	return proto_error_text(res->error);
}

bool output_vanished(const struct proto_result *res)
{
	return res->error == BTG_ERR_GONE || res->error == BTG_ERR_ZOMBIE ||
	       res->error == BTG_ERR_NOPROC || res->error == BTG_ERR_REUSED ||
	       res->error == BTG_ERR_EXEC;
}

/* The warnings, one short name and one sentence each. */
static const struct {
	unsigned bit;
	const char *name;
	const char *text;
} warnings[] = {
	{ PROTO_WARN_CPP_STACKTRACES, "torch-cpp-stacktraces",
	  "TORCH_SHOW_CPP_STACKTRACES is set: torch gathers C++ stacks with its own unwinder "
	  "(torch::CapturedTraceback), which the backtrace() guard does not cover" },
	{ PROTO_WARN_DIST_DEBUG, "torch-distributed-debug",
	  "TORCH_DISTRIBUTED_DEBUG=DETAIL: torch gathers C++ stacks with its own unwinder "
	  "(torch::CapturedTraceback), which the backtrace() guard does not cover" },
	{ PROTO_WARN_MOUNT_NS, "other-mount-namespace",
	  "the process is in another mount namespace than the node's (a container): its "
	  "object paths are as it sees them, not as this host does" },
	{ PROTO_WARN_TORN, "torn",
	  "a site is torn: a breakpoint (a uprobe, a debugger) sits inside the bytes the guard "
	  "changed, or a uprobe removed from there wrote the file's bytes back; a call to "
	  "backtrace() may crash, or run unguarded: run btguardctl guard to repair it "
	  "(SECURITY.md)" },
	{ PROTO_WARN_NO_WALK, "backtraces-emptied",
	  "asked to keep backtraces (--backtraces=segment), a site got the empty stub instead: "
	  "backtrace() returns no frames there (the message says why)" },
};

static const char *file_name(const char *path)
{
	const char *slash = strrchr(path, '/');

	return slash ? slash + 1 : path;
}

/* The user's name as this machine knows it, or NULL. */
static const char *user_name(uint32_t uid)
{
	static uint32_t cached_uid = PROTO_UID_UNKNOWN;
	static char cached[64];
	struct passwd *pw;

	if (uid == PROTO_UID_UNKNOWN)
		return NULL;
	if (uid == cached_uid)
		return cached[0] ? cached : NULL;
	pw = getpwuid((uid_t)uid);
	cached_uid = uid;
	snprintf(cached, sizeof(cached), "%s", pw ? pw->pw_name : "");
	return cached[0] ? cached : NULL;
}

static void print_json(FILE *f, const struct proto_result *res)
{
	bool ok = res->error == BTG_OK;
	const char *user = user_name(res->uid);
	bool first = true;

	fprintf(f, "{\"pid\":%" PRId32 ",\"ok\":%s,\"action\":\"%s\",\"state\":",
		res->pid, ok ? "true" : "false", proto_action_name(res->action));
	if (res->state == PROTO_PROC_UNKNOWN)
		fputs("null", f);
	else
		fprintf(f, "\"%s\"", proto_proc_state_name(res->state));
	fprintf(f, ",\"wrote\":%s", res->flags & PROTO_RESULT_WROTE ? "true" : "false");
	if (res->action == PROTO_ACTION_AT_EXEC)
		fprintf(f, ",\"armed\":%s", is_armed(res) ? "true" : "false");
	if (!ok)
		fprintf(f, ",\"error\":\"%s\"", proto_error_name(res->error));
	fputs(",\"message\":\"", f);
	output_json_string(f, detail(res));
	fputs("\",\"uid\":", f);
	if (res->uid == PROTO_UID_UNKNOWN)
		fputs("null", f);
	else
		fprintf(f, "%" PRIu32, res->uid);
	fputs(",\"user\":", f);
	if (user) {
		fputc('"', f);
		output_json_string(f, user);
		fputc('"', f);
	} else {
		fputs("null", f);
	}
	fputs(",\"command\":\"", f);
	output_json_string(f, res->command);
	fputs("\",\"risk\":", f);
	if (res->risk == PROTO_RISK_UNKNOWN)
		fputs("null", f);
	else
		fprintf(f, "\"%s\"", proto_risk_name(res->risk));
	fputs(",\"risk_reason\":\"", f);
	output_json_string(f, res->reason);
	fputs("\",\"warnings\":[", f);
	for (size_t i = 0; i < sizeof(warnings) / sizeof(warnings[0]); i++) {
		if (!(res->warnings & warnings[i].bit))
			continue;
		fprintf(f, "%s{\"name\":\"%s\",\"text\":\"", first ? "" : ",", warnings[i].name);
		output_json_string(f, warnings[i].text);
		fputs("\"}", f);
		first = false;
	}
	fputs("],\"sites\":[", f);
	for (unsigned i = 0; i < res->nsites; i++) {
		const struct proto_site *s = &res->sites[i];

		fprintf(f, "%s{\"object\":\"", i ? "," : "");
		output_json_string(f, s->object);
		fprintf(f, "\",\"address\":\"0x%" PRIx64 "\",\"state\":\"%s\",\"bound\":%s,\"breakpoint\":%s",
			s->address, proto_site_state_name(s->state),
			s->flags & PROTO_SITE_BOUND ? "true" : "false",
			s->flags & PROTO_SITE_BREAKPOINT ? "true" : "false");
		if (s->state == PROTO_SITE_GUARDED)
			fprintf(f, ",\"backtraces\":\"%s\"",
				s->flags & PROTO_SITE_WALKS ? "segment" : "empty");
		fputc('}', f);
	}
	fputc(']', f);
	if (changes_bytes(res->action))
		fprintf(f, ",\"pause_us\":%" PRIu32 ",\"check_us\":%" PRIu32,
			res->pause_us, res->check_us);
	fputs("}\n", f);
}

/*
 * What "partial" means for this process: which definitions are still
 * original, and whether callers that look backtrace() up by name reach a
 * guarded one.
 */
static void print_partial(FILE *f, const struct proto_result *res)
{
	const struct proto_site *bound = NULL;
	bool first = true;

	for (unsigned i = 0; i < res->nsites; i++)
		if (res->sites[i].flags & PROTO_SITE_BOUND)
			bound = &res->sites[i];
	if (bound) {
		fprintf(f, "; callers reach the %s one in ",
			proto_site_state_name(bound->state));
		output_text(f, file_name(bound->object));
	}
	for (unsigned state = PROTO_SITE_ORIGINAL; state <= PROTO_SITE_TORN;
	     state += PROTO_SITE_TORN - PROTO_SITE_ORIGINAL) {
		first = true;
		for (unsigned i = 0; i < res->nsites; i++) {
			if (res->sites[i].state != state)
				continue;
			fprintf(f, "%s", first ? "; " : ", ");
			if (first)
				fprintf(f, "%s: ", proto_site_state_name(state));
			output_text(f, file_name(res->sites[i].object));
			first = false;
		}
	}
}

static void print_warnings(FILE *f, const struct proto_result *res, const char *indent)
{
	for (size_t i = 0; i < sizeof(warnings) / sizeof(warnings[0]); i++)
		if (res->warnings & warnings[i].bit)
			fprintf(f, "%swarning: %s\n", indent, warnings[i].text);
}

static void print_sites(FILE *f, const struct proto_result *res)
{
	for (unsigned i = 0; i < res->nsites; i++) {
		const struct proto_site *s = &res->sites[i];

		fputs("    ", f);
		output_text(f, s->object[0] ? s->object : "(unnamed object)");
		fprintf(f, " 0x%" PRIx64 ": %s%s%s%s\n", s->address, proto_site_state_name(s->state),
			s->flags & PROTO_SITE_WALKS ? " (backtraces walk the segment)" : "",
			s->flags & PROTO_SITE_BOUND ? " (reached by name)" : "",
			!(s->flags & PROTO_SITE_BREAKPOINT) ? "" :
			s->state == PROTO_SITE_GUARDED ?
			" (a breakpoint on its entry: a uprobe or a debugger)" :
			" (a breakpoint: a uprobe or a debugger)");
	}
}

/* How many guarded sites keep backtraces by the segment walk: "; segment walk" when all do. */
static void print_form(FILE *f, const struct proto_result *res)
{
	unsigned walks = 0, guarded = 0;

	for (unsigned i = 0; i < res->nsites; i++) {
		if (res->sites[i].state != PROTO_SITE_GUARDED)
			continue;
		guarded++;
		walks += (res->sites[i].flags & PROTO_SITE_WALKS) != 0;
	}
	if (walks && walks == guarded)
		fputs("; segment walk", f);
	else if (walks)
		fprintf(f, "; segment walk at %u of %u guarded", walks, guarded);
}

static void print_human(FILE *f, const struct proto_result *res, bool verbose)
{
	fprintf(f, "%" PRId32 ": ", res->pid);
	if (is_armed(res)) {
		fputs("armed, following it through its next exec\n", f);
		return;
	}
	if (res->error != BTG_OK) {
		fprintf(f, "error: %s: ", proto_error_name(res->error));
		output_text(f, detail(res));
	} else {
		/* The state the action aims for, to say "already guarded". */
		unsigned goal = res->action == PROTO_ACTION_UNGUARD ? PROTO_PROC_UNGUARDED
								    : PROTO_PROC_GUARDED;

		fprintf(f, "%s (%u site%s", proto_proc_state_name(res->state),
			(unsigned)res->nsites, res->nsites == 1 ? "" : "s");
		if (res->state == PROTO_PROC_PARTIAL)
			print_partial(f, res);
		print_form(f, res);
		fputc(')', f);
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
		if (res->risk == PROTO_RISK_AT_RISK)
			fputs(", AT RISK", f);
		/* at-exec says when: at the exec, or why only then. */
		if ((verbose || res->action == PROTO_ACTION_AT_EXEC) && res->message[0]) {
			fputs(": ", f);
			output_text(f, res->message);
		}
	}
	fputc('\n', f);
	print_warnings(f, res, "    ");
	if (!verbose)
		return;
	if (res->reason[0]) {
		fputs("    risk: ", f);
		output_text(f, res->reason);
		fputc('\n', f);
	}
	print_sites(f, res);
}

/* --------------------------------------------------------- the report -- */

#define TABLE_COMMAND_WIDTH 60

/*
 * cut is the first bytes of whole; where the cut split a UTF-8 character,
 * ends cut before it, so a long command line is shortened by whole
 * characters and never shows the cut's halves as invalid bytes.
 */
static void cut_at_character(char *cut, const char *whole)
{
	size_t n = strlen(cut);

	if (whole[n] == '\0')
		return;
	while (n > 0 && ((unsigned char)whole[n] & 0xc0) == 0x80)
		n--;
	cut[n] = '\0';
}

static void print_row(struct output *o, const struct proto_result *res)
{
	FILE *f = o->out;
	const char *user = user_name(res->uid);
	const char *risk = res->risk == PROTO_RISK_AT_RISK ? "AT-RISK" :
			   res->risk == PROTO_RISK_COVERED ? "covered" : "-";
	char cmd[TABLE_COMMAND_WIDTH + 1];

	if (!o->header_done) {
		fprintf(f, "%8s  %-12s %-10s %-8s %s\n", "PID", "USER", "STATE", "RISK", "COMMAND");
		o->header_done = true;
	}
	fprintf(f, "%8" PRId32 "  ", res->pid);
	if (user)
		fprintf(f, "%-12.12s ", user);
	else if (res->uid != PROTO_UID_UNKNOWN)
		fprintf(f, "%-12" PRIu32 " ", res->uid);
	else
		fprintf(f, "%-12s ", "?");
	if (res->error != BTG_OK)
		fprintf(f, "%-10s %-8s ", "error", "?");
	else
		fprintf(f, "%-10s %-8s ", proto_proc_state_name(res->state), risk);
	snprintf(cmd, sizeof(cmd), "%s", res->command);
	cut_at_character(cmd, res->command);
	output_text(f, cmd);
	fputc('\n', f);
	if (res->error != BTG_OK) {
		fprintf(f, "%10s%s: ", "", proto_error_name(res->error));
		output_text(f, detail(res));
		fputc('\n', f);
	}
	print_warnings(f, res, "          ");
	if (o->verbose) {
		if (res->reason[0]) {
			fputs("          risk: ", f);
			output_text(f, res->reason);
			fputc('\n', f);
		}
		print_sites(f, res);
	}
}

static void count_error(struct output_counts *c, uint32_t code)
{
	for (unsigned i = 0; i < c->nerrors; i++) {
		if (c->errors[i].code == code) {
			c->errors[i].n++;
			return;
		}
	}
	if (c->nerrors == sizeof(c->errors) / sizeof(c->errors[0])) {
		c->errors_other++;
		return;
	}
	c->errors[c->nerrors].code = code;
	c->errors[c->nerrors++].n = 1;
}

static void count(struct output_counts *c, const struct proto_result *res, bool selecting)
{
	if (res->error != BTG_OK && selecting && output_vanished(res)) {
		c->vanished++;
		return;
	}
	if (res->error != BTG_OK) {
		c->failed++;
		count_error(c, res->error);
		if (proto_error_is_shortage(res->error))
			c->short_of_resources++;
		else
			c->unreadable_other++;
	} else
		c->processes++;
	if (res->state <= PROTO_PROC_UNKNOWN)
		c->state[res->state]++;
	if (res->risk == PROTO_RISK_AT_RISK)
		c->at_risk++;
	else if (res->risk == PROTO_RISK_COVERED)
		c->covered++;
	if (res->warnings)
		c->warned++;
}

/*
 * Everything written so far handed to the kernel: 0, or -errno of the
 * write that failed (ENOSPC on a full disk), so the caller can say it.
 */
static int flushed(FILE *f)
{
	errno = 0;
	if (fflush(f) != 0)
		return errno ? -errno : -EIO;
	return ferror(f) ? -EIO : 0;
}

int output_result(struct output *o, const struct proto_result *res)
{
	if (!is_armed(res))
		count(&o->counts, res, o->selecting);
	switch (o->format) {
	case OUTPUT_JSON:
		print_json(o->out, res);
		break;
	case OUTPUT_TABLE:
		/* A process that exited between selection and its turn is no news. */
		if (!(res->error != BTG_OK && output_vanished(res)))
			print_row(o, res);
		break;
	case OUTPUT_PROMETHEUS:
	case OUTPUT_NAGIOS:
		break;
	case OUTPUT_LINES:
		if (o->selecting && res->error != BTG_OK && output_vanished(res))
			break;
		print_human(o->out, res, o->verbose);
		break;
	}
	return flushed(o->out);
}

static void print_prometheus(FILE *f, const struct output *o, time_t t_s)
{
	const struct output_counts *c = &o->counts;
	static const unsigned states[] = { PROTO_PROC_GUARDED, PROTO_PROC_PARTIAL,
					   PROTO_PROC_UNGUARDED, PROTO_PROC_FOREIGN, PROTO_PROC_NONE };

	fputs("# HELP btguard_processes Processes by the state of their backtrace() definitions.\n"
	      "# TYPE btguard_processes gauge\n", f);
	for (size_t i = 0; i < sizeof(states) / sizeof(states[0]); i++)
		fprintf(f, "btguard_processes{state=\"%s\"} %u\n", proto_proc_state_name(states[i]),
			c->state[states[i]]);
	fprintf(f, "# HELP btguard_processes_at_risk Processes mapping torch's c10 and a "
		"stack-switching library whose backtrace() is not guarded.\n"
		"# TYPE btguard_processes_at_risk gauge\n"
		"btguard_processes_at_risk %u\n"
		"# HELP btguard_processes_covered Processes mapping torch's c10 and a "
		"stack-switching library whose backtrace() is guarded.\n"
		"# TYPE btguard_processes_covered gauge\n"
		"btguard_processes_covered %u\n"
		"# HELP btguard_processes_warned Processes where the guard does not cover every "
		"unwinder (see btguardctl status --verbose).\n"
		"# TYPE btguard_processes_warned gauge\n"
		"btguard_processes_warned %u\n"
		"# HELP btguard_status_errors Processes whose state could not be read.\n"
		"# TYPE btguard_status_errors gauge\n"
		"btguard_status_errors %u\n",
		c->at_risk, c->covered, c->warned, c->failed);
	/* By kind: the error names are the protocol's (proto_error_name), a
	 * fixed vocabulary, so they need no label escaping. */
	fputs("# HELP btguard_status_errors_by_kind Processes whose state could not be read, "
	      "by error.\n"
	      "# TYPE btguard_status_errors_by_kind gauge\n", f);
	for (unsigned i = 0; i < c->nerrors; i++)
		fprintf(f, "btguard_status_errors_by_kind{kind=\"%s\"} %u\n",
			proto_error_name(c->errors[i].code), c->errors[i].n);
	if (c->errors_other)
		fprintf(f, "btguard_status_errors_by_kind{kind=\"other\"} %u\n", c->errors_other);
	fprintf(f, "# HELP btguard_status_errors_by_cause Processes whose state could not be read: "
		"because the daemon ran short of descriptors or memory (it cannot tell their "
		"state), or for another reason.\n"
		"# TYPE btguard_status_errors_by_cause gauge\n"
		"btguard_status_errors_by_cause{cause=\"daemon-short\"} %u\n"
		"btguard_status_errors_by_cause{cause=\"other\"} %u\n",
		c->short_of_resources, c->unreadable_other);
	fprintf(f, "# HELP btguard_policy_loaded 1 when the daemon's policy in force is what its "
		"files say, 0 when a file could not be loaded (btguardctl policy says why).\n"
		"# TYPE btguard_policy_loaded gauge\n"
		"btguard_policy_loaded %d\n", !o->policy_problem);
	fprintf(f, "# HELP btguard_report_timestamp_seconds When btguardctl made this report "
		"from the daemon's answer.\n"
		"# TYPE btguard_report_timestamp_seconds gauge\n"
		"btguard_report_timestamp_seconds %lld\n", (long long)t_s);
}

static void print_threshold(FILE *f, uint32_t t)
{
	if (t != OUTPUT_NO_THRESHOLD)
		fprintf(f, "%" PRIu32, t);
}

/*
 * A Nagios line's text: escaped as any text, and '|' shown as \x7c too,
 * since the first '|' of the line starts the performance data
 * (monitoring-plugins guidelines) and a path or a message may hold one.
 */
static void nagios_text(FILE *f, const char *s)
{
	size_t n = strlen(s);

	for (size_t i = 0; i < n;) {
		char one[ESCAPE_MAX + 1];

		i += escape_next(s + i, n - i, ESCAPE_TEXT, one);
		fputs(strcmp(one, "|") ? one : "\\x7c", f);
	}
}

/* The state count n reaches against the "more than N" thresholds warn and crit. */
static enum output_nagios_state over(unsigned n, uint32_t warn, uint32_t crit)
{
	if (crit != OUTPUT_NO_THRESHOLD && n > crit)
		return OUTPUT_NAGIOS_CRITICAL;
	if (warn != OUTPUT_NO_THRESHOLD && n > warn)
		return OUTPUT_NAGIOS_WARNING;
	return OUTPUT_NAGIOS_OK;
}

/*
 * The monitoring-plugins convention: "SERVICE STATE - text | perfdata".
 * The state is the worst of: the at-risk count against --warning and
 * --critical (more than N is the plain "N" range of the guidelines); the
 * count of processes unreadable for reasons of their own against
 * --warning-unreadable and --critical-unreadable (none by default: PID 1
 * is unreadable even to root on some nodes); WARNING for a policy not in
 * force.  A daemon that ran short of descriptors or memory while looking
 * could not tell what it did not read: UNKNOWN, unless what it did read
 * is already CRITICAL.
 */
static enum output_nagios_state print_nagios(FILE *f, const struct output *o)
{
	static const char *const names[] = { "OK", "WARNING", "CRITICAL", "UNKNOWN" };
	const struct output_counts *c = &o->counts;
	enum output_nagios_state st, u;

	st = over(c->at_risk, o->warning, o->critical);
	u = over(c->unreadable_other, o->warning_unreadable, o->critical_unreadable);
	if (u > st)
		st = u;
	if (o->policy_problem && st < OUTPUT_NAGIOS_WARNING)
		st = OUTPUT_NAGIOS_WARNING;
	if (c->short_of_resources && st != OUTPUT_NAGIOS_CRITICAL)
		st = OUTPUT_NAGIOS_UNKNOWN;
	fprintf(f, "BTGUARD %s - ", names[st]);
	if (c->short_of_resources)
		fprintf(f, "the daemon ran short of descriptors or memory and could not read "
			"%u process%s; ", c->short_of_resources,
			c->short_of_resources == 1 ? "" : "es");
	fprintf(f, "%u process%s at risk of %u", c->at_risk, c->at_risk == 1 ? "" : "es",
		c->processes);
	if (c->unreadable_other)
		fprintf(f, ", %u unreadable", c->unreadable_other);
	if (o->policy_problem) {
		fputs("; policy: ", f);
		nagios_text(f, o->policy_text);
	}
	fprintf(f, " | at_risk=%u;", c->at_risk);
	print_threshold(f, o->warning);
	fputc(';', f);
	print_threshold(f, o->critical);
	fprintf(f, ";0; unreadable=%u;", c->unreadable_other);
	print_threshold(f, o->warning_unreadable);
	fputc(';', f);
	print_threshold(f, o->critical_unreadable);
	fprintf(f, ";0; guarded=%u partial=%u unguarded=%u foreign=%u none=%u covered=%u "
		"warned=%u errors=%u short=%u policy_loaded=%d\n", c->state[PROTO_PROC_GUARDED],
		c->state[PROTO_PROC_PARTIAL], c->state[PROTO_PROC_UNGUARDED],
		c->state[PROTO_PROC_FOREIGN], c->state[PROTO_PROC_NONE], c->covered, c->warned,
		c->failed, c->short_of_resources, !o->policy_problem);
	return st;
}


void output_nagios_unknown(FILE *f, const char *why)
{
	fputs("BTGUARD UNKNOWN - ", f);
	nagios_text(f, why);
	fputc('\n', f);
	fflush(f);
}

int output_rule(struct output *o, const struct proto_rule *r)
{
	FILE *f = o->out;

	if (o->format == OUTPUT_PROMETHEUS) {
		/* Exclusions guard nothing.  Rule names are [A-Za-z0-9._-]
		 * (the protocol's rule), so the label needs no escaping. */
		if (r->flags & PROTO_RULE_EXCLUDE)
			return 0;
		if (!o->rules_header) {
			fputs("# HELP btguard_rule_guards_total Guards each auto-guard rule made "
			      "that wrote, since the daemon started.\n"
			      "# TYPE btguard_rule_guards_total counter\n", f);
			o->rules_header = true;
		}
		fprintf(f, "btguard_rule_guards_total{rule=\"%s\"} %" PRIu32 "\n", r->name, r->hits);
	} else if (o->format == OUTPUT_JSON) {
		fputs("{\"rule\": \"", f);
		output_json_string(f, r->name);
		fprintf(f, "\", \"kind\": \"%s\", \"match\": \"",
			r->flags & PROTO_RULE_EXCLUDE ? "exclude" : "guard");
		output_json_string(f, r->match);
		fprintf(f, "\", \"hits\": %u, \"last_pids\": [", r->hits);
		for (unsigned i = 0; i < r->npids; i++)
			fprintf(f, "%s%d", i ? ", " : "", r->pids[i]);
		fputs("]}\n", f);
	} else {
		output_text(f, r->name);
		fputs(r->flags & PROTO_RULE_EXCLUDE ? ": exclude " : ": guard ", f);
		output_text(f, r->match);
		if (!(r->flags & PROTO_RULE_EXCLUDE)) {
			fprintf(f, ", %u hit%s", r->hits, r->hits == 1 ? "" : "s");
			for (unsigned i = 0; i < r->npids; i++)
				fprintf(f, "%s%d", i ? " " : " (last: ", r->pids[i]);
			if (r->npids)
				fputc(')', f);
		}
		fputc('\n', f);
	}
	return flushed(f);
}

int output_end(struct output *o)
{
	const struct output_counts *c = &o->counts;

	if (o->format == OUTPUT_PROMETHEUS)
		print_prometheus(o->out, o, o->made_s ? o->made_s : time(NULL));
	else if (o->format == OUTPUT_NAGIOS)
		o->nagios = print_nagios(o->out, o);
	else if (o->format != OUTPUT_JSON && o->selecting)
		fprintf(o->out, "%u process%s: %u guarded, %u partial, %u unguarded, %u at risk"
			"%s%.0u%s%s%.0u%s\n",
			c->processes, c->processes == 1 ? "" : "es", c->state[PROTO_PROC_GUARDED],
			c->state[PROTO_PROC_PARTIAL], c->state[PROTO_PROC_UNGUARDED], c->at_risk,
			c->failed ? ", " : "", c->failed, c->failed ? " failed" : "",
			c->vanished ? ", " : "", c->vanished, c->vanished ? " exited meanwhile" : "");
	return flushed(o->out);
}
