# SPDX-License-Identifier: MIT
"""What a target goes through while the daemon holds it.

Every task that runs its memory is stopped for the whole moment the daemon
believes it is (the stamper victim: every task reads the clock in a loop
and records when it did not run; the daemon logs when every task was
stopped and when it began to let them go), and every signal sent to it
meanwhile is delivered afterwards, exactly once (the sigcount victim).

Four tests read the daemon's debug log, because what they hold it to
happens inside the daemon and shows nowhere else: the window in which it
believes every task stopped (compared with the tasks' own clocks), the
pause's phases (the lines bench/ab reads), how many threads were scanned
(a thread born during the seizes and never held runs on, and nothing the
victim does can show it), and how many were checked as each stopped
rather than after the last one (the same checks, only sooner).  The
sentences they match are the engine's LOG_DEBUG lines, as the regexes
below spell them.
"""

import os
import re
import signal
import subprocess
import threading
import time

import pytest

from btg.daemon import faulty_daemon, guard_during_hold, guard_during_seize_hold, guard_ok
from btg.paths import SETTLE_TIMEOUT
from btg.procfs import thread_problems, wait_threads_running
from btg.victims import start, victim_path
from btg.wire import ACTION_GUARD, ACTION_UNGUARD, Wire

HELD = re.compile(r"process (\d+): every task stopped from (\d+)\.(\d+) to (\d+)\.(\d+)")
PHASES = re.compile(r"process (\d+): paused (\d+) us: seizing (\d+), stopping and checking (\d+), "
                    r"held (\d+), detaching (\d+)")


def held_windows(log, pid):
    """[(all stopped, first resume)] in ns, from the daemon's debug log."""
    out = []
    for m in HELD.finditer(log):
        if int(m.group(1)) == pid:
            out.append((int(m.group(2)) * 10**9 + int(m.group(3)),
                        int(m.group(4)) * 10**9 + int(m.group(5))))
    return out


def read_gaps(v):
    """{task index: (tid, [(start, end)])} from stamper's report, the
    gap still under way included."""
    os.kill(v.pid, signal.SIGUSR1)
    tasks, buf = {}, b""
    deadline = time.monotonic() + SETTLE_TIMEOUT
    while not buf.endswith(b"end\n"):
        assert time.monotonic() < deadline, f"stamper did not report: {buf[-200:]!r}"
        buf += os.read(v.proc.stdout.fileno(), 1 << 20)
    for line in buf.decode().splitlines():
        if line.startswith("gaps "):
            _, idx, tid, last, *gaps = line.split()
            gaps = [tuple(map(int, g.split(":"))) for g in gaps]
            # Not run since its latest reading: a gap under way, up to now.
            gaps.append((int(last), 2**63))
            tasks[int(idx)] = (int(tid), gaps)
    return tasks


@pytest.mark.parametrize("sibling", [False, True], ids=["threads", "threads+clone_vm_sibling"])
def test_every_task_is_stopped_while_held(victim, sibling):
    """The daemon holds each stopped world 20 ms (the fault seam's hold), so
    a task it failed to stop gets a CPU in the window for sure, and stamps."""
    v = victim("stamper", 6, *(["--sibling"] if sibling else []))
    with faulty_daemon("hold-ms=20") as daemon:
        with Wire(daemon.socket) as w:
            for cycle in range(5):
                for action in (ACTION_GUARD, ACTION_UNGUARD):
                    [res] = w.request(action, [v.pid], deadline_ms=5000)
                    assert res.error == 0, res
        windows = held_windows(daemon.log(), v.pid)
    assert len(windows) == 10, windows
    assert all(b - a >= 20 * 10**6 for a, b in windows), windows
    tasks = read_gaps(v)
    assert len(tasks) == 6 + 1 + sibling, tasks.keys()
    bad = []
    for idx, (tid, gaps) in tasks.items():
        for k, (a, b) in enumerate(windows):
            if not any(s <= a and e >= b for s, e in gaps):
                near = [(s - a, e - a) for s, e in gaps if e >= a - 10**6 and s <= b + 10**6]
                bad.append(f"task {idx} (tid {tid}) ran while every task was held (window {k}, "
                           f"{b - a} ns; its gaps nearby, from the start: {near}; "
                           f"{len(gaps)} gaps from {gaps[0][0] - a if gaps else None} "
                           f"to {gaps[-1][1] - a if gaps else None})")
    assert not bad, "\n".join(bad)
    v.assert_alive()
    wait_threads_running(v.pid)


def test_the_pause_is_logged_by_phase(victim):
    """The debug log splits each pause into its phases (bench/ab sets them
    beside ptfloor's): they add up to the pause the reply carries, and the
    fault seam's 20 ms hold, which comes once every task has stopped, lands
    in the held phase and nowhere else."""
    v = victim("idle", 4)
    with faulty_daemon("hold-ms=20") as daemon:
        with Wire(daemon.socket) as w:
            replies = [w.request(action, [v.pid], deadline_ms=5000)[0]
                       for action in (ACTION_GUARD, ACTION_UNGUARD)]
        log = daemon.log()
    assert all(r.error == 0 for r in replies), replies
    phases = [tuple(map(int, m.groups()[1:])) for m in PHASES.finditer(log)
              if int(m.group(1)) == v.pid]
    assert [p[0] for p in phases] == [r.pause_us for r in replies], (phases, replies)
    for pause, seizing, stopping, held, detaching in phases:
        # Each phase is rounded down to a microsecond on its own.
        assert 0 <= pause - (seizing + stopping + held + detaching) <= 4, phases
        assert held >= 20000 and seizing + stopping + detaching < 20000, phases


