# SPDX-License-Identifier: MIT
"""The shipped policy with no window: etc/examples/python-at-exec.conf.

The at-risk rule guards a process at the sweep after it maps torch and
greenlet; tests/workloads/torch_then_greenlet.py imports greenlet after
torch and raises inside a greenlet within milliseconds, so it dies before
that sweep.  The example also takes every Python at its exec (exec events;
the sweep as backstop), before any import.

Every rule the daemon runs here is scoped to a token of the test's own: the
example's interpreter glob is pointed at a copy of Debian's python3 under a
directory named after the token, and each rule also needs the token in the
command line, so the daemon never guards another test's Python.  Where the
example is loaded byte for byte, a drop-in excludes every process.
"""

import os
import re
import resource
import shutil
import signal
import subprocess
import time
import uuid

import pytest

from btg.daemon import running_daemon
from btg.paths import REPO

SERVICE = REPO / "systemd" / "btguardd.service.in"

EXAMPLE = REPO / "etc" / "examples" / "python-at-exec.conf"
WORKLOAD = REPO / "tests" / "workloads" / "torch_then_greenlet.py"
PYTHON = "/usr/bin/python3"          # Debian's, where python3-torch lives
SHIPPED_GLOB = "exe = /usr/bin/python3*"
RULES = ["python-at-exec", "torch-greenlet"]
LISTENING = "exec events: listening to the proc connector"
UNGUARDED_RUNS = 3
GUARDED_RUNS = 2
RUN_TIMEOUT = 180
ERRORS = "errors 20 ok"              # 4 greenlets x 5 rounds


@pytest.fixture
def token():
    return "btgwin" + uuid.uuid4().hex[:12]


@pytest.fixture
def interpreter(tmp_path, token):
    """A copy of Debian's python3 at a path of the test's own.  A copy, not a
    symlink: /proc/PID/exe, which the exe glob matches, resolves links.  It
    finds its standard library (and torch) by its built-in prefix, /usr."""
    d = tmp_path / token
    d.mkdir()
    os.chmod(tmp_path, 0o755)
    copy = d / "python3"
    shutil.copy(os.path.realpath(PYTHON), copy)
    return copy


def _no_core():
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


def run_workload(python):
    return subprocess.run([str(python), str(WORKLOAD)], capture_output=True, text=True,
                          timeout=RUN_TIMEOUT, preexec_fn=_no_core)


def scoped_example(interpreter, token):
    """The example's text with its interpreter glob pointed at the copy and
    every rule limited to the token; nothing else changed."""
    text = EXAMPLE.read_text()
    assert text.count(SHIPPED_GLOB) == 1, "the example no longer names Debian's python3"
    text = text.replace(SHIPPED_GLOB, f"exe = {interpreter.parent}/python3*")
    out = []
    for line in text.splitlines():
        out.append(line)
        if line.startswith("[rule "):
            out.append(f"cmdline = *{token}*")
    return "\n".join(out) + "\n"


def rules(d):
    return {r["rule"]: r for r in d.ctl("policy", check=0).results}


def wait_listening_to_exec_events(d, timeout=10.0):
    """The daemon says it listens to exec events: logged once the socket it
    serves on is up, so a little after running_daemon() returns."""
    deadline = time.monotonic() + timeout
    while LISTENING not in d.log():
        assert time.monotonic() < deadline, d.log()[-3000:]
        time.sleep(0.05)


def test_unguarded_it_dies_every_time(interpreter):
    """Without the policy the workload crashes on this machine, every run:
    so the survival below proves something."""
    for i in range(UNGUARDED_RUNS):
        p = run_workload(interpreter)
        assert p.returncode == -signal.SIGSEGV, \
            f"run {i + 1}: wanted SIGSEGV, got {p.returncode}\n{p.stdout}\n{p.stderr}"
        assert p.stdout.startswith("mapped "), p.stdout
        assert ERRORS not in p.stdout, p.stdout


