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

#include <errno.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#define PROTO_MAGIC        0x31475442u /* "BTG1" on the wire */
#define PROTO_VERSION      3u   /* 2: selectors, uid/command/risk in RESULT; 3: policy, reload, RULE */

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
#define PROTO_MAX_PATTERN  1024u   /* bytes of one selector pattern, without NUL */
#define PROTO_MAX_COMMAND  256u    /* bytes of a result's command line */
#define PROTO_MAX_SELECTED 65536u  /* targets one selector request may reach */
#define PROTO_MAX_DEADLINE_MS 60000u
/* at-exec waits for an exec, not a busy process: a launch may be slow */
#define PROTO_MAX_FOLLOW_MS 600000u
#define PROTO_DEFAULT_DEADLINE_MS 2000u

enum proto_kind {
	PROTO_KIND_REQUEST = 1,
	PROTO_KIND_RESULT  = 2,
	PROTO_KIND_DONE    = 3,
	PROTO_KIND_ERROR   = 4,
	PROTO_KIND_RULE    = 5,   /* version 3: one policy rule, answering POLICY */
	PROTO_KIND_NOTICE  = 6,   /* later in version 3: about the daemon, before a STATUS or POLICY answer */
};

enum proto_action {
	PROTO_ACTION_GUARD   = 1,
	PROTO_ACTION_UNGUARD = 2,
	PROTO_ACTION_STATUS  = 3,
	PROTO_ACTION_AT_EXEC = 4,  /* guard a process from its next exec on (one PID) */
	PROTO_ACTION_POLICY  = 5,   /* list the policy's rules: RULE..., DONE (root only) */
	PROTO_ACTION_RELOAD  = 6,   /* read the policy again: DONE(rules) or ERROR (root only) */
	PROTO_ACTION_SWEPT   = 7,   /* DONE(Unix time the last policy sweep ended, 0: none) (root only) */
};

/* Limits of a RULE message. */
#define PROTO_MAX_RULE_NAME 64u    /* bytes of a rule's name */
#define PROTO_MAX_RULE_PIDS 8u     /* the last processes a rule guarded */
#define PROTO_RULE_EXCLUDE  0x01u  /* RULE flags: an exclusion, not a guard rule */

/* Request flags. */
#define PROTO_FLAG_TREE    0x01u    /* also act on every current descendant */
/*
 * GUARD and AT_EXEC only: the segment walk, which keeps backtraces up to a stack
 * switcher's frame, where a site has it; the empty stub elsewhere (the
 * result says so: PROTO_WARN_NO_WALK).
 */
#define PROTO_FLAG_WALK    0x02u
#define PROTO_FLAGS_KNOWN  (PROTO_FLAG_TREE | PROTO_FLAG_WALK)

/*
 * Selector fields (proto_select.fields): a request either names PIDs or
 * selects processes, never both.  Every field set must match.
 */
#define PROTO_SEL_ALL      0x01u    /* every process the caller may act on */
#define PROTO_SEL_UID      0x02u    /* real uid equals uid */
#define PROTO_SEL_EXE      0x04u    /* executable path matches the glob exe */
#define PROTO_SEL_CMDLINE  0x08u    /* command line matches the glob cmdline */
#define PROTO_SEL_CGROUP   0x10u    /* in the cgroup subtree cgroup */
#define PROTO_SEL_MAPS     0x20u    /* maps an object whose path matches the glob maps */
#define PROTO_SEL_AT_RISK  0x40u    /* maps torch's c10 and a stack-switching library */
#define PROTO_SEL_KNOWN    0x7fu

