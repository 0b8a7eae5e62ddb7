// SPDX-License-Identifier: MIT
/*
 * Unit tests for the wire protocol (proto.c): byte-exact layout, round
 * trips of every kind, every rejection the decoders promise, every
 * truncation of a valid message, limits and the name tables.  Raw
 * payloads are built here byte by byte, independently of the encoders, so
 * a layout mistake in proto.c cannot hide behind a matching decoder.
 * Run under ASan too: `make SANITIZE=1 BUILD=build/asan build/asan/tests/test_proto`.
 */
#include <errno.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "../../proto/proto.h"

/* Big enough for any message: the payload limit plus the header. */
#define BUF_CAP (PROTO_HEADER_SIZE + PROTO_MAX_PAYLOAD)

/* ------------------------------------------------------ raw builders -- */

struct raw {
	uint8_t b[BUF_CAP];
	size_t n;
};

static void raw_u8(struct raw *r, uint8_t v) { r->b[r->n++] = v; }
static void raw_u16(struct raw *r, uint16_t v) { raw_u8(r, (uint8_t)v); raw_u8(r, (uint8_t)(v >> 8)); }
static void raw_u32(struct raw *r, uint32_t v) { raw_u16(r, (uint16_t)v); raw_u16(r, (uint16_t)(v >> 16)); }
static void raw_u64(struct raw *r, uint64_t v) { raw_u32(r, (uint32_t)v); raw_u32(r, (uint32_t)(v >> 32)); }

static void raw_str(struct raw *r, const char *s, size_t n)
{
	raw_u16(r, (uint16_t)n);
	memcpy(r->b + r->n, s, n);
	r->n += n;
}

static void raw_request(struct raw *r, uint8_t action, uint8_t flags, uint16_t reserved,
			uint32_t deadline, uint32_t npids, uint32_t pid)
{
	r->n = 0;
	raw_u8(r, action);
	raw_u8(r, flags);
	raw_u16(r, reserved);
	raw_u32(r, deadline);
	raw_u32(r, npids);
	for (uint32_t i = 0; i < npids; i++)
		raw_u32(r, pid);
	raw_u8(r, 0);    /* no selector fields */
	raw_u8(r, 0);
	raw_u32(r, 0);
}

/* Result head: pid 42, error 0, guard, guarded, wrote, nsites, 7/3 us. */
static void raw_result_head(struct raw *r, uint8_t state, uint8_t flags, uint8_t nsites)
{
	r->n = 0;
	raw_u32(r, 42);
	raw_u32(r, 0);
	raw_u8(r, PROTO_ACTION_GUARD);
	raw_u8(r, state);
	raw_u8(r, flags);
	raw_u8(r, nsites);
	raw_u32(r, 7);
	raw_u32(r, 3);
	raw_u32(r, 1000);   /* uid */
	raw_u8(r, PROTO_RISK_NONE);
	raw_u8(r, 0);       /* warnings */
}

/* A result's message, then an empty command and reason. */
static void raw_msg(struct raw *r, const char *s, size_t n)
{
	raw_str(r, s, n);
	raw_str(r, "", 0);
	raw_str(r, "", 0);
}

static void raw_site(struct raw *r, uint64_t addr, uint8_t state, uint8_t reserved,
		     const char *obj, size_t objlen)
{
	raw_u64(r, addr);
	raw_u8(r, state);
	raw_u8(r, reserved);
	raw_str(r, obj, objlen);
}

static struct proto_request *new_request(uint32_t npids)
{
	struct proto_request *req = calloc(1, sizeof(*req));

	assert_non_null(req);
	req->action = PROTO_ACTION_GUARD;
	req->npids = npids;
	for (uint32_t i = 0; i < npids; i++)
		req->pids[i] = (int32_t)(i + 1);
	return req;
}

/* A result with every field set and the biggest strings allowed. */
static struct proto_result *full_result(void)
{
	struct proto_result *res = calloc(1, sizeof(*res));

	assert_non_null(res);
	res->pid = 0x7fffffff;
	res->error = BTG_ERR_BUSY;
	res->action = PROTO_ACTION_UNGUARD;
	res->state = PROTO_PROC_PARTIAL;
	res->flags = PROTO_RESULT_WROTE;
	res->nsites = PROTO_MAX_SITES;
	res->pause_us = 0xfedcba98u;
	res->check_us = 0x01020304u;
	res->uid = 0xfffffffeu;
	res->risk = PROTO_RISK_COVERED;
	res->warnings = PROTO_WARNINGS_KNOWN;
	memset(res->message, 'm', PROTO_MAX_MESSAGE);
	memset(res->command, 'c', PROTO_MAX_COMMAND);
	memset(res->reason, 'r', PROTO_MAX_MESSAGE);
	for (unsigned i = 0; i < PROTO_MAX_SITES; i++) {
		res->sites[i].address = 0x7f0000000000ull + i * 0x1000 + 0x8877665544332211ull;
		res->sites[i].state = (uint8_t)(1 + i % 3);
		res->sites[i].flags = i == 3 ? PROTO_SITE_BOUND : i == 2 ? PROTO_SITE_BREAKPOINT : 0;
		memset(res->sites[i].object, 'a' + (int)i, PROTO_MAX_OBJECT);
	}
	return res;
}

/* Field by field: struct padding is not part of any promise. */
static void assert_result_equal(const struct proto_result *a, const struct proto_result *b)
{
	assert_int_equal(a->pid, b->pid);
	assert_int_equal(a->error, b->error);
	assert_int_equal(a->action, b->action);
	assert_int_equal(a->state, b->state);
	assert_int_equal(a->flags, b->flags);
	assert_int_equal(a->nsites, b->nsites);
	assert_int_equal(a->pause_us, b->pause_us);
	assert_int_equal(a->check_us, b->check_us);
	assert_int_equal(a->uid, b->uid);
	assert_int_equal(a->risk, b->risk);
	assert_int_equal(a->warnings, b->warnings);
	assert_string_equal(a->message, b->message);
	assert_string_equal(a->command, b->command);
	assert_string_equal(a->reason, b->reason);
	for (unsigned i = 0; i < a->nsites; i++) {
		assert_true(a->sites[i].address == b->sites[i].address);
		assert_int_equal(a->sites[i].state, b->sites[i].state);
		assert_int_equal(a->sites[i].flags, b->sites[i].flags);
		assert_string_equal(a->sites[i].object, b->sites[i].object);
	}
}

static uint8_t *new_buf(void)
{
	uint8_t *b = calloc(1, BUF_CAP);
	assert_non_null(b);
	return b;
}

/* ------------------------------------------------------------- header -- */

static void header_layout_is_little_endian(void **state)
{
	uint8_t buf[64];
	static const uint8_t want[] = {
		'B', 'T', 'G', '1',  3, 0,  3, 0,  4, 0, 0, 0,   /* header: DONE, 4 bytes */
		0x04, 0x03, 0x02, 0x01,                           /* count */
	};
	struct proto_header h;
	(void)state;

	assert_int_equal(proto_encode_done(0x01020304u, buf, sizeof(buf)), sizeof(want));
	assert_memory_equal(buf, want, sizeof(want));
	assert_int_equal(proto_decode_header(buf, sizeof(want), &h, NULL), 0);
	assert_int_equal(h.magic, PROTO_MAGIC);
	assert_int_equal(h.version, PROTO_VERSION);
	assert_int_equal(h.kind, PROTO_KIND_DONE);
	assert_int_equal(h.length, 4);
}

