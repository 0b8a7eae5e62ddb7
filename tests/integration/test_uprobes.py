# SPDX-License-Identifier: MIT
"""btguard beside the kernel's uprobes on the bytes it guards.

A uprobe belongs to the file: the kernel writes its breakpoint over the
first instruction of backtrace() in the process, whatever is there, and on
a hit runs the file's first instruction and resumes after it; detaching
writes the file's bytes back.  The stub therefore follows the first
instruction (undoing it) instead of covering it, so both orders must leave
a process that keeps running with 0 frames while guarded and real frames
while not:

- a uprobe attached to a guarded process, hit by every thread, detached;
- guard and unguard with a uprobe attached, then detached;
- attaching and detaching racing guard and unguard, many times.

The uprobes are the kernel's own (perf_event_open, no BPF), filtered to the
victim so the rest of the machine is not probed.
"""

import os
import threading
import time

import pytest

from btg.daemon import guard_ok, one, unguard_ok
from btg.sites import Site
from btg.uprobes import BREAKPOINT, Uprobe, uprobes_work
from btg.victims import wait_behaviour

CYCLES = int(os.environ.get("BTGUARD_UPROBE_CYCLES", "20"))
RACE_SECONDS = float(os.environ.get("BTGUARD_UPROBE_RACE_S", "8"))

pytestmark = pytest.mark.skipif(uprobes_work() is not None, reason=str(uprobes_work()))


def with_breakpoint(form):
    return BREAKPOINT + form[len(BREAKPOINT):]


def wait_hits(probe, more_than, timeout=10.0):
    """The victim's threads ran into the uprobe: the kernel counted the hits."""
    deadline = time.monotonic() + timeout
    while probe.hits() <= more_than:
        assert time.monotonic() < deadline, f"the uprobe was never hit ({probe.hits()} hits)"
        time.sleep(0.01)


def libc_site_of(res):
    [s] = [s for s in res["sites"] if s["object"].endswith("/libc.so.6")]
    return s


def status(daemon, pid):
    res = one(daemon.ctl("status", pid, check=0), pid, "status")
    assert res["ok"] is True, res
    return res


def test_a_uprobe_comes_and_goes_on_a_guarded_process(daemon, victim):
    v = victim.bt_loop(4)
    site = Site(v.pid)
    guard_ok(daemon, v.pid)
    wait_behaviour(v, zero=True)
    for cycle in range(CYCLES):
        with Uprobe(v.pid, site.address) as probe:
            assert probe.in_place(), f"cycle {cycle}: no breakpoint written"
            assert site.now() == with_breakpoint(site.guarded), site.now().hex()
            wait_hits(probe, 100)
            v.assert_alive()
            if cycle == 0:
                res = status(daemon, v.pid)
                assert res["state"] == "guarded", res
                assert libc_site_of(res)["state"] == "guarded", res
                assert libc_site_of(res)["breakpoint"] is True, res
                # Every call that ran into the breakpoint still returned 0 frames.
                wait_behaviour(v, zero=True)
        # The kernel put the file's first byte back: the stub is whole.
        assert site.classify() == "guarded", f"cycle {cycle}: {site.classify()}"
        v.assert_alive()
    res = status(daemon, v.pid)
    assert res["state"] == "guarded" and libc_site_of(res)["breakpoint"] is False, res
    wait_behaviour(v, zero=True)
    unguard_ok(daemon, v.pid)
    assert site.classify() == "original"
    wait_behaviour(v, zero=False)


def test_guard_and_unguard_with_a_uprobe_attached(daemon, victim):
    v = victim.bt_loop(4)
    site = Site(v.pid)
    with Uprobe(v.pid, site.address) as probe:
        wait_hits(probe, 100)
        res = status(daemon, v.pid)
        assert res["state"] == "unguarded", res
        assert libc_site_of(res)["state"] == "original" and libc_site_of(res)["breakpoint"], res
        # Not refused as foreign: the stub goes after the probed instruction.
        guard_ok(daemon, v.pid)
        assert site.now() == with_breakpoint(site.guarded), site.now().hex()
        hits = probe.hits()
        wait_behaviour(v, zero=True)
        wait_hits(probe, hits)
    # Detached: the kernel's write back leaves our stub as it was.
    assert site.classify() == "guarded", site.classify()
    wait_behaviour(v, zero=True)

    with Uprobe(v.pid, site.address) as probe:
        wait_hits(probe, 100)
        unguard_ok(daemon, v.pid)
        assert site.now() == with_breakpoint(site.original), site.now().hex()
        wait_behaviour(v, zero=False)
    assert site.classify() == "original", site.classify()
    wait_behaviour(v, zero=False)
    v.assert_alive()


def test_uprobes_racing_guard_and_unguard(daemon, victim):
    """The kernel's writes (attach, detach) and ours (guard, unguard) at any
    moment relative to each other, for a while: the process never dies and
    its bytes are always one of the legal forms."""
    v = victim.bt_loop(4)
    site = Site(v.pid)
    legal = {site.original, site.guarded,
             with_breakpoint(site.original), with_breakpoint(site.guarded)}
    stop = threading.Event()
    seen = []
    errors = []

    def prober():
        try:
            while not stop.is_set():
                with Uprobe(v.pid, site.address):
                    seen.append(site.now())
                    time.sleep(0.002)
                seen.append(site.now())
        except Exception as e:      # noqa: BLE001 -- reported below
            errors.append(e)

    t = threading.Thread(target=prober)
    t.start()
    cycles = 0
    try:
        deadline = time.monotonic() + RACE_SECONDS
        while time.monotonic() < deadline:
            guard_ok(daemon, v.pid)
            v.assert_alive()
            unguard_ok(daemon, v.pid)
            v.assert_alive()
            cycles += 1
    finally:
        stop.set()
        t.join()
    assert not errors, errors
    assert cycles >= 5 and len(seen) >= 10, (cycles, len(seen))
    torn = [b.hex() for b in seen if b not in legal]
    assert not torn, f"torn bytes seen: {torn[:5]}"
    assert site.classify() == "original", site.classify()
    wait_behaviour(v, zero=False)
    guard_ok(daemon, v.pid)
    wait_behaviour(v, zero=True)
