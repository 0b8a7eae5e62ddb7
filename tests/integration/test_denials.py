# SPDX-License-Identifier: MIT
"""What a refused caller learns: that it may not act on the PID, nothing
more (SECURITY.md, "What a refused caller learns").

  test_denial_names_no_owner        no uid, gid or setuid state in a denial;
  test_hidden_pid_answers_like_none a caller whose /proc is hidepid=invisible
                                    cannot tell a process it may not act on
                                    from a PID nobody has;
  test_tree_stays_within_reach      --tree lists and descends only through
                                    processes the caller may act on;
  test_rights_are_read_again_at_each_turn
                                    a non-root caller's rights are checked
                                    again when each target's turn comes, not
                                    only when the request arrived.

The hidepid view is a private mount namespace with its own proc mount,
made for the client only; the host's /proc is not touched.
"""

import json
import os
import re
import shutil
import signal
import subprocess
import time

import pytest

from btg.procfs import unused_pid
from btg.victims import start, user_prefix


def denial_text(pid):
    return f"you may not act on process {pid}"


def test_denial_names_no_owner(daemon, victim, test_user):
    uid, _ = test_user
    targets = [victim("idle", 1),                                   # root's
               victim("idle", 1, user=(uid, 0)),                    # another gid
               victim("idle", 1, "--nondumpable", user=test_user)]  # not dumpable
    for v in targets:
        for action in ("status", "guard", "unguard"):
            [res] = daemon.ctl(action, v.pid, user=test_user, check=1).results
            assert res["error"] == "denied" and res["message"] == denial_text(v.pid), res
            assert res.get("sites", []) == [] and res["wrote"] is False, res
    # The log, for the administrator, still says who owns what.
    assert re.search(r"refused: process \d+ belongs to uid 0", daemon.log()), daemon.log()[-3000:]


def ctl_in_hidepid_view(daemon, user, *args):
    """btguardctl as user, in a mount namespace whose /proc is hidepid=invisible."""
    if shutil.which("unshare") is None:
        pytest.skip("unshare not available")
    ctl = daemon.client_path(user)
    cmd = " ".join(user_prefix(user) + [ctl, "--socket", daemon.socket, "--json"] +
                   [str(a) for a in args])
    p = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c",
                        f"mount -t proc -o hidepid=invisible proc /proc && exec {cmd}"],
                       capture_output=True, text=True, timeout=60)
    return p.returncode, [json.loads(line) for line in p.stdout.splitlines() if line.strip()], p


def normalized(res, pid):
    """A result with its PID taken out, to compare two PIDs' answers."""
    out = dict(res)
    out["pid"] = "N"
    out["message"] = res["message"].replace(str(pid), "N")
    return out


def test_hidden_pid_answers_like_none(daemon, victim, test_user):
    hidden = victim("idle", 1)          # root's: hidden from the user by hidepid
    nobody = unused_pid()
    for action in ("status", "guard", "unguard"):
        rc, results, p = ctl_in_hidepid_view(daemon, test_user, action, hidden.pid, nobody)
        assert rc == 1 and len(results) == 2, (p.stdout, p.stderr)
        a, b = results
        assert a["error"] == "no-process", a
        assert normalized(a, hidden.pid) == normalized(b, nobody), (a, b)
    # The same user with an ordinary /proc sees the process, and is told it may not act.
    [res] = daemon.ctl("status", hidden.pid, user=test_user, check=1).results
    assert res["error"] == "denied", res
    # The user's own process is as visible as ever through the hidepid view.
    own = victim("idle", 1, user=test_user)
    rc, [res], p = ctl_in_hidepid_view(daemon, test_user, "status", own.pid)
    assert rc == 0 and res["ok"] is True and res["state"] == "unguarded", (p.stdout, p.stderr)


def test_tree_stays_within_reach(daemon, victim, test_user):
    # PID 1 is root's: only it is answered, none of the node's processes below it.
    r = daemon.ctl("--tree", "status", 1, user=test_user, check=1)
    assert [(x["pid"], x["error"]) for x in r.results] == [(1, "denied")], r.stdout[:2000]

    # The user's own process with a child it may not act on (not dumpable):
    # the parent is answered, the child is not even named.
    idle = victim.public_copy("idle")
    v = start(victim, user_prefix(test_user) +
              ["sh", "-c", f"{idle} 1 --nondumpable >/dev/null & exec {idle} 1"], "idle-parent")
    kids = []
    try:
        def child():
            with open(f"/proc/{v.pid}/task/{v.pid}/children") as f:
                found = [int(k) for k in f.read().split()]
            kids[:] = found
            return found and all(os.stat(f"/proc/{k}/status").st_uid == 0 for k in found)
        deadline = time.monotonic() + 20
        while not child():
            assert time.monotonic() < deadline, "the non-dumpable child never appeared"
            time.sleep(0.02)
        r = daemon.ctl("--tree", "status", v.pid, user=test_user, check=0)
        assert [x["pid"] for x in r.results] == [v.pid], r.stdout
        # Root may act on the child, so its tree has both.
        r = daemon.ctl("--tree", "status", v.pid, check=0)
        assert [x["pid"] for x in r.results] == [v.pid, *kids], r.stdout
    finally:
        for k in kids:
            try:
                os.kill(k, signal.SIGKILL)
            except ProcessLookupError:
                pass


def test_rights_are_read_again_at_each_turn(daemon, victim, test_user):
    """The user names its own process 4,096 times in one request.  Once the
    first answer is in, every target was authorized at arrival; then the
    process stops being dumpable.  The turns after that must refuse it: only
    root's status may keep what arrival read (nothing root's rights rest on
    can change for a pinned process)."""
    v = victim("idle", 1, "--nondumpable-on-usr1", user=test_user)
    n = 4096
    argv = user_prefix(test_user) + [daemon.client_path(test_user), "--socket", daemon.socket,
                                     "--json", "status"] + [str(v.pid)] * n
    p = subprocess.Popen(argv, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        first = json.loads(p.stdout.readline())
        assert first["ok"] is True and first["state"] == "unguarded", first
        os.kill(v.pid, signal.SIGUSR1)
        # Not dumpable: the kernel makes the files under /proc/PID root's.
        end = time.monotonic() + 10
        while os.stat(f"/proc/{v.pid}/status").st_uid != 0:
            assert time.monotonic() < end, "the victim never cleared its dumpable flag"
            time.sleep(0.001)
        rest = [json.loads(line) for line in p.stdout if line.strip()]
        p.wait(timeout=60)
    finally:
        if p.poll() is None:
            p.kill()
            p.wait()
    answers = [first] + rest
    assert len(answers) == n, p.stderr.read()
    kinds = ["ok" if a["ok"] else a["error"] for a in answers]
    # Allowed until the change, refused from then on, and never allowed again.
    assert set(kinds) == {"ok", "denied"}, sorted(set(kinds))
    first_denied = kinds.index("denied")
    print(f"allowed {first_denied} times of {n}, then refused")
    assert kinds[first_denied:] == ["denied"] * (n - first_denied), kinds
    assert all(a["message"] == denial_text(v.pid) for a in answers[first_denied:])
