// SPDX-License-Identifier: MIT
/*
 * A request's targets: resolve and pin them when the request is read,
 * then, one per turn, check the pin, authorize the caller, run the
 * procedure and log the outcome.  This is the decider for a target, so it
 * is the one place that logs about it.
 *
 * What a caller may learn (SECURITY.md, "What a refused caller learns"):
 * a PID it may not act on is answered "denied: you may not act on it" and
 * nothing more; if the caller's own /proc hides such processes
 * (hidepid=invisible), exactly as if no process had that PID.  --tree
 * lists and descends only through processes the caller may act on.
 */
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "action.h"
#include "exec.h"
#include "execmaps.h"
#include "log.h"
#include "patch.h"
#include "pidns.h"
#include "pin.h"
#include "facts.h"
#include "procfs.h"
#include "report.h"
#include "select.h"
#include "timeutil.h"

/* --tree goes no deeper than this below a named PID. */
#define TREE_MAX_DEPTH 64

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
 * The caller may not act on the target: what it is told.  The reason in
 * full (owner, ids, dumpability) goes to the log only.
 */
static int refuse(const struct action_target *t, int r, const char *detail)
{
	log_msg(LOG_DEBUG, "PID %d (ours %d) refused: %s", t->pid, (int)t->ours, detail);
	return t->hidden ? -BTG_ERR_NOPROC : r;
}

/* 0 when the caller may act on the process facts describes, else its refusal. */
static int judge(const struct auth_caller *caller, const struct action_target *t,
		 const struct auth_target *facts)
{
	char detail[PROTO_MAX_MESSAGE + 1];
	int r = auth_check(caller, facts, detail, sizeof(detail));

	return r < 0 ? refuse(t, r, detail) : 0;
}

/* 0 when the caller may act on pid, else the refusal it gets (see refuse()). */
static int authorize(const struct auth_caller *caller, const struct action_target *t, pid_t pid,
		     struct auth_target *ret)
{
	if (auth_read_target(pid, ret) < 0)
		return -BTG_ERR_NOPROC;
	return judge(caller, t, ret);
}

/*
 * t passed authorize() at arrival with these facts, read while its pidfd
 * pinned it: keep what the turn may use.
 */
static void authorized(struct action_target *t, const struct auth_target *facts)
{
	t->authorized = true;
	t->uid = facts->status.uid[0];
	if (t->pidfd >= 0)
		t->start = facts->starttime;   /* 0 when a selector did not read it */
}

/* ------------------------------------------------------ at arrival -- */

struct frame {
	pid_t *kids;               /* daemon's numbers */
	size_t nkids, next;
};

struct action_expansion {
	struct auth_caller caller;
	bool have_view, hidden, tree;
	bool warned_limit;
	size_t max;                /* targets at most: PROTO_MAX_PIDS, or PROTO_MAX_SELECTED */
	/* A selector request: every process of the daemon's /proc, in turn. */
	bool selecting, at_risk;
	struct proto_select sel;   /* the patterns rule points into */
	struct select_rule rule;
	unsigned need;             /* FACTS_* the rule reads */
	struct action_matcher matcher;   /* a policy's candidates: instead of rule */
	pid_t *all;
	size_t nall, next_all;
	/* A --tree relist: descend again from t[relist_next..relist_end). */
	size_t relist_next, relist_end;
	struct pidns_view view;
	struct pidns_scan *scan;   /* another PID namespace: until complete */
	int32_t *pids;             /* as named */
	uint32_t npids, next_pid;
	struct frame stack[TREE_MAX_DEPTH + 1];
	int depth;
	struct action_target *t;
	size_t n, cap;
};

static bool listed(const struct action_expansion *x, int32_t pid)
{
	for (size_t i = 0; i < x->n; i++)
		if (x->t[i].pid == pid)
			return true;
	return false;
}

