// SPDX-License-Identifier: MIT
/*
 * The test build's fault injection (see fault.h).  Empty unless built with
 * -DBTGUARD_FAULTS.
 */
#ifdef BTGUARD_FAULTS
#include <errno.h>
#include <stdbool.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ptrace.h>
#include <time.h>

#include "fault.h"

struct fault {
	const char *name;
	int request;              /* the ptrace request it counts */
	unsigned long nth;        /* 0: not injected */
	unsigned long seen;
};

static struct fault faults[] = {
	{ "poke", PTRACE_POKETEXT, 0, 0 },
	{ "peek-differ", PTRACE_PEEKTEXT, 0, 0 },
	{ "seize", PTRACE_SEIZE, 0, 0 },
	{ "detach", PTRACE_DETACH, 0, 0 },
};
/* NAME-hold=N, NAME-hold-ms=M: a sleep before the Nth request of the kind. */
struct hold {
	const char *name;
	int request;
	unsigned long nth, ms, seen;
};

static struct hold holds[] = {
	{ "seize", PTRACE_SEIZE, 0, 0, 0 },
	{ "interrupt", PTRACE_INTERRUPT, 0, 0, 0 },
};
static unsigned long hold_ms;
static bool parsed;
static bool peek_flip;
static bool no_kthread_line;
static unsigned long kcmp_nth, kcmp_seen;

static void parse(void)
{
	const char *spec = getenv("BTGUARD_FAULTS");
	char *copy, *tok, *save = NULL;

	parsed = true;
	if (!spec || !(copy = strdup(spec)))
		return;
	for (tok = strtok_r(copy, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		char *eq = strchr(tok, '=');

		if (!eq)
			continue;
		*eq = '\0';
		if (!strcmp(tok, "hold-ms"))
			hold_ms = strtoul(eq + 1, NULL, 10);
		for (size_t i = 0; i < sizeof(holds) / sizeof(holds[0]); i++) {
			size_t n = strlen(holds[i].name);

			if (strncmp(tok, holds[i].name, n))
				continue;
			if (!strcmp(tok + n, "-hold"))
				holds[i].nth = strtoul(eq + 1, NULL, 10);
			if (!strcmp(tok + n, "-hold-ms"))
				holds[i].ms = strtoul(eq + 1, NULL, 10);
		}
		if (!strcmp(tok, "kcmp"))
			kcmp_nth = strtoul(eq + 1, NULL, 10);
		if (!strcmp(tok, "no-kthread-line"))
			no_kthread_line = strtoul(eq + 1, NULL, 10) != 0;
		for (size_t i = 0; i < sizeof(faults) / sizeof(faults[0]); i++)
			if (!strcmp(tok, faults[i].name))
				faults[i].nth = strtoul(eq + 1, NULL, 10);
	}
	free(copy);
}

static void sleep_ms(unsigned long ms)
{
	struct timespec ts = { .tv_sec = (time_t)(ms / 1000), .tv_nsec = (long)(ms % 1000) * 1000000L };

	while (nanosleep(&ts, &ts) < 0 && errno == EINTR)
		;
}

int fault_before_ptrace(int request)
{
	if (!parsed)
		parse();
	for (size_t i = 0; i < sizeof(holds) / sizeof(holds[0]); i++) {
		struct hold *h = &holds[i];

		if (h->request != request || ++h->seen != h->nth)
			continue;
		fprintf(stderr, "btguardd: fault: holding before %s #%lu for %lu ms\n", h->name, h->seen,
			h->ms);
		sleep_ms(h->ms);
	}
	for (size_t i = 0; i < sizeof(faults) / sizeof(faults[0]); i++) {
		struct fault *f = &faults[i];

		if (f->request != request)
			continue;
		if (++f->seen != f->nth)
			continue;
		fprintf(stderr, "btguardd: fault: injecting %s #%lu\n", f->name, f->seen);
		if (request == PTRACE_PEEKTEXT) {
			peek_flip = true;  /* the call goes through; its result is changed */
			continue;
		}
		return -EIO;
	}
	return 0;
}

void fault_after_peek(uint64_t *word)
{
	if (peek_flip) {
		*word ^= 0xff;
		peek_flip = false;
	}
}

void fault_hold_world(void)
{
	struct timespec ts;

	if (!parsed)
		parse();
	if (!hold_ms)
		return;
	ts.tv_sec = (time_t)(hold_ms / 1000);
	ts.tv_nsec = (long)(hold_ms % 1000) * 1000000L;
	nanosleep(&ts, NULL);
}

bool fault_no_kthread_line(void)
{
	if (!parsed)
		parse();
	return no_kthread_line;
}

int fault_before_kcmp(void)
{
	if (!parsed)
		parse();
	if (!kcmp_nth || ++kcmp_seen != kcmp_nth)
		return 0;
	fprintf(stderr, "btguardd: fault: injecting kcmp #%lu\n", kcmp_seen);
	return -EIO;
}
#else
/* ISO C wants something in every translation unit. */
typedef int fault_unused;
#endif
