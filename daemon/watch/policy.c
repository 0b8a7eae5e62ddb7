// SPDX-License-Identifier: MIT
/*
 * The auto-guard policy (policy.h): INI text to validated rules.
 *
 * inih does the INI syntax (sections, "key = value", comments, a BOM):
 * a well-kept parser, packaged by Debian, instead of one more hand-written
 * tokenizer in a root daemon.  Debian builds it with its defaults, and two
 * of them shape this file: lines are read into a 200-byte buffer (a longer
 * one would be split silently into two "lines", so we refuse it first,
 * with its number), and the handler is not told line numbers (an error the
 * handler reports comes back from ini_parse_string() as the line; one
 * found at the end of a section is reported at its "[...]" header, found
 * again in the text).  Everything about meaning - which sections and keys
 * exist, their values, duplicates, a rule that selects nothing - is ours.
 */
#include <ctype.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <ini.h>

#include "facts.h"
#include "policy.h"

#define MAX_PATTERN 1024u   /* as PROTO_MAX_PATTERN: what a client could send */

/* The keys of a section (policy_rule.set bits). */
enum {
	KEY_ACTION = 1u << 0, KEY_AT_RISK = 1u << 1, KEY_ALL = 1u << 2, KEY_USER = 1u << 3,
	KEY_EXE = 1u << 4, KEY_CMDLINE = 1u << 5, KEY_CGROUP = 1u << 6, KEY_UNIT = 1u << 7,
	KEY_MAPS = 1u << 8, KEY_INTERVAL = 1u << 9, KEY_EXEC_EVENTS = 1u << 10,
	KEY_BACKTRACES = 1u << 11,
};

static const struct {
	const char *name;
	unsigned bit;
} keys[] = {
	{ "action", KEY_ACTION }, { "at-risk", KEY_AT_RISK }, { "all", KEY_ALL },
	{ "user", KEY_USER },     { "exe", KEY_EXE },         { "cmdline", KEY_CMDLINE },
	{ "cgroup", KEY_CGROUP }, { "unit", KEY_UNIT },       { "maps", KEY_MAPS },
	{ "interval", KEY_INTERVAL }, { "exec-events", KEY_EXEC_EVENTS },
	{ "backtraces", KEY_BACKTRACES },
};

/* What one file's parse carries between inih's calls. */
struct parse {
	struct policy *p;
	const char *file;
	const char *text;             /* the file's text, NUL-terminated */
	policy_user_fn users;
	struct policy_error *err;
	bool failed;
	char section[POLICY_NAME_MAX + 16];   /* the section the last key was in */
	struct policy_rule *cur;      /* its rule, NULL in [watch] */
	unsigned watch_set;           /* keys given in [watch] in this file */
};

__attribute__((format(printf, 3, 4)))
static int fail(struct parse *ps, unsigned line, const char *fmt, ...)
{
	va_list ap;

	if (ps->failed)
		return 0;   /* the first error is the one reported */
	ps->failed = true;
	snprintf(ps->err->file, sizeof(ps->err->file), "%s", ps->file);
	ps->err->line = line;
	va_start(ap, fmt);
	vsnprintf(ps->err->text, sizeof(ps->err->text), fmt, ap);
	va_end(ap);
	return 0;   /* inih: stop here and return this line */
}

/* The line of "[section]" in the text (1-based), 0 if it is not found. */
static unsigned header_line(const char *text, const char *section)
{
	size_t slen = strlen(section);
	unsigned line = 1;

	for (const char *p = text; *p; line++) {
		const char *end = strchr(p, '\n');
		const char *q = p;

		if (p == text && !strncmp(q, "\xef\xbb\xbf", 3))
			q += 3;   /* a byte order mark, which inih skips */

		while (isspace((unsigned char)*q) && *q != '\n')
			q++;   /* as inih's lskip(): isspace(), \v and \f included */
		if (*q == '[' && !strncmp(q + 1, section, slen) && q[1 + slen] == ']')
			return line;
		if (!end)
			break;
		p = end + 1;
	}
	return 0;
}

