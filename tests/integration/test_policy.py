# SPDX-License-Identifier: MIT
"""Auto-guard: the daemon guards what its policy names, by itself.

A real daemon runs with `--config` under a temporary directory.  It
notices new processes two ways, and the tests that matter run both: by
the proc connector's exec events (the default where the kernel lets it
listen: tried first, the exec-event cases skip where it does not) and by
the sweep alone (`exec-events = no`).  Every rule is scoped to a token of the
test's own (a command-line word, through a symlink named after it) so
that the daemon never touches another test's processes on a shared
machine.  Timing: "within one interval" is checked as one interval plus
a slack for a loaded machine (SLACK), measured from before the process
was started.
"""

import ctypes
import os
import re
import shutil
import signal
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from btg.daemon import running_daemon
from btg.kernel import proc_connector_probe
from btg.paths import BTGUARDD
from btg.procfs import task_states
from btg.victims import start, victim_path

INTERVAL = 0.5       # the policy's sweep, seconds
SLACK = 0.75         # scheduling on two shared cores


@pytest.fixture
def token():
    return "btgpol" + uuid.uuid4().hex[:12]


@pytest.fixture
def tmp(tmp_path):
    os.chmod(tmp_path, 0o755)
    return tmp_path


def linked(tmp, name, victim):
    """A symlink named `name` to a victim: its argv[0], so its command line, carries name."""
    link = tmp / name
    link.symlink_to(victim_path(victim))
    return link


def libgcc_s():
    """Where libgcc_s.so.1, which glibc's first backtrace() dlopen()s, lives here."""
    ctypes.CDLL("libgcc_s.so.1")
    with open("/proc/self/maps") as f:
        for ln in f:
            if ln.rstrip().endswith("/libgcc_s.so.1"):
                return ln.split()[-1]
    raise AssertionError("libgcc_s.so.1 loaded but not in /proc/self/maps")


def write_policy(path, text, interval=INTERVAL, exec_events=True):
    path.write_text(f"[watch]\ninterval = {int(interval * 1000)}ms\n"
                    + ("" if exec_events else "exec-events = no\n") + "\n" + text)


LISTENING = "exec events: listening to the proc connector"


def require_exec_events():
    """Skips unless the kernel lets this test's daemon (root, every
    capability, these namespaces) listen to the proc connector: found by
    trying, as btg/kernel.py does, never from the kernel's version."""
    step, err = proc_connector_probe()
    if step != "ok":
        pytest.skip(f"no exec events for a daemon here ({step}: {os.strerror(err)})")


# How new processes are noticed: exec events and the sweep, or the sweep alone.
@pytest.fixture(params=["exec-events", "sweep-only"])
def exec_events(request):
    if request.param == "exec-events":
        require_exec_events()
    return request.param == "exec-events"


def check_noticing(d, exec_events):
    """The daemon listens to exec events exactly when the policy wants them."""
    assert (LISTENING in d.log()) == exec_events, d.log()[-3000:]


def policy_daemon(conf, **kw):
    return running_daemon(args=("--config", str(conf)), **kw)


# The sweep keeps /proc/PID/statm open per process while the descriptor
# limit leaves room (pin_sweep_fds); with a low limit it reads stat each
# time instead.  Both must notice the same things.
SWEEP_MODES = {"statm-kept": (), "stat-each-time": ("prlimit", "--nofile=4096:4096")}


@pytest.fixture(params=sorted(SWEEP_MODES))
def sweep_prefix(request):
    prefix = SWEEP_MODES[request.param]
    if prefix and shutil.which(prefix[0]) is None:
        pytest.skip(f"{prefix[0]} not installed")
    return prefix


def state_of(d, pid):
    r = d.ctl("status", pid, check=None)
    assert len(r.results) == 1, r
    return r.results[0]


def wait_state(d, pid, want, within):
    """Polls status until pid reads `want`; returns the seconds it took, fails after `within`."""
    t0 = time.monotonic()
    while True:
        res = state_of(d, pid)
        if res["state"] == want:
            return time.monotonic() - t0
        if time.monotonic() - t0 > within:
            pytest.fail(f"PID {pid} still {res['state']} after {within:.2f} s, wanted {want}:\n"
                        f"{d.log()[-3000:]}")
        time.sleep(0.02)


