# SPDX-License-Identifier: MIT
"""The heart of btguard, end to end: guard, unguard and status against
real victims through the real daemon and client.

Each test watches the *victim's* behaviour (bt_loop's report of what
backtrace() returned) and its threads (/proc: TracerPid, "t" state), not
only what the daemon claims, so a broken patch engine fails here.
"""

import collections
import os

import pytest

from btg.procfs import read_mem, thread_problems, wait_threads_running, write_mem
from btg.sites import (ENDBR64, SITE_LEN, STUB, expected_site, guarded_form, libc_text_mappings,
                       stub_offset)
from btg.victims import wait_behaviour, wait_report
from btg.wire import (ACTION_GUARD, ACTION_UNGUARD, ERR_BUSY, PROC_GUARDED, PROC_UNGUARDED,
                      PROC_UNKNOWN, RESULT_WROTE, Wire)

# Long enough that a loaded machine retrying "busy" still gets through.
DEADLINE_MS = 20000
CYCLES = int(os.environ.get("BTGUARD_CYCLES", "1000"))


def one_result(r, pid, action):
    assert len(r.results) == 1, f"one result wanted: {r}"
    res = r.results[0]
    assert res["pid"] == pid, res
    assert res["action"] == action, res
    return res


def libc_site(res):
    sites = [s for s in res["sites"] if s["object"].endswith("libc.so.6")]
    assert len(sites) == 1, f"one libc.so.6 site wanted: {res['sites']}"
    return sites[0]


def assert_guard_reply(res, wrote):
    assert res["ok"] is True, res
    assert res["state"] == "guarded", res
    assert res["wrote"] is wrote, res
    assert res["sites"], res
    assert all(s["state"] == "guarded" for s in res["sites"]), res
    if wrote:
        assert res["pause_us"] > 0, res
        assert 0 <= res["check_us"] <= res["pause_us"], res


def assert_unguard_reply(res, wrote):
    assert res["ok"] is True, res
    assert res["state"] == "unguarded", res
    assert res["wrote"] is wrote, res
    assert res["sites"], res
    assert all(s["state"] == "original" for s in res["sites"]), res
    if wrote:
        assert res["pause_us"] > 0, res


def wait_all_zero(v):
    """Every backtrace() call that starts from now on returns 0.  (A call
    already inside backtrace() when the stub went in may still return
    frames: btg.victims.wait_behaviour waits for a steady state first.)"""
    wait_behaviour(v, zero=True)


def wait_all_real(v):
    """Every backtrace() call from now on returns real frames again."""
    later = wait_behaviour(v, zero=False)
    for t in later.threads:
        # descend() + worker_main + start_thread + clone3 at depth 0.
        assert t.last >= 3, t
    # Depth cycles 0..20 on top of those, so real walks went deep.
    assert max(t.max for t in later.threads) >= 21, later


def test_status_fresh_process(daemon, victim):
    v = victim.bt_loop(16)
    res = one_result(daemon.ctl("status", v.pid, check=0), v.pid, "status")
    assert res["ok"] is True, res
    assert res["state"] == "unguarded", res
    assert res["wrote"] is False, res
    site = libc_site(res)
    assert site["state"] == "original", site
    addr = int(site["address"], 16)
    assert any(start <= addr < end for start, end, _ in libc_text_mappings(v.pid)), \
        f"{site['address']} not in an executable libc mapping"
    assert addr == expected_site(v.pid), \
        f"daemon says {site['address']}, libc's symbol table says {expected_site(v.pid):#x}"
    # status only reads: the victim kept running untraced.
    wait_threads_running(v.pid)
    v.assert_alive()


