# SPDX-License-Identifier: MIT
"""The systemd units parse cleanly, keep their sandbox, and the sandbox's
capability set is enough for the daemon's real work.

`systemd-analyze verify` exits 0 even for unknown keys or bad values (it
only warns), so any output at all counts as a failure here.  The service
template is installed the way `make install` does it (@SBINDIR@ replaced),
pointing at the real daemon binary so verify can check ExecStart.
"""

import errno
import os
import re
import shutil
import subprocess
import time

import pytest

from btg.daemon import running_daemon
from btg.kernel import proc_connector_probe
from btg.paths import BTGUARDD, BUILD, REPO
from btg.procfs import wait_threads_running

SYSTEMD_DIR = REPO / "systemd"


@pytest.fixture
def units(tmp_path):
    if shutil.which("systemd-analyze") is None:
        pytest.skip("systemd-analyze not installed")
    if not BTGUARDD.exists():
        pytest.fail(f"{BTGUARDD} missing: run `make`")
    sbin = tmp_path / "sbin"
    sbin.mkdir()
    shutil.copy(BTGUARDD, sbin / "btguardd")
    shutil.copy(SYSTEMD_DIR / "btguardd.socket", tmp_path / "btguardd.socket")
    text = (SYSTEMD_DIR / "btguardd.service.in").read_text()
    assert "@SBINDIR@" in text
    (tmp_path / "btguardd.service").write_text(
        text.replace("@SBINDIR@", str(sbin)).replace("@BINDIR@", str(BUILD)))
    return tmp_path


def test_units_verify_cleanly(units):
    p = subprocess.run(["systemd-analyze", "verify", "--man=no",
                        "./btguardd.socket", "./btguardd.service"],
                       cwd=units, capture_output=True, text=True, timeout=120)
    assert p.returncode == 0, p.stderr
    assert p.stdout.strip() == "" and p.stderr.strip() == "", \
        f"systemd-analyze verify complained:\n{p.stdout}{p.stderr}"


def test_service_contract(units):
    service = (units / "btguardd.service").read_text()
    socket = (units / "btguardd.socket").read_text()
    assert re.search(r"^Type=notify$", service, re.M)
    assert re.search(r"^ExecStart=\S+/btguardd --idle-exit \d+$", service, re.M)
    assert re.search(r"^ListenStream=/run/btguard/btguard.sock$", socket, re.M)
    assert re.search(r"^SocketMode=0666$", socket, re.M)
    # The daemon reads other processes' /proc: it must not be hidden from it.
    assert not re.search(r"^ProtectProc=(?!default$)", service, re.M)
    assert not re.search(r"^ProcSubset=(?!all$)", service, re.M)
    # ptrace must survive the system call filter.
    assert re.search(r"^SystemCallFilter=.*@debug", service, re.M)
    # The policy's exec events: the kernel's proc connector answers only
    # sockets of the host's network namespace, over AF_NETLINK; no IP at all.
    assert not re.search(r"^PrivateNetwork=(yes|true|1)$", service, re.M)
    assert re.search(r"^RestrictAddressFamilies=AF_UNIX AF_NETLINK$", service, re.M)
    assert re.search(r"^IPAddressDeny=any$", service, re.M)
    # Enabled at boot for the policy, it brings the socket it requires along;
    # a reload goes through btguardctl reload.
    assert re.search(r"^WantedBy=multi-user.target$", service, re.M)
    assert not re.search(r"^Also=", service, re.M)
    assert re.search(r"^Requires=btguardd.socket$", service, re.M)
    assert re.search(r"^ExecReload=\S+/btguardctl reload$", service, re.M)
    assert re.search(r"^WantedBy=sockets.target$", socket, re.M)


