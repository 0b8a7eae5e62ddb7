// SPDX-License-Identifier: MIT
/*
 * Escaping text another process chose, for a terminal, a log line or JSON
 * (see escape.h for the rules).  Not part of the wire format: it lives in
 * proto/ because the daemon and the client both link proto/, and the rule
 * must be one function for both.
 *
 * Why more than ASCII controls: a terminal honours the 8-bit C1 controls
 * in UTF-8 too (U+009B is CSI, U+009D OSC, U+0085 NEL), so a user's argv
 * holding them can move the cursor over the operator's table and print a
 * fake row; bidi overrides and isolates reorder what follows them on the
 * line; and invalid UTF-8 is how a terminal's decoder is desynchronised.
 */
#include <stdbool.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "escape.h"

/*
 * Length of the valid UTF-8 sequence at s (n bytes available) and its code
 * point, or 0 when it is invalid: bad lead byte, missing continuation,
 * overlong form, surrogate, or beyond U+10FFFF.
 */
static size_t utf8_sequence(const unsigned char *s, size_t n, uint32_t *ret_cp)
{
	uint32_t cp, min;
	size_t len;

	if (s[0] < 0x80) {
		*ret_cp = s[0];
		return 1;
	}
	if (s[0] >= 0xc2 && s[0] <= 0xdf) {
		len = 2; cp = s[0] & 0x1f; min = 0x80;
	} else if ((s[0] & 0xf0) == 0xe0) {
		len = 3; cp = s[0] & 0x0f; min = 0x800;
	} else if (s[0] >= 0xf0 && s[0] <= 0xf4) {
		len = 4; cp = s[0] & 0x07; min = 0x10000;
	} else {
		return 0;
	}
	if (len > n)
		return 0;
	for (size_t i = 1; i < len; i++) {
		if ((s[i] & 0xc0) != 0x80)
			return 0;
		cp = cp << 6 | (s[i] & 0x3f);
	}
	if (cp < min || cp > 0x10ffff || (cp >= 0xd800 && cp <= 0xdfff))
		return 0;
	*ret_cp = cp;
	return len;
}

/* Whether a valid code point is one a terminal or a reader would act on. */
static bool is_escaped(uint32_t cp)
{
	return cp < 0x20 || (cp >= 0x7f && cp <= 0x9f) ||
	       (cp >= 0x202a && cp <= 0x202e) || (cp >= 0x2066 && cp <= 0x2069);
}

static const char *json_short(uint32_t cp)
{
	switch (cp) {
	case '"':  return "\\\"";
	case '\\': return "\\\\";
	case '\n': return "\\n";
	case '\r': return "\\r";
	case '\t': return "\\t";
	case '\b': return "\\b";
	case '\f': return "\\f";
	}
	return NULL;
}

size_t escape_next(const char *str, size_t n, enum escape_style style, char out[ESCAPE_MAX + 1])
{
	const unsigned char *s = (const unsigned char *)str;
	const char *fixed = NULL;
	uint32_t cp = 0;
	size_t len = utf8_sequence(s, n, &cp);

	if (len == 0) {
		/* One bad byte; the next byte starts afresh. */
		if (style == ESCAPE_JSON)
			memcpy(out, "\\ufffd", 7);
		else
			snprintf(out, ESCAPE_MAX + 1, "\\x%02x", s[0]);
		return 1;
	}
	if (style == ESCAPE_JSON)
		fixed = json_short(cp);
	else if (cp == '\\')
		fixed = "\\\\";
	if (fixed) {
		snprintf(out, ESCAPE_MAX + 1, "%s", fixed);
		return len;
	}
	if (!is_escaped(cp)) {
		memcpy(out, s, len);
		out[len] = '\0';
		return len;
	}
	if (style == ESCAPE_TEXT && cp <= 0x7f)
		snprintf(out, ESCAPE_MAX + 1, "\\x%02x", (unsigned)cp);
	else
		snprintf(out, ESCAPE_MAX + 1, "\\u%04x", (unsigned)cp);
	return len;
}

size_t escape_string(char *dst, size_t cap, const char *src, enum escape_style style)
{
	size_t n = strlen(src), o = 0;

	for (size_t i = 0; i < n;) {
		char one[ESCAPE_MAX + 1];
		size_t used = escape_next(src + i, n - i, style, one);
		size_t len = strlen(one);

		if (o + len >= cap)
			break;
		memcpy(dst + o, one, len);
		o += len;
		i += used;
	}
	dst[o] = '\0';
	return o;
}
