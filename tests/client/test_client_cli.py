# SPDX-License-Identifier: MIT
"""btguardctl against a fake daemon.

This file owns the client's contract as seen from outside: arguments and
usage errors, exit statuses, the human and JSON output, and how the client
copes with a daemon that refuses, breaks off, lies, or never answers.  The
fake daemon is a thread in this process speaking the wire format with
struct.pack on a throwaway Unix socket; each test scripts what it sends, so
no real daemon, root or ptrace is needed.  The client binary is
$BTGUARD_BUILD/btguardctl (default <repo>/build).
"""

import errno
import json
import os
import select
import socket
import struct
import subprocess
import tempfile
import threading
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
BTGUARDCTL = Path(os.environ.get("BTGUARD_BUILD", REPO / "build")) / "btguardctl"

RUN_TIMEOUT = 30.0          # no client run may take longer than this

MAGIC, VERSION = 0x31475442, 3
REQUEST, RESULT, DONE, ERROR = 1, 2, 3, 4
GUARD, UNGUARD, STATUS = 1, 2, 3
NONE, UNGUARDED, GUARDED, PARTIAL, FOREIGN, UNKNOWN = range(6)
SITE_ORIGINAL, SITE_GUARDED, SITE_FOREIGN = 1, 2, 3
WROTE = 0x01
ERR_BUSY, ERR_NOPROC, ERR_LIMIT = 4096, 4101, 4113
LIBC = "/lib/x86_64-linux-gnu/libc.so.6"


# ------------------------------------------------------------ the wire --

def header(kind, length, magic=MAGIC, version=VERSION):
    return struct.pack("<IHHI", magic, version, kind, length)


def message(kind, payload):
    return header(kind, len(payload)) + payload


RISK_UNKNOWN, RISK_NONE, RISK_AT_RISK, RISK_COVERED = range(4)
UID_UNKNOWN = 0xffffffff
SITE_BOUND = 0x01
SITE_BREAKPOINT = 0x02


def result(pid, error=0, action=GUARD, state=GUARDED, flags=0, sites=(),
           msg=b"", pause_us=0, check_us=0, uid=UID_UNKNOWN, risk=RISK_UNKNOWN, warnings=0,
           command=b"", reason=b""):
    """A RESULT; sites are (address, state, object-bytes[, site flags]) tuples."""
    msg, command, reason = (v.encode() if isinstance(v, str) else v
                            for v in (msg, command, reason))
    body = struct.pack("<iIBBBBIIIBBH", pid, error, action, state, flags, len(sites),
                       pause_us, check_us, uid, risk, warnings, len(msg)) + msg
    body += struct.pack("<H", len(command)) + command + struct.pack("<H", len(reason)) + reason
    for site in sites:
        address, st, obj = site[:3]
        sflags = site[3] if len(site) > 3 else 0
        if isinstance(obj, str):
            obj = obj.encode()
        body += struct.pack("<QBBH", address, st, sflags, len(obj)) + obj
    return message(RESULT, body)


def done(count):
    return message(DONE, struct.pack("<I", count))


def error_msg(code, text):
    text = text.encode()
    return message(ERROR, struct.pack("<IH", code, len(text)) + text)


def notice_msg(text):
    """A NOTICE: the daemon's policy is not what its files say."""
    text = text.encode()
    return message(6, struct.pack("<H", len(text)) + text)


def recv_exact(conn, n):
    data = b""
    while len(data) < n:
        chunk = conn.recv(n - len(data))
        if not chunk:
            raise EOFError(f"client closed after {len(data)} of {n} bytes")
        data += chunk
    return data


SEL_ALL, SEL_UID, SEL_EXE, SEL_CMDLINE, SEL_CGROUP, SEL_MAPS, SEL_AT_RISK = (
    0x01, 0x02, 0x04, 0x08, 0x10, 0x20, 0x40)
PATTERN_FIELDS = ((SEL_EXE, "exe"), (SEL_CMDLINE, "cmdline"), (SEL_CGROUP, "cgroup"),
                  (SEL_MAPS, "maps"))


class Request:
    def __init__(self, action, flags, reserved, deadline_ms, pids, select=0, uid=0,
                 patterns=None):
        self.action, self.flags, self.reserved = action, flags, reserved
        self.deadline_ms, self.pids = deadline_ms, pids
        self.select, self.uid, self.patterns = select, uid, patterns or {}


def read_request(conn):
    magic, version, kind, length = struct.unpack("<IHHI", recv_exact(conn, 12))
    assert (magic, version, kind) == (MAGIC, VERSION, REQUEST)
    payload = recv_exact(conn, length)
    action, flags, reserved, deadline_ms, npids = struct.unpack_from("<BBHII", payload)
    pids = list(struct.unpack_from(f"<{npids}i", payload, 12))
    off = 12 + 4 * npids
    select, sel_reserved, uid = struct.unpack_from("<BBI", payload, off)
    assert sel_reserved == 0
    off += 6
    patterns = {}
    for bit, name in PATTERN_FIELDS:
        if select & bit:
            (n,) = struct.unpack_from("<H", payload, off)
            patterns[name] = payload[off + 2:off + 2 + n].decode()
            off += 2 + n
    assert off == length, "the request has bytes left over"
    return Request(action, flags, reserved, deadline_ms, pids, select, uid, patterns)


# ------------------------------------------------------ the fake daemon --

class FakeDaemon:
    """Accepts connections on a private socket; for each, reads one REQUEST
    and calls script(conn, request).  Scripts that want to stall wait on
    self.release, which stop() sets, so no thread outlives its test."""

    def __init__(self, path, script):
        self.path = str(path)
        self.script = script
        self.requests = []
        self.connections = 0
        self.errors = []
        self.release = threading.Event()
        self._listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._listener.bind(self.path)
        self._listener.listen(8)
        self._listener.settimeout(0.05)
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)
        self._thread.start()

    def _serve(self):
        while not self._stopping.is_set():
            try:
                conn, _ = self._listener.accept()
            except socket.timeout:
                continue
            except OSError:
                return
            self.connections += 1
            with conn:
                try:
                    req = read_request(conn)
                    self.requests.append(req)
                    self.script(self, conn, req)
                except (OSError, EOFError, AssertionError) as e:
                    self.errors.append(e)

    def stop(self):
        self.release.set()
        self._stopping.set()
        self._thread.join(10)
        self._listener.close()
        assert not self._thread.is_alive(), "fake daemon thread did not stop"


