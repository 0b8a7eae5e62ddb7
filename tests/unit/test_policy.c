// SPDX-License-Identifier: MIT
/*
 * Unit tests for the policy file (policy.c): a good file compiles to the
 * selector rules select.c matches, every kind of mistake is refused with
 * the file and line it is on, exclusions win over rules, and the first
 * matching rule takes a process.  The pure parts of reading files
 * (policyfile.c): which names in the .d directory are drop-ins, and the
 * owner and mode rule over a stat struct.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <cmocka.h>

#include "policy.h"

static int users(const char *name, uid_t *ret)
{
	if (strcmp(name, "alice"))
		return -ENOENT;
	*ret = 1000;
	return 0;
}

static struct policy *parse_ok(const char *text)
{
	struct policy *p = policy_new();
	struct policy_error err;
	int r = policy_parse_buf(p, "t.conf", text, strlen(text), users, &err);

	if (r < 0)
		fail_msg("%s:%u: %s", err.file, err.line, err.text);
	return p;
}

/* The line and a word of the message of the first error in text. */
static void parse_bad(const char *text, unsigned line, const char *word)
{
	struct policy *p = policy_new();
	struct policy_error err;

	assert_int_equal(policy_parse_buf(p, "bad.conf", text, strlen(text), users, &err), -EINVAL);
	assert_string_equal(err.file, "bad.conf");
	if (err.line != line || !strstr(err.text, word))
		fail_msg("wanted line %u with \"%s\", got %u: %s", line, word, err.line, err.text);
	policy_unref(p);
}

static const char *torch_objects[] = {
	"/usr/lib/x86_64-linux-gnu/libc.so.6",
	"/usr/lib/python3/dist-packages/torch/lib/libc10.so",
	"/usr/lib/python3/dist-packages/greenlet/_greenlet.cpython-311-x86_64-linux-gnu.so",
};

static void good_file_compiles(void **state)
{
	(void)state;
	struct policy *p = parse_ok(
		"# comment\n"
		"[watch]\n"
		"interval = 250ms\n"
		"exec-events = no\n"
		"\n"
		"[rule torch]\n"
		"action = guard\n"
		"at-risk = yes\n"
		"user = alice\n"
		"[rule svc]\n"
		"action = guard\n"
		"unit = train.service\n"
		"exe = python3*\n"
		"[exclude sshd]\n"
		"exe = sshd\n");

	assert_int_equal(p->interval_ms, 250);
	assert_false(p->exec_events);
	assert_int_equal(p->nrules, 3);
	assert_int_equal(p->nguard, 2);
	assert_string_equal(p->rules[0].name, "torch");
	assert_true(p->rules[0].at_risk);
	assert_true(p->rules[0].sel.all);
	assert_true(p->rules[0].sel.have_uid);
	assert_int_equal(p->rules[0].sel.uid, 1000);
	assert_int_equal(p->rules[0].line, 6);
	assert_string_equal(p->rules[1].sel.cgroup, "/system.slice/train.service");
	assert_string_equal(p->rules[1].sel.exe, "python3*");
	assert_true(p->rules[2].exclude);
	policy_unref(p);

	p = parse_ok("");
	assert_int_equal(p->nrules, 0);
	assert_int_equal(p->interval_ms, POLICY_DEFAULT_INTERVAL_MS);
	assert_true(p->exec_events);   /* where the kernel lets the daemon listen */
	policy_unref(p);
}

/* backtraces = segment: the rule's guards walk the segment; empty, or no key, the stub. */
static void backtraces_chooses_a_rules_form(void **state)
{
	struct policy *p = parse_ok("[rule walked]\naction = guard\nat-risk = yes\nbacktraces = segment\n"
				    "[rule emptied]\naction = guard\nexe = x\nbacktraces = empty\n"
				    "[rule plain]\naction = guard\nexe = y\n");
	char text[256];

	(void)state;
	assert_int_equal(p->nrules, 3);
	assert_true(p->rules[0].walk);
	assert_false(p->rules[1].walk);
	assert_false(p->rules[2].walk);
	policy_describe(&p->rules[0], text, sizeof(text));
	assert_string_equal(text, "at-risk backtraces=segment");
	policy_describe(&p->rules[1], text, sizeof(text));
	assert_string_equal(text, "exe=x");
	policy_unref(p);
}

