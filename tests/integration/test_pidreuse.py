# SPDX-License-Identifier: MIT
"""PID reuse: a PID that names another process by the
time the daemon acts must never lead it to act on that other process.

The daemon pins a target (pidfd_open + /proc/PID/stat start time) when it
starts on it, and re-checks the pin before it stops or writes anything.
To test that, the PID really has to be recycled while the daemon holds a
pin, deterministically.  Everything happens in a fresh PID namespace
(`unshare -p -f --mount-proc`) where this file, re-run as the namespace's
init, is the only one creating processes, so writing P-1 to
/proc/sys/kernel/ns_last_pid makes the next fork get PID P.  The daemon
runs inside too, so its PIDs are the namespace's.

Holding the daemon inside the window, without any test hook in the daemon:
the first target has a thread in uninterruptible sleep (it called
posix_spawn, whose CLONE_VFORK parent waits in D state while the child
blocks opening a FIFO).  The daemon must not seize a process with a D
thread, so it backs off and retries until the deadline - holding the pin.
The test waits until the daemon's pidfd for P shows up in
/proc/DAEMON/fdinfo (proof of the pin), then SIGSTOPs the daemon, kills
and reaps the target, forks a new process onto P, and SIGCONTs the daemon.
SIGSTOP only stretches what a busy scheduler can do anyway.

  test_recycled_while_pinned  the daemon must answer "pid-reused", write
                              nothing, and leave the new process untouched.
  test_recycled_after_arrival one request names the slow target and then P;
                              P is recycled while the daemon works on the
                              first.  Targets are pinned (start time) when
                              the daemon reads the request, so P's turn must
                              be refused with "pid-reused", nothing written.
  test_recycled_within_a_tick the same as fast as a script can: the PID
                              is recycled within milliseconds of the first
                              process's start, often in the same 10 ms tick
                              of /proc's start time, over and over; the
                              pidfd taken on arrival must refuse every one.
  test_sharer_on_a_recycled_pid
                              a process sharing the target's memory is born,
                              while the daemon holds before its first seize,
                              under the PID of a process its search for
                              sharers listed and compared before: the
                              search inside the pause must compare it again
                              (the allocator handed that PID out again), and
                              hold it.
  test_recycled_before_pin    a request still unread behind a slow one: its
                              PID is recycled before the daemon reads it, so
                              the request names the new process; the answer
                              and the log must be about the new one (here a
                              static program without backtrace(): state
                              "none"), never a mix of both.
"""

import json
import os
import shutil
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import pytest

from btg.daemon import KillableDaemon, guard_during_seize_hold
from btg.paths import SANITIZER_MARKERS, VICTIMS
from btg.procfs import d_threads, proc_state, thread_problems
from btg.sites import Site
from btg.victims import D_TARGET
from btg.wire import (ACTION_GUARD, ACTION_STATUS, PROC_NONE, PROC_UNGUARDED, RESULT_WROTE, Wire,
                      encode_request, error_name)


def run_inside(scenario):
    if subprocess.run(["unshare", "--help"], capture_output=True).returncode != 0:
        pytest.skip("unshare not available")
    p = subprocess.run(
        ["unshare", "--pid", "--fork", "--mount-proc", "--kill-child",
         sys.executable, str(Path(__file__).resolve()), scenario],
        capture_output=True, text=True, timeout=180, env=dict(os.environ))
    lines = [line for line in p.stdout.splitlines() if line.startswith("{")]
    assert p.returncode == 0 and lines, \
        f"inside the namespace, {scenario} failed ({p.returncode}):\n" \
        f"stdout:\n{p.stdout[-6000:]}\nstderr:\n{p.stderr[-6000:]}"
    return json.loads(lines[-1])


def test_recycled_while_pinned():
    o = run_inside("recycled-while-pinned")
    where = json.dumps(o, indent=1)
    print(f"recycled while pinned: error={o['error']} message={o['message']!r}")
    assert o["new_pid"] == o["old_pid"], where
    assert o["error"] == "pid-reused", where
    assert "another process" in o["message"], where
    assert not o["wrote"], where
    assert o["new_alive"] and not o["new_thread_problems"], where
    assert o["new_site_before"] == o["new_site_after"] == "original", where
    assert o["daemon_exit"] == 0 and not o["sanitizer"], where
    assert o["log_error_line"], where
    # The daemon serves on, and a later request is about the new process.
    assert o["later_status"] == {"error": 0, "state": "unguarded"}, where


