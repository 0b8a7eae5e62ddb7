// SPDX-License-Identifier: MIT
/*
 * Fuzzes the policy file parser (daemon/watch/policy.c over inih): the text an
 * administrator, a package or a configuration tool writes to
 * /etc/btguard, read by root.  Input: the file's bytes.  Properties:
 *  - it is accepted (0) or refused (-EINVAL) with a message, never
 *    anything else; a refusal names a line that exists in the input;
 *  - an accepted policy has only rules that select something, guard rules
 *    with the action, names that are valid and unique, an interval in range;
 *  - every rule matches a fixed process (or not) and describes itself in
 *    a bounded line, without reading past anything.
 */
#include <errno.h>

#include "fuzz.h"
#include "policy.h"

static const char *objects[] = {
	"/usr/lib/x86_64-linux-gnu/libc.so.6",
	"/opt/venv/site-packages/torch/lib/libc10.so",
	"/opt/venv/site-packages/greenlet/_greenlet.cpython-311-x86_64-linux-gnu.so",
};
static const char *cgroups[] = { "/system.slice/train.service" };

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	uint8_t *in = fuzz_copy(data, size);
	struct policy *p = policy_new();
	struct policy_error err;
	struct select_proc proc = {
		.pid = 42, .uid = 1000, .exe = "/usr/bin/python3.11", .cmdline = "python3 train.py",
		.cgroups = cgroups, .ncgroups = 1, .objects = objects, .nobjects = 3,
	};
	size_t lines = 1;
	char text[600];
	int r;

	if (!p)
		abort();
	for (size_t i = 0; i < size; i++)
		lines += in[i] == '\n';
	r = policy_parse_buf(p, "fuzz.conf", (const char *)in, size, NULL, &err);
	FUZZ_CHECK(r == 0 || r == -EINVAL);
	if (r < 0) {
		FUZZ_CHECK(err.text[0] != '\0' && err.line <= lines);
		FUZZ_CHECK(!strcmp(err.file, "fuzz.conf"));
		goto out;
	}
	FUZZ_CHECK(p->interval_ms >= POLICY_MIN_INTERVAL_MS && p->interval_ms <= POLICY_MAX_INTERVAL_MS);
	FUZZ_CHECK(p->nrules <= POLICY_MAX_RULES && p->nguard <= p->nrules);
	for (size_t i = 0; i < p->nrules; i++) {
		const struct policy_rule *rule = &p->rules[i];
		const struct select_rule *s = &rule->sel;

		FUZZ_CHECK(rule->name[0] && strlen(rule->name) <= POLICY_NAME_MAX);
		FUZZ_CHECK(rule->exclude || rule->have_action);
		FUZZ_CHECK(s->all || s->have_uid || s->exe || s->cmdline || s->cgroup || s->maps);
		FUZZ_CHECK(!s->cgroup || s->cgroup[0] == '/');
		FUZZ_CHECK(rule->line >= 1 && rule->line <= lines);
		for (size_t j = 0; j < i; j++)
			FUZZ_CHECK(strcmp(rule->name, p->rules[j].name) != 0);
		policy_describe(rule, text, sizeof(text));
		FUZZ_CHECK(strlen(text) < sizeof(text));
	}
	{
		const struct policy_rule *m = policy_match(p, &proc);

		FUZZ_CHECK(!m || (!m->exclude && m >= p->rules && m < p->rules + p->nrules));
	}
	(void)policy_facts_needed(p);
out:
	policy_unref(p);
	free(in);
	return 0;
}
