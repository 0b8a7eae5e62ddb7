# SPDX-License-Identifier: MIT
"""Where backtrace() is in a victim and what its bytes are: the stub and the
landing pad as daemon/arch/x86_64/arch_stub.h has them, site addresses
from the victim's own ELF symbols.
"""

import subprocess

from .procfs import read_mem


def libc_text_mappings(pid):
    """(start, end, path) of every executable mapping of libc.so.6 in PID."""
    out = []
    with open(f"/proc/{pid}/maps") as f:
        for line in f:
            parts = line.split(None, 5)
            if len(parts) < 6 or "x" not in parts[1]:
                continue
            path = parts[5].strip()
            if path.endswith("/libc.so.6"):
                start, end = (int(x, 16) for x in parts[0].split("-"))
                out.append((start, end, path))
    return out


def object_base(pid, path_suffix):
    """Load address of the object whose path ends with path_suffix.

    The lowest mapping with file offset 0; for glibc and our victims the
    first PT_LOAD has p_vaddr 0, so symbol values add to it directly.
    """
    best = None
    with open(f"/proc/{pid}/maps") as f:
        for line in f:
            parts = line.split(None, 5)
            if len(parts) < 6 or not parts[5].strip().endswith(path_suffix):
                continue
            if int(parts[2], 16) != 0:
                continue
            start = int(parts[0].split("-")[0], 16)
            if best is None or start < best[0]:
                best = (start, parts[5].strip())
    return best


def dynsym_value(path, name):
    """Value of the default-version dynamic symbol `name` in the file `path`."""
    out = subprocess.run(["nm", "-D", "--defined-only", str(path)],
                         check=True, capture_output=True, text=True).stdout
    for line in out.splitlines():
        parts = line.split()
        if len(parts) == 3 and parts[2].split("@")[0] == name \
                and ("@@" in parts[2] or "@" not in parts[2]):
            return int(parts[0], 16)
    raise LookupError(f"{name} not defined in {path}")


def expected_site(pid, suffix="/libc.so.6"):
    """Run-time address of backtrace() in the object ending with suffix."""
    base = object_base(pid, suffix)
    assert base is not None, f"{suffix} not mapped in {pid}"
    start, path = base
    # Read the file through the target's root, as the daemon must.
    return start + dynsym_value(f"/proc/{pid}/root{path}", "backtrace")


STUB = b"\x31\xc0\xc3"          # xor eax,eax; ret


ENDBR64 = b"\xf3\x0f\x1e\xfa"


def sites_of(res):
    """{object: address} of a reply's sites."""
    return {s["object"]: int(s["address"], 16) for s in res["sites"]}


def stub_offset(original):
    return len(ENDBR64) if original.startswith(ENDBR64) else 0


def assert_stub(pid, addr, original):
    """The site holds our stub (after an endbr64) and nothing else changed."""
    now = read_mem(pid, addr, len(original))
    off = stub_offset(original)
    assert now[off:off + len(STUB)] == STUB, \
        f"no stub at {addr:#x}: {original.hex()} -> {now.hex()}"
    assert now[:off] == original[:off] and now[off + len(STUB):] == original[off + len(STUB):], \
        f"bytes outside the stub changed at {addr:#x}: {original.hex()} -> {now.hex()}"


def assert_original(pid, addr, original):
    now = read_mem(pid, addr, len(original))
    assert now == original, f"site {addr:#x} not original: {original.hex()} -> {now.hex()}"


class Site:
    """The libc backtrace() site of a process and its two legal contents.

    Built before anything touched the process, so `original` is the real
    thing; the guarded form is the original with the 3-byte stub after an
    endbr64 (or at the entry), as the stub placement rule says.  8 bytes are
    compared: the stub and what surrounds it must both be right.
    """

    LEN = 8

    def __init__(self, pid):
        self.pid = pid
        self.address = expected_site(pid)
        self.original = read_mem(pid, self.address, self.LEN)
        off = len(ENDBR64) if self.original.startswith(ENDBR64) else 0
        self.guarded = self.original[:off] + STUB + self.original[off + len(STUB):]
        assert self.guarded != self.original, "the site already holds the stub"

    def now(self):
        return read_mem(self.pid, self.address, self.LEN)

    def classify(self, data=None):
        """"original", "guarded", or a failure text naming the bytes."""
        data = self.now() if data is None else data
        if data == self.original:
            return "original"
        if data == self.guarded:
            return "guarded"
        return (f"torn: {data.hex()} at {self.address:#x} (original "
                f"{self.original.hex()}, guarded {self.guarded.hex()})")
