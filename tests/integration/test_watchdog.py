# SPDX-License-Identifier: MIT
"""The systemd watchdog: with WATCHDOG_USEC set (as systemd does for
WatchdogSec=), btguardd sends WATCHDOG=1 at half the interval, from the
thread that does the work - while idle, and while one long operation
retries for many seconds - so systemd would kill it only when it is really
stuck, and then the kernel lets its targets go.

The daemon runs with NOTIFY_SOCKET pointing at a datagram socket this test
owns; WATCHDOG_PID names the daemon itself, as systemd sets it.  A long
operation needs no test hook: a guard of a process with a thread in
uninterruptible sleep is retried until its deadline.
"""

import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from btg.daemon import wait_listening
from btg.paths import BTGUARDD, STOP_TIMEOUT
from btg.procfs import d_threads
from btg.victims import D_TARGET, stop_started
from btg.wire import ACTION_GUARD, ERR, Wire, encode_request

WATCHDOG_USEC = 3_000_000          # systemd would kill after 3 s of silence
BUSY_MS = 10_000                   # the long operation: far longer than that


class Notify:
    """The test's NOTIFY_SOCKET: every datagram with its arrival time."""

    def __init__(self, path):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
        self.sock.bind(path)
        self.got = []

    def collect(self, seconds):
        end = time.monotonic() + seconds
        while (left := end - time.monotonic()) > 0:
            self.sock.settimeout(left)
            try:
                data = self.sock.recv(4096)
            except socket.timeout:
                break
            self.got.append((time.monotonic(), data.decode()))

    def pings(self, since=0.0):
        return [t for t, d in self.got if "WATCHDOG=1" in d.split("\n") and t >= since]


def max_gap(times, start, end):
    points = [start, *times, end]
    return max(b - a for a, b in zip(points, points[1:]))


def test_keepalives_while_idle_and_during_a_long_operation():
    d = Path(tempfile.mkdtemp(prefix="btg-wd-"))
    notify = Notify(str(d / "notify"))
    sock = str(d / "btguard.sock")
    log_path = d / "btguardd.log"
    env = {k: v for k, v in os.environ.items()
           if k not in ("LISTEN_FDS", "LISTEN_PID", "JOURNAL_STREAM", "BTGUARD_SOCKET")}
    env.update(NOTIFY_SOCKET=str(d / "notify"), WATCHDOG_USEC=str(WATCHDOG_USEC))
    procs = []
    with open(log_path, "wb") as log:
        # sh execs the daemon: $$ is the daemon's PID, as systemd's WATCHDOG_PID is.
        daemon = subprocess.Popen(["sh", "-c", 'WATCHDOG_PID=$$ exec "$0" "$@"', str(BTGUARDD),
                                   "--socket", sock, "--verbose"],
                                  stdin=subprocess.DEVNULL, stdout=log, stderr=subprocess.STDOUT,
                                  env=env)
    procs.append(daemon)
    fifo = d / "fifo"
    try:
        wait_listening(daemon, sock, lambda: log_path.read_text(errors="replace"))
        t0 = time.monotonic()
        notify.collect(5)
        idle = notify.pings()
        print(f"idle: {len(idle)} keep-alives in 5 s")
        assert any("READY=1" in data for _, data in notify.got), notify.got
        assert len(idle) >= 3, notify.got
        assert max_gap(idle, t0, time.monotonic()) < WATCHDOG_USEC / 1e6, idle

        os.mkfifo(fifo)
        target = subprocess.Popen([sys.executable, "-c", D_TARGET, str(fifo)],
                                  stdin=subprocess.DEVNULL, stdout=subprocess.PIPE)
        procs.append(target)
        assert target.stdout.readline() == b"ready\n"
        deadline = time.monotonic() + 20
        while not d_threads(target.pid):
            assert time.monotonic() < deadline, "no thread of the target went into D state"
            time.sleep(0.01)
        with Wire(sock, timeout=120) as w:
            w.send(encode_request(ACTION_GUARD, [target.pid], deadline_ms=BUSY_MS))
            t1 = time.monotonic()
            notify.collect(BUSY_MS / 1000 - 1)
            t2 = time.monotonic()
            [res] = w.read_results()
        busy = notify.pings(since=t1)
        print(f"during the operation: {len(busy)} keep-alives in {t2 - t1:.1f} s, "
              f"largest gap {max_gap(busy, t1, t2):.2f} s")
        assert res.error == ERR["busy"], res
        assert len(busy) >= 4, busy
        assert max_gap(busy, t1, t2) < WATCHDOG_USEC / 1e6, busy
    finally:
        if fifo.exists():
            # Lets the vfork child's open() finish, so it execs and exits.
            os.close(os.open(fifo, os.O_RDWR | os.O_NONBLOCK))
        for p in reversed(procs):
            if p is daemon and p.poll() is None:
                p.send_signal(signal.SIGTERM)
                try:
                    p.wait(timeout=STOP_TIMEOUT)
                except subprocess.TimeoutExpired:
                    pass
            stop_started(p)
        notify.sock.close()
        print(log_path.read_text(errors="replace")[-3000:])
        shutil.rmtree(d, ignore_errors=True)
    assert daemon.returncode == 0
