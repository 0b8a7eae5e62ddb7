# SPDX-License-Identifier: MIT
"""Helpers for the production-target tests (test_prod_*.py).

conftest.py starts victims by name with fixed arguments; the production
cases need more: a victim started through a wrapper (unshare, the dynamic
loader, a copied binary), one that is fed commands on stdin, and output
lines after "ready".  `start` does that and registers the process with the
`victim` fixture, so teardown still kills exactly what a test started.
The rest reads what the daemon changed (site bytes) and what the victim
did (bt_loop's report), with every wait bounded.
"""

import os
import select
import signal
import subprocess
import time

import pytest

from conftest import (REPORT_TIMEOUT, START_TIMEOUT, VICTIMS, Victim, read_mem,
                      wait_behaviour, wait_report)

STUB = b"\x31\xc0\xc3"          # xor eax,eax; ret
ENDBR64 = b"\xf3\x0f\x1e\xfa"
DEADLINE_MS = 10000             # generous: the CI machine is small and noisy


# ------------------------------------------------------------ processes --

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

    Returns the conftest Victim with `.lines` (a Lines reader) and
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


def own_mapping(suffix):
    """Path of the object ending with suffix mapped by this very process
    (python links the same libc and dynamic loader as the victims)."""
    with open("/proc/self/maps") as f:
        for line in f:
            parts = line.split(None, 5)
            if len(parts) == 6 and parts[5].strip().endswith(suffix):
                return parts[5].strip()
    pytest.skip(f"{suffix} is not mapped in the test process")


def mapped_paths(pid):
    """Every path mapped executable by pid, as /proc/PID/maps spells it."""
    out = set()
    with open(f"/proc/{pid}/maps") as f:
        for line in f:
            parts = line.split(None, 5)
            if len(parts) == 6 and "x" in parts[1]:
                out.add(parts[5].strip())
    return out


def task_states(pid):
    """{tid: (state letter, TracerPid)} of every task of pid."""
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/status") as f:
                st = dict(line.rstrip("\n").split(":\t", 1) for line in f if ":\t" in line)
        except (FileNotFoundError, ProcessLookupError):
            continue
        out[int(tid)] = (st["State"].split()[0], int(st["TracerPid"]))
    return out


def wait_for(pred, what, timeout=REPORT_TIMEOUT):
    deadline = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.02)


# --------------------------------------------------------------- replies --

def one(r, pid, action):
    assert len(r.results) == 1, f"one result wanted: {r}"
    res = r.results[0]
    assert res["pid"] == pid and res["action"] == action, res
    return res


def guard_ok(daemon, pid, deadline=DEADLINE_MS, wrote=True, nsites=None, action="guard"):
    """Runs guard (or unguard) and checks the reply claims success."""
    want_state, want_site = (("guarded", "guarded") if action == "guard"
                             else ("unguarded", "original"))
    res = one(daemon.ctl("--deadline", deadline, action, pid, check=0), pid, action)
    assert res["ok"] is True and res["state"] == want_state, res
    assert res["wrote"] is wrote, res
    assert res["sites"], res
    assert all(s["state"] == want_site for s in res["sites"]), res
    if nsites is not None:
        assert len(res["sites"]) == nsites, res
    return res


def unguard_ok(daemon, pid, **kw):
    return guard_ok(daemon, pid, action="unguard", **kw)


def sites_of(res):
    """{object: address} of a reply's sites."""
    return {s["object"]: int(s["address"], 16) for s in res["sites"]}


def stub_offset(original):
    return len(ENDBR64) if original.startswith(ENDBR64) else 0


def assert_stub(pid, addr, original):
    """The site holds our stub (after an endbr64) and nothing else changed."""
    now = read_mem(pid, addr, len(original))
    off = stub_offset(original)
    assert now[off:off + len(STUB)] == STUB, \
        f"no stub at {addr:#x}: {original.hex()} -> {now.hex()}"
    assert now[:off] == original[:off] and now[off + len(STUB):] == original[off + len(STUB):], \
        f"bytes outside the stub changed at {addr:#x}: {original.hex()} -> {now.hex()}"


def assert_original(pid, addr, original):
    now = read_mem(pid, addr, len(original))
    assert now == original, f"site {addr:#x} not original: {original.hex()} -> {now.hex()}"