static void header_rejections(void **state)
{
	uint8_t good[PROTO_HEADER_SIZE], b[PROTO_HEADER_SIZE];
	struct proto_header h = { .magic = 0xdead };
	(void)state;

	{
		uint8_t tmp[PROTO_HEADER_SIZE + 4];
		assert_int_equal(proto_encode_done(1, tmp, sizeof(tmp)), sizeof(tmp));
		memcpy(good, tmp, sizeof(good));
	}

	for (size_t len = 0; len < PROTO_HEADER_SIZE; len++)
		assert_int_equal(proto_decode_header(good, len, &h, NULL), -EBADMSG);
	assert_int_equal(h.magic, 0xdead);   /* untouched on failure */

	memcpy(b, good, sizeof(b)); b[0] ^= 1;
	assert_int_equal(proto_decode_header(b, sizeof(b), &h, NULL), -EBADMSG);
	memcpy(b, good, sizeof(b)); b[4] = 1;   /* the version before selectors */
	assert_int_equal(proto_decode_header(b, sizeof(b), &h, NULL), -EPROTONOSUPPORT);
	memcpy(b, good, sizeof(b)); b[4] = 2;   /* the version before policy and RULE */
	assert_int_equal(proto_decode_header(b, sizeof(b), &h, NULL), -EPROTONOSUPPORT);
	memcpy(b, good, sizeof(b)); b[4] = 4;
	assert_int_equal(proto_decode_header(b, sizeof(b), &h, NULL), -EPROTONOSUPPORT);
	memcpy(b, good, sizeof(b)); b[4] = 0;
	assert_int_equal(proto_decode_header(b, sizeof(b), &h, NULL), -EPROTONOSUPPORT);
	memcpy(b, good, sizeof(b)); b[6] = 0;
	assert_int_equal(proto_decode_header(b, sizeof(b), &h, NULL), -EBADMSG);
	memcpy(b, good, sizeof(b)); b[6] = 6;   /* NOTICE */
	assert_int_equal(proto_decode_header(b, sizeof(b), &h, NULL), 0);
	memcpy(b, good, sizeof(b)); b[6] = 7;
	assert_int_equal(proto_decode_header(b, sizeof(b), &h, NULL), -EBADMSG);
	memcpy(b, good, sizeof(b)); b[7] = 1;   /* kind 0x0103 */
	assert_int_equal(proto_decode_header(b, sizeof(b), &h, NULL), -EBADMSG);

	/* Payload limit: exactly the limit passes, one more byte does not. */
	memcpy(b, good, sizeof(b));
	b[8] = 0; b[9] = 0; b[10] = 1; b[11] = 0;   /* 65536 */
	assert_int_equal(proto_decode_header(b, sizeof(b), &h, NULL), 0);
	assert_int_equal(h.length, PROTO_MAX_PAYLOAD);
	b[8] = 1;
	assert_int_equal(proto_decode_header(b, sizeof(b), &h, NULL), -EMSGSIZE);
	b[8] = 0xff; b[9] = 0xff; b[10] = 0xff; b[11] = 0xff;
	assert_int_equal(proto_decode_header(b, sizeof(b), &h, NULL), -EMSGSIZE);
}

/* ------------------------------------------------------------ request -- */

static void request_layout_and_round_trip(void **state)
{
	struct proto_request *req = new_request(2), *out = new_request(0);
	struct proto_header h;
	uint8_t buf[64];
	static const uint8_t want[] = {
		'B', 'T', 'G', '1', 3, 0, 1, 0, 26, 0, 0, 0,
		3, 1, 0, 0,  0xe8, 0x03, 0, 0,  2, 0, 0, 0,
		0xd2, 0x04, 0, 0,  0xff, 0xff, 0xff, 0x7f,
		0, 0,  0, 0, 0, 0,                           /* no selector */
	};
	(void)state;

	req->action = PROTO_ACTION_STATUS;
	req->flags = PROTO_FLAG_TREE;
	req->deadline_ms = 1000;
	req->pids[0] = 1234;
	req->pids[1] = 0x7fffffff;
	assert_int_equal(proto_encode_request(req, buf, sizeof(buf)), sizeof(want));
	assert_memory_equal(buf, want, sizeof(want));

	assert_int_equal(proto_decode_header(buf, sizeof(want), &h, NULL), 0);
	assert_int_equal(h.kind, PROTO_KIND_REQUEST);
	assert_int_equal(h.length, sizeof(want) - PROTO_HEADER_SIZE);
	assert_int_equal(proto_decode_request(buf + PROTO_HEADER_SIZE, h.length, out, NULL), 0);
	assert_int_equal(out->action, PROTO_ACTION_STATUS);
	assert_int_equal(out->flags, PROTO_FLAG_TREE);
	assert_int_equal(out->deadline_ms, 1000);
	assert_int_equal(out->npids, 2);
	assert_int_equal(out->pids[0], 1234);
	assert_int_equal(out->pids[1], 0x7fffffff);
	free(req);
	free(out);
}

static void request_max_size(void **state)
{
	struct proto_request *req = new_request(PROTO_MAX_PIDS), *out = new_request(0);
	uint8_t *buf = new_buf();
	size_t need = PROTO_HEADER_SIZE + 12 + 4 * PROTO_MAX_PIDS + 6;
	(void)state;

	req->deadline_ms = PROTO_MAX_DEADLINE_MS;
	assert_int_equal(proto_encode_request(req, buf, BUF_CAP), need);
	assert_int_equal(proto_decode_request(buf + PROTO_HEADER_SIZE, need - PROTO_HEADER_SIZE, out, NULL), 0);
	assert_int_equal(out->npids, PROTO_MAX_PIDS);
	assert_int_equal(out->deadline_ms, PROTO_MAX_DEADLINE_MS);
	assert_memory_equal(out->pids, req->pids, sizeof(req->pids));

	/* Every capacity short of the message is -EMSGSIZE, never a write past cap. */
	assert_int_equal(proto_encode_request(req, buf, need - 1), -EMSGSIZE);
	assert_int_equal(proto_encode_request(req, buf, 0), -EMSGSIZE);

	req->npids = PROTO_MAX_PIDS + 1;
	assert_int_equal(proto_encode_request(req, buf, BUF_CAP), -EINVAL);
	free(buf);
	free(req);
	free(out);
}

static void request_encoder_refuses_invalid(void **state)
{
	struct proto_request *req = new_request(1);
	uint8_t buf[64];
	(void)state;

	req->action = 0;
	assert_int_equal(proto_encode_request(req, buf, sizeof(buf)), -EINVAL);
	req->action = 0x7f;
	assert_int_equal(proto_encode_request(req, buf, sizeof(buf)), -EINVAL);
	req->action = PROTO_ACTION_GUARD;
	req->flags = 0x04;
	assert_int_equal(proto_encode_request(req, buf, sizeof(buf)), -EINVAL);
	/* WALK is a form of guard: never with another action. */
	req->action = PROTO_ACTION_UNGUARD;
	req->flags = PROTO_FLAG_WALK;
	assert_int_equal(proto_encode_request(req, buf, sizeof(buf)), -EINVAL);
	req->action = PROTO_ACTION_STATUS;
	assert_int_equal(proto_encode_request(req, buf, sizeof(buf)), -EINVAL);
	req->action = PROTO_ACTION_GUARD;
	assert_true(proto_encode_request(req, buf, sizeof(buf)) > 0);
	req->flags = 0;
	req->deadline_ms = PROTO_MAX_DEADLINE_MS + 1;
	assert_int_equal(proto_encode_request(req, buf, sizeof(buf)), -EINVAL);
	req->deadline_ms = 0;
	req->npids = 0;
	assert_int_equal(proto_encode_request(req, buf, sizeof(buf)), -EINVAL);
	req->npids = 1;
	req->pids[0] = 0;
	assert_int_equal(proto_encode_request(req, buf, sizeof(buf)), -EINVAL);
	req->pids[0] = -1;
	assert_int_equal(proto_encode_request(req, buf, sizeof(buf)), -EINVAL);
	req->pids[0] = 1;
	assert_true(proto_encode_request(req, buf, sizeof(buf)) > 0);
	free(req);
}

