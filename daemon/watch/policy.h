/* SPDX-License-Identifier: MIT */
/*
 * The auto-guard policy: which processes the daemon guards by itself.
 * Read from /etc/btguard/btguardd.conf and its drop-ins
 * (btguardd.conf.d/NAME.conf, in name order), INI text parsed by inih,
 * validated here, and compiled to the struct select_rule select.c already
 * matches: one matcher for clients' selectors and for the policy.
 *
 *     [watch]
 *     interval = 1s              ; how often /proc is swept (100ms..3600s)
 *     exec-events = yes          ; also look at each process as it execs (proc connector)
 *
 *     [rule torch-jobs]
 *     action = guard             ; the only action (required: says what it does)
 *     at-risk = yes              ; maps torch's c10 and a stack-switching library
 *     user = alice               ; and every other key given, as btguardctl's selectors
 *
 *     [exclude sshd]
 *     exe = sshd                 ; never guarded automatically, whatever rule matches
 *
 * Parsing and matching are pure (the user resolver is the caller's), so
 * unit tests and the fuzzer drive them over buffers.  policy_load()
 * (policyfile.c) is the only function that reads files, and only files
 * that root alone can change (SECURITY.md), never waiting on one.
 */
#ifndef BTGUARD_POLICY_H
#define BTGUARD_POLICY_H

#include <limits.h>
#include <stdbool.h>
#include <stddef.h>
#include <sys/stat.h>
#include <sys/types.h>

#include "select.h"

#define POLICY_DEFAULT_PATH   "/etc/btguard/btguardd.conf"
/* A rule's name: [A-Za-z0-9._-]; "[exclude NAME]" must fit inih's 49-byte section names. */
#define POLICY_NAME_MAX       40u
#define POLICY_MAX_SECTION    49u      /* inih cuts longer section names (ini.c MAX_SECTION) */
#define POLICY_MAX_RULES      256u     /* rules and exclusions, every file together */
#define POLICY_MAX_FILES      64u      /* drop-ins read at most */
#define POLICY_MAX_FILE_SIZE  (256u * 1024u)
#define POLICY_MAX_LINE       198u     /* inih reads 199 bytes a line (INI_MAX_LINE 200), newline included */
#define POLICY_DEFAULT_INTERVAL_MS 1000u
#define POLICY_MIN_INTERVAL_MS     100u
#define POLICY_MAX_INTERVAL_MS     3600000u

struct policy_rule {
	char name[POLICY_NAME_MAX + 1];
	bool exclude;                 /* an [exclude] section: never guard what it matches */
	bool have_action;             /* action = guard was given (required for a rule) */
	bool at_risk;                 /* at-risk = yes */
	bool walk;                    /* backtraces = segment: its guards walk the segment */
	struct select_rule sel;       /* points into the strings below */
	char *exe, *cmdline, *cgroup, *maps;   /* malloc'ed, NULL when not given */
	char *user;                   /* as written, for policy_describe() */
	unsigned set;                 /* which keys were given (duplicates are errors) */
	char file[PATH_MAX];          /* where it was defined, for messages */
	unsigned line;                /* of its [section] header */
};

struct policy {
	unsigned interval_ms;
	bool exec_events;             /* [watch] exec-events: listen to the proc connector too */
	struct policy_rule *rules;    /* guard rules and exclusions, in file order */
	size_t nrules;
	size_t nguard;                /* of them guard rules: 0 means nothing to watch */
	unsigned refs;                /* policy_ref/unref; the loader's reference is the first */
};

/* Where a policy file is wrong: "FILE:LINE: TEXT" (line 0: the file as a whole). */
struct policy_error {
	char file[PATH_MAX];
	unsigned line;
	char text[256];
};

/* Resolves a user name to a uid: 0, or -ENOENT.  NULL: numbers only. */
typedef int (*policy_user_fn)(const char *name, uid_t *ret);

/* A new, empty policy (no rules, the default interval, one reference). */
struct policy *policy_new(void);

/*
 * Adds the rules of one file's text (buf, len bytes; need not be
 * NUL-terminated) to p, named `file` in errors.  0, or -EINVAL with *err
 * filled (the first error of the file; p is then unusable, free it), or
 * -ENOMEM.  Pure but for `users`.
 */
int policy_parse_buf(struct policy *p, const char *file, const char *buf, size_t len,
		     policy_user_fn users, struct policy_error *err);

/*
 * Reads path and then path.d/ *.conf (in byte order of the names) into a
 * new policy.  A missing path is an empty policy unless `required`; a
 * missing drop-in directory is fine.  Each file must be a regular file of
 * at most POLICY_MAX_FILE_SIZE bytes that passes policy_trust_check(), in
 * directories that do, up to /; nothing is waited on.  0 with *ret set,
 * or -errno with *err filled ("FILE: refused: ..." for a file not read).
 */
int policy_load(const char *path, bool required, struct policy **ret, struct policy_error *err);

/* Whether a name in path.d/ is a drop-in: NAME.conf, not hidden (not x.conf~ nor README). */
bool policy_dropin_name(const char *name);

/*
 * sshd's StrictModes rule for a policy file or a directory above one:
 * owned by root (or by self, the daemon's uid) and writable by nobody
 * else; a directory owned by root with the sticky bit (/tmp) may be
 * writable by others.  0, or -EPERM with why ("owned by uid 1000, not
 * root", "writable by others (mode 0666)").
 */
int policy_trust_check(const struct stat *st, uid_t self, char *why, size_t len);

/* Formats err as "FILE:LINE: TEXT" into buf. */
void policy_error_format(const struct policy_error *err, char *buf, size_t len);

/* The FACTS_* bits that policy_match() reads. */
unsigned policy_facts_needed(const struct policy *p);

/*
 * The guard rule that takes process proc (objects read as facts say), or
 * NULL: the first guard rule that matches, unless an exclusion matches.
 */
const struct policy_rule *policy_match(const struct policy *p, const struct select_proc *proc);

/* One line saying what r matches, as the file wrote it ("at-risk user=alice exe=python3"). */
void policy_describe(const struct policy_rule *r, char *buf, size_t len);

/* Reference counting: a request the policy started holds it until answered. */
struct policy *policy_ref(struct policy *p);
void policy_unref(struct policy *p);

#endif
