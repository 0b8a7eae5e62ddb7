# SPDX-License-Identifier: MIT
"""Authorization from SO_PEERCRED, end to end: a second user may act on its
own (ptraceable) processes only; root may act on anyone's.

The user comes from conftest's `test_user` (created if missing, removed
again only then); the client and victims run as that user through setpriv,
from world-readable copies, because the build tree need not be traversable
by other users.
"""

import os

from btg.procfs import wait_threads_running

def only(r, pid, action):
    assert len(r.results) == 1, r
    res = r.results[0]
    assert res["pid"] == pid and res["action"] == action, res
    return res


def assert_denied(daemon, user, action, pid):
    res = only(daemon.ctl(action, pid, user=user, check=1), pid, action)
    assert res["ok"] is False and res["error"] == "denied", res
    assert res["wrote"] is False, res
    assert res.get("sites", []) == [], f"a denied caller learned about the target: {res}"


def test_user_acts_on_own_process(daemon, victim, test_user):
    v = victim("idle", 2, user=test_user)
    st = os.stat(f"/proc/{v.pid}")
    assert (st.st_uid, st.st_gid) == test_user

    res = only(daemon.ctl("status", v.pid, user=test_user, check=0), v.pid, "status")
    assert res["ok"] is True and res["state"] == "unguarded", res
    res = only(daemon.ctl("guard", v.pid, user=test_user, check=0), v.pid, "guard")
    assert res["ok"] is True and res["state"] == "guarded" and res["wrote"] is True, res
    wait_threads_running(v.pid)
    res = only(daemon.ctl("unguard", v.pid, user=test_user, check=0), v.pid, "unguard")
    assert res["ok"] is True and res["state"] == "unguarded" and res["wrote"] is True, res
    wait_threads_running(v.pid)
    v.assert_alive()


def test_user_denied_on_root_process(daemon, victim, test_user):
    v = victim("idle", 2)
    for action in ("status", "guard", "unguard"):
        assert_denied(daemon, test_user, action, v.pid)
    # Nothing happened to root's process.
    res = only(daemon.ctl("status", v.pid, check=0), v.pid, "status")
    assert res["state"] == "unguarded", res
    wait_threads_running(v.pid)


def test_user_denied_on_other_gid(daemon, victim, test_user):
    # Same uid, but the gid is root's: the user could not ptrace it either.
    uid, _ = test_user
    v = victim("idle", 1, user=(uid, 0))
    for action in ("status", "guard"):
        assert_denied(daemon, test_user, action, v.pid)


def test_user_denied_on_nondumpable_process(daemon, victim, test_user):
    v = victim("idle", 1, "--nondumpable", user=test_user)
    for action in ("status", "guard"):
        assert_denied(daemon, test_user, action, v.pid)
    # Root still may.
    res = only(daemon.ctl("status", v.pid, check=0), v.pid, "status")
    assert res["ok"] is True and res["state"] == "unguarded", res


def test_root_acts_on_user_process(daemon, victim, test_user):
    v = victim.bt_loop(4, user=test_user)
    res = only(daemon.ctl("--deadline", 20000, "guard", v.pid, check=0), v.pid, "guard")
    assert res["ok"] is True and res["state"] == "guarded" and res["wrote"] is True, res
    wait_threads_running(v.pid)
    # And the user sees the result of root's action on its process.
    res = only(daemon.ctl("status", v.pid, user=test_user, check=0), v.pid, "status")
    assert res["state"] == "guarded", res
    res = only(daemon.ctl("--deadline", 20000, "unguard", v.pid, user=test_user, check=0),
               v.pid, "unguard")
    assert res["ok"] is True and res["state"] == "unguarded", res
    v.assert_alive()
