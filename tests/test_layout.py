"""The package's shape: no import cycle, no giant module, each family in one place.

Read with ``ast`` (nothing is imported), so the checks cost milliseconds and see
imports inside functions too: a function-level import still ties two modules.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "ipydevice"

#: The longest a module may be.
MAX_LINES = 600


#: Being split below the limit by its own change; nothing else may pass it.
def _modules() -> dict[str, Path]:
    out = {}
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
        if parts[-1] == "__init__":
            parts.pop()
        out[".".join(parts)] = path
    return out


def _imports(name: str, path: Path, modules: dict[str, Path]) -> set[str]:
    """The package modules ``name`` imports anywhere in its body."""
    package = name if path.name == "__init__.py" else name.rpartition(".")[0]
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(a.name for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                anchor = package.split(".")[: len(package.split(".")) - node.level + 1]
                base = ".".join([*anchor, base] if base else anchor)
            for alias in node.names:
                sub = f"{base}.{alias.name}"
                found.add(sub if sub in modules else base)
    return {m for m in found if m in modules and m != name}


def _graph() -> dict[str, set[str]]:
    modules = _modules()
    return {name: _imports(name, path, modules) for name, path in modules.items()}


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components of more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    out: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(graph[node]):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = []
            while True:
                item = stack.pop()
                on_stack.discard(item)
                component.append(item)
                if item == node:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return out


def test_no_import_cycle() -> None:
    graph = _graph()
    assert len(graph) > 20  # the walk found the package
    assert _cycles(graph) == []


def test_the_cycle_check_sees_function_level_imports() -> None:
    graph = {"a": {"b"}, "b": {"a"}, "c": set()}
    assert _cycles(graph) == [["a", "b"]]
    # model.py reaches the renderers only through the views they register
    assert not _graph()["ipydevice.model"]


@pytest.mark.parametrize("name", sorted(_modules()))
def test_no_module_over_the_limit(name: str) -> None:
    path = _modules()[name]
    relative = path.relative_to(PACKAGE).as_posix()
    lines = len(path.read_text(encoding="utf-8").splitlines())
    assert lines <= MAX_LINES, f"{relative} has {lines} lines"


def _folder_edges(graph: dict[str, set[str]]) -> dict[tuple[str, str], tuple[str, str]]:
    """``(folder, folder) -> (module, module)``: one import for each pair of the package's
    folders (its stages: ``collect``, ``diagnosis``...) that one makes of the other. A
    folder's subfolders are its rooms (``collect/holders``); its top-level modules
    (``model``, ``wording``, ``registry``...) are not folders."""

    def folder(module: str) -> str:
        parts = module.split(".")
        return parts[1] if len(parts) > 2 or (PACKAGE / parts[-1]).is_dir() else ""

    edges: dict[tuple[str, str], tuple[str, str]] = {}
    for name, imported in graph.items():
        for other in imported:
            pair = (folder(name), folder(other))
            if all(pair) and pair[0] != pair[1]:
                edges.setdefault(pair, (name, other))
    return edges


def test_no_pair_of_folders_imports_each_other() -> None:
    """The stages are layers: each imports only what lies below it (every import
    counted, also inside functions)."""
    edges = _folder_edges(_graph())
    assert ("diagnosis", "collect") in edges  # the walk sees the stages
    both = {tuple(sorted(p)) for p in edges if (p[1], p[0]) in edges}
    assert not both, {p: (edges[p], edges[p[::-1]]) for p in both}


def test_the_folder_check_sees_a_pair() -> None:
    graph = {"ipydevice.collect.a": {"ipydevice.fixes.b"}, "ipydevice.fixes.b": set()}
    graph["ipydevice.fixes.c"] = {"ipydevice.collect.a"}
    assert set(_folder_edges(graph)) == {("collect", "fixes"), ("fixes", "collect")}
