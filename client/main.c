// SPDX-License-Identifier: MIT
/*
 * btguardctl: the command-line client of btguardd.  This file owns the
 * command line (options, PID parsing, --help, --version), the one
 * request/reply exchange with the daemon, and the exit status:
 *
 *   0  every PID succeeded
 *   1  at least one PID failed, the daemon refused the request, or the
 *      reply was cut off, malformed, or late (the daemon may have acted)
 *   2  usage error; nothing was sent
 *   3  the daemon could not be reached: connect or send failed, or it
 *      closed the connection without sending a byte
 *
 * Socket I/O lives in conn.c, formatting in output.c.
 */
#include <errno.h>
#include <getopt.h>
#include <inttypes.h>
#include <limits.h>
#include <math.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/un.h>

#include "conn.h"
#include "output.h"

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
};

struct options {
	const char *socket_path;
	double      timeout_s;
	struct output out;
	struct proto_request req;   /* action, flags, deadline, PIDs */
};

static void print_help(void)
{
	fputs(
"Usage: " PROGRAM " [OPTION]... guard|unguard|status PID...\n"
"\n"
"Ask btguardd to make glibc backtrace() return 0 frames in running processes\n"
"(guard), to restore it (unguard), or to report its state (status), without\n"
"restarting them.\n"
"\n"
"Commands:\n"
"  guard PID...     patch every loaded backtrace() definition in each process\n"
"                   to return 0. The daemon stops the process briefly, checks\n"
"                   that no thread is executing or will return into the bytes\n"
"                   it changes (retrying until the deadline), writes, verifies\n"
"                   and resumes it. A process that is already guarded\n"
"                   succeeds and nothing is written.\n"
"  unguard PID...   put the original bytes back, with the same procedure. A\n"
"                   process that is not guarded succeeds, nothing written.\n"
"  status PID...    report the state without stopping the process: guarded,\n"
"                   unguarded, partial (some definitions guarded), foreign\n"
"                   (bytes changed by something else) or none (no\n"
"                   backtrace() loaded).\n"
"\n"
"PIDs are decimal numbers from 1 to 2147483647, at most 4096 per request.\n"
"Results are printed in request order as they arrive.\n"
"\n"
"Options:\n"
"  -s, --socket=PATH     daemon socket (default: $BTGUARD_SOCKET, else\n"
"                        " DEFAULT_SOCKET ")\n"
"  -j, --json            one JSON object per PID per line (see below)\n"
"  -v, --verbose         also list each backtrace() definition (object, address,\n"
"                        state) and the time spent on the activeness check\n"
"  -t, --timeout=SECONDS limit for the whole exchange, fractions allowed\n"
"                        (default 30)\n"
"  -d, --deadline=MS     how long the daemon keeps retrying a busy process,\n"
"                        1..60000 milliseconds, per PID (default: the daemon's,\n"
"                        2000)\n"
"      --tree            also act on every current descendant of each PID\n"
"  -h, --help            show this help and exit\n"
"  -V, --version         show the version and exit\n"
"\n"
"Output:\n"
"  One line per PID on standard output, also for failures, e.g.\n"
"    1234: guarded (1 site), wrote, paused 412 us\n"
"    1234: guarded (1 site), already guarded, nothing written\n"
"    1235: error: busy: <detail>\n"
"  With --json each line is an object with the keys pid (number), ok (bool),\n"
"  action, state (\"guarded\", \"unguarded\", \"partial\", \"foreign\", \"none\", or\n"
"  null when the request failed before the state was known), wrote (bool),\n"
"  error (short error name, only when ok is false), message (detail, may be\n"
"  empty), sites (list of {object, address as \"0x...\", state: \"original\",\n"
"  \"guarded\" or \"foreign\"}), and for guard and unguard pause_us and check_us\n"
"  (microseconds the process was stopped, and the part spent checking).\n"
"\n"
"Environment:\n"
"  BTGUARD_SOCKET   socket path used when --socket is not given\n"
"\n"
"Exit status:\n"
"  0  every PID succeeded\n"
"  1  at least one PID failed, the daemon refused the request, or its reply\n"
"     was cut off, malformed or did not arrive within --timeout\n"
"  2  usage error (nothing was sent)\n"
"  3  the daemon could not be reached (no socket, connection refused, or it\n"
"     hung up without answering)\n"
"\n"
"Examples:\n"
"  " PROGRAM " guard 1234                   guard one process\n"
"  " PROGRAM " --tree guard $(pgrep -o gunicorn)   a server and its workers\n"
"  " PROGRAM " --json status 1234 1235 | jq -c 'select(.state != \"guarded\")'\n"
"  " PROGRAM " --deadline 10000 guard 1234  keep retrying a busy process for 10 s\n"
"  " PROGRAM " unguard 1234                 restore real backtraces\n"
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
	usage_error("unknown command '%s': expected guard, unguard or status", s);
}

static void parse_args(int argc, char **argv, struct options *o)
{
	enum { OPT_TREE = 0x100 };
	static const struct option longopts[] = {
		{ "socket",   required_argument, NULL, 's' },
		{ "json",     no_argument,       NULL, 'j' },
		{ "verbose",  no_argument,       NULL, 'v' },
		{ "timeout",  required_argument, NULL, 't' },
		{ "deadline", required_argument, NULL, 'd' },
		{ "tree",     no_argument,       NULL, OPT_TREE },
		{ "help",     no_argument,       NULL, 'h' },
		{ "version",  no_argument,       NULL, 'V' },
		{ NULL, 0, NULL, 0 },
	};
	const char *env = getenv("BTGUARD_SOCKET");
	uint64_t v;
	int c;

	o->socket_path = env && *env ? env : DEFAULT_SOCKET;
	o->timeout_s = DEFAULT_TIMEOUT_S;

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
			o->out.json = true;
			break;
		case 'v':
			o->out.verbose = true;
			break;
		case 't':
			o->timeout_s = parse_timeout(optarg);
			break;
		case 'd':
			if (parse_decimal(optarg, PROTO_MAX_DEADLINE_MS, &v) < 0 || v == 0)
				usage_error("invalid --deadline '%s': expected milliseconds, 1..%u",
					    optarg, PROTO_MAX_DEADLINE_MS);
			o->req.deadline_ms = (uint32_t)v;
			break;
		case OPT_TREE:
			o->req.flags |= PROTO_FLAG_TREE;
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
		usage_error("missing command: guard, unguard or status");
	o->req.action = parse_action(argv[optind++]);
	if (optind >= argc)
		usage_error("missing PID after '%s'", proto_action_name(o->req.action));
	if ((unsigned)(argc - optind) > PROTO_MAX_PIDS)
		usage_error("too many PIDs: %d, at most %u per request", argc - optind,
			    PROTO_MAX_PIDS);
	for (; optind < argc; optind++) {
		if (parse_decimal(argv[optind], INT32_MAX, &v) < 0 || v == 0)
			usage_error("invalid PID '%s': expected a decimal number from 1 to %d",
				    argv[optind], INT32_MAX);
		o->req.pids[o->req.npids++] = (int32_t)v;
	}
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
	return status;
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
static int read_replies(struct conn *c, const struct options *o, unsigned *nresults)
{
	static uint8_t payload[PROTO_MAX_PAYLOAD];
	static struct proto_result res;
	static char text[PROTO_MAX_MESSAGE + 1];
	bool any_failed = false;
	struct proto_header h;
	uint32_t count, code;
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
			if (res.error != BTG_OK)
				any_failed = true;
			if (output_result(&o->out, &res) < 0)
				return fail(EXIT_FAILED, "writing to standard output: %s",
					    strerror(EIO));
			break;
		case PROTO_KIND_DONE:
			if (proto_decode_done(payload, h.length, &count) < 0)
				return fail(EXIT_FAILED, "the daemon sent a malformed end of reply");
			if (count != *nresults)
				return fail(EXIT_FAILED, "the daemon announced %" PRIu32
					    " results but sent %u", count, *nresults);
			return any_failed ? EXIT_FAILED : EXIT_OK;
		case PROTO_KIND_ERROR:
			if (proto_decode_error(payload, h.length, &code, text, sizeof(text)) < 0)
				return fail(EXIT_FAILED, "the daemon sent a malformed error");
			fflush(stdout);
			fprintf(stderr, PROGRAM ": daemon refused the request: %s: ",
				proto_error_name(code));
			output_text(stderr, text[0] ? text : proto_error_text(code));
			fputc('\n', stderr);
			return EXIT_FAILED;
		default:
			return fail(EXIT_FAILED, "the daemon sent an unexpected message (kind %u)",
				    (unsigned)h.kind);
		}
	}
}