def test_recycled_before_pin():
    o = run_inside("recycled-before-pin")
    where = json.dumps(o, indent=1)
    print(f"recycled before pin: error={o['error']} state={o['state']} log_exe={o['log_exe']}")
    assert o["new_pid"] == o["old_pid"], where
    assert o["first_error"] == "busy", where   # the slow request ran out its deadline
    if o["error"] == 0:
        # Acted on the new process: everything said is about it.
        assert o["state"] == "none" and o["nsites"] == 0, where
        assert o["log_exe"] == o["new_exe"], where
    else:
        assert o["error"] in ("gone", "pid-reused"), where
    assert o["daemon_exit"] == 0 and not o["sanitizer"], where


def test_recycled_after_arrival():
    o = run_inside("recycled-after-arrival")
    where = json.dumps(o, indent=1)
    assert o["new_pid"] == o["old_pid"], where
    assert o["first_error"] == "busy", where
    # Pinned when the request arrived: the new process is refused, never guarded.
    assert o["error"] == "pid-reused" and not o["wrote"], where
    assert "when the request arrived" in o["message"], where
    assert o["new_site"] == "original", where


def test_recycled_within_a_tick():
    o = run_inside("recycled-within-a-tick")
    where = json.dumps({k: v for k, v in o.items() if k != "log_tail"}, indent=1)
    print(f"recycled within a tick: {o['rounds']} rounds, {o['same_tick']} in the same tick")
    assert RECYCLE_ROUNDS <= o["rounds"] <= RECYCLE_ROUNDS_MAX and not o["not_recycled"], where
    # Otherwise the test proves nothing about the tick: the machine was too slow.
    assert o["same_tick"] > 0, where
    assert not o["touched"], where
    assert set(o["errors"]) <= {"pid-reused"}, where
    assert o["daemon_exit"] == 0 and not o["sanitizer"], where


def test_sharer_on_a_recycled_pid():
    o = run_inside("sharer-on-a-recycled-pid")
    where = json.dumps({k: v for k, v in o.items() if k != "log_tail"}, indent=1)
    print(f"sharer on a recycled PID: {o['attempts']} attempt(s), sibling {o['sibling']}")
    assert o["recycled"], where
    assert o["found_in_the_pause"], where
    assert o["ok"] and o["state"] == "guarded" and o["wrote"], where
    assert o["all_alive"] and not o["thread_problems"], where


RECYCLE_ROUNDS = 40
RECYCLE_ROUNDS_MAX = 160


# ===================================================== inside the namespace ==
# Everything below runs as PID 1 of a new PID namespace and prints one JSON
# line of observations; the tests above judge them.


