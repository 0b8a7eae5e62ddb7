# SPDX-License-Identifier: MIT
"""The tests' copies of the wire constants are the C headers' own.

btg/wire.py speaks the protocol by itself (to send what btguardctl never
would); if a code, a limit or the stub moved in C, every test built on the
old value would test something else.  Read the C sources and compare.
"""

import re

from btg.paths import REPO
from btg.wire import ACTION_AT_EXEC, ERR_NAMES, MAGIC, MAX_PAYLOAD, MAX_PIDS, RESULT_ARMED, VERSION

PROTO_H = (REPO / "proto" / "proto.h").read_text()
NAMES_C = (REPO / "proto" / "names.c").read_text()
ARCH_STUB_H = (REPO / "daemon" / "arch" / "x86_64" / "arch_stub.h").read_text()


def define(text, name):
    m = re.search(rf"#define\s+{name}\s+(.+)", text)
    assert m, f"{name} not defined"
    return int(m.group(1).split("/*")[0].strip().rstrip("u"), 0)


def test_error_names_match_names_c():
    enum = PROTO_H[PROTO_H.index("BTG_ERR_BASE = 4096"):PROTO_H.index("BTG_ERR_END")]
    codes = re.findall(r"\b(BTG_ERR_[A-Z_]+)\b\s*[,=]", enum)
    # BTG_ERR_BASE = 4096, then BTG_ERR_BUSY = BTG_ERR_BASE, ...
    codes = [c for c in codes if c != "BTG_ERR_BASE"]
    names = dict(re.findall(r"\[(BTG_ERR_[A-Z_]+) - BTG_ERR_BASE\] = \{ \"([a-z-]+)\"", NAMES_C))
    assert [names[c] for c in codes] == ERR_NAMES


def test_limits_match_proto_h():
    assert define(PROTO_H, "PROTO_MAGIC") == MAGIC
    assert define(PROTO_H, "PROTO_VERSION") == VERSION
    assert define(PROTO_H, "PROTO_MAX_PAYLOAD") == MAX_PAYLOAD
    assert define(PROTO_H, "PROTO_MAX_PIDS") == MAX_PIDS
    assert define(PROTO_H, "PROTO_RESULT_ARMED") == RESULT_ARMED
    assert re.search(r"PROTO_ACTION_AT_EXEC\s*=\s*(\d+)", PROTO_H).group(1) == str(ACTION_AT_EXEC)


def test_stub_matches_arch_h():
    from btg.sites import ENDBR64, STUB
    stub = re.search(r"#define ARCH_STUB_BYTES\s+\{([^}]*)\}", ARCH_STUB_H).group(1)
    pads = re.search(r"#define ARCH_LANDING_PADS\s+\{ \{ \{([^}]*)\}", ARCH_STUB_H).group(1)
    assert bytes(int(x, 16) for x in stub.split(",")) == STUB
    assert bytes(int(x, 16) for x in pads.split(",")) == ENDBR64


def test_version_and_socket_are_one_definition():
    version = re.search(r'#define BTGUARD_VERSION\s+"([^"]+)"', PROTO_H).group(1)
    changelog = (REPO / "debian" / "changelog").read_text().splitlines()[0]
    assert changelog.startswith(f"btguard ({version})"), (version, changelog)
    sock = re.search(r'#define PROTO_DEFAULT_SOCKET\s+"([^"]+)"', PROTO_H).group(1)
    socket_unit = (REPO / "systemd" / "btguardd.socket").read_text()
    assert f"ListenStream={sock}" in socket_unit
