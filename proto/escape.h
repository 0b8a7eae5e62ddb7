/* SPDX-License-Identifier: MIT */
/*
 * Showing text another process chose (argv, comm, exe and mapped object
 * paths, the daemon's messages quoting them): the one place that decides
 * which characters are shown as escapes, linked by btguardd (its log and
 * journal records) and btguardctl (every output format).  SECURITY.md
 * lists what is escaped; tests/unit/test_escape.c checks it byte by byte.
 *
 * Escaped, in both styles: every C0 control (0x00-0x1f), DEL (0x7f), every
 * C1 control (U+0080-U+009F, in UTF-8 C2 80..C2 9F), the bidi embeddings,
 * overrides and isolates (U+202A-U+202E, U+2066-U+2069), and each byte of
 * an invalid UTF-8 sequence (bad lead or continuation byte, overlong form,
 * surrogate, beyond U+10FFFF, cut short).  Valid UTF-8 otherwise passes.
 *
 *   ESCAPE_TEXT  a terminal or a log line: C0 and DEL as \xNN, C1 and bidi
 *                as \uNNNN, an invalid byte as \xNN, a backslash doubled
 *                (so no escape can be forged by the text itself).
 *   ESCAPE_JSON  the body of a JSON string (RFC 8259, strict): the quote
 *                and the backslash escaped, \n \r \t \b \f short, other
 *                controls, DEL, C1 and bidi as \u00NN / \uNNNN, an invalid
 *                byte as \ufffd (the output stays valid UTF-8).
 */
#ifndef BTGUARD_PROTO_ESCAPE_H
#define BTGUARD_PROTO_ESCAPE_H

#include <stddef.h>

enum escape_style {
	ESCAPE_TEXT = 0,
	ESCAPE_JSON,
};

/* The longest form of one character: "\u202e" or 4 bytes of UTF-8. */
#define ESCAPE_MAX 6

/*
 * The shown form of the character at s (n > 0 bytes available) into out,
 * NUL-terminated; returns how many bytes of s it stands for (1 to 4).
 */
size_t escape_next(const char *s, size_t n, enum escape_style style, char out[ESCAPE_MAX + 1]);

/*
 * Copies src into dst (cap > 0) escaped, stopping before an escape that
 * would not fit whole; always NUL-terminates.  Returns the length written.
 */
size_t escape_string(char *dst, size_t cap, const char *src, enum escape_style style);

#endif
