# SPDX-License-Identifier: MIT
"""The manual pages say what the programs do.

This file owns the agreement between each program's `--help` and its
manual page source (man/*.scd): the same options, with the same short
forms and argument names, both ways; the same exit statuses and
environment variables; the sections an administrator looks for; every
btguard page a text refers to exists; and the journal MESSAGE_IDs of
btguardd(8) are the ones daemon/request/record.c sends.  An option added to the
program and not to its page (or the reverse) fails here.  Also
tests/README.md's table of planted bugs: every mutant of
tests/mutants/mutants.py, with the tests that catch it.

Only the texts are compared, so no root and no daemon are needed: both
programs print --help before any privilege check.
"""

import re
import subprocess

import pytest

from btg.paths import BTGUARDCTL, BTGUARDD, REPO

MAN = REPO / "man"
PAGES = {"btguardctl": (BTGUARDCTL, MAN / "btguardctl.1.scd"),
         "btguardd": (BTGUARDD, MAN / "btguardd.8.scd")}
REQUIRED_SECTIONS = ["NAME", "SYNOPSIS", "DESCRIPTION", "OPTIONS", "EXIT STATUS",
                     "ENVIRONMENT", "FILES", "EXAMPLES", "SECURITY", "SEE ALSO"]

# "-s, --socket=PATH", "--tree", "-i, --idle-exit SECONDS"
OPTION = re.compile(r"^(?:(-[A-Za-z0-9]),\s+)?(--[a-z][a-z0-9-]*)(?:[= ](\S+))?")


def help_text(program):
    p = subprocess.run([str(program), "--help"], capture_output=True, text=True,
                       timeout=30)
    assert p.returncode == 0, p.stderr
    return p.stdout


def help_sections(text):
    """{header: [item heads]} of a --help text.

    A header is a line at the left margin ("Options:", "EXIT STATUS"); an
    item is a line indented at most 6 columns under it (the option, code
    or variable being described), without the description after two
    spaces.  Deeper lines are descriptions."""
    sections, current = {}, None
    for line in text.splitlines():
        if line and not line[0].isspace():
            current = sections.setdefault(line.rstrip(":").upper(), [])
        elif current is not None and re.match(r"^ {1,6}\S", line):
            current.append(re.split(r"\s{2,}", line.strip())[0])
    return sections


def man_sections(path):
    """{header: [item heads]} of an scdoc page: "# HEADER" lines, and items
    at the left margin that start with *bold*, with the markup removed."""
    sections, current = {}, None
    for line in path.read_text().splitlines():
        if line.startswith("# "):
            current = sections.setdefault(line[2:].strip(), [])
        elif current is not None and line.startswith("*"):
            # _underline_ marks; an underscore inside a name stays.
            line = re.sub(r"\*|(?<![A-Za-z0-9])_|_(?![A-Za-z0-9])", "", line)
            current.append(line.strip())
    return sections


def options(items):
    """{long: (short, argument)} of option item heads."""
    found = {}
    for item in items:
        m = OPTION.match(item)
        if m:
            found[m.group(2)] = (m.group(1), m.group(3))
    return found


def exit_codes(items):
    return {int(m.group(1)) for i in items if (m := re.match(r"^(\d+)\b", i))}


def env_vars(items):
    return {v for i in items for v in re.findall(r"\b[A-Z][A-Z0-9_]{2,}\b", i.split("=")[0])}


def pick(sections, *names):
    for n in names:
        if n in sections:
            return sections[n]
    pytest.fail(f"none of the sections {names} in {sorted(sections)}")


@pytest.fixture(params=sorted(PAGES))
def page(request):
    program, source = PAGES[request.param]
    if not program.exists():
        pytest.fail(f"{program} missing: run `make`")
    return request.param, help_sections(help_text(program)), man_sections(source)


def test_man_page_has_the_usual_sections(page):
    name, _, man = page
    missing = [s for s in REQUIRED_SECTIONS if s not in man]
    assert not missing, f"{name}'s manual page lacks {missing}"


def test_same_options_both_ways(page):
    name, helps, man = page
    in_help = options(pick(helps, "OPTIONS"))
    in_man = options(man["OPTIONS"])
    assert in_help, f"no options parsed from {name} --help"
    assert sorted(set(in_help) - set(in_man)) == [], \
        f"in `{name} --help` but not in its manual page"
    assert sorted(set(in_man) - set(in_help)) == [], \
        f"in {name}'s manual page but not in `{name} --help`"
    assert in_help == in_man, f"short forms or arguments differ for {name}"


def test_man_synopsis_names_real_options(page):
    name, helps, man = page
    known = set(options(pick(helps, "OPTIONS")))
    source = PAGES[name][1].read_text()
    synopsis = source.split("# SYNOPSIS", 1)[1].split("\n# ", 1)[0]
    assert set(re.findall(r"--[a-z][a-z0-9-]*", synopsis)) <= known


def test_same_exit_statuses(page):
    name, helps, man = page
    codes = exit_codes(pick(helps, "EXIT STATUS"))
    assert codes and codes == exit_codes(man["EXIT STATUS"]), name


def test_same_environment(page):
    name, helps, man = page
    names = env_vars(pick(helps, "ENVIRONMENT"))
    assert names and names == env_vars(man["ENVIRONMENT"]), name


def test_referenced_btguard_pages_exist():
    texts = {f"{n} --help": help_text(p) for n, (p, _) in PAGES.items()}
    texts.update({s.name: s.read_text() for s in MAN.glob("*.scd")})
    pages = {s.name[:-len(".scd")] for s in MAN.glob("*.scd")}
    for where, text in texts.items():
        for name, section in re.findall(r"\b(btguard\w*)\**\((\d)\)", text):
            assert f"{name}.{section}" in pages, f"{where} refers to {name}({section})"


def test_message_ids_match_the_daemon():
    source = (REPO / "daemon" / "request" / "record.c").read_text()
    ids = dict(re.findall(r'#define MESSAGE_ID_(\w+)\s+"([0-9a-f]{32})"', source))
    assert sorted(ids) == ["DENIED", "FAILED", "GUARDED", "UNGUARDED"], ids
    page = (MAN / "btguardd.8.scd").read_text()
    for kind, mid in ids.items():
        assert re.search(rf"^\*{mid}\*\n\t{kind.lower()}: ", page, re.M), \
            f"btguardd(8) does not document MESSAGE_ID {mid} as '{kind.lower()}'"


def test_tests_readme_lists_every_mutant():
    import sys
    sys.path.insert(0, str(REPO / "tests" / "mutants"))
    from mutants import MUTANTS
    readme = (REPO / "tests" / "README.md").read_text()
    rows = {line.split(" | ")[0][2:]: line for line in readme.splitlines()
            if line.startswith("| ") and " | " in line}
    for name, _path, _edits, tests in MUTANTS:
        assert name in rows, f"tests/README.md lacks the mutant {name!r}"
        for t in tests:
            assert (t if t != "unit" else "make unit") in rows[name], (name, t)
    assert f"**{len(MUTANTS)} of {len(MUTANTS)} caught**" in readme
