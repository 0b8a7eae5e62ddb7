# SPDX-License-Identifier: MIT
"""A process as /proc shows it: state, tracer, threads, memory, mappings;
every wait bounded.
"""

import os
import time

import pytest

from .paths import REPORT_TIMEOUT, SETTLE_TIMEOUT


def _status_fields(path):
    fields = {}
    with open(path) as f:
        for line in f:
            key, _, value = line.partition(":")
            fields[key] = value.strip()
    return fields


def proc_state(pid):
    """State letter of /proc/PID/status ("R", "S", "t", "Z", ...) or None."""
    try:
        return _status_fields(f"/proc/{pid}/status")["State"].split()[0]
    except (FileNotFoundError, ProcessLookupError, KeyError):
        return None


def process_alive(pid):
    """True while any task of PID runs.  Its main thread alone may be a
    zombie: pthread_exit() in main leaves the other threads running."""
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except FileNotFoundError:
        return False
    for tid in tids:
        try:
            state = _status_fields(f"/proc/{pid}/task/{tid}/status")["State"].split()[0]
        except (FileNotFoundError, ProcessLookupError, KeyError):
            continue
        if state not in ("Z", "X"):
            return True
    return False


def tracer_pid(pid):
    """TracerPid of /proc/PID/status, or None when the process is gone."""
    try:
        return int(_status_fields(f"/proc/{pid}/status")["TracerPid"])
    except (FileNotFoundError, ProcessLookupError, KeyError):
        return None


def thread_problems(pid):
    """Every task of PID that is stopped or traced, as readable strings.

    A victim never stops itself, so any "t" (ptrace stop) or "T" (job
    control stop) task, or any non-zero TracerPid, is something the daemon
    left behind.  Tasks that exit while we look are ignored; a vanished
    process is a problem of its own.
    """
    try:
        tids = os.listdir(f"/proc/{pid}/task")
    except FileNotFoundError:
        return [f"process {pid} is gone"]
    problems = []
    for tid in tids:
        try:
            st = _status_fields(f"/proc/{pid}/task/{tid}/status")
        except (FileNotFoundError, ProcessLookupError):
            continue
        state = st.get("State", "?").split()[0]
        tracer = int(st.get("TracerPid", "0"))
        if state in ("t", "T") or tracer != 0:
            problems.append(f"tid {tid} state {state} TracerPid {tracer}")
    return problems


def all_threads_running(pid):
    """True when no task of PID is stopped or traced."""
    return not thread_problems(pid)


def wait_threads_running(pid, timeout=SETTLE_TIMEOUT):
    """Asserts that every task of PID is (or within `timeout` becomes) free."""
    deadline = time.monotonic() + timeout
    while True:
        problems = thread_problems(pid)
        if not problems:
            return
        if time.monotonic() > deadline:
            pytest.fail(f"threads of {pid} left stopped/traced: {problems}")
        time.sleep(0.05)


def read_mem(pid, address, length):
    with open(f"/proc/{pid}/mem", "rb", buffering=0) as f:
        f.seek(address)
        return f.read(length)


def write_mem(pid, address, data):
    """Writes into a running process (root may write /proc/PID/mem)."""
    with open(f"/proc/{pid}/mem", "r+b", buffering=0) as f:
        f.seek(address)
        assert f.write(data) == len(data)


def unused_pid():
    """A PID that currently names no process (checked, not guessed)."""
    with open("/proc/sys/kernel/pid_max") as f:
        pid_max = int(f.read())
    for pid in range(pid_max - 1, pid_max - 1000, -1):
        if not os.path.exists(f"/proc/{pid}"):
            return pid
    pytest.skip("no free PID found near pid_max")


def kernel_thread_pid():
    """A visible kernel thread: PID 2 (kthreadd) or any PF_KTHREAD task."""
    try:
        with open("/proc/2/comm") as f:
            if f.read().strip() == "kthreadd":
                return 2
    except FileNotFoundError:
        pass
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                stat_line = f.read()
        except (FileNotFoundError, ProcessLookupError):
            continue
        fields = stat_line.rsplit(")", 1)[1].split()
        if int(fields[6]) & 0x00200000:   # PF_KTHREAD
            return int(entry)
    return None


def own_mapping(suffix):
    """Path of the object ending with suffix mapped by this very process
    (python links the same libc and dynamic loader as the victims)."""
    with open("/proc/self/maps") as f:
        for line in f:
            parts = line.split(None, 5)
            if len(parts) == 6 and parts[5].strip().endswith(suffix):
                return parts[5].strip()
    pytest.skip(f"{suffix} is not mapped in the test process")


def mapped_paths(pid):
    """Every path mapped executable by pid, as /proc/PID/maps spells it."""
    out = set()
    with open(f"/proc/{pid}/maps") as f:
        for line in f:
            parts = line.split(None, 5)
            if len(parts) == 6 and "x" in parts[1]:
                out.add(parts[5].strip())
    return out


def task_states(pid):
    """{tid: (state letter, TracerPid)} of every task of pid."""
    out = {}
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/status") as f:
                st = dict(line.rstrip("\n").split(":\t", 1) for line in f if ":\t" in line)
        except (FileNotFoundError, ProcessLookupError):
            continue
        out[int(tid)] = (st["State"].split()[0], int(st["TracerPid"]))
    return out


def wait_for(pred, what, timeout=REPORT_TIMEOUT):
    deadline = time.monotonic() + timeout
    while not pred():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.02)


def d_threads(pid):
    """TIDs of pid's threads in uninterruptible sleep ("D")."""
    out = []
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            with open(f"/proc/{pid}/task/{tid}/stat") as f:
                if f.read().rsplit(")", 1)[1].split()[0] == "D":
                    out.append(int(tid))
        except FileNotFoundError:
            pass
    return out


def renice_threads(pid, nice=19):
    """Lowers every thread of pid (niceness is per thread on Linux).  A
    32-thread busy loop on a 2-core machine otherwise starves the daemon
    and the test of CPU, and rounds take seconds instead of milliseconds;
    the victim still hammers backtrace() on every idle cycle."""
    for tid in os.listdir(f"/proc/{pid}/task"):
        try:
            os.setpriority(os.PRIO_PROCESS, int(tid), nice)
        except ProcessLookupError:
            pass


def vm_rss_kib(pid):
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    raise AssertionError(f"no VmRSS for {pid}")


def open_fds(pid):
    return len(os.listdir(f"/proc/{pid}/fd"))


def maps_mention(pid, name):
    with open(f"/proc/{pid}/maps") as f:
        return name in f.read()


def is_sanitized(pid):
    """True when the process runs with AddressSanitizer, whose quarantine
    and shadow memory make RSS grow by design (leaks are LSan's job)."""
    return maps_mention(pid, "libasan")
