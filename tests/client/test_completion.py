# SPDX-License-Identifier: MIT
"""The bash completion of btguardctl (completion/btguardctl).

Each case runs a fresh bash that loads bash-completion and our file, sets
COMP_WORDS/COMP_CWORD/COMP_LINE/COMP_POINT as readline would for the
command line being typed, calls _btguardctl, and prints COMPREPLY.  The
btguardctl it completes is the one built here, first on PATH, so the
options offered are read from its real --help, and the test derives what
must be offered (every selector and option) from that --help too; stand-ins
whose --help has one option more or less show the completion follows the
binary, not a list.
"""

import os
import re
import shutil
import subprocess
import tempfile
from pathlib import Path

import pytest

from btg.paths import BTGUARDCTL, REPO
from btg.procfs import wait_for
from btg.victims import stop_started, user_prefix

COMPLETION = REPO / "completion" / "btguardctl"
BASH_COMPLETION = Path("/usr/share/bash-completion/bash_completion")

HARNESS = r'''
source "$BASH_COMPLETION" || exit 99
source "$COMPLETION" || exit 98
COMP_WORDS=("$@")
COMP_CWORD=$(($# - 1))
COMP_LINE="$*"
COMP_POINT=${#COMP_LINE}
COMPREPLY=()
_btguardctl btguardctl "${COMP_WORDS[COMP_CWORD]}" "${COMP_WORDS[COMP_CWORD - 1]}"
printf '%s\n' "${COMPREPLY[@]}"
'''


@pytest.fixture
def shared_dir():
    """A scratch directory the test user can read too (pytest's is 0700)."""
    d = Path(tempfile.mkdtemp(prefix="btg-completion-"))
    os.chmod(d, 0o755)
    yield d
    shutil.rmtree(d, ignore_errors=True)


@pytest.fixture
def complete(shared_dir):
    tmp_path = shared_dir
    if not BASH_COMPLETION.exists():
        pytest.skip("bash-completion not installed")
    if not BTGUARDCTL.exists():
        pytest.fail(f"{BTGUARDCTL} missing: run `make`")
    bindir = tmp_path / "bin"
    bindir.mkdir()
    shutil.copy(BTGUARDCTL, bindir / "btguardctl")

    def run(*words, user=None, path_extra=()):
        env = {"PATH": ":".join([*map(str, path_extra), str(bindir), os.environ["PATH"]]),
               "HOME": str(tmp_path), "BASH_COMPLETION": str(BASH_COMPLETION),
               "COMPLETION": str(COMPLETION), "LC_ALL": "C.UTF-8"}
        p = subprocess.run([*user_prefix(user), "bash", "--norc", "--noprofile", "-c",
                            HARNESS, "harness", "btguardctl", *words],
                           capture_output=True, text=True, env=env, timeout=60)
        assert p.returncode == 0, p.stderr
        return [line for line in p.stdout.splitlines() if line]
    return run


def help_sections(text=None):
    """{heading: options} for the Selectors and Options sections of
    btguardctl --help: a section is a paragraph (blank lines between them)
    whose heading starts with that word, however many lines the heading
    takes; an option is "-s", "--socket=" for "-s, --socket=PATH"."""
    if text is None:
        text = subprocess.run([str(BTGUARDCTL), "--help"], capture_output=True, text=True,
                              check=True, timeout=30).stdout
    sections = {}
    for para in re.split(r"\n\s*\n", text):
        heading = para.split("\n", 1)[0]
        name = next((n for n in ("Selectors", "Options") if heading.startswith(n)), None)
        if name is None:
            continue
        found = set()
        for m in re.finditer(r"^ {1,6}(?:(-\w),\s+)?(--[\w-]+)(=?)", para, re.M):
            found |= {m.group(1), m.group(2) + m.group(3)} - {None}
        sections[name] = found
    return sections


@pytest.fixture
def sleeper(shared_dir):
    """A process with a command name nobody else has; returns (pid, name)."""
    started = []

    def start(user=None):
        name = f"btgc{os.getpid() % 100000:05d}{len(started)}"
        exe = shared_dir / name
        shutil.copy("/bin/sleep", exe)
        os.chmod(exe, 0o755)
        p = subprocess.Popen([*user_prefix(user), str(exe), "600"])
        started.append(p)
        return p.pid, name
    yield start
    for p in started:
        stop_started(p)


def test_verbs_first(complete):
    assert complete("") == ["guard", "unguard", "status", "run", "policy", "reload"]
    assert complete("run", "") == ["--"]
    # policy and reload take no PID: nothing is offered after them.
    assert complete("policy", "") == []
    assert complete("rel") == ["reload"]
    assert complete("un") == ["unguard"]
    # Options and their values come before the command, and are skipped.
    assert complete("--json", "-s", "/tmp/x.sock", "--deadline=9", "st") == ["status"]


