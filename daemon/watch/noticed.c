// SPDX-License-Identifier: MIT
/*
 * The table of processes noticed at their exec (noticed.h).  Linear
 * scans: it holds at most NOTICED_MAX entries, and an exec event costs a
 * pass over them, as does each look - far below the look's own /proc
 * reads.  Order does not matter; a removal moves the last entry into the
 * hole.
 */
#include "noticed.h"

static struct noticed_entry *find_entry(struct noticed *t, pid_t pid)
{
	for (size_t i = 0; i < t->n; i++)
		if (t->v[i].pid == pid)
			return &t->v[i];
	return NULL;
}

/*
 * A full table gives up the entry asked about longest ago: what it holds
 * only spares the sweep a question (with a long interval the sweep may be
 * an hour away, and the table must not fill with those).  Entries still
 * waiting for their look are never given up.
 */
static struct noticed_entry *oldest_asked(struct noticed *t)
{
	struct noticed_entry *old = NULL;

	for (size_t i = 0; i < t->n; i++)
		if (t->v[i].asked && (!old || t->v[i].asked_ms < old->asked_ms))
			old = &t->v[i];
	return old;
}

bool noticed_add(struct noticed *t, pid_t pid, uint64_t due_ms)
{
	struct noticed_entry *e = find_entry(t, pid);

	if (!e && t->n == NOTICED_MAX)
		e = oldest_asked(t);
	if (!e) {
		if (t->n == NOTICED_MAX) {
			t->dropped++;
			return false;
		}
		e = &t->v[t->n++];
	}
	/* A second exec (or a recycled PID) is a new program: look afresh. */
	*e = (struct noticed_entry){ .pid = pid, .due_ms = due_ms };
	return true;
}

struct noticed_entry *noticed_due(struct noticed *t, uint64_t t_ms)
{
	struct noticed_entry *first = NULL;

	for (size_t i = 0; i < t->n; i++)
		if (!t->v[i].asked && t->v[i].due_ms <= t_ms &&
		    (!first || t->v[i].due_ms < first->due_ms))
			first = &t->v[i];
	return first;
}

uint64_t noticed_next_ms(const struct noticed *t)
{
	uint64_t next_ms = UINT64_MAX;

	for (size_t i = 0; i < t->n; i++)
		if (!t->v[i].asked && t->v[i].due_ms < next_ms)
			next_ms = t->v[i].due_ms;
	return next_ms;
}

bool noticed_take(struct noticed *t, pid_t pid, uint64_t start_ticks, uint64_t objects)
{
	struct noticed_entry *e = find_entry(t, pid);
	bool same;

	if (!e || !e->asked)
		return false;   /* not noticed, or still waiting for its look: the sweep asks */
	same = e->start_ticks == start_ticks && e->objects == objects;
	noticed_drop(t, e);
	return same;
}

bool noticed_forget(struct noticed *t, pid_t pid)
{
	struct noticed_entry *e = find_entry(t, pid);

	if (!e)
		return false;
	noticed_drop(t, e);
	return true;
}

void noticed_drop(struct noticed *t, struct noticed_entry *e)
{
	*e = t->v[--t->n];
}

void noticed_prune(struct noticed *t, uint64_t since_ms)
{
	for (size_t i = 0; i < t->n;) {
		if (t->v[i].asked && t->v[i].asked_ms < since_ms)
			noticed_drop(t, &t->v[i]);
		else
			i++;
	}
}

void noticed_clear(struct noticed *t)
{
	t->n = 0;
}