/*
 * Pins t (named t->pid by the caller) as it is now.  A non-root caller is
 * authorized here too, while the process is pinned: what it is told later
 * if the process exits before its turn ("gone") must not reveal a process
 * it may not see.  Root is authorized at the turn only (it may act on
 * every process but the daemon and kernel threads).
 */
static void pin_target(struct action_expansion *x, struct action_target *t, bool authorize_now)
{
	struct auth_target facts;
	struct procfs_stat st;
	int r;

	if (!x->have_view) {
		t->err = -BTG_ERR_NOPROC;
		return;
	}
	if (x->view.same)
		t->ours = t->pid;
	else if (pidns_scan_lookup(x->scan, t->pid, &t->ours) < 0) {
		t->err = -BTG_ERR_NOPROC;
		return;
	}
	r = pin_open(t->ours, &t->pidfd);
	if (r == -ESRCH) {
		t->err = -BTG_ERR_NOPROC;
		return;
	}
	if (r == -BTG_ERR_LIMIT) {
		/* Once per request: a 4,096-PID request must not write 4,096 lines. */
		if (!x->warned_limit)
			log_msg(LOG_WARNING, "client pid=%d: cannot pin PID %d: %u of %u pins in use",
				(int)x->caller.pid, (int)t->ours, pin_count(), pin_budget());
		x->warned_limit = true;
		t->err = r;
		return;
	}
	if (r == -EINVAL) {
		/* pidfd_open refuses a TID that is not a process. */
		t->thread = true;
		t->err = -BTG_ERR_NOPROC;
	} else if (r == -ENOSYS) {
		/* No pidfds: the start time is the whole pin. */
		if (procfs_read_stat(t->ours, &st) < 0) {
			t->err = -BTG_ERR_NOPROC;
			return;
		}
		t->start = st.starttime;
	} else if (r < 0) {
		t->err = r;
		return;
	}
	if (authorize_now || t->thread) {
		r = x->caller.uid == 0 && t->thread ? 0 : authorize(&x->caller, t, t->ours, &facts);
		if (r < 0) {
			t->err = r;
			t->thread = false;
			/* Kept: the audit log names the refused target at its turn. */
			return;
		}
		if (!t->thread)
			authorized(t, &facts);
	}
	if (t->err)
		pin_close(&t->pidfd);
}

/*
 * Appends a target for the caller's pid; NULL at the limit, or when --tree
 * already listed it (a plain request may name a PID twice, and gets two
 * answers).
 */
static struct action_target *add_target(struct action_expansion *x, int32_t pid)
{
	struct action_target *t;

	/* One listing of /proc names each process once; --tree and a policy's
	 * candidates may name one twice. */
	if (x->n >= x->max || ((x->tree || x->matcher.match) && listed(x, pid)))
		return NULL;
	if (x->n == x->cap) {
		size_t cap = x->cap ? x->cap * 2 : 16;
		struct action_target *p = realloc(x->t, cap * sizeof(*p));

		if (!p)
			return NULL;
		x->t = p;
		x->cap = cap;
	}
	t = &x->t[x->n++];
	*t = (struct action_target){ .pid = pid, .pidfd = -1, .hidden = x->hidden };
	return t;
}

/* --tree: goes down into t's children, when there is room for them. */
static void descend(struct action_expansion *x, const struct action_target *t)
{
	struct frame *f;

	if (!x->tree || t->err || x->depth > TREE_MAX_DEPTH || x->n >= x->max)
		return;
	f = &x->stack[x->depth];
	*f = (struct frame){ 0 };
	if (procfs_list_children(t->ours, &f->kids, &f->nkids) < 0)
		return;
	x->depth++;
}

static void add_named(struct action_expansion *x, int32_t pid)
{
	struct action_target *t = add_target(x, pid);

	if (!t)
		return;
	pin_target(x, t, x->caller.uid != 0 || x->tree);
	descend(x, t);
}

/*
 * A descendant joins the list only if the caller may act on it (root
 * too: no kernel threads, not the daemon), so --tree never names a
 * process the caller could not name itself.
 */
