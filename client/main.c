// SPDX-License-Identifier: MIT
/*
 * btguardctl: the command-line client of btguardd.  This file owns the
 * dispatch: a command line is either `run`, a command started and followed
 * by the daemon through its exec, or a request whose replies are the
 * report (its selector resolved on this node first, written to --output,
 * followed by the rule metrics for Prometheus), and the exit status it ends
 * with (status.h lists them).
 *
 * The command line is options.c's (the --help text help.c's), the
 * selectors resolved here target.c's, the exchange with the daemon
 * exchange.c's, socket I/O ctl_conn.c's, formatting output.c's, --output's
 * file outfile.c's, the run command's process run.c's.
 */
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "exchange.h"
#include "options.h"
#include "outfile.h"
#include "output.h"
#include "run.h"
#include "status.h"
#include "target.h"

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
		return status_fail(EXIT_FAILED, "cannot start %s: %s", o->run_argv[0],
				   strerror(-r));
	o->req.pids[0] = (int32_t)o->child.pid;
	status = exchange_run(o);
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
	r = exchange_run(o);
	if (r == EXIT_OK) {
		o->req.action = PROTO_ACTION_SWEPT;
		r = exchange_run(o);
	}
	if (r == EXIT_OK)
		return status;
	o->ended = false;
	return r;
}

/* A request that reports (or acts): the selector resolved, then the exchange. */
static int report(struct options *o)
{
	int status = target_resolve(o);

	if (status)
		return status;
	if (o->output_path) {
		status = outfile_open(o);
		if (status)
			return status;
		o->out.made_s = time(NULL);
		return outfile_close(o, rule_metrics(o, exchange_run(o)));
	}
	return rule_metrics(o, exchange_run(o));
}

int main(int argc, char **argv)
{
	static struct options o;
	int status;

	options_parse(argc, argv, &o);
	if (o.run_argv)
		return run(&o);
	status = report(&o);
	if (o.out.format == OUTPUT_NAGIOS && !o.ended) {
		/* No verdict: whatever went wrong, the plugin's answer is UNKNOWN. */
		const char *why = status_last_failure();

		output_nagios_unknown(stdout, why[0] ? why : "no reply");
		return OUTPUT_NAGIOS_UNKNOWN;
	}
	return status;
}