def test_guard_then_unguard_is_observable(daemon, victim):
    v = victim.bt_loop(16)
    site = int(libc_site(one_result(daemon.ctl("status", v.pid, check=0),
                                    v.pid, "status"))["address"], 16)
    original = read_mem(v.pid, site, SITE_LEN)
    # Before anything: real frames.
    wait_all_real(v)

    res = one_result(daemon.ctl("--deadline", DEADLINE_MS, "guard", v.pid, check=0),
                     v.pid, "guard")
    assert_guard_reply(res, wrote=True)
    wait_threads_running(v.pid)
    v.assert_alive()
    patched = read_mem(v.pid, site, SITE_LEN)
    assert patched == guarded_form(original), \
        f"not guarded as planned: {original.hex()} -> {patched.hex()}"
    wait_all_zero(v)

    res = one_result(daemon.ctl("--deadline", DEADLINE_MS, "guard", v.pid, check=0),
                     v.pid, "guard")
    assert_guard_reply(res, wrote=False)
    res = one_result(daemon.ctl("status", v.pid, check=0), v.pid, "status")
    assert res["ok"] is True and res["state"] == "guarded", res
    assert libc_site(res)["state"] == "guarded", res

    res = one_result(daemon.ctl("--deadline", DEADLINE_MS, "unguard", v.pid, check=0),
                     v.pid, "unguard")
    assert_unguard_reply(res, wrote=True)
    wait_threads_running(v.pid)
    v.assert_alive()
    assert read_mem(v.pid, site, SITE_LEN) == original
    wait_all_real(v)

    res = one_result(daemon.ctl("--deadline", DEADLINE_MS, "unguard", v.pid, check=0),
                     v.pid, "unguard")
    assert_unguard_reply(res, wrote=False)
    res = one_result(daemon.ctl("status", v.pid, check=0), v.pid, "status")
    assert res["ok"] is True and res["state"] == "unguarded", res
    wait_threads_running(v.pid)
    v.assert_alive()


def bytes_now(pid, address):
    """The site's bytes for a failure message; the victim may have died."""
    try:
        return read_mem(pid, address, SITE_LEN).hex()
    except OSError as e:
        return f"unreadable ({e.strerror})"


def test_guard_unguard_cycles(daemon, victim):
    """The regression this procedure exists for: stop-and-poke crashed a
    backtrace()-hammering process within 300 cycles.  Here: CYCLES
    guard+unguard pairs on one connection; "busy" is an acceptable answer
    for a single request, a crash, a stopped/traced thread, a wedged thread,
    a write on a busy answer or any other error is not."""
    v = victim.bt_loop(16)
    site = expected_site(v.pid)
    original = read_mem(v.pid, site, SITE_LEN)
    expected = PROC_UNGUARDED
    counts = collections.Counter()
    progress = wait_report(v.report, lambda r: True, "a report")
    with Wire(daemon.socket, timeout=120) as w:
        for cycle in range(CYCLES):
            for action, target in ((ACTION_GUARD, PROC_GUARDED),
                                   (ACTION_UNGUARD, PROC_UNGUARDED)):
                [res] = w.request(action, [v.pid], deadline_ms=5000)
                where = f"cycle {cycle} action {action}: {res}; " \
                        f"bytes now {bytes_now(v.pid, site)} (original {original.hex()})"
                assert res.pid == v.pid and res.action == action, where
                if res.error == 0:
                    assert res.state == target, where
                    assert bool(res.flags & RESULT_WROTE) == (expected != target), where
                    counts[(action, "wrote" if expected != target else "noop")] += 1
                    expected = target
                elif res.error == ERR_BUSY:
                    assert not res.flags & RESULT_WROTE, where
                    assert res.state in (expected, PROC_UNKNOWN), where
                    assert res.message, where
                    counts[(action, "busy")] += 1
                else:
                    pytest.fail(f"unexpected error: {where}")
                # Cheap: alive, and every thread free after every single reply.
                v.assert_alive()
                if thread_problems(v.pid):
                    wait_threads_running(v.pid)
            if cycle % 50 == 49:
                daemon.alive()
                # Every worker still makes progress: none wedged or lost.
                prev = progress
                progress = wait_report(
                    v.report,
                    lambda r: all(t.calls > p.calls for t, p in zip(r.threads, prev.threads)),
                    f"every thread to progress after cycle {cycle}", alive=v.assert_alive)
    print(f"cycles={CYCLES} outcomes={dict(counts)}")
    wait_threads_running(v.pid)
    v.assert_alive()
    # The engine must actually work under load, not answer "busy" forever.
    assert counts[(ACTION_GUARD, "wrote")] >= CYCLES // 2, counts
    assert counts[(ACTION_UNGUARD, "wrote")] >= CYCLES // 2, counts

    res = one_result(daemon.ctl("status", v.pid, check=0), v.pid, "status")
    assert res["state"] == {PROC_GUARDED: "guarded", PROC_UNGUARDED: "unguarded"}[expected], res
    if expected == PROC_GUARDED:
        wait_all_zero(v)
    else:
        wait_all_real(v)
    # And the end state is still reversible.
    res = one_result(daemon.ctl("--deadline", DEADLINE_MS, "guard", v.pid, check=0),
                     v.pid, "guard")
    assert_guard_reply(res, wrote=expected != PROC_GUARDED)
    wait_all_zero(v)


