// SPDX-License-Identifier: MIT
/*
 * btguardctl: the command-line client of btguardd.  This file owns the
 * command line (options, PID parsing, --help, --version), the one
 * request/reply exchange with the daemon, and the exit status:
 *
 *   0  every process succeeded
 *   1  at least one process failed, the daemon refused the request, or the
 *      reply was cut off, malformed, or late (the daemon may have acted)
 *   2  usage error; nothing was sent
 *   3  the daemon could not be reached: connect or send failed, or it
 *      closed the connection without sending a byte
 *   4  status: at least one process is at risk (maps torch's c10 and a
 *      stack-switching library, and its backtrace() is not guarded)
 *
 * --format=nagios replaces these with the monitoring-plugins codes: 0 OK,
 * 1 WARNING, 2 CRITICAL, 3 UNKNOWN (no verdict, usage errors included).
 *
 * Socket I/O lives in conn.c, formatting in output.c.
 */
#include <errno.h>
#include <fcntl.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <pwd.h>
#include <sys/types.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "conn.h"
#include "output.h"
#include "run.h"
#include "slurm.h"

#define PROGRAM "btguardctl"
#define VERSION BTGUARD_VERSION
#define DEFAULT_SOCKET PROTO_DEFAULT_SOCKET
#define DEFAULT_TIMEOUT_S 30.0
#define MAX_TIMEOUT_S 86400.0

enum exit_status {
	EXIT_OK = 0,
	EXIT_FAILED = 1,
	EXIT_USAGE = 2,
	EXIT_UNREACHABLE = 3,
	EXIT_AT_RISK = 4,
};

/* --format=nagios is on the command line: usage errors are UNKNOWN too. */
static bool nagios_usage;
/* The last failure fail() reported, for the Nagios UNKNOWN line. */
static char last_failure[512];

struct options {
	const char *socket_path;
	double      timeout_s;
	const char *unit;           /* --unit: resolved to a cgroup before sending */
	const char *slurm_arg;      /* --slurm-job as given, for messages */
	struct slurm_job slurm_job; /* --slurm-job: resolved before sending */
	bool        format_given;
	bool        thresholds_given;  /* --warning or --critical */
	const char *output_path;    /* --output: written to a temporary file, then renamed */
	char        output_tmp[PATH_MAX];
	bool        ended;          /* the reply was complete and its report written */
	bool        rule_metrics;   /* the POLICY request after a Prometheus status */
	struct output out;
	struct proto_request req;   /* action, flags, deadline, PIDs or selector */
	bool        at_exec;        /* guard --at-exec PID */
	char      **run_argv;       /* run -- CMD [ARG]...: the command, NULL-terminated */
	struct run_child child;     /* run: the command's process */
};