static void add_child(struct action_expansion *x, pid_t kid)
{
	struct action_target *t;
	int32_t theirs;

	if (x->view.same)
		theirs = kid;
	else if (pidns_to_caller(&x->view, kid, &theirs) < 0)
		return;
	t = add_target(x, theirs);
	if (!t)
		return;
	pin_target(x, t, true);
	if (t->err) {
		pin_close(&t->pidfd);
		x->n--;
		return;
	}
	descend(x, t);
}

/* The selector as select.c takes it; the patterns stay in x->sel. */
static void rule_from_select(struct action_expansion *x)
{
	const struct proto_select *sel = &x->sel;

	x->rule = (struct select_rule){
		.all = (sel->fields & (PROTO_SEL_ALL | PROTO_SEL_AT_RISK)) != 0,
		.have_uid = (sel->fields & PROTO_SEL_UID) != 0,
		.uid = sel->uid,
		.exe = sel->fields & PROTO_SEL_EXE ? sel->exe : NULL,
		.cmdline = sel->fields & PROTO_SEL_CMDLINE ? sel->cmdline : NULL,
		.cgroup = sel->fields & PROTO_SEL_CGROUP ? sel->cgroup : NULL,
		.maps = sel->fields & PROTO_SEL_MAPS ? sel->maps : NULL,
	};
	x->at_risk = (sel->fields & PROTO_SEL_AT_RISK) != 0;
	x->need = facts_needed(&x->rule, x->at_risk);
}

static bool matches(const struct action_expansion *x, const struct facts *f)
{
	if (x->matcher.match)
		return x->matcher.match(x->matcher.ctx, &f->p);
	return select_match(&x->rule, &f->p) &&
	       (!x->at_risk || select_risk(f->p.objects, f->p.nobjects, NULL, NULL) != SELECT_RISK_NONE);
}

/*
 * True when a fact the rule needs read empty: a process whose main thread
 * left with pthread_exit() has no executable, command line or maps through
 * its PID, and must be looked at through a live thread before it is judged.
 */
static bool read_empty(const struct facts *f, unsigned need)
{
	return ((need & FACTS_EXE) && !f->exe[0]) || ((need & FACTS_CMDLINE) && !f->cmdline[0]) ||
	       ((need & FACTS_OBJECTS) && !f->p.nobjects);
}

/*
 * Whether the pinned process pid matches the request's selector; *auth is
 * what its authorization reads, which also gives the uid and the state.
 */
static bool selected(struct action_expansion *x, pid_t pid, int pidfd, struct auth_target *auth)
{
	unsigned need = x->need & ~FACTS_UID;
	struct facts f;
	bool match = false;

	if (facts_read(pid, need, &f) < 0)
		goto out;
	/* Most of a node fails a pattern: those cost no status read. */
	if (!x->matcher.match && !x->rule.have_uid && !read_empty(&f, need) && !matches(x, &f))
		goto out;
	if ((pidfd >= 0 ? auth_read_pinned_target(pid, auth) : auth_read_target(pid, auth)) < 0)
		goto out;
	/* 'Z': a zombie, with nothing to guard, or a main thread that left with pthread_exit(). */
	if ((auth->status.state == 'Z' || auth->status.state == 'X') &&
	    facts_read_through_live(pid, need, &f) < 0)
		goto out;
	/* Read while pinned, then checked: the facts are that process's own. */
	if (pidfd >= 0 && pin_state(pidfd) != PIN_ALIVE)
		goto out;
	f.p.uid = auth->status.uid[0];
	match = matches(x, &f);
out:
	facts_free(&f);
	return match;
}

/*
 * One process of the daemon's /proc, as a selector request sees it: it
 * joins only if it matches, the caller can see it in its own PID
 * namespace, and the caller may act on it (root too: never the daemon or
 * a kernel thread).  Nothing is said of the others.
 */
