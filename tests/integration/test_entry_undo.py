# SPDX-License-Identifier: MIT
"""A guard that leaves a function's first instruction in place and undoes
it (daemon/arch/x86_64/arch_stub.h, arch_entry_undo) must hand the caller
back every callee-saved register as it was: rbx, rbp, r12-r15 and rsp.

The victims rex_push_bp and rex_push_bx (tests/victims/regsaved.h) have a
backtrace() of their own that begins with a REX-prefixed push of a
callee-saved register, "40 55" (push %rbp) and "48 53" (push %rbx), which
only looks like "41 5x" (push %r8-%r15).  They call it nonstop with known
values in those registers and count every call after which one differed;
the daemon finds their definition beside libc's and guards both.  Each
call that starts once the guard is in must return 0 and keep every
register; the entry must hold the stub itself (no undo is known for these
pushes), and unguarded everything is as before.
"""

import collections
import os
import time

import pytest

from btg.daemon import guard_ok, unguard_ok
from btg.paths import REPORT_TIMEOUT
from btg.procfs import read_mem
from btg.sites import STUB, sites_of

CALLS = 20000       # calls that must all have started after a change

Report = collections.namedtuple("Report", "calls zero bad first")


def read_report(path):
    try:
        parts = open(path).read().split()
    except FileNotFoundError:
        return None
    if len(parts) != 8 or parts[0::2] != ["calls", "zero", "bad", "first"]:
        return None
    return Report(int(parts[1]), int(parts[3]), int(parts[5]), parts[7])


def wait_report(v, pred, what):
    deadline = time.monotonic() + REPORT_TIMEOUT
    last = None
    while time.monotonic() < deadline:
        v.assert_alive()
        last = read_report(v.report) or last
        if last is not None and pred(last):
            return last
        time.sleep(0.02)
    pytest.fail(f"timed out waiting for {what}; last report: {last}")


def calls_after(v, base):
    """A report of CALLS more calls than base, all started after base was read
    (reports are 50 ms apart: the next one after a wait of two is newer)."""
    time.sleep(0.12)
    start = wait_report(v, lambda r: r.calls > base.calls, "a newer report")
    return start, wait_report(v, lambda r: r.calls >= start.calls + CALLS,
                              f"{CALLS} more calls")


@pytest.mark.parametrize("name,entry", [("rex_push_bp", b"\x40\x55"),
                                        ("rex_push_bx", b"\x48\x53")])
def test_a_guard_after_a_rex_prefixed_push_keeps_every_callee_saved_register(
        daemon, victim, name, entry):
    v = victim(name, report=True)
    exe = str(victim.path(name))
    before = wait_report(v, lambda r: r.calls > 0, "a first report")
    assert before.zero == 0 and before.bad == 0, before

    res = guard_ok(daemon, v.pid, nsites=2)
    sites = sites_of(res)
    own = [a for o, a in sites.items() if os.path.realpath(o) == os.path.realpath(exe)]
    assert len(own) == 1, sites
    start, end = calls_after(v, read_report(v.report))
    assert end.bad == 0 and end.first == "-", \
        f"a callee-saved register came back changed from the guarded backtrace(): {end}"
    assert end.zero - start.zero == end.calls - start.calls, (start, end)
    # No undo is known for this push: the stub covers the entry.
    assert read_mem(v.pid, own[0], len(STUB)) == STUB, read_mem(v.pid, own[0], 8).hex()

    unguard_ok(daemon, v.pid)
    assert read_mem(v.pid, own[0], len(entry)) == entry
    start, end = calls_after(v, read_report(v.report))
    assert end.zero == start.zero, (start, end)
    assert end.bad == 0 and end.first == "-", end
