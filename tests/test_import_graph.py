"""The shape of the house, checked from the sources: who may import whom.

The graph is built with :mod:`ast` from every file under core/, gui/ and resources/, named as installed (core/x.py is
memlens.x, gui/x.py is memlens.gui.x, a package's ``__init__.py`` is the package). Every runtime import counts, at
module level or inside a function; imports under ``if TYPE_CHECKING:`` do not, since they never run. An edge goes to
the module named, not to the packages above it: importing memlens.models also runs memlens/__init__.py, but every
module would then depend on everything the package re-exports, and the graph would say nothing.

Three rules: no import cycle anywhere; only memlens.gui touches memlens.gui or Qt; the pure rule modules (text,
decay, supersede, episodes, extract, redact, models, rules.*) reach nothing of the storage layer, directly or
through other modules.
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from dataclasses import dataclass
from functools import cache
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
#: Source folder -> installed package name (pyproject's package-dir).
SOURCES = {"core": "memlens", "gui": "memlens.gui", "resources": "memlens.resources"}

QT_PACKAGES = ("PySide6", "shiboken6")
#: Modules that are rules over values: they must be usable, and testable, without a database.
PURE_MODULES = (
    "memlens.text",
    "memlens.decay",
    "memlens.supersede",
    "memlens.episodes",
    "memlens.extract",
    "memlens.redact",
    "memlens.models",
)
PURE_PREFIXES = ("memlens.rules",)
STORAGE_MODULES = ("memlens.db", "memlens.schema", "memlens.storage", "memlens.store")


@dataclass(frozen=True)
class Import:
    """One runtime import statement's effect: ``source`` imports ``target`` at ``path``:``line``."""

    source: str
    target: str
    path: str
    line: int

    def __str__(self) -> str:
        return f"{self.source} -> {self.target}  ({self.path}:{self.line})"


def module_files() -> dict[str, Path]:
    """Installed module name -> source file, for every module of the project."""
    modules: dict[str, Path] = {}
    for folder, package in SOURCES.items():
        for path in sorted((ROOT / folder).rglob("*.py")):
            parts = path.relative_to(ROOT / folder).with_suffix("").parts
            if parts[-1] == "__init__":
                parts = parts[:-1]
            modules[".".join((package, *parts))] = path
    return modules


def _is_type_checking(test: ast.expr) -> bool:
    return (isinstance(test, ast.Name) and test.id == "TYPE_CHECKING") or (
        isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"
    )


