# SPDX-License-Identifier: MIT
"""The safety path under ptrace failures a healthy kernel rarely gives.

These tests run build/faults/btguardd, the daemon built with fault
injection (daemon/base/fault.h, `make faults`), told by BTGUARD_FAULTS which
ptrace call to make fail.  Whatever fails, the target must end up exactly
as it was (every word already written restored), nothing stopped or
traced, and the failure reported.
"""

import time

from btg.daemon import faulty_daemon
from btg.procfs import read_mem, thread_problems, wait_threads_running
from btg.sites import SITE_LEN, expected_site
from btg.victims import start, victim_path


def status(d, pid):
    return d.ctl("status", pid, check=0).results[0]


def test_read_back_that_differs_restores_the_word(victim):
    v = victim("idle", 2)
    site = expected_site(v.pid)
    original = read_mem(v.pid, site, SITE_LEN)
    with faulty_daemon("peek-differ=1") as d:
        r = d.ctl("guard", v.pid, check=1).results[0]
        assert r["error"] == "verify", r
        assert read_mem(v.pid, site, SITE_LEN) == original
        assert status(d, v.pid)["state"] == "unguarded"
        wait_threads_running(v.pid)
        # And the next attempt, with nothing injected, works.
        r = d.ctl("guard", v.pid, check=0).results[0]
        assert r["ok"] and r["state"] == "guarded", r
    v.assert_alive()


def test_second_site_failing_leaves_both_original(victim):
    pre = str(victim.path("libbtpre"))
    v = victim("idle", 2, env={"LD_PRELOAD": pre})
    sites = {s: read_mem(v.pid, expected_site(v.pid, s), 8) for s in ("/libbtpre", "/libc.so.6")}
    with faulty_daemon("poke=2") as d:
        before = status(d, v.pid)
        assert len(before["sites"]) == 2, before
        r = d.ctl("guard", v.pid, check=1).results[0]
        assert r["error"] == "EIO", r
        for suffix, original in sites.items():
            assert read_mem(v.pid, expected_site(v.pid, suffix), 8) == original, suffix
        after = status(d, v.pid)
        assert after["state"] == "unguarded", after
        assert all(s["state"] == "original" for s in after["sites"]), after
        wait_threads_running(v.pid)
    v.assert_alive()


def test_failed_seize_leaves_nothing_held(victim):
    v = victim("idle", 8)
    site = expected_site(v.pid)
    original = read_mem(v.pid, site, SITE_LEN)
    # The third seize: two threads are already held when it fails.
    with faulty_daemon("seize=3") as d:
        r = d.ctl("guard", v.pid, check=1).results[0]
        assert r["error"] == "EIO" and "PTRACE_SEIZE" in r["message"], r
        assert read_mem(v.pid, site, SITE_LEN) == original
        wait_threads_running(v.pid)
        assert d.ctl("guard", v.pid, check=0).results[0]["ok"]
    v.assert_alive()


def test_failed_detach_is_reported_and_retried(victim):
    v = victim("idle", 4)
    with faulty_daemon("detach=2") as d:
        r = d.ctl("guard", v.pid, check=0).results[0]
        assert r["ok"] and r["state"] == "guarded", r
        # Retried at once: nothing stays stopped or traced.
        assert thread_problems(v.pid) == [], thread_problems(v.pid)
        assert "failed (Input/output error); retried, and it went" in d.log(), d.log()[-2000:]
    v.assert_alive()


def test_an_undo_that_fails_is_loud(victim):
    """The read-back differs, then the restore of that word fails too: the
    target may hold the stub, and the answer must say so (internal, naming
    the site), never pass it off as a plain verify failure."""
    v = victim("idle", 2)
    with faulty_daemon("peek-differ=1,poke=2") as d:
        r = d.ctl("guard", v.pid, check=1).results[0]
        assert r["error"] == "internal", r
        assert "restoring" in r["message"] and "failed too" in r["message"], r
        assert "neither original nor guarded" in d.log(), d.log()[-2000:]
        wait_threads_running(v.pid)
    v.assert_alive()


def test_exec_between_two_seizes_holds_neither_up(victim):
    """The target execs after the daemon seized one of its threads and
    before it seized the others (a hold before the third seize makes the
    window).  The exec waits until the seized thread, which it killed, is
    reaped; the next seize waits for the exec's cred_guard_mutex.  The
    daemon must abandon that seize, reap, and try again: the exec
    completes, the request is answered, and nothing is left traced or
    stopped."""
    v = start(victim, [victim_path("exec_when_seized"), 3], "exec_when_seized")
    with faulty_daemon("seize-hold=3,seize-hold-ms=300") as d:
        t0 = time.monotonic()
        r = d.ctl("--deadline", 5000, "guard", v.pid, timeout=30)
        took = time.monotonic() - t0
        [res] = r.results
        # The process became another program under the daemon's hands.
        assert not res["ok"] and res["error"] in ("exec", "gone", "no-site"), res
        assert took < 10, f"answered after {took:.1f} s"
        assert v.lines.next(timeout=10) == f"exec'd {v.pid}"
        assert "seize(s) abandoned and tried again" in d.log(), d.log()[-3000:]
        wait_threads_running(v.pid)
        assert thread_problems(v.pid) == []
        # And the daemon serves the new program as any other.
        assert status(d, v.pid)["state"] in ("unguarded", "guarded")
    v.assert_alive()