/* State of one backtrace definition ("site") in a target. */
enum proto_site_state {
	PROTO_SITE_ORIGINAL = 1,   /* bytes equal the object file's */
	PROTO_SITE_GUARDED  = 2,   /* our stub */
	PROTO_SITE_FOREIGN  = 3,   /* neither: somebody else changed it */
	/*
	 * Our stub with some of its bytes the file's again or a breakpoint:
	 * a breakpoint (a uprobe's, a debugger's) put inside the bytes the
	 * guard changes, or the file's bytes the kernel wrote back when a
	 * uprobe there went.  Not guarded: a call may crash, or (a breakpoint
	 * on the byte a guard inside an instruction keeps) run unguarded.
	 * guard and unguard rewrite it whole (stub.h).
	 */
	PROTO_SITE_TORN     = 4,
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
/* AT_EXEC only: the first of its two RESULTs, sent once the process is
 * followed (seized, every system call seen); it may exec from now on. */
#define PROTO_RESULT_ARMED 0x02u

/* Site flags. */
#define PROTO_SITE_BOUND   0x01u    /* the definition callers reach by name (see PROTOCOL.md) */
/*
 * A breakpoint (a uprobe's, a debugger's) sits on its first instruction
 * (the state ignores it), or inside the bytes the guard changes (the state
 * says original, or torn).
 */
#define PROTO_SITE_BREAKPOINT 0x02u
/* Guarded by the segment walk (backtrace() keeps the frames up to a stack switcher's), not the stub. */
#define PROTO_SITE_WALKS   0x04u
#define PROTO_SITE_FLAGS   (PROTO_SITE_BOUND | PROTO_SITE_BREAKPOINT | PROTO_SITE_WALKS)

/* Whether the crash can hit the process (proto_result.risk). */
enum proto_risk {
	PROTO_RISK_UNKNOWN = 0,    /* not determined */
	PROTO_RISK_NONE    = 1,    /* does not map both torch's c10 and a stack-switching library */
	PROTO_RISK_AT_RISK = 2,    /* maps both, and the bound backtrace() is not guarded */
	PROTO_RISK_COVERED = 3,    /* maps both, and the bound backtrace() is guarded */
};

/* What the guard does not cover in this process (proto_result.warnings). */
#define PROTO_WARN_CPP_STACKTRACES 0x01u  /* TORCH_SHOW_CPP_STACKTRACES=1 in its environment */
#define PROTO_WARN_DIST_DEBUG      0x02u  /* TORCH_DISTRIBUTED_DEBUG=DETAIL in its environment */
#define PROTO_WARN_MOUNT_NS        0x04u  /* site paths are in another mount namespace than the node's */
/* a site is torn (PROTO_SITE_TORN): a call to backtrace() may crash, or run unguarded, until guard repairs it */
#define PROTO_WARN_TORN            0x08u
/* asked for the segment walk, a site got the empty stub instead (the message says why) */
#define PROTO_WARN_NO_WALK         0x10u
#define PROTO_WARNINGS_KNOWN       0x1fu

#define PROTO_UID_UNKNOWN  0xffffffffu

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

struct proto_select {
	uint8_t  fields;      /* PROTO_SEL_*; 0: the request names PIDs */
	uint32_t uid;         /* with PROTO_SEL_UID */
	char     exe[PROTO_MAX_PATTERN + 1];
	char     cmdline[PROTO_MAX_PATTERN + 1];
	char     cgroup[PROTO_MAX_PATTERN + 1];
	char     maps[PROTO_MAX_PATTERN + 1];
};

struct proto_request {
	uint8_t  action;      /* enum proto_action */
	uint8_t  flags;       /* PROTO_FLAG_* */
	uint32_t deadline_ms; /* 0: PROTO_DEFAULT_DEADLINE_MS */
	uint32_t npids;       /* 0 exactly when sel.fields != 0 */
	int32_t  pids[PROTO_MAX_PIDS];
	struct proto_select sel;
};

struct proto_site {
	uint64_t address;     /* run-time address of the definition */
	uint8_t  state;       /* enum proto_site_state */
	uint8_t  flags;       /* PROTO_SITE_* */
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
	uint32_t uid;         /* the process's real uid, PROTO_UID_UNKNOWN when not read */
	uint8_t  risk;        /* enum proto_risk */
	uint8_t  warnings;    /* PROTO_WARN_* */
	char     message[PROTO_MAX_MESSAGE + 1];  /* detail, may be empty */
	char     command[PROTO_MAX_COMMAND + 1];  /* its command line, may be empty */
	char     reason[PROTO_MAX_MESSAGE + 1];   /* why risk says what it says, may be empty */
	struct proto_site sites[PROTO_MAX_SITES];
};

/* One rule of the daemon's policy, as POLICY answers it. */
struct proto_rule {
	uint32_t hits;        /* guards it made that wrote, since the daemon started */
	uint8_t  flags;       /* PROTO_RULE_* */
	uint8_t  npids;       /* 0..PROTO_MAX_RULE_PIDS */
	char     name[PROTO_MAX_RULE_NAME + 1];
	char     match[PROTO_MAX_MESSAGE + 1];   /* what it matches, as the file says it */
	int32_t  pids[PROTO_MAX_RULE_PIDS];      /* the last it guarded, the latest first */
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
int proto_encode_rule(const struct proto_rule *rule, uint8_t *buf, size_t cap);
/* A NOTICE: 1..PROTO_MAX_MESSAGE bytes of text (longer is cut), -EINVAL for an empty one. */
int proto_encode_notice(const char *message, uint8_t *buf, size_t cap);

/*
 * Why a decoder refused a message, for the peer that sent it: the error
 * code to answer with (BTG_ERR_PROTO, BTG_ERR_LIMIT, EPROTONOSUPPORT) and
 * one sentence a client author can act on.
 */
struct proto_verdict {
	uint32_t code;
	char     text[PROTO_MAX_MESSAGE + 1];
};

/*
 * Decoders read from exactly what was received and never past len.
 * proto_decode_header needs len >= PROTO_HEADER_SIZE; it checks magic
 * (-EBADMSG), version (-EPROTONOSUPPORT), kind (-EBADMSG) and the payload
 * limit (-EMSGSIZE).  Payload decoders return 0, or -EBADMSG when the
 * payload is short, long, or holds an invalid value (-EMSGSIZE for a
 * request over a limit).  When ret_why is not NULL, a refusal fills it.
 */
int proto_decode_header(const uint8_t *buf, size_t len, struct proto_header *ret,
			struct proto_verdict *ret_why);
int proto_decode_request(const uint8_t *payload, size_t len, struct proto_request *ret,
			 struct proto_verdict *ret_why);
int proto_decode_result(const uint8_t *payload, size_t len, struct proto_result *ret);
int proto_decode_done(const uint8_t *payload, size_t len, uint32_t *ret_count);
int proto_decode_error(const uint8_t *payload, size_t len, uint32_t *ret_code,
		       char *message, size_t message_cap);
int proto_decode_rule(const uint8_t *payload, size_t len, struct proto_rule *ret);
int proto_decode_notice(const uint8_t *payload, size_t len, char *message, size_t message_cap);

/* The longest deadline a request of action may give (at-exec: PROTO_MAX_FOLLOW_MS). */
uint32_t proto_max_deadline_ms(unsigned action);

/* Names for humans and JSON; never NULL. */
const char *proto_action_name(unsigned action);        /* "guard" */
const char *proto_site_state_name(unsigned state);     /* "original" */
const char *proto_proc_state_name(unsigned state);     /* "guarded" */
const char *proto_risk_name(unsigned risk);            /* "at-risk" */
const char *proto_error_name(uint32_t code);           /* "busy", "ESRCH" */
const char *proto_error_text(uint32_t code);           /* one sentence */

/* Maps a daemon-internal negative errno/BTG code to the wire code. */
uint32_t proto_error_from_negative(int r);

/* The text for a negative errno or BTG code, as daemon functions return them. */
const char *proto_strerror(int r);

/*
 * Whether a wire error code says the daemon ran short of descriptors or
 * memory (EMFILE, ENFILE, ENOMEM): a fact about the daemon, never about
 * the process it was reading.  Such an answer may not be taken for "no
 * process", "not matched" or "OK" by anyone, daemon or client.
 */
static inline bool proto_error_is_shortage(uint32_t code)
{
	return code == EMFILE || code == ENFILE || code == ENOMEM;
}

/* The same of a daemon function's result: a negative errno or BTG code. */
static inline bool proto_shortage(int r)
{
	return r == -EMFILE || r == -ENFILE || r == -ENOMEM;
}

#endif