static void request_decoder_rejections(void **state)
{
	struct raw *r = calloc(1, sizeof(*r));
	struct proto_request *out = new_request(0);
	(void)state;

	assert_non_null(r);
	raw_request(r, PROTO_ACTION_GUARD, 0, 0, 0, 1, 5);
	assert_int_equal(proto_decode_request(r->b, r->n, out, NULL), 0);
	assert_int_equal(out->pids[0], 5);
	out->npids = 77;   /* sentinel: failures below must leave it alone */

#define REJECT(...) do { raw_request(r, __VA_ARGS__); \
	assert_int_equal(proto_decode_request(r->b, r->n, out, NULL), -EBADMSG); } while (0)
	REJECT(0, 0, 0, 0, 1, 5);                             /* unknown action */
	REJECT(0x7f, 0, 0, 0, 1, 5);
	REJECT(0xff, 0, 0, 0, 1, 5);
	REJECT(PROTO_ACTION_GUARD, 0x04, 0, 0, 1, 5);         /* unknown flag bits */
	REJECT(PROTO_ACTION_UNGUARD, PROTO_FLAG_WALK, 0, 0, 1, 5);   /* WALK: guard only */
	REJECT(PROTO_ACTION_STATUS, PROTO_FLAG_WALK, 0, 0, 1, 5);
	REJECT(PROTO_ACTION_GUARD, 0x80, 0, 0, 1, 5);
	REJECT(PROTO_ACTION_GUARD, 0, 1, 0, 1, 5);            /* reserved != 0 */
	REJECT(PROTO_ACTION_GUARD, 0, 0x100, 0, 1, 5);
	REJECT(PROTO_ACTION_GUARD, 0, 0, 0, 0, 5);            /* no PIDs, no selector */
	REJECT(PROTO_ACTION_GUARD, 0, 0, 0, 1, 0);            /* pid <= 0 */
	REJECT(PROTO_ACTION_GUARD, 0, 0, 0, 1, 0xffffffffu);  /* -1 */
	REJECT(PROTO_ACTION_GUARD, 0, 0, 0, 1, 0x80000000u);  /* INT32_MIN */
#undef REJECT
#define OVER(...) do { raw_request(r, __VA_ARGS__); \
	assert_int_equal(proto_decode_request(r->b, r->n, out, NULL), -EMSGSIZE); } while (0)
	OVER(PROTO_ACTION_GUARD, 0, 0, PROTO_MAX_DEADLINE_MS + 1, 1, 5);
	OVER(PROTO_ACTION_GUARD, 0, 0, PROTO_MAX_FOLLOW_MS, 1, 5);   /* at-exec's, not guard's */
	OVER(PROTO_ACTION_AT_EXEC, 0, 0, PROTO_MAX_FOLLOW_MS + 1, 1, 5);
	OVER(PROTO_ACTION_GUARD, 0, 0, 0xffffffffu, 1, 5);
	OVER(PROTO_ACTION_GUARD, 0, 0, 0, PROTO_MAX_PIDS + 1, 5);
#undef OVER
	assert_int_equal(out->npids, 77);

	/* The deadline limit itself is allowed; at-exec's is longer (it waits for an exec). */
	raw_request(r, PROTO_ACTION_GUARD, 0, 0, PROTO_MAX_DEADLINE_MS, 1, 5);
	assert_int_equal(proto_decode_request(r->b, r->n, out, NULL), 0);
	raw_request(r, PROTO_ACTION_AT_EXEC, 0, 0, PROTO_MAX_FOLLOW_MS, 1, 5);
	assert_int_equal(proto_decode_request(r->b, r->n, out, NULL), 0);
	assert_int_equal(out->deadline_ms, PROTO_MAX_FOLLOW_MS);
	assert_int_equal(proto_max_deadline_ms(PROTO_ACTION_STATUS), PROTO_MAX_DEADLINE_MS);

	/* A bad PID anywhere in the list, not just first. */
	raw_request(r, PROTO_ACTION_STATUS, 0, 0, 0, 3, 9);
	r->b[12 + 8 + 3] = 0x80;
	assert_int_equal(proto_decode_request(r->b, r->n, out, NULL), -EBADMSG);

	/* Length must equal 12 + 4 * npids + 6: one trailing byte, and npids lying. */
	raw_request(r, PROTO_ACTION_GUARD, 0, 0, 0, 2, 5);
	raw_u8(r, 0);
	assert_int_equal(proto_decode_request(r->b, r->n, out, NULL), -EBADMSG);
	raw_request(r, PROTO_ACTION_GUARD, 0, 0, 0, 2, 5);
	r->b[8] = 1;   /* npids 1 but 2 PIDs present */
	assert_int_equal(proto_decode_request(r->b, r->n, out, NULL), -EBADMSG);
	r->b[8] = 3;   /* npids 3 but 2 present */
	assert_int_equal(proto_decode_request(r->b, r->n, out, NULL), -EBADMSG);
	free(r);
	free(out);
}

/* A selector request: action guard, no flags, no deadline, no PIDs, then the block. */
static void raw_select(struct raw *r, uint8_t fields, uint32_t uid)
{
	r->n = 0;
	raw_u8(r, PROTO_ACTION_GUARD);
	raw_u8(r, 0);
	raw_u16(r, 0);
	raw_u32(r, 0);
	raw_u32(r, 0);
	raw_u8(r, fields);
	raw_u8(r, 0);
	raw_u32(r, uid);
}

static void request_selectors_layout_and_round_trip(void **state)
{
	struct proto_request *req = new_request(0), *out = new_request(0);
	struct raw *want = calloc(1, sizeof(*want));
	uint8_t *buf = new_buf();
	int n;
	(void)state;

	assert_non_null(want);
	req->action = PROTO_ACTION_STATUS;
	req->sel.fields = PROTO_SEL_ALL | PROTO_SEL_UID | PROTO_SEL_EXE | PROTO_SEL_CMDLINE |
			  PROTO_SEL_CGROUP | PROTO_SEL_MAPS | PROTO_SEL_AT_RISK;
	req->sel.uid = 1000;
	strcpy(req->sel.exe, "python3*");
	strcpy(req->sel.cmdline, "* -m gunicorn *");
	strcpy(req->sel.cgroup, "/system.slice/train.service");
	strcpy(req->sel.maps, "*libc10.so");

	/* The patterns follow the block in field-bit order: exe, cmdline, cgroup, maps. */
	raw_u8(want, PROTO_ACTION_STATUS);
	raw_u8(want, 0);
	raw_u16(want, 0);
	raw_u32(want, 0);
	raw_u32(want, 0);
	raw_u8(want, 0x7f);
	raw_u8(want, 0);
	raw_u32(want, 1000);
	raw_str(want, "python3*", 8);
	raw_str(want, "* -m gunicorn *", 15);
	raw_str(want, "/system.slice/train.service", 27);
	raw_str(want, "*libc10.so", 10);
	n = proto_encode_request(req, buf, BUF_CAP);
	assert_int_equal(n, PROTO_HEADER_SIZE + want->n);
	assert_memory_equal(buf + PROTO_HEADER_SIZE, want->b, want->n);
	assert_int_equal(proto_decode_request(want->b, want->n, out, NULL), 0);
	assert_int_equal(out->npids, 0);
	assert_int_equal(out->sel.fields, req->sel.fields);
	assert_int_equal(out->sel.uid, 1000);
	assert_string_equal(out->sel.exe, "python3*");
	assert_string_equal(out->sel.cmdline, "* -m gunicorn *");
	assert_string_equal(out->sel.cgroup, "/system.slice/train.service");
	assert_string_equal(out->sel.maps, "*libc10.so");

	/* Only the fields set travel: cgroup alone. */
	memset(&req->sel, 0, sizeof(req->sel));
	req->sel.fields = PROTO_SEL_CGROUP;
	strcpy(req->sel.cgroup, "/a");
	n = proto_encode_request(req, buf, BUF_CAP);
	assert_int_equal(n, PROTO_HEADER_SIZE + 12 + 6 + 2 + 2);
	assert_int_equal(proto_decode_request(buf + PROTO_HEADER_SIZE, (size_t)n - PROTO_HEADER_SIZE,
					      out, NULL), 0);
	assert_string_equal(out->sel.cgroup, "/a");
	assert_string_equal(out->sel.exe, "");

	/* The longest pattern is sent whole; a longer one, or none, is refused, never cut. */
	memset(req->sel.cgroup, 'g', PROTO_MAX_PATTERN);
	req->sel.cgroup[PROTO_MAX_PATTERN] = '\0';
	assert_true(proto_encode_request(req, buf, BUF_CAP) > 0);
	memset(req->sel.cgroup, 'g', sizeof(req->sel.cgroup));
	assert_int_equal(proto_encode_request(req, buf, BUF_CAP), -EINVAL);
	req->sel.cgroup[0] = '\0';
	assert_int_equal(proto_encode_request(req, buf, BUF_CAP), -EINVAL);
	/* Names PIDs and selects: refused. */
	strcpy(req->sel.cgroup, "/a");
	req->npids = 1;
	req->pids[0] = 7;
	assert_int_equal(proto_encode_request(req, buf, BUF_CAP), -EINVAL);
	/* A uid without its field. */
	req->npids = 0;
	req->sel.uid = 5;
	assert_int_equal(proto_encode_request(req, buf, BUF_CAP), -EINVAL);
	free(buf);
	free(want);
	free(req);
	free(out);
}

