# SPDX-License-Identifier: MIT
"""Text a process chose, shown to root: every format escapes it.

A victim whose executable path, argv and a preloaded object's path hold a
C1 control sequence (U+009B CSI "2K", erase the line), a right-to-left
override (U+202E), a bidi isolate (U+2066), ESC and an invalid byte.  The
table, the lines format (--verbose lists the object), JSON and the
daemon's log must hold none of those bytes raw; JSON must parse strictly
and give back the characters; the escaped forms are the ones
proto/escape.h names (unit-tested byte by byte in tests/unit/test_escape.c).
"""

import json
import os
import select
import shutil
import subprocess

from btg.paths import BTGUARDCTL, START_TIMEOUT
from btg.procfs import wait_for
from btg.victims import victim_path

# Each sequence a terminal would act on, and how ESCAPE_TEXT shows it.
HOSTILE = b"\xc2\x9b2K\xe2\x80\xae\xe2\x81\xa6\x1b7m\xff!"
RAW = [b"\xc2\x9b", b"\xe2\x80\xae", b"\xe2\x81\xa6", b"\x1b", b"\xff"]
TEXT = b"\\u009b2K\\u202e\\u2066"           # ESC in argv: '?' from the daemon (procfs.c)
TEXT_PATH = TEXT + b"\\x1b7m\\xff!"       # in a path, every byte as it is


def ctl(daemon, *args):
    p = subprocess.run([str(BTGUARDCTL), "--socket", daemon.socket, *map(str, args)],
                       capture_output=True, timeout=60)
    return p.returncode, p.stdout, p.stderr


def no_raw(out, what):
    for seq in RAW:
        assert seq not in out, f"{what} holds {seq!r} raw: {out!r}"


def hostile_victim(victim):
    """idle from a hostile path, argv[0] hostile, a hostile-named object
    defining backtrace() preloaded."""
    d = os.fsencode(victim.dir)
    exe = d + b"/idle" + HOSTILE
    lib = d + b"/lib" + HOSTILE + b".so"
    shutil.copy(victim_path("idle"), exe)
    shutil.copy(victim_path("libbtpre"), lib)
    env = {**os.environb, b"LD_PRELOAD": lib}
    proc = subprocess.Popen([b"x" + HOSTILE, b"1"], executable=exe, env=env,
                            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE)
    victim.victims.append(proc)             # killed at teardown with the others
    ready, _, _ = select.select([proc.stdout], [], [], START_TIMEOUT)
    assert ready and proc.stdout.readline() == b"ready\n", proc.poll()
    return proc, exe, lib


def test_every_format_escapes_what_a_process_chose(daemon, victim):
    proc, exe, lib = hostile_victim(victim)

    # The table (a selector): the command line, escaped, on one row.
    rc, out, err = ctl(daemon, "status", "--exe", os.fsdecode(exe), "--verbose")
    assert rc == 0, (out, err)
    no_raw(out, "the table")
    rows = [line for line in out.splitlines() if line.lstrip().startswith(b"%d " % proc.pid)]
    assert len(rows) == 1, out
    assert rows[0].endswith(b"x" + TEXT + b"?7m\\xff! 1"), rows[0]
    # --verbose lists the preloaded object under it, escaped.
    assert b"lib" + TEXT_PATH + b".so" in out, out

    # The lines format: the sites' object paths.
    rc, out, err = ctl(daemon, "status", proc.pid, "--verbose")
    assert rc == 0, (out, err)
    no_raw(out, "the lines format")
    assert b"lib" + TEXT_PATH + b".so" in out, out

    # JSON: valid UTF-8, parsed strictly, the characters given back (the
    # invalid byte as U+FFFD).
    rc, out, err = ctl(daemon, "--json", "status", proc.pid)
    assert rc == 0, (out, err)
    no_raw(out, "JSON")
    assert all(b >= 0x20 or b == 0x0a for b in out), out
    (res,) = [json.loads(line.decode("utf-8", errors="strict"), strict=True)
              for line in out.splitlines()]
    assert res["command"].startswith("x\u009b2K\u202e\u2066"), res
    objects = [s["object"] for s in res["sites"]]
    assert os.fsdecode(lib).replace("\udcff", "\ufffd") in objects, objects

    # The daemon's log names the executable, escaped.
    wait_for(lambda: f"status pid={proc.pid} ".encode() in daemon.log_path.read_bytes(),
             "the action log line")
    log = daemon.log_path.read_bytes()
    no_raw(log, "the daemon's log")
    assert b"/idle" + TEXT_PATH + b" by " in log, log[-2000:]
    for line in log.splitlines():
        assert line.startswith(b"btguardd: "), f"not one record per line: {line!r}"
