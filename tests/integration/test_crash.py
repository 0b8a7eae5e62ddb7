# SPDX-License-Identifier: MIT
"""The crash btguard exists for, end to end.

Two victims, each proven real before it proves anything: unguarded, both
die of SIGSEGV inside backtrace() on every run.  Paused (idle, before the
fatal backtrace()), guarded through the real daemon and client, then
released, both finish cleanly:

  * build/victims/coro_crash: a deterministic C reproducer of the greenlet
    stack-slice bug (see its header comment); guarded it prints "frames 0";
  * tests/workloads/torch_greenlet.py: Debian's torch raising shape errors
    inside gevent tasks and plain greenlets; guarded, every error arrives
    as a RuntimeError with torch's message, also with 24 intra-op threads.

Core dumps are switched off in the victims (RLIMIT_CORE 0): a CI machine
with `ulimit -c unlimited` would otherwise collect one per crash.
"""

import os
import resource
import select
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from btg.paths import REPO, STOP_TIMEOUT, VICTIMS
from btg.procfs import wait_threads_running
from btg.victims import stop_started

PYTHON = "/usr/bin/python3"          # Debian's, where python3-torch lives
WORKLOAD = REPO / "tests" / "workloads" / "torch_greenlet.py"
CORO_CRASH = VICTIMS / "coro_crash"
# Importing torch on a loaded 2-core machine can take a while.
PAUSE_TIMEOUT = 90.0
RUN_TIMEOUT = 180.0
UNGUARDED_RUNS = 5
TORCH_RUNS_PER_MODE = 3
# 2 modes x 4 tasks x 5 rounds, the workload's defaults.
TORCH_ERRORS = 40
TORCH_FIRST = "first RuntimeError: mat1 and mat2 shapes cannot be multiplied (2x3 and 4x5)"


def _no_core():
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def coro_argv(*args):
    if not CORO_CRASH.exists():
        pytest.fail(f"{CORO_CRASH} missing: run `make victims`")
    return [str(CORO_CRASH), *map(str, args)]


def torch_argv(*args):
    return [PYTHON, str(WORKLOAD), *map(str, args)]


def run_to_end(argv):
    """Runs a victim unpaused; returns the CompletedProcess."""
    return subprocess.run(argv, stdin=subprocess.DEVNULL, capture_output=True,
                          text=True, timeout=RUN_TIMEOUT, preexec_fn=_no_core)


class Paused:
    """A victim started with --pause-file and seen waiting at it."""

    def __init__(self, proc, pause_file, seen):
        self.proc = proc
        self.pid = proc.pid
        self.pause_file = pause_file
        self.seen = seen

    def release(self):
        """Creates the pause file; returns (status, whole stdout, stderr)."""
        self.pause_file.touch()
        out, err = self.proc.communicate(timeout=RUN_TIMEOUT)
        return self.proc.returncode, (self.seen + out).decode(), err.decode()


class Starter:
    """Starts paused victims and remembers them, so teardown kills those
    PIDs and nothing else."""

    def __init__(self):
        self.procs = []
        self.dir = tempfile.mkdtemp(prefix="btg-crash-")

    def __call__(self, argv):
        pause_file = os.path.join(self.dir, f"go-{len(self.procs)}")
        proc = subprocess.Popen(argv + ["--pause-file", pause_file],
                                stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                stderr=subprocess.PIPE, preexec_fn=_no_core)
        self.procs.append(proc)
        seen = b""
        deadline = time.monotonic() + PAUSE_TIMEOUT
        while b"paused\n" not in seen:
            left = deadline - time.monotonic()
            if left <= 0 or proc.poll() is not None:
                # Read stderr only from an exited process: a live one
                # would block the read.
                err = proc.stderr.read() if proc.poll() is not None else b"(still running)"
                pytest.fail(f"{argv} never paused (stdout {seen!r}, "
                            f"status {proc.poll()}, stderr {err!r})")
            ready, _, _ = select.select([proc.stdout], [], [], min(left, 0.5))
            if ready:
                chunk = os.read(proc.stdout.fileno(), 4096)
                if not chunk:               # stdout closed: it is exiting
                    proc.wait(timeout=STOP_TIMEOUT)
                seen += chunk
        return Paused(proc, Path(pause_file), seen)

    def cleanup(self):
        for proc in self.procs:
            stop_started(proc)
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture
def paused():
    starter = Starter()
    try:
        yield starter
    finally:
        starter.cleanup()