/* A "[...]" header whose name inih would cut (ini.c's MAX_SECTION). */
static bool header_too_long(const char *p, const char *end)
{
	const char *close;

	while (p < end && isspace((unsigned char)*p))
		p++;
	if (p == end || *p != '[')
		return false;
	close = memchr(p, ']', (size_t)(end - p));
	return (size_t)((close ? close : end) - p - 1) > POLICY_MAX_SECTION;
}

/* Lines inih would split or cut, and NUL bytes it would stop at: refused with their number. */
static int check_lines(struct parse *ps, const char *buf, size_t len)
{
	const char *start = buf;
	unsigned line = 1;
	size_t col = 0;

	/* inih skips a UTF-8 byte order mark; the header after it is what counts. */
	if (len >= 3 && !memcmp(buf, "\xef\xbb\xbf", 3))
		start += 3;

	for (size_t i = 0; i <= len; i++) {
		if (i == len || buf[i] == '\n') {
			if (header_too_long(start, buf + i))
				return fail(ps, line, "section header longer than %u bytes (names: at most "
					    "%u)", POLICY_MAX_SECTION, POLICY_NAME_MAX), -EINVAL;
			line++;
			col = 0;
			start = buf + i + 1;
		} else if (buf[i] == '\0') {
			return fail(ps, line, "a NUL byte: this is not a text file"), -EINVAL;
		} else if (++col > POLICY_MAX_LINE) {
			return fail(ps, line, "line longer than %u bytes", POLICY_MAX_LINE), -EINVAL;
		}
	}
	return 0;
}

static bool name_valid(const char *name)
{
	size_t n = strlen(name);

	if (n == 0 || n > POLICY_NAME_MAX)
		return false;
	for (const char *c = name; *c; c++)
		if (!((*c >= 'a' && *c <= 'z') || (*c >= 'A' && *c <= 'Z') ||
		      (*c >= '0' && *c <= '9') || *c == '.' || *c == '_' || *c == '-'))
			return false;
	return true;
}

static int parse_bool(const char *v, bool *ret)
{
	if (!strcmp(v, "yes") || !strcmp(v, "true") || !strcmp(v, "1")) {
		*ret = true;
		return 0;
	}
	if (!strcmp(v, "no") || !strcmp(v, "false") || !strcmp(v, "0")) {
		*ret = false;
		return 0;
	}
	return -EINVAL;
}

/* "1s", "500ms", "2" (seconds), "1.5s": whole milliseconds in range. */
static int parse_interval(const char *v, unsigned *ret)
{
	char *end;
	double x;

	errno = 0;
	x = strtod(v, &end);
	if (end == v || errno || !(x >= 0))
		return -EINVAL;
	if (!strcmp(end, "ms"))
		;
	else if (!strcmp(end, "s") || !*end)
		x *= 1000.0;
	else
		return -EINVAL;
	if (x < POLICY_MIN_INTERVAL_MS || x > POLICY_MAX_INTERVAL_MS)
		return -ERANGE;
	*ret = (unsigned)x;
	return 0;
}

static int parse_user(struct parse *ps, const char *v, uid_t *ret)
{
	char *end;
	unsigned long n;

	if (*v >= '0' && *v <= '9') {
		errno = 0;
		n = strtoul(v, &end, 10);
		if (*end || errno || n >= (uid_t)-1)
			return -EINVAL;
		*ret = (uid_t)n;
		return 0;
	}
	return ps->users ? ps->users(v, ret) : -ENOENT;
}

static int set_string(char **dst, const char *v)
{
	*dst = strdup(v);
	return *dst ? 0 : -ENOMEM;
}

