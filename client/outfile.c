// SPDX-License-Identifier: MIT
/*
 * --output FILE: a temporary file next to FILE, created new, then synced
 * and renamed over FILE, so FILE is always one whole report (outfile.h).
 */
#include <errno.h>
#include <fcntl.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "outfile.h"
#include "status.h"

/* FILE.PID, created new: never someone else's file, never a half-written one. */
int outfile_open(struct options *o)
{
	int fd;

	snprintf(o->output_tmp, sizeof(o->output_tmp), "%s.%ld", o->output_path,
		 (long)getpid());
	fd = open(o->output_tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	if (fd < 0)
		return status_fail(EXIT_FAILED, "cannot create %s: %s", o->output_tmp,
				   strerror(errno));
	o->out.out = fdopen(fd, "w");
	if (!o->out.out) {
		close(fd);
		unlink(o->output_tmp);
		return status_fail(EXIT_FAILED, "cannot write %s: %s", o->output_tmp,
				   strerror(errno));
	}
	return 0;
}

/* Renames a complete report over FILE; anything else leaves FILE as it was. */
int outfile_close(struct options *o, int status)
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
	return status_fail(o->out.format == OUTPUT_NAGIOS ? OUTPUT_NAGIOS_UNKNOWN : EXIT_FAILED,
			   "cannot write %s: %s", o->output_path, strerror(saved));
}
