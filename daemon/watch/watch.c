// SPDX-License-Identifier: MIT
/*
 * Auto-guard (watch.h): the policy in force, the /proc sweep, and the
 * requests the daemon makes itself.
 *
 * The table: one entry per process the last sweep saw, sorted by PID,
 * with what tells a change cheaply (start time, vsize) and what the
 * policy was asked about (a hash of the mapped objects).  A sweep builds
 * the next table while walking /proc's sorted PID list next to the old
 * one (a merge, no hashing of PIDs), a bounded step at a time.
 *
 * The cheap read: an entry keeps /proc/PID/statm open (up to
 * pin_sweep_fds() of them), and a sweep preads its first number, the
 * size of the mappings - the same total_vm as stat's vsize, at a third of
 * the cost of opening and reading stat (measured: bench/node).  The open
 * descriptor also says when the process is gone: it reads ESRCH from
 * then on, even once the PID names another process, so no start time is
 * compared.  Entries beyond the budget read stat each time, with its
 * start time as the check that the PID still names the same process.
 * Kernel threads and zombies stay in the table (their statm reads are as
 * cheap), so they are not looked at again and again.
 *
 * A process whose request failed for a reason that may pass (busy, a
 * thread that did not stop, no pin left) is asked again at the next
 * sweeps, at most RETRIES times (retry.c keeps count); one that cannot be
 * guarded (no backtrace(), foreign bytes, gone) waits for its mappings to
 * change.
 *
 * Programs noticed at their exec are looked at by watchexec.c, which this
 * file calls (never the other way round); the policy is asked here.
 */
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "action.h"
#include "facts.h"
#include "log.h"
#include "pin.h"
#include "procfs.h"
#include "record.h"
#include "timeutil.h"
#include "watch.h"
#include "watch_int.h"

/* ------------------------------------------------------------ policy -- */

static int new_stats(const struct policy *p, const struct rule_stats *old, size_t nold,
		     struct rule_stats **ret)
{
	struct rule_stats *s = calloc(p->nrules ? p->nrules : 1, sizeof(*s));

	if (!s)
		return -ENOMEM;
	for (size_t i = 0; i < p->nrules; i++) {
		snprintf(s[i].name, sizeof(s[i].name), "%s", p->rules[i].name);
		for (size_t j = 0; j < nold; j++)
			if (!strcmp(old[j].name, s[i].name))
				s[i] = old[j];
	}
	*ret = s;
	return 0;
}

/* The sweep's per-rule candidate lists, for policy p. */
static int new_candidates(struct watch *w)
{
	size_t n = w->policy->nrules ? w->policy->nrules : 1;

	w->cand = calloc(n, sizeof(*w->cand));
	w->ncand = calloc(n, sizeof(*w->ncand));
	w->cap_cand = calloc(n, sizeof(*w->cap_cand));
	return w->cand && w->ncand && w->cap_cand ? 0 : -ENOMEM;
}

static void free_candidates(struct watch *w)
{
	for (size_t i = 0; w->cand && i < w->policy->nrules; i++)
		free(w->cand[i]);
	free(w->cand);
	free(w->ncand);
	free(w->cap_cand);
	w->cand = NULL;
	w->ncand = w->cap_cand = NULL;
}

static void close_statm(struct watch *w, int *fd);

static void close_fds(struct watch *w, struct proc *p, size_t n)
{
	for (size_t i = 0; i < n; i++)
		close_statm(w, &p[i].statm);
}

/*
 * Ends a sweep half done (a reload, or the end): its table is dropped.
 * The descriptors it took over from the last table are closed with it;
 * those processes are read the slow way once at the next sweep.
 */
static void sweep_abandon(struct watch *w)
{
	close_fds(w, w->fresh, w->nfresh);
	free(w->pids);
	free(w->fresh);
	w->pids = NULL;
	w->fresh = NULL;
	w->npids = w->next_pid = w->nfresh = w->cap_fresh = w->old = 0;
	for (size_t i = 0; w->ncand && i < w->policy->nrules; i++)
		w->ncand[i] = 0;
	w->sweeping = false;
}