def test_service_exposure(units):
    p = subprocess.run(["systemd-analyze", "security", "--offline=yes", "--no-pager",
                        "./btguardd.service"],
                       cwd=units, capture_output=True, text=True, timeout=120)
    m = re.search(r"Overall exposure level for \S+: ([0-9.]+)", p.stdout + p.stderr)
    assert m, f"no exposure level in systemd-analyze output: {p.stdout}{p.stderr}"
    # The hardening issue's bar: 2.0 or less (the booted system test checks
    # the same on a real systemd).
    assert float(m.group(1)) <= 2.0, p.stdout


def unit_capabilities():
    text = (SYSTEMD_DIR / "btguardd.service.in").read_text()
    m = re.search(r"^CapabilityBoundingSet=(.*)$", text, re.M)
    assert m, "the service must limit its capabilities"
    caps = m.group(1).split()
    assert caps and all(c.startswith("CAP_") for c in caps), caps
    return [c[len("CAP_"):].lower() for c in caps]


def unit_prefix():
    """The command prefix that leaves a root process only the unit's
    CapabilityBoundingSet, and no_new_privs."""
    if shutil.which("setpriv") is None:
        pytest.skip("setpriv not installed")
    bounding = "-all," + ",".join("+" + c for c in unit_capabilities())
    return ["setpriv", f"--bounding-set={bounding}", "--no-new-privs"]


def unit_bounded(**kw):
    """A daemon holding only the unit's CapabilityBoundingSet, and no_new_privs."""
    return running_daemon(prefix=unit_prefix(), **kw)


def test_unit_capabilities_suffice(victim, test_user):
    """The daemon, holding only the unit's CapabilityBoundingSet (and
    no_new_privs), guards and unguards another user's process as root."""
    with unit_bounded() as d:
        v = victim.bt_loop(4, user=test_user)
        for action, state in (("status", "unguarded"), ("guard", "guarded"),
                              ("unguard", "unguarded")):
            r = d.ctl("--deadline", 20000, action, v.pid, check=0)
            assert [(x["ok"], x["state"]) for x in r.results] == [(True, state)], r
            wait_threads_running(v.pid)
        v.assert_alive()


def test_unit_capabilities_suffice_for_the_policy(victim, test_user, tmp_path):
    """The policy's sweep, with only the unit's capabilities, reads another
    user's process and guards it (its maps need CAP_SYS_PTRACE)."""
    v = victim.bt_loop(4, user=test_user)
    conf = tmp_path / "btguardd.conf"
    # The test's own copy of the victim, by its full path: nobody else's process.
    exe = os.readlink(f"/proc/{v.pid}/exe")
    conf.write_text(f"[watch]\ninterval = 200ms\n[rule one]\naction = guard\n"
                    f"exe = {exe}\nuser = {test_user[0]}\n")
    os.chmod(tmp_path, 0o755)
    with unit_bounded(args=("--config", str(conf))) as d:
        deadline = time.monotonic() + 10
        while d.ctl("status", v.pid, check=0).results[0]["state"] != "guarded":
            assert time.monotonic() < deadline, d.log()[-4000:]
            time.sleep(0.05)
        assert "by rule one" in d.log()
        # Exec events where the kernel lets a process with the unit's
        # capabilities listen: Linux 6.6 lets one without CAP_NET_ADMIN (which
        # the unit does not grant) bind, but not every kernel since does
        # (6.18 as built for our test machine refuses).  A probe under the
        # same prefix subscribes as the daemon does (btg/kernel.py); the
        # daemon listens, or says why not, and the sweep alone guarded the
        # process above.
        step, err = proc_connector_probe(unit_prefix())
        log = d.log()
        if step == "ok":
            assert "exec events: listening to the proc connector" in log, log[-4000:]
        else:
            assert "exec events unavailable: " in log, (step, err, log[-4000:])
            assert "exec events: listening" not in log, log[-4000:]
        if (step, err) == ("bind", errno.EPERM):
            assert "binding to the proc connector: the kernel refused it (EPERM) to a " \
                   "process without CAP_NET_ADMIN" in log, log[-4000:]
        v.assert_alive()
