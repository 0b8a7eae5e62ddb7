# SPDX-License-Identifier: MIT
"""A real Slurm on localhost, for the --slurm-job tests.

This file owns starting and stopping a cluster from Debian's slurm-wlm
and munge: munged on its own key and socket, slurmctld and one slurmd per
node (proctrack/cgroup with CgroupPlugin=cgroup/v1, or
proctrack/linuxproc), all configured, stateful and logging under one
temporary directory: the jobs' users must reach it, and a checkout's
path may not let them.  Its configuration and logs are kept afterwards
in BTGUARD_SLURM_DIR (else build/slurm-test).  Nothing is written to
/etc: Slurm finds its configuration through SLURM_CONF and munge through
AuthInfo=socket=..., clients through the same SLURM_CONF.

Several nodes run on this one machine: Debian's Slurm is built with
multiple-slurmd support, so each node is a slurmd of its own (`slurmd -N
NAME`), with its own NodeName=, Port=, spool directory, PID and log file
(%n in slurm.conf), all at 127.0.0.1.

The SPANK plugin comes from the btguard-slurm package (deb_plugstack()):
extracted with `dpkg-deb -x` into the cluster's temporary directory, and
plugstack.conf names the files there, so the package's own plugin and
snippet are what Slurm loads, and nothing is installed on this machine.

Teardown cancels the jobs the test submitted, stops exactly the daemons
it started (by PID), and removes the Slurm cgroups it caused (only the
empty directories that did not exist before).  Every wait is bounded.
"""

import os
import pwd
import resource
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import types
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(REPO / "tests" / "integration"))

# The integration tests' helpers, under one name (this directory has a
# conftest.py of its own, so theirs cannot be imported by that name).
from btg import daemon as _daemon, paths as _paths, procfs as _procfs, victims as _victims  # noqa: E402

btg = types.SimpleNamespace(**{k: v for m in (_paths, _procfs, _victims, _daemon)
                               for k, v in vars(m).items() if not k.startswith("__")})

OWNER = "btguard-slurm-owner"     # submits the jobs
OTHER = "btguard-slurm-other"     # a third user, neither owner nor root
DIR = Path(os.environ.get("BTGUARD_SLURM_DIR", REPO / "build" / "slurm-test"))
START_TIMEOUT = 60.0
STOP_TIMEOUT = 30.0
# Importing torch on a loaded 2-core machine can take a while.
PAUSE_TIMEOUT = 90.0
RUN_TIMEOUT = 120.0
CGROUP_ROOT = Path("/sys/fs/cgroup")


