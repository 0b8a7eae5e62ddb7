// SPDX-License-Identifier: MIT
/*
 * btguardctl's command line: the options, the command, its PIDs or
 * selector, and every rule about which go together, checked before
 * anything is sent.  Each mistake gets its own message, and the exit
 * status says "usage" (UNKNOWN with --format=nagios).
 */
#include <errno.h>
#include <getopt.h>
#include <math.h>
#include <pwd.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/un.h>

#include "help.h"
#include "options.h"
#include "status.h"

#define VERSION BTGUARD_VERSION
#define DEFAULT_SOCKET PROTO_DEFAULT_SOCKET
#define DEFAULT_TIMEOUT_S 30.0
#define MAX_TIMEOUT_S 86400.0

/* --format=nagios is on the command line: usage errors are UNKNOWN too. */
static bool nagios_usage;

__attribute__((format(printf, 1, 2), noreturn))
static void usage_error(const char *fmt, ...)
{
	va_list ap;

	fputs(PROGRAM ": ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputs("\nTry '" PROGRAM " --help' for more information.\n", stderr);
	if (nagios_usage) {
		char why[512];

		va_start(ap, fmt);
		vsnprintf(why, sizeof(why), fmt, ap);
		va_end(ap);
		output_nagios_unknown(stdout, why);
		exit(OUTPUT_NAGIOS_UNKNOWN);
	}
	exit(EXIT_USAGE);
}

/* Decimal digits only: no sign, no spaces, no hex, no empty string. */
static int parse_decimal(const char *s, uint64_t max, uint64_t *ret)
{
	uint64_t v = 0;

	if (!*s)
		return -EINVAL;
	for (; *s; s++) {
		if (*s < '0' || *s > '9')
			return -EINVAL;
		v = v * 10 + (uint64_t)(*s - '0');
		if (v > max)
			return -ERANGE;
	}
	*ret = v;
	return 0;
}

static double parse_timeout(const char *s)
{
	char *end;
	double v;

	errno = 0;
	v = strtod(s, &end);
	if (errno || end == s || *end || !isfinite(v) || v <= 0 || v > MAX_TIMEOUT_S)
		usage_error("invalid --timeout '%s': expected seconds, more than 0 and at most %.0f",
			    s, MAX_TIMEOUT_S);
	return v;
}

static uint8_t parse_action(const char *s)
{
	if (!strcmp(s, "guard"))
		return PROTO_ACTION_GUARD;
	if (!strcmp(s, "unguard"))
		return PROTO_ACTION_UNGUARD;
	if (!strcmp(s, "status"))
		return PROTO_ACTION_STATUS;
	if (!strcmp(s, "policy"))
		return PROTO_ACTION_POLICY;
	if (!strcmp(s, "reload"))
		return PROTO_ACTION_RELOAD;
	usage_error("unknown command '%s': expected guard, unguard, status, run, policy or reload", s);
}

/* A selector pattern: not empty, within the wire limit, copied into dst. */
static void set_pattern(struct options *o, uint8_t field, char *dst, const char *opt,
			const char *value)
{
	if (o->req.sel.fields & field)
		usage_error("--%s given twice; all selectors must match, so give one", opt);
	if (!*value)
		usage_error("--%s needs a pattern", opt);
	if (strlen(value) > PROTO_MAX_PATTERN)
		usage_error("--%s pattern too long: %zu bytes, at most %u", opt, strlen(value),
			    PROTO_MAX_PATTERN);
	strcpy(dst, value);
	o->req.sel.fields |= field;
}

static void set_user(struct options *o, const char *value)
{
	struct passwd *pw;
	uint64_t v;

	if (o->req.sel.fields & PROTO_SEL_UID)
		usage_error("--user given twice; all selectors must match, so give one");
	if (parse_decimal(value, UINT32_MAX - 1, &v) == 0) {
		o->req.sel.uid = (uint32_t)v;
	} else {
		pw = *value ? getpwnam(value) : NULL;
		if (!pw)
			usage_error("unknown user '%s': expected a user name or a number", value);
		o->req.sel.uid = (uint32_t)pw->pw_uid;
	}
	o->req.sel.fields |= PROTO_SEL_UID;
}

static enum output_format parse_format(const char *s)
{
	if (!strcmp(s, "lines"))
		return OUTPUT_LINES;
	if (!strcmp(s, "json"))
		return OUTPUT_JSON;
	if (!strcmp(s, "table"))
		return OUTPUT_TABLE;
	if (!strcmp(s, "prometheus"))
		return OUTPUT_PROMETHEUS;
	if (!strcmp(s, "nagios"))
		return OUTPUT_NAGIOS;
	usage_error("unknown --format '%s': expected lines, json, table, prometheus or nagios", s);
}

/* --warning/--critical[-unreadable] N: alert when more than N processes are at risk (unreadable). */
static uint32_t parse_threshold(const char *opt, const char *s)
{
	uint64_t v;

	if (parse_decimal(s, OUTPUT_NO_THRESHOLD - 1, &v) < 0)
		usage_error("invalid --%s '%s': expected a number of processes, 0 or more", opt, s);
	return (uint32_t)v;
}

/* guard --at-exec PID: one named process, followed through its next exec. */
static void check_at_exec(struct options *o)
{
	if (o->req.action != PROTO_ACTION_GUARD)
		usage_error("--at-exec goes with guard: guard --at-exec PID");
	if (o->out.selecting || o->req.npids != 1 || (o->req.flags & PROTO_FLAG_TREE))
		usage_error("--at-exec follows one process: name exactly one PID, without "
			    "--tree or a selector");
	o->req.action = PROTO_ACTION_AT_EXEC;
}

/* run [--] CMD [ARG]...: the command after the options (getopt stopped at "--"). */
static void parse_run(struct options *o, int n, char **cmd)
{
	if (n < 1)
		usage_error("missing command after 'run' (run -- CMD [ARG]...)");
	if (o->req.sel.fields || o->unit || o->slurm_arg || o->at_exec ||
	    (o->req.flags & PROTO_FLAG_TREE))
		usage_error("run starts its own process: no --at-exec, --tree or selector");
	if (o->out.format == OUTPUT_PROMETHEUS || o->out.format == OUTPUT_TABLE ||
	    o->out.format == OUTPUT_NAGIOS || o->output_path)
		usage_error("--format=%s and --output report states: use them with status",
			    o->out.format == OUTPUT_TABLE ? "table" :
			    o->out.format == OUTPUT_NAGIOS ? "nagios" : "prometheus");
	o->run_argv = cmd;
	o->req.action = PROTO_ACTION_AT_EXEC;
	o->req.npids = 1;   /* the child's, once it is forked */
	/* The command owns standard output: what btguardctl says goes to stderr. */
	o->out.out = stderr;
	o->child.go_fd = o->child.err_fd = -1;
}

/*
 * Leading ':' so a missing value and an unknown option can be told apart;
 * opterr 0 so options_parse()'s messages are the only ones.
 */
#define SHORTOPTS ":s:jvt:d:hV"

/*
 * Whether the command line asks for --format=nagios, read as getopt_long
 * reads it: "--format=nagios", "--format nagios", an abbreviation
 * ("--form nagios"), up to "--"; a value of another option ("-s --format")
 * is not one.  Nothing is said here: the real pass says what is wrong.
 */
static bool asks_for_nagios(int argc, char **argv, const char *shortopts,
			    const struct option *longopts, int format_opt)
{
	bool nagios = false;
	int c;

	opterr = 0;
	while ((c = getopt_long(argc, argv, shortopts, longopts, NULL)) != -1)
		if (c == format_opt && !strcmp(optarg, "nagios"))
			nagios = true;
	optind = 0;   /* glibc: the next getopt_long starts afresh */
	return nagios;
}

void options_parse(int argc, char **argv, struct options *o)
{
	enum { OPT_TREE = 0x100, OPT_BACKTRACES, OPT_ALL, OPT_AT_RISK, OPT_USER, OPT_EXE, OPT_CMDLINE,
	       OPT_CGROUP, OPT_UNIT, OPT_SLURM_JOB, OPT_MAPS, OPT_FORMAT, OPT_AT_EXEC,
	       OPT_WARNING, OPT_CRITICAL, OPT_WARNING_UNREADABLE, OPT_CRITICAL_UNREADABLE,
	       OPT_OUTPUT };
	static const struct option longopts[] = {
		{ "socket",   required_argument, NULL, 's' },
		{ "json",     no_argument,       NULL, 'j' },
		{ "format",   required_argument, NULL, OPT_FORMAT },
		{ "verbose",  no_argument,       NULL, 'v' },
		{ "timeout",  required_argument, NULL, 't' },
		{ "deadline", required_argument, NULL, 'd' },
		{ "tree",     no_argument,       NULL, OPT_TREE },
		{ "backtraces", required_argument, NULL, OPT_BACKTRACES },
		{ "all",      no_argument,       NULL, OPT_ALL },
		{ "at-risk",  no_argument,       NULL, OPT_AT_RISK },
		{ "user",     required_argument, NULL, OPT_USER },
		{ "exe",      required_argument, NULL, OPT_EXE },
		{ "cmdline",  required_argument, NULL, OPT_CMDLINE },
		{ "cgroup",   required_argument, NULL, OPT_CGROUP },
		{ "unit",     required_argument, NULL, OPT_UNIT },
		{ "slurm-job", required_argument, NULL, OPT_SLURM_JOB },
		{ "maps",     required_argument, NULL, OPT_MAPS },
		{ "at-exec",  no_argument,       NULL, OPT_AT_EXEC },
		{ "warning",  required_argument, NULL, OPT_WARNING },
		{ "critical", required_argument, NULL, OPT_CRITICAL },
		{ "warning-unreadable",  required_argument, NULL, OPT_WARNING_UNREADABLE },
		{ "critical-unreadable", required_argument, NULL, OPT_CRITICAL_UNREADABLE },
		{ "output",   required_argument, NULL, OPT_OUTPUT },
		{ "help",     no_argument,       NULL, 'h' },
		{ "version",  no_argument,       NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	struct proto_select *sel = &o->req.sel;
	const char *env = getenv("BTGUARD_SOCKET");
	uint64_t v;
	int c;

	/* Before any usage error can be said: with --format=nagios it is UNKNOWN. */
	nagios_usage = asks_for_nagios(argc, argv, SHORTOPTS, longopts, OPT_FORMAT);
	o->out.out = stdout;
	o->socket_path = env && *env ? env : DEFAULT_SOCKET;
	o->timeout_s = DEFAULT_TIMEOUT_S;
	/* By default any process at risk is critical and there is no warning. */
	o->out.warning = OUTPUT_NO_THRESHOLD;
	o->out.critical = 0;
	o->out.warning_unreadable = OUTPUT_NO_THRESHOLD;
	o->out.critical_unreadable = OUTPUT_NO_THRESHOLD;

	opterr = 0;
	while ((c = getopt_long(argc, argv, SHORTOPTS, longopts, NULL)) != -1) {
		switch (c) {
		case 's':
			if (!*optarg)
				usage_error("--socket needs a path");
			o->socket_path = optarg;
			break;
		case 'j':
			o->out.format = OUTPUT_JSON;
			o->format_given = true;
			break;
		case OPT_FORMAT:
			o->out.format = parse_format(optarg);
			o->format_given = true;
			break;
		case 'v':
			o->out.verbose = true;
			break;
		case 't':
			o->timeout_s = parse_timeout(optarg);
			break;
		case 'd':
			/* The action's own limit is checked once it is known. */
			if (parse_decimal(optarg, PROTO_MAX_FOLLOW_MS, &v) < 0 || v == 0)
				usage_error("invalid --deadline '%s': expected milliseconds, 1..%u "
					    "(1..%u with --at-exec and run)", optarg,
					    PROTO_MAX_DEADLINE_MS, PROTO_MAX_FOLLOW_MS);
			o->req.deadline_ms = (uint32_t)v;
			break;
		case OPT_BACKTRACES:
			if (!strcmp(optarg, "segment"))
				o->req.flags |= PROTO_FLAG_WALK;
			else if (!strcmp(optarg, "empty"))
				o->req.flags &= (uint8_t)~PROTO_FLAG_WALK;
			else
				usage_error("invalid --backtraces '%s': expected empty or segment",
					    optarg);
			o->backtraces_given = true;
			break;
		case OPT_TREE:
			o->req.flags |= PROTO_FLAG_TREE;
			break;
		case OPT_ALL:
			sel->fields |= PROTO_SEL_ALL;
			break;
		case OPT_AT_RISK:
			sel->fields |= PROTO_SEL_AT_RISK;
			break;
		case OPT_USER:
			set_user(o, optarg);
			break;
		case OPT_EXE:
			set_pattern(o, PROTO_SEL_EXE, sel->exe, "exe", optarg);
			break;
		case OPT_CMDLINE:
			set_pattern(o, PROTO_SEL_CMDLINE, sel->cmdline, "cmdline", optarg);
			break;
		case OPT_CGROUP:
			if (o->unit || o->slurm_arg)
				usage_error("--cgroup, --unit and --slurm-job each name a cgroup; give one");
			if (optarg[0] != '/')
				usage_error("invalid --cgroup '%s': a path as /proc/PID/cgroup writes "
					    "it, starting with '/'", optarg);
			set_pattern(o, PROTO_SEL_CGROUP, sel->cgroup, "cgroup", optarg);
			break;
		case OPT_UNIT:
			if ((sel->fields & PROTO_SEL_CGROUP) || o->unit || o->slurm_arg)
				usage_error("--cgroup, --unit and --slurm-job each name a cgroup; give one");
			if (!*optarg)
				usage_error("--unit needs a unit name");
			o->unit = optarg;
			break;
		case OPT_SLURM_JOB:
			if ((sel->fields & PROTO_SEL_CGROUP) || o->unit || o->slurm_arg)
				usage_error("--cgroup, --unit and --slurm-job each name a cgroup; give one");
			if (slurm_parse_job(optarg, &o->slurm_job) < 0)
				usage_error("invalid --slurm-job '%s': expected JOBID or JOBID.STEP, "
					    "STEP a number, batch, extern or interactive", optarg);
			o->slurm_arg = optarg;
			break;
		case OPT_MAPS:
			set_pattern(o, PROTO_SEL_MAPS, sel->maps, "maps", optarg);
			break;
		case OPT_AT_EXEC:
			o->at_exec = true;
			break;
		case OPT_WARNING:
			o->out.warning = parse_threshold("warning", optarg);
			o->thresholds_given = true;
			break;
		case OPT_CRITICAL:
			o->out.critical = parse_threshold("critical", optarg);
			o->thresholds_given = true;
			break;
		case OPT_WARNING_UNREADABLE:
			o->out.warning_unreadable = parse_threshold("warning-unreadable", optarg);
			o->thresholds_given = true;
			break;
		case OPT_CRITICAL_UNREADABLE:
			o->out.critical_unreadable = parse_threshold("critical-unreadable", optarg);
			o->thresholds_given = true;
			break;
		case OPT_OUTPUT:
			if (!*optarg)
				usage_error("--output needs a file name");
			if (strlen(optarg) + sizeof(".4294967295") > sizeof(o->output_tmp))
				usage_error("--output file name too long");
			o->output_path = optarg;
			break;
		case 'h':
			help_print();
			exit(EXIT_OK);
		case 'V':
			puts(PROGRAM " " VERSION);
			exit(EXIT_OK);
		case ':':
			/* Only the last argument can lack its value. */
			usage_error("option '%s' needs a value", argv[argc - 1]);
		default:
			/* optopt is 0 for an unknown long option, which is then
			 * the argument just consumed.  A negative PID lands here
			 * too, so say what PIDs look like. */
			if (!optopt)
				usage_error("unknown option '%s'", argv[optind - 1]);
			usage_error("unknown option '-%c'%s", optopt,
				    optopt >= '0' && optopt <= '9' ?
				    " (PIDs are positive decimal numbers)" : "");
		}
	}

	if (optind >= argc)
		usage_error("missing command: guard, unguard, status, run, policy or reload");
	if (!strcmp(argv[optind], "run")) {
		parse_run(o, argc - optind - 1, argv + optind + 1);
		goto out_socket;
	}
	o->req.action = parse_action(argv[optind++]);
	if (o->req.action == PROTO_ACTION_POLICY || o->req.action == PROTO_ACTION_RELOAD) {
		/* About the daemon: nothing to name or select, and no options that act. */
		if (optind < argc || sel->fields || o->unit || o->slurm_arg)
			usage_error("%s takes no PID or selector", proto_action_name(o->req.action));
		if (o->req.flags || o->req.deadline_ms)
			usage_error("%s takes neither --tree nor --deadline",
				    proto_action_name(o->req.action));
		if (o->out.format == OUTPUT_PROMETHEUS || o->out.format == OUTPUT_TABLE ||
		    o->out.format == OUTPUT_NAGIOS || o->output_path || o->thresholds_given)
			usage_error("%s prints lines or JSON", proto_action_name(o->req.action));
		goto out_socket;
	}
	o->out.selecting = sel->fields != 0 || o->unit || o->slurm_arg;
	if (optind >= argc && !o->out.selecting)
		usage_error("missing PID or selector after '%s' (e.g. %s --all)",
			    proto_action_name(o->req.action), proto_action_name(o->req.action));
	if (optind < argc && o->out.selecting)
		usage_error("name PIDs or select processes, not both (got '%s')", argv[optind]);
	if ((unsigned)(argc - optind) > PROTO_MAX_PIDS)
		usage_error("too many PIDs: %d, at most %u per request", argc - optind,
			    PROTO_MAX_PIDS);
	for (; optind < argc; optind++) {
		if (parse_decimal(argv[optind], INT32_MAX, &v) < 0 || v == 0)
			usage_error("invalid PID '%s': expected a decimal number from 1 to %d",
				    argv[optind], INT32_MAX);
		o->req.pids[o->req.npids++] = (int32_t)v;
	}
	if (o->backtraces_given && o->req.action != PROTO_ACTION_GUARD)
		usage_error("--backtraces chooses a guard's form: it goes with guard and run");
	if (o->at_exec)
		check_at_exec(o);
	if (o->out.format == OUTPUT_PROMETHEUS && o->req.action != PROTO_ACTION_STATUS)
		usage_error("--format=prometheus reports states: use it with status");
	if (o->out.format == OUTPUT_NAGIOS && o->req.action != PROTO_ACTION_STATUS)
		usage_error("--format=nagios reports states: use it with status");
	if (o->output_path && o->req.action != PROTO_ACTION_STATUS)
		usage_error("--output writes a report: use it with status");
	if (o->thresholds_given && o->out.format != OUTPUT_NAGIOS)
		usage_error("--warning, --critical and their -unreadable forms go with "
			    "--format=nagios");
	if (!o->format_given && o->out.selecting && o->req.action == PROTO_ACTION_STATUS)
		o->out.format = OUTPUT_TABLE;
out_socket:
	if (o->req.deadline_ms > proto_max_deadline_ms(o->req.action))
		usage_error("invalid --deadline '%u': expected milliseconds, 1..%u (1..%u with "
			    "--at-exec and run)", o->req.deadline_ms, PROTO_MAX_DEADLINE_MS,
			    PROTO_MAX_FOLLOW_MS);
	if (strlen(o->socket_path) >= sizeof(((struct sockaddr_un *)NULL)->sun_path))
		usage_error("socket path too long (at most %zu bytes): %s",
			    sizeof(((struct sockaddr_un *)NULL)->sun_path) - 1, o->socket_path);
}
