// SPDX-License-Identifier: MIT
/*
 * Fuzzes the wire decoders in proto/proto.c, the first code every byte from
 * a peer meets, and checks the round trip: whatever a decoder accepts, the
 * matching encoder must write back byte for byte (the format has a single
 * encoding of each message), and decoding that again must give the same
 * values.  A decoder that accepted something the encoder cannot produce, or
 * lost a field on the way, aborts.
 *
 * Input: one selector byte, then the bytes under test.
 *   selector % 5 == 0  a whole message: header, then the payload it
 *                      announces (what the daemon and the client read);
 *                      RULE payloads are reached only this way
 *   selector % 5 == 1  a REQUEST payload     2  a RESULT payload
 *                 3    a DONE payload        4  an ERROR payload
 * The header decoder also sees every body, whatever the selector.
 */
#include <errno.h>

#include "fuzz.h"
#include "proto.h"

#define ENC_CAP (PROTO_HEADER_SIZE + PROTO_MAX_PAYLOAD)

/* Scratch kept across runs: a result is ~17 KiB, the encode buffer 64 KiB. */
static struct proto_request req_a, req_b;
static struct proto_result res_a, res_b;
static uint8_t enc[ENC_CAP];

/* The encoder wrote n bytes: a valid header of kind, then exactly payload. */
static void check_encoding(int n, unsigned kind, const uint8_t *payload, size_t len)
{
	struct proto_header h;

	FUZZ_CHECK(n >= 0 && (size_t)n == PROTO_HEADER_SIZE + len);
	FUZZ_CHECK(proto_decode_header(enc, (size_t)n, &h, NULL) == 0);
	FUZZ_CHECK(h.magic == PROTO_MAGIC && h.version == PROTO_VERSION);
	FUZZ_CHECK(h.kind == kind && h.length == len);
	FUZZ_CHECK(memcmp(enc + PROTO_HEADER_SIZE, payload, len) == 0);
}

static void fuzz_request(const uint8_t *p, size_t len)
{
	int n;

	if (proto_decode_request(p, len, &req_a, NULL) < 0)
		return;
	/* PIDs or a selector, exactly one of the two; POLICY and RELOAD name neither. */
	FUZZ_CHECK(req_a.npids <= PROTO_MAX_PIDS);
	if (req_a.action == PROTO_ACTION_POLICY || req_a.action == PROTO_ACTION_RELOAD ||
	    req_a.action == PROTO_ACTION_SWEPT)
		FUZZ_CHECK(req_a.npids == 0 && req_a.sel.fields == 0 && req_a.flags == 0);
	else
		FUZZ_CHECK((req_a.npids >= 1) != (req_a.sel.fields != 0));
	n = proto_encode_request(&req_a, enc, sizeof(enc));
	check_encoding(n, PROTO_KIND_REQUEST, p, len);
	/* One byte short of room must be refused, not half-written. */
	FUZZ_CHECK(proto_encode_request(&req_a, enc, (size_t)n - 1) == -EMSGSIZE);

	FUZZ_CHECK(proto_decode_request(enc + PROTO_HEADER_SIZE, len, &req_b, NULL) == 0);
	FUZZ_CHECK(req_a.action == req_b.action && req_a.flags == req_b.flags);
	FUZZ_CHECK(req_a.deadline_ms == req_b.deadline_ms && req_a.npids == req_b.npids);
	for (uint32_t i = 0; i < req_a.npids; i++)
		FUZZ_CHECK(req_a.pids[i] > 0 && req_a.pids[i] == req_b.pids[i]);
	FUZZ_CHECK(req_a.sel.fields == req_b.sel.fields && req_a.sel.uid == req_b.sel.uid);
	FUZZ_CHECK(!strcmp(req_a.sel.exe, req_b.sel.exe) && !strcmp(req_a.sel.cmdline, req_b.sel.cmdline));
	FUZZ_CHECK(!strcmp(req_a.sel.cgroup, req_b.sel.cgroup) && !strcmp(req_a.sel.maps, req_b.sel.maps));
	(void)proto_action_name(req_a.action);
}

