// SPDX-License-Identifier: MIT
/*
 * --output FILE: a temporary file next to FILE, created new, then synced
 * and renamed over FILE, so FILE is always one whole report (outfile.h).
 * Killed by SIGTERM, SIGINT or SIGHUP on the way (a timer's stop, a
 * Ctrl-C), it removes the temporary file before it dies of the signal.
 */
#include <errno.h>
#include <fcntl.h>
#include <signal.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "outfile.h"
#include "status.h"

static const int cleanup_signals[] = { SIGTERM, SIGINT, SIGHUP };

/* The temporary file's name while it is ours to remove, for the handler. */
static const char *volatile tmp_name;

/*
 * unlink() and raise() are async-signal-safe.  SA_RESETHAND has put the
 * default action back, and the signal stays blocked until we return, so
 * the process then dies of it as if we had never caught it.
 */
static void remove_tmp_and_die(int sig)
{
	const char *name = tmp_name;

	if (name)
		unlink(name);
	raise(sig);
}

static void block_cleanup_signals(sigset_t *ret_old)
{
	sigset_t set;

	sigemptyset(&set);
	for (size_t i = 0; i < sizeof(cleanup_signals) / sizeof(cleanup_signals[0]); i++)
		sigaddset(&set, cleanup_signals[i]);
	sigprocmask(SIG_BLOCK, &set, ret_old);
}

/* A signal ignored when we started (nohup, a background job's SIGINT) stays ignored. */
static void catch_cleanup_signals(void)
{
	struct sigaction sa = { .sa_handler = remove_tmp_and_die, .sa_flags = SA_RESETHAND };
	struct sigaction old;

	sigemptyset(&sa.sa_mask);
	for (size_t i = 0; i < sizeof(cleanup_signals) / sizeof(cleanup_signals[0]); i++) {
		int sig = cleanup_signals[i];

		if (sigaction(sig, NULL, &old) == 0 && old.sa_handler != SIG_IGN)
			sigaction(sig, &sa, NULL);
	}
}

/* FILE.PID, created new: never someone else's file, never a half-written one. */
int outfile_open(struct options *o)
{
	sigset_t old;
	int fd, saved;

	snprintf(o->output_tmp, sizeof(o->output_tmp), "%s.%ld", o->output_path,
		 (long)getpid());
	catch_cleanup_signals();
	/* The handler removes the file only once it is surely ours. */
	block_cleanup_signals(&old);
	fd = open(o->output_tmp, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	saved = errno;
	if (fd >= 0)
		tmp_name = o->output_tmp;
	sigprocmask(SIG_SETMASK, &old, NULL);
	if (fd < 0)
		return status_fail(EXIT_FAILED, "cannot create %s: %s", o->output_tmp,
				   strerror(saved));
	o->out.out = fdopen(fd, "w");
	if (!o->out.out) {
		saved = errno;
		close(fd);
		block_cleanup_signals(&old);
		unlink(o->output_tmp);
		tmp_name = NULL;
		sigprocmask(SIG_SETMASK, &old, NULL);
		o->out.out = stdout;
		return status_fail(EXIT_FAILED, "cannot write %s: %s", o->output_tmp,
				   strerror(saved));
	}
	return 0;
}

/* Renames a complete report over FILE; anything else leaves FILE as it was. */
int outfile_close(struct options *o, int status)
{
	bool ok = o->ended && fflush(o->out.out) == 0 && !ferror(o->out.out) &&
		  fsync(fileno(o->out.out)) == 0;
	int saved = errno;
	sigset_t old;

	if (fclose(o->out.out) != 0)
		ok = false;
	o->out.out = stdout;
	/* Renamed or removed, and forgotten, with no signal in between. */
	block_cleanup_signals(&old);
	if (ok && rename(o->output_tmp, o->output_path) == 0) {
		tmp_name = NULL;
		sigprocmask(SIG_SETMASK, &old, NULL);
		return status;
	}
	if (ok)
		saved = errno;
	unlink(o->output_tmp);
	tmp_name = NULL;
	sigprocmask(SIG_SETMASK, &old, NULL);
	if (!o->ended)
		return status;   /* already said why */
	return status_fail(o->out.format == OUTPUT_NAGIOS ? OUTPUT_NAGIOS_UNKNOWN : EXIT_FAILED,
			   "cannot write %s: %s", o->output_path, strerror(saved));
}
