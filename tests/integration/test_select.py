# SPDX-License-Identifier: MIT
"""Selecting processes the way operators name them, and the at-risk report.

Every selector is resolved by the real daemon over the real /proc: a
victim with a unique command-line token, its executable, a cgroup made for
the test (in the unified hierarchy and in a v1 controller, as on a hybrid
host), a mapped library, its user.  A user other than root selects only
among its own processes.  The report: the table and its summary line,
risk from the objects a process maps (copies of an empty library under
torch's and greenlet's names, preloaded), `partial` after a late dlopen of
a second backtrace(), the environment warnings, the exit status for
monitoring, and the Prometheus text.
"""

import pwd
import re
import shutil
import subprocess
import tempfile
import uuid
from pathlib import Path

import pytest

from btg.daemon import running_daemon
from btg.paths import FAULTS_BTGUARDD
from btg.victims import GREENLET_SO, start, victim_path

CGROUP_ROOTS = [Path("/sys/fs/cgroup/unified"), Path("/sys/fs/cgroup/cpu")]


def pids_of(r):
    return sorted(res["pid"] for res in r.results)


def table_rows(stdout):
    """{pid: (user, state, risk)} from the status table."""
    rows = {}
    for line in stdout.splitlines():
        m = re.match(r"\s*(\d+)\s{2}(\S+)\s+(\S+)\s+(\S+)\s", line)
        if m:
            rows[int(m.group(1))] = m.group(2, 3, 4)
    return rows


def summary(stdout):
    last = stdout.strip().splitlines()[-1]
    m = re.match(r"(\d+) process(?:es)?: (\d+) guarded, (\d+) partial, (\d+) unguarded, "
                 r"(\d+) at risk", last)
    assert m, f"no summary line: {last!r}"
    return tuple(int(x) for x in m.groups())


@pytest.fixture
def token():
    """A word no other process on the machine has in its command line."""
    return "btgsel" + uuid.uuid4().hex[:12]


@pytest.fixture
def cgroup():
    """A fresh cgroup per hierarchy; victims moved in are moved back at the end."""
    made = []

    def make(root):
        if not root.is_dir():
            pytest.skip(f"no cgroup hierarchy at {root}")
        path = root / f"btg-test-{uuid.uuid4().hex[:8]}"
        path.mkdir()
        made.append(path)
        return path

    yield make
    for path in made:
        for pid in (path / "cgroup.procs").read_text().split():
            try:
                (path.parent / "cgroup.procs").write_text(pid)
            except OSError:
                pass
        path.rmdir()


def idle(victim, *extra, env=None):
    return start(victim, [victim_path("idle"), 1, *extra], "idle", env=env)


# ----------------------------------------------------------- selectors --

def test_cmdline_selects_exactly_the_matching_processes(daemon, victim, token):
    # idle ignores an argument after its thread count only with --nondumpable,
    # so the token rides in the environment and in argv[0] through a symlink.
    link = Path(tempfile.mkdtemp(prefix="btg-sel-")) / token
    link.symlink_to(victim_path("idle"))
    try:
        a = start(victim, [link, 1], "idle")
        b = start(victim, [link, 2], "idle")
        other = idle(victim)
        r = daemon.ctl("status", "--cmdline", f"*{token} 1", check=0)
        assert pids_of(r) == [a.pid], r
        r = daemon.ctl("status", "--cmdline", f"*{token}*", check=0)
        assert pids_of(r) == sorted([a.pid, b.pid]), r
        assert other.pid not in pids_of(r)
        # --exe matches the executable, not argv[0]: both are idle.
        r = daemon.ctl("status", "--exe", str(victim_path("idle")), check=0)
        assert {a.pid, b.pid, other.pid} <= set(pids_of(r)), r
        r = daemon.ctl("status", "--exe", "idle", "--cmdline", f"*{token}*", check=0)
        assert pids_of(r) == sorted([a.pid, b.pid]), r
        r = daemon.ctl("status", "--exe", "*/victims/no-such-victim", check=0)
        assert r.results == [], r
    finally:
        shutil.rmtree(link.parent)


