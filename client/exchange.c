// SPDX-License-Identifier: MIT
/*
 * btguardctl's one request/reply exchange with the daemon: the request
 * encoded and sent, then every message of the reply checked against the
 * request it answers and printed, until DONE says how many there were.
 * A reply cut off, malformed or late is a failure (the daemon may have
 * acted); a daemon never reached is "unreachable".  Socket I/O lives in
 * ctl_conn.c, formatting in output.c.
 */
#include <errno.h>
#include <inttypes.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "ctl_conn.h"
#include "exchange.h"
#include "status.h"

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

/* The report could not be written (r: -errno): said naming where it goes. */
static int write_failed(const struct options *o, int r)
{
	if (o->output_path)
		return status_fail(EXIT_FAILED, "cannot write %s: %s", o->output_path,
				   strerror(-r));
	return status_fail(EXIT_FAILED, "writing to standard %s: %s",
			   o->out.out == stderr ? "error" : "output", strerror(-r));
}

/*
 * Reads RESULTs until DONE.  Returns the exit status; *nresults counts
 * what was printed, for the messages about a cut-off reply.
 */
static int read_replies(struct ctl_conn *c, struct options *o, unsigned *nresults)
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
		r = ctl_conn_recv(c, &h, payload, sizeof(payload));
		if (r == -ENODATA && c->received == 0)
			return status_fail(EXIT_UNREACHABLE, "the daemon at %s closed the "
					   "connection without answering", o->socket_path);
		if (r == -ENODATA || r == -EPIPE)
			return status_fail(EXIT_FAILED,
					   "the daemon closed the connection after %u result%s, "
					   "before the end of the reply",
					   *nresults, *nresults == 1 ? "" : "s");
		if (r == -ETIMEDOUT)
			return status_fail(EXIT_FAILED,
					   "no complete reply from the daemon within %g s "
					   "(%u result%s received); the daemon may still be acting",
					   o->timeout_s, *nresults, *nresults == 1 ? "" : "s");
		if (r < 0)
			return status_fail(EXIT_FAILED, "reading the reply: %s",
					   recv_error_text(r));

		switch (h.kind) {
		case PROTO_KIND_RESULT:
			if (proto_decode_result(payload, h.length, &res) < 0)
				return status_fail(EXIT_FAILED,
						   "the daemon sent a malformed result");
			(*nresults)++;
			/* run: followed now, so its exec will be; let it go. */
			if (o->run_argv && res.error == BTG_OK && (res.flags & PROTO_RESULT_ARMED))
				run_go(&o->child);
			if (o->run_argv && !o->out.verbose && res.error == BTG_OK)
				break;   /* the command's output is what counts; failures are said */
			r = output_result(&o->out, &res);
			if (r < 0)
				return write_failed(o, r);
			break;
		case PROTO_KIND_RULE:
			if (o->req.action != PROTO_ACTION_POLICY ||
			    proto_decode_rule(payload, h.length, &rule) < 0)
				return status_fail(EXIT_FAILED, "the daemon sent a malformed rule");
			(*nresults)++;
			r = output_rule(&o->out, &rule);
			if (r < 0)
				return write_failed(o, r);
			break;
		case PROTO_KIND_NOTICE:
			/* The daemon runs without the policy its files say (btguardd.conf(5)). */
			if ((o->req.action != PROTO_ACTION_STATUS && o->req.action != PROTO_ACTION_POLICY) ||
			    *nresults || proto_decode_notice(payload, h.length, text, sizeof(text)) < 0)
				return status_fail(EXIT_FAILED,
						   "the daemon sent a malformed notice");
			/* Said once: the report's own POLICY request hears it again. */
			if (!o->rule_metrics) {
				fflush(stdout);
				fputs(PROGRAM ": warning: ", stderr);
				output_text(stderr, text);
				fputc('\n', stderr);
			}
			o->out.policy_problem = true;
			snprintf(o->out.policy_text, sizeof(o->out.policy_text), "%s", text);
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
				return status_fail(EXIT_FAILED,
						   "the daemon sent a malformed end of reply");
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
				/* The rules shown are not the files': monitoring must see it.
				 * A report's rule counts are still the daemon's: the report
				 * says the policy is not loaded (btguard_policy_loaded 0). */
				return policy_noticed && !o->rule_metrics ? EXIT_FAILED : EXIT_OK;
			}
			if (count != *nresults)
				return status_fail(EXIT_FAILED, "the daemon announced %" PRIu32
						   " results but sent %u", count, *nresults);
			r = output_end(&o->out);
			if (r < 0)
				return write_failed(o, r);
			o->ended = true;
			if (o->out.format == OUTPUT_NAGIOS)
				return (int)o->out.nagios;
			/* Monitoring asks "is anything at risk?" first. */
			if (o->req.action == PROTO_ACTION_STATUS && n->at_risk)
				return EXIT_AT_RISK;
			return n->failed ? EXIT_FAILED : EXIT_OK;
		case PROTO_KIND_ERROR:
			if (proto_decode_error(payload, h.length, &code, text, sizeof(text)) < 0)
				return status_fail(EXIT_FAILED,
						   "the daemon sent a malformed error");
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
			status_remember("daemon refused the request: %s: %s",
					proto_error_name(code),
					text[0] ? text : proto_error_text(code));
			return EXIT_FAILED;
		default:
			return status_fail(EXIT_FAILED,
					   "the daemon sent an unexpected message (kind %u)",
					   (unsigned)h.kind);
		}
	}
}

int exchange_run(struct options *o)
{
	static uint8_t request[PROTO_HEADER_SIZE + PROTO_MAX_PAYLOAD];
	struct ctl_conn c;
	unsigned nresults = 0;
	int len, r, status;

	len = proto_encode_request(&o->req, request, sizeof(request));
	if (len < 0)   /* options_parse enforces every limit the encoder checks */
		return status_fail(EXIT_USAGE, "cannot encode the request: %s", strerror(-len));

	r = ctl_conn_open(&c, o->socket_path, ctl_conn_now_ns() + (uint64_t)(o->timeout_s * 1e9));
	if (r == -ETIMEDOUT)
		return status_fail(EXIT_UNREACHABLE,
				   "cannot connect to %s: the daemon did not accept "
				   "the connection within %g s (is btguardd overloaded?)",
				   o->socket_path, o->timeout_s);
	if (r < 0)
		return status_fail(EXIT_UNREACHABLE,
				   "cannot connect to %s: %s (is btguardd running?)",
				   o->socket_path, strerror(-r));

	r = ctl_conn_send(&c, request, (size_t)len);
	if (r < 0) {
		ctl_conn_close(&c);
		return status_fail(EXIT_UNREACHABLE, "cannot send the request to %s: %s",
				   o->socket_path, r == -ETIMEDOUT ? "timed out" : strerror(-r));
	}

	status = read_replies(&c, o, &nresults);
	ctl_conn_close(&c);
	if (fflush(stdout) != 0 && status == EXIT_OK)
		status = status_fail(EXIT_FAILED, "writing to standard output failed");
	return status;
}
