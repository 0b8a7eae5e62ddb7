# SPDX-License-Identifier: MIT
"""Targets whose files the daemon cannot simply open.

1. a container's mount namespace, with libc at a path the host lacks;
2. a container's PID namespace, where btguardctl runs inside and names
   processes by the container's numbers (and must not reach the host's);
3. a libc deleted or replaced under a running process (a glibc upgrade).

Every test checks the bytes at the site through /proc/PID/mem and what
bt_loop's backtrace() returns, not only the daemon's reply.
"""

import json
import os
import shutil

import pytest

from btg.daemon import guard_ok, one, unguard_ok
from btg.paths import BTGUARDCTL
from btg.procfs import mapped_paths, own_mapping, read_mem, wait_threads_running
from btg.sites import SITE_LEN, assert_original, assert_stub, expected_site, sites_of
from btg.victims import start, victim_path, wait_behaviour

NTHREADS = 4


def guard_cycle(daemon, v, libc_object):
    """status, guard, unguard on a bt_loop victim whose libc shows up as
    libc_object; every step checked in the victim's memory and behaviour."""
    res = one(daemon.ctl("status", v.pid, check=0), v.pid, "status")
    assert res["ok"] is True and res["state"] == "unguarded", res
    assert list(sites_of(res)) == [libc_object], res
    addr = sites_of(res)[libc_object]
    original = read_mem(v.pid, addr, SITE_LEN)
    wait_behaviour(v, zero=False)

    res = guard_ok(daemon, v.pid, nsites=1)
    assert sites_of(res) == {libc_object: addr}, res
    wait_threads_running(v.pid)
    assert_stub(v.pid, addr, original)
    wait_behaviour(v, zero=True)
    res = one(daemon.ctl("status", v.pid, check=0), v.pid, "status")
    assert res["state"] == "guarded" and sites_of(res) == {libc_object: addr}, res

    unguard_ok(daemon, v.pid, nsites=1)
    wait_threads_running(v.pid)
    assert_original(v.pid, addr, original)
    wait_behaviour(v, zero=False)
    v.assert_alive()
    return addr


# --------------------------------------- libc in another mount namespace --

def test_other_mount_namespace(daemon, victim):
    """libc on a tmpfs mounted only inside the target's mount namespace."""
    libc, ldso = own_mapping("/libc.so.6"), own_mapping("/ld-linux-x86-64.so.2")
    hidden = victim.dir / "only-in-container"
    hidden.mkdir()
    libdir = hidden / "lib"
    # unshare without --fork execs: the victim keeps the PID we started.
    script = (f"mount -t tmpfs btguard-test {hidden} && mkdir {libdir} && "
              f"cp {libc} {libdir}/ && "
              f"exec {ldso} --library-path {libdir} {victim_path('bt_loop')} {NTHREADS} \"$@\"")
    v = start(victim, ["unshare", "--mount", "--propagation", "private",
                       "sh", "-c", script, "sh"], "bt_loop-mntns",
              report=True, nthreads=NTHREADS)
    container_libc = f"{libdir}/libc.so.6"
    assert container_libc in mapped_paths(v.pid), mapped_paths(v.pid)
    # The host sees the empty mount point, not the container's file.
    assert not os.path.exists(container_libc)
    assert os.stat(f"/proc/{v.pid}/ns/mnt").st_ino != os.stat("/proc/self/ns/mnt").st_ino

    addr = guard_cycle(daemon, v, container_libc)
    assert addr == expected_site(v.pid, "/only-in-container/lib/libc.so.6")


# ------------------------------------- a target in another PID namespace --

def ns_pid_to_host(ns_init, ns_pid):
    """Host PID of the process numbered ns_pid in ns_init's PID namespace."""
    ns = os.stat(f"/proc/{ns_init}/ns/pid")
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            st = os.stat(f"/proc/{entry}/ns/pid")
            with open(f"/proc/{entry}/status") as f:
                nspid = next(line.split()[1:] for line in f if line.startswith("NSpid:"))
        except (OSError, StopIteration):
            continue
        if (st.st_ino, st.st_dev) == (ns.st_ino, ns.st_dev) and int(nspid[-1]) == ns_pid:
            return int(entry)
    pytest.fail(f"no process {ns_pid} in the namespace of {ns_init}")


