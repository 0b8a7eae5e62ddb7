# SPDX-License-Identifier: MIT
"""guard --backtraces=segment: backtraces kept, up to a stack switcher's frame.

The segment walk's promises, on the real daemon and real victims:
  * the crash is cured with frames kept: coro_crash, its switch code in a
    shared object under greenlet's name, dies unguarded every run and,
    guarded, gets the frames of the coroutine from the raising function
    up to the switcher's trampoline, and exits 0;
  * a switcher loaded after the guard counts at the next call;
  * outside a switched stack the frames are exactly glibc's;
  * guard, unguard and a change of form under threads calling
    backtrace() nonstop leave the process alive, and after the undo the
    bytes the walk used (backtrace() and the room after libc's code) are
    the file's again;
  * where it cannot be made (a preloaded backtrace()), that site gets the
    empty stub and the answer says so.
"""

import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

import pytest

from btg.daemon import one
from btg.paths import REPO, VICTIMS
from btg.procfs import process_alive, read_mem
from btg.sites import dynsym_value, libc_text_mappings, object_base
from btg.victims import Lines, stop_started, wait_behaviour

CORO_CRASH = VICTIMS / "coro_crash"
PYTHON = "/usr/bin/python3"          # Debian's, where python3-torch lives
WORKLOAD = REPO / "tests" / "workloads" / "torch_greenlet.py"
# Importing torch on a loaded 2-core machine can take a while.
TORCH_TIMEOUT = 180.0
RUNS = 3
CYCLES = int(os.environ.get("BTGUARD_WALK_CYCLES", "8"))
RUN_TIMEOUT = 60.0


def _no_core():
    import resource
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))


@pytest.fixture
def switcher():
    """libcoroswitch copied under greenlet's name, as the at-risk check and
    the walk know a stack switcher."""
    d = Path(tempfile.mkdtemp(prefix="btg-walk-"))
    lib = d / "site-packages" / "greenlet" / "_greenlet.cpython-311-x86_64-linux-gnu.so"
    lib.parent.mkdir(parents=True)
    shutil.copy(VICTIMS / "libcoroswitch", lib)
    try:
        yield lib
    finally:
        shutil.rmtree(d, ignore_errors=True)


class Paused:
    """A victim started with --pause-file PATH (and maybe more), its lines read."""

    def __init__(self, tmp, argv, env=None):
        self.go = tmp / f"go-{time.monotonic_ns()}"
        self.proc = subprocess.Popen([*map(str, argv), "--pause-file", str(self.go)],
                                     stdin=subprocess.DEVNULL, stdout=subprocess.PIPE,
                                     stderr=subprocess.PIPE, preexec_fn=_no_core,
                                     env={**os.environ, **(env or {})})
        self.pid = self.proc.pid
        self.lines = Lines(self.proc)

    def release(self, timeout=RUN_TIMEOUT):
        self.go.touch()
        out, err = self.proc.communicate(timeout=timeout)
        return self.proc.returncode, self.lines.seen + out.decode().splitlines(), err.decode()


@pytest.fixture
def paused(tmp_path):
    started = []

    def start(argv, env=None):
        p = Paused(tmp_path, argv, env)
        started.append(p)
        return p
    try:
        yield start
    finally:
        for p in started:
            stop_started(p.proc)


@pytest.fixture
def coro(paused):
    return lambda *args: paused([CORO_CRASH, *args])


def walk_guard(daemon, pid, form="segment"):
    res = one(daemon.ctl("guard", f"--backtraces={form}", pid, check=0), pid, "guard")
    assert res["ok"] and res["state"] == "guarded", res
    return res


def libc_site(res):
    sites = [s for s in res["sites"] if s["object"].endswith("/libc.so.6")]
    assert len(sites) == 1, res
    return sites[0]


# ------------------------------------------------------------ the cure --

def test_the_crash_cured_with_the_coroutines_frames_kept(daemon, coro, switcher):
    for i in range(RUNS):
        p = subprocess.run([str(CORO_CRASH), "--switch-lib", str(switcher)], capture_output=True,
                           text=True, timeout=RUN_TIMEOUT, preexec_fn=_no_core)
        assert p.returncode == -signal.SIGSEGV, f"unguarded run {i + 1}: {p}"
    for i in range(RUNS):
        c = coro("--threads", 2, "--switch-lib", switcher)
        assert c.lines.next() == "paused"
        res = walk_guard(daemon, c.pid)
        assert libc_site(res)["backtraces"] == "segment", res
        assert not res["warnings"], res
        rc, out, err = c.release()
        assert rc == 0, f"guarded run {i + 1}: status {rc}, {out}, {err}"
        frames = int(out[1].split()[1])
        # victim_body, coro_entry, coro_trampoline: the raising function first,
        # the switcher's trampoline last, nothing read beyond it.
        assert out[1:] == [f"frames {frames}", "first victim_body", "last coro_trampoline"], out
        assert frames == 3, out


