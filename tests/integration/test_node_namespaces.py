# SPDX-License-Identifier: MIT
"""The daemon where the shipped unit and containers put it: in a mount
namespace of its own.

The "other-mount-namespace" warning compares a process with the node's
mount namespace (PID 1's, else kthreadd's, else the one the daemon
started in), not with the daemon's own: under the unit's
PrivateMounts=yes - played here with `unshare --mount` - no host process
is warned, in `status --all` or in the Prometheus count, and a process
in yet another mount namespace still is.
"""

import os
import re
import shutil
import uuid

import pytest

from conftest import REPO, running_daemon, start, victim_path

WARNING = "other-mount-namespace"


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