static void mistakes_name_their_line(void **state)
{
	(void)state;
	parse_bad("[rule a]\naction = guard\nexe = x\nexe = y\n", 4, "twice");
	parse_bad("[rule a]\naction = protect\nexe = x\n", 2, "unknown action");
	parse_bad("\n[rule a]\nexe = x\n", 2, "no action");
	parse_bad("[rule a]\naction = guard\n", 1, "selects nothing");
	parse_bad("[rule a]\naction = guard\nat-risk = no\n", 1, "selects nothing");
	parse_bad("[rule a]\naction = guard\nuser = bob\n", 3, "no such user");
	parse_bad("[rule a]\naction = guard\nfrobnicate = 1\n", 3, "unknown key");
	parse_bad("[rules a]\naction = guard\n", 1, "unknown section");
	parse_bad("[rule a b]\naction = guard\n", 1, "bad name");
	parse_bad("exe = x\n", 1, "outside");
	/* inih would cut this name to 49 bytes and take it for another. */
	parse_bad("[watch]\n[rule abcdefghijabcdefghijabcdefghijabcdefghijabcdefghij]\n", 2,
		  "section header longer");
	parse_bad("[rule abcdefghijabcdefghijabcdefghijabcdefghijk]\naction = guard\nexe = x\n", 1,
		  "bad name");   /* 41 bytes: fits inih, not a name */
	parse_bad("[watch]\ninterval = 10ms\n", 2, "interval");
	parse_bad("[rule a]\naction = guard\nexe = x\nbacktraces = all\n", 4, "empty or segment");
	parse_bad("[rule a]\naction = guard\nexe = x\nbacktraces = segment\nbacktraces = empty\n", 5,
		  "twice");
	parse_bad("[exclude a]\nexe = x\nbacktraces = segment\n", 3, "belongs in a rule");
	parse_bad("[watch]\nbacktraces = segment\n", 2, "does not belong in [watch]");
	parse_bad("[watch]\ninterval = soon\n", 2, "interval");
	parse_bad("[watch]\nexec-events = sometimes\n", 2, "exec-events must be yes or no");
	parse_bad("[watch]\nexec-events = no\nexec-events = yes\n", 3, "exec-events is given twice");
	parse_bad("[rule a]\naction = guard\nexe = x\nexec-events = no\n", 4, "belongs in [watch]");
	parse_bad("[rule a]\naction = guard\ncgroup = system.slice\n", 3, "cgroup");
	parse_bad("[rule a]\naction = guard\nunit = a/b\n", 3, "unit");
	parse_bad("[rule a]\naction = guard\nunit = u.service\ncgroup = /x\n", 4, "both");
	parse_bad("[exclude a]\naction = guard\nexe = x\n", 2, "no action");
	/* A header repeated at once continues its section (inih): the key is twice. */
	parse_bad("[rule a]\naction = guard\nexe = x\n[rule a]\naction = guard\n", 5, "twice");
	parse_bad("[rule a]\naction = guard\nexe = x\n[rule b]\naction = guard\nexe = z\n"
		  "[rule a]\nexe = w\n", 8, "defined already");
	parse_bad("[rule a]\nnot ini at all\n", 2, "not INI");
	parse_bad("[rule a\n", 1, "not INI");
	{
		static const char nul[] = "[rule a]\nexe = \0x\n";
		struct policy *p = policy_new();
		struct policy_error err;

		assert_int_equal(policy_parse_buf(p, "n.conf", nul, sizeof(nul) - 1, users, &err),
				 -EINVAL);
		assert_int_equal(err.line, 2);
		assert_non_null(strstr(err.text, "NUL"));
		policy_unref(p);
	}
	{
		char text[400];

		memset(text, 'x', sizeof(text));
		memcpy(text, "[rule a]\nexe = ", 15);
		text[sizeof(text) - 1] = '\0';
		parse_bad(text, 2, "longer");
	}
	{
		/* inih reads 199 bytes a line, its newline included: 198 fit, 199 do not. */
		char text[256];
		struct policy *p;

		memset(text, 'x', sizeof(text));
		memcpy(text, "[rule a]\naction = guard\nexe = ", 30);
		strcpy(text + 30 + (198 - 6), "\n");
		p = parse_ok(text);
		assert_int_equal(strlen(p->rules[0].exe), 198 - 6);
		policy_unref(p);
		text[30 + (198 - 6)] = 'x';
		strcpy(text + 30 + (199 - 6), "\n");
		parse_bad(text, 3, "longer");
	}
	/* After a byte order mark, and after \v (inih's isspace()), a header is still one. */
	parse_bad("\xef\xbb\xbf[rule abcdefghijabcdefghijabcdefghijabcdefghijabcdefghij]\n", 1,
		  "section header longer");
	{
		struct policy *p = parse_ok("\v[rule a]\naction = guard\nexe = x\n");

		assert_int_equal(p->rules[0].line, 1);
		policy_unref(p);
		p = parse_ok("\xef\xbb\xbf[rule a]\naction = guard\nexe = x\n");
		assert_int_equal(p->rules[0].line, 1);
		policy_unref(p);
	}
}

static void drop_ins_add_rules(void **state)
{
	(void)state;
	struct policy *p = policy_new();
	struct policy_error err;
	const char *a = "[rule a]\naction = guard\nexe = x\n";
	const char *b = "[watch]\ninterval = 2\n[rule a]\naction = guard\nexe = y\n";

	assert_int_equal(policy_parse_buf(p, "main.conf", a, strlen(a), users, &err), 0);
	assert_int_equal(policy_parse_buf(p, "d/10.conf", b, strlen(b), users, &err), -EINVAL);
	assert_string_equal(err.file, "d/10.conf");
	assert_int_equal(err.line, 4);   /* the first key of the second [rule a] */
	assert_non_null(strstr(err.text, "main.conf:1"));
	policy_unref(p);
}

