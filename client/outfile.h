/* SPDX-License-Identifier: MIT */
/*
 * status --output FILE: the report written whole or not at all.  It goes
 * to FILE.PID in FILE's directory and is renamed over FILE only once it is
 * complete and on disk, so a reader (node_exporter's textfile collector,
 * which reads only *.prom) sees the old report or the new one, never half
 * of one.
 */
#ifndef BTGUARD_CLIENT_OUTFILE_H
#define BTGUARD_CLIENT_OUTFILE_H

#include "options.h"

/*
 * Creates o->output_path's temporary file and points o->out.out at it.
 * Returns 0, or the exit status to end with, its reason already said.
 */
int outfile_open(struct options *o);

/*
 * Ends the report begun by outfile_open(): renamed over o->output_path if
 * it is complete (o->ended) and reached the disk, else removed, leaving
 * the old FILE.  o->out.out is standard output again.  Returns status, or
 * a failure of its own when a complete report could not be written.
 */
int outfile_close(struct options *o, int status);

#endif