def free_port():
    """A TCP port on localhost that nothing listens on right now."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _wait(pred, what, timeout, alive=None, detail=None):
    """Polls pred until true; fails naming what, with detail() if given."""
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if alive:
            alive()
        if pred():
            return
        time.sleep(0.1)
    pytest.fail(f"timed out after {timeout:.0f} s waiting for {what}"
                + (f"\n{detail()}" if detail else ""))


class Cluster:
    """munged, slurmctld and slurmd, started under `root` (a directory)."""

    def __init__(self, root, proctrack, plugstack=None, nodes=1):
        self.root = Path(root)
        self.proctrack = proctrack
        # A plugstack.conf line, a function of the cluster's directory
        # returning one (deb_plugstack), or None.
        self.plugstack = plugstack
        self.host = socket.gethostname().split(".")[0]
        # Node names of this run's own: Slurm's v1 cgroups are named after
        # them (/slurm_<node>/...), so two runs on one machine never share one.
        base = f"btg{os.getpid()}"
        self.nodes = [base] if nodes == 1 else [f"{base}n{i}" for i in range(nodes)]
        self.node = self.nodes[0]
        self.procs = {}
        self.jobs = []
        # World-readable and traversable: the test users submit jobs, read
        # slurm.conf and reach munged's socket.
        for sub in ("etc", "munge", "state", "spool", "log", "jobs"):
            (self.root / sub).mkdir(parents=True, exist_ok=True)
            os.chmod(self.root / sub, 0o755)
        os.chmod(self.root, 0o755)
        os.chmod(self.root / "jobs", 0o1777)   # job scripts and output of any user
        self.conf = self.root / "etc" / "slurm.conf"
        self.munge_socket = self.root / "munge" / "munge.socket"
        self.env = {**os.environ, "SLURM_CONF": str(self.conf)}
        # Cgroups Slurm will make that were not there before, removed at the end.
        self.cgroups_before = set(self._slurm_cgroups())

    # ------------------------------------------------------------ config --

    def write_config(self):
        r = self.root
        lines = [
            "ClusterName=btguard",
            f"SlurmctldHost={self.host}(127.0.0.1)",
            f"SlurmctldPort={free_port()}",
            f"SlurmdPort={free_port()}",
            "SlurmUser=root",
            "SlurmdUser=root",
            "AuthType=auth/munge",
            "CredType=cred/munge",
            # Slurm's munge plugins talk to our munged, not /run/munge.
            f"AuthInfo=socket={self.munge_socket}",
            f"StateSaveLocation={r}/state",
            # %n: the node's name, one of each per slurmd.
            f"SlurmdSpoolDir={r}/spool/%n",
            f"SlurmctldPidFile={r}/slurmctld.pid",
            f"SlurmdPidFile={r}/slurmd-%n.pid",
            f"SlurmctldLogFile={r}/log/slurmctld.log",
            f"SlurmdLogFile={r}/log/slurmd-%n.log",
            "MailProg=/bin/true",
            f"ProctrackType={self.proctrack}",
            # Only proctrack makes cgroups: no task/cgroup, no accounting.
            "TaskPlugin=task/none",
            "JobAcctGatherType=jobacct_gather/none",
            "AccountingStorageType=accounting_storage/none",
            "JobCompType=jobcomp/none",
            "MpiDefault=none",
            "SwitchType=switch/none",
            "SchedulerType=sched/builtin",
            "SelectType=select/cons_tres",
            "SelectTypeParameters=CR_CPU",
            "ReturnToService=2",
            # Finished jobs stay visible to `scontrol show job` for the test.
            "MinJobAge=600",
            *(f"NodeName={node} NodeHostname={self.host} NodeAddr=127.0.0.1 "
              f"Port={free_port()} CPUs=2 State=UNKNOWN" for node in self.nodes),
            f"PartitionName=test Nodes={','.join(self.nodes)} Default=YES MaxTime=INFINITE "
            "State=UP",
        ]
        if self.plugstack:
            line = self.plugstack(r) if callable(self.plugstack) else self.plugstack
            (r / "etc" / "plugstack.conf").write_text(line + "\n")
            os.chmod(r / "etc" / "plugstack.conf", 0o644)
            lines.append(f"PlugStackConfig={r}/etc/plugstack.conf")
        self.conf.write_text("\n".join(lines) + "\n")
        # slurmd reads cgroup.conf beside slurm.conf.  The host is hybrid
        # (v1 controllers, v2 at /sys/fs/cgroup/unified): v1 it is.
        (self.root / "etc" / "cgroup.conf").write_text(
            "CgroupPlugin=cgroup/v1\nCgroupAutomount=no\n"
            f"CgroupMountpoint={CGROUP_ROOT}\n")
        for f in ("slurm.conf", "cgroup.conf"):
            os.chmod(self.root / "etc" / f, 0o644)

    # ------------------------------------------------------------ daemons --

    def _start(self, name, argv):
        log = open(self.root / "log" / f"{name}.out", "wb")
        self.procs[name] = (subprocess.Popen(argv, stdin=subprocess.DEVNULL, stdout=log,
                                             stderr=subprocess.STDOUT, env=self.env), log)

    def alive(self):
        for name, (proc, _) in self.procs.items():
            if proc.poll() is not None:
                pytest.fail(f"{name} exited with {proc.returncode}:\n{self.logs()}")

    def logs(self):
        out = []
        for f in sorted((self.root / "log").iterdir()):
            out.append(f"---- {f.name} ----\n" + "\n".join(
                f.read_text(errors="replace").splitlines()[-30:]))
        return "\n".join(out)

    def start(self):
        self.write_config()
        m = self.root / "munge"
        key = m / "munge.key"
        subprocess.run(["mungekey", "--create", "--force", f"--keyfile={key}"], check=True,
                       capture_output=True)
        self._start("munged", ["munged", "--foreground", f"--socket={self.munge_socket}",
                               f"--key-file={key}", f"--pid-file={m}/munged.pid",
                               f"--log-file={m}/munged.log", f"--seed-file={m}/munged.seed"])
        _wait(lambda: subprocess.run(["munge", "-n", "-S", str(self.munge_socket)],
                                     capture_output=True).returncode == 0,
              "munged to answer", START_TIMEOUT, self.alive)
        # -c: a fresh controller state, whatever an earlier run left.
        self._start("slurmctld", ["slurmctld", "-D", "-c", "-f", str(self.conf)])
        for node in self.nodes:
            self._start(f"slurmd-{node}", ["slurmd", "-D", "-N", node, "-f", str(self.conf)])
        _wait(lambda: all(self.node_state(n) == "idle" for n in self.nodes),
              "the nodes to be idle", START_TIMEOUT, self.alive, self.logs)

    def slurmd_log(self, node=None):
        """The slurmd log of node (the first node, by default)."""
        return self.root / "log" / f"slurmd-{node or self.node}.log"

    def node_state(self, node=None):
        p = subprocess.run(["sinfo", "-h", "-N", "-n", node or self.node, "-o", "%T"],
                           env=self.env, capture_output=True, text=True, timeout=30)
        return p.stdout.strip()

    def stop(self):
        for job in self.jobs:
            subprocess.run(["scancel", str(job)], env=self.env, capture_output=True,
                           timeout=30)
        slurmds = [f"slurmd-{node}" for node in self.nodes]
        if self.jobs and any(name in self.procs for name in slurmds):
            _wait(lambda: not self.squeue(), "cancelled jobs to end", STOP_TIMEOUT)
        # slurmds before slurmctld before munged: each needs the next.
        for name in (*slurmds, "slurmctld", "munged"):
            if name not in self.procs:
                continue
            proc, log = self.procs[name]
            if proc.poll() is None:
                proc.send_signal(signal.SIGTERM)
                try:
                    proc.wait(timeout=STOP_TIMEOUT)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait()
            log.close()
        self.procs.clear()
        self.remove_cgroups()

    def _slurm_cgroups(self):
        """The nodes' top cgroups in each v1 hierarchy (slurm_<node>)."""
        return [top for node in self.nodes for top in CGROUP_ROOT.glob(f"*/slurm_{node}")]

    def remove_cgroups(self):
        """rmdir what Slurm made below /sys/fs/cgroup/*/slurm_<node> and left
        empty."""
        for top in set(self._slurm_cgroups()) - self.cgroups_before:
            for d in sorted((p for p in top.rglob("*") if p.is_dir()),
                            key=lambda p: len(p.parts), reverse=True) + [top]:
                try:
                    d.rmdir()
                except OSError:
                    pass

    # --------------------------------------------------------------- jobs --

    def squeue(self):
        p = subprocess.run(["squeue", "-h", "-o", "%i"], env=self.env, capture_output=True,
                           text=True, timeout=30)
        return p.stdout.split()

    def sbatch(self, script, user=None, options=()):
        """Submits script (text) as user ((uid, gid) or None for root), with
        more sbatch options; returns (job ID, path of its output)."""
        n = len(self.jobs)
        path = self.root / "jobs" / f"job{n}.sh"
        out = self.root / "jobs" / f"job{n}.out"
        path.write_text(script)
        os.chmod(path, 0o755)
        argv = btg.user_prefix(user) + ["sbatch", "--parsable", "-n1", *options,
                                        f"--output={out}", f"--chdir={self.root / 'jobs'}",
                                        str(path)]
        # No core files from the crashing runs: sbatch passes its
        # RLIMIT_CORE on to the job (PropagateResourceLimits=ALL).
        p = subprocess.run(argv, env=self.env, capture_output=True, text=True, timeout=30,
                           preexec_fn=lambda: resource.setrlimit(resource.RLIMIT_CORE, (0, 0)))
        assert p.returncode == 0, f"sbatch failed: {p.stderr}\n{self.logs()}"
        job = int(p.stdout.strip().split(";")[0])
        self.jobs.append(job)
        return job, out

    def show_job(self, job):
        """scontrol show job's fields as a dict."""
        p = subprocess.run(["scontrol", "-o", "show", "job", str(job)], env=self.env,
                           capture_output=True, text=True, timeout=30)
        assert p.returncode == 0, p.stderr
        fields = {}
        for item in p.stdout.split():
            key, _, value = item.partition("=")
            fields[key] = value
        return fields

    def wait_output(self, out, text, timeout=PAUSE_TIMEOUT):
        def read():
            try:
                return out.read_text(errors="replace")
            except FileNotFoundError:
                return ""
        _wait(lambda: text in read(), f"{text!r} in {out}", timeout, self.alive,
              lambda: f"job output: {read()!r}\n{self.logs()}")

    def wait_done(self, job, timeout=RUN_TIMEOUT):
        """Waits until the job ends; returns its scontrol fields."""
        _wait(lambda: self.show_job(job)["JobState"] not in ("PENDING", "RUNNING",
                                                             "COMPLETING"),
              f"job {job} to end", timeout, self.alive, self.logs)
        return self.show_job(job)

    def wait_running(self, job, timeout=START_TIMEOUT):
        _wait(lambda: self.show_job(job)["JobState"] == "RUNNING" and self.listpids(job),
              f"job {job} to run", timeout, self.alive, self.logs)

    def listpids(self, job, step=None, node=None):
        """PIDs `scontrol listpids` names for the job (its step), in its
        order, on node (the first node, by default)."""
        p = subprocess.run(["scontrol", "listpids", str(job), node or self.node],
                           env=self.env, capture_output=True, text=True, timeout=30)
        rows = [line.split() for line in p.stdout.splitlines()[1:]]
        return [int(r[0]) for r in rows
                if len(r) >= 3 and r[0].isdigit() and step in (None, r[2])]