class Inside:
    def __init__(self):
        assert os.getpid() == 1, "must run as init of a new PID namespace"
        self.dir = Path(tempfile.mkdtemp(prefix="btg-pidns-"))
        self.children = []

    # -- processes
    def spawn(self, argv, wait_ready=True):
        p = subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE)
        self.children.append(p)
        if wait_ready:
            line = p.stdout.readline()
            assert line == b"ready\n", (argv, line)
        return p

    def d_target(self):
        """A process with a thread in D state, and the FIFO that holds it."""
        fifo = self.dir / f"fifo{len(self.children)}"
        os.mkfifo(fifo)
        p = self.spawn([sys.executable, "-c", D_TARGET, str(fifo)])
        self.wait(lambda: d_threads(p.pid), f"a D-state thread in {p.pid}")
        return p

    def kill_with_vfork_child(self, p):
        """SIGKILL p and the posix_spawn child that shares its memory; reap both
        (as init, the orphaned child is ours)."""
        kids = []
        for tid in os.listdir(f"/proc/{p.pid}/task"):
            with open(f"/proc/{p.pid}/task/{tid}/children") as f:
                kids += [int(x) for x in f.read().split()]
        os.kill(p.pid, signal.SIGKILL)
        p.wait(timeout=30)
        for k in kids:
            try:
                os.kill(k, signal.SIGKILL)
            except ProcessLookupError:
                pass
        deadline = time.monotonic() + 30
        while kids and time.monotonic() < deadline:
            for k in list(kids):
                try:
                    if os.waitpid(k, os.WNOHANG)[0] == k:
                        kids.remove(k)
                except ChildProcessError:
                    pass             # not reparented to us yet
            time.sleep(0.01)
        assert not kids, f"vfork children not reaped: {kids}"

    def fork_onto(self, pid, argv):
        """Starts argv so that it gets PID `pid` (nothing else forks here)."""
        with open("/proc/sys/kernel/ns_last_pid", "w") as f:
            f.write(str(pid - 1))
        return self.spawn(argv)

    def wait(self, pred, what, timeout=20.0, interval=0.01):
        deadline = time.monotonic() + timeout
        while True:
            v = pred()
            if v:
                return v
            assert time.monotonic() < deadline, f"timed out waiting for {what}"
            time.sleep(interval)

    # -- the daemon
    def start_daemon(self):
        d = KillableDaemon(extra_args=("--verbose",))
        self.daemon = d.wait_ready()
        return d

    def daemon_pins(self, pid):
        """True when the daemon holds a pidfd for pid (fdinfo's "Pid:" line)."""
        base = f"/proc/{self.daemon.pid}/fdinfo"
        for fd in os.listdir(base):
            try:
                with open(f"{base}/{fd}") as f:
                    if f"\nPid:\t{pid}\n" in f.read():
                        return True
            except FileNotFoundError:
                pass
        return False

    def daemon_state(self):
        with open(f"/proc/{self.daemon.pid}/stat") as f:
            return f.read().rsplit(")", 1)[1].split()[0]

    def freeze_daemon(self):
        os.kill(self.daemon.pid, signal.SIGSTOP)
        self.wait(lambda: self.daemon_state() == "T", "the daemon to stop")

    def thaw_daemon(self):
        os.kill(self.daemon.pid, signal.SIGCONT)

    def finish(self, obs):
        rc = self.daemon.stop()
        log = self.daemon.log()
        obs["daemon_exit"] = rc
        obs["sanitizer"] = [m for m in SANITIZER_MARKERS if m in log]
        obs["log_tail"] = log.splitlines()[-30:]
        self.daemon.cleanup()
        for p in self.children:
            if p.poll() is None:
                p.kill()
                p.wait(timeout=30)
        shutil.rmtree(self.dir, ignore_errors=True)
        print(json.dumps(obs), flush=True)


def recycled_while_pinned(x):
    x.start_daemon()
    old = x.d_target()
    obs = {"old_pid": old.pid}
    w = Wire(x.daemon.socket, timeout=120)
    w.send(encode_request(ACTION_GUARD, [old.pid], deadline_ms=30000))
    x.wait(lambda: x.daemon_pins(old.pid), "the daemon to pin the target")
    time.sleep(0.2)          # well into its busy back-off loop
    x.freeze_daemon()
    x.kill_with_vfork_child(old)
    new = x.fork_onto(old.pid, [str(VICTIMS / "idle"), "2"])
    obs["new_pid"] = new.pid
    site = Site(new.pid)
    obs["new_site_before"] = site.classify()
    x.thaw_daemon()
    [res] = w.read_results()
    w.close()
    obs.update(error=error_name(res.error), message=res.message,
               wrote=bool(res.flags & RESULT_WROTE), state=res.state)
    obs["new_alive"] = new.poll() is None
    obs["new_thread_problems"] = thread_problems(new.pid)
    obs["new_site_after"] = site.classify()
    obs["log_error_line"] = [line for line in x.daemon.log().splitlines()
                             if f"guard pid={old.pid} " in line and "error pid-reused" in line]
    with Wire(x.daemon.socket, timeout=60) as w2:
        [res] = w2.request(ACTION_STATUS, [new.pid])
    obs["later_status"] = {"error": res.error,
                           "state": {PROC_UNGUARDED: "unguarded"}.get(res.state, res.state)}
    x.finish(obs)