def test_a_survey_is_one_record(daemon, victim, token):
    """status through a selector is logged once per request, with its
    counts; each process's answer only at debug (monitoring asks it of the
    whole node every minute).  A named PID's status is still its own record."""
    link = Path(tempfile.mkdtemp(prefix="btg-sel-")) / token
    link.symlink_to(victim_path("idle"))
    try:
        vs = [start(victim, [link, 1], "idle") for _ in range(2)]
        r = daemon.ctl("status", "--cmdline", f"*{token}*", check=0)
        assert pids_of(r) == sorted(v.pid for v in vs), r
        log = daemon.log().splitlines()
        for v in vs:
            assert not [ln for ln in log if ln.startswith(f"btguardd: info: status pid={v.pid} ")]
            assert [ln for ln in log if ln.startswith(f"btguardd: debug: status pid={v.pid} ")]
        surveys = [m.groups() for m in
                   (re.match(r"btguardd: info: status of (\d+) selected process(?:es)? by uid=0 "
                             r"gid=0 pid=\d+: (\d+) answered, (\d+) failed$", ln) for ln in log)
                   if m]
        assert surveys == [("2", "2", "0")], surveys
        daemon.ctl("status", vs[0].pid, check=0)
        assert [ln for ln in daemon.log().splitlines()
                if ln.startswith(f"btguardd: info: status pid={vs[0].pid} ")]
    finally:
        shutil.rmtree(link.parent)


@pytest.mark.parametrize("root", CGROUP_ROOTS, ids=["unified", "v1-cpu"])
def test_cgroup_selects_the_subtree(daemon, victim, cgroup, root):
    top = cgroup(root)
    inside, below, outside = idle(victim), idle(victim), idle(victim)
    (top / "cgroup.procs").write_text(str(inside.pid))
    sub = top / "job_42"
    sub.mkdir()
    try:
        (sub / "cgroup.procs").write_text(str(below.pid))
        name = "/" + top.name
        r = daemon.ctl("status", "--cgroup", name, check=0)
        assert pids_of(r) == sorted([inside.pid, below.pid]), r
        r = daemon.ctl("status", "--cgroup", name + "/job_42", check=0)
        assert pids_of(r) == [below.pid], r
        # A name that only starts like it is another cgroup.
        r = daemon.ctl("status", "--cgroup", name[:-1], check=0)
        assert r.results == [], r
        r = daemon.ctl("guard", "--cgroup", name, check=0)
        assert pids_of(r) == sorted([inside.pid, below.pid]), r
        assert all(res["state"] == "guarded" for res in r.results), r
        assert daemon.ctl("status", outside.pid, check=0).results[0]["state"] == "unguarded"
        r = daemon.ctl("unguard", "--cgroup", name, check=0)
        assert all(res["state"] == "unguarded" for res in r.results), r
    finally:
        (top / "cgroup.procs").write_text(str(below.pid))
        sub.rmdir()


def test_maps_selects_by_mapped_object(daemon, victim):
    pre = str(victim_path("libbtpre"))
    with_pre = idle(victim, env={"LD_PRELOAD": pre})
    without = idle(victim)
    r = daemon.ctl("status", "--maps", "libbtpre", check=0)
    assert with_pre.pid in pids_of(r) and without.pid not in pids_of(r), r
    r = daemon.ctl("status", "--maps", pre, "--exe", "idle", check=0)
    assert pids_of(r) == [with_pre.pid], r


@pytest.fixture
def user_gid_apart():
    """(name, uid, gid) of a user made for the test whose gid is not its
    uid (in the group nogroup, 65534, while system uids stay below 1000),
    so a name resolved to the wrong id selects nobody of theirs; deleted
    at the end (a test names it before `victim`, so its processes are
    gone by then)."""
    name = "btgsel-" + uuid.uuid4().hex[:8]
    subprocess.run(["useradd", "-M", "-r", "-N", "-g", "nogroup", "-s", "/usr/sbin/nologin",
                    name], check=True)
    try:
        pw = pwd.getpwnam(name)
        assert pw.pw_uid != pw.pw_gid, pw
        yield name, pw.pw_uid, pw.pw_gid
    finally:
        r = subprocess.run(["userdel", name], capture_output=True, text=True)
        assert r.returncode == 0, f"userdel {name}: {r.stderr}"