# ----------------------------------------------------------- test users --

class Users:
    """Unprivileged users by name, created with useradd only if missing and
    deleted at the end only if created here."""

    def __init__(self, *names):
        self.created = []
        self.ids = {}
        for name in names:
            try:
                pwd.getpwnam(name)
            except KeyError:
                subprocess.run(["useradd", "-M", "-r", "-s", "/usr/sbin/nologin", name],
                               check=True)
                self.created.append(name)
            pw = pwd.getpwnam(name)
            assert pw.pw_uid != 0
            self.ids[name] = (pw.pw_uid, pw.pw_gid)

    def __getitem__(self, name):
        return self.ids[name]

    def remove(self):
        for name in self.created:
            subprocess.run(["userdel", name], check=False)


def slurm_deb():
    """The btguard-slurm package to test: BTGUARD_SLURM_DEB (`make
    check-slurm` builds it), else the one `make check-deb` left in
    build/deb."""
    if os.environ.get("BTGUARD_SLURM_DEB"):
        return Path(os.environ["BTGUARD_SLURM_DEB"])
    debs = sorted((btg.BUILD / "deb").glob("btguard-slurm_*.deb"))
    if len(debs) != 1:
        pytest.fail(f"no single btguard-slurm_*.deb in {btg.BUILD / 'deb'}: "
                    "run `make check-slurm` (or `make check-deb`)")
    return debs[0]


