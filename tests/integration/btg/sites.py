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


def entry_undo(original):
    """(first instruction's length, its undo) when the stub follows and undoes
    it, as arch_entry_undo() in daemon/arch/x86_64/arch_stub.h; (0, b"") else."""
    b = original
    if b and (b[0] & 0xF8) == 0x50 and b[0] != 0x54:          # push %reg
        return 1, bytes([0x58 | (b[0] & 7)])
    if len(b) >= 2 and b[0] == 0x41 and (b[1] & 0xF8) == 0x50:  # push %r8-%r15
        return 2, bytes([0x41, 0x58 | (b[1] & 7)])
    if len(b) >= 4 and b[:3] == b"\x48\x83\xec":              # sub $imm8,%rsp
        return 4, b"\x48\x83\xc4" + b[3:4]
    return 0, b""


def stub_offset(original):
    """Where the change starts: past an endbr64 or an undone first instruction, else 0."""
    return len(ENDBR64) if original.startswith(ENDBR64) else entry_undo(original)[0]


def guarded_form(original):
    """The original with the stub where daemon/engine/stub.c puts it: after an
    endbr64, after a first instruction it undoes, or at the entry."""
    if original.startswith(ENDBR64):
        off, change = len(ENDBR64), STUB
    else:
        off, undo = entry_undo(original)
        change = undo + STUB
    return original[:off] + change + original[off + len(change):]


def assert_stub(pid, addr, original):
    """The site holds our stub where the placement rule puts it and nothing else changed."""
    now = read_mem(pid, addr, len(original))
    want = guarded_form(original)
    assert now == want, \
        f"not guarded as planned at {addr:#x}: {original.hex()} -> {now.hex()} (want {want.hex()})"


def assert_original(pid, addr, original):
    now = read_mem(pid, addr, len(original))
    assert now == original, f"site {addr:#x} not original: {original.hex()} -> {now.hex()}"


class Site:
    """The libc backtrace() site of a process and its two legal contents.

    Built before anything touched the process, so `original` is the real
    thing; the guarded form is guarded_form()'s.  16 bytes are compared:
    the change and what surrounds it must both be right.
    """

    LEN = 16

    def __init__(self, pid):
        self.pid = pid
        self.address = expected_site(pid)
        self.original = read_mem(pid, self.address, self.LEN)
        self.guarded = guarded_form(self.original)
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


def instruction_starts(pid, address, length, suffix="/libc.so.6"):
    """Run-time addresses of the instructions of the object's file that
    start in [address, address + length), address a function's entry:
    objdump decodes the file from there, as a uprobe's tool finds the places
    the kernel accepts."""
    start, path = object_base(pid, suffix)
    lo = address - start
    # Decoded past the end, so that the last instruction is not cut short.
    out = subprocess.run(["objdump", "-d", f"--start-address={lo:#x}",
                          f"--stop-address={lo + length + 16:#x}", f"/proc/{pid}/root{path}"],
                         check=True, capture_output=True, text=True).stdout
    starts = []
    for line in out.splitlines():
        head = line.split(":\t", 1)
        # An instruction's line: "  1159c1:\t48 89 e5 \tmov ..."; a long one's rest has no mnemonic.
        if len(head) == 2 and head[0].strip() and "\t" in head[1]:
            starts.append(start + int(head[0].strip(), 16))
    return [a for a in starts if a < address + length]


def change_range(site):
    """(lo, hi): the offsets from the entry of the bytes the guard changes."""
    diff = [i for i in range(len(site.original)) if site.original[i] != site.guarded[i]]
    return diff[0], diff[-1] + 1