@pytest.fixture
def sockdir():
    # A short path: sun_path holds 108 bytes and pytest's tmp_path can be long.
    with tempfile.TemporaryDirectory(prefix="btgctl-") as d:
        yield Path(d)


@pytest.fixture
def fake(sockdir):
    """fake(script) starts a daemon on sockdir/d.sock; all stop at teardown."""
    started = []

    def start(script, name="d.sock"):
        d = FakeDaemon(sockdir / name, script)
        started.append(d)
        return d

    yield start
    for d in started:
        d.stop()


def run(args, sock=None, env_socket=None, timeout=RUN_TIMEOUT):
    env = {k: v for k, v in os.environ.items() if k != "BTGUARD_SOCKET"}
    if env_socket is not None:
        env["BTGUARD_SOCKET"] = env_socket
    cmd = [str(BTGUARDCTL)]
    if sock is not None:
        cmd += ["--socket", str(sock)]
    p = subprocess.run(cmd + list(args), capture_output=True, timeout=timeout, env=env)
    # The tests also run against an ASan+UBSan build of the client.
    for marker in (b"Sanitizer", b"runtime error:"):
        assert marker not in p.stderr, p.stderr.decode(errors="replace")
    return p


def lines(proc):
    return proc.stdout.decode().splitlines()


def json_lines(proc):
    return [json.loads(line) for line in lines(proc)]


def reply(*messages):
    """A script that sends the given messages and closes."""
    def script(daemon, conn, req):
        for m in messages:
            conn.sendall(m)
    return script


# --------------------------------------------------------------- usage --

def test_binary_exists():
    assert BTGUARDCTL.is_file(), f"build the client first: {BTGUARDCTL}"


def test_help_is_complete_and_exits_0():
    p = run(["--help"])
    assert p.returncode == 0
    out = p.stdout.decode()
    for needle in ("Usage: btguardctl", "guard|unguard|status PID...",
                   "guard|unguard|status SELECTOR...", "--all", "--at-risk", "--user",
                   "--exe", "--cmdline", "--cgroup", "--unit", "--maps", "--format",
                   "prometheus", "at risk", "partial",
                   "--socket", "--json", "--timeout", "--deadline", "--tree",
                   "BTGUARD_SOCKET", "Exit status", "Examples", "/run/btguard/btguard.sock"):
        assert needle in out, needle
    assert p.stderr == b""


def test_version():
    p = run(["--version"])
    assert p.returncode == 0
    assert p.stdout == b"btguardctl 0.1.0\n"


@pytest.mark.parametrize("args", [
    [],
    ["bogus", "1"],
    ["guard"],
    ["guard", "12a"],
    ["guard", "0"],
    ["guard", "-5"],
    ["guard", "--", "-5"],
    ["guard", "+5"],
    ["guard", "0x10"],
    ["guard", " 1"],
    ["guard", ""],
    ["guard", "2147483648"],
    ["guard", "99999999999999999999999"],
    ["status", "1", "2", "x"],
    ["--deadline", "0", "guard", "1"],
    ["--deadline", "60001", "guard", "1"],
    ["--deadline", "1.5", "guard", "1"],
    ["--timeout", "0", "guard", "1"],
    ["--timeout", "-1", "guard", "1"],
    ["--timeout", "abc", "guard", "1"],
    ["--timeout", "nan", "guard", "1"],
    ["--bogus", "guard", "1"],
    ["guard", "1", "--timeout"],
], ids=repr)
def test_usage_errors_exit_2_and_send_nothing(fake, args):
    d = fake(reply(done(0)))
    p = run(args, sock=d.path)
    assert p.returncode == 2, p.stderr
    err = p.stderr.decode()
    assert err.startswith("btguardctl: ")
    assert "Try 'btguardctl --help'" in err
    assert p.stdout == b""
    assert d.connections == 0


def test_too_many_pids_is_a_usage_error(fake):
    d = fake(reply(done(0)))
    p = run(["status"] + [str(i) for i in range(1, 4098)], sock=d.path)
    assert p.returncode == 2
    assert "too many PIDs" in p.stderr.decode()
    assert d.connections == 0


def test_maximum_pids_and_duplicates_are_sent(fake):
    def script(daemon, conn, req):
        conn.sendall(b"".join(result(pid, action=STATUS, state=UNGUARDED) for pid in req.pids))
        conn.sendall(done(len(req.pids)))

    d = fake(script)
    pids = [str(i) for i in range(1, 4096)] + ["1"]
    p = run(["status"] + pids, sock=d.path)
    assert p.returncode == 0, p.stderr
    assert d.requests[0].pids == [int(x) for x in pids]
    out = lines(p)
    assert len(out) == 4096
    assert out[0] == "1: unguarded (0 sites)"
    assert out[-1] == "1: unguarded (0 sites)"


# -------------------------------------------------------- the request --

def test_request_fields(fake):
    d = fake(reply(result(10), result(20), result(10), done(3)))
    p = run(["--tree", "--deadline", "1500", "guard", "10", "20", "10"], sock=d.path)
    assert p.returncode == 0, p.stderr
    req = d.requests[0]
    assert (req.action, req.flags, req.reserved, req.deadline_ms) == (GUARD, 1, 0, 1500)
    assert req.pids == [10, 20, 10]


def test_request_defaults(fake):
    d = fake(reply(result(2147483647, action=UNGUARD, state=UNGUARDED), done(1)))
    p = run(["unguard", "2147483647"], sock=d.path)
    assert p.returncode == 0, p.stderr
    req = d.requests[0]
    assert (req.action, req.flags, req.deadline_ms) == (UNGUARD, 0, 0)
    assert req.pids == [2147483647]


def test_socket_from_environment_and_option_wins(fake):
    env_d = fake(reply(result(5, action=STATUS), done(1)), name="env.sock")
    opt_d = fake(reply(result(5, action=STATUS), done(1)), name="opt.sock")

    p = run(["status", "5"], env_socket=env_d.path)
    assert p.returncode == 0, p.stderr
    assert (env_d.connections, opt_d.connections) == (1, 0)

    p = run(["status", "5"], sock=opt_d.path, env_socket=env_d.path)
    assert p.returncode == 0, p.stderr
    assert (env_d.connections, opt_d.connections) == (1, 1)


