// SPDX-License-Identifier: MIT
/*
 * A request's target at its turn: check the pin taken at arrival
 * (action_expand.c), authorize the caller again, run the procedure an
 * attempt per turn (or only read, for status) and log the outcome.  This
 * is the decider for a target, so it is the one place that logs about it.
 *
 * What a caller may learn (SECURITY.md, "What a refused caller learns"):
 * a PID it may not act on is answered "denied: you may not act on it" and
 * nothing more; if the caller's own /proc hides such processes
 * (hidepid=invisible), exactly as if no process had that PID.  The engine
 * answers in facts where that matters (which process shares the memory
 * and could not be held); the words, and whether they name it, are here.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "action.h"
#include "authorize.h"
#include "exec.h"
#include "execmaps.h"
#include "facts.h"
#include "log.h"
#include "patch.h"
#include "pin.h"
#include "procfs.h"
#include "record.h"
#include "report.h"

/* ------------------------------------------------------ the answers -- */

/*
 * The one text for each answer that must not depend on anything the caller
 * may not know: a hidden process and an absent one read the same.
 */
static int answer(int err, int32_t asked, char *why, size_t why_len)
{
	switch (err) {
	case -BTG_ERR_NOPROC:
		snprintf(why, why_len, "no process with PID %d", asked);
		break;
	case -BTG_ERR_DENIED:
		snprintf(why, why_len, "you may not act on process %d", asked);
		break;
	case -BTG_ERR_SELF:
		snprintf(why, why_len, "process %d is btguardd itself", asked);
		break;
	case -BTG_ERR_KTHREAD:
		snprintf(why, why_len, "process %d is a kernel thread", asked);
		break;
	case -BTG_ERR_LIMIT:
		snprintf(why, why_len,
			 "the daemon holds too many processes pinned for queued requests; "
			 "nothing was done to %d, try again later", asked);
		break;
	default:
		snprintf(why, why_len, "cannot act on process %d: %s", asked,
			 err <= -BTG_ERR_BASE ? proto_error_text((uint32_t)-err) : strerror(-err));
		break;
	}
	return err;
}

/*
 * A process sharing the target's memory could not be held (the engine's
 * facts): root is told which and why; anyone else neither, as it may be a
 * process the caller may not see.
 */
static void say_sharer(const struct auth_caller *caller, const struct sharer_refusal *s,
		       char *why, size_t why_len)
{
	bool named = caller->uid == 0;

	if (s->why == SHARER_UNCOMPARED && named)
		snprintf(why, why_len, "cannot tell whether process %d shares this address space (kcmp: %s)",
			 s->pid, strerror(-s->err));
	else if (s->why == SHARER_UNCOMPARED)
		snprintf(why, why_len,
			 "cannot tell whether another process shares this address space (kcmp: %s)",
			 strerror(-s->err));
	else if (named)
		snprintf(why, why_len, "process %d shares this address space and cannot be held with it: %s",
			 s->pid, s->detail);
	else
		snprintf(why, why_len, "another process shares this address space, and you may not act on it");
}

/* ---------------------------------------------------------- the turn -- */

/* The pinned process has exited: what the PID names now, in words. */
static int explain_exited(const struct action_target *t, char *why, size_t why_len)
{
	struct stat sb;
	char path[32];

	if (t->pidfd >= 0 && pin_state(t->pidfd) == PIN_ZOMBIE) {
		snprintf(why, why_len, "process %d has exited (zombie) and has no code to guard",
			 t->pid);
		return -BTG_ERR_ZOMBIE;
	}
	snprintf(path, sizeof(path), "/proc/%d", (int)t->ours);
	if (stat(path, &sb) == 0) {
		snprintf(why, why_len,
			 "PID %d now names another process than when the request arrived", t->pid);
		return -BTG_ERR_REUSED;
	}
	snprintf(why, why_len, "process %d exited before its turn", t->pid);
	return -BTG_ERR_GONE;
}

/* True while t's pin still names the process at t->ours. */
static bool pin_holds(const struct action_target *t, const struct procfs_stat *st)
{
	if (t->pidfd >= 0)
		return pin_state(t->pidfd) == PIN_ALIVE;
	return st && st->start_ticks == t->start_ticks;
}

/* pin_holds() with whatever the pin is: a pidfd, or the start time. */
static bool still_pinned(const struct action_target *t)
{
	struct procfs_stat st;

	if (t->pidfd >= 0)
		return pin_holds(t, NULL);
	return procfs_read_stat(t->ours, &st) == 0 && pin_holds(t, &st);
}