def test_a_thread_born_while_the_daemon_seizes_is_held(victim):
    """A thread not yet seized may start another, which the listing the
    seizes work from does not hold: the daemon must list again and hold it
    too.  The fault build holds the daemon before its second seize (the
    main thread is seized first, then the others in TID order), and the
    victim's last thread starts one more then.  A machine too loaded to
    start it within the hold may miss the window: a few tries, one must
    take it (a daemon that never lists again never does)."""
    for attempt in range(3):
        v = start(victim, [victim_path("idle"), 3, "--thread-on-usr1"], "idle-spawner")

        def spawn():
            os.kill(v.pid, signal.SIGUSR1)
            v.lines.until(lambda line: line == "born")

        res, log = guard_during_seize_hold(v.pid, 2, spawn)
        assert res["ok"] and res["state"] == "guarded", res
        # main, its 3 threads and the one born meanwhile: each stopped and checked.
        assert len(os.listdir(f"/proc/{v.pid}/task")) == 5
        v.assert_alive()
        wait_threads_running(v.pid)
        if f"process {v.pid}: 5 threads scanned" in log:
            return
    pytest.fail(f"the thread born during the seizes was never held:\n{log[-3000:]}")


def report_counts(v):
    v.proc.stdin.write(b"report\n")
    v.proc.stdin.flush()
    line = v.proc.stdout.readline().decode().split()
    return dict(zip(line[0::2], map(int, line[1::2])))


def test_signals_sent_while_held_are_delivered_once(victim):
    v = victim("sigcount", 2, stdin=True)
    with faulty_daemon("hold-ms=600") as d:
        ctl = subprocess.Popen([str(d.client_path(None)), "--socket", d.socket, "guard",
                                str(v.pid)], stdout=subprocess.PIPE, text=True)
        deadline = time.monotonic() + SETTLE_TIMEOUT
        while len(thread_problems(v.pid)) < 3:
            assert time.monotonic() < deadline, "the daemon never held the victim"
            time.sleep(0.005)
        os.kill(v.pid, signal.SIGUSR2)
        os.kill(v.pid, signal.SIGWINCH)
        for _ in range(3):
            os.kill(v.pid, signal.SIGRTMIN + 1)
        assert len(thread_problems(v.pid)) == 3, "released before every signal was sent"
        out, _ = ctl.communicate(timeout=30)
        assert ctl.returncode == 0, out
    wait_threads_running(v.pid)
    deadline = time.monotonic() + SETTLE_TIMEOUT
    while (counts := report_counts(v)) != {"usr2": 1, "winch": 1, "rt": 3}:
        assert time.monotonic() < deadline, counts
        time.sleep(0.05)
    v.assert_alive()


def test_signals_racing_the_stop_are_not_lost(daemon, victim):
    """Signals that arrive between the seize and the stop are taken in a
    signal-delivery-stop, and only the daemon can deliver them again."""
    v = victim("sigcount", 4, stdin=True)
    sent = 0
    done = threading.Event()

    def send():
        nonlocal sent
        while not done.is_set():
            os.kill(v.pid, signal.SIGRTMIN + 1)
            sent += 1
            time.sleep(0.0002)

    sender = threading.Thread(target=send)
    sender.start()
    try:
        with Wire(daemon.socket) as w:
            for cycle in range(300):
                for action in (ACTION_GUARD, ACTION_UNGUARD):
                    [res] = w.request(action, [v.pid], deadline_ms=5000)
                    assert res.error == 0, res
    finally:
        done.set()
        sender.join()
    deadline = time.monotonic() + SETTLE_TIMEOUT
    while (got := report_counts(v)["rt"]) != sent:
        assert got < sent, f"{got} deliveries of {sent} signals"
        assert time.monotonic() < deadline, f"{sent - got} of {sent} signals lost"
        time.sleep(0.05)
    v.assert_alive()


def test_a_signal_taken_between_seize_and_interrupt_is_delivered(victim):
    """The same race made certain: the fault build holds the daemon after
    the first thread's PTRACE_SEIZE and before its PTRACE_INTERRUPT, and a
    real-time signal sent to the process then goes to that thread (the main
    one, seized first: the lowest TID), which is traced and running, so it
    stops in a signal-delivery-stop.  The daemon must deliver the signal when
    it lets the thread go: the victim counts it exactly once."""
    v = victim("sigcount", 2, stdin=True)
    assert report_counts(v)["rt"] == 0
    res, log = guard_during_hold(v.pid, "interrupt-hold=1,interrupt-hold-ms=150",
                                 "holding before interrupt #1",
                                 lambda: os.kill(v.pid, signal.SIGRTMIN + 1))
    assert res["ok"] and res["state"] == "guarded", res
    deadline = time.monotonic() + SETTLE_TIMEOUT
    while (got := report_counts(v)["rt"]) != 1:
        assert got == 0, f"{got} deliveries of one signal"
        assert time.monotonic() < deadline, f"the signal was lost:\n{log[-3000:]}"
        time.sleep(0.05)
    assert thread_problems(v.pid) == []
    v.assert_alive()


CHECKED = re.compile(r"process (\d+): (\d+) threads scanned \(\d+ stack bytes\), \d+ also walked, "
                     r"(\d+) of them as soon as they stopped")


def test_each_thread_is_checked_as_soon_as_it_stops(daemon, victim):
    """The activeness check of a thread runs the moment that thread stops
    (while later ones are still stopping), not after the last one did: every
    thread of an idle process is checked through the stop's hook."""
    v = victim("idle", 7)
    guard_ok(daemon, v.pid)
    found = [m for m in CHECKED.finditer(daemon.log()) if int(m.group(1)) == v.pid]
    assert found, daemon.log()[-3000:]
    scanned, early = int(found[-1].group(2)), int(found[-1].group(3))
    assert scanned == 8 and early == scanned, found[-1].group(0)
