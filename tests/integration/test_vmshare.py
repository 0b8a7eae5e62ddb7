# SPDX-License-Identifier: MIT
"""Processes that share the target's memory without being its threads.

A process made with clone(CLONE_VM) but without CLONE_THREAD runs the same
bytes as the target and keeps running while the target's threads are
stopped.  The vmsibling victim's siblings call backtrace(buf, 0) without
pause, so they are inside its first bytes most of the time: a guard
written while one of them runs (or sits stopped) there kills it.
"""

import collections
import os

from conftest import (ACTION_GUARD, ACTION_UNGUARD, ERR_BUSY, PROC_GUARDED, PROC_UNGUARDED,
                      RESULT_WROTE, Wire,
                      proc_state, thread_problems)

CYCLES = 2000


def siblings_of(pid):
    with open(f"/proc/{pid}/task/{pid}/children") as f:
        kids = [int(x) for x in f.read().split()]
    assert kids, f"vmsibling {pid} has no siblings"
    return kids


def assert_all_alive(v, sibs):
    v.assert_alive()
    for s in sibs:
        assert proc_state(s) not in (None, "Z", "X"), f"sibling {s} died"


def test_clone_vm_siblings_survive_guard_cycles(daemon, victim):
    v = victim("vmsibling", 1)
    sibs = siblings_of(v.pid)
    counts = collections.Counter()
    expected = PROC_UNGUARDED
    with Wire(daemon.socket, timeout=120) as w:
        for cycle in range(CYCLES):
            for action, target in ((ACTION_GUARD, PROC_GUARDED),
                                   (ACTION_UNGUARD, PROC_UNGUARDED)):
                [res] = w.request(action, [v.pid], deadline_ms=5000)
                where = f"cycle {cycle} action {action}: {res}"
                if res.error == 0:
                    assert res.state == target, where
                    counts[(action, "wrote" if res.flags & RESULT_WROTE else "noop")] += 1
                    expected = target
                else:
                    assert res.error == ERR_BUSY, where
                    assert not res.flags & RESULT_WROTE, where
                    counts[(action, "busy")] += 1
            if cycle % 100 == 99:
                assert_all_alive(v, sibs)
    print(f"cycles={CYCLES} outcomes={dict(counts)} end state {expected}")
    assert_all_alive(v, sibs)
    for pid in [v.pid] + sibs:
        assert thread_problems(pid) == []
    # Held and checked, not refused: the work gets done.
    assert counts[(ACTION_GUARD, "wrote")] >= CYCLES // 2, counts
    assert counts[(ACTION_UNGUARD, "wrote")] >= CYCLES // 2, counts


def test_sibling_the_caller_may_not_act_on_refuses(daemon, victim, test_user):
    uid, gid = test_user
    v = victim("vmsibling", 1, "--drop-parent", uid, gid)
    [sib] = siblings_of(v.pid)
    st = {}
    with open(f"/proc/{v.pid}/status") as f:
        for line in f:
            k, _, val = line.partition(":")
            st[k] = val.split()
    assert st["Uid"][:3] == [str(uid)] * 3, st["Uid"]
    r = daemon.ctl("guard", v.pid, user=test_user, check=1).results[0]
    assert r["error"] == "shared-memory", r
    # Nothing about the other process: not its PID, not its owner.
    assert str(sib) not in r["message"] and "root" not in r["message"], r
    assert r["state"] == "unguarded", r
    # Root may hold both; the sibling is named to root.
    r = daemon.ctl("guard", v.pid, check=0).results[0]
    assert r["ok"] and r["state"] == "guarded", r
    assert_all_alive(v, [sib])
    assert thread_problems(v.pid) == [] and thread_problems(sib) == []
