// SPDX-License-Identifier: MIT
/*
 * Exec events for the policy (watch.h): the proc connector's socket while
 * the policy wants it, and the processes it names.  Each is looked at a
 * moment after its exec - once its loader has mapped its libraries, or
 * after the last delay below as it is - and then watch.c asks the policy
 * about it as the sweep would; noticed.c then tells the sweep it need not
 * ask again.  Nothing here stops, reads or writes a target either.
 *
 * Below watch.c: watch.c calls in here (whether to listen, what is due),
 * nothing here calls watch.c.  This file writes struct watch_events alone,
 * and the noticed entries it looks at; it only reads struct watch, for
 * the noticed table the public watch_events() fills.
 */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "log.h"
#include "procconn.h"
#include "procfs.h"
#include "timeutil.h"
#include "watch_int.h"

#define EVENTS_BATCH  256u    /* exec events read in one turn */
#define LOST_LOG_MS   60000u  /* "events were lost" at most this often */
/*
 * Events are read in batches this far apart: on a node that execs a
 * thousand times a second, one wake-up for many.  Far below the first
 * look's delay plus the loader's time, so no program is looked at later
 * for it in practice.
 */
#define EVENTS_COALESCE_MS 5u
/*
 * A program noticed at its exec is looked at once its loader has mapped
 * its libraries, usually within a millisecond; until then, again after
 * each of these delays, and after the last as it is (a static program).
 */
static const unsigned look_delays_ms[] = { 2, 10, 50, 200 };
#define LOOKS (sizeof(look_delays_ms) / sizeof(look_delays_ms[0]))

bool watch_events_look(struct noticed *t, struct noticed_entry *e, unsigned need, struct facts *f,
		       uint64_t t_ms)
{
	struct procfs_stat st;
	pid_t pid = e->pid;

	if (pid == getpid() || procfs_sample_stat(pid, &st) < 0 ||
	    (st.flags & PROCFS_PF_KTHREAD) || st.state == 'Z' || st.state == 'X' ||
	    facts_read(pid, need, f) < 0) {
		noticed_drop(t, e);   /* gone already, or unreadable: the sweep decides */
		return false;
	}
	if (!facts_loader_done(f) && e->looks < LOOKS) {
		e->due_ms = t_ms + look_delays_ms[e->looks++];
		return false;
	}
	e->asked = true;
	e->asked_ms = t_ms;
	e->start_ticks = st.start_ticks;
	e->objects = f->objects_read ? facts_objects_hash(f) : 1;
	return true;
}

void watch_events_init(struct watch_events *ev)
{
	memset(ev, 0, sizeof(*ev));
	ev->fd = -1;
}

/* Closes the socket; server.c sees the generation change and forgets it. */
static void events_stop(struct watch_events *ev)
{
	procconn_close(ev->fd);
	ev->fd = -1;
	ev->gen++;
}

void watch_events_sync(struct watch_events *ev, bool want, unsigned interval_ms)
{
	char why[sizeof(ev->why)];
	int fd;

	if (!want && ev->fd >= 0) {
		events_stop(ev);
		log_msg(LOG_INFO, "exec events: no longer listening (the policy does not want them)");
	}
	if (!want || ev->fd >= 0)
		return;
	fd = procconn_open(why, sizeof(why));
	if (fd < 0) {
		/* Said once, not at every reload: the sweep covers it, and that is no fault. */
		if (strcmp(why, ev->why))
			log_msg(LOG_NOTICE, "exec events unavailable: %s; new processes are found by the sweep, every %u ms",
				why, interval_ms);
		snprintf(ev->why, sizeof(ev->why), "%s", why);
		return;
	}
	ev->fd = fd;
	ev->gen++;
	ev->why[0] = '\0';
	log_msg(LOG_INFO, "exec events: listening to the proc connector; the sweep runs every %u ms as well",
		interval_ms);
}

void watch_events_close(struct watch_events *ev)
{
	if (ev->fd >= 0)
		events_stop(ev);
}

uint64_t watch_events_next_ms(const struct watch *w)
{
	return w ? w->events.next_ms : 0;
}

int watch_events_fd(const struct watch *w, unsigned *ret_gen)
{
	*ret_gen = w ? w->events.gen : 0;
	return w ? w->events.fd : -1;
}

void watch_events(struct watch *w, uint64_t t_ms)
{
	pid_t pids[EVENTS_BATCH];
	size_t n = 0;
	bool lost = false;
	int r;

	if (!w || w->events.fd < 0)
		return;
	w->events.next_ms = t_ms + EVENTS_COALESCE_MS;
	r = procconn_read(w->events.fd, pids, EVENTS_BATCH, &n, &lost);
	if (r < 0) {
		log_msg(LOG_ERR, "exec events: reading the proc connector: %s; the sweep alone finds new processes until the next reload",
			strerror(-r));
		events_stop(&w->events);
		return;
	}
	for (size_t i = 0; i < n; i++)
		if (!noticed_add(w->noticed, pids[i], t_ms + look_delays_ms[0]))
			lost = true;
	if (lost && t_ms - w->events.lost_logged_ms >= LOST_LOG_MS) {
		log_msg(LOG_NOTICE, "exec events: some were lost (a burst of execs); the sweep finds those processes");
		w->events.lost_logged_ms = t_ms;
	}
}
