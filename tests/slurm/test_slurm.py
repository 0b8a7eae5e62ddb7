# SPDX-License-Identifier: MIT
"""--slurm-job against a real Slurm: proctrack/cgroup, cgroup v1.

One node on localhost (slurmlib.py), jobs submitted with sbatch by an
ordinary user, the job's processes found by `btguardctl --slurm-job`
through `scontrol listpids` and the job's freezer cgroup
(/slurm_<node>/uid_N/job_J/step_S), acted on by a btguardd this test
started on its own socket:

  * the torch + greenlet workload, paused, guarded as root, released:
    it finishes and prints its errors (job exit 0:0); the same job left
    unguarded dies of SIGSEGV (Slurm records 0:11);
  * a third user cannot guard the owner's job, by --slurm-job, by its
    cgroup or by PID, and root sees it still unguarded;
  * the README's `srun --jobid --overlap ... guard --slurm-job`, run as
    the job's owner (Slurm lets no one else add a step to a job);
  * a job with no process on this node: status 1, nothing sent.
"""

import json
import os
import shutil
from pathlib import Path

import pytest

import slurmlib
from slurmlib import btg

pytestmark = pytest.mark.skipif(os.geteuid() != 0,
                                reason="starts munged, slurmctld and slurmd: needs root")

OWNER, OTHER = slurmlib.OWNER, slurmlib.OTHER
WORKLOAD = slurmlib.REPO / "tests" / "workloads" / "torch_greenlet.py"
# 2 modes x 4 tasks x 5 rounds, the workload's defaults (see test_crash.py).
# The plugin guards with the empty stub: no C++ frame in any message.
TORCH_OUT = ["paused",
             "first RuntimeError: mat1 and mat2 shapes cannot be multiplied (2x3 and 4x5)",
             "cpp frames 0 0",
             "errors 40 ok"]


@pytest.fixture(scope="module")
def cluster(users):
    yield from slurmlib.running_cluster("proctrack/cgroup")


@pytest.fixture(scope="module")
def daemon(cluster):
    with btg.running_daemon() as d:
        yield d


class TorchJob:
    """The workload as an sbatch job, paused before its first torch error."""

    def __init__(self, cluster, user):
        self.cluster = cluster
        jobs = cluster.root / "jobs"
        workload = jobs / WORKLOAD.name
        if not workload.exists():
            shutil.copy(WORKLOAD, workload)   # readable by the job's user
            os.chmod(workload, 0o644)
        self.pause = jobs / f"go-{len(cluster.jobs)}"
        # exec: the batch step is python itself, so Slurm records its
        # death (ExitCode 0:11) rather than a shell's status.
        self.id, self.out = cluster.sbatch(
            f"#!/bin/sh\nexec /usr/bin/python3 {workload} --pause-file {self.pause}\n",
            user=user)
        cluster.wait_output(self.out, "paused\n")
        self.pids = cluster.listpids(self.id)
        assert self.pids, f"scontrol lists no process of job {self.id}"

    def release(self):
        """Lets it run; returns (scontrol fields after it ended, its output)."""
        Path(self.pause).touch()
        fields = self.cluster.wait_done(self.id)
        return fields, self.out.read_text()


def freezer_cgroup(pid):
    for line in Path(f"/proc/{pid}/cgroup").read_text().splitlines():
        _, controllers, path = line.split(":", 2)
        if controllers == "freezer":
            return path
    return None


def by_pid(results):
    return {r["pid"]: r for r in results}


def test_guarded_job_survives(cluster, daemon, users):
    job = TorchJob(cluster, users[OWNER])
    # The tasks of the batch step sit in the v1 freezer hierarchy.
    node, uid = cluster.node, users[OWNER][0]
    assert freezer_cgroup(job.pids[0]) == f"/slurm_{node}/uid_{uid}/job_{job.id}/step_batch"

    before = daemon.ctl("status", "--slurm-job", f"{job.id}.batch", check=4).results
    assert {r["pid"] for r in before} == set(job.pids), before
    assert all(r["state"] == "unguarded" and r["risk"] == "at-risk" for r in before), before

    res = by_pid(daemon.ctl("guard", "--slurm-job", job.id, check=0).results)
    # The whole job: its tasks, and the slurmstepd Slurm keeps in job_J.
    assert set(job.pids) <= set(res), res
    assert all(r["ok"] and r["state"] == "guarded" for r in res.values()), res
    assert all(res[p]["wrote"] for p in job.pids), res

    after = daemon.ctl("status", "--slurm-job", f"{job.id}.batch", check=0).results
    assert all(r["state"] == "guarded" and r["risk"] == "covered" for r in after), after
    for pid in job.pids:
        btg.wait_threads_running(pid)

    fields, out = job.release()
    assert (fields["JobState"], fields["ExitCode"]) == ("COMPLETED", "0:0"), (fields, out)
    assert out.splitlines() == TORCH_OUT, out