/* What report_fill() wrote, undone: it may describe another process. */
static void report_clear(struct proto_result *res)
{
	res->uid = PROTO_UID_UNKNOWN;
	res->risk = PROTO_RISK_UNKNOWN;
	res->warnings = 0;
	res->command[0] = res->reason[0] = '\0';
	for (unsigned i = 0; i < res->nsites; i++)
		res->sites[i].flags &= (uint8_t)~PROTO_SITE_BOUND;
}

/*
 * Root's status of a process authorized at arrival takes what was read
 * then: what root's authorization rests on (not the daemon, not a kernel
 * thread, a process and not a thread) cannot change while a pidfd pins the
 * process, and a status needs no fresh look for a tracer.  Anyone else's
 * rights, and any write, are checked again at the turn.
 */
static bool takes_arrival_facts(const struct auth_caller *caller, unsigned action,
				const struct action_target *t)
{
	return caller->uid == 0 && action == PROTO_ACTION_STATUS && t->authorized && t->pidfd >= 0;
}

/*
 * The caller's rights on t now, as authorize() checks them: 0, or
 * the answer.  The turn's look at the pin follows the read, before
 * anything read is answered: a pidfd's poll, or without one the start
 * time read with the rights (a failed read has none to compare, and its
 * answer says nothing of another process).
 */
static int check_rights(const struct auth_caller *caller, unsigned action,
			const struct action_target *t, struct auth_target *target, char *why,
			size_t why_len)
{
	struct procfs_stat st;
	const struct authorize_who who = action_who(t);
	int32_t asked = t->pid;
	pid_t pid = t->ours;
	int r;

	r = authorize(caller, &who, pid, target);
	st.start_ticks = target->start_ticks;
	if (t->pidfd >= 0 && !pin_holds(t, NULL))
		return explain_exited(t, why, why_len);
	if (t->pidfd < 0 && r == 0 && !pin_holds(t, &st)) {
		snprintf(why, why_len,
			 "PID %d now names another process than when the request arrived", asked);
		return -BTG_ERR_REUSED;
	}
	if (r < 0)
		return answer(r, asked, why, why_len);
	if (target->status.tgid != pid) {
		snprintf(why, why_len, "%d is a thread, not a process; name its process", asked);
		return -BTG_ERR_NOPROC;
	}
	/* status only reads, so it works under a debugger; guard and unguard
	 * must attach, which a tracer would make fail (or worse, disturb). */
	/* A tracer that is us is a thread still parked from an earlier deadline:
	 * patch.c waits for its release instead of calling us a debugger. */
	if (target->status.tracer > 0 && target->status.tracer != getpid() &&
	    action != PROTO_ACTION_STATUS) {
		/* Checked before seizing anything, so the tracer's session is untouched. */
		snprintf(why, why_len, "process %d is already traced by process %d (a debugger or strace?)",
			 asked, target->status.tracer);
		return -BTG_ERR_TRACED;
	}
	return 0;
}

/*
 * Checks the pin taken at arrival and decides whether the caller may act
 * on the process.  Everything read here is about the pinned process: the
 * rights' read is followed by the turn's look at the pin (check_rights()),
 * and a live pinned process keeps its PID.  What the engine reads next
 * has its own look (patch.c, before anything is stopped).
 */
static int prepare(const struct auth_caller *caller, unsigned action,
		   const struct action_target *t, struct patch_pin *pin, uid_t *ret_uid,
		   char *exe, size_t exe_len, char *why, size_t why_len)
{
	struct auth_target target;
	int32_t asked = t->pid;
	pid_t pid = t->ours, live;
	char path[64];
	ssize_t n;
	int r;

	if (t->err && t->pidfd >= 0) {
		/* Refused at arrival: the log names what was refused, if it is still that. */
		snprintf(path, sizeof(path), "/proc/%d/exe", pid);
		n = readlink(path, exe, exe_len - 1);
		exe[n > 0 && pin_holds(t, NULL) ? n : 0] = '\0';
	}
	if (t->err) {
		if (t->thread)
			snprintf(why, why_len, "%d is a thread, not a process; name its process", asked);
		else
			answer(t->err, asked, why, why_len);
		return t->err;
	}
	/* For the audit log only (never the reply): a denied attempt names its target too. */
	snprintf(path, sizeof(path), "/proc/%d/exe", pid);
	n = readlink(path, exe, exe_len - 1);
	exe[n > 0 ? n : 0] = '\0';
	/*
	 * A process that exited before its turn is described ("gone",
	 * "zombie", "pid-reused"): a non-root caller was authorized for it at
	 * arrival, so that reveals nothing it could not see.
	 */
	if (takes_arrival_facts(caller, action, t)) {
		/* Nothing to read again: the pidfd pins what arrival read; one look at it. */
		if (!pin_holds(t, NULL))
			return explain_exited(t, why, why_len);
		pin->pidfd = t->pidfd;
		pin->start_ticks = t->start_ticks;
		*ret_uid = t->uid;
		return 0;
	}
	r = check_rights(caller, action, t, &target, why, why_len);
	if (r < 0)
		return r;
	/* A zombie main thread with live threads is a live process (pthread_exit() in main). */
	if ((target.status.state == 'Z' || target.status.state == 'X') && procfs_live_task(pid, &live) < 0) {
		snprintf(why, why_len, "process %d has exited (zombie) and has no code to guard", asked);
		return -BTG_ERR_ZOMBIE;
	}
	/* patch.c re-checks this pair before every step: the start time read
	 * while the pidfd showed the process alive is exactly its own. */
	pin->pidfd = t->pidfd;
	pin->start_ticks = target.start_ticks;
	*ret_uid = target.status.uid[0];
	return 0;
}

