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
- a uprobe at each instruction of the file near the guard, attached
  before it and after it while the threads call backtrace() nonstop: the
  change lies inside one instruction of the file and keeps its first
  byte, so a probe on the prologue runs the prologue and then the stub, one
  on that instruction makes its calls run the file's code (torn, warned
  about, repaired by guard) until its removal writes our kept byte back.

The uprobes are the kernel's own (perf_event_open, no BPF), filtered to the
victim so the rest of the machine is not probed.
"""

import os
import threading
import time

import pytest

from btg.daemon import guard_ok, one, running_daemon, unguard_ok
from btg.procfs import wait_for
from btg.sites import Site, change_range, instruction_starts, kept_instruction, plan_inside
from btg.uprobes import BREAKPOINT, Uprobe, uprobes_work
from btg.victims import victim_path, wait_behaviour

CYCLES = int(os.environ.get("BTGUARD_UPROBE_CYCLES", "20"))
RACE_SECONDS = float(os.environ.get("BTGUARD_UPROBE_RACE_S", "8"))
INSIDE_CYCLES = int(os.environ.get("BTGUARD_UPROBE_INSIDE_CYCLES", "6"))

pytestmark = pytest.mark.skipif(uprobes_work() is not None, reason=str(uprobes_work()))


def with_breakpoint(form):
    return BREAKPOINT + form[len(BREAKPOINT):]


def wait_hits(probe, more_than, timeout=10.0):
    """The victim's threads ran into the uprobe: the kernel counted the hits."""
    deadline = time.monotonic() + timeout
    while probe.hits() <= more_than:
        assert time.monotonic() < deadline, f"the uprobe was never hit ({probe.hits()} hits)"
        time.sleep(0.01)


def libc_site_of(res, suffix="/libc.so.6"):
    [s] = [s for s in res["sites"] if s["object"].endswith(suffix)]
    return s


# The probed site: libc's, whose guard lies inside the canary load, and a
# preloaded definition with no stack protector (tests/victims/libbtpre.c),
# whose stub follows its first instruction.
SITES = ["libc", "preloaded"]


def probed(victim, which, nthreads=4):
    """A bt_loop victim and its Site: libc's, or libbtpre's backtrace() that
    every call of the victim reaches first."""
    if which == "libc":
        v = victim.bt_loop(nthreads)
        return v, Site(v.pid)
    v = victim.bt_loop(nthreads, env={"LD_PRELOAD": str(victim.path("libbtpre"))})
    return v, Site(v.pid, "/libbtpre")


def status(daemon, pid):
    res = one(daemon.ctl("status", pid, check=0), pid, "status")
    assert res["ok"] is True, res
    return res


@pytest.mark.parametrize("which", SITES)
def test_a_uprobe_comes_and_goes_on_a_guarded_process(daemon, victim, which):
    v, site = probed(victim, which)
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
                assert libc_site_of(res, site.suffix)["state"] == "guarded", res
                assert libc_site_of(res, site.suffix)["breakpoint"] is True, res
                # Every call that ran into the breakpoint still returned 0 frames.
                wait_behaviour(v, zero=True)
        # The kernel put the file's first byte back: the stub is whole.
        assert site.classify() == "guarded", f"cycle {cycle}: {site.classify()}"
        v.assert_alive()
    res = status(daemon, v.pid)
    assert res["state"] == "guarded" and libc_site_of(res, site.suffix)["breakpoint"] is False, res
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
    """The run-time addresses of the file's instructions after the first in
    the bytes the tests compare: the prologue the guard keeps, the
    instruction its change lies in, and those after it - everywhere a
    uprobe's tool may put one near the guard."""
    lo, hi = change_range(site)
    starts = [a for a in instruction_starts(site.pid, site.address, site.LEN, site.suffix)
              if a > site.address]
    assert any(a >= site.address + hi for a in starts), (lo, hi, starts)
    return starts