def recycled_before_pin(x):
    x.start_daemon()
    slow = x.d_target()
    old = x.spawn([str(VICTIMS / "idle"), "1"])
    obs = {"old_pid": old.pid}
    a = Wire(x.daemon.socket, timeout=120)
    b = Wire(x.daemon.socket, timeout=120)
    # A: one slow target (busy until its 1 s deadline), parked between
    # attempts.  B's request is sent while the daemon is frozen, so it waits
    # in the socket, unread and unpinned, while its PID is recycled.
    a.send(encode_request(ACTION_GUARD, [slow.pid], deadline_ms=1000))
    x.wait(lambda: x.daemon_pins(slow.pid), "the daemon to start on the slow target")
    x.freeze_daemon()
    b.send(encode_request(ACTION_STATUS, [old.pid]))
    os.kill(old.pid, signal.SIGKILL)
    old.wait(timeout=30)
    nolibc = VICTIMS / "nolibc"
    new = x.fork_onto(old.pid, [str(nolibc)])
    obs["new_pid"] = new.pid
    obs["new_exe"] = os.readlink(f"/proc/{new.pid}/exe")
    x.thaw_daemon()
    [first] = a.read_results()
    obs["first_error"] = error_name(first.error)
    [res] = b.read_results()
    a.close()
    b.close()
    obs.update(error=error_name(res.error) if res.error else 0, nsites=res.nsites,
               state={PROC_NONE: "none", PROC_UNGUARDED: "unguarded"}.get(res.state, res.state),
               message=res.message)
    lines = [line for line in x.daemon.log().splitlines() if f"status pid={old.pid} " in line]
    obs["log_exe"] = lines[-1].split(" exe=", 1)[1].split(" by uid=")[0] if lines else None
    x.kill_with_vfork_child(slow)
    x.finish(obs)


def recycled_after_arrival(x):
    """One request naming a slow target, then an idle one.  Both are pinned
    when the request arrives; the second PID is recycled while the daemon
    works on the first, so its turn must be refused."""
    x.start_daemon()
    slow = x.d_target()
    old = x.spawn([str(VICTIMS / "idle"), "1"])
    obs = {"old_pid": old.pid}
    a = Wire(x.daemon.socket, timeout=120)
    a.send(encode_request(ACTION_GUARD, [slow.pid, old.pid], deadline_ms=1000))
    x.wait(lambda: x.daemon_pins(slow.pid), "the daemon to start on the slow target")
    x.freeze_daemon()
    os.kill(old.pid, signal.SIGKILL)
    old.wait(timeout=30)
    new = x.fork_onto(old.pid, [str(VICTIMS / "idle"), "1"])
    obs["new_pid"] = new.pid
    site = Site(new.pid)   # its backtrace() bytes before the daemon runs again
    x.thaw_daemon()
    first, second = a.read_results()
    a.close()
    obs["first_error"] = error_name(first.error)
    obs.update(error=error_name(second.error) if second.error else 0,
               wrote=bool(second.flags & 1), message=second.message)
    # The new process must not have been touched: its backtrace() is original.
    obs["new_site"] = site.classify()
    x.kill_with_vfork_child(slow)
    x.finish(obs)


def starttime(pid):
    with open(f"/proc/{pid}/stat") as f:
        return int(f.read().rsplit(")", 1)[1].split()[19])