# ---------------------------------------------------------- unreachable --

def test_missing_socket_exits_3(sockdir):
    path = sockdir / "nobody-here.sock"
    p = run(["status", "1"], sock=path)
    assert p.returncode == 3
    err = p.stderr.decode()
    assert str(path) in err
    assert os.strerror(errno.ENOENT) in err
    assert "is btguardd running?" in err
    assert p.stdout == b""


def test_socket_without_listener_exits_3(sockdir):
    path = sockdir / "stale.sock"
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(str(path))          # bound, never listening: connect is refused
    try:
        p = run(["status", "1"], sock=path)
    finally:
        s.close()
    assert p.returncode == 3
    assert os.strerror(errno.ECONNREFUSED) in p.stderr.decode()


def test_daemon_hanging_up_without_a_byte_exits_3(fake):
    d = fake(reply())
    p = run(["guard", "1"], sock=d.path)
    assert p.returncode == 3
    assert "without answering" in p.stderr.decode()


# ------------------------------------------------------- human output --

SITE = (0x7F1234560000, SITE_GUARDED, LIBC)


def test_human_output_lines(fake):
    d = fake(reply(
        result(1234, flags=WROTE, sites=[SITE], pause_us=412, check_us=300),
        result(1235, sites=[SITE]),
        result(1236, error=ERR_BUSY, state=UNGUARDED, msg="thread 1240 at 0x7f12: inside"),
        result(1237, error=ERR_NOPROC, state=UNKNOWN),
        result(1238, state=PARTIAL, sites=[SITE, (0x5000, SITE_ORIGINAL, "/opt/libbt.so")]),
        done(5)))
    p = run(["guard", "1234", "1235", "1236", "1237", "1238"], sock=d.path)
    assert p.returncode == 1
    assert lines(p) == [
        "1234: guarded (1 site), wrote, paused 412 us",
        "1235: guarded (1 site), already guarded, nothing written",
        "1236: error: busy: thread 1240 at 0x7f12: inside",
        "1237: error: no-process: there is no process with this PID",
        "1238: partial (2 sites; original: libbt.so), nothing written",
    ]
    assert p.stderr == b""


def test_human_status_and_unguard(fake):
    d = fake(reply(result(7, action=STATUS, state=UNGUARDED, sites=[SITE]), done(1)))
    p = run(["status", "7"], sock=d.path)
    assert (p.returncode, lines(p)) == (0, ["7: unguarded (1 site)"])

    d2 = fake(reply(result(7, action=UNGUARD, state=UNGUARDED, flags=WROTE, pause_us=90),
                    result(8, action=UNGUARD, state=UNGUARDED), done(2)), name="d2.sock")
    p = run(["unguard", "7", "8"], sock=d2.path)
    assert p.returncode == 0
    assert lines(p) == ["7: unguarded (0 sites), wrote, paused 90 us",
                        "8: unguarded (0 sites), already unguarded, nothing written"]


def test_verbose_lists_sites(fake):
    d = fake(reply(result(9, flags=WROTE, pause_us=5, check_us=2,
                          sites=[SITE, (0xABC, SITE_FOREIGN, "/x")]), done(1)))
    p = run(["-v", "guard", "9"], sock=d.path)
    assert p.returncode == 0
    assert lines(p) == [
        "9: guarded (2 sites), wrote, paused 5 us (activeness check 2 us)",
        f"    {LIBC} 0x7f1234560000: guarded",
        "    /x 0xabc: foreign",
    ]


def test_human_output_escapes_terminal_controls(fake):
    evil = b"/tmp/\x1b]0;pwned\x07lib\xff.so"
    d = fake(reply(result(3, action=STATUS, sites=[(1, SITE_ORIGINAL, evil)],
                          error=ERR_BUSY, msg=b"bad\x1b[2Jthing\nnext"), done(1)))
    p = run(["-v", "status", "3"], sock=d.path)
    assert p.returncode == 1
    assert b"\x1b" not in p.stdout and b"\x07" not in p.stdout and b"\xff" not in p.stdout
    assert lines(p) == [
        "3: error: busy: bad\\x1b[2Jthing\\x0anext",
        "    /tmp/\\x1b]0;pwned\\x07lib\\xff.so 0x1: original",
    ]