static int add_selected(struct action_expansion *x, pid_t pid)
{
	struct auth_target facts;
	struct action_target *t;
	int32_t theirs = pid;
	int pidfd = -1, r;

	/* Never the daemon, nor the client asking (its command line often matches). */
	if (pid == getpid() || pid == x->caller.pid)
		return 0;
	if (!x->view.same && pidns_to_caller(&x->view, pid, &theirs) < 0)
		return 0;
	r = pin_open(pid, &pidfd);
	if (r == -BTG_ERR_LIMIT) {
		log_msg(LOG_WARNING, "client pid=%d: selection stopped: %u of %u pins in use",
			(int)x->caller.pid, pin_count(), pin_budget());
		return r;
	}
	if (r < 0 && r != -ENOSYS)
		return 0;   /* gone */
	if (!selected(x, pid, pidfd, &facts))
		goto skip;
	t = add_target(x, theirs);
	if (!t) {
		if (x->n < x->max)
			goto skip;   /* listed already (by --tree) */
		pin_close(&pidfd);
		return -BTG_ERR_LIMIT;
	}
	t->ours = pid;
	t->pidfd = pidfd;
	t->selected = true;
	if (pidfd < 0)
		t->start = facts.starttime;   /* no pidfds: the start time is the whole pin */
	if (judge(&x->caller, t, &facts) < 0) {
		pin_close(&t->pidfd);
		x->n--;
		return 0;
	}
	authorized(t, &facts);
	descend(x, t);
	return 0;
skip:
	pin_close(&pidfd);
	return 0;
}

int action_expand_new(const struct auth_caller *caller, const struct proto_request *req,
		      struct action_expansion **ret)
{
	struct action_expansion *x = calloc(1, sizeof(*x));
	int r;

	if (!x)
		return -ENOMEM;
	x->caller = *caller;
	x->tree = (req->flags & PROTO_FLAG_TREE) != 0;
	x->max = PROTO_MAX_PIDS;
	if (req->sel.fields) {
		x->selecting = true;
		x->max = PROTO_MAX_SELECTED;
		x->sel = req->sel;
		rule_from_select(x);
		r = procfs_list_processes(&x->all, &x->nall);
		if (r < 0)
			goto out_free;
	}
	x->npids = req->npids < PROTO_MAX_PIDS ? req->npids : PROTO_MAX_PIDS;
	x->pids = malloc((x->npids ? x->npids : 1) * sizeof(*x->pids));
	if (!x->pids) {
		r = -ENOMEM;
		goto out_free;
	}
	memcpy(x->pids, req->pids, x->npids * sizeof(*x->pids));
	/* Every PID then answers "no process": the caller is gone or unreadable. */
	x->have_view = pidns_view_of(caller->pid, &x->view) == 0;
	x->hidden = caller->uid != 0 && auth_caller_hides_pids(caller->pid);
	if (!x->have_view)
		x->nall = 0;   /* the caller is gone: it selects nothing */
	/* Named PIDs need the caller's numbers translated; a selector starts from ours. */
	if (x->have_view && !x->view.same && !x->selecting) {
		r = pidns_scan_new(&x->view, &x->scan);
		if (r < 0)
			goto out_free;
	}
	*ret = x;
	return 0;

out_free:
	action_expand_free(x);
	return r;
}

int action_expand_candidates(const struct auth_caller *caller, const pid_t *pids, size_t n,
			     const struct action_matcher *m, struct action_expansion **ret)
{
	struct action_expansion *x = calloc(1, sizeof(*x));
	int r = -ENOMEM;

	if (!x)
		return -ENOMEM;
	x->caller = *caller;
	x->max = PROTO_MAX_SELECTED;
	x->selecting = true;
	x->matcher = *m;
	x->need = m->need;
	x->all = malloc((n ? n : 1) * sizeof(*x->all));
	x->pids = malloc(sizeof(*x->pids));
	if (!x->all || !x->pids)
		goto out_free;
	memcpy(x->all, pids, n * sizeof(*pids));
	x->nall = n;
	/* Our own numbers: the caller is the daemon, in its own namespace. */
	x->have_view = pidns_view_of(caller->pid, &x->view) == 0;
	if (!x->have_view || !x->view.same) {
		r = -EINVAL;
		goto out_free;
	}
	*ret = x;
	return 0;

out_free:
	action_expand_free(x);
	return r;
}

