# SPDX-License-Identifier: MIT
"""Starting victims and reading what they report; teardown kills exactly
what a test started, by PID.
"""

import collections
import os
import select
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from .paths import REPORT_TIMEOUT, START_TIMEOUT, STOP_TIMEOUT, VICTIMS
from .procfs import proc_state, process_alive, task_states, wait_for


# greenlet's extension as Debian's python3-greenlet names it.
GREENLET_SO = "_greenlet.cpython-311-x86_64-linux-gnu.so"

Report = collections.namedtuple("Report", "seq threads")


ThreadReport = collections.namedtuple(
    "ThreadReport",
    "idx tid calls zero nonzero zstreak nzstreak last max recentmax")


def read_report(path):
    """Parses bt_loop's report file; None when absent or incomplete."""
    try:
        with open(path) as f:
            lines = f.read().splitlines()
    except FileNotFoundError:
        return None
    seq, threads = None, []
    for line in lines:
        parts = line.split()
        if parts[:1] == ["seq"] and len(parts) == 2:
            seq = int(parts[1])
        elif parts[:1] == ["thread"] and len(parts) == 11:
            threads.append(ThreadReport(*(int(x) for x in parts[1:])))
        else:
            return None
    if seq is None or not threads:
        return None
    return Report(seq, threads)


def wait_report(path, pred, what, timeout=REPORT_TIMEOUT, alive=None):
    """Polls the report until pred(report) holds; fails with the last one."""
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        if alive is not None:
            alive()
        rep = read_report(path)
        if rep is not None:
            last = rep
            if pred(rep):
                return rep
        time.sleep(0.05)
    pytest.fail(f"timed out waiting for {what}; last report: {last}")


STREAK = 200                    # consecutive calls that prove a steady state


def wait_behaviour(v, zero):
    """Every backtrace() call that starts from now on returns 0 (zero=True)
    or real frames (zero=False): each thread first shows a long streak,
    then a later report must add no call with the other outcome."""
    streak = (lambda t: t.zstreak >= STREAK) if zero else (lambda t: t.nzstreak >= STREAK)
    what = "0 frames" if zero else "real frames"
    first = wait_report(v.report, lambda r: all(streak(t) for t in r.threads),
                        f"every thread's backtrace() to return {what}", alive=v.assert_alive)
    base = wait_report(v.report, lambda r: r.seq > first.seq, "a later report",
                       alive=v.assert_alive)
    later = wait_report(v.report,
                        lambda r: all(t.calls >= b.calls + STREAK
                                      for t, b in zip(r.threads, base.threads)),
                        "every thread to keep calling backtrace()", alive=v.assert_alive)
    for t, b in zip(later.threads, base.threads):
        if zero:
            assert t.nonzero == b.nonzero and t.last == 0, \
                f"thread {t.idx} got frames while guarded: {b} -> {t}"
        else:
            assert t.zero == b.zero and t.last > 0, \
                f"thread {t.idx} got 0 frames while unguarded: {b} -> {t}"
    return later


