"""A daemon short of descriptors or memory says so, at every limit.

The daemon's RLIMIT_NOFILE is set (prlimit, from outside) to every value
from the descriptors it has open plus one up to the first that lets the
operation through whole.  At each, the answer about a live process is
what the daemon found, or EMFILE/ENFILE/ENOMEM: never "no process",
"gone", a silently shorter list or a Nagios OK; and the process is never
left stopped or traced.
"""
import os
import resource
import subprocess
import time
import uuid

import pytest
from btg.daemon import running_daemon
from btg.procfs import is_sanitized, thread_problems, wait_threads_running
from btg.victims import start, victim_path

SHORTAGE = {"EMFILE", "ENFILE", "ENOMEM"}
# Far above what any of these operations needs on a node of a few hundred
# processes; reaching it means the daemon never got through.
MAX_EXTRA = 4096


def settled_fds(pid):
    """The descriptor numbers the daemon uses (its highest plus one: the
    limit bounds the numbers a new descriptor may take, not their count),
    once that holds still for 0.3 s (a connection just closed may still be
    open for a moment)."""
    last, same_since = None, time.monotonic()
    deadline = time.monotonic() + 20
    while time.monotonic() < deadline:
        n = max(int(fd) for fd in os.listdir(f"/proc/{pid}/fd")) + 1
        if n != last:
            last, same_since = n, time.monotonic()
        elif time.monotonic() - same_since >= 0.3:
            return n
        time.sleep(0.05)
    pytest.fail(f"the daemon's descriptors never settled (last {last})")


class Limits:
    """Sets the daemon's descriptor limit to its settled use plus extra."""

    def __init__(self, d):
        self.d = d
        # Sized at the first pin: let that happen at the normal limit.
        d.ctl("status", os.getpid())
        self.soft, self.hard = resource.prlimit(d.pid, resource.RLIMIT_NOFILE)
        self.base = settled_fds(d.pid)

    def set(self, extra):
        resource.prlimit(self.d.pid, resource.RLIMIT_NOFILE, (self.base + extra, self.hard))

    def restore(self):
        resource.prlimit(self.d.pid, resource.RLIMIT_NOFILE, (self.soft, self.hard))


@pytest.fixture
def at_risk(victim, fake_torch, tmp_path):
    """A live process at risk (torch's c10 and greenlet's extension mapped)."""
    c10, greenlet = fake_torch
    token = "btgfd" + uuid.uuid4().hex[:12]
    exe = tmp_path / token
    exe.symlink_to(victim_path("idle"))
    v = start(victim, [exe, 2], "idle", env={"LD_PRELOAD": f"{c10}:{greenlet}"})
    return v, token


def each_limit(lim, attempt):
    """attempt(extra) at every extra from 1 until it returns True."""
    try:
        for extra in range(1, MAX_EXTRA):
            lim.set(extra)
            if attempt(extra):
                return extra
        pytest.fail(f"never got through below {MAX_EXTRA} spare descriptors")
    finally:
        lim.restore()


def test_status_of_a_live_process_is_never_no_process(at_risk):
    v, _ = at_risk
    with running_daemon() as d:
        lim = Limits(d)

        def attempt(extra):
            r = d.ctl("status", v.pid)
            [res] = r.results
            assert res["pid"] == v.pid
            if res["ok"]:
                assert res["state"] == "unguarded" and res["risk"] == "at-risk", (extra, res)
                return True
            assert res["error"] in SHORTAGE, (extra, res)
            assert r.rc == 1
            return False
        each_limit(lim, attempt)
        assert not thread_problems(v.pid)


def test_status_all_never_leaves_a_process_out_nor_says_ok(at_risk):
    """The JSON lists the process (answered or with the daemon's shortage),
    or the whole request is refused for it; Nagios, with one process at
    risk, says CRITICAL or UNKNOWN, never OK; Prometheus counts the
    shortage by cause."""
    v, token = at_risk
    with running_daemon() as d:
        lim = Limits(d)

        def attempt(extra):
            r = d.ctl("status", "--all")
            mine = [x for x in r.results if x["pid"] == v.pid]
            short = [x for x in r.results if x.get("error") in SHORTAGE]
            if not r.results:
                # Refused whole: said on stderr with the reason.
                assert r.rc == 1 and any(e in r.stderr for e in SHORTAGE), (extra, r)
            else:
                assert len(mine) == 1, (extra, r.stdout[-2000:])
                assert mine[0]["ok"] or mine[0]["error"] in SHORTAGE, (extra, mine)
            n = d.ctl("status", "--all", "--format=nagios", json=False)
            assert n.rc in (2, 3), (extra, n.stdout, n.stderr)
            if n.rc == 3:
                assert n.stdout.startswith("BTGUARD UNKNOWN - "), n.stdout
            p = d.ctl("status", "--cmdline", f"*{token}*", "--format=prometheus", json=False)
            if p.rc in (1, 4) and p.stdout:
                causes = dict(line.rsplit(" ", 1) for line in p.stdout.splitlines()
                              if line.startswith("btguard_status_errors_by_cause"))
                at_risk_n = [line for line in p.stdout.splitlines()
                             if line.startswith("btguard_processes_at_risk ")]
                # The one process is at risk, or among those the daemon could
                # not read for want of descriptors (any of which may match).
                assert at_risk_n == ["btguard_processes_at_risk 1"] or \
                    int(causes['btguard_status_errors_by_cause{cause="daemon-short"}']) >= 1, \
                    (extra, p.stdout)
            return bool(r.results) and not short and mine[0]["ok"] and n.rc == 2
        each_limit(lim, attempt)
        assert not thread_problems(v.pid)