def test_two_targets_in_one_request(daemon, victim):
    busy = victim.bt_loop(16)
    quiet = victim("idle", 2)
    r = daemon.ctl("--deadline", DEADLINE_MS, "guard", busy.pid, quiet.pid, check=0)
    assert [x["pid"] for x in r.results] == [busy.pid, quiet.pid], r
    for res in r.results:
        assert res["action"] == "guard"
        assert_guard_reply(res, wrote=True)
    wait_threads_running(busy.pid)
    wait_threads_running(quiet.pid)
    wait_all_zero(busy)

    # Order follows the request, not the PIDs.
    r = daemon.ctl("status", quiet.pid, busy.pid, check=0)
    assert [x["pid"] for x in r.results] == [quiet.pid, busy.pid], r
    assert [x["state"] for x in r.results] == ["guarded", "guarded"], r

    r = daemon.ctl("--deadline", DEADLINE_MS, "unguard", quiet.pid, busy.pid, check=0)
    assert [x["pid"] for x in r.results] == [quiet.pid, busy.pid], r
    for res in r.results:
        assert_unguard_reply(res, wrote=True)
    wait_all_real(busy)
    busy.assert_alive()
    quiet.assert_alive()


def test_state_none_without_libc(daemon, victim):
    v = victim("nolibc")
    res = one_result(daemon.ctl("status", v.pid, check=0), v.pid, "status")
    assert res["ok"] is True, res
    assert res["state"] == "none", res
    assert res["sites"] == [], res

    r = daemon.ctl("guard", v.pid, check=1)
    res = one_result(r, v.pid, "guard")
    assert res["ok"] is False and res["error"] == "no-site", res
    assert res["wrote"] is False, res
    wait_threads_running(v.pid)
    v.assert_alive()


def test_state_foreign_is_never_written(daemon, victim):
    v = victim("idle", 2)
    res = one_result(daemon.ctl("status", v.pid, check=0), v.pid, "status")
    site = int(libc_site(res)["address"], 16)
    original = read_mem(v.pid, site, SITE_LEN)
    off = next(i for i, (a, b) in enumerate(zip(original, guarded_form(original))) if a != b)
    # Somebody else's patch: the first byte the guard changes, neither original,
    # ours, nor a breakpoint (int3 there is a uprobe's or a debugger's, which
    # guard plans around or rewrites: test_uprobes.py).  The idle victim
    # never calls backtrace() again, so poking a running process is safe.
    foreign_byte = b"\x90" if original[off:off + 1] != b"\x90" else b"\xf4"
    write_mem(v.pid, site + off, foreign_byte)
    foreign = read_mem(v.pid, site, SITE_LEN)
    try:
        res = one_result(daemon.ctl("status", v.pid, check=0), v.pid, "status")
        assert res["state"] == "foreign", res
        assert libc_site(res)["state"] == "foreign", res

        for action in ("guard", "unguard"):
            res = one_result(daemon.ctl(action, v.pid, check=1), v.pid, action)
            assert res["ok"] is False and res["error"] == "foreign", res
            assert res["wrote"] is False, res
            assert read_mem(v.pid, site, SITE_LEN) == foreign, f"{action} wrote to a foreign site"
            wait_threads_running(v.pid)
    finally:
        write_mem(v.pid, site, original)
    res = one_result(daemon.ctl("status", v.pid, check=0), v.pid, "status")
    assert res["state"] == "unguarded", res
    v.assert_alive()