def test_the_empty_stub_still_gives_no_frames(daemon, coro, switcher):
    c = coro("--switch-lib", switcher)
    assert c.lines.next() == "paused"
    res = walk_guard(daemon, c.pid, form="empty")
    assert libc_site(res)["backtraces"] == "empty", res
    rc, out, err = c.release()
    assert rc == 0 and out[1:] == ["frames 0"], (rc, out, err)


def test_a_switcher_loaded_after_the_guard_counts_at_once(daemon, coro, switcher, tmp_path):
    load = tmp_path / "load"
    c = coro("--switch-lib", switcher, "--load-when", load)
    assert c.lines.next() == "waiting"
    walk_guard(daemon, c.pid)
    maps = Path(f"/proc/{c.pid}/maps").read_text()
    assert "_greenlet" not in maps, "the switcher was loaded before the guard"
    load.touch()
    assert c.lines.next() == "paused"
    rc, out, err = c.release()
    assert rc == 0, (rc, out, err)
    assert out[-3:] == ["frames 3", "first victim_body", "last coro_trampoline"], out


def torch_run(paused, daemon, form, mode):
    v = paused([PYTHON, WORKLOAD, "--mode", mode, "--threads", 4],
               env={"TORCH_SHOW_CPP_STACKTRACES": "1"})
    assert v.lines.next(timeout=TORCH_TIMEOUT) == "paused"
    res = walk_guard(daemon, v.pid, form=form)
    assert libc_site(res)["backtraces"] == form, res
    rc, out, err = v.release(timeout=TORCH_TIMEOUT)
    assert rc == 0, f"torch {mode} under {form}: status {rc}\n{out}\n{err}"
    assert out[-1].startswith("errors ") and out[-1].endswith(" ok"), out
    low, high = (int(x) for x in next(o for o in out if o.startswith("cpp frames ")).split()[2:])
    first = next((o for o in out if o.startswith("cpp first ")), "")
    return low, high, first


@pytest.mark.parametrize("mode", ["gevent", "greenlet"])
def test_torch_in_greenlets_keeps_its_cpp_traces(daemon, paused, mode):
    """Debian's torch 1.x and greenlet: the shape errors that crash it
    unguarded (test_crash.py) arrive with the C++ frames c10::Error took
    with backtrace(), from c10::Error::Error on."""
    low, high, first = torch_run(paused, daemon, "segment", mode)
    assert low > 3, (low, high)
    assert "c10::Error::Error" in first, first


def test_torch_under_the_empty_stub_has_no_cpp_traces(daemon, paused):
    """What the walk is measured against: the same run, no frame at all."""
    assert torch_run(paused, daemon, "empty", "greenlet") == (0, 0, "")


# ------------------------------------------------------- at the exec --

def run_walked(daemon, *argv, env=None):
    """btguardctl --backtraces=segment run -- ARGV: the command guarded at its exec."""
    return subprocess.run([str(daemon.client_path(None)), "--socket", daemon.socket,
                           "--backtraces=segment", "run", "--", *map(str, argv)],
                          capture_output=True, text=True, timeout=TORCH_TIMEOUT,
                          env={**os.environ, **(env or {})}, preexec_fn=_no_core)


def test_run_walks_from_the_first_instruction(daemon, switcher):
    """At the exec nothing of the switcher or of libgcc's unwinder is
    mapped: both are found when the first call needs them."""
    p = run_walked(daemon, CORO_CRASH, "--switch-lib", switcher)
    assert p.returncode == 0, p
    assert p.stdout.splitlines() == ["frames 3", "first victim_body", "last coro_trampoline"], p


def test_torch_loaded_after_a_guard_at_the_exec_keeps_its_cpp_traces(daemon):
    """The policy's no-window rule guards Python at its exec, before it
    imports torch or greenlet: the walk must hold for what comes later."""
    p = run_walked(daemon, PYTHON, WORKLOAD, "--mode", "greenlet",
                   env={"TORCH_SHOW_CPP_STACKTRACES": "1"})
    assert p.returncode == 0, p
    out = p.stdout.splitlines()
    assert out[-1] == "errors 20 ok", p
    low = int(next(o for o in out if o.startswith("cpp frames ")).split()[2])
    assert low > 3, out
    assert any(o.startswith("cpp first ") and "c10::Error::Error" in o for o in out), out


# ----------------------------------------- everything else as glibc's --

def frames_of(lines, v):
    v.proc.stdin.write(b"\n")
    v.proc.stdin.flush()
    return lines.next()