def rule_records(d, pid, rule, level="info"):
    """The daemon's records of rule's guards of pid, at this log level."""
    return [ln for ln in d.log().splitlines()
            if ln.startswith(f"btguardd: {level}: guard pid={pid} ") and f" by rule {rule} " in ln]


def rules(d):
    """The rules in force (after a failed reload, `policy` also says so and exits 1)."""
    r = d.ctl("policy", check=None)
    assert r.rc in (0, 1), r
    return {x["rule"]: x for x in r.results if "rule" in x}


# ------------------------------------------------------------------ rules --

def test_new_at_risk_process_is_guarded_within_one_interval(tmp, victim, token, fake_torch,
                                                            sweep_prefix, exec_events):
    c10, greenlet = fake_torch
    conf = tmp / "btguardd.conf"
    write_policy(conf, f"[rule torch]\naction = guard\nat-risk = yes\ncmdline = *{token}*\n",
                 exec_events=exec_events)
    link = linked(tmp, token, "idle")
    with policy_daemon(conf, prefix=sweep_prefix) as d:
        time.sleep(INTERVAL)   # the first sweep (of everything) is behind us
        t0 = time.monotonic()
        # Nothing may load after the exec's look, or a sweep that sees the
        # process changed rightly asks again, which the count below
        # forbids: no thread of its own (a thread maps its stack), and
        # libgcc_s preloaded, which main()'s backtrace() would dlopen()
        # when it runs before the guard (a slow daemon: ASan).
        risky = start(victim, [link, 0, "--may-start-guarded"], "idle",
                      env={"LD_PRELOAD": f"{c10}:{greenlet}:{libgcc_s()}"})
        plain = start(victim, [link, 1], "idle")          # the token, but not at risk
        wait_state(d, risky.pid, "guarded", INTERVAL + SLACK)
        assert time.monotonic() - t0 <= INTERVAL + SLACK
        time.sleep(INTERVAL * 2)
        assert state_of(d, plain.pid)["state"] == "unguarded"
        check_noticing(d, exec_events)
        # One journal line for the automatic action, naming its rule.
        assert len(rule_records(d, risky.pid, "torch")) == 1, d.log()[-3000:]
        # A process taken at its exec is not asked about again by a later
        # sweep: after its look, one guard of it, at either level.  (A sweep
        # that came before the look, while the loader was still mapping,
        # may have asked too; the look then rightly asks again.)
        taken = f"rule torch: process {risky.pid} taken at its exec"
        if exec_events and taken in d.log():
            after = d.log().split(taken, 1)[1]
            asks = [ln for ln in after.splitlines()
                    if re.match(rf"btguardd: (info|debug): guard pid={risky.pid} ", ln)
                    and " by rule torch " in ln]
            assert len(asks) == 1, d.log()[-3000:]
        r = rules(d)["torch"]
        assert r["hits"] == 1 and r["last_pids"] == [risky.pid], r
        assert r["kind"] == "guard" and r["match"] == f"at-risk cmdline=*{token}*", r