def test_user_by_name_is_its_uid_not_its_gid(user_gid_apart, daemon, victim):
    name, uid, gid = user_gid_apart
    theirs = victim("idle", 1, user=(uid, gid))
    exe = str(victim.public_copy("idle"))
    r = daemon.ctl("status", "--user", name, "--exe", exe, check=0)
    assert pids_of(r) == [theirs.pid], r
    assert r.results[0]["uid"] == uid and r.results[0]["user"] == name, r
    r = daemon.ctl("status", "--user", uid, "--exe", exe, check=0)
    assert pids_of(r) == [theirs.pid], r


def test_user_and_all_for_a_user_see_only_its_own(daemon, victim, test_user):
    uid, _ = test_user
    mine = idle(victim)                       # root's
    theirs = [victim("idle", 1, user=test_user) for _ in range(2)]
    exe = str(victim.public_copy("idle"))     # this test's own copy: nobody else runs it
    r = daemon.ctl("status", "--user", uid, "--exe", exe, check=0)
    assert sorted(v.pid for v in theirs) == pids_of(r), r
    assert all(res["uid"] == uid for res in r.results), r
    # As that user: --all is its own processes (among them the client
    # itself, which is not selected: it is the caller, not a target, only
    # when it has exited; accept it either way) and never root's.
    r = daemon.ctl("status", "--all", check=0, user=test_user)
    got = set(pids_of(r))
    assert {v.pid for v in theirs} <= got, r
    assert mine.pid not in got, r
    assert all(res["uid"] == uid for res in r.results), r
    # Asking for root's processes by uid answers nothing, not "denied".
    r = daemon.ctl("status", "--user", "0", check=0, user=test_user)
    assert r.results == [], r
    r = daemon.ctl("guard", "--exe", exe, check=0, user=test_user)
    assert {res["pid"] for res in r.results} == {v.pid for v in theirs}, r
    assert all(res["state"] == "guarded" for res in r.results), r
    assert daemon.ctl("status", mine.pid, check=0).results[0]["state"] == "unguarded"


def test_selectors_never_pick_the_daemon_or_kernel_threads(daemon):
    r = daemon.ctl("status", "--all", check=None)
    pids = pids_of(r)
    assert daemon.pid not in pids
    assert 2 not in pids   # kthreadd
    # Kernel threads have no command line; every process selected has one.
    assert all(res["command"] for res in r.results if res["ok"]), r
    # Nor the client asking: its own command line names the pattern.
    r = daemon.ctl("status", "--cmdline", "*--cmdline*", check=0)
    assert r.results == [], r


def test_selectors_tell_kernel_threads_without_a_kthread_line(victim):
    """A selector takes the kernel-thread flag from status's "Kthread:" line
    and reads stat only where the kernel writes no such line.  The fault
    build reads status as an older kernel writes it: kernel threads must
    still never be selected, and a process still is, and is guarded."""
    v = victim("idle", 1)
    with running_daemon(binary=FAULTS_BTGUARDD, env={"BTGUARD_FAULTS": "no-kthread-line=1"}) as d:
        r = d.ctl("status", "--all", check=None)
        pids = pids_of(r)
        assert v.pid in pids, r
        assert 2 not in pids, r   # kthreadd
        assert all(res["command"] for res in r.results if res["ok"]), r
        r = d.ctl("guard", "--exe", str(victim_path("idle")), check=0)
        assert [(res["pid"], res["state"]) for res in r.results] == [(v.pid, "guarded")], r


