# SPDX-License-Identifier: MIT
"""What the kernel and the sandbox allow, found by trying, never by version.

A test that expects one behaviour where the kernel permits something and
another where it refuses asks here first, with the very privileges the
process under test will hold (the same command prefix: setpriv with the
unit's bounding set, another user, a namespace), so the answer is the
kernel's and not a guess from `uname -r`.
"""

import subprocess
import sys

from .paths import START_TIMEOUT

# Subscribes to the kernel's proc connector as daemon/watch/procconn.c does
# (bind to CN_IDX_PROC, PROC_CN_MCAST_LISTEN, the acknowledgement) and
# prints "ok", or the step that failed and its errno.
_PROC_CONNECTOR_PROBE = r'''
import errno, os, socket, struct, sys, time
NETLINK_CONNECTOR, CN_IDX_PROC, CN_VAL_PROC = 11, 1, 1
NLMSG_DONE, PROC_CN_MCAST_LISTEN, PROC_CN_MCAST_IGNORE = 3, 1, 2
SEQ = 0x62746750
def op(s, code):
    cn = struct.pack("=IIIIHH", CN_IDX_PROC, CN_VAL_PROC, SEQ, SEQ, 4, 0) + struct.pack("=I", code)
    s.send(struct.pack("=IHHII", 16 + len(cn), NLMSG_DONE, 0, SEQ, 0) + cn)
try:
    s = socket.socket(socket.AF_NETLINK, socket.SOCK_DGRAM, NETLINK_CONNECTOR)
except OSError as e:
    print("socket", e.errno); sys.exit(0)
try:
    s.bind((0, CN_IDX_PROC))
except OSError as e:
    print("bind", e.errno); sys.exit(0)
try:
    op(s, PROC_CN_MCAST_LISTEN)
except OSError as e:
    print("subscribe", e.errno); sys.exit(0)
s.setblocking(False)
for _ in range(64):
    try:
        m = s.recv(4096)
    except BlockingIOError:
        print("no-answer", 0); sys.exit(0)
    if len(m) < 16 + 20 + 16:
        continue
    ack = struct.unpack_from("=I", m, 16 + 12)[0]
    what = struct.unpack_from("=I", m, 16 + 20)[0]
    if what != 0 or ack != SEQ + 1:
        continue
    err = struct.unpack_from("=I", m, 16 + 20 + 16)[0]
    op(s, PROC_CN_MCAST_IGNORE)
    print("ok" if err == 0 else f"refused {err}"); sys.exit(0)
print("no-answer", 0)
'''


def proc_connector_probe(prefix=()):
    """("ok", 0) if a process run under prefix may listen to the proc
    connector's events, else (step, errno): "bind" with EPERM where the
    kernel wants CAP_NET_ADMIN the process lacks, "subscribe" with
    ECONNREFUSED outside the host's network namespace, "no-answer" outside
    its user and PID namespaces."""
    p = subprocess.run([*prefix, sys.executable, "-c", _PROC_CONNECTOR_PROBE],
                       capture_output=True, text=True, timeout=START_TIMEOUT)
    assert p.returncode == 0, f"the proc connector probe failed: {p.stderr}"
    step, _, err = p.stdout.strip().partition(" ")
    return step, int(err or 0)