static void exclusions_win_and_first_rule_takes(void **state)
{
	(void)state;
	struct policy *p = parse_ok(
		"[rule risky]\naction = guard\nat-risk = yes\n"
		"[rule py]\naction = guard\nexe = python3*\n"
		"[exclude alice]\nuser = alice\n");
	struct select_proc proc = {
		.pid = 42, .uid = 0, .exe = "/usr/bin/python3.11", .cmdline = "python3 x.py",
		.objects = torch_objects, .nobjects = 3,
	};
	char text[256];

	assert_ptr_equal(policy_match(p, &proc), &p->rules[0]);
	proc.nobjects = 1;   /* no torch: not at risk, python3 still */
	assert_ptr_equal(policy_match(p, &proc), &p->rules[1]);
	proc.exe = "/usr/bin/perl";
	assert_null(policy_match(p, &proc));
	proc.exe = "/usr/bin/python3.11";
	proc.uid = 1000;     /* excluded */
	assert_null(policy_match(p, &proc));
	policy_describe(&p->rules[0], text, sizeof(text));
	assert_string_equal(text, "at-risk");
	policy_describe(&p->rules[1], text, sizeof(text));
	assert_string_equal(text, "exe=python3*");
	policy_unref(p);
}

static void only_name_conf_is_a_drop_in(void **state)
{
	(void)state;
	assert_true(policy_dropin_name("50-site.conf"));
	assert_true(policy_dropin_name("x.conf"));
	assert_true(policy_dropin_name("a.b.conf"));
	/* What packages and editors leave beside them, and hidden files. */
	assert_false(policy_dropin_name("x.conf.dpkg-old"));
	assert_false(policy_dropin_name("x.conf.dpkg-dist"));
	assert_false(policy_dropin_name("x.conf.ucf-old"));
	assert_false(policy_dropin_name("x.conf~"));
	assert_false(policy_dropin_name("x.conf.bak"));
	assert_false(policy_dropin_name("#x.conf#"));
	assert_false(policy_dropin_name(".x.conf.swp"));
	assert_false(policy_dropin_name(".x.conf"));
	assert_false(policy_dropin_name("README"));
	assert_false(policy_dropin_name("x.CONF"));
	assert_false(policy_dropin_name(".conf"));
	assert_false(policy_dropin_name("conf"));
	assert_false(policy_dropin_name(""));
}

static int trust(uid_t owner, mode_t mode, uid_t self, char *why)
{
	struct stat st = { .st_uid = owner, .st_gid = 0, .st_mode = mode };

	why[0] = '\0';
	return policy_trust_check(&st, self, why, 128);
}

static void owner_and_mode_as_sshd(void **state)
{
	(void)state;
	char why[128];

	/* Root's, writable by root alone: trusted, files and directories. */
	assert_int_equal(trust(0, S_IFREG | 0644, 0, why), 0);
	assert_int_equal(trust(0, S_IFREG | 0600, 0, why), 0);
	assert_int_equal(trust(0, S_IFREG | 0444, 0, why), 0);
	assert_int_equal(trust(0, S_IFDIR | 0755, 0, why), 0);
	/* Owned by anyone else: refused, whatever the mode. */
	assert_int_equal(trust(65534, S_IFREG | 0644, 0, why), -EPERM);
	assert_string_equal(why, "owned by uid 65534, not root");
	assert_int_equal(trust(1000, S_IFDIR | 0700, 0, why), -EPERM);
	assert_int_equal(trust(1000, S_IFDIR | 01777, 0, why), -EPERM);
	/* ... but the daemon's own uid (tests without root) is as root. */
	assert_int_equal(trust(1000, S_IFREG | 0644, 1000, why), 0);
	/* Writable by the group or others: refused, each said. */
	assert_int_equal(trust(0, S_IFREG | 0664, 0, why), -EPERM);
	assert_string_equal(why, "writable by its group (mode 0664)");
	assert_int_equal(trust(0, S_IFREG | 0646, 0, why), -EPERM);
	assert_string_equal(why, "writable by others (mode 0646)");
	assert_int_equal(trust(0, S_IFREG | 0666, 0, why), -EPERM);
	assert_string_equal(why, "writable by group and others (mode 0666)");
	assert_int_equal(trust(0, S_IFDIR | 0775, 0, why), -EPERM);
	assert_int_equal(trust(0, S_IFDIR | 0777, 0, why), -EPERM);
	/* A sticky directory of root's (/tmp) may be writable by all; a sticky file not. */
	assert_int_equal(trust(0, S_IFDIR | 01777, 0, why), 0);
	assert_int_equal(trust(0, S_IFDIR | 01775, 0, why), 0);
	assert_int_equal(trust(0, S_IFREG | 01666, 0, why), -EPERM);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(good_file_compiles),
		cmocka_unit_test(mistakes_name_their_line),
		cmocka_unit_test(backtraces_chooses_a_rules_form),
		cmocka_unit_test(drop_ins_add_rules),
		cmocka_unit_test(exclusions_win_and_first_rule_takes),
		cmocka_unit_test(only_name_conf_is_a_drop_in),
		cmocka_unit_test(owner_and_mode_as_sshd),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
