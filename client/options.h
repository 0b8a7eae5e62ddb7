/* SPDX-License-Identifier: MIT */
/*
 * btguardctl's command line, checked whole before anything is sent: what
 * options_parse() fills in is a request the encoder accepts, and the
 * settings of the exchange that carries it.  A usage error ends the
 * program here (exit 2, or 3 UNKNOWN with --format=nagios): nothing was
 * sent.
 */
#ifndef BTGUARD_CLIENT_OPTIONS_H
#define BTGUARD_CLIENT_OPTIONS_H

#include <limits.h>
#include <stdbool.h>

#include "../proto/proto.h"
#include "output.h"
#include "run.h"
#include "slurm.h"

/*
 * One run of btguardctl.  options_parse() writes every field; after it,
 * target.c resolves --unit and --slurm-job into req, outfile.c swaps
 * out.out for the --output file, exchange.c sets ended and lets the run
 * child go, main.c starts the child and sends the rule-metrics requests.
 */
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
	bool        backtraces_given; /* --backtraces: a guard's form (PROTO_FLAG_WALK) */
	char      **run_argv;       /* run -- CMD [ARG]...: the command, NULL-terminated */
	struct run_child child;     /* run: the command's process */
};

/*
 * Fills o (zeroed by the caller) from argv: the defaults, then the
 * options, the command and its PIDs or selector.  --help and --version
 * print and exit 0; a usage error exits.  Returns only with a command
 * line that can be sent.
 */
void options_parse(int argc, char **argv, struct options *o);

#endif
