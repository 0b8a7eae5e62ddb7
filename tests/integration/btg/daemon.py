# SPDX-License-Identifier: MIT
"""Starting and stopping btguardd, running btguardctl against it, and the
checks on its replies that many tests share.
"""

import collections
import contextlib
import json
import os
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import pytest

from .paths import (BTGUARDCTL, BTGUARDD, BUILD, FAULTS_BTGUARDD, SANITIZER_MARKERS,
                    START_TIMEOUT, STOP_TIMEOUT)
from .victims import user_prefix


CtlResult = collections.namedtuple("CtlResult", "rc results stdout stderr")


def wait_listening(proc, socket_path, log, timeout=START_TIMEOUT):
    """Waits (bounded) until the daemon proc accepts connections on socket_path;
    fails the test with its log if it exits or never listens."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            pytest.fail(f"btguardd exited with {proc.returncode}:\n{log()}")
        try:
            with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as s:
                s.connect(socket_path)
            return
        except (FileNotFoundError, ConnectionRefusedError):
            time.sleep(0.005)
    pytest.fail(f"btguardd did not accept connections in {timeout}s:\n{log()}")


class Daemon:
    """btguardd on a private socket.  `prefix` wraps the command (it must
    exec, so .pid stays the daemon's), e.g. setpriv to drop capabilities;
    `args` go after the daemon's own (e.g. --config PATH)."""

    def __init__(self, prefix=(), binary=BTGUARDD, env=None, args=()):
        for p in (binary, BTGUARDCTL):
            if not p.exists():
                pytest.fail(f"{p} missing: run `make` (BTGUARD_BUILD={BUILD})")
        self.dir = Path(tempfile.mkdtemp(prefix="btg-daemon-"))
        # World-traversable so other users can reach the socket (auth tests).
        os.chmod(self.dir, 0o755)
        self.socket = str(self.dir / "btguard.sock")
        self.log_path = self.dir / "btguardd.log"
        self._log = open(self.log_path, "wb")
        self.proc = subprocess.Popen(
            [*prefix, str(binary), "--socket", self.socket, "--verbose", *args],
            stdin=subprocess.DEVNULL, stdout=self._log, stderr=subprocess.STDOUT,
            env={**os.environ, **(env or {})})
        self.pid = self.proc.pid
        self._ctl_copy = None

    def log(self):
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def wait_ready(self):
        wait_listening(self.proc, self.socket, self.log)
        # The authorization tests need other users to connect.
        os.chmod(self.socket, 0o666)

    def alive(self):
        assert self.proc.poll() is None, \
            f"btguardd died with {self.proc.returncode}:\n{self.log()[-4000:]}"

    def client_path(self, user):
        if user is None:
            return str(BTGUARDCTL)
        # The build dir may not be traversable by other users.
        if self._ctl_copy is None:
            self._ctl_copy = self.dir / "btguardctl"
            shutil.copy(BTGUARDCTL, self._ctl_copy)
            os.chmod(self._ctl_copy, 0o755)
        return str(self._ctl_copy)

    def ctl(self, *args, json=True, check=None, timeout=60, user=None):
        """Runs btguardctl against this daemon.

        Returns (rc, parsed JSON lines, stdout, stderr); with check=N asserts
        the exit status is N.
        """
        argv = user_prefix(user) + [self.client_path(user), "--socket", self.socket]
        if json:
            argv.append("--json")
        argv += [str(a) for a in args]
        env = {k: v for k, v in os.environ.items() if k != "BTGUARD_SOCKET"}
        p = subprocess.run(argv, capture_output=True, text=True, timeout=timeout,
                           env=env)
        results = []
        if json:
            for line in p.stdout.splitlines():
                if line.strip():
                    results.append(_json_loads(line, p))
        if check is not None:
            assert p.returncode == check, \
                f"btguardctl {args} exited {p.returncode}, wanted {check}\n" \
                f"stdout: {p.stdout}\nstderr: {p.stderr}"
        return CtlResult(p.returncode, results, p.stdout, p.stderr)

    def stop(self):
        """SIGTERM, bounded wait, SIGKILL; returns (exit status, log text)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
                self._log.close()
                return None, self.log()
        self._log.close()
        return self.proc.returncode, self.log()


def _json_loads(line, p):
    try:
        return json.loads(line)
    except ValueError:
        pytest.fail(f"btguardctl printed a non-JSON line {line!r}\n"
                    f"stdout: {p.stdout}\nstderr: {p.stderr}")


def check_daemon_exit(rc, log):
    """The assertions every daemon teardown makes."""
    found = [m for m in SANITIZER_MARKERS if m in log]
    assert not found, f"sanitizer report in btguardd output:\n{log[-8000:]}"
    assert rc is not None, f"btguardd ignored SIGTERM for {STOP_TIMEOUT}s:\n{log[-4000:]}"
    assert rc == 0, f"btguardd exited with {rc}:\n{log[-4000:]}"


@contextlib.contextmanager
def running_daemon(**kw):
    """A started Daemon(**kw), stopped afterwards, its exit checked."""
    d = Daemon(**kw)
    try:
        d.wait_ready()
        yield d
    finally:
        rc, log = d.stop()
        shutil.rmtree(d.dir, ignore_errors=True)
        # Captured output: pytest shows it only when the test failed.
        print("---- btguardd log (tail) ----")
        print("\n".join(log.splitlines()[-60:]))
    check_daemon_exit(rc, log)


def faulty_daemon(spec):
    """running_daemon() of the fault build (daemon/base/fault.c, `make
    faults`), told by BTGUARD_FAULTS=spec which ptrace call to fail or hold."""
    return running_daemon(binary=FAULTS_BTGUARDD, env={"BTGUARD_FAULTS": spec})


def guard_during_hold(pid, faults, marker, during):
    """Guards pid with the fault build (daemon/base/fault.c) given these faults,
    which hold the daemon somewhere inside an attempt, and calls during()
    once the daemon's log says `marker` (the hold began).  Returns the
    guard's result (JSON) and the daemon's log."""
    with faulty_daemon(faults) as d:
        answer = {}
        t = threading.Thread(target=lambda: answer.update(
            r=d.ctl("--deadline", 10000, "guard", pid, check=None, timeout=60)))
        t.start()
        try:
            end = time.monotonic() + 20
            while marker not in d.log():
                assert time.monotonic() < end, d.log()[-3000:]
                time.sleep(0.002)
            during()
        finally:
            t.join(60)
        log = d.log()
    [res] = answer["r"].results
    return res, log


def guard_during_seize_hold(pid, nth, during):
    """guard_during_hold() with the daemon held 150 ms before its nth
    PTRACE_SEIZE - inside an attempt's 250 ms stop bound."""
    return guard_during_hold(pid, f"seize-hold={nth},seize-hold-ms=150",
                             f"holding before seize #{nth}", during)


DEADLINE_MS = 10000             # generous: the CI machine is small and noisy


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


class KillableDaemon:
    """A btguardd of the test's own, to be SIGKILLed at will.

    Unlike `Daemon`, ending it abruptly is the point; the log is
    kept for failure messages.  Only self.pid is ever signalled.
    """

    def __init__(self, build_daemon=BTGUARDD, extra_args=(), prefix=()):
        self.dir = Path(tempfile.mkdtemp(prefix="btg-hard-"))
        os.chmod(self.dir, 0o755)
        self.socket = str(self.dir / "btguard.sock")
        self.log_path = self.dir / "btguardd.log"
        env = {k: v for k, v in os.environ.items()
               if k not in ("BTGUARD_SOCKET", "NOTIFY_SOCKET", "LISTEN_FDS",
                            "LISTEN_PID", "JOURNAL_STREAM")}
        with open(self.log_path, "wb") as log:
            self.proc = subprocess.Popen(
                [*prefix, str(build_daemon), "--socket", self.socket, *extra_args],
                stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT, env=env)
        self.pid = self.proc.pid

    def log(self):
        try:
            return self.log_path.read_text(errors="replace")
        except FileNotFoundError:
            return ""

    def wait_ready(self, timeout=START_TIMEOUT):
        wait_listening(self.proc, self.socket, self.log, timeout)
        return self

    def kill(self):
        """SIGKILL and reap; returns once the kernel has torn it down (its
        tracees are detached by then: exit_ptrace runs before the zombie)."""
        if self.proc.poll() is None:
            os.kill(self.pid, signal.SIGKILL)
        self.proc.wait(timeout=STOP_TIMEOUT)

    def stop(self):
        """SIGTERM, bounded wait; returns the exit status (None: it hung and
        was killed)."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=STOP_TIMEOUT)
            except subprocess.TimeoutExpired:
                self.kill()
                return None
        return self.proc.returncode

    def cleanup(self):
        if self.proc.poll() is None:
            self.kill()
        shutil.rmtree(self.dir, ignore_errors=True)