static void request_selector_rejections(void **state)
{
	struct raw *r = calloc(1, sizeof(*r));
	struct proto_request *out = new_request(0);
	struct proto_verdict why;
	char big[PROTO_MAX_PATTERN + 1];
	(void)state;

	assert_non_null(r);
	memset(big, 'p', sizeof(big));
	raw_select(r, PROTO_SEL_ALL, 0);
	assert_int_equal(proto_decode_request(r->b, r->n, out, NULL), 0);

	raw_select(r, 0x80, 0);                     /* unknown field */
	assert_int_equal(proto_decode_request(r->b, r->n, out, &why), -EBADMSG);
	assert_int_equal(why.code, BTG_ERR_PROTO);
	assert_non_null(strstr(why.text, "selector fields 0x80"));
	raw_select(r, PROTO_SEL_ALL, 3);            /* uid without its field */
	assert_int_equal(proto_decode_request(r->b, r->n, out, &why), -EBADMSG);
	assert_non_null(strstr(why.text, "uid"));
	raw_select(r, PROTO_SEL_ALL, 0);            /* reserved byte */
	r->b[13] = 1;
	assert_int_equal(proto_decode_request(r->b, r->n, out, NULL), -EBADMSG);
	raw_select(r, PROTO_SEL_EXE, 0);            /* exe announced, missing */
	assert_int_equal(proto_decode_request(r->b, r->n, out, &why), -EBADMSG);
	assert_non_null(strstr(why.text, "exe"));
	raw_select(r, PROTO_SEL_MAPS, 0);           /* empty pattern */
	raw_str(r, "", 0);
	assert_int_equal(proto_decode_request(r->b, r->n, out, &why), -EBADMSG);
	assert_non_null(strstr(why.text, "maps pattern is empty"));
	raw_select(r, PROTO_SEL_CMDLINE, 0);        /* NUL inside */
	raw_str(r, "a\0b", 3);
	assert_int_equal(proto_decode_request(r->b, r->n, out, NULL), -EBADMSG);
	raw_select(r, PROTO_SEL_CGROUP, 0);         /* cut short */
	raw_u16(r, 5);
	raw_u8(r, '/');
	assert_int_equal(proto_decode_request(r->b, r->n, out, NULL), -EBADMSG);
	raw_select(r, PROTO_SEL_CGROUP, 0);         /* over the limit */
	raw_str(r, big, PROTO_MAX_PATTERN + 1);
	assert_int_equal(proto_decode_request(r->b, r->n, out, &why), -EMSGSIZE);
	assert_int_equal(why.code, BTG_ERR_LIMIT);
	raw_select(r, PROTO_SEL_CGROUP, 0);         /* at the limit */
	raw_str(r, big, PROTO_MAX_PATTERN);
	assert_int_equal(proto_decode_request(r->b, r->n, out, NULL), 0);
	assert_int_equal(strlen(out->sel.cgroup), PROTO_MAX_PATTERN);
	raw_select(r, PROTO_SEL_ALL, 0);            /* trailing byte */
	raw_u8(r, 0);
	assert_int_equal(proto_decode_request(r->b, r->n, out, &why), -EBADMSG);
	assert_non_null(strstr(why.text, "left over"));

	/* PIDs and selectors together. */
	raw_request(r, PROTO_ACTION_GUARD, 0, 0, 0, 1, 5);
	r->b[16] = PROTO_SEL_ALL;
	assert_int_equal(proto_decode_request(r->b, r->n, out, &why), -EBADMSG);
	assert_non_null(strstr(why.text, "both"));
	/* Neither. */
	raw_request(r, PROTO_ACTION_GUARD, 0, 0, 0, 0, 5);
	assert_int_equal(proto_decode_request(r->b, r->n, out, &why), -EBADMSG);
	assert_non_null(strstr(why.text, "no PID"));
	/* The verdict names the limit it hit. */
	raw_request(r, PROTO_ACTION_GUARD, 0, 0, 0, PROTO_MAX_PIDS + 1, 5);
	assert_int_equal(proto_decode_request(r->b, r->n, out, &why), -EMSGSIZE);
	assert_int_equal(why.code, BTG_ERR_LIMIT);
	assert_non_null(strstr(why.text, "4097 PIDs"));
	free(r);
	free(out);
}

/* ------------------------------------------------------------- result -- */

static void result_layout(void **state)
{
	struct proto_result *res = calloc(1, sizeof(*res));
	struct raw *want = calloc(1, sizeof(*want));
	uint8_t buf[256];
	(void)state;

	assert_non_null(res);
	assert_non_null(want);
	res->pid = 42;
	res->action = PROTO_ACTION_GUARD;
	res->state = PROTO_PROC_GUARDED;
	res->flags = PROTO_RESULT_WROTE;
	res->nsites = 1;
	res->pause_us = 7;
	res->check_us = 3;
	res->uid = 1000;
	res->risk = PROTO_RISK_NONE;
	strcpy(res->message, "hi");
	res->sites[0].address = 0x00007f1122334455ull;
	res->sites[0].state = PROTO_SITE_GUARDED;
	strcpy(res->sites[0].object, "/lib/libc.so.6");

	/* Payload first (raw_result_head starts from zero), then the header in front. */
	raw_result_head(want, PROTO_PROC_GUARDED, PROTO_RESULT_WROTE, 1);
	raw_msg(want, "hi", 2);
	raw_site(want, 0x00007f1122334455ull, PROTO_SITE_GUARDED, 0, "/lib/libc.so.6", 14);
	memmove(want->b + PROTO_HEADER_SIZE, want->b, want->n);
	{
		size_t plen = want->n;
		want->n = 0;
		raw_u32(want, PROTO_MAGIC);
		raw_u16(want, PROTO_VERSION);
		raw_u16(want, PROTO_KIND_RESULT);
		raw_u32(want, (uint32_t)plen);
		want->n += plen;
	}
	assert_int_equal(proto_encode_result(res, buf, sizeof(buf)), want->n);
	assert_memory_equal(buf, want->b, want->n);
	free(res);
	free(want);
}

static void result_round_trip_at_limits(void **state)
{
	struct proto_result *res = full_result(), *out = calloc(1, sizeof(*out));
	uint8_t *buf = new_buf();
	struct proto_header h;
	size_t need = PROTO_HEADER_SIZE + 28 + PROTO_MAX_MESSAGE + 2 + PROTO_MAX_COMMAND + 2 +
		      PROTO_MAX_MESSAGE + PROTO_MAX_SITES * (12 + PROTO_MAX_OBJECT);
	(void)state;

	assert_non_null(out);
	assert_int_equal(proto_encode_result(res, buf, BUF_CAP), need);
	assert_int_equal(proto_decode_header(buf, need, &h, NULL), 0);
	assert_int_equal(h.kind, PROTO_KIND_RESULT);
	assert_int_equal(h.length, need - PROTO_HEADER_SIZE);
	assert_int_equal(proto_decode_result(buf + PROTO_HEADER_SIZE, h.length, out), 0);
	assert_result_equal(out, res);

	assert_int_equal(proto_encode_result(res, buf, need - 1), -EMSGSIZE);

	/* No sites, empty message: the smallest result. */
	memset(res, 0, sizeof(*res));
	res->pid = 1;
	res->action = PROTO_ACTION_STATUS;
	res->state = PROTO_PROC_UNKNOWN;
	res->error = ESRCH;
	assert_int_equal(proto_encode_result(res, buf, BUF_CAP), PROTO_HEADER_SIZE + 32);
	assert_int_equal(proto_decode_result(buf + PROTO_HEADER_SIZE, 32, out), 0);
	assert_result_equal(out, res);
	free(buf);
	free(res);
	free(out);
}

