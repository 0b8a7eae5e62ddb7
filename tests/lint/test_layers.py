# SPDX-License-Identifier: MIT
"""The daemon's layers (daemon/<layer>/): calls only go down.

Each folder under daemon/ is a layer, ranked below; a file may include
headers of its own layer or of a lower one, never of a higher.  proto/ and
daemon/arch/<cpu>/ are below every layer, daemon/main.c above them all.
daemon/target/ is no layer: code that runs inside a guarded process,
built freestanding, which includes its own headers alone (the daemon may
include them, as it does arch's).
Within engine/, the ptrace files keep their boundary: ptrace.c alone calls
ptrace(2), and their private header stays theirs.
Needs no build, no root and no target process (part of `make check-quick`).
"""

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DAEMON = REPO / "daemon"

# Lowest first; the Makefile's DAEMON_LAYERS lists the same folders.
LAYERS = ["base", "node", "engine", "request", "watch", "serve"]
BOTTOM = -1                # proto/ and daemon/arch/<cpu>/
TOP = len(LAYERS)          # daemon/main.c

# Includes known to point up, each with why it is tolerated for now.
# (file, header it includes)
KNOWN_UPWARD = set()   # (file, header) pairs still to cut, each with its reason

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


NOT_LAYERS = ("arch", "target")


def daemon_files():
    return sorted(p for p in DAEMON.rglob("*.[ch]")
                  if p.relative_to(DAEMON).parts[0] not in NOT_LAYERS)


def rank_of_file(path):
    rel = path.relative_to(DAEMON)
    if len(rel.parts) == 1:
        assert rel.name == "main.c", f"daemon/{rel}: every daemon file but main.c lives in a layer"
        return TOP
    assert rel.parts[0] in LAYERS, f"daemon/{rel}: {rel.parts[0]}/ is not a layer {LAYERS}"
    return LAYERS.index(rel.parts[0])


def header_ranks():
    """Header name -> rank, as the compiler's quote path finds it."""
    ranks = {}
    for p in (REPO / "proto").glob("*.h"):
        ranks[p.name] = BOTTOM
    for p in (DAEMON / "arch").rglob("*.h"):
        ranks[p.name] = BOTTOM
    for p in (DAEMON / "target").glob("*.h"):
        ranks[p.name] = BOTTOM
    ranks["walk_code.h"] = BOTTOM   # generated from daemon/target/walk_code.c (build/gen/)
    for p in daemon_files():
        if p.suffix == ".h":
            assert p.name not in ranks, f"{p.name} exists twice on the quote path"
            ranks[p.name] = rank_of_file(p)
    return ranks


def upward_includes():
    ranks = header_ranks()
    found = []
    for p in daemon_files():
        mine = rank_of_file(p)
        for name in INCLUDE.findall(p.read_text()):
            assert name in ranks, f"{p.relative_to(REPO)} includes {name}, found nowhere on the quote path"
            if ranks[name] > mine:
                found.append((str(p.relative_to(DAEMON)), name))
    return found


def test_every_layer_is_a_folder_the_makefile_builds():
    folders = sorted(d.name for d in DAEMON.iterdir() if d.is_dir() and d.name not in NOT_LAYERS)
    assert folders == sorted(LAYERS)
    makefile = (REPO / "Makefile").read_text()
    m = re.search(r"^DAEMON_LAYERS\s*:=\s*(.*)$", makefile, re.M)
    assert m and m.group(1).split() == LAYERS


def test_includes_point_down():
    upward = [u for u in upward_includes() if u not in KNOWN_UPWARD]
    assert not upward, "a lower layer includes a higher one's header: " + \
        ", ".join(f"daemon/{f} includes {h}" for f, h in upward)


def test_known_exceptions_still_exist():
    # An exception the code no longer needs is removed from the list.
    stale = KNOWN_UPWARD - set(upward_includes())
    assert not stale, f"no longer upward, drop from KNOWN_UPWARD: {sorted(stale)}"


