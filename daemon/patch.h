/* SPDX-License-Identifier: MIT */
/*
 * The guard / unguard / status procedure for one process.  See the step
 * list at the top of patch.c.
 */
#ifndef BTGUARD_PATCH_H
#define BTGUARD_PATCH_H

#include <stdint.h>
#include <sys/types.h>

#include "../proto/proto.h"
#include "auth.h"

/* What pins the target: a pidfd and its start time, taken when the request arrived. */
struct patch_pin {
	int      pidfd;
	uint64_t starttime;
};

/*
 * Runs action (PROTO_ACTION_*) on pid for caller (already authorized for
 * pid itself; processes sharing its memory are authorized here).  Fills
 * res->error (0 or a wire code), state, sites, flags, pause_us, check_us
 * and message.  Returns 0 or the negative code also stored in res->error.
 */
int patch_run(const struct auth_caller *caller, pid_t pid, const struct patch_pin *pin,
	      unsigned action, uint32_t deadline_ms, struct proto_result *res);

#endif
