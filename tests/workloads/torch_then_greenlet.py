#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""The at-risk rule's window, closed or not: greenlet imported after torch,
and a torch error raised inside a greenlet at once.

Usage: torch_then_greenlet.py [--hold]

The at-risk rule (btguardd.conf(5)) takes a process once it maps torch's
c10 and greenlet, at the sweep after the second: this program gives it no
time to.  It imports torch, then greenlet, prints "mapped T" (T: the
CLOCK_MONOTONIC seconds just after greenlet's import, system-wide, so a
benchmark can compare it with its own clock), and within a few
milliseconds raises a torch shape error inside greenlets resumed from
varying C stack depths (tests/workloads/torch_greenlet.py's greenlet
pattern: the first error after a greenlet's first resumption is the fatal
one, unguarded).  Unguarded it dies of SIGSEGV; guarded before the raise
(a rule that takes the interpreter at its exec), every error arrives as a
RuntimeError and it prints "errors N ok" and exits 0.

--hold: print "mapped T", then raise nothing and wait for stdin to close
(bench/node measures how long the at-risk rule takes to guard it).
"""

import sys
import time

import torch  # noqa: E402,F401  (the order is the point: torch first)
import greenlet  # noqa: E402,F401

MAPPED = time.monotonic()

# The same greenlet pattern and checks as the crash's own workload (a
# sibling module: nothing new is mapped by this import).
from torch_greenlet import Tally, run_greenlet  # noqa: E402

TASKS = 4
ROUNDS = 5


def main():
    print(f"mapped {MAPPED:.6f}", flush=True)
    if sys.argv[1:] == ["--hold"]:
        sys.stdin.read()
        return 0
    tally = Tally()
    started = time.monotonic()
    run_greenlet(tally, TASKS, ROUNDS)
    if tally.count != TASKS * ROUNDS:
        tally.problems.append(f"caught {tally.count} errors, expected {TASKS * ROUNDS}")
    for problem in tally.problems:
        print(f"torch_then_greenlet: {problem}", file=sys.stderr)
    if tally.problems:
        return 1
    print(f"raising began {(started - MAPPED) * 1000:.1f} ms after the mapping")
    print(f"errors {tally.count} ok", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
