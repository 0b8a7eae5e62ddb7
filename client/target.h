/* SPDX-License-Identifier: MIT */
/*
 * The selectors btguardctl resolves on this node before it sends: --unit
 * (systemd names the unit's cgroup) and --slurm-job (Slurm names the job's
 * processes, whose cgroup, or else whose PIDs, are sent).  The daemon
 * sees only a cgroup selector or a PID list.
 */
#ifndef BTGUARD_CLIENT_TARGET_H
#define BTGUARD_CLIENT_TARGET_H

#include "options.h"

/*
 * Resolves o->unit and o->slurm_arg, when given, into o->req: a cgroup
 * selector, or a Slurm job's PIDs.  Returns 0, or the exit status to end
 * with, its reason already said (status_fail); nothing was sent.
 */
int target_resolve(struct options *o);

#endif
