# SPDX-License-Identifier: MIT
"""Guarding a process from its first instruction: `btguardctl run -- CMD`
and `btguardctl guard --at-exec PID` of a process about to exec.

The victim is first_line: the first line of its main calls backtrace()
and prints how many frames came back.  Guarded from the exec on it prints
0; started plainly, more.  A launcher (a python3 that reads one byte from
its stdin, then execs the victim) stands in for a launcher's child between
fork and exec.
"""

import contextlib
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import pytest

from btg.daemon import Daemon, running_daemon
from btg.paths import BTGUARDCTL, FAULTS_BTGUARDD, VICTIMS
from btg.procfs import thread_problems, tracer_pid
from btg.victims import stop_started, user_prefix
from btg.wire import (ACTION_AT_EXEC, ERR, KIND_DONE, KIND_ERROR, KIND_RESULT, PROC_GUARDED,
                      RESULT_ARMED, RESULT_WROTE, Wire, decode_result, encode_request)

LAUNCHER = "import os, sys; os.read(0, 1); os.execv(sys.argv[1], sys.argv[1:])"
# The launcher when the exec fails: it says so, and exits 42.
FAILING_LAUNCHER = ("import os, sys; os.read(0, 1)\n"
                    "try:\n    os.execv(sys.argv[1], sys.argv[1:])\n"
                    "except OSError as e:\n    print('exec failed', e.errno, flush=True)\n"
                    "os._exit(42)")
TIMEOUT = 60


def vpath(name):
    p = VICTIMS / name
    if not p.exists():
        pytest.fail(f"victim {p} missing: run `make victims`")
    return str(p)


def ctl_argv(d, *args, user=None):
    return user_prefix(user) + [d.client_path(user), "--socket", d.socket, *map(str, args)]


SYS_READ = 0   # x86-64; the integration tests run on it alone


def reading_stdin(pid):
    """Whether pid sits in read(0, ...) now (/proc/PID/syscall: its number
    and first argument; "running" or unreadable while it is elsewhere)."""
    try:
        with open(f"/proc/{pid}/syscall") as f:
            words = f.read().split()
    except OSError:
        return False
    return words[:2] == [str(SYS_READ), "0x0"]


def launch(*argv, script=LAUNCHER, user=None, env=None):
    """A process about to exec argv once a byte arrives on its stdin,
    returned once it waits for that byte in read(): the interpreter's own
    exec is over (Popen returns as soon as the exec closed its pipe, while
    the kernel may not yet have reported that exec to a tracer: a follow
    begun then would take it for the exec to guard), and with a user,
    setpriv's too (before it the process is root's, then, its credentials
    just changed, not dumpable, and the user may rightly not act on it)."""
    p = subprocess.Popen(user_prefix(user) + [sys.executable, "-c", script, *argv],
                         stdin=subprocess.PIPE, stdout=subprocess.PIPE, env=env)
    python = os.path.realpath(sys.executable)
    deadline = time.monotonic() + TIMEOUT

    def exe():
        try:
            return os.readlink(f"/proc/{p.pid}/exe")
        except OSError:
            return None
    while exe() != python or not reading_stdin(p.pid):
        assert p.poll() is None and time.monotonic() < deadline, \
            f"the launcher never waited for its go as {python} (exit {p.poll()})"
        time.sleep(0.005)
    return p


def assert_untouched(pid):
    """Running free: not stopped, not traced (by us or anybody)."""
    deadline = time.monotonic() + 10
    while thread_problems(pid) and time.monotonic() < deadline:
        time.sleep(0.02)
    assert not thread_problems(pid), thread_problems(pid)
    assert tracer_pid(pid) == 0


def armed(ctl):
    """Reads btguardctl's first line, which must say the process is followed."""
    line = ctl.stdout.readline()
    assert "armed" in line, f"expected an armed line, got {line!r}"


