# SPDX-License-Identifier: MIT
"""The wire protocol, spoken by the tests themselves (proto/PROTOCOL.md):
for what btguardctl never sends.  tests/lint/test_wire_constants.py holds
these constants to proto/proto.h and proto/names.c.
"""

import collections
import os
import socket
import struct


MAGIC = 0x31475442


VERSION = 3


KIND_REQUEST, KIND_RESULT, KIND_DONE, KIND_ERROR = 1, 2, 3, 4


ACTION_GUARD, ACTION_UNGUARD, ACTION_STATUS, ACTION_AT_EXEC = 1, 2, 3, 4


HEADER = struct.Struct("<IHHI")


REQUEST = struct.Struct("<BBHII")


RESULT = struct.Struct("<iIBBBBIIIBB")   # ... check_us, uid, risk, warnings


MAX_PAYLOAD = 65536


MAX_PIDS = 4096


# Wire error codes (proto/proto.h enum proto_error).
ERR_BUSY = 4096


# Every wire error code by name, in code order from 4096 (proto/proto.h
# enum proto_error; tests/lint/test_wire_constants.py holds this to
# names.c's table).
ERR_NAMES = ["busy", "foreign", "no-site", "traced", "denied", "no-process",
             "zombie", "kernel-thread", "self", "gone", "exec", "pid-reused",
             "verify", "stop-timeout", "elf", "unsupported", "protocol", "limit",
             "shutdown", "internal", "shared-memory"]


ERR = {name: 4096 + i for i, name in enumerate(ERR_NAMES)}


# enum proto_proc_state
PROC_NONE, PROC_UNGUARDED, PROC_GUARDED, PROC_PARTIAL, PROC_FOREIGN, PROC_UNKNOWN = range(6)


RESULT_WROTE = 0x01
RESULT_ARMED = 0x02   # at-exec: the first of its two RESULTs


SITE = struct.Struct("<QBBH")   # address, state, flags, object length


SELECT = struct.Struct("<BBI")  # fields, reserved, uid


SEL_ALL, SEL_UID, SEL_EXE, SEL_CMDLINE, SEL_CGROUP, SEL_MAPS, SEL_AT_RISK = (
    0x01, 0x02, 0x04, 0x08, 0x10, 0x20, 0x40)


RISK_UNKNOWN, RISK_NONE, RISK_AT_RISK, RISK_COVERED = range(4)


WireResult = collections.namedtuple(
    "WireResult", "pid error action state flags nsites pause_us check_us uid risk warnings "
    "message command reason sites")


def encode_header(kind, length, magic=MAGIC, version=VERSION):
    return HEADER.pack(magic, version, kind, length)


def encode_request(action, pids, flags=0, deadline_ms=0, npids=None):
    payload = REQUEST.pack(action, flags, 0, deadline_ms,
                           len(pids) if npids is None else npids)
    payload += b"".join(struct.pack("<i", p) for p in pids)
    payload += SELECT.pack(0, 0, 0)
    return encode_header(KIND_REQUEST, len(payload)) + payload


def encode_select(action, fields, uid=0, exe=None, cmdline=None, cgroup=None, maps=None,
                  flags=0, deadline_ms=0):
    """A selector REQUEST; the patterns go in field order: exe, cmdline, cgroup, maps."""
    payload = REQUEST.pack(action, flags, 0, deadline_ms, 0) + SELECT.pack(fields, 0, uid)
    for bit, pattern in ((SEL_EXE, exe), (SEL_CMDLINE, cmdline), (SEL_CGROUP, cgroup),
                         (SEL_MAPS, maps)):
        if fields & bit:
            data = pattern.encode()
            payload += struct.pack("<H", len(data)) + data
    return encode_header(KIND_REQUEST, len(payload)) + payload


class Wire:
    """One raw connection to the daemon, speaking proto/PROTOCOL.md."""

    def __init__(self, path, timeout=60.0):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.settimeout(timeout)
        self.sock.connect(path)

    def close(self):
        self.sock.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def send(self, data):
        self.sock.sendall(data)

    def _recv_exact(self, n):
        buf = b""
        while len(buf) < n:
            chunk = self.sock.recv(n - len(buf))
            if not chunk:
                raise EOFError(f"connection closed after {len(buf)}/{n} bytes")
            buf += chunk
        return buf

    def recv(self):
        """One message: (kind, payload)."""
        magic, version, kind, length = HEADER.unpack(self._recv_exact(HEADER.size))
        assert magic == MAGIC and version == VERSION, (hex(magic), version)
        assert length <= MAX_PAYLOAD, length
        return kind, self._recv_exact(length)

    def request(self, action, pids, flags=0, deadline_ms=0):
        """Sends a request; returns the RESULT list (DONE checked)."""
        self.send(encode_request(action, pids, flags, deadline_ms))
        return self.read_results()

    def read_results(self):
        results = []
        while True:
            kind, payload = self.recv()
            if kind == KIND_RESULT:
                results.append(decode_result(payload))
            elif kind == KIND_DONE:
                (count,) = struct.unpack_from("<I", payload)
                assert count == len(results), (count, len(results))
                return results
            else:
                raise AssertionError(f"unexpected message kind {kind}: {payload!r}")


def decode_result(payload):
    fixed = RESULT.unpack_from(payload)
    off = RESULT.size
    strings = []
    for _ in range(3):   # message, command, reason
        (n,) = struct.unpack_from("<H", payload, off)
        strings.append(payload[off + 2:off + 2 + n].decode(errors="replace"))
        off += 2 + n
    sites = []
    for _ in range(fixed[5]):
        address, state, _flags, olen = SITE.unpack_from(payload, off)
        off += SITE.size
        sites.append((payload[off:off + olen].decode(errors="replace"), address, state))
        off += olen
    assert off == len(payload), f"{len(payload) - off} stray bytes after a RESULT"
    return WireResult(*fixed, *strings, sites)


def error_name(code):
    if code == 0:
        return "ok"
    if 4096 <= code < 4096 + len(ERR_NAMES):
        return ERR_NAMES[code - 4096]
    return f"errno {code} ({os.strerror(code)})" if code < 4096 else f"unknown {code}"
