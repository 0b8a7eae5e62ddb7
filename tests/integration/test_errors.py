# SPDX-License-Identifier: MIT
"""Clear errors for targets the daemon must not or cannot act on, and
requests it must reject, with the daemon unharmed and still serving after
each one (the `daemon` fixture also checks it exits 0 with no sanitizer
report)."""

import signal
import struct
import subprocess
import sys
import textwrap
import time

import pytest

from btg.paths import SETTLE_TIMEOUT
from btg.procfs import kernel_thread_pid, proc_state, tracer_pid, unused_pid, wait_threads_running
from btg.wire import (ACTION_GUARD, ACTION_STATUS, HEADER, KIND_ERROR, KIND_REQUEST, KIND_RESULT,
                      MAGIC, MAX_PAYLOAD, MAX_PIDS, REQUEST, VERSION, Wire, encode_header,
                      encode_request)


def single(daemon, action, pid, check=1):
    r = daemon.ctl(action, pid, check=check)
    assert len(r.results) == 1, r
    res = r.results[0]
    assert res["pid"] == pid and res["action"] == action, res
    return res


def assert_error(daemon, action, pid, error):
    res = single(daemon, action, pid)
    assert res["ok"] is False, res
    assert res["error"] == error, res
    assert res["wrote"] is False, res
    assert res["message"], res
    return res


def assert_serving(daemon, victim_pid):
    """The daemon is alive and answers a good request on a new connection."""
    daemon.alive()
    with Wire(daemon.socket) as w:
        [res] = w.request(ACTION_STATUS, [victim_pid])
    assert res.pid == victim_pid and res.error == 0, res


def test_nonexistent_pid(daemon):
    pid = unused_pid()
    for action in ("status", "guard", "unguard"):
        assert_error(daemon, action, pid, "no-process")


def test_zombie(daemon, victim):
    z = subprocess.Popen(["true"])
    try:
        deadline = time.monotonic() + SETTLE_TIMEOUT
        while proc_state(z.pid) != "Z":
            assert time.monotonic() < deadline, "child never became a zombie"
            time.sleep(0.02)
        assert_error(daemon, "guard", z.pid, "zombie")
        assert_error(daemon, "unguard", z.pid, "zombie")
        res = single(daemon, "status", z.pid, check=None)
        if not res["ok"]:
            assert res["error"] == "zombie", res
        assert proc_state(z.pid) == "Z"
    finally:
        z.wait()


def test_kernel_thread(daemon):
    pid = kernel_thread_pid()
    if pid is None:
        pytest.skip("no kernel thread visible in this PID namespace")
    for action in ("status", "guard", "unguard"):
        assert_error(daemon, action, pid, "kernel-thread")


def test_daemon_itself(daemon):
    for action in ("status", "guard", "unguard"):
        assert_error(daemon, action, daemon.pid, "self")
    daemon.alive()


def test_status_of_pid_1(daemon, victim):
    # Whatever init is here (systemd, a container's shim, a static binary),
    # status only reads it.  Never guard PID 1 from a test.
    res = single(daemon, "status", 1, check=None)
    assert res["state"] in ("guarded", "unguarded", "partial", "foreign", "none", None), res
    v = victim("idle", 1)
    assert_serving(daemon, v.pid)


def test_bad_pids_on_the_wire(daemon, victim):
    v = victim("idle", 1)
    for pid in (0, -1, -v.pid):
        with Wire(daemon.socket) as w:
            w.send(encode_request(ACTION_STATUS, [pid]))
            kind, payload = w.recv()
            if kind == KIND_RESULT:
                (got_pid, error) = struct.unpack_from("<iI", payload)
                assert got_pid == pid and error != 0, (pid, error)
            else:
                assert kind == KIND_ERROR, (pid, kind, payload)
        assert_serving(daemon, v.pid)


def _raw_cases():
    good = REQUEST.pack(ACTION_STATUS, 0, 0, 0, 1) + struct.pack("<i", 1)
    many = MAX_PIDS + 1
    return {
        "bad-magic": HEADER.pack(0xdeadbeef, VERSION, KIND_REQUEST, len(good)) + good,
        "bad-version": HEADER.pack(MAGIC, 99, KIND_REQUEST, len(good)) + good,
        "unknown-kind": HEADER.pack(MAGIC, VERSION, 77, len(good)) + good,
        "result-from-client": HEADER.pack(MAGIC, VERSION, KIND_RESULT, len(good)) + good,
        # The header alone announces too much; the payload never comes.
        "oversized": HEADER.pack(MAGIC, VERSION, KIND_REQUEST, MAX_PAYLOAD + 1),
        "huge-length": HEADER.pack(MAGIC, VERSION, KIND_REQUEST, 0xffffffff),
        "too-many-pids": encode_header(KIND_REQUEST, REQUEST.size + 4 * many)
                         + REQUEST.pack(ACTION_STATUS, 0, 0, 0, many)
                         + struct.pack(f"<{many}i", *([1] * many)),
        "npids-above-payload": encode_request(ACTION_STATUS, [1], npids=3),
        "npids-below-payload": encode_request(ACTION_STATUS, [1, 1, 1], npids=1),
        "short-payload": encode_header(KIND_REQUEST, 4) + b"\x03\x00\x00\x00",
        "empty-payload": encode_header(KIND_REQUEST, 0),
        "bad-action": encode_request(9, [1]),
        "action-zero": encode_request(0, [1]),
        "unknown-flags": encode_request(ACTION_STATUS, [1], flags=0x80),
        "max-payload-junk": encode_header(KIND_REQUEST, MAX_PAYLOAD) + b"\xff" * MAX_PAYLOAD,
    }