@contextlib.contextmanager
def at_exec(d, *victim_argv, json=False, script=LAUNCHER, env=None, user=None, options=()):
    """A launcher about to exec victim_argv, and btguardctl's guard
    --at-exec of it, armed (its first line read) and not yet released:
    yields (launcher, btguardctl), and stops both on the way out."""
    child = launch(*victim_argv, script=script, env=env, user=user)
    ctl = None
    try:
        ctl = subprocess.Popen(ctl_argv(d, *(["--json"] if json else []), *options,
                                        "guard", "--at-exec", child.pid, user=user),
                               stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        armed(ctl)
        yield child, ctl
    finally:
        if ctl is not None:
            stop_started(ctl)
        stop_started(child)


def release_and_answer(child, ctl):
    """Lets the launcher exec and waits for btguardctl: (exit status, stdout, stderr)."""
    release(child)
    out, err = ctl.communicate(timeout=TIMEOUT)
    return ctl.returncode, out, err


def release(child):
    child.stdin.write(b"g")
    child.stdin.flush()


def test_unguarded_first_line_sees_frames():
    out = subprocess.run([vpath("first_line")], capture_output=True, text=True, check=True,
                         timeout=TIMEOUT).stdout
    assert int(out) > 0


def test_run_guards_before_main(daemon):
    p = subprocess.run(ctl_argv(daemon, "run", "--", vpath("first_line")),
                       capture_output=True, text=True, timeout=TIMEOUT)
    assert p.returncode == 0, p.stderr
    assert p.stdout == "0\n", (p.stdout, p.stderr)


def test_run_forwards_the_exit_status(daemon):
    p = subprocess.run(ctl_argv(daemon, "run", "--", vpath("first_line"), "7"),
                       capture_output=True, text=True, timeout=TIMEOUT)
    assert (p.returncode, p.stdout) == (7, "0\n"), p.stderr


def test_run_forwards_sigterm(daemon):
    p = subprocess.Popen(ctl_argv(daemon, "run", "--", "sleep", "60"),
                         stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        # The sleep is started once its exec was followed: wait for it.
        deadline = time.monotonic() + TIMEOUT
        kids = []
        while not kids and time.monotonic() < deadline:
            with open(f"/proc/{p.pid}/task/{p.pid}/children") as f:
                kids = [int(k) for k in f.read().split()]
            time.sleep(0.02)
        assert kids
        deadline = time.monotonic() + TIMEOUT
        while time.monotonic() < deadline:
            with open(f"/proc/{kids[0]}/comm") as f:
                if f.read().strip() == "sleep" and tracer_pid(kids[0]) == 0:
                    break
            time.sleep(0.02)
        p.send_signal(signal.SIGTERM)
        _, err = p.communicate(timeout=TIMEOUT)
        assert p.returncode == 128 + signal.SIGTERM, err
    finally:
        stop_started(p)


def test_preloaded_definition_and_glibcs_are_both_guarded(daemon):
    """An LD_PRELOADed backtrace() is mapped before glibc's: both are
    guarded, the follow does not stop at the first."""
    with at_exec(daemon, vpath("first_line"), json=True,
                 env={**os.environ, "LD_PRELOAD": vpath("libbtpre")}) as (child, ctl):
        rc, out, err = release_and_answer(child, ctl)
        assert rc == 0, (out, err)
        final = out.splitlines()[-1]
        assert '"armed":false' in final and '"state":"guarded"' in final, out
        assert final.count('"state":"guarded"') == 3, final   # the process and 2 sites
        assert child.stdout.read() == b"0\n"


def test_run_keeps_an_ignored_sigint_ignored(daemon):
    """Like env under nohup: what btguardctl inherited, the command does."""
    probe = "import signal; print(signal.getsignal(signal.SIGINT) == signal.SIG_IGN)"
    p = subprocess.run(ctl_argv(daemon, "run", "--", sys.executable, "-c", probe),
                       capture_output=True, text=True, timeout=TIMEOUT,
                       preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN))
    assert (p.returncode, p.stdout) == (0, "True\n"), p.stderr


def test_run_static_executable(daemon):
    p = subprocess.run(ctl_argv(daemon, "--verbose", "run", "--", vpath("first_line_static")),
                       capture_output=True, text=True, timeout=TIMEOUT)
    assert p.returncode == 0, p.stderr
    assert p.stdout == "0\n"
    assert "static executable" in p.stderr


def test_run_missing_file(daemon):
    p = subprocess.run(ctl_argv(daemon, "run", "--", "/nonexistent/btguard-no-such-file"),
                       capture_output=True, text=True, timeout=TIMEOUT)
    assert p.returncode == 127, p.stderr
    assert "No such file" in p.stderr
    assert p.stdout == ""


def test_at_exec_of_a_launchers_child(daemon):
    with at_exec(daemon, vpath("first_line"), "0", "wait", json=True) as (child, ctl):
        rc, out, err = release_and_answer(child, ctl)
        assert rc == 0, (out, err)
        assert '"state":"guarded"' in out and '"wrote":true' in out, out
        assert child.stdout.readline() == b"0\n"
        assert_untouched(child.pid)
        child.stdin.close()
        assert child.wait(timeout=TIMEOUT) == 0


def test_at_exec_static_executable(daemon):
    with at_exec(daemon, vpath("first_line_static")) as (child, ctl):
        rc, out, err = release_and_answer(child, ctl)
        assert rc == 0, (out, err)
        assert "static executable" in out
        assert child.stdout.read() == b"0\n"
        assert child.wait(timeout=TIMEOUT) == 0


def test_at_exec_missing_file_runs_on_in_the_old_image(daemon):
    with at_exec(daemon, "/nonexistent/btguard-no-such-file",
                 script=FAILING_LAUNCHER) as (child, ctl):
        rc, out, err = release_and_answer(child, ctl)
        assert rc == 1, (out, err)
        assert "error: ENOENT" in out and "old program" in out, out
        assert child.stdout.read() == b"exec failed 2\n"
        assert child.wait(timeout=TIMEOUT) == 42


def test_at_exec_of_a_program_without_backtrace(daemon):
    """nolibc maps no backtrace() at all: no-site, and it runs on untraced."""
    with at_exec(daemon, vpath("nolibc")) as (child, ctl):
        rc, out, err = release_and_answer(child, ctl)
        assert rc == 1, (out, err)
        assert "error: no-site" in out, out
        assert child.stdout.readline() == b"ready\n"
        assert_untouched(child.pid)


def test_at_exec_gives_up_at_the_programs_first_own_system_call(daemon):
    """A dynamic program whose loader maps no library: the follow ends at
    its first system call the loader never makes (write), no-site."""
    with at_exec(daemon, vpath("nolibc_dyn")) as (child, ctl):
        rc, out, err = release_and_answer(child, ctl)
        assert rc == 1, (out, err)
        assert "error: no-site" in out and "first system call of its own" in out, out
        assert child.stdout.readline() == b"ready\n"
        assert_untouched(child.pid)


def test_at_exec_of_a_two_thread_process_is_refused_at_once(daemon, victim):
    """A thread not followed could exec unseen: a process with two is
    answered an error before anything is armed, and is never traced."""
    v = victim("idle", 1)                   # main thread and one sleeper
    assert len(os.listdir(f"/proc/{v.pid}/task")) == 2
    # At once: the 60 s deadline is never waited out (20 s is loose for a
    # loaded machine; an armed follow would wait the whole deadline).
    try:
        p = subprocess.run(ctl_argv(daemon, "--deadline", "60000", "guard", "--at-exec", v.pid),
                           capture_output=True, text=True, timeout=20)
    except subprocess.TimeoutExpired as e:
        pytest.fail(f"no answer within 20 s: armed? {e.stdout!r}")
    assert p.returncode == 1, (p.stdout, p.stderr)
    assert "armed" not in p.stdout, p.stdout
    assert "has 2 threads" in p.stdout, p.stdout
    assert_untouched(v.pid)
    (res,) = daemon.ctl("status", v.pid, check=0).results
    assert res["state"] == "unguarded", res
    v.assert_alive()


def test_at_exec_without_exec_times_out_and_lets_go(daemon):
    child = launch(vpath("first_line"))
    try:
        p = subprocess.run(ctl_argv(daemon, "--deadline", "300", "guard", "--at-exec", child.pid),
                           capture_output=True, text=True, timeout=TIMEOUT)
        assert p.returncode == 1
        assert "armed" in p.stdout and "ETIMEDOUT" in p.stdout, p.stdout
        assert_untouched(child.pid)
        release(child)
        assert int(child.stdout.read()) > 0
    finally:
        stop_started(child)


@contextlib.contextmanager
def doomed_daemon():
    """A daemon the test SIGKILLs: no clean exit to check, only its log."""
    d = Daemon()
    try:
        d.wait_ready()
        yield d
    finally:
        if d.proc.poll() is None:
            d.proc.kill()
        d.proc.wait()
        print("---- btguardd log (tail) ----")
        print("\n".join(d.log().splitlines()[-60:]))
        shutil.rmtree(d.dir, ignore_errors=True)


@pytest.mark.parametrize("delay_ms", [0, 1, 3, 10, 30])
def test_daemon_killed_while_following(delay_ms):
    """SIGKILL the daemon at some moment of the follow: the program runs on,
    prints a real count or 0, never crashes, and is left neither stopped
    nor traced."""
    with doomed_daemon() as d, at_exec(d, vpath("first_line"), "0", "wait") as (child, ctl):
        release(child)
        time.sleep(delay_ms / 1000)
        d.proc.kill()
        d.proc.wait()
        line = child.stdout.readline()
        assert line.strip().isdigit(), f"the victim printed {line!r}"
        assert_untouched(child.pid)
        child.stdin.close()
        assert child.wait(timeout=TIMEOUT) == 0


def test_daemon_killed_while_armed():
    with doomed_daemon() as d, at_exec(d, vpath("first_line"), "0", "wait") as (child, ctl):
        d.proc.kill()
        d.proc.wait()
        assert_untouched(child.pid)
        release(child)
        assert int(child.stdout.readline()) > 0   # never guarded: real frames
        child.stdin.close()
        assert child.wait(timeout=TIMEOUT) == 0


def test_user_cannot_at_exec_roots_process(daemon, test_user):
    child = launch(vpath("first_line"))
    try:
        p = subprocess.run(ctl_argv(daemon, "guard", "--at-exec", child.pid, user=test_user),
                           capture_output=True, text=True, timeout=TIMEOUT)
        assert p.returncode == 1, p.stdout
        assert "error: denied" in p.stdout or "error: no-process" in p.stdout, p.stdout
        assert "armed" not in p.stdout
        assert tracer_pid(child.pid) == 0
        release(child)
        assert int(child.stdout.read()) > 0
    finally:
        stop_started(child)


def test_verify_failure_at_exec_leaves_the_original(test_user):
    """The read-back after the write differs: the word is restored, the
    answer says verify, and the program runs with real frames."""
    if not FAULTS_BTGUARDD.exists():
        pytest.skip("no fault-injection build (make faults)")
    with running_daemon(binary=FAULTS_BTGUARDD, env={"BTGUARD_FAULTS": "peek-differ=1"}) as d, \
            at_exec(d, vpath("first_line")) as (child, ctl):
        rc, out, err = release_and_answer(child, ctl)
        assert rc == 1, (out, err)
        assert "error: verify" in out, out
        assert int(child.stdout.read()) > 0
        assert child.wait(timeout=TIMEOUT) == 0


def test_other_clients_are_served_while_following(daemon, victim):
    """A follow waits for its exec across turns: others are served meanwhile
    (a loop held for the whole wait would answer them only after it)."""
    v = victim("idle", 1)
    with at_exec(daemon, vpath("first_line"), options=("--deadline", "60000")) as (child, ctl):
        daemon.ctl("guard", v.pid, check=0, timeout=30)
        daemon.ctl("status", v.pid, check=0, timeout=30)
        assert ctl.poll() is None, "the follow ended without its exec"
        rc, out, _ = release_and_answer(child, ctl)
        assert rc == 0, out
        assert child.stdout.read() == b"0\n"


def test_help_names_run_and_at_exec():
    out = subprocess.run([str(BTGUARDCTL), "--help"], capture_output=True, text=True,
                         check=True).stdout
    assert "--at-exec" in out and "run -- CMD" in out


def test_wire_two_results_then_done_2(daemon):
    """At the wire: ARMED first, then the outcome, and DONE counts both."""
    child = launch(vpath("first_line"))
    try:
        with Wire(daemon.socket) as w:
            w.send(encode_request(ACTION_AT_EXEC, [child.pid]))
            kind, payload = w.recv()
            first = decode_result(payload)
            assert (first.pid, first.error, first.action) == (child.pid, 0, ACTION_AT_EXEC)
            assert first.flags == RESULT_ARMED
            release(child)
            kind, payload = w.recv()
            assert kind == KIND_RESULT
            second = decode_result(payload)
            kind, payload = w.recv()
    finally:
        stop_started(child)
    assert (second.error, second.state, second.flags) == (0, PROC_GUARDED, RESULT_WROTE)
    assert (kind, int.from_bytes(payload, "little")) == (KIND_DONE, 2)


def test_wire_at_exec_names_one_pid(daemon):
    with Wire(daemon.socket) as w:
        w.send(encode_request(ACTION_AT_EXEC, [os.getpid(), os.getpid()]))
        kind, payload = w.recv()
    assert kind == KIND_ERROR
    assert int.from_bytes(payload[:4], "little") == ERR["protocol"]


def test_setuid_program_is_let_go_untouched_for_a_user(daemon, test_user):
    """The kernel lets a traced setuid exec gain privilege when the tracer
    (the daemon) may trace the result: a user's --at-exec is authorized
    again at the exec, and the setuid program is let go untouched."""
    where = tempfile.mkdtemp(prefix="btg-setuid-")   # the user must reach it
    os.chmod(where, 0o755)
    prog = os.path.join(where, "first_line_setuid")
    shutil.copy(vpath("first_line"), prog)
    os.chown(prog, 0, 0)
    os.chmod(prog, 0o4755)
    try:
        with at_exec(daemon, str(prog), user=test_user) as (child, ctl):
            rc, out, err = release_and_answer(child, ctl)
            assert rc == 1, (out, err)
            assert "error: denied" in out and "untouched" in out, out
            assert int(child.stdout.read()) > 0       # never guarded
            assert child.wait(timeout=TIMEOUT) == 0
    finally:
        shutil.rmtree(where, ignore_errors=True)


def test_client_gone_while_armed_lets_the_process_go(daemon):
    with at_exec(daemon, vpath("first_line")) as (child, ctl):
        ctl.kill()
        ctl.wait()
        assert_untouched(child.pid)
        release(child)
        assert int(child.stdout.read()) > 0


def test_daemon_stopping_while_armed_answers_shutdown():
    with running_daemon() as d, at_exec(d, vpath("first_line")) as (child, ctl):
        d.proc.send_signal(signal.SIGTERM)
        out, err = ctl.communicate(timeout=TIMEOUT)
        assert ctl.returncode == 1 and "error: shutdown" in out, (out, err)
        assert_untouched(child.pid)
        release(child)
        assert int(child.stdout.read()) > 0


def test_process_killed_while_followed_answers_gone(daemon):
    with at_exec(daemon, vpath("first_line")) as (child, ctl):
        child.kill()
        assert child.wait(timeout=TIMEOUT) == -signal.SIGKILL   # reaped by its parent
        out, err = ctl.communicate(timeout=TIMEOUT)
        assert ctl.returncode == 1 and "error: gone" in out and "SIGKILL" in out, (out, err)
        daemon.alive()


def test_process_exiting_before_its_exec_answers_gone(daemon):
    with at_exec(daemon, script="import os; os.read(0, 1); os._exit(5)") as (child, ctl):
        release(child)
        assert child.wait(timeout=TIMEOUT) == 5
        out, err = ctl.communicate(timeout=TIMEOUT)
        assert ctl.returncode == 1 and "error: gone" in out and "before its exec" in out, out