static void result_strings_over_limit_are_truncated(void **state)
{
	struct proto_result *res = full_result(), *out = calloc(1, sizeof(*out));
	uint8_t *buf = new_buf();
	int n;
	(void)state;

	/* The struct holds limit+1 bytes; make both strings run to the end
	 * without a NUL, which strnlen must stop at. */
	memset(res->message, 'x', sizeof(res->message));
	memset(res->command, 'x', sizeof(res->command));
	memset(res->reason, 'x', sizeof(res->reason));
	res->nsites = 1;
	memset(res->sites[0].object, 'y', sizeof(res->sites[0].object));
	n = proto_encode_result(res, buf, BUF_CAP);
	assert_int_equal(n, PROTO_HEADER_SIZE + 28 + PROTO_MAX_MESSAGE + 2 + PROTO_MAX_COMMAND + 2 +
			    PROTO_MAX_MESSAGE + 12 + PROTO_MAX_OBJECT);
	assert_int_equal(proto_decode_result(buf + PROTO_HEADER_SIZE, (size_t)n - PROTO_HEADER_SIZE, out), 0);
	assert_int_equal(strlen(out->message), PROTO_MAX_MESSAGE);
	assert_int_equal(strlen(out->sites[0].object), PROTO_MAX_OBJECT);

	/* A cut through a UTF-8 sequence moves back before the sequence:
	 * "é" (c3 a9) straddles the limit, so only limit-1 bytes go out. */
	memset(res->message, 'x', sizeof(res->message));
	res->message[PROTO_MAX_MESSAGE - 1] = (char)0xc3;
	res->message[PROTO_MAX_MESSAGE] = (char)0xa9;
	n = proto_encode_result(res, buf, BUF_CAP);
	assert_true(n > 0);
	assert_int_equal(proto_decode_result(buf + PROTO_HEADER_SIZE, (size_t)n - PROTO_HEADER_SIZE, out), 0);
	assert_int_equal(strlen(out->message), PROTO_MAX_MESSAGE - 1);
	assert_int_equal((unsigned char)out->message[PROTO_MAX_MESSAGE - 2], 'x');
	free(buf);
	free(res);
	free(out);
}

static void result_encoder_refuses_invalid(void **state)
{
	struct proto_result *res = full_result();
	uint8_t *buf = new_buf();
	(void)state;

	res->nsites = PROTO_MAX_SITES + 1;
	assert_int_equal(proto_encode_result(res, buf, BUF_CAP), -EINVAL);
	res->nsites = 1;
	res->sites[0].state = 0;
	assert_int_equal(proto_encode_result(res, buf, BUF_CAP), -EINVAL);
	res->sites[0].state = PROTO_SITE_TORN + 1;
	assert_int_equal(proto_encode_result(res, buf, BUF_CAP), -EINVAL);
	res->sites[0].state = PROTO_SITE_GUARDED;
	res->state = PROTO_PROC_UNKNOWN + 1;
	assert_int_equal(proto_encode_result(res, buf, BUF_CAP), -EINVAL);
	res->state = PROTO_PROC_GUARDED;
	res->pid = 0;
	assert_int_equal(proto_encode_result(res, buf, BUF_CAP), -EINVAL);
	res->pid = 1;
	res->action = 0;
	assert_int_equal(proto_encode_result(res, buf, BUF_CAP), -EINVAL);
	res->action = PROTO_ACTION_GUARD;
	res->flags = PROTO_RESULT_ARMED;   /* only an at-exec result may say armed */
	assert_int_equal(proto_encode_result(res, buf, BUF_CAP), -EINVAL);
	res->action = PROTO_ACTION_AT_EXEC;
	assert_true(proto_encode_result(res, buf, BUF_CAP) > 0);
	res->flags = 0x04;
	assert_int_equal(proto_encode_result(res, buf, BUF_CAP), -EINVAL);
	res->action = PROTO_ACTION_GUARD;
	res->flags = 0;
	assert_true(proto_encode_result(res, buf, BUF_CAP) > 0);
	free(buf);
	free(res);
}

/* at-exec follows one named process: one PID, no --tree, no selector. */
static void request_at_exec_names_one_pid(void **state)
{
	struct raw *r = calloc(1, sizeof(*r));
	struct proto_request *out = new_request(0);
	struct proto_verdict why;
	(void)state;

	assert_non_null(r);
	raw_request(r, PROTO_ACTION_AT_EXEC, 0, 0, 0, 1, 42);
	assert_int_equal(proto_decode_request(r->b, r->n, out, &why), 0);
	assert_int_equal(out->action, PROTO_ACTION_AT_EXEC);
	assert_int_equal(out->pids[0], 42);
	raw_request(r, PROTO_ACTION_AT_EXEC, 0, 0, 0, 2, 42);
	assert_int_equal(proto_decode_request(r->b, r->n, out, &why), -EBADMSG);
	assert_int_equal(why.code, BTG_ERR_PROTO);
	raw_request(r, PROTO_ACTION_AT_EXEC, PROTO_FLAG_TREE, 0, 0, 1, 42);
	assert_int_equal(proto_decode_request(r->b, r->n, out, &why), -EBADMSG);
	assert_string_equal(proto_action_name(PROTO_ACTION_AT_EXEC), "at-exec");
	free(r);
	free(out);
}

static void result_decoder_rejections(void **state)
{
	struct raw *r = calloc(1, sizeof(*r));
	struct proto_result *out = calloc(1, sizeof(*out));
	char big[PROTO_MAX_OBJECT + 1];
	(void)state;

	assert_non_null(r);
	assert_non_null(out);
	memset(big, 'o', sizeof(big));

	/* Baseline accepted. */
	raw_result_head(r, PROTO_PROC_GUARDED, 0, 1);
	raw_msg(r, "msg", 3);
	raw_site(r, 1, PROTO_SITE_GUARDED, 0, "/x", 2);
	assert_int_equal(proto_decode_result(r->b, r->n, out), 0);
	assert_string_equal(out->sites[0].object, "/x");
	out->pid = -77;   /* sentinel */

#define REJECT() assert_int_equal(proto_decode_result(r->b, r->n, out), -EBADMSG)
	/* Trailing byte. */
	raw_u8(r, 0);
	REJECT();

	/* nsites over the limit, with that many sites actually present. */
	raw_result_head(r, PROTO_PROC_GUARDED, 0, PROTO_MAX_SITES + 1);
	raw_msg(r, "", 0);
	for (unsigned i = 0; i < PROTO_MAX_SITES + 1; i++)
		raw_site(r, i, PROTO_SITE_ORIGINAL, 0, "/o", 2);
	REJECT();

	/* nsites claims more sites than were sent. */
	raw_result_head(r, PROTO_PROC_GUARDED, 0, 2);
	raw_msg(r, "", 0);
	raw_site(r, 1, PROTO_SITE_ORIGINAL, 0, "/o", 2);
	REJECT();

	/* Unknown process state, site state, result flag; site reserved byte. */
	raw_result_head(r, PROTO_PROC_UNKNOWN + 1, 0, 0);
	raw_msg(r, "", 0);
	REJECT();
	raw_result_head(r, 0xff, 0, 0);
	raw_msg(r, "", 0);
	REJECT();
	for (unsigned st = 0; st < 256; st++) {
		if (st >= PROTO_SITE_ORIGINAL && st <= PROTO_SITE_TORN)
			continue;
		raw_result_head(r, PROTO_PROC_GUARDED, 0, 1);
		raw_msg(r, "", 0);
		raw_site(r, 1, (uint8_t)st, 0, "/o", 2);
		REJECT();
	}
	raw_result_head(r, PROTO_PROC_GUARDED, 0x02, 0);
	raw_msg(r, "", 0);
	REJECT();
	raw_result_head(r, PROTO_PROC_GUARDED, 0, 1);
	raw_msg(r, "", 0);
	raw_site(r, 1, PROTO_SITE_ORIGINAL, 8, "/o", 2);   /* unknown site flag */
	REJECT();

	/* Unknown action; non-positive pid. */
	raw_result_head(r, PROTO_PROC_GUARDED, 0, 0);
	raw_msg(r, "", 0);
	r->b[8] = 0;
	REJECT();
	raw_result_head(r, PROTO_PROC_GUARDED, 0, 0);
	raw_msg(r, "", 0);
	r->b[0] = 0;
	REJECT();

	/* Embedded NUL in the message and in an object path. */
	raw_result_head(r, PROTO_PROC_GUARDED, 0, 0);
	raw_msg(r, "a\0b", 3);
	REJECT();
	raw_result_head(r, PROTO_PROC_GUARDED, 0, 1);
	raw_msg(r, "", 0);
	raw_site(r, 1, PROTO_SITE_ORIGINAL, 0, "/lib\0x", 6);
	REJECT();

	/* Strings at the limit pass, one byte over does not. */
	raw_result_head(r, PROTO_PROC_GUARDED, 0, 1);
	raw_msg(r, big, PROTO_MAX_MESSAGE);
	raw_site(r, 1, PROTO_SITE_ORIGINAL, 0, big, PROTO_MAX_OBJECT);
	assert_int_equal(proto_decode_result(r->b, r->n, out), 0);
	assert_int_equal(strlen(out->message), PROTO_MAX_MESSAGE);
	assert_int_equal(strlen(out->sites[0].object), PROTO_MAX_OBJECT);
	out->pid = -77;
	raw_result_head(r, PROTO_PROC_GUARDED, 0, 0);
	raw_msg(r, big, PROTO_MAX_MESSAGE + 1);
	REJECT();
	raw_result_head(r, PROTO_PROC_GUARDED, 0, 1);
	raw_msg(r, "", 0);
	raw_site(r, 1, PROTO_SITE_ORIGINAL, 0, big, PROTO_MAX_OBJECT + 1);
	REJECT();

	/* A string length pointing past the end of the payload. */
	raw_result_head(r, PROTO_PROC_GUARDED, 0, 0);
	raw_u16(r, 10);
	raw_u8(r, 'a');
	REJECT();
#undef REJECT
	assert_int_equal(out->pid, -77);
	free(r);
	free(out);
}

