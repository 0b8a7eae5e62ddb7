# SPDX-License-Identifier: MIT
"""Where backtrace() is in a victim and what its bytes are: the stub and the
landing pad as daemon/arch/x86_64/arch_stub.h has them, site addresses
from the victim's own ELF symbols.
"""

import subprocess
import tempfile

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

SITE_LEN = 32                    # bytes from the entry the daemon compares (SITE_CTX_LEN)


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


CALLEE_SAVED = {3, 5, 12, 13, 14, 15}      # rbx, rbp, r12-r15


def fs_load_len(b):
    """Length of "mov %fs:disp32,%reg" (64|65 [REX] 8b modrm sib disp32) at
    the start of b, the stack protector's load of the canary; 0 else."""
    at = 1
    if not b or b[0] not in (0x64, 0x65):
        return 0
    if len(b) > at and b[at] & 0xF0 == 0x40:
        at += 1
    if len(b) < at + 7 or b[at] != 0x8B or b[at + 1] & 0xC7 != 0x04 or b[at + 2] != 0x25:
        return 0
    return at + 7


def plan_inside(original):
    """(offset, bytes) of the guard inside the canary load, its first byte
    kept, as arch_plan_inside() in daemon/arch/x86_64/arch_stub.h places it
    (written again here from its comment, not from its code); None where the
    prologue before it is not one it undoes or the undo does not fit."""
    b, off = original, len(ENDBR64) if original.startswith(ENDBR64) else 0
    frame = b[off:off + 4] == b"\x55\x48\x89\xe5"
    off += 4 if frame else 0
    steps, written, depth = [], set(), 0      # ("push", reg, depth) / ("sub", n, depth)
    while off < len(b):
        c = b[off:]
        n = fs_load_len(c)
        if n:
            break
        if c[0] & 0xF8 == 0x50 or (len(c) >= 2 and c[0] == 0x41 and c[1] & 0xF8 == 0x50):
            reg = 8 + (c[1] & 7) if c[0] == 0x41 else c[0] & 7
            if reg in (0, 4):
                return None
            depth += 8
            steps.append(("push", reg, depth))
            off += 2 if c[0] == 0x41 else 1
        elif c[:3] == b"\x48\x83\xec" and len(c) >= 4 and c[3] < 0x80:
            depth += c[3]
            steps.append(("sub", c[3], depth))
            off += 4
        elif c[:3] == b"\x48\x81\xec" and len(c) >= 7 and c[6] < 0x80:
            imm = int.from_bytes(c[3:7], "little")
            depth += imm
            steps.append(("sub", imm, depth))
            off += 7
        else:
            at = 1 if c[0] & 0xF0 == 0x40 else 0
            if len(c) < at + 2 or c[at] != 0x89 or c[at + 1] & 0xC0 != 0xC0:
                return None
            dst = (c[at + 1] & 7) | (8 if at and c[0] & 1 else 0)
            pushed = {st[1] for st in steps if st[0] == "push"}
            if dst == 4 or (dst == 5 and frame) or (dst in CALLEE_SAVED and dst not in pushed):
                return None
            written.add(dst)
            off += at + 2
    else:
        return None
    out = bytes([b[off]]) + b"\x31\xc0"                   # %fs kept: "xor %eax,%eax"
    if frame:
        for kind, reg, d in steps:
            if kind == "push" and reg in CALLEE_SAVED and reg in written:
                if d > 128:
                    return None
                out += bytes([0x4C if reg >= 8 else 0x48, 0x8B, 0x45 | (reg & 7) << 3, 256 - d])
        out += b"\xc9"                                        # leave
    else:
        for kind, v, _ in reversed(steps):
            if kind == "sub":
                out += (b"\x48\x83\xc4" + bytes([v])) if v < 0x80 \
                    else b"\x48\x81\xc4" + v.to_bytes(4, "little")
            else:
                out += (b"\x41" if v >= 8 else b"") + bytes([0x58 | (v & 7)])
    out += b"\xc3"
    if len(out) > n:
        return None
    return off, out


def stub_offset(original):
    """Where the change starts: past an endbr64 or an undone first instruction, else 0."""
    return len(ENDBR64) if original.startswith(ENDBR64) else entry_undo(original)[0]


def guarded_form(original):
    """The original with the stub where daemon/engine/stub.c puts it: inside
    the canary load after a prologue it undoes; else after an endbr64, after
    a first instruction it undoes, or at the entry."""
    inside = plan_inside(original)
    if inside:
        off, change = inside
    elif original.startswith(ENDBR64):
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
    """A backtrace() site of a process (libc's, or that of the object whose
    path ends with suffix) and its two legal contents.

    Built before anything touched the process, so `original` is the real
    thing; the guarded form is guarded_form()'s.  32 bytes are compared
    (the daemon's SITE_CTX_LEN): the change and what surrounds it must both
    be right.
    """

    LEN = SITE_LEN

    def __init__(self, pid, suffix="/libc.so.6"):
        self.pid, self.suffix = pid, suffix
        self.address = expected_site(pid, suffix)
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


def boundaries(code):
    """The offsets of the instructions objdump decodes in code from its
    first byte on (a function's bytes in any form: the file's, a guard's)."""
    with tempfile.NamedTemporaryFile(suffix=".bin") as f:
        f.write(code)
        f.flush()
        out = subprocess.run(["objdump", "-D", "-b", "binary", "-m", "i386:x86-64", f.name],
                             check=True, capture_output=True, text=True).stdout
    starts = []
    for line in out.splitlines():
        head = line.split(":\t", 1)
        if len(head) == 2 and head[0].strip() and "\t" in head[1]:
            starts.append(int(head[0].strip(), 16))
    return starts


def park_points(site, form):
    """Where a thread can be interrupted in form (site.original or
    site.guarded) relative to the bytes a write turns it from or into:
    (the boundaries strictly inside the change, where the write must be
    refused; the last one at or before its first byte, where a thread runs
    whatever it finds cleanly; the first one past it)."""
    lo, hi = change_range(site)
    starts = [b for b in boundaries(form) if b < len(form) - 8]
    inside = [b for b in starts if lo < b < hi]
    before = max(b for b in starts if b <= lo)
    after = min(b for b in starts if b >= hi)
    return inside, before, after


def kept_instruction(site):
    """The offset of the file's instruction the change lies in (its first
    byte kept), or None where the change starts an instruction (the stub
    after the first instruction)."""
    lo, hi = change_range(site)
    starts = [a - site.address
              for a in instruction_starts(site.pid, site.address, site.LEN, site.suffix)]
    at = max(a for a in starts if a <= lo)
    if at == lo:
        return None
    # No instruction of the file starts inside the change: no probe can land there.
    assert not [a for a in starts if lo <= a < hi], (lo, hi, starts)
    return at
