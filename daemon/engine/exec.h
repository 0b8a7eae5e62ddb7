/* SPDX-License-Identifier: MIT */
/*
 * Guarding a process from the first instruction of its next program
 * (btguardctl guard --at-exec, btguardctl run): follow it through its
 * exec, system call by system call, until its loader has mapped an object
 * that defines backtrace(), guard that at the system call, and let go.
 * The procedure is at the top of exec.c.
 */
#ifndef BTGUARD_EXEC_H
#define BTGUARD_EXEC_H

#include <stdint.h>
#include <sys/types.h>

#include "proto.h"
#include "auth.h"
#include "patch.h"

/* One process being followed; between two steps it is traced, never written. */
struct exec_job;

/* exec_step(): call again at *ret_wake_ms; EXEC_ARMED: send res as the first RESULT first. */
#define EXEC_AGAIN 1
#define EXEC_ARMED 2

/*
 * How long the loader may take, from the exec to the first object with
 * backtrace(), and how many of its system calls: a program that maps none
 * by then is let go unguarded (no-site).  glibc's loader makes about 30
 * calls before libc is mapped.
 */
#define EXEC_LOADER_MS    10000u
#define EXEC_LOADER_CALLS 4096u

/*
 * Seizes pid (authorized for caller, pinned by pin, its only task) and
 * interrupts it; the exec is waited for until deadline_ms (0: the
 * default) has passed, and never past FOLLOWS_MAX_HOLD_MS after the
 * process started.  The job holds one of caller's follow slots until
 * exec_end() (follows.h): -BTG_ERR_LIMIT, saying which limit, when none
 * is left to it.  res is written until the job ends.  Returns 0 with
 * *reterr_job set (call exec_step()), or the negative code also in res.
 */
int exec_begin(const struct auth_caller *caller, pid_t pid, const struct patch_pin *pin,
	       bool walk, uint32_t deadline_ms, struct proto_result *res,
	       struct exec_job **reterr_job);

/*
 * Handles what the process did since the last step, a bounded piece of
 * work (a few milliseconds at most).  EXEC_ARMED once it is followed (res says
 * so: send it), EXEC_AGAIN to be called again at *ret_wake_ms; else the
 * answer is in res and the process is let go: 0 or the negative code.
 */
int exec_step(struct exec_job *j, uint64_t *ret_wake_ms);

/* Lets the process go and answers err, why instead. */
int exec_cancel(struct exec_job *j, int err, const char *why);

/* Frees j (NULL is fine); the process must have been let go (an answer). */
void exec_end(struct exec_job *j);

#endif
