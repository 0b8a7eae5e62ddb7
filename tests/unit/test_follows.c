// SPDX-License-Identifier: MIT
/*
 * Unit tests for follows.c: the follow table's shares.  A non-root uid
 * stops at its share, whatever is left; the non-root uids together stop
 * short of root's reserve, those already following some as well as new
 * ones; root fills the whole table; a slot given back is free again; and
 * no follow lasts past FOLLOWS_MAX_HOLD_MS from its process's start,
 * however it is asked for again.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "follows.h"

static struct follows *fresh(void)
{
	struct follows *t = calloc(1, sizeof(*t));

	assert_non_null(t);
	return t;
}

static int take(struct follows *t, uid_t uid, char *why)
{
	return follows_take(t, uid, why, PROTO_MAX_MESSAGE + 1);
}

static void a_user_stops_at_its_share(void **state)
{
	struct follows *t = fresh();
	char why[PROTO_MAX_MESSAGE + 1];

	(void)state;
	for (uint32_t i = 0; i < FOLLOWS_PER_UID; i++)
		assert_int_equal(take(t, 1000, why), 0);
	assert_int_equal(take(t, 1000, why), -BTG_ERR_LIMIT);
	assert_non_null(strstr(why, "share"));
	assert_int_equal(follows_of(t, 1000), FOLLOWS_PER_UID);
	/* Everybody else is untouched by it. */
	assert_int_equal(take(t, 1001, why), 0);
	assert_int_equal(take(t, 0, why), 0);
	/* One given back: the user may take one again. */
	follows_put(t, 1000);
	assert_int_equal(take(t, 1000, why), 0);
	assert_int_equal(t->n, FOLLOWS_PER_UID + 2);
	free(t);
}

static void users_together_leave_roots_reserve(void **state)
{
	struct follows *t = fresh();
	char why[PROTO_MAX_MESSAGE + 1];
	uid_t uid = 2000;

	(void)state;
	for (uint32_t i = 0; i < FOLLOWS_MAX - FOLLOWS_ROOT_RESERVE; i++) {
		if (follows_of(t, uid) == FOLLOWS_PER_UID)
			uid++;
		assert_int_equal(take(t, uid, why), 0);
	}
	assert_int_equal(take(t, uid + 1, why), -BTG_ERR_LIMIT);
	assert_non_null(strstr(why, "root's reserve"));
	for (uint32_t i = 0; i < FOLLOWS_ROOT_RESERVE; i++)
		assert_int_equal(take(t, 0, why), 0);
	assert_int_equal(take(t, 0, why), -BTG_ERR_LIMIT);
	assert_non_null(strstr(why, "table"));
	assert_int_equal(t->n, FOLLOWS_MAX);
	free(t);
}

/*
 * Root's reserve holds against every user, also one that already follows
 * processes and is below its share: the users' slots are counted together.
 */
static void roots_reserve_holds_against_users_below_their_share(void **state)
{
	struct follows *t = fresh();
	char why[PROTO_MAX_MESSAGE + 1];
	uint32_t per = FOLLOWS_PER_UID / 2;
	uid_t uid = 3000;

	(void)state;
	/* Users each holding half their share fill all but root's reserve. */
	for (uint32_t i = 0; i < FOLLOWS_MAX - FOLLOWS_ROOT_RESERVE; i++) {
		if (follows_of(t, uid) == per)
			uid++;
		assert_int_equal(take(t, uid, why), 0);
	}
	/* Each of them, and the last one with room in its share, is refused. */
	for (uid_t u = 3000; u <= uid; u++) {
		assert_true(follows_of(t, u) < FOLLOWS_PER_UID);
		assert_int_equal(take(t, u, why), -BTG_ERR_LIMIT);
		assert_non_null(strstr(why, "root's reserve"));
	}
	assert_int_equal(t->n, FOLLOWS_MAX - FOLLOWS_ROOT_RESERVE);
	for (uint32_t i = 0; i < FOLLOWS_ROOT_RESERVE; i++)
		assert_int_equal(take(t, 0, why), 0);
	assert_int_equal(t->n, FOLLOWS_MAX);
	free(t);
}

static void root_may_fill_the_table(void **state)
{
	struct follows *t = fresh();
	char why[PROTO_MAX_MESSAGE + 1];

	(void)state;
	for (uint32_t i = 0; i < FOLLOWS_MAX; i++)
		assert_int_equal(take(t, 0, why), 0);
	assert_int_equal(take(t, 0, why), -BTG_ERR_LIMIT);
	assert_int_equal(take(t, 1000, why), -BTG_ERR_LIMIT);
	for (uint32_t i = 0; i < FOLLOWS_MAX; i++)
		follows_put(t, 0);
	assert_int_equal(t->n, 0);
	assert_int_equal(t->nuids, 0);
	/* A put of a slot never taken changes nothing. */
	follows_put(t, 1000);
	assert_int_equal(t->n, 0);
	free(t);
}

static void uids_come_and_go(void **state)
{
	struct follows *t = fresh();
	char why[PROTO_MAX_MESSAGE + 1];

	(void)state;
	for (uid_t u = 1; u <= 5; u++)
		for (uid_t i = 0; i < u; i++)
			assert_int_equal(take(t, u, why), 0);
	follows_put(t, 1);
	follows_put(t, 3);
	assert_int_equal(t->nuids, 4);
	for (uid_t u = 2; u <= 5; u++)
		assert_int_equal(follows_of(t, u), u == 3 ? 2u : u);
	assert_int_equal(t->n, 15 - 2);
	free(t);
}

static void a_follow_ends_in_time_from_its_process_start(void **state)
{
	(void)state;
	assert_int_equal(follows_hold_ms(0, 2000), 2000);
	assert_int_equal(follows_hold_ms(0, PROTO_MAX_FOLLOW_MS), FOLLOWS_MAX_HOLD_MS);
	assert_int_equal(follows_hold_ms(FOLLOWS_MAX_HOLD_MS - 500, 2000), 500);
	/* Renewed after the bound: nothing left, however short the ask. */
	assert_int_equal(follows_hold_ms(FOLLOWS_MAX_HOLD_MS, 1), 0);
	assert_int_equal(follows_hold_ms(UINT64_MAX, 60000), 0);
}

int main(void)
{
	const struct CMUnitTest tests[] = {
		cmocka_unit_test(a_user_stops_at_its_share),
		cmocka_unit_test(users_together_leave_roots_reserve),
		cmocka_unit_test(roots_reserve_holds_against_users_below_their_share),
		cmocka_unit_test(root_may_fill_the_table),
		cmocka_unit_test(uids_come_and_go),
		cmocka_unit_test(a_follow_ends_in_time_from_its_process_start),
	};
	return cmocka_run_group_tests(tests, NULL, NULL);
}