static void print_help(void)
{
	fputs(
"Usage: " PROGRAM " [OPTION]... guard|unguard|status SELECTOR...\n"
"       " PROGRAM " [OPTION]... guard|unguard|status PID...\n"
"       " PROGRAM " [OPTION]... guard --at-exec PID\n"
"       " PROGRAM " [OPTION]... run -- CMD [ARG]...\n"
"       " PROGRAM " [OPTION]... policy|reload\n"
"\n"
"Ask btguardd to make glibc backtrace() return 0 frames in running processes\n"
"(guard), to restore it (unguard), or to report its state (status), without\n"
"restarting them. torch raising inside greenlet/gevent/eventlet code crashes\n"
"the process through backtrace(); a guarded process raises normally.\n"
"\n"
"A whole node at a glance:\n"
"  " PROGRAM " status --all              every process: a table and a summary\n"
"  " PROGRAM " guard --at-risk           guard every process at risk\n"
"  " PROGRAM " guard --unit train.service\n"
"  " PROGRAM " status --all --format=prometheus \\\n"
"      --output /var/lib/prometheus/node-exporter/btguard.prom\n"
"  " PROGRAM " status --all --format=nagios   a monitoring-plugins check\n"
"\n"
"Commands:\n"
"  guard     patch every loaded backtrace() definition to return 0. The daemon\n"
"            stops the process briefly, checks that no thread is executing or\n"
"            will return into the bytes it changes (retrying until the\n"
"            deadline), writes, verifies and resumes it. A process that is\n"
"            already guarded succeeds and nothing is written.\n"
"  unguard   put the original bytes back, with the same procedure.\n"
"  status    report without stopping anything: the state (guarded, unguarded,\n"
"            partial: some definitions guarded; foreign: bytes changed by\n"
"            something else; none: no backtrace() loaded) and the risk.\n"
"  policy    list the daemon's auto-guard rules (btguardd.conf(5)): what each\n"
"            matches, how many processes it guarded, the last of them\n"
"            (root only).  While the policy files are not in force (wrong\n"
"            at start-up, or the last reload failed) policy and status warn,\n"
"            and policy exits 1.\n"
"  reload    make the daemon read its policy again; if it is wrong, the\n"
"            error names the file and line and the old policy stays (root\n"
"            only).\n"
"  run -- CMD [ARG]...\n"
"            start CMD guarded from its first instruction: the daemon follows\n"
"            its process through the exec and guards the program before any\n"
"            of its code runs. Its output is CMD's; btguardctl's own lines go\n"
"            to stderr (failures always, the rest with --verbose). The exit\n"
"            status is CMD's (128+N if signal N killed it, 127 if it was not\n"
"            found); SIGINT, SIGTERM, SIGHUP, SIGQUIT, SIGUSR1, SIGUSR2 and\n"
"            SIGWINCH sent to btguardctl are passed on. If the daemon cannot\n"
"            follow it, CMD is not run.\n"
"\n"
"Selectors (the daemon resolves them; all given must match; a user other than\n"
"root selects only among processes it may act on):\n"
"      --all             every process\n"
"      --at-risk         processes at risk: they map torch's libc10 and a library\n"
"                        that switches C stacks (greenlet's _greenlet extension,\n"
"                        which gevent, eventlet and nnsight run on)\n"
"      --user=USER       real user, a name or a number\n"
"      --exe=GLOB        executable path; a GLOB without '/' matches its file name\n"
"      --cmdline=GLOB    the whole command line, arguments joined by spaces\n"
"      --cgroup=PATH     a cgroup subtree as /proc/PID/cgroup writes it, e.g.\n"
"                        /system.slice/slurmstepd.scope/job_42 (any hierarchy)\n"
"      --unit=NAME       a systemd unit's cgroup (asks systemctl for it)\n"
"      --slurm-job=JOBID[.STEP]\n"
"                        a Slurm job's (or step's) processes on this node: its\n"
"                        cgroup, found from the PIDs `scontrol listpids` names\n"
"                        (those PIDs themselves when the job has no cgroup)\n"
"      --maps=GLOB       maps an object whose path matches, e.g. '*libc10.so'\n"
"  Instead, PIDs: decimal numbers from 1 to 2147483647, at most 4096.\n"
"\n"
"Options:\n"
"  -s, --socket=PATH     daemon socket (default: $BTGUARD_SOCKET, else\n"
"                        " DEFAULT_SOCKET ")\n"
"  -j, --json            one JSON object per process per line (see below)\n"
"      --format=FORMAT   lines, json, table (the default for status with a\n"
"                        selector), prometheus (status only: counts per state\n"
"                        for node_exporter's textfile collector) or nagios\n"
"                        (status only: one monitoring-plugins line; exit 0 OK,\n"
"                        1 WARNING, 2 CRITICAL, 3 UNKNOWN)\n"
"      --output=FILE     status: write the report to FILE atomically (a\n"
"                        temporary file in its directory, then renamed)\n"
"      --warning=N       nagios: WARNING when more than N processes are at\n"
"                        risk (default: none)\n"
"      --critical=N      nagios: CRITICAL when more than N are at risk\n"
"                        (default 0: any process at risk is critical)\n"
"  -v, --verbose         also say why a process is at risk and list each\n"
"                        backtrace() definition (object, address, state)\n"
"  -t, --timeout=SECONDS limit for the whole exchange, fractions allowed\n"
"                        (default 30)\n"
"  -d, --deadline=MS     how long the daemon keeps retrying a busy process,\n"
"                        1..60000 milliseconds, per process (default 2000)\n"
"      --tree            also act on every descendant of each process, including\n"
"                        children forked while the parent was being patched\n"
"      --at-exec         guard: follow the one named process, which has one\n"
"                        thread and is about to exec (a launcher's child after\n"
"                        fork), through its next exec and guard the new program\n"
"                        before its own code runs; \"armed\" is printed once it\n"
"                        is followed, --deadline is how long to wait for the exec\n"
"                        (1..600000 ms; the daemon ends any follow 10 minutes\n"
"                        after the process started)\n"
"  -h, --help            show this help and exit\n"
"  -V, --version         show the version and exit\n"
"\n"
"Output:\n"
"  One line per process, also for failures, e.g.\n"
"    1234: guarded (1 site), wrote, paused 412 us\n"
"    1234: partial (2 sites; callers reach the guarded one in libc.so.6;\n"
"          original: libunwind.so.8)\n"
"    1235: error: busy: <detail>\n"
"  partial: the definition callers reach by name (the executable's, a preloaded\n"
"  library's, else glibc's) decides the risk; a library loaded later that\n"
"  brings its own backtrace(), like libunwind, stays original until guarded.\n"
"  With a selector, processes that exit before their turn are left out and a\n"
"  summary line ends the output:\n"
"    N processes: G guarded, P partial, U unguarded, R at risk\n"
"  With --json each line is an object with the keys pid, ok, action, state\n"
"  (null when not known), wrote, error (only when ok is false), message, uid,\n"
"  user, command, risk (\"none\", \"at-risk\", \"covered\" or null), risk_reason,\n"
"  warnings (list of {name, text}), sites (list of {object, address as\n"
"  \"0x...\", state, bound: whether callers reach it by name}), and for guard\n"
"  and unguard pause_us and check_us.\n"
"  Warnings: TORCH_SHOW_CPP_STACKTRACES=1 or TORCH_DISTRIBUTED_DEBUG=DETAIL in\n"
"  the process's environment (torch then also unwinds with its own unwinder,\n"
"  which the guard does not cover), and paths from another mount namespace.\n"
"\n"
"Environment:\n"
"  BTGUARD_SOCKET   socket path used when --socket is not given\n"
"  SLURMD_NODENAME  with --slurm-job: the node scontrol is asked about (set\n"
"                   in every Slurm task)\n"
"\n"
"Exit status:\n"
"  0  every process succeeded\n"
"  1  at least one process failed, the daemon refused the request, or its\n"
"     reply was cut off, malformed or did not arrive within --timeout\n"
"  2  usage error (nothing was sent)\n"
"  3  the daemon could not be reached (no socket, connection refused, or it\n"
"     hung up without answering)\n"
"  4  status: at least one process is at risk (whatever else happened)\n"
"\n"
"Examples:\n"
"  " PROGRAM " guard 1234                   guard one process\n"
"  " PROGRAM " --tree guard $(pgrep -o gunicorn)   a server and its workers\n"
"  " PROGRAM " status --all --json | jq -c 'select(.risk == \"at-risk\")'\n"
"  " PROGRAM " guard --slurm-job 42           a Slurm job's processes on this node\n"
"  " PROGRAM " --deadline 10000 guard 1234  keep retrying a busy process for 10 s\n"
"  " PROGRAM " unguard --user alice          restore real backtraces\n"
"  " PROGRAM " run -- python3 train.py      start a job already guarded\n"
"\n"
"Authorization: root may act on any process; other users only on their own\n"
"dumpable processes. More in btguardctl(1) and btguardd(8); the protocol is\n"
"PROTOCOL.md in the btguard documentation directory.\n",
	      stdout);
}

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
		va_start(ap, fmt);
		vsnprintf(last_failure, sizeof(last_failure), fmt, ap);
		va_end(ap);
		output_nagios_unknown(stdout, last_failure);
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

