/* SPDX-License-Identifier: MIT */
/*
 * The btguard wire protocol: message framing, kinds, hard limits and pure
 * encode/decode functions.  Nothing here touches a socket; daemon, client,
 * unit tests and fuzzers all link this file.  See proto/PROTOCOL.md.
 *
 * Every message is a 12-byte header followed by a payload.  All integers are
 * little-endian.  A client sends REQUEST; the daemon answers with one RESULT
 * per target PID (in request order) followed by DONE, or with a single ERROR
 * when the request as a whole is rejected.  A connection may carry any number
 * of requests, one after the other.
 */
#ifndef BTGUARD_PROTO_H
#define BTGUARD_PROTO_H

#include <stddef.h>
#include <stdint.h>

#define PROTO_MAGIC        0x31475442u /* "BTG1" on the wire */
#define PROTO_VERSION      1u

/* What the client and the daemon agree on beyond the wire format. */
#ifndef BTGUARD_VERSION
#define BTGUARD_VERSION      "0.1.0"   /* debian/changelog's version */
#endif
#define PROTO_DEFAULT_SOCKET "/run/btguard/btguard.sock"
#define PROTO_HEADER_SIZE  12u

/* Hard limits.  A peer that exceeds one gets an error, never a bigger buffer. */
#define PROTO_MAX_PAYLOAD  65536u   /* bytes after the header */
#define PROTO_MAX_PIDS     4096u    /* PIDs in one request */
#define PROTO_MAX_SITES    16u      /* backtrace definitions reported per PID */
#define PROTO_MAX_OBJECT   1024u    /* bytes of an object path, without NUL */
#define PROTO_MAX_MESSAGE  512u     /* bytes of a result's detail text */
#define PROTO_MAX_DEADLINE_MS 60000u
#define PROTO_DEFAULT_DEADLINE_MS 2000u

enum proto_kind {
	PROTO_KIND_REQUEST = 1,
	PROTO_KIND_RESULT  = 2,
	PROTO_KIND_DONE    = 3,
	PROTO_KIND_ERROR   = 4,
};

enum proto_action {
	PROTO_ACTION_GUARD   = 1,
	PROTO_ACTION_UNGUARD = 2,
	PROTO_ACTION_STATUS  = 3,
};

/* Request flags. */
#define PROTO_FLAG_TREE    0x01u    /* also act on every current descendant */
#define PROTO_FLAGS_KNOWN  PROTO_FLAG_TREE

/* State of one backtrace definition ("site") in a target. */
enum proto_site_state {
	PROTO_SITE_ORIGINAL = 1,   /* bytes equal the object file's */
	PROTO_SITE_GUARDED  = 2,   /* our stub */
	PROTO_SITE_FOREIGN  = 3,   /* neither: somebody else changed it */
};

/* State of a whole process, derived from its sites. */
enum proto_proc_state {
	PROTO_PROC_NONE      = 0,  /* no backtrace definition loaded */
	PROTO_PROC_UNGUARDED = 1,  /* every site original */
	PROTO_PROC_GUARDED   = 2,  /* every site guarded */
	PROTO_PROC_PARTIAL   = 3,  /* guarded and original sites mixed */
	PROTO_PROC_FOREIGN   = 4,  /* at least one foreign site */
	PROTO_PROC_UNKNOWN   = 5,  /* not determined (the request failed first) */
};

/* Result flags. */
#define PROTO_RESULT_WROTE 0x01u    /* bytes in the target were changed */

/*
 * Error codes on the wire.  0 is success; 1..4095 carry a Linux errno value
 * unchanged; from 4096 on, btguard's own reasons.  Inside the daemon they
 * travel as negative numbers (-ESRCH, -BTG_ERR_BUSY) like any errno.
 */