def test_documents_name_daemon_files_that_exist():
    """A path daemon/.../x.c or .h named in a document or test exists (the
    move into layers, or a merge from before it, leaves none stale)."""
    path = re.compile(r"daemon/(?:[a-z_]+/)*[a-z_0-9]+\.[ch]\b")
    missing = []
    for doc in [*REPO.glob("*.md"), *REPO.glob("docs/*.md"), *REPO.glob("man/*.scd"),
                *REPO.glob("*/*.md"), *REPO.glob("tests/*/*.md"), *REPO.glob("tests/*/*.py"),
                *REPO.glob("tests/integration/btg/*.py"), *REPO.glob("tests/*/*.mk"),
                *REPO.glob("tests/*/*.c"), REPO / "Makefile"]:
        for p in set(path.findall(doc.read_text(errors="replace"))):
            if not (REPO / p).exists():
                missing.append(f"{doc.relative_to(REPO)}: {p}")
    assert not missing, "documents name daemon files that do not exist: " + "; ".join(sorted(missing))


def test_target_code_includes_its_own_headers_alone():
    """What runs inside a guarded process sees no daemon header and no libc
    one (it is built freestanding): its own headers and <stddef.h>,
    <stdint.h> alone."""
    target = DAEMON / "target"
    own = {p.name for p in target.glob("*.h")}
    system = re.compile(r'^\s*#\s*include\s+<([^>]+)>', re.M)
    for p in [*target.glob("*.c"), *target.glob("*.h")]:
        text = p.read_text()
        assert set(INCLUDE.findall(text)) <= own, f"{p.relative_to(REPO)} includes a daemon header"
        assert set(system.findall(text)) <= {"stddef.h", "stdint.h"}, \
            f"{p.relative_to(REPO)} includes a library header"


def test_hacking_names_every_daemon_file():
    """HACKING.md's Layout names every module (a header alone when it has
    no .c), so the map does not fall behind the tree again."""
    hacking = (REPO / "HACKING.md").read_text()
    files = daemon_files() + sorted((DAEMON / "target").glob("*.[ch]"))
    stems_with_c = {p.stem for p in files if p.suffix == ".c"}
    missing = [str(p.relative_to(DAEMON)) for p in files
               if (p.suffix == ".c" or p.stem not in stems_with_c)
               and not re.search(rf"(?<![\w/]){re.escape(p.name)}`|/{re.escape(p.name)}`", hacking)]
    assert not missing, "HACKING.md's Layout does not name: " + ", ".join(missing)


def test_hacking_names_every_proto_file():
    """The same for proto/, which the daemon, the client and the fuzzers link:
    each of its sources is named in the Layout with what it owns."""
    hacking = (REPO / "HACKING.md").read_text()
    missing = [p.name for p in sorted((REPO / "proto").glob("*.c"))
               if not re.search(rf"`proto/{re.escape(p.name)}`", hacking)]
    assert not missing, "HACKING.md's Layout does not name: proto/" + ", proto/".join(missing)


# Modules (x.c with x.h; x_int.h, shared by x's files, is x's) that include one another
# in a ring, each ring with why it is tolerated for now.
KNOWN_RINGS = []   # module sets still including one another, each with its reason


def module_of(path):
    return path.stem[:-len("_int")] if path.stem.endswith("_int") else path.stem


def include_rings():
    """Strongly connected groups of more than one module in the include graph."""
    files = daemon_files()
    names = {p.name: module_of(p) for p in files if p.suffix == ".h"}
    graph = {module_of(p): set() for p in files}
    for p in files:
        for name in INCLUDE.findall(p.read_text()):
            if name in names and names[name] != module_of(p):
                graph[module_of(p)].add(names[name])
    # Tarjan's algorithm; the graph is small.
    index, low, stack, on, rings = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            ring = set()
            while True:
                w = stack.pop()
                on.discard(w)
                ring.add(w)
                if w == v:
                    break
            if len(ring) > 1:
                rings.append(ring)

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return rings