def test_real_torch_greenlet_workload_is_guarded_before_its_first_error(tmp, token):
    """python3 + Debian's torch + greenlet, started after the daemon: the
    at-risk rule guards it while it waits at its pause file, before it
    raises its first torch error inside a greenlet; released, it survives
    (unguarded, the same run dies of SIGSEGV: test_crash.py)."""
    workload = Path(__file__).resolve().parents[1] / "workloads" / "torch_greenlet.py"
    conf = tmp / "btguardd.conf"
    write_policy(conf, f"[rule torch]\naction = guard\nat-risk = yes\ncmdline = *{token}*\n")
    pause = tmp / f"go-{token}"   # the token rides in the command line
    with policy_daemon(conf) as d:
        proc = subprocess.Popen(["/usr/bin/python3", str(workload), "--pause-file", str(pause)],
                                stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        try:
            line = proc.stdout.readline()   # "paused": torch and greenlet are loaded
            assert line == "paused\n", (line, proc.poll())
            wait_state(d, proc.pid, "guarded", INTERVAL + SLACK)
            assert state_of(d, proc.pid)["risk"] == "covered"
            pause.touch()
            out, err = proc.communicate(timeout=120)
        finally:
            if proc.poll() is None:
                proc.kill()
                proc.wait()
        assert proc.returncode == 0, (proc.returncode, out, err)
        assert out.splitlines()[-1] == "errors 40 ok", out
        assert rules(d)["torch"]["last_pids"] == [proc.pid]


def test_forked_workers_that_load_a_second_backtrace_end_fully_guarded(tmp, victim, token,
                                                                      sweep_prefix, exec_events):
    pre = victim_path("libbtpre")
    conf = tmp / "btguardd.conf"
    write_policy(conf, f"[rule server]\naction = guard\ncmdline = *{token}*\n",
                 exec_events=exec_events)
    link = linked(tmp, token, "late_loader")
    with policy_daemon(conf, prefix=sweep_prefix) as d:
        server = start(victim, [link], "late_loader", stdin=True)
        wait_state(d, server.pid, "guarded", INTERVAL + SLACK)
        workers = []
        for _ in range(3):
            t0 = time.monotonic()
            server.proc.stdin.write(f"fork {pre}\n".encode())
            server.proc.stdin.flush()
            line = server.lines.next()
            assert line.startswith("worker ") and line.endswith(" loaded"), line
            pid = int(line.split()[1])
            workers.append(pid)
            # The worker inherited the guarded glibc, then loaded libbtpre's
            # original backtrace(): partial until the sweep sees the new map.
            wait_state(d, pid, "guarded", INTERVAL + SLACK)
            assert time.monotonic() - t0 <= INTERVAL + SLACK
        for pid in workers:
            res = state_of(d, pid)
            assert {s["object"].rsplit("/", 1)[-1]: s["state"] for s in res["sites"]} == \
                {"libbtpre": "guarded", "libc.so.6": "guarded"}, res
        # And the server itself loads it late: the same.
        server.proc.stdin.write(f"{pre}\n".encode())
        server.proc.stdin.flush()
        assert server.lines.next() == "loaded"
        wait_state(d, server.pid, "guarded", INTERVAL + SLACK)
        server.proc.stdin.write(b"call\n")
        server.proc.stdin.flush()
        assert server.lines.next() == "frames 0"
        assert rules(d)["server"]["hits"] >= 5
        check_noticing(d, exec_events)


def test_exclusions_hold(tmp, victim, token, exec_events):
    conf = tmp / "btguardd.conf"
    write_policy(conf, f"[rule all-of-token]\naction = guard\ncmdline = *{token}*\n\n"
                       f"[exclude keep]\ncmdline = *{token}-keep*\n", exec_events=exec_events)
    take = linked(tmp, token, "idle")
    keep = linked(tmp, f"{token}-keep", "idle")
    with policy_daemon(conf) as d:
        a = start(victim, [take, 1, "--may-start-guarded"], "idle")
        b = start(victim, [keep, 1], "idle")
        wait_state(d, a.pid, "guarded", INTERVAL + SLACK)
        time.sleep(INTERVAL * 3)
        assert state_of(d, b.pid)["state"] == "unguarded"
        assert f"guard pid={b.pid} " not in d.log()
        r = rules(d)
        assert r["keep"]["kind"] == "exclude" and r["keep"]["hits"] == 0, r
        assert r["all-of-token"]["last_pids"] == [a.pid], r
        check_noticing(d, exec_events)


# ----------------------------------------------------------- exec events --

SLOW_SWEEP = 3600    # seconds: after the first sweep, none comes during a test


def test_exec_event_takes_a_new_program_long_before_the_next_sweep(tmp, victim, token):
    require_exec_events()
    conf = tmp / "btguardd.conf"
    write_policy(conf, f"[rule at-exec]\naction = guard\ncmdline = *{token}*\n",
                 interval=SLOW_SWEEP)
    with policy_daemon(conf) as d:
        time.sleep(1)   # the first sweep, of what ran before, is behind us
        v = start(victim, [linked(tmp, token, "idle"), 1, "--may-start-guarded"], "idle")
        # Only the exec event can have told the daemon: the next sweep is an hour away.
        wait_state(d, v.pid, "guarded", 10)
        assert f"rule at-exec: process {v.pid} taken at its exec" in d.log(), d.log()[-3000:]
        assert rules(d)["at-exec"]["last_pids"] == [v.pid]


def test_exec_events_no_leaves_new_programs_to_the_sweep(tmp, victim, token):
    require_exec_events()
    conf = tmp / "btguardd.conf"
    write_policy(conf, f"[rule sweep-only]\naction = guard\ncmdline = *{token}*\n",
                 interval=SLOW_SWEEP, exec_events=False)
    with policy_daemon(conf) as d:
        time.sleep(1)
        v = start(victim, [linked(tmp, token, "idle"), 1, "--may-start-guarded"], "idle")
        time.sleep(3)
        assert state_of(d, v.pid)["state"] == "unguarded"
        check_noticing(d, False)
        # A reload that wants them starts listening, and the process that
        # execs next is taken at once.
        write_policy(conf, f"[rule sweep-only]\naction = guard\ncmdline = *{token}*\n",
                     interval=SLOW_SWEEP)
        d.ctl("reload", check=0)
        w = start(victim, [linked(tmp, token + "-2", "idle"), 1, "--may-start-guarded"], "idle")
        wait_state(d, w.pid, "guarded", 10)
        assert LISTENING in d.log()


def test_refused_connector_falls_back_to_the_sweep(tmp, victim, token):
    """In a network namespace of its own the kernel's connector is out of
    reach: the daemon says so once, and the sweep still guards new processes."""
    if shutil.which("unshare") is None:
        pytest.skip("unshare not installed")
    conf = tmp / "btguardd.conf"
    write_policy(conf, f"[rule fallback]\naction = guard\ncmdline = *{token}*\n")
    with policy_daemon(conf, prefix=("unshare", "--net")) as d:
        time.sleep(INTERVAL)
        t0 = time.monotonic()
        v = start(victim, [linked(tmp, token, "idle"), 1, "--may-start-guarded"], "idle")
        wait_state(d, v.pid, "guarded", INTERVAL + SLACK)
        assert time.monotonic() - t0 <= INTERVAL + SLACK
        log = d.log()
        assert "exec events unavailable: in a network namespace other than the node's: the " \
               "kernel sends exec events only to sockets of the initial network namespace" \
               in log, log[-3000:]
        assert LISTENING not in log
        assert "taken at its exec" not in log


def test_first_sweep_takes_processes_already_running(tmp, victim, token):
    conf = tmp / "btguardd.conf"
    write_policy(conf, f"[rule early]\naction = guard\ncmdline = *{token}*\n")
    v = start(victim, [linked(tmp, token, "idle"), 1, "--may-start-guarded"], "idle")
    with policy_daemon(conf) as d:
        wait_state(d, v.pid, "guarded", INTERVAL + SLACK)


def test_a_rule_with_backtraces_segment_guards_with_the_walk(tmp, victim, token):
    """backtraces = segment: the rule's guards keep backtraces; another
    rule's, without the key, empty them."""
    conf = tmp / "btguardd.conf"
    write_policy(conf, f"[rule walked]\naction = guard\ncmdline = *{token}-w*\n"
                       f"backtraces = segment\n"
                       f"[rule emptied]\naction = guard\ncmdline = *{token}-e*\n")
    walked = start(victim, [linked(tmp, f"{token}-w", "idle"), 1, "--may-start-guarded"], "idle")
    emptied = start(victim, [linked(tmp, f"{token}-e", "idle"), 1, "--may-start-guarded"], "idle")
    with policy_daemon(conf) as d:
        for v, form in ((walked, "segment"), (emptied, "empty")):
            wait_state(d, v.pid, "guarded", INTERVAL + SLACK)
            res = state_of(d, v.pid)
            libc = [s for s in res["sites"] if s["object"].endswith("/libc.so.6")]
            assert [s["backtraces"] for s in libc] == [form], res
        assert rules(d)["walked"]["match"] == f"cmdline=*{token}-w* backtraces=segment"


def test_a_process_whose_main_thread_exited_is_taken(tmp, victim):
    """pthread_exit() in main: the PID reads 'Z' and maps nothing, but the
    process runs on in its other threads, and a rule takes it."""
    v = victim("leader_exit", 2, report=True)
    end = time.monotonic() + 10
    while task_states(v.pid).get(v.pid, ("?",))[0] != "Z":
        assert time.monotonic() < end, "the main thread never exited"
        time.sleep(0.01)
    conf = tmp / "btguardd.conf"
    write_policy(conf, f"[rule leaderless]\naction = guard\nexe = {victim_path('leader_exit')}\n")
    with policy_daemon(conf) as d:
        wait_state(d, v.pid, "guarded", INTERVAL + SLACK)
        assert len(rule_records(d, v.pid, "leaderless")) == 1, d.log()[-3000:]


# ----------------------------------------------------------------- reload --

def test_a_reload_asks_again_but_records_only_what_it_did(tmp, victim, token):
    """After a reload every process is asked about again; one guarded
    already is no action: one record at info, the re-check at debug only."""
    conf = tmp / "btguardd.conf"
    write_policy(conf, f"[rule again]\naction = guard\ncmdline = *{token}*\n")
    with policy_daemon(conf) as d:
        v = start(victim, [linked(tmp, token, "idle"), 1, "--may-start-guarded"], "idle")
        wait_state(d, v.pid, "guarded", 10)
        d.ctl("reload", check=0)
        deadline = time.monotonic() + 10
        while not rule_records(d, v.pid, "again", "debug"):
            assert time.monotonic() < deadline, d.log()[-3000:]
            time.sleep(0.05)
        [line] = rule_records(d, v.pid, "again")
        assert ": ok state=guarded wrote " in line, line
        assert "unchanged" in rule_records(d, v.pid, "again", "debug")[0]
        assert rules(d)["again"]["hits"] == 1


def test_bad_reload_keeps_the_old_policy_and_names_file_and_line(tmp, victim, token):
    conf = tmp / "btguardd.conf"
    write_policy(conf, f"[rule old]\naction = guard\ncmdline = *{token}-old*\n")
    with policy_daemon(conf) as d:
        assert set(rules(d)) == {"old"}
        # Line 7 of the file (after [watch], its interval and a blank line): an unknown key.
        write_policy(conf, "[rule new]\naction = guard\nexe = x\nfrobnicate = 1\n")
        r = d.ctl("reload", json=False, check=1)
        assert f"{conf}:7:" in r.stderr and "frobnicate" in r.stderr, r
        assert set(rules(d)) == {"old"}
        # ... and `policy` says so until a reload succeeds.
        r = d.ctl("policy", check=1)
        assert r.results[0]["policy_error"].startswith(f"the last reload failed: {conf}:7:"), r
        # SIGHUP says the same in the log and keeps it too.
        os.kill(d.pid, signal.SIGHUP)
        deadline = time.monotonic() + 5
        while f"{conf}:7:" not in d.log() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert f"{conf}:7:" in d.log()
        # The old policy is still in force: it guards a new process.
        v = start(victim, [linked(tmp, f"{token}-old", "idle"), 1, "--may-start-guarded"], "idle")
        wait_state(d, v.pid, "guarded", INTERVAL + SLACK)
        # A drop-in that is wrong is named too.
        write_policy(conf, f"[rule old]\naction = guard\ncmdline = *{token}-old*\n")
        dropins = Path(f"{conf}.d")
        dropins.mkdir()
        (dropins / "10-bad.conf").write_text("[rule old]\naction = guard\nexe = y\n")
        r = d.ctl("reload", json=False, check=1)
        assert f"{dropins}/10-bad.conf:2:" in r.stderr and "defined already" in r.stderr, r
        # A good reload takes effect and keeps the counts of rules it keeps.
        (dropins / "10-bad.conf").write_text(f"[rule more]\naction = guard\nexe = z{token}\n")
        r = d.ctl("reload", check=0)
        assert r.results == [{"reloaded": True, "rules": 2}], r
        now = rules(d)
        assert set(now) == {"old", "more"} and now["old"]["hits"] == 1, now


def test_bad_file_is_named_with_file_and_line_by_check_config(tmp):
    """--check-config says what a start would: FILE:LINE, status 1.  (A
    start with a bad file serves anyway: test_policy_files.py.)"""
    conf = tmp / "btguardd.conf"
    conf.write_text("[rule a]\naction = guard\n")
    p = subprocess.run([str(BTGUARDD), "--check-config", "--config", str(conf)],
                       capture_output=True, text=True, timeout=10)
    assert p.returncode == 1, p
    assert f"{conf}:1: rule a selects nothing" in p.stderr, p.stderr
    p = subprocess.run([str(BTGUARDD), "--check-config", "--config", str(tmp / "missing.conf")],
                       capture_output=True, text=True, timeout=10)
    assert p.returncode == 1 and "missing.conf: cannot open" in p.stderr, p.stderr


# ------------------------------------------------------- daemon lifetime --

def test_a_policy_with_rules_keeps_the_daemon_up(tmp, token):
    conf = tmp / "btguardd.conf"
    write_policy(conf, f"[rule keep-up]\naction = guard\ncmdline = *{token}*\n")
    with running_daemon(args=("--config", str(conf), "--idle-exit", "1")) as d:
        time.sleep(2.5)
        d.alive()
    # Only exclusions (or nothing): nothing to watch, so --idle-exit applies.
    write_policy(conf, f"[exclude only]\ncmdline = *{token}*\n")
    with running_daemon(args=("--config", str(conf), "--idle-exit", "1")) as d:
        d.proc.wait(timeout=10)
        assert "no client for 1 s: exiting" in d.log()


def test_policy_and_reload_are_root_only(tmp, token, test_user):
    conf = tmp / "btguardd.conf"
    write_policy(conf, f"[rule secret]\naction = guard\ncmdline = *{token}*\n")
    with policy_daemon(conf) as d:
        for cmd in ("policy", "reload"):
            r = d.ctl(cmd, json=False, user=test_user, check=1)
            assert "denied" in r.stderr, r
        r = d.ctl("policy", json=False, check=0)
        assert r.stdout.startswith(f"secret: guard cmdline=*{token}*, 0 hits"), r
        # The Prometheus report carries the rules and the sweep's time (SWEPT)
        # for root only; another user's is the counts, and no error.
        time.sleep(INTERVAL + SLACK)   # a sweep has ended
        report = ("status", "--cmdline", f"*{token}*", "--format=prometheus")
        r = d.ctl(*report, json=False, check=0)
        # (The rule may have guarded the report's own btguardctl: its
        # command line carries the token.)
        assert re.search(r'^btguard_rule_guards_total\{rule="secret"\} \d+$', r.stdout, re.M), r
        swept = re.search(r"^btguard_last_sweep_timestamp_seconds (\d+)$", r.stdout, re.M)
        assert swept and abs(int(swept.group(1)) - time.time()) < 30, r.stdout
        r = d.ctl(*report, json=False, user=test_user, check=0)
        assert "btguard_processes_at_risk 0\n" in r.stdout and r.stderr == "", r
        assert "btguard_rule_guards_total" not in r.stdout, r
        assert "btguard_last_sweep" not in r.stdout, r


def test_policy_and_reload_take_no_targets(tmp):
    conf = tmp / "btguardd.conf"
    write_policy(conf, "")
    with policy_daemon(conf) as d:
        for args in (("policy", "1"), ("reload", "--all"), ("--tree", "policy")):
            r = d.ctl(*args, json=False, check=2)
            assert "takes" in r.stderr, r
        assert d.ctl("policy", json=False, check=0).stdout == "no policy rules\n"
