// SPDX-License-Identifier: MIT
/*
 * The wire protocol's pure half: encoding and decoding whole messages
 * (the names and texts of actions, states and error codes are names.c's).
 * Nothing here touches a socket or allocates; the daemon, btguardctl, the
 * unit tests and the fuzzers all link it, so every byte a peer sends
 * passes through the decoders below before anyone else looks at it.
 *
 * Integers are read and written a byte at a time in little-endian order
 * through a bounded cursor; structs are never copied to or from the wire,
 * so padding, host byte order and ABI never leak into the format.  A cursor
 * that would run past its end only records that it failed: every decoder
 * checks that at the end, together with "no bytes left over", which is what
 * makes a truncated or padded payload an error rather than a partial read.
 * The format itself is described in proto/PROTOCOL.md.
 */
#include <errno.h>
#include <limits.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stdio.h>
#include <string.h>

#include "proto.h"

/* Fixed parts of the payloads, see PROTOCOL.md. */
#define REQUEST_FIXED 12u   /* action, flags, reserved, deadline_ms, npids */
#define SELECT_FIXED   6u   /* fields, reserved, uid */
#define RESULT_FIXED  28u   /* pid .. warnings, msglen */
#define SITE_FIXED    12u   /* address, state, reserved, objlen */
#define DONE_SIZE      4u
#define ERROR_FIXED    6u   /* code, msglen */

/* ------------------------------------------------------------ cursors -- */

struct writer {
	uint8_t *buf;
	size_t   cap;
	size_t   off;
};

/* Callers size the whole message first, so a writer never overflows; the
 * bound check is a last line of defence, not a control path. */
static void put_bytes(struct writer *w, const void *src, size_t n)
{
	if (n > w->cap - w->off)
		return;
	if (n)
		memcpy(w->buf + w->off, src, n);
	w->off += n;
}

static void put_u8(struct writer *w, uint8_t v)
{
	put_bytes(w, &v, 1);
}

static void put_u16(struct writer *w, uint16_t v)
{
	uint8_t b[2] = { (uint8_t)v, (uint8_t)(v >> 8) };
	put_bytes(w, b, sizeof(b));
}

static void put_u32(struct writer *w, uint32_t v)
{
	uint8_t b[4] = { (uint8_t)v, (uint8_t)(v >> 8), (uint8_t)(v >> 16), (uint8_t)(v >> 24) };
	put_bytes(w, b, sizeof(b));
}

static void put_u64(struct writer *w, uint64_t v)
{
	put_u32(w, (uint32_t)v);
	put_u32(w, (uint32_t)(v >> 32));
}

struct reader {
	const uint8_t *buf;
	size_t         len;
	size_t         off;
	bool           short_read;   /* something asked for more than was left */
};

static const uint8_t *get_bytes(struct reader *r, size_t n)
{
	const uint8_t *p;

	if (r->short_read || n > r->len - r->off) {
		r->short_read = true;
		return NULL;
	}
	p = r->buf + r->off;
	r->off += n;
	return p;
}

static uint8_t get_u8(struct reader *r)
{
	const uint8_t *p = get_bytes(r, 1);
	return p ? p[0] : 0;
}

static uint16_t get_u16(struct reader *r)
{
	const uint8_t *p = get_bytes(r, 2);
	return p ? (uint16_t)(p[0] | p[1] << 8) : 0;
}

