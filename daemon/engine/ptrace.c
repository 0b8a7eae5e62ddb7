// SPDX-License-Identifier: MIT
/*
 * The one call of ptrace(2) in btguard, and what goes through it for
 * everybody: a target's words, the seize an exec cannot hold up, and the
 * tasks parked until they can be let go.  Stopping and resuming the world
 * is ptworld.c's, following an exec ptfollow.c's; both call ptrace_call()
 * (ptrace_int.h), and the name ptrace is poisoned in them as everywhere
 * else: a second call of it anywhere does not compile.
 *
 * A tracee that never stops (uninterruptible sleep past every deadline)
 * cannot be detached: PTRACE_DETACH needs a stopped tracee.  Such tasks are
 * parked as orphans and detached as soon as they stop; this list is the one
 * piece of process-wide state here, because being a tracer is process-wide
 * (strictly, per tracer thread) kernel state too.
 */
#include <errno.h>
#include <fcntl.h>
#include <setjmp.h>
#include <signal.h>
#include <stdio.h>
#include <sys/ptrace.h>
#include <sys/wait.h>
#include <unistd.h>

#include "proto.h"
#include "fault.h"
#include "procfs.h"
#define BTGUARD_PTRACE_IMPL
#include "ptrace_int.h"
#include "unstick.h"

/*
 * Set while a PTRACE_SEIZE that ptrace_seize_call() may abandon is in the kernel;
 * seize_gen counts those calls, ring_gen is the one the timer last saw.
 */
static volatile sig_atomic_t in_seize, seize_escape_ready, seize_gen, ring_gen;
static sigjmp_buf seize_escape;

/*
 * The one call of ptrace(2) in btguard: 0 or -errno, and for PEEKTEXT the
 * word in *ret_word.  (PEEKTEXT returns the word itself, so -1 is only an
 * error when errno says so.)  The test build's fault injection hooks in
 * here and nowhere else.
 */
int ptrace_call(enum __ptrace_request request, pid_t tid, uint64_t addr, uint64_t data,
		uint64_t *ret_word)
{
	long v;
	int r = fault_before_ptrace((int)request);

	if (r < 0)
		return r;
	errno = 0;
	if (request == PTRACE_SEIZE && seize_escape_ready) {
		seize_gen = (seize_gen + 1) & 0x3fffffff;   /* sig_atomic_t is a signed int */
		in_seize = 1;
	}
	v = ptrace(request, tid, (void *)addr, (void *)data);
	in_seize = 0;
	if (v == -1 && errno)
		return -errno;
	if (ret_word) {
		*ret_word = (uint64_t)v;
		fault_after_peek(ret_word);
	}
	return 0;
}
/* Everything below goes through ptrace_call(); ptrace.h poisons it for everybody else. */
#pragma GCC poison ptrace

/* ------------------------------------------- a seize an exec holds up -- */

/*
 * How often ptrace_seize_call() tries before it gives up: with unstick.c's
 * timer, about a second, far more than an exec needs once its victims are
 * reaped.
 */
#define SEIZE_TRIES 50

/*
 * unstick.c's timer rang: leave a seize that was waiting already when it
 * last rang (a whole period, where a seize takes microseconds).  One the
 * ring merely happens upon is left alone.
 */
static void on_ring(void)
{
	if (in_seize && ring_gen == seize_gen) {
		in_seize = 0;
		siglongjmp(seize_escape, 1);
	}
	ring_gen = seize_gen;
}

int ptrace_setup(void)
{
	return unstick_setup(on_ring);
}

/*
 * PTRACE_SEIZE that an exec cannot hold up for good (unstick.c says
 * why it could).  When the timer rings while the call waits, the call is
 * abandoned (the escape restores the signal mask), every status that is
 * ready is collected - the exec's victims, the threads we held that it
 * killed, among them, which lets it go on - and the seize is tried
 * again.  w may be an empty world: statuses then go to the followers and
 * orphans, as any other collection's would.  *ret_abandoned counts the
 * abandoned calls: for each, an exec raced the seize, and the caller's
 * TIDs are no longer sure (w's fields are ptworld.c's to mark).
 */
int ptrace_seize_call(struct ptrace_world *w, pid_t tid, uint64_t options,
		      unsigned *ret_abandoned)
{
	volatile unsigned tries = 0;
	int r;

	unstick_begin();
	/* No mask saved here (a system call per seize): the escape restores unstick's. */
	if (sigsetjmp(seize_escape, 0) != 0) {
		unstick_restore_mask();
		(*ret_abandoned)++;
		/* Abandoned, perhaps just after it took effect: then tid is ours already. */
		seize_escape_ready = 0;
		if (ptrace_call(PTRACE_INTERRUPT, tid, 0, 0, NULL) == 0) {
			unstick_end();
			return 0;
		}
		ptrace_collect_ready(w);
		if (++tries >= SEIZE_TRIES) {
			unstick_end();
			return -EAGAIN;
		}
	}
	seize_escape_ready = 1;
	r = ptrace_call(PTRACE_SEIZE, tid, 0, options, NULL);
	seize_escape_ready = 0;
	unstick_end();
	return r;
}

/*
 * Explains why SEIZE was refused.  Returns 0 when the task is merely on
 * its way out (a zombie thread cannot be traced, and needs no stopping).
 */
int ptrace_seize_refused(pid_t pid, pid_t tid, char *why, size_t why_len)
{
	struct procfs_status st;

	if (procfs_read_task_status(pid, tid, &st) < 0)
		return 0;
	if (st.state == 'Z' || st.state == 'X')
		return 0;
	if (st.tracer > 0 && st.tracer == getpid()) {
		/* Ours: parked after an earlier deadline, not stopped yet. */
		snprintf(why, why_len, "thread %d is still being released from an earlier operation", tid);
		return -BTG_ERR_BUSY;
	}
	if (st.tracer > 0) {
		snprintf(why, why_len, "thread %d is already traced by process %d", tid, st.tracer);
		return -BTG_ERR_TRACED;
	}
	snprintf(why, why_len, "the kernel refused to trace thread %d (EPERM)", tid);
	return -EPERM;
}

