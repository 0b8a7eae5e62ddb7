# SPDX-License-Identifier: MIT
"""--slurm-job where Slurm tracks jobs without a cgroup: proctrack/linuxproc.

There the job's processes sit in slurmd's own cgroup, so no job_J path
exists to select; btguardctl sends the PIDs `scontrol listpids` printed
instead (client/slurm.c says why).  A cheap job (sleep) is enough: what
is tested is which processes are named, and by whom.
"""

import os
from pathlib import Path

import pytest

import slurmlib
from slurmlib import btg

pytestmark = pytest.mark.skipif(os.geteuid() != 0,
                                reason="starts munged, slurmctld and slurmd: needs root")

OWNER, OTHER = slurmlib.OWNER, slurmlib.OTHER


@pytest.fixture(scope="module")
def cluster(users):
    yield from slurmlib.running_cluster("proctrack/linuxproc")


@pytest.fixture(scope="module")
def daemon(cluster):
    with btg.running_daemon() as d:
        yield d


def test_no_job_cgroup_guards_the_listed_pids(cluster, daemon, users):
    job, _ = cluster.sbatch("#!/bin/sh\nsleep 300\nexit 0\n", user=users[OWNER])
    cluster.wait_running(job)
    pids = cluster.listpids(job)
    assert len(pids) == 2, pids          # the batch shell and its sleep
    for pid in pids:
        assert f"job_{job}" not in Path(f"/proc/{pid}/cgroup").read_text()

    # Another user is named the same PIDs, and the daemon refuses them.
    r = daemon.ctl("guard", "--slurm-job", job, user=users[OTHER], check=1)
    assert sorted(x["pid"] for x in r.results) == sorted(pids), r
    assert all(x["error"] in ("denied", "no-process") for x in r.results), r
    r = daemon.ctl("status", *pids, check=0)
    assert [x["state"] for x in r.results] == ["unguarded"] * len(pids), r

    r = daemon.ctl("--verbose", "guard", "--slurm-job", job, check=0)
    assert sorted(x["pid"] for x in r.results) == sorted(pids), r
    assert all(x["ok"] and x["state"] == "guarded" for x in r.results), r
    assert "has no cgroup on this node" in r.stderr, r
    r = daemon.ctl("status", "--slurm-job", f"{job}.batch", check=0)
    assert [x["state"] for x in r.results] == ["guarded"] * len(pids), r

    # Other selectors cannot narrow a list of PIDs: refused, nothing sent.
    r = daemon.ctl("status", "--slurm-job", job, "--user", OWNER, check=1)
    assert r.results == [] and "nothing was sent" in r.stderr, r