static void set_policy(struct watch *w, struct policy *p, struct rule_stats *stats)
{
	if (w->policy) {
		sweep_abandon(w);
		free_candidates(w);
		policy_unref(w->policy);
	}
	free(w->stats);
	w->policy = p;
	w->stats = stats;
	w->need = policy_facts_needed(p) | FACTS_OBJECTS | FACTS_UID;
	/*
	 * Ask again about every process: a rule that is new now may take one
	 * whose objects have not changed.  A table entry keeps its stat
	 * sample, so the cost is one facts read per process, once.
	 */
	for (size_t i = 0; i < w->ntable; i++)
		w->table[i].objects = 0;
	noticed_clear(w->noticed);
	w->next_sweep_ms = 0;
}

int watch_new(struct queue *q, const char *path, bool required, struct policy *p,
	      const char *load_error, struct watch **ret)
{
	struct watch *w = calloc(1, sizeof(*w));
	struct rule_stats *stats;
	int r;

	if (!w)
		return -ENOMEM;
	TAILQ_INIT(&w->reqs);
	w->q = q;
	w->max_fds = pin_sweep_fds();
	w->page_size = sysconf(_SC_PAGESIZE);
	snprintf(w->path, sizeof(w->path), "%s", path);
	w->required = required;
	w->loaded = !load_error;
	if (load_error)
		snprintf(w->problem, sizeof(w->problem), "policy not loaded: %s; no policy rules are "
			 "in force", load_error);
	watch_events_init(&w->events);
	w->facts = malloc(sizeof(*w->facts));
	w->noticed = calloc(1, sizeof(*w->noticed));
	r = -ENOMEM;
	if (!w->facts || !w->noticed || new_stats(p, NULL, 0, &stats) < 0)
		goto out_free;
	set_policy(w, p, stats);
	r = new_candidates(w);
	if (r < 0)
		goto out_free;
	watch_events_sync(&w->events, watch_active(w) && w->policy->exec_events,
			  w->policy->interval_ms);
	*ret = w;
	return 0;

out_free:
	if (!w->policy)
		policy_unref(p);
	watch_free(w);
	return r;
}

bool watch_active(const struct watch *w)
{
	return w && w->policy->nguard > 0;
}

int watch_reload(struct watch *w, char *why, size_t why_len)
{
	struct policy_error err;
	struct rule_stats *stats;
	struct policy *p;
	int r = policy_load(w->path, w->required, &p, &err);

	if (r < 0) {
		policy_error_format(&err, why, why_len);
		if (w->loaded)
			snprintf(w->problem, sizeof(w->problem), "the last reload failed: %s; the "
				 "policy in force stays", why);
		else
			snprintf(w->problem, sizeof(w->problem), "policy not loaded: %s; no policy "
				 "rules are in force", why);
		log_msg(LOG_ERR, "reload: %s", w->problem);
		return r;
	}
	r = new_stats(p, w->stats, w->policy->nrules, &stats);
	if (r < 0) {
		policy_unref(p);
		snprintf(why, why_len, "out of memory");
		return r;
	}
	set_policy(w, p, stats);
	w->loaded = true;
	w->problem[0] = '\0';
	r = new_candidates(w);
	if (r < 0) {
		snprintf(why, why_len, "out of memory");
		return r;
	}
	log_msg(LOG_INFO, "policy reloaded from %s: %zu rule(s), %zu guard rule(s), sweep every %u ms",
		w->path, p->nrules, p->nguard, p->interval_ms);
	watch_events_sync(&w->events, watch_active(w) && w->policy->exec_events,
			  w->policy->interval_ms);
	return (int)p->nrules;
}

const char *watch_problem(const struct watch *w)
{
	return w && w->problem[0] ? w->problem : NULL;
}

uint32_t watch_last_sweep_s(const struct watch *w)
{
	return w ? w->last_sweep_end_s : 0;
}

int watch_rule(const struct watch *w, size_t i, struct proto_rule *ret)
{
	const struct policy_rule *r;
	const struct rule_stats *s;

	if (!w || i >= w->policy->nrules)
		return -ENOENT;
	r = &w->policy->rules[i];
	s = &w->stats[i];
	memset(ret, 0, sizeof(*ret));
	snprintf(ret->name, sizeof(ret->name), "%s", r->name);
	policy_describe(r, ret->match, sizeof(ret->match));
	ret->flags = r->exclude ? PROTO_RULE_EXCLUDE : 0;
	ret->hits = s->hits;
	ret->npids = s->nlast;
	memcpy(ret->pids, s->last, sizeof(ret->pids));
	return 0;
}

