"""The package layout: the layers of docs/design.md at package level, no
import cycle, SQL only in the store, and the rule that protects every
command line: the modules under shournal/capture/ run while a command is
recorded, so they import only the standard library, xxhash, each other,
the store and the bottom layer."""

from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
CAPTURE = REPO / "shournal" / "capture"

# Outside shournal.capture.* and shournal.store.*: the bottom layer of
# docs/design.md (what a recorded line is, which journal, the settings).
def _bottom_units() -> set[str]:
    text = (REPO / "docs" / "design.md").read_text()
    row = next(r for r in text.split("<!-- layers:", 1)[1].splitlines()
               if r.startswith("| bottom |"))
    return set(row.split("|")[2].replace("`", " ").split())


ALLOWED_SHOURNAL = {f"shournal.{u}" for u in _bottom_units()}
# The partial hash of file content.
ALLOWED_THIRD_PARTY = {"xxhash"}


def imported_modules(source: str) -> set[str]:
    """Every module ``source`` imports, function-level and TYPE_CHECKING
    imports included; ``from pkg import name`` counts as ``pkg.name``
    (a submodule or a name of ``pkg``: both need ``pkg``)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            assert node.level == 0, "relative imports are not used in shournal"
            assert node.module
            if node.module == "shournal":
                names.update(f"shournal.{a.name}" for a in node.names)
            else:
                names.add(node.module)
    return names


def allowed(name: str) -> bool:
    top = name.split(".")[0]
    if top in sys.stdlib_module_names or top in ALLOWED_THIRD_PARTY:
        return True
    if any(name == p or name.startswith(p + ".") for p in ("shournal.capture", "shournal.store")):
        return True
    return name in ALLOWED_SHOURNAL


CAPTURE_MODULES = sorted(CAPTURE.rglob("*.py"))


def test_the_capture_modules_are_found() -> None:
    assert {"listener.py", "daemon.py", "protocol.py"} <= {p.name for p in CAPTURE_MODULES}


@pytest.mark.parametrize("path", CAPTURE_MODULES, ids=lambda p: str(p.relative_to(CAPTURE)))
def test_capture_imports_only_the_standard_library_and_the_store(path: Path) -> None:
    bad = sorted(n for n in imported_modules(path.read_text()) if not allowed(n))
    assert bad == [], f"{path.relative_to(REPO)} imports {bad}"


def test_the_rule_sees_function_level_and_from_imports() -> None:
    code = (
        "import os\n"
        "from shournal import report\n"
        "def f():\n"
        "    from shournal.query.find import find_commands\n"
        "    import sqlalchemy\n"
    )
    assert sorted(n for n in imported_modules(code) if not allowed(n)) == [
        "shournal.query.find",
        "shournal.report",
        "sqlalchemy",
    ]


# -- import cycles ---------------------------------------------------------------------


def _modules() -> dict[str, Path]:
    mods = {}
    for path in (REPO / "shournal").rglob("*.py"):
        parts = list(path.relative_to(REPO).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        mods[".".join(parts)] = path
    return mods


def _runtime_imports(tree: ast.AST, *, at_import: bool) -> set[str]:
    """What ``tree`` imports when it runs (``at_import``: when the module
    is imported, not what its functions import later); never the imports
    under ``if TYPE_CHECKING:``, which only annotate.  ``from m import n``
    counts as ``m`` and ``m.n``."""
    names: set[str] = set()
    todo = [tree]
    while todo:
        node = todo.pop()
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            continue
        if at_import and isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.Lambda):
            continue
        if isinstance(node, ast.Import):
            names.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{a.name}" for a in node.names)
        todo.extend(ast.iter_child_nodes(node))
    return names


def import_graph(*, at_import: bool) -> dict[str, set[str]]:
    """Each shournal module -> the shournal modules it imports.  Imports
    of an ancestor package are left out: it is always imported first."""
    mods = _modules()
    return {
        name: {
            t for t in _runtime_imports(ast.parse(path.read_text()), at_import=at_import)
            if t in mods and t != name and not name.startswith(t + ".")
        }
        for name, path in mods.items()
    }


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components with more than one module."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    found: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_no_import_cycle_when_the_modules_are_imported() -> None:
    assert cycles(import_graph(at_import=True)) == []


def test_no_import_cycle_through_function_level_imports() -> None:
    assert cycles(import_graph(at_import=False)) == []


def test_the_cycle_finder_finds_a_cycle() -> None:
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert cycles(graph) == [["a", "b", "c"]]


# -- SQL lives in shournal/store/ ------------------------------------------------------


def sql_importers(sources: dict[str, str]) -> list[str]:
    """The modules outside shournal.store that import SQLAlchemy at run time
    (TYPE_CHECKING imports are annotations, not SQL)."""
    found = []
    for name, source in sources.items():
        if name == "shournal.store" or name.startswith("shournal.store."):
            continue
        tree = ast.parse(source)
        for node in ast.walk(tree):
            if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
                node.body = [ast.Pass()]
        if any(n.split(".")[0] == "sqlalchemy" for n in imported_modules(ast.unparse(tree))):
            found.append(name)
    return sorted(found)


def test_sql_is_written_only_in_the_store() -> None:
    sources = {
        ".".join(p.relative_to(REPO).with_suffix("").parts).removesuffix(".__init__"): p.read_text()
        for p in (REPO / "shournal").rglob("*.py")
    }
    assert sql_importers(sources) == []


def test_the_sql_rule_sees_a_function_level_import_but_not_an_annotation() -> None:
    sources = {
        "shournal.a": "def f():\n    from sqlalchemy import select\n",
        "shournal.b": "if TYPE_CHECKING:\n    from sqlalchemy import Connection\n",
        "shournal.store.c": "from sqlalchemy import select\n",
    }
    assert sql_importers(sources) == ["shournal.a"]


# -- the layers of docs/design.md, at package level ------------------------------------

DESIGN = REPO / "docs" / "design.md"


def layer_table(text: str) -> tuple[dict[str, str], dict[str, set[str]]]:
    """docs/design.md's table of layers: unit -> its layer, and layer ->
    what it may import (layer names, or ``unit.module`` for one module of a
    unit; "every layer above" is every layer but the narrow ones)."""
    body = text.split("<!-- layers:", 1)[1].split("<!-- /layers -->", 1)[0]
    rows = [line for line in body.splitlines() if line.startswith("| ") and "---" not in line]
    units: dict[str, str] = {}
    may: dict[str, set[str]] = {}
    for row in rows[1:]:
        layer, names, imports = (c.strip() for c in row.strip("|").split("|"))
        for unit in names.replace("`", " ").split():
            units[unit] = layer
        may[layer] = {w.strip() for w in imports.split(",")}
    return units, may


def unit_of(module: str) -> str:
    parts = module.split(".")
    return "__init__" if len(parts) == 1 else parts[1]


def shournal_imports(source: str, modules: set[str]) -> set[str]:
    """The shournal modules ``source`` imports anywhere (functions and
    TYPE_CHECKING included): ``from p import n`` is ``p.n`` when that is a
    module, else ``p``."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names if a.name.split(".")[0] == "shournal")
        elif isinstance(node, ast.ImportFrom) and node.module and (
                node.module.split(".")[0] == "shournal"):
            for a in node.names:
                sub = f"{node.module}.{a.name}"
                found.add(sub if sub in modules or node.module == "shournal" else node.module)
    return found