/* A finished section: is it a rule that can work? */
static int finish_rule(struct parse *ps)
{
	struct policy_rule *r = ps->cur;
	unsigned line;

	ps->cur = NULL;
	if (!r)
		return 0;
	line = r->line;
	if (!r->exclude && !r->have_action)
		return fail(ps, line, "rule %s has no action (write: action = guard)", r->name), -EINVAL;
	if (!(r->set & (KEY_AT_RISK | KEY_ALL | KEY_USER | KEY_EXE | KEY_CMDLINE | KEY_CGROUP |
			KEY_UNIT | KEY_MAPS)) || (!r->sel.all && !r->sel.have_uid && !r->exe &&
						  !r->cmdline && !r->cgroup && !r->maps))
		return fail(ps, line, "%s %s selects nothing: give at least one of at-risk = yes, "
			    "all = yes, user, exe, cmdline, cgroup, unit, maps",
			    r->exclude ? "exclusion" : "rule", r->name), -EINVAL;
	r->sel.exe = r->exe;
	r->sel.cmdline = r->cmdline;
	r->sel.cgroup = r->cgroup;
	r->sel.maps = r->maps;
	if (!r->exclude)
		ps->p->nguard++;
	return 0;
}

static const struct policy_rule *find_rule(const struct policy *p, const char *name)
{
	for (size_t i = 0; i < p->nrules; i++)
		if (!strcmp(p->rules[i].name, name))
			return &p->rules[i];
	return NULL;
}

/* A new section: "watch", "rule NAME" or "exclude NAME". */
static int start_section(struct parse *ps, const char *section)
{
	unsigned line = header_line(ps->text, section);
	const char *name = NULL;
	const struct policy_rule *dup;
	struct policy_rule *r, *rules;
	bool exclude = false;

	if (finish_rule(ps) < 0)
		return -EINVAL;
	snprintf(ps->section, sizeof(ps->section), "%s", section);
	if (!strcmp(section, "watch"))
		return 0;
	if (!strncmp(section, "rule ", 5)) {
		name = section + 5;
	} else if (!strncmp(section, "exclude ", 8)) {
		name = section + 8;
		exclude = true;
	} else {
		return fail(ps, line, "unknown section [%s] (known: [watch], [rule NAME], "
			    "[exclude NAME])", section), -EINVAL;
	}
	while (*name == ' ')
		name++;
	if (!name_valid(name))
		return fail(ps, line, "bad name \"%s\": 1 to %u of A-Z a-z 0-9 . _ -", name,
			    POLICY_NAME_MAX), -EINVAL;
	dup = find_rule(ps->p, name);
	/* Line 0: inih reports the key's line (header_line() would find the first header). */
	if (dup)
		return fail(ps, 0, "%s is defined already, at %s:%u", name, dup->file,
			    dup->line), -EINVAL;
	if (ps->p->nrules >= POLICY_MAX_RULES)
		return fail(ps, line, "more than %u rules and exclusions", POLICY_MAX_RULES), -EINVAL;
	rules = realloc(ps->p->rules, (ps->p->nrules + 1) * sizeof(*rules));
	if (!rules)
		return -ENOMEM;
	ps->p->rules = rules;
	r = &rules[ps->p->nrules++];
	memset(r, 0, sizeof(*r));
	snprintf(r->name, sizeof(r->name), "%s", name);
	snprintf(r->file, sizeof(r->file), "%s", ps->file);
	r->line = line;
	r->exclude = exclude;
	ps->cur = r;
	return 0;
}

static unsigned key_bit(const char *name)
{
	for (size_t i = 0; i < sizeof(keys) / sizeof(keys[0]); i++)
		if (!strcmp(keys[i].name, name))
			return keys[i].bit;
	return 0;
}

