# SPDX-License-Identifier: MIT
"""The pytest suites' fixtures: a running daemon (`daemon`), victims
killed at teardown by PID (`victim`), an unprivileged user (`test_user`),
and a throttled cpu cgroup (`throttled_cgroup`).

The helpers live in integration/btg/, one module per subject, and a test
imports each by name from its module (`from btg.daemon import
running_daemon`), so it says where a helper lives; fixtures are found by
pytest, never imported.  Both serve every folder under tests/: pytest.ini
beside this file makes tests/ the rootdir and puts integration/ on the
import path.
"""

import os
import shutil

import pytest

from btg.daemon import running_daemon
from btg.paths import CPU_CGROUP_V1, VICTIMS
from btg.users import system_user
from btg.victims import GREENLET_SO, TEST_USER, VictimFactory


@pytest.fixture
def throttled_cgroup():
    """A v1 cpu cgroup allowed 1 ms of CPU per second: a spinning thread
    moved there runs for 1 ms, then waits up to a second to run again,
    and a ptrace interrupt cannot stop it before it runs."""
    if not os.path.exists(os.path.join(CPU_CGROUP_V1, "cpu.cfs_quota_us")):
        pytest.skip("no cgroup v1 cpu controller to throttle a thread with")
    path = os.path.join(CPU_CGROUP_V1, f"btguard-test-{os.getpid()}")
    os.mkdir(path)
    try:
        with open(os.path.join(path, "cpu.cfs_period_us"), "w") as f:
            f.write("1000000")
        with open(os.path.join(path, "cpu.cfs_quota_us"), "w") as f:
            f.write("1000")
        yield path
    finally:
        # Whatever is left goes back to the root group, then the group goes.
        with open(os.path.join(path, "tasks")) as f:
            left = f.read().split()
        for tid in left:
            try:
                with open(os.path.join(CPU_CGROUP_V1, "tasks"), "w") as f:
                    f.write(tid)
            except OSError:
                pass
        os.rmdir(path)


@pytest.fixture
def fake_torch(tmp_path):
    """Paths that look like torch's c10 and greenlet's extension, copies of
    an empty library: preloaded, they make a small victim at risk."""
    lib = tmp_path / "site-packages"
    c10 = lib / "torch" / "lib" / "libc10.so"
    greenlet = lib / "greenlet" / GREENLET_SO
    for p in (c10, greenlet):
        p.parent.mkdir(parents=True)
        shutil.copy(VICTIMS / "libempty", p)
    os.chmod(tmp_path, 0o755)
    return c10, greenlet


@pytest.fixture
def victim():
    factory = VictimFactory()
    try:
        yield factory
    finally:
        factory.cleanup()


@pytest.fixture(scope="session")
def test_user():
    """(uid, gid) of an unprivileged user; created only if missing, and then
    deleted again at the end.  Other users are never touched."""
    with system_user(TEST_USER) as ids:
        yield ids


@pytest.fixture
def daemon():
    with running_daemon() as d:
        yield d