/* ----------------------------------------------------------- requests -- */

static struct request *request_of(struct queue_entry *e)
{
	return (struct request *)((char *)e - offsetof(struct request, e));
}

static struct rule_stats *stats_of(struct watch *w, const struct policy_rule *rule)
{
	for (size_t i = 0; i < w->policy->nrules; i++)
		if (!strcmp(w->stats[i].name, rule->name))
			return &w->stats[i];
	return NULL;   /* the rule went with a reload */
}

static void request_result(struct queue_entry *e, const struct proto_result *res)
{
	struct request *rq = request_of(e);
	struct watch *w = rq->w;
	struct rule_stats *s;

	retry_answered(&w->retries, res->pid, res->error);
	if (res->error != BTG_OK)
		return;
	/*
	 * A hit is a guard that wrote: a process found guarded already (a
	 * worker forked from a guarded server, everything asked again after a
	 * reload) is logged but is no news.
	 */
	s = stats_of(w, rq->rule);
	if (!s || !(res->flags & PROTO_RESULT_WROTE))
		return;
	s->hits++;
	memmove(s->last + 1, s->last, (PROTO_MAX_RULE_PIDS - 1) * sizeof(s->last[0]));
	s->last[0] = res->pid;
	if (s->nlast < PROTO_MAX_RULE_PIDS)
		s->nlast++;
}

static void request_end(struct request *rq)
{
	struct watch *w = rq->w;

	TAILQ_REMOVE(&w->reqs, rq, in_watch);
	w->nreqs--;
	policy_unref(rq->policy);
	free(rq);
}

static void request_done(struct queue_entry *e, uint32_t count)
{
	(void)count;
	request_end(request_of(e));
}

static void request_failed(struct queue_entry *e, int err)
{
	struct request *rq = request_of(e);

	if (err != -BTG_ERR_SHUTDOWN)
		log_msg(LOG_ERR, "rule %s: cannot list its processes: %s", rq->rule->name,
			proto_strerror(err));
	request_end(rq);
}

static const struct queue_ops request_ops = {
	.result = request_result,
	.done = request_done,
	.failed = request_failed,
};

/* At the pin: the policy is asked again, and must still pick this rule. */
static bool still_matches(const void *ctx, const struct select_proc *p)
{
	const struct request *rq = ctx;

	return policy_match(rq->policy, p) == rq->rule;
}

/* One request for rule i's candidates (pids, n of them), as root, named by the rule. */
static void submit_rule(struct watch *w, size_t i, const pid_t *pids, size_t n)
{
	struct auth_caller self = { .pid = getpid(), .uid = 0, .gid = 0 };
	struct action_expansion *x;
	struct request *rq;
	struct action_matcher m;
	int r;

	if (w->nreqs >= MAX_REQUESTS) {
		log_msg(LOG_DEBUG, "rule %s: %zu process(es) wait for the next sweep (%u requests queued)",
			w->policy->rules[i].name, n, w->nreqs);
		for (size_t k = 0; k < n; k++)
			retry_add(&w->retries, pids[k], RETRIES);
		return;
	}
	rq = calloc(1, sizeof(*rq));
	if (!rq)
		goto out_retry;
	rq->w = w;
	rq->policy = policy_ref(w->policy);
	rq->rule = &w->policy->rules[i];
	self.rule = rq->rule->name;
	m = (struct action_matcher){ .need = w->need, .match = still_matches, .ctx = rq };
	r = action_expand_candidates(&self, pids, n, &m, &x);
	if (r < 0)
		goto out_free;
	TAILQ_INSERT_HEAD(&w->reqs, rq, in_watch);
	w->nreqs++;
	log_msg(LOG_DEBUG, "rule %s: %zu candidate(s)", rq->rule->name, n);
	/* May answer at once (request_done frees rq). */
	r = queue_submit_targets(w->q, &rq->e, &request_ops, &self, PROTO_ACTION_GUARD,
				 rq->rule->walk ? PROTO_FLAG_WALK : 0, 0, x);
	if (r < 0) {
		request_end(rq);
		goto out_retry;
	}
	return;

out_free:
	policy_unref(rq->policy);
	free(rq);
out_retry:
	for (size_t k = 0; k < n; k++)
		retry_add(&w->retries, pids[k], RETRIES);
}

