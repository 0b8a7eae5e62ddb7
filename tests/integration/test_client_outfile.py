# SPDX-License-Identifier: MIT
"""btguardctl status --output FILE: the report is written to FILE.PID,
created new, and renamed over FILE whole.  What root must never do on the
way: write through a link planted at the temporary name, leave the
temporary file behind when a signal ends it, or say that standard output
failed when a full disk refused the file.

The client talks to a real daemon (tests/integration/btg/daemon.py) or,
to be caught mid-exchange, to a socket that listens and never answers.
Namespaces of the test's own: a PID namespace makes the client's PID (and
so the temporary name) known in advance, a mount namespace holds a small
full tmpfs; both end with the command.
"""

import os
import signal
import socket
import subprocess
import time

import pytest

from btg.daemon import running_daemon
from btg.paths import BTGUARDCTL

QUICK = 20      # seconds: far more than any answer needs


@pytest.fixture
def tmp(tmp_path):
    os.chmod(tmp_path, 0o755)
    return tmp_path


def test_a_link_planted_at_the_temporary_name_is_not_written_through(tmp):
    """As the first process of a PID namespace of its own the client is
    PID 1, so its temporary file is FILE.1: a symlink there to a file of
    root's must neither be followed nor removed, and the file stays as it
    was."""
    report = tmp / "btguard.prom"
    precious = tmp / "precious"
    precious.write_text("root's own data\n" * 100)
    before = precious.read_text()
    link = tmp / "btguard.prom.1"
    link.symlink_to(precious)
    with running_daemon() as d:
        p = subprocess.run(["unshare", "--pid", "--fork", "--kill-child", str(BTGUARDCTL),
                            "--socket", d.socket, "status", "--all", "--format=prometheus",
                            "--output", str(report)],
                           capture_output=True, text=True, timeout=QUICK)
    if p.returncode != 1 and "unshare" in p.stderr:
        pytest.skip(f"no PID namespace here: {p.stderr.strip()}")
    assert p.returncode == 1, p
    assert f"cannot create {link}: File exists" in p.stderr, p
    assert precious.read_text() == before
    assert link.is_symlink() and os.readlink(link) == str(precious)
    assert not report.exists()


@pytest.fixture
def silent_socket(tmp):
    """A socket that takes connections (the backlog) and never answers."""
    path = tmp / "silent.sock"
    s = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    s.bind(str(path))
    s.listen(8)
    try:
        yield path
    finally:
        s.close()


def wait_for_temporary_file(tmp, p):
    """The temporary file client p writes its report to, once it exists."""
    tmp_file = tmp / f"btguard.prom.{p.pid}"
    deadline = time.monotonic() + QUICK
    while not tmp_file.exists():
        assert p.poll() is None, p.communicate()
        assert time.monotonic() < deadline, "no temporary file"
        time.sleep(0.01)
    return tmp_file

@pytest.mark.parametrize("sig", [signal.SIGTERM, signal.SIGINT, signal.SIGHUP],
                         ids=lambda s: s.name)
def test_a_signal_removes_the_temporary_file(tmp, silent_socket, sig):
    report = tmp / "btguard.prom"
    report.write_text("the last complete report\n")
    # As a terminal or a timer would signal it: a signal ignored since the
    # start (nohup, or a runner's background job) is left ignored, on purpose.
    p = subprocess.Popen([str(BTGUARDCTL), "--socket", str(silent_socket), "--timeout", "60",
                          "status", "--all", "--format=prometheus", "--output", str(report)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         preexec_fn=lambda: signal.signal(sig, signal.SIG_DFL))
    try:
        tmp_file = wait_for_temporary_file(tmp, p)
        # Waiting for the reply now (it never comes).
        time.sleep(0.2)
        os.kill(p.pid, sig)
        p.wait(QUICK)
    finally:
        if p.poll() is None:
            os.kill(p.pid, signal.SIGKILL)
            p.wait()
    # It died of the signal, as without --output, and left nothing behind.
    assert p.returncode == -sig, p.returncode
    assert sorted(os.listdir(tmp)) == ["btguard.prom", "silent.sock"]
    assert report.read_text() == "the last complete report\n"


def test_a_full_disk_is_named_with_the_file(tmp):
    """A tmpfs of 64 KiB filled up, in a mount namespace of the test's own:
    the report cannot be written, and the message says which file and
    ENOSPC, not standard output; no temporary file stays."""
    mnt = tmp / "full"
    mnt.mkdir()
    report = mnt / "btguard.prom"
    script = ('mount -t tmpfs -o size=64k,mode=0755 btg-full "$1" || exit 99; '
              'cat /dev/zero > "$1/fill" 2>/dev/null; '
              '"$2" --socket "$3" status "$4" --format=prometheus --output "$1/btguard.prom"; '
              'echo "rc=$?"; ls -A "$1"')
    with running_daemon() as d:
        p = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c",
                            script, "sh", str(mnt), str(BTGUARDCTL), d.socket, str(os.getpid())],
                           capture_output=True, text=True, timeout=QUICK)
    if "rc=" not in p.stdout:
        pytest.skip(f"no private tmpfs here: {p.stderr.strip()}")
    assert p.stdout.splitlines() == ["rc=1", "fill"], p
    assert p.stderr == f"btguardctl: cannot write {report}: No space left on device\n", p
    assert os.listdir(mnt) == []    # the mount went with its namespace


def test_a_signal_ignored_since_the_start_stays_ignored(tmp, silent_socket):
    """nohup's promise: a client started with SIGHUP ignored does not die
    of one (nor drop its temporary file), and ends as it would have."""
    report = tmp / "btguard.prom"
    p = subprocess.Popen([str(BTGUARDCTL), "--socket", str(silent_socket), "--timeout", "2",
                          "status", "--all", "--format=prometheus", "--output", str(report)],
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                         preexec_fn=lambda: signal.signal(signal.SIGHUP, signal.SIG_IGN))
    try:
        tmp_file = wait_for_temporary_file(tmp, p)
        os.kill(p.pid, signal.SIGHUP)
        time.sleep(0.2)
        assert p.poll() is None and tmp_file.exists()
        _, err = p.communicate(timeout=QUICK)
    finally:
        if p.poll() is None:
            os.kill(p.pid, signal.SIGKILL)
            p.wait()
    # Its own timeout ended it: the Prometheus tool's usual failure, nothing left behind.
    assert p.returncode > 0, (p.returncode, err)
    assert sorted(os.listdir(tmp)) == ["silent.sock"], err
