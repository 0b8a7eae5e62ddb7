# SPDX-License-Identifier: MIT
"""Targets in awkward states.

- job-control stopped (SIGSTOP) -- guarded, and still stopped after;
- already traced (strace) -- "traced" naming the tracer, which keeps working;
- exiting, exec'ing, and thread storms -- a precise reply, nothing stopped;
- a thread in uninterruptible sleep (a vfork parent) -- "busy" at the
  deadline, the rest of the process untouched;
- 1,000 threads -- guarded within the deadline.
"""

import collections
import os
import shutil
import signal
import subprocess
import threading
import time

import pytest

from btg.daemon import guard_ok, one, unguard_ok
from btg.paths import CPU_CGROUP_V1
from btg.procfs import read_mem, task_states, wait_for, wait_threads_running
from btg.sites import SITE_LEN, assert_original, assert_stub, expected_site
from btg.victims import (read_report, start, vforker_in_d_state, victim_path, wait_behaviour,
                         wait_report)
from btg.wire import (ACTION_GUARD, ACTION_UNGUARD, ERR_NAMES, PROC_GUARDED, PROC_UNGUARDED,
                      PROC_UNKNOWN, RESULT_WROTE, Wire)

NTHREADS = 4


def error_name(code):
    if code == 0:
        return "ok"
    if code >= 4096 and code - 4096 < len(ERR_NAMES):
        return ERR_NAMES[code - 4096]
    return f"errno {code}"


def bt_loop(victim, n=NTHREADS):
    return start(victim, [victim_path("bt_loop"), n], "bt_loop", report=True, nthreads=n)


# ------------------------------------------------ stopped by job control --

def all_job_stopped(pid):
    return all(s == ("T", 0) for s in task_states(pid).values())


def assert_still_job_stopped(v, frozen):
    """Every thread is back in its job-control stop (after a detach the
    kernel re-enters the stop within moments: a thread may show "R" for a
    few ms on its way there, in the kernel) and no user code ran since."""
    wait_for(lambda: all_job_stopped(v.pid), "every thread back in its job stop", timeout=5)
    time.sleep(0.3)
    states = task_states(v.pid)
    assert len(states) == NTHREADS + 2 and all_job_stopped(v.pid), states
    assert read_report(v.report).seq == frozen.seq, "the stopped victim ran"


def while_stopped(daemon, v, action, addr, before):
    """SIGSTOP, then guard/unguard.  A thread may have been stopped inside
    the very bytes to change (bt_loop calls backtrace() nonstop): then the
    precise answer is "busy", nothing written, still stopped -- and after a
    SIGCONT the next try gets a new chance."""
    for attempt in range(10):
        os.kill(v.pid, signal.SIGSTOP)
        wait_for(lambda: all_job_stopped(v.pid), "every thread to be job-stopped", timeout=10)
        time.sleep(0.1)   # a report already being written lands first
        frozen = read_report(v.report)
        r = daemon.ctl("--deadline", 1000, action, v.pid)
        res = one(r, v.pid, action)
        if res["ok"]:
            assert r.rc == 0 and res["wrote"] is True and res["pause_us"] > 0, res
            assert_still_job_stopped(v, frozen)
            return attempt
        assert res["error"] == "busy" and "inside the bytes" in res["message"], res
        assert res["wrote"] is False and read_mem(v.pid, addr, SITE_LEN) == before, res
        assert_still_job_stopped(v, frozen)
        os.kill(v.pid, signal.SIGCONT)
        wait_threads_running(v.pid)
    pytest.fail(f"{action} of the stopped process was busy 10 times")


def test_job_control_stopped_stays_stopped(daemon, victim):
    v = bt_loop(victim)
    addr = expected_site(v.pid)
    original = read_mem(v.pid, addr, SITE_LEN)

    busy = while_stopped(daemon, v, "guard", addr, original)
    assert_stub(v.pid, addr, original)
    os.kill(v.pid, signal.SIGCONT)
    wait_threads_running(v.pid)
    wait_behaviour(v, zero=True)

    busy += while_stopped(daemon, v, "unguard", addr, read_mem(v.pid, addr, SITE_LEN))
    assert_original(v.pid, addr, original)
    os.kill(v.pid, signal.SIGCONT)
    wait_threads_running(v.pid)
    wait_behaviour(v, zero=False)
    print(f"job-stopped: {busy} busy answer(s) before success")


