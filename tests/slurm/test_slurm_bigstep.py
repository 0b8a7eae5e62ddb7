# SPDX-License-Identifier: MIT
"""The SPANK plugin on one large step: every task guarded from its first
instruction, however many tasks the node runs.

slurmstepd runs task_post_fork for every task of a step before it lets
any of them exec, one after another: the first task's follow must last
until the last task has been armed and the step released, and the daemon
must follow them all at once.  One `srun` of TASKS tasks of first_line on
the one node (oversubscribed, -O): each task prints how many frames its
first backtrace() saw, and every one must print 0.  A task the plugin
could not guard would print a positive count (and slurmd's log says why).
"""

import os
import shutil
import subprocess
import time

import pytest

import slurmlib
from slurmlib import btg

pytestmark = pytest.mark.skipif(os.geteuid() != 0,
                                reason="starts munged, slurmctld and slurmd: needs root")

OWNER = slurmlib.OWNER
TASKS = 128


@pytest.fixture(scope="module")
def cluster(users, daemon):
    # The plugin's defaults: its follow must not need a longer timeout= for a big step.
    line = slurmlib.deb_plugstack(f"btguardctl={btg.BTGUARDCTL}", f"socket={daemon.socket}")
    yield from slurmlib.running_cluster("proctrack/linuxproc", plugstack=line)


def test_every_task_of_a_large_step_starts_guarded(cluster, users):
    victim = cluster.root / "jobs" / "first_line"
    shutil.copy(btg.victim_path("first_line"), victim)
    os.chmod(victim, 0o755)
    argv = btg.user_prefix(users[OWNER]) + [
        "srun", "--btguard", f"-n{TASKS}", "-O", "--label",
        f"--chdir={cluster.root / 'jobs'}", str(victim)]
    t0 = time.monotonic()
    p = subprocess.run(argv, env=cluster.env, capture_output=True, text=True,
                       timeout=slurmlib.RUN_TIMEOUT)
    took = time.monotonic() - t0
    print(f"srun of {TASKS} tasks took {took:.1f} s")
    assert p.returncode == 0, (p, cluster.logs())
    counts = {}
    for line in p.stdout.splitlines():
        task, _, n = line.partition(":")
        counts[int(task)] = int(n)
    assert sorted(counts) == list(range(TASKS)), (p.stdout, cluster.logs())
    unguarded = sorted(t for t, n in counts.items() if n != 0)
    # What the plugin logged, in slurmstepd's log or the step's error output: each task
    # whose arming failed.  (A follow that ends later, unguarded, shows as a count above.)
    slurmd_log = cluster.slurmd_log()
    said = [line for line in (p.stderr + slurmd_log.read_text(errors="replace")).splitlines()
            if "btguard:" in line and "unguarded" in line]
    assert not unguarded, (f"{len(unguarded)} of {TASKS} tasks started unguarded "
                           f"({took:.1f} s): {unguarded}\nthe plugin said:\n"
                           + "\n".join(said[:20]) + f"\n{cluster.logs()}")
    assert not said, said
