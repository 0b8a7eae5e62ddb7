# SPDX-License-Identifier: MIT
"""Policy files: read only what root alone controls, never wait on one,
and a wrong one never leaves the node without a daemon.

A real daemon runs with `--config` under a temporary directory (root's,
0755, under pytest's root-owned directories and /tmp, a root-owned
sticky directory: every directory above is trusted).  What is hostile
is made here: a FIFO, a symlink into a directory nobody trusted owns, a
file owned by nobody (uid 65534), modes writable by the group or
others, a file over the size limit.  Each refusal must be
"FILE: refused: reason", at once, with the policy in force kept.
"""

import contextlib
import os
import socket
import subprocess
import threading
import time

import pytest

from btg.daemon import running_daemon
from btg.paths import BTGUARDD

NOBODY = 65534
QUICK = 10          # seconds: far more than any answer needs, far less than a hang


@pytest.fixture
def tmp(tmp_path):
    os.chmod(tmp_path, 0o755)
    return tmp_path


def rule(name, exe):
    return f"[rule {name}]\naction = guard\nexe = {exe}\n"


@pytest.fixture
def conf(tmp):
    """btguardd.conf with one rule, and an empty btguardd.conf.d/."""
    path = tmp / "btguardd.conf"
    path.write_text(rule("main", "/nonexistent/btg-main"))
    path.chmod(0o644)
    (tmp / "btguardd.conf.d").mkdir(mode=0o755)
    return path


def dropins(conf):
    return conf.parent / "btguardd.conf.d"


def check_config(conf, timeout=QUICK):
    return subprocess.run([str(BTGUARDD), "--check-config", "--config", str(conf)],
                          capture_output=True, text=True, timeout=timeout)


def rule_names(d):
    return {r["rule"] for r in d.ctl("policy", check=None).results if "rule" in r}


def refused_by_reload(d, path, why):
    """A reload names path and why, at once; the rules in force stay."""
    before = rule_names(d)
    r = d.ctl("reload", json=False, check=1, timeout=QUICK)
    assert f"{path}: refused: {why}" in r.stderr, r
    assert rule_names(d) == before


def refused_at_once_while_others_are_served(d, path, why):
    """A reload, and meanwhile another client's status: both answered at
    once (nothing waits on path), the reload naming path and why, and the
    rules in force unchanged."""
    got = {}

    def reload():
        try:
            got["reload"] = d.ctl("reload", json=False, check=None, timeout=QUICK)
        except subprocess.TimeoutExpired as e:
            got["reload"] = e

    t0 = time.monotonic()
    th = threading.Thread(target=reload)
    th.start()
    time.sleep(0.2)
    status = d.ctl("status", os.getpid(), check=None, timeout=QUICK)
    th.join(QUICK + 5)
    assert time.monotonic() - t0 < QUICK
    assert status.rc in (0, 4) and len(status.results) == 1, status
    r = got["reload"]
    assert not isinstance(r, Exception), r
    assert r.rc == 1 and f"{path}: refused: {why}" in r.stderr, r
    assert rule_names(d) == {"main"}


# ----------------------------------------------------------- not waited on --

def test_a_fifo_drop_in_is_refused_at_once_and_others_are_served(conf):
    fifo = dropins(conf) / "50-x.conf"
    with running_daemon(args=("--config", str(conf))) as d:
        os.mkfifo(fifo)
        refused_at_once_while_others_are_served(d, fifo, "a FIFO, not a regular file")
    # At start and from --check-config alike.
    assert check_config(conf).returncode == 1
    with running_daemon(args=("--config", str(conf))) as d:
        assert f"{fifo}: refused: a FIFO, not a regular file" in d.log()
        assert d.ctl("status", os.getpid(), check=None, timeout=QUICK).rc in (0, 4)


LEASE_HOLDER = """
import fcntl, os, signal, sys, time
signal.signal(signal.SIGIO, signal.SIG_IGN)   # the kernel's "give it back"
fd = os.open(sys.argv[1], os.O_RDONLY)
fcntl.fcntl(fd, fcntl.F_SETLEASE, fcntl.F_WRLCK)
print("held", flush=True)
time.sleep(600)
"""


