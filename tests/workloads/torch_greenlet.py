#!/usr/bin/python3
# SPDX-License-Identifier: MIT
"""The real crash btguard exists for: torch shape errors inside greenlets.

Usage: torch_greenlet.py [--pause-file PATH] [--threads N]
                         [--mode gevent|greenlet|all] [--tasks N] [--rounds N]

Every torch error builds a c10::Error, whose constructor records a stack
trace with glibc backtrace().  Inside a greenlet that walk leaves the
greenlet's stack slice through the switch frame where it first ran; once
the greenlet has been resumed from another C call path, the words above
the slice are stale and libgcc faults on them (see tests/victims/coro_crash.c
for the mechanism in plain C).  Unguarded, this program dies of SIGSEGV on
the first shape error raised after a greenlet's first resumption; with
backtrace() guarded to return 0, every error arrives as a Python
RuntimeError with torch's message intact.

Two patterns, both run by --mode all (the default), gevent first:
  gevent:   --tasks tasks, each raising and catching a `torch.mm` shape
            error, then gevent.sleep(0.0001), --rounds times (the hub
            resumes each task from its event loop, not where it started);
  greenlet: --tasks plain greenlets switched into from varying C stack
            depths (nested map() calls, each one a C frame), --rounds times.

--threads N calls torch.set_num_threads(N) and runs a matmul first, so the
intra-op thread pools exist (dozens of threads for a guard to stop).
--pause-file PATH: after all imports and set-up, print "paused" and wait
until PATH exists.  At the end it prints "cpp frames MIN MAX" (the C++
frames torch put in the messages, TORCH_SHOW_CPP_STACKTRACES=1), the
first message's "cpp first frame #0: ..." when it has one, and "errors N
ok" (N RuntimeErrors, each checked), and exits 0; a wrong count or
message exits 1.
"""

import argparse
import os
import sys
import time

import greenlet
import torch

SHAPE_ERROR = "mat1 and mat2 shapes cannot be multiplied"


class Tally:
    """What the shape errors looked like, checked when the run ends."""

    def __init__(self):
        self.count = 0
        self.first = None
        self.problems = []
        self.cpp_frames = []      # C++ frames each message carries
        self.cpp_first = None     # the first message's frame #0

    def shape_error(self):
        """Raises one torch shape error and catches it as RuntimeError."""
        try:
            torch.mm(torch.zeros(2, 3), torch.zeros(4, 5))
        except RuntimeError as e:
            msg = str(e)
            if SHAPE_ERROR not in msg:
                self.problems.append(f"unexpected message: {msg!r}")
            self.count += 1
            if self.first is None:
                self.first = f"{type(e).__name__}: {msg.splitlines()[0]}"
            frames = [line for line in msg.splitlines() if line.startswith("frame #")]
            self.cpp_frames.append(len(frames))
            if self.cpp_first is None and frames:
                self.cpp_first = frames[0]
            return
        self.problems.append("torch.mm accepted mismatched shapes")


def run_gevent(tally, tasks, rounds):
    # Imported here: torch_then_greenlet.py borrows run_greenlet() and
    # must not spend gevent's import between greenlet's and its first error.
    import gevent

    def task():
        for _ in range(rounds):
            tally.shape_error()
            gevent.sleep(0.0001)

    jobs = [gevent.spawn(task) for _ in range(tasks)]
    gevent.joinall(jobs)
    for job in jobs:
        if not job.successful():
            tally.problems.append(f"gevent task failed: {job.exception!r}")


def run_greenlet(tally, tasks, rounds):
    def worker():
        for _ in range(rounds):
            tally.shape_error()
            greenlet.getcurrent().parent.switch()

    def switch_at_depth(depth, g):
        # Each map() is a C frame between this switch and the previous one.
        if depth:
            return list(map(lambda _: switch_at_depth(depth - 1, g), [0]))
        return g.switch()

    workers = [greenlet.greenlet(worker) for _ in range(tasks)]
    for r in range(rounds + 1):
        for i, g in enumerate(workers):
            if not g.dead:
                switch_at_depth((r * 3 + i) % 7, g)
    if not all(g.dead for g in workers):
        tally.problems.append("a greenlet did not finish")


def start_threads(n):
    torch.set_num_threads(n)
    a = torch.ones(256, 256)
    if float((a @ a)[0, 0]) != 256.0:
        sys.exit("torch_greenlet: matmul gave a wrong answer")


def wait_for(path):
    print("paused", flush=True)
    while not os.path.exists(path):
        time.sleep(0.01)


def main():
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--pause-file")
    p.add_argument("--threads", type=int, default=0)
    p.add_argument("--mode", choices=("gevent", "greenlet", "all"), default="all")
    p.add_argument("--tasks", type=int, default=4)
    p.add_argument("--rounds", type=int, default=5)
    args = p.parse_args()

    if args.threads:
        start_threads(args.threads)
    if args.pause_file:
        wait_for(args.pause_file)

    tally = Tally()
    expected = 0
    if args.mode in ("gevent", "all"):
        run_gevent(tally, args.tasks, args.rounds)
        expected += args.tasks * args.rounds
    if args.mode in ("greenlet", "all"):
        run_greenlet(tally, args.tasks, args.rounds)
        expected += args.tasks * args.rounds

    if tally.count != expected:
        tally.problems.append(f"caught {tally.count} errors, expected {expected}")
    for problem in tally.problems:
        print(f"torch_greenlet: {problem}", file=sys.stderr)
    if tally.problems:
        return 1
    print(f"first {tally.first}")
    # With TORCH_SHOW_CPP_STACKTRACES=1, torch 1.x's messages carry the C++
    # frames backtrace() gave c10::Error: none under the empty stub.
    print(f"cpp frames {min(tally.cpp_frames)} {max(tally.cpp_frames)}")
    if tally.cpp_first:
        print(f"cpp first {tally.cpp_first}")
    print(f"errors {tally.count} ok", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