int main(int argc, char **argv)
{
	static struct options o;
	static uint8_t request[PROTO_HEADER_SIZE + PROTO_MAX_PAYLOAD];
	struct conn c;
	unsigned nresults = 0;
	int len, r, status;

	o.out.out = stdout;
	parse_args(argc, argv, &o);

	len = proto_encode_request(&o.req, request, sizeof(request));
	if (len < 0)   /* parse_args enforces every limit the encoder checks */
		return fail(EXIT_USAGE, "cannot encode the request: %s", strerror(-len));

	r = conn_open(&c, o.socket_path, conn_now_ns() + (uint64_t)(o.timeout_s * 1e9));
	if (r == -ETIMEDOUT)
		return fail(EXIT_UNREACHABLE, "cannot connect to %s: the daemon did not accept "
			    "the connection within %g s (is btguardd overloaded?)",
			    o.socket_path, o.timeout_s);
	if (r < 0)
		return fail(EXIT_UNREACHABLE, "cannot connect to %s: %s (is btguardd running?)",
			    o.socket_path, strerror(-r));

	r = conn_send(&c, request, (size_t)len);
	if (r < 0) {
		conn_close(&c);
		return fail(EXIT_UNREACHABLE, "cannot send the request to %s: %s",
			    o.socket_path, r == -ETIMEDOUT ? "timed out" : strerror(-r));
	}

	status = read_replies(&c, &o, &nresults);
	conn_close(&c);
	if (fflush(stdout) != 0 && status == EXIT_OK)
		status = fail(EXIT_FAILED, "writing to standard output failed");
	return status;
}
