# SPDX-License-Identifier: MIT
"""The SPANK plugin against a real Slurm: every task guarded from its first
instruction.

The plugin (slurm/btguard_spank.c) comes from the btguard-slurm package,
extracted into the cluster's directory (slurmlib.deb_plugstack): its
snippet's `optional` line, with the arguments that point it at a
btguardd this test started, is this cluster's plugstack.conf.
In slurmstepd it runs `btguardctl guard --at-exec TASK` from
task_post_fork, before the task execs; the daemon follows the task
through its exec and guards it before the program's code runs.

  * `srun --btguard` of the torch + greenlet workload, which raises its
    torch errors inside greenlets at once (no pause): it finishes and
    prints its errors; the same `srun` without --btguard dies of SIGSEGV;
  * `sbatch --btguard` (the option registered in the allocator context)
    of a script that runs the workload as an srun step: the job completes,
    0:0, and the same job without the option fails.
"""

import os
import shutil
import subprocess

import pytest

import slurmlib
from slurmlib import btg

pytestmark = pytest.mark.skipif(os.geteuid() != 0,
                                reason="starts munged, slurmctld and slurmd: needs root")

OWNER = slurmlib.OWNER
WORKLOAD = slurmlib.REPO / "tests" / "workloads" / "torch_greenlet.py"
TORCH_LAST = "errors 40 ok"


@pytest.fixture(scope="module")
def cluster(users, daemon):
    line = slurmlib.deb_plugstack(f"btguardctl={btg.BTGUARDCTL}", f"socket={daemon.socket}",
                                  "timeout=30")
    yield from slurmlib.running_cluster("proctrack/cgroup", plugstack=line)


def workload(cluster):
    dst = cluster.root / "jobs" / WORKLOAD.name
    if not dst.exists():
        shutil.copy(WORKLOAD, dst)
        os.chmod(dst, 0o644)
    return dst


def srun(cluster, users, *args):
    argv = btg.user_prefix(users[OWNER]) + ["srun", "-n1", f"--chdir={cluster.root / 'jobs'}",
                                            *args]
    return subprocess.run(argv, env=cluster.env, capture_output=True, text=True,
                          timeout=slurmlib.RUN_TIMEOUT)


def test_srun_btguard_survives_and_srun_without_crashes(cluster, users):
    w = workload(cluster)
    p = srun(cluster, users, "--btguard", "/usr/bin/python3", str(w))
    assert p.returncode == 0, (p, cluster.logs())
    assert p.stdout.splitlines()[-1:] == [TORCH_LAST], p
    p = srun(cluster, users, "/usr/bin/python3", str(w))
    assert p.returncode != 0, p
    assert "Segmentation fault" in p.stderr or p.returncode in (139, -11), p


def test_sbatch_btguard_guards_the_job_steps(cluster, users):
    """The option given to sbatch holds for the job's steps: the workload
    runs as an srun step, as batch jobs run their real work.  (The batch
    script itself is guarded at its exec, but a program it execs later is
    a new image: run it with srun, or let the policy guard it.)"""
    script = f"#!/bin/sh\nexec srun /usr/bin/python3 {workload(cluster)}\n"
    guarded, out = cluster.sbatch(script, user=users[OWNER], options=["--btguard"])
    plain, _ = cluster.sbatch(script, user=users[OWNER])
    fields = cluster.wait_done(guarded)
    text = out.read_text()
    assert (fields["JobState"], fields["ExitCode"]) == ("COMPLETED", "0:0"), (fields, text)
    assert text.splitlines()[-1:] == [TORCH_LAST], text
    fields = cluster.wait_done(plain)
    assert fields["JobState"] == "FAILED", fields