# --------------------------------------------- traced by another process --

def lines_in(path):
    try:
        with open(path) as f:
            return sum(1 for _ in f)
    except FileNotFoundError:
        return 0


def test_already_traced_by_strace(daemon, victim):
    strace = shutil.which("strace")
    if strace is None:
        pytest.skip("strace not installed (tests/install-deps should list it)")
    v = bt_loop(victim, 2)
    addr = expected_site(v.pid)
    original = read_mem(v.pid, addr, SITE_LEN)
    log = victim.dir / "strace.out"
    # bt_loop's reporter renames its report every 50 ms: a steady trickle.
    tracer = subprocess.Popen([strace, "-f", "-qq", "-e", "trace=rename", "-o", str(log),
                               "-p", str(v.pid)], stdin=subprocess.DEVNULL,
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    victim.victims.append(tracer)
    wait_for(lambda: all(s[1] == tracer.pid for s in task_states(v.pid).values()),
             "strace to attach every thread", timeout=20)
    wait_for(lambda: lines_in(log) > 0, "strace's first line", timeout=20)

    for action in ("guard", "unguard", "guard"):
        res = one(daemon.ctl("--deadline", 2000, action, v.pid, check=1), v.pid, action)
        assert res["ok"] is False and res["error"] == "traced", res
        assert res["wrote"] is False and str(tracer.pid) in res["message"], res
    # status only reads, so it still works.
    res = one(daemon.ctl("status", v.pid, check=0), v.pid, "status")
    assert res["state"] == "unguarded", res
    assert_original(v.pid, addr, original)

    # The tracer's session is undisturbed: still attached to every thread,
    # still seeing system calls.
    assert tracer.poll() is None
    assert all(s[1] == tracer.pid for s in task_states(v.pid).values()), task_states(v.pid)
    seen = lines_in(log)
    wait_for(lambda: lines_in(log) >= seen + 3, "strace to keep tracing", timeout=20)

    tracer.send_signal(signal.SIGINT)   # strace detaches and exits
    tracer.wait(timeout=20)
    wait_threads_running(v.pid)
    guard_ok(daemon, v.pid, nsites=1)
    assert_stub(v.pid, addr, original)
    wait_behaviour(v, zero=True)


# -------------------------------- exits, execs and threads mid-operation --

def hammer(daemon, pid, until, allowed, stop=lambda name: False):
    """Alternating guard/unguard on one connection until `until` seconds
    pass or stop(error name) holds; every reply must be in `allowed`."""
    counts = collections.Counter()
    end = time.monotonic() + until
    with Wire(daemon.socket, timeout=60) as w:
        action = ACTION_GUARD
        while time.monotonic() < end:
            [res] = w.request(action, [pid], deadline_ms=2000)
            name = error_name(res.error)
            assert res.pid == pid and res.action == action, res
            assert name in allowed, f"unexpected reply {name}: {res}"
            if name == "ok":
                # The state said is the one reached; if the process moved
                # on before it could be read back, "unknown", never the
                # state it was in before the write.
                want = PROC_GUARDED if action == ACTION_GUARD else PROC_UNGUARDED
                assert res.state in (want, PROC_UNKNOWN), f"ok but state {res.state}: {res}"
            else:
                assert not res.flags & RESULT_WROTE, res
                assert res.message, res
            counts[name] += 1
            if stop(name):
                break
            action = ACTION_UNGUARD if action == ACTION_GUARD else ACTION_GUARD
    return counts


def test_target_exits_during_operation(daemon, victim):
    """Processes whose 8 busy threads exit_group at staggered moments while
    guard/unguard requests keep coming."""
    total = collections.Counter()
    for ms in (1, 5, 15, 40, 80, 150):
        v = start(victim, [victim_path("churn"), "exit", ms, 8], f"churn-exit-{ms}")
        # no-site: caught while exit_group was tearing the mappings down.
        counts = hammer(daemon, v.pid, 20,
                        {"ok", "busy", "gone", "zombie", "no-process", "no-site"},
                        stop=lambda name: name in ("zombie", "no-process"))
        assert counts["zombie"] + counts["no-process"] == 1, counts
        # It exited by itself, normally: no thread was left stopped or
        # killed by a half-written patch.
        assert v.proc.wait(timeout=20) == 0
        res = one(daemon.ctl("guard", v.pid, check=1), v.pid, "guard")
        assert res["error"] == "no-process", res
        total += counts
    print(f"exit outcomes: {dict(total)}")
    assert total["ok"] > 0, total
    daemon.alive()


def generation(pid):
    """churn exec's GENERATION argument, or None mid-exec."""
    try:
        args = open(f"/proc/{pid}/cmdline", "rb").read().split(b"\0")
        return int(args[4])
    except (OSError, IndexError, ValueError):
        return None


def test_target_execs_during_operation(daemon, victim):
    """A process that execs itself every 15 ms.  Replies: ok, exec, busy,
    or no-site (caught while the new image's loader has not mapped libc
    yet).  And the daemon must never hold up the exec: a thread killed by
    the exec while seized stays a zombie until the daemon reaps it, and
    the exec waits for that in D state."""
    v = start(victim, [victim_path("churn"), "exec", 15, 4, 0], "churn-exec")
    samples = []
    done = threading.Event()

    def sample():
        while not done.is_set():
            samples.append((time.monotonic(), generation(v.pid)))
            time.sleep(0.005)

    sampler = threading.Thread(target=sample)
    sampler.start()
    try:
        counts = hammer(daemon, v.pid, 3, {"ok", "busy", "exec", "no-site"})
    finally:
        done.set()
        sampler.join()
    changes = [t for (t, g), (_, prev) in zip(samples[1:], samples) if g is not None and g != prev]
    longest = max(b - a for a, b in zip(changes, changes[1:]))
    print(f"exec outcomes: {dict(counts)}, {len(changes)} execs seen, "
          f"longest gap {longest * 1000:.0f} ms")
    assert len(changes) >= 20, "the victim did not keep exec'ing"
    assert longest < 1.0, f"an exec was held up for {longest:.3f}s"
    assert counts["ok"] > 0, counts
    wait_threads_running(v.pid)
    v.assert_alive()
    daemon.alive()


def storm_counts(path):
    try:
        parts = open(path).read().split()
    except FileNotFoundError:
        return None
    if len(parts) != 6:
        return None
    return dict(zip(parts[0::2], map(int, parts[1::2])))


def wait_storm(path, pred, what):
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        c = storm_counts(path)
        if c and pred(c):
            return c
        time.sleep(0.02)
    pytest.fail(f"timed out waiting for {what}; last {storm_counts(path)}")


def test_thread_storm(daemon, victim):
    """A new thread every millisecond, each calling backtrace() once."""
    v = start(victim, [victim_path("churn"), "storm"], "churn-storm", report=True)
    addr = expected_site(v.pid)
    original = read_mem(v.pid, addr, SITE_LEN)
    first = wait_storm(v.report, lambda c: c["created"] > 100, "the storm to start")
    assert first["nonzero"] > 0 and first["zero"] == 0, first

    for cycle in range(5):
        res = guard_ok(daemon, v.pid, nsites=1)
        print(f"storm guard {cycle}: pause_us={res['pause_us']}")
        assert_stub(v.pid, addr, original)
        # Threads already running when the stub went in have finished by
        # the time 100 more were created; every later one sees 0 frames.
        base = wait_storm(v.report, lambda c: c["created"] > 0, "a report")
        base = wait_storm(v.report, lambda c, b=base: c["created"] >= b["created"] + 100,
                          "100 more threads")
        later = wait_storm(v.report, lambda c, b=base: c["created"] >= b["created"] + 200,
                           "200 more threads")
        assert later["nonzero"] == base["nonzero"], (base, later)
        assert later["zero"] >= base["zero"] + 150, (base, later)

        unguard_ok(daemon, v.pid, nsites=1)
        assert_original(v.pid, addr, original)
        base = wait_storm(v.report, lambda c: c["created"] > 0, "a report")
        later = wait_storm(v.report, lambda c, b=base: c["nonzero"] >= b["nonzero"] + 100,
                           "real frames again")
        wait_threads_running(v.pid)
    v.assert_alive()
    daemon.alive()


# ------------------------------------- a thread in uninterruptible sleep --

def test_uninterruptible_thread_is_busy(daemon, victim):
    v, stuck, gate = vforker_in_d_state(victim)
    addr = expected_site(v.pid)
    original = read_mem(v.pid, addr, SITE_LEN)
    before = read_report(v.report)

    t0 = time.monotonic()
    try:
        # The client waits a little longer than the bound, so a deadline
        # that never expires fails here, by name, not as a socket timeout.
        r = daemon.ctl("--deadline", 500, "guard", v.pid, check=1, timeout=0.5 + 2.0 + 5.0)
    except subprocess.TimeoutExpired:
        pytest.fail(f"no answer {time.monotonic() - t0:.1f} s after a 500 ms deadline")
    res = one(r, v.pid, "guard")
    took = time.monotonic() - t0
    assert res["ok"] is False and res["error"] == "busy", res
    assert res["wrote"] is False and str(stuck) in res["message"], res
    # Refused by the pre-check, not by a stop that timed out on it.
    assert "uninterruptible sleep" in res["message"], res
    assert took >= 0.4, f"gave up after {took:.3f}s, before the 500 ms deadline"
    assert took < 0.5 + 2.0, f"answered {took:.3f}s after a 500 ms deadline"
    assert_original(v.pid, addr, original)
    # The rest of the process: untouched and running all along; the stuck
    # thread never seized (it could not have been released).
    states = task_states(v.pid)
    assert states[stuck][1] == 0, f"thread {stuck} was seized: {states[stuck]}"
    assert states.pop(stuck)[0] == "D", states
    assert all(s[0] not in "tT" and s[1] == 0 for s in states.values()), states
    wait_report(v.report, lambda r: r.threads[0].calls > before.threads[0].calls + 1000,
                "the worker to keep running", alive=v.assert_alive)

    gate.touch()
    wait_for(lambda: task_states(v.pid).get(stuck, ("?",))[0] != "D",
             "the vfork child to exit", timeout=10)
    guard_ok(daemon, v.pid, nsites=1)
    assert_stub(v.pid, addr, original)
    wait_threads_running(v.pid)
    wait_behaviour(v, zero=True)


# ------------------------------------------------ a thread slow to stop --

def test_thread_slow_to_stop_is_never_called_a_foreign_tracer(daemon, victim, throttled_cgroup):
    """A thread that did not stop before the deadline stays traced by the
    daemon until it stops and can be let go.  Meanwhile the daemon must not
    call itself "already traced by" anybody, and it must let the thread go.

    The worker is made slow to stop for real: SCHED_IDLE, in a cgroup
    allowed 1 ms of CPU a second, which a busy loop of the test's own
    takes first."""
    v = victim("bt_loop", 1, report=True)
    wait_report(v.report, lambda r: len(r.threads) == 1, "bt_loop's first report")
    worker = read_report(v.report).threads[0].tid
    hog = subprocess.Popen(["sh", "-c", "while :; do :; done"])
    try:
        os.sched_setscheduler(worker, os.SCHED_IDLE, os.sched_param(0))
        for tid in (hog.pid, worker):
            with open(os.path.join(throttled_cgroup, "tasks"), "w") as f:
                f.write(str(tid))
        daemon_pid = daemon.proc.pid
        # Throttling is a matter of chance at any one moment: the worker
        # may just have been given its slice.  Try until it is slow.
        for attempt in range(10):
            res = one(daemon.ctl("--deadline", 20, "guard", v.pid, check=None), v.pid, "guard")
            if not res["ok"]:
                break
            # The guard went through, but the throttled worker may not have
            # run since it was let go: an unguard meanwhile is rightly busy.
            wait_for(lambda: one(daemon.ctl("unguard", v.pid, check=None), v.pid,
                                 "unguard")["ok"], "the unguard once the worker ran", timeout=60)
            time.sleep(0.2)
        assert res.get("error") == "busy" and str(worker) in res["message"], res
        # At once: the worker is still ours, parked until it stops.
        res = one(daemon.ctl("--deadline", 20, "guard", v.pid, check=None), v.pid, "guard")
        assert f"traced by process {daemon_pid}" not in res["message"], res
        assert res.get("error") in (None, "busy"), res
        if not res["ok"]:
            assert "still being released" in res["message"] or str(worker) in res["message"], res
        assert tracer_of(v.pid, worker) in (0, daemon_pid)
    finally:
        hog.kill()
        hog.wait()
        with open(os.path.join(CPU_CGROUP_V1, "tasks"), "w") as f:
            f.write(str(worker))
    # Released once it can run, whatever the answers were.
    wait_threads_running(v.pid, timeout=30)
    v.assert_alive()
    guard_ok(daemon, v.pid, nsites=1)


def tracer_of(pid, tid):
    return task_states(pid).get(tid, ("?", 0))[1]


# ------------------------------------------------------- leader exited --

def test_main_thread_exited_is_guarded_through_the_others(daemon, victim):
    """pthread_exit() in main leaves a zombie leader and a live process."""
    v = victim("leader_exit", NTHREADS, report=True)
    wait_report(v.report, lambda r: len(r.threads) == NTHREADS, "leader_exit's first report")
    wait_for(lambda: task_states(v.pid).get(v.pid, ("?",))[0] == "Z",
             "the main thread to exit", timeout=10)
    res = one(daemon.ctl("status", v.pid, check=0), v.pid, "status")
    assert res["state"] == "unguarded" and len(res["sites"]) == 1, res
    res = guard_ok(daemon, v.pid, nsites=1)
    wait_threads_running(v.pid)
    wait_behaviour(v, zero=True)
    res = unguard_ok(daemon, v.pid, nsites=1)
    wait_threads_running(v.pid)
    wait_behaviour(v, zero=False)
    assert task_states(v.pid)[v.pid][0] == "Z"


def test_main_thread_exited_is_selected(daemon, victim):
    """A selector finds such a process too (its PID reads no executable or
    maps once the main thread has left), and its status and guard work."""
    v = victim("leader_exit", NTHREADS, report=True)
    wait_report(v.report, lambda r: len(r.threads) == NTHREADS, "leader_exit's first report")
    wait_for(lambda: task_states(v.pid).get(v.pid, ("?",))[0] == "Z",
             "the main thread to exit", timeout=10)
    exe = str(victim_path("leader_exit"))
    for sel in (["--exe", exe], ["--all"], ["--maps", "*/libc.so.6", "--exe", "leader_exit"]):
        r = daemon.ctl("status", *sel)   # --all may meet what it cannot read here: exit 1
        mine = [x for x in r.results if x.get("pid") == v.pid]
        assert len(mine) == 1, (sel, r.stdout[-3000:])
        assert mine[0]["state"] == "unguarded" and len(mine[0]["sites"]) == 1, mine
    r = daemon.ctl("guard", "--exe", exe, check=0)
    [res] = [x for x in r.results if x.get("pid") == v.pid]
    assert res["ok"] is True and res["state"] == "guarded", res
    wait_threads_running(v.pid)
    wait_behaviour(v, zero=True)
    unguard_ok(daemon, v.pid, nsites=1)
    wait_threads_running(v.pid)


# ---------------------------------------------------- a thousand threads --

def test_thousand_threads(daemon, victim):
    v = start(victim, [victim_path("idle"), 1000], "idle-1000")
    assert len(os.listdir(f"/proc/{v.pid}/task")) == 1001
    addr = expected_site(v.pid)
    original = read_mem(v.pid, addr, SITE_LEN)

    res = guard_ok(daemon, v.pid, nsites=1)
    print(f"1000 threads: guard pause_us={res['pause_us']} check_us={res['check_us']}")
    assert_stub(v.pid, addr, original)
    wait_threads_running(v.pid)
    res = unguard_ok(daemon, v.pid, nsites=1)
    print(f"1000 threads: unguard pause_us={res['pause_us']} check_us={res['check_us']}")
    assert_original(v.pid, addr, original)
    wait_threads_running(v.pid)
    assert len(os.listdir(f"/proc/{v.pid}/task")) == 1001
    v.assert_alive()