def layer_violations(
    graph: dict[str, set[str]], units: dict[str, str], may: dict[str, set[str]]
) -> list[str]:
    """Every import between units that the table does not allow, and every
    unit the table does not place."""
    problems = []
    layers = list(may)
    for src, targets in sorted(graph.items()):
        su = unit_of(src)
        if su not in units:
            problems.append(f"{src}: unit {su!r} is in no layer of docs/design.md")
            continue
        sl = units[su]
        for t in sorted(targets):
            tu = unit_of(t)
            if tu == su:
                continue
            tl = units.get(tu)
            if tl is None:
                problems.append(f"{t}: unit {tu!r} is in no layer of docs/design.md")
                continue
            allowed = may[sl]
            if "every layer above" in allowed:
                allowed = allowed | set(layers[: layers.index(sl)])
            narrow = {a for a in allowed if "." in a}
            ok = tl in allowed and not any(a.split(".")[0] == tl for a in narrow)
            ok = ok or any(t == f"shournal.{a}" or t.startswith(f"shournal.{a}.") for a in narrow)
            if tl == sl:
                ok = True
            if not ok:
                problems.append(f"{src} ({sl}) imports {t} ({tl})")
    return problems


def package_graph() -> dict[str, set[str]]:
    mods = _modules()
    names = set(mods)
    return {name: shournal_imports(path.read_text(), names) - {name} for name, path in mods.items()}