def test_the_guard_lies_inside_one_instruction(daemon, victim):
    """On this machine's glibc the daemon puts the change inside one
    instruction of the file (the canary load) and keeps its first byte: no
    instruction start of the file is inside it, so no breakpoint can land
    in the bytes we wrote, and the stub follows no first instruction.
    (Skipped where the prologue does not allow it, by tests/integration/
    btg/sites.py's own reading: the tests below then run against the stub
    after the first instruction.)"""
    v = victim.bt_loop(1)
    site = Site(v.pid)
    if plan_inside(site.original) is None:
        pytest.skip(f"this libc's backtrace() has no room inside an instruction: "
                    f"{site.original.hex()}")
    guard_ok(daemon, v.pid)
    assert site.now() == site.guarded, site.now().hex()
    at = kept_instruction(site)
    lo, hi = change_range(site)
    assert at is not None and at < lo and hi - at <= 9, (at, lo, hi, site.guarded.hex())
    assert site.guarded[at] == site.original[at] in (0x64, 0x65)
    wait_behaviour(v, zero=True)


def first_change(now, original, skip):
    """The offset of the first byte that differs from the file's, but at skip."""
    return next(i for i in range(len(now)) if i != skip and now[i] != original[i])


@pytest.mark.parametrize("which", SITES)
def test_a_uprobe_near_the_guard_before_it(daemon, victim, which):
    """Attached first, while 4 threads call backtrace() nonstop, at each
    instruction of the file after the first.  Where the guard lies inside
    one instruction (libc's): on the prologue it keeps, the probe stays
    and fires; on that instruction, guard writes its bytes over the
    probe's (whose removal then finds no breakpoint to take away).  Where
    the stub follows the first instruction (the preloaded definition), it
    re-plans around a probe inside its bytes, keeping the probed
    instruction and undoing it, so the probe stays and fires (writing the
    usual bytes over it is refused as busy again and again: the kernel
    stops a thread right after replaying the probed instruction, where
    the usual stub would crash it).  Past the change the probe stays and
    is never reached.  Every call returns 0 frames, and the probe's
    removal leaves the guard whole every time."""
    v, site = probed(victim, which)
    kept = kept_instruction(site)
    # The stub after the first instruction is the fallback: fewer rounds.
    for cycle in range(INSIDE_CYCLES if which == "libc" else max(2, INSIDE_CYCLES // 3)):
        for at in starts_past_the_entry(site):
            off = at - site.address
            with Uprobe(v.pid, at) as probe:
                assert probe.in_place(), f"cycle {cycle}, +{off}: no breakpoint"
                # Unguarded, a hit replays the file's instruction: the file's own code.
                wait_hits(probe, 20)
                res = status(daemon, v.pid)
                s = libc_site_of(res, site.suffix)
                assert res["state"] == "unguarded" and s["state"] == "original", res
                assert s["breakpoint"] is True, res
                res = guard_ok(daemon, v.pid)
                now = site.now()
                if off == kept:
                    assert now == site.guarded, f"+{off}: not written over: {now.hex()}"
                    assert libc_site_of(res, site.suffix)["breakpoint"] is False, res
                    reached = False
                else:
                    assert now[off] == BREAKPOINT[0], \
                        f"+{off}: the probe was written over: {now.hex()}"
                    assert libc_site_of(res, site.suffix)["breakpoint"] is True, res
                    reached = first_change(now, site.original, off) > off
                hits = probe.hits()
                if cycle == 0:
                    wait_behaviour(v, zero=True)
                if reached:
                    wait_hits(probe, hits)      # the kept prologue still runs it
                v.assert_alive()
            # The file's byte back on the probed instruction; re-planned, the
            # guard keeps more of the prologue than site.guarded says.
            now = site.now()
            assert now[off] == site.original[off], f"+{off}: {now.hex()}"
            assert now == site.guarded or kept is None, f"+{off}: {now.hex()}"
            res = status(daemon, v.pid)
            assert res["state"] == "guarded", res
            assert libc_site_of(res, site.suffix)["breakpoint"] is False, res
            v.assert_alive()
            if cycle == 0:
                wait_behaviour(v, zero=True)
            unguard_ok(daemon, v.pid)
            assert site.classify() == "original", site.classify()
    wait_behaviour(v, zero=False)
    guard_ok(daemon, v.pid)
    wait_behaviour(v, zero=True)


def test_a_uprobe_near_the_guard_after_it(daemon, victim):
    """Attached to a guarded process while its 4 threads call backtrace()
    nonstop, at each instruction of the file after the first, then removed;
    the process lives through all of it.  On the prologue the guard keeps
    and past the change: guarded with a breakpoint, 0 frames.  On the
    instruction the change lies in: a hit replays the file's instruction and
    resumes past the change, so the calls run unguarded (real frames) but
    correctly; status says torn, warns, and logs it at critical level; the
    probe's removal writes back the byte we kept, and the guard is whole
    again - or, every other round, guard writes over the probe first, and
    its removal finds nothing to take away."""
    v = victim.bt_loop(4)
    site = Site(v.pid)
    kept = kept_instruction(site)
    if kept is None:
        pytest.skip("the change starts an instruction here: SECURITY.md's limit")
    guard_ok(daemon, v.pid)
    wait_behaviour(v, zero=True)
    for cycle in range(INSIDE_CYCLES):
        for at in starts_past_the_entry(site):
            off = at - site.address
            crit = daemon.log().count(f"critical: status pid={v.pid} ")
            with Uprobe(v.pid, at) as probe:
                assert probe.in_place(), f"cycle {cycle}, +{off}: no breakpoint"
                res = status(daemon, v.pid)
                s = libc_site_of(res)
                assert s["breakpoint"] is True, res
                if off != kept:
                    assert res["state"] == "guarded" and s["state"] == "guarded", res
                    assert res["warnings"] == [], res
                    if cycle == 0:
                        wait_behaviour(v, zero=True)
                    v.assert_alive()
                    continue
                assert res["state"] == "partial" and s["state"] == "torn", res
                assert "torn" in [w["name"] for w in res["warnings"]], res
                assert daemon.log().count(f"critical: status pid={v.pid} ") == crit + 1
                wait_hits(probe, 20)
                if cycle == 0:
                    wait_behaviour(v, zero=False)    # the file's instruction, then its code
                v.assert_alive()
                if cycle % 2:
                    res = guard_ok(daemon, v.pid)
                    assert res["warnings"] == [] and site.now() == site.guarded, res
                    hits = probe.hits()
                    wait_behaviour(v, zero=True)
                    assert probe.hits() == hits, "the probe fires through the repaired guard"
            # Its removal wrote back the byte we kept (or found ours there): whole again.
            assert site.now() == site.guarded, f"cycle {cycle}, +{off}: {site.now().hex()}"
            res = status(daemon, v.pid)
            assert res["state"] == "guarded" and res["warnings"] == [], res
            assert libc_site_of(res)["breakpoint"] is False, res
            if cycle == 0 or off == kept:
                wait_behaviour(v, zero=True)
            v.assert_alive()
    unguard_ok(daemon, v.pid)
    wait_behaviour(v, zero=False)


def test_the_policy_repairs_a_torn_guard_an_answer_found(tmp_path, victim):
    """The policy guarded the victim; a uprobe then went on the instruction
    the guard lies in, and calls run the file's code through it: the
    mappings are the same, so the sweep would not look again, but once an
    answer (a monitoring status, say) found the site torn, the next sweep
    asks the policy about it, and its rule's guard repairs it, over the
    probe, while the threads keep calling."""
    os.chmod(tmp_path, 0o755)
    conf = tmp_path / "btguardd.conf"
    conf.write_text("[watch]\ninterval = 500ms\n\n[rule bt]\naction = guard\n"
                    f"exe = {victim_path('bt_loop')}\n")
    v = victim.bt_loop(4)
    site = Site(v.pid)   # before the policy's first sweep guards it
    kept = kept_instruction(site)
    if kept is None:
        pytest.skip("the change starts an instruction here: SECURITY.md's limit")
    with running_daemon(args=("--config", str(conf))) as d:
        wait_for(lambda: status(d, v.pid)["state"] == "guarded", "the policy's guard", timeout=10)
        wait_behaviour(v, zero=True)
        with Uprobe(v.pid, site.address + kept) as probe:
            assert probe.in_place()
            wait_hits(probe, 20)
            assert status(d, v.pid)["sites"][0]["state"] == "torn"
            wait_for(lambda: status(d, v.pid)["state"] == "guarded", "the sweep's repair",
                     timeout=10)
            assert site.now() == site.guarded, site.now().hex()
            wait_behaviour(v, zero=True)
        assert site.now() == site.guarded, site.now().hex()
        assert [ln for ln in d.log().splitlines()
                if ln.startswith(f"btguardd: info: guard pid={v.pid} ") and " by rule bt " in ln
                and " wrote " in ln], d.log()[-3000:]
        wait_behaviour(v, zero=True)
        v.assert_alive()