/* One "key = value" of a rule or an exclusion. */
static int rule_key(struct parse *ps, unsigned bit, const char *name, const char *v)
{
	struct policy_rule *r = ps->cur;
	bool b;

	if (r->set & bit)
		return fail(ps, 0, "%s is given twice in %s", name, r->name);
	r->set |= bit;
	if (bit != KEY_ACTION && bit != KEY_AT_RISK && bit != KEY_ALL && bit != KEY_USER &&
	    bit != KEY_BACKTRACES && (!*v || strlen(v) > MAX_PATTERN))
		return fail(ps, 0, "%s must be 1 to %u bytes", name, MAX_PATTERN);
	switch (bit) {
	case KEY_ACTION:
		if (r->exclude)
			return fail(ps, 0, "an exclusion has no action: it only keeps processes out");
		if (strcmp(v, "guard"))
			return fail(ps, 0, "unknown action \"%s\" (the only one is guard)", v);
		r->have_action = true;
		return 1;
	case KEY_BACKTRACES:
		if (r->exclude)
			return fail(ps, 0, "an exclusion guards nothing: backtraces belongs in a rule");
		if (!strcmp(v, "segment"))
			r->walk = true;
		else if (strcmp(v, "empty"))
			return fail(ps, 0, "backtraces must be empty or segment, not \"%s\"", v);
		return 1;
	case KEY_AT_RISK:
	case KEY_ALL:
		if (parse_bool(v, &b) < 0)
			return fail(ps, 0, "%s must be yes or no, not \"%s\"", name, v);
		if (bit == KEY_AT_RISK)
			r->at_risk = b;
		r->sel.all |= b;
		return 1;
	case KEY_USER:
		if (parse_user(ps, v, &r->sel.uid) < 0)
			return fail(ps, 0, "no such user \"%s\"", v);
		r->sel.have_uid = true;
		return set_string(&r->user, v) < 0 ? 0 : 1;
	case KEY_EXE:
		return set_string(&r->exe, v) < 0 ? 0 : 1;
	case KEY_CMDLINE:
		return set_string(&r->cmdline, v) < 0 ? 0 : 1;
	case KEY_MAPS:
		return set_string(&r->maps, v) < 0 ? 0 : 1;
	case KEY_CGROUP:
	case KEY_UNIT:
		if (r->cgroup)
			return fail(ps, 0, "cgroup and unit are both given in %s: give one", r->name);
		if (bit == KEY_CGROUP && v[0] != '/')
			return fail(ps, 0, "cgroup must be a path starting with '/', as in "
				    "/proc/PID/cgroup");
		if (bit == KEY_UNIT) {
			char path[MAX_PATTERN + 1];

			/* The daemon cannot ask systemctl (its sandbox): system units live here. */
			if (strchr(v, '/') || strlen(v) + sizeof("/system.slice/") > sizeof(path))
				return fail(ps, 0, "unit must be a unit name such as train.service; "
					    "for one outside system.slice give its cgroup");
			snprintf(path, sizeof(path), "/system.slice/%s", v);
			return set_string(&r->cgroup, path) < 0 ? 0 : 1;
		}
		return set_string(&r->cgroup, v) < 0 ? 0 : 1;
	}
	return fail(ps, 0, "%s does not belong in [%s]", name, ps->section);
}

/* inih's handler: nonzero to go on, 0 for an error at this line. */
static int handler(void *user, const char *section, const char *name, const char *value)
{
	struct parse *ps = user;
	unsigned bit;

	if (ps->failed)
		return 0;
	if (!*section)
		return fail(ps, 0, "%s is outside any section; start with [watch] or [rule NAME]",
			    name);
	if (strcmp(section, ps->section) && start_section(ps, section) < 0)
		return 0;
	bit = key_bit(name);
	if (!bit)
		return fail(ps, 0, "unknown key \"%s\"", name);
	if (!ps->cur) {
		if (bit != KEY_INTERVAL && bit != KEY_EXEC_EVENTS)
			return fail(ps, 0, "%s does not belong in [watch] (only interval and exec-events)",
				    name);
		if (ps->watch_set & bit)
			return fail(ps, 0, "%s is given twice", name);
		ps->watch_set |= bit;
		if (bit == KEY_EXEC_EVENTS) {
			if (parse_bool(value, &ps->p->exec_events) < 0)
				return fail(ps, 0, "exec-events must be yes or no, not \"%s\"", value);
			return 1;
		}
		if (parse_interval(value, &ps->p->interval_ms) < 0)
			return fail(ps, 0, "interval must be %ums..%us, as 500ms or 2s, not \"%s\"",
				    POLICY_MIN_INTERVAL_MS, POLICY_MAX_INTERVAL_MS / 1000u, value);
		return 1;
	}
	if (bit == KEY_INTERVAL || bit == KEY_EXEC_EVENTS)
		return fail(ps, 0, "%s belongs in [watch]", name);
	return rule_key(ps, bit, name, value);
}

struct policy *policy_new(void)
{
	struct policy *p = calloc(1, sizeof(*p));