def test_results_are_flushed_as_they_arrive(fake):
    """The first line must reach the reader while the daemon still holds the
    rest back: progress for a long PID list."""
    def script(daemon, conn, req):
        conn.sendall(result(1, flags=WROTE))
        daemon.release.wait(RUN_TIMEOUT)
        conn.sendall(result(2) + done(2))

    d = fake(script)
    proc = subprocess.Popen([str(BTGUARDCTL), "--socket", d.path, "guard", "1", "2"],
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    try:
        ready, _, _ = select.select([proc.stdout], [], [], 10)
        assert ready, "first result was not written before the reply ended"
        assert proc.stdout.readline() == b"1: guarded (0 sites), wrote, paused 0 us\n"
        assert proc.poll() is None
        d.release.set()
        out, _ = proc.communicate(timeout=RUN_TIMEOUT)
        assert out == b"2: guarded (0 sites), already guarded, nothing written\n"
        assert proc.returncode == 0
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()


# -------------------------------------------------------- JSON output --

def test_json_success_shape(fake):
    d = fake(reply(result(1234, flags=WROTE, sites=[SITE], pause_us=412, check_us=300),
                   done(1)))
    p = run(["--json", "guard", "1234"], sock=d.path)
    assert p.returncode == 0
    assert json_lines(p) == [{
        "pid": 1234, "ok": True, "action": "guard", "state": "guarded", "wrote": True,
        "message": "", "uid": None, "user": None, "command": "", "risk": None,
        "risk_reason": "", "warnings": [],
        "sites": [{"object": LIBC, "address": "0x7f1234560000", "state": "guarded",
                   "bound": False, "breakpoint": False, "backtraces": "empty"}],
        "pause_us": 412, "check_us": 300,
    }]


def test_json_error_shape_and_exit_1(fake):
    d = fake(reply(
        result(1, action=UNGUARD, state=GUARDED, sites=[SITE]),
        result(2, action=UNGUARD, error=ERR_BUSY, state=GUARDED, msg="thread 3 inside"),
        result(3, action=UNGUARD, error=errno.ESRCH, state=UNKNOWN),
        done(3)))
    p = run(["--json", "unguard", "1", "2", "3"], sock=d.path)
    assert p.returncode == 1
    ok, busy, gone = json_lines(p)
    assert ok["ok"] is True and "error" not in ok
    assert busy == {"pid": 2, "ok": False, "action": "unguard", "state": "guarded",
                    "wrote": False, "error": "busy", "message": "thread 3 inside",
                    "uid": None, "user": None, "command": "", "risk": None,
                    "risk_reason": "", "warnings": [],
                    "sites": [], "pause_us": 0, "check_us": 0}
    assert gone["ok"] is False
    assert gone["state"] is None
    assert gone["error"] == "ESRCH"
    assert gone["message"] == os.strerror(errno.ESRCH)


def test_json_status_has_every_state_and_no_timing(fake):
    states = [NONE, UNGUARDED, GUARDED, PARTIAL, FOREIGN]
    d = fake(reply(*[result(10 + s, action=STATUS, state=s) for s in states],
                   done(len(states))))
    p = run(["--json", "status"] + [str(10 + s) for s in states], sock=d.path)
    assert p.returncode == 0
    objs = json_lines(p)
    assert [o["state"] for o in objs] == ["none", "unguarded", "guarded", "partial", "foreign"]
    for o in objs:
        assert o["action"] == "status"
        assert "pause_us" not in o and "check_us" not in o


def test_json_escaping(fake):
    msg = b'q"b\\s/\n\t\x01\x7f caf\xc3\xa9 \xff\xc3 \xed\xa0\x80 \xf0\x9f\x90\x8d'
    obj = b"/lib/\x1bweird\"\xfe.so"
    d = fake(reply(result(4, error=ERR_BUSY, msg=msg, sites=[(16, SITE_ORIGINAL, obj)]),
                   done(1)))
    p = run(["--json", "guard", "4"], sock=d.path)
    assert p.returncode == 1
    raw = p.stdout
    assert raw.count(b"\n") == 1, "one object per line"
    assert all(b >= 0x20 for b in raw[:-1]), "no raw control bytes"
    raw.decode("utf-8")   # invalid input bytes never reach the output
    (o,) = json_lines(p)
    # Invalid sequences (a lone 0xff, a truncated 0xc3, a UTF-8 encoded
    # surrogate) become U+FFFD per byte; valid text passes through.
    assert o["message"] == ('q"b\\s/\n\t\x01\x7f café \ufffd\ufffd '
                            '\ufffd\ufffd\ufffd \U0001f40d')
    assert o["sites"] == [{"object": '/lib/\x1bweird"\ufffd.so', "address": "0x10",
                           "state": "original", "bound": False, "breakpoint": False}]


# ------------------------------------------------- the daemon misbehaves --

def test_request_level_error(fake):
    d = fake(reply(error_msg(ERR_LIMIT, "too many requests at once")))
    p = run(["guard", "1", "2"], sock=d.path)
    assert p.returncode == 1
    assert p.stdout == b""
    assert p.stderr.decode() == \
        "btguardctl: daemon refused the request: limit: too many requests at once\n"


def test_request_level_error_without_text(fake):
    d = fake(reply(error_msg(4114, "")))
    p = run(["--json", "guard", "1"], sock=d.path)
    assert p.returncode == 1
    assert p.stdout == b""
    assert p.stderr.decode().startswith("btguardctl: daemon refused the request: shutdown: ")


def test_close_mid_reply_exits_1_after_printing_what_came(fake):
    d = fake(reply(result(1, flags=WROTE)))
    p = run(["guard", "1", "2"], sock=d.path)
    assert p.returncode == 1
    assert lines(p) == ["1: guarded (0 sites), wrote, paused 0 us"]
    assert "closed the connection after 1 result" in p.stderr.decode()


def test_close_mid_message_exits_1(fake):
    full = result(1, sites=[SITE])
    d = fake(reply(full[:len(full) - 3]))
    p = run(["guard", "1"], sock=d.path)
    assert p.returncode == 1
    assert p.stdout == b""
    assert "closed the connection" in p.stderr.decode()


@pytest.mark.parametrize("garbage, why", [
    (header(RESULT, 4, magic=0x12345678) + b"\0" * 4, "malformed"),
    (header(RESULT, 4, version=1) + b"\0" * 4, "protocol version"),
    (header(9, 0), "malformed"),
    (header(RESULT, 65537), "size limit"),
    (message(RESULT, b"\0" * 10), "malformed result"),
    (message(DONE, b"\0" * 5), "malformed end"),
    (message(ERROR, struct.pack("<IH", 0, 0)), "malformed error"),
    (message(REQUEST, b""), "unexpected message"),
    (b"HTTP/1.1 400 Bad Request\r\n\r\n", "malformed"),
], ids=["magic", "version", "kind", "oversize", "result", "done", "error", "request", "http"])
def test_garbage_from_daemon_exits_1(fake, garbage, why):
    d = fake(reply(garbage))
    p = run(["guard", "1"], sock=d.path)
    assert p.returncode == 1
    assert why in p.stderr.decode()


def test_done_count_must_match(fake):
    d = fake(reply(result(1), done(2)))
    p = run(["guard", "1"], sock=d.path)
    assert p.returncode == 1
    assert "announced 2 results but sent 1" in p.stderr.decode()


def test_timeout_against_a_silent_daemon(fake):
    def silent(daemon, conn, req):
        daemon.release.wait(RUN_TIMEOUT)

    d = fake(silent)
    start = time.monotonic()
    p = run(["--timeout", "0.5", "guard", "1"], sock=d.path)
    elapsed = time.monotonic() - start
    assert p.returncode == 1
    assert "within 0.5 s" in p.stderr.decode()
    assert elapsed < 10, f"--timeout 0.5 took {elapsed:.1f} s"
    assert d.requests[0].pids == [1], "the request was sent before the wait"


def test_timeout_after_partial_reply_keeps_what_came(fake):
    def stall(daemon, conn, req):
        conn.sendall(result(1) + result(2)[:7])
        daemon.release.wait(RUN_TIMEOUT)

    d = fake(stall)
    p = run(["--timeout", "0.5", "guard", "1", "2"], sock=d.path)
    assert p.returncode == 1
    assert lines(p) == ["1: guarded (0 sites), already guarded, nothing written"]
    assert "1 result received" in p.stderr.decode()


# ---------------------------------------------------------- selectors --

def test_selectors_travel_in_the_request(fake):
    d = fake(reply(done(0)))
    p = run(["status", "--all", "--user", "0", "--exe", "python3*", "--cmdline", "* -m x *",
             "--cgroup", "/system.slice/a.service", "--maps", "*libc10.so", "--at-risk"],
            sock=d.path)
    assert p.returncode == 0, p.stderr
    (req,) = d.requests
    assert req.pids == [] and req.action == STATUS
    assert req.select == SEL_ALL | SEL_UID | SEL_EXE | SEL_CMDLINE | SEL_CGROUP | SEL_MAPS | \
        SEL_AT_RISK
    assert req.uid == 0
    assert req.patterns == {"exe": "python3*", "cmdline": "* -m x *",
                            "cgroup": "/system.slice/a.service", "maps": "*libc10.so"}
    # The summary of nothing, and no table header for no rows.
    assert lines(p) == ["0 processes: 0 guarded, 0 partial, 0 unguarded, 0 at risk"]


def test_user_name_is_resolved_by_the_client(fake):
    d = fake(reply(done(0)))
    assert run(["guard", "--user", "root"], sock=d.path).returncode == 0
    assert d.requests[0].select == SEL_UID and d.requests[0].uid == 0


def test_a_breakpoint_on_the_entry_is_named_not_foreign(fake):
    d = fake(reply(result(1234, action=STATUS, state=GUARDED,
                          sites=[(0x7f00, SITE_GUARDED, LIBC, SITE_BREAKPOINT)]), done(1)))
    p = run(["status", "-v", "1234"], sock=d.path)
    assert p.returncode == 0, p.stderr
    assert b"0x7f00: guarded (a breakpoint on its entry: a uprobe or a debugger)" in p.stdout, p.stdout
    d = fake(reply(result(1234, action=STATUS, state=GUARDED,
                          sites=[(0x7f00, SITE_GUARDED, LIBC, SITE_BREAKPOINT)]), done(1)),
             name="d2.sock")
    o = json_lines(run(["--json", "status", "1234"], sock=d.path))[0]
    assert o["sites"][0]["breakpoint"] is True and o["sites"][0]["bound"] is False


def report_result(pid, state, risk, **kw):
    return result(pid, action=STATUS, state=state, risk=risk, uid=0, command=f"python3 w{pid}.py",
                  sites=[(0x7f00, SITE_GUARDED if state == GUARDED else SITE_ORIGINAL, LIBC,
                          SITE_BOUND)], **kw)


def test_table_summary_and_exit_4_when_at_risk(fake):
    d = fake(reply(
        report_result(10, GUARDED, RISK_COVERED),
        report_result(11, UNGUARDED, RISK_AT_RISK),
        report_result(12, UNGUARDED, RISK_NONE),
        result(13, action=STATUS, error=4105, state=UNKNOWN),   # gone before its turn
        done(4)))
    p = run(["status", "--all"], sock=d.path)
    assert p.returncode == 4, p.stderr
    out = lines(p)
    assert out[0].split() == ["PID", "USER", "STATE", "RISK", "COMMAND"]
    assert out[1].split() == ["10", "root", "guarded", "covered", "python3", "w10.py"]
    assert out[2].split() == ["11", "root", "unguarded", "AT-RISK", "python3", "w11.py"]
    assert out[3].split() == ["12", "root", "unguarded", "-", "python3", "w12.py"]
    assert out[4] == "3 processes: 1 guarded, 0 partial, 2 unguarded, 1 at risk, " \
                     "1 exited meanwhile"
    assert len(out) == 5


def by_action(status, policy, swept=None):
    """A script that answers STATUS with status, POLICY with policy and
    SWEPT with swept, by default as a daemon older than SWEPT does."""
    swept = swept or reply(error_msg(4112, "unknown action 7"))

    def script(daemon, conn, req):
        {5: policy, 7: swept}.get(req.action, status)(daemon, conn, req)
    return script


def test_prometheus_counts(fake):
    d = fake(by_action(reply(
        report_result(10, GUARDED, RISK_COVERED),
        report_result(11, UNGUARDED, RISK_AT_RISK, warnings=1),
        report_result(12, PARTIAL, RISK_COVERED),
        result(14, action=STATUS, error=errno.EACCES, state=UNKNOWN),
        done(4)), reply(error_msg(4100, "root only"))))
    p = run(["status", "--all", "--format=prometheus"], sock=d.path)
    assert p.returncode == 4
    metrics = {}
    for line in lines(p):
        if not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            metrics[name] = int(value)
    stamp = metrics.pop("btguard_report_timestamp_seconds")
    assert abs(stamp - time.time()) < 60
    assert metrics == {
        'btguard_processes{state="guarded"}': 1, 'btguard_processes{state="partial"}': 1,
        'btguard_processes{state="unguarded"}': 1, 'btguard_processes{state="foreign"}': 0,
        'btguard_processes{state="none"}': 0, "btguard_processes_at_risk": 1,
        "btguard_processes_covered": 2, "btguard_processes_warned": 1,
        "btguard_status_errors": 1, 'btguard_status_errors_by_kind{kind="EACCES"}': 1,
        'btguard_status_errors_by_cause{cause="daemon-short"}': 0,
        'btguard_status_errors_by_cause{cause="other"}': 1, "btguard_policy_loaded": 1}


def test_failure_without_risk_exits_1_and_risk_wins(fake):
    d = fake(reply(report_result(10, UNGUARDED, RISK_NONE),
                   result(14, action=STATUS, error=errno.EACCES, state=UNKNOWN), done(2)))
    assert run(["status", "--all"], sock=d.path).returncode == 1
    d = fake(reply(report_result(11, UNGUARDED, RISK_AT_RISK),
                   result(14, action=STATUS, error=errno.EACCES, state=UNKNOWN), done(2)),
             name="d2.sock")
    assert run(["status", "--all"], sock=d.path).returncode == 4


def test_warnings_are_shown(fake):
    d = fake(reply(report_result(11, UNGUARDED, RISK_AT_RISK, warnings=0x07), done(1)))
    p = run(["--json", "status", "11"], sock=d.path)
    (o,) = json_lines(p)
    assert [w["name"] for w in o["warnings"]] == [
        "torch-cpp-stacktraces", "torch-distributed-debug", "other-mount-namespace"]
    assert o["sites"][0]["bound"] is True and o["user"] == "root" and o["uid"] == 0
    p = run(["status", "11"], sock=d.path)
    assert sum("warning:" in line for line in lines(p)) == 3, lines(p)


def fake_systemctl(tmp_path, output, status=0):
    """A systemctl on PATH that prints output; records its arguments."""
    bindir = tmp_path / "bin"
    bindir.mkdir(exist_ok=True)
    script = bindir / "systemctl"
    script.write_text(f"#!/bin/sh\necho \"$@\" > {tmp_path}/args\n"
                      f"printf '%s' '{output}'\nexit {status}\n")
    script.chmod(0o755)
    return {"PATH": f"{bindir}:{os.environ['PATH']}"}


def run_env(args, sock, env):
    full = {k: v for k, v in os.environ.items() if k != "BTGUARD_SOCKET"}
    full.update(env)
    return subprocess.run([str(BTGUARDCTL), "--socket", str(sock)] + args,
                          capture_output=True, timeout=RUN_TIMEOUT, env=full)


def test_unit_is_resolved_to_its_cgroup(fake, tmp_path):
    d = fake(reply(done(0)))
    env = fake_systemctl(tmp_path, "/system.slice/train.service\n")
    p = run_env(["guard", "--unit", "train.service"], d.path, env)
    assert p.returncode == 0, p.stderr
    assert (tmp_path / "args").read_text().split() == [
        "show", "--property=ControlGroup", "--value", "--", "train.service"]
    assert d.requests[0].select == SEL_CGROUP
    assert d.requests[0].patterns == {"cgroup": "/system.slice/train.service"}


def test_unit_without_cgroup_fails_before_sending(fake, tmp_path):
    d = fake(reply(done(0)))
    p = run_env(["guard", "--unit", "stopped.service"], d.path, fake_systemctl(tmp_path, ""))
    assert p.returncode == 1
    assert b"has no control group" in p.stderr
    p = run_env(["guard", "--unit", "x.service"], d.path, fake_systemctl(tmp_path, "", 1))
    assert p.returncode == 1
    assert b"systemctl failed" in p.stderr
    assert d.requests == []
    p = run(["guard", "--unit", "a.service", "--cgroup", "/a"], sock=d.path)
    assert p.returncode == 2 and b"give one" in p.stderr


def fake_scontrol(tmp_path):
    """An scontrol on PATH that knows no step of any job (as on a node
    where the job has none running)."""
    bindir = tmp_path / "bin"
    bindir.mkdir(exist_ok=True)
    script = bindir / "scontrol"
    script.write_text("#!/bin/sh\necho 'There are no steps for job 42 on node (null).'\nexit 1\n")
    script.chmod(0o755)
    return {"PATH": f"{bindir}:{os.environ['PATH']}"}


# A step ID is kept in a fixed buffer (client/slurm.h, SLURM_MAX_STEP = 32
# with its NUL): 31 characters are the longest it holds, 32 the first it
# must refuse.  Under the ASan build of the client (make check's second
# run) a copy one byte too long is a report, which run() fails on.
LONGEST_STEP = "0" * 30 + "7"
FIRST_TOO_LONG = "0" * 31 + "7"


def test_longest_slurm_step_is_taken_and_one_more_is_a_usage_error(fake, tmp_path):
    d = fake(reply(done(0)))
    env = fake_scontrol(tmp_path)
    p = run_env(["status", "--slurm-job", f"42.{LONGEST_STEP}"], d.path, env)
    for marker in (b"Sanitizer", b"runtime error:"):
        assert marker not in p.stderr, p.stderr
    assert p.returncode != 2, p.stderr           # not refused: asked of scontrol
    p = run(["status", "--slurm-job", f"42.{FIRST_TOO_LONG}"], sock=d.path)
    assert p.returncode == 2, p.stderr
    assert b"invalid --slurm-job" in p.stderr, p.stderr
    assert d.connections == 0


# ------------------------------------------------------- policy, reload --

RULE, POLICY, RELOAD = 5, 5, 6
RULE_EXCLUDE = 0x01


def rule(name, match, hits=0, pids=(), flags=0):
    name, match = name.encode(), match.encode()
    return message(RULE, struct.pack("<IBBH", hits, flags, len(pids), len(name)) + name +
                   struct.pack("<H", len(match)) + match +
                   struct.pack(f"<{len(pids)}i", *pids))


def test_policy_lists_rules_as_lines_and_json(fake):
    script = reply(rule("torch", "at-risk", hits=3, pids=(42, 7)),
                   rule("sshd", "exe=sshd", flags=RULE_EXCLUDE), done(2))
    d = fake(script)
    p = run(["policy"], sock=d.path)
    assert p.returncode == 0, p.stderr
    assert p.stdout.decode() == ("torch: guard at-risk, 3 hits (last: 42 7)\n"
                                 "sshd: exclude exe=sshd\n")
    req = d.requests[-1]
    assert (req.action, req.flags, req.deadline_ms, req.pids, req.select) == \
        (POLICY, 0, 0, [], 0)
    d = fake(script, name="j.sock")
    p = run(["--json", "policy"], sock=d.path)
    assert json_lines(p) == [
        {"rule": "torch", "kind": "guard", "match": "at-risk", "hits": 3, "last_pids": [42, 7]},
        {"rule": "sshd", "kind": "exclude", "match": "exe=sshd", "hits": 0, "last_pids": []},
    ]


def test_reload_says_how_many_rules_or_the_daemons_error(fake):
    d = fake(reply(done(4)))
    p = run(["reload"], sock=d.path)
    assert (p.returncode, p.stdout) == (0, b"policy reloaded: 4 rules\n"), p.stderr
    assert d.requests[-1].action == RELOAD
    d = fake(reply(error_msg(22, "/etc/btguard/btguardd.conf:7: unknown key \"x\"")),
             name="e.sock")
    p = run(["reload"], sock=d.path)
    assert p.returncode == 1
    assert "/etc/btguard/btguardd.conf:7: unknown key" in p.stderr.decode()


def test_a_rule_answering_another_request_is_malformed(fake):
    d = fake(reply(rule("torch", "at-risk"), done(1)))
    p = run(["status", "1"], sock=d.path)
    assert p.returncode == 1 and b"malformed rule" in p.stderr


@pytest.mark.parametrize("args", [["policy", "1"], ["reload", "--all"], ["--tree", "reload"],
                                  ["--deadline", "5", "policy"], ["--format=table", "policy"]])
def test_policy_and_reload_take_no_targets(args):
    p = run(args, sock="/nonexistent/s")
    assert p.returncode == 2, p.stderr


def nagios_reply_messages(at_risk):
    results = [report_result(10, GUARDED, RISK_COVERED), report_result(12, UNGUARDED, RISK_NONE),
               result(14, action=STATUS, error=errno.EACCES, state=UNKNOWN)]
    results += [report_result(20 + i, UNGUARDED, RISK_AT_RISK) for i in range(at_risk)]
    return [*results, done(len(results))]


def nagios_reply(at_risk):
    return reply(*nagios_reply_messages(at_risk))


@pytest.mark.parametrize("at_risk,args,code,state", [
    (0, [], 0, "OK"),
    (1, [], 2, "CRITICAL"),                                  # default: any at risk
    (1, ["--warning", "0", "--critical", "1"], 1, "WARNING"),
    (2, ["--warning", "0", "--critical", "1"], 2, "CRITICAL"),
    (2, ["--warning=2", "--critical=5"], 0, "OK"),
])
def test_nagios_states_and_exit_codes(fake, at_risk, args, code, state):
    d = fake(nagios_reply(at_risk))
    p = run(["status", "--all", "--format=nagios"] + args, sock=d.path)
    assert p.returncode == code, (p.stdout, p.stderr)
    (line,) = lines(p)
    text, perf = line.split(" | ")
    assert text.startswith(f"BTGUARD {state} - {at_risk} process"), line
    assert "unreadable" in text
    perf = dict(kv.split("=") for kv in perf.split())
    warn = args[1].split("=")[-1] if args else ""
    if args and "=" in args[0]:
        warn = args[0].split("=")[1]
    crit = {"": "0", "0": "1", "2": "5"}[warn]
    assert perf == {"at_risk": f"{at_risk};{warn};{crit};0;", "unreadable": "1;;;0;",
                    "guarded": "1", "partial": "0", "unguarded": str(1 + at_risk),
                    "foreign": "0", "none": "0", "covered": "1", "warned": "0", "errors": "1",
                    "short": "0", "policy_loaded": "1"}


def shortage_reply(at_risk, short):
    """nagios_reply's processes, and `short` the daemon could not read for
    want of descriptors or memory."""
    results = nagios_reply_messages(at_risk)[:-1]
    results += [result(40 + i, action=STATUS, error=e, state=UNKNOWN)
                for i, e in enumerate([errno.EMFILE, errno.ENFILE, errno.ENOMEM][:short])]
    return reply(*results, done(len(results)))


@pytest.mark.parametrize("at_risk,short,args,code,state", [
    (0, 1, [], 3, "UNKNOWN"),          # it cannot tell what it did not read
    (0, 3, [], 3, "UNKNOWN"),          # EMFILE, ENFILE and ENOMEM alike
    (0, 1, ["--warning=0"], 3, "UNKNOWN"),
    (1, 1, ["--warning=0", "--critical=5"], 3, "UNKNOWN"),   # WARNING known, more may hide
    (1, 1, [], 2, "CRITICAL"),         # what it read is already critical
])
def test_nagios_is_unknown_when_the_daemon_ran_short(fake, at_risk, short, args, code, state):
    d = fake(shortage_reply(at_risk, short))
    p = run(["status", "--all", "--format=nagios"] + args, sock=d.path)
    assert p.returncode == code, (p.stdout, p.stderr)
    (line,) = lines(p)
    text, perf = line.split(" | ")
    assert text.startswith(f"BTGUARD {state} - the daemon ran short of descriptors or memory "
                           f"and could not read {short} process"), line
    assert f"{at_risk} process" in text and ", 1 unreadable" in text
    perf = dict(kv.split("=") for kv in perf.split())
    assert perf["short"] == str(short) and perf["errors"] == str(1 + short), perf
    assert perf["unreadable"].startswith("1;"), perf


@pytest.mark.parametrize("args,code,state", [
    ([], 0, "OK"),                                          # none by default: PID 1 is unreadable
    (["--warning-unreadable=0"], 1, "WARNING"),
    (["--warning-unreadable", "0", "--critical-unreadable", "0"], 2, "CRITICAL"),
    (["--critical-unreadable=1"], 0, "OK"),
])
def test_nagios_threshold_on_processes_unreadable_for_other_reasons(fake, args, code, state):
    d = fake(nagios_reply(0))
    p = run(["status", "--all", "--format=nagios"] + args, sock=d.path)
    assert p.returncode == code, (p.stdout, p.stderr)
    (line,) = lines(p)
    assert line.startswith(f"BTGUARD {state} - 0 processes at risk of 2, 1 unreadable |"), line


def test_a_policy_not_in_force_is_a_nagios_warning_and_a_prometheus_series(fake):
    why = "/etc/btguard/btguardd.conf.d/x.conf:3: unknown key 'ation' | typo"
    d = fake(reply(notice_msg(why), *nagios_reply_messages(0)))
    p = run(["status", "--all", "--format=nagios"], sock=d.path)
    assert p.returncode == 1, (p.stdout, p.stderr)
    (line,) = lines(p)
    text, perf = line.split(" | ")
    # The file and line, and the '|' in the text shown as \x7c (it would start the perfdata).
    assert text == ("BTGUARD WARNING - 0 processes at risk of 2, 1 unreadable; policy: "
                    "/etc/btguard/btguardd.conf.d/x.conf:3: unknown key 'ation' \\x7c typo")
    assert "policy_loaded=0" in perf.split()
    # Critical stays critical.
    d = fake(reply(notice_msg(why), *nagios_reply_messages(1)), name="d2.sock")
    p = run(["status", "--all", "--format=nagios"], sock=d.path)
    assert p.returncode == 2 and lines(p)[0].startswith("BTGUARD CRITICAL - "), lines(p)
    # Prometheus: the report is whole, with its sweep time and rule counts.
    d = fake(by_action(reply(notice_msg(why), *nagios_reply_messages(0)),
                       reply(notice_msg(why), rule("torch", "at-risk", hits=3), done(1)),
                       reply(done(1796000000))), name="d3.sock")
    p = run(["status", "--all", "--format=prometheus"], sock=d.path)
    out = p.stdout.decode()
    assert p.returncode == 1, (out, p.stderr)   # 1: the unreadable process
    assert "btguard_policy_loaded 0\n" in out
    assert "btguard_last_sweep_timestamp_seconds 1796000000\n" in out
    assert 'btguard_rule_guards_total{rule="torch"} 3\n' in out
    assert p.stderr.decode().count("warning: ") == 1, p.stderr


def test_nagios_unknown_when_the_daemon_is_unreachable_or_refuses(fake, sockdir):
    p = run(["status", "--all", "--format=nagios"], sock=sockdir / "nobody.sock")
    assert p.returncode == 3
    assert lines(p)[0].startswith("BTGUARD UNKNOWN - cannot connect to "), lines(p)
    d = fake(reply(error_msg(ERR_LIMIT, "too many requests at once")))
    p = run(["status", "--all", "--format=nagios"], sock=d.path)
    assert p.returncode == 3 and lines(p)[0].startswith("BTGUARD UNKNOWN - "), lines(p)
    # Cut off before DONE: no verdict either.
    d = fake(reply(report_result(10, GUARDED, RISK_COVERED)), name="d2.sock")
    p = run(["status", "--all", "--format=nagios"], sock=d.path)
    assert p.returncode == 3 and lines(p)[0].startswith("BTGUARD UNKNOWN - "), lines(p)
    # A usage error is UNKNOWN too, not CRITICAL (2).
    p = run(["status", "--all", "--format=nagios", "--warning=x"], sock=d.path)
    assert p.returncode == 3 and lines(p)[0].startswith("BTGUARD UNKNOWN - invalid --warning")


@pytest.mark.parametrize("args,message", [
    (["status", "--all", "--warning=1"], "go with --format=nagios"),
    (["guard", "--all", "--format=nagios"], "use it with status"),
    (["guard", "--all", "--output=/tmp/x"], "use it with status"),
    (["policy", "--format=nagios"], "prints lines or JSON"),
])
def test_nagios_and_output_usage(args, message):
    p = run(args, sock="/nonexistent")
    assert message.encode() in p.stderr, p.stderr


def test_prometheus_guards_by_rule_for_root(fake):
    """The policy's counts follow the status counts; exclusions have none."""
    d = fake(by_action(nagios_reply(0),
                       reply(rule("torch", "at-risk", hits=3, pids=(42,)),
                             rule("sshd", "exe=sshd", flags=RULE_EXCLUDE),
                             rule("py.exec-2", "exe=python3*", hits=0), done(3))))
    p = run(["status", "--all", "--format=prometheus"], sock=d.path)
    assert p.returncode == 1 and p.stderr == b""   # 1: the unreadable process
    out = p.stdout.decode()
    assert out.endswith("# TYPE btguard_rule_guards_total counter\n"
                        'btguard_rule_guards_total{rule="torch"} 3\n'
                        'btguard_rule_guards_total{rule="py.exec-2"} 0\n'), out
    assert [r.action for r in d.requests] == [STATUS, 5, 7]
    # The last sweep's time, from a daemon that knows SWEPT; 0 is "none".
    for when, name in ((1796000000, "s1.sock"), (0, "s2.sock")):
        d = fake(by_action(nagios_reply(0), reply(done(0)), reply(done(when))), name=name)
        p = run(["status", "--all", "--format=prometheus"], sock=d.path)
        assert p.returncode == 1 and p.stderr == b""
        assert (f"btguard_last_sweep_timestamp_seconds {when}\n" in p.stdout.decode()) == \
            (when != 0), p.stdout
        assert [(r.action, r.pids, r.select, r.flags) for r in d.requests][1:] == \
            [(5, [], 0, 0), (7, [], 0, 0)]
    # The policy request failing otherwise than "denied": no report.
    d = fake(by_action(nagios_reply(0), reply(error_msg(ERR_LIMIT, "busy"))), name="d2.sock")
    p = run(["status", "--all", "--format=prometheus"], sock=d.path)
    assert p.returncode == 1 and b"refused" in p.stderr


def test_output_is_renamed_complete_or_left_alone(fake, tmp_path):
    target = tmp_path / "btguard.prom"
    d = fake(by_action(nagios_reply(1), reply(rule("torch", "at-risk", hits=2), done(1))))
    before = int(time.time())
    p = run(["status", "--all", "--format=prometheus", "--output", str(target)], sock=d.path)
    assert p.returncode == 4, p.stderr   # the at-risk exit status, as without --output
    assert p.stdout == b""
    text = target.read_text()
    assert "btguard_processes_at_risk 1\n" in text
    assert 'btguard_status_errors_by_kind{kind="EACCES"} 1\n' in text
    stamp = int(text.split("\nbtguard_report_timestamp_seconds ")[1].split()[0])
    assert before <= stamp <= time.time() + 1
    assert 'btguard_rule_guards_total{rule="torch"} 2\n' in text
    assert os.listdir(tmp_path) == ["btguard.prom"]   # no temporary file left
    # The daemon cut off or gone: the last complete report stays, no temporary file.
    d = fake(reply(report_result(10, GUARDED, RISK_COVERED)), name="d2.sock")
    p = run(["status", "--all", "--format=prometheus", "--output", str(target)], sock=d.path)
    assert p.returncode == 1
    p = run(["status", "--all", "--format=prometheus", "--output", str(target)],
            sock=tmp_path / "none.sock")
    assert p.returncode == 3
    assert target.read_text() == text and os.listdir(tmp_path) == ["btguard.prom"]
    # A link planted where the report goes is replaced, not written through.
    elsewhere = tmp_path / "elsewhere"
    elsewhere.write_text("mine\n")
    target.unlink()
    target.symlink_to(elsewhere)
    d = fake(by_action(nagios_reply(0), reply(done(0))), name="d3.sock")
    p = run(["status", "--all", "--format=prometheus", "--output", str(target)], sock=d.path)
    assert p.returncode == 1, p.stderr   # the unreadable process
    assert elsewhere.read_text() == "mine\n" and not target.is_symlink()
    assert "btguard_processes_at_risk 0\n" in target.read_text()
    # A directory it cannot write: said, exit 1.
    p = run(["status", "--all", "--format=prometheus", "--output",
             str(tmp_path / "no" / "btguard.prom")], sock=d.path)
    assert p.returncode == 1 and b"cannot create" in p.stderr
