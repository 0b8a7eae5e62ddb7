// SPDX-License-Identifier: MIT
/*
 * The processes the policy's sweep asks about again (retry.h): a small
 * table by PID, scanned (at most MAX_RETRY entries, and only when an
 * answer comes or the sweep meets a process).
 */
#include "proto.h"
#include "retry.h"

struct retry *retry_find(struct retries *rs, pid_t pid)
{
	for (size_t i = 0; i < rs->n; i++)
		if (rs->v[i].pid == pid)
			return &rs->v[i];
	return NULL;
}

void retry_drop(struct retries *rs, struct retry *r)
{
	*r = rs->v[--rs->n];
}

void retry_add(struct retries *rs, pid_t pid, unsigned left)
{
	struct retry *r = retry_find(rs, pid);

	if (r) {
		r->due = true;
		return;
	}
	if (rs->n == MAX_RETRY)
		return;   /* it waits for a change of its mappings instead */
	rs->v[rs->n++] = (struct retry){ .pid = pid, .left = left, .short_left = SHORT_RETRIES,
					 .due = true };
}

static bool worth_retrying(uint32_t err)
{
	/* Short of descriptors or memory ourselves: the process may be fine. */
	return err == BTG_ERR_BUSY || err == BTG_ERR_STOP || err == BTG_ERR_LIMIT ||
	       proto_error_is_shortage(err) || err == BTG_ERR_SHARED;
}

void retry_answered(struct retries *rs, pid_t pid, uint32_t err)
{
	struct retry *r = retry_find(rs, pid);
	bool ours = proto_error_is_shortage(err);

	if (err == BTG_OK || !worth_retrying(err) || (r && (ours ? r->short_left : r->left) == 0)) {
		if (r)
			retry_drop(rs, r);
	} else if (r) {
		if (ours)
			r->short_left--;
		else
			r->left--;
		r->due = true;
	} else {
		retry_add(rs, pid, ours ? RETRIES : RETRIES - 1);
	}
}