def test_bad_selectors_are_usage_errors(daemon):
    for args, why in [
        (["status", "--all", "1"], "not both"),
        (["status", "--cgroup", "system.slice"], "starting with '/'"),
        (["status", "--user", "no-such-user-btg"], "unknown user"),
        (["guard", "--all", "--format=prometheus"], "use it with status"),
        (["status", "--exe", ""], "needs a pattern"),
        (["status", "--exe", "a", "--exe", "b"], "twice"),
    ]:
        r = daemon.ctl(*args, json=False, check=2)
        assert why in r.stderr, (args, r.stderr)


# -------------------------------------------------------------- report --

def test_table_and_summary_add_up(daemon, victim, token):
    link = Path(tempfile.mkdtemp(prefix="btg-sel-")) / token
    link.symlink_to(victim_path("idle"))
    try:
        vs = [start(victim, [link, 1], "idle") for _ in range(3)]
        daemon.ctl("guard", vs[0].pid, check=0)
        r = daemon.ctl("status", "--cmdline", f"*{token}*", json=False, check=0)
        rows = table_rows(r.stdout)
        assert r.stdout.splitlines()[0].split() == ["PID", "USER", "STATE", "RISK", "COMMAND"]
        assert rows == {vs[0].pid: ("root", "guarded", "-"),
                        vs[1].pid: ("root", "unguarded", "-"),
                        vs[2].pid: ("root", "unguarded", "-")}, r.stdout
        assert summary(r.stdout) == (3, 1, 0, 2, 0), r.stdout
    finally:
        shutil.rmtree(link.parent)


def test_at_risk_report_exit_status_and_prometheus(daemon, victim, fake_torch):
    c10, greenlet = fake_torch
    risky = idle(victim, env={"LD_PRELOAD": f"{c10}:{greenlet}"})
    torch_only = idle(victim, env={"LD_PRELOAD": str(c10)})
    plain = idle(victim)

    r = daemon.ctl("status", risky.pid, check=4)
    (res,) = r.results
    assert res["risk"] == "at-risk", res
    assert "libc10.so" in res["risk_reason"] and GREENLET_SO in res["risk_reason"], res
    assert "libc.so.6 is original" in res["risk_reason"], res
    assert [s["bound"] for s in res["sites"]] == [True], res
    r = daemon.ctl("status", torch_only.pid, plain.pid, check=0)
    assert [x["risk"] for x in r.results] == ["none", "none"], r
    assert "no stack-switching" in r.results[0]["risk_reason"], r

    # --at-risk finds it and nothing else of ours.
    r = daemon.ctl("status", "--at-risk", "--exe", "idle", check=4)
    assert pids_of(r) == [risky.pid], r
    r = daemon.ctl("status", "--at-risk", "--exe", "idle", "--format=prometheus",
                   json=False, check=4)
    assert "btguard_processes_at_risk 1\n" in r.stdout, r.stdout
    assert 'btguard_processes{state="unguarded"} 1\n' in r.stdout, r.stdout
    assert re.search(r"^# TYPE btguard_processes gauge$", r.stdout, re.M), r.stdout

    # Guarded, it is covered, and monitoring sees 0 again.
    r = daemon.ctl("guard", "--at-risk", "--exe", "idle", check=0)
    assert pids_of(r) == [risky.pid], r
    r = daemon.ctl("status", risky.pid, check=0)
    assert r.results[0]["risk"] == "covered", r
    r = daemon.ctl("status", "--at-risk", "--exe", "idle", "--format=prometheus",
                   json=False, check=0)
    assert "btguard_processes_at_risk 0\n" in r.stdout
    assert "btguard_processes_covered 1\n" in r.stdout
    r = daemon.ctl("status", "--at-risk", "--exe", "idle", json=False, check=0)
    assert table_rows(r.stdout) == {risky.pid: ("root", "guarded", "covered")}, r.stdout