def recycled_within_a_tick(x):
    """Each round: start P, send [slow, P] (so P waits its turn), make sure
    the daemon has read the request, then kill P and start another process
    on its PID at once.  The new process must never be guarded."""
    x.start_daemon()
    slow = x.d_target()
    idle = str(VICTIMS / "idle")
    obs = {"rounds": 0, "same_tick": 0, "not_recycled": [], "touched": [], "errors": []}
    w = Wire(x.daemon.socket, timeout=120)
    # Rounds until one lands within the old process's tick (a busy machine
    # may need more than RECYCLE_ROUNDS), at most RECYCLE_ROUNDS_MAX.
    while obs["rounds"] < RECYCLE_ROUNDS or \
            (obs["same_tick"] == 0 and obs["rounds"] < RECYCLE_ROUNDS_MAX):
        old = x.spawn([idle, "1"], wait_ready=False)
        old_start = starttime(old.pid)
        w.send(encode_request(ACTION_GUARD, [slow.pid, old.pid], deadline_ms=400))
        # The daemon holds slow's pin once it has read the request.
        x.wait(lambda: x.daemon_pins(slow.pid) and x.daemon_pins(old.pid),
               "the daemon to read the request and pin both", timeout=60,
               interval=0.0002)
        os.kill(old.pid, signal.SIGKILL)
        old.wait(timeout=30)
        new = x.fork_onto(old.pid, [idle, "1"])
        obs["rounds"] += 1
        if new.pid != old.pid:
            obs["not_recycled"].append((old.pid, new.pid))
        obs["same_tick"] += starttime(new.pid) == old_start
        site = Site(new.pid)
        first, second = w.read_results()
        obs["errors"].append(error_name(second.error))
        state = site.classify()
        if state != "original" or second.flags & RESULT_WROTE or thread_problems(new.pid):
            obs["touched"].append({"pid": new.pid, "site": state, "result": second.message,
                                   "threads": thread_problems(new.pid)})
        new.kill()
        new.wait(timeout=30)
        # Not slow's pin of this request any more: the next round waits for a fresh one.
        x.wait(lambda: not x.daemon_pins(slow.pid), "the daemon to finish the request")
    w.close()
    x.kill_with_vfork_child(slow)
    x.finish(obs)


SHARER_ATTEMPTS = 5


def sharer_on_a_recycled_pid(x):
    """X is listed (and compared) by the guard's search for sharers; while
    the fault build holds the daemon before its first seize, X exits and the
    target makes a sibling on its memory under X's PID.  The search inside
    the pause must find that sibling.  The hold must end within the stop
    bound, so a slow machine may miss it: the sequence is tried a few times
    and must take that path once."""
    obs = {"attempts": 0, "recycled": False, "found_in_the_pause": False}
    for _ in range(SHARER_ATTEMPTS):
        obs["attempts"] += 1
        placeholder = x.spawn([str(VICTIMS / "idle"), "0"])
        target = x.spawn([str(VICTIMS / "vmsibling"), "1", "--late"])

        def bear():
            os.kill(placeholder.pid, signal.SIGKILL)
            placeholder.wait(timeout=30)
            with open("/proc/sys/kernel/ns_last_pid", "w") as f:
                f.write(str(placeholder.pid - 1))
            os.kill(target.pid, signal.SIGUSR2)
            while (line := target.stdout.readline()) != b"born\n":
                assert line.startswith(b"sibling "), line

        res, log = guard_during_seize_hold(target.pid, 1, bear)
        with open(f"/proc/{target.pid}/task/{target.pid}/children") as f:
            sibs = [int(p) for p in f.read().split()]
        obs.update(sibling=sibs, recycled=sibs == [placeholder.pid], ok=res["ok"],
                   state=res["state"], wrote=res["wrote"])
        obs["all_alive"] = all(proc_state(p) not in (None, "Z", "X")
                               for p in [target.pid] + sibs)
        obs["thread_problems"] = [thread_problems(p) for p in [target.pid] + sibs
                                  if thread_problems(p)]
        obs["found_in_the_pause"] = (f"process {target.pid}: 1 process(es) sharing its memory "
                                     "found once it was stopped") in log
        obs["log_tail"] = log.splitlines()[-30:]
        x.kill_with_vfork_child(target)
        if obs["found_in_the_pause"] or not obs["recycled"] or not obs["all_alive"]:
            break
    shutil.rmtree(x.dir, ignore_errors=True)
    print(json.dumps(obs), flush=True)


if __name__ == "__main__":
    scenarios = {"recycled-while-pinned": recycled_while_pinned,
                 "recycled-before-pin": recycled_before_pin,
                 "recycled-after-arrival": recycled_after_arrival,
                 "recycled-within-a-tick": recycled_within_a_tick,
                 "sharer-on-a-recycled-pid": sharer_on_a_recycled_pid}
    scenarios[sys.argv[1]](Inside())
