"""The package layout's one rule that protects every command line: the
modules under shournal/capture/ run while a command is recorded, so they
import only the standard library, each other and the store (with the few
stdlib-only settings and data modules at the top of the package)."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
CAPTURE = REPO / "shournal" / "capture"

# Outside shournal.capture.* and shournal.store.*: the data types, the
# journal's front door (which URL; it opens the store), the settings
# (config.toml, install paths), the escaping of text for a terminal, and
# the apparatus recorder's hook (shournal.reproduce itself, not its
# submodules: those load only for a command recorded with its apparatus).
ALLOWED_SHOURNAL = {
    "shournal.data",
    "shournal.journal",
    "shournal.config",
    "shournal._paths",
    "shournal.terminal",
    "shournal.reproduce",
    # the secret rules, at the bottom (the standard library only): the
    # command line and the archived scripts are redacted on the way in
    "shournal.redact",
}
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


CAPTURE_MODULES = sorted(CAPTURE.glob("*.py"))


def test_the_capture_modules_are_found() -> None:
    assert {"listener.py", "daemon.py", "protocol.py"} <= {p.name for p in CAPTURE_MODULES}


@pytest.mark.parametrize("path", CAPTURE_MODULES, ids=lambda p: p.name)
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