/* -------------------------------------------------------------- sweep -- */

static int add_candidate(struct watch *w, size_t rule, pid_t pid)
{
	if (w->ncand[rule] == w->cap_cand[rule]) {
		size_t cap = w->cap_cand[rule] ? w->cap_cand[rule] * 2 : 16;
		pid_t *p = realloc(w->cand[rule], cap * sizeof(*p));

		if (!p)
			return -ENOMEM;
		w->cand[rule] = p;
		w->cap_cand[rule] = cap;
	}
	w->cand[rule][w->ncand[rule]++] = pid;
	return 0;
}

static int keep(struct watch *w, const struct proc *p)
{
	if (w->nfresh == w->cap_fresh) {
		size_t cap = w->cap_fresh ? w->cap_fresh * 2 : 256;
		struct proc *n = realloc(w->fresh, cap * sizeof(*n));

		if (!n) {
			int fd = p->statm;

			close_statm(w, &fd);
			return -ENOMEM;   /* it is new again at the next sweep */
		}
		w->fresh = n;
		w->cap_fresh = cap;
	}
	w->fresh[w->nfresh++] = *p;
	return 0;
}

static const struct proc *find_proc(const struct proc *v, size_t n, pid_t pid)
{
	size_t lo = 0, hi = n;

	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;

		if (v[mid].pid == pid)
			return &v[mid];
		if (v[mid].pid < pid)
			lo = mid + 1;
		else
			hi = mid;
	}
	return NULL;
}

/*
 * Whether the sweep asked the policy about this very program already
 * (pid with this start time and objects hash, in the sweep under way or
 * the last one): a look at its exec would ask twice.
 */
static bool sweep_asked(const struct watch *w, pid_t pid, uint64_t start_ticks, uint64_t objects)
{
	/* Both tables are in PID order: the sweep walks /proc's sorted list. */
	const struct proc *p = w->sweeping ? find_proc(w->fresh, w->nfresh, pid) : NULL;

	if (!p)
		p = find_proc(w->table, w->ntable, pid);
	return p && p->start_ticks == start_ticks && p->objects == objects;
}

/* The last sweep's entry for pid, if any (the merge walks both lists in order). */
static struct proc *old_entry(struct watch *w, pid_t pid)
{
	while (w->old < w->ntable && w->table[w->old].pid < pid)
		w->old++;
	if (w->old < w->ntable && w->table[w->old].pid == pid)
		return &w->table[w->old];
	return NULL;
}

/*
 * The size of old's mappings through its kept statm: 0, or -ESRCH when
 * that process is gone (its PID may name another one now).
 */
static int read_statm(struct watch *w, const struct proc *old, uint64_t *ret)
{
	char buf[128], *end;
	unsigned long long pages;
	ssize_t n = pread(old->statm, buf, sizeof(buf) - 1, 0);

	if (n <= 0)
		return -ESRCH;
	buf[n] = '\0';
	pages = strtoull(buf, &end, 10);
	if (end == buf)
		return -ESRCH;
	*ret = (uint64_t)pages * (uint64_t)w->page_size;
	return 0;
}

/* statm of pid, opened to be kept, while the budget lasts; -1 otherwise. */
static int open_statm(struct watch *w, pid_t pid)
{
	char path[40];
	int fd;

	if (w->nfds >= w->max_fds)
		return -1;
	snprintf(path, sizeof(path), "/proc/%d/statm", (int)pid);
	fd = open(path, O_RDONLY | O_CLOEXEC);
	/* Never one of the last descriptors a request needs (the limit may
	 * have been lowered since the budget was sized: prlimit). */
	if (fd >= 0 && pin_fd_is_reserve(fd)) {
		close(fd);
		return -1;
	}
	if (fd >= 0)
		w->nfds++;
	return fd;
}

static void close_statm(struct watch *w, int *fd)
{
	if (*fd < 0)
		return;
	close(*fd);
	*fd = -1;
	w->nfds--;
}