def _runtime_imports(node: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    """Every import statement under ``node`` that can run, skipping the bodies of ``if TYPE_CHECKING:``."""
    for child in ast.iter_child_nodes(node):
        if isinstance(child, ast.Import | ast.ImportFrom):
            yield child
        elif isinstance(child, ast.If) and _is_type_checking(child.test):
            for other in child.orelse:
                if isinstance(other, ast.Import | ast.ImportFrom):
                    yield other
                else:
                    yield from _runtime_imports(other)
        else:
            yield from _runtime_imports(child)


def _known(name: str, modules: dict[str, Path]) -> str:
    """``name`` if it is a module of ours, else its longest prefix that is (``memlens`` at worst)."""
    while name not in modules and "." in name:
        name = name.rsplit(".", 1)[0]
    return name


def _targets(stmt: ast.Import | ast.ImportFrom, module: str, is_package: bool, modules: dict[str, Path]) -> Iterator[str]:
    """The modules an import statement loads, as absolute names; ours resolved to a real module, others as given."""
    if isinstance(stmt, ast.Import):
        for alias in stmt.names:
            yield _known(alias.name, modules) if alias.name.split(".")[0] == "memlens" else alias.name
        return
    if stmt.level:
        package = module if is_package else module.rsplit(".", 1)[0]
        for _ in range(stmt.level - 1):
            package = package.rsplit(".", 1)[0]
        base = f"{package}.{stmt.module}" if stmt.module else package
    else:
        base = stmt.module or ""
    if base.split(".")[0] != "memlens":
        yield base
        return
    # `from memlens import db` imports the submodule memlens.db; `from memlens import MemoryStore` imports memlens.
    for alias in stmt.names:
        submodule = f"{base}.{alias.name}"
        yield submodule if submodule in modules else _known(base, modules)


@cache
def import_graph() -> tuple[dict[str, list[Import]], dict[str, list[Import]]]:
    """(imports of our own modules, imports of anything else) for every module, each edge once per line."""
    modules = module_files()
    internal: dict[str, list[Import]] = {name: [] for name in modules}
    external: dict[str, list[Import]] = {name: [] for name in modules}
    for name, path in modules.items():
        tree = ast.parse(path.read_text(encoding="utf-8"), filename=str(path))
        rel = str(path.relative_to(ROOT))
        for stmt in _runtime_imports(tree):
            for target in _targets(stmt, name, path.name == "__init__.py", modules):
                edge = Import(name, target, rel, stmt.lineno)
                if target in modules:
                    if target != name and edge not in internal[name]:
                        internal[name].append(edge)
                else:
                    external[name].append(edge)
    return internal, external


def strongly_connected(graph: dict[str, list[Import]]) -> list[list[str]]:
    """The graph's strongly connected components (Tarjan), each sorted; iterative, so depth is no limit."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    components: list[list[str]] = []
    for root in graph:
        if root in index:
            continue
        work: list[tuple[str, Iterator[Import]]] = [(root, iter(graph[root]))]
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        while work:
            node, edges = work[-1]
            for edge in edges:
                nxt = edge.target
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(graph[nxt])))
                    break
                if nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
            else:
                work.pop()
                if work:
                    parent = work[-1][0]
                    low[parent] = min(low[parent], low[node])
                if low[node] == index[node]:
                    component = []
                    while True:
                        member = stack.pop()
                        on_stack.discard(member)
                        component.append(member)
                        if member == node:
                            break
                    components.append(sorted(component))
    return components


def import_cycles() -> list[tuple[list[str], list[Import]]]:
    """Each group of modules that import one another in a circle, with the imports that close it."""
    internal, _ = import_graph()
    cycles = []
    for component in strongly_connected(internal):
        if len(component) > 1:
            members = set(component)
            cycles.append((component, [e for m in component for e in internal[m] if e.target in members]))
    return sorted(cycles)


def _reaching(start: str, forbidden: tuple[str, ...]) -> list[Import] | None:
    """The shortest import chain from ``start`` to a module in (or under) ``forbidden``, or None."""
    internal, _ = import_graph()
    seen = {start}
    frontier: list[list[Import]] = [[e] for e in internal[start]]
    while frontier:
        following: list[list[Import]] = []
        for chain in frontier:
            target = chain[-1].target
            if any(target == f or target.startswith(f + ".") for f in forbidden):
                return chain
            if target in seen:
                continue
            seen.add(target)
            following.extend([*chain, e] for e in internal[target])
        frontier = following
    return None


def _in_gui(module: str) -> bool:
    return module == "memlens.gui" or module.startswith("memlens.gui.")


def test_graph_sees_the_project():
    internal, external = import_graph()
    assert {"memlens", "memlens.store", "memlens.io", "memlens.gui", "memlens.gui.main_window"} <= set(internal)
    assert any(e.target == "memlens.gui.qt" for edges in internal.values() for e in edges)
    assert any(e.target.startswith("PySide6") for edges in external.values() for e in edges)


def test_resolution_rules(tmp_path):
    modules = {"memlens": Path(), "memlens.db": Path(), "memlens.io": Path(), "memlens.io.jsonl": Path()}

    def targets(source: str, module: str, is_package: bool = False) -> list[str]:
        (stmt,) = list(_runtime_imports(ast.parse(source)))
        return list(_targets(stmt, module, is_package, modules))

    assert targets("from memlens import db", "memlens.x") == ["memlens.db"]
    assert targets("from memlens import MemoryStore", "memlens.x") == ["memlens"]
    assert targets("from memlens.io import jsonl, MemoryRecord", "memlens.x") == ["memlens.io.jsonl", "memlens.io"]
    assert targets("import memlens.io.jsonl as j", "memlens.x") == ["memlens.io.jsonl"]
    assert targets("from . import jsonl", "memlens.io", is_package=True) == ["memlens.io.jsonl"]
    assert targets("from .. import db", "memlens.io.jsonl") == ["memlens.db"]
    assert targets("from .jsonl import load", "memlens.io.agentmemory") == ["memlens.io.jsonl"]
    assert targets("import json", "memlens.x") == ["json"]
    hidden = "from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    import memlens.db\nelse:\n    import memlens.io\n"
    assert [s.lineno for s in _runtime_imports(ast.parse(hidden))] == [1, 5]
    inner = "def f():\n    if True:\n        from memlens import db\n"
    assert [s.lineno for s in _runtime_imports(ast.parse(inner))] == [3]


def test_no_import_cycles():
    cycles = import_cycles()
    report = "\n\n".join(
        f"cycle of {len(members)} modules: {', '.join(members)}\n" + "\n".join(f"  {e}" for e in edges) for members, edges in cycles
    )
    assert not cycles, "modules that import one another in a circle:\n\n" + report


def test_only_the_gui_imports_the_gui_or_qt():
    internal, external = import_graph()
    wrong = [e for m, edges in internal.items() if not _in_gui(m) for e in edges if _in_gui(e.target)]
    wrong += [e for m, edges in external.items() if not _in_gui(m) for e in edges if e.target.split(".")[0] in QT_PACKAGES]
    assert not wrong, "outside memlens.gui:\n" + "\n".join(f"  {e}" for e in wrong)


def test_pure_modules_stay_off_the_storage_layer():
    internal, _ = import_graph()
    pure = [m for m in internal if m in PURE_MODULES or any(m == p or m.startswith(p + ".") for p in PURE_PREFIXES)]
    assert set(PURE_MODULES) <= set(pure)
    reached = {m: chain for m in pure if (chain := _reaching(m, STORAGE_MODULES)) is not None}
    assert not reached, "pure modules that reach the storage layer:\n" + "\n".join(
        f"  {m}:\n" + "\n".join(f"    {e}" for e in chain) for m, chain in reached.items()
    )