def unit_graph(graph: dict[str, set[str]]) -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for src, targets in graph.items():
        out.setdefault(unit_of(src), set()).update(
            unit_of(t) for t in targets if unit_of(t) != unit_of(src))
    for targets in list(out.values()):
        for t in targets:
            out.setdefault(t, set())
    return out


def test_every_import_follows_the_layers_of_the_design() -> None:
    units, may = layer_table(DESIGN.read_text())
    assert layer_violations(package_graph(), units, may) == []


def test_no_cycle_between_packages_counting_imports_inside_functions() -> None:
    assert cycles(unit_graph(package_graph())) == []


def test_the_layer_rule_catches_an_upward_arrow_and_allows_a_listed_one() -> None:
    """Positive controls, on the real table."""
    units, may = layer_table(DESIGN.read_text())
    assert "shournal.capture.daemon (capture) imports shournal.journal (journal)" in (
        layer_violations({"shournal.capture.daemon": {"shournal.journal"}}, units, may))
    assert layer_violations({"shournal.store.db": {"shournal.capture.record"}}, units, may)
    assert layer_violations({"shournal.reproduce.diff": {"shournal.store.db"}}, units, may)
    assert layer_violations({"shournal.cli.query": {"shournal.store.db"}}, units, may)
    assert layer_violations({"shournal.cli._fast": {"shournal.store.connection"}}, units, may)
    assert layer_violations({"shournal.newthing": set()}, units, may) == [
        "shournal.newthing: unit 'newthing' is in no layer of docs/design.md"]
    assert layer_violations({
        "shournal.reproduce.diff": {"shournal.store.archive", "shournal.journal"},
        "shournal.cli.query": {"shournal.journal", "shournal.provenance.graph"},
        "shournal.capture.listener": {"shournal.store.db", "shournal.record"},
    }, units, may) == []


def test_package_cycles_are_found_through_a_function_level_import() -> None:
    src = {"shournal.a.x": "def f():\n    from shournal.b import y\n",
           "shournal.b.y": "from shournal.a import x\n"}
    mods = set(src)
    graph = {n: shournal_imports(s, mods) for n, s in src.items()}
    assert cycles(unit_graph(graph)) == [["a", "b"]]


def test_the_recorder_loads_no_reader() -> None:
    """`python -X importtime -c "import shournal.capture.daemon"` loads no
    provenance, reproduce, query or report module."""
    out = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", "import shournal.capture.daemon"],
        capture_output=True, text=True, check=True, cwd=REPO,
    ).stderr
    loaded = {line.rsplit("|", 1)[-1].strip() for line in out.splitlines() if "|" in line}
    assert "shournal.capture.daemon" in loaded
    readers = sorted(m for m in loaded if unit_of(m) in ("provenance", "reproduce", "query",
                                                         "report", "journal", "rereso"))
    assert readers == []
