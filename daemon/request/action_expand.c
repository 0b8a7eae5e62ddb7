// SPDX-License-Identifier: MIT
/*
 * A request's targets at arrival: the PIDs the caller named (or the
 * processes a selector or a policy rule reaches), resolved in the caller's
 * PID namespace, --tree expanded, each pinned with a pidfd the moment the
 * request is read and, for a non-root caller, authorized while pinned
 * (authorize.c).  A
 * bounded step at a time (action_expand_step), which queue.c schedules
 * between other clients' turns.  What happens at each target's turn is
 * action.c's.
 *
 * What a caller may learn (SECURITY.md, "What a refused caller learns"):
 * a PID it may not act on is answered "denied: you may not act on it" and
 * nothing more; if the caller's own /proc hides such processes
 * (hidepid=invisible), exactly as if no process had that PID.  --tree
 * lists and descends only through processes the caller may act on.
 */
#include <errno.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "action.h"
#include "authorize.h"
#include "facts.h"
#include "log.h"
#include "pidns.h"
#include "pin.h"
#include "procfs.h"
#include "select.h"
#include "timeutil.h"

/* --tree goes no deeper than this below a named PID. */
#define TREE_MAX_DEPTH 64

/*
 * t passed authorize() at arrival with these facts, read while its pidfd
 * pinned it: keep what the turn may use.
 */
static void authorized(struct action_target *t, const struct auth_target *facts)
{
	t->authorized = true;
	t->uid = facts->status.uid[0];
	if (t->pidfd >= 0)
		t->start_ticks = facts->start_ticks;   /* 0 when a selector did not read it */
}

/* ------------------------------------------------------ at arrival -- */

struct frame {
	pid_t *kids;               /* daemon's numbers */
	size_t nkids, next;
};

struct action_expansion {
	struct auth_caller caller;
	bool have_view, hidden, tree;
	int view_err;              /* why not have_view: what every named PID answers */
	bool warned_limit;
	bool warned_short;         /* a process could not be looked at: logged once */
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
		/* The caller gone or unreadable: "no process"; the daemon short of
		 * descriptors or memory: that, not a claim about the target. */
		t->err = proto_shortage(x->view_err) ? x->view_err : -BTG_ERR_NOPROC;
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
		t->start_ticks = st.start_ticks;
	} else if (r < 0) {
		t->err = r;
		return;
	}
	if (authorize_now || t->thread) {
		const struct authorize_who who = action_who(t);

		r = x->caller.uid == 0 && t->thread ? 0 : authorize(&x->caller, &who, t->ours, &facts);
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
 * Whether the pinned process pid matches the request's selector: 1 or 0,
 * or the daemon's own shortage of descriptors or memory (which says
 * nothing of the process: it may match).  *auth is what its authorization
 * reads, which also gives the uid and the state.
 */
static int selected(struct action_expansion *x, pid_t pid, int pidfd, struct auth_target *auth)
{
	unsigned need = x->need & ~FACTS_UID;
	struct facts f;
	int r;

	r = facts_read(pid, need, &f);
	if (r < 0)
		goto out;
	r = 0;
	/* Most of a node fails a pattern: those cost no status read. */
	if (!x->matcher.match && !x->rule.have_uid && !read_empty(&f, need) && !matches(x, &f))
		goto out;
	r = pidfd >= 0 ? auth_read_pinned_target(pid, auth) : auth_read_target(pid, auth);
	if (r < 0)
		goto out;
	/* 'Z': a zombie, with nothing to guard, or a main thread that left with pthread_exit(). */
	if (auth->status.state == 'Z' || auth->status.state == 'X') {
		r = facts_read_through_live(pid, need, &f);
		if (r < 0)
			goto out;
	}
	/* Read while pinned, then checked: the facts are that process's own. */
	r = 0;
	if (pidfd >= 0 && pin_state(pidfd) != PIN_ALIVE)
		goto out;
	f.p.uid = auth->status.uid[0];
	r = matches(x, &f);
out:
	facts_free(&f);
	return proto_shortage(r) ? r : r > 0;
}

/*
 * One process of the daemon's /proc, as a selector request sees it: it
 * joins only if it matches, the caller can see it in its own PID
 * namespace, and the caller may act on it (root too: never the daemon or
 * a kernel thread).  Nothing is said of the others.  A process the daemon
 * could not look at for want of descriptors or memory is never left out
 * as if it did not match: root's selection lists it with that error, and
 * anyone else's ends with it (their answer must not name a process they
 * may not see).
 */
/*
 * pid (theirs in the caller's PID namespace, 0 when unknown) could not be
 * looked at, for want of descriptors or memory (err): root gets it as a
 * target answered with err; anyone else's selection ends.
 */
static int unlooked(struct action_expansion *x, pid_t pid, int32_t theirs, int err)
{
	struct action_target *t;

	if (x->caller.uid != 0 || !theirs)
		return err;
	if (!x->warned_short)
		log_msg(LOG_WARNING, "client pid=%d: cannot look at PID %d: %s",
			(int)x->caller.pid, (int)pid, proto_strerror(err));
	x->warned_short = true;
	t = add_target(x, theirs);
	if (!t)
		return x->n < x->max ? 0 : -BTG_ERR_LIMIT;
	t->ours = pid;
	t->selected = true;
	t->err = err;
	return 0;
}

static int add_selected(struct action_expansion *x, pid_t pid)
{
	struct auth_target facts;
	struct authorize_who who;
	struct action_target *t;
	int32_t theirs = pid;
	int pidfd = -1, r;

	/* Never the daemon, nor the client asking (its command line often matches). */
	if (pid == getpid() || pid == x->caller.pid)
		return 0;
	if (!x->view.same) {
		r = pidns_to_caller(&x->view, pid, &theirs);
		if (proto_shortage(r))
			return unlooked(x, pid, 0, r);
		if (r < 0)
			return 0;
	}
	r = pin_open(pid, &pidfd);
	if (r == -BTG_ERR_LIMIT) {
		log_msg(LOG_WARNING, "client pid=%d: selection stopped: %u of %u pins in use",
			(int)x->caller.pid, pin_count(), pin_budget());
		return r;
	}
	if (proto_shortage(r))
		return unlooked(x, pid, theirs, r);
	if (r < 0 && r != -ENOSYS)
		return 0;   /* gone */
	r = selected(x, pid, pidfd, &facts);
	if (r < 0) {
		pin_close(&pidfd);
		return unlooked(x, pid, theirs, r);
	}
	if (!r)
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
		t->start_ticks = facts.start_ticks;   /* no pidfds: the start time is the whole pin */
	who = action_who(t);
	if (authorize_judge(&x->caller, &who, &facts) < 0) {
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
	x->view_err = pidns_view_of(caller->pid, &x->view);
	x->have_view = x->view_err == 0;
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
	x->view_err = pidns_view_of(caller->pid, &x->view);
	x->have_view = x->view_err == 0;
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
	x->view_err = pidns_view_of(caller->pid, &x->view);
	x->have_view = x->view_err == 0;
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
	if (procfs_read_stat(t->ours, &st) < 0 || st.start_ticks != t->start_ticks)
		return;
	descend(x, t);
}

int action_expand_step(struct action_expansion *x)
{
	uint64_t start_us = now_us(), until_us = start_us + ACTION_STEP_US;

	if (x->scan) {
		int r = pidns_scan_step(x->scan, ACTION_STEP_US);

		if (r <= 0)
			return r;
	}
	while (now_us() < until_us) {
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
