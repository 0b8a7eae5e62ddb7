# SPDX-License-Identifier: MIT
"""The daemon where the shipped unit and containers put it: in a mount
namespace of its own, in a PID or user namespace other than the node's.

1. The "other-mount-namespace" warning compares a process with the node's
   mount namespace (PID 1's, else kthreadd's, else the one the daemon
   started in), not with the daemon's own: under the unit's
   PrivateMounts=yes - played here with `unshare --mount` - no host
   process is warned, in `status --all` or in the Prometheus count, and
   a process in yet another mount namespace still is.
2. Where the kernel refuses exec events, the notice names the cause that
   decides: in a PID namespace other than the node's (a container) the
   kernel serves none, whatever capabilities the daemon holds, so no
   capability is blamed; likewise in a user namespace of its own, and in
   a network namespace of its own (the node agent's container: the host's
   PIDs, no network, no CAP_NET_ADMIN).
"""

import os
import re
import shutil
import signal
import subprocess
import time
import uuid

import pytest

from btg.daemon import running_daemon
from btg.paths import BTGUARDD, REPO, START_TIMEOUT, STOP_TIMEOUT
from btg.victims import start, victim_path

WARNING = "other-mount-namespace"
PIDNS_NOTICE = ("exec events unavailable: in a PID namespace other than the node's: the kernel "
                "gives exec events only to the initial PID namespace; new processes are found "
                "by the sweep")
NETNS_NOTICE = ("exec events unavailable: in a network namespace other than the node's: the "
                "kernel sends exec events only to sockets of the initial network namespace; "
                "new processes are found by the sweep")
USERNS_NOTICE = ("exec events unavailable: in a user namespace other than the node's: the "
                 "kernel gives exec events only to the initial user namespace; new processes "
                 "are found by the sweep")


def need(*tools):
    for t in tools:
        if shutil.which(t) is None:
            pytest.skip(f"{t} not installed")


def mnt_ns(pid):
    """(dev, ino) of pid's mount namespace, None if it cannot be read."""
    try:
        st = os.stat(f"/proc/{pid}/ns/mnt")
    except OSError:
        return None
    return st.st_dev, st.st_ino


