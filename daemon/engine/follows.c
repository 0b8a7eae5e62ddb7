// SPDX-License-Identifier: MIT
/*
 * The shares of the follow table (follows.h).  The uids holding slots are
 * few (each is a user with a launcher between fork and exec right now),
 * so they are kept in an unsorted array and scanned.
 */
#include <stdio.h>

#include "proto.h"
#include "follows.h"

static struct follows_uid *find_follow(struct follows *t, uid_t uid)
{
	for (size_t i = 0; i < t->nuids; i++)
		if (t->by[i].uid == uid)
			return &t->by[i];
	return NULL;
}

uint32_t follows_of(const struct follows *t, uid_t uid)
{
	for (size_t i = 0; i < t->nuids; i++)
		if (t->by[i].uid == uid)
			return t->by[i].n;
	return 0;
}

int follows_take(struct follows *t, uid_t uid, char *why, size_t why_len)
{
	struct follows_uid *u = find_follow(t, uid);
	uint32_t mine = u ? u->n : 0;

	if (t->n >= FOLLOWS_MAX) {
		snprintf(why, why_len, "the node's table of followed processes is full (%u)",
			 FOLLOWS_MAX);
		return -BTG_ERR_LIMIT;
	}
	if (uid != 0 && mine >= FOLLOWS_PER_UID) {
		snprintf(why, why_len,
			 "uid %u already follows %u processes, its share of the node's table",
			 (unsigned)uid, FOLLOWS_PER_UID);
		return -BTG_ERR_LIMIT;
	}
	if (uid != 0 && t->n >= FOLLOWS_MAX - FOLLOWS_ROOT_RESERVE) {
		snprintf(why, why_len,
			 "the node's table of followed processes is full but for root's reserve (%u of %u)",
			 FOLLOWS_ROOT_RESERVE, FOLLOWS_MAX);
		return -BTG_ERR_LIMIT;
	}
	if (!u) {
		/* Fewer uids than slots in use: there is always room for one more. */
		u = &t->by[t->nuids++];
		u->uid = uid;
		u->n = 0;
	}
	u->n++;
	t->n++;
	return 0;
}

void follows_put(struct follows *t, uid_t uid)
{
	struct follows_uid *u = find_follow(t, uid);

	if (!u || !u->n)
		return;
	t->n--;
	if (--u->n == 0)
		*u = t->by[--t->nuids];
}

uint32_t follows_hold_ms(uint64_t age_ms, uint32_t deadline_ms)
{
	uint64_t left = age_ms >= FOLLOWS_MAX_HOLD_MS ? 0 : FOLLOWS_MAX_HOLD_MS - age_ms;

	return (uint32_t)(left < deadline_ms ? left : deadline_ms);
}