struct action_job {
	struct auth_caller caller;
	struct action_target *target;
	struct proto_result *res;
	struct patch_job *patch;
	struct exec_job *exec;     /* at-exec: the process being followed instead */
	bool prepared;             /* authorized and pinned: the report may describe it */
	uint64_t start_ticks;      /* the pinned process's, for a --tree relist */
	/*
	 * What prepare() and the start read, for the report at the end: the
	 * real uid, the executable and the mapped objects (through via).
	 * via_fresh: the answer comes in the same turn, so via still lives.
	 */
	uid_t uid;
	pid_t via;
	bool via_fresh;
	struct facts *objects;     /* its objects part only, or NULL */
	char exe[PATH_MAX];
};

/* The target is answered: report, log it once, release its pin, free j. */
static int action_end(struct action_job *j, int r)
{
	struct action_target *t = j->target;
	bool fresh;
	pid_t via;
	int rr = 0;

	if (j->prepared) {
		/* patch_end() below must not have run yet: the sites are in res. */
		t->start_ticks = j->start_ticks;   /* for a --tree relist (action_expand_relist) */
		/*
		 * Authorized: the report may say what the process is.  If it has
		 * gone meanwhile, the pin says so and nothing is reported.  The
		 * engine's read of the sites for this answer has just looked at
		 * the pin and found a live task to read through: the report
		 * takes both rather than reading /proc for them again.
		 */
		fresh = patch_answer_fresh(j->patch, &via);
		if (!fresh)
			via = j->via;
		if (!fresh && !(j->via && j->via_fresh))
			rr = procfs_live_task(t->ours, &via);
		if (rr == 0 && (fresh || still_pinned(t))) {
			struct report_known known = {
				.uid = j->uid, .exe = j->exe,
				.objects = j->objects ? j->objects->p.objects : NULL,
				.nobjects = j->objects ? j->objects->p.nobjects : 0,
			};

			rr = report_fill(via, j->objects ? &known : NULL, j->res);
			if (!still_pinned(t))
				report_clear(j->res);
		}
		/*
		 * A status is its report: one the daemon was too short of
		 * descriptors or memory to make is that error, not an answer
		 * whose risk reads "unknown".  A guard or unguard done stays
		 * done; its risk is unknown.
		 */
		if (r == 0 && proto_shortage(rr) && j->res->action == PROTO_ACTION_STATUS) {
			snprintf(j->res->message, sizeof(j->res->message),
				 "cannot read what process %d runs: %s", t->pid, proto_strerror(rr));
			r = rr;
		}
	}
	j->res->error = proto_error_from_negative(r);
	record_action(&j->caller, t->ours ? t->ours : t->pid, j->exe, j->res, t->selected);
	pin_close(&t->pidfd);
	patch_end(j->patch);
	exec_end(j->exec);
	if (j->objects)
		facts_free(j->objects);
	free(j->objects);
	free(j);
	return 0;
}

/*
 * Steps 1-3 of a guard, unguard or status: a live task to read through,
 * its maps once - for the sites now and the report at the end - then
 * patch.c's part, which is handed both and reads neither again before
 * its first attempt.  A status needs only the executable file mappings (the
 * sites and the objects the risk names all have code), which the kernel
 * answers far more cheaply than the whole maps; a write's stack check
 * needs every mapping.
 */
