# SPDX-License-Identifier: MIT
"""The README's way to guard a running job on every node, on three nodes.

Debian's Slurm is built with multiple-slurmd support, so this machine runs
a cluster of three nodes, each a slurmd of its own (slurmlib.py:
NodeName=, Port=, spool, log per node).  An sbatch job of three nodes runs
the torch + greenlet workload as one srun task per node, each paused
before its first torch error; then, as the job's owner,

    srun --jobid=J --overlap --ntasks-per-node=1 -N3 btguardctl guard --slurm-job J

runs btguardctl once on each node.  Each copy must find its own node's
task (scontrol listpids for that node: btguardctl names it from
SLURMD_NODENAME, or every copy would be shown the first node's) and have
it guarded; released, every task survives its 40 torch errors and the job
completes, 0:0.  All three nodes share this machine's one btguardd: what
is tested is that the srun line reaches every node's tasks.  (The same
workload unguarded dies of SIGSEGV: test_slurm.py.)
"""

import json
import os
import shutil
import subprocess
from pathlib import Path

import pytest

import slurmlib
from slurmlib import btg

pytestmark = pytest.mark.skipif(os.geteuid() != 0,
                                reason="starts munged, slurmctld and slurmds: needs root")

OWNER = slurmlib.OWNER
NODES = 3
WORKLOAD = slurmlib.REPO / "tests" / "workloads" / "torch_greenlet.py"
# The workload's defaults: 2 modes x 4 tasks x 5 rounds (test_crash.py).
TORCH_LAST = "errors 40 ok"


@pytest.fixture(scope="module")
def cluster(users):
    yield from slurmlib.running_cluster("proctrack/cgroup", nodes=NODES)


@pytest.fixture(scope="module")
def daemon(cluster):
    with btg.running_daemon() as d:
        yield d


def labelled(text):
    """srun --label's lines as {task rank: [lines]}."""
    out = {}
    for line in text.splitlines():
        rank, sep, rest = line.partition(": ")
        if sep and rank.strip().isdigit():
            out.setdefault(int(rank), []).append(rest)
    return out


def test_srun_overlap_guards_the_tasks_on_every_node(cluster, daemon, users):
    jobs = cluster.root / "jobs"
    workload = jobs / WORKLOAD.name
    shutil.copy(WORKLOAD, workload)
    os.chmod(workload, 0o644)
    pause = jobs / "go-multinode"
    job, out = cluster.sbatch(
        f"#!/bin/sh\nexec srun --label /usr/bin/python3 {workload} --pause-file {pause}\n",
        user=users[OWNER], options=[f"-N{NODES}", f"-n{NODES}", "--ntasks-per-node=1"])

    def paused():
        try:
            lines = labelled(out.read_text(errors="replace"))
        except FileNotFoundError:
            return False
        return all("paused" in lines.get(rank, []) for rank in range(NODES))
    slurmlib._wait(paused, f"the {NODES} tasks to pause", slurmlib.PAUSE_TIMEOUT, cluster.alive,
                   lambda: f"job output: {out.read_text(errors='replace')!r}\n{cluster.logs()}")
    fields = cluster.show_job(job)
    assert fields["NumNodes"] == str(NODES), fields
    # Step 0's task (python) on each node, as that node's slurmd lists it.
    tasks = {node: cluster.listpids(job, step="0", node=node) for node in cluster.nodes}
    assert all(len(pids) == 1 for pids in tasks.values()), tasks
    before = daemon.ctl("status", *[p for pids in tasks.values() for p in pids], check=4).results
    assert all(r["state"] == "unguarded" and r["risk"] == "at-risk" for r in before), before

    ctl = daemon.client_path(users[OWNER])   # a copy any user can run
    line = (f'runuser -u "$(squeue -h -j {job} -o %u)" -- srun --jobid={job} --overlap '
            f'--ntasks-per-node=1 -N{NODES} --label '
            f'{ctl} --socket {daemon.socket} --json guard --slurm-job {job}')
    p = subprocess.run(["sh", "-c", line], env=cluster.env, capture_output=True, text=True,
                       timeout=slurmlib.RUN_TIMEOUT)
    assert p.returncode == 0, (p, cluster.logs())
    results = {rank: [json.loads(x) for x in lines]
               for rank, lines in labelled(p.stdout).items()}
    assert sorted(results) == list(range(NODES)), p.stdout
    # Each node's task was guarded by the btguardctl that ran on that node:
    # one srun task per node, each reporting that node's task and no other.
    reached = {node: [rank for rank, rs in results.items()
                      if pids[0] in {r["pid"] for r in rs}]
               for node, pids in tasks.items()}
    assert all(len(ranks) == 1 for ranks in reached.values()), (reached, p.stdout)
    assert len({ranks[0] for ranks in reached.values()}) == NODES, (reached, p.stdout)
    assert all(r["ok"] and r["state"] == "guarded" and r["uid"] == users[OWNER][0]
               for rs in results.values() for r in rs), p.stdout
    after = daemon.ctl("status", *[p for pids in tasks.values() for p in pids],
                       check=0).results
    assert all(r["state"] == "guarded" for r in after), after

    Path(pause).touch()
    fields = cluster.wait_done(job)
    text = out.read_text()
    assert (fields["JobState"], fields["ExitCode"]) == ("COMPLETED", "0:0"), (fields, text)
    lines = labelled(text)
    assert all(lines.get(rank, [])[-1:] == [TORCH_LAST] for rank in range(NODES)), text