@contextlib.contextmanager
def lease_held(path):
    """A write lease on path held by another process: an open by anyone
    else waits for the holder to let go, up to lease-break-time (45 s by
    default), unless it is O_NONBLOCK.  The holder never lets go; it is
    killed (by PID) at the end, which frees any open still waiting."""
    holder = subprocess.Popen(["/usr/bin/python3", "-c", LEASE_HOLDER, str(path)],
                              stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        if holder.stdout.readline() != "held\n":
            holder.kill()
            pytest.skip(f"no write lease here: {holder.communicate()[1].strip()}")
        yield
    finally:
        holder.kill()
        holder.wait()


def test_a_drop_in_under_a_lease_is_refused_at_once_and_others_are_served(conf):
    leased = dropins(conf) / "20-leased.conf"
    why = "another process holds a lease on it (opening it would wait for that process)"
    with running_daemon(args=("--config", str(conf))) as d:
        leased.write_text(rule("leased", "/nonexistent/btg-leased"))
        leased.chmod(0o644)
        with lease_held(leased):
            refused_at_once_while_others_are_served(d, leased, why)
            p = check_config(conf)
            assert p.returncode == 1 and f"{leased}: refused: {why}" in p.stderr, p
        # Let go: read as any other.
        d.ctl("reload", check=0, timeout=QUICK)
        assert rule_names(d) == {"main", "leased"}


@pytest.mark.parametrize("target", ["/proc/sys/kernel/ostype", "/sys/kernel/uevent_seqnum",
                                    "/proc/kmsg"])
def test_a_drop_in_linked_to_a_kernel_file_is_refused_before_it_is_read(conf, target):
    """/proc/kmsg is a regular file of root's, mode 0400: it passes every
    owner and mode check, and each read takes kernel messages from whoever
    else reads them (journald).  Refused from its file system, unread."""
    if not os.path.exists(target):
        pytest.skip(f"no {target} here")
    link = dropins(conf) / "30-kernel.conf"
    link.symlink_to(target)
    fs = "sysfs" if target.startswith("/sys/") else "proc"
    why = f"refused: a file of the kernel's {fs} interface, not a configuration file"
    p = check_config(conf)
    assert p.returncode == 1 and p.stderr == f"{link}: {why}\n", p
    with running_daemon(args=("--config", str(conf))) as d:
        assert f"{link}: {why}" in d.log()
        link.unlink()
        d.ctl("reload", check=0, timeout=QUICK)
        link.symlink_to(target)
        refused_by_reload(d, link, why.removeprefix("refused: "))


# ------------------------------------------------------------- not trusted --

def test_a_drop_in_owned_by_an_ordinary_user_is_refused(conf):
    bad = dropins(conf) / "20-user.conf"
    with running_daemon(args=("--config", str(conf))) as d:
        bad.write_text(rule("users", "/nonexistent/btg-user"))
        os.chown(bad, NOBODY, NOBODY)
        refused_by_reload(d, bad, f"owned by uid {NOBODY}, not root")
        assert rule_names(d) == {"main"}
    p = check_config(conf)
    assert p.returncode == 1 and f"{bad}: refused: owned by uid {NOBODY}" in p.stderr, p


@pytest.mark.parametrize("mode,who", [(0o664, "its group"), (0o646, "others"),
                                      (0o666, "group and others")])
def test_a_file_writable_by_group_or_others_is_refused(conf, mode, who):
    bad = dropins(conf) / "20-open.conf"
    bad.write_text(rule("open", "/nonexistent/btg-open"))
    bad.chmod(mode)
    p = check_config(conf)
    assert p.returncode == 1, p
    assert f"{bad}: refused: writable by {who} (mode {mode:04o})" in p.stderr, p
    bad.chmod(0o644)
    assert check_config(conf).returncode == 0
    # The main file too, and a directory on the way.
    conf.chmod(0o666)
    assert f"{conf}: refused: writable by" in check_config(conf).stderr
    conf.chmod(0o644)
    dropins(conf).chmod(0o777)
    p = check_config(conf)
    assert p.returncode == 1, p
    assert f"{dropins(conf)}: refused: writable by group and others (mode 0777)" in p.stderr, p
    dropins(conf).chmod(0o755)
    conf.parent.chmod(0o775)
    p = check_config(conf)
    assert p.returncode == 1, p
    assert f"{conf}: refused: directory {conf.parent} is writable by its group" in p.stderr, p
    conf.parent.chmod(0o755)


def test_a_symlink_is_judged_by_what_it_points_to(conf, tmp):
    """A root-owned file, 0644, in a directory an ordinary user owns: that
    user can replace it, so a drop-in symlink to it is refused."""
    theirs = tmp / "theirs"
    theirs.mkdir(mode=0o755)
    target = theirs / "x.conf"
    target.write_text(rule("theirs", "/nonexistent/btg-theirs"))
    os.chown(theirs, NOBODY, NOBODY)
    link = dropins(conf) / "30-link.conf"
    link.symlink_to(target)
    with running_daemon(args=("--config", str(conf))) as d:
        refused_by_reload(d, link, f"directory {theirs} is owned by uid {NOBODY}, not root")
    # The same file in a directory of root's is taken, through the same link.
    os.chown(theirs, 0, 0)
    p = check_config(conf)
    assert p.returncode == 0 and "2 rule(s)" in p.stdout, p


def test_a_file_over_the_size_limit_is_refused(conf):
    big = dropins(conf) / "40-big.conf"
    big.write_text("# padding\n" * (256 * 1024 // 10 + 1))
    assert big.stat().st_size > 256 * 1024
    p = check_config(conf)
    assert p.returncode == 1 and f"{big}: refused: larger than 262144 bytes" in p.stderr, p


# ------------------------------------------------------------- which files --

def test_only_name_conf_drop_ins_are_read(conf):
    """What packages and editors leave beside drop-ins is not policy, even
    when it is (x.conf.dpkg-old with a rule) or is not (README) valid."""
    d_ = dropins(conf)
    (d_ / "10-real.conf").write_text(rule("real", "/nonexistent/btg-real"))
    (d_ / "10-real.conf.dpkg-old").write_text(rule("old", "/nonexistent/btg-old"))
    (d_ / "10-real.conf~").write_text(rule("backup", "/nonexistent/btg-backup"))
    (d_ / ".10-real.conf.swp").write_text("\0binary\0")
    (d_ / "README").write_text("Drop-ins go here, named NAME.conf.\n")
    p = check_config(conf)
    assert p.returncode == 0 and "2 rule(s)" in p.stdout, p
    with running_daemon(args=("--config", str(conf))) as d:
        assert rule_names(d) == {"main", "real"}


# ------------------------------------------------ a wrong policy at start --

def notified_status(ns, want):
    """The first sd_notify STATUS= text containing want (they come once a second)."""
    deadline = time.monotonic() + QUICK
    while time.monotonic() < deadline:
        for line in ns.recv(4096).decode().split("\n"):
            if line.startswith("STATUS=") and want in line:
                return line
    pytest.fail(f"no STATUS= with {want!r}")


def test_a_bad_drop_in_at_start_still_serves_and_says_so(conf, tmp, test_user):
    bad = dropins(conf) / "10-typo.conf"
    bad.write_text(rule("typo", "/nonexistent/btg-typo") + "frobnicate = 1\n")
    where = f"{bad}:4: unknown key \"frobnicate\""
    ns = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    ns.bind(str(tmp / "notify"))
    ns.settimeout(QUICK)
    with ns, running_daemon(args=("--config", str(conf)),
                            env={"NOTIFY_SOCKET": str(tmp / "notify")}) as d:
        assert d.proc.poll() is None
        assert f"critical: policy not loaded: {where}" in d.log(), d.log()
        # `systemctl status` shows it too.
        assert notified_status(ns, "policy NOT in force (btguardctl policy); ")
        # Manual requests are served; status and policy say what is wrong.
        r = d.ctl("status", os.getpid(), json=False, check=None, timeout=QUICK)
        assert r.rc in (0, 4) and f"{os.getpid()}:" in r.stdout, r
        assert f"warning: policy not loaded: {where}; no policy rules are in force" in r.stderr, r
        r = d.ctl("policy", check=1, timeout=QUICK)
        assert r.results == [{"policy_error": f"policy not loaded: {where}; no policy rules "
                                              "are in force"}], r
        r = d.ctl("policy", json=False, check=1, timeout=QUICK)
        assert r.stdout == "no policy rules\n" and where in r.stderr, r
        # Another user learns only that root has something to see: the text names rules.
        r = d.ctl("status", 1, json=False, check=1, timeout=QUICK, user=test_user)
        assert "warning: the daemon's policy is not what its files say (root sees why: " \
               "btguardctl policy)" in r.stderr and str(bad) not in r.stderr, r
        # Fixed and reloaded: the rules are in force and nothing is said any more.
        bad.write_text(rule("typo", "/nonexistent/btg-typo"))
        d.ctl("reload", check=0, timeout=QUICK)
        assert rule_names(d) == {"main", "typo"}
        r = d.ctl("status", os.getpid(), json=False, check=None, timeout=QUICK)
        assert "warning" not in r.stderr, r
        # A later bad reload keeps them, and says that too.
        bad.write_text("[rule typo\n")
        d.ctl("reload", json=False, check=1, timeout=QUICK)
        r = d.ctl("policy", json=False, check=1, timeout=QUICK)
        assert "the last reload failed" in r.stderr and "typo: guard" in r.stdout, r


def test_a_policy_not_in_force_is_seen_by_monitoring(conf):
    """A bad drop-in after a good start: the Nagios check warns with the
    file and line, and the Prometheus report stays whole (the sweep time
    and rule counts) with btguard_policy_loaded 0; fixed, both say so."""
    with running_daemon(args=("--config", str(conf))) as d:
        def nagios():
            return d.ctl("status", os.getpid(), "--format=nagios", json=False, timeout=QUICK)

        def prometheus():
            r = d.ctl("status", os.getpid(), "--format=prometheus", json=False, timeout=QUICK)
            assert r.rc == 0, r
            return r.stdout
        assert nagios().rc == 0
        assert "btguard_policy_loaded 1\n" in prometheus()
        bad = dropins(conf) / "20-typo.conf"
        bad.write_text(rule("typo", "/nonexistent/btg-typo") + "ation = guard\n")
        d.ctl("reload", json=False, check=1, timeout=QUICK)
        r = nagios()
        assert r.rc == 1, r
        assert r.stdout.startswith("BTGUARD WARNING - 0 processes at risk of 1; policy: the last "
                                   f"reload failed: {bad}:4: unknown key"), r
        text = prometheus()
        assert "btguard_policy_loaded 0\n" in text
        assert 'btguard_rule_guards_total{rule="main"} 0\n' in text
        assert "\nbtguard_last_sweep_timestamp_seconds " in text, text
        bad.unlink()
        d.ctl("reload", check=0, timeout=QUICK)
        assert nagios().rc == 0
        assert "btguard_policy_loaded 1\n" in prometheus()


# ---------------------------------------------------------- --check-config --

def test_check_config_exit_codes_and_touches_nothing(conf, tmp):
    sock = tmp / "never.sock"
    env = dict(os.environ, BTGUARD_SOCKET=str(sock))
    p = subprocess.run([str(BTGUARDD), "--check-config", "--config", str(conf)], env=env,
                       capture_output=True, text=True, timeout=QUICK)
    assert p.returncode == 0 and p.stdout == f"{conf}: valid: 1 rule(s), 1 guard rule(s), " \
                                             "sweep every 1000 ms\n" and not p.stderr, p
    (dropins(conf) / "10-bad.conf").write_text("[rule bad]\naction = guard\n")
    p = subprocess.run([str(BTGUARDD), "-t", "-c", str(conf)], env=env,
                       capture_output=True, text=True, timeout=QUICK)
    assert p.returncode == 1 and not p.stdout, p
    assert p.stderr == f"{dropins(conf)}/10-bad.conf:1: rule bad selects nothing: give at " \
                       "least one of at-risk = yes, all = yes, user, exe, cmdline, cgroup, " \
                       "unit, maps\n", p
    assert not sock.exists()
    p = subprocess.run([str(BTGUARDD), "--check-config", "--config", str(tmp / "missing")],
                       capture_output=True, text=True, timeout=QUICK)
    assert p.returncode == 1 and "missing: cannot open" in p.stderr, p


def test_check_config_without_config_and_without_the_default_file():
    """What the unit's ExecReload= runs.  The daemon runs without
    /etc/btguard/btguardd.conf (no policy), so --check-config says that
    is valid too.  Where /etc/btguard exists, an empty tmpfs hides it in a
    mount namespace of the test's own; /etc itself is never touched."""
    cmd = [str(BTGUARDD), "--check-config"]
    if os.path.lexists("/etc/btguard"):
        cmd = ["unshare", "--mount", "--propagation", "private", "sh", "-c",
               'mount -t tmpfs -o mode=0755 btg-empty /etc/btguard && exec "$@"', "sh", *cmd]
    p = subprocess.run(cmd, capture_output=True, text=True, timeout=QUICK)
    assert p.returncode == 0 and p.stderr == "", p
    assert p.stdout == "/etc/btguard/btguardd.conf: valid: 0 rule(s), 0 guard rule(s), " \
                       "sweep every 1000 ms\n", p