def test_other_pid_namespace(daemon, victim):
    """btguardctl inside `unshare -p -f --mount-proc` reaches its own
    processes by their container numbers, and never a host process."""
    host = start(victim, [victim_path("idle"), 1], "idle-host")
    host_site = expected_site(host.pid)
    host_original = read_mem(host.pid, host_site, SITE_LEN)
    ctl = f"{BTGUARDCTL} --socket {daemon.socket} --json --deadline 10000"
    out = victim.dir / "inner-idle.out"
    # The inner shell guards its own idle, then tries the host victim's
    # number, then waits on stdin so the host can look before it all ends.
    script = f"""
        {victim_path('idle')} 1 > {out} &
        inner=$!
        i=0; until grep -q ready {out}; do i=$((i+1)); [ $i -gt 400 ] && exit 1; sleep 0.05; done
        echo "inner $inner"
        if [ -e /proc/{host.pid} ]; then echo "host-pid visible"; else echo "host-pid absent"; fi
        r=$({ctl} guard $inner); echo "guard-inner $? $r"
        r=$({ctl} guard {host.pid}); echo "guard-host $? $r"
        r=$({ctl} status $inner); echo "status-inner $? $r"
        echo ready
        read line
        kill $inner
    """
    # --kill-child: the namespace's init (and so all of it) dies with unshare.
    ns = start(victim, ["unshare", "--pid", "--fork", "--mount-proc", "--kill-child",
                        "sh", "-c", script], "pidns-shell", stdin=True)
    got = {}
    for line in ns.before:
        key, _, rest = line.partition(" ")
        got[key] = rest
    assert got.get("host-pid") == "absent", ns.before
    inner = int(got["inner"])
    assert inner < host.pid, ns.before

    rc, _, text = got["guard-inner"].partition(" ")
    res = json.loads(text)
    assert rc == "0" and res["ok"] is True and res["state"] == "guarded", ns.before
    assert res["pid"] == inner and res["wrote"] is True, res
    # From the host: exactly that process got the stub.
    init = int(open(f"/proc/{ns.pid}/task/{ns.pid}/children").read().split()[0])
    inner_host = ns_pid_to_host(init, inner)
    [(obj, addr)] = sites_of(res).items()
    assert addr == expected_site(inner_host), res
    st = one(daemon.ctl("status", inner_host, check=0), inner_host, "status")
    assert st["state"] == "guarded" and sites_of(st) == {obj: addr}, st
    wait_threads_running(inner_host)

    rc, _, text = got["guard-host"].partition(" ")
    res = json.loads(text)
    assert rc == "1" and res["ok"] is False and res["error"] == "no-process", ns.before
    assert res["wrote"] is False and str(host.pid) in res["message"], res
    # ... and the host process with that number was not touched.
    assert read_mem(host.pid, host_site, SITE_LEN) == host_original
    st = one(daemon.ctl("status", host.pid, check=0), host.pid, "status")
    assert st["state"] == "unguarded", st
    wait_threads_running(host.pid)
    host.assert_alive()

    rc, _, text = got["status-inner"].partition(" ")
    res = json.loads(text)
    assert rc == "0" and res["state"] == "guarded" and res["pid"] == inner, res

    ns.proc.stdin.close()
    assert ns.proc.wait(timeout=20) == 0
    daemon.alive()


# --------------------------------- libc upgraded under a running process --

@pytest.mark.parametrize("how", ["deleted", "replaced"])
def test_upgraded_libc(daemon, victim, how):
    """The libc file behind the mapping is gone: deleted, or replaced by a
    different file under the same name (how package upgrades rename)."""
    libc, ldso = own_mapping("/libc.so.6"), own_mapping("/ld-linux-x86-64.so.2")
    libdir = victim.dir / "old-glibc"
    libdir.mkdir()
    shutil.copy(libc, libdir / "libc.so.6")
    v = start(victim, [ldso, "--library-path", libdir, victim_path("bt_loop"), NTHREADS],
              f"bt_loop-{how}", report=True, nthreads=NTHREADS)
    path = f"{libdir}/libc.so.6"
    res = one(daemon.ctl("status", v.pid, check=0), v.pid, "status")
    assert list(sites_of(res)) == [path], res
    before = sites_of(res)[path]

    if how == "deleted":
        os.unlink(path)
    else:
        # A different ELF object, without backtrace(): reading the file by
        # name now would find nothing, or the wrong bytes.
        new = libdir / "libc.so.6.new"
        shutil.copy(ldso, new)
        os.rename(new, path)
    assert f"{path} (deleted)" in open(f"/proc/{v.pid}/maps").read()

    addr = guard_cycle(daemon, v, f"{path} (deleted)")
    assert addr == before
    daemon.alive()