int action_expand_relist(const struct auth_caller *caller, struct action_target *t, size_t n,
			 size_t from, struct action_expansion **ret)
{
	struct action_expansion *x = calloc(1, sizeof(*x));

	if (!x) {
		action_targets_free(t, n);
		return -ENOMEM;
	}
	x->caller = *caller;
	x->tree = true;
	x->max = PROTO_MAX_SELECTED;
	x->t = t;
	x->n = x->cap = n;
	x->relist_next = from;
	x->relist_end = n;
	x->have_view = pidns_view_of(caller->pid, &x->view) == 0;
	x->hidden = caller->uid != 0 && auth_caller_hides_pids(caller->pid);
	if (!x->have_view)
		x->relist_next = x->relist_end;   /* the caller is gone: nothing more */
	*ret = x;
	return 0;
}

/* A target that ran: descend into its children if it is still that process. */
static void relist_one(struct action_expansion *x, struct action_target *t)
{
	struct procfs_stat st;

	if (t->err || t->ours <= 0 || t->pidfd >= 0)
		return;
	/* action_end() recorded its start time: the PID must still name it. */
	if (procfs_read_stat(t->ours, &st) < 0 || st.starttime != t->start)
		return;
	descend(x, t);
}

int action_expand_step(struct action_expansion *x)
{
	uint64_t start = now_us(), until = start + ACTION_STEP_US;

	if (x->scan) {
		int r = pidns_scan_step(x->scan, ACTION_STEP_US);

		if (r <= 0)
			return r;
	}
	while (now_us() < until) {
		if (x->depth > 0) {
			struct frame *f = &x->stack[x->depth - 1];

			if (f->next < f->nkids && x->n < x->max) {
				add_child(x, f->kids[f->next++]);
			} else {
				free(f->kids);
				f->kids = NULL;
				x->depth--;
			}
		} else if (x->next_pid < x->npids) {
			add_named(x, x->pids[x->next_pid++]);
		} else if (x->relist_next < x->relist_end) {
			relist_one(x, &x->t[x->relist_next++]);
		} else if (x->next_all < x->nall) {
			int r = add_selected(x, x->all[x->next_all++]);

			if (r < 0)
				return r;
		} else {
			return 1;
		}
	}
	return 0;
}

void action_expand_end(struct action_expansion *x, struct action_target **ret, size_t *ret_n)
{
	*ret = x->t;
	*ret_n = x->n;
	x->t = NULL;
	x->n = 0;
	action_expand_free(x);
}

void action_expand_free(struct action_expansion *x)
{
	if (!x)
		return;
	while (x->depth > 0)
		free(x->stack[--x->depth].kids);
	action_targets_free(x->t, x->n);
	pidns_scan_free(x->scan);
	free(x->all);
	free(x->pids);
	free(x);
}

