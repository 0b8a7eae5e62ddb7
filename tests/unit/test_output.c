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

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(json_escapes_what_it_must),
		cmocka_unit_test(text_never_passes_control_characters),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
