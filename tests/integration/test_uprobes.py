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
- attaching and detaching racing guard and unguard, many times;
- a uprobe at an instruction of the file that starts inside the bytes the
  guard changes (on Debian 12's glibc, +1 and +4): attached before the
  guard, the guard writes over its breakpoint and the process lives on
  guarded; attached after it (to a job-stopped process: hit, it would
  crash it, SECURITY.md), status says "torn", and again once the probe's
  removal wrote the file's byte back, at critical level in the log, and
  guard repairs it.

The uprobes are the kernel's own (perf_event_open, no BPF), filtered to the
victim so the rest of the machine is not probed.
"""

import os
import signal
import threading
import time

import pytest

from btg.daemon import guard_ok, one, running_daemon, unguard_ok
from btg.procfs import task_states, wait_for, wait_threads_running
from btg.sites import Site, change_range, instruction_starts
from btg.uprobes import BREAKPOINT, Uprobe, uprobes_work
from btg.victims import victim_path, wait_behaviour

CYCLES = int(os.environ.get("BTGUARD_UPROBE_CYCLES", "20"))
RACE_SECONDS = float(os.environ.get("BTGUARD_UPROBE_RACE_S", "8"))
INSIDE_CYCLES = int(os.environ.get("BTGUARD_UPROBE_INSIDE_CYCLES", "10"))

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


def starts_past_the_entry(site):
    """The run-time addresses of the file's instructions after the first
    in the bytes the tests compare, the first ones in the bytes the guard
    changes, then those it writes again as they are (the rest of its word)
    and after: everywhere a uprobe's tool may put one near the guard."""
    lo, hi = change_range(site)
    starts = [a for a in instruction_starts(site.pid, site.address, site.LEN)
              if a > site.address]
    assert starts and starts[0] == site.address + lo, (lo, hi, starts)
    assert any(a >= site.address + hi for a in starts), (lo, hi, starts)
    return starts


def first_change(now, original, skip):
    """The offset of the first byte that differs from the file's, but at skip."""
    return next(i for i in range(len(now)) if i != skip and now[i] != original[i])


def job_stop(v):
    os.kill(v.pid, signal.SIGSTOP)
    wait_for(lambda: all(s == ("T", 0) for s in task_states(v.pid).values()),
             "every thread job-stopped", timeout=10)


def job_continue(v):
    os.kill(v.pid, signal.SIGCONT)
    wait_threads_running(v.pid)


def job_stop_clear_of_the_stub(daemon, v):
    """Job-stops the guarded victim with no thread inside the bytes the
    guard changes (a thread stopped there would make the repair busy: it
    would run the torn bytes, as any other would): the daemon's own check
    says so, by an unguard and a guard that write."""
    for _ in range(20):
        job_stop(v)
        res = one(daemon.ctl("--deadline", 200, "unguard", v.pid, check=None), v.pid, "unguard")
        if res["ok"]:
            guard_ok(daemon, v.pid)
            return
        assert res["error"] == "busy", res
        job_continue(v)
        time.sleep(0.01)
    pytest.fail("every stop left a thread inside the stub")


def test_a_uprobe_near_the_guard_before_it(daemon, victim):
    """Attached first, while 4 threads call backtrace() nonstop, at each
    instruction of the file after the first, within the bytes the guard
    would change or write: the guard re-plans around the probe, keeping the
    probed instruction and putting its bytes after it (or, for a probe past
    them, changes the usual bytes before it), so the probe stays, fires
    where the guarded function still reaches it, every call returns 0
    frames, and the probe's removal leaves the guard whole.  (Writing the
    usual bytes over a probe inside them is refused as busy again and
    again: the kernel stops a thread right after replaying the probed
    instruction, where the usual stub would crash it.)"""
    v = victim.bt_loop(4)
    site = Site(v.pid)
    for cycle in range(INSIDE_CYCLES):
        for at in starts_past_the_entry(site):
            off = at - site.address
            with Uprobe(v.pid, at) as probe:
                assert probe.in_place(), f"cycle {cycle}, +{off}: no breakpoint"
                # Unguarded, a hit replays the file's instruction: the file's own code.
                wait_hits(probe, 20)
                res = status(daemon, v.pid)
                s = libc_site_of(res)
                assert res["state"] == "unguarded" and s["state"] == "original", res
                assert s["breakpoint"] is True, res
                res = guard_ok(daemon, v.pid)
                assert libc_site_of(res)["breakpoint"] is True, res
                now = site.now()
                assert now[off] == BREAKPOINT[0], f"+{off}: the probe was written over: {now.hex()}"
                reached = first_change(now, site.original, off) > off
                hits = probe.hits()
                if cycle == 0:
                    wait_behaviour(v, zero=True)
                if reached:
                    wait_hits(probe, hits)
                v.assert_alive()
            now = site.now()
            assert now[off] == site.original[off], f"+{off}: {now.hex()}"
            res = status(daemon, v.pid)
            assert res["state"] == "guarded" and libc_site_of(res)["breakpoint"] is False, res
            v.assert_alive()
            if cycle == 0:
                wait_behaviour(v, zero=True)
            unguard_ok(daemon, v.pid)
            assert site.classify() == "original", site.classify()
    wait_behaviour(v, zero=False)
    guard_ok(daemon, v.pid)
    wait_behaviour(v, zero=True)


def test_a_uprobe_near_the_guard_after_it(daemon, victim):
    """Attached to a guarded process while it is job-stopped (a hit inside
    the changed bytes would crash it: SECURITY.md), then removed: inside
    the change, status says torn both times, warns, and logs it at critical
    level, and guard rewrites the stub; past it, status says guarded with a
    breakpoint.  Then the 4 threads, let go, call backtrace() nonstop and
    get 0 frames."""
    v = victim.bt_loop(4)
    site = Site(v.pid)
    lo, hi = change_range(site)
    guard_ok(daemon, v.pid)
    wait_behaviour(v, zero=True)
    for cycle in range(INSIDE_CYCLES):
        for at in starts_past_the_entry(site):
            off = at - site.address
            inside = lo <= off < hi
            job_stop_clear_of_the_stub(daemon, v)
            crit = daemon.log().count(f"critical: status pid={v.pid} ")
            with Uprobe(v.pid, at) as probe:
                assert probe.in_place(), f"cycle {cycle}, +{off}: no breakpoint"
                res = status(daemon, v.pid)
                s = libc_site_of(res)
                if inside:
                    assert res["state"] == "partial" and s["state"] == "torn", res
                    assert "torn" in [w["name"] for w in res["warnings"]], res
                else:
                    assert res["state"] == "guarded" and s["state"] == "guarded", res
                    assert res["warnings"] == [], res
                assert s["breakpoint"] is True, res
            # The kernel wrote the file's byte back, over ours inside the change.
            now = site.now()
            assert now[off] == site.original[off], now.hex()
            assert now[:off] + now[off + 1:] == site.guarded[:off] + site.guarded[off + 1:]
            res = status(daemon, v.pid)
            s = libc_site_of(res)
            assert s["breakpoint"] is False, res
            if inside:
                assert res["state"] == "partial" and s["state"] == "torn", res
                assert "torn" in [w["name"] for w in res["warnings"]], res
                log = daemon.log()
                assert log.count(f"critical: status pid={v.pid} ") == crit + 2, log[-3000:]
                res = guard_ok(daemon, v.pid)
                assert res["warnings"] == [], res
            else:
                assert res["state"] == "guarded" and res["warnings"] == [], res
            assert site.now() == site.guarded, site.now().hex()
            job_continue(v)
            if cycle == 0:
                wait_behaviour(v, zero=True)
            v.assert_alive()
    wait_behaviour(v, zero=True)
    unguard_ok(daemon, v.pid)
    wait_behaviour(v, zero=False)


def test_the_policy_repairs_a_torn_guard_an_answer_found(tmp_path, victim):
    """The policy guarded the victim; a uprobe inside the stub came and went
    while it was job-stopped: the mappings are the same, so the sweep
    would not look again, but once an answer (a monitoring status, say)
    found the site torn, the next sweep asks the policy about it, and its
    rule's guard repairs it."""
    os.chmod(tmp_path, 0o755)
    conf = tmp_path / "btguardd.conf"
    conf.write_text("[watch]\ninterval = 500ms\n\n[rule bt]\naction = guard\n"
                    f"exe = {victim_path('bt_loop')}\n")
    v = victim.bt_loop(4)
    site = Site(v.pid)   # before the policy's first sweep guards it
    with running_daemon(args=("--config", str(conf))) as d:
        wait_for(lambda: status(d, v.pid)["state"] == "guarded", "the policy's guard", timeout=10)
        wait_behaviour(v, zero=True)
        lo, _ = change_range(site)
        job_stop_clear_of_the_stub(d, v)
        with Uprobe(v.pid, site.address + lo) as probe:
            assert probe.in_place()
        assert status(d, v.pid)["sites"][0]["state"] == "torn"
        wait_for(lambda: status(d, v.pid)["state"] == "guarded", "the sweep's repair", timeout=10)
        assert site.now() == site.guarded, site.now().hex()
        assert [ln for ln in d.log().splitlines()
                if ln.startswith(f"btguardd: info: guard pid={v.pid} ") and " by rule bt " in ln
                and " wrote " in ln], d.log()[-3000:]
        job_continue(v)
        wait_behaviour(v, zero=True)
        v.assert_alive()
