# SPDX-License-Identifier: MIT
"""Helpers shared by the hardening tests: test_faults.py,
test_load.py, test_pidreuse.py, test_audit.py and tests/valgrind/run.

This module owns what those tests need beyond conftest.py: the complete
wire-error table, a site's two legal byte patterns (original and guarded),
daemons that a test starts, kills and restarts itself (the `daemon` fixture
is one orderly daemon per test), and the daemon's footprint (VmRSS, open
descriptors) read from /proc.

Everything here kills only processes it started, by PID, and every wait is
bounded.
"""

import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

from conftest import (BTGUARDD, ERR, ERR_NAMES, START_TIMEOUT, STOP_TIMEOUT, expected_site,
                      read_mem, wait_listening)

STUB = b"\x31\xc0\xc3"           # xor eax,eax; ret
ENDBR64 = b"\xf3\x0f\x1e\xfa"



def error_name(code):
    if code == 0:
        return "ok"
    if 4096 <= code < 4096 + len(ERR_NAMES):
        return ERR_NAMES[code - 4096]
    return f"errno {code} ({os.strerror(code)})" if code < 4096 else f"unknown {code}"


# ----------------------------------------------------------------- sites --

class Site:
    """The libc backtrace() site of a process and its two legal contents.

    Built before anything touched the process, so `original` is the real
    thing; the guarded form is the original with the 3-byte stub after an
    endbr64 (or at the entry), as the stub placement rule says.  8 bytes are
    compared: the stub and what surrounds it must both be right.
    """

    LEN = 8

    def __init__(self, pid):
        self.pid = pid
        self.address = expected_site(pid)
        self.original = read_mem(pid, self.address, self.LEN)
        off = len(ENDBR64) if self.original.startswith(ENDBR64) else 0
        self.guarded = self.original[:off] + STUB + self.original[off + len(STUB):]
        assert self.guarded != self.original, "the site already holds the stub"

    def now(self):
        return read_mem(self.pid, self.address, self.LEN)

    def classify(self, data=None):
        """"original", "guarded", or a failure text naming the bytes."""
        data = self.now() if data is None else data
        if data == self.original:
            return "original"
        if data == self.guarded:
            return "guarded"
        return (f"torn: {data.hex()} at {self.address:#x} (original "
                f"{self.original.hex()}, guarded {self.guarded.hex()})")


# -------------------------------------------------------------- targets --

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


# --------------------------------------------------------------- daemons --

class KillableDaemon:
    """A btguardd of the test's own, to be SIGKILLed at will.

    Unlike conftest's `Daemon`, ending it abruptly is the point; the log is
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


def d_threads(pid):
    """TIDs of pid's threads in uninterruptible sleep ("D")."""
    out = []
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] == "D":
                    out.append(int(tid))
        except FileNotFoundError:
            pass
    return out


def renice_threads(pid, nice=19):
    """Lowers every thread of pid (niceness is per thread on Linux).  A
    32-thread busy loop on a 2-core machine otherwise starves the daemon
    and the test of CPU, and rounds take seconds instead of milliseconds;
    the victim still hammers backtrace() on every idle cycle."""
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            os.setpriority(os.PRIO_PROCESS, int(tid), nice)
        except ProcessLookupError:
            pass


# ------------------------------------------------------------- footprint --

def vm_rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError(f"no VmRSS for {pid}")


def open_fds(pid):
    return len(os.listdir(f"/proc/{pid}/fd"))


def maps_mention(pid, name):
    with open(f"/proc/{pid}/maps") as f:
        return name in f.read()


def is_sanitized(pid):
    """True when the process runs with AddressSanitizer, whose quarantine
    and shadow memory make RSS grow by design (leaks are LSan's job)."""
    return maps_mention(pid, "libasan")
