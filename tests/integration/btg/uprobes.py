# SPDX-License-Identifier: MIT
"""The kernel's real uprobes, as an observability tool attaches them: a
perf_event_open(2) uprobe on a file offset, filtered to one process, so the
kernel writes its breakpoint into that process alone and counts its hits.
No BPF: attaching is the kernel's own write over the first instruction,
which is what btguard has to live beside.
"""

import ctypes
import os
import platform
import struct

from .procfs import read_mem

UPROBE_TYPE_FILE = "/sys/bus/event_source/devices/uprobe/type"
PERF_FLAG_FD_CLOEXEC = 8
ATTR_SIZE = 112                 # PERF_ATTR_SIZE_VER5
# What the kernel writes over the first instruction.
BREAKPOINT = {"x86_64": b"\xcc", "aarch64": b"\xa0\x00\x20\xd4"}[platform.machine()]

_libc = ctypes.CDLL(None, use_errno=True)
_NR_PERF_EVENT_OPEN = {"x86_64": 298, "aarch64": 241}[platform.machine()]


def file_offset(pid, addr):
    """(path, file offset) of the run-time address addr in pid's mappings."""
    with open(f"/proc/{pid}/maps") as f:
        for line in f:
            parts = line.split(None, 5)
            lo, hi = (int(x, 16) for x in parts[0].split("-"))
            if lo <= addr < hi and len(parts) == 6:
                return parts[5].strip(), addr - lo + int(parts[2], 16)
    raise LookupError(f"{addr:#x} is not mapped in {pid}")


class Uprobe:
    """A uprobe at addr in pid, attached while the object lives (or until
    detach()).  One perf event per thread: a task's event counts what that
    task runs into, and the breakpoint is in the memory they share.
    hits() is how often the process ran into it."""

    def __init__(self, pid, addr):
        path, offset = file_offset(pid, addr)
        # Through the process's root, as the kernel resolves it at attach.
        self._path = ctypes.create_string_buffer(f"/proc/{pid}/root{path}".encode())
        attr = bytearray(ATTR_SIZE)
        with open(UPROBE_TYPE_FILE) as f:
            kind = int(f.read())
        struct.pack_into("IIQQ", attr, 0, kind, ATTR_SIZE, 0, 1)   # type, size, config, period
        struct.pack_into("QQ", attr, 56, ctypes.addressof(self._path), offset)  # config1, config2
        self._attr = ctypes.create_string_buffer(bytes(attr), ATTR_SIZE)
        self.pid, self.addr, self.fds = pid, addr, []
        try:
            for tid in sorted(int(t) for t in os.listdir(f"/proc/{pid}/task")):
                self._open(tid, path, offset)
        except BaseException:
            self.detach()
            raise

    def _open(self, tid, path, offset):
        fd = _libc.syscall(_NR_PERF_EVENT_OPEN, self._attr, tid, -1, -1, PERF_FLAG_FD_CLOEXEC)
        if fd < 0:
            err = ctypes.get_errno()
            raise OSError(err, f"perf_event_open(uprobe {path}+{offset:#x}): {os.strerror(err)}")
        self.fds.append(fd)

    def hits(self):
        return sum(struct.unpack("Q", os.read(fd, 8))[0] for fd in self.fds)

    def in_place(self):
        """Whether the kernel's breakpoint is in the process's bytes now."""
        return read_mem(self.pid, self.addr, len(BREAKPOINT)) == BREAKPOINT

    def detach(self):
        while self.fds:
            os.close(self.fds.pop())

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.detach()


def uprobes_work():
    """None when this kernel and sandbox let us attach a uprobe, else why not."""
    if not os.path.exists(UPROBE_TYPE_FILE):
        return "this kernel has no uprobe PMU"
    try:
        with Uprobe(os.getpid(), _own_backtrace()):
            return None
    except OSError as e:
        return f"cannot attach a uprobe here: {e}"


def _own_backtrace():
    return ctypes.cast(_libc.backtrace, ctypes.c_void_p).value