void action_targets_free(struct action_target *t, size_t n)
{
	for (size_t i = 0; t && i < n; i++)
		pin_close(&t[i].pidfd);
	free(t);
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
	return st && st->starttime == t->start;
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

/* The caller's rights on t now, as authorize() checks them: 0, or the answer. */
static int check_rights(const struct auth_caller *caller, unsigned action,
			const struct action_target *t, struct auth_target *target, char *why,
			size_t why_len)
{
	int32_t asked = t->pid;
	pid_t pid = t->ours;
	int r;

	r = authorize(caller, t, pid, target);
	if (t->pidfd >= 0 && !pin_holds(t, NULL))
		return explain_exited(t, why, why_len);
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
 * on the process.  Everything read here is about the pinned process: each
 * read is followed by a look at the pin, and a live pinned process keeps
 * its PID.
 */
static int prepare(const struct auth_caller *caller, unsigned action,
		   const struct action_target *t, struct patch_pin *pin, uid_t *ret_uid,
		   char *exe, size_t exe_len, char *why, size_t why_len)
{
	struct auth_target target;
	struct procfs_stat st;
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
	if (t->pidfd >= 0 && !pin_holds(t, NULL))
		return explain_exited(t, why, why_len);
	if (takes_arrival_facts(caller, action, t)) {
		/* Nothing to read again: the pidfd pins what arrival read. */
		pin->pidfd = t->pidfd;
		pin->starttime = t->start;
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
	/* Read by authorize(), after which the pin held (a pidfd) or is compared now. */
	st.starttime = target.starttime;
	if (!pin_holds(t, &st)) {
		if (t->pidfd >= 0)
			return explain_exited(t, why, why_len);
		snprintf(why, why_len,
			 "PID %d now names another process than when the request arrived", asked);
		return -BTG_ERR_REUSED;
	}
	/* patch.c re-checks this pair before every step: the start time read
	 * while the pidfd showed the process alive is exactly its own. */
	pin->pidfd = t->pidfd;
	pin->starttime = st.starttime;
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
	uint64_t starttime;        /* the pinned process's, for a --tree relist */
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
	pid_t via;

	if (j->prepared) {
		/* patch_end() below must not have run yet: the sites are in res. */
		t->start = j->starttime;   /* for a --tree relist (action_expand_relist) */
		/* Authorized: the report may say what the process is.  If it has
		 * gone meanwhile, the pin says so and nothing is reported. */
		via = j->via;
		if (((j->via && j->via_fresh) || procfs_live_task(t->ours, &via) == 0) &&
		    still_pinned(t)) {
			struct report_known known = {
				.uid = j->uid, .exe = j->exe,
				.objects = j->objects ? j->objects->p.objects : NULL,
				.nobjects = j->objects ? j->objects->p.nobjects : 0,
			};

			report_fill(via, j->objects ? &known : NULL, j->res);
			if (!still_pinned(t))
				report_clear(j->res);
		}
	}
	j->res->error = proto_error_from_negative(r);
	log_action(&j->caller, t->ours ? t->ours : t->pid, j->exe, j->res, t->selected);
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
 * patch.c's part.  A status needs only the executable file mappings (the
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
		 struct action_job **ret, uint64_t *ret_wake_ms)
{
	struct patch_pin pin = { .pidfd = -1 };
	struct action_job *j;
	int r;

	*ret = NULL;
	memset(res, 0, sizeof(*res));
	res->pid = want->pid;
	res->action = (uint8_t)action;
	res->state = PROTO_PROC_UNKNOWN;
	res->uid = PROTO_UID_UNKNOWN;
	j = calloc(1, sizeof(*j));
	if (!j) {
		snprintf(res->message, sizeof(res->message), "out of memory");
		res->error = ENOMEM;
		log_action(caller, want->ours ? want->ours : want->pid, "", res, want->selected);
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
		j->starttime = pin.starttime;
	}
	if (r == 0 && action == PROTO_ACTION_AT_EXEC)
		r = exec_begin(caller, want->ours, &pin, deadline_ms, res, &j->exec);
	else if (r == 0)
		r = start_patch(j, action, deadline_ms, &pin);
	if (r < 0 || (!j->patch && !j->exec))
		return action_end(j, r);
	*ret = j;
	r = step(j, ret_wake_ms);
	if (r != ACTION_AGAIN && r != ACTION_ARMED)
		*ret = NULL;
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
	return action_end(j, r);
}

void action_cancel(struct action_job *j, int err, const char *why)
{
	if (j->exec)
		action_end(j, exec_cancel(j->exec, err, why));
	else
		action_end(j, patch_cancel(j->patch, err, why));
}
