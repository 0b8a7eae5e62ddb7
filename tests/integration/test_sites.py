# SPDX-License-Identifier: MIT
"""Where backtrace() is, and what may write it.

- several definitions: an LD_PRELOADed second backtrace(), glibc linked
  statically (found through .symtab), a stripped static executable and a
  process without any backtrace() ("none", with a clear message);
- hardened targets: MDWE (PR_SET_MDWE) and a seccomp filter that kills
  on mprotect(PROT_EXEC) -- an in-process patcher fails there, ptrace does
  not;
- IBT: a backtrace() that starts with endbr64 gets the stub after it.
"""

import subprocess

import pytest

from btg.daemon import guard_ok, one, unguard_ok
from btg.paths import REPO
from btg.procfs import read_mem, wait_threads_running
from btg.sites import ENDBR64, SITE_LEN, STUB, assert_original, assert_stub, sites_of
from btg.victims import start, victim_path, wait_behaviour

NTHREADS = 4
REPO_VICTIMS_SRC = REPO / "tests" / "victims"


def originals(pid, sites):
    return {obj: read_mem(pid, addr, SITE_LEN) for obj, addr in sites.items()}


def full_cycle(daemon, v, nsites):
    """guard + unguard of a bt_loop-style victim, checked in its memory and
    in what its backtrace() returns; returns (sites, original bytes)."""
    res = one(daemon.ctl("status", v.pid, check=0), v.pid, "status")
    assert res["ok"] is True and res["state"] == "unguarded", res
    sites = sites_of(res)
    assert len(sites) == nsites, res
    orig = originals(v.pid, sites)
    wait_behaviour(v, zero=False)

    res = guard_ok(daemon, v.pid, nsites=nsites)
    assert sites_of(res) == sites, res
    wait_threads_running(v.pid)
    for obj, addr in sites.items():
        assert_stub(v.pid, addr, orig[obj])
    wait_behaviour(v, zero=True)

    unguard_ok(daemon, v.pid, nsites=nsites)
    wait_threads_running(v.pid)
    for obj, addr in sites.items():
        assert_original(v.pid, addr, orig[obj])
    wait_behaviour(v, zero=False)
    v.assert_alive()
    return sites, orig


def symtab_value(path, name):
    out = subprocess.run(["nm", "--defined-only", str(path)], check=True,
                         capture_output=True, text=True).stdout
    vals = [int(p[0], 16) for p in (line.split() for line in out.splitlines())
            if len(p) == 3 and p[2] == name]
    assert len(vals) == 1, f"{name} in {path}: {vals}"
    return vals[0]


def has_section(path, name):
    out = subprocess.run(["readelf", "-SW", str(path)], check=True,
                         capture_output=True, text=True).stdout
    return f" {name} " in out


# ------------------------------------------ several definitions, or none --

def test_preloaded_second_definition(daemon, victim):
    """The program calls the preloaded backtrace(); both definitions are
    reported and guarded, so the program sees 0 frames."""
    pre = victim_path("libbtpre")
    v = start(victim, [victim_path("bt_loop"), NTHREADS], "bt_loop-preload",
              env={"LD_PRELOAD": str(pre)}, report=True, nthreads=NTHREADS)
    sites, _ = full_cycle(daemon, v, nsites=2)
    assert sorted(o.rsplit("/", 1)[1] for o in sites) == ["libbtpre", "libc.so.6"], sites


def test_static_executable_via_symtab(daemon, victim):
    exe = victim_path("bt_static")
    # The premise: no dynamic symbol table, the symbol only in .symtab.
    assert not has_section(exe, ".dynsym") and has_section(exe, ".symtab")
    v = start(victim, [exe, NTHREADS], "bt_static", report=True, nthreads=NTHREADS)
    sites, _ = full_cycle(daemon, v, nsites=1)
    # A static non-PIE executable runs at its link addresses.
    assert sites == {str(exe): symtab_value(exe, "backtrace")}, sites


def assert_none(daemon, pid):
    res = one(daemon.ctl("status", pid, check=0), pid, "status")
    assert res["ok"] is True and res["state"] == "none" and res["sites"] == [], res
    assert "backtrace" in res["message"], f"state none needs a clear message: {res}"
    res = one(daemon.ctl("guard", pid, check=1), pid, "guard")
    assert res["ok"] is False and res["error"] == "no-site", res
    assert res["wrote"] is False and "backtrace" in res["message"], res
    res = one(daemon.ctl("unguard", pid, check=1), pid, "unguard")
    assert res["ok"] is False and res["error"] == "no-site", res
    wait_threads_running(pid)


def test_stripped_static_executable_is_none(daemon, victim):
    stripped = victim.dir / "bt_static-stripped"
    subprocess.run(["strip", "-o", str(stripped), str(victim_path("bt_static"))], check=True)
    assert not has_section(stripped, ".symtab")
    v = start(victim, [stripped, 2], "bt_static-stripped", report=True, nthreads=2)
    assert_none(daemon, v.pid)
    # Nothing was written: the program still gets real frames.
    wait_behaviour(v, zero=False)


def test_no_backtrace_at_all_is_none(daemon, victim):
    v = start(victim, [victim_path("nolibc")], "nolibc")
    assert_none(daemon, v.pid)
    v.assert_alive()


# ----------------------------------------------------- a hardened target --

@pytest.mark.parametrize("mode", ["mdwe", "seccomp"])
def test_hardened_target(daemon, victim, mode):
    """hardened proves its restriction before "ready" (else it exits 1 and
    start() fails); the guard must work all the same."""
    v = start(victim, [victim_path("hardened"), mode, NTHREADS], f"hardened-{mode}",
              report=True, nthreads=NTHREADS)
    full_cycle(daemon, v, nsites=1)


# ------------------------------------------- IBT: the stub after endbr64 --

def test_ibt_stub_after_endbr64(daemon, victim):
    lib = victim.dir / "libbtibt.so"
    subprocess.run(["gcc", "-shared", "-fPIC", "-O1", "-fcf-protection=full", "-o", str(lib),
                    str(REPO_VICTIMS_SRC / "libbtpre.c"), "-ldl"], check=True)
    v = start(victim, [victim_path("bt_loop"), NTHREADS], "bt_loop-ibt",
              env={"LD_PRELOAD": str(lib)}, report=True, nthreads=NTHREADS)
    res = one(daemon.ctl("status", v.pid, check=0), v.pid, "status")
    [ibt_addr] = [a for o, a in sites_of(res).items() if o == str(lib)]
    original = read_mem(v.pid, ibt_addr, SITE_LEN)
    assert original.startswith(ENDBR64), original.hex()

    full_cycle(daemon, v, nsites=2)
    guard_ok(daemon, v.pid, nsites=2)
    patched = read_mem(v.pid, ibt_addr, SITE_LEN)
    assert patched[:7] == ENDBR64 + STUB == bytes.fromhex("f30f1efa31c0c3"), patched.hex()
    assert patched[7:] == original[7:], (original.hex(), patched.hex())
    # Through the preloaded definition, the program gets 0 frames.
    wait_behaviour(v, zero=True)
    wait_threads_running(v.pid)