enum proto_error {
	BTG_OK = 0,
	BTG_ERR_BASE = 4096,
	BTG_ERR_BUSY = BTG_ERR_BASE,  /* a thread is executing / returning into the site */
	BTG_ERR_FOREIGN,      /* a site holds bytes that are neither original nor ours */
	BTG_ERR_NOSITE,       /* no backtrace definition loaded: nothing to do */
	BTG_ERR_TRACED,       /* the target is already traced by another process */
	BTG_ERR_DENIED,       /* the caller may not act on this process */
	BTG_ERR_NOPROC,       /* no such process */
	BTG_ERR_ZOMBIE,       /* the target has exited and not been reaped */
	BTG_ERR_KTHREAD,      /* kernel thread */
	BTG_ERR_SELF,         /* the daemon itself */
	BTG_ERR_GONE,         /* the target exited during the operation */
	BTG_ERR_EXEC,         /* the target exec'd during the operation */
	BTG_ERR_REUSED,       /* the PID now names another process */
	BTG_ERR_VERIFY,       /* read-back after the write did not match */
	BTG_ERR_STOP,         /* a thread did not stop before the deadline */
	BTG_ERR_ELF,          /* an object could not be read or parsed */
	BTG_ERR_UNSUPPORTED,  /* the target's architecture is not supported */
	BTG_ERR_PROTO,        /* malformed message */
	BTG_ERR_LIMIT,        /* a hard limit was exceeded */
	BTG_ERR_SHUTDOWN,     /* the daemon is stopping */
	BTG_ERR_INTERNAL,     /* a broken invariant inside the daemon */
	BTG_ERR_SHARED,       /* another process shares the address space and cannot be held */
	BTG_ERR_END,
};

struct proto_header {
	uint32_t magic;
	uint16_t version;
	uint16_t kind;
	uint32_t length;      /* payload bytes that follow the header */
};

struct proto_request {
	uint8_t  action;      /* enum proto_action */
	uint8_t  flags;       /* PROTO_FLAG_* */
	uint32_t deadline_ms; /* 0: PROTO_DEFAULT_DEADLINE_MS */
	uint32_t npids;
	int32_t  pids[PROTO_MAX_PIDS];
};

struct proto_site {
	uint64_t address;     /* run-time address of the definition */
	uint8_t  state;       /* enum proto_site_state */
	char     object[PROTO_MAX_OBJECT + 1];  /* object path as the target maps it */
};

struct proto_result {
	int32_t  pid;         /* as the requester named it */
	uint32_t error;       /* enum proto_error or errno; 0 on success */
	uint8_t  action;
	uint8_t  state;       /* enum proto_proc_state, after the action */
	uint8_t  flags;       /* PROTO_RESULT_* */
	uint8_t  nsites;
	uint32_t pause_us;    /* target stopped: first stop to last resume */
	uint32_t check_us;    /* share of pause_us spent on the activeness check */
	char     message[PROTO_MAX_MESSAGE + 1];  /* detail, may be empty */
	struct proto_site sites[PROTO_MAX_SITES];
};

/*
 * Encoders write one whole message (header included) into buf and return
 * its length, or -EMSGSIZE if cap is too small, -EINVAL for a value that
 * breaks a limit.  Strings longer than their limit are truncated.
 */
int proto_encode_request(const struct proto_request *req, uint8_t *buf, size_t cap);
int proto_encode_result(const struct proto_result *res, uint8_t *buf, size_t cap);
int proto_encode_done(uint32_t count, uint8_t *buf, size_t cap);
int proto_encode_error(uint32_t code, const char *message, uint8_t *buf, size_t cap);

/*
 * Decoders read from exactly what was received and never past len.
 * proto_decode_header needs len >= PROTO_HEADER_SIZE; it checks magic
 * (-EBADMSG), version (-EPROTONOSUPPORT), kind (-EBADMSG) and the payload
 * limit (-EMSGSIZE).  Payload decoders return 0, or -EBADMSG when the
 * payload is short, long, or holds an invalid value.
 */
int proto_decode_header(const uint8_t *buf, size_t len, struct proto_header *ret);
int proto_decode_request(const uint8_t *payload, size_t len, struct proto_request *ret);
int proto_decode_result(const uint8_t *payload, size_t len, struct proto_result *ret);
int proto_decode_done(const uint8_t *payload, size_t len, uint32_t *ret_count);
int proto_decode_error(const uint8_t *payload, size_t len, uint32_t *ret_code,
		       char *message, size_t message_cap);

/* Names for humans and JSON; never NULL. */
const char *proto_action_name(unsigned action);        /* "guard" */
const char *proto_site_state_name(unsigned state);     /* "original" */
const char *proto_proc_state_name(unsigned state);     /* "guarded" */
const char *proto_error_name(uint32_t code);           /* "busy", "ESRCH" */
const char *proto_error_text(uint32_t code);           /* one sentence */

/* Maps a daemon-internal negative errno/BTG code to the wire code. */
uint32_t proto_error_from_negative(int r);

/* The text for a negative errno or BTG code, as daemon functions return them. */
const char *proto_strerror(int r);

#endif