def assert_sigsegv(rc, out, err, what):
    assert rc == -signal.SIGSEGV, \
        f"{what}: wanted death by SIGSEGV, got status {rc}\nstdout: {out}\nstderr: {err}"


def guard(daemon, pid, at_risk=False):
    """Guards PID through btguardctl; checks the reply and the status after.

    at_risk: the process maps torch's c10 and greenlet, so the report must
    call it at risk before (status exits 4) and covered after.
    """
    before = daemon.ctl("status", pid, check=4 if at_risk else 0).results
    assert [r["state"] for r in before] == ["unguarded"], before
    assert before[0]["risk"] == ("at-risk" if at_risk else "none"), before
    res = daemon.ctl("guard", pid, check=0).results
    assert len(res) == 1 and res[0]["pid"] == pid, res
    assert res[0]["ok"] is True and res[0]["state"] == "guarded", res
    assert res[0]["wrote"] is True and res[0]["pause_us"] > 0, res
    assert any(s["object"].endswith("/libc.so.6") and s["state"] == "guarded"
               for s in res[0]["sites"]), res
    after = daemon.ctl("status", pid, check=0).results
    assert [r["state"] for r in after] == ["guarded"], after
    assert after[0]["risk"] == ("covered" if at_risk else "none"), after
    wait_threads_running(pid)
    return res[0]


def thread_count(pid):
    return len(os.listdir(f"/proc/{pid}/task"))


# ---------------------------------------------------------- coro_crash --

def test_coro_crash_unguarded_dies_every_time():
    for i in range(UNGUARDED_RUNS):
        p = run_to_end(coro_argv())
        assert_sigsegv(p.returncode, p.stdout, p.stderr, f"coro_crash run {i + 1}")
        assert "frames" not in p.stdout, p.stdout


def test_coro_crash_paused_unguarded_still_dies(paused):
    """The pause itself changes nothing: released unguarded, it crashes."""
    v = paused(coro_argv("--threads", 4))
    rc, out, err = v.release()
    assert_sigsegv(rc, out, err, "paused coro_crash")


def test_coro_crash_guarded_while_paused_survives(daemon, paused):
    v = paused(coro_argv("--threads", 4))
    assert thread_count(v.pid) == 5
    guard(daemon, v.pid)
    rc, out, err = v.release()
    assert rc == 0, f"guarded coro_crash exited {rc}\nstdout: {out}\nstderr: {err}"
    assert out.splitlines() == ["paused", "frames 0"], out


# --------------------------------------------------------------- torch --

@pytest.mark.parametrize("mode", ["gevent", "greenlet"])
def test_torch_unguarded_dies_every_time(mode):
    # Deterministic here (30 of 30 runs per mode crashed), so every run
    # must crash; a survivor means the workload no longer tests anything.
    for i in range(TORCH_RUNS_PER_MODE):
        p = run_to_end(torch_argv("--mode", mode))
        assert_sigsegv(p.returncode, p.stdout, p.stderr, f"torch {mode} run {i + 1}")
        assert "errors" not in p.stdout, p.stdout


def test_torch_paused_unguarded_still_dies(paused):
    v = paused(torch_argv("--threads", 24))
    rc, out, err = v.release()
    assert_sigsegv(rc, out, err, "paused torch workload")


@pytest.mark.parametrize("threads", [0, 24])
def test_torch_guarded_while_paused_survives(daemon, paused, threads):
    v = paused(torch_argv("--threads", threads) if threads else torch_argv())
    if threads:
        # OpenMP's pool plus OpenBLAS's: dozens of threads to stop.
        assert thread_count(v.pid) >= threads, thread_count(v.pid)
    res = guard(daemon, v.pid, at_risk=True)
    rc, out, err = v.release()
    assert rc == 0, f"guarded workload exited {rc} (pause {res['pause_us']} us)\n" \
                    f"stdout: {out}\nstderr: {err}"
    # The empty stub: no C++ frame in any message (cpp frames 0 0).
    assert out.splitlines() == ["paused", TORCH_FIRST, "cpp frames 0 0",
                                f"errors {TORCH_ERRORS} ok"], out
    assert err == "", err
