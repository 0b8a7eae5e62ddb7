// SPDX-License-Identifier: MIT
/*
 * Unit tests for proto/escape.c, the one rule for showing text another
 * process chose: byte by byte, every C0 control, DEL, each C1 control,
 * each bidi control, the invalid UTF-8 forms (overlong, surrogate, beyond
 * U+10FFFF, cut short, stray continuation) and the valid characters on
 * either side of each escaped range, in both styles.
 */
#include <setjmp.h>
#include <stdbool.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <cmocka.h>

#include "escape.h"

/* The whole escaped form of n bytes of s (which may hold a NUL). */
static const char *esc(const char *s, size_t n, enum escape_style style)
{
	static char buf[256];
	size_t o = 0;

	for (size_t i = 0; i < n;) {
		char one[ESCAPE_MAX + 1];
		size_t used = escape_next(s + i, n - i, style, one);

		assert_true(used >= 1 && used <= 4 && used <= n - i);
		assert_true(strlen(one) <= ESCAPE_MAX);
		assert_true(o + strlen(one) < sizeof(buf));
		memcpy(buf + o, one, strlen(one));
		o += strlen(one);
		i += used;
	}
	buf[o] = '\0';
	return buf;
}

static const char *text(const char *s) { return esc(s, strlen(s), ESCAPE_TEXT); }
static const char *json(const char *s) { return esc(s, strlen(s), ESCAPE_JSON); }

static void every_c0_control_and_del(void **state)
{
	char want[16];
	(void)state;

	for (unsigned c = 0; c < 0x20; c++) {
		char in = (char)c;
		const char *j;

		snprintf(want, sizeof(want), "\\x%02x", c);
		assert_string_equal(esc(&in, 1, ESCAPE_TEXT), want);
		j = esc(&in, 1, ESCAPE_JSON);
		switch (c) {
		case '\n': assert_string_equal(j, "\\n"); break;
		case '\r': assert_string_equal(j, "\\r"); break;
		case '\t': assert_string_equal(j, "\\t"); break;
		case '\b': assert_string_equal(j, "\\b"); break;
		case '\f': assert_string_equal(j, "\\f"); break;
		default:
			snprintf(want, sizeof(want), "\\u%04x", c);
			assert_string_equal(j, want);
		}
	}
	assert_string_equal(text("\x7f"), "\\x7f");
	assert_string_equal(json("\x7f"), "\\u007f");
	/* The printable ASCII between them passes, but for the backslash and,
	 * in JSON, the quote. */
	for (unsigned c = 0x20; c < 0x7f; c++) {
		char in[2] = { (char)c, '\0' };

		if (c == '\\') {
			assert_string_equal(text(in), "\\\\");
			assert_string_equal(json(in), "\\\\");
		} else if (c == '"') {
			assert_string_equal(text(in), "\"");
			assert_string_equal(json(in), "\\\"");
		} else {
			assert_string_equal(text(in), in);
			assert_string_equal(json(in), in);
		}
	}
}

static void each_c1_control(void **state)
{
	char in[3] = { '\xc2', 0, 0 }, want[16];
	(void)state;

	for (unsigned c = 0x80; c <= 0x9f; c++) {
		in[1] = (char)c;
		snprintf(want, sizeof(want), "\\u%04x", c);
		assert_string_equal(text(in), want);
		assert_string_equal(json(in), want);
	}
	/* U+00A0, the first character after them, passes. */
	assert_string_equal(text("\xc2\xa0"), "\xc2\xa0");
	assert_string_equal(json("\xc2\xa0"), "\xc2\xa0");
}

static void each_bidi_control(void **state)
{
	static const struct { const char *utf8; const char *shown; } bidi[] = {
		{ "\xe2\x80\xaa", "\\u202a" }, { "\xe2\x80\xab", "\\u202b" },
		{ "\xe2\x80\xac", "\\u202c" }, { "\xe2\x80\xad", "\\u202d" },
		{ "\xe2\x80\xae", "\\u202e" },
		{ "\xe2\x81\xa6", "\\u2066" }, { "\xe2\x81\xa7", "\\u2067" },
		{ "\xe2\x81\xa8", "\\u2068" }, { "\xe2\x81\xa9", "\\u2069" },
	};
	/* Their neighbours: U+2029, U+202F, U+2065, U+206A. */
	static const char *const kept[] = {
		"\xe2\x80\xa9", "\xe2\x80\xaf", "\xe2\x81\xa5", "\xe2\x81\xaa",
	};
	(void)state;

	for (size_t i = 0; i < sizeof(bidi) / sizeof(bidi[0]); i++) {
		assert_string_equal(text(bidi[i].utf8), bidi[i].shown);
		assert_string_equal(json(bidi[i].utf8), bidi[i].shown);
	}
	for (size_t i = 0; i < sizeof(kept) / sizeof(kept[0]); i++) {
		assert_string_equal(text(kept[i]), kept[i]);
		assert_string_equal(json(kept[i]), kept[i]);
	}
}