def test_selectors_and_options_are_those_of_help(complete):
    """Everything --help lists under Selectors and Options is offered, and
    nothing else; the lists come from --help, never from this test."""
    sections = help_sections()
    selectors, options = sections["Selectors"], sections["Options"]
    # The help's own shape: the selectors' heading wraps onto a second line,
    # which is what once stopped the completion's parser.
    assert "--all" in selectors and len(selectors) >= 5, selectors
    assert "--json" in options, options
    offered = set(complete("-"))
    assert selectors <= offered, f"selectors not offered: {sorted(selectors - offered)}"
    assert offered == selectors | options
    # After the command too (getopt permutes), e.g. guard's selectors.
    assert selectors <= set(complete("status", "--")), selectors
    for sel in selectors:
        assert sel in complete("guard", sel[:-1]), sel
    assert complete("--ti") == ["--timeout="]
    assert complete("--tr") == ["--tree"]
    assert complete("guard", "--js") == ["--json"]


def test_option_values(complete, tmp_path):
    sock = tmp_path / "ctl.sock"
    sock.touch()
    assert complete("--socket", str(tmp_path / "ctl")) == [str(sock)]
    assert complete("-s", str(tmp_path / "ctl")) == [str(sock)]
    assert complete(f"--socket={tmp_path / 'ctl'}") == [str(sock)]
    assert complete("--deadline", "") == []
    assert complete("--timeout", "") == []


def test_the_options_of_the_client_being_completed(complete, tmp_path):
    """A client whose --help has one more option gets it; one whose --help
    lacks --unit does not get --unit; the real one has --unit, whose value
    completes to systemd's units."""
    real_help = subprocess.run([str(BTGUARDCTL), "--help"], capture_output=True,
                               text=True, check=True, timeout=30).stdout
    assert "      --unit=NAME" in real_help and "--frobnicate" not in real_help

    def client(name, help_text):
        d = tmp_path / name
        d.mkdir()
        (d / "help.txt").write_text(help_text)
        (d / "btguardctl").write_text(f"#!/bin/sh\ncat {d / 'help.txt'}\n")
        os.chmod(d / "btguardctl", 0o755)
        return d

    newer = client("newer", real_help.replace(
        "      --tree ", "      --frobnicate=HOW  a newer client's option\n      --tree "))
    older = client("older", re.sub(r"(?m)^      --unit=NAME.*\n", "", real_help))
    assert "--frobnicate=" in complete("--fr", path_extra=[newer])
    assert complete("--fr") == []
    assert complete("--u", path_extra=[older]) == ["--user="]
    assert sorted(complete("--u")) == ["--unit=", "--user="]

    systemd = tmp_path / "systemd"
    systemd.mkdir()
    (systemd / "systemctl").write_text(
        "#!/bin/sh\necho 'train.service loaded active running Training job'\n"
        "echo 'web.service loaded active running Web'\n")
    os.chmod(systemd / "systemctl", 0o755)
    assert complete("--unit", "tr", path_extra=[systemd]) == ["train.service"]
    assert complete("status", "--unit", "", path_extra=[systemd]) == ["train.service", "web.service"]


def test_pids_with_names(complete, sleeper):
    pid, name = sleeper()
    # By PID: the whole PID is a match on its own.
    assert str(pid) in complete("guard", str(pid))
    # Several matches are shown with their names; the only match is bare.
    shown = complete("status", str(pid)[:1])
    assert f"{pid} {name}" in shown and len(shown) > 1
    assert all(re.fullmatch(r"\d+ .+", s) for s in shown), shown
    # By command name: the one process of that name completes to its PID.
    assert complete("unguard", name[:-1]) == [str(pid)]
    assert complete("--tree", "guard", "1", name) == [str(pid)]


def test_names_a_process_chose_reach_the_terminal_escaped(complete):
    """A process names itself (prctl PR_SET_NAME) with a terminal escape and
    a vertical tab: the completion menu shows each such byte as "?", and a
    name typed as it is shown completes to its PID."""
    code = ("import ctypes, sys, time; "
            "ctypes.CDLL(None).prctl(15, sys.argv[1].encode('latin-1'), 0, 0, 0); "
            "time.sleep(600)")
    tag = f"{os.getpid() % 10000:04d}"
    names = [f"\x1b[2Kbe{tag}\x0b{i}" for i in range(2)]
    procs = [subprocess.Popen(["/usr/bin/python3", "-c", code, n]) for n in names]
    try:
        for p, n in zip(procs, names):
            wait_for(lambda: open(f"/proc/{p.pid}/comm", encoding="latin-1").read() == n + "\n",
                     "the process to take its name")
        shown = complete("status", f"?[2Kbe{tag}")
        assert sorted(shown) == sorted(f"{p.pid} ?[2Kbe{tag}?{i}" for i, p in enumerate(procs)), shown
        assert complete("status", f"?[2Kbe{tag}?1") == [str(procs[1].pid)]
    finally:
        for p in procs:
            stop_started(p)


def test_no_kernel_threads(complete):
    shown = complete("status", "2")
    assert "2 kthreadd" not in shown and "2" not in shown


def test_users_see_only_their_processes(complete, sleeper, test_user):
    root_pid, root_name = sleeper()
    user_pid, user_name = sleeper(user=test_user)
    assert complete("guard", root_name, user=test_user) == []
    assert complete("guard", user_name, user=test_user) == [str(user_pid)]
    assert str(root_pid) in complete("guard", str(root_pid))