static void fuzz_result(const uint8_t *p, size_t len)
{
	int n;

	if (proto_decode_result(p, len, &res_a) < 0)
		return;
	FUZZ_CHECK(res_a.pid > 0 && res_a.nsites <= PROTO_MAX_SITES);
	FUZZ_CHECK(strlen(res_a.message) <= PROTO_MAX_MESSAGE);
	FUZZ_CHECK(strlen(res_a.command) <= PROTO_MAX_COMMAND);
	FUZZ_CHECK(strlen(res_a.reason) <= PROTO_MAX_MESSAGE);
	(void)proto_risk_name(res_a.risk);
	n = proto_encode_result(&res_a, enc, sizeof(enc));
	check_encoding(n, PROTO_KIND_RESULT, p, len);
	FUZZ_CHECK(proto_encode_result(&res_a, enc, (size_t)n - 1) == -EMSGSIZE);

	FUZZ_CHECK(proto_decode_result(enc + PROTO_HEADER_SIZE, len, &res_b) == 0);
	FUZZ_CHECK(res_a.pid == res_b.pid && res_a.error == res_b.error);
	FUZZ_CHECK(res_a.action == res_b.action && res_a.state == res_b.state);
	FUZZ_CHECK(res_a.flags == res_b.flags && res_a.nsites == res_b.nsites);
	FUZZ_CHECK(res_a.pause_us == res_b.pause_us && res_a.check_us == res_b.check_us);
	FUZZ_CHECK(strcmp(res_a.message, res_b.message) == 0);
	for (unsigned i = 0; i < res_a.nsites; i++) {
		const struct proto_site *a = &res_a.sites[i], *b = &res_b.sites[i];

		FUZZ_CHECK(a->address == b->address && a->state == b->state);
		FUZZ_CHECK(strlen(a->object) <= PROTO_MAX_OBJECT);
		FUZZ_CHECK(strcmp(a->object, b->object) == 0);
		FUZZ_CHECK(proto_site_state_name(a->state) != NULL);
	}
	/* The client prints these for any code a daemon sends. */
	FUZZ_CHECK(proto_error_name(res_a.error) && proto_error_text(res_a.error));
	FUZZ_CHECK(proto_proc_state_name(res_a.state) != NULL);
}

static void fuzz_done(const uint8_t *p, size_t len)
{
	uint32_t a, b;
	int n;

	if (proto_decode_done(p, len, &a) < 0)
		return;
	n = proto_encode_done(a, enc, sizeof(enc));
	check_encoding(n, PROTO_KIND_DONE, p, len);
	FUZZ_CHECK(proto_decode_done(enc + PROTO_HEADER_SIZE, len, &b) == 0 && a == b);
}

static void fuzz_error(const uint8_t *p, size_t len)
{
	char msg_a[PROTO_MAX_MESSAGE + 1], msg_b[PROTO_MAX_MESSAGE + 1], small[8];
	uint32_t a, b, c;
	int n;

	if (proto_decode_error(p, len, &a, msg_a, sizeof(msg_a)) < 0)
		return;
	FUZZ_CHECK(a != BTG_OK && strlen(msg_a) <= PROTO_MAX_MESSAGE);
	n = proto_encode_error(a, msg_a, enc, sizeof(enc));
	check_encoding(n, PROTO_KIND_ERROR, p, len);
	FUZZ_CHECK(proto_decode_error(enc + PROTO_HEADER_SIZE, len, &b, msg_b, sizeof(msg_b)) == 0);
	FUZZ_CHECK(a == b && strcmp(msg_a, msg_b) == 0);
	/* A short buffer gets a NUL-terminated prefix, never an overflow. */
	FUZZ_CHECK(proto_decode_error(p, len, &c, small, sizeof(small)) == 0 && c == a);
	FUZZ_CHECK(strlen(small) < sizeof(small) && strncmp(small, msg_a, strlen(small)) == 0);
	FUZZ_CHECK(proto_decode_error(p, len, &c, NULL, 0) == 0 && c == a);
	FUZZ_CHECK(proto_error_name(a) && proto_error_text(a));
}

