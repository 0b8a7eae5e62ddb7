# SPDX-License-Identifier: MIT
"""Signal frames a stack walk does not reach.

A thread held in a signal handler whose frame saved a PC inside the bytes
the guard changes must keep the daemon from writing: the thread resumes at
that PC when the handler returns.  The sigframe victim parks its worker in
such a handler, built without unwind tables, in every shape a walk gets
wrong (see tests/victims/sigframe.c).  The daemon must answer busy while
the thread is parked, write nothing, and succeed once it has left; the
victim must survive every step with the frames it should get.

A word on an ordinary thread's own stack that points into those bytes
(a return address would) must keep the daemon from writing too, also
when that stack was scanned on the daemon's scan worker, which takes
every thread past the first few of a large process.
"""

import os
import signal
import time

import pytest

from btg.paths import SETTLE_TIMEOUT
from btg.procfs import thread_problems
from btg.sites import Site, kept_instruction, park_points
from btg.victims import Lines

# Short: each busy answer waits out its whole deadline.
BUSY_DEADLINE_MS = 300

VARIANTS = [
    ("sigframe", []),
    ("sigframe", ["--zero-rbp"]),
    ("sigframe_fp", []),
    ("sigframe", ["--altstack"]),
    ("sigframe", ["--nested"]),
    ("sigframe_fp", ["--nested", "--altstack"]),
    ("sigframe", ["--nested", "--altstack", "--zero-rbp"]),
]


def expect(lines, prefix, timeout=SETTLE_TIMEOUT):
    """The victim's next line, which must start with prefix, split in words."""
    text = lines.next(timeout)
    if not text.startswith(prefix):
        pytest.fail(f"victim said {text!r}, wanted {prefix!r}")
    return text.split()


def tell(v, command):
    v.proc.stdin.write(command.encode() + b"\n")
    v.proc.stdin.flush()


def state_of(daemon, pid):
    return daemon.ctl("status", pid, check=0).results[0]["state"]


def expect_resumed(out, state):
    """The call the handler interrupted completed; a fresh one answers as state says."""
    _, seq, nframes = expect(out, "resumed")
    if state == "guarded":
        assert int(nframes) == 0, "guarded backtrace() returned frames"
    else:
        assert int(nframes) > 0, "unguarded backtrace() returned no frames"
    return seq


def park(v, out, at):
    tell(v, f"park {at}")
    return expect(out, "parked")[1]


FORMS = {"guard": ("original", "unguarded", "guarded"),
         "unguard": ("guarded", "guarded", "unguarded")}


@pytest.mark.parametrize("name,opts", VARIANTS, ids=[" ".join([n] + o) for n, o in VARIANTS])
def test_parked_signal_frame_blocks_the_write(daemon, victim, name, opts):
    """Parked at each instruction boundary strictly inside the bytes the
    write changes, in the form they hold: busy, nothing written, and the
    call completes once let go.  Where the change lies inside one
    instruction of the file (this glibc), the original holds no such
    boundary: the guard has nothing to wait for, and only the unguard
    (the guard's bytes hold three) can be busy."""
    v = victim(name, *opts, stdin=True)
    out = Lines(v.proc)
    site = Site(v.pid)
    refused = 0
    for action in ("guard", "unguard"):
        form, before, after = FORMS[action]
        inside, _, _ = park_points(site, getattr(site, form))
        if not inside:
            assert action == "guard" and kept_instruction(site) is not None, (action, form)
        for at in inside if name == "sigframe" and not opts else inside[:1]:
            seq = park(v, out, at)
            r = daemon.ctl("--deadline", BUSY_DEADLINE_MS, action, v.pid, check=1).results[0]
            assert r["error"] == "busy", (at, r)
            assert "inside the bytes to change" in r["message"], r
            assert state_of(daemon, v.pid) == before
            # The handler returns into the saved PC, in the bytes it was
            # interrupted in, and the call completes.
            tell(v, "release")
            assert expect_resumed(out, before) == seq
            v.assert_alive()
            refused += 1
        r = daemon.ctl(action, v.pid, check=0).results[0]
        assert r["ok"] and r["state"] == after, r
        assert thread_problems(v.pid) == []
        # A park in the bytes just written.
        new_inside, _, _ = park_points(site, getattr(site, FORMS["unguard" if action == "guard"
                                                                else "guard"][0]))
        for at in new_inside[:1]:
            park(v, out, at)
            tell(v, "release")
            expect_resumed(out, after)
            v.assert_alive()
    assert refused >= 1
    assert thread_problems(v.pid) == []


@pytest.mark.parametrize("name,opts", VARIANTS[:2], ids=[" ".join([n] + o) for n, o in VARIANTS[:2]])
def test_a_thread_at_the_first_byte_or_past_the_change_runs_the_new_bytes(daemon, victim, name,
                                                                         opts):
    """A thread interrupted at the first byte of the change (right after the
    first instruction the stub keeps, or at the instruction the change lies
    in, whose first byte it keeps) or, in the original, at the first
    instruction past it is no obstacle: written under it, it runs the new
    bytes (or, past them, the rest of the original) and returns."""
    v = victim(name, *opts, stdin=True)
    out = Lines(v.proc)
    site = Site(v.pid)
    for action in ("guard", "unguard"):
        form, before, after = FORMS[action]
        _, first, past = park_points(site, getattr(site, form))
        # Past the guard's bytes nothing runs: its ret came first.
        for at in (first, past) if action == "guard" else (first,):
            if state_of(daemon, v.pid) != before:
                back = "unguard" if action == "guard" else "guard"
                assert daemon.ctl(back, v.pid, check=0).results[0]["ok"]
            seq = park(v, out, at)
            r = daemon.ctl("--deadline", BUSY_DEADLINE_MS, action, v.pid, check=0).results[0]
            assert r["ok"] and r["state"] == after, (at, r)
            tell(v, "release")
            assert expect_resumed(out, after) == seq
            v.assert_alive()
            assert thread_problems(v.pid) == []


def holder_tid(pid):
    """The idle victim's thread named word-holder."""
    for tid in os.listdir(f"/proc/{pid}/task"):
        with open(f"/proc/{pid}/task/{tid}/comm") as f:
            if f.read().strip() == "word-holder":
                return int(tid)
    pytest.fail(f"victim {pid} has no word-holder thread")


def test_a_word_on_the_last_threads_stack_blocks_the_write(daemon, victim):
    # 48 threads: the holder, started last, is checked long after the
    # first few the daemon scans itself.
    v = victim("idle", 48, "--word-on-stack")
    tid = holder_tid(v.pid)
    for _ in range(2):
        r = daemon.ctl("--deadline", BUSY_DEADLINE_MS, "guard", v.pid, check=1).results[0]
        assert r["error"] == "busy", r
        assert f"thread {tid} has on its stack" in r["message"], r
        assert state_of(daemon, v.pid) == "unguarded"
    os.kill(v.pid, signal.SIGUSR1)
    end = time.monotonic() + SETTLE_TIMEOUT
    while True:
        r = daemon.ctl("guard", v.pid, check=None).results[0]
        if r["ok"] or time.monotonic() > end:
            break
        time.sleep(0.05)
    assert r["ok"] and r["state"] == "guarded", r
    v.assert_alive()
    assert thread_problems(v.pid) == []