def node_mnt_ns():
    """The node's mount namespace as the daemon learns it: PID 1's, else kthreadd's."""
    ns = mnt_ns(1)
    if ns is None:
        try:
            with open("/proc/2/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            return None
        if int(fields[1]) == 0 and int(fields[6]) & 0x00200000:   # ppid 0, PF_KTHREAD
            ns = mnt_ns(2)
    return ns


def warned(res):
    return [w["name"] for w in res["warnings"]]


def prometheus(stdout):
    return {name: int(value) for name, value in
            (line.rsplit(" ", 1) for line in stdout.splitlines() if not line.startswith("#"))}


# ------------------------------------------------------ mount namespaces --

def test_the_unit_gives_the_daemon_a_mount_namespace_of_its_own():
    """What the test below plays: the shipped unit's PrivateMounts=yes."""
    text = (REPO / "systemd" / "btguardd.service.in").read_text()
    assert re.search(r"^PrivateMounts=yes$", text, re.M)


def test_a_private_mount_namespace_warns_only_for_other_namespaces(victim, tmp_path):
    """The daemon in a mount namespace of its own, as the unit runs it:
    host processes carry no warning, one in yet another mount namespace
    does; `status --all` warns for no process in the node's namespace,
    and the Prometheus count of the test's two processes is 1."""
    need("unshare")
    here = mnt_ns("self")
    if node_mnt_ns() not in (None, here):
        pytest.skip("the tests run outside the node's mount namespace: "
                    "host processes are in another one here")
    token = f"btg-ns-{uuid.uuid4().hex[:8]}"
    link = tmp_path / token
    link.symlink_to(victim_path("idle"))
    os.chmod(tmp_path, 0o755)
    host = start(victim, [link, 1], "idle-host")
    # unshare without --fork execs: the victim keeps the PID we started.
    other = start(victim, ["unshare", "--mount", "--propagation", "private", link, 1],
                  "idle-other-mntns")
    assert mnt_ns(host.pid) == here and mnt_ns(other.pid) not in (None, here)

    with running_daemon(prefix=("unshare", "--mount", "--propagation", "private")) as d:
        # The premise: the daemon's own namespace is not the host's.
        assert mnt_ns(d.pid) not in (None, here)

        r = d.ctl("status", host.pid, os.getpid(), other.pid, check=0)
        by_pid = {res["pid"]: res for res in r.results}
        assert warned(by_pid[host.pid]) == [], by_pid[host.pid]
        assert warned(by_pid[os.getpid()]) == [], by_pid[os.getpid()]
        assert warned(by_pid[other.pid]) == [WARNING], by_pid[other.pid]

        # Node-wide: every warned process is one the test, too, sees elsewhere
        # (other tests' containers may come and go: each is checked by itself).
        r = d.ctl("status", "--all", check=None)
        assert r.rc in (0, 1, 4), r.stderr
        seen = {res["pid"]: res for res in r.results if res["ok"]}
        assert host.pid in seen and other.pid in seen
        wrong = [(pid, res["command"]) for pid, res in seen.items()
                 if WARNING in warned(res) and mnt_ns(pid) == here]
        assert wrong == [], f"processes of the node's mount namespace warned: {wrong}"
        assert WARNING in warned(seen[other.pid])

        r = d.ctl("status", "--cmdline", f"*{token}*", "--format=prometheus",
                  json=False, check=None)
        metrics = prometheus(r.stdout)
        assert metrics['btguard_processes{state="unguarded"}'] == 2, r.stdout
        assert metrics["btguard_processes_warned"] == 1, r.stdout


# ---------------------------------------------- exec events: the notice --

def exec_events_conf(tmp_path):
    conf = tmp_path / "btguardd.conf"
    conf.write_text("[watch]\ninterval = 1000ms\n\n"
                    f"[rule none]\naction = guard\ncmdline = *btg-matches-nothing-{uuid.uuid4().hex}*\n")
    os.chmod(tmp_path, 0o755)
    return conf


def wait_for(path, what, proc):
    deadline = time.monotonic() + START_TIMEOUT
    while True:
        text = path.read_text(errors="replace") if path.exists() else ""
        if what in text:
            return text
        assert proc.poll() is None, f"exited {proc.returncode}:\n{text}"
        assert time.monotonic() < deadline, f"no {what!r} in:\n{text}"
        time.sleep(0.02)


def pid_namespace_works():
    """Whether this sandbox lets us make a PID namespace (with its /proc)."""
    p = subprocess.run(["unshare", "--pid", "--fork", "--mount-proc", "true"],
                       capture_output=True, text=True, timeout=30)
    return p.returncode == 0, p.stderr.strip()


@pytest.mark.parametrize("caps", ["all", "without-net-admin"])
def test_in_a_pid_namespace_the_notice_names_it(tmp_path, caps):
    """The daemon as a container's init: the kernel serves exec events only
    to the initial PID namespace.  With CAP_NET_ADMIN the subscription is
    ignored; without it (a container's default) the bind fails with EPERM
    first - either way the PID namespace is named, not the capability."""
    need("unshare", "setpriv")
    ok, why = pid_namespace_works()
    if not ok:
        pytest.skip(f"cannot make a PID namespace here: {why}")
    conf = exec_events_conf(tmp_path)
    log = tmp_path / "btguardd.log"
    prefix = [] if caps == "all" else ["setpriv", "--bounding-set=-net_admin"]
    # --kill-child: the namespace's init, the daemon, dies with unshare (it
    # ignores our SIGTERM as a namespace's init).
    argv = ["unshare", "--pid", "--fork", "--mount-proc", "--kill-child", *prefix,
            str(BTGUARDD), "--socket", str(tmp_path / "s.sock"), "--verbose",
            "--config", str(conf)]
    with open(log, "wb") as out:
        proc = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=out,
                                stderr=subprocess.STDOUT)
    try:
        text = wait_for(log, "exec events", proc)
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=STOP_TIMEOUT)
    assert PIDNS_NOTICE in text, text
    assert "CAP_NET_ADMIN" not in text and "listening to the proc connector" not in text, text


def test_in_a_user_namespace_the_notice_names_it(tmp_path):
    """The daemon as root of a user namespace of its own: its CAP_NET_ADMIN
    is over that namespace, not the node's, and the kernel serves only the
    initial user namespace."""
    need("unshare")
    p = subprocess.run(["unshare", "--user", "--map-root-user", "true"],
                       capture_output=True, text=True, timeout=30)
    if p.returncode != 0:
        pytest.skip(f"cannot make a user namespace here: {p.stderr.strip()}")
    conf = exec_events_conf(tmp_path)
    with running_daemon(prefix=("unshare", "--user", "--map-root-user"),
                        args=("--config", str(conf))) as d:
        text = wait_for(d.log_path, "exec events", d.proc)
    assert USERNS_NOTICE in text, text
    assert "CAP_NET_ADMIN" not in text, text


def test_in_a_network_namespace_the_notice_names_it(tmp_path):
    """The node agent's container: the host's PIDs, a network namespace of
    its own, no CAP_NET_ADMIN.  The bind fails with EPERM for want of the
    capability, but the network namespace decides: with it the kernel
    would refuse the subscription all the same."""
    need("unshare", "setpriv")
    conf = exec_events_conf(tmp_path)
    with running_daemon(prefix=("unshare", "--net", "setpriv", "--bounding-set=-net_admin"),
                        args=("--config", str(conf))) as d:
        text = wait_for(d.log_path, "exec events", d.proc)
    assert NETNS_NOTICE in text, text
    assert "CAP_NET_ADMIN" not in text, text
