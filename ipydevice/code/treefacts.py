"""What fix planning reads of a parsed cell or script, read once per tree.

The trees come from :func:`ipydevice.code.statements.file_tree` (a text is parsed
once, whoever asks, in a bounded cache). A cell that defines a model is thousands
of nodes: the names it reads in source order, its loops and its functions (by the
line their code starts at, with the names each binds) are found in one walk, the
first time a diagnosis asks, and kept beside the tree for as long as the tree
lives (weakly: a tree dropped from the parse cache takes its facts with it).
Trees hold no user objects; nothing here does either.
"""

from __future__ import annotations

import ast
import bisect
import threading
import weakref
from dataclasses import dataclass, field

__all__ = ["TreeFacts", "tree_facts"]


@dataclass(eq=False)
class TreeFacts:
    """One tree's names, loops and functions. Read only: the tree is shared."""

    #: The names the tree reads (``Load``), by position (line, then column).
    loads: list[str] = field(default_factory=list)
    #: The line of each of :attr:`loads`, for :meth:`loads_from`.
    load_lines: list[int] = field(default_factory=list)
    #: ``for`` and ``async for`` statements, in ``ast.walk`` order.
    loops: list[ast.For | ast.AsyncFor] = field(default_factory=list)
    #: Functions by the line their code object starts at (the first decorator's).
    functions: dict[int, ast.FunctionDef | ast.AsyncFunctionDef] = field(default_factory=dict)
    _bound: dict[int, frozenset[str]] = field(default_factory=dict)

    def loads_from(self, lineno: int) -> list[str]:
        """The names read at line ``lineno`` or after, by position."""
        return self.loads[bisect.bisect_left(self.load_lines, lineno) :]

    def function_bound(self, function: ast.FunctionDef | ast.AsyncFunctionDef) -> frozenset[str]:
        """The names ``function`` binds: its arguments, what it assigns or deletes
        (nested functions' included, as one walk of it sees them)."""
        found = self._bound.get(id(function))
        if found is None:
            names = set()
            for node in ast.walk(function):
                if isinstance(node, ast.arg):
                    names.add(node.arg)
                elif isinstance(node, ast.Name) and isinstance(node.ctx, (ast.Store, ast.Del)):
                    names.add(node.id)
            found = self._bound[id(function)] = frozenset(names)
        return found


_FACTS: weakref.WeakKeyDictionary[ast.AST, TreeFacts] = weakref.WeakKeyDictionary()
_LOCK = threading.Lock()


def tree_facts(tree: ast.AST) -> TreeFacts:
    """The facts of ``tree``, found in one walk the first time."""
    with _LOCK:
        found = _FACTS.get(tree)
    if found is not None:
        return found
    found = _read(tree)
    with _LOCK:
        _FACTS[tree] = found
    return found


def _read(tree: ast.AST) -> TreeFacts:
    facts = TreeFacts()
    loads: list[ast.Name] = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Name):
            if isinstance(node.ctx, ast.Load):
                loads.append(node)
        elif isinstance(node, (ast.For, ast.AsyncFor)):
            facts.loops.append(node)
        elif isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            first = min([node.lineno, *(d.lineno for d in node.decorator_list)])
            facts.functions.setdefault(first, node)
    loads.sort(key=lambda n: (n.lineno, n.col_offset))  # stable: walk order within a place
    facts.loads = [n.id for n in loads]
    facts.load_lines = [n.lineno for n in loads]
    return facts
