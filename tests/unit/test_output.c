// SPDX-License-Identifier: MIT
/*
 * Unit tests for btguardctl's output (client/output.c): text a target can
 * choose (object paths, messages) must come out as valid JSON and as
 * terminal text without control characters, whatever its bytes.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "../../client/output.h"

/* What one of the output functions writes for s, as a malloc'ed string. */
static char *render(void (*write_fn)(FILE *, const char *), const char *s)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);

	assert_non_null(f);
	write_fn(f, s);
	fclose(f);
	return buf;
}

static char *json(const char *s) { return render(output_json_string, s); }
static char *text(const char *s) { return render(output_text, s); }

static void json_escapes_what_it_must(void **state)
{
	char *s;
	(void)state;

	s = json("plain /usr/lib/libc.so.6");
	assert_string_equal(s, "plain /usr/lib/libc.so.6");
	free(s);
	s = json("quote \" backslash \\ newline \n tab \t bell \a");
	assert_string_equal(s, "quote \\\" backslash \\\\ newline \\n tab \\t bell \\u0007");
	free(s);
	s = json("caf\xc3\xa9 \xe2\x82\xac");            /* valid UTF-8 passes */
	assert_string_equal(s, "caf\xc3\xa9 \xe2\x82\xac");
	free(s);
	s = json("bad \xff\xc3 end");                    /* each invalid byte: U+FFFD */
	assert_string_equal(s, "bad \\ufffd\\ufffd end");
	free(s);
}

static void text_never_passes_control_characters(void **state)
{
	char *s;
	(void)state;

	s = text("/tmp/\x1b[2Jevil\r\n");
	assert_null(strchr(s, '\x1b'));
	assert_null(strchr(s, '\r'));
	assert_null(strchr(s, '\n'));
	assert_non_null(strstr(s, "\\x1b"));
	free(s);
	s = text("del \x7f and \xff");
	assert_null(strchr(s, '\x7f'));
	assert_non_null(strstr(s, "\\x7f"));
	assert_non_null(strstr(s, "\\xff"));
	free(s);
}

/* The table as output_result() prints it for one result. */
static char *table_row(const char *command)
{
	struct proto_result res = { .pid = 42, .action = PROTO_ACTION_STATUS,
				    .state = PROTO_PROC_UNGUARDED, .uid = PROTO_UID_UNKNOWN };
	char *buf = NULL;
	size_t len = 0;
	FILE *f = open_memstream(&buf, &len);
	struct output o = { .out = f, .format = OUTPUT_TABLE, .selecting = true };

	assert_non_null(f);
	snprintf(res.command, sizeof(res.command), "%s", command);
	assert_int_equal(output_result(&o, &res), 0);
	fclose(f);
	return buf;
}

static void table_escapes_the_command_and_cuts_it_whole(void **state)
{
	char *s, cmd[200];
	(void)state;

	/* A user's argv: CSI (U+009B), a right-to-left override, ESC. */
	s = table_row("python \xc2\x9b" "2K \xe2\x80\xae" "x \x1b[7m");
	assert_null(strstr(s, "\xc2\x9b"));
	assert_null(strstr(s, "\xe2\x80\xae"));
	assert_null(strchr(s, '\x1b'));
	assert_non_null(strstr(s, "python \\u009b2K \\u202ex \\x1b[7m\n"));
	free(s);
	/* Cut at 60 bytes, the euro sign across the cut is left out whole. */
	memset(cmd, 'a', 59);
	snprintf(cmd + 59, sizeof(cmd) - 59, "\xe2\x82\xac tail");
	s = table_row(cmd);
	assert_null(strstr(s, "\\x"));
	cmd[59] = '\n';
	cmd[60] = '\0';
	assert_non_null(strstr(s, cmd));        /* the 59 a's, then the line's end */
	free(s);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(json_escapes_what_it_must),
		cmocka_unit_test(text_never_passes_control_characters),
		cmocka_unit_test(table_escapes_the_command_and_cuts_it_whole),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