static void invalid_utf8_each_byte(void **state)
{
	static const struct { const char *in; const char *text; const char *json; } bad[] = {
		/* overlong forms of NUL, '/', U+07FF, U+FFFF */
		{ "\xc0\x80", "\\xc0\\x80", "\\ufffd\\ufffd" },
		{ "\xc0\xaf", "\\xc0\\xaf", "\\ufffd\\ufffd" },
		{ "\xc1\xbf", "\\xc1\\xbf", "\\ufffd\\ufffd" },
		{ "\xe0\x80\xaf", "\\xe0\\x80\\xaf", "\\ufffd\\ufffd\\ufffd" },
		{ "\xe0\x9f\xbf", "\\xe0\\x9f\\xbf", "\\ufffd\\ufffd\\ufffd" },
		{ "\xf0\x8f\xbf\xbf", "\\xf0\\x8f\\xbf\\xbf", "\\ufffd\\ufffd\\ufffd\\ufffd" },
		/* an overlong C1 control (U+009B in three bytes) */
		{ "\xe0\x82\x9b", "\\xe0\\x82\\x9b", "\\ufffd\\ufffd\\ufffd" },
		/* surrogates, first and last */
		{ "\xed\xa0\x80", "\\xed\\xa0\\x80", "\\ufffd\\ufffd\\ufffd" },
		{ "\xed\xbf\xbf", "\\xed\\xbf\\xbf", "\\ufffd\\ufffd\\ufffd" },
		/* beyond U+10FFFF, and lead bytes that never occur */
		{ "\xf4\x90\x80\x80", "\\xf4\\x90\\x80\\x80", "\\ufffd\\ufffd\\ufffd\\ufffd" },
		{ "\xf5", "\\xf5", "\\ufffd" }, { "\xfe", "\\xfe", "\\ufffd" }, { "\xff", "\\xff", "\\ufffd" },
		/* a stray continuation byte, and a C1 byte without its lead */
		{ "\x80", "\\x80", "\\ufffd" }, { "\x9b", "\\x9b", "\\ufffd" }, { "\xbf", "\\xbf", "\\ufffd" },
		/* cut short: at the end, and before an ASCII byte */
		{ "\xc2", "\\xc2", "\\ufffd" },
		{ "\xe2\x80", "\\xe2\\x80", "\\ufffd\\ufffd" },
		{ "\xf0\x9f\x98", "\\xf0\\x9f\\x98", "\\ufffd\\ufffd\\ufffd" },
		{ "\xe2\x80" "A", "\\xe2\\x80" "A", "\\ufffd\\ufffd" "A" },
		/* a cut sequence followed by a whole one: the whole one survives */
		{ "\xe2\xe2\x82\xac", "\\xe2\xe2\x82\xac", "\\ufffd\xe2\x82\xac" },
		/* a cut one whose next byte starts a C1 control */
		{ "\xe2\xc2\x9b", "\\xe2\\u009b", "\\ufffd\\u009b" },
	};
	(void)state;

	for (size_t i = 0; i < sizeof(bad) / sizeof(bad[0]); i++) {
		assert_string_equal(text(bad[i].in), bad[i].text);
		assert_string_equal(json(bad[i].in), bad[i].json);
	}
}

static void valid_multibyte_kept(void **state)
{
	static const char *const good[] = {
		"caf\xc3\xa9", "\xe2\x82\xac 5", "\xdf\xbf", "\xe0\xa0\x80", "\xef\xbf\xbf",
		"\xf0\x90\x80\x80", "\xf0\x9f\x98\x80", "\xf4\x8f\xbf\xbf", "\xed\x9f\xbf", "\xee\x80\x80",
		"/opt/\xe6\x97\xa5\xe6\x9c\xac/libc10.so",
	};
	(void)state;

	for (size_t i = 0; i < sizeof(good) / sizeof(good[0]); i++) {
		assert_string_equal(text(good[i]), good[i]);
		assert_string_equal(json(good[i]), good[i]);
	}
}

