# SPDX-License-Identifier: MIT
"""--slurm-job on the command line, without Slurm or a daemon.

Usage errors exit 2, and a node without scontrol exits 1; in both cases
nothing is sent, which a socket nobody listens on proves (reaching for it
would exit 3).  Needs no root.
"""

import subprocess

import pytest

from slurmlib import btg

NOWHERE = "/nonexistent/btguard.sock"


def ctl(*args, env=None):
    if not btg.BTGUARDCTL.exists():
        pytest.fail(f"{btg.BTGUARDCTL} missing: run `make`")
    return subprocess.run([str(btg.BTGUARDCTL), "--socket", NOWHERE, *args],
                          capture_output=True, text=True, timeout=30, env=env)


@pytest.mark.parametrize("job", ["", "0", "-1", "x", "42.", "42.foo", "42.0.1", "42_1",
                                 "4294967295", "42 "])
def test_bad_job_ids_are_usage_errors(job):
    p = ctl("guard", f"--slurm-job={job}")
    assert p.returncode == 2 and "--slurm-job" in p.stderr, p


@pytest.mark.parametrize("args", [
    ["--slurm-job", "42", "--cgroup", "/a"],
    ["--cgroup", "/a", "--slurm-job", "42"],
    ["--unit", "x.service", "--slurm-job", "42"],
    ["--slurm-job", "42", "--slurm-job", "43"],
])
def test_one_cgroup_source(args):
    p = ctl("status", *args)
    assert p.returncode == 2 and "give one" in p.stderr, p


def test_not_with_pids():
    p = ctl("guard", "--slurm-job", "42", "1234")
    assert p.returncode == 2 and "not both" in p.stderr, p


def test_no_scontrol_here(tmp_path):
    p = ctl("guard", "--slurm-job", "42.batch", env={"PATH": str(tmp_path)})
    assert p.returncode == 1, p
    assert "cannot run scontrol" in p.stderr and "Slurm installed" in p.stderr, p


def test_scontrol_that_hangs_is_killed_at_the_timeout(tmp_path):
    fake = tmp_path / "scontrol"
    # exec: the PID btguardctl kills is the sleep itself, nothing is left.
    fake.write_text("#!/bin/sh\nexec sleep 60\n")
    fake.chmod(0o755)
    p = ctl("--timeout", "0.5", "guard", "--slurm-job", "42",
            env={"PATH": f"{tmp_path}:/usr/bin:/bin"})
    assert p.returncode == 1, p
    assert "did not answer within 0.5 s" in p.stderr and "nothing was sent" in p.stderr, p


@pytest.mark.parametrize("node,argv", [
    (None, "listpids 42"),
    ("btg1n2", "listpids 42 btg1n2"),   # as slurmstepd sets it for a task
    ("-x", "listpids 42"),              # would be an option to scontrol
    ("a b", "listpids 42"),             # not a node name
])
def test_scontrol_asks_about_the_tasks_own_node(tmp_path, node, argv):
    """Run as a Slurm task (srun ... btguardctl --slurm-job), btguardctl
    names its node to scontrol: where one host runs several slurmds,
    scontrol would otherwise show every task the first node's processes."""
    log = tmp_path / "argv"
    fake = tmp_path / "scontrol"
    fake.write_text(f'#!/bin/sh\necho "$*" > {log}\nexit 1\n')
    fake.chmod(0o755)
    env = {"PATH": f"{tmp_path}:/usr/bin:/bin"}
    if node is not None:
        env["SLURMD_NODENAME"] = node
    p = ctl("guard", "--slurm-job", "42", env=env)
    assert p.returncode == 1 and "nothing was sent" in p.stderr, p
    assert log.read_text().strip() == argv