/* ------------------------------------------------------- done, error -- */

static void done_and_error_round_trip(void **state)
{
	uint8_t buf[PROTO_HEADER_SIZE + 6 + PROTO_MAX_MESSAGE];
	char big[PROTO_MAX_MESSAGE + 100], msg[PROTO_MAX_MESSAGE + 1], small[5];
	uint32_t count = 0, code = 0;
	struct proto_header h;
	int n;
	(void)state;

	n = proto_encode_done(4096, buf, sizeof(buf));
	assert_int_equal(n, PROTO_HEADER_SIZE + 4);
	assert_int_equal(proto_decode_done(buf + PROTO_HEADER_SIZE, 4, &count), 0);
	assert_int_equal(count, 4096);
	assert_int_equal(proto_encode_done(1, buf, PROTO_HEADER_SIZE + 3), -EMSGSIZE);

	n = proto_encode_error(BTG_ERR_LIMIT, "too \"many\" PIDs", buf, sizeof(buf));
	assert_int_equal(n, PROTO_HEADER_SIZE + 6 + 15);
	assert_int_equal(proto_decode_header(buf, (size_t)n, &h, NULL), 0);
	assert_int_equal(h.kind, PROTO_KIND_ERROR);
	assert_int_equal(proto_decode_error(buf + PROTO_HEADER_SIZE, h.length, &code, msg, sizeof(msg)), 0);
	assert_int_equal(code, BTG_ERR_LIMIT);
	assert_string_equal(msg, "too \"many\" PIDs");

	/* A small caller buffer truncates; a NULL one just skips the text. */
	assert_int_equal(proto_decode_error(buf + PROTO_HEADER_SIZE, h.length, &code, small, sizeof(small)), 0);
	assert_string_equal(small, "too ");
	assert_int_equal(proto_decode_error(buf + PROTO_HEADER_SIZE, h.length, &code, NULL, 0), 0);

	/* NULL message, errno codes, and an over-long message truncated. */
	n = proto_encode_error(EPERM, NULL, buf, sizeof(buf));
	assert_int_equal(n, PROTO_HEADER_SIZE + 6);
	assert_int_equal(proto_decode_error(buf + PROTO_HEADER_SIZE, 6, &code, msg, sizeof(msg)), 0);
	assert_int_equal(code, EPERM);
	assert_string_equal(msg, "");
	memset(big, 'e', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	n = proto_encode_error(BTG_ERR_PROTO, big, buf, sizeof(buf));
	assert_int_equal(n, sizeof(buf));
	assert_int_equal(proto_decode_error(buf + PROTO_HEADER_SIZE, (size_t)n - PROTO_HEADER_SIZE,
					    &code, msg, sizeof(msg)), 0);
	assert_int_equal(strlen(msg), PROTO_MAX_MESSAGE);

	assert_int_equal(proto_encode_error(BTG_OK, "x", buf, sizeof(buf)), -EINVAL);
	assert_int_equal(proto_encode_error(BTG_ERR_PROTO, "abc", buf, PROTO_HEADER_SIZE + 8), -EMSGSIZE);
}

static void done_and_error_rejections(void **state)
{
	struct raw *r = calloc(1, sizeof(*r));
	uint32_t count = 99, code = 99;
	char msg[16];
	char big[PROTO_MAX_MESSAGE + 1];
	(void)state;

	assert_non_null(r);
	memset(big, 'z', sizeof(big));
	r->n = 0;
	raw_u32(r, 1);
	raw_u8(r, 0);
	assert_int_equal(proto_decode_done(r->b, r->n, &count), -EBADMSG);
	assert_int_equal(count, 99);

	r->n = 0;
	raw_u32(r, BTG_OK);   /* ERROR saying success */
	raw_str(r, "", 0);
	assert_int_equal(proto_decode_error(r->b, r->n, &code, msg, sizeof(msg)), -EBADMSG);
	r->n = 0;
	raw_u32(r, BTG_ERR_BUSY);
	raw_str(r, "a\0", 2);
	assert_int_equal(proto_decode_error(r->b, r->n, &code, msg, sizeof(msg)), -EBADMSG);
	r->n = 0;
	raw_u32(r, BTG_ERR_BUSY);
	raw_str(r, "ab", 2);
	raw_u8(r, 'c');   /* trailing */
	assert_int_equal(proto_decode_error(r->b, r->n, &code, msg, sizeof(msg)), -EBADMSG);
	r->n = 0;
	raw_u32(r, BTG_ERR_BUSY);
	raw_str(r, big, PROTO_MAX_MESSAGE + 1);
	assert_int_equal(proto_decode_error(r->b, r->n, &code, msg, sizeof(msg)), -EBADMSG);
	r->n = 0;
	raw_u32(r, BTG_ERR_BUSY);
	raw_str(r, big, PROTO_MAX_MESSAGE);
	assert_int_equal(proto_decode_error(r->b, r->n, &code, msg, sizeof(msg)), 0);
	assert_int_equal(strlen(msg), sizeof(msg) - 1);
	free(r);
}

/* --------------------------------------------------------- truncation -- */

/*
 * Every proper prefix of a valid payload must be rejected, and reading it
 * must stay inside the prefix: each prefix is copied into a buffer of
 * exactly its size so ASan catches any read past len.
 */
static void check_all_prefixes(const uint8_t *msg, size_t total, unsigned kind)
{
	const uint8_t *payload = msg + PROTO_HEADER_SIZE;
	size_t plen = total - PROTO_HEADER_SIZE;
	struct proto_request *req = calloc(1, sizeof(*req));
	struct proto_result *res = calloc(1, sizeof(*res));
	struct proto_header h;
	uint32_t u;
	char text[64];

	assert_non_null(req);
	assert_non_null(res);
	for (size_t len = 0; len <= plen; len++) {
		uint8_t *copy = malloc(len ? len : 1);
		int r = 0;

		assert_non_null(copy);
		memcpy(copy, payload, len);
		switch (kind) {
		case PROTO_KIND_REQUEST: r = proto_decode_request(copy, len, req, NULL); break;
		case PROTO_KIND_RESULT:  r = proto_decode_result(copy, len, res); break;
		case PROTO_KIND_DONE:    r = proto_decode_done(copy, len, &u); break;
		case PROTO_KIND_ERROR:   r = proto_decode_error(copy, len, &u, text, sizeof(text)); break;
		default: fail();
		}
		if (len == plen)
			assert_int_equal(r, 0);
		else
			assert_int_equal(r, -EBADMSG);
		free(copy);
	}
	for (size_t len = 0; len < PROTO_HEADER_SIZE; len++) {
		uint8_t *copy = malloc(len ? len : 1);
		assert_non_null(copy);
		memcpy(copy, msg, len);
		assert_int_equal(proto_decode_header(copy, len, &h, NULL), -EBADMSG);
		free(copy);
	}
	free(req);
	free(res);
}

static void truncated_payloads_are_rejected(void **state)
{
	struct proto_request *req = new_request(PROTO_MAX_PIDS);
	struct proto_result *res = full_result();
	uint8_t *buf = new_buf();
	int n;
	(void)state;

	n = proto_encode_request(req, buf, BUF_CAP);
	assert_true(n > 0);
	check_all_prefixes(buf, (size_t)n, PROTO_KIND_REQUEST);

	/* Short strings keep the loop quick while covering every field edge. */
	res->nsites = 3;
	strcpy(res->message, "detail");
	strcpy(res->sites[0].object, "/lib/x86_64-linux-gnu/libc.so.6");
	strcpy(res->sites[1].object, "");
	strcpy(res->sites[2].object, "/opt/libbt.so");
	n = proto_encode_result(res, buf, BUF_CAP);
	assert_true(n > 0);
	check_all_prefixes(buf, (size_t)n, PROTO_KIND_RESULT);
	free(res);
	res = full_result();
	n = proto_encode_result(res, buf, BUF_CAP);
	assert_true(n > 0);
	check_all_prefixes(buf, (size_t)n, PROTO_KIND_RESULT);

	n = proto_encode_done(3, buf, BUF_CAP);
	check_all_prefixes(buf, (size_t)n, PROTO_KIND_DONE);
	n = proto_encode_error(BTG_ERR_SHUTDOWN, "stopping", buf, BUF_CAP);
	check_all_prefixes(buf, (size_t)n, PROTO_KIND_ERROR);
	free(buf);
	free(req);
	free(res);
}

/*
 * Flip single bytes of a valid result: each variant either decodes or is
 * rejected; under ASan this shows no flip makes the decoder misbehave.
 */
static void corrupted_results_never_crash(void **state)
{
	struct proto_result *res = full_result(), *out = calloc(1, sizeof(*out));
	uint8_t *buf = new_buf();
	size_t plen;
	int n;
	(void)state;

	assert_non_null(out);
	res->nsites = 2;
	strcpy(res->message, "m");
	strcpy(res->sites[0].object, "/a");
	strcpy(res->sites[1].object, "/bb");
	n = proto_encode_result(res, buf, BUF_CAP);
	assert_true(n > 0);
	plen = (size_t)n - PROTO_HEADER_SIZE;
	for (size_t i = 0; i < plen; i++) {
		static const uint8_t vals[] = { 0x00, 0x01, 0x7f, 0x80, 0xff };
		for (size_t v = 0; v < sizeof(vals); v++) {
			uint8_t *copy = malloc(plen);
			int r;

			assert_non_null(copy);
			memcpy(copy, buf + PROTO_HEADER_SIZE, plen);
			copy[i] = vals[v];
			r = proto_decode_result(copy, plen, out);
			assert_true(r == 0 || r == -EBADMSG);
			free(copy);
		}
	}
	free(buf);
	free(res);
	free(out);
}

/* -------------------------------------------------------------- names -- */

static void name_tables_cover_every_value(void **state)
{
	(void)state;

	assert_string_equal(proto_action_name(PROTO_ACTION_GUARD), "guard");
	assert_string_equal(proto_action_name(PROTO_ACTION_UNGUARD), "unguard");
	assert_string_equal(proto_action_name(PROTO_ACTION_STATUS), "status");
	assert_string_equal(proto_action_name(0), "unknown");
	assert_string_equal(proto_action_name(99), "unknown");

	assert_string_equal(proto_site_state_name(PROTO_SITE_ORIGINAL), "original");
	assert_string_equal(proto_site_state_name(PROTO_SITE_GUARDED), "guarded");
	assert_string_equal(proto_site_state_name(PROTO_SITE_FOREIGN), "foreign");
	assert_string_equal(proto_site_state_name(PROTO_SITE_TORN), "torn");
	assert_string_equal(proto_site_state_name(0), "unknown");

	assert_string_equal(proto_proc_state_name(PROTO_PROC_NONE), "none");
	assert_string_equal(proto_proc_state_name(PROTO_PROC_UNGUARDED), "unguarded");
	assert_string_equal(proto_proc_state_name(PROTO_PROC_GUARDED), "guarded");
	assert_string_equal(proto_proc_state_name(PROTO_PROC_PARTIAL), "partial");
	assert_string_equal(proto_proc_state_name(PROTO_PROC_FOREIGN), "foreign");
	assert_string_equal(proto_proc_state_name(PROTO_PROC_UNKNOWN), "unknown");
	assert_string_equal(proto_proc_state_name(200), "unknown");

	/* Every btguard code: a name, distinct from all others, and a sentence. */
	for (uint32_t c = BTG_ERR_BASE; c < BTG_ERR_END; c++) {
		const char *name = proto_error_name(c), *text = proto_error_text(c);

		assert_non_null(name);
		assert_non_null(text);
		assert_string_not_equal(name, "unknown");
		assert_true(strlen(text) > 20);
		for (uint32_t d = BTG_ERR_BASE; d < c; d++)
			assert_string_not_equal(name, proto_error_name(d));
	}
	assert_string_equal(proto_error_name(BTG_ERR_BUSY), "busy");
	assert_string_equal(proto_error_name(BTG_ERR_NOSITE), "no-site");
	assert_string_equal(proto_error_name(BTG_ERR_NOPROC), "no-process");
	assert_string_equal(proto_error_name(BTG_ERR_KTHREAD), "kernel-thread");
	assert_string_equal(proto_error_name(BTG_ERR_REUSED), "pid-reused");
	assert_string_equal(proto_error_name(BTG_ERR_STOP), "stop-timeout");
	assert_string_equal(proto_error_name(BTG_ERR_PROTO), "protocol");
	assert_string_equal(proto_error_name(BTG_ERR_INTERNAL), "internal");
	assert_non_null(strstr(proto_error_text(BTG_ERR_BUSY), "longer deadline"));

	assert_string_equal(proto_error_name(BTG_OK), "ok");
	assert_string_equal(proto_error_name(ESRCH), "ESRCH");
	assert_string_equal(proto_error_name(EPERM), "EPERM");
	assert_string_equal(proto_error_name(4000), "errno-4000");
	assert_string_equal(proto_error_name(BTG_ERR_END), "unknown");
	assert_string_equal(proto_error_name(0xffffffffu), "unknown");
	assert_string_equal(proto_error_text(ESRCH), strerror(ESRCH));
	assert_string_equal(proto_error_text(BTG_ERR_END), "unknown error code");
}

static void error_from_negative(void **state)
{
	(void)state;
	assert_int_equal(proto_error_from_negative(0), BTG_OK);
	assert_int_equal(proto_error_from_negative(5), BTG_OK);
	assert_int_equal(proto_error_from_negative(-ESRCH), ESRCH);
	assert_int_equal(proto_error_from_negative(-BTG_ERR_BUSY), BTG_ERR_BUSY);
	assert_int_equal(proto_error_from_negative(-(BTG_ERR_END - 1)), BTG_ERR_END - 1);
	assert_int_equal(proto_error_from_negative(-2147483647 - 1), BTG_ERR_INTERNAL);
}

/* One text for whatever a daemon function returned: errno or our own code. */
static void strerror_of_negative(void **state)
{
	(void)state;
	assert_string_equal(proto_strerror(-ESRCH), strerror(ESRCH));
	assert_string_equal(proto_strerror(-BTG_ERR_SHARED), proto_error_text(BTG_ERR_SHARED));
	assert_string_equal(proto_error_name(BTG_ERR_SHARED), "shared-memory");
	assert_string_equal(proto_strerror(0), "success");
}

/* --------------------------------------------------- policy, reload, RULE -- */

static void policy_and_reload_name_nothing(void **state)
{
	struct proto_request *req = new_request(0), *out = new_request(0);
	struct proto_verdict why;
	uint8_t buf[64];
	int n;
	(void)state;

	req->action = PROTO_ACTION_POLICY;
	n = proto_encode_request(req, buf, sizeof(buf));
	assert_int_equal(n, PROTO_HEADER_SIZE + 18);
	assert_int_equal(proto_decode_request(buf + PROTO_HEADER_SIZE, 18, out, NULL), 0);
	assert_int_equal(out->action, PROTO_ACTION_POLICY);
	buf[PROTO_HEADER_SIZE] = PROTO_ACTION_RELOAD;
	assert_int_equal(proto_decode_request(buf + PROTO_HEADER_SIZE, 18, out, NULL), 0);
	buf[PROTO_HEADER_SIZE + 1] = PROTO_FLAG_TREE;   /* no flags for reload */
	assert_int_equal(proto_decode_request(buf + PROTO_HEADER_SIZE, 18, out, &why), -EBADMSG);
	assert_int_equal(why.code, BTG_ERR_PROTO);
	buf[PROTO_HEADER_SIZE + 1] = 0;
	buf[PROTO_HEADER_SIZE] = 4;   /* reserved for at-exec */
	assert_int_equal(proto_decode_request(buf + PROTO_HEADER_SIZE, 18, out, NULL), -EBADMSG);
	assert_string_equal(proto_action_name(PROTO_ACTION_RELOAD), "reload");
	/* SWEPT, too, names nothing. */
	buf[PROTO_HEADER_SIZE] = PROTO_ACTION_SWEPT;
	assert_int_equal(proto_decode_request(buf + PROTO_HEADER_SIZE, 18, out, NULL), 0);
	assert_int_equal(out->action, PROTO_ACTION_SWEPT);
	buf[PROTO_HEADER_SIZE + 1] = PROTO_FLAG_TREE;
	assert_int_equal(proto_decode_request(buf + PROTO_HEADER_SIZE, 18, out, &why), -EBADMSG);
	buf[PROTO_HEADER_SIZE + 1] = 0;
	assert_string_equal(proto_action_name(PROTO_ACTION_SWEPT), "swept");
	free(req);
	free(out);
}

static void rule_round_trip_and_limits(void **state)
{
	struct proto_rule r = { .hits = 3, .npids = 2, .pids = { 42, 7 } }, out;
	static const uint8_t want[] = {
		'B', 'T', 'G', '1', 3, 0, 5, 0, 26, 0, 0, 0,
		3, 0, 0, 0,  0, 2,  5, 0,  't', 'o', 'r', 'c', 'h',
		3, 0, 'a', 'l', 'l',
		42, 0, 0, 0,  7, 0, 0, 0,
	};
	uint8_t buf[128];
	(void)state;

	strcpy(r.name, "torch");
	strcpy(r.match, "all");
	assert_int_equal(proto_encode_rule(&r, buf, sizeof(buf)), sizeof(want));
	assert_memory_equal(buf, want, sizeof(want));
	assert_int_equal(proto_encode_rule(&r, buf, sizeof(want) - 1), -EMSGSIZE);
	assert_int_equal(proto_decode_rule(buf + PROTO_HEADER_SIZE, sizeof(want) - PROTO_HEADER_SIZE,
					   &out), 0);
	assert_int_equal(out.hits, 3);
	assert_int_equal(out.npids, 2);
	assert_int_equal(out.pids[1], 7);
	assert_string_equal(out.name, "torch");
	assert_string_equal(out.match, "all");
	/* Short, long, a PID of 0, an empty name, unknown flags: refused. */
	assert_int_equal(proto_decode_rule(buf + PROTO_HEADER_SIZE, sizeof(want) - PROTO_HEADER_SIZE - 1,
					   &out), -EBADMSG);
	buf[sizeof(want) - 4] = 0;
	buf[sizeof(want) - 4 + 0] = 0;
	memset(buf + sizeof(want) - 4, 0, 4);
	assert_int_equal(proto_decode_rule(buf + PROTO_HEADER_SIZE, sizeof(want) - PROTO_HEADER_SIZE,
					   &out), -EBADMSG);
	r.name[0] = '\0';
	assert_int_equal(proto_encode_rule(&r, buf, sizeof(buf)), -EINVAL);
	strcpy(r.name, "torch");
	r.flags = 2;
	assert_int_equal(proto_encode_rule(&r, buf, sizeof(buf)), -EINVAL);
	r.flags = 0;
	r.npids = PROTO_MAX_RULE_PIDS + 1;
	assert_int_equal(proto_encode_rule(&r, buf, sizeof(buf)), -EINVAL);
}

static void notice_round_trip_and_limits(void **state)
{
	static const uint8_t want[] = {
		'B', 'T', 'G', '1', 3, 0, 6, 0, 4, 0, 0, 0,
		2, 0, 'n', 'o',
	};
	char text[PROTO_MAX_MESSAGE + 1], small[2], big[PROTO_MAX_MESSAGE + 8];
	uint8_t buf[PROTO_HEADER_SIZE + 2 + PROTO_MAX_MESSAGE + 8];
	(void)state;

	assert_int_equal(proto_encode_notice("no", buf, sizeof(buf)), sizeof(want));
	assert_memory_equal(buf, want, sizeof(want));
	assert_int_equal(proto_encode_notice("no", buf, sizeof(want) - 1), -EMSGSIZE);
	assert_int_equal(proto_decode_notice(buf + PROTO_HEADER_SIZE, 4, text, sizeof(text)), 0);
	assert_string_equal(text, "no");
	assert_int_equal(proto_decode_notice(buf + PROTO_HEADER_SIZE, 4, small, sizeof(small)), 0);
	assert_string_equal(small, "n");
	/* Short, long, empty, a NUL inside: refused; nothing to say is not encoded. */
	assert_int_equal(proto_decode_notice(buf + PROTO_HEADER_SIZE, 3, text, sizeof(text)), -EBADMSG);
	assert_int_equal(proto_decode_notice(buf + PROTO_HEADER_SIZE, 5, text, sizeof(text)), -EBADMSG);
	buf[PROTO_HEADER_SIZE + 3] = '\0';
	assert_int_equal(proto_decode_notice(buf + PROTO_HEADER_SIZE, 4, text, sizeof(text)), -EBADMSG);
	buf[PROTO_HEADER_SIZE] = 0;
	assert_int_equal(proto_decode_notice(buf + PROTO_HEADER_SIZE, 2, text, sizeof(text)), -EBADMSG);
	assert_int_equal(proto_encode_notice("", buf, sizeof(buf)), -EINVAL);
	assert_int_equal(proto_encode_notice(NULL, buf, sizeof(buf)), -EINVAL);
	/* Longer than the limit: cut to it. */
	memset(big, 'x', sizeof(big) - 1);
	big[sizeof(big) - 1] = '\0';
	assert_int_equal(proto_encode_notice(big, buf, sizeof(buf)),
			 PROTO_HEADER_SIZE + 2 + PROTO_MAX_MESSAGE);
	assert_int_equal(proto_decode_notice(buf + PROTO_HEADER_SIZE, 2 + PROTO_MAX_MESSAGE, text,
					     sizeof(text)), 0);
	assert_int_equal(strlen(text), PROTO_MAX_MESSAGE);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(notice_round_trip_and_limits),
		cmocka_unit_test(policy_and_reload_name_nothing),
		cmocka_unit_test(rule_round_trip_and_limits),
		cmocka_unit_test(header_layout_is_little_endian),
		cmocka_unit_test(header_rejections),
		cmocka_unit_test(request_layout_and_round_trip),
		cmocka_unit_test(request_max_size),
		cmocka_unit_test(request_encoder_refuses_invalid),
		cmocka_unit_test(request_at_exec_names_one_pid),
		cmocka_unit_test(request_decoder_rejections),
		cmocka_unit_test(request_selectors_layout_and_round_trip),
		cmocka_unit_test(request_selector_rejections),
		cmocka_unit_test(result_layout),
		cmocka_unit_test(result_round_trip_at_limits),
		cmocka_unit_test(result_strings_over_limit_are_truncated),
		cmocka_unit_test(result_encoder_refuses_invalid),
		cmocka_unit_test(result_decoder_rejections),
		cmocka_unit_test(done_and_error_round_trip),
		cmocka_unit_test(done_and_error_rejections),
		cmocka_unit_test(truncated_payloads_are_rejected),
		cmocka_unit_test(corrupted_results_never_crash),
		cmocka_unit_test(name_tables_cover_every_value),
		cmocka_unit_test(error_from_negative),
		cmocka_unit_test(strerror_of_negative),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
