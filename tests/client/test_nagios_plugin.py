# SPDX-License-Identifier: MIT
"""btguardctl as a monitoring plugin: what --format=nagios promises before
any verdict.  A usage error is UNKNOWN (3), never CRITICAL (2), however
the format was spelled (one word, two words, getopt's abbreviations), and
with any other format it is the ordinary usage error (2).  The UNKNOWN
line's text never holds a '|': the monitoring-plugins guidelines make the
first one the start of the performance data.

No daemon: usage errors send nothing, and the unreachable socket is the
UNKNOWN that needs none.
"""

import subprocess

import pytest

from btg.paths import BTGUARDCTL

FORMATS = ("lines", "json", "table", "prometheus", "nagios")


def spellings(fmt):
    """Every way getopt_long reads --format FMT."""
    return [[f"--format={fmt}"], ["--format", fmt], [f"--form={fmt}"], ["--form", fmt]]


# Usage errors whatever the format: (arguments, where the format option goes).
USAGE_ERRORS = [
    (["status", "--bogus"], "both"),
    (["status", "0"], "both"),
    (["status", "12a"], "both"),
    (["status"], "both"),
    (["frobnicate", "1"], "both"),
    (["--timeout", "x", "status", "1"], "both"),
    (["status", "--all", "--critical=x"], "both"),
    (["status", "--all", "--critical", "x"], "both"),
    (["status", "--all", "--warning=-1"], "both"),
    (["status", "--all", "--warning", "-1"], "both"),
    (["status", "--all", "--output="], "both"),
    (["status", "--all", "--output", ""], "both"),
    (["status", "1", "--deadline"], "first"),       # the missing value must come last
]


def run(args, sock="/nonexistent/btguard.sock"):
    env_free = {"PATH": "/usr/bin:/bin"}
    return subprocess.run([str(BTGUARDCTL), "--socket", sock, *args], capture_output=True,
                          text=True, timeout=30, env=env_free)


def placements(fmt_args, args, where):
    yield fmt_args + args
    if where == "both":
        yield args + fmt_args


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("args,where", USAGE_ERRORS, ids=lambda a: " ".join(a) if
                         isinstance(a, list) else a)
def test_usage_errors_exit_3_with_nagios_and_2_otherwise(fmt, args, where):
    for spelled in spellings(fmt):
        for argv in placements(spelled, args, where):
            p = run(argv)
            assert p.stderr.startswith("btguardctl: "), (argv, p)
            if fmt == "nagios":
                assert p.returncode == 3, (argv, p)
                assert p.stdout.startswith("BTGUARD UNKNOWN - ") and \
                    p.stdout.count("\n") == 1, (argv, p)
            else:
                assert p.returncode == 2, (argv, p)
                assert p.stdout == "", (argv, p)


@pytest.mark.parametrize("json_opt", ["--json", "-j"])
def test_json_options_usage_errors_exit_2(json_opt):
    for args, _ in USAGE_ERRORS:
        p = run([json_opt, *args])
        assert p.returncode == 2 and p.stdout == "", (args, p)


def test_a_value_of_another_option_is_not_a_format():
    """-s takes "--format" as its path; "nagios" is then the command."""
    p = subprocess.run([str(BTGUARDCTL), "-s", "--format", "nagios", "1"],
                       capture_output=True, text=True, timeout=30)
    assert p.returncode == 2 and p.stdout == "", p
    assert "unknown command 'nagios'" in p.stderr, p
    # After "--" nothing is an option of btguardctl's.
    p = run(["status", "--", "--format=nagios"])
    assert p.returncode == 2 and p.stdout == "", p


def test_a_bar_in_the_unknown_text_is_not_the_perfdata_separator():
    p = run(["status", "--all", "--format=nagios"], sock="/nonexistent/a|b.sock")
    assert p.returncode == 3, p
    assert p.stdout == "BTGUARD UNKNOWN - cannot connect to /nonexistent/a\\x7cb.sock: " \
                       "No such file or directory (is btguardd running?)\n", p
    # stderr is for people: the path as given.
    assert "/nonexistent/a|b.sock" in p.stderr, p
    # A usage error quoting what was typed.
    p = run(["status", "--format", "nagios", "1|2"])
    assert p.returncode == 3 and "|" not in p.stdout, p
    assert p.stdout.startswith("BTGUARD UNKNOWN - invalid PID '1\\x7c2'"), p