/* One process: is it new or changed, and if so, does a rule take it? */
static void sweep_one(struct watch *w, pid_t pid)
{
	struct procfs_stat st;
	struct proc *old = old_entry(w, pid), now = { .pid = pid, .statm = -1 };
	const struct policy_rule *rule;
	struct retry *again;
	int r;

	if (pid == getpid())
		return;
	if (old && old->statm >= 0) {
		/* The cheap path: the same process for sure, its size re-read. */
		if (read_statm(w, old, &now.vsize) == 0) {
			now.statm = old->statm;
			old->statm = -1;   /* the new table owns it now */
			now.start_ticks = old->start_ticks;
			now.ignored = old->ignored;
		} else {
			old = NULL;        /* gone: whatever has this PID now is new */
		}
	}
	if (now.statm < 0) {
		/*
		 * The slow path: stat, with its start time.  statm is opened
		 * first and read after: if that process still lives then, the
		 * stat read in between was its own (one PID, one process), so
		 * the descriptor kept is the process the start time describes.
		 */
		now.statm = open_statm(w, pid);
		if (procfs_sample_stat(pid, &st) < 0) {
			close_statm(w, &now.statm);
			return;   /* gone: it leaves the table */
		}
		if (now.statm >= 0 && read_statm(w, &now, &now.vsize) < 0)
			close_statm(w, &now.statm);
		if (old && old->start_ticks != st.start_ticks)
			old = NULL;
		now.start_ticks = st.start_ticks;
		now.vsize = st.vsize;
		now.ignored = (st.flags & PROCFS_PF_KTHREAD) != 0;
	}
	if (now.ignored) {
		keep(w, &now);
		return;
	}
	again = retry_find(&w->retries, pid);
	if (again && !again->due)
		again = NULL;   /* its request is still queued */
	if (old && old->vsize == now.vsize && old->objects && !again) {
		now.objects = old->objects;
		keep(w, &now);
		return;
	}
	/* New, or its mappings changed: what does it map now? */
	r = facts_read(pid, w->need, w->facts);
	/* 'Z': a zombie, which no rule takes, or a main thread gone with pthread_exit(). */
	if (r == 0 && (w->facts->state == 'Z' || w->facts->state == 'X')) {
		r = facts_read_through_live(pid, w->need, w->facts);
		if (r == -ESRCH)
			r = 0;   /* a zombie: as read */
	}
	if (r < 0) {
		facts_free(w->facts);
		close_statm(w, &now.statm);
		return;   /* gone, or unreadable: looked at again next time */
	}
	/* 1 for a process without readable maps (a zombie): asked once, like the others. */
	now.objects = w->facts->objects_read ? facts_objects_hash(w->facts) : 1;
	if (old && old->objects == now.objects && !again) {
		facts_free(w->facts);
		keep(w, &now);
		return;   /* the heap grew; nothing was loaded */
	}
	/* Asked about at its exec, and nothing loaded since: no news. */
	if (!again && noticed_take(w->noticed, pid, now.start_ticks, now.objects)) {
		facts_free(w->facts);
		keep(w, &now);
		return;
	}
	/* The sweep came first: its look at the exec is not needed any more. */
	noticed_forget(w->noticed, pid);
	if (again)
		again->due = false;
	rule = w->facts->state == 'Z' || w->facts->state == 'X' ? NULL :
		policy_match(w->policy, &w->facts->p);
	facts_free(w->facts);
	if (rule && add_candidate(w, (size_t)(rule - w->policy->rules), pid) < 0)
		now.objects = 0;   /* no memory: ask again next time */
	keep(w, &now);
}

/* ------------------------------------------------------ exec events -- */

/*
 * The programs noticed at their exec that are due (watchexec.c looks at
 * each): one whose loader is done is asked about as the sweep would,
 * unless the sweep asked about this very program already.
 */
static void look_due(struct watch *w, uint64_t t_ms, uint64_t until_us)
{
	const struct policy_rule *rule;
	struct noticed_entry *e;

	while ((e = noticed_due(w->noticed, t_ms)) != NULL) {
		if (watch_events_look(w->noticed, e, w->need, w->facts, t_ms) &&
		    !sweep_asked(w, e->pid, e->start_ticks, e->objects)) {
			rule = policy_match(w->policy, &w->facts->p);
			if (rule) {
				log_msg(LOG_DEBUG, "rule %s: process %d taken at its exec", rule->name,
					(int)e->pid);
				submit_rule(w, (size_t)(rule - w->policy->rules), &e->pid, 1);
			}
		}
		facts_free(w->facts);
		if (now_us() >= until_us)
			return;
	}
}