static int start_patch(struct action_job *j, unsigned action, uint32_t deadline_ms,
		       const struct patch_pin *pin)
{
	int (*read_maps)(pid_t, struct procfs_mapping **, size_t *) =
		action == PROTO_ACTION_STATUS ? execmaps_read : procfs_read_maps;
	struct procfs_mapping *maps;
	size_t nmaps;
	pid_t pid = j->target->ours;
	int r;

	/*
	 * Through the main thread.  One that left with pthread_exit() has no
	 * memory of its own and reads empty, as no live process does: then
	 * through a live thread.
	 */
	j->via = pid;
	r = read_maps(pid, &maps, &nmaps);
	if (r == 0 && nmaps == 0) {
		free(maps);
		maps = NULL;
		r = procfs_live_task(pid, &j->via);
		if (r < 0) {
			snprintf(j->res->message, sizeof(j->res->message), "process %d has exited", pid);
			return -BTG_ERR_GONE;
		}
		r = read_maps(j->via, &maps, &nmaps);
	}
	if (r < 0) {
		snprintf(j->res->message, sizeof(j->res->message), "cannot read /proc/%d/maps: %s",
			 pid, strerror(-r));
		return procfs_gone(r) ? -BTG_ERR_GONE : r;
	}
	/* Without memory for it the report reads the objects itself. */
	j->objects = calloc(1, sizeof(*j->objects));
	if (j->objects && facts_objects_from_maps(j->objects, maps, nmaps) < 0) {
		facts_free(j->objects);
		free(j->objects);
		j->objects = NULL;
	}
	return patch_begin(&j->caller, pid, j->via, maps, nmaps, pin, action, deadline_ms, j->res,
			   &j->patch);
}

static int step(struct action_job *j, uint64_t *ret_wake_ms);

int action_start(const struct auth_caller *caller, unsigned action, uint32_t deadline_ms,
		 struct action_target *want, struct proto_result *res,
		 struct action_job **reterr_job, uint64_t *ret_wake_ms)
{
	struct patch_pin pin = { .pidfd = -1 };
	struct action_job *j;
	int r;

	bool walk = action & PATCH_WALK;

	action &= ~PATCH_WALK;
	*reterr_job = NULL;
	memset(res, 0, sizeof(*res));
	res->pid = want->pid;
	res->action = (uint8_t)action;
	res->state = PROTO_PROC_UNKNOWN;
	res->uid = PROTO_UID_UNKNOWN;
	j = calloc(1, sizeof(*j));
	if (!j) {
		snprintf(res->message, sizeof(res->message), "out of memory");
		res->error = ENOMEM;
		record_action(caller, want->ours ? want->ours : want->pid, "", res, want->selected);
		pin_close(&want->pidfd);
		return 0;
	}
	j->caller = *caller;
	j->target = want;
	j->res = res;
	j->via_fresh = true;   /* until the first later step */
	r = prepare(caller, action, want, &pin, &j->uid, j->exe, sizeof(j->exe), res->message,
		    sizeof(res->message));
	if (r == 0) {
		j->prepared = true;
		j->start_ticks = pin.start_ticks;
	}
	if (r == 0 && action == PROTO_ACTION_AT_EXEC)
		r = exec_begin(caller, want->ours, &pin, walk, deadline_ms, res, &j->exec);
	else if (r == 0)
		r = start_patch(j, action | (walk ? PATCH_WALK : 0), deadline_ms, &pin);
	if (r < 0 || (!j->patch && !j->exec))
		return action_end(j, r);
	*reterr_job = j;
	r = step(j, ret_wake_ms);
	if (r != ACTION_AGAIN && r != ACTION_ARMED)
		*reterr_job = NULL;
	return r;
}


int action_step(struct action_job *j, uint64_t *ret_wake_ms)
{
	j->via_fresh = false;   /* a later turn: the task read through may have gone */
	return step(j, ret_wake_ms);
}

static int step(struct action_job *j, uint64_t *ret_wake_ms)
{
	int r;

	if (j->exec) {
		r = exec_step(j->exec, ret_wake_ms);
		if (r == EXEC_AGAIN || r == EXEC_ARMED)
			return r == EXEC_AGAIN ? ACTION_AGAIN : ACTION_ARMED;
		return action_end(j, r);
	}
	r = patch_step(j->patch, ret_wake_ms);
	if (r == PATCH_AGAIN)
		return ACTION_AGAIN;
	if (r == -BTG_ERR_SHARED && patch_sharer_refused(j->patch))
		say_sharer(&j->caller, patch_sharer_refused(j->patch), j->res->message,
			   sizeof(j->res->message));
	return action_end(j, r);
}

void action_cancel(struct action_job *j, int err, const char *why)
{
	if (j->exec)
		action_end(j, exec_cancel(j->exec, err, why));
	else
		action_end(j, patch_cancel(j->patch, err, why));
}