@pytest.mark.parametrize("case", sorted(_raw_cases()))
def test_malformed_request_gets_error_reply(daemon, victim, case):
    v = victim("idle", 1)
    with Wire(daemon.socket, timeout=30) as w:
        try:
            w.send(_raw_cases()[case])
        except (BrokenPipeError, ConnectionResetError):
            pass    # rejected before we finished sending: the reply waits
        kind, payload = w.recv()
        assert kind == KIND_ERROR, (case, kind, payload)
        (code,) = struct.unpack_from("<I", payload)
        assert code != 0, case
    assert_serving(daemon, v.pid)


def test_silent_client_does_not_block_others(daemon, victim):
    v = victim("idle", 1)
    with Wire(daemon.socket) as stalled:
        stalled.send(HEADER.pack(MAGIC, VERSION, KIND_REQUEST, 100)[:6])
        with Wire(daemon.socket) as idle_conn:
            # Two stuck peers, and a third still gets answers.
            assert_serving(daemon, v.pid)
            idle_conn.send(b"")
    assert_serving(daemon, v.pid)


def test_truncated_then_closed(daemon, victim):
    v = victim("idle", 1)
    for data in (b"", b"\x42", encode_request(ACTION_GUARD, [v.pid])[:-2]):
        with Wire(daemon.socket) as w:
            w.send(data)
    assert_serving(daemon, v.pid)
    res = single(daemon, "status", v.pid, check=0)
    assert res["state"] == "unguarded", res


# A tracer that does not stop anybody: PTRACE_SEIZE every thread, then wait.
TRACER = textwrap.dedent("""
    import ctypes, os, signal, sys
    libc = ctypes.CDLL(None, use_errno=True)
    libc.ptrace.restype = ctypes.c_long
    libc.ptrace.argtypes = [ctypes.c_long, ctypes.c_long, ctypes.c_void_p, ctypes.c_void_p]
    PTRACE_SEIZE = 0x4206
    pid = int(sys.argv[1])
    for tid in os.listdir(f"/proc/{pid}/task"):
        if libc.ptrace(PTRACE_SEIZE, int(tid), None, None) != 0:
            sys.exit(f"PTRACE_SEIZE {tid}: {os.strerror(ctypes.get_errno())}")
    print("attached", flush=True)
    signal.pause()
""")


class Tracer:
    """A helper process that PTRACE_SEIZEs every thread of pid, then waits."""

    def __init__(self, pid):
        self.proc = subprocess.Popen([sys.executable, "-c", TRACER, str(pid)],
                                     stdout=subprocess.PIPE, text=True)
        self.pid = self.proc.pid

    def __enter__(self):
        assert self.proc.stdout.readline().strip() == "attached"
        return self

    def __exit__(self, *exc):
        # A tracer's exit detaches its tracees, which keep running.
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout=30)
        self.proc.stdout.close()


def test_already_traced(daemon, victim):
    v = victim("idle", 2)
    # guard has to attach, so another tracer makes it fail ...
    with Tracer(v.pid) as t:
        assert tracer_pid(v.pid) == t.pid
        res = assert_error(daemon, "guard", v.pid, "traced")
        assert str(t.pid) in res["message"], res
        assert tracer_pid(v.pid) == t.pid, "the other tracer lost its tracee"
        v.assert_alive()
    wait_threads_running(v.pid)
    res = single(daemon, "status", v.pid, check=0)
    assert res["state"] == "unguarded", res

    # ... and nothing was left behind: once it is gone, guard works.
    res = single(daemon, "guard", v.pid, check=0)
    assert res["ok"] is True and res["wrote"] is True, res
    wait_threads_running(v.pid)

    # The same for unguard of a guarded process.
    with Tracer(v.pid) as t:
        res = assert_error(daemon, "unguard", v.pid, "traced")
        assert str(t.pid) in res["message"], res
        assert tracer_pid(v.pid) == t.pid, "the other tracer lost its tracee"
    wait_threads_running(v.pid)
    res = single(daemon, "status", v.pid, check=0)
    assert res["state"] == "guarded", res
    v.assert_alive()
