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

import torch          # noqa: E402  (the order is the point: torch first)
import greenlet       # noqa: E402

MAPPED = time.monotonic()

SHAPE_ERROR = "mat1 and mat2 shapes cannot be multiplied"
TASKS = 4
ROUNDS = 5


def shape_error(problems):
    try:
        torch.mm(torch.zeros(2, 3), torch.zeros(4, 5))
    except RuntimeError as e:
        if SHAPE_ERROR not in str(e):
            problems.append(f"unexpected message: {e}")
        return 1
    problems.append("torch.mm accepted mismatched shapes")
    return 0


def main():
    print(f"mapped {MAPPED:.6f}", flush=True)
    if sys.argv[1:] == ["--hold"]:
        sys.stdin.read()
        return 0
    problems = []
    count = 0
    started = time.monotonic()

    def worker():
        nonlocal count
        for _ in range(ROUNDS):
            count += shape_error(problems)
            greenlet.getcurrent().parent.switch()

    def switch_at_depth(depth, g):
        # Each map() is a C frame between this switch and the previous one.
        if depth:
            return list(map(lambda _: switch_at_depth(depth - 1, g), [0]))
        return g.switch()

    workers = [greenlet.greenlet(worker) for _ in range(TASKS)]
    for r in range(ROUNDS + 1):
        for i, g in enumerate(workers):
            if not g.dead:
                switch_at_depth((r * 3 + i) % 7, g)
    if count != TASKS * ROUNDS:
        problems.append(f"caught {count} errors, expected {TASKS * ROUNDS}")
    for problem in problems:
        print(f"torch_then_greenlet: {problem}", file=sys.stderr)
    if problems:
        return 1
    print(f"raising began {(started - MAPPED) * 1000:.1f} ms after the mapping")
    print(f"errors {count} ok", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
