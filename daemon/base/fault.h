/* SPDX-License-Identifier: MIT */
/*
 * Fault injection for the ptrace layer, compiled into the test build only
 * (make FAULTS=1, build/faults/btguardd).  The tests use it to make the
 * safety path take the branches a healthy kernel never takes: a poke that
 * fails, a read-back that differs, a seize or detach that fails, a world
 * held long enough to send it signals.
 *
 * BTGUARD_FAULTS in the environment lists what to inject, comma separated:
 *   poke=N         the Nth PTRACE_POKETEXT since start fails with EIO
 *   peek-differ=N  the Nth PTRACE_PEEKTEXT returns the word with its low byte flipped
 *   seize=N        the Nth PTRACE_SEIZE fails with EIO
 *   detach=N       the Nth PTRACE_DETACH fails with EIO
 *   hold-ms=M      every stopped world is held M ms before it is checked
 *   seize-hold=N, seize-hold-ms=M
 *                  the daemon sleeps M ms before its Nth PTRACE_SEIZE (the
 *                  earlier ones done): a window for the target to exec
 *   interrupt-hold=N, interrupt-hold-ms=M
 *                  the daemon sleeps M ms before its Nth PTRACE_INTERRUPT: that
 *                  thread is seized and not yet told to stop, a window for it
 *                  to take a signal (a signal-delivery-stop)
 *   kcmp=N         the Nth kcmp(KCMP_VM) (vmshare.c's comparison of two
 *                  processes' memory) fails with EIO
 *   no-kthread-line=1
 *                  status files read as if the kernel wrote no "Kthread:"
 *                  line (older kernels do not write it): the kernel-thread
 *                  flag must then come from stat
 * The production build has none of this: every hook is an empty inline.
 */
#ifndef BTGUARD_FAULT_H
#define BTGUARD_FAULT_H

#include <stdbool.h>
#include <stdint.h>
#include <sys/types.h>

#ifdef BTGUARD_FAULTS
/* An injected -errno for this request, or 0. */
int fault_before_ptrace(int request);
/* May change a word PTRACE_PEEKTEXT read. */
void fault_after_peek(uint64_t *word);
/* Sleeps while the world is stopped, if asked to. */
void fault_hold_world(void);
/* True when status files are to be read as if they had no "Kthread:" line. */
bool fault_no_kthread_line(void);
/* An injected -errno for this kcmp(), or 0. */
int fault_before_kcmp(void);
#else
static inline int fault_before_ptrace(int request) { (void)request; return 0; }
static inline void fault_after_peek(uint64_t *word) { (void)word; }
static inline void fault_hold_world(void) { }
static inline bool fault_no_kthread_line(void) { return false; }
static inline int fault_before_kcmp(void) { return 0; }
#endif

#endif