def test_unguarded_job_dies_and_a_third_user_cannot_guard_it(cluster, daemon, users):
    job = TorchJob(cluster, users[OWNER])
    other = users[OTHER]
    node, uid = cluster.node, users[OWNER][0]
    cgroup = f"/slurm_{node}/uid_{uid}/job_{job.id}"

    # Slurm lists the job to anyone; the daemon selects only the caller's.
    r = daemon.ctl("guard", "--slurm-job", job.id, user=other)
    assert r.rc in (0, 1) and r.results == [], r
    r = daemon.ctl("guard", "--cgroup", cgroup, user=other)
    assert r.rc == 0 and r.results == [], r
    r = daemon.ctl("guard", *job.pids, user=other, check=1)
    assert all(x["error"] in ("denied", "no-process") for x in r.results), r

    still = daemon.ctl("status", "--slurm-job", job.id, check=4).results
    tasks = [x for x in still if x["pid"] in job.pids]
    assert len(tasks) == len(job.pids), still
    assert all(x["state"] == "unguarded" and x["risk"] == "at-risk" for x in tasks), still

    fields, out = job.release()
    assert (fields["JobState"], fields["ExitCode"]) == ("FAILED", "0:11"), (fields, out)
    assert "errors" not in out, out


def test_srun_overlap_guards_a_running_job(cluster, daemon, users):
    """The README's way to guard a job on all its nodes, here one.  Only
    the job's owner may add a step to it (root is refused), so root runs
    srun as the owner (runuser), who may guard its own processes."""
    job, _ = cluster.sbatch("#!/bin/sh\nexec sleep 300\n", user=users[OWNER])
    cluster.wait_running(job)
    ctl = daemon.client_path(users[OWNER])   # a copy any user can run
    sleep = cluster.listpids(job)
    # As the README writes it, with this test's socket and --json.
    line = (f'runuser -u "$(squeue -h -j {job} -o %u)" -- srun --jobid={job} --overlap '
            f'--ntasks-per-node=1 {ctl} --socket {daemon.socket} --json guard --slurm-job {job}')
    p = btg.subprocess.run(["sh", "-c", line], env=cluster.env, capture_output=True, text=True,
                           timeout=slurmlib.RUN_TIMEOUT)
    assert p.returncode == 0, p
    # The job's tasks; not the root-owned slurmstepds: the owner may not
    # act on those.
    res = by_pid(json.loads(line) for line in p.stdout.splitlines())
    assert set(sleep) <= set(res), (sleep, p.stdout)
    assert all(r["ok"] and r["state"] == "guarded" and r["uid"] == users[OWNER][0]
               for r in res.values()), p.stdout
    res = daemon.ctl("status", "--slurm-job", f"{job}.batch", check=0).results
    assert [r["state"] for r in res] == ["guarded"], res
    assert [r["pid"] for r in res] == cluster.listpids(job, step="batch"), res


def test_job_without_processes_here_sends_nothing(cluster, daemon, users):
    job, _ = cluster.sbatch("#!/bin/sh\ntrue\n", user=users[OWNER])
    cluster.wait_done(job)
    # A socket nobody listens on: reaching it would fail with status 3.
    for sel in (str(job), f"{job}.batch", "999999"):
        p = btg.subprocess.run([str(btg.BTGUARDCTL), "--socket", "/nonexistent/btguard.sock",
                                "guard", "--slurm-job", sel], capture_output=True, text=True,
                               env=cluster.env, timeout=60)
        assert p.returncode == 1, p
        assert "has no processes on this node" in p.stderr and "nothing was sent" in p.stderr, p
