# SPDX-License-Identifier: MIT
"""Shared fixtures and helpers for the integration tests.

This file owns everything the integration tests need to drive the real
programs: where the binaries are (BTGUARD_BUILD, BTGUARD_VICTIMS), starting
and stopping btguardd (`daemon` fixture), starting victims and killing
exactly those (`victim` fixture), a cpu cgroup that makes a thread slow to
stop (`throttled_cgroup`), reading a victim's /proc state, reading
bt_loop's report file, and a minimal wire-protocol client (`Wire`) for the
tests that must send what btguardctl never would.

Every wait is bounded; the limits are generous because CI is a shared,
noisy 2-core machine, and no test asserts on how long something took.
Helpers are plain functions so test modules can `from conftest import ...`.
"""

import collections
import contextlib
import json
import os
import pwd
import select
import shutil
import signal
import socket
import struct
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BUILD = Path(os.environ.get("BTGUARD_BUILD", REPO / "build"))
VICTIMS = Path(os.environ.get("BTGUARD_VICTIMS", REPO / "build" / "victims"))
BTGUARDD = BUILD / "btguardd"
BTGUARDCTL = BUILD / "btguardctl"
# The daemon built with fault injection in its ptrace layer (make faults).
FAULTS_BTGUARDD = Path(os.environ.get("BTGUARD_FAULTS_BUILD", REPO / "build" / "faults")) / "btguardd"

# Generous bounds for a loaded machine; hitting one is a failure, not a flake.
START_TIMEOUT = 20.0
STOP_TIMEOUT = 30.0
SETTLE_TIMEOUT = 10.0
REPORT_TIMEOUT = 60.0

# Text that means a sanitizer fired inside the daemon (ASan/LSan/UBSan).
SANITIZER_MARKERS = ("AddressSanitizer", "LeakSanitizer", "runtime error:")


# ------------------------------------------------------ a slow thread --

CPU_CGROUP_V1 = "/sys/fs/cgroup/cpu"


@pytest.fixture
def throttled_cgroup():
    """A v1 cpu cgroup allowed 1 ms of CPU per second: a spinning thread
    moved there runs for 1 ms, then waits up to a second to run again,
    and a ptrace interrupt cannot stop it before it runs."""
    if not os.path.exists(os.path.join(CPU_CGROUP_V1, "cpu.cfs_quota_us")):
        pytest.skip("no cgroup v1 cpu controller to throttle a thread with")
    path = os.path.join(CPU_CGROUP_V1, f"btguard-test-{os.getpid()}")
    os.mkdir(path)
    try:
        with open(os.path.join(path, "cpu.cfs_period_us"), "w") as f:
            f.write("1000000")
        with open(os.path.join(path, "cpu.cfs_quota_us"), "w") as f:
            f.write("1000")
        yield path
    finally:
        # Whatever is left goes back to the root group, then the group goes.
        with open(os.path.join(path, "tasks")) as f:
            left = f.read().split()
        for tid in left:
            try:
                with open(os.path.join(CPU_CGROUP_V1, "tasks"), "w") as f:
                    f.write(tid)
            except OSError:
                pass
        os.rmdir(path)


# ---------------------------------------------------------------- /proc --

def _status_fields(path):
    fields = {}
    with open(path) as f:
        for line in f:
            key, _, value = line.partition(":")
            fields[key] = value.strip()
    return fields


def proc_state(pid):
    """State letter of /proc/PID/status ("R", "S", "t", "Z", ...) or None."""
    try:
        return _status_fields(f"/proc/{pid}/status")["State"].split()[0]
    except (FileNotFoundError, ProcessLookupError, KeyError):
        return None


def process_alive(pid):
    """True while any task of PID runs.  Its main thread alone may be a
    zombie: pthread_exit() in main leaves the other threads running."""
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except FileNotFoundError:
        return False
    for tid in tids:
        try:
            state = _status_fields(f"/proc/{pid}/task/{tid}/status")["State"].split()[0]
        except (FileNotFoundError, ProcessLookupError, KeyError):
            continue
        if state not in ("Z", "X"):
            return True
    return False


def tracer_pid(pid):
    """TracerPid of /proc/PID/status, or None when the process is gone."""
    try:
        return int(_status_fields(f"/proc/{pid}/status")["TracerPid"])
    except (FileNotFoundError, ProcessLookupError, KeyError):
        return None


def thread_problems(pid):
    """Every task of PID that is stopped or traced, as readable strings.

    A victim never stops itself, so any "t" (ptrace stop) or "T" (job
    control stop) task, or any non-zero TracerPid, is something the daemon
    left behind.  Tasks that exit while we look are ignored; a vanished
    process is a problem of its own.
    """
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except FileNotFoundError:
        return [f"process {pid} is gone"]
    problems = []
    for tid in tids:
        try:
            st = _status_fields(f"/proc/{pid}/task/{tid}/status")
        except (FileNotFoundError, ProcessLookupError):
            continue
        state = st.get("State", "?").split()[0]
        tracer = int(st.get("TracerPid", "0"))
        if state in ("t", "T") or tracer != 0:
            problems.append(f"tid {tid} state {state} TracerPid {tracer}")
    return problems