static uint32_t get_u32(struct reader *r)
{
	const uint8_t *p = get_bytes(r, 4);
	return p ? (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 |
		   (uint32_t)p[3] << 24 : 0;
}

static uint64_t get_u64(struct reader *r)
{
	uint64_t lo = get_u32(r);
	return lo | (uint64_t)get_u32(r) << 32;
}

/* A decode succeeded only if nothing was missing and nothing is left over. */
static bool reader_done(const struct reader *r)
{
	return !r->short_read && r->off == r->len;
}

/*
 * Reads a length-prefixed string into dst (NUL-terminated).  The strings
 * are C strings at both ends, so an embedded NUL could only mean a
 * malicious or broken peer hiding text behind it: rejected.
 */
static int get_string(struct reader *r, size_t limit, char *dst, size_t dst_cap)
{
	uint16_t n = get_u16(r);
	const uint8_t *p;

	if (r->short_read || n > limit)
		return -EBADMSG;
	p = get_bytes(r, n);
	if (!p || memchr(p, '\0', n))
		return -EBADMSG;
	if (dst && dst_cap) {
		size_t copy = n < dst_cap - 1 ? n : dst_cap - 1;
		memcpy(dst, p, copy);
		dst[copy] = '\0';
	}
	return 0;
}

/*
 * Length of s as it goes on the wire: at most limit bytes, and when that
 * cuts the string, cut before a UTF-8 sequence the limit would split, so a
 * truncated path or message is still valid text for the JSON output.
 */
static size_t wire_strlen(const char *s, size_t limit)
{
	size_t n = strnlen(s, limit + 1);

	if (n <= limit)
		return n;
	n = limit;
	while (n > 0 && ((unsigned char)s[n] & 0xc0) == 0x80)
		n--;
	return n;
}

static void put_header(struct writer *w, enum proto_kind kind, size_t payload)
{
	put_u32(w, PROTO_MAGIC);
	put_u16(w, PROTO_VERSION);
	put_u16(w, (uint16_t)kind);
	put_u32(w, (uint32_t)payload);
}

/* Checks the capacity for a message whose payload is `payload` bytes. */
static int start_message(struct writer *w, uint8_t *buf, size_t cap,
			 enum proto_kind kind, size_t payload)
{
	if (payload > PROTO_MAX_PAYLOAD)
		return -EINVAL;
	if (!buf || cap < PROTO_HEADER_SIZE + payload)
		return -EMSGSIZE;
	*w = (struct writer){ .buf = buf, .cap = cap };
	put_header(w, kind, payload);
	return 0;
}

/* ------------------------------------------------------------- checks -- */

/* The actions a RESULT answers: those that act on processes. */
static bool action_valid(unsigned a)
{
	return a == PROTO_ACTION_GUARD || a == PROTO_ACTION_UNGUARD || a == PROTO_ACTION_STATUS ||
	       a == PROTO_ACTION_AT_EXEC;
}

/* POLICY, RELOAD and SWEPT are about the daemon itself: they name no process. */
static bool daemon_action(unsigned a)
{
	return a == PROTO_ACTION_POLICY || a == PROTO_ACTION_RELOAD || a == PROTO_ACTION_SWEPT;
}

static bool site_state_valid(unsigned s)
{
	return s >= PROTO_SITE_ORIGINAL && s <= PROTO_SITE_TORN;
}

static bool proc_state_valid(unsigned s)
{
	return s <= PROTO_PROC_UNKNOWN;
}

static bool kind_valid(unsigned k)
{
	return k >= PROTO_KIND_REQUEST && k <= PROTO_KIND_NOTICE;
}

__attribute__((format(printf, 3, 4)))
static int refuse(struct proto_verdict *why, uint32_t code, const char *fmt, ...)
{
	va_list ap;

	if (why) {
		why->code = code;
		va_start(ap, fmt);
		vsnprintf(why->text, sizeof(why->text), fmt, ap);
		va_end(ap);
	}
	return code == BTG_ERR_LIMIT ? -EMSGSIZE : -EBADMSG;
}

uint32_t proto_max_deadline_ms(unsigned action)
{
	return action == PROTO_ACTION_AT_EXEC ? PROTO_MAX_FOLLOW_MS : PROTO_MAX_DEADLINE_MS;
}

/* The request's fixed part, checked alike by the encoder and the decoder. */
static int request_check(uint8_t action, uint8_t flags, uint32_t deadline_ms, uint32_t npids,
			 uint8_t sel, struct proto_verdict *why)
{
	if (daemon_action(action)) {
		/* Everything else must be 0: kept free for a later version. */
		if (flags || deadline_ms || npids || sel)
			return refuse(why, BTG_ERR_PROTO,
				      "%s takes no flags, deadline, PIDs or selector",
				      proto_action_name(action));
		return 0;
	}
	if (!action_valid(action))
		return refuse(why, BTG_ERR_PROTO,
			      "unknown action %u (1 guard, 2 unguard, 3 status, 4 at-exec, 5 policy, "
			      "6 reload, 7 swept)", action);
	if (flags & ~PROTO_FLAGS_KNOWN)
		return refuse(why, BTG_ERR_PROTO, "unknown request flags 0x%02x", flags);
	if (deadline_ms > proto_max_deadline_ms(action))
		return refuse(why, BTG_ERR_LIMIT, "deadline of %u ms exceeds the limit of %u ms",
			      deadline_ms, proto_max_deadline_ms(action));
	if (npids > PROTO_MAX_PIDS)
		return refuse(why, BTG_ERR_LIMIT, "request names %u PIDs; the limit is %u", npids,
			      PROTO_MAX_PIDS);
	if (sel & ~PROTO_SEL_KNOWN)
		return refuse(why, BTG_ERR_PROTO, "unknown selector fields 0x%02x", sel);
	if (npids == 0 && sel == 0)
		return refuse(why, BTG_ERR_PROTO, "request names no PID and selects nothing");
	if (npids > 0 && sel != 0)
		return refuse(why, BTG_ERR_PROTO,
			      "request both names PIDs and selects processes; it may do one");
	/* One process followed through one exec: a selector or a tree would
	 * have to follow processes nobody has named, each for its own exec. */
	if (action == PROTO_ACTION_AT_EXEC && (npids != 1 || (flags & PROTO_FLAG_TREE)))
		return refuse(why, BTG_ERR_PROTO,
			      "at-exec names exactly one PID, without TREE or a selector");
	if ((flags & PROTO_FLAG_WALK) && action != PROTO_ACTION_GUARD &&
	    action != PROTO_ACTION_AT_EXEC)
		return refuse(why, BTG_ERR_PROTO, "WALK is a form of guard; %s takes no WALK",
			      proto_action_name(action));
	return 0;
}

/* The selector patterns in wire order, with the field bit each belongs to. */
static const uint8_t pattern_bits[] = { PROTO_SEL_EXE, PROTO_SEL_CMDLINE, PROTO_SEL_CGROUP,
					PROTO_SEL_MAPS };
static const char *const pattern_names[] = { "exe", "cmdline", "cgroup", "maps" };

static char *pattern_of(struct proto_select *sel, size_t i)
{
	char *const p[] = { sel->exe, sel->cmdline, sel->cgroup, sel->maps };
	return p[i];
}

static bool result_head_valid(const struct proto_result *res)
{
	uint8_t known = PROTO_RESULT_WROTE |
			(res->action == PROTO_ACTION_AT_EXEC ? PROTO_RESULT_ARMED : 0);

	return res->pid > 0 && action_valid(res->action) && proc_state_valid(res->state) &&
	       !(res->flags & ~known) && res->nsites <= PROTO_MAX_SITES &&
	       res->risk <= PROTO_RISK_COVERED && !(res->warnings & ~PROTO_WARNINGS_KNOWN);
}

/* ----------------------------------------------------------- encoders -- */

int proto_encode_request(const struct proto_request *req, uint8_t *buf, size_t cap)
{
	const struct proto_select *sel = &req->sel;
	const char *const pattern[] = { sel->exe, sel->cmdline, sel->cgroup, sel->maps };
	size_t payload, plen[4] = { 0 };
	struct writer w;
	int r;

	if (request_check(req->action, req->flags, req->deadline_ms, req->npids, sel->fields,
			  NULL) < 0)
		return -EINVAL;
	if (!(sel->fields & PROTO_SEL_UID) && sel->uid != 0)
		return -EINVAL;
	for (uint32_t i = 0; i < req->npids; i++)
		if (req->pids[i] <= 0)
			return -EINVAL;
	payload = REQUEST_FIXED + 4u * (size_t)req->npids + SELECT_FIXED;
	for (size_t i = 0; i < sizeof(pattern_bits); i++) {
		if (!(sel->fields & pattern_bits[i]))
			continue;
		plen[i] = strnlen(pattern[i], PROTO_MAX_PATTERN + 1);
		if (plen[i] == 0 || plen[i] > PROTO_MAX_PATTERN)
			return -EINVAL;   /* a pattern is never cut: it would select others */
		payload += 2 + plen[i];
	}

	r = start_message(&w, buf, cap, PROTO_KIND_REQUEST, payload);
	if (r < 0)
		return r;
	put_u8(&w, req->action);
	put_u8(&w, req->flags);
	put_u16(&w, 0);
	put_u32(&w, req->deadline_ms);
	put_u32(&w, req->npids);
	for (uint32_t i = 0; i < req->npids; i++)
		put_u32(&w, (uint32_t)req->pids[i]);
	put_u8(&w, sel->fields);
	put_u8(&w, 0);
	put_u32(&w, sel->uid);
	for (size_t i = 0; i < sizeof(pattern_bits); i++) {
		if (!(sel->fields & pattern_bits[i]))
			continue;
		put_u16(&w, (uint16_t)plen[i]);
		put_bytes(&w, pattern[i], plen[i]);
	}
	return (int)w.off;
}

int proto_encode_result(const struct proto_result *res, uint8_t *buf, size_t cap)
{
	size_t msglen, cmdlen, reasonlen, objlen[PROTO_MAX_SITES], payload;
	struct writer w;
	int r;

	if (!result_head_valid(res))
		return -EINVAL;
	msglen = wire_strlen(res->message, PROTO_MAX_MESSAGE);
	cmdlen = wire_strlen(res->command, PROTO_MAX_COMMAND);
	reasonlen = wire_strlen(res->reason, PROTO_MAX_MESSAGE);
	payload = RESULT_FIXED + msglen + 2 + cmdlen + 2 + reasonlen;
	for (unsigned i = 0; i < res->nsites; i++) {
		if (!site_state_valid(res->sites[i].state) ||
		    (res->sites[i].flags & ~PROTO_SITE_FLAGS))
			return -EINVAL;
		objlen[i] = wire_strlen(res->sites[i].object, PROTO_MAX_OBJECT);
		payload += SITE_FIXED + objlen[i];
	}

	r = start_message(&w, buf, cap, PROTO_KIND_RESULT, payload);
	if (r < 0)
		return r;
	put_u32(&w, (uint32_t)res->pid);
	put_u32(&w, res->error);
	put_u8(&w, res->action);
	put_u8(&w, res->state);
	put_u8(&w, res->flags);
	put_u8(&w, res->nsites);
	put_u32(&w, res->pause_us);
	put_u32(&w, res->check_us);
	put_u32(&w, res->uid);
	put_u8(&w, res->risk);
	put_u8(&w, res->warnings);
	put_u16(&w, (uint16_t)msglen);
	put_bytes(&w, res->message, msglen);
	put_u16(&w, (uint16_t)cmdlen);
	put_bytes(&w, res->command, cmdlen);
	put_u16(&w, (uint16_t)reasonlen);
	put_bytes(&w, res->reason, reasonlen);
	for (unsigned i = 0; i < res->nsites; i++) {
		put_u64(&w, res->sites[i].address);
		put_u8(&w, res->sites[i].state);
		put_u8(&w, res->sites[i].flags);
		put_u16(&w, (uint16_t)objlen[i]);
		put_bytes(&w, res->sites[i].object, objlen[i]);
	}
	return (int)w.off;
}

int proto_encode_done(uint32_t count, uint8_t *buf, size_t cap)
{
	struct writer w;
	int r = start_message(&w, buf, cap, PROTO_KIND_DONE, DONE_SIZE);

	if (r < 0)
		return r;
	put_u32(&w, count);
	return (int)w.off;
}

int proto_encode_error(uint32_t code, const char *message, uint8_t *buf, size_t cap)
{
	size_t msglen;
	struct writer w;
	int r;

	/* An ERROR that says "success" would leave the client with nothing to
	 * report; the decoder refuses it too. */
	if (code == BTG_OK)
		return -EINVAL;
	if (!message)
		message = "";
	msglen = wire_strlen(message, PROTO_MAX_MESSAGE);
	r = start_message(&w, buf, cap, PROTO_KIND_ERROR, ERROR_FIXED + msglen);
	if (r < 0)
		return r;
	put_u32(&w, code);
	put_u16(&w, (uint16_t)msglen);
	put_bytes(&w, message, msglen);
	return (int)w.off;
}

int proto_encode_notice(const char *message, uint8_t *buf, size_t cap)
{
	size_t msglen = message ? wire_strlen(message, PROTO_MAX_MESSAGE) : 0;
	struct writer w;
	int r;

	if (msglen == 0)
		return -EINVAL;   /* a notice that says nothing: the decoder refuses it too */
	r = start_message(&w, buf, cap, PROTO_KIND_NOTICE, 2 + msglen);
	if (r < 0)
		return r;
	put_u16(&w, (uint16_t)msglen);
	put_bytes(&w, message, msglen);
	return (int)w.off;
}

/* hits, flags, npids, namelen; then the name, matchlen, the match and the PIDs. */
#define RULE_FIXED 8u

static bool rule_name_valid(size_t n)
{
	return n >= 1 && n <= PROTO_MAX_RULE_NAME;
}

int proto_encode_rule(const struct proto_rule *rule, uint8_t *buf, size_t cap)
{
	size_t namelen = strnlen(rule->name, PROTO_MAX_RULE_NAME + 1);
	size_t matchlen = wire_strlen(rule->match, PROTO_MAX_MESSAGE);
	struct writer w;
	int r;

	/* A name is never cut: it is what the operator greps the journal for. */
	if (!rule_name_valid(namelen) || rule->npids > PROTO_MAX_RULE_PIDS ||
	    (rule->flags & ~PROTO_RULE_EXCLUDE))
		return -EINVAL;
	for (unsigned i = 0; i < rule->npids; i++)
		if (rule->pids[i] <= 0)
			return -EINVAL;
	r = start_message(&w, buf, cap, PROTO_KIND_RULE,
			  RULE_FIXED + namelen + 2 + matchlen + 4u * rule->npids);
	if (r < 0)
		return r;
	put_u32(&w, rule->hits);
	put_u8(&w, rule->flags);
	put_u8(&w, rule->npids);
	put_u16(&w, (uint16_t)namelen);
	put_bytes(&w, rule->name, namelen);
	put_u16(&w, (uint16_t)matchlen);
	put_bytes(&w, rule->match, matchlen);
	for (unsigned i = 0; i < rule->npids; i++)
		put_u32(&w, (uint32_t)rule->pids[i]);
	return (int)w.off;
}

/* ----------------------------------------------------------- decoders -- */

int proto_decode_header(const uint8_t *buf, size_t len, struct proto_header *ret,
			struct proto_verdict *why)
{
	struct reader r = { .buf = buf, .len = len };
	struct proto_header h;

	if (!buf || len < PROTO_HEADER_SIZE)
		return refuse(why, BTG_ERR_PROTO, "a header is %u bytes, not %zu", PROTO_HEADER_SIZE,
			      len);
	h.magic = get_u32(&r);
	h.version = get_u16(&r);
	h.kind = get_u16(&r);
	h.length = get_u32(&r);
	if (h.magic != PROTO_MAGIC)
		return refuse(why, BTG_ERR_PROTO,
			      "bad magic 0x%08x (expected 0x%08x, \"BTG1\"): not a btguard client",
			      h.magic, PROTO_MAGIC);
	/* Checked before the kind: a future version may define new kinds. */
	if (h.version != PROTO_VERSION) {
		refuse(why, EPROTONOSUPPORT,
		       "protocol version %u is not supported; this daemon speaks version %u",
		       h.version, PROTO_VERSION);
		return -EPROTONOSUPPORT;
	}
	if (!kind_valid(h.kind))
		return refuse(why, BTG_ERR_PROTO, "unknown message kind %u", h.kind);
	if (h.length > PROTO_MAX_PAYLOAD)
		return refuse(why, BTG_ERR_LIMIT,
			      "message payload of %u bytes exceeds the limit of %u bytes", h.length,
			      PROTO_MAX_PAYLOAD);
	*ret = h;
	return 0;
}

/* The selector block after the PIDs, into sel (which a failure may leave half written). */
static int get_select(struct reader *r, struct proto_select *sel, struct proto_verdict *why)
{
	sel->fields = get_u8(r);
	if (get_u8(r) != 0)
		return refuse(why, BTG_ERR_PROTO, "reserved selector field is not 0");
	sel->uid = get_u32(r);
	if (r->short_read)
		return refuse(why, BTG_ERR_PROTO, "REQUEST payload ends inside its selector block");
	if (!(sel->fields & PROTO_SEL_UID) && sel->uid != 0)
		return refuse(why, BTG_ERR_PROTO, "selector uid %u given without the uid field",
			      sel->uid);
	for (size_t i = 0; i < sizeof(pattern_bits); i++) {
		char *dst = pattern_of(sel, i);
		uint16_t n;

		dst[0] = '\0';
		if (!(sel->fields & pattern_bits[i]))
			continue;
		n = get_u16(r);
		if (r->short_read)
			return refuse(why, BTG_ERR_PROTO, "REQUEST payload ends before its %s pattern",
				      pattern_names[i]);
		if (n == 0)
			return refuse(why, BTG_ERR_PROTO, "the %s pattern is empty", pattern_names[i]);
		if (n > PROTO_MAX_PATTERN)
			return refuse(why, BTG_ERR_LIMIT, "the %s pattern is %u bytes; the limit is %u",
				      pattern_names[i], n, PROTO_MAX_PATTERN);
		r->off -= 2;
		if (get_string(r, PROTO_MAX_PATTERN, dst, PROTO_MAX_PATTERN + 1) < 0)
			return refuse(why, BTG_ERR_PROTO,
				      "the %s pattern is cut short or holds a NUL byte",
				      pattern_names[i]);
	}
	return 0;
}

int proto_decode_request(const uint8_t *payload, size_t len, struct proto_request *ret,
			 struct proto_verdict *why)
{
	struct reader r = { .buf = payload, .len = len };
	uint8_t action, flags, sel;
	uint16_t reserved;
	uint32_t deadline_ms, npids;
	size_t end_pids;
	int e;

	/* Checked whole before ret is written, but for the selector block,
	 * which goes straight in (ret is only meaningful on success). */
	if (!payload || len < REQUEST_FIXED)
		return refuse(why, BTG_ERR_PROTO,
			      "REQUEST payload of %zu bytes is shorter than its %u-byte fixed part",
			      len, REQUEST_FIXED);
	action = get_u8(&r);
	flags = get_u8(&r);
	reserved = get_u16(&r);
	deadline_ms = get_u32(&r);
	npids = get_u32(&r);
	if (reserved != 0)
		return refuse(why, BTG_ERR_PROTO, "reserved REQUEST field is 0x%04x, not 0", reserved);
	end_pids = REQUEST_FIXED + 4u * (size_t)(npids <= PROTO_MAX_PIDS ? npids : 0);
	sel = len > end_pids ? payload[end_pids] : 0;
	e = request_check(action, flags, deadline_ms, npids, sel, why);
	if (e < 0)
		return e;
	if (len < end_pids + SELECT_FIXED)
		return refuse(why, BTG_ERR_PROTO,
			      "REQUEST payload of %zu bytes is too short for its %u PIDs and the "
			      "selector block (%zu bytes at least)", len, npids, end_pids + SELECT_FIXED);
	for (uint32_t i = 0; i < npids; i++) {
		int32_t pid = (int32_t)get_u32(&r);

		if (pid <= 0)
			return refuse(why, BTG_ERR_PROTO, "PID #%u is %d; PIDs are positive", i + 1,
				      pid);
	}
	e = get_select(&r, &ret->sel, why);
	if (e < 0)
		return e;
	if (!reader_done(&r))
		return refuse(why, BTG_ERR_PROTO, "REQUEST payload has %zu bytes left over",
			      len - r.off);

	/* Everything is valid: second pass over the PIDs into ret. */
	r.off = REQUEST_FIXED;
	ret->action = action;
	ret->flags = flags;
	ret->deadline_ms = deadline_ms;
	ret->npids = npids;
	for (uint32_t i = 0; i < npids; i++)
		ret->pids[i] = (int32_t)get_u32(&r);
	return 0;
}

int proto_decode_result(const uint8_t *payload, size_t len, struct proto_result *ret)
{
	struct reader r = { .buf = payload, .len = len };
	struct proto_result res;   /* ~17 KiB; copied out only on success */

	if (!payload)
		return -EBADMSG;
	memset(&res, 0, sizeof(res));
	res.pid = (int32_t)get_u32(&r);
	res.error = get_u32(&r);
	res.action = get_u8(&r);
	res.state = get_u8(&r);
	res.flags = get_u8(&r);
	res.nsites = get_u8(&r);
	res.pause_us = get_u32(&r);
	res.check_us = get_u32(&r);
	res.uid = get_u32(&r);
	res.risk = get_u8(&r);
	res.warnings = get_u8(&r);
	if (r.short_read || !result_head_valid(&res))
		return -EBADMSG;
	if (get_string(&r, PROTO_MAX_MESSAGE, res.message, sizeof(res.message)) < 0 ||
	    get_string(&r, PROTO_MAX_COMMAND, res.command, sizeof(res.command)) < 0 ||
	    get_string(&r, PROTO_MAX_MESSAGE, res.reason, sizeof(res.reason)) < 0)
		return -EBADMSG;

	for (unsigned i = 0; i < res.nsites; i++) {
		struct proto_site *s = &res.sites[i];

		s->address = get_u64(&r);
		s->state = get_u8(&r);
		s->flags = get_u8(&r);
		if (r.short_read || !site_state_valid(s->state) || (s->flags & ~PROTO_SITE_FLAGS))
			return -EBADMSG;
		if (get_string(&r, PROTO_MAX_OBJECT, s->object, sizeof(s->object)) < 0)
			return -EBADMSG;
	}
	if (!reader_done(&r))
		return -EBADMSG;
	*ret = res;
	return 0;
}

int proto_decode_done(const uint8_t *payload, size_t len, uint32_t *ret_count)
{
	struct reader r = { .buf = payload, .len = len };
	uint32_t count;

	if (!payload)
		return -EBADMSG;
	count = get_u32(&r);
	if (!reader_done(&r))
		return -EBADMSG;
	*ret_count = count;
	return 0;
}

int proto_decode_error(const uint8_t *payload, size_t len, uint32_t *ret_code,
		       char *message, size_t message_cap)
{
	struct reader r = { .buf = payload, .len = len };
	uint32_t code;
	uint16_t msglen;
	const uint8_t *msg;

	if (!payload)
		return -EBADMSG;
	code = get_u32(&r);
	msglen = get_u16(&r);
	if (r.short_read || code == BTG_OK || msglen > PROTO_MAX_MESSAGE)
		return -EBADMSG;
	msg = get_bytes(&r, msglen);
	if (!msg || memchr(msg, '\0', msglen) || !reader_done(&r))
		return -EBADMSG;

	*ret_code = code;
	if (message && message_cap) {
		size_t copy = msglen < message_cap - 1 ? msglen : message_cap - 1;
		memcpy(message, msg, copy);
		message[copy] = '\0';
	}
	return 0;
}

int proto_decode_notice(const uint8_t *payload, size_t len, char *message, size_t message_cap)
{
	struct reader r = { .buf = payload, .len = len };
	uint16_t msglen;
	const uint8_t *msg;

	if (!payload || !message || !message_cap)
		return -EBADMSG;
	msglen = get_u16(&r);
	if (r.short_read || msglen == 0 || msglen > PROTO_MAX_MESSAGE)
		return -EBADMSG;
	msg = get_bytes(&r, msglen);
	if (!msg || memchr(msg, '\0', msglen) || !reader_done(&r))
		return -EBADMSG;
	{
		size_t copy = msglen < message_cap - 1 ? msglen : message_cap - 1;

		memcpy(message, msg, copy);
		message[copy] = '\0';
	}
	return 0;
}

int proto_decode_rule(const uint8_t *payload, size_t len, struct proto_rule *ret)
{
	struct reader r = { .buf = payload, .len = len };
	struct proto_rule rule = { 0 };
	uint16_t namelen;

	if (!payload)
		return -EBADMSG;
	rule.hits = get_u32(&r);
	rule.flags = get_u8(&r);
	rule.npids = get_u8(&r);
	namelen = get_u16(&r);
	if (r.short_read || (rule.flags & ~PROTO_RULE_EXCLUDE) || rule.npids > PROTO_MAX_RULE_PIDS ||
	    !rule_name_valid(namelen))
		return -EBADMSG;
	r.off -= 2;
	if (get_string(&r, PROTO_MAX_RULE_NAME, rule.name, sizeof(rule.name)) < 0 ||
	    get_string(&r, PROTO_MAX_MESSAGE, rule.match, sizeof(rule.match)) < 0)
		return -EBADMSG;
	for (unsigned i = 0; i < rule.npids; i++) {
		rule.pids[i] = (int32_t)get_u32(&r);
		if (rule.pids[i] <= 0)
			return -EBADMSG;
	}
	if (!reader_done(&r))
		return -EBADMSG;
	*ret = rule;
	return 0;
}