def test_guard_short_of_descriptors_is_said_and_leaves_nothing_held(at_risk):
    v, _ = at_risk
    with running_daemon() as d:
        lim = Limits(d)

        def attempt(extra):
            r = d.ctl("guard", v.pid)
            [res] = r.results
            problems = thread_problems(v.pid)
            assert not problems, (extra, problems)
            if res["ok"]:
                assert res["state"] == "guarded", (extra, res)
                return True
            assert res["error"] in SHORTAGE, (extra, res)
            return False
        each_limit(lim, attempt)
        [res] = d.ctl("status", v.pid, check=0).results
        assert res["state"] == "guarded", res


# A guard's own descriptors (pin, /proc files, the ELF files, the world's
# tasks) are well under this; the sweep's kept statm descriptors must not
# take the ones it needs.
GUARD_FDS = 24
NEWCOMERS = 48


def test_policy_sweep_short_of_descriptors_guards_once_it_can(victim, fake_torch, tmp_path):
    """The sweep at every limit: nothing left stopped or traced, the daemon
    serving, and the process guarded once there are descriptors for a
    guard, however many new processes the sweep meets meanwhile (each
    one's statm it would keep open while it could)."""
    c10, greenlet = fake_torch
    token = "btgfdp" + uuid.uuid4().hex[:12]
    conf = tmp_path / "btguardd.conf"
    conf.write_text("[watch]\ninterval = 100ms\n\n"
                    f"[rule torch]\naction = guard\nat-risk = yes\ncmdline = *{token}*\n")
    exe = tmp_path / token
    exe.symlink_to(victim_path("idle"))
    with running_daemon(args=("--config", str(conf))) as d:
        lim = Limits(d)
        newcomers = []
        try:
            lim.set(1)
            newcomers = [subprocess.Popen(["sleep", "120"]) for _ in range(NEWCOMERS)]
            v = start(victim, [exe, 2], "idle", env={"LD_PRELOAD": f"{c10}:{greenlet}"})
            mark = f"guard pid={v.pid} "
            for extra in range(1, GUARD_FDS + 1):
                lim.set(extra)
                # A few sweeps at this limit.
                time.sleep(0.3)
                d.alive()
                assert not thread_problems(v.pid), (extra, thread_problems(v.pid))
                mine = [line for line in d.log().splitlines() if mark in line]
                # Every failure says what failed: the daemon's shortage, or a busy
                # process; never that the process is gone.
                for line in mine:
                    assert " ok state=" in line or any(
                        f"error {e} " in line for e in (*SHORTAGE, "busy", "stop")), line
                if any("ok state=guarded" in line for line in mine):
                    break
                assert extra < GUARD_FDS, f"not guarded with {extra} spare:\n{d.log()[-3000:]}"
        finally:
            lim.restore()
            for p in newcomers:
                p.kill()
                p.wait()
        wait_threads_running(v.pid)
        [res] = d.ctl("status", v.pid, check=0).results
        assert res["state"] == "guarded", res


def test_status_all_short_of_memory_is_never_ok(at_risk):
    """The daemon's address space limited to what it maps now plus 0 to
    64 MiB: with a process at risk on the node, the Nagios check says
    CRITICAL (it read that one) or UNKNOWN (it ran short), never OK."""
    v, _ = at_risk
    with running_daemon() as d:
        if is_sanitized(d.pid):
            pytest.skip("AddressSanitizer's allocator needs address space of its own")
        d.ctl("status", "--all")
        soft, hard = resource.prlimit(d.pid, resource.RLIMIT_AS)
        try:
            for mib in range(0, 66, 2):
                with open(f"/proc/{d.pid}/status") as f:
                    vm = int(next(line for line in f if line.startswith("VmSize:")).split()[1])
                resource.prlimit(d.pid, resource.RLIMIT_AS, (vm * 1024 + mib * 2**20, hard))
                n = d.ctl("status", "--all", "--format=nagios", json=False)
                assert n.rc in (2, 3), (mib, n.stdout, n.stderr)
                d.alive()
        finally:
            resource.prlimit(d.pid, resource.RLIMIT_AS, (soft, hard))
        assert not thread_problems(v.pid)
