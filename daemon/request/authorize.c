// SPDX-License-Identifier: MIT
/*
 * Who may act on what: a caller's rights on one target, as auth.c's rule
 * decides them, and what a refused caller is told.  action_expand.c asks
 * at arrival (while the target is pinned), action.c again at the turn.
 *
 * What a caller may learn (SECURITY.md, "What a refused caller learns"):
 * a PID it may not act on is answered "denied: you may not act on it" and
 * nothing more; if the caller's own /proc hides such processes
 * (hidepid=invisible), exactly as if no process had that PID.
 */
#include "authorize.h"
#include "log.h"
#include "proto.h"

/*
 * The caller may not act on the target: what it is told.  The reason in
 * full (owner, ids, dumpability) goes to the log only.
 */
static int refuse_target(const struct authorize_who *who, int r, const char *detail)
{
	log_msg(LOG_DEBUG, "PID %d (ours %d) refused: %s", (int)who->pid, (int)who->ours, detail);
	return who->hidden ? -BTG_ERR_NOPROC : r;
}

int authorize_judge(const struct auth_caller *caller, const struct authorize_who *who,
		    const struct auth_target *facts)
{
	char detail[PROTO_MAX_MESSAGE + 1];
	int r = auth_check(caller, facts, detail, sizeof(detail));

	return r < 0 ? refuse_target(who, r, detail) : 0;
}

int authorize(const struct auth_caller *caller, const struct authorize_who *who, pid_t pid,
	      struct auth_target *ret)
{
	int r = auth_read_target(pid, ret);

	/* The daemon short of descriptors or memory: that, never "no process". */
	if (r < 0)
		return proto_shortage(r) ? r : -BTG_ERR_NOPROC;
	return authorize_judge(caller, who, ret);
}
