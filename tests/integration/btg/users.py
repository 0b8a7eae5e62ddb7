# SPDX-License-Identifier: MIT
"""Unprivileged users for tests that need one: created only if missing,
deleted again only if created here.  Other users are never touched."""

import contextlib
import pwd
import subprocess


@contextlib.contextmanager
def system_user(name):
    """(uid, gid) of the system user `name` while the block runs."""
    created = False
    try:
        pwd.getpwnam(name)
    except KeyError:
        subprocess.run(["useradd", "-M", "-r", "-s", "/usr/sbin/nologin", name], check=True)
        created = True
    pw = pwd.getpwnam(name)
    assert pw.pw_uid != 0, name
    try:
        yield (pw.pw_uid, pw.pw_gid)
    finally:
        if created:
            subprocess.run(["userdel", name], check=False)