static void fuzz_rule(const uint8_t *p, size_t len)
{
	static struct proto_rule a, b;
	int n;

	if (proto_decode_rule(p, len, &a) < 0)
		return;
	FUZZ_CHECK(a.name[0] && strlen(a.name) <= PROTO_MAX_RULE_NAME);
	FUZZ_CHECK(a.npids <= PROTO_MAX_RULE_PIDS && strlen(a.match) <= PROTO_MAX_MESSAGE);
	n = proto_encode_rule(&a, enc, sizeof(enc));
	check_encoding(n, PROTO_KIND_RULE, p, len);
	FUZZ_CHECK(proto_encode_rule(&a, enc, (size_t)n - 1) == -EMSGSIZE);
	FUZZ_CHECK(proto_decode_rule(enc + PROTO_HEADER_SIZE, len, &b) == 0);
	FUZZ_CHECK(a.hits == b.hits && a.flags == b.flags && a.npids == b.npids);
	FUZZ_CHECK(!strcmp(a.name, b.name) && !strcmp(a.match, b.match));
	FUZZ_CHECK(!memcmp(a.pids, b.pids, a.npids * sizeof(a.pids[0])));
}

static void fuzz_notice(const uint8_t *p, size_t len)
{
	static char a[PROTO_MAX_MESSAGE + 1], b[PROTO_MAX_MESSAGE + 1];
	char small[8];
	int n;

	if (proto_decode_notice(p, len, a, sizeof(a)) < 0)
		return;
	FUZZ_CHECK(a[0] && strlen(a) <= PROTO_MAX_MESSAGE);
	n = proto_encode_notice(a, enc, sizeof(enc));
	check_encoding(n, PROTO_KIND_NOTICE, p, len);
	FUZZ_CHECK(proto_decode_notice(enc + PROTO_HEADER_SIZE, len, b, sizeof(b)) == 0);
	FUZZ_CHECK(!strcmp(a, b));
	FUZZ_CHECK(proto_decode_notice(p, len, small, sizeof(small)) == 0);
	FUZZ_CHECK(strlen(small) < sizeof(small) && !strncmp(small, a, strlen(small)));
}

/* As a reader of the socket would: the header, then the payload it announces. */
static void fuzz_message(const uint8_t *p, size_t len)
{
	struct proto_header h;
	uint8_t *payload;

	if (proto_decode_header(p, len, &h, NULL) < 0)
		return;
	FUZZ_CHECK(len >= PROTO_HEADER_SIZE && h.length <= PROTO_MAX_PAYLOAD);
	FUZZ_CHECK(h.kind >= PROTO_KIND_REQUEST && h.kind <= PROTO_KIND_NOTICE);
	if (len - PROTO_HEADER_SIZE < h.length)
		return;   /* the rest has not arrived */
	/* Its own exact-size buffer, so a decoder reading on is caught. */
	payload = fuzz_copy(p + PROTO_HEADER_SIZE, h.length);
	switch (h.kind) {
	case PROTO_KIND_REQUEST: fuzz_request(payload, h.length); break;
	case PROTO_KIND_RESULT:  fuzz_result(payload, h.length); break;
	case PROTO_KIND_DONE:    fuzz_done(payload, h.length); break;
	case PROTO_KIND_ERROR:   fuzz_error(payload, h.length); break;
	case PROTO_KIND_RULE:    fuzz_rule(payload, h.length); break;
	case PROTO_KIND_NOTICE:  fuzz_notice(payload, h.length); break;
	}
	free(payload);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	struct proto_header h;
	uint8_t *body;
	size_t len;

	if (size < 1)
		return 0;
	len = size - 1;
	body = fuzz_copy(data + 1, len);
	(void)proto_decode_header(body, len, &h, NULL);
	switch (data[0] % 5) {
	case 0: fuzz_message(body, len); break;
	case 1: fuzz_request(body, len); break;
	case 2: fuzz_result(body, len); break;
	case 3: fuzz_done(body, len); break;
	case 4: fuzz_error(body, len); break;
	}
	free(body);
	return 0;
}
