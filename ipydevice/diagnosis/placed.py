"""A part placed on the CPU by the user's own code: the inputs follow it.

``text_encoder.to('cpu')  # too big for the card`` or ``ae.decode.cpu()`` in a cell is
the user saying where that part runs. When the module that failed is such a part (or
inside one), and it is still on the CPU, moving it to the accelerator undoes what the
user did on purpose; what is wrong is the input given to it. Then the target is the
part's device, and the model's parts are not culprits (as for a model whose own code
moves between its parts, :mod:`ipydevice.diagnosis.split`).

Only a statement of its own that moves a module held by a name to the CPU counts (a
``model.to(device)`` says nothing: ``device`` is the user's device for everything), read
from the failed cell and the notebook's earlier cells (latest first, each parsed once).
"""

from __future__ import annotations

import ast
import functools
import linecache
import re
from collections.abc import Mapping
from typing import Any

from ipydevice.code.cells import is_cell_file
from ipydevice.code.statements import chain_path
from ipydevice.collect import probe
from ipydevice.collect.paths import Path
from ipydevice.collect.roots import follow_path
from ipydevice.collect.scan import Entry
from ipydevice.collect.walk import module_children

__all__ = ["placed_part"]

#: Notebook cells read, latest first.
_CELLS = 50
#: Submodules of a placed module looked through for the one that failed.
_SUBMODULES = 2048
_CPU_MOVE = re.compile(r"\.(?:cpu\(\)|to\(\s*(?:device\s*=\s*)?['\"]cpu['\"])")


def placed_part(failing: Any, top: Entry | None, namespace: Mapping[str, Any]) -> tuple[str, str]:
    """``(device, statement)`` when the module whose forward failed (``failing``)
    was put on the CPU by a statement of the user's (see module docstring), else
    ``("", "")``. The statement must be about the model the failing call ran
    (``top``) or a part of it: a layer another model shares, moved back by that
    model's ``.to('cpu')``, was not placed."""
    if failing is None or top is None or _majority(failing) != "cpu":
        return "", ""
    cells = [f for f in list(linecache.cache) if is_cell_file(f)][-_CELLS:]
    for filename in reversed(cells):
        lines = linecache.getlines(filename)
        for path, text in _cpu_moves(filename, sum(map(len, lines))):
            placed = follow_path(path, namespace)
            if placed is not None and _holds(placed, failing) and _holds(top.obj, placed):
                return "cpu", text
    return "", ""


@functools.lru_cache(maxsize=256)
def _cpu_moves(filename: str, size: int) -> tuple[tuple[Path, str], ...]:
    """The module paths a cell moves to the CPU in statements of their own (a cell's
    source never changes; ``size``, its length in characters, tells a name given new
    source)."""
    source = "".join(linecache.getlines(filename))
    if not _CPU_MOVE.search(source):
        return ()
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return ()
    found = []
    for stmt in tree.body:
        call = stmt.value if isinstance(stmt, ast.Expr) else None
        if not isinstance(call, ast.Call) or not isinstance(call.func, ast.Attribute):
            continue
        if not _to_cpu(call):
            continue
        path = chain_path(call.func.value)
        if path is not None and path[0][0] == "name":
            found.append((path, ast.unparse(call)))
    return tuple(found)


def _to_cpu(call: ast.Call) -> bool:
    name = call.func.attr  # type: ignore[attr-defined]
    if name == "cpu":
        return not call.args and not call.keywords
    if name != "to":
        return False
    values = [*call.args[:1], *(k.value for k in call.keywords if k.arg == "device")]
    return any(isinstance(v, ast.Constant) and v.value == "cpu" for v in values)


def _majority(module: Any) -> str:
    """The device most of ``module``'s tensors (its own and its submodules', a
    bounded walk) are on; ``""`` when it has none."""
    counts: dict[str, int] = {}
    queue, seen = [module], 0
    while queue and seen < _SUBMODULES:
        for _, child in module_children(queue.pop(), _SUBMODULES):
            seen += 1
            if probe.is_module(child):
                queue.append(child)
            elif probe.is_tensor(child):
                device = probe.placement(child)[0]
                counts[device] = counts.get(device, 0) + 1
    return max(counts, key=counts.__getitem__) if counts else ""


def _holds(placed: Any, failing: Any) -> bool:
    """``failing`` is ``placed`` or one of its submodules (a bounded walk)."""
    if placed is failing:
        return True
    if not probe.is_module(placed):
        return False
    queue, seen = [placed], 0
    while queue and seen < _SUBMODULES:
        for _, child in module_children(queue.pop(), _SUBMODULES):
            seen += 1
            if child is failing:
                return True
            if probe.is_module(child):
                queue.append(child)
    return False