def all_threads_running(pid):
    """True when no task of PID is stopped or traced."""
    return not thread_problems(pid)


def wait_threads_running(pid, timeout=SETTLE_TIMEOUT):
    """Asserts that every task of PID is (or within `timeout` becomes) free."""
    deadline = time.monotonic() + timeout
    while True:
        problems = thread_problems(pid)
        if not problems:
            return
        if time.monotonic() > deadline:
            pytest.fail(f"threads of {pid} left stopped/traced: {problems}")
        time.sleep(0.05)


def libc_text_mappings(pid):
    """(start, end, path) of every executable mapping of libc.so.6 in PID."""
    out = []
    with open(f"/proc/{pid}/maps") as f:
        for line in f:
            parts = line.split(None, 5)
            if len(parts) < 6 or "x" not in parts[1]:
                continue
            path = parts[5].strip()
            if path.endswith("/libc.so.6"):
                start, end = (int(x, 16) for x in parts[0].split("-"))
                out.append((start, end, path))
    return out


def object_base(pid, path_suffix):
    """Load address of the object whose path ends with path_suffix.

    The lowest mapping with file offset 0; for glibc and our victims the
    first PT_LOAD has p_vaddr 0, so symbol values add to it directly.
    """
    best = None
    with open(f"/proc/{pid}/maps") as f:
        for line in f:
            parts = line.split(None, 5)
            if len(parts) < 6 or not parts[5].strip().endswith(path_suffix):
                continue
            if int(parts[2], 16) != 0:
                continue
            start = int(parts[0].split("-")[0], 16)
            if best is None or start < best[0]:
                best = (start, parts[5].strip())
    return best


def dynsym_value(path, name):
    """Value of the default-version dynamic symbol `name` in the file `path`."""
    out = subprocess.run(["nm", "-D", "--defined-only", str(path)],
                         check=True, capture_output=True, text=True).stdout
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[2].split("@")[0] == name \
                and ("@@" in parts[2] or "@" not in parts[2]):
            return int(parts[0], 16)
    raise LookupError(f"{name} not defined in {path}")


def expected_site(pid, suffix="/libc.so.6"):
    """Run-time address of backtrace() in the object ending with suffix."""
    base = object_base(pid, suffix)
    assert base is not None, f"{suffix} not mapped in {pid}"
    start, path = base
    # Read the file through the target's root, as the daemon must.
    return start + dynsym_value(f"/proc/{pid}/root{path}", "backtrace")


def read_mem(pid, address, length):
    with open(f"/proc/{pid}/mem", "rb", buffering=0) as f:
        f.seek(address)
        return f.read(length)


def write_mem(pid, address, data):
    """Writes into a running process (root may write /proc/PID/mem)."""
    with open(f"/proc/{pid}/mem", "r+b", buffering=0) as f:
        f.seek(address)
        assert f.write(data) == len(data)


def unused_pid():
    """A PID that currently names no process (checked, not guessed)."""
    with open("/proc/sys/kernel/pid_max") as f:
        pid_max = int(f.read())
    for pid in range(pid_max - 1, pid_max - 1000, -1):
        if not os.path.exists(f"/proc/{pid}"):
            return pid
    pytest.skip("no free PID found near pid_max")


def kernel_thread_pid():
    """A visible kernel thread: PID 2 (kthreadd) or any PF_KTHREAD task."""
    try:
        with open("/proc/2/comm") as f:
            if f.read().strip() == "kthreadd":
                return 2
    except FileNotFoundError:
        pass
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat_line = f.read()
        except (FileNotFoundError, ProcessLookupError):
            continue
        fields = stat_line.rsplit(")", 1)[1].split()
        if int(fields[6]) & 0x00200000:   # PF_KTHREAD
            return int(entry)
    return None


# ------------------------------------------------------ bt_loop reports --

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


# ------------------------------------------------------------ processes --

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


@pytest.fixture
def victim():
    factory = VictimFactory()
    try:
        yield factory
    finally:
        factory.cleanup()


# ----------------------------------------------------------- test user --

TEST_USER = "btguard-test-user"


@pytest.fixture(scope="session")
def test_user():
    """(uid, gid) of an unprivileged user; created only if missing, and then
    deleted again at the end.  Other users are never touched."""
    created = False
    try:
        pwd.getpwnam(TEST_USER)
    except KeyError:
        subprocess.run(["useradd", "-M", "-r", "-s", "/usr/sbin/nologin", TEST_USER],
                       check=True)
        created = True
    pw = pwd.getpwnam(TEST_USER)
    assert pw.pw_uid != 0
    try:
        yield (pw.pw_uid, pw.pw_gid)
    finally:
        if created:
            subprocess.run(["userdel", TEST_USER], check=False)


# --------------------------------------------------------------- daemon --

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


@pytest.fixture
def daemon():
    with running_daemon() as d:
        yield d


# ---------------------------------------------------------- raw protocol --