static void a_forged_escape_is_told_apart(void **state)
{
	(void)state;
	/* The characters \x1b typed by a user are not shown as an escape. */
	assert_string_equal(text("\\x1b"), "\\\\x1b");
	assert_string_equal(json("\\u001b"), "\\\\u001b");
}

static void a_hostile_row(void **state)
{
	/* CSI (U+009B) 2K, then a right-to-left override: the example. */
	const char *row = "python \xc2\x9b" "2K\rroot \xe2\x80\xae" "fake\x1b]0;x\x07";
	(void)state;

	assert_string_equal(text(row), "python \\u009b2K\\x0droot \\u202efake\\x1b]0;x\\x07");
	assert_string_equal(json(row), "python \\u009b2K\\rroot \\u202efake\\u001b]0;x\\u0007");
}

static void escape_string_cuts_at_a_whole_escape(void **state)
{
	char buf[8];
	(void)state;

	assert_int_equal(escape_string(buf, sizeof(buf), "ab\x1b" "cd", ESCAPE_TEXT), 7);
	assert_string_equal(buf, "ab\\x1bc");
	assert_int_equal(escape_string(buf, sizeof(buf), "abcd\x1b", ESCAPE_TEXT), 4);
	assert_string_equal(buf, "abcd");
	/* A character is never cut in two either. */
	assert_int_equal(escape_string(buf, sizeof(buf), "abcde\xe2\x82\xac", ESCAPE_TEXT), 5);
	assert_string_equal(buf, "abcde");
	assert_int_equal(escape_string(buf, 1, "abc", ESCAPE_TEXT), 0);
	assert_string_equal(buf, "");
}

/*
 * An independent reading of the output: valid UTF-8 (RFC 3629: shortest
 * form, no surrogate, at most U+10FFFF) holding none of the escaped
 * characters.  Returns false at the first offence.
 */
static bool shown_safely(const char *out)
{
	const unsigned char *p = (const unsigned char *)out;

	while (*p) {
		uint32_t cp;
		int more;

		if (*p < 0x80) {
			cp = *p; more = 0;
		} else if (*p >= 0xc2 && *p <= 0xdf) {
			cp = *p & 0x1f; more = 1;
		} else if (*p >= 0xe0 && *p <= 0xef) {
			cp = *p & 0x0f; more = 2;
		} else if (*p >= 0xf0 && *p <= 0xf4) {
			cp = *p & 0x07; more = 3;
		} else {
			return false;
		}
		p++;
		for (int i = 0; i < more; i++, p++) {
			if ((*p & 0xc0) != 0x80)
				return false;
			cp = cp << 6 | (*p & 0x3f);
		}
		if ((more == 2 && cp < 0x800) || (more == 3 && (cp < 0x10000 || cp > 0x10ffff)) ||
		    (cp >= 0xd800 && cp <= 0xdfff))
			return false;
		if (cp < 0x20 || (cp >= 0x7f && cp <= 0x9f) || (cp >= 0x202a && cp <= 0x202e) ||
		    (cp >= 0x2066 && cp <= 0x2069))
			return false;
	}
	return true;
}

/* Every string of one and two bytes, and of three beginning a 3-byte form. */
static void every_short_input_comes_out_safe(void **state)
{
	char in[4] = { 0 };
	(void)state;

	for (unsigned a = 1; a < 256; a++) {
		in[0] = (char)a;
		for (unsigned b = 0; b < 256; b++) {
			size_t n = b ? 2 : 1;

			in[1] = (char)b;
			assert_true(shown_safely(esc(in, n, ESCAPE_TEXT)));
			assert_true(shown_safely(esc(in, n, ESCAPE_JSON)));
			if (a < 0xe0 || a > 0xef || !b)
				continue;
			for (unsigned c = 1; c < 256; c++) {
				in[2] = (char)c;
				assert_true(shown_safely(esc(in, 3, ESCAPE_TEXT)));
				assert_true(shown_safely(esc(in, 3, ESCAPE_JSON)));
			}
			in[2] = 0;
		}
	}
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(every_c0_control_and_del),
		cmocka_unit_test(each_c1_control),
		cmocka_unit_test(each_bidi_control),
		cmocka_unit_test(invalid_utf8_each_byte),
		cmocka_unit_test(valid_multibyte_kept),
		cmocka_unit_test(a_forged_escape_is_told_apart),
		cmocka_unit_test(a_hostile_row),
		cmocka_unit_test(escape_string_cuts_at_a_whole_escape),
		cmocka_unit_test(every_short_input_comes_out_safe),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