def test_no_new_include_rings():
    """Within a layer too, modules call one way: stackcheck.c uses the scan
    worker, which needs only the scan primitives (stackcheck_scan.c)."""
    rings = [r for r in include_rings() if r not in KNOWN_RINGS]
    assert not rings, f"modules including one another: {rings}"
    stale = [r for r in KNOWN_RINGS if r not in include_rings()]
    assert not stale, f"no longer a ring, drop from KNOWN_RINGS: {stale}"


# A function declared in a header (the module's interface) and a static of
# the same name elsewhere read as one function in a grep or a backtrace.
EXPORTED = re.compile(r"^(?!static\b)[a-z][\w \*]*?\b([a-z_]\w*)\(", re.M)
STATIC_DEF = re.compile(r"^static\b[\w \*]*?\b([a-z_]\w*)\([^;]*$", re.M)


def test_no_static_shares_an_exported_functions_name():
    exported = {}
    for h in sorted(DAEMON.rglob("*.h")) + sorted((REPO / "proto").glob("*.h")):
        for name in EXPORTED.findall(h.read_text()):
            exported.setdefault(name, h.relative_to(REPO))
    clashes = [f"{c.relative_to(REPO)}: static {name}() beside {exported[name]}'s"
               for c in sorted(DAEMON.rglob("*.c"))
               for name in STATIC_DEF.findall(c.read_text()) if name in exported]
    assert not clashes, "\n".join(clashes)
    assert "watch_events_sync" in exported, "the pattern finds no exported function any more"


def test_no_two_statics_share_a_name():
    """Nor two statics of two files: a name says which room of the house a
    function belongs to, and a reader (or a debugger's breakpoint) should
    not have to ask which finish() or refuse() is meant."""
    where = {}
    for c in sorted(DAEMON.rglob("*.c")):
        for name in set(STATIC_DEF.findall(c.read_text())):
            where.setdefault(name, []).append(str(c.relative_to(REPO)))
    shared = {name: files for name, files in where.items() if len(files) > 1}
    assert not shared, "\n".join(f"{name}(): {', '.join(files)}" for name, files in sorted(shared.items()))
    assert "place" in where, "the pattern finds no static function any more"


# The ptrace boundary (HACKING.md): ptrace.h poisons the name ptrace unless
# BTGUARD_PTRACE_IMPL is defined first, which ptrace.c alone does, so it alone
# can call ptrace(2); the ptrace files share ptrace_int.h (ptrace_call() among
# its functions), which nobody else includes.
PTRACE_IMPL = {"daemon/engine/ptrace.c"}
PTRACE_FILES = {"daemon/engine/ptrace.c", "daemon/engine/ptworld.c", "daemon/engine/ptfollow.c"}


def source_files():
    """Every C file and makefile of the tree that a build reads (build/ left out:
    the planted bugs' scratch copy of the tree lives there)."""
    files = [p for d in ("proto", "daemon", "client", "tests", "bench", "slurm")
             for p in (REPO / d).rglob("*") if p.suffix in (".c", ".h", ".mk")]
    return sorted(files + [REPO / "Makefile"])


def test_only_ptrace_c_lifts_the_ptrace_poison():
    define = re.compile(r"^\s*#\s*define\s+BTGUARD_PTRACE_IMPL\b|-DBTGUARD_PTRACE_IMPL\b", re.M)
    found = {str(p.relative_to(REPO)) for p in source_files() if define.search(p.read_text())}
    assert found == PTRACE_IMPL, f"BTGUARD_PTRACE_IMPL defined by {sorted(found)}"


def test_only_the_ptrace_files_include_ptrace_int_h():
    found = {str(p.relative_to(REPO)) for p in source_files()
             if "ptrace_int.h" in INCLUDE.findall(p.read_text())}
    assert found == PTRACE_FILES, f"ptrace_int.h included by {sorted(found)}"
