# SPDX-License-Identifier: MIT
"""The children a target forks, before and after its guard.

A process forked after its parent was guarded inherits the patched bytes
(fork copies the private, already written page), `--tree` guards a parent
with its current workers (DataLoader style), one result each, and a worker
forked while the request was under way, before its parent was patched, is
found when the children are listed again.
"""

import threading

import pytest

from btg.daemon import guard_ok, one, unguard_ok
from btg.procfs import read_mem, wait_threads_running
from btg.sites import SITE_LEN, assert_original, assert_stub, expected_site
from btg.victims import kill_pid, start, victim_path


def child_lines(lines):
    """{pid: frames} from forker's "child PID N" lines."""
    out = {}
    for line in lines:
        parts = line.split()
        if len(parts) == 3 and parts[0] == "child":
            out[int(parts[1])] = int(parts[2])
    return out


@pytest.fixture
def forker(victim):
    """Starts forker; kills every child it reported at teardown (they also
    die with their parent, through PR_SET_PDEATHSIG)."""
    started = []

    def run(nchildren):
        v = start(victim, [victim_path("forker"), nchildren], "forker", stdin=True)
        started.append(v)
        return v

    yield run
    for v in started:
        for pid in child_lines(v.lines.seen):
            kill_pid(pid)
        if v.proc.stdin:
            v.proc.stdin.close()


def test_child_forked_after_guard_inherits_it(daemon, forker):
    v = forker(0)
    addr = expected_site(v.pid)
    original = read_mem(v.pid, addr, SITE_LEN)
    guard_ok(daemon, v.pid, nsites=1)
    assert_stub(v.pid, addr, original)

    v.proc.stdin.write(b"fork\n")
    v.proc.stdin.flush()
    [(child, frames)] = child_lines(v.lines.until(lambda x: x.startswith("child "))).items()
    # The child's own backtrace() call returned 0 frames ...
    assert frames == 0, f"child {child} got {frames} frames"
    # ... because it holds the same stub at the same address.
    assert expected_site(child) == addr
    assert_stub(child, addr, original)
    res = one(daemon.ctl("status", child, check=0), child, "status")
    assert res["state"] == "guarded", res
    for pid in (v.pid, child):
        wait_threads_running(pid)

    # Unguarding the parent does not reach into the child: separate memory.
    unguard_ok(daemon, v.pid, nsites=1)
    assert_original(v.pid, addr, original)
    assert_stub(child, addr, original)


def test_tree_guards_parent_and_workers(daemon, forker):
    v = forker(3)
    workers = child_lines(v.before)
    assert len(workers) == 3 and all(n > 0 for n in workers.values()), v.before
    pids = [v.pid, *workers]
    addr = expected_site(v.pid)
    original = read_mem(v.pid, addr, SITE_LEN)

    r = daemon.ctl("--deadline", 10000, "--tree", "guard", v.pid, check=0)
    # One result per process, the parent first, each really guarded.
    assert [x["pid"] for x in r.results][0] == v.pid, r
    assert sorted(x["pid"] for x in r.results) == sorted(pids), r
    for res in r.results:
        assert res["ok"] is True and res["action"] == "guard", res
        assert res["state"] == "guarded" and res["wrote"] is True, res
    for pid in pids:
        # Forked children share the parent's layout.
        assert expected_site(pid) == addr
        assert_stub(pid, addr, original)
        wait_threads_running(pid)

    # Without --tree only the named process is touched.
    unguard_ok(daemon, v.pid, nsites=1)
    assert_original(v.pid, addr, original)
    for pid in workers:
        assert_stub(pid, addr, original)

    r = daemon.ctl("--tree", "unguard", v.pid, check=0)
    assert sorted(x["pid"] for x in r.results) == sorted(pids), r
    assert [x["wrote"] for x in r.results if x["pid"] == v.pid] == [False], r
    for res in r.results:
        assert res["ok"] is True and res["state"] == "unguarded", res
    for pid in pids:
        assert_original(pid, addr, original)
        wait_threads_running(pid)
    v.assert_alive()


def test_tree_finds_children_forked_before_the_parent_was_patched(daemon, victim, forker):
    # The request names a slow target first (hundreds of threads to stop),
    # so the forker's children are listed at arrival, then more are forked
    # while the slow one is handled, before the forker's own turn: those
    # hold the old bytes and only a second listing finds them.
    slow = start(victim, [victim_path("idle"), 400], "idle")
    v = forker(2)
    stop = threading.Event()
    sent = []

    def feed():
        while len(sent) < 400 and not stop.is_set():
            v.proc.stdin.write(b"fork\n")
            v.proc.stdin.flush()
            sent.append(1)
            stop.wait(0.002)

    feeder = threading.Thread(target=feed, daemon=True)
    feeder.start()
    try:
        r = daemon.ctl("--deadline", 10000, "--tree", "guard", slow.pid, v.pid, check=0)
    finally:
        stop.set()
        feeder.join(timeout=30)
    # Read every child's line: 2 workers and one per fork sent.
    while len(child_lines(v.lines.seen)) < 2 + len(sent):
        v.lines.next()
    children = child_lines(v.lines.seen)
    answered = {x["pid"] for x in r.results}
    assert {slow.pid, v.pid} <= answered, r
    late = [pid for pid in children if pid in answered and pid not in child_lines(v.before)]
    assert late, f"no child forked during the request was answered: {r}"
    for pid in children:
        res = one(daemon.ctl("status", pid, check=0), pid, "status")
        assert res["state"] == "guarded", (pid, res, "answered" if pid in answered else "missed")