def test_shipped_example_loads_as_it_is(tmp_path):
    """The example, byte for byte, as a daemon's main file: it loads, and
    `btguardctl policy` lists its rules.  A drop-in excludes every process,
    so this daemon guards nothing of anybody's."""
    conf = tmp_path / "btguardd.conf"
    shutil.copy(EXAMPLE, conf)
    (tmp_path / "btguardd.conf.d").mkdir()
    (tmp_path / "btguardd.conf.d" / "nothing.conf").write_text(
        "[exclude everything]\nall = yes\n")
    with running_daemon(args=("--config", str(conf))) as d:
        r = d.ctl("policy", check=0).results
        assert [x["rule"] for x in r if x["kind"] == "guard"] == RULES, r
        by = {x["rule"]: x for x in r}
        assert by["python-at-exec"]["match"] == "exe=/usr/bin/python3* backtraces=segment", r
        assert by["torch-greenlet"]["match"] == "at-risk backtraces=segment", r
        wait_listening_to_exec_events(d)


def bounding_set(text):
    """The capabilities of a unit text's CapabilityBoundingSet= lines, which
    systemd merges, as setpriv names them."""
    caps = [c for m in re.findall(r"^\s*#?\s*CapabilityBoundingSet=(.*)$", text, re.M)
            for c in m.split()]
    assert caps and all(c.startswith("CAP_") for c in caps), caps
    return [c[len("CAP_"):].lower() for c in caps]


def test_the_drop_in_it_names_gives_exec_events_in_the_units_sandbox(tmp_path):
    """The example tells the admin to add a capability to the unit for exec
    events: with the unit's bounding set and that line (and no_new_privs),
    the daemon listens.  (The unit's alone may not do on every kernel:
    test_systemd_units.py.)"""
    if shutil.which("setpriv") is None:
        pytest.skip("setpriv not installed")
    service = [ln for ln in SERVICE.read_text().splitlines()
               if ln.startswith("CapabilityBoundingSet=")]
    assert len(service) == 1, service
    added = bounding_set(EXAMPLE.read_text())
    assert added == ["net_admin"], added
    caps = bounding_set(service[0]) + added
    conf = tmp_path / "btguardd.conf"
    shutil.copy(EXAMPLE, conf)
    (tmp_path / "btguardd.conf.d").mkdir()
    (tmp_path / "btguardd.conf.d" / "nothing.conf").write_text(
        "[exclude everything]\nall = yes\n")
    prefix = ["setpriv", "--bounding-set=-all," + ",".join("+" + c for c in caps),
              "--no-new-privs"]
    with running_daemon(prefix=prefix, args=("--config", str(conf))) as d:
        wait_listening_to_exec_events(d)


def test_greenlet_after_torch_survives_under_the_example(tmp_path, interpreter, token):
    """Greenlet imported after torch, a torch error raised inside a
    greenlet within milliseconds: under the example the interpreter was
    guarded at its exec, so every error arrives as a RuntimeError."""
    conf = tmp_path / "btguardd.conf"
    conf.write_text(scoped_example(interpreter, token))
    with running_daemon(args=("--config", str(conf))) as d:
        wait_listening_to_exec_events(d)
        pids = set()
        for _ in range(GUARDED_RUNS):
            p = subprocess.Popen([str(interpreter), str(WORKLOAD)], stdout=subprocess.PIPE,
                                 stderr=subprocess.PIPE, text=True, preexec_fn=_no_core)
            try:
                out, err = p.communicate(timeout=RUN_TIMEOUT)
            finally:
                if p.poll() is None:
                    p.kill()
                    p.wait()
            assert p.returncode == 0, (p.returncode, out, err, d.log()[-3000:])
            assert out.splitlines()[-1] == ERRORS, out
            pids.add(p.pid)
        r = rules(d)
        # The interpreter rule took each run (again once torch had mapped
        # libunwind's backtrace(): a second site); the at-risk rule none.
        assert set(r["python-at-exec"]["last_pids"]) == pids, r
        assert r["torch-greenlet"]["hits"] == 0, r