def deb_plugstack(*args):
    """The plugstack.conf line for running_cluster's plugstack: the package's
    snippet (one line, `optional PATH`), with PATH moved into the package
    as `dpkg-deb -x` extracted it into the cluster's directory, and args
    (btguardctl=..., socket=...) after it."""
    deb = slurm_deb()

    def line(root):
        dest = root / "btguard-slurm"
        subprocess.run(["dpkg-deb", "-x", str(deb), str(dest)], check=True,
                       capture_output=True, timeout=60)
        os.chmod(dest, 0o755)    # srun loads the plugin as the job's user
        snippet = dest / "etc" / "slurm" / "plugstack.conf.d" / "btguard.conf"
        rows = [r.split() for r in snippet.read_text().splitlines()
                if r.strip() and not r.lstrip().startswith("#")]
        assert len(rows) == 1 and len(rows[0]) == 2 and rows[0][0] == "optional", rows
        so = dest / rows[0][1].lstrip("/")
        assert so.is_file(), f"{deb.name}'s snippet names {rows[0][1]}, not in the package"
        return " ".join(["optional", str(so), *args])
    return line


def running_cluster(proctrack, plugstack=None, nodes=1):
    """A started Cluster of `nodes` nodes in a temporary directory, stopped
    afterwards; its configuration, logs and job output are kept in
    DIR/<proctrack name>[-spank][-N<nodes>], and the logs printed (pytest
    shows them when a test failed)."""
    keep = DIR / (proctrack.split("/")[-1] + ("-spank" if plugstack else "")
                  + (f"-N{nodes}" if nodes > 1 else ""))
    shutil.rmtree(keep, ignore_errors=True)
    cluster = Cluster(tempfile.mkdtemp(prefix="btg-slurm-"), proctrack, plugstack, nodes)
    saved = os.environ.get("SLURM_CONF")
    # btguardctl runs scontrol with its caller's environment, and the
    # integration helpers (Daemon.ctl) pass this process's on.
    os.environ["SLURM_CONF"] = str(cluster.conf)
    try:
        cluster.start()
        yield cluster
    finally:
        cluster.stop()
        print(cluster.logs())
        for sub in ("etc", "log", "jobs"):
            shutil.copytree(cluster.root / sub, keep / sub, dirs_exist_ok=True)
        shutil.rmtree(cluster.root, ignore_errors=True)
        if saved is None:
            os.environ.pop("SLURM_CONF", None)
        else:
            os.environ["SLURM_CONF"] = saved