def test_outside_a_switched_stack_the_frames_are_glibcs(daemon, victim):
    v = victim("bt_print", 2, stdin=True)
    lines = Lines(v.proc)
    before = frames_of(lines, v)
    assert int(before.split()[1]) >= 8, before
    walk_guard(daemon, v.pid)
    assert frames_of(lines, v) == before
    walk_guard(daemon, v.pid, form="empty")
    assert frames_of(lines, v) == "frames 0"
    walk_guard(daemon, v.pid)
    assert frames_of(lines, v) == before
    one(daemon.ctl("unguard", v.pid, check=0), v.pid, "unguard")
    assert frames_of(lines, v) == before
    v.assert_alive()


# ------------------------------------------------ writes and the undo --

def file_bytes(path, offset, length):
    with open(path, "rb") as f:
        f.seek(offset)
        data = f.read(length)
    return data + bytes(length - len(data))   # past the end: the page's zero fill


def assert_bytes_as_the_file(pid):
    """backtrace() and the last page of libc's code read as libc's file has them."""
    (start, end, path), = libc_text_mappings(pid)
    base, _ = object_base(pid, "/libc.so.6")
    fn = dynsym_value(path, "backtrace")
    assert read_mem(pid, base + fn, 256) == file_bytes(path, fn, 256)
    last = end - 4096
    assert read_mem(pid, last, 4096) == file_bytes(path, last - base, 4096), \
        "the room after libc's code is not the file's again"


def test_guard_unguard_and_change_of_form_under_nonstop_callers(daemon, victim):
    v = victim.bt_loop(4)
    for i in range(CYCLES):
        res = walk_guard(daemon, v.pid)
        assert libc_site(res)["backtraces"] == "segment", res
        wait_behaviour(v, zero=False)
        if i % 2:
            # To the stub and back: the walk taken away while threads use it.
            res = walk_guard(daemon, v.pid, form="empty")
            assert libc_site(res)["backtraces"] == "empty", res
            wait_behaviour(v, zero=True)
            continue
        res = one(daemon.ctl("unguard", v.pid, check=0), v.pid, "unguard")
        assert res["ok"] and res["state"] == "unguarded", res
        assert_bytes_as_the_file(v.pid)
        v.assert_alive()
    one(daemon.ctl("unguard", v.pid, check=0), v.pid, "unguard")
    assert_bytes_as_the_file(v.pid)
    v.assert_alive()
    daemon.alive()


def test_where_the_walk_cannot_be_made_the_stub_goes_and_the_answer_says_why(daemon, victim):
    v = victim("bt_loop", 2, env={"LD_PRELOAD": str(VICTIMS / "libbtpre")})
    r = daemon.ctl("guard", "--backtraces=segment", v.pid, check=0)
    res = one(r, v.pid, "guard")
    assert res["state"] == "guarded", res
    forms = {Path(s["object"]).name: s.get("backtraces") for s in res["sites"]}
    assert forms == {"libc.so.6": "segment", "libbtpre": "empty"}, res
    assert [w["name"] for w in res["warnings"]] == ["backtraces-emptied"], res
    assert "libbtpre" in res["message"] and "not glibc's" in res["message"], res
    text = daemon.ctl("guard", "--backtraces=segment", v.pid, json=False, check=0).stdout
    assert "segment walk at 1 of 2 guarded" in text, text
    v.assert_alive()


# ------------------------------------------ a call still using the code --

@pytest.mark.parametrize("to", ["unguard", "empty"])
def test_a_call_that_took_the_code_keeps_it_until_done(daemon, victim, to):
    """A thread held inside the unwinder's call (bt_park: its signal handler
    waits while the walk is between two frames) was handed the walk's code
    and will call it again: taking the walk away (unguard, or the empty
    stub instead) names glibc's helper again at once, and leaves the code
    in place, busy, until that call is done; then it goes."""
    v = victim("bt_park", stdin=True)
    lines = Lines(v.proc)
    walk_guard(daemon, v.pid)

    def say(word):
        v.proc.stdin.write(word.encode() + b"\n")
        v.proc.stdin.flush()

    say("park")
    assert lines.next() == "parked"
    args = ("unguard", v.pid) if to == "unguard" else ("guard", "--backtraces=empty", v.pid)
    r = daemon.ctl("--deadline", 300, *args)
    res = one(r, v.pid, args[0])
    assert res["ok"] is False and res["error"] == "busy", res
    assert "inside the bytes to change" in res["message"], res
    # The first write is in: new calls get glibc's helper (or the stub).
    assert libc_site(res)["state"] == ("original" if to == "unguard" else "guarded"), res
    (start, end, _), = libc_text_mappings(v.pid)
    assert any(read_mem(v.pid, end - 1024, 1024)), "the code went while a call still used it"
    say("release")
    assert lines.next().startswith("released ")
    v.assert_alive()
    res = one(daemon.ctl(*args, check=0), v.pid, args[0])
    assert res["ok"] is True, res
    assert not any(read_mem(v.pid, end - 1024, 1024))
    v.assert_alive()