def test_a_stub_an_older_btguard_put_at_the_entry_is_recognised(daemon, victim):
    """btguard used to cover the first instruction with the stub; a process
    it guarded so is still guarded after an upgrade, and unguard restores
    it, instead of both calling it foreign."""
    v = victim("idle", 2)
    res = one_result(daemon.ctl("status", v.pid, check=0), v.pid, "status")
    site = int(libc_site(res)["address"], 16)
    original = read_mem(v.pid, site, SITE_LEN)
    if stub_offset(original) == 0 or original.startswith(ENDBR64):
        pytest.skip(f"this libc's backtrace() starts where the stub always went: {original.hex()}")
    # The idle victim never calls backtrace() again: poking it is safe.
    write_mem(v.pid, site, STUB)
    try:
        res = one_result(daemon.ctl("status", v.pid, check=0), v.pid, "status")
        assert res["state"] == "guarded" and libc_site(res)["state"] == "guarded", res
        res = one_result(daemon.ctl("guard", v.pid, check=0), v.pid, "guard")
        assert_guard_reply(res, wrote=False)
        res = one_result(daemon.ctl("unguard", v.pid, check=0), v.pid, "unguard")
        assert res["ok"] is True and res["state"] == "unguarded" and res["wrote"] is True, res
        assert read_mem(v.pid, site, SITE_LEN) == original
    finally:
        write_mem(v.pid, site, original)
    v.assert_alive()


def test_state_partial_with_two_sites(daemon, victim):
    pre = str(victim.path("libbtpre"))
    v = victim("idle", 2, env={"LD_PRELOAD": pre})
    res = one_result(daemon.ctl("status", v.pid, check=0), v.pid, "status")
    objects = sorted(os.path.basename(s["object"]) for s in res["sites"])
    assert objects == ["libbtpre", "libc.so.6"], res
    assert res["state"] == "unguarded", res
    pre_site = int(next(s for s in res["sites"] if s["object"].endswith("libbtpre"))["address"], 16)
    assert pre_site == expected_site(v.pid, "/libbtpre")
    pre_original = read_mem(v.pid, pre_site, SITE_LEN)

    res = one_result(daemon.ctl("guard", v.pid, check=0), v.pid, "guard")
    assert_guard_reply(res, wrote=True)
    assert len(res["sites"]) == 2, res

    def make_partial():
        write_mem(v.pid, pre_site, pre_original)
        st = one_result(daemon.ctl("status", v.pid, check=0), v.pid, "status")
        assert st["state"] == "partial", st
        by_obj = {os.path.basename(s["object"]): s["state"] for s in st["sites"]}
        assert by_obj == {"libbtpre": "original", "libc.so.6": "guarded"}, st

    make_partial()
    # guard completes a partial guard ...
    res = one_result(daemon.ctl("guard", v.pid, check=0), v.pid, "guard")
    assert_guard_reply(res, wrote=True)
    make_partial()
    # ... and unguard undoes one.
    res = one_result(daemon.ctl("unguard", v.pid, check=0), v.pid, "unguard")
    assert_unguard_reply(res, wrote=True)
    assert read_mem(v.pid, pre_site, SITE_LEN) == pre_original
    wait_threads_running(v.pid)
    v.assert_alive()
