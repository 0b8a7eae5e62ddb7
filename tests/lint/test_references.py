# SPDX-License-Identifier: MIT
"""References inside the tree still point somewhere.

A comment or document that cites a section of a Markdown document by its
title (SECURITY.md, "What a refused caller learns") names a heading, or a
bold paragraph title, that the document has.  Needs no build (part of
`make check-quick`).
"""

import re
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]

# FILE.md, "Title" / FILE.md ("Title" - the title may wrap across comment lines.
CITATION = re.compile(r'\b([A-Z][A-Z_]*\.md)[,:]?\s*\(?"([A-Z][\w ,\'\-]{2,118})"')
# A line break inside a C, shell or Python comment, with its comment marker.
COMMENT_BREAK = re.compile(r"\n[ \t]*(?:\*(?!/)|#|//)?[ \t]*")


def tracked():
    out = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, check=True,
                         capture_output=True).stdout.decode()
    return [REPO / f for f in out.split("\0") if f]


def titles(doc):
    text = doc.read_text()
    heads = re.findall(r"^#+\s+(.*?)\s*$", text, re.M)
    bold = re.findall(r"\*\*([^*]+?)\.?\*\*", text)
    return {t.rstrip(".") for t in heads + bold}


def test_cited_sections_exist():
    files = tracked()
    docs = {}
    for f in files:
        if f.suffix == ".md":
            docs.setdefault(f.name, []).append(f)
    stale = []
    for f in files:
        if not f.is_file() or f.suffix not in (".c", ".h", ".py", ".md", ".scd", ".mk", ""):
            continue
        try:
            text = COMMENT_BREAK.sub(" ", f.read_text())
        except UnicodeDecodeError:
            continue
        for name, title in CITATION.findall(text):
            if name not in docs:
                continue
            title = " ".join(title.split()).rstrip(".")
            if not any(title in titles(d) for d in docs[name]):
                stale.append(f'{f.relative_to(REPO)}: {name}, "{title}"')
    assert not stale, "citations of sections that do not exist: " + "; ".join(stale)