def test_partial_after_a_late_load_says_what_callers_reach(daemon, victim, fake_torch):
    c10, greenlet = fake_torch
    v = start(victim, [victim_path("late_loader")], "late_loader", stdin=True,
              env={"LD_PRELOAD": f"{c10}:{greenlet}"})
    daemon.ctl("guard", v.pid, check=0)
    # A status remembers what it found (sitememo.c): the load below must
    # still be seen, the mappings having changed.
    (res,) = daemon.ctl("status", v.pid, check=0).results
    assert res["state"] == "guarded" and len(res["sites"]) == 1, res
    # After the guard, the process loads a library with a backtrace() of its
    # own, like a worker importing libunwind after the fork.
    v.proc.stdin.write(f"{victim_path('libbtpre')}\ncall\n".encode())
    v.proc.stdin.flush()
    assert v.lines.next() == "loaded"
    assert v.lines.next() == "frames 0", "callers by name reach glibc's guarded definition"
    r = daemon.ctl("status", v.pid, check=0)
    (res,) = r.results
    assert res["state"] == "partial", res
    bound = {Path(s["object"]).name: (s["state"], s["bound"]) for s in res["sites"]}
    assert bound == {"libc.so.6": ("guarded", True), "libbtpre": ("original", False)}, res
    assert res["risk"] == "covered", res
    line = daemon.ctl("status", v.pid, json=False, check=0).stdout
    assert "partial (2 sites; callers reach the guarded one in libc.so.6; original: libbtpre)" \
        in line, line
    v.proc.stdin.close()


@pytest.mark.parametrize("env, names", [
    ({"TORCH_SHOW_CPP_STACKTRACES": "1"}, ["torch-cpp-stacktraces"]),
    ({"TORCH_DISTRIBUTED_DEBUG": "DETAIL"}, ["torch-distributed-debug"]),
    ({"TORCH_SHOW_CPP_STACKTRACES": "1", "TORCH_DISTRIBUTED_DEBUG": "detail"},
     ["torch-cpp-stacktraces", "torch-distributed-debug"]),
    ({"TORCH_SHOW_CPP_STACKTRACES": "0", "TORCH_DISTRIBUTED_DEBUG": "INFO"}, []),
    # Set but empty is off for torch (c10's env parsing), so no warning.
    ({"TORCH_SHOW_CPP_STACKTRACES": "", "TORCH_DISTRIBUTED_DEBUG": ""}, []),
])
def test_environment_warnings(daemon, victim, env, names):
    v = idle(victim, env=env)
    for action in ("status", "guard"):
        (res,) = daemon.ctl(action, v.pid, check=0).results
        assert [w["name"] for w in res["warnings"]] == names, res
        assert all("own unwinder" in w["text"] for w in res["warnings"]), res
    text = daemon.ctl("status", v.pid, json=False, check=0).stdout
    assert ("warning:" in text) == bool(names), text


def test_other_mount_namespace_is_said(daemon, victim):
    argv = ["unshare", "--mount", "--propagation", "private", str(victim_path("idle")), "1"]
    v = start(victim, argv, "idle")
    (res,) = daemon.ctl("status", v.pid, check=0).results
    assert [w["name"] for w in res["warnings"]] == ["other-mount-namespace"], res
    (res,) = daemon.ctl("status", idle(victim).pid, check=0).results
    assert res["warnings"] == [], res


def test_processes_that_exit_before_their_turn_are_left_out(daemon, victim, token):
    link = Path(tempfile.mkdtemp(prefix="btg-sel-")) / token
    link.symlink_to(victim_path("idle"))
    try:
        vs = [start(victim, [link, 1], "idle") for _ in range(20)]
        # Kill half while the daemon lists them: whichever it still sees get
        # a result, the rest are left out, and nothing counts as a failure.
        p = subprocess.Popen([str(daemon.client_path(None)), "--socket", daemon.socket,
                              "status", "--cmdline", f"*{token}*"],
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for v in vs[::2]:
            v.proc.kill()
        out, err = p.communicate(timeout=60)
        assert p.returncode == 0, (out, err)
        rows = table_rows(out)
        assert {v.pid for v in vs[1::2]} <= set(rows), out
        assert all(state != "error" for _, state, _ in rows.values()), out
        assert summary(out)[0] == len(rows), out
    finally:
        shutil.rmtree(link.parent)