	if (p) {
		p->interval_ms = POLICY_DEFAULT_INTERVAL_MS;
		p->exec_events = true;
		p->refs = 1;
	}
	return p;
}

int policy_parse_buf(struct policy *p, const char *file, const char *buf, size_t len,
		     policy_user_fn users, struct policy_error *err)
{
	struct parse ps = { .p = p, .file = file, .users = users, .err = err };
	char *text;
	int r;

	memset(err, 0, sizeof(*err));
	r = check_lines(&ps, buf, len);
	if (r < 0)
		return r;
	text = malloc(len + 1);
	if (!text)
		return -ENOMEM;
	memcpy(text, buf, len);
	text[len] = '\0';
	ps.text = text;
	r = ini_parse_string(text, handler, &ps);
	if (r == 0 && !ps.failed)
		finish_rule(&ps);
	else if (r > 0 && !ps.failed)
		fail(&ps, (unsigned)r, "not INI: expected [section], key = value or a comment");
	else if (r > 0 && ps.err->line == 0)
		ps.err->line = (unsigned)r;
	free(text);
	if (r == -2)
		return -ENOMEM;
	return ps.failed ? -EINVAL : 0;
}

void policy_error_format(const struct policy_error *err, char *buf, size_t len)
{
	if (err->line)
		snprintf(buf, len, "%s:%u: %s", err->file, err->line, err->text);
	else
		snprintf(buf, len, "%s: %s", err->file, err->text);
}

/* ---------------------------------------------------------- matching -- */

unsigned policy_facts_needed(const struct policy *p)
{
	unsigned need = FACTS_UID;

	for (size_t i = 0; i < p->nrules; i++)
		need |= facts_needed(&p->rules[i].sel, p->rules[i].at_risk);
	return need;
}

static bool rule_matches(const struct policy_rule *r, const struct select_proc *proc, int *risk)
{
	if (!select_match(&r->sel, proc))
		return false;
	if (!r->at_risk)
		return true;
	if (*risk < 0)
		*risk = select_risk(proc->objects, proc->nobjects, NULL, NULL) != SELECT_RISK_NONE;
	return *risk > 0;
}

const struct policy_rule *policy_match(const struct policy *p, const struct select_proc *proc)
{
	const struct policy_rule *take = NULL;
	int risk = -1;   /* not computed yet: it walks every object */

	for (size_t i = 0; i < p->nrules; i++) {
		const struct policy_rule *r = &p->rules[i];

		if (r->exclude && rule_matches(r, proc, &risk))
			return NULL;
		if (!r->exclude && !take && rule_matches(r, proc, &risk))
			take = r;
	}
	return take;
}

void policy_describe(const struct policy_rule *r, char *buf, size_t len)
{
	size_t off = 0;

#define ADD(...) do { \
		if (off < len) \
			off += (size_t)snprintf(buf + off, len - off, __VA_ARGS__); \
	} while (0)
	buf[0] = '\0';
	if (r->at_risk)
		ADD("at-risk");
	else if (r->sel.all)
		ADD("all");
	if (r->user)
		ADD("%suser=%s", off ? " " : "", r->user);
	if (r->exe)
		ADD("%sexe=%s", off ? " " : "", r->exe);
	if (r->cmdline)
		ADD("%scmdline=%s", off ? " " : "", r->cmdline);
	if (r->cgroup)
		ADD("%scgroup=%s", off ? " " : "", r->cgroup);
	if (r->maps)
		ADD("%smaps=%s", off ? " " : "", r->maps);
	if (r->walk)
		ADD("%sbacktraces=segment", off ? " " : "");
#undef ADD
}

struct policy *policy_ref(struct policy *p)
{
	p->refs++;
	return p;
}

void policy_unref(struct policy *p)
{
	if (!p || --p->refs > 0)
		return;
	for (size_t i = 0; i < p->nrules; i++) {
		struct policy_rule *r = &p->rules[i];

		free(r->exe);
		free(r->cmdline);
		free(r->cgroup);
		free(r->maps);
		free(r->user);
	}
	free(p->rules);
	free(p);
}
