"""What the failing operation took as the argument its message names.

"got index is on cpu, different from other tensors on cuda:0 (... gather)", "weight is
on cpu ... nll_loss_forward": the message names the argument that met the other
device. The object passed as that argument is the first culprit, before another
misplaced tensor near the failing line. It is found, by identity:

* in the frames on the stack, as their parameter of that name (``weight`` of
  ``cross_entropy``, however the user's code passed it: a loss module's buffer, a
  keyword, a metric's criterion);
* on the failing lines of the user's frames, passed by that keyword, or by position to
  a function whose parameter it is (read from its code object);
* for an index (``index``, ``indices``), as the index of an indexing on those lines
  (``torch.gather(x, 1, idx)``, ``t.index_add_(0, idx, src)``, ``table[idx]``).
"""

from __future__ import annotations

import ast
from collections.abc import Sequence
from typing import Any

from ipydevice.code.flow import cpu_arguments, indexing_operands
from ipydevice.collect import probe
from ipydevice.collect.frames import FrameView, failing_statement, frame_tree, safe_value
from ipydevice.diagnosis.demands import positional_names
from ipydevice.family import MessageFacts

__all__ = ["kept_on_cpu", "loaders_data", "named_operands"]

_INDEX_ARGUMENTS = ("index", "indices")


def named_operands(facts: MessageFacts, views: Sequence[FrameView]) -> set[int]:
    """Ids of the tensors the failing operation took as ``facts.argument``."""
    argument = facts.argument
    if not argument:
        return set()
    found: set[int] = set()
    for view in reversed(views):
        for name, value in view.arguments():
            if name == argument and probe.is_tensor(value):
                found.add(id(value))
        if not view.is_user:
            continue
        stmt = failing_statement(view)
        if stmt is None:
            continue
        for node in _passed(stmt[0], argument, view):
            ok, value = safe_value(node, view.frame)
            if ok and probe.is_tensor(value):
                found.add(id(value))
    return found


def _passed(stmt: ast.stmt, argument: str, view: FrameView) -> list[ast.expr]:
    out: list[ast.expr] = []
    if argument in _INDEX_ARGUMENTS:
        for held, indices, _ in indexing_operands(stmt):
            ok, value = safe_value(held, view.frame)
            if ok and probe.is_tensor(value):
                out.extend(indices)
    for node in ast.walk(stmt):
        if not isinstance(node, ast.Call):
            continue
        out.extend(k.value for k in node.keywords if k.arg == argument)
        names = positional_names(node.func, view)
        out.extend(
            arg
            for position, arg in enumerate(node.args[: len(names)])
            if names[position] == argument and not isinstance(arg, ast.Starred)
        )
    return out


def kept_on_cpu(views: Sequence[FrameView]) -> set[int]:
    """Ids of the tensors that the functions on the stack (the user's and the
    libraries') pass where a call wants them on the CPU (``lengths`` of
    ``pack_padded_sequence``, a layer's saved RNG state): never culprits to move to an
    accelerator, whatever else is there."""
    found: set[int] = set()
    for view in views:
        parsed = frame_tree(view)
        for text in cpu_arguments(parsed[0]) if parsed is not None else ():
            try:
                node = ast.parse(text, mode="eval").body
            except SyntaxError:
                continue
            ok, value = safe_value(node, view.frame)
            if ok and probe.is_tensor(value):
                found.add(id(value))
    return found


def loaders_data(entries: Sequence[Any]) -> set[int]:
    """Ids of the tensors ``entries`` reached through a ``DataLoader`` (its dataset's
    ``tensors``, a sampler's state): data a loader serves from the CPU by design, its
    batches moved by the code that runs them, never culprits to move wholesale."""
    torch = probe.torch_module()
    loader = getattr(getattr(getattr(torch, "utils", None), "data", None), "DataLoader", None)
    if loader is None:
        return set()
    found: set[int] = set()
    for entry in entries:
        node, steps = entry.owner, 0
        while node is not None and steps < 16:
            if probe.is_a(node.obj, loader):
                found.add(id(entry.obj))
                break
            node, steps = node.owner, steps + 1
    return found
