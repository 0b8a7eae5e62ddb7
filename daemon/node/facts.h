/* SPDX-License-Identifier: MIT */
/*
 * What selection and the at-risk report know of one process, read from
 * /proc: its real uid, executable, command line, cgroups and mapped
 * objects.  Only the facts asked for are read (a node-wide status of
 * 10,000 processes must not parse 10,000 memory maps to match a uid).
 */
#ifndef BTGUARD_FACTS_H
#define BTGUARD_FACTS_H

#include <limits.h>
#include <stdbool.h>
#include <sys/types.h>

#include "procfs.h"
#include "select.h"

#define FACTS_UID      0x01u
#define FACTS_EXE      0x02u
#define FACTS_CMDLINE  0x04u
#define FACTS_CGROUP   0x08u
#define FACTS_OBJECTS  0x10u

#define FACTS_MAX_CGROUPS 64u
#define FACTS_CMDLINE_MAX 4096u

struct facts {
	struct select_proc p;         /* what select_match() reads; points into the rest */
	char state;                   /* from status: 'Z' for a zombie */
	bool objects_read;            /* FACTS_OBJECTS asked and the maps could be read */
	char exe[PATH_MAX];
	char cmdline[FACTS_CMDLINE_MAX];
	char cgroup_buf[8192];
	const char *cgroups[FACTS_MAX_CGROUPS];
	char *objects_buf;            /* malloc'ed: the NUL-separated object paths */
	const char **objects;         /* malloc'ed */
};

/* The facts select_match() needs for rule r (FACTS_* bits). */
unsigned facts_needed(const struct select_rule *r, bool at_risk);

/*
 * Reads the facts `need` names for pid into *f (facts_free() it, on
 * failure too).  -ESRCH when the process is gone; a fact that cannot be
 * read otherwise (an unreadable exe link) is left empty, which matches no
 * pattern.
 */
int facts_read(pid_t pid, unsigned need, struct facts *f);

/*
 * Reads f again through a live thread of pid, for a process whose main
 * thread left with pthread_exit(): its PID reads 'Z' and shows no
 * executable, command line or maps, while its other threads run.  f->p.pid
 * stays pid.  -ESRCH when no thread lives (a zombie), f then as it was;
 * another error when the new read fails (facts_free() f).
 */
int facts_read_through_live(pid_t pid, unsigned need, struct facts *f);

/*
 * The objects part of f (FACTS_OBJECTS) from maps read already: the
 * distinct files mapped, in map order.  0 or -ENOMEM.
 */
int facts_objects_from_maps(struct facts *f, const struct procfs_mapping *maps, size_t nmaps);

/*
 * f's objects say its loader is done: the C library is mapped and the
 * loader's cache (ld.so.cache) is not any more.  False without objects.
 */
bool facts_loader_done(const struct facts *f);

/*
 * FNV-1a over the paths of f's objects, in order: what the policy was
 * asked about, kept instead of the list to tell a change (watch/).  Never
 * 0, which callers keep for "not asked yet".
 */
uint64_t facts_objects_hash(const struct facts *f);

void facts_free(struct facts *f);

#endif