def stop_started(proc):
    """Kills a process this test session started (by its PID) and reaps it."""
    if proc.poll() is None:
        try:
            os.kill(proc.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
    try:
        proc.communicate(timeout=STOP_TIMEOUT)
    except (subprocess.TimeoutExpired, ValueError):
        pass


class Victim:
    def __init__(self, proc, name, report):
        self.proc = proc
        self.pid = proc.pid
        self.name = name
        self.report = report

    def assert_alive(self):
        rc = self.proc.poll()
        assert rc is None, f"victim {self.name} ({self.pid}) died: status {rc}"
        assert process_alive(self.pid), \
            f"victim {self.name} ({self.pid}) is {proc_state(self.pid)}"


def _wait_ready(proc, name, timeout=START_TIMEOUT):
    deadline = time.monotonic() + timeout
    buf = b""
    fd = proc.stdout.fileno()
    while b"ready\n" not in buf:
        left = deadline - time.monotonic()
        if left <= 0:
            break
        r, _, _ = select.select([fd], [], [], min(left, 0.5))
        if r:
            chunk = os.read(fd, 4096)
            if not chunk:
                break
            buf += chunk
        elif proc.poll() is not None:
            break
    if b"ready\n" not in buf:
        proc.kill()
        proc.wait()
        pytest.fail(f"victim {name} never said ready (got {buf!r}, "
                    f"status {proc.returncode})")


def user_prefix(user):
    """Command prefix that drops to (uid, gid) without forking."""
    if user is None:
        return []
    uid, gid = user
    return ["setpriv", f"--reuid={uid}", f"--regid={gid}", "--clear-groups"]


class VictimFactory:
    """Starts victims and remembers them so teardown kills only those."""

    def __init__(self):
        self.victims = []
        self.dir = Path(tempfile.mkdtemp(prefix="btg-victims-"))
        os.chmod(self.dir, 0o755)

    def path(self, name):
        p = VICTIMS / name
        if not p.exists():
            pytest.fail(f"victim {p} missing: run `make victims`")
        return p

    def public_copy(self, name):
        """A copy in a world-traversable dir, for victims run as another user
        (an unreadable binary would also make the process non-dumpable)."""
        dst = self.dir / name
        if not dst.exists():
            shutil.copy(self.path(name), dst)
            os.chmod(dst, 0o755)
        return dst

    def __call__(self, name, *args, env=None, user=None, report=False, stdin=False):
        exe = self.public_copy(name) if user is not None else self.path(name)
        argv = [str(exe), *map(str, args)]
        report_path = None
        if report:
            report_path = self.dir / f"{name}-{len(self.victims)}.report"
            argv += ["--report", str(report_path)]
            if user is not None:
                # The victim (another user) writes its report here.
                os.chmod(self.dir, 0o777)
        full_env = dict(os.environ)
        if env:
            full_env.update(env)
        proc = subprocess.Popen(user_prefix(user) + argv,
                                stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
                                stdout=subprocess.PIPE, env=full_env)
        self.victims.append(proc)
        _wait_ready(proc, name)
        return Victim(proc, name, report_path)

    def bt_loop(self, nthreads=16, **kw):
        """bt_loop with a report file, waited until the first report exists."""
        v = self("bt_loop", nthreads, report=True, **kw)
        wait_report(v.report, lambda r: len(r.threads) == nthreads,
                    "bt_loop's first report")
        return v

    def cleanup(self):
        for proc in self.victims:
            stop_started(proc)
        shutil.rmtree(self.dir, ignore_errors=True)


TEST_USER = "btguard-test-user"


class Lines:
    """Line reader over a process's stdout pipe, every read bounded."""

    def __init__(self, proc):
        self.proc = proc
        self.buf = b""
        self.seen = []

    def next(self, timeout=START_TIMEOUT):
        """The next line (without newline); fails after timeout or at EOF."""
        deadline = time.monotonic() + timeout
        fd = self.proc.stdout.fileno()
        while b"\n" not in self.buf:
            left = deadline - time.monotonic()
            if left <= 0:
                pytest.fail(f"no output line within {timeout}s; so far {self.seen}")
            r, _, _ = select.select([fd], [], [], min(left, 0.5))
            if r:
                chunk = os.read(fd, 4096)
                if not chunk:
                    pytest.fail(f"output ended (status {self.proc.poll()}); "
                                f"so far {self.seen}")
                self.buf += chunk
        line, self.buf = self.buf.split(b"\n", 1)
        text = line.decode(errors="replace")
        self.seen.append(text)
        return text

    def until(self, pred, timeout=START_TIMEOUT):
        """Lines up to and including the first for which pred holds."""
        deadline = time.monotonic() + timeout
        got = []
        while True:
            got.append(self.next(max(0.1, deadline - time.monotonic())))
            if pred(got[-1]):
                return got


def start(factory, argv, name, env=None, stdin=False, report=None, nthreads=None):
    """Starts argv as a victim and waits for its "ready" line.

    Returns the Victim with `.lines` (a Lines reader) and
    `.before` (the lines printed before "ready").  With report=True a
    report path is allocated and passed as "--report PATH"; with nthreads
    the first complete bt_loop report is awaited too.
    """
    argv = [str(a) for a in argv]
    report_path = None
    if report:
        report_path = factory.dir / f"{name}-{len(factory.victims)}.report"
        argv += ["--report", str(report_path)]
    full_env = dict(os.environ)
    if env:
        full_env.update(env)
    proc = subprocess.Popen(argv, stdin=subprocess.PIPE if stdin else subprocess.DEVNULL,
                            stdout=subprocess.PIPE, env=full_env)
    factory.victims.append(proc)
    v = Victim(proc, name, report_path)
    v.lines = Lines(proc)
    v.before = v.lines.until(lambda line: line == "ready")[:-1]
    if nthreads is not None:
        wait_report(report_path, lambda r: len(r.threads) == nthreads,
                    f"{name}'s first report", alive=v.assert_alive)
    return v


def victim_path(name):
    p = VICTIMS / name
    if not p.exists():
        pytest.fail(f"victim {p} missing: run `make victims`")
    return p


def kill_pid(pid):
    """SIGKILL a process the test itself started (a victim's child)."""
    try:
        os.kill(pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


# A process with a thread in uninterruptible sleep for as long as nobody
# opens the FIFO in argv[1]: posix_spawn's CLONE_VFORK parent waits in D
# state while the child blocks opening it.  The daemon never seizes such a
# process, so a guard of it retries until its deadline - a long operation
# with no test hook in the daemon.
# "ready" comes first: os.posix_spawn keeps the GIL while it waits.
D_TARGET = r"""
import os, sys, threading, time
def spawner():
    os.posix_spawn("/bin/true", ["true"], {},
                   file_actions=[(os.POSIX_SPAWN_OPEN, 0, sys.argv[1], os.O_RDONLY, 0)])
print("ready", flush=True)
threading.Thread(target=spawner, daemon=True).start()
while True:
    time.sleep(60)
"""


def vforker_in_d_state(factory):
    """vforker with one thread blocked in vfork(), in uninterruptible sleep
    until the gate file appears.  Returns (victim, that thread's TID, gate)."""
    gate = factory.dir / "vfork-gate"
    v = start(factory, [victim_path("vforker"), gate, 1], "vforker", report=True, nthreads=1)
    lines = v.before if any(x.startswith("vfork ") for x in v.before) else \
        v.lines.until(lambda x: x.startswith("vfork "))
    stuck = int(next(x for x in lines if x.startswith("vfork ")).split()[1])
    wait_for(lambda: task_states(v.pid).get(stuck, ("?",))[0] == "D",
             f"thread {stuck} to block in vfork", timeout=10)
    return v, stuck, gate