static int sweep_begin(struct watch *w, uint64_t t_ms)
{
	int r = procfs_list_processes(&w->pids, &w->npids);

	if (r < 0) {
		log_msg(LOG_ERR, "cannot list /proc for the policy: %s", strerror(-r));
		return r;
	}
	w->sweeping = true;
	w->sweep_started_ms = t_ms;
	w->next_pid = w->old = w->nfresh = 0;
	/*
	 * A process some answer found torn (a uprobe inside the guard's
	 * bytes, or the file's bytes its removal wrote back: SECURITY.md) has
	 * the same mappings, so the sweep would not look at it again: ask the
	 * policy about it now, and a rule that guards it repairs it.
	 */
	pid_t torn[RECORD_TORN_MAX];
	size_t n = record_take_torn(torn, RECORD_TORN_MAX);

	for (size_t i = 0; i < n; i++)
		retry_add(&w->retries, torn[i], RETRIES);
	return 0;
}

/* Retries of processes that are gone are forgotten (fresh: this sweep's table, by PID). */
static void forget_gone_retries(struct watch *w)
{
	struct retries *rs = &w->retries;

	for (size_t i = 0; i < rs->n;) {
		if (find_proc(w->fresh, w->nfresh, rs->v[i].pid))
			i++;
		else
			retry_drop(rs, &rs->v[i]);
	}
}

static void sweep_end(struct watch *w)
{
	for (size_t i = 0; i < w->policy->nrules; i++)
		if (w->ncand[i])
			submit_rule(w, i, w->cand[i], w->ncand[i]);
	for (size_t i = 0; i < w->policy->nrules; i++)
		w->ncand[i] = 0;
	forget_gone_retries(w);
	noticed_prune(w->noticed, w->sweep_started_ms);
	close_fds(w, w->table, w->ntable);   /* the processes that are gone */
	free(w->table);
	w->table = w->fresh;
	w->ntable = w->nfresh;
	w->fresh = NULL;
	w->nfresh = w->cap_fresh = 0;
	free(w->pids);
	w->pids = NULL;
	w->sweeping = false;
	w->last_sweep_end_s = (uint32_t)time(NULL);
}

uint64_t watch_next_ms(const struct watch *w)
{
	uint64_t next_ms;

	if (!watch_active(w))
		return UINT64_MAX;
	next_ms = noticed_next_ms(w->noticed);
	if (w->sweeping)
		return 0;
	return next_ms < w->next_sweep_ms ? next_ms : w->next_sweep_ms;
}

void watch_step(struct watch *w, uint64_t t_ms)
{
	uint64_t until_us;

	/* !cand: a reload ran out of memory for them; the next reload may do better. */
	if (!watch_active(w) || !w->cand)
		return;
	look_due(w, t_ms, now_us() + WATCH_STEP_US);
	if (!w->sweeping && t_ms < w->next_sweep_ms)
		return;
	if (!w->sweeping) {
		/* The next one is due an interval after this one started, however long it takes. */
		w->next_sweep_ms = t_ms + w->policy->interval_ms;
		if (sweep_begin(w, t_ms) < 0)
			return;
	}
	until_us = now_us() + WATCH_STEP_US;
	while (w->next_pid < w->npids) {
		sweep_one(w, w->pids[w->next_pid++]);
		if (now_us() >= until_us)
			return;
	}
	sweep_end(w);
}

void watch_stop(struct watch *w)
{
	struct request *rq;

	if (!w)
		return;
	/* Each is answered "shutdown", which ends it (request_done frees it). */
	while ((rq = TAILQ_FIRST(&w->reqs))) {
		queue_shutdown(w->q, &rq->e);
		if (TAILQ_FIRST(&w->reqs) == rq)
			request_end(rq);   /* it had nothing queued */
	}
}

void watch_free(struct watch *w)
{
	struct request *rq;

	if (!w)
		return;
	while ((rq = TAILQ_FIRST(&w->reqs))) {
		queue_cancel(w->q, &rq->e);
		request_end(rq);
	}
	if (w->policy) {
		sweep_abandon(w);
		free_candidates(w);
		policy_unref(w->policy);
	}
	free(w->stats);
	close_fds(w, w->table, w->ntable);
	free(w->table);
	watch_events_close(&w->events);
	free(w->noticed);
	free(w->facts);
	free(w);
}