/* ---------------------------------------------------------- orphans -- */

#define MAX_ORPHANS 4096

struct orphan {
	pid_t tid;
	bool stopped;   /* in a ptrace-stop already, its detach failed: retry that */
	int sig;        /* for a stopped one: the signal its detach re-injects */
};

static struct orphan orphans[MAX_ORPHANS];
static size_t n_orphans;
static size_t orphans_lost;   /* parked nowhere: the table was full (a broken invariant) */

/*
 * Parks a task we cannot let go yet; false (and counted) when the table is
 * full.  One not stopped is interrupted (again, for most): only a stopped
 * tracee can be detached, and a task that goes by a TID we never
 * interrupted - an exec gave it the leader's - would otherwise never stop.
 */
bool ptrace_park(pid_t tid, bool stopped, int sig)
{
	if (!stopped)
		ptrace_call(PTRACE_INTERRUPT, tid, 0, 0, NULL);
	if (n_orphans == MAX_ORPHANS) {
		orphans_lost++;
		return false;
	}
	orphans[n_orphans++] = (struct orphan){ .tid = tid, .stopped = stopped, .sig = sig };
	return true;
}

size_t ptrace_orphans_lost(void)
{
	return orphans_lost;
}

/* Detaches a stopped orphan; returns true when it no longer needs us. */
static bool orphan_settle(pid_t tid, int status)
{
	if (WIFEXITED(status) || WIFSIGNALED(status))
		return true;
	if (WIFSTOPPED(status)) {
		int sig = (status >> 16) == 0 ? WSTOPSIG(status) : 0;

		ptrace_call(PTRACE_DETACH, tid, 0, (uint64_t)sig, NULL);
		return true;
	}
	return false;
}

static void orphan_remove(size_t i)
{
	orphans[i] = orphans[--n_orphans];
}

void ptrace_orphan_status(pid_t tid, int status)
{
	for (size_t i = 0; i < n_orphans; i++) {
		if (orphans[i].tid == tid) {
			if (orphan_settle(tid, status))
				orphan_remove(i);
			return;
		}
	}
}

size_t ptrace_reap_orphans(void)
{
	for (size_t i = 0; i < n_orphans;) {
		int status, d;
		pid_t r;

		if (orphans[i].stopped) {
			d = ptrace_call(PTRACE_DETACH, orphans[i].tid, 0, (uint64_t)orphans[i].sig, NULL);
			if (d == 0 || d == -ESRCH)
				orphan_remove(i);
			else
				i++;
			continue;
		}
		r = waitpid(orphans[i].tid, &status, __WALL | WNOHANG);
		if ((r < 0 && errno == ECHILD) || (r > 0 && orphan_settle(orphans[i].tid, status)))
			orphan_remove(i);
		else
			i++;
	}
	return n_orphans;
}

bool ptrace_parked(pid_t tid)
{
	for (size_t i = 0; i < n_orphans; i++)
		if (orphans[i].tid == tid)
			return true;
	return false;
}

/*
 * For a tracee killed while we held it (another thread crashed, or
 * SIGKILL).  A dying tracee waits for its tracer to reap it, and until then
 * its whole process cannot finish exiting: reap it now, or park it to be
 * reaped.
 */
void ptrace_reap_or_park(pid_t tid)
{
	int status;

	if (waitpid(tid, &status, __WALL | WNOHANG) <= 0)
		ptrace_park(tid, false, 0);
}

/* ------------------------------------------------------------ words -- */

int ptrace_peek_word(pid_t tid, uint64_t addr, uint64_t *ret)
{
	return ptrace_call(PTRACE_PEEKTEXT, tid, addr, 0, ret);
}

int ptrace_poke_word(pid_t tid, uint64_t addr, uint64_t word)
{
	return ptrace_call(PTRACE_POKETEXT, tid, addr, word, NULL);
}

/*
 * Two PTRACE_POKETEXTs are two system calls, and a daemon killed between
 * them would leave half a change in a process that then runs on.  One
 * pwrite() to /proc/TID/mem is one access_remote_vm() under the target's
 * mmap lock, and within one page it takes no fault that a fatal signal
 * could cut short (__get_user_pages() checks for one between pages): the
 * bytes land whole or not at all.  It writes read-only text the way
 * POKETEXT does (FOLL_FORCE), which the kernel grants to the task's tracer
 * whatever proc_mem.force_override says.  The poke fault counts it.
 */
int ptrace_poke_bytes(pid_t tid, uint64_t addr, const uint8_t *bytes, size_t len)
{
	char path[64];
	ssize_t n;
	int fd, r;

	if (len == 0 || len > PTRACE_POKE_BYTES_MAX ||
	    addr / PTRACE_POKE_PAGE != (addr + len - 1) / PTRACE_POKE_PAGE)
		return -EINVAL;
	r = fault_before_ptrace(PTRACE_POKETEXT);
	if (r < 0)
		return r;
	snprintf(path, sizeof(path), "/proc/%d/mem", (int)tid);
	fd = open(path, O_WRONLY | O_CLOEXEC);
	if (fd < 0)
		return errno == ENOENT ? -ESRCH : -errno;
	n = pwrite(fd, bytes, len, (off_t)addr);
	r = n == (ssize_t)len ? 0 : n < 0 ? -errno : -EIO;
	close(fd);
	return r;
}
