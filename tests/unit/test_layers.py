"""The package's import graph: no cycles, no module importing a higher layer.

Layers, lowest first: errors / limits / names, format, io, store, spark, then
commands and the ``rmq`` entry point (cli) on top.  Every import counts, also
the ones inside functions (a lazy import is still a dependency).
"""

from __future__ import annotations

import ast
import pathlib

import pytest

pytestmark = pytest.mark.unit

PACKAGE = pathlib.Path(__file__).resolve().parents[2] / "rmqsource"

# Rank of each layer: a module may import its own rank and lower ones only.
RANKS = {
    "errors": 0, "limits": 0, "names": 0,
    "format": 1,
    "io": 2,
    "store": 3, "sample": 3,
    "spark": 4,
    "commands": 5, "demo": 5,
    "cli": 6,
    "__main__": 7,
}


def _modules() -> dict[str, pathlib.Path]:
    mods = {}
    for path in PACKAGE.rglob("*.py"):
        parts = ("rmqsource",) + path.relative_to(PACKAGE).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        mods[".".join(parts)] = path
    return mods


def _known(name: str, mods) -> str | None:
    while name and name not in mods:
        name = name.rpartition(".")[0]
    return name or None


def import_graph() -> dict[str, set[str]]:
    """Module -> the package modules it imports (``from pkg import sub`` counts as pkg.sub)."""
    mods = _modules()
    graph: dict[str, set[str]] = {}
    for mod, path in mods.items():
        package = mod.split(".") if path.name == "__init__.py" else mod.split(".")[:-1]
        deps: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
            names: list[str] = []
            if isinstance(node, ast.Import):
                names = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                if node.level:
                    base = ".".join(package[:len(package) - node.level + 1])
                    target = f"{base}.{node.module}" if node.module else base
                else:
                    target = node.module or ""
                names = [f"{target}.{a.name}" if f"{target}.{a.name}" in mods else target for a in node.names]
            for name in names:
                if name == "rmqsource" or name.startswith("rmqsource."):
                    dep = _known(name, mods)
                    if dep is not None and dep != mod:
                        deps.add(dep)
        graph[mod] = deps
    return graph


def layer_rank(mod: str) -> int:
    parts = mod.split(".")
    if len(parts) == 1:
        return -1                      # the package itself (rmqsource/__init__.py)
    return RANKS[parts[1]]


def cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []
    counter = [0]

    def visit(v: str) -> None:
        index[v] = low[v] = counter[0]
        counter[0] += 1
        stack.append(v)
        on_stack.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                found.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return found


def test_every_module_has_a_layer():
    unknown = sorted(m for m in import_graph() if len(m.split(".")) > 1 and m.split(".")[1] not in RANKS)
    assert not unknown, f"modules outside every layer (add them to RANKS): {unknown}"


def test_no_import_cycles():
    found = cycles(import_graph())
    assert not found, "import cycles: " + "; ".join(" <-> ".join(c) for c in found)


def test_no_upward_imports():
    upward = sorted(f"{m} imports {d}" for m, deps in import_graph().items() for d in deps
                    if layer_rank(d) > layer_rank(m))
    assert not upward, "imports of a higher layer:\n  " + "\n  ".join(upward)


def test_nothing_imports_the_entry_point():
    importers = sorted(m for m, deps in import_graph().items() if "rmqsource.cli" in deps)
    assert importers == ["rmqsource.__main__"], importers