/* --warning/--critical N: alert when more than N processes are at risk. */
static uint32_t parse_threshold(const char *opt, const char *s)
{
	uint64_t v;

	if (parse_decimal(s, OUTPUT_NO_THRESHOLD - 1, &v) < 0)
		usage_error("invalid --%s '%s': expected a number of processes at risk, "
			    "0 or more", opt, s);
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

static void parse_args(int argc, char **argv, struct options *o)
{
	enum { OPT_TREE = 0x100, OPT_ALL, OPT_AT_RISK, OPT_USER, OPT_EXE, OPT_CMDLINE,
	       OPT_CGROUP, OPT_UNIT, OPT_SLURM_JOB, OPT_MAPS, OPT_FORMAT, OPT_AT_EXEC,
	       OPT_WARNING, OPT_CRITICAL, OPT_OUTPUT };
	static const struct option longopts[] = {
		{ "socket",   required_argument, NULL, 's' },
		{ "json",     no_argument,       NULL, 'j' },
		{ "format",   required_argument, NULL, OPT_FORMAT },
		{ "verbose",  no_argument,       NULL, 'v' },
		{ "timeout",  required_argument, NULL, 't' },
		{ "deadline", required_argument, NULL, 'd' },
		{ "tree",     no_argument,       NULL, OPT_TREE },
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
		{ "output",   required_argument, NULL, OPT_OUTPUT },
		{ "help",     no_argument,       NULL, 'h' },
		{ "version",  no_argument,       NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	struct proto_select *sel = &o->req.sel;
	const char *env = getenv("BTGUARD_SOCKET");
	uint64_t v;
	int c;

	o->socket_path = env && *env ? env : DEFAULT_SOCKET;
	o->timeout_s = DEFAULT_TIMEOUT_S;
	/* By default any process at risk is critical and there is no warning. */
	o->out.warning = OUTPUT_NO_THRESHOLD;
	o->out.critical = 0;

	/* Leading ':' so a missing value and an unknown option can be told
	 * apart; opterr 0 so the messages below are the only ones. */
	opterr = 0;
	while ((c = getopt_long(argc, argv, ":s:jvt:d:hV", longopts, NULL)) != -1) {
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
		case OPT_OUTPUT:
			if (!*optarg)
				usage_error("--output needs a file name");
			if (strlen(optarg) + sizeof(".4294967295") > sizeof(o->output_tmp))
				usage_error("--output file name too long");
			o->output_path = optarg;
			break;
		case 'h':
			print_help();
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
	if (o->at_exec)
		check_at_exec(o);
	if (o->out.format == OUTPUT_PROMETHEUS && o->req.action != PROTO_ACTION_STATUS)
		usage_error("--format=prometheus reports states: use it with status");
	if (o->out.format == OUTPUT_NAGIOS && o->req.action != PROTO_ACTION_STATUS)
		usage_error("--format=nagios reports states: use it with status");
	if (o->output_path && o->req.action != PROTO_ACTION_STATUS)
		usage_error("--output writes a report: use it with status");
	if (o->thresholds_given && o->out.format != OUTPUT_NAGIOS)
		usage_error("--warning and --critical go with --format=nagios");
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

/* The first failure of the exchange, already reported on stderr. */
__attribute__((format(printf, 2, 3)))
static int fail(int status, const char *fmt, ...)
{
	va_list ap;

	fflush(stdout);
	fputs(PROGRAM ": ", stderr);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
	va_start(ap, fmt);
	vsnprintf(last_failure, sizeof(last_failure), fmt, ap);
	va_end(ap);
	return status;
}

/*
 * The cgroup of a systemd unit, as systemd's manager knows it:
 * `systemctl show --property=ControlGroup --value -- UNIT`.  The path is
 * what /proc/PID/cgroup shows for the unit's processes, on a pure v2 host
 * and on a hybrid one alike.  Returns the exit status to fail with, or 0.
 */
static int unit_cgroup(const char *unit, char *out, size_t out_len)
{
	char *argv[] = { "systemctl", "show", "--property=ControlGroup", "--value", "--",
			 (char *)unit, NULL };
	size_t len = 0;
	int fds[2], status;
	pid_t pid;
	ssize_t n;

	if (pipe2(fds, O_CLOEXEC) < 0)
		return fail(EXIT_FAILED, "cannot run systemctl: %s", strerror(errno));
	fflush(NULL);
	pid = fork();
	if (pid < 0) {
		close(fds[0]);
		close(fds[1]);
		return fail(EXIT_FAILED, "cannot run systemctl: %s", strerror(errno));
	}
	if (pid == 0) {
		dup2(fds[1], STDOUT_FILENO);
		execvp(argv[0], argv);
		fprintf(stderr, PROGRAM ": cannot run systemctl: %s\n", strerror(errno));
		_exit(127);
	}
	close(fds[1]);
	while (len < out_len - 1 && (n = read(fds[0], out + len, out_len - 1 - len)) != 0) {
		if (n < 0 && errno == EINTR)
			continue;
		if (n < 0)
			break;
		len += (size_t)n;
	}
	close(fds[0]);
	while (waitpid(pid, &status, 0) < 0 && errno == EINTR)
		;
	out[len] = '\0';
	out[strcspn(out, "\n")] = '\0';
	if (!WIFEXITED(status) || WEXITSTATUS(status) != 0)
		return fail(EXIT_FAILED, "cannot ask systemd for the cgroup of unit '%s' "
			    "(systemctl failed; is systemd running here?)", unit);
	if (out[0] != '/')
		return fail(EXIT_FAILED, "unit '%s' has no control group: is it loaded and "
			    "running?", unit);
	return 0;
}

/*
 * --slurm-job: the job's cgroup into the selector, or, when the job has no
 * cgroup on this node (proctrack/linuxproc), the PIDs Slurm listed for it
 * (slurm.c says why that is safe).  Returns the exit status to fail with,
 * or 0.
 */
static int slurm_job_target(struct options *o)
{
	struct slurm_target t = {
		.cgroup = o->req.sel.cgroup, .cgroup_len = sizeof(o->req.sel.cgroup),
		.pids = o->req.pids, .max_pids = PROTO_MAX_PIDS,
	};
	int r = slurm_resolve(&o->slurm_job, &t,
			      conn_now_ns() + (uint64_t)(o->timeout_s * 1e9));

	switch (r) {
	case 0:
		break;
	case -ENOENT:
		return fail(EXIT_FAILED, "cannot run scontrol to find job %s: is Slurm installed "
			    "on this node?", o->slurm_arg);
	case -ETIMEDOUT:
		return fail(EXIT_FAILED, "scontrol listpids did not answer within %g s; nothing "
			    "was sent", o->timeout_s);
	case -ESRCH:
		return fail(EXIT_FAILED, "Slurm job %s has no processes on this node%s%s%s; "
			    "nothing was sent", o->slurm_arg, t.detail[0] ? " (scontrol: " : "",
			    t.detail, t.detail[0] ? ")" : "");
	case -E2BIG:
		return fail(EXIT_FAILED, "Slurm job %s has no cgroup on this node and more than "
			    "%u processes, more than one request may name", o->slurm_arg,
			    PROTO_MAX_PIDS);
	case -ENAMETOOLONG:
		return fail(EXIT_FAILED, "the cgroup of Slurm job %s is longer than %u bytes",
			    o->slurm_arg, PROTO_MAX_PATTERN);
	default:
		return fail(EXIT_FAILED, "cannot find Slurm job %s: %s", o->slurm_arg,
			    strerror(-r));
	}
	if (t.npids) {
		/* A request names PIDs or selects, never both. */
		if (o->req.sel.fields)
			return fail(EXIT_FAILED, "Slurm job %s has no cgroup on this node, so it "
				    "is its PIDs, which other selectors cannot narrow; nothing "
				    "was sent", o->slurm_arg);
		o->req.npids = (uint32_t)t.npids;
		if (o->out.verbose)
			fprintf(stderr, PROGRAM ": Slurm job %s has no cgroup on this node "
				"(proctrack/linuxproc?): acting on the %zu processes scontrol "
				"listed\n", o->slurm_arg, t.npids);
	} else {
		o->req.sel.fields |= PROTO_SEL_CGROUP;
	}
	return 0;
}

static const char *recv_error_text(int r)
{
	switch (r) {
	case -EPROTONOSUPPORT:
		return "the daemon speaks a different protocol version";
	case -EBADMSG:
		return "the daemon sent a malformed message";
	case -EMSGSIZE:
		return "the daemon sent a message over the size limit";
	}
	return strerror(-r);
}

/*
 * Reads RESULTs until DONE.  Returns the exit status; *nresults counts
 * what was printed, for the messages about a cut-off reply.
 */
static int read_replies(struct conn *c, struct options *o, unsigned *nresults)
{
	static uint8_t payload[PROTO_MAX_PAYLOAD];
	static struct proto_result res;
	static struct proto_rule rule;
	static char text[PROTO_MAX_MESSAGE + 1];
	struct output_counts *n = &o->out.counts;
	struct proto_header h;
	uint32_t count, code;
	bool policy_noticed = false;
	int r;

	for (;;) {
		r = conn_recv(c, &h, payload, sizeof(payload));
		if (r == -ENODATA && c->received == 0)
			return fail(EXIT_UNREACHABLE,
				    "the daemon at %s closed the connection without answering",
				    o->socket_path);
		if (r == -ENODATA || r == -EPIPE)
			return fail(EXIT_FAILED, "the daemon closed the connection after %u result%s, "
				    "before the end of the reply", *nresults, *nresults == 1 ? "" : "s");
		if (r == -ETIMEDOUT)
			return fail(EXIT_FAILED, "no complete reply from the daemon within %g s "
				    "(%u result%s received); the daemon may still be acting",
				    o->timeout_s, *nresults, *nresults == 1 ? "" : "s");
		if (r < 0)
			return fail(EXIT_FAILED, "reading the reply: %s", recv_error_text(r));

		switch (h.kind) {
		case PROTO_KIND_RESULT:
			if (proto_decode_result(payload, h.length, &res) < 0)
				return fail(EXIT_FAILED, "the daemon sent a malformed result");
			(*nresults)++;
			/* run: followed now, so its exec will be; let it go. */
			if (o->run_argv && res.error == BTG_OK && (res.flags & PROTO_RESULT_ARMED))
				run_go(&o->child);
			if (o->run_argv && !o->out.verbose && res.error == BTG_OK)
				break;   /* the command's output is what counts; failures are said */
			if (output_result(&o->out, &res) < 0)
				return fail(EXIT_FAILED, "writing to standard output: %s",
					    strerror(EIO));
			break;
		case PROTO_KIND_RULE:
			if (o->req.action != PROTO_ACTION_POLICY ||
			    proto_decode_rule(payload, h.length, &rule) < 0)
				return fail(EXIT_FAILED, "the daemon sent a malformed rule");
			(*nresults)++;
			if (output_rule(&o->out, &rule) < 0)
				return fail(EXIT_FAILED, "writing to standard output: %s",
					    strerror(EIO));
			break;
		case PROTO_KIND_NOTICE:
			/* The daemon runs without the policy its files say (btguardd.conf(5)). */
			if ((o->req.action != PROTO_ACTION_STATUS && o->req.action != PROTO_ACTION_POLICY) ||
			    *nresults || proto_decode_notice(payload, h.length, text, sizeof(text)) < 0)
				return fail(EXIT_FAILED, "the daemon sent a malformed notice");
			fflush(stdout);
			fputs(PROGRAM ": warning: ", stderr);
			output_text(stderr, text);
			fputc('\n', stderr);
			if (o->req.action == PROTO_ACTION_POLICY) {
				policy_noticed = true;
				if (o->out.format == OUTPUT_JSON) {
					fputs("{\"policy_error\": \"", stdout);
					output_json_string(stdout, text);
					fputs("\"}\n", stdout);
				}
			}
			break;
		case PROTO_KIND_DONE:
			if (proto_decode_done(payload, h.length, &count) < 0)
				return fail(EXIT_FAILED, "the daemon sent a malformed end of reply");
			if (o->req.action == PROTO_ACTION_RELOAD) {
				/* DONE's count: the rules now in force. */
				if (o->out.format == OUTPUT_JSON)
					printf("{\"reloaded\": true, \"rules\": %" PRIu32 "}\n", count);
				else
					printf("policy reloaded: %" PRIu32 " rule%s\n", count,
					       count == 1 ? "" : "s");
				return EXIT_OK;
			}
			if (o->req.action == PROTO_ACTION_SWEPT) {
				/* DONE's count: when the last sweep ended; 0, none. */
				if (count)
					fprintf(o->out.out, "# HELP btguard_last_sweep_timestamp_seconds "
						"When the daemon's last sweep of its policy ended.\n"
						"# TYPE btguard_last_sweep_timestamp_seconds gauge\n"
						"btguard_last_sweep_timestamp_seconds %" PRIu32 "\n",
						count);
				return EXIT_OK;
			}
			if (o->req.action == PROTO_ACTION_POLICY && count == *nresults) {
				if (!count && o->out.format == OUTPUT_LINES)
					puts("no policy rules");
				/* The rules shown are not the files': monitoring must see it. */
				return policy_noticed ? EXIT_FAILED : EXIT_OK;
			}
			if (count != *nresults)
				return fail(EXIT_FAILED, "the daemon announced %" PRIu32
					    " results but sent %u", count, *nresults);
			if (output_end(&o->out) < 0)
				return fail(EXIT_FAILED, "writing to standard output: %s",
					    strerror(EIO));
			o->ended = true;
			if (o->out.format == OUTPUT_NAGIOS)
				return (int)o->out.nagios;
			/* Monitoring asks "is anything at risk?" first. */
			if (o->req.action == PROTO_ACTION_STATUS && n->at_risk)
				return EXIT_AT_RISK;
			return n->failed ? EXIT_FAILED : EXIT_OK;
		case PROTO_KIND_ERROR:
			if (proto_decode_error(payload, h.length, &code, text, sizeof(text)) < 0)
				return fail(EXIT_FAILED, "the daemon sent a malformed error");
			/* The policy is root's: anyone else's report has no rule counts.
			 * A daemon older than SWEPT refuses it as malformed: no time. */
			if (o->rule_metrics && (code == BTG_ERR_DENIED ||
						(code == BTG_ERR_PROTO &&
						 o->req.action == PROTO_ACTION_SWEPT)))
				return EXIT_OK;
			fflush(stdout);
			fprintf(stderr, PROGRAM ": daemon refused the request: %s: ",
				proto_error_name(code));
			output_text(stderr, text[0] ? text : proto_error_text(code));
			fputc('\n', stderr);
			snprintf(last_failure, sizeof(last_failure), "daemon refused the request: "
				 "%s: %s", proto_error_name(code), text[0] ? text : proto_error_text(code));
			return EXIT_FAILED;
		default:
			return fail(EXIT_FAILED, "the daemon sent an unexpected message (kind %u)",
				    (unsigned)h.kind);
		}
	}
}

/* Sends the request and reads the whole reply: the exit status. */
static int exchange(struct options *o)
{
	static uint8_t request[PROTO_HEADER_SIZE + PROTO_MAX_PAYLOAD];
	struct conn c;
	unsigned nresults = 0;
	int len, r, status;

	len = proto_encode_request(&o->req, request, sizeof(request));
	if (len < 0)   /* parse_args enforces every limit the encoder checks */
		return fail(EXIT_USAGE, "cannot encode the request: %s", strerror(-len));

	r = conn_open(&c, o->socket_path, conn_now_ns() + (uint64_t)(o->timeout_s * 1e9));
	if (r == -ETIMEDOUT)
		return fail(EXIT_UNREACHABLE, "cannot connect to %s: the daemon did not accept "
			    "the connection within %g s (is btguardd overloaded?)",
			    o->socket_path, o->timeout_s);
	if (r < 0)
		return fail(EXIT_UNREACHABLE, "cannot connect to %s: %s (is btguardd running?)",
			    o->socket_path, strerror(-r));

	r = conn_send(&c, request, (size_t)len);
	if (r < 0) {
		conn_close(&c);
		return fail(EXIT_UNREACHABLE, "cannot send the request to %s: %s",
			    o->socket_path, r == -ETIMEDOUT ? "timed out" : strerror(-r));
	}

	status = read_replies(&c, o, &nresults);
	conn_close(&c);
	if (fflush(stdout) != 0 && status == EXIT_OK)
		status = fail(EXIT_FAILED, "writing to standard output failed");
	return status;
}

/*
 * --output FILE: the report goes to FILE.PID in FILE's directory, created
 * new, then renamed over FILE once it is complete and on disk, so a reader
 * (node_exporter's textfile collector, which reads only *.prom) sees the
 * old report or the new one, never half of one.  Returns the exit status
 * to fail with, or 0.
 */
static int output_open(struct options *o)
{
	int fd;

	snprintf(o->output_tmp, sizeof(o->output_tmp), "%s.%ld", o->output_path,
		 (long)getpid());
	fd = open(o->output_tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	if (fd < 0)
		return fail(EXIT_FAILED, "cannot create %s: %s", o->output_tmp, strerror(errno));
	o->out.out = fdopen(fd, "w");
	if (!o->out.out) {
		close(fd);
		unlink(o->output_tmp);
		return fail(EXIT_FAILED, "cannot write %s: %s", o->output_tmp, strerror(errno));
	}
	return 0;
}

/* Renames a complete report over FILE; anything else leaves FILE as it was. */
static int output_close(struct options *o, int status)
{
	bool ok = o->ended && fflush(o->out.out) == 0 && !ferror(o->out.out) &&
		  fsync(fileno(o->out.out)) == 0;
	int saved = errno;

	if (fclose(o->out.out) != 0)
		ok = false;
	o->out.out = stdout;
	if (ok && rename(o->output_tmp, o->output_path) == 0)
		return status;
	if (ok)
		saved = errno;
	unlink(o->output_tmp);
	if (!o->ended)
		return status;   /* already said why */
	return fail(o->out.format == OUTPUT_NAGIOS ? OUTPUT_NAGIOS_UNKNOWN : EXIT_FAILED,
		    "cannot write %s: %s", o->output_path, strerror(saved));
}

/*
 * run: the command's child is followed by the daemon, then let go to exec;
 * btguardctl ends with the command's status.  A child the daemon could
 * not follow is never let go: nothing runs, and the exchange's status says
 * why.
 */
static int run(struct options *o)
{
	int r = run_spawn(o->run_argv, &o->child), status;

	if (r < 0)
		return fail(EXIT_FAILED, "cannot start %s: %s", o->run_argv[0], strerror(-r));
	o->req.pids[0] = (int32_t)o->child.pid;
	status = exchange(o);
	if (o->child.go_fd >= 0)
		fprintf(stderr, PROGRAM ": %s was not run: the daemon did not follow its process\n",
			o->run_argv[0]);
	r = run_wait(&o->child, o->run_argv[0]);
	return r < 0 ? (status ? status : EXIT_FAILED) : r;
}

/*
 * status --format=prometheus: the guards by rule come from a second
 * request, POLICY, after a complete status reply.  Only root may ask for
 * the policy; for anyone else the report has no rule counts.  When it
 * fails otherwise, the report is not complete: with --output the old one
 * stays.
 */
static int rule_metrics(struct options *o, int status)
{
	int r;

	if (o->out.format != OUTPUT_PROMETHEUS || !o->ended)
		return status;
	memset(&o->req, 0, sizeof(o->req));
	o->req.action = PROTO_ACTION_POLICY;
	o->rule_metrics = true;
	r = exchange(o);
	if (r == EXIT_OK) {
		o->req.action = PROTO_ACTION_SWEPT;
		r = exchange(o);
	}
	if (r == EXIT_OK)
		return status;
	o->ended = false;
	return r;
}

/* A request that reports (or acts): the selector resolved, then the exchange. */
static int report(struct options *o)
{
	int status;

	if (o->unit) {
		status = unit_cgroup(o->unit, o->req.sel.cgroup, sizeof(o->req.sel.cgroup));
		if (status)
			return status;
		o->req.sel.fields |= PROTO_SEL_CGROUP;
	}
	if (o->slurm_arg) {
		status = slurm_job_target(o);
		if (status)
			return status;
	}
	if (o->output_path) {
		status = output_open(o);
		if (status)
			return status;
		o->out.now = time(NULL);
		return output_close(o, rule_metrics(o, exchange(o)));
	}
	return rule_metrics(o, exchange(o));
}

int main(int argc, char **argv)
{
	static struct options o;
	int status;

	o.out.out = stdout;
	for (int i = 1; i < argc && strcmp(argv[i], "--"); i++)
		if (!strcmp(argv[i], "--format=nagios") ||
		    (!strcmp(argv[i], "--format") && i + 1 < argc && !strcmp(argv[i + 1], "nagios")))
			nagios_usage = true;
	parse_args(argc, argv, &o);
	if (o.run_argv)
		return run(&o);
	status = report(&o);
	if (o.out.format == OUTPUT_NAGIOS && !o.ended) {
		/* No verdict: whatever went wrong, the plugin's answer is UNKNOWN. */
		output_nagios_unknown(stdout, last_failure[0] ? last_failure : "no reply");
		return OUTPUT_NAGIOS_UNKNOWN;
	}
	return status;
}