MAGIC = 0x31475442
VERSION = 3
KIND_REQUEST, KIND_RESULT, KIND_DONE, KIND_ERROR = 1, 2, 3, 4
ACTION_GUARD, ACTION_UNGUARD, ACTION_STATUS = 1, 2, 3
HEADER = struct.Struct("<IHHI")
REQUEST = struct.Struct("<BBHII")
RESULT = struct.Struct("<iIBBBBIIIBB")   # ... check_us, uid, risk, warnings
MAX_PAYLOAD = 65536
MAX_PIDS = 4096

# Wire error codes (proto/proto.h enum proto_error).
ERR_BUSY = 4096
# Every wire error code by name, in code order from 4096 (proto/proto.h
# enum proto_error; test_wire_constants.py holds this to proto.c's table).
ERR_NAMES = ["busy", "foreign", "no-site", "traced", "denied", "no-process",
             "zombie", "kernel-thread", "self", "gone", "exec", "pid-reused",
             "verify", "stop-timeout", "elf", "unsupported", "protocol", "limit",
             "shutdown", "internal", "shared-memory"]
ERR = {name: 4096 + i for i, name in enumerate(ERR_NAMES)}
# enum proto_proc_state
PROC_NONE, PROC_UNGUARDED, PROC_GUARDED, PROC_PARTIAL, PROC_FOREIGN, PROC_UNKNOWN = range(6)
RESULT_WROTE = 0x01

SITE = struct.Struct("<QBBH")   # address, state, flags, object length
SELECT = struct.Struct("<BBI")  # fields, reserved, uid
SEL_ALL, SEL_UID, SEL_EXE, SEL_CMDLINE, SEL_CGROUP, SEL_MAPS, SEL_AT_RISK = (
    0x01, 0x02, 0x04, 0x08, 0x10, 0x20, 0x40)
RISK_UNKNOWN, RISK_NONE, RISK_AT_RISK, RISK_COVERED = range(4)

WireResult = collections.namedtuple(
    "WireResult", "pid error action state flags nsites pause_us check_us uid risk warnings "
    "message command reason sites")


def encode_header(kind, length, magic=MAGIC, version=VERSION):
    return HEADER.pack(magic, version, kind, length)


def encode_request(action, pids, flags=0, deadline_ms=0, npids=None):
    payload = REQUEST.pack(action, flags, 0, deadline_ms,
                           len(pids) if npids is None else npids)
    payload += b"".join(struct.pack("<i", p) for p in pids)
    payload += SELECT.pack(0, 0, 0)
    return encode_header(KIND_REQUEST, len(payload)) + payload


def encode_select(action, fields, uid=0, exe=None, cmdline=None, cgroup=None, maps=None,
                  flags=0, deadline_ms=0):
    """A selector REQUEST; the patterns go in field order: exe, cmdline, cgroup, maps."""
    payload = REQUEST.pack(action, flags, 0, deadline_ms, 0) + SELECT.pack(fields, 0, uid)
    for bit, pattern in ((SEL_EXE, exe), (SEL_CMDLINE, cmdline), (SEL_CGROUP, cgroup),
                         (SEL_MAPS, maps)):
        if fields & bit:
            data = pattern.encode()
            payload += struct.pack("<H", len(data)) + data
    return encode_header(KIND_REQUEST, len(payload)) + payload


class Wire:
    """One raw connection to the daemon, speaking proto/PROTOCOL.md."""

    def __init__(self, path, timeout=60.0):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(timeout)
        self.sock.connect(path)

    def close(self):
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def send(self, data):
        self.sock.sendall(data)

    def _recv_exact(self, n):
        buf = b""
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise EOFError(f"connection closed after {len(buf)}/{n} bytes")
            buf += chunk
        return buf

    def recv(self):
        """One message: (kind, payload)."""
        magic, version, kind, length = HEADER.unpack(self._recv_exact(HEADER.size))
        assert magic == MAGIC and version == VERSION, (hex(magic), version)
        assert length <= MAX_PAYLOAD, length
        return kind, self._recv_exact(length)

    def request(self, action, pids, flags=0, deadline_ms=0):
        """Sends a request; returns the RESULT list (DONE checked)."""
        self.send(encode_request(action, pids, flags, deadline_ms))
        return self.read_results()

    def read_results(self):
        results = []
        while True:
            kind, payload = self.recv()
            if kind == KIND_RESULT:
                results.append(decode_result(payload))
            elif kind == KIND_DONE:
                (count,) = struct.unpack_from("<I", payload)
                assert count == len(results), (count, len(results))
                return results
            else:
                raise AssertionError(f"unexpected message kind {kind}: {payload!r}")


def decode_result(payload):
    fixed = RESULT.unpack_from(payload)
    off = RESULT.size
    strings = []
    for _ in range(3):   # message, command, reason
        (n,) = struct.unpack_from("<H", payload, off)
        strings.append(payload[off + 2:off + 2 + n].decode(errors="replace"))
        off += 2 + n
    sites = []
    for _ in range(fixed[5]):
        address, state, _flags, olen = SITE.unpack_from(payload, off)
        off += SITE.size
        sites.append((payload[off:off + olen].decode(errors="replace"), address, state))
        off += olen
    assert off == len(payload), f"{len(payload) - off} stray bytes after a RESULT"
    return WireResult(*fixed, *strings, sites)
